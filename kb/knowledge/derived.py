"""The tables derived from the knowledge, computed once when it is built and never changed.

In: a Knowledge as kb.knowledge.build builds it from YAML or kb.knowledge.snapshot reads it from JSON (without
its tables). Out: the same Knowledge with `derived`, a frozen Derived: each formula's evaluation
order, the constants' values, the trace text of every formula case, the formulas each claim
reads, the error bands per runtime and kind of job, the catalogue's GPU columns per precision
key (kb.knowledge.gpu_names). The tables a later stage makes from the knowledge (the query
vocabulary, kb.query.words) are kept in Derived.tables, which this module never fills. `with_model` (a --model-config
model) and `rederive` (new prices) give a new Knowledge; none is ever changed, so one is safe
to share across threads.

The tables an answer reads only a few entries of (the trace texts, the claims' formulas, the
error bands) are Lazy: read-only mappings whose entries are computed on first read and kept, so
a one-query process does not build the whole table when it loads the knowledge; the GPU columns
per precision key (CatalogueColumns) also find an entry without indexing every key. An entry is a pure function of the knowledge, so two threads that compute
the same one at once compute the same value.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import TYPE_CHECKING

from kb.knowledge.data import CardsAt, CaseText, Claim, Derived, Formula, Knowledge, Lazy
from kb.knowledge.gpu_names import Scope, format_architectures, gemm_of, gpu_columns, precision_key, runs_on

if TYPE_CHECKING:
    from kb.knowledge.records import GPU, ErrorBand, Model

# figure of the answer → kind of measurement in rules/error_bands.yaml
BAND_KINDS = {
    "inference": {"decode_tokens_per_s": "decode_tokens_per_s",
                  "decode_tokens_per_s_aggregate": "aggregate_tokens_per_s",
                  "prefill_tokens_per_s": "prefill_tokens_per_s", "total_gb": "inference_memory"},
    "training": {"train_tokens_per_s": "train_tokens_per_s", "total_gb": "training_memory"},
}

def derive(kn: Knowledge, tables: dict[str, object] | None = None) -> Knowledge:
    """The knowledge with its derived tables; `tables`: what the later stages made from it and
    the snapshot kept (Derived.tables), else none yet."""
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
        gpu_columns=CatalogueColumns(kn),
        tables=tables if tables is not None else {}))


class CatalogueColumns(Mapping[tuple[str, ...], Scope]):
    """kb.knowledge.gpu_names.gpu_columns of the catalogue GPUs each runtime runs on (one card each), per
    precision key (kb.knowledge.gpu_names.precision_key): every key the precisions and runtimes can make
    where at least one catalogue GPU runs the runtime, each computed when first read.

    An entry is the columns of the first (precision, runtime) pair, precisions then runtimes in
    their order, that makes its key and whose runtime runs on some catalogue card. Reading one
    walks the pairs in that order up to that pair, computing each pair's key once (and the
    cards of a pair only where the key is the one read), so a one-query process does not make
    the keys of every pair and the cards of every platform list (about 15 M instructions of a
    cold start). Each step is a pure function of the knowledge, so two threads that compute
    the same key or entry at once compute the same value."""

    __slots__ = ("_pairs", "_gpus", "_keys", "_cards", "_done", "_absent")

    def __init__(self, kn: Knowledge) -> None:
        self._pairs = [(p, r) for p in kn.precisions.values() for r in kn.runtimes.values()]
        self._gpus = kn.gpus
        self._keys: dict[int, tuple[str, ...]] = {}                 # pair index → its key
        self._cards: dict[tuple[str, ...], list[tuple[GPU, int]]] = {}  # platform list → cards
        self._done: dict[tuple[str, ...], Scope] = {}
        self._absent: set[tuple[str, ...]] = set()

    def _key(self, i: int) -> tuple[str, ...]:
        key = self._keys.get(i)
        if key is None:
            key = self._keys[i] = precision_key(*self._pairs[i])
        return key

    def _on(self, i: int) -> CardsAt | None:
        """The cards, precision and GEMMs of pair i, or None where no catalogue card runs it."""
        precision, runtime = self._pairs[i]
        platforms = (*runtime["platforms"], "|", *runtime.get("unsupported_architectures", []),
                     "|", *format_architectures(runtime, precision["id"]))
        on = self._cards.get(platforms)
        if on is None:
            on = self._cards[platforms] = [(g, 1) for g in self._gpus.values()
                                           if runs_on(runtime, g, precision["id"])]
        return (on, precision, gemm_of(runtime)) if on else None

    def __getitem__(self, key: tuple[str, ...]) -> Scope:
        try:
            return self._done[key]
        except KeyError:
            pass
        if key not in self._absent:
            for i in range(len(self._pairs)):
                if self._key(i) == key and (made := self._on(i)) is not None:
                    value = self._done[key] = gpu_columns(*made)
                    return value
            self._absent.add(key)
        raise KeyError(key)

    def _index(self) -> dict[tuple[str, ...], int]:
        out: dict[tuple[str, ...], int] = {}
        for i in range(len(self._pairs)):
            key = self._key(i)
            if key not in out and self._on(i) is not None:
                out[key] = i
        return out

    def __iter__(self) -> Iterator[tuple[str, ...]]:
        return iter(self._index())

    def __len__(self) -> int:
        return len(self._index())


def with_model(kn: Knowledge, model: Model, *, words: bool = True) -> Knowledge:
    """This knowledge and one more model (from a config.json), as a new object: `kn` is not
    changed. The tables that do not read the models are shared; the later stages' tables
    (Derived.tables: the query vocabulary holds the model names) start empty, so they are made
    again for the view (`words=False`: a view only evaluated, never parsed against, keeps the
    knowledge's own)."""
    view = replace(kn, models={**kn.models, model["id"]: model})
    return replace(view, derived=replace(kn.derived, tables={})) if words else view


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
