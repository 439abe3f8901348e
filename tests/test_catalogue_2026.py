"""The open-weight models of 2026, read by the names people type.

In: the loaded knowledge and kb.ask. Out: pass/fail. Each row is a name as typed, the model it must
read as, and the total parameter count its model card (or technical report) states, with the
source that states it. At bf16 the weights must be 2 bytes x that count within 20% (the catalogue
stores the card's count, so the bound is loose on purpose: it holds for any reading of "total" a
card may use, with or without a vision tower or MTP layer). tests/test_catalogue.py checks each
model's count against its own config figures within 3%.
"""

from __future__ import annotations

import pytest

from kb import ask, get_knowledge
from kb.errors import QueryError
from kb.query.parse import parse

KN = get_knowledge()
WEIGHTS_BOUND = 0.20        # the bound: bf16 weights within 20% of 2 B x the card's total
BYTES_PER_GB = 1e9

# (typed name, model id, the card's total parameters, source id of that figure)
MODELS = [
    ("qwen3.5 397b a17b", "qwen3.5-397b-a17b", 397e9, "hf-qwen3.5-397b-a17b"),      # card: 397B total, 17B activated
    ("qwen3.5 122b", "qwen3.5-122b-a10b", 122e9, "hf-qwen3.5-122b-a10b"),            # card: 122B total, 10B activated
    ("qwen3.5 35b a3b", "qwen3.5-35b-a3b", 35e9, "hf-qwen3.5-35b-a3b"),              # card: 35B total, 3B activated
    ("Qwen/Qwen3.5-35B-A3B", "qwen3.5-35b-a3b", 35e9, "hf-qwen3.5-35b-a3b"),
    ("qwen3.5 27b", "qwen3.5-27b", 27e9, "hf-qwen3.5-27b"),                          # card: 27B
    ("qwen3.5 9b", "qwen3.5-9b", 9e9, "hf-qwen3.5-9b"),                              # card: 9B
    ("Qwen/Qwen3.5-9B", "qwen3.5-9b", 9e9, "hf-qwen3.5-9b"),
    ("qwen3.6 35b a3b", "qwen3.6-35b-a3b", 35e9, "hf-qwen3.6-35b-a3b"),              # card: 35B total, 3B activated
    ("qwen 3.6 27b", "qwen3.6-27b", 27e9, "hf-qwen3.6-27b"),                         # spec: total_params_b 27.0
    ("glm 5", "glm-5", 744e9, "hf-glm-5"),                                           # report: 744B total, 40B activated
    ("glm 5.1", "glm-5.1", 744e9, "hf-glm-5.1"),                                     # 744B total, 40B active
    ("glm-5.1", "glm-5.1", 744e9, "hf-glm-5.1"),
    ("kimi k2.5", "kimi-k2.5", 1.04e12, "hf-kimi-k2.5"),                             # 1.04T backbone (NVIDIA: 1T)
    ("kimi k2.6", "kimi-k2.6", 1e12, "hf-kimi-k2.6"),                                # card: 1T total, 32B active
    ("glm 5.2", "glm-5.2", 744e9, "hf-glm-5.2"),                                     # 744B total (753B with MTP)
    ("minimax m2.5", "minimax-m2.5", 229.9e9, "hf-minimax-m2.5"),                    # report: 229.9B total
    ("minimax m2.7", "minimax-m2.7", 230e9, "hf-minimax-m2.7"),                      # M2's 230B
    ("minimax m3", "minimax-m3", 428e9, "hf-minimax-m3"),                            # 428B total, 23B activated
    ("MiniMaxAI/MiniMax-M3", "minimax-m3", 428e9, "hf-minimax-m3"),
    ("nemotron 3 nano", "nemotron-3-nano-30b-a3b", 31.6e9, "hf-nemotron-3-nano-30b-a3b"),  # report: 31.6B (card: 30B)
    ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "nemotron-3-nano-30b-a3b", 31.6e9, "hf-nemotron-3-nano-30b-a3b"),
    ("gemma 4 31b", "gemma-4-31b", 30.7e9, "hf-gemma-4-31b"),                        # card: 30.7B
    ("gemma 4 26b a4b", "gemma-4-26b-a4b", 26e9, "hf-gemma-4-26b-a4b"),              # card: 26B total
    ("gemma 4 27b", "gemma-4-26b-a4b", 26e9, "hf-gemma-4-26b-a4b"),                  # no 27B: the nearest Gemma 4
    ("deepseek v4 flash", "deepseek-v4-flash", 284e9, "hf-deepseek-v4-flash"),       # card: 284B total, 13B activated
    ("deepseek-ai/DeepSeek-V4-Flash", "deepseek-v4-flash", 284e9, "hf-deepseek-v4-flash"),
    ("deepseek v4 pro", "deepseek-v4-pro", 1.6e12, "hf-deepseek-v4-pro"),            # card: 1.6T total, 49B activated
    ("mimo v2 flash", "mimo-v2-flash", 309e9, "hf-mimo-v2-flash"),                    # card: 309B total, 15B activated
    ("XiaomiMiMo/MiMo-V2-Flash", "mimo-v2-flash", 309e9, "hf-mimo-v2-flash"),
    ("step 3.5 flash", "step-3.5-flash", 196.81e9, "hf-step-3.5-flash"),             # card: 196.81B total, ~11B active
    ("stepfun-ai/Step-3.5-Flash", "step-3.5-flash", 196.81e9, "hf-step-3.5-flash"),
    ("step-3.5-flash", "step-3.5-flash", 196.81e9, "hf-step-3.5-flash"),
    ("step 3.5", "step-3.5-flash", 196.81e9, "hf-step-3.5-flash"),                   # the one Step 3.5 published
    ("kimi k3", "kimi-k3", 2.78e12, "hf-kimi-k3"),                                   # hub: 2,779,931,837,184 parameters
    ("moonshotai/Kimi-K3", "kimi-k3", 2.78e12, "hf-kimi-k3"),
    ("mistral large 3", "mistral-large-3-675b", 675e9, "hf-mistral-large-3"),        # card: 675B total, 41B active
    ("nemotron 3 super", "nemotron-3-super-120b-a12b", 120e9, "hf-nemotron-3-super-120b-a12b"),  # card: 120B total, 12B active
    ("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-BF16", "nemotron-3-super-120b-a12b", 120e9, "hf-nemotron-3-super-120b-a12b"),
    ("mistralai/Mistral-Large-3-675B-Instruct-2512", "mistral-large-3-675b", 675e9, "hf-mistral-large-3"),
]


