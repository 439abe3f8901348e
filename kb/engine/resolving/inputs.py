"""A resolved workload's inputs: the names rules/formulas.yaml `inputs` lists, with their values.

In: a Resolved workload (kb.engine.resolving.scope.resolve_workload) and the Knowledge. Out: base_scope, the scope
every formula is evaluated in before the GPU, its count and the parallel layout are added: the
workload's fields, the constants, the formats' widths and the model's and runtime's figures.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kb.engine.resolving import training as tr
from kb.engine.resolving.bare_size import size_inputs
from kb.engine.resolving.scope import fp8_block_scaled
from kb.engine.evaluate import Scope
from kb.engine.resolving.speculative import spec_inputs
from kb.knowledge.data import Knowledge
from kb.knowledge.gpu_names import gemm_of
from kb.query.workload import Workload
from kb.knowledge import names as N

if TYPE_CHECKING:

    from kb.engine.resolving.scope import Resolved
    from kb.knowledge.records import Model, Runtime

STACK_VENDORS = ("nvidia", "amd", "intel", "apple", "google", "aws")   # formulas.yaml stack.<vendor>


def base_scope(r: Resolved, kn: Knowledge) -> Scope:
    w, m = r.workload, r.model
    training = set(kn.query["training_tasks"])
    scope: Scope = dict(kn.derived.constants)
    scope.update(size_inputs(m))
    scope.update({
        N.USERS: w.users, N.BATCH: w.batch, N.CONTEXT_TOKENS: w.context_tokens,
        N.PROMPT_TOKENS: w.prompt_tokens, N.OUTPUT_TOKENS: w.output_tokens,
        N.SEQ_LEN: w.seq_len, N.LORA_RANK: w.lora_rank, N.TRAIN_TOKENS: w.train_tokens,
        N.IS_TRAINING: w.task in training, N.IS_INFERENCE: w.task not in training,
        N.IS_FULL_FT: w.task == "full_ft", N.IS_LORA: w.task == "lora",
        N.IS_QLORA: w.task == "qlora", N.IS_PRETRAIN: w.task == "pretrain",
        N.IS_PREFILL_ONLY: w.task == "prefill",
        N.CHECKPOINTING: bool(w.checkpointing), N.FLASH_ATTENTION: bool(w.flash_attention),
        N.OFFLOAD: bool(w.offload), N.PAGED: bool(w.paged),
        N.HOST_MEMORY_GB: w.host_memory_gb or 0.0, N.HOST_MEMORY_KIND: w.host_memory_kind or "any",
        N.HOST_CHANNELS: w.host_channels or 0,
        N.CHECKPOINT_OFFLOAD: bool(w.checkpoint_offload),
        **offload_count(w),
        **tr.scope_values(w, kn),
        N.OPTIMIZER_IN_BACKWARD: bool(w.optimizer_in_backward),
        N.LORA_ATTENTION_ONLY: bool(w.lora_attention_only),
        N.QUANTIZED_INPUTS_KEPT: bool(w.quantized_inputs_kept),
        N.OPTIMIZER: w.optimizer, N.PRECISION: w.precision, N.TASK: w.task,
        N.GPU_NAMED: bool(w.gpus),
        N.DP_ATTENTION: bool(w.dp_attention),
        N.FP8_BLOCK_SCALES: fp8_block_scaled(w, m),
        N.SPEED_FLOOR_TOK_S: w.speed_floor_tok_s or kn.constants[N.DECODE_SPEED_FLOOR_TOK_S]["value"],
        N.WEIGHT_BYTES_PER_PARAM: r.precision["bits_per_weight"] / 8,
        N.KV_BYTES_PER_VALUE: r.kv_precision["bits_per_weight"] / 8,
    })
    scope.update(_model_fields(m))
    scope.update({
        N.GPU_CANDIDATES: None, N.FITTING_GPUS: None, N.FEWEST_GPUS_NEEDED: None,
        N.PRECISION_KIND: r.precision["kind"],
        N.PRECISION_EXPERTS_ONLY: bool(r.precision.get("experts_only")),
        N.PRECISION_OTHERS_BITS: r.precision.get("others_bits") or 0,
    })
    scope.update(_layer_kinds(m))
    rt = r.runtime
    scope.update(_runtime_fields(rt))
    scope[N.PRECISION_QUANTIZES_EMBEDDINGS] = r.precision.get("quantizes_embeddings", True)
    supported = stack_platforms(rt, str(w.task))
    scope.update({f"stack.{v}": v in supported for v in STACK_VENDORS})
    scope.update(target_inputs(w))
    scope.update(spec_inputs(w, kn))
    return scope


def _model_fields(m: Model) -> Scope:
    """The names base_scope gives of a model's architecture (its size apart: size_inputs)."""
    sliding = m.get("sliding_window") or 0
    mla, moe = m.get("mla"), m.get("moe")
    return {
        N.MODEL_ID: m["id"], N.MODEL_LAYERS: m["layers"], N.MODEL_HIDDEN_SIZE: m["hidden_size"],
        N.MODEL_INTERMEDIATE_SIZE: m["intermediate_size"],
        N.MODEL_ATTENTION_HEADS: m["attention_heads"], N.MODEL_KV_HEADS: m["kv_heads"],
        N.MODEL_HEAD_DIM: m["head_dim"], N.MODEL_VOCAB_SIZE: m["vocab_size"],
        N.MODEL_ATTENTION: m["attention"], N.MODEL_SLIDING_WINDOW: sliding,
        N.MODEL_SLIDING_WINDOW_LAYERS: (m.get("sliding_window_layers") if m.get("sliding_window_layers") is not None else m["layers"]) if sliding else 0,
        N.MODEL_KV_LORA_RANK: mla["kv_lora_rank"] if mla else 0,
        N.MODEL_QK_ROPE_HEAD_DIM: mla["qk_rope_head_dim"] if mla else 0,
        N.MODEL_EXPERTS: moe["experts"] if moe else 1,
        N.MODEL_EXPERTS_PER_TOKEN: moe["experts_per_token"] if moe else 1,
        N.MODEL_SHARED_EXPERTS: moe.get("shared_experts", 0) if moe else 0,
        N.MODEL_TIE_EMBEDDINGS: bool(m.get("tie_embeddings")),
        N.MODEL_GATED_MLP: m.get("mlp", "gated") == "gated",
    }


