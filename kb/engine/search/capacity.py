"""Capacity questions, one strategy per kind: max users, max batch, max context, largest model,
how many GPUs.

In: a Workload whose `question` is one of query.yaml `solve`, the Knowledge, and the ranking
kb.engine.run answers a plain workload with. Out: the Answer at the value found, with
`Answer.question` saying what was asked and what answers it.

Each kind is a Capacity run as the same stages: the cards searched (targets), the search on each
(rows, kb.engine.search.solve, while the budget lasts), the row the answer leads with (best), that row
settled against what the search does not see (settle: a model's maximum context), the answer at
its value (kb.engine.search.single_probe.at_value), and the facts the kind adds to the question (facts).
A kind overrides only the stages it does differently; STRATEGIES maps each kind to its strategy.
"""

from __future__ import annotations

from collections.abc import Callable

from typing import TYPE_CHECKING, cast

from kb.engine.resolving import training as tr
from kb.engine.assembly.answer import Answer
from kb.engine.resolving.scope import capacity_gpu, resolve_workload
from kb.figures import num
from kb.knowledge.data import Knowledge
from kb.knowledge.gpu_names import runs_on
from kb.query.workload import GpuRequest, Workload
from kb.knowledge import names as N

if TYPE_CHECKING:
    from kb.engine.assembly.answer_records import Question
    from kb.engine.search.budget import Budget
    from kb.engine.search.solve import Row
    from kb.knowledge.records import GPU

# a plain workload's answer: kb.engine.run.ranked(w, kn, query, brief)
Rank = Callable[[Workload, Knowledge, str, bool], Answer]
Targets = list[tuple["GPU", int]]


class Search:
    """One capacity question being answered: what the stages found so far."""

    def __init__(self, kn: Knowledge, w: Workload, rank: Rank, query: str, brief: bool,
                 unserved: bool = False) -> None:
        self.kn, self.w, self.rank, self.query, self.brief = kn, w, rank, query, brief
        self.unserved = unserved            # a fleet question no replica layout serves (kb.engine.pipeline)
        self.spec = kn.query["solve"][w.question or ""]
        self.targets: Targets = []
        self.sized: list[Row] = []          # the catalogue's cards no copy of a training job fits (kb.engine.search.scaled)
        self.unsized: list[str] = []
        self.rows: list[Row] = []
        self.stopped: Budget | None = None
        self.limit: int | None = None       # the model's maximum context, where memory allows more
        self.allows: float | None = None


class Capacity:
    """A question answered by the largest value that fits on each card (max users, max batch):
    the card named, or the first of the plain ranking; the largest value found leads."""

    def answer(self, kn: Knowledge, w: Workload, rank: Rank, query: str, brief: bool,
               unserved: bool = False) -> Answer:
        s = Search(kn, w, rank, query, brief, unserved)
        self.targets(s)
        self.rows(s)
        primary = self.settle(s, self.best(s))
        result = rank(_at_answer(s, primary), kn, query, brief)
        _question(s, primary, result)
        self.facts(s, primary, result, cast("Question", result.question))
        _said(s, result)
        return result

    def targets(self, s: Search) -> None:
        kn, w = s.kn, s.w
        if w.gpus:
            s.targets = [(capacity_gpu(g, kn) if g.gpu_id is None else kn.gpus[g.gpu_id], g.count) for g in w.gpus]
        else:
            plain = w.copy()
            plain.question = None
            first = s.rank(plain, kn, "", False).gpus[0]       # the plain ranking's first
            s.targets = [(kn.gpus[first.id], first.count)]

    def rows(self, s: Search) -> None:
        """solve_row on each card, the first always, the rest while the budget lasts."""
        from kb.engine.search import solve
        from kb.engine.search.budget import spent
        from kb.engine.search.probes import Probes

        probes = Probes(s.kn, s.w, [gpu for gpu, _ in s.targets])
        for gpu, count in s.targets:
            if s.rows and (stopped := spent()) is not None:
                s.stopped = stopped
                break
            s.rows.append(solve.solve_row(s.kn, s.w, s.w.question or "", gpu, count, probes))
        s.rows += s.sized

    def best(self, s: Search) -> Row:
        found = [r for r in s.rows if r["found"]]
        return s.rows[0] if s.w.gpus or not found else max(found, key=lambda r: r["value"])

    def settle(self, s: Search, primary: Row) -> Row:
        return primary

    def facts(self, s: Search, primary: Row, result: Answer, q: Question) -> None:
        pass


