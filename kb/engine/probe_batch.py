"""Several probes of one search on one card, computed in one evaluation (kb.engine.probes).

In: a search's Probes, what it varies, the values (each with its GPU count) and the card. Out: the
Probe at each value, the one Probes.probe(..., alone=True) gives there.

A search that must try several values whatever their outcome (the bottom of each architecture's
range of a largest-model search, kb.engine.solve) evaluates them side by side: each value's scope
(its resolved workload, the parallel layout of its count, the card) is made as a single probe
makes it, and the names whose values differ between them become columns (kb.expr.parse.Col), as
the catalogue's answer evaluates every card at once. A column holds what each value computes
alone, so every Probe is the one a probe made from scratch there gives. A value whose probe
chooses its own split (a model-parallel training stack with none asked) is probed alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from kb.engine import training as tr
from kb.engine import formula_reads as fr
from kb.engine.evaluate import Evaluated, Scope, compute
from kb.engine.layout import scope_values
from kb.engine.single_probe import Probe
from kb.expr.parse import Col
from kb.knowledge.gpu_names import FP32_GEMM, gpu_values

if TYPE_CHECKING:
    from kb.engine.probes import Probes
    from kb.knowledge.records import GPU


def probes_over(p: Probes, vary: str, values: list[tuple[float, int]], gpu: GPU,
                holds: str = "fits") -> Iterator[Probe]:
    """p.probe(vary, v, gpu, n, holds, alone=True) for each (v, n) of `values`, in order, without
    counting them against the search budget (the caller counts each it reads). Those computed
    side by side are computed at the first read; one probed alone, when it is read."""
    kn = p.kn
    scopes: list[Scope] = []
    alone: set[int] = set()
    for k, (v, n) in enumerate(values):
        r = p.resolved(vary, v)
        w = r.workload
        if r.is_training and not (w.tp or w.pp) and tr.is_model_parallel(w, kn):
            alone.add(k)
            continue
        scope = p.inputs(vary, v)
        scope.update(scope_values(p.layout(vary, v, n)))
        scope.update(gpu_values(gpu, n, r.precision, scope.get("_gemm", FP32_GEMM)))
        scopes.append(scope)
    found = iter(_evaluated(p, scopes, holds))
    for k, (v, n) in enumerate(values):
        if k in alone:
            yield p._probe(vary, v, gpu, n, holds, alone=True)
        else:
            yield _kept(p, (vary, v, id(gpu), n, holds), gpu, next(found))


def _kept(p: Probes, key: tuple[str, float, int, int, str], gpu: GPU, at: Probe) -> Probe:
    """`at`, kept by p as the probe made alone there, and as the one asked of this card where
    that is the same (one card, or a card whose probe no columns over several stand for)."""
    p._made.setdefault((*key, True), (gpu, at, None))
    if len(p.cards) <= 1 or id(gpu) not in p._index:
        p._made.setdefault((*key, False), (gpu, at, None))
    return at


def _evaluated(p: Probes, scopes: list[Scope], holds: str) -> list[Probe]:
    if not scopes:
        return []
    first = scopes[0]
    if len(scopes) == 1 or any(s.keys() != first.keys() for s in scopes):
        return [_probe_of(p, s, holds) for s in scopes]
    scope: Scope = dict(first)
    differ: set[str] = set()
    try:                # the items of each and not of the first, compared as sets
        for s in scopes[1:]:
            differ.update(k for k, _ in s.items() - first.items())
    except TypeError:   # a value that cannot be hashed: one by one
        differ = {name for s in scopes[1:] for name, v in s.items()
                  if v.__class__ is not first[name].__class__ or v != first[name]}
    for name in differ:
        scope[name] = Col.of([s[name] for s in scopes])
    ev = Evaluated(scope)
    compute(p.kn, ev, fr.wanted(p.kn, "card", p.names(holds), None))
    s = ev.scope
    return [_probe_at(p, s, holds, k) for k in range(len(scopes))]


def _probe_of(p: Probes, scope: Scope, holds: str) -> Probe:
    ev = Evaluated(scope)
    compute(p.kn, ev, fr.wanted(p.kn, "card", p.names(holds), None))
    return _probe_at(p, ev.scope, holds, None)


def _probe_at(p: Probes, s: Scope, holds: str, k: int | None) -> Probe:
    def at(name: str) -> Any:
        v = s.get(name)
        return v[k] if k is not None and v.__class__ is Col else v

    meets = bool(at("meets_target")) if p.targets else None
    return Probe(bool(at(holds)) and meets is not False, at("per_gpu_gb"), at("usable_vram_gb"),
                 bool(at("fits")), at("decode_tokens_per_s"), at("speed_floor_tok_s"), meets)
