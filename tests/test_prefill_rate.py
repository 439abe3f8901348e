"""Prefill runs at the rate of the format the matrix multiplies use (issue 26, section 3).

Tensor rates are the dense figures of gpus.yaml (NVIDIA's whitepapers and datasheets); the
runtime efficiencies are read from rules/runtimes.yaml so a recalibration moves both sides of a
hand derivation. Published figures name their source and the tolerance of kbq's prefill band.
"""

from pathlib import Path
from typing import Any

import pytest
import yaml

from kb import get_knowledge
from kb.engine import answer
from kb.query.parse import parse

KN = get_knowledge()
RULES = Path(KN.root)

RTX_5090_BF16 = 209.5     # Blackwell GeForce: 3,352 AI TOPS FP4 sparse → FP16/BF16 dense, FP32 accumulate
RTX_5090_FP4 = 1676.0     # the same figure's dense FP4
H100_SXM_FP16 = 989.4     # Hopper whitepaper, dense
H100_SXM_FP8 = 1978.9
A100_FP16 = 312.0         # A100 datasheet, dense
RTX_5090_GB_S = 1792.0    # GeForce RTX 5090 specifications: 28 Gbps GDDR7 on 512 bits


def run(query: str) -> dict[str, Any]:
    return answer(parse(query, KN), KN, query).to_dict()


def first_gpu(query: str) -> dict[str, Any]:
    return run(query)["gpus"][0]


def step(a: dict[str, Any], rule: str) -> dict[str, Any]:
    return next(t for t in a["trace"] if t["rule_id"] == rule)


def test_gpt_oss_on_5090_prefills_at_the_bf16_rate() -> None:
    """The issue's case: 124,545 tok/s at the FP4 peak. gpt-oss's MXFP4 experts are weight-only
    under vLLM's Marlin/Triton kernels (and llama.cpp): dequantized and multiplied in BF16. By
    hand: 2 × 3.6e9 + 2 × 24 layers × 64 heads × 64 × 1,024 prompt = 7.4013e9 FLOP a token;
    209.5e12 × prefill efficiency × dequantizing kernels' share ÷ that."""
    a = run("gpt-oss-20b on rtx 5090")
    g = a["gpus"][0]
    assert g["compute_precision"] == "bf16"
    assert g["compute_tflops"] == pytest.approx(RTX_5090_BF16)
    rt = KN.runtimes["vllm"]
    flops = 2 * 3.6e9 + 2 * 24 * 64 * 64 * 1024
    compute_s = flops / (RTX_5090_BF16 * 1e12 * rt["prefill_compute_efficiency"] * rt["quant_kernel_efficiency"])
    # and the experts' weights, read once by the 1,024-token batch (128 tokens an expert): 24
    # layers x 32 experts x 3 x 2880 x 2880 at MXFP4's 4.25 bits, over 1,792 GB/s at decode's
    # share of it and the share of that a prompt batch's expert reads reach (formulas.yaml)
    bandwidth = RTX_5090_GB_S * rt["decode_bandwidth_efficiency"] * rt["quant_kernel_efficiency"]
    moe_share = KN.constants["moe_expert_read_efficiency"]["value"]
    read_s = 24 * 32 * 3 * 2880 * 2880 * 4.25 / 8 / (bandwidth * 1e9 * moe_share) / 1024
    by_hand = 1 / (compute_s + read_s)
    assert g["prefill_tokens_per_s"] == pytest.approx(by_hand, rel=0.005)
    assert g["prefill_tokens_per_s"] < 124_545 / 5


def test_the_trace_says_which_rate_was_used() -> None:
    a = run("gpt-oss-20b on rtx 5090")
    t = step(a, "effective_tflops")
    assert t["values"]["gpu.compute_precision"] == "bf16"
    assert t["values"]["gemm_weight_only"] is True
    assert "weight-only" in t["note"] and "16-bit" in t["note"]
    native = step(run("prefill 2048 tokens llama-3.1-8b fp8 on h100 with vllm"), "effective_tflops")
    assert native["values"]["gpu.compute_precision"] == "fp8"
    assert "own tensor rate" in native["note"]