def _runtime_fields(rt: Runtime) -> Scope:
    """The names base_scope gives of a runtime."""
    return {
        N.RUNTIME_DECODE_BANDWIDTH_EFFICIENCY: rt.get("decode_bandwidth_efficiency"),
        N.RUNTIME_QUANT_KERNEL_EFFICIENCY: rt.get("quant_kernel_efficiency"),
        N.RUNTIME_HBM_DECODE_EFFICIENCY: rt.get("hbm_decode_efficiency", 1.0),
        N.RUNTIME_MOE_EXPERT_KERNEL_S: rt.get("moe_expert_kernel_s", 0.0),
        N.RUNTIME_MOE_LAYER_KERNEL_S: rt.get("moe_layer_kernel_s", 0.0),
        # a runtime calibrated on no pre-Hopper MoE point uses its one figure there
        N.RUNTIME_FALLBACK_MOE_LAYER_KERNEL_S: (rt.get("fallback_moe_layer_kernel_s")
                                                  if rt.get("fallback_moe_layer_kernel_s") is not None
                                                  else rt.get("moe_layer_kernel_s", 0.0)),
        N.RUNTIME_MLA_LAYER_KERNEL_S: rt.get("mla_layer_kernel_s", 0.0),
        N.RUNTIME_DECODE_STEP_OVERHEAD_S: rt.get("decode_step_overhead_s"),
        N.RUNTIME_PREFILL_COMPUTE_EFFICIENCY: rt.get("prefill_compute_efficiency"),
        # a runtime calibrated on no Apple or Hopper point uses its own prefill efficiency there
        N.RUNTIME_APPLE_PREFILL_COMPUTE_EFFICIENCY: (rt.get("apple_prefill_compute_efficiency")
                                                      or rt.get("prefill_compute_efficiency")),
        N.RUNTIME_APPLE_DECODE_STEP_OVERHEAD_S: (rt.get("apple_decode_step_overhead_s")
                                                 if rt.get("apple_decode_step_overhead_s") is not None
                                                 else rt.get("decode_step_overhead_s")),
        # a runtime calibrated on no AMD point uses its own decode figures there
        N.RUNTIME_AMD_DECODE_BANDWIDTH_EFFICIENCY: (rt.get("amd_decode_bandwidth_efficiency")
                                                    or rt.get("decode_bandwidth_efficiency")),
        N.RUNTIME_AMD_DECODE_STEP_OVERHEAD_S: (rt.get("amd_decode_step_overhead_s")
                                               if rt.get("amd_decode_step_overhead_s") is not None
                                               else rt.get("decode_step_overhead_s")),
        # 0: the runtime keeps the 16-bit weights of an experts-only checkpoint 16-bit
        N.RUNTIME_EXPERTS_ONLY_REST_BITS: rt.get("experts_only_rest_bits") or 0.0,
        N.RUNTIME_HOPPER_WARPGROUP_MMA: rt.get("hopper_warpgroup_mma", True),
        N.RUNTIME_BLACKWELL_MX_EXPERTS: bool(rt.get("blackwell_mx_experts")),
        "_gemm": gemm_of(rt),
        N.RUNTIME_MEMORY_UTILIZATION: rt.get("memory_utilization", 1.0),
        N.RUNTIME_OVERHEAD_GB: rt.get(N.OVERHEAD_GB),
        N.RUNTIME_TRAINING_MFU: rt.get(N.TRAINING_MFU),
        N.RUNTIME_TENSOR_PARALLEL: rt.get("multi_gpu") == "tensor_parallel",
        N.RUNTIME_LOGITS_MEMORY_FRACTION: rt.get("logits_memory_fraction", 1.0),
        N.RUNTIME_MASTER_WEIGHTS: rt.get("master_weights", True),
        N.RUNTIME_LORA_DROPOUT: rt.get("lora_dropout", 0.0),
        N.RUNTIME_QUANTIZES_OUTPUT_HEAD: bool(rt.get("quantizes_output_head")),
        N.RUNTIME_FSDP_ROOT_EMBEDDINGS: bool(rt.get("fsdp_root_embeddings")),
    }


