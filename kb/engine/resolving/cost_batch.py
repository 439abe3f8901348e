"""The batch a serving cost question is priced at when it names no user count (query.yaml
`cost_batch`): a per-token price is a loaded server's, so the answer is the configuration at the
most users it serves (the max_users search, kb.engine.search.solve), with the one-user cost beside it.

In: the workload asked, the knowledge, and the function that answers a workload (kb.engine.run).
Out: the loaded Answer (and the one-user cost per million tokens) with the assumption that says where its batch came from, or None when the
rule does not apply (a user count named, training, several or no configurations, one user found)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kb.figures import num
from kb.knowledge import names as N
from kb.engine.search import solve
from kb.engine.search.probes import Probes
from kb.engine.search.single_probe import at_value

if TYPE_CHECKING:
    from collections.abc import Callable

    from kb.engine.assembly.answer import Answer
    from kb.knowledge.data import Knowledge
    from kb.query.workload import Workload


def applies(w: Workload, kn: Knowledge) -> bool:
    """A serving cost question on one named configuration with no user count, no capacity question."""
    return (kn.query.get("cost_batch") is not None and w.focus == "cost" and w.users is None
            and w.question is None and len(w.gpus) == 1 and w.gpus[0].gpu_id is not None
            and w.task not in kn.query["training_tasks"])


def loaded(w: Workload, kn: Knowledge, one_user: Answer,
           answer: Callable[[Workload], Answer]) -> tuple[Answer, float] | None:
    """The answer at the batch the configuration sustains, saying the one-user cost; None when
    that batch is one user or the one-user answer has no cost."""
    rule = kn.query["cost_batch"]
    assert rule is not None
    first = next((g for g in one_user.gpus if g.requested), None)
    if first is None or not first.fits or first.usd_per_million_tokens is None:
        return None
    if w.context_tokens is None and w.prompt_tokens is None and w.output_tokens is None:
        w = w.copy()    # a server's requests are the default request, not a full context each
        w.prompt_tokens = int(kn.defaults[N.PROMPT_TOKENS])
        w.output_tokens = int(kn.defaults[N.OUTPUT_TOKENS])
        w.context_tokens = w.prompt_tokens + w.output_tokens
    asked = w.copy()
    asked.question = rule["solve"]
    gpu = kn.gpus[str(w.gpus[0].gpu_id)]
    row = solve.solve_row(kn, asked, rule["solve"], gpu, w.gpus[0].count, Probes(kn, asked, [gpu]))
    users = int(row["value"] or 0) if row["found"] else 0
    if users <= 1:
        return None
    result = answer(at_value(w, N.USERS, users, kn))
    result.assumptions = [s for s in result.assumptions if not s.startswith("concurrent users:")]
    result.assumptions.append(
        f"concurrent users: {users}, {rule['text']} ${num(first.usd_per_million_tokens)} per million "
        f"tokens [{rule['source']}]")
    return result, first.usd_per_million_tokens
