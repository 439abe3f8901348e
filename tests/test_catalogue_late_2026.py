"""The open-weight families and sizes added for late 2026, read by the names people type, and the
multi-token-prediction layers a checkpoint holds.

In: the loaded knowledge and kb.ask. Out: pass/fail. Each row is a name as typed, the model it must
read as, and the total parameter count its model card (or technical report) states, with the
source that states it. At bf16 the weights must be 2 bytes x that count within 20% (the issue's
bound: it holds for any reading of "total" a card may use, with or without a vision encoder or
MTP layer). tests/test_catalogue.py checks each entry's count against its own config figures
within 3% (or the card's rounding).
"""

from __future__ import annotations

import json

import pytest

from kb import ask, get_knowledge
from tests.test_catalogue_2026 import BYTES_PER_GB, _model, check_bf16_weights, check_read

KN = get_knowledge()

# (typed name, model id, the card's total parameters, source id of that figure)
MODELS = [
    ("qwen3.5 0.8b", "qwen3.5-0.8b", 0.8e9, "hf-qwen3.5-0.8b"),                     # card: 0.8B
    ("Qwen/Qwen3.5-0.8B", "qwen3.5-0.8b", 0.8e9, "hf-qwen3.5-0.8b"),
    ("qwen3.5 2b", "qwen3.5-2b", 2e9, "hf-qwen3.5-2b"),                             # card: 2B
    ("qwen 3.5 4b", "qwen3.5-4b", 4e9, "hf-qwen3.5-4b"),                            # card: 4B
    ("Qwen/Qwen3.5-4B", "qwen3.5-4b", 4e9, "hf-qwen3.5-4b"),
    ("ministral 3 14b", "ministral-3-14b", 13.9e9, "hf-ministral-3-14b"),           # 13.9B (13.5B LM + 0.4B vision)
    ("mistralai/Ministral-3-14B-Instruct-2512", "ministral-3-14b", 13.9e9, "hf-ministral-3-14b"),
    ("ministral 3 8b", "ministral-3-8b", 8.9e9, "hf-ministral-3-8b"),               # 8.9B (8.4B LM + 0.4B vision)
    ("ministral 3 3b", "ministral-3-3b", 3.8e9, "hf-ministral-3-3b"),               # card: 3.4B LM + 0.4B vision
    ("olmo 3 7b", "olmo-3-7b", 7e9, "hf-olmo-3-7b"),                                # card: 7B
    ("olmo 3 32b", "olmo-3-32b", 32e9, "hf-olmo-3-32b"),                            # card: 32B
    ("hunyuan a13b", "hunyuan-a13b", 80e9, "hf-hunyuan-a13b"),                      # card: 80B total, 13B active
    ("tencent/Hunyuan-A13B-Instruct", "hunyuan-a13b", 80e9, "hf-hunyuan-a13b"),
    ("ernie 4.5 300b a47b", "ernie-4.5-300b-a47b", 300e9, "hf-ernie-4.5-300b-a47b"),  # card: 300B total, 47B active
    ("baidu/ERNIE-4.5-300B-A47B-PT", "ernie-4.5-300b-a47b", 300e9, "hf-ernie-4.5-300b-a47b"),
    ("ernie 4.5 21b a3b", "ernie-4.5-21b-a3b", 21e9, "hf-ernie-4.5-21b-a3b"),     # card: 21B total, 3B active
    ("ling 1t", "ling-1t", 1e12, "hf-ling-1t"),                                     # card: 1T total, ~50B active
    ("inclusionAI/Ling-1T", "ling-1t", 1e12, "hf-ling-1t"),
    ("ring 1t", "ring-1t", 1e12, "hf-ring-1t"),                                     # card: 1T total
    ("ling flash 2.0", "ling-flash-2.0", 100e9, "hf-ling-flash-2.0"),               # card: 100B total, 6.1B active
    ("ling mini 2.0", "ling-mini-2.0", 16e9, "hf-ling-mini-2.0"),                   # card: 16B total, 1.4B active
    ("gemma 4 e2b", "gemma-4-e2b", 5.1e9, "hf-gemma-4-e2b"),                        # card: 5.1B with PLE, 2.3B effective
    ("gemma 4 e4b", "gemma-4-e4b", 8e9, "hf-gemma-4-e4b"),                          # card: 8B with PLE, 4.5B effective
    ("google/gemma-4-E4B-it", "gemma-4-e4b", 8e9, "hf-gemma-4-e4b"),
    ("mistral small 4", "mistral-small-4-119b", 119e9, "hf-mistral-small-4"),      # card: 119B total, 6B active
    ("mistralai/Mistral-Small-4-119B-2603", "mistral-small-4-119b", 119e9, "hf-mistral-small-4"),
    ("glm 4.7", "glm-4.7", 355e9, "hf-glm-4.7"),                                    # 355B total, 32B active (GLM-4.5's)
    ("glm 4.7 flash", "glm-4.7-flash", 30e9, "hf-glm-4.7-flash"),                   # 30B total, ~3B active
    ("zai-org/GLM-4.7-Flash", "glm-4.7-flash", 30e9, "hf-glm-4.7-flash"),
    ("minimax m2.1", "minimax-m2.1", 230e9, "hf-minimax-m2.1"),                     # M2's 230B total, 10B active
    ("qwen3 coder next", "qwen3-coder-next", 80e9, "hf-qwen3-coder-next"),          # 80B total, 3B active
    ("Qwen/Qwen3-Coder-Next", "qwen3-coder-next", 80e9, "hf-qwen3-coder-next"),
    ("trinity large", "trinity-large", 398e9, "hf-trinity-large"),                  # card: ~398B total, ~13B active
    ("arcee-ai/Trinity-Large-Thinking", "trinity-large", 398e9, "hf-trinity-large"),
    ("trinity mini", "trinity-mini", 26e9, "hf-trinity-mini"),                      # card: 26B, 3B active
    ("trinity nano", "trinity-nano", 6e9, "hf-trinity-nano"),                       # report: 6B, 1B active
    ("hy3 preview", "hy3-preview", 295e9, "hf-hy3-preview"),                        # card: 295B total, 21B active
    ("tencent/Hy3-preview", "hy3-preview", 295e9, "hf-hy3-preview"),
    ("glm 5.3", "glm-5.3", 744e9, "hf-glm-5.3"),                                    # GLM-5.2's 744B-A40B
    ("glm 5.3 flash", "glm-5.3-flash", 320e9, "hf-glm-5.3-flash"),                  # card: 320B total, 18B active
    ("zai-org/GLM-5.3-Flash", "glm-5.3-flash", 320e9, "hf-glm-5.3-flash"),
    ("mimo v2.5", "mimo-v2.5", 310e9, "hf-mimo-v2.5"),                              # card: 310B total, 15B activated
    ("mimo v2.5 pro", "mimo-v2.5-pro", 1.02e12, "hf-mimo-v2.5-pro"),                # card: 1.02T total, 42B active
    ("XiaomiMiMo/MiMo-V2.5-Pro", "mimo-v2.5-pro", 1.02e12, "hf-mimo-v2.5-pro"),
    ("mimo v2.6 flash", "mimo-v2.6-flash", 309e9, "hf-mimo-v2.6"),                  # 309B, 15B active
    ("mimo v2.6 pro", "mimo-v2.6-pro", 1.02e12, "hf-mimo-v2.6"),                    # 1.02T, 42B active
    ("deepseek v4.1 flash", "deepseek-v4.1-flash", 552e9, "hf-deepseek-v4.1-flash"),  # 552B backbone (+196B Engram)
    ("deepseek-ai/DeepSeek-V4.1-Flash", "deepseek-v4.1-flash", 552e9, "hf-deepseek-v4.1-flash"),
    ("qwen3.8 flash next", "qwen3.8-flash-next", 176e9, "hf-qwen3.8-flash-next"),    # 176B with its 51B N-gram table, 6B active
    ("Qwen/Qwen3.8-Flash-Next", "qwen3.8-flash-next", 176e9, "hf-qwen3.8-flash-next"),
    ("qwen3.8 27b", "qwen3.8-27b", 27e9, "hf-qwen3.8-27b"),                         # card: 27B dense
    ("Qwen/Qwen3.8-27B", "qwen3.8-27b", 27e9, "hf-qwen3.8-27b"),
    ("qwen3.8 2.4t a95b", "qwen3.8-2.4t-a95b", 2.4e12, "hf-qwen3.8-2.4t-a95b"),     # card: 2.4T total, 95B active
    ("qwen3.8 max", "qwen3.8-2.4t-a95b", 2.4e12, "hf-qwen3.8-2.4t-a95b"),
    ("Qwen/Qwen3.8-2.4T-A95B", "qwen3.8-2.4t-a95b", 2.4e12, "hf-qwen3.8-2.4t-a95b"),
    ("nemotron 3 ultra", "nemotron-3-ultra-550b-a55b", 550e9, "hf-nemotron-3-ultra-550b-a55b"),  # card: 550B total, 55B active
    ("nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16", "nemotron-3-ultra-550b-a55b", 550e9,
     "hf-nemotron-3-ultra-550b-a55b"),
    ("kimi linear", "kimi-linear-48b-a3b", 48e9, "hf-kimi-linear-48b-a3b"),        # card: 48B total, 3B activated
    ("moonshotai/Kimi-Linear-48B-A3B-Instruct", "kimi-linear-48b-a3b", 48e9, "hf-kimi-linear-48b-a3b"),
    ("longcat flash", "longcat-flash-chat", 560e9, "hf-longcat-flash-chat"),      # card: 560B total, 18.6-31.3B active
    ("meituan-longcat/LongCat-Flash-Chat", "longcat-flash-chat", 560e9, "hf-longcat-flash-chat"),
    # models AIConfigurator 0.12.0 sizes that the catalogue lacked; totals from their configs
    ("step 3.7 flash", "step-3.7-flash", 196.81e9, "hf-step-3.7-flash"),           # Step 3.5's 196B backbone
    ("stepfun-ai/Step-3.7-Flash-FP8", "step-3.7-flash", 196.81e9, "hf-step-3.7-flash"),
    ("nvidia/Kimi-K2.7-Code-NVFP4", "kimi-k2.7-code", 1.04e12, "hf-kimi-k2.7-code-nvfp4"),  # K2.6's 1T
    ("kimi k2.7 code", "kimi-k2.7-code", 1.04e12, "hf-kimi-k2.7-code-nvfp4"),
    ("XiaomiMiMo/MiMo-7B-Base", "mimo-7b", 7.62e9, "hf-mimo-7b-base"),             # config: 7.62B without its MTP layer
    ("mimo 7b", "mimo-7b", 7.62e9, "hf-mimo-7b-base"),
]


