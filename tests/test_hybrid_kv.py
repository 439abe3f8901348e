"""KV cache of hybrid, sliding-window and chunked-attention models, and native checkpoint
formats, against hand derivations from each model's config.json (figures in each test)."""

import pytest

from kb import ask

REL = 1e-3  # exact arithmetic below; 0.1% covers the rounding of the JSON


def kv_per_user(query: str) -> float:
    return ask(query).to_dict()["memory"]["kv_cache_gb_per_user"]


def weights(query: str) -> float:
    return ask(query).to_dict()["memory"]["breakdown"]["weights_gb"]


# Qwen3-Next-80B-A3B config.json: 48 layers, full_attention_interval 4 → 12 attention layers with
# 2 KV heads × head_dim 256; 36 Gated DeltaNet layers with 32 value heads × 128, key head dim 128,
# 16 key heads, conv kernel 4. State per DeltaNet layer: 32·128·128 = 524,288 values plus
# (4 − 1) × (32·128 + 2·16·128 = 8,192) = 24,576 conv values → 548,864 values × 2 B (BF16).
QNEXT_STATE_B = 36 * 548_864 * 2
QNEXT_KV_B_PER_TOKEN = 12 * 2 * 2 * 256 * 2          # layers × (K and V) × heads × dim × 2 B


def test_qwen3_next_kv_counts_only_its_attention_layers_plus_a_fixed_state():
    got = kv_per_user("serve qwen3-next-80b-a3b-instruct fp16 32k context")
    assert got == pytest.approx((QNEXT_KV_B_PER_TOKEN * 32768 + QNEXT_STATE_B) / 1e9, rel=REL)


def test_recurrent_state_does_not_grow_with_context():
    short = kv_per_user("serve qwen3-next-80b-a3b-instruct fp16 8k context")
    long = kv_per_user("serve qwen3-next-80b-a3b-instruct fp16 64k context")
    # only the attention part grows: (65536 − 8192) tokens × 12,288 B
    assert long - short == pytest.approx(QNEXT_KV_B_PER_TOKEN * (65536 - 8192) / 1e9, rel=REL)


def test_granite_4_h_micro_mamba2_state():
    # granite-4.0-h-micro config.json: 4 attention layers (8 KV heads × 64) of 40; 36 Mamba2 layers,
    # mamba_n_heads 64 × mamba_d_head 64, d_state 128, n_groups 1, d_conv 4.
    # state/layer: 64·64·128 = 524,288 + 3 × (4096 + 2·128) = 13,056 → 537,344 values × 2 B
    state = 36 * 537_344 * 2
    kv = 4 * 2 * 8 * 64 * 2 * 4096
    assert kv_per_user("serve granite-4.0-h-micro fp16 4k context") == pytest.approx((kv + state) / 1e9, rel=REL)


def test_llama_4_scout_chunked_layers_hold_one_chunk():
    # Llama-4-Scout text_config: 48 layers, 8 KV heads × 128; attention_chunk_size 8192 on 36 layers,
    # 12 global (NoPE) layers. At 32768 tokens: 12 × 32768 + 36 × 8192 = 688,128 token-layers × 4,096 B
    assert kv_per_user("serve llama-4-scout fp16 32k context") == pytest.approx(688_128 * 4096 / 1e9, rel=REL)


def test_gemma_3_1b_five_local_to_one_global():
    # gemma-3-1b config.json: 26 layers, sliding_window 512, sliding_window_pattern 6 → 4 global and
    # 22 local; 1 KV head × 256. At 32768 tokens: (4 × 32768 + 22 × 512) × 2 × 256 × 2 B
    expected = (4 * 32768 + 22 * 512) * 2 * 256 * 2 / 1e9
    assert kv_per_user("serve gemma-3-1b fp16 32k context") == pytest.approx(expected, rel=REL)


