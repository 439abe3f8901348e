"""The base Apple M-series chips and the Jetson Orin Nano in the catalogue, and the difference
between a tensor rate a vendor does not publish and a card with no tensor math for a precision.

Reference figures and their sources (rules/sources.yaml ids):
- M2 and M3: 100 GB/s, up to 24 GB (apple-m2-macrumors, apple-m3-gizmohopper, apple-m3-hothardware);
  M4: 120 GB/s, up to 32 GB (apple-m4-businesstoday); M1: LPDDR4X-4266 x 128 bit = 68.25 GB/s,
  up to 16 GB, 2.6 TFLOPS (apple-m1-newsroom, akunu-apple-gpu-generations).
- Jetson Orin Nano Super: 8 GB LPDDR5, 102 GB/s, 67 sparse INT8 TOPS, $249
  (jetson-orin-nano-super-overview); dense is half of sparse on Ampere.
- Jetson AGX Orin 64GB: 256-bit LPDDR5 up to 204.8 GB/s; 275 sparse INT8 TOPS = 170 GPU + 105 DLA
  (nvidia-jetson-agx-orin-datasheet).
"""
from __future__ import annotations

import pytest

from kb import ask, get_knowledge
from kb.errors import QueryError

KN = get_knowledge()


@pytest.mark.parametrize(("gid", "gb", "bandwidth"), [
    ("apple-m1", 16, 68.25), ("apple-m2", 24, 100), ("apple-m3", 24, 100), ("apple-m4", 32, 120),
    ("jetson-orin-nano-super", 8, 102), ("jetson-agx-orin-64gb", 64, 204.8),
])
def test_published_memory_and_bandwidth(gid: str, gb: float, bandwidth: float) -> None:
    g = KN.gpus[gid]
    assert g["vram_gb"] == gb and g["bandwidth_gb_s"] == pytest.approx(bandwidth, rel=0.005)


def test_agx_orin_int8_is_the_gpus_dense_half_without_the_dlas() -> None:
    assert KN.gpus["jetson-agx-orin-64gb"]["tensor_tflops"]["int8"] == pytest.approx((275 - 105) / 2, rel=0.01)


def test_orin_nano_int8_is_the_dense_half_of_nvidias_sparse_67_tops() -> None:
    assert KN.gpus["jetson-orin-nano-super"]["tensor_tflops"]["int8"] == pytest.approx(67 / 2, rel=0.01)


@pytest.mark.parametrize(("query", "gid"), [
    ("can my macbook air m3 24gb run llama 3.1 8b q8_0", "apple-m3"),
    ("llama 3.1 8b on a mac mini m4", "apple-m4"),
    ("llama 3.2 1b on a jetson orin nano", "jetson-orin-nano-super"),
    ("llama 3.2 1b on orin nano super", "jetson-orin-nano-super"),
    ("mistral 7b on agx orin", "jetson-agx-orin-64gb"),
])
def test_names_people_type_read_as_the_card(query: str, gid: str) -> None:
    assert ask(query).to_dict()["workload"]["gpus"][0]["gpu_id"] == gid


def test_8b_q8_0_fits_a_24gb_m3_near_its_bandwidth_bound() -> None:
    """Hand derivation: 8.03B parameters at Q8_0 (8.5 bits) is 8.53 GB of weights; 24 GiB x the
    0.75 macOS lets the GPU wire is 19.3 GB, so it fits. Decode reads the weights once per token:
    100 GB/s / 8.53 GB = 11.7 tok/s is the ceiling; llama.cpp reaches 80-90% of it on Apple
    (its published M-series table: 7B Q8_0 near 12 tok/s on 100 GB/s chips), so 8-11.7 tok/s."""
    d = ask("can my macbook air m3 24gb run llama 3.1 8b q8_0").to_dict()
    row = d["gpus"][0]
    assert row["fits"] is True
    assert 8.0 <= d["throughput"]["decode_tokens_per_s"] <= 11.7


def test_1b_fits_the_orin_nano() -> None:
    """A 1B model at fp16 is 2.5 GB of weights, well inside 8 GB."""
    d = ask("llama 3.2 1b on a jetson orin nano").to_dict()
    assert d["gpus"][0]["fits"] is True


def test_a_memory_the_chip_is_not_listed_with_is_refused_with_the_sizes() -> None:
    with pytest.raises(QueryError) as e:
        ask("llama 3.1 8b on m3 16gb")
    assert "24gb" in str(e.value)


def test_unpublished_tensor_rate_is_not_called_missing_tensor_math() -> None:
    """The A10G is an Ampere GA102 with tensor cores; its datasheet gives FP16/BF16 (70 TFLOPS
    dense) but no INT8 rate: an INT8 query is computed at the FP16 rate and says the INT8 rate is
    unpublished, never that the card lacks the math."""
    warnings = ask("llama 3.1 8b int8 on a10g").to_dict()["warnings"]
    assert any("INT8 tensor rate is not published" in w for w in warnings), warnings
    assert not any("no native" in w for w in warnings), warnings


def test_a10g_tensor_rate_is_its_datasheet_figure() -> None:
    """NVIDIA's A10G datasheet (as rules/sources.yaml nvidia-a10g-datasheet quotes it): BF16 and
    FP16 tensor 70 TFLOPS dense, 140 with sparsity; the A10 beside it 125."""
    assert KN.gpus["a10g"]["tensor_tflops"]["bf16"] == 70
    assert KN.gpus["a10g"]["tensor_tflops"]["fp16"] == 70
    warnings = ask("llama 3.1 8b fp16 on a10g").to_dict()["warnings"]
    assert not any("A10G" in w and "tensor" in w for w in warnings), warnings


def test_a_card_without_tensor_cores_still_says_so() -> None:
    """The Tesla P40 (Pascal) has no tensor cores and runs FP16 at 1/64 rate."""
    warnings = ask("llama 3.1 8b fp16 on tesla p40").to_dict()["warnings"]
    assert any("no native FP16 tensor math" in w for w in warnings), warnings


def test_unpublished_marker_names_only_null_rates() -> None:
    """A precision marked unpublished has no rate in the catalogue (else the marker is stale)."""
    for gid, g in KN.gpus.items():
        for key in g.get("tensor_unpublished", []):
            assert g["tensor_tflops"].get(key) is None, (gid, key)