def stack_platforms(rt: Runtime, task: str) -> list[str]:
    """The platforms the runtime supports a task on well (runtimes.yaml well_supported), else
    every platform it runs on."""
    well = rt.get("well_supported") or {}
    return list(well.get(task) or well.get("default") or rt["platforms"])


def _global_attention(m: Model, attention_layers: int) -> Scope:
    """The full-attention layers that have their own KV geometry (Gemma 4's global layers), and
    that geometry; none for a model whose attention layers are all alike."""
    ga = m.get("global_attention")
    if not ga:
        return {N.MODEL_GLOBAL_LAYERS: 0, N.MODEL_GLOBAL_KV_HEADS: 0, N.MODEL_GLOBAL_HEAD_DIM: 0,
                N.MODEL_GLOBAL_SHARED_KV: False}
    sliding = (m.get("sliding_window_layers") or 0) if m.get("sliding_window") else 0
    return {N.MODEL_GLOBAL_LAYERS: attention_layers - sliding, N.MODEL_GLOBAL_KV_HEADS: ga["kv_heads"],
            N.MODEL_GLOBAL_HEAD_DIM: ga["head_dim"], N.MODEL_GLOBAL_SHARED_KV: bool(ga.get("shared_kv"))}


def _compressed_attention(m: Model) -> Scope:
    """DeepSeek V4's compressed attention (models.yaml compressed_attention): the low-rank query
    and output widths and the layers that keep pooled rows; and a sparse-attention indexer's
    cached key (models.yaml indexer: DeepSeek-V3.2, GLM-5). Zeros for other models."""
    ca = m.get("compressed_attention")
    ix = m.get("indexer")
    return {N.MODEL_COMPRESSED_ATTENTION: bool(ca),
            N.MODEL_CSA_Q_LORA_RANK: ca["q_lora_rank"] if ca else 0,
            N.MODEL_CSA_O_LORA_RANK: ca["o_lora_rank"] if ca else 0,
            N.MODEL_CSA_O_GROUPS: ca["o_groups"] if ca else 0,
            N.MODEL_CSA_SPARSE_LAYERS: ca["sparse_layers"] if ca else 0,
            N.MODEL_CSA_SPARSE_RATIO: ca["sparse_ratio"] if ca else 0,
            N.MODEL_CSA_HEAVY_LAYERS: ca["heavy_layers"] if ca else 0,
            N.MODEL_CSA_HEAVY_RATIO: ca["heavy_ratio"] if ca else 0,
            N.MODEL_CSA_INDEXER_HEAD_DIM: ca["indexer_head_dim"] if ca else 0,
            N.MODEL_INDEXER_HEAD_DIM: ix["head_dim"] if ix else 0,
            N.MODEL_INDEXER_KEY_BITS: (ix.get("key_bits") or 0) if ix else 0,
            N.MODEL_LAYERS_PER_INDEXER: ix.get("layers_per_indexer", 1) if ix else 1}