@pytest.mark.parametrize("words, model_id, card_total, source", MODELS)
def test_typed_name_reads_as_the_model(words, model_id, card_total, source):
    check_read(words, model_id, source)


@pytest.mark.parametrize("words, model_id, card_total, source", MODELS)
def test_bf16_weights_are_two_bytes_per_card_parameter(words, model_id, card_total, source):
    check_bf16_weights(words, card_total, "8x h200")


@pytest.mark.parametrize("words, model_id", [
    ("ministral 8b", "ministral-8b"),        # the 2024 Ministral 8B: the version 3 is part of the new name
    ("olmo 2 32b", "olmo-2-32b"),            # OLMo 2 reads as before
    ("qwen3.5 9b", "qwen3.5-9b"),
])
def test_a_version_is_part_of_the_name(words, model_id):
    assert _model(words) == model_id


def test_nemotron_3_ultra_keeps_a_cache_in_12_attention_blocks_and_a_state_in_48_mamba_blocks():
    # Megatron-LM's arguments for the HF checkpoint: pattern of 48 Mamba2, 48 MoE and 12 attention
    # blocks; 2 KV heads of 128; Mamba2 256 heads of 64, state 128 (8 groups, conv 4, as Super).
    # KV per token: 12 x 2 (K, V) x 2 x 128 x 2 B = 12,288 B. State per Mamba2 block:
    # 256*64*128 = 2,097,152 values + (4 - 1) x (256*64 + 2*8*128 = 18,432) = 2,152,448 x 2 B.
    kv_b_per_token, state_b = 12 * 2 * 2 * 128 * 2, 48 * 2_152_448 * 2
    got = ask("serve nemotron 3 ultra bf16 64k context on 8x b200").to_dict()["memory"]["kv_cache_gb_per_user"]
    assert got == pytest.approx((kv_b_per_token * 65536 + state_b) / BYTES_PER_GB, rel=1e-3)