def _model(words: str) -> str:
    return str(parse(f"serve {words} on h100", KN).model_id)


def check_read(words: str, model_id: str, source: str) -> None:
    """The typed name reads as the model, whose source is its model card."""
    assert _model(words) == model_id
    assert KN.models[model_id]["source"] == source
    assert KN.sources[source]["kind"] == "model-card"


def check_bf16_weights(words: str, card_total: float, on: str) -> None:
    """At bf16 the weights are 2 bytes x the card's total parameters, within WEIGHTS_BOUND."""
    got = ask(f"serve {words} bf16 on {on}").to_dict()["memory"]["breakdown"]["weights_gb"]
    assert got == pytest.approx(2 * card_total / BYTES_PER_GB, rel=WEIGHTS_BOUND)


@pytest.mark.parametrize("words, model_id, card_total, source", MODELS)
def test_typed_name_reads_as_the_model(words, model_id, card_total, source):
    check_read(words, model_id, source)


@pytest.mark.parametrize("words, model_id, card_total, source", MODELS)
def test_bf16_weights_are_two_bytes_per_card_parameter(words, model_id, card_total, source):
    check_bf16_weights(words, card_total, "8x h100")


@pytest.mark.parametrize("words, model_id", [
    ("qwen3.5 27b", "qwen3.5-27b"),          # the version's family, sized: not Qwen3's or Qwen2.5's 27-32B
    ("qwen3.5 34b", "qwen3.5-35b-a3b"),      # the nearest Qwen3.5 (log ratio 0.03; 27B is 0.23 away)
    ("qwen3 30b", "qwen3-30b-a3b"),          # earlier versions read as before
    ("llama 3.1 70b", "llama-3.1-70b"),
    ("llama 70b", "llama-3.3-70b"),          # a family alone still takes its general model
    ("glm 4.6", "glm-4.6"),
])
def test_a_version_is_part_of_the_name(words, model_id):
    assert _model(words) == model_id


