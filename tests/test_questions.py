"""Capacity and reverse sizing answers agree with the forward answer; models from config.json."""

import json
from pathlib import Path

import pytest

from kb import ask, get_knowledge

KN = get_knowledge()
DATA = Path(__file__).parent / "data"


def fits(query):
    return ask(query).to_dict()["gpus"][0]["fits"]


def test_max_users_fits_and_one_more_does_not():
    a = ask("max users for 70B int4 on h200 at 32k context").to_dict()
    n = int(a["question"]["value"])
    assert n >= 1
    assert fits(f"serve 70B int4 {n} users 32k context on h200")
    assert not fits(f"serve 70B int4 {n + 1} users 32k context on h200")
    # the answer's own figures are those of the workload at n users
    assert a["workload"]["users"] == n and a["gpus"][0]["fits"]


def test_max_users_by_hand():
    # 70B int4 = 37.19 GB weights; Llama-3.1-70B KV at 32,768 tokens = 327,680 B × 32,768 = 10.74 GB
    # per user; H200 "141GB" is 141 GiB = 141 × 2^30 B = 151.40 GB (nvidia-smi shows 143,771 MiB,
    # 150.8 GB), of which vLLM (the default serving runtime) takes 90% = 136.26 GB.
    # (136.26 − 37.19 − 1 GB overhead − ~0.6 GB activations) / 10.74 ≈ 9.07 → 9
    a = ask("max users for 70B int4 on h200 at 32k context").to_dict()
    assert a["question"]["value"] == 9
    # llama.cpp takes no such share: (151.40 − 37.19 − 0.8 − 0.6) / 10.74 ≈ 10.5 → 10
    b = ask("max users for 70B int4 on h200 at 32k context with llama.cpp").to_dict()
    assert b["question"]["value"] == 10


def test_max_context_agrees_with_forward():
    a = ask("max context for llama-3.1-8b fp16 on rtx 4090").to_dict()
    n = int(a["question"]["value"])
    # a max-context answer is prompt + output: the default 256-token output, the rest prompt
    w = a["workload"]
    assert (w["context_tokens"], w["prompt_tokens"], w["output_tokens"]) == (n, n - 256, 256)
    assert fits(f"infer llama-3.1-8b fp16 prompt {n - 256} output 256 on rtx 4090")
    assert not fits(f"infer llama-3.1-8b fp16 prompt {n + 1 - 256} output 256 on rtx 4090")


def test_largest_model_for_24gb_int4():
    a = ask("largest model for 24GB int4").to_dict()
    value = a["question"]["value"]
    # int4 at 4.25 bits: 24 GB less ~1 GB overhead and the KV cache holds ~40B parameters
    assert 30e9 < value < 45e9
    assert fits(f"infer {value / 1e9:.3g}B int4 on 24GB")


def test_how_many_gpus():
    a = ask("how many h100 for 405B fp8").to_dict()
    n = a["question"]["value"]
    # 405B at 1 byte = 405 GB; 80 GB cards (72 GB to vLLM) with 1 GB overhead each → 6 hold it in
    # memory, but tensor parallelism must divide the 128 attention heads inside a node of 8:
    # 6 and 7 do not, so the smallest valid layout is tp 8.
    assert n == 8
    assert a["workload"]["parallel"] == {"tp": 8, "pp": 1, "dp": 1}
    assert fits(f"serve 405B fp8 on {int(n)}x h100")
    assert fits(f"serve 405B fp8 on {int(n) - 2}x h100")   # memory alone would allow 6


def test_which_gpu_ranks_fitting_first():
    a = ask("which gpu for 13B lora", sort="speed").to_dict()
    flags = [g["fits"] for g in a["gpus"]]
    assert flags == sorted(flags, reverse=True)          # every fitting GPU before any that does not
    # --sort speed ranks by fits, within budget, suits the job (prices.yaml advice.sorts), then speed:
    # among the cards that suit the training job
    fitting = [g for g in a["gpus"] if g["fits"] and g["within_budget"] and g["suits_job"]]
    speeds = [g["train_tokens_per_s"] for g in fitting]
    known = [s for s in speeds if s is not None]
    assert speeds == known + [None] * (len(speeds) - len(known))   # a speed it cannot compute: last
    assert known == sorted(known, reverse=True)          # --sort speed: fastest first


def test_moe_speed_from_active_parameters():
    dense = ask("infer 47B q4_k_m on 2x rtx 3090").to_dict()
    moe = ask("mixtral 8x7b q4_k_m on 2x 3090").to_dict()
    # same total weights (46.7B vs 47B), but a Mixtral decode step reads 12.9B parameters
    assert moe["memory"]["breakdown"]["weights_gb"] == pytest.approx(
        dense["memory"]["breakdown"]["weights_gb"], rel=0.02)
    assert moe["throughput"]["decode_tokens_per_s"] > 2.5 * dense["throughput"]["decode_tokens_per_s"]


def test_fp8_kv_cache_halves_the_kv_cache():
    a = ask("serve 70B int4 16 users").to_dict()["memory"]["breakdown"]["kv_cache_gb"]
    b = ask("serve 70B int4 16 users fp8 kv cache").to_dict()["memory"]["breakdown"]["kv_cache_gb"]
    assert b == pytest.approx(a / 2, rel=1e-3)


def test_model_config_json():
    # Llama-3.1-8B's published config: the parameter count from the architecture is 8.03B
    a = ask("serve int4 16 users on rtx 4090", model_config=DATA / "llama-3.1-8b-config.json").to_dict()
    assert a["workload"]["params"] == pytest.approx(8.03e9, rel=0.005)
    assert any("config.json" in x for x in a["assumptions"])
    same = ask("serve llama-3.1-8b int4 16 users on rtx 4090").to_dict()
    assert a["memory"]["breakdown"]["kv_cache_gb"] == pytest.approx(same["memory"]["breakdown"]["kv_cache_gb"])


def test_model_config_errors_are_clear(tmp_path):
    from kb.errors import KbError

    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(KbError, match="not a JSON config"):
        ask("serve int4", model_config=bad)
    good = json.loads((DATA / "llama-3.1-8b-config.json").read_text())
    for key, value in (("hidden_size", "1e999"), ("hidden_size", "1e300"), ("num_attention_heads", "0"),
                       ("num_hidden_layers", "NaN"), ("vocab_size", "-Infinity")):
        text = json.dumps(dict(good, **{key: 0})).replace(f'"{key}": 0', f'"{key}": {value}')
        bad.write_text(text)
        with pytest.raises(KbError, match="config.json"):
            ask("serve int4", model_config=bad)


@pytest.mark.parametrize("model_id", ["llama-2-7b", "llama-3.1-8b", "llama-3.1-70b", "mistral-7b-v0.1",
                                      "mixtral-8x7b", "gemma-2-9b", "qwen2.5-7b"])
def test_architecture_formula_reproduces_published_counts(model_id):
    # published parameter counts (model cards) vs arch_params_total on the config values
    from kb.engine import Evaluated, base_scope, evaluate, resolve_workload
    from kb.query.workload import Workload

    r = resolve_workload(Workload(model_id=model_id), KN)
    ev = Evaluated(base_scope(r, KN))
    evaluate(KN, ev, ["arch_params_total"])
    assert ev.scope["arch_params_total"] == pytest.approx(KN.models[model_id]["params_total"], rel=0.01)
