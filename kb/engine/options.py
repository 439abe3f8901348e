"""What to change so it fits: the same question with one or two things changed, each answered.

In: the query text, its answer and the Knowledge (the option rules of rules/prices.yaml
`advice.options`). Out: `options[{change, workload_changes, fits, per_gpu_gb, total_gb, gpu,
count, decode_tokens_per_s | train_tokens_per_s, usd_per_million_tokens | run_cost_usd, query,
quality, quality_source, meets_target}]`: fits first, then those that meet the speed or time
target, then least change to the hardware (the GPUs asked about, more of them, another card),
then least quality cost, then price. Each option's
`query` is written in the query language and its figures are that query's answer (it is asked,
not estimated), so `kbq "<query>"` shows the same numbers.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from kb.engine.answer import Answer, GpuRow
from kb.engine.budget import note, spent
from kb.errors import KbError
from kb.knowledge.data import Knowledge

if TYPE_CHECKING:
    from kb.engine.answer_records import Option, WorkloadDict
    from kb.knowledge.records import GPU
    from kb.knowledge.records_rules import OptionRule

IGNORED = ("gpus", "notes", "question", "model_name", "active_params", "parallel")


def compute(kn: Knowledge, query: str, base: Answer) -> list[Option]:
    """Every option the rules offer for this answer's task, answered; best first."""
    rules = kn.advice.get("options") or []
    row = _base_row(base)
    if row is None or not rules:
        return []
    training = "training" in base.bottleneck
    w = base.workload
    stripped = _without_gpus(kn, query)
    out: list[Option] = []
    for done, rule in enumerate(rules):
        if (budget := spent()) is not None:    # the server's time budget (kb.budget) ran out
            left = len(rules) - done
            text = (f"{left} of the {len(rules)} kinds of change were not tried: this answer's "
                    f"time budget ({budget.seconds:g} s of computing) ran out")
            note(budget, text)
            base.warnings.append(text)
            break
        if not _applies(rule, w, training, kn):
            continue
        found = [o for q, extra in _queries(kn, rule, query, stripped, row, w, base)
                 if (o := _ask(kn, q, base, rule, extra)) is not None]
        if rule["kind"] == "next_card" and found:     # the best of the cards tried
            found = [min(found, key=_order)]
        out.extend(found)
    seen: set[str] = set()
    unique = [o for o in out if not (o["query"] in seen or seen.add(o["query"]))]  # type: ignore[func-returns-value]
    unique.sort(key=_order)
    for o in unique:
        o.pop("_rank")
        o.pop("_hardware")
        o.pop("_price")
    return unique


def _order(o: Option) -> tuple[bool, bool, int, int, int, bool, float]:
    return (not o["fits"], o["meets_target"] is False, o.get("_hardware", 0), o["count"],
            o.get("_rank", 0), o.get("_price") is None, o.get("_price") or 0)


def _base_row(a: Answer) -> GpuRow | None:
    asked = [g for g in a.gpus if g.requested]
    return asked[0] if asked else (a.gpus[0] if a.gpus else None)


def _applies(rule: OptionRule, w: WorkloadDict, training: bool, kn: Knowledge) -> bool:
    task = w.get("task")
    tasks = rule["tasks"]
    if training:
        ok = "training" in tasks or task in tasks
    else:
        ok = "inference" in tasks
    if not ok:
        return False
    if precision := rule.get("precision"):
        held = kn.precisions.get(str(w.get("precision")))
        now = held["bits_per_weight"] if held else None
        new = kn.precisions[precision]["bits_per_weight"]
        return now is None or new < now
    if rule["kind"] == "users":
        return (w.get("users") or 1) > 1
    return True


def _queries(kn: Knowledge, rule: OptionRule, query: str, stripped: str | None, row: GpuRow,
             w: WorkloadDict, base: Answer) -> list[tuple[str, str | None]]:
    """(query, second change) pairs for one rule."""
    kind = rule["kind"]
    gpu = row.id if row.id in kn.gpus else f"{row.vram_gb:g}gb"
    if kind == "words":
        if rule["words"] in kn.query["tasks"]:      # another task: its word replaces the job's own
            query, stripped = _without_task(kn, query, w), (_without_task(kn, stripped, w) if stripped else None)
        first = f"{query} {rule['words']}"
        out: list[tuple[str, str | None]] = [(first, None)]
        if stripped is not None:     # with the cards that would then hold it
            out.append((f"{stripped} {rule['words']} on {{needed}}x {gpu}", "more GPUs"))
        return out
    if kind == "context":
        ctx = w.get("context_tokens") if "training" not in base.bottleneck else None
        return [(f"{query} {int(ctx) // 2} context", None)] if ctx and ctx >= 2 else []
    if kind == "users":
        return [(f"{query} {int(w['users'] or 1) // 2} users", None)]
    if stripped is None:
        return []
    if kind == "gpus":
        most = int(kn.advice.get("max_gpus_per_config", 1))
        needed = valid_count(kn, w, row.gpus_needed or 0, most)
        return [(f"{stripped} on {needed}x {gpu}", None)] if needed and row.count < needed <= most else []
    bigger = sorted((g for g in kn.gpus.values() if g["vram_gb"] > (row.vram_gb or 0) and g.get("price_usd")
                     and _same_shelf(kn, row.id, g, str(w.get("runtime") or ""))),
                    key=lambda g: (g["price_usd"], g["vram_gb"]))
    need = base.memory.get("total_gb") or 0
    tries = int(kn.advice.get("next_card_tries", 1))
    on = f"{row.count}x " if row.count > 1 else ""
    fitting: list[tuple[str, str | None]] = [(f"{stripped} on {on}{g['id']}", None) for g in bigger
                                              if g["vram_gb"] * row.count >= need]
    return fitting[:tries]


