"""The engine: flows walked on representative workloads, the answer contract, the seeds' claims."""

import math

import pytest

from kb import ask, get_knowledge

KN = get_knowledge()
KEYS = {"query", "workload", "assumptions", "memory", "throughput", "bottleneck", "gpus",
        "verdict", "path", "trace", "disagreements", "warnings"}


def ends(answer, flow):
    return [p for p in answer["path"] if p.startswith(flow + "/")][-1]


# Each row: a workload and the leaf the article's flowchart gives for it (by reading the chart).
@pytest.mark.parametrize("query, flow, leaf", [
    ("full fine-tune 7B", "compute_or_bandwidth", "D"),
    ("qlora 13B", "compute_or_bandwidth", "E"),
    ("infer 7B fp16 on rtx 4090", "compute_or_bandwidth", "G"),           # batch 1: decode AI ≈ 1
    ("prefill 8k tokens 7B fp16 on h100", "compute_or_bandwidth", "I"),
    # which_gpu branches on kbq's memory (20 GB, the RTX 4000 Ada), not on the article's sizes
    ("full fine-tune 1B with 8bit adam", "which_gpu", "FT_SMALL"),         # 17.9 GB
    ("full fine-tune 3B", "which_gpu", "FT_LARGE"),                         # over 20 GB with AdamW
    ("qlora 7B", "which_gpu", "QL_SMALL"),
    ("qlora 13B", "which_gpu", "QL_SMALL"),                                 # 11 GB, not the article's 20-30
    ("qlora 34B", "which_gpu", "QL_LARGE"),
    ("infer 7B int4", "which_gpu", "INF_SMALL"),                          # ~4 GB + KV
    ("infer 13B fp16", "which_gpu", "INF_LARGE"),                         # ~26 GB weights
    ("infer 34B fp16", "which_gpu", "INF_MULTI"),                         # 48-96 GB
    ("infer 13B fp16 1 users", "hardware_tree", "inference_small"),
    ("serve 70B int4 64 users", "hardware_tree", "inference_scale"),
    ("qlora 70B", "hardware_tree", "lora_both"),
    ("full fine-tune 70B", "hardware_tree", "full_ft_70b"),
    ("full fine-tune 13B", "hardware_tree", "full_ft_workstation"),
    ("pretrain 7B", "hardware_tree", "scratch"),
    ("serve 70B int4 on h100", "sizing", "fits_verdict"),
    ("serve 70B fp16 on h100", "sizing", "no_fit_verdict"),
    ("serve 70B int4", "sizing", "ranked_verdict"),
    ("full fine-tune 405B with ddp", "sizing", "replicas_any_verdict"),     # ddp: a copy on every GPU
    ("serve 405B fp16 128k context 32 users", "sizing", "none_fit_verdict"),
    # 2.147 GB of KV cache per user (Llama 2 7B shape, 4k context): 999,999 users need more than
    # 4,096 of even the largest card (512 GB); 200,000 users (429,000 GB) need more than 4,096
    # 16 GB cards but fewer 192 GB ones (about 2,240)
    ("serve 7B 999999 users on h100", "sizing", "beyond_count_verdict"),
    ("serve 7B 999999 users", "sizing", "beyond_any_verdict"),
    ("serve 7B 200000 users", "sizing", "beyond_first_verdict"),
])
def test_flows_reach_the_expected_leaf(query, flow, leaf):
    assert ends(ask(query).to_dict(), flow) == f"{flow}/{leaf}"


@pytest.mark.parametrize("query", ["infer 70B fp16", "serve 405B fp8 on 8x h200", "full fine-tune 7B"])
def test_a_flowchart_that_does_not_apply_is_left_out(query):
    # the RTX 4000 Ada vs RTX 6000 Ada chooser (flows/which_gpu.yaml applies) is about jobs two
    # 48 GB cards can hold; these need more than 96 GB
    a = ask(query).to_dict()
    assert a["memory"]["total_gb"] > 96
    assert not any(p.startswith("which_gpu/") for p in a["path"])
    assert all(adv["flow"] != "which_gpu" for adv in a["advice"])


def test_a_seed_outcome_kbq_does_not_share_is_a_disagreement():
    # 70B int4 for 16 users: 60 GB, one workstation card holds it; the five-way tree (001) ends
    # at an SXM server, so the answer lists that under the disagreements with kbq's card
    a = ask("serve 70B int4 16 users").to_dict()
    assert ends(a, "hardware_tree") == "hardware_tree/inference_scale"
    seed = [d for d in a["disagreements"] if d["id"] == "hardware_tree/inference_scale"]
    assert seed and a["gpus"][0]["name"] in seed[0]["note"] and not seed[0]["agrees"]
    ok = ask("serve 70B int4 64 users on 2x h100").to_dict()   # a server it is: no disagreement
    assert not [d for d in ok["disagreements"] if d["id"].startswith("hardware_tree/")]


