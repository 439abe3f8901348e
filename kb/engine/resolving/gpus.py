"""The candidate GPUs as scope names: one GPU, or every candidate at once as columns.

In: GPU entries (gpus.yaml, or a bare capacity), the resolved precision and runtime, and a
parallel layout per GPU count (kb.engine.resolving.layout). Out: the `gpu.*`, `gpu_count`, `tp`, `pp` and `dp`
names a formula reads, per GPU or as kb.expr.parse.Col columns over the candidates (one value where
every candidate has the same).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kb.engine.resolving import training as tr
from kb.engine.evaluate import Scope
from kb.engine.resolving.scope import Resolved
from kb.expr.parse import Col
from kb.knowledge.gpu_names import FP32_GEMM, gemm_of, gpu_columns, gpu_values, precision_key, runs_on
from kb.engine.resolving.layout import Layout, choose, scope_values
from kb.knowledge.data import Knowledge
from kb.knowledge import names as N

if TYPE_CHECKING:
    from kb.knowledge.records import GPU, Precision, Runtime


def gpu_scope(base: Scope, gpu: GPU, count: int, precision: Precision,
              layout: Layout | None = None) -> Scope:
    """The scope of one GPU (and the parallel layout of `count` of them)."""
    scope = dict(base)
    scope.update(gpu_values(gpu, count, precision, base.get("_gemm", FP32_GEMM)))
    scope.update(scope_values(layout or Layout(count, 1, 1, True, None)))
    return scope


def layout_of(r: Resolved, kn: Knowledge, count: int) -> Layout:
    """The parallel layout of `count` GPUs for this job (kb.engine.resolving.layout); training keeps its split."""
    if r.is_training:
        return tr.layout(count, r.workload, kn)
    w = r.workload
    return choose(count, int(r.model["attention_heads"]), r.runtime.get("multi_gpu") == "tensor_parallel",
                  int(kn.constants[N.GPUS_PER_NODE]["value"]), w.tp, w.pp)


def layouts_of(r: Resolved, kn: Knowledge, candidates: list[tuple[GPU, int, bool]]) -> list[Layout]:
    """layout_of each candidate's count (a layout depends on the count, not on the card)."""
    by_count: dict[int, Layout] = {}
    out = []
    for _, count, _ in candidates:
        found = by_count.get(count)
        if found is None:
            found = by_count[count] = layout_of(r, kn, count)
        out.append(found)
    return out


def layout_columns(layouts: list[Layout]) -> Scope:
    """tp, pp and dp over the candidates: one value when all agree, else a Col."""
    out: Scope = {}
    for name in (N.TP, N.PP, N.DP):
        col = Col.of(getattr(x, name) for x in layouts)
        out[name] = col[0] if all(v == col[0] for v in col) else col
    return out


def catalogue_columns(kn: Knowledge, precision: Precision, runtime: Runtime) -> Scope:
    """gpu_columns of the catalogue GPUs the runtime runs on, once per compute precision and
    platform list (derived from rules)."""
    found = kn.derived.gpu_columns.get(precision_key(precision, runtime))
    if found is None:       # no catalogue GPU runs the runtime
        return gpu_columns([(g, 1) for g in kn.gpus.values() if runs_on(runtime, g, precision["id"])],
                           precision, gemm_of(runtime))
    return dict(found)
