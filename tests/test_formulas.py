"""Formulas against values computed by hand. Each case names where its inputs come from and the
tolerance; the expected value is arithmetic on those inputs, not the program's output."""

import pytest

from kb import ask

REL = 1e-3  # the hand computations below are exact arithmetic; 0.1% covers rounding of the JSON


def step(answer, name):
    for s in answer["trace"]:
        if s["rule"].startswith(name + " "):
            return s
    raise AssertionError(f"{name} not in the trace")


def value(query, name):
    return step(ask(query).to_dict(), name)["result"]


def test_weights_fp16_70b_is_140gb():
    # 004: "70,000,000,000 × 2 bytes = 140 GB"
    assert value("infer 70B fp16", "weights_gb") == pytest.approx(140, rel=REL)


def test_weights_int4_group128():
    # int4 with an FP16 scale and zero per 128 weights = 4 + 32/128 = 4.25 bits (GPTQ paper's
    # group-wise format): 70e9 × 4.25 / 8 = 37.1875e9 B. On a named NVIDIA card: a ranking may pick a
    # card whose runtime runs another 4-bit format (a Mac under llama.cpp at q4_0)
    assert value("serve 70B int4 on h100", "weights_gb") == pytest.approx(37.1875, rel=REL)


def test_kv_cache_llama3_70b_gqa():
    # Llama-3-70B config.json: 80 layers, 8 KV heads, head_dim 128; FP16 = 2 bytes.
    # per token: 2 (K and V) × 80 × 8 × 128 × 2 B = 327,680 B; 4096 tokens → 1.342177 GB
    a = ask("serve llama-3-70b fp16 4k context").to_dict()
    assert step(a, "kv_cache_gb_per_user")["result"] == pytest.approx(327680 * 4096 / 1e9, rel=REL)


def test_kv_cache_scales_with_users():
    # the issue: KV cache for 16 users is 16 × the figure for one
    one = ask("serve 70B int4 1 users").to_dict()["memory"]["breakdown"]["kv_cache_gb"]
    many = ask("serve 70B int4 16 users").to_dict()["memory"]["breakdown"]["kv_cache_gb"]
    assert many == pytest.approx(16 * one, rel=REL) and one > 0


def test_kv_cache_mistral_sliding_window_caps_at_4096():
    # Mistral-7B-v0.1 config.json: 32 layers, 8 KV heads, head_dim 128, sliding_window 4096 on
    # every layer. At 32k context each layer keeps 4096 tokens: 2 × 32 × 8 × 128 × 2 B × 4096
    a = ask("serve mistral-7b-v0.1 fp16 32k context").to_dict()
    assert a["memory"]["kv_cache_gb_per_user"] == pytest.approx(2 * 32 * 8 * 128 * 2 * 4096 / 1e9, rel=REL)


def test_kv_cache_gemma2_alternating_local_global():
    # Gemma-2-9B config.json: 42 layers, half (21) sliding window 4096, 8 KV heads, head_dim 256.
    # At 8192 tokens: 21 global layers × 8192 + 21 local layers × 4096 token-layers,
    # each 2 × 8 × 256 × 2 B = 8192 B.
    a = ask("serve gemma-2-9b fp16 8k context").to_dict()
    expected = 8192 * (21 * 8192 + 21 * 4096) / 1e9
    assert a["memory"]["kv_cache_gb_per_user"] == pytest.approx(expected, rel=REL)


def test_kv_cache_deepseek_v3_mla():
    # DeepSeek-V3 config.json: 61 layers; MLA caches kv_lora_rank 512 + qk_rope_head_dim 64
    # values per token per layer. FP16: 576 × 2 B × 61 = 70,272 B per token; 4096 tokens:
    a = ask("serve deepseek-v3 fp8 4k context").to_dict()
    assert a["memory"]["kv_cache_gb_per_user"] == pytest.approx(70272 * 4096 / 1e9, rel=REL)


def test_moe_memory_from_total_speed_from_active():
    # Mixtral-8x7B: 46.7B total, 12.9B active (model card). Weights hold all experts; a decode
    # step reads only the active ones.
    a = ask("infer mixtral-8x7b fp16 on h100").to_dict()
    assert step(a, "weights_gb")["result"] == pytest.approx(46.7e9 * 2 / 1e9, rel=REL)
    assert step(a, "weights_read_gb")["result"] == pytest.approx(12.9e9 * 2 / 1e9, rel=REL)