def test_every_node_of_every_flow_is_walked_by_some_query():
    queries = ["full fine-tune 7B", "qlora 13B", "qlora 7B", "infer 7B fp16 on rtx 4090",
               "prefill 8k tokens 7B fp16 on h100", "serve 70B int4 256 users 1k context on h100",
               "full fine-tune 3B", "infer 7B int4", "infer 13B fp16", "infer 70B fp16",
               "infer 13B fp16 1 users", "serve 70B int4 64 users", "qlora 70B",
               "full fine-tune 70B", "full fine-tune 13B", "pretrain 7B", "serve 70B int4 on h100",
               "serve 70B fp16 on h100", "serve 70B int4", "full fine-tune 405B with ddp", "serve 7B on 1GB",
               "serve llama-3.1-8b int4 2048 users 256 context prompt 32 output 224 fp8 kv cache on h100",
               "full fine-tune 70B on 16x h100 ddp", "serve 7B 999999 users on h100",
               "serve 7B 999999 users", "serve 7B 200000 users", "full fine-tune 1B with 8bit adam",
               "qlora 34B", "infer 34B fp16", "serve 405B fp16 128k context 32 users",
               "qwen3 30b a3b q4_k_m on a rtx 3060 12gb --n-cpu-moe 24 with 64gb ddr5"]
    seen = set()
    for q in queries:
        seen.update(ask(q).to_dict()["path"])
    every = {f"{f.id}/{n}" for f in KN.flows for n in f.nodes}
    assert every - seen == set()


def test_answer_contract_for_serve_70b_int4_16_users():
    a = ask("serve 70B int4 16 users").to_dict()
    assert KEYS <= set(a)
    b = a["memory"]["breakdown"]
    assert 35 <= b["weights_gb"] <= 40                      # the range
    assert b["kv_cache_gb"] > 0
    assert a["memory"]["total_gb"] == pytest.approx(sum(b.values()), rel=1e-4)
    rows = {g["id"]: g for g in a["gpus"]}
    small = rows["rtx-4000-ada"]                             # 20 GB: one card does not hold it,
    assert small["gpus_needed"] > 1                          # so the table judges the fewest that do
    assert small["count"] == small["gpus_needed"]
    for gid in ("h100-sxm5", "a100-sxm4-80gb"):             # 80 GB-class GPUs are judged
        assert rows[gid]["fits"] is True
    for s in a["trace"]:
        assert s["formula"] and s["source"], s


def test_full_fine_tune_7b_disagrees_with_77gb():
    a = ask("full fine-tune 7B").to_dict()
    ids = {d["id"]: d for d in a["disagreements"]}
    assert "7b-full-ft-77gb" in ids
    d = ids["7b-full-ft-77gb"]
    assert d["claimed"] == 77 and d["computed"] > 112 and d["note"]
    assert d["source"] == "000_1ca19009ae21ed7e"


def test_decode_ratio_follows_bandwidth_not_tflops():
    # 000: RTX 6000 Ada / RTX 4000 Ada = 960/360 = 2.67× bandwidth vs 3.41× FP32 TFLOPS
    a = ask("infer 7B fp16 on rtx 4000 ada vs rtx 6000 ada").to_dict()
    assert a["bottleneck"]["decode"] == "memory-bandwidth"
    rows = {g["id"]: g for g in a["gpus"]}
    ratio = rows["rtx-6000-ada"]["decode_tokens_per_s"] / rows["rtx-4000-ada"]["decode_tokens_per_s"]
    assert abs(ratio - 960 / 360) < abs(ratio - 3.41)
    assert ratio == pytest.approx(960 / 360, rel=0.1)


def test_every_claim_applies_to_its_example_query():
    for claim in KN.claims:
        a = ask(claim.example_query).to_dict()
        ids = {d["id"] for d in a["disagreements"] + a["claims_checked"]}
        assert claim.id in ids, (claim.id, claim.example_query)


def test_assumptions_list_the_defaults():
    a = ask("serve 70B int4").to_dict()
    text = " ".join(a["assumptions"])
    assert "concurrent users: 1" in text and "context per user" in text and "Llama" in text


def test_numbers_are_finite_and_deterministic():
    one = ask("serve llama-3.1-70b awq 32 users 8k context on 2x L40S").to_dict()
    two = ask("serve llama-3.1-70b awq 32 users 8k context on 2x L40S").to_dict()
    assert one == two

    def walk(v):
        if isinstance(v, float):
            assert math.isfinite(v)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
    walk(one)


def test_precision_fallback_is_warned():
    a = ask("serve 70B fp8 on a100-80gb").to_dict()
    assert any("FP8" in w and "FP16" in w for w in a["warnings"])


def test_capacity_only_gpu_answers_fit_and_leaves_speed_null():
    a = ask("train 13B qlora on 20GB?").to_dict()
    # a bare capacity is a card of that size in GiB (memory is sold in GiB stacks):
    # 20 × 2^30 = 21,474,836,480 bytes = 21.47 GB (IEC 80000-13), exact
    assert a["gpus"][0]["vram_gb"] == pytest.approx(21.474836480, abs=1e-9)
    assert any("20 GiB" in x for x in a["assumptions"])
    assert a["throughput"]["train_tokens_per_s"] is None
    assert a["verdict"].startswith(("Fits", "Does not fit"))


@pytest.mark.parametrize("query", ["serve 70B int4 16 users", "train 13B qlora on 20GB?",
                                   "max users for 70B int4 on 2x L40S", "infer 7B on rtx 4000 ada vs rtx 6000 ada"])
def test_to_json_is_to_dict_as_json(query):
    """--batch writes Answer.to_json(): the contract's dict, key for key and in order, as the
    standard library reads it back (an independent reader of the same bytes)."""
    import json

    import orjson

    a = ask(query)
    d = a.to_dict()
    assert a.to_json() == orjson.dumps(d)
    back = json.loads(a.to_json())
    assert back == json.loads(json.dumps(d)) and list(back) == list(d)
    assert set(back["trace"][0]) == set(d["trace"][0]) and set(back["gpus"][0]) == set(d["gpus"][0])
