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
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kb import ask, get_knowledge
from kb.engine.answer import Answer
from kb.errors import QueryError
from kb.recordtype import is_record, replace
from test_fuzz import Drawn, vocab_query   # the fuzzing's query generator (tests/test_fuzz.py)

KN = get_knowledge()
# Every catalogue GPU judged on one card (as without rules/prices.yaml's advice, which judges
# each at the fewest cards that hold the job): the one-card invariants below compare these.
ONE_CARD = replace(KN, advice={})


def one_card(q: str) -> Any:
    from kb.engine import answer
    from kb.query.parse import parse

    return answer(parse(q, ONE_CARD), ONE_CARD, q)

MODELS = sorted(KN.models)
GPUS = sorted(KN.gpus)
PRECISIONS = sorted(KN.precisions)
INFERENCE_RUNTIMES = sorted(k for k, rt in KN.runtimes.items() if rt["kind"] in ("inference", "both"))
TRAINING_RUNTIMES = sorted(k for k, rt in KN.runtimes.items() if rt["kind"] in ("training", "both"))
TRAINING_TASKS = ("lora", "qlora", "full fine-tune", "pretrain")

PROPERTY = settings(max_examples=200, deadline=None)


def bits(precision: str) -> float:
    return float(KN.precisions[precision]["bits_per_weight"])


def quantizes_embeddings(precision: str) -> bool:
    return bool(KN.precisions[precision].get("quantizes_embeddings", True))


def sixteen_bit_share(precision: str) -> int:
    """How much a format leaves in 16 bits: 0 nothing, 1 the embeddings and head, 2 everything
    but the routed experts (a MoE checkpoint's experts-only format)."""
    p = KN.precisions[precision]
    return 2 if p.get("experts_only") else 0 if p.get("quantizes_embeddings", True) else 1


def is_hbm(gpu_id: str) -> bool:
    return str(KN.gpus[gpu_id].get("memory_type", "")).upper().startswith("HBM")


def is_apple(gpu_id: str) -> bool:
    return KN.gpus[gpu_id]["vendor"] == "apple"


# ---------------------------------------------------------------- workloads → queries

@st.composite
def inference_workloads(draw: Any) -> dict[str, Any]:
    return {
        "task": draw(st.sampled_from(["serve", "infer"])),
        "model": draw(st.sampled_from(MODELS)),
        "precision": draw(st.sampled_from(PRECISIONS)),
        "users": draw(st.integers(1, 512)),
        "context": draw(st.integers(1, 131_072)),
        "batch": draw(st.integers(1, 8)),
        "seq": draw(st.integers(1, 8192)),
        "gpu": draw(st.sampled_from(GPUS)),
        "count": draw(st.integers(1, 8)),
        "runtime": draw(st.sampled_from(INFERENCE_RUNTIMES)),
    }


@st.composite
def training_workloads(draw: Any) -> dict[str, Any]:
    task = draw(st.sampled_from(TRAINING_TASKS))
    return {
        "task": task,
        "model": draw(st.sampled_from(MODELS)),
        "precision": draw(st.sampled_from(["bf16", "fp16", "fp32"])) if task != "qlora" else "nf4",
        "users": draw(st.integers(1, 64)),
        "context": draw(st.integers(1, 32_768)),
        "batch": draw(st.integers(1, 16)),
        "seq": draw(st.integers(1, 16_384)),
        "gpu": draw(st.sampled_from(GPUS)),
        "count": draw(st.integers(1, 8)),
        "runtime": draw(st.sampled_from(TRAINING_RUNTIMES)),
    }


def workloads() -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(inference_workloads(), training_workloads())


def query(w: dict[str, Any], gpus: bool = True) -> str:
    parts = [w["task"], w["model"]]
    if w.get("precision"):
        parts.append(w["precision"])
    parts += [f"{w['users']} users", f"{w['context']} context", f"batch {w['batch']}",
              f"seq {w['seq']}"]
    if gpus:
        parts.append(f"on {w['count']}x {w['gpu']}")
    parts.append(f"with {w['runtime']}")
    return " ".join(parts)


def total_gb(q: str, answer: Answer | None = None) -> float:
    value = (answer or ask(q)).memory["total_gb"]
    assert isinstance(value, float) and math.isfinite(value), (q, value)
    return value


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