@pytest.mark.parametrize(("query", "precision", "tflops"), [
    # W8A8 FP8 checkpoints under a runtime that runs FP8 GEMMs (vLLM, TensorRT-LLM) on Hopper
    ("prefill 2048 tokens llama-3.1-8b fp8 on h100 with vllm", "fp8", H100_SXM_FP8),
    ("prefill 2048 tokens llama-3.1-8b fp8 on h100 with tensorrt-llm", "fp8", H100_SXM_FP8),
    # the same checkpoint where the runtime runs it weight-only, or the card has no FP8 (A100)
    ("prefill 2048 tokens llama-3.1-8b fp8 on h100 with llama.cpp", "fp16", H100_SXM_FP16),
    ("prefill 2048 tokens llama-3.1-8b fp8 on a100-80gb with vllm", "fp16", A100_FP16),
    # NVFP4 (W4A4) under TensorRT-LLM on Blackwell; weight-only under llama.cpp
    ("prefill 2048 tokens llama-3.1-8b fp4 on rtx 5090 with tensorrt-llm", "fp4", RTX_5090_FP4),
    # GGUF k-quants, AWQ, NF4: weight-only everywhere
    ("prefill 2048 tokens llama-3.1-8b q4_k_m on h100", "fp16", H100_SXM_FP16),
    ("prefill 2048 tokens llama-3.1-8b awq on h100 with vllm", "fp16", H100_SXM_FP16),
])
def test_rate_by_format_and_runtime(query: str, precision: str, tflops: float) -> None:
    g = first_gpu(query)
    assert (g["compute_precision"], g["compute_tflops"]) == (precision, pytest.approx(tflops))


def test_weight_only_formats_name_a_16_bit_rate() -> None:
    """precisions.yaml: a weight-only format multiplies at the activations' rate, so its
    `compute` is FP16 or BF16; a format with `dequantized` rates has its own low-precision rate."""
    for p in KN.precisions.values():
        if p["weight_only"]:
            assert p["compute"] in ("fp16", "bf16"), p["id"]
            assert not p["dequantized"], p["id"]
        for key in p["dequantized"]:
            assert key in ("fp16", "bf16", "fp32"), p["id"]


def test_native_gemm_lists_only_formats_with_their_own_rate() -> None:
    for rt in KN.runtimes.values():
        for pid in rt["native_gemm"]:
            assert KN.precisions[pid]["dequantized"], (rt["id"], pid)


@pytest.mark.parametrize(("query", "published", "tolerance"), [
    # llama.cpp discussion #4167, LLaMA 7B v2, pp512: M4 Max 40-core Q4_0 885.68, F16 922.83;
    # M2 Ultra 76-core Q4_0 1238.48; M1 Max 32-core Q4_0 530.06 (kbq's prefill band: median 6%, p90 22%)
    ("prefill 512 tokens llama-2-7b q4_0 on m4 max with llama.cpp", 885.68, 0.15),
    ("prefill 512 tokens llama-2-7b fp16 on m4 max with llama.cpp", 922.83, 0.15),
    ("prefill 512 tokens llama-2-7b q4_0 on m2 ultra with llama.cpp", 1238.48, 0.15),
    ("prefill 512 tokens llama-2-7b q4_0 on m1 max with llama.cpp", 530.06, 0.15),
])
def test_apple_prefill_against_the_llamacpp_table(query: str, published: float, tolerance: float) -> None:
    assert first_gpu(query)["prefill_tokens_per_s"] == pytest.approx(published, rel=tolerance)


def test_issue_apple_case_is_no_longer_half() -> None:
    """`llama 3.1 8b q4_k_m on m4 max` gave 355 tok/s; the table's 7B Q4_0 row is 885.68, and an
    8B Q4_K_M (20% more weights, k-quant kernels) runs somewhat below it."""
    pp = first_gpu("llama 3.1 8b q4_k_m on m4 max")["prefill_tokens_per_s"]
    assert 885.68 * 0.7 <= pp <= 885.68 * 1.1


