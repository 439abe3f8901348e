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
    # 19,110,297,600 expert weights in MXFP4 (4 bits + one E8M0 scale per 32 = 4.25 bits);
    # the other 21e9 − 19,110,297,600 = 1,889,702,400 in BF16.
    expected = (19_110_297_600 * 4.25 / 8 + 1_889_702_400 * 2) / 1e9     # 13.93 GB
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