def test_gpt_oss_defaults_to_its_mxfp4_checkpoint():
    # gpt-oss-20b config.json: 24 layers × 32 experts × (gate, up, down) 3 × 2880 × 2880 =
    # 19,110,297,600 expert weights of a 20,907,927,360 count from the config (attention
    # 24 × 26,542,080, routers 24 × 2880 × 32, norms 24 × 2 × 2880 + 2880, embeddings
    # 2 × 201088 × 2880). That share of the card's 21e9 is MXFP4 (4 bits + one E8M0 scale per
    # 32 = 4.25 bits); the rest BF16.
    total = 24 * 26_542_080 + 19_110_297_600 + 24 * 2880 * 32 + 24 * 2 * 2880 + 2880 + 2 * 201088 * 2880
    share = 19_110_297_600 / total
    expected = 21e9 * (share * 4.25 / 8 + (1 - share) * 2) / 1e9     # 13.81 GB
    a = ask("run gpt-oss 20b on my 16gb gpu").to_dict()
    assert a["memory"]["breakdown"]["weights_gb"] == pytest.approx(expected, rel=REL)
    # OpenAI's model card: the 20b model "can run within 16GB of memory"
    assert expected < 16
    assert any("published checkpoint format" in s for s in a["assumptions"])


def test_a_named_precision_beats_the_native_format():
    # 21e9 parameters × 2 B
    assert weights("run gpt-oss-20b fp16") == pytest.approx(21e9 * 2 / 1e9, rel=REL)


def test_deepseek_defaults_to_fp8():
    # DeepSeek-V3 ships FP8 weights: 671e9 less the 16-bit embedding and head (2 × 129280 × 7168)
    emb = 2 * 129280 * 7168
    assert weights("serve deepseek-v3") == pytest.approx(((671e9 - emb) * 1 + emb * 2) / 1e9, rel=REL)


def test_training_ignores_the_native_format():
    a = ask("full fine-tune gpt-oss-20b").to_dict()
    assert not any("published checkpoint format" in s for s in a["assumptions"])


# ---------------------------------------------------------------- --model-config

def _config(tmp_path, **cfg):
    import json

    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return path


QWEN3_NEXT_CONFIG = dict(  # Qwen/Qwen3-Next-80B-A3B-Instruct config.json (architecture fields)
    architectures=["Qwen3NextForCausalLM"], model_type="qwen3_next", hidden_size=2048, num_hidden_layers=48,
    num_attention_heads=16, num_key_value_heads=2, head_dim=256, intermediate_size=5120,
    moe_intermediate_size=512, shared_expert_intermediate_size=512, num_experts=512, num_experts_per_tok=10,
    decoder_sparse_step=1, mlp_only_layers=[], full_attention_interval=4, linear_conv_kernel_dim=4,
    linear_key_head_dim=128, linear_num_key_heads=16, linear_num_value_heads=32, linear_value_head_dim=128,
    vocab_size=151936, max_position_embeddings=262144, tie_word_embeddings=False)


def test_model_config_reads_a_gated_deltanet_hybrid(tmp_path):
    a = ask("serve fp16 32k context", model_config=_config(tmp_path, **QWEN3_NEXT_CONFIG)).to_dict()
    assert a["memory"]["kv_cache_gb_per_user"] == pytest.approx(
        (QNEXT_KV_B_PER_TOKEN * 32768 + QNEXT_STATE_B) / 1e9, rel=REL)


def test_model_config_parameter_count_of_a_hybrid_moe(tmp_path):
    from kb import get_knowledge
    from kb.engine.resolving.hfconfig import read

    m = read(_config(tmp_path, **QWEN3_NEXT_CONFIG), get_knowledge())
    # the card: 80B total; within 3% (hand count from these figures: 79.6B)
    assert m["params_total"] == pytest.approx(80e9, rel=0.03)
    assert m["attention_layers"] == 12 and m["recurrent"]["layers"] == 36


def test_a_field_the_config_leaves_out_takes_its_default_from_the_rules(tmp_path):
    from dataclasses import replace

    from kb import get_knowledge
    from kb.engine.resolving.hfconfig import read

    kn = get_knowledge()
    omitted = {k: v for k, v in QWEN3_NEXT_CONFIG.items() if k not in ("full_attention_interval",
                                                                        "linear_conv_kernel_dim")}
    # Qwen3NextConfig's own defaults (4 and 4), as models.yaml config_defaults says: 48 / 4 = 12
    m = read(_config(tmp_path, **omitted), kn)
    assert m["attention_layers"] == 12 and m["recurrent"]["conv_kernel"] == 4
    # the number comes from the rules, not from the code: another default gives 48 / 2 = 24
    other = replace(kn, config_defaults={**kn.config_defaults, "full_attention_interval": 2})
    assert read(_config(tmp_path, **omitted), other)["attention_layers"] == 24