def _ask(kn: Knowledge, q: str, base: Answer, rule: OptionRule, extra: str | None) -> Option | None:
    from kb.engine import answer
    from kb.query.parse import parse

    try:
        if "{needed}" in q:
            probe = answer(parse(q.replace("{needed}", "1"), kn), kn, q, brief=True)
            row = _base_row(probe)
            most = int(kn.advice.get("max_gpus_per_config", 1))
            needed = valid_count(kn, probe.workload, row.gpus_needed or 0, most) if row is not None else None
            if row is None or row.fits or not needed or not 1 < needed <= most:
                return None
            q = q.replace("{needed}", str(needed))
        a = answer(parse(q, kn), kn, q, brief=True)
    except KbError:
        return None
    row = _base_row(a)
    if row is None:
        return None
    training = "training" in a.bottleneck
    changes: dict[str, object] = {k: v for k, v in a.workload.items() if k not in IGNORED and base.workload.get(k) != v}
    if not row.fits or row.suits_job is False or (rule["kind"] == "words" and not changes):
        return None     # still does not fit, is no job to recommend, or is what the job already has
    first = _base_row(base)
    hardware = 0 if (row.id, row.count) == (first.id, first.count) else 1 if row.id == first.id else 2  # type: ignore[union-attr]
    if hardware:
        changes["gpus"] = f"{row.count}× {row.name}"
    opt: Option = {
        "change": rule["change"] + (f" on {row.count}× {row.name}" if extra else ""),
        "change_only": rule["change"],
        "workload_changes": changes, "fits": row.fits, "per_gpu_gb": row.per_gpu_gb,
        "total_gb": a.memory.get("total_gb"), "gpu": row.name, "gpu_id": row.id, "count": row.count,
        "quality": rule["quality"], "quality_source": rule["source"], "query": _clean(q),
        "meets_target": row.meets_target,
        "_rank": rule["quality_rank"], "_hardware": hardware, "_price": row.config_price_usd,
    }
    if training:
        opt["train_tokens_per_s"] = row.train_tokens_per_s
        opt["run_cost_usd"] = row.run_cost_usd
    else:
        opt["decode_tokens_per_s"] = row.decode_tokens_per_s
        opt["usd_per_million_tokens"] = row.usd_per_million_tokens
    return opt


def _clean(q: str) -> str:
    return re.sub(r"\s+", " ", q).strip()


def _without_gpus(kn: Knowledge, query: str) -> str | None:
    """The query without its GPU phrase (the text before its last ' on '), when that reads as
    the same question with no GPU named; None when it does not."""
    from kb.query.parse import parse

    try:
        w = parse(query, kn)
    except KbError:
        return None
    if not w.gpus:
        return query
    m = list(re.finditer(r"\s(on|with|using)\s", query, flags=re.IGNORECASE))
    for cut in reversed([x.start() for x in m if x.group(1).lower() == "on"]):
        head = query[:cut]
        try:
            w2 = parse(head, kn)
        except KbError:
            continue
        a, b = w.to_dict(), w2.to_dict()
        if all(a[k] == b[k] for k in a if k not in ("gpus", "notes")):
            return head
    return None


def _same_shelf(kn: Knowledge, asked: str, g: GPU, runtime: str) -> bool:
    """A card the next-card-up option may offer for the card asked about: the same vendor and
    class of buyer (consumer/workstation cards, datacenter cards; kb.engine.advice.CLASSES), and one the
    runtime runs on (a bare capacity keeps every card)."""
    from kb.engine.advice import CLASSES
    from kb.knowledge.gpu_names import runs_on

    was = kn.gpus.get(asked)
    rt = kn.runtimes.get(runtime)
    if was is None:
        return rt is None or runs_on(rt, g)
    def cls(x: GPU) -> str:
        return CLASSES.get(str(x.get("segment")), "datacenter")
    return (g["vendor"] == was["vendor"] and cls(g) == cls(was) and g.get("segment") != "apple" or
            was.get("segment") == g.get("segment") == "apple") and (rt is None or runs_on(rt, g))


def valid_count(kn: Knowledge, w: WorkloadDict, needed: int, most: int) -> int | None:
    """The fewest GPUs from `needed` up that make a canonical layout for the job (kb.engine.layout:
    tensor parallel that divides the heads inside a node, whole nodes as pipeline stages; any
    count for a layer split or data-parallel training), at most `most`; None if none does."""
    from kb.engine.layout import choose

    model = kn.models.get(str(w.get("model")))
    rt = kn.runtimes.get(str(w.get("runtime")))
    if model is None or rt is None or w.get("task") in kn.query["training_tasks"]:
        return needed if needed <= most else None
    node = int(kn.constants["gpus_per_node"]["value"])
    for n in range(max(1, needed), most + 1):
        if choose(n, int(model["attention_heads"]), rt.get("multi_gpu") == "tensor_parallel", node).canonical:
            return n
    return None


def _without_task(kn: Knowledge, query: str, w: WorkloadDict) -> str:
    """The query without the words that named its task ("full fine-tune"), so an option that
    changes the task ("lora") is read as that task."""
    for word in sorted(kn.query["tasks"].get(str(w.get("task")), []), key=len, reverse=True):
        found = re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", query, flags=re.IGNORECASE)
        if found:
            return _clean(query[:found.start()] + " " + query[found.end():])
    return query