def test_gemma_4_e4b_caches_24_of_its_42_layers_with_full_layers_of_their_own_geometry():
    # google/gemma-4-E4B-it: the last 18 layers read earlier layers' cache; of the 24 that keep one,
    # 20 slide (512 tokens, 2 KV heads of 256) and 4 are full (2 KV heads of 512). At 32k tokens in
    # bf16: 20 x 512 x 2 x 2 x 256 x 2 B + 4 x 32768 x 2 x 2 x 512 x 2 B
    expected = 20 * 512 * 2 * 2 * 256 * 2 + 4 * 32768 * 2 * 2 * 512 * 2
    got = ask("serve gemma 4 e4b bf16 32k context on l4").to_dict()["memory"]["kv_cache_gb_per_user"]
    assert got == pytest.approx(expected / BYTES_PER_GB, rel=1e-3)


def test_glm_5_3_flash_caches_a_latent_on_its_11_mla_layers_and_keeps_a_state_in_its_34_kda_layers():
    # GLM-5.3-Flash's config: 11 MLA layers with kv_lora 512 and no RoPE key (512 values per token
    # and layer), 34 KDA layers of 64 heads x 128 (state 64 x 128 x 128, conv 4 over q, k, v:
    # 3 x (64*128) values x (4 - 1)). At 128k tokens in bf16:
    kv_b = 11 * 512 * 2 * 131072
    state_b = 34 * (64 * 128 * 128 + 3 * (3 * 64 * 128)) * 2
    got = ask("serve glm 5.3 flash bf16 128k context on 8x b200").to_dict()["memory"]["kv_cache_gb_per_user"]
    assert got == pytest.approx((kv_b + state_b) / BYTES_PER_GB, rel=0.01)