def test_full_fine_tune_16_bytes_per_param():
    # 000's table: 2 + 4 + 2 + 4 + 4 = 16 bytes/param → 7B: 112 GB before activations
    a = ask("full fine-tune 7B").to_dict()
    b = a["memory"]["per_gpu_breakdown"]     # one GPU: what it holds is the job's model state
    assert b["weights_gb"] + b["gradients_gb"] + b["optimizer_gb"] == pytest.approx(112, rel=REL)
    assert b["activations_gb"] > 0
    assert a["memory"]["total_gb"] > 112


def test_foreach_adamw_step_adds_one_moment_beyond_the_activations():
    # torch.optim docs: the foreach implementation (the default on CUDA) "uses ~ sizeof(params) more
    # peak memory"; AdamW's step takes sqrt of every second moment at once. With FP32 master weights
    # that is 4 B/param: 7e9 x 4 = 28 GB, of which the freed activations cover their own size.
    b = ask("full fine-tune 7B").to_dict()["memory"]["per_gpu_breakdown"]
    assert b["optimizer_step_gb"] == pytest.approx(28 - b["activations_gb"], rel=REL)
    # 8-bit Adam (bitsandbytes) steps parameter by parameter: no such list
    assert ask("full fine-tune 7B 8-bit adam").to_dict()["memory"]["per_gpu_breakdown"]["optimizer_step_gb"] == 0


def test_pure_bf16_full_fine_tune_keeps_adamw_moments_in_bf16():
    # ms-swift trains a bf16 checkpoint in bf16 (no FP32 master); torch AdamW's moments are
    # zeros_like(param), so bf16: 2 x 2 B. Qwen-7B, 7.72e9 params: weights 2 + gradients 2 +
    # moments 4 = 8 B/param = 61.76 GB, and the foreach step's sqrt list 2 B/param = 15.44 GB less
    # the activations (checkpointing on, seq 2048, batch 1). Published: 74.26 GiB = 79.7 GB
    # (ms-swift Benchmark.md, Full, qwen-7b-chat, max_length 2048), within 10%.
    a = ask("full fine-tune qwen-7b seq 2048 batch 1 checkpointing on a100-80gb with ms-swift").to_dict()
    b = a["memory"]["per_gpu_breakdown"]
    assert b["weights_gb"] + b["gradients_gb"] + b["optimizer_gb"] == pytest.approx(7.72e9 * 8 / 1e9, rel=REL)
    assert b["optimizer_step_gb"] == pytest.approx(7.72e9 * 2 / 1e9 - b["activations_gb"], rel=REL)
    assert a["gpus"][0]["per_gpu_gb"] == pytest.approx(74.26 * 1.073741824, rel=0.10)


def test_eight_bit_adam_states():
    # 8-bit Adam (Dettmers 2021): 2 bytes of state per param + 4-byte master + 2 + 2 = 10 B/param
    b = ask("full fine-tune 7B 8-bit adam").to_dict()["memory"]["breakdown"]
    assert b["weights_gb"] + b["gradients_gb"] + b["optimizer_gb"] == pytest.approx(70, rel=REL)


def test_lora_trainable_parameters_llama2_7b():
    # PEFT prints "trainable params: 19,988,480" for Llama-2-7B, r=8, all linear layers
    # (q,k,v,o,gate,up,down): 8 × 32 × (4·4096 + 4·4096 + 3·(4096 + 11008)) = 19,988,480
    a = ask("lora llama-2-7b rank 8").to_dict()
    assert step(a, "lora_params")["result"] == pytest.approx(19_988_480, rel=1e-5)  # JSON keeps 6 digits


def test_qlora_base_is_nf4():
    # QLoRA paper: NF4 with double quantization = 4.127 bits/param. bitsandbytes quantizes the
    # blocks' linear layers only: Llama-2-7B's embedding and output head (32,000 × 4,096 each,
    # untied = 262.1M params) stay bf16. (7e9 − 262.1e6) × 4.127/8 + 262.1e6 × 2 bytes:
    emb = 2 * 32000 * 4096
    a = ask("qlora 7B").to_dict()
    expected = ((7e9 - emb) * 4.127 / 8 + emb * 2) / 1e9
    assert a["memory"]["breakdown"]["weights_gb"] == pytest.approx(expected, rel=REL)


