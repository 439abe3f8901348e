"""The tables derived from the knowledge, computed once when it is built and never changed.

In: a Knowledge as kb.knowledge builds it from YAML or kb.snapshot reads it from JSON (without
its tables). Out: the same Knowledge with `derived`, a frozen Derived: each formula's evaluation
order, the constants' values, the trace text of every formula case, the formulas each claim
reads, the error bands per runtime and kind of job, the catalogue's GPU columns per precision
key (kb.gpu_names) and the query vocabulary (kb.query_words). `with_model` (a --model-config
model) and `rederive` (new prices) give a new Knowledge; none is ever changed, so one is safe
to share across threads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from kb.gpu_names import Scope, catalogue_tables
from kb.model import Claim, Formula, Knowledge
from kb.query_words import Vocab, vocabulary

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


@dataclass(frozen=True)
class Derived:
    order: Mapping[str, tuple[str, ...]]            # formula → the formulas it needs, then itself
    constants: Mapping[str, Any]                    # constant → value
    case_text: Mapping[tuple[str, int], CaseText]   # (formula, case index) → its trace text
    claim_formulas: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]]  # claim → (when, value)
    error_bands: Mapping[tuple[str, bool], Mapping[str, Any]]  # (runtime, training) → bands
    gpu_columns: Mapping[tuple[str, ...], Scope]    # kb.gpu_names.precision_key → columns
    vocabulary: Vocab


def derive(kn: Knowledge) -> Knowledge:
    """The knowledge with its derived tables."""
    return replace(kn, derived=Derived(
        order=MappingProxyType({n: deps + (n,) for n, deps in kn.closure.items()}),
        constants=MappingProxyType({name: c["value"] for name, c in kn.constants.items()}),
        case_text=MappingProxyType({(f.name, i): _case_text(f, i) for f in kn.formulas.values()
                                    for i in range(len(f.cases))}),
        claim_formulas=MappingProxyType({c.id: _claim_formulas(kn, c) for c in kn.claims}),
        error_bands=MappingProxyType({(rt, training): MappingProxyType(_error_bands(kn, rt, training))
                                      for rt in kn.runtimes for training in (False, True)}),
        gpu_columns=MappingProxyType(catalogue_tables(kn.gpus, kn.precisions, kn.runtimes)),
        vocabulary=vocabulary(kn)))


def with_model(kn: Knowledge, model: dict[str, Any], *, words: bool = True) -> Knowledge:
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


def _error_bands(kn: Knowledge, runtime: str, is_training: bool) -> dict[str, Any]:
    """How far each kind of figure has been from published measurements: per runtime when the
    runtime has its own band, else over all runtimes, and which measurements say so."""
    kinds = kn.error_bands.get("kinds", {})
    out: dict[str, Any] = {}
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
