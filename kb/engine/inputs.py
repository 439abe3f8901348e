"""A resolved workload's inputs: the names rules/formulas.yaml `inputs` lists, with their values.

In: a Resolved workload (kb.engine.scope.resolve) and the Knowledge. Out: base_scope, the scope
every formula is evaluated in before the GPU, its count and the parallel layout are added: the
workload's fields, the constants, the formats' widths and the model's and runtime's figures.
"""

from __future__ import annotations

from kb.hints import TYPE_CHECKING, cast

from kb.engine import training as tr
from kb.engine.bare_size import size_inputs
from kb.engine.evaluate import Scope
from kb.knowledge.data import Knowledge
from kb.knowledge.gpu_names import gemm_of
from kb.query.workload import Workload

if TYPE_CHECKING:
    from kb.engine.scope import Resolved
    from kb.knowledge.records import Model, Runtime

STACK_VENDORS = ("nvidia", "amd", "intel", "apple", "google", "aws")   # formulas.yaml stack.<vendor>


def base_scope(r: Resolved, kn: Knowledge) -> Scope:
    w, m = r.workload, r.model
    training = set(kn.query["training_tasks"])
    scope: Scope = dict(kn.derived.constants)
    scope.update(size_inputs(m))
    scope.update({
        "users": w.users, "batch": w.batch, "context_tokens": w.context_tokens,
        "prompt_tokens": w.prompt_tokens, "output_tokens": w.output_tokens,
        "seq_len": w.seq_len, "lora_rank": w.lora_rank, "train_tokens": w.train_tokens,
        "is_training": w.task in training, "is_inference": w.task not in training,
        "is_full_ft": w.task == "full_ft", "is_lora": w.task == "lora",
        "is_qlora": w.task == "qlora", "is_pretrain": w.task == "pretrain",
        "is_prefill_only": w.task == "prefill",
        "checkpointing": bool(w.checkpointing), "flash_attention": bool(w.flash_attention),
        "offload": bool(w.offload), "paged": bool(w.paged),
        "checkpoint_offload": bool(w.checkpoint_offload),
        **tr.scope_values(w, kn),
        "optimizer_in_backward": bool(w.optimizer_in_backward),
        "lora_attention_only": bool(w.lora_attention_only),
        "quantized_inputs_kept": bool(w.quantized_inputs_kept),
        "optimizer": w.optimizer, "precision": w.precision, "task": w.task,
        "gpu_named": bool(w.gpus),
        "dp_attention": bool(w.dp_attention),
        "speed_floor_tok_s": w.speed_floor_tok_s or kn.constants["decode_speed_floor_tok_s"]["value"],
        "weight_bytes_per_param": r.precision["bits_per_weight"] / 8,
        "kv_bytes_per_value": r.kv_precision["bits_per_weight"] / 8,
    })
    scope.update(_model_fields(m))
    scope.update({
        "gpu_candidates": None, "fitting_gpus": None, "fewest_gpus_needed": None,
        "precision.kind": r.precision["kind"],
        "precision.experts_only": bool(r.precision.get("experts_only")),
    })
    scope.update(_layer_kinds(m))
    rt = r.runtime
    scope.update(_runtime_fields(rt))
    scope["precision.quantizes_embeddings"] = r.precision.get("quantizes_embeddings", True)
    supported = stack_platforms(rt, str(w.task))
    scope.update({f"stack.{v}": v in supported for v in STACK_VENDORS})
    scope.update(target_inputs(w))
    return scope


def _model_fields(m: Model) -> Scope:
    """The names base_scope gives of a model's architecture (its size apart: size_inputs)."""
    sliding = m.get("sliding_window") or 0
    mla, moe = m.get("mla"), m.get("moe")
    return {
        "model.id": m["id"], "model.layers": m["layers"], "model.hidden_size": m["hidden_size"],
        "model.intermediate_size": m["intermediate_size"],
        "model.attention_heads": m["attention_heads"], "model.kv_heads": m["kv_heads"],
        "model.head_dim": m["head_dim"], "model.vocab_size": m["vocab_size"],
        "model.attention": m["attention"], "model.sliding_window": sliding,
        "model.sliding_window_layers": (m.get("sliding_window_layers") if m.get("sliding_window_layers") is not None else m["layers"]) if sliding else 0,
        "model.kv_lora_rank": mla["kv_lora_rank"] if mla else 0,
        "model.qk_rope_head_dim": mla["qk_rope_head_dim"] if mla else 0,
        "model.experts": moe["experts"] if moe else 1,
        "model.experts_per_token": moe["experts_per_token"] if moe else 1,
        "model.shared_experts": moe.get("shared_experts", 0) if moe else 0,
        "model.tie_embeddings": bool(m.get("tie_embeddings")),
        "model.gated_mlp": m.get("mlp", "gated") == "gated",
    }


