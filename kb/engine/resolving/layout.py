"""Parallel layouts of an inference job: how many GPUs split each layer, how many hold stages.

In: the GPU count, the model's attention heads, whether the runtime splits layers by tensor
parallelism, the GPUs one node holds (rules/formulas.yaml `gpus_per_node`), and any tp / pp the
query gave. Out: a Layout (tp, pp, dp, and whether it is the canonical layout a how-many search
may pick; why not the plain one as a Note the verdict's wording says), and its scope names (`tp`, `pp`, `dp`) for the formulas.

Rules (vLLM and SGLang check them at start-up; see rules/sources.yaml vllm-parallelism-docs):
tensor parallelism must divide the attention heads and stays inside a node; past a node,
pipeline stages run across nodes. A layer split (llama.cpp) takes any count as pipeline stages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from kb.knowledge import names as N
from dataclasses import dataclass

if TYPE_CHECKING:
    from kb.engine.assembly.answer_records import Parallel


@dataclass(frozen=True, slots=True)
class Note:
    """Why a layout is not the plain one, as the template of rules/query.yaml verdict.templates
    that says it (layout_*) and its values; `problems`: the notes a fallback's {problems} lists."""
    template: str
    values: tuple[tuple[str, int], ...]
    problems: tuple[Note, ...] = ()


@dataclass(frozen=True, slots=True)
class Layout:
    tp: int
    pp: int
    dp: int
    canonical: bool     # TP inside a node, pipeline stages only across whole nodes
    note: Note | None   # why the layout is not the plain one, said in the assumptions

    def as_dict(self) -> Parallel:
        return {N.TP: self.tp, N.PP: self.pp, N.DP: self.dp}


def _largest_divisor(heads: int, count: int, limit: int) -> int:
    """The largest t ≤ limit that divides both the heads and the count (at least 1)."""
    return max(t for t in range(1, max(1, min(limit, count)) + 1) if heads % t == 0 and count % t == 0)


def choose(count: int, heads: int, tensor_parallel: bool, node: int,
           tp: int | None = None, pp: int | None = None) -> Layout:
    """The layout of `count` GPUs (any tp / pp the query gave are kept when they are valid)."""
    count = max(1, int(count))
    if not tensor_parallel:
        return Layout(1, count, 1, True, None)
    if tp or pp:
        return _asked(count, heads, node, tp, pp)
    if count <= node and heads % count == 0:
        return Layout(count, 1, 1, True, None)
    if count > node:
        t = _largest_divisor(heads, count, node)
        canonical = t == _largest_divisor(heads, node, node)
        return Layout(t, count // t, 1, canonical,
                      None if canonical else Note("layout_past_node", (("count", count), ("tp", t), ("pp", count // t))))
    t = _largest_divisor(heads, count, node)
    return Layout(t, count // t, 1, False,
                  Note("layout_heads", (("count", count), ("heads", heads), ("tp", t), ("pp", count // t))))


def _asked(count: int, heads: int, node: int, tp: int | None, pp: int | None) -> Layout:
    t = tp or max(1, count // (pp or 1))
    p = pp or 1
    problems = []
    if heads % t:
        problems.append(Note("layout_tp_heads", (("tp", t), ("heads", heads))))
    if t > node:
        problems.append(Note("layout_tp_node", (("tp", t), ("node", node))))
    if t * p > count:
        problems.append(Note("layout_tp_count", (("tp", t), ("pp", p), ("gpus", t * p), ("count", count))))
    if problems:
        fallback = choose(count, heads, True, node)
        return Layout(fallback.tp, fallback.pp, fallback.dp, fallback.canonical,
                      Note("layout_fallback", (("tp", fallback.tp), ("pp", fallback.pp)), tuple(problems)))
    dp = max(1, count // (t * p))
    return Layout(t, p, dp, True, None)


def scope_values(layout: Layout) -> dict[str, int]:
    return {N.TP: layout.tp, N.PP: layout.pp, N.DP: layout.dp}


def count_scan(node: int, upper: int) -> list[int]:
    """The GPU counts a search for the fewest that hold a job tries in turn, from 2 to `upper`:
    one by one up to a node, then growing by half (12, 16, 24, 32, 48…: counts a split divides)."""
    scan, n = [], 2
    while n <= upper:
        scan.append(n)
        n = n + 1 if n < node else (n * 3 // 2 if n & (n - 1) == 0 else n * 4 // 3)
    return scan