def test_decode_bound_matches_article_formula():
    # 000: 7B FP16 (14 GB) on RTX 4000 Ada (360 GB/s) → ~26 tok/s upper bound: 360 / 14 = 25.71
    from kb import get_knowledge
    from kb.engine import Evaluated, evaluate, gpu_scope, base_scope, resolve_workload
    from kb.query.parse import parse

    kn = get_knowledge()
    r = resolve_workload(parse("infer 7B fp16", kn), kn)
    ev = Evaluated(gpu_scope(base_scope(r, kn), kn.gpus["rtx-4000-ada"], 1, r.precision))
    evaluate(kn, ev, ["decode_tokens_per_s_bound"])
    assert ev.scope["decode_tokens_per_s_bound"] == pytest.approx(360 / 14, rel=REL)


def test_ridge_point_h100():
    # H100 SXM datasheet: 989.4 dense FP16 TFLOPS, 3.35 TB/s → 989.4e12 / 3.35e12 = 295.3 FLOP/B
    a = ask("infer 7B fp16 on h100").to_dict()
    assert a["bottleneck"]["ridge_point"] == pytest.approx(989.4 / 3.35, rel=REL)


def test_training_flops_6nd():
    # Kaplan et al.: training costs 6·N FLOPs per token; with full recomputation 8·N
    on = ask("full fine-tune 7B with checkpointing on h100").to_dict()
    off = ask("full fine-tune 7B no checkpointing on h100").to_dict()
    assert step(on, "train_flops_per_token")["result"] == pytest.approx(8 * 7e9, rel=REL)
    assert step(off, "train_flops_per_token")["result"] == pytest.approx(6 * 7e9, rel=REL)


def test_training_time_is_tokens_over_rate():
    # sharded: under plain DDP each H100 would hold all 7B × 16 B/param and the job would not fit
    a = ask("full fine-tune 7B on 8x h100 with fsdp for 20B tokens").to_dict()
    t = a["throughput"]
    assert t["train_time_s"] == pytest.approx(20e9 / t["train_tokens_per_s"], rel=REL)


def test_tensor_parallel_splits_memory():
    one = ask("serve 70B fp16 on h100").to_dict()
    two = ask("serve 70B fp16 on 2x h100").to_dict()
    per_gpu_1 = one["gpus"][0]["per_gpu_gb"]
    per_gpu_2 = two["gpus"][0]["per_gpu_gb"]
    overhead = one["memory"]["breakdown"]["overhead_gb"]   # one GPU's runtime overhead
    assert per_gpu_2 == pytest.approx((per_gpu_1 - overhead) / 2 + overhead, rel=REL)


def test_lora_attention_only():
    # q, k, v, o with r = 8 on Llama-2-7B: 8 × 32 × (4·4096 + 2·4096 + 2·4096) = 8,388,608
    a = ask("lora llama-2-7b rank 8 attention only").to_dict()
    assert step(a, "lora_params")["result"] == pytest.approx(8_388_608, rel=1e-5)


def test_optimizer_in_backward_holds_one_layer_of_gradients():
    # torch's optimizer-in-backward steps each layer as its gradients arrive: about
    # params / layers gradients at once. Llama-3.1-8B: 8.03e9 / 32 layers × 2 bytes = 0.502 GB
    a = ask("full fine-tune llama-3.1-8b optimizer in backward").to_dict()
    assert a["memory"]["breakdown"]["gradients_gb"] == pytest.approx(8.03e9 / 32 * 2 / 1e9, rel=REL)


def test_cpu_offload_moves_optimizer_states():
    # ZeRO-Offload keeps optimizer states and the FP32 master copy in CPU memory
    on = ask("full fine-tune 7B offload").to_dict()["memory"]["per_gpu_breakdown"]
    off = ask("full fine-tune 7B").to_dict()["memory"]["per_gpu_breakdown"]
    assert on["optimizer_gb"] == 0 and off["optimizer_gb"] == pytest.approx(7e9 * 12 / 1e9, rel=REL)


