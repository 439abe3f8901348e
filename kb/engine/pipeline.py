"""The whole path of one question: query text → Workload → Answer, with its options.

In: the Knowledge, the query text (or a Workload already read from it) and the settings of
the surface that asks (sort, options). Out: the Answer every surface renders, its verdict
composed (kb.engine.verdicts.verdict) after the options are known. kb.ask and kb.answer_in call this.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kb.engine import answer

from kb.engine.resolving import volume
from kb.engine.resolving.scope import fleet_kv
from kb.engine.advising.compare import sides
from kb.engine.advising.compare_counts import compared, local_fallback, settle
from kb.engine.advising.options import compute
from kb.engine.verdicts.verdict import compose, fitted
from kb.figures import num
from kb.knowledge import names as N
from kb.query.parse import parse

if TYPE_CHECKING:
    from collections.abc import Callable

    from kb.engine.assembly.answer import Answer, GpuRow
    from kb.engine.assembly.answer_records import Option
    from kb.knowledge.data import Knowledge
    from kb.knowledge.records_rules import LocalFallback
    from kb.query.workload import Workload


def respond(kn: Knowledge, query: str, w: Workload | None = None, *, sort: str | None = None,
            options: bool = False, asked: Callable[[], Workload] | None = None) -> Answer:
    """The answer to `query` (read with `kn` unless its Workload `w` is given); `sort` and
    `options` as kb.ask takes them. Raises kb.errors.QueryError for a query it cannot read."""
    if asked is None:
        def asked() -> Workload:            # the query read again (the engine fills defaults in place)
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
    fleet_kv(w, kn)                                 # a fleet's KV format, before any search reads it
    cards, volume_asked = compared(w), volume.applies(kn, w)
    said = settle(kn, w, query) if cards else ""    # counts, format or users the engine chooses:
    if volume_asked:                                # settled once, then read so
        volume.settle(kn, w, query)
    if cards or volume_asked:
        reread = w.copy().copy
    from kb.engine.advising import fleets

    a = fleets.answered(kn, w, query, fleet_answer) or fleet_answer(w, kn, query)
    return with_options(a, w, kn, reread, said)


def fleet_answer(w: Workload, kn: Knowledge, query: str) -> Answer:
    """The answer to a question that may be a fleet's: its replicas (kb.engine.search.replicas),
    else the engine's own answer, in which a fleet question no layout serves has no count and
    says the fastest one replica serves one user."""
    from kb.engine.search import replicas  # serving many users: replicas of a layout

    a = replicas.answered(w, kn, query)
    if a is None:
        a = answer(w, kn, query, unserved=replicas.applies(kn, w))     # a fleet question no layout serves has no count
        if a.question and a.question.get("kind") == "how_many_gpus" and not (a.question.get("answer") or {}).get("found"):
            a.question["fastest_one_user"] = replicas.fastest_one_user(kn, w)   # a fleet no count serves
    return a


def fleet_unserved(a: Answer) -> bool:
    """A fleet question no count serves (its question holds fastest_one_user): what would change
    one configuration (a format, a card count at one user) does not answer it, so no options."""
    return a.question is not None and bool(a.question.get("fastest_one_user"))


def with_options(a: Answer, w: Workload, kn: Knowledge, asked: Callable[[], Workload], said: str = "") -> Answer:
    """Options when asked for, or when the GPUs asked about do not hold the job
    (kb.engine.advising.options), duplicates merged, but for a fleet no count serves; the sides of a comparison ("fp8 vs int4":
    kb.engine.advising.compare); the verdict composed again with them."""
    if w.compare is not None:
        a.comparison = sides(kn, asked(), a)
    rows = [g for g in a.gpus if g.requested]
    if not fleet_unserved(a) and (w.want_options or (rows and not any(g.fits for g in rows))):
        as_asked = asked()              # the query read once more: the engine filled `w` in place
        a.options = merged(compute(kn, as_asked, a, answer))
        if w.focus == "time" and w.compare is None and rows and "training" in a.bottleneck:
            a, said = as_run(a, kn) or (a, "")
        elif rows and (fb := local_fallback(kn, as_asked, a)) is not None:
            a, said = as_run(a, kn, fb) or (a, "")
    a.verdict = fitted([said, compose(a, kn)], kn) if said else compose(a, kn)
    return a


def as_run(a: Answer, kn: Knowledge, fb: LocalFallback | None = None) -> tuple[Answer, str] | None:
    """A training-time question whose job does not fit the cards asked about: answered with the
    least change that fits on those same cards (the options are ordered least change first:
    activation checkpointing, as the trainers run LoRA on small cards, before a 4-bit base),
    said first in the verdict and the assumptions; None when no change fits those cards."""
    first = next((g for g in a.gpus if g.requested), None)
    options = a.options or []
    precision = fb[N.PRECISION] if fb is not None else None
    done = next((o for o in options if first is not None and o[N.FITS]
                 and (o["gpu_id"], o["count"]) == (first.id, first.count)
                 and (precision is None or o["workload_changes"].get(N.PRECISION) == precision)), None)
    if first is None:
        return None
    if done is None:
        return _at_format(a, kn, fb, first) if fb is not None else None
    b = answer(parse(done["query"], kn), kn, a.query)
    b.query = a.query
    b.options = [o for o in options if o is not done]
    need, has = num(first.per_gpu_gb or 0), num(first.usable_vram_gb or 0)
    change = done["change"] if done["change"][1:2].isupper() else done["change"][:1].lower() + done["change"][1:]
    if fb is not None:                  # a plain question on one's own card: the format people run
        said = (f"As asked, at {a.workload.get('precision')}, it does not fit ({need} of {has} GB per GPU); "
                f"at {precision}, {fb['text']}, it does.")
        why = f"so it is answered at {fb['text']} [{fb['source']}]"
    else:
        said = f"As asked it does not fit ({need} of {has} GB per GPU); timed with {change}, which fits."
        why = "so the time is for the least change that fits the same cards"
    b.assumptions.insert(0, f"answered with {done['change']}: as asked the job needs {need} GB per GPU of {has} "
                            f"on {first.count}× {first.name}, {why}, kbq \"{done['query']}\" (its quality "
                            f"cost: {done['quality']}) [{done['quality_source']}]")
    return b, said


def _at_format(a: Answer, kn: Knowledge, fb: LocalFallback, first: GpuRow) -> tuple[Answer, str] | None:
    """A plain question on one's own card that does not fit it even in the format people run
    there: answered in that format all the same (what they would download, and how many of
    those cards it takes), with the 16-bit figure said first; None where the format is no
    narrower than the one asked."""
    from kb.engine import answer
    from kb.query.parse import parse

    asked_prec = str(a.workload.get(N.PRECISION) or "")
    fmt = kn.precisions.get(fb[N.PRECISION])
    if fmt is None or asked_prec not in kn.precisions or \
            fmt["bits_per_weight"] >= kn.precisions[asked_prec]["bits_per_weight"]:
        return None
    from kb.engine.advising.options import compute

    def at_format() -> Workload:
        w = parse(a.query, kn)
        w.precision = fb[N.PRECISION]
        return w
    b = answer(at_format(), kn, a.query)
    b.query = a.query
    b.options = merged(compute(kn, at_format(), b, answer))
    need, has = num(first.per_gpu_gb or 0), num(first.usable_vram_gb or 0)
    said = (f"As asked, at {asked_prec}, it needs {need} of {has} GB per GPU; "
            f"at {fb['precision']}, {fb['text']}, as below.")
    b.assumptions.insert(0, f"answered at {fb['precision']}: as asked, at {asked_prec}, the job needs {need} GB per "
                            f"GPU of {has} on {first.count}× {first.name}, so it is answered at {fb['text']} "
                            f"[{fb['source']}]")
    return b, said


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
