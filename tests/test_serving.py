"""Serving-side model: context that holds the work, valid parallel layouts, replicated KV under
tensor parallelism, MoE experts read under load, runtime platforms, the speed floor of capacity
answers, and honest margins. Each reference figure is derived by hand in the test (model facts
from the model's config.json as models.yaml records them) with its tolerance."""

from typing import Any

import pytest

from kb import ask, get_knowledge
from kb.engine import answer
from kb.query.parse import parse

KN = get_knowledge()


def run(query: str, **fields: Any) -> dict[str, Any]:
    """The answer to a query, with Workload fields set as another part of the query language would."""
    w = parse(query, KN)
    for name, value in fields.items():
        setattr(w, name, value)
    return answer(w, KN, query).to_dict()


def step(a: dict[str, Any], name: str) -> Any:
    return next(s["result"] for s in a["trace"] if s["rule_id"] == name)


# ---------------------------------------------------------------- 1. context holds the work

def test_a_long_prompt_grows_the_context_and_says_so() -> None:
    a = ask("serve llama-3.1-8b 1 users prompt 8k output 1k on l40s").to_dict()
    w = a["workload"]
    assert w["context_tokens"] == 8192 + 1024
    assert any("grown from 4096" in x for x in a["assumptions"])
    # Llama 3.1 8B: 32 layers × 8 KV heads × 128 × K and V × 2 B = 131,072 B per token;
    # × 9,216 tokens = 1.208 GB for the one user, who may fill it
    assert a["memory"]["breakdown"]["kv_cache_gb"] == pytest.approx(131072 * 9216 / 1e9, rel=1e-6)


def test_many_requests_hold_their_prompt_and_half_their_output() -> None:
    # the traffic's lengths are the context (not the 4,096 default), and a paged cache (vLLM's
    # PagedAttention, Kwon et al. 2023) allocates blocks as tokens are written: requests that
    # started at different times hold the prompt + half the output on average.
    a = ask("serve llama-3.1-8b 16 users prompt 8k output 1k on l40s").to_dict()
    assert a["workload"]["context_tokens"] == 8192 + 1024
    assert any("grown from 4096" in x for x in a["assumptions"])
    assert a["memory"]["breakdown"]["kv_cache_gb"] == pytest.approx(131072 * (8192 + 512) * 16 / 1e9, rel=1e-6)
    short = ask("serve llama-3.1-8b 16 users prompt 1000 output 200 on l40s").to_dict()
    assert short["workload"]["context_tokens"] == 1200          # not the 4,096 default
    assert any("the request's prompt (1000) + output (200)" in x for x in short["assumptions"])


def test_a_context_that_holds_the_work_is_kept() -> None:
    a = ask("serve llama-3.1-8b prompt 1000 output 200 32k context on l40s").to_dict()
    assert a["workload"]["context_tokens"] == 32768
    assert not any("grown" in x for x in a["assumptions"])


# ---------------------------------------------------------------- 3. valid layouts

def test_how_many_for_70b_fp16_on_4090_is_a_tensor_parallel_count() -> None:
    # 70.6B × 2 B = 141 GB; 21.6 GB usable per card (vLLM 90% of 24) → 7 cards hold it in memory,
    # but 7 does not divide Llama 3.1 70B's 64 attention heads; 8 does.
    a = ask("how many rtx 4090 for llama-3.1-70b fp16").to_dict()
    assert a["question"]["value"] == 8
    assert a["workload"]["parallel"] == {"tp": 8, "pp": 1, "dp": 1}
    assert "64 attention heads" in a["verdict"]


def test_a_layer_split_takes_any_count() -> None:
    # llama.cpp uses the whole card: 24 GiB = 25.77 GB, 0.8 GB overhead: 141.1 GB / 5 = 28.2
    # (> 25.77); / 6 = 23.5 (+0.8 = 24.3 <= 25.77) → 6, a count no tensor-parallel layout takes
    a = ask("how many rtx 4090 for llama-3.1-70b fp16 with llama.cpp").to_dict()
    assert a["question"]["value"] == 6
    assert a["workload"]["parallel"] == {"tp": 1, "pp": 6, "dp": 1}


def test_past_a_node_pipeline_stages_cross_the_network() -> None:
    a = ask("serve llama-3.1-405b fp16 on 16x h100").to_dict()
    assert a["workload"]["parallel"] == {"tp": 8, "pp": 2, "dp": 1}
    # one node boundary: 10 µs latency + 1 sequence × 16,384 hidden × 2 B / 50 GB/s (400 Gb/s IB)
    assert step(a, "pipeline_hop_s") == pytest.approx(1e-5 + 16384 * 2 / 50e9, rel=1e-9)


