"""The model catalogue (rules/models.yaml) against its own config figures and sources.

In: the loaded knowledge. Out: pass/fail. The parameter count is recomputed here by hand from
each model's config.json figures (embeddings, attention with GQA/MLA, gated or plain MLP,
routed/shared experts and routers, Mamba2 / Gated DeltaNet mixers, norms), independently of
rules/formulas.yaml, and compared with the count of the model card within 3%.
"""

from __future__ import annotations

from typing import Any

import pytest

from kb import get_knowledge

KN = get_knowledge()
TOLERANCE = 0.03        # the bound on config figures vs the published count


def _attention(m: dict[str, Any]) -> float:
    h, heads = m["hidden_size"], m["attention_heads"]
    mla = m.get("mla")
    if mla:
        qk = mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"]
        q = (h * mla["q_lora_rank"] + mla["q_lora_rank"] * heads * qk if mla.get("q_lora_rank")
             else h * heads * qk)
        kv = h * (mla["kv_lora_rank"] + mla["qk_rope_head_dim"]) \
            + mla["kv_lora_rank"] * heads * (mla["qk_nope_head_dim"] + mla["v_head_dim"])
        return q + kv + heads * mla["v_head_dim"] * h
    hd = m["head_dim"]
    ca = m.get("compressed_attention")
    if ca:      # DeepSeek V4: low-rank q; one shared key-value projection; grouped low-rank output
        q = h * ca["q_lora_rank"] + ca["q_lora_rank"] * heads * hd
        o = heads * hd * ca["o_lora_rank"] + ca["o_groups"] * ca["o_lora_rank"] * h
        return q + h * m["kv_heads"] * hd + o
    return 2 * h * heads * hd + 2 * h * m["kv_heads"] * hd     # q, o + k, v


def _global_attention(m: dict[str, Any]) -> float:
    """One of Gemma 4's full-attention layers: q and o at global_head_dim, k (and v unless
    attention_k_eq_v) on num_global_key_value_heads."""
    g, h = m["global_attention"], m["hidden_size"]
    return 2 * h * m["attention_heads"] * g["head_dim"] + (1 if g.get("shared_kv") else 2) * h * g["kv_heads"] * g["head_dim"]


def _mlp(m: dict[str, Any], width: int) -> float:
    return (3 if m.get("mlp", "gated") == "gated" else 2) * m["hidden_size"] * width


def _recurrent(m: dict[str, Any]) -> float:
    """One Mamba2 / Gated DeltaNet mixer: input projection (x, z, B/C or k, heads' gates), conv, output."""
    r, h = m["recurrent"], m["hidden_size"]
    inner = r["heads"] * r["head_dim"]
    conv = inner + 2 * r["groups"] * r["state_dim"]
    return h * (inner + conv + r["heads"]) + conv * r["conv_kernel"] + inner * h


def _ffn(m: dict[str, Any], active: bool) -> float:
    moe = m.get("moe")
    if not moe:
        return m["layers"] * _mlp(m, m["intermediate_size"])
    h = m["hidden_size"]
    moe_layers = moe.get("moe_layers") or m["layers"]
    routed = moe["experts_per_token"] if active else moe["experts"]
    shared = moe.get("shared_experts", 0) * _mlp(m, moe.get("shared_expert_intermediate_size") or m["intermediate_size"])
    per_moe_layer = routed * _mlp(m, m["intermediate_size"]) + shared + h * moe["experts"]
    dense_layers = m["layers"] - moe_layers if moe.get("dense_layers") is None else moe["dense_layers"]
    dense = dense_layers * _mlp(m, moe.get("dense_intermediate_size") or m["intermediate_size"])
    return moe_layers * per_moe_layer + dense


def _per_layer_tables(m: dict[str, Any]) -> float:
    """Gemma 3n: every layer has its own lookup table of vocab_size_per_layer_input × hidden_size_per_layer_input."""
    ple = m.get("per_layer_embedding")
    return m["layers"] * ple["vocab_size"] * ple["width"] if ple else 0


def _per_layer_projections(m: dict[str, Any]) -> float:
    """Gemma 3n: the model-wide projection to every layer's input (h × layers·width) and each layer's gate and
    projection back (2 · h · width) -- matmuls every token runs, unlike the tables."""
    ple = m.get("per_layer_embedding")
    return 3 * m["layers"] * m["hidden_size"] * ple["width"] if ple else 0