def test_a_version_without_a_size_asks_for_one():
    with pytest.raises(QueryError) as err:
        parse("serve qwen3.5 on h100", KN)
    assert "which qwen3.5 model" in str(err.value)


def test_a_bare_decimal_still_needs_its_unit():
    # '5.1' is GLM's version only after 'glm'; alone it is a number without a unit
    with pytest.raises(QueryError) as err:
        parse("serve llama-3.1-8b 5.1 on h100", KN)
    assert "5.1" in str(err.value)


def test_a_version_the_catalogue_lacks_is_not_read_as_another():
    with pytest.raises(QueryError) as err:
        parse("serve glm 5.9 on h100", KN)
    assert "no glm model 5.9" in str(err.value)


def test_nemotron_h_keeps_a_cache_in_its_attention_blocks_and_a_state_in_its_mamba_blocks():
    # NVIDIA-Nemotron-3-Nano-30B-A3B config.json: of 52 blocks, 6 attention (2 KV heads x 128) and
    # 23 Mamba2 (64 heads x 64, state 128, 8 groups, conv 4); the 23 MoE blocks keep nothing.
    # KV per token: 6 x 2 (K, V) x 2 x 128 x 2 B = 6,144 B. State per Mamba2 block:
    # 64*64*128 = 524,288 values + (4 - 1) x (64*64 + 2*8*128 = 6,144) = 18,432 -> 542,720 x 2 B.
    kv_b_per_token, state_b = 6 * 2 * 2 * 128 * 2, 23 * 542_720 * 2
    got = ask("serve nemotron 3 nano bf16 64k context on h100").to_dict()["memory"]["kv_cache_gb_per_user"]
    assert got == pytest.approx((kv_b_per_token * 65536 + state_b) / BYTES_PER_GB, rel=1e-3)


def test_blocks_without_experts_that_are_mixers_alone_hold_no_ffn():
    # moe.dense_layers 0: the 29 blocks without experts are Mamba2 or attention only, so the arch
    # count (rules/formulas.yaml arch_dense_ffn_params) adds no dense FFN for them
    from kb.engine import Evaluated, base_scope, evaluate, resolve_workload
    from kb.query.workload import Workload

    ev = Evaluated(base_scope(resolve_workload(Workload(model_id="nemotron-3-nano-30b-a3b"), KN), KN))
    evaluate(KN, ev, ["arch_dense_ffn_params"])
    h, experts, shared = 2688, 128, 3712
    # per MoE block: the shared expert (squared ReLU, not gated: up and down, 2 matrices) and the router
    assert ev.scope["arch_dense_ffn_params"] == 23 * (2 * h * shared + h * experts)


def test_gemma_4_global_layers_have_their_own_kv_geometry():
    # gemma-4-31B config.json: 50 sliding layers (window 1024) with 16 KV heads of 256, and 10
    # global layers with num_global_key_value_heads 4 of global_head_dim 512 (a key and a value
    # each in the cache). At 32,768 tokens in bf16: 50 x 1024 x 2 x 16 x 256 x 2 B
    # + 10 x 32768 x 2 x 4 x 512 x 2 B = 838,860,800 + 2,684,354,560 = 3,523,215,360 B, the figure a
    # third-party cache inspector gives for the same config (sources.yaml hf-gemma-4-31b).
    got = ask("serve gemma 4 31b bf16 32k context on h100").to_dict()["memory"]["kv_cache_gb_per_user"]
    assert got == pytest.approx(3_523_215_360 / BYTES_PER_GB, rel=1e-6)


GIB = 2 ** 30