# ---------------------------------------------------------------- training activations, tensor by tensor
# What autograd keeps for the backward pass of one layer, per token, with fused (flash) attention
# and no dropout (Korthikanti et al. 2022 count the same way), 16-bit values at 2 B:
#   norms:         each of the two RMSNorms keeps its input upcast to FP32 (4 B per hidden unit;
#                  HF LlamaRMSNorm and torchtune's RMSNorm upcast so; LitGPT's at commit 8641822
#                  computes in the input's dtype, where kbq's count is 2 B per unit too high),
#                  plus its 16-bit output (2 B) when its weight trains;
#   every layer:   the attention input (h: q, k, v or their adapters train in every method),
#                  fused attention's rotated Q and output (2 x heads x head_dim) and K, V
#                  (2 x kv_heads x head_dim); a gated MLP's gate output, activation output and
#                  up output (3f) - a plain MLP's activation input (f);
#   trained MLP:   its input (h) and the down projection's input (f) - a frozen 16-bit linear keeps
#                  no input (PyTorch saves a matmul's input only for the weight's gradient);
#   trained o:     the output projection's input (heads x head_dim), the heads' outputs copied side
#                  by side (transpose(1, 2).contiguous()), a tensor apart from what attention saved.

def test_swiglu_full_fine_tune_activations_per_token_layer():
    # Llama-2-7B: h = 4096, 32 heads x 128, 32 KV heads x 128, f = 11008 (models.yaml, HF config)
    # norms 2 x 4096 x (4 + 2) = 49,152 B
    # 2 B x (4096 + 2 x 4096 + 2 x 4096 + 4096 + 3 x 11008 + 4096 + 11008) = 2 x 72,704 = 145,408 B
    # total 194,560 B (Korthikanti's 34h scaled to the FFN width, 15h + 4.75f = 113,728 B, misses
    # that the gated MLP keeps four f-wide tensors and the norms keep FP32 inputs)
    assert value("full fine-tune llama-2-7b", "activation_bytes_per_token_layer") == pytest.approx(194_560, rel=REL)


def test_lora_keeps_what_its_adapters_read():
    # Same layer with LoRA: the norm weights are frozen, so 2 x 4096 x 4 = 32,768 B of norms.
    # On q, k, v, o only, the frozen gate/up/down keep no inputs:
    #   32,768 + 2 x (4096 + 8192 + 8192 + 33,024) = 32,768 + 107,008 = 139,776 B
    # On every linear layer the adapters read the MLP and down inputs: + 2 x (4096 + 11008)
    #   = 169,984 B
    assert value("lora llama-2-7b attention only", "activation_bytes_per_token_layer") == pytest.approx(139_776, rel=REL)
    assert value("lora llama-2-7b", "activation_bytes_per_token_layer") == pytest.approx(169_984, rel=REL)


def test_old_bitsandbytes_4bit_layers_keep_their_inputs():
    # bitsandbytes before 0.43.2 (PR #1270) saved every 4-bit layer's input: with LoRA on the
    # attention only, the frozen NF4 MLP and output projection keep their inputs after all,
    # 139,776 + 2 x (4096 + 11008) + 2 x 4096 = 178,176 B
    assert value("qlora llama-2-7b attention only", "activation_bytes_per_token_layer") == pytest.approx(139_776, rel=REL)
    assert value("qlora llama-2-7b attention only bitsandbytes 0.41", "activation_bytes_per_token_layer") == pytest.approx(178_176, rel=REL)


def test_plain_mlp_activations_per_token_layer():
    # Falcon-7B (plain GeLU MLP): h = 4544, 71 heads x 64 = 4544, 1 KV head x 64, f = 18176
    # norms 2 x 4544 x 6 = 54,528 B
    # 2 B x (4544 + 2 x 4544 + 2 x 64 + 4544 + 18176 + 4544 + 18176) = 2 x 59,200 = 118,400 B
    # total 172,928 B
    assert value("full fine-tune falcon-7b", "activation_bytes_per_token_layer") == pytest.approx(172_928, rel=REL)


# ---------------------------------------------------------------- QLoRA as LitGPT runs it
# LitGPT finetune/lora.py (commit 8641822) and its config_hub qlora.yaml: lora_dropout 0.05 before
# lora_A, adapters on q and v only; --quantize bnb.nf4 hands every nn.Linear (lm_head too) to
# Lightning's BitsandbytesPrecision, nf4 mode without double quantization.