def _cached_global(m: dict[str, Any]) -> int:
    """Full-attention layers among those with their own KV cache: the ones that do not slide."""
    cached = m["layers"] if m.get("attention_layers") is None else m["attention_layers"]
    return cached - (m.get("sliding_window_layers") or 0)


def _shared_global(m: dict[str, Any]) -> int:
    """Full-attention layers among those that read another layer's KV cache (Gemma 4 E2B/E4B): they
    keep the sliding/full pattern, so the same share of them is full."""
    if not m.get("global_attention") or not m.get("kv_shared_layers"):
        return 0
    cached = m["layers"] if m.get("attention_layers") is None else m["attention_layers"]
    return round(m["kv_shared_layers"] * _cached_global(m) / cached)


def recomputed(m: dict[str, Any], active: bool = False) -> float:
    h = m["hidden_size"]
    attention_layers = m["layers"] if m.get("attention_layers") is None else m["attention_layers"]
    # layers that read another layer's KV cache still hold their own attention projections
    attention_layers += m.get("kv_shared_layers") or 0
    state_layers = (m.get("recurrent") or {}).get("layers", 0)
    embed = m["vocab_size"] * h + _per_layer_tables(m)
    head = 0 if m.get("tie_embeddings") else m["vocab_size"] * h
    counted = m.get("active_embeddings", "both") if active else "both"
    if counted != "both":        # the card's active count leaves out the input embeddings (and the head)
        embed = 0
        head = head if counted == "output" else 0
    global_layers = _cached_global(m) + _shared_global(m) if m.get("global_attention") else 0
    mixers = (attention_layers - global_layers) * _attention(m) + (global_layers * _global_attention(m) if global_layers else 0) \
        + (state_layers * _recurrent(m) if state_layers else 0)
    # the card counts an encoder in both figures, unless its active count is the decoder core alone
    encoder = 0 if counted == "none" else m.get("encoder_params") or 0
    # lookup-only tables (Engram, N-gram embeddings) count in the total, never in the active count
    lookup = 0 if active else m.get("lookup_params") or 0
    return mixers + _per_layer_projections(m) + _ffn(m, active) + m["layers"] * 2 * h + h + embed + head + encoder + lookup


def test_recompute_by_hand_llama_3_1_8b():
    # Llama 3.1 8B, hand derivation from its config.json (h 4096, 32 layers, 32/8 heads × 128,
    # FFN 14336, vocab 128256, untied): attention 2·4096·4096 + 2·4096·1024 = 41,943,040;
    # MLP 3·4096·14336 = 176,160,768; norms 8192 → 218,112,000 per layer × 32 = 6,979,584,000;
    # embeddings 2·128256·4096 = 1,050,673,152; final norm 4096 → 8,030,261,248 (the card: 8.03B).
    assert recomputed(KN.models["llama-3.1-8b"]) == 8_030_261_248


def test_recompute_by_hand_deepseek_v3_mla():
    # DeepSeek-V3 config (h 7168, 128 heads, q_lora 1536, kv_lora 512, rope 64, nope 128, v 128):
    # per-layer MLA = 7168·1536 + 1536·128·192 + 7168·576 + 512·128·256 + 128·128·7168 = 187,107,328
    m = KN.models["deepseek-v3"]
    assert _attention(m) == 7168 * 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 * 128 * 256 + 128 * 128 * 7168 == 187_105_280


def test_recompute_by_hand_falcon_h1_parallel_hybrid():
    # Falcon-H1-0.5B config (h 1024, 36 layers, 8/2 heads × 64, MLP 2048, vocab 32784 untied; Mamba2
    # 24 heads × 64 = d_ssm 1536, d_state 128, 1 group, conv 4), attention and Mamba2 in every layer:
    # attention 2·1024·512 + 2·1024·128 = 1,310,720; Mamba2 in_proj 1024·(1536 + 1792 + 24) = 3,432,448,
    # conv 1792·4 = 7,168, out 1536·1024 = 1,572,864; MLP 3·1024·2048 = 6,291,456; norms 2,048
    # → 12,616,704 per layer × 36 = 454,201,344; embeddings 2·32784·1024 = 67,141,632; final norm 1,024
    assert recomputed(KN.models["falcon-h1-0.5b"]) == 521_344_000


