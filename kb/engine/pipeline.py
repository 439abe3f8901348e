"""The whole path of one question: query text → Workload → Answer, with its options.

In: the Knowledge, the query text (or a Workload already read from it) and the settings of
the surface that asks (sort, options). Out: the Answer every surface renders, its verdict
composed (kb.engine.verdict) after the options are known. kb.ask and kb.answer_in call this.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from kb.engine.answer import Answer
    from kb.engine.answer_records import Option
    from kb.knowledge.data import Knowledge
    from kb.query.workload import Workload


def respond(kn: Knowledge, query: str, w: Workload | None = None, *, sort: str | None = None,
            options: bool = False, asked: Callable[[], Workload] | None = None) -> Answer:
    """The answer to `query` (read with `kn` unless its Workload `w` is given); `sort` and
    `options` as kb.ask takes them. Raises kb.errors.QueryError for a query it cannot read."""
    from kb.engine import answer

    if asked is None:
        def asked() -> Workload:            # the query read again (the engine fills defaults in place)
            from kb.query.parse import parse

            return parse(query, kn)

    def reread() -> Workload:
        w0 = asked()
        w0.sort = sort or w0.sort
        w0.want_options = options or w0.want_options
        return w0
    if w is None:
        w = reread()
    else:
        w.sort = sort or w.sort
        w.want_options = options or w.want_options
    return with_options(answer(w, kn, query), w, kn, reread)


def with_options(a: Answer, w: Workload, kn: Knowledge, asked: Callable[[], Workload]) -> Answer:
    """Options when asked for, or when the GPUs asked about do not hold the job
    (kb.engine.options), duplicates merged; the sides of a comparison ("fp8 vs int4":
    kb.engine.compare); the verdict composed again with them."""
    from kb.engine.verdict import compose

    if w.compare is not None:
        from kb.engine.compare import sides

        a.comparison = sides(kn, asked(), a)
    rows = [g for g in a.gpus if g.requested]
    if w.want_options or (rows and not any(g.fits for g in rows)):
        from kb.engine.options import compute

        a.options = merged(compute(kn, asked(), a))
    a.verdict = compose(a)
    return a


def merged(options: list[Option]) -> list[Option]:
    """One option per outcome: two rules that end at the same change on the same GPUs (the
    4-bit weights, and the 4-bit weights on the cards that would then hold it, when those are
    the cards asked about) are one option, listed once under its first name."""
    seen: set[tuple[str, int, str]] = set()
    out: list[Option] = []
    for o in options:
        key = (o["gpu_id"], o["count"], repr(sorted((k, repr(v)) for k, v in o["workload_changes"].items()
                                                    if k != "gpus")))
        if key not in seen:
            seen.add(key)
            out.append(o)
    return out
