"""Invariants of the answers, as property tests over workloads built from the vocabulary.

- more users, context, batch or sequence never lowers memory (memory.total_gb);
- more bits per weight never lowers memory, for the same model, runtime and GPU — among formats
  that treat the embeddings alike. Formats that keep the token embedding and output head in
  16-bit (precisions.yaml `quantizes_embeddings: false`: nf4, gptq, awq, fp4, fp8, int8) can
  need more than a format with more bits that quantizes them (on llama-3.2-1b awq at 4.16 bits
  needs more than int4 at 4.25, fp8 more than q8_0); that is the only inversion allowed;
- more bandwidth never lowers decode speed, between GPUs with the same kind of memory (HBM or
  not: runtimes.yaml `hbm_decode_efficiency`), the same runtime and count, and no less compute
  (decode is the slower of the bandwidth and compute ceilings) or interconnect;
- a job that fits on a GPU fits on every GPU with more memory (same runtime and count) — except
  Apple's unified memory, of which macOS lets the GPU wire 75% (formulas.yaml usable_vram_gb):
  across that line it is the usable memory that orders them;
- gpus_needed is the fewest GPUs of that kind that hold the job;
- the memory breakdown sums to the total;
- every figure is finite and ≥ 0, except signed ones: a GPU's headroom_gb (negative when the
  job does not fit) and the trace step that computes it, and a claim's difference_pct;
- the same query gives the same answer.

The workloads are drawn in tests/invariant_workloads.py; the invariants between GPUs are in
tests/test_invariants_gpus.py.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import fields, is_dataclass
from typing import Any

import pytest
from fuzz_queries import Drawn, vocab_query  # the fuzzing's query generator (tests/fuzz_queries.py)
from hypothesis import given, settings
from hypothesis import strategies as st
from invariant_workloads import (
    GPUS,
    INFERENCE_RUNTIMES,
    KN,
    MODELS,
    PRECISIONS,
    PROPERTY,
    TRAINING_RUNTIMES,
    bits,
    query,
    sixteen_bit_share,
    total_gb,
    workloads,
)

from kb import ask
from kb.errors import QueryError

# ---------------------------------------------------------------- memory grows with the job

LIMITS = {"users": 1_000_000, "context": 100_000_000, "batch": 1_000_000, "seq": 100_000_000}


@PROPERTY
@given(workloads(), st.sampled_from(sorted(LIMITS)), st.integers(1, 10_000))
def test_more_users_context_batch_or_sequence_never_lowers_memory(
        w: dict[str, Any], knob: str, more: int) -> None:
    bigger = dict(w, **{knob: min(w[knob] + more, LIMITS[knob])})
    # equal up to float rounding where a larger part replaces a smaller one at the peak (the
    # optimizer step's temporaries beyond the activations: s - a + a is not always s)
    smaller = total_gb(query(w))
    assert total_gb(query(bigger)) >= smaller - 1e-9 * abs(smaller)


@pytest.mark.parametrize("model", ["llama-3.2-1b", "llama-3.1-8b", "llama-3.1-70b", "mixtral-8x7b",
                                   "gemma-2-2b", "qwen2.5-7b"])
def test_the_gguf_to_float_ladder_strictly_grows(model: str) -> None:
    ladder = ["q4_k_m", "q8_0", "fp16", "fp32"]
    totals = [total_gb(f"serve {model} {p} 8 users on h100 with llama.cpp") for p in ladder]
    assert totals == sorted(totals) and len(set(totals)) == len(totals), dict(zip(ladder, totals))


def _memory_by_precision(base: str, precisions: list[str] | None = None) -> dict[str, float]:
    """Total GB per precision named in the query; a precision whose words the query reads as
    part of a model name (`kimi-k2-thinking int4` is that model's INT4 release, in its own
    format) is left out, since the answer is then about another format."""
    out = {}
    for p in precisions or PRECISIONS:
        q = base.format(precision=p)
        a = ask(q)
        if a.workload["precision"] == p:
            out[p] = total_gb(q, a)
    return out


# A LoRA base in a float format the card lacks (fp8 on an A100) is held in the format's fallback
# (precisions.yaml `fallback`), so its nominal bits say nothing about what the card holds.
STORED_AS_NAMED = [p for p in PRECISIONS
                   if KN.precisions[p]["kind"] != "float" or KN.precisions[p]["bits_per_weight"] >= 16]


def _check_precision_order(totals: dict[str, float], dequantized_gb: float = 0.0) -> None:
    """`dequantized_gb`: the 16-bit copy of the largest weight matrix a quantized base dequantizes
    to train through it (bitsandbytes' and AutoAWQ's GEMMs; 0 for inference)."""
    for lo, hi in itertools.permutations(totals, 2):
        if bits(lo) > bits(hi) or totals[lo] <= totals[hi] * (1 + 1e-12):
            continue
        # a quantized base beside a 16-bit one: the dequantized copy of its largest matrix can
        # outweigh what quantizing saved (a small model with a large vocabulary: Gemma 3 270M's
        # 262,144 x 640 head is half its weights)
        if bits(lo) < 16 <= bits(hi) and totals[lo] - totals[hi] <= dequantized_gb * (1 + 1e-9):
            continue
        # the one allowed inversion: lo keeps more of the model in 16 bits than hi (its
        # embeddings, or all but the routed experts)
        assert sixteen_bit_share(lo) > sixteen_bit_share(hi), (
            f"{lo} ({bits(lo)} bits) needs {totals[lo]:.4f} GB, more than "
            f"{hi} ({bits(hi)} bits) with {totals[hi]:.4f} GB")


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(MODELS), st.sampled_from(INFERENCE_RUNTIMES), st.integers(1, 256),
       st.integers(1, 65_536), st.sampled_from(GPUS), st.integers(1, 8))
def test_more_bits_never_lower_inference_memory(model: str, runtime: str, users: int,
                                                context: int, gpu: str, count: int) -> None:
    _check_precision_order(_memory_by_precision(
        f"serve {model} {{precision}} {users} users {context} context on {count}x {gpu} with {runtime}"))


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(MODELS), st.sampled_from(TRAINING_RUNTIMES), st.integers(1, 16),
       st.integers(1, 8192), st.sampled_from(GPUS))
def test_more_bits_never_lower_lora_memory(model: str, runtime: str, batch: int, seq: int,
                                           gpu: str) -> None:
    # checkpointing named: nf4 makes the job QLoRA, whose PEFT recipe would otherwise turn it on;
    # the adapters' placement named where the runtime's recipes place them differently for LoRA
    # and QLoRA (torchtune), so every precision trains the same adapters
    placement = " attention only" if _adapter_placement_differs(runtime) else ""
    m = KN.models[model]
    largest = m["hidden_size"] * max(m.get("intermediate_size") or 0, m.get("vocab_size") or 0) * 2 / 1e9
    _check_precision_order(_memory_by_precision(
        f"lora {model} {{precision}} batch {batch} seq {seq} checkpointing{placement} on {gpu} with {runtime}",
        STORED_AS_NAMED), largest)


def _adapter_placement_differs(runtime: str) -> bool:
    """The runtime's recipes set lora_attention_only for one of LoRA and QLoRA and not the other."""
    def placement(task: str) -> set[Any]:
        return {r["set"]["lora_attention_only"] for r in KN.runtimes[runtime].get("recipes") or []
                if task in r["when"]["tasks"] and r["set"]["lora_attention_only"] is not None}
    return placement("lora") != placement("qlora")


