"""Every shipped rule file loads and holds what the product promises."""

import pytest

from kb import get_knowledge
from kb.knowledge.build import build
from kb.paths import rules_dir

KN = get_knowledge()


def test_shipped_rules_build():
    kn = build(rules_dir())
    assert len(kn.flows) >= 4


def test_catalogue_sizes():
    assert len(KN.gpus) >= 90
    assert len(KN.models) >= 50
    for pid in ("fp32", "tf32", "fp16", "bf16", "fp8", "int8", "int4", "fp4", "nf4", "gptq", "awq",
                "q8_0", "q6_k", "q5_k_m", "q4_k_m", "q4_0"):
        assert pid in KN.precisions


@pytest.mark.parametrize("gpu_id", ["rtx-4000-ada", "rtx-6000-ada", "l40s", "rtx-pro-5000-blackwell-48gb",
                                    "rtx-pro-6000-blackwell", "h100-sxm5", "h200-sxm", "b200-sxm",
                                    "a100-sxm4-40gb", "a100-sxm4-80gb", "rtx-3090", "rtx-4090", "a10", "l4"])
def test_every_gpu_the_seeds_name_is_there(gpu_id):
    assert gpu_id in KN.gpus


@pytest.mark.parametrize("gpu_id, fp16_dense, bandwidth", [
    ("h100-sxm5", 989.4, 3350),     # H100 datasheet: 1,979 TFLOPS FP16 "with sparsity" → 989.4 dense
    ("a100-sxm4-80gb", 312, 2039),  # A100 datasheet: 312 TFLOPS FP16 dense, 2,039 GB/s
    ("l40s", 362.05, 864),          # L40S datasheet: 733 with sparsity → 362 dense; 864 GB/s
])
def test_tensor_tflops_are_dense(gpu_id, fp16_dense, bandwidth):
    g = KN.gpus[gpu_id]
    assert g["tensor_tflops"]["fp16"] == pytest.approx(fp16_dense, rel=0.01)
    assert g["bandwidth_gb_s"] == pytest.approx(bandwidth, rel=0.01)


def test_native_precision_gaps_are_null():
    assert KN.gpus["a100-sxm4-80gb"]["tensor_tflops"]["fp8"] is None     # no FP8 before Ada/Hopper
    assert KN.gpus["h100-sxm5"]["tensor_tflops"]["fp4"] is None          # FP4 arrives with Blackwell
    assert KN.gpus["b200-sxm"]["tensor_tflops"]["fp4"]


def test_every_fact_has_a_known_source():
    for g in KN.gpus.values():
        assert g["source"] in KN.sources
    for m in KN.models.values():
        assert m["source"] in KN.sources
    for f in KN.formulas.values():
        assert all(s in KN.sources for s in f.sources)
    for c in KN.constants.values():
        assert c["source"] in KN.sources


def test_the_seeds_are_sources():
    for seed in ("000_1ca19009ae21ed7e", "001_16cbeecbfee825ae", "002_5783ad42a771dae4",
                 "003_d80bd7f97616bc0e", "004_a6af32e1d952100f"):
        assert KN.sources[seed]["kind"] == "seed"


def test_bare_size_references_exist():
    assert all(r in KN.models for r in KN.bare_size_refs)


@pytest.mark.parametrize("gpu_id, fp32_accumulate", [
    # NVIDIA Ada GPU architecture whitepaper, appendix (RTX 4090): "Peak FP16 Tensor TFLOPS with
    # FP32 Accumulate 165.2/330.4" against 330.3/660.6 with FP16 accumulate; exact to 0.1 TFLOPS
    ("rtx-4090", 165.2),
    # NVIDIA Ampere GA102 whitepaper, appendix (RTX 3090): FP32 accumulate 71/142 vs 142/284
    ("rtx-3090", 71.0),
])
def test_geforce_fp16_is_the_fp32_accumulate_rate(gpu_id, fp32_accumulate):
    """PyTorch/cuBLAS accumulate FP16 and BF16 GEMMs in FP32; GeForce runs that at half rate."""
    t = KN.gpus[gpu_id]["tensor_tflops"]
    assert t["fp16"] == pytest.approx(fp32_accumulate, abs=0.1)
    assert t["bf16"] == t["fp16"]


