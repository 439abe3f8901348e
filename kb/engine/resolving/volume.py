"""A serving volume with no user count: "at 1000 requests per minute", "for 500M tokens a day".

A volume is met by concurrency: a server that decodes r tokens/s for each of U users at once makes
U x r tokens/s, and r falls as U grows (each step reads every user's KV cache). The users a volume
needs are the fewest U with U x r(U) at or over the rate (Little's law: the requests in flight are
the arrival rate times each request's time, so U x r is the rate of tokens generated). From one
user up, U = ceil(rate / r(U)) is taken again at each new U until the rate is met (r only falls,
so U only grows); it stops when the configuration no longer holds the users, which the answer then
says, or after the rules' bound of steps.

In: the Workload as read (users None, tokens_per_day set), the Knowledge, the query. Out: the
Workload with its users set, and the sentence that says how they were found (the assumptions).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from kb.figures import num
from kb.knowledge import names as N
from kb.engine import answer

if TYPE_CHECKING:
    from kb.knowledge.data import Knowledge
    from kb.query.workload import Workload


STEPS = 8       # answers tried at most: U grows by rate / r(U) each time, so it settles in two or three


def applies(kn: Knowledge, w: Workload) -> bool:
    """A serving question with a volume and no user count."""
    return (w.tokens_per_day is not None and w.users is None
            and w.task not in kn.query["training_tasks"] and w.question not in ("max_users", "max_batch"))


def settle(kn: Knowledge, w: Workload, query: str) -> None:
    """Set w.users (in place) to the users the volume needs on the configuration the question
    is answered on, said in its notes when more than one."""

    rate = float(w.tokens_per_day or 0) / float(kn.constants[N.SECONDS_PER_DAY]["value"])
    if w.context_tokens is None:        # a server's requests are its requests, not a full context each
        w.prompt_tokens = w.prompt_tokens or int(kn.defaults[N.PROMPT_TOKENS])
        w.output_tokens = w.output_tokens or int(kn.defaults[N.OUTPUT_TOKENS])
        w.context_tokens = w.prompt_tokens + w.output_tokens
    # a how-many question on a tensor-parallel runtime is answered as replicas of a layout
    # (kb.engine.search.replicas), which chooses the layout itself
    fleet = (w.question == "how_many_gpus" and w.tp is None and w.pp is None and w.runtime is not None
             and kn.runtimes[w.runtime]["multi_gpu"] != "tensor_parallel")
    # ...and those replicas step toward the rate under load themselves (replicas.users_for_rate),
    # so they take only the first step here: the users one request's decode speed calls for
    from kb.engine.search.replicas import fleet_question

    replicas = fleet_question(kn, w)
    users, speed, config = 1, 0.0, ""
    for _ in range(1 if replicas else STEPS):
        probe = w.copy()
        probe.users, probe.tokens_per_day = users, None     # the configuration that holds them
        a = answer(probe, kn, query, brief=True)
        row = next((g for g in a.gpus if g.requested), None) or (a.gpus[0] if a.gpus else None)
        if row is None or not row.fits or not row.decode_tokens_per_s:
            break
        speed, config = row.decode_tokens_per_s, f"{row.count}× {row.name}"
        layout = a.workload.get("parallel")
        if fleet and isinstance(layout, dict):
            # a fleet grows by copies of the model, each serving its share of the users: the layout
            # of the fewest GPUs that hold one copy is kept, and more GPUs are more copies
            w.tp, w.pp, fleet = int(layout[N.TP]), int(layout[N.PP]), False
        if users * speed >= rate:
            break
        users = max(users + 1, math.ceil(rate / speed))
    w.users = users
    if users == 1:
        return
    how = (f"{num(rate)} tokens/s to generate ({num(float(w.tokens_per_day or 0))} tokens a day) need about "
           f"{users} requests in flight at once" + (f", each decoding at {num(speed)} tokens/s on {config}"
                                                    if config else ""))
    w.notes.append(f"concurrent users: {users}, {how}, each request's context its prompt and output "
                   f"({w.context_tokens} tokens; the users a volume needs: in-flight requests times each "
                   "one's decode rate meet the rate)")