def test_a_named_count_that_divides_no_heads_says_its_layout() -> None:
    a = ask("serve 405B fp8 on 6x h100").to_dict()
    assert a["workload"]["parallel"] == {"tp": 2, "pp": 3, "dp": 1}     # 128 heads: 2 × 3 stages
    assert any(x.startswith("layout:") for x in a["assumptions"])


def test_tp_from_the_query_leaves_replicas() -> None:
    a = run("serve llama-3.1-8b 32 users on 8x h100", tp=4)
    assert a["workload"]["parallel"] == {"tp": 4, "pp": 1, "dp": 2}


# ---------------------------------------------------------------- 5. MLA and replicated KV

def test_mla_kv_is_whole_on_every_tensor_parallel_rank() -> None:
    # DeepSeek-R1: (512 latent + 64 RoPE) × 61 layers × 2 B = 70,272 B per token; × 32,768 = 2.303 GB
    # per user, on every one of the 8 ranks. Weights 671B at FP8 ≈ 84 GB per GPU (+1 GB overhead)
    # of 136.3 GB usable (vLLM 90% of 141 GiB = 151.4 GB): (136.3 − 84 − 1) / 2.303 ≈ 22
    a = ask("max users for deepseek-r1 fp8 on 8x h200 at 32k context").to_dict()
    assert 21 <= a["question"]["value"] <= 22
    assert a["memory"]["kv_cache_gb_per_user"] == pytest.approx(70272 * 32768 / 1e9, rel=1e-6)


def test_dp_attention_shares_the_mla_cache_out() -> None:
    plain = run("max users for deepseek-r1 fp8 on 8x h200 at 32k context")
    dp = run("max users for deepseek-r1 fp8 on 8x h200 at 32k context", dp_attention=True)
    # each rank keeps only its own requests: about 8× the users, never more
    assert 6 * plain["question"]["value"] <= dp["question"]["value"] <= 8 * (plain["question"]["value"] + 1)


def test_gqa_heads_replicate_past_one_per_rank() -> None:
    # Qwen3-30B-A3B has 4 KV heads: on tp 8 each pair of ranks holds the same head, so the cache
    # per GPU is a quarter of the whole, not an eighth
    a = ask("serve qwen3-30b-a3b 64 users on 8x h100").to_dict()
    assert step(a, "kv_tp_split") == 4
    assert step(a, "kv_cache_gb_per_gpu") == pytest.approx(a["memory"]["breakdown"]["kv_cache_gb"] / 4, rel=1e-9)


# ---------------------------------------------------------------- 4. MoE under load

@pytest.mark.parametrize("users", [1, 4, 64])
def test_moe_layers_read_more_experts_as_users_grow(users: int) -> None:
    # Mixtral 8x7B: E = 8, k = 2, 46.7B total, 12.9B active; each further expert adds
    # (46.7 − 12.9) / 6 B. Distinct experts at B tokens: 8 (1 − (1 − 2/8)^B)
    a = ask(f"serve mixtral-8x7b fp16 {users} users on 2x h100").to_dict()
    experts = 8 * (1 - 0.75 ** users)
    weights = (12.9e9 + (46.7e9 - 12.9e9) * (experts - 2) / 6) * 2 / 1e9
    assert step(a, "decode_weights_read_gb") == pytest.approx(weights, rel=1e-3)


def test_moe_per_user_speed_falls_toward_the_dense_bound() -> None:
    one = ask("serve mixtral-8x7b fp16 1 users on 2x h100").to_dict()["throughput"]["decode_tokens_per_s"]
    many = ask("serve mixtral-8x7b fp16 64 users on 2x h100").to_dict()["throughput"]["decode_tokens_per_s"]
    # at 64 users every expert is read: 93.4 GB per step over 2 × 3,350 GB/s, so per user no more
    # than the dense bound 6,700 / 93.4 = 72 tok/s (it was 108 with active experts only)
    assert many < 6700 / 93.4
    assert one > 2 * many


# ---------------------------------------------------------------- 10. runtime platforms

def test_a_named_device_the_runtime_cannot_use_switches_runtime() -> None:
    a = ask("serve llama-3.1-8b on m3 ultra with vllm").to_dict()
    assert a["workload"]["runtime"] != "vllm"
    assert "apple" in KN.runtimes[a["workload"]["runtime"]]["platforms"]
    assert any("does not run on Apple" in x for x in a["assumptions"])


def test_devices_a_runtime_cannot_use_are_no_candidates() -> None:
    a = ask("how many gpus do i need for llama 3.1 405b").to_dict()
    assert KN.gpus[a["question"]["answer"]["gpu_id"]]["vendor"] != "apple"
    b = ask("serve llama-3.1-8b with tensorrt-llm").to_dict()
    assert {KN.gpus[g["id"]]["vendor"] for g in b["gpus"]} == {"nvidia"}


# ---------------------------------------------------------------- 11. capacity under a speed floor