def test_recompute_by_hand_falcon_h1_34b():
    # Falcon-H1-34B-Instruct config.json (h 5120, 72 layers, 20/4 heads × 128, MLP 21504, vocab 261120
    # untied; Mamba2 32 heads × 128 = d_ssm 4096, d_state 256, 2 groups, conv 4), both mixers in every layer:
    # attention 2·5120·2560 + 2·5120·512 = 31,457,280; Mamba2 in_proj 5120·(4096 + 5120 + 32) = 47,349,760,
    # conv 5120·4 = 20,480, out 4096·5120 = 20,971,520; MLP 3·5120·21504 = 330,301,440; norms 10,240
    # → 430,110,720 per layer × 72 = 30,967,971,840; embeddings 2·261120·5120 = 2,673,868,800; final norm 5,120
    m = KN.models["falcon-h1-34b"]
    assert recomputed(m) == 33_641_845_760
    assert recomputed(m) == pytest.approx(34e9, rel=0.03)        # the card's "34B"


def test_recompute_by_hand_gemma_3n_e2b_effective():
    # gemma-3n-E2B text_config (h 2048, 30 layers, 8/2 heads × 256, MLP 8192, per-layer inputs 256):
    # attention 2·2048·2048 + 2·2048·512 = 10,485,760 on all 30 layers (the 10 KV-sharing ones keep their
    # projections); MLP 3·2048·8192 = 50,331,648; norms 4,096; per-layer projections 3·30·2048·256
    # = 47,185,920; final norm 2,048 → 1,871,833,088, 2.0% under Google's 1.91B effective (AltUp, LAuReL
    # and the extra norms are left out); no embedding table counts in the effective figure.
    assert recomputed(KN.models["gemma-3n-e2b"], active=True) == 1_871_833_088
    assert recomputed(KN.models["gemma-3n-e2b"], active=True) == pytest.approx(1.91e9, rel=0.03)


@pytest.mark.parametrize("model_id", sorted(KN.models))
def test_parameter_count_matches_config_figures(model_id):
    m = KN.models[model_id]
    # a card that states "3B activated" is exact only to its rounding; card_rounding says so
    rel = max(TOLERANCE, m.get("card_rounding") or 0)
    assert recomputed(m) == pytest.approx(m["params_total"], rel=rel), "total"
    assert recomputed(m, active=True) == pytest.approx(m["params_active"], rel=rel), "active"


@pytest.mark.parametrize("model_id", sorted(KN.models))
def test_every_model_has_a_config_source(model_id):
    m = KN.models[model_id]
    src = KN.sources[m["source"]]
    assert src["kind"] in ("model-card", "paper", "documentation"), src
    if m.get("native_precision"):
        assert m["native_precision"] in KN.precisions
        assert m.get("native_source") in KN.sources


def test_catalogue_size_and_required_families():
    assert len(KN.models) >= 120
    for needed in ("llama-4-scout", "llama-4-maverick", "deepseek-v3.1", "deepseek-v3.2", "kimi-k2",
                   "deepseek-r1-distill-qwen-1.5b", "deepseek-r1-distill-llama-70b",
                   "qwen3-next-80b-a3b-instruct", "qwen3-coder-480b-a35b", "qwen3-coder-30b-a3b",
                   "glm-4.5", "glm-4.6", "glm-4.5-air", "minimax-m2", "mistral-small-3.2-24b",
                   "magistral-small", "devstral-small", "codestral-22b", "gemma-3-1b", "phi-4-mini",
                   "phi-4-reasoning", "command-a", "command-r-plus", "granite-4.0-h-micro", "olmo-2-32b",
                   "smollm3-3b", "gpt-oss-20b"):
        assert needed in KN.models, needed


def test_hybrid_layers_add_up():
    for m in KN.models.values():
        attention = m["layers"] if m.get("attention_layers") is None else m["attention_layers"]
        state = (m.get("recurrent") or {}).get("layers", 0)
        assert attention <= m["layers"] and (m.get("sliding_window_layers") or 0) <= attention, m["id"]
        shared = m.get("kv_shared_layers") or 0     # attend over an earlier layer's KV cache
        moe = m.get("moe") or {}
        if moe.get("dense_layers") is not None:      # blocks are a mixer or an FFN, not both (Nemotron-H)
            ffn_blocks = (moe.get("moe_layers") or m["layers"]) + moe["dense_layers"]
            assert attention + state + ffn_blocks == m["layers"], m["id"]
            continue
        assert attention + state + shared >= m["layers"], m["id"]     # every layer mixes tokens somehow


# ---------------------------------------------------------------- kbq models