@pytest.mark.parametrize("words", ["qwen3.8 27b", "glm-5.3-flash", "qwen3 coder next", "Qwen/Qwen3.8-27B"])
def test_a_precision_after_the_name_is_the_precision_not_part_of_the_name(words):
    # no alias ends in a precision ("-fp8"): "qwen3.8 27b fp8" is that model at FP8, about half its BF16 weights
    def weights(q: str) -> float:
        return float(ask(q).to_dict()["memory"]["breakdown"]["weights_gb"])
    assert weights(f"serve {words} fp8 on 8x h200") < 0.6 * weights(f"serve {words} bf16 on 8x h200")


def test_qwen_3_8_flash_next_holds_its_n_gram_table_and_never_reads_it():
    # lookup_params: the 51.2B N-gram table counts in the weights held (176B at 2 bytes), not in the
    # parameters a decode step reads (6B active)
    m = KN.models["qwen3.8-flash-next"]
    assert m["lookup_params"] == pytest.approx(51.2e9)
    got = ask("serve qwen3.8 flash next bf16 on 8x h200").to_dict()["memory"]["breakdown"]["weights_gb"]
    assert got == pytest.approx(2 * 176e9 / BYTES_PER_GB, rel=0.01)
    assert m["params_active"] < (m["params_total"] - m["lookup_params"]) / 10