def test_fp16_and_bf16_prefill_alike_on_geforce():
    from kb import ask

    fp16 = ask("infer llama-3.1-8b fp16 on rtx 4090").to_dict()["throughput"]["prefill_tokens_per_s"]
    bf16 = ask("infer llama-3.1-8b bf16 on rtx 4090").to_dict()["throughput"]["prefill_tokens_per_s"]
    assert fp16 == pytest.approx(bf16, rel=1e-9)


def test_bandwidth_is_bus_width_times_data_rate():
    """bus width (bits) x data rate (Gbps per pin) / 8 = GB/s, within rounding (1%), wherever both
    are published: e.g. an RTX 4090, 384 bits x 21 Gbps / 8 = 1,008 GB/s."""
    both = [g for g in KN.gpus.values() if g.get("bus_width_bits") and g.get("memory_data_rate_gbps")]
    assert len(both) >= 30
    for g in both:
        computed = g["bus_width_bits"] * g["memory_data_rate_gbps"] / 8
        assert computed == pytest.approx(g["bandwidth_gb_s"], rel=0.01), g["id"]


def test_no_gpu_figure_without_a_source():
    """Every GPU's figures come from its source (with an address) or from a field_sources entry
    that names a known source for a field the GPU has."""
    for g in KN.gpus.values():
        assert g["source"] in KN.sources, g["id"]
        for field, sid in g["field_sources"].items():
            assert field in g and sid in KN.sources, (g["id"], field, sid)
        assert KN.sources[g["source"]].get("url") or KN.sources[g["source"]]["kind"] == "kbq", g["id"]


def test_capacity_bytes_agree_with_the_label():
    """memory_bytes is the label read as GiB, or a published nvidia-smi total at most 7% below it
    (an H100 '80GB': 81,559 MiB of 81,920 MiB = 99.6%; a B200's 183,359 MiB against 192 GiB of
    stacks is 93%, sold as 180)."""
    for g in KN.gpus.values():
        gib = g["memory_bytes"] / 2**30
        if "memory_bytes" in g["field_sources"]:
            assert 0.93 * g["vram_gb"] <= gib <= 1.02 * g["vram_gb"], g["id"]
        else:
            assert gib == pytest.approx(g["vram_gb"], rel=1e-9), g["id"]
        assert g["memory_gb"] == pytest.approx(g["memory_bytes"] / 1e9)


@pytest.mark.parametrize("words, gpu_id", [
    ("3090 ti", "rtx-3090-ti"), ("3090ti", "rtx-3090-ti"), ("rtx4090", "rtx-4090"),
    ("macbook pro m3 max", "apple-m3-max"), ("mac studio m2 ultra", "apple-m2-ultra"),
    ("mac mini m4 pro", "apple-m4-pro"), ("rx 7900 xtx", "rx-7900-xtx"), ("dgx spark", "dgx-spark"),
    ("strix halo", "ryzen-ai-max-395"), ("ryzen ai max+ 395", "ryzen-ai-max-395"),
    ("colab t4", "t4"), ("a100 40gb", "a100-sxm4-40gb"), ("5060 ti 8gb", "rtx-5060-ti-8gb"),
    ("rtx 3080 12gb", "rtx-3080-12gb"), ("tpu v6e", "tpu-v6e"), ("trainium2", "trainium2"),
    ("gb200", "gb200"), ("arc pro b60", "arc-pro-b60"), ("p40", "tesla-p40"),
])
def test_gpus_as_people_say_them(words, gpu_id):
    from kb.query.parse import parse

    w = parse(f"infer 8B on {words}", KN)
    assert [g.gpu_id for g in w.gpus] == [gpu_id]


def test_prices_name_known_gpus_and_sources():
    """rules/prices.yaml (loaded by the pricing code): every entry names a catalogue GPU and known
    sources, and prices are positive."""
    import yaml

    from kb.paths import rules_dir

    prices = yaml.safe_load((rules_dir() / "prices.yaml").read_text(encoding="utf-8"))["prices"]
    for p in prices:
        assert p["gpu"] in KN.gpus, p["gpu"]
        if p.get("purchase_usd") is not None:          # null: not sold, rented only
            assert p["purchase_usd"] > 0 and p["purchase_source"] in KN.sources
        for c in p.get("cloud", []):
            assert c["usd_per_hour"] > 0 and c["source"] in KN.sources
