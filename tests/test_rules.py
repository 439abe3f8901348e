"""Every shipped rule file loads and holds what the product promises."""

import pytest

from kb import get_knowledge
from kb.knowledge import build
from kb.paths import rules_dir

KN = get_knowledge()


def test_shipped_rules_build():
    kn = build(rules_dir())
    assert len(kn.flows) >= 4


def test_catalogue_sizes():
    assert len(KN.gpus) >= 40
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
