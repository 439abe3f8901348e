"""The tables derived from the knowledge, computed once when it is built and never changed.

In: a Knowledge as kb.knowledge.build builds it from YAML or kb.knowledge.snapshot reads it from JSON (without
its tables). Out: the same Knowledge with `derived`, a frozen Derived: each formula's evaluation
order, the constants' values, the trace text of every formula case, the formulas each claim
reads, the error bands per runtime and kind of job, the catalogue's GPU columns per precision
key (kb.expr.gpu_names) and the query vocabulary (kb.query.words). `with_model` (a --model-config
model) and `rederive` (new prices) give a new Knowledge; none is ever changed, so one is safe
to share across threads.

The tables an answer reads only a few entries of (the trace texts, the claims' formulas, the
error bands, the GPU columns per precision key) are Lazy: read-only mappings whose entries are
computed on first read and kept, so a one-query process does not build the whole table when it
loads the knowledge. An entry is a pure function of the knowledge, so two threads that compute
the same one at once compute the same value.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Generic, TypeVar

from kb.expr.gpu_names import Gemm, Scope, gemm_of, gpu_columns, precision_key, runs_on
from kb.knowledge.data import Claim, Formula, Knowledge
from kb.query.words import Vocab, vocabulary
from kb.recordtype import record, replace

if TYPE_CHECKING:
    from kb.knowledge.records import GPU, Model, Precision
    from kb.engine.answer_records import ErrorBand

# figure of the answer → kind of measurement in rules/error_bands.yaml
BAND_KINDS = {
    "inference": {"decode_tokens_per_s": "decode_tokens_per_s",
                  "decode_tokens_per_s_aggregate": "aggregate_tokens_per_s",
                  "prefill_tokens_per_s": "prefill_tokens_per_s", "total_gb": "inference_memory"},
    "training": {"train_tokens_per_s": "train_tokens_per_s", "total_gb": "training_memory"},
}

# what a trace step shows of a formula's case: the names it reads, its text, its note, the
# rule ("name (file:line)") and its sources
CaseText = tuple[tuple[str, ...], str, str | None, str, str]
# what the catalogue's columns at one precision key are made of: the cards (one each), the
# precision and the runtime's GEMM accumulation
CardsAt = tuple[list[tuple["GPU", int]], "Precision", Gemm]


K = TypeVar("K")
A = TypeVar("A")
V = TypeVar("V")


class Lazy(Mapping[K, V], Generic[K, A, V]):
    """A read-only table: `index()` gives every key with what computing its value needs (made
    on first use), `compute(arg)` one value, computed on first read and kept."""

    __slots__ = ("_index", "_make_index", "_compute", "_done")

    def __init__(self, index: Callable[[], dict[K, A]], compute: Callable[[A], V]) -> None:
        self._make_index = index
        self._compute = compute
        self._index: dict[K, A] | None = None
        self._done: dict[K, V] = {}

    def _keys(self) -> dict[K, A]:
        index = self._index
        if index is None:
            index = self._index = self._make_index()
        return index

    def __getitem__(self, key: K) -> V:
        try:
            return self._done[key]
        except KeyError:
            pass
        arg = self._keys()[key]         # KeyError for a key the table does not have
        value = self._done[key] = self._compute(arg)
        return value

    def __iter__(self) -> Iterator[K]:
        return iter(self._keys())

    def __len__(self) -> int:
        return len(self._keys())


@record(frozen=True)
class Derived:
    order: Mapping[str, tuple[str, ...]]            # formula → the formulas it needs, then itself
    constants: Mapping[str, float]                  # constant → value
    case_text: Mapping[tuple[str, int], CaseText]   # (formula, case index) → its trace text
    claim_formulas: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]]  # claim → (when, value)
    error_bands: Mapping[tuple[str, bool], Mapping[str, ErrorBand]]  # (runtime, training) → bands
    gpu_columns: Mapping[tuple[str, ...], Scope]    # kb.expr.gpu_names.precision_key → columns
    vocabulary: Vocab


def derive(kn: Knowledge, vocab: Vocab | None = None) -> Knowledge:
    """The knowledge with its derived tables; `vocab`: its query vocabulary when it is already
    made (kb.knowledge.snapshot stores it), else it is built here."""
    formulas, claims, runtimes = kn.formulas, kn.claims, kn.runtimes
    return replace(kn, derived=Derived(
        order=MappingProxyType({n: deps + (n,) for n, deps in kn.closure.items()}),
        constants=MappingProxyType({name: c["value"] for name, c in kn.constants.items()}),
        case_text=Lazy(lambda: {(f.name, i): (f, i) for f in formulas.values()
                                for i in range(len(f.cases))}, lambda fi: _case_text(*fi)),
        claim_formulas=Lazy(lambda: {c.id: c for c in claims}, lambda c: _claim_formulas(kn, c)),
        error_bands=Lazy(lambda: {(rt, training): (rt, training) for rt in runtimes
                                  for training in (False, True)},
                         lambda key: MappingProxyType(_error_bands(kn, *key))),
        gpu_columns=_catalogue_columns(kn),
        vocabulary=vocab if vocab is not None else vocabulary(kn)))


def _catalogue_columns(kn: Knowledge) -> Lazy[tuple[str, ...], CardsAt, Scope]:
    """kb.expr.gpu_names.gpu_columns of the catalogue GPUs each runtime runs on (one card each), per
    precision key (kb.expr.gpu_names.precision_key): every key the precisions and runtimes can make
    where at least one catalogue GPU runs the runtime, each computed when first read."""
    gpus, precisions, runtimes = kn.gpus, kn.precisions, kn.runtimes

    def index() -> dict[tuple[str, ...], CardsAt]:
        cards: dict[tuple[str, ...], list[tuple[GPU, int]]] = {}
        out: dict[tuple[str, ...], CardsAt] = {}
        for precision in precisions.values():
            for runtime in runtimes.values():
                key = precision_key(precision, runtime)
                if key in out:
                    continue
                platforms = tuple(runtime["platforms"])
                on = cards.get(platforms)
                if on is None:
                    on = cards[platforms] = [(g, 1) for g in gpus.values() if runs_on(runtime, g)]
                if on:
                    out[key] = (on, precision, gemm_of(runtime))
        return out

    return Lazy(index, lambda arg: gpu_columns(*arg))


def with_model(kn: Knowledge, model: Model, *, words: bool = True) -> Knowledge:
    """This knowledge and one more model (from a config.json), as a new object: `kn` is not
    changed. The tables that do not read the models are shared; the vocabulary, which holds the
    model names, is built again (`words=False`: a view only evaluated, never parsed against,
    keeps the knowledge's own)."""
    view = replace(kn, models={**kn.models, model["id"]: model})
    return replace(view, derived=replace(kn.derived, vocabulary=vocabulary(view))) if words else view


def _case_text(f: Formula, idx: int) -> CaseText:
    case = f.cases[idx]
    names = tuple(dict.fromkeys(case.expr.names + (case.when.names if case.when else ())))
    text = case.expr.text + (f"   [when {case.when.text}]" if case.when else "")
    return names, text, case.note or f.note, f"{f.name} ({f.where})", ", ".join(f.sources)


def _claim_formulas(kn: Knowledge, claim: Claim) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The formulas a claim's condition and its figure read."""
    when = claim.applies_when.names if claim.applies_when is not None else ()
    return (tuple(n for n in when if n in kn.formulas),
            tuple(n for n in claim.computed.names if n in kn.formulas))


def _error_bands(kn: Knowledge, runtime: str, is_training: bool) -> dict[str, ErrorBand]:
    """How far each kind of figure has been from published measurements: per runtime when the
    runtime has its own band, else over all runtimes, and which measurements say so."""
    kinds = kn.error_bands.get("kinds", {})
    out: dict[str, ErrorBand] = {}
    for figure, kind in BAND_KINDS["training" if is_training else "inference"].items():
        band = kinds.get(kind)
        if not band:
            continue
        rt = band.get("by_runtime", {}).get(runtime)
        basis = rt or band
        out[figure] = {"median_pct": basis["median_pct"], "p90_pct": basis["p90_pct"],
                       "n": basis["n"], "basis": f"{runtime} measurements" if rt else "all runtimes",
                       "measurements": tuple(p["id"] for p in band.get("measurements", [])
                                             if not rt or p["runtime"] == runtime)[:8],
                       "source": kn.error_bands.get("source")}
    return out
