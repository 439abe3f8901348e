"""GEMM accumulate precision per runtime: GeForce cards run FP16 GEMMs that accumulate in FP16
at twice their FP32-accumulate rate. llama.cpp's CUDA backend calls cuBLAS with FP16 compute
(ggml-cuda.cu, cublasGemmEx with CUBLAS_COMPUTE_16F); PyTorch-based runtimes such as vLLM
accumulate in FP32. Reference rates are NVIDIA's Ada whitepaper appendix (RTX 4090, dense):
FP16 tensor 330.3 TFLOPS with FP16 accumulate, 165.2 with FP32 accumulate. Model facts are
Llama 3 8B's config.json: 8.03e9 parameters, 32 layers, 32 heads of 128 dimensions."""

from typing import Any

import pytest

from kb import get_knowledge
from kb.engine import answer
from kb.query.parse import parse

KN = get_knowledge()

ADA_4090_FP16_ACC16 = 330.3   # Ada whitepaper appendix, dense
ADA_4090_FP16_ACC32 = 165.2   # same table, FP32 accumulate


def first_gpu(query: str) -> dict[str, Any]:
    return answer(parse(query, KN), KN, query).to_dict()["gpus"][0]


def prefill_by_hand(tflops: float, runtime: str) -> float:
    """Prompt tokens/s = peak × prefill efficiency ÷ FLOPs per token, where a token costs
    2 FLOPs per weight plus 2·layers·heads·head_dim·prompt for attention over a 512-token prompt."""
    flops_per_token = 2 * 8.03e9 + 2 * 32 * 32 * 128 * 512      # 16.194e9
    efficiency = KN.runtimes[runtime]["prefill_compute_efficiency"]
    return tflops * 1e12 * efficiency / flops_per_token


def test_llamacpp_fp16_prefill_on_4090_uses_the_fp16_accumulate_rate() -> None:
    g = first_gpu("prefill 512 tokens llama-3-8b fp16 on rtx 4090 with llama.cpp")
    assert g["compute_tflops"] == pytest.approx(ADA_4090_FP16_ACC16, abs=0.05)
    # 330.3e12 × 0.364 ÷ 16.194e9 ≈ 7424 tokens/s at llama.cpp's calibrated efficiency
    assert g["prefill_tokens_per_s"] == pytest.approx(prefill_by_hand(ADA_4090_FP16_ACC16, "llama.cpp"), rel=0.005)


def test_vllm_fp16_prefill_on_4090_uses_the_fp32_accumulate_rate() -> None:
    g = first_gpu("prefill 512 tokens llama-3-8b fp16 on rtx 4090 with vllm")
    assert g["compute_tflops"] == pytest.approx(ADA_4090_FP16_ACC32, abs=0.05)
    assert g["prefill_tokens_per_s"] == pytest.approx(prefill_by_hand(ADA_4090_FP16_ACC32, "vllm"), rel=0.005)


def test_bf16_has_no_fp16_accumulate_rate() -> None:
    """BF16 tensor math accumulates in FP32 whatever the runtime: the 4090 stays at 165.2."""
    g = first_gpu("prefill 512 tokens llama-3-8b bf16 on rtx 4090 with llama.cpp")
    assert g["compute_tflops"] == pytest.approx(ADA_4090_FP16_ACC32, abs=0.05)


def test_datacenter_card_has_one_fp16_rate() -> None:
    """An H100 runs FP16 at the same rate with either accumulate (H100 datasheet lists one FP16
    figure), so llama.cpp and vLLM see the same peak."""
    q = "prefill 512 tokens llama-3-8b fp16 on h100 sxm with {}"
    assert first_gpu(q.format("llama.cpp"))["compute_tflops"] == first_gpu(q.format("vllm"))["compute_tflops"]


def test_geforce_cards_list_both_rates() -> None:
    """Every GeForce card with tensor cores lists its FP16-accumulate rate, twice the FP32 one."""
    geforce = [g for g in KN.gpus.values() if "GeForce" in g["name"] and g["tensor_tflops"]["fp16"]]
    assert len(geforce) >= 20
    for g in geforce:
        t = g["tensor_tflops"]
        assert t["fp16_acc16"] == pytest.approx(2 * t["fp16"], rel=0.002), g["id"]


def test_runtimes_name_a_source_for_fp16_accumulate() -> None:
    for rt in KN.runtimes.values():
        if rt.get("gemm_accumulate") == "fp16":
            assert rt.get("gemm_accumulate_source") in KN.sources, rt["id"]
    assert KN.runtimes["llama.cpp"]["gemm_accumulate"] == "fp16"
    assert KN.runtimes["vllm"]["gemm_accumulate"] == "fp32"