def test_deepseek_v4_pro_cache_at_a_million_tokens_is_the_published_figure():
    # DeepSeek-V4-Pro config.json: 61 layers, one key-value head of 512 that is key and value; a raw
    # 128-token window on every layer; 30 layers with a pooled row per 4 tokens plus a 128-wide
    # indexer key, 31 with a row per 128 tokens. At 1,048,576 tokens in bf16:
    # (61 x 128 x 512 + 30 x 262,144 x 640 + 31 x 8,192 x 512) x 2 B = 10,334,371,840 B = 9.62 GiB,
    # the per-sequence figure launch coverage of the release quotes (sources.yaml hf-deepseek-v4-pro).
    got = ask("serve deepseek v4 pro bf16 1m context on 8x b200").to_dict()["memory"]["kv_cache_gb_per_user"]
    assert got * BYTES_PER_GB / GIB == pytest.approx(9.62, abs=0.01)


def test_deepseek_v4_native_checkpoint_is_fp4_experts_and_fp8_elsewhere():
    # precisions.yaml fp4-experts-fp8: routed experts at 4.25 bits (E2M1 + a UE8M0 scale per 32),
    # the embeddings and head 16-bit, the rest at 8. DeepSeek-V4-Flash config figures: 43 layers x
    # 256 experts x 3 x 4096 x 2048 = 277.0B routed-expert parameters and 2 x 129,280 x 4096 =
    # 1.06B of embeddings, of the 283.8B the figures count.
    m = KN.models["deepseek-v4-flash"]
    experts, embeddings = 43 * 256 * 3 * 4096 * 2048, 2 * 129_280 * 4096
    from tests.test_catalogue import recomputed
    share, emb = experts / recomputed(m), embeddings / recomputed(m)
    expected = m["params_total"] * (share * 4.25 / 8 + (1 - share - emb) * 1 + emb * 2) / BYTES_PER_GB
    got = ask("serve deepseek v4 flash on 8x h200").to_dict()["memory"]["breakdown"]["weights_gb"]
    assert got == pytest.approx(expected, rel=2e-3)


def test_a_sparse_attention_indexer_caches_its_own_key():
    # DeepSeek-V3.2 config.json: 61 MLA layers caching kv_lora 512 + rope 64 values, and a lightning
    # indexer whose key per token and layer is 128 FP8 values with an FP32 scale per 128 (the
    # reference inference code's k_cache float8_e4m3fn and k_scale_cache float32): 132 bytes.
    # At 131,072 tokens with a bf16 cache: 61 x 131,072 x (576 x 2 + 132) B.
    got = ask("serve deepseek-v3.2 bf16 128k context on 8x h200").to_dict()["memory"]["kv_cache_gb_per_user"]
    assert got == pytest.approx(61 * 131_072 * (576 * 2 + 132) / BYTES_PER_GB, rel=1e-6)


def test_indexshare_keeps_one_layer_of_indexer_keys_in_four():
    # GLM-5.2: GLM-5's 78 MLA layers (512 + 64 cached values each) and one DSA indexer (keys of 128)
    # for every four layers (IndexShare). At 1,048,576 tokens in bf16, with the indexer keys in the
    # KV cache's format: 78 x (576 + 128 / 4) x 2 B per token.
    got = ask("serve glm 5.2 bf16 1m context on 8x b300").to_dict()["memory"]["kv_cache_gb_per_user"]
    assert got == pytest.approx(78 * (576 + 128 / 4) * 2 * 1_048_576 / BYTES_PER_GB, rel=1e-6)


def test_mimo_v2_flash_cache_keeps_a_192_key_and_a_128_value_per_head():
    # MiMo-V2-Flash config.json: 39 sliding layers (window 128) with 8 KV heads and 9 full layers
    # with 4, each head caching a 192-wide key and a 128-wide value. At 32,768 tokens in bf16:
    # 39 x 128 x 8 x (192 + 128) x 2 B + 9 x 32768 x 4 x (192 + 128) x 2 B
    # = 25,559,040 + 754,974,720 = 780,533,760 B.
    got = ask("serve mimo v2 flash bf16 32k context on 8x h100").to_dict()["memory"]["kv_cache_gb_per_user"]
    assert got == pytest.approx(780_533_760 / BYTES_PER_GB, rel=1e-6)