def _layer_kinds(m: Model) -> Scope:
    """Attention, routed-expert and state (linear-attention / state-space) layers of a model."""
    moe, rec = m.get("moe"), m.get("recurrent")
    attention = m.get("attention_layers")
    moe_layers = (moe.get("moe_layers") or m["layers"]) if moe else 0
    dense_layers = moe.get("dense_layers") if moe else None
    attention_layers = m["layers"] if attention is None else attention
    return {
        **_global_attention(m, attention_layers), **_compressed_attention(m),
        N.MODEL_ATTENTION_LAYERS: attention_layers,
        N.MODEL_MOE_LAYERS: moe_layers,
        N.MODEL_DENSE_FFN_LAYERS: m["layers"] - moe_layers if dense_layers is None else dense_layers,
        N.MODEL_DENSE_INTERMEDIATE_SIZE: (moe and moe.get("dense_intermediate_size")) or m["intermediate_size"],
        N.MODEL_SHARED_INTERMEDIATE_SIZE: ((moe and moe.get("shared_expert_intermediate_size"))
                                           or m["intermediate_size"]),
        N.MODEL_STATE_LAYERS: rec["layers"] if rec else 0,
        N.MODEL_STATE_HEADS: rec["heads"] if rec else 0, N.MODEL_STATE_HEAD_DIM: rec["head_dim"] if rec else 0,
        N.MODEL_STATE_DIM: rec["state_dim"] if rec else 0, N.MODEL_STATE_GROUPS: rec["groups"] if rec else 0,
        N.MODEL_STATE_CONV_KERNEL: rec["conv_kernel"] if rec else 1,
        N.MODEL_MTP_LAYERS: m.get("mtp_layers") or 0,
    }


def offload_count(w: Workload) -> Scope:
    """What llama.cpp's offload flags of the query count (rules/formulas.yaml offload_asked_gb):
    the layers kept on the GPUs (-ngl N), in the host's memory, or whose experts are
    (--n-cpu-moe N), or every expert (--cpu-moe, -ot exps=CPU); 'none' when none is given."""
    for kind, count in (("gpu_layers", w.gpu_layers), ("cpu_layers", w.offload_layers),
                        ("cpu_moe_layers", w.cpu_moe_layers)):
        if count is not None:
            return {N.OFFLOAD_COUNT_KIND: kind, N.OFFLOAD_COUNT: count}
    return {N.OFFLOAD_COUNT_KIND: "experts" if w.experts_on_cpu else "none", N.OFFLOAD_COUNT: 0}


def target_inputs(w: Workload) -> Scope:
    """The prices, utilisation and targets a query set (rules/formulas.yaml asked_*); a
    percentile of the first token or of the whole request sets the queue wait's quantile."""
    quantile = w.ttft_percentile if w.ttft_percentile is not None else w.e2e_percentile
    return {
        N.HOURLY_PRICE_ASKED: w.usd_per_gpu_hour is not None, N.ASKED_USD_PER_GPU_HOUR: w.usd_per_gpu_hour,
        N.HOURS_PER_DAY_ASKED: w.hours_per_day is not None, N.ASKED_HOURS_PER_DAY: w.hours_per_day,
        N.BUDGET_ASKED: w.budget_usd is not None, N.ASKED_BUDGET_USD: w.budget_usd,
        N.DEADLINE_ASKED: w.deadline_hours is not None, N.ASKED_DEADLINE_H: w.deadline_hours,
        N.TTFT_ASKED: w.ttft_max_s is not None, N.ASKED_TTFT_MAX_S: w.ttft_max_s,
        N.TTFT_PERCENTILE_ASKED: quantile is not None, N.TTFT_QUANTILE: (quantile or 50) / 100,
        N.E2E_ASKED: w.e2e_max_s is not None, N.ASKED_E2E_MAX_S: w.e2e_max_s,
        N.TOKENS_PER_DAY_ASKED: w.tokens_per_day is not None, N.ASKED_TOKENS_PER_DAY: w.tokens_per_day,
        N.RENT_ASKED: bool(w.rent), N.SORT_ORDER: None,
    }