def _runtime_fields(rt: Runtime) -> Scope:
    """The names base_scope gives of a runtime."""
    return {
        "runtime.decode_bandwidth_efficiency": rt.get("decode_bandwidth_efficiency"),
        "runtime.quant_kernel_efficiency": rt.get("quant_kernel_efficiency"),
        "runtime.hbm_decode_efficiency": rt.get("hbm_decode_efficiency", 1.0),
        "runtime.moe_expert_kernel_s": rt.get("moe_expert_kernel_s", 0.0),
        "runtime.moe_layer_kernel_s": rt.get("moe_layer_kernel_s", 0.0),
        "runtime.mla_layer_kernel_s": rt.get("mla_layer_kernel_s", 0.0),
        "runtime.decode_step_overhead_s": rt.get("decode_step_overhead_s"),
        "runtime.prefill_compute_efficiency": rt.get("prefill_compute_efficiency"),
        # a runtime calibrated on no Apple or Hopper point uses its own prefill efficiency there
        "runtime.apple_prefill_compute_efficiency": (rt.get("apple_prefill_compute_efficiency")
                                                      or rt.get("prefill_compute_efficiency")),
        "runtime.apple_decode_step_overhead_s": (rt.get("apple_decode_step_overhead_s")
                                                 if rt.get("apple_decode_step_overhead_s") is not None
                                                 else rt.get("decode_step_overhead_s")),
        "runtime.hopper_warpgroup_mma": rt.get("hopper_warpgroup_mma", True),
        "_gemm": gemm_of(rt),
        "runtime.memory_utilization": rt.get("memory_utilization", 1.0),
        "runtime.overhead_gb": rt.get("overhead_gb"),
        "runtime.training_mfu": rt.get("training_mfu"),
        "runtime.tensor_parallel": rt.get("multi_gpu") == "tensor_parallel",
        "runtime.logits_memory_fraction": rt.get("logits_memory_fraction", 1.0),
        "runtime.master_weights": rt.get("master_weights", True),
        "runtime.lora_dropout": rt.get("lora_dropout", 0.0),
        "runtime.quantizes_output_head": bool(rt.get("quantizes_output_head")),
    }


def stack_platforms(rt: Runtime, task: str) -> list[str]:
    """The platforms the runtime supports a task on well (runtimes.yaml well_supported), else
    every platform it runs on."""
    well = rt.get("well_supported") or {}
    return list(well.get(task) or well.get("default") or rt["platforms"])


def _layer_kinds(m: Model) -> Scope:
    """Attention, routed-expert and state (linear-attention / state-space) layers of a model."""
    moe, rec = m.get("moe"), m.get("recurrent")
    attention = m.get("attention_layers")
    return {
        "model.attention_layers": m["layers"] if attention is None else attention,
        "model.moe_layers": (moe.get("moe_layers") or m["layers"]) if moe else 0,
        "model.dense_intermediate_size": (moe and moe.get("dense_intermediate_size")) or m["intermediate_size"],
        "model.shared_intermediate_size": ((moe and moe.get("shared_expert_intermediate_size"))
                                           or m["intermediate_size"]),
        "model.state_layers": rec["layers"] if rec else 0,
        "model.state_heads": rec["heads"] if rec else 0, "model.state_head_dim": rec["head_dim"] if rec else 0,
        "model.state_dim": rec["state_dim"] if rec else 0, "model.state_groups": rec["groups"] if rec else 0,
        "model.state_conv_kernel": rec["conv_kernel"] if rec else 1,
    }


def target_inputs(w: Workload) -> Scope:
    """The prices, utilisation and targets a query set (rules/formulas.yaml asked_*); a
    percentile of the first token or of the whole request sets the queue wait's quantile."""
    quantile = w.ttft_percentile if w.ttft_percentile is not None else w.e2e_percentile
    return {
        "hourly_price_asked": w.usd_per_gpu_hour is not None, "asked_usd_per_gpu_hour": w.usd_per_gpu_hour,
        "hours_per_day_asked": w.hours_per_day is not None, "asked_hours_per_day": w.hours_per_day,
        "budget_asked": w.budget_usd is not None, "asked_budget_usd": w.budget_usd,
        "deadline_asked": w.deadline_hours is not None, "asked_deadline_h": w.deadline_hours,
        "ttft_asked": w.ttft_max_s is not None, "asked_ttft_max_s": w.ttft_max_s,
        "ttft_percentile_asked": quantile is not None, "ttft_quantile": (quantile or 50) / 100,
        "e2e_asked": w.e2e_max_s is not None, "asked_e2e_max_s": w.e2e_max_s,
        "tokens_per_day_asked": w.tokens_per_day is not None, "asked_tokens_per_day": w.tokens_per_day,
        "rent_asked": bool(w.rent), "sort_order": None,
    }