def test_llamacpp_on_hopper_keeps_the_legacy_mma_share() -> None:
    """llama.cpp's CUDA kernels use mma.sync, which reaches about 35/73 of the share of the peak
    on H100 that it reaches on A100 (FlashAttention-3 and -2 papers). By hand for Llama 3 8B FP16,
    pp512 on an H100 PCIe (756 TFLOPS dense FP16): 756e12 × efficiency × 0.48 ÷ 16.194e9. The
    published figure (XiongjieDai GPU-Benchmarks-on-LLM-Inference, 10,815.5 tok/s) is within 25%."""
    a = run("prefill 512 tokens llama-3-8b fp16 on h100-pcie with llama.cpp")
    g = a["gpus"][0]
    eff = KN.runtimes["llama.cpp"]["prefill_compute_efficiency"]
    share = KN.constants["hopper_legacy_mma_share"]["value"]
    assert share == pytest.approx(35 / 73, abs=0.005)
    flops = 2 * 8.03e9 + 2 * 32 * 32 * 128 * 512
    assert g["prefill_tokens_per_s"] == pytest.approx(756e12 * eff * share / flops, rel=0.005)
    assert g["prefill_tokens_per_s"] == pytest.approx(10815.5, rel=0.25)
    assert step(a, "prefill_efficiency")["values"]["gpu.architecture"] == "Hopper"


def test_vllm_on_hopper_uses_the_plain_efficiency() -> None:
    """vLLM's cuBLAS/CUTLASS GEMMs use warpgroup MMA on Hopper: no legacy share."""
    a = run("prefill 2048 tokens llama-3.1-8b fp16 on h100 with vllm")
    assert step(a, "prefill_efficiency")["result"] == KN.runtimes["vllm"]["prefill_compute_efficiency"]


def test_rtx_4000_ada_tensor_rates_come_from_the_datasheet() -> None:
    """NVIDIA's RTX 4000 Ada datasheet: Tensor Performance 327.6 TFLOPS, FP8 with sparsity.
    Dense FP8 = 327.6 / 2 = 163.8; dense FP16 (full-rate FP32 accumulate on a professional
    card) = 163.8 / 2 = 81.9; TF32 = 41.0."""
    t = KN.gpus["rtx-4000-ada"]["tensor_tflops"]
    assert t["fp8"] == pytest.approx(327.6 / 2, abs=0.05)
    assert t["fp16"] == pytest.approx(327.6 / 4, abs=0.05)
    assert t["bf16"] == t["fp16"]
    assert t["tf32"] == pytest.approx(327.6 / 8, abs=0.05)


@pytest.mark.parametrize(("gpu", "sparse_fp8"), [
    # datasheets: Tensor Performance (FP8 with sparsity) of the Ada workstation cards and the L4
    # (the L40S datasheet lists its own dense FP16, 362.05 beside 733 sparse: tests/test_rules.py)
    ("rtx-5000-ada", 1044.4), ("rtx-6000-ada", 1457.0), ("l4", 485.0),
])
def test_ada_professional_rates_are_a_quarter_of_the_sparse_fp8_figure(gpu: str, sparse_fp8: float) -> None:
    t = KN.gpus[gpu]["tensor_tflops"]
    assert t["fp8"] == pytest.approx(sparse_fp8 / 2, rel=0.005)
    assert t["fp16"] == pytest.approx(sparse_fp8 / 4, rel=0.005)


def test_new_measurements_cite_a_source_in_the_rules() -> None:
    data = yaml.safe_load((Path(__file__).parent / "data" / "calibration.yaml").read_text(encoding="utf-8"))
    cited = [m for m in data["measurements"] if m["source"].get("id")]
    assert len(cited) >= 24
    for m in cited:
        assert m["source"]["id"] in KN.sources, m["id"]
        assert KN.sources[m["source"]["id"]]["url"] == m["source"]["url"], m["id"]


def test_error_bands_state_a_prefill_band_per_runtime() -> None:
    bands = yaml.safe_load((RULES / "error_bands.yaml").read_text(encoding="utf-8"))
    prefill = bands["kinds"]["prefill_tokens_per_s"]
    assert "llama.cpp" in prefill["by_runtime"]
    assert prefill["median_pct"] <= 12 and prefill["worst_pct"] <= 40