def test_step_3_5_flash_cache_holds_a_512_token_window_on_three_layers_of_four():
    # Step-3.5-Flash config figures: 12 full-attention layers and 33 sliding (window 512), all with
    # 8 KV heads of 128. At 32,768 tokens in bf16: 12 x 32768 x 2 x 8 x 128 x 2 B
    # + 33 x 512 x 2 x 8 x 128 x 2 B = 1,610,612,736 + 69,206,016 = 1,679,818,752 B.
    got = ask("serve step 3.5 flash bf16 32k context on 8x h100").to_dict()["memory"]["kv_cache_gb_per_user"]
    assert got == pytest.approx(1_679_818_752 / BYTES_PER_GB, rel=1e-6)


def test_kimi_k3_caches_a_latent_on_its_mla_layers_and_keeps_a_state_in_its_delta_layers():
    # Kimi-K3 config.json: 24 MLA layers caching kv_lora_rank 512 + qk_rope_head_dim 64 = 576 values
    # per token, 69 Kimi Delta Attention layers with 96 heads of 128 (state 128 x 128 per head) and
    # a short conv of 4 over q, k and v (3 x 12,288 channels). At 1,048,576 tokens in bf16:
    # 24 x 1048576 x 576 x 2 B = 28,991,029,248 B; per KDA layer 96*128*128 + 3 x 36,864 = 1,683,456
    # values -> 69 x 1,683,456 x 2 B = 232,316,928 B.
    got = ask("serve kimi k3 bf16 1m context on 8x b200").to_dict()["memory"]["kv_cache_gb_per_user"]
    assert got == pytest.approx((28_991_029_248 + 232_316_928) / BYTES_PER_GB, rel=1e-6)


def test_nemotron_3_super_keeps_a_cache_in_8_attention_blocks_and_a_state_in_40_mamba_blocks():
    # NVIDIA-Nemotron-3-Super-120B-A12B config.json: of 88 blocks, 8 attention (2 KV heads x 128)
    # and 40 Mamba2 (128 heads x 64, state 128, 8 groups, conv 4). KV per token:
    # 8 x 2 (K, V) x 2 x 128 x 2 B = 8,192 B. State per Mamba2 block: 128*64*128 = 1,048,576
    # values + (4 - 1) x (128*64 + 2*8*128 = 10,240) = 30,720 -> 1,079,296 x 2 B.
    kv_b_per_token, state_b = 8 * 2 * 2 * 128 * 2, 40 * 1_079_296 * 2
    got = ask("serve nemotron 3 super bf16 64k context on 4x h100").to_dict()["memory"]["kv_cache_gb_per_user"]
    assert got == pytest.approx((kv_b_per_token * 65536 + state_b) / BYTES_PER_GB, rel=1e-3)


def test_minimax_m3_caches_its_block_index_keys_beside_the_kv_cache():
    # MiniMax-M3 text_config: 60 layers with 4 KV heads of 128 (a key and a value each), and a block
    # indexer of 4 index heads of 128 whose keys are cached per token (kept on all 60 layers, see
    # models.yaml). At 1,048,576 tokens in bf16: 60 x 1048576 x (2 x 4 x 128 + 4 x 128) x 2 B
    # = 193,273,528,320 B.
    got = ask("serve minimax m3 bf16 1m context on 8x b200").to_dict()["memory"]["kv_cache_gb_per_user"]
    assert got == pytest.approx(193_273_528_320 / BYTES_PER_GB, rel=1e-6)


def test_an_entry_on_an_assumed_architecture_says_so():
    # Mistral Large 3's config was not published with figures a source states; the entry takes
    # DeepSeek-V3's architecture (models.yaml architecture_from) and the answer must say so
    said = ask("serve mistral large 3 on 8x h200").to_dict()["assumptions"]
    assert any("DeepSeek-V3" in a and "architecture_from" in a for a in said)
    assert not any("architecture_from" in a for a in ask("serve kimi k3 on 8x b200").to_dict()["assumptions"])