class MaxContext(Capacity):
    """The longest context that fits, never past the model's own maximum context."""

    def settle(self, s: Search, primary: Row) -> Row:
        if not primary["found"]:
            return primary
        limit = resolve_workload(s.w.copy(), s.kn).model.get("max_context")
        if not limit or primary["value"] <= limit:
            return primary
        s.limit, s.allows = int(limit), float(primary["value"])
        return {**primary, "value": float(limit), "binds": "the model's maximum context", "at_upper_bound": False}

    def facts(self, s: Search, primary: Row, result: Answer, q: Question) -> None:
        if s.limit is not None:
            q["model_max_context"] = s.limit
            q["memory_allows"] = s.allows or 0.0
            result.warnings.append(f"memory allows {num(s.allows, 6)} tokens, but the model's "
                                   f"maximum context is {num(s.limit, 6)}")


class LargestModel(Capacity):
    """The largest bare size that fits, said in billions too; asked as 'the best model I can run',
    the ranked catalogue models that fit as well (kb.engine.search.best_models)."""

    def facts(self, s: Search, primary: Row, result: Answer, q: Question) -> None:
        from kb.engine.search import best_models

        if primary["found"]:
            q["value_b"] = primary["value"] / s.kn.billion
            q["next_b"] = (primary.get("next") or 0) / s.kn.billion
        if not s.brief:
            best_models.add(s.w, s.kn, s.rank, s.query, result)      # 'the best model I can run': the ranked models that fit


class HowManyGpus(Capacity):
    """The fewest GPUs that hold the job: on the cards named, or on every catalogue card the
    runtime runs on, searched side by side; the fewest, then the most bandwidth, leads."""

    def targets(self, s: Search) -> None:
        from kb.engine.search import scaled

        if s.w.gpus:
            super().targets(s)
            return
        got = resolve_workload(s.w.copy(), s.kn)
        cards = [(g, 1) for g in s.kn.gpus.values() if runs_on(got.runtime, g, got.precision["id"])]
        s.targets, s.sized, s.unsized = scaled.split_off(s.kn, s.w, got, cards)

    def rows(self, s: Search) -> None:
        """Over the catalogue, the cards' searches side by side, a group at a time while the
        budget lasts; an option reads only the card that answers (kb.engine.search.fewest)."""
        from kb.engine.search import fewest
        from kb.engine.search import solve
        from kb.engine.search.budget import spent
        from kb.engine.search.probes import Probes

        probes = Probes(s.kn, s.w, [gpu for gpu, _ in s.targets])
        if not probes.shared_counts():
            super().rows(s)
            return
        if s.brief:
            s.rows = [fewest.primary(s.kn, probes)]
        else:
            step = solve.cards_at_once(s.kn)
            for first in range(0, len(s.targets), step):
                if s.rows and (stopped := spent()) is not None:
                    s.stopped = stopped
                    break
                s.rows.extend(solve.how_many_rows(s.kn, s.w, probes, first, min(first + step, len(s.targets))))
        s.rows += s.sized

    def best(self, s: Search) -> Row:
        found = [r for r in s.rows if r["found"]]
        if s.w.gpus or not found:
            return s.rows[0]
        return min(found, key=lambda r: (r["value"], -(s.kn.gpus[r["gpu_id"]]["bandwidth_gb_s"] or 0)))

    def settle(self, s: Search, primary: Row) -> Row:
        """A fleet question no replica of any layout serves under load (s.unserved) has no count:
        one configuration that would hold every user at once is checked without the load's
        prompts and queue, and is no answer to it."""
        if s.unserved and primary["found"]:
            return {"gpu": primary["gpu"], "gpu_id": primary["gpu_id"], "value": None, "found": False}
        return primary

    def facts(self, s: Search, primary: Row, result: Answer, q: Question) -> None:
        if not primary["found"]:
            q["note"] = tr.no_count_note(s.kn, result.memory).strip() or None
        elif result.gpus:
            q["fewest_by_memory"] = result.gpus[0].gpus_needed


