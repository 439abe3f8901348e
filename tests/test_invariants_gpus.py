"""Invariants between the GPUs of one answer: more bandwidth never lowers decode speed, a job that
fits fits on every GPU with more memory (Apple's unified memory the one exception), and
gpus_needed is the fewest GPUs that hold the job. The full list is in tests/test_invariants.py."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from invariant_workloads import (
    GPUS,
    KN,
    PROPERTY,
    TRAINING_TASKS,
    inference_workloads,
    is_apple,
    is_hbm,
    one_card,
    query,
    workloads,
)

from kb import ask

# ---------------------------------------------------------------- GPUs compared in one answer

def _platform_gpus(a: Any) -> int:
    """Catalogue GPUs of the platforms and architectures the answer's runtime runs on, with the
    answer's format (runtimes.yaml platforms, unsupported_architectures, unsupported_formats:
    vLLM's AWQ kernels do not run on Volta)."""
    rt = KN.runtimes[a.workload["runtime"]]
    no_format = (rt.get("unsupported_formats") or {}).get(a.workload["precision"], [])
    return sum(g["vendor"] in rt["platforms"] and g.get("architecture") not in rt["unsupported_architectures"]
               and g.get("architecture") not in no_format for g in KN.gpus.values())


def _pairs(rows: list[Any]) -> list[tuple[Any, Any]]:
    return list(itertools.permutations(rows, 2))


def _no_weaker(x: Any, y: Any) -> bool:
    """Card x has no less bandwidth and compute than y, the same kind of memory, and multiplies
    the format the same way (compute_precision)."""
    return (is_hbm(x.id) == is_hbm(y.id) and is_apple(x.id) == is_apple(y.id)
            and x.compute_precision == y.compute_precision
            and x.bandwidth_gb_s >= y.bandwidth_gb_s and x.compute_tflops >= y.compute_tflops)