def _config(tmp_path, mtp_layers: int):
    # Qwen/Qwen3.5-27B's text config (architecture fields), with its MTP layer count set
    cfg = dict(architectures=["Qwen3_5ForCausalLM"], model_type="qwen3_5_text", hidden_size=5120,
               num_hidden_layers=64, num_attention_heads=24, num_key_value_heads=4, head_dim=256,
               intermediate_size=17408, full_attention_interval=4, linear_conv_kernel_dim=4,
               linear_key_head_dim=128, linear_num_key_heads=16, linear_num_value_heads=48,
               linear_value_head_dim=128, vocab_size=248320, max_position_embeddings=262144,
               tie_word_embeddings=False, mtp_num_hidden_layers=mtp_layers)
    path = tmp_path / f"mtp{mtp_layers}" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(cfg))
    return path


def test_an_mtp_head_holds_the_layers_its_config_counts(tmp_path):
    # the MTP draft holds model.mtp_layers decoder layers of the target (rules/formulas.yaml
    # draft_head_layers): a config with 2 holds twice the weights of one with 1
    one, two = (ask("serve bf16 with mtp on h200", model_config=_config(tmp_path, n)).to_dict()["memory"]
                ["breakdown"]["other_models_gb"] for n in (1, 2))
    assert one > 0
    assert two == pytest.approx(2 * one, rel=1e-6)


def test_a_catalogue_mtp_layer_is_one_decoder_layer_beside_the_weights():
    # DeepSeek-V3's config: num_nextn_predict_layers 1 (models.yaml mtp_layers 1); the module is one
    # layer of the target's width with every expert (about 14B beside 671B, the technical report),
    # which the head counts as params / layers = 671B / 61 = 11.0B at fp8 (1 B per weight)
    assert KN.models["deepseek-v3"]["mtp_layers"] == 1
    plain = ask("serve deepseek v3 fp8 on 8x h200").to_dict()["memory"]["breakdown"]
    spec = ask("serve deepseek v3 fp8 with mtp on 8x h200").to_dict()["memory"]["breakdown"]
    assert plain["other_models_gb"] == 0
    assert spec["weights_gb"] == pytest.approx(plain["weights_gb"])
    draft_weights_gb = KN.models["deepseek-v3"]["params_total"] / 61 / BYTES_PER_GB
    assert spec["other_models_gb"] == pytest.approx(draft_weights_gb, rel=0.05)   # plus the head's KV cache


def test_a_hub_config_names_its_mtp_layers(tmp_path):
    from kb.engine.resolving.hfconfig import read
    assert read(_config(tmp_path, 3), KN).get("mtp_layers") == 3


def test_a_nemotron_h_mtp_module_counts_its_blocks(tmp_path):
    # NVIDIA-Nemotron-3-Super's config: num_nextn_predict_layers 1, mtp_layers_block_type
    # [attention, moe]: one module of two blocks, each one of the model's layers
    from kb.engine.resolving.hfconfig import read
    cfg = dict(architectures=["NemotronHForCausalLM"], model_type="nemotron_h", hidden_size=4096,
               num_hidden_layers=8, hybrid_override_pattern="MEM*EMEM", num_attention_heads=32,
               num_key_value_heads=2, head_dim=128, intermediate_size=2688, moe_intermediate_size=2688,
               n_routed_experts=16, num_experts_per_tok=4, n_shared_experts=1, mamba_num_heads=128,
               mamba_head_dim=64, ssm_state_size=128, n_groups=8, conv_kernel=4, vocab_size=131072,
               max_position_embeddings=8192, num_nextn_predict_layers=1,
               mtp_layers_block_type=["attention", "moe"])
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    assert read(path, KN).get("mtp_layers") == 2
    assert KN.models["nemotron-3-super-120b-a12b"]["mtp_layers"] == 2