def test_lora_dropout_keeps_a_copy_and_a_mask_of_the_adapter_input():
    # With dropout the adapter reads dropout(x), not x: a 16-bit copy (2 B) and PyTorch's bool
    # mask (1 B) per hidden unit. Llama-2-7B attention-only LoRA (139,776 B without dropout):
    # 139,776 + 3 x 4096 = 152,064 B
    assert value("lora llama-2-7b with litgpt", "activation_bytes_per_token_layer") == pytest.approx(152_064, rel=REL)
    # PEFT's LoraConfig defaults to lora_dropout 0 (nn.Identity): no copy
    assert value("lora llama-2-7b attention only with peft", "lora_dropout_bytes_per_token_layer") == 0


def test_qlora_step_holds_one_dequantized_weight():
    # bitsandbytes MatMul4Bit dequantizes the whole weight for the matmul. Llama-2-7B under PEFT
    # keeps lm_head 16-bit, so the largest 4-bit weight is an MLP projection:
    # 4096 x 11008 x 2 B = 90,177,536 B; under LitGPT lm_head is 4-bit too: 4096 x 32000 x 2 B
    assert value("qlora llama-2-7b with peft", "dequantized_weight_gb") == pytest.approx(4096 * 11008 * 2 / 1e9, rel=REL)
    assert value("qlora llama-2-7b with litgpt", "dequantized_weight_gb") == pytest.approx(4096 * 32000 * 2 / 1e9, rel=REL)
    assert value("lora llama-2-7b with litgpt", "dequantized_weight_gb") == 0
    # AutoAWQ's GEMM dequantizes the whole weight to FP16 once a batch holds >= 1,024 tokens
    # (awq/modules/linear/gemm.py), so a LoRA over AWQ weights holds the same 90,177,536 B
    assert value("lora llama-2-7b awq with peft", "dequantized_weight_gb") == pytest.approx(4096 * 11008 * 2 / 1e9, rel=REL)
    assert value("lora llama-2-7b bf16 with peft", "dequantized_weight_gb") == 0


def test_litgpt_nf4_weights_quantize_the_head_without_double_quantization():
    # QLoRA paper: NF4 blocks of 64 weights with one FP32 absmax each = 4 + 32/64 = 4.5 bits.
    # Llama-2-7B (models.yaml: 6.74e9 params, 32,000 x 4,096 embedding and head): only the
    # embedding (131.072M) stays bf16: (6.74e9 - 131.072e6) x 4.5/8 + 131.072e6 x 2 bytes
    emb = 32000 * 4096
    expected = ((6.74e9 - emb) * 4.5 / 8 + emb * 2) / 1e9
    a = ask("qlora llama-2-7b bnb.nf4 with litgpt").to_dict()
    assert a["memory"]["breakdown"]["weights_gb"] == pytest.approx(expected, rel=REL)


def test_litgpt_resource_table_qlora_against_lora():
    # LitGPT tutorials/resource-tables.md (2023-10-20, commit 8641822, bitsandbytes 0.41.1,
    # A100-SXM4-40GB, Alpaca's longest Llama 2 sample 1,304 tokens, "Max GPU RAM" =
    # torch.cuda.max_memory_allocated): Llama 2 7B LoRA 21.30 GB, bnb.nf4 14.14 GB, bnb.nf4-dq
    # 13.84 GB. The 0.30 GB between the two 4-bit rows is double quantization's saving on the
    # linear weights: (6.74e9 - 131.072e6) x (4.5 - 4.127) / 8 = 0.308 GB (within 5%).
    q = "qlora llama-2-7b {} seq 1304 batch 1 bitsandbytes 0.41 with litgpt on a100-40gb"
    nodq = ask(q.format("bnb.nf4")).to_dict()["memory"]["total_gb"]
    dq = ask(q.format("nf4")).to_dict()["memory"]["total_gb"]
    assert nodq - dq == pytest.approx(14.14 - 13.84, rel=0.05)
    # and each row within 10% (14.14 GB, 13.84 GB)
    assert nodq == pytest.approx(14.14, rel=0.10) and dq == pytest.approx(13.84, rel=0.10)