def _models(*args: str) -> Any:
    """`kbq models ARGS` through kb.cli.main, its exit code and its stdout and stderr as output."""
    import contextlib
    import io
    from types import SimpleNamespace

    from kb.cli.main import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = main(["models", *args])
    return SimpleNamespace(exit_code=code, output=out.getvalue())


def test_models_search_matches_ids_names_and_aliases():
    import json

    got = [m["id"] for m in json.loads(_models("--search", "Llama-4-Scout-17B-16E-Instruct", "--json").output)]
    assert got == ["llama-4-scout"]
    got = [m["id"] for m in json.loads(_models("--search", "qwen3 next", "--json").output)]
    assert got == ["qwen3-next-80b-a3b-instruct", "qwen3-next-80b-a3b-thinking"]


def test_models_moe_and_min_context_filter():
    import json

    items = json.loads(_models("--moe", "--min-context", "256k", "--json").output)
    assert items and all(m["moe"] and m["max_context"] >= 262144 for m in items)
    assert "kimi-k2-0905" in [m["id"] for m in items] and "kimi-k2" not in [m["id"] for m in items]
    dense = {m["id"] for m in json.loads(_models("--json").output) if not m["moe"]}
    assert "llama-3.1-8b" in dense and not dense & {m["id"] for m in items}


def test_models_order_is_stable_and_json_carries_every_field():
    import json

    items = json.loads(_models("--json").output)
    assert [(m["family"], m["params_total"], m["id"]) for m in items] == sorted(
        (m["family"], m["params_total"], m["id"]) for m in items)
    fields = set(items[0])
    assert {"native_precision", "recurrent", "attention_layers", "local_attention", "moe", "mla"} <= fields
    assert all(set(m) == fields for m in items)


def test_models_families_groups_every_model_once():
    import json

    groups = json.loads(_models("--families", "--json").output)
    ids = [i for members in groups.values() for i in members]
    assert sorted(ids) == sorted(KN.models) and list(groups) == sorted(groups)
    assert "command-a" in groups["cohere"]


def test_models_bad_min_context_is_a_usage_error():
    r = _models("--min-context", "lots")
    assert r.exit_code == 2 and "not a token count" in r.output


@pytest.mark.parametrize("model_id", sorted(i for i, m in KN.models.items() if not m.get("mla")))
def test_arch_formulas_agree_with_the_hand_count(model_id):
    # rules/formulas.yaml arch_params_* (what --model-config uses) against the count above
    from kb.engine import Evaluated, base_scope, evaluate, resolve_workload
    from kb.query.workload import Workload

    m = KN.models[model_id]
    ev = Evaluated(base_scope(resolve_workload(Workload(model_id=model_id), KN), KN))
    evaluate(KN, ev, ["arch_params_total"])
    # the arch formulas count the decoder that a config.json's core fields describe: no encoders, no
    # per-layer embedding tables, and attention projections only on the layers with their own KV cache
    shared_global = _shared_global(m)
    shared = ((m.get("kv_shared_layers") or 0) - shared_global) * _attention(m) \
        + (shared_global * _global_attention(m) if shared_global else 0)
    outside = (m.get("encoder_params") or 0) + (m.get("lookup_params") or 0) + _per_layer_tables(m) + _per_layer_projections(m) + shared
    assert ev.scope["arch_params_total"] == pytest.approx(recomputed(m) - outside, rel=1e-6)


def test_lora_adapters_of_a_plain_mlp_have_no_gate():
    """Falcon-7B's MLP is plain (dense_h_to_4h, then GELU, then dense_4h_to_h: no gate projection):
    a rank-16 LoRA on every linear layer wraps q, k, v, o and the two MLP matrices, each with
    A (d_in x r) and B (r x d_out). Its config: 32 layers, hidden 4,544, MLP 18,176, 71 query
    heads and 1 KV head of 64."""
    from kb.engine import Evaluated, base_scope, evaluate, resolve_workload
    from kb.query.parse import parse

    r = resolve_workload(parse("lora falcon-7b rank 16", KN), KN)
    ev = Evaluated(base_scope(r, KN))
    evaluate(KN, ev, ["lora_params"])
    h, i, layers = 4544, 18176, 32
    by_hand = 16 * layers * (4 * h + 2 * 1 * 64 + 2 * 71 * 64 + 2 * (h + i))
    assert ev.scope["lora_params"] == pytest.approx(by_hand, rel=1e-9)