def test_model_config_reads_quantization_config(tmp_path):
    from kb import get_knowledge
    from kb.engine.resolving.hfconfig import read

    kn = get_knowledge()
    oss = dict(model_type="gpt_oss", hidden_size=2880, num_hidden_layers=24, num_attention_heads=64,
               num_key_value_heads=8, head_dim=64, intermediate_size=2880, num_local_experts=32,
               num_experts_per_tok=4, vocab_size=201088, sliding_window=128,
               layer_types=["sliding_attention", "full_attention"] * 12,
               quantization_config={"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn"]})
    m = read(_config(tmp_path, **oss), kn)
    assert m["native_precision"] == "mxfp4-experts" and m["sliding_window_layers"] == 12
    fp8 = dict(oss, quantization_config={"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]})
    assert read(_config(tmp_path, **fp8), kn)["native_precision"] == "fp8"
    gptq = dict(oss, num_local_experts=None, quantization_config={"quant_method": "gptq", "bits": 4, "group_size": 128})
    assert read(_config(tmp_path, **gptq), kn)["native_precision"] == "gptq"
    plain = {k: v for k, v in oss.items() if k != "quantization_config"}
    assert "native_precision" not in read(_config(tmp_path, **plain), kn)


def test_quantization_formats_come_from_the_rules_table():
    """query.yaml hf_quantization decides the format: bitsandbytes' load_in_4bit is NF4 and
    compressed-tensors' 8-bit float weights FP8 (transformers' quantization_config conventions,
    rules/sources.yaml hf-transformers-docs); a table without a row for a method reads
    its checkpoints as 16-bit."""
    from kb import get_knowledge
    from kb.knowledge.hflayers import native_precision

    table = get_knowledge().query["hf_quantization"]
    assert table is not None
    bnb = {"quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": True}}
    ct = {"quantization_config": {"quant_method": "compressed-tensors",
                                  "config_groups": {"g": {"weights": {"num_bits": 8, "type": "float"}}}}}
    assert native_precision(bnb, False, table) == "nf4"
    assert native_precision(ct, False, table) == "fp8"
    kept = {**table, "rules": [r for r in table["rules"] if r["quant_method"] != "bitsandbytes"]}
    assert native_precision(bnb, False, kept) is None
    assert native_precision(bnb, False, None) is None


def test_model_config_gemma3_pattern_and_llama4_chunks(tmp_path):
    from kb import get_knowledge
    from kb.engine.resolving.hfconfig import read

    kn = get_knowledge()
    gemma = dict(model_type="gemma3_text", hidden_size=1152, num_hidden_layers=26, num_attention_heads=4,
                 num_key_value_heads=1, head_dim=256, intermediate_size=6912, vocab_size=262144,
                 sliding_window=512, sliding_window_pattern=6, tie_word_embeddings=True)
    assert read(_config(tmp_path, **gemma), kn)["sliding_window_layers"] == 26 - 26 // 6      # 22
    llama4 = dict(model_type="llama4_text", hidden_size=5120, num_hidden_layers=48, num_attention_heads=40,
                  num_key_value_heads=8, head_dim=128, intermediate_size=8192, intermediate_size_mlp=16384,
                  num_local_experts=16, num_experts_per_tok=1, interleave_moe_layer_step=1,
                  attention_chunk_size=8192, vocab_size=202048)
    m = read(_config(tmp_path, **llama4), kn)
    assert (m["sliding_window"], m["sliding_window_layers"], m["local_attention"]) == (8192, 36, "chunked")
    # Scout's card: 17B active with the shared expert counted (hand count from these figures: 17.2B)
    assert m["moe"]["shared_experts"] == 1 and m["params_active"] == pytest.approx(17e9, rel=0.03)


def test_granite_4_h_small_mamba2_state_and_moe_weights():
    # granite-4.0-h-small config.json: 4 attention layers of 40 (8 KV heads × 128); 36 Mamba2 layers,
    # mamba_n_heads 128 × mamba_d_head 64, d_state 128, n_groups 1, d_conv 4.
    # state/layer: 128·64·128 = 1,048,576 + 3 × (8192 + 2·128) = 25,344 → 1,073,920 values × 2 B
    state = 36 * 1_073_920 * 2
    kv = 4 * 2 * 8 * 128 * 2 * 32768
    assert kv_per_user("serve granite-4.0-h-small fp16 32k context") == pytest.approx((kv + state) / 1e9, rel=REL)
    # every expert is resident: the safetensors' 32.2B parameters × 2 B (the card: 32B total, 9B active)
    assert weights("serve granite-4.0-h-small fp16") == pytest.approx(32.2e9 * 2 / 1e9, rel=0.01)


def test_falcon_h1_parallel_hybrid_keeps_a_cache_and_a_state_on_every_layer():
    # tiiuae/Falcon-H1-7B-Instruct config.json: 44 layers, each with attention (2 KV heads × 128) AND a
    # Mamba2 mixer beside it (mamba_n_heads 24 × mamba_d_head 128, d_state 256, n_groups 1, d_conv 4).
    # state/layer: 24·128·256 = 786,432 + 3 × (3072 + 2·256) = 10,752 → 797,184 values × 2 B
    state = 44 * 797_184 * 2
    kv = 44 * 2 * 2 * 128 * 2 * 8192
    assert kv_per_user("serve falcon-h1-7b fp16 8k context") == pytest.approx((kv + state) / 1e9, rel=REL)


def test_gemma_3n_shared_kv_layers_keep_no_cache_of_their_own():
    # google/gemma-3n-E4B-it text_config: 35 layers, every 5th global, sliding_window 512, 2 KV heads
    # × 256; num_kv_shared_layers 15 → only layers 0-19 keep a cache: 16 sliding, 4 global.
    # At 32768 tokens: (4 × 32768 + 16 × 512) × 2 × 2 × 256 × 2 B
    expected = (4 * 32768 + 16 * 512) * 2 * 2 * 256 * 2 / 1e9
    assert kv_per_user("serve gemma-3n-e4b fp16 32k context") == pytest.approx(expected, rel=REL)


def test_a_decode_step_moves_the_recurrent_state_twice_whatever_the_context():
    """A Gated DeltaNet layer's decode reads its state and writes the updated state back
    (S_t = S_(t-1)(alpha_t(I - beta_t k_t k_t^T)) + beta_t v_t k_t^T, Yang et al. 2024), whatever
    the prompt's length; the attention layers read their KV cache at the average position (the
    prompt plus half the output). Qwen3-Next on one H200, 64 users, 2,000 in / 1,000 out."""
    from kb import get_knowledge
    from kb.engine import Evaluated, base_scope, evaluate, gpu_scope, layout_of, resolve_workload
    from kb.query.parse import parse

    kn = get_knowledge()
    w = parse("serve qwen3-next-80b-a3b-instruct fp16 64 users 2000 in / 1000 out on 1x h200", kn)
    r = resolve_workload(w, kn)
    ev = Evaluated(gpu_scope(base_scope(r, kn), kn.gpus["h200-sxm"], 1, r.precision, layout_of(r, kn, 1)))
    evaluate(kn, ev, ["decode_cache_gb_per_step"])
    attention = QNEXT_KV_B_PER_TOKEN * (2000 + 1000 / 2)
    assert ev.scope["decode_cache_gb_per_step"] == pytest.approx(64 * (attention + 2 * QNEXT_STATE_B) / 1e9, rel=REL)


def test_data_parallel_attention_splits_a_gqa_cache_without_copies():
    """Qwen3-235B-A22B has 4 KV heads (config.json). Under plain tensor parallelism over 8 GPUs
    each head is held by two ranks, so each rank keeps a quarter of every sequence's cache; with
    data-parallel attention each rank keeps its own requests' cache whole, so each holds an eighth
    of the replica's cache and nothing is read twice (SGLang's --enable-dp-attention)."""
    from kb import get_knowledge
    from kb.engine import Evaluated, base_scope, evaluate, gpu_scope, layout_of, resolve_workload
    from kb.query.parse import parse

    kn = get_knowledge()

    def scope(query):
        w = parse(query, kn)
        r = resolve_workload(w, kn)
        ev = Evaluated(gpu_scope(base_scope(r, kn), kn.gpus["h200-sxm"], 8, r.precision, layout_of(r, kn, 8)))
        evaluate(kn, ev, ["kv_cache_gb", "kv_cache_gb_per_gpu", "kv_replication"])
        return ev.scope

    dpa = scope("serve qwen3-235b-a22b fp8 256 users on 8x h200 tp 8 dp attention")
    tp = scope("serve qwen3-235b-a22b fp8 256 users on 8x h200 tp 8")
    assert dpa["kv_replication"] == 1 and tp["kv_replication"] == 2
    assert dpa["kv_cache_gb_per_gpu"] == pytest.approx(dpa["kv_cache_gb"] / 8, rel=1e-9)
    assert tp["kv_cache_gb_per_gpu"] == pytest.approx(tp["kv_cache_gb"] / 4, rel=1e-9)