@PROPERTY
@given(inference_workloads())
def test_more_bandwidth_never_lowers_decode_speed(w: dict[str, Any]) -> None:
    """Every catalogue GPU at count 1, one runtime: a GPU with no less bandwidth and compute
    and the same kind of memory decodes no slower. Apple's unified memory is a kind of its own:
    its Metal kernels carry their own calibrated fixed cost a token (runtimes.yaml
    apple_decode_step_overhead_s; llama.cpp discussion #4167), so an Apple chip is compared with
    Apple chips. Both must multiply the format the same way (compute_precision): a card that
    runs int8 natively and one that dequantizes it to 16 bits (weight-only, at the runtime's
    quantized-kernel efficiency) are different paths. A runtime calibrated apart on AMD cards
    compares AMD cards with AMD cards."""
    a = one_card(query(w, gpus=False))
    rows = a.gpus
    assert len(rows) == _platform_gpus(a)
    for row in rows:   # a speed is missing only where the catalogue has no TFLOPS for the GPU,
        # or where the job does not fit (no speed for what cannot run)
        assert (row.decode_tokens_per_s is None) == (row.compute_tflops is None or not row.fits), row.id
    rows = [r for r in rows if r.decode_tokens_per_s is not None]
    # a runtime calibrated apart on AMD cards (runtimes.yaml amd_decode_*: llama.cpp's Vulkan
    # build, whose RADV driver reaches more of the bandwidth than NVIDIA's) compares AMD with AMD
    split = KN.runtimes[a.workload["runtime"]].get("amd_decode_bandwidth_efficiency") is not None
    side = lambda r: split and KN.gpus[r.id]["vendor"] == "amd"  # noqa: E731
    compared = 0
    for x, y in _pairs(rows):
        if _no_weaker(x, y) and side(x) == side(y):
            compared += 1
            assert x.decode_tokens_per_s >= y.decode_tokens_per_s * (1 - 1e-12), (
                f"{x.id} ({x.bandwidth_gb_s} GB/s, {x.compute_tflops} TFLOPS) decodes at "
                f"{x.decode_tokens_per_s:.2f} tok/s, slower than {y.id} ({y.bandwidth_gb_s} "
                f"GB/s, {y.compute_tflops} TFLOPS) at {y.decode_tokens_per_s:.2f} [{a.query}]")
    # enough pairs were compared (only GPUs that hold the job show a speed)
    same = sum(side(x) == side(y) for x, y in _pairs(rows))
    assert compared >= min(100, same // 8)


@PROPERTY
@given(inference_workloads(), st.lists(st.sampled_from(GPUS), min_size=2, max_size=5, unique=True))
def test_more_bandwidth_never_lowers_decode_speed_on_several_gpus(
        w: dict[str, Any], gpus: list[str]) -> None:
    """The same with a count > 1, where the all-reduce also depends on the interconnect."""
    on = " vs ".join(f"{w['count']}x {g}" for g in gpus)
    a = ask(query(w, gpus=False).replace(f" with {w['runtime']}", f" on {on} with {w['runtime']}"))
    rows = [r for r in a.gpus if r.decode_tokens_per_s is not None]
    assert all(r.count == w["count"] for r in a.gpus)
    split = KN.runtimes[a.workload["runtime"]].get("amd_decode_bandwidth_efficiency") is not None
    side = lambda r: split and KN.gpus[r.id]["vendor"] == "amd"  # noqa: E731
    for x, y in _pairs(rows):
        link = lambda r: (KN.gpus[r.id].get("interconnect") or {}).get("gb_s") or 0  # noqa: E731
        if _no_weaker(x, y) and link(x) >= link(y) and side(x) == side(y):
            assert x.decode_tokens_per_s >= y.decode_tokens_per_s * (1 - 1e-12), (x.id, y.id)


def _check_fits(rows: list[Any], paged: bool = False) -> None:
    # the job's size does not depend on which GPU is judged, except a paged optimizer's states,
    # which stay on a card that holds them and page out on one that does not (bitsandbytes
    # paged optimizers: CUDA unified memory); what fits still fits on every bigger card
    if not paged:
        assert len({round(r.per_gpu_gb, 9) for r in rows if r.count == rows[0].count}) == 1
    for x, y in _pairs(rows):
        if not y.fits or x.vram_gb < y.vram_gb:
            continue
        if x.count != y.count:
            continue   # with no GPU named each is judged at its own fewest cards (another layout)
        if is_apple(x.id) != is_apple(y.id) and x.usable_vram_gb < y.usable_vram_gb:
            continue   # unified memory: macOS wires only part of it for the GPU
        assert x.fits, (f"fits on {y.id} ({y.vram_gb} GB, {y.usable_vram_gb} usable) but not on "
                        f"{x.id} ({x.vram_gb} GB, {x.usable_vram_gb} usable)")


@PROPERTY
@given(workloads())
def test_what_fits_on_a_gpu_fits_on_every_gpu_with_more_memory(w: dict[str, Any]) -> None:
    q = query(w, gpus=False)
    a = ask(q)
    if a.question and a.question["kind"] == "how_many_gpus":    # no card holds the training job:
        assert a.gpus[0].fits, q                                # the fewest GPUs that do
        return
    assert len(a.gpus) == _platform_gpus(a)
    _check_fits(a.gpus, bool(a.workload.get("paged")))


@PROPERTY
@given(workloads(), st.lists(st.sampled_from(GPUS), min_size=2, max_size=5, unique=True))
def test_what_fits_on_n_gpus_fits_on_n_gpus_with_more_memory(
        w: dict[str, Any], gpus: list[str]) -> None:
    on = " vs ".join(f"{w['count']}x {g}" for g in gpus)
    a = ask(query(w, gpus=False).replace(f" with {w['runtime']}", f" on {on} with {w['runtime']}"))
    _check_fits(a.gpus, bool(a.workload.get("paged")))


def test_apple_unified_memory_is_the_one_exception() -> None:
    """The allowance above is needed: some Apple GPU with more memory than a discrete one
    holds less, because only 75% of unified memory goes to the GPU."""
    # ~158.7 GB: more than 75% of the M2 Ultra's 192 GiB (206.2 GB × 0.75 = 154.6 GB), less than
    # an MI300X's 192 GiB (206.2 GB) or a B200's 183,359 MiB (192.3 GB)
    a = one_card("serve llama-3.1-70b fp16 12 users with llama.cpp")
    inversions = [(x.id, y.id) for x, y in _pairs(a.gpus)
                  if y.fits and not x.fits and x.vram_gb >= y.vram_gb]
    assert inversions and all(is_apple(x) and not is_apple(y) for x, y in inversions)


def _recipes(a: Any) -> list[str]:
    return [x for x in a.assumptions if x.startswith("recipe:")]


@PROPERTY
@given(workloads())
def test_gpus_needed_is_the_fewest_gpus_that_hold_the_job(w: dict[str, Any]) -> None:
    first = ask(query(dict(w, count=1)))
    one = first.gpus[0]
    n = one.gpus_needed
    assert n is not None
    if n == 0:      # training whose every-rank part (data parallel copies, activations) is too big
        assert w["task"] in TRAINING_TASKS and not one.fits
        assert not ask(query(dict(w, count=64))).gpus[0].fits, query(w)
        return
    if n > 4096:
        return
    at_n = ask(query(dict(w, count=n)))
    if _recipes(at_n) != _recipes(first):     # e.g. torchtune's single-device recipe vs its
        return                                # distributed one: another job, judged on its own
    assert at_n.gpus[0].fits, (query(w), n)
    # a training job laid out at scale past a node's square of GPUs (64 at 8 per node) is sized in
    # whole nodes (kb.engine.search.solve.fewest_scanned: servers are bought and rented by the node), so
    # the count one node smaller is the one that must not hold it
    node = int(KN.constants["gpus_per_node"]["value"])
    fewer = n - node if w["task"] in TRAINING_TASKS and n > node * node and n % node == 0 else n - 1
    if n > 1:
        assert not ask(query(dict(w, count=fewer))).gpus[0].fits, (query(w), n)


@pytest.mark.parametrize("capacity", ["1GB", "0.5GB"])
def test_gpus_needed_on_a_gpu_smaller_than_the_runtime_overhead(capacity: str) -> None:
    a = ask(f"serve 7B on {capacity} with vllm")
    row = a.gpus[0]
    assert not row.fits
    if row.gpus_needed:
        assert ask(f"serve 7B on {row.gpus_needed}x {capacity} with vllm").gpus[0].fits, a.verdict
    else:   # 0: the GPU is smaller than the runtime's own overhead, so no count holds the job
        assert row.gpus_needed == 0 and "no number of them holds it" in a.verdict