def test_max_users_keeps_the_speed_floor_on_the_first_ranked_card() -> None:
    a = ask("max users for llama-3.1-8b").to_dict()
    first = ask("serve llama-3.1-8b").to_dict()["gpus"][0]["id"]
    assert a["question"]["answer"]["gpu_id"] == first
    n = int(a["question"]["value"])
    assert a["throughput"]["decode_tokens_per_s"] >= 10
    assert any(x.startswith("speed floor: every user decodes at 10 tokens/s") for x in a["assumptions"])
    nxt = run(f"serve llama-3.1-8b {n + 1} users on {first}")
    assert not nxt["gpus"][0]["fits"] or nxt["throughput"]["decode_tokens_per_s"] < 10


def test_a_higher_floor_serves_fewer_users() -> None:
    low = run("max users for llama-3.1-8b on l40s")
    high = run("max users for llama-3.1-8b on l40s", speed_floor_tok_s=40.0)
    assert high["question"]["value"] < low["question"]["value"]
    assert high["throughput"]["decode_tokens_per_s"] >= 40


# ---------------------------------------------------------------- 12. honest margins

def test_no_speed_for_what_does_not_fit() -> None:
    a = ask("serve llama-3.1-70b fp16 on rtx 4090").to_dict()
    assert not a["gpus"][0]["fits"]
    assert a["throughput"]["decode_tokens_per_s"] is None and a["gpus"][0]["decode_tokens_per_s"] is None
    assert any("if it fitted" in x for x in a["warnings"])


def test_a_fit_inside_the_error_band_is_borderline() -> None:
    # Llama 3.1 8B FP16 for 10 users needs 22.7 GB of the RTX 4090's 23.2 GB usable (vLLM 90% of
    # 24 GiB = 25.77 GB): 0.46 GB to spare, less than the memory estimate's p90 error
    # (error_bands.yaml inference_memory, 4.5% of 22.7 GB = 1.0 GB)
    band = KN.error_bands["kinds"]["inference_memory"]["p90_pct"]
    a = ask("serve llama-3.1-8b fp16 10 users on rtx 4090").to_dict()
    assert a["gpus"][0]["headroom_gb"] < a["memory"]["per_gpu_gb"] * band / 100
    assert "Borderline" in a["verdict"] and f"{band:g}%" in a["verdict"]
    roomy = ask("infer 7B fp16 on h100").to_dict()
    assert "Borderline" not in roomy["verdict"]


def test_giant_moe_decode_on_a_node_matches_published_measurements() -> None:
    # InferenceX issue #870 (https://github.com/SemiAnalysisAI/InferenceX/issues/870): DeepSeek-R1
    # FP8 on 8× H200 with SGLang v0.5.7, TP 8, 1k in / 1k out: mean TPOT 12.8 ms at 8 users and
    # 25.6 ms at 32 (the 32-user point is held out of the fit). Tolerance 15% (the decode band's
    # p90 is 22%). SGLang 0.4.1's release-day figures on the same node (PR #2643: 30.29 tok/s at
    # batch 1, 206.32 in all at 8) are superseded: the same step at 8 users now takes a third.
    eight = ask("serve deepseek-r1 fp8 8 users prompt 1024 output 1024 on 8x h200 with sglang").to_dict()
    assert eight["throughput"]["decode_tokens_per_s"] == pytest.approx(1000 / 12.8, rel=0.15)
    many = ask("serve deepseek-r1 fp8 32 users prompt 1024 output 1024 on 8x h200 with sglang").to_dict()
    assert many["throughput"]["decode_tokens_per_s"] == pytest.approx(1000 / 25.6, rel=0.15)
    # far below the bandwidth bound: 37B active at 1 byte over 8 × 4.8 TB/s is about 1,000 tok/s
    assert eight["throughput"]["decode_tokens_per_s"] < 8 * 4800 / 37 / 5


@pytest.mark.parametrize("query, measured", [
    # llama.cpp issue #13652 (https://github.com/ggml-org/llama.cpp/issues/13652): Qwen3-30B-A3B
    # Q4_0 on an A10, llama-bench tg128 103.50 t/s (held out of the fit)
    ("infer qwen3-30b-a3b q4_0 on a10 with llama.cpp output 128 context 128", 103.50),
    # llama.cpp PR #15525 (https://github.com/ggml-org/llama.cpp/pull/15525): DeepSeek-V2-Lite Q4_0
    # on an RTX 3090, one token per step, 180.53 t/s (held out of the fit)
    ("serve deepseek-v2-lite q4_0 1 users prompt 1 output 512 on rtx 3090 with llama.cpp", 180.53),
])
def test_moe_decode_on_one_gpu_matches_published_measurements(query: str, measured: float) -> None:
    # tolerance 20%: the decode band's p90 is 22%
    assert ask(query).to_dict()["throughput"]["decode_tokens_per_s"] == pytest.approx(measured, rel=0.20)