STRATEGIES: dict[str, Capacity] = {
    "max_users": Capacity(), "max_batch": Capacity(), "max_context": MaxContext(),
    "largest_model": LargestModel(), "how_many_gpus": HowManyGpus(),
}


def answer(kn: Knowledge, w: Workload, rank: Rank, query: str, brief: bool, unserved: bool = False) -> Answer:
    """The capacity question `w` asks, answered by its kind's strategy (`unserved`: a fleet
    question no replica layout serves, HowManyGpus.settle)."""
    return STRATEGIES.get(w.question or "", Capacity()).answer(kn, w, rank, query, brief, unserved)


def _at_answer(s: Search, primary: Row) -> Workload:
    """The workload the answer is given at: the value found (else one user) on the card that
    leads (with no card named), or on the cards named, each at its own count."""
    from kb.engine.search.single_probe import at_value

    w, vary = s.w, s.spec["vary"]
    w2 = at_value(w, vary, primary["value"], s.kn) if primary["found"] else at_value(w, N.USERS, w.users or 1)
    w2.gpus = [g for g in w2.gpus] or []
    if not w.gpus:
        w2.gpus = [GpuRequest(primary["gpu_id"], int(primary.get("count") or 1))]
        if primary["found"] and vary == N.GPU_COUNT:
            w2.gpus[0].count = int(primary["value"])
    elif primary["found"] and vary == N.GPU_COUNT:
        rows = s.rows
        for g, row in zip(w2.gpus, rows + [primary] * (len(w2.gpus) - len(rows)), strict=True):
            g.count = int((row if row["found"] else primary)["value"])     # each card its own count
    return w2


def _question(s: Search, primary: Row, result: Answer) -> None:
    """What was asked and what answers it, on the answer (its speed floor said if it holds one)."""
    spec, w = s.spec, s.w
    facts: Question | dict[str, object] = result.question or {}
    if spec.get("holds") == N.SERVES_AT_FLOOR:
        floor = w.speed_floor_tok_s or s.kn.constants[N.DECODE_SPEED_FLOOR_TOK_S]["value"]
        result.assumptions.append(f"speed floor: every user decodes at {floor:g} tokens/s or more"
                                  + ("" if w.speed_floor_tok_s else " (formulas.yaml decode_speed_floor_tok_s)"))
    result.question = cast("Question", {
        **facts, "kind": w.question, "vary": spec["vary"], "unit": spec["unit"],
        "value": primary["value"], "gpu": primary["gpu"], "answer": primary,
        "lower": spec["lower"], "upper": spec["upper"],
        "per_gpu": [{"gpu": r["gpu"], "gpu_id": r["gpu_id"], "value": r["value"]} for r in s.rows]})


def _said(s: Search, result: Answer) -> None:
    """The cards a budget left unsearched and those not sized, in the warnings; the question
    first on the path."""
    from kb.engine.search.budget import note

    if s.stopped is not None:
        every = len(s.targets) + len(s.sized)
        text = (f"{every - len(s.rows)} of the {every} GPUs were not searched: this answer's "
                f"{s.stopped.reason()} ran out (the answer is the best of the {len(s.rows)} searched)")
        note(s.stopped, text)
        result.warnings.append(text)
    result.warnings += s.unsized
    result.path.insert(0, f"question/{s.w.question}")
