"""The way to train a which-GPU or cheapest question is ranked at when it names no method.

"cheapest way to fine-tune llama 3.1 70b", "best gpu to fine-tune mistral 7b under $1200": an
expert answers with the way people run that job on the money asked, not only the default
(16-bit LoRA without activation checkpointing): with checkpointing, or a 4-bit base (QLoRA), the
job fits cards that cost a fraction. Each training option of the rules (prices.yaml advice
options of kind `words`: checkpointing, 8-bit Adam, QLoRA, LoRA for a full fine-tune) is ranked
as the question asks, beside the default; the one chosen is the first whose pick fits within any
budget, then finishes within the usable horizon (suits_job), then (a cheapest question) costs
least and then costs the least quality, or (any other) costs the least quality and then least.
Said in the assumptions.

In: the Workload as asked (no GPUs, a training task, no method named), the Knowledge, the
function that answers a Workload, the default answer. Out: the chosen answer, or None when the
default is it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kb.figures import num, usd
from kb.knowledge import names as N
from kb.engine.advising.options import with_changes, words_changes

if TYPE_CHECKING:
    from collections.abc import Callable

    from kb.engine.assembly.answer import Answer
    from kb.knowledge.data import Knowledge
    from kb.query.workload import Workload

METHOD_FIELDS = (N.PRECISION, N.CHECKPOINTING, N.OPTIMIZER, N.OFFLOAD, N.PAGED, N.OPTIMIZER_IN_BACKWARD)


def applies(kn: Knowledge, w: Workload) -> bool:
    """A ranking over the catalogue for a training job whose method the question leaves open, on
    money it names: the cheapest, or a budget."""
    return (not w.gpus and w.task in ("lora", "full_ft") and w.question in (None, "which_gpu")
            and (w.sort == "cost" or w.budget_usd is not None)
            and all(getattr(w, f) is None for f in METHOD_FIELDS) and kn.advice.get("options") is not None)


def chosen(kn: Knowledge, w: Workload, plain: Answer, answer: Callable[[Workload], Answer]) -> Answer | None:
    """The answer at the training method the question's ranking favours (see the module)."""
    cheapest = w.sort == "cost"

    def key(a: Answer, rank: int) -> tuple[bool, bool, float, float]:
        pick = a.gpus[0] if a.gpus else None
        if pick is None or not pick.fits or pick.within_budget is False:
            return (True, True, float("inf"), float(rank))
        price = float(pick.config_price_usd or pick.config_usd_per_hour or float("inf"))
        return (False, pick.suits_job is False, price if cheapest else float(rank), float(rank) if cheapest else price)

    rules = [r for r in kn.advice.get("options") or [] if r["kind"] == "words"
             and (w.task in r["tasks"] or "training" in r["tasks"])]
    said_by = {r["id"]: words_changes(kn, r["words"]) for r in rules}
    ckpt = next((r for r in rules if said_by[r["id"]].get(N.CHECKPOINTING) is True), None)
    best, best_key, said = plain, key(plain, 0), ""
    for rule, with_ckpt in [(r, False) for r in rules] + [(r, True) for r in rules if ckpt and r is not ckpt]:
        changes = {**said_by[rule["id"]], **(said_by[ckpt["id"]] if with_ckpt and ckpt else {})}
        if any(k not in METHOD_FIELDS + (N.TASK, "task_explicit") for k in changes) or (
                w.task == "full_ft" and w.task_explicit and N.TASK in changes):     # a full fine-tune named is kept
            continue
        a = answer(with_changes(w, **changes))
        k = key(a, int(rule["quality_rank"]))
        if k < best_key:
            pick = a.gpus[0]
            best, best_key = a, k
            change = rule["change"] + (f" with {ckpt['change']}" if with_ckpt and ckpt else "")
            said = (f"method: {change}, the way {'the cheapest' if cheapest else 'the best'} "
                    f"configuration {'for the budget ' if w.budget_usd else ''}runs this job: "
                    f"{pick.count}× {pick.name}, {usd(pick.config_price_usd)} to buy "
                    f"(quality: {rule['quality']}) [{rule['source']}]")
    if best is plain:
        return None
    best.assumptions.append(said)
    return best


def scales_out(kn: Knowledge, w: Workload) -> bool:
    """A training job asked with no GPUs and no question of its own (nor a budget): a ranking of
    single cards, which a large job, its tokens or its deadline may outgrow (the how-many search
    lays these out as people run them at scale: runtimes.yaml sharding at_scale)."""
    tasks = {t for r in kn.sharding.get("at_scale") or [] for t in r["tasks"]}
    return not w.gpus and w.task in tasks and w.question in (None, "which_gpu") and w.budget_usd is None


def scaled_out(kn: Knowledge, w: Workload, plain: Answer, answer: Callable[[Workload], Answer]) -> Answer | None:
    """The fewest GPUs that do the job (the how-many search), said in the assumptions, when no card
    of the ranking holds it; or, a deadline asked, none finishes within it; or, the tokens named,
    none finishes them within the usable horizon (formulas.yaml usable_train_horizon_h). None when
    the ranking's first card does, or the search finds no count whose answer holds the job."""
    top = plain.gpus[0] if plain.gpus else None
    deadline = w.deadline_hours
    if top is not None and top.fits and top.suits_job is not False and (
            deadline is None or top.meets_target is not False):
        return None
    if w.train_tokens is None and deadline is None and top is not None and top.fits:
        return None
    horizon = float(kn.constants[N.USABLE_TRAIN_HORIZON_H]["value"])
    asked = w.copy()
    asked.question = "how_many_gpus"
    asked.deadline_hours = deadline if deadline is not None else horizon if w.train_tokens is not None else None
    a = answer(asked)
    row = a.question.get("answer") if a.question else None
    if not isinstance(row, dict) or not row.get("found") or not (a.gpus and a.gpus[0].fits):
        return None                     # (a count the search found that the answer there does not hold)
    why = ("holds this job and finishes it within the time asked" if deadline is not None else
           "holds this job" if w.train_tokens is None else
           f"trains {num(float(w.train_tokens))} tokens within {num(horizon / 24)} days "
           "(formulas.yaml usable_train_horizon_h)")
    a.assumptions.insert(0, f"no single card {why}, so the fewest GPUs that do")
    return a