def _check_precision_order(totals: dict[str, float]) -> None:
    for lo, hi in itertools.permutations(totals, 2):
        if bits(lo) > bits(hi) or totals[lo] <= totals[hi] * (1 + 1e-12):
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
    _check_precision_order(_memory_by_precision(
        f"lora {model} {{precision}} batch {batch} seq {seq} checkpointing{placement} on {gpu} with {runtime}",
        STORED_AS_NAMED))


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


# ---------------------------------------------------------------- GPUs compared in one answer

def _platform_gpus(a: Any) -> int:
    """Catalogue GPUs of the platforms and architectures the answer's runtime runs on
    (runtimes.yaml platforms, unsupported_architectures)."""
    rt = KN.runtimes[a.workload["runtime"]]
    return sum(g["vendor"] in rt["platforms"] and g.get("architecture") not in rt["unsupported_architectures"]
               for g in KN.gpus.values())


def _pairs(rows: list[Any]) -> list[tuple[Any, Any]]:
    return list(itertools.permutations(rows, 2))


@PROPERTY
@given(inference_workloads())
def test_more_bandwidth_never_lowers_decode_speed(w: dict[str, Any]) -> None:
    """Every catalogue GPU at count 1, one runtime: a GPU with no less bandwidth and compute
    and the same kind of memory decodes no slower. Apple's unified memory is a kind of its own:
    its Metal kernels carry their own calibrated fixed cost a token (runtimes.yaml
    apple_decode_step_overhead_s; llama.cpp discussion #4167), so an Apple chip is compared with
    Apple chips."""
    a = one_card(query(w, gpus=False))
    rows = a.gpus
    assert len(rows) == _platform_gpus(a)
    for row in rows:   # a speed is missing only where the catalogue has no TFLOPS for the GPU,
        # or where the job does not fit (no speed for what cannot run)
        assert (row.decode_tokens_per_s is None) == (row.compute_tflops is None or not row.fits), row.id
    rows = [r for r in rows if r.decode_tokens_per_s is not None]
    compared = 0
    for x, y in _pairs(rows):
        if (is_hbm(x.id) == is_hbm(y.id) and is_apple(x.id) == is_apple(y.id)
                and x.bandwidth_gb_s >= y.bandwidth_gb_s and x.compute_tflops >= y.compute_tflops):
            compared += 1
            assert x.decode_tokens_per_s >= y.decode_tokens_per_s * (1 - 1e-12), (
                f"{x.id} ({x.bandwidth_gb_s} GB/s, {x.compute_tflops} TFLOPS) decodes at "
                f"{x.decode_tokens_per_s:.2f} tok/s, slower than {y.id} ({y.bandwidth_gb_s} "
                f"GB/s, {y.compute_tflops} TFLOPS) at {y.decode_tokens_per_s:.2f}")
    # enough pairs were compared (only GPUs that hold the job show a speed)
    assert compared >= min(100, len(rows) * (len(rows) - 1) // 8)


@PROPERTY
@given(inference_workloads(), st.lists(st.sampled_from(GPUS), min_size=2, max_size=5, unique=True))
def test_more_bandwidth_never_lowers_decode_speed_on_several_gpus(
        w: dict[str, Any], gpus: list[str]) -> None:
    """The same with a count > 1, where the all-reduce also depends on the interconnect."""
    on = " vs ".join(f"{w['count']}x {g}" for g in gpus)
    a = ask(query(w, gpus=False).replace(f" with {w['runtime']}", f" on {on} with {w['runtime']}"))
    rows = [r for r in a.gpus if r.decode_tokens_per_s is not None]
    assert all(r.count == w["count"] for r in a.gpus)
    for x, y in _pairs(rows):
        link = lambda r: (KN.gpus[r.id].get("interconnect") or {}).get("gb_s") or 0  # noqa: E731
        if (is_hbm(x.id) == is_hbm(y.id) and is_apple(x.id) == is_apple(y.id)
                and x.bandwidth_gb_s >= y.bandwidth_gb_s
                and x.compute_tflops >= y.compute_tflops and link(x) >= link(y)):
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
    a = ask(query(w, gpus=False))
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
    # whole nodes (kb.engine.solve.fewest_scanned: servers are bought and rented by the node), so
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
    if is_record(value) and not isinstance(value, type):
        value = dict(value.__dict__)
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