def test_torchtune_places_lora_and_qlora_adapters_differently() -> None:
    """The case the placement above is named for exists (torchtune-lora-configs), and no other."""
    assert [rt for rt in TRAINING_RUNTIMES if _adapter_placement_differs(rt)] == ["torchtune"]


def test_the_embedding_exception_is_real_and_documented() -> None:
    """The inversion the precision invariant allows does happen (so the allowance is needed)."""
    totals = _memory_by_precision("serve llama-3.2-1b {precision} on h100 with vllm")
    assert bits("awq") < bits("int4") and totals["awq"] > totals["int4"]
    assert bits("fp8") < bits("q8_0") and totals["fp8"] > totals["q8_0"]
    _check_precision_order(totals)


# ---------------------------------------------------------------- the answer itself

@PROPERTY
@given(workloads(), st.booleans())
def test_the_breakdown_sums_to_the_total(w: dict[str, Any], named: bool) -> None:
    memory = ask(query(w, gpus=named)).memory
    parts = memory["breakdown"].values()
    assert all(isinstance(v, float) for v in parts), memory
    assert sum(parts) == pytest.approx(memory["total_gb"], rel=1e-9, abs=1e-12)


SIGNED_FIELDS = {"headroom_gb", "difference_pct"}


def _walk(value: Any, path: str, out: list[tuple[str, Any]]) -> None:
    if is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in fields(value)}
    if isinstance(value, dict):
        signed_step = str(value.get("rule", "")).startswith("headroom_gb ")
        for k, v in value.items():
            if signed_step and k == "result":
                k = "headroom_gb"
            _walk(v, f"{path}.{k}", out)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _walk(v, f"{path}[{i}]", out)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        out.append((path, value))


def _check_figures(answer: Any) -> None:
    for tree in (answer, answer.to_dict()):     # the engine's values, and the JSON contract
        figures: list[tuple[str, Any]] = []
        _walk(tree, "", figures)
        assert figures
        for path, v in figures:
            assert math.isfinite(v), (path, v)
            if path.rsplit(".", 1)[-1] not in SIGNED_FIELDS:
                assert v >= 0, (path, v)


@PROPERTY
@given(workloads(), st.booleans())
def test_every_figure_is_finite_and_not_negative(w: dict[str, Any], named: bool) -> None:
    _check_figures(ask(query(w, gpus=named)))


@pytest.mark.parametrize("q", [
    "which gpu for 13B lora", "max users for 70B int4 on h200 at 32k context",
    "largest model for 24GB int4", "max context for 8B fp16 on rtx 4090",
    "how many h100 for 405B fp8", "how many a10g for llama-3.1-70b", "max users for 70B on 1GB",
    "serve 0.001b q4_k_m", "train 100000B", "serve llama-3.1-8b 1000000 users 100000000 context",
    "prefill llama-3.1-8b 100000000 tokens on a10g",
])
def test_figures_of_questions_and_extremes(q: str) -> None:
    _check_figures(ask(q))


@PROPERTY
@given(st.data())
def test_answers_are_deterministic(data: Any) -> None:
    r = Drawn(data)
    q, other = vocab_query(r), vocab_query(r)
    try:
        first = ask(q).to_dict()
    except QueryError as err:
        with pytest.raises(QueryError) as again:
            ask(q)
        assert again.value.to_dict() == err.to_dict()
        return
    try:
        ask(other)              # something else in between: no state carries over
    except QueryError:
        pass
    assert ask(q).to_dict() == first
