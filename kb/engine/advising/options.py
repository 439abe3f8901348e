"""What to change so it fits: the same question with one or two things changed, each answered.

In: the Workload the query gave, its answer and the Knowledge (the option rules of rules/prices.yaml
`advice.options`). Out: `options[{change, workload_changes, fits, per_gpu_gb, total_gb, gpu,
count, decode_tokens_per_s | train_tokens_per_s, usd_per_million_tokens | run_cost_usd, query,
quality, quality_source, meets_target}]`: fits first, then those that meet the speed or time
target, then least change to the hardware (the GPUs asked about, more of them, another card),
then least quality cost, then price. An option is
the Workload with the rule's change applied (new words read by the query language, a count, a
card); its `query` is that Workload written back by kb.query.unparse, and its figures are that
Workload's answer (asked, not estimated), so `kbq "<query>"` shows the same numbers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kb.engine.assembly.answer import Answer, GpuRow
from kb.engine.search.budget import note, spent
from kb.errors import KbError
from kb.knowledge.data import Knowledge
from kb.query.workload import GpuRequest, Workload
from kb.knowledge import names as N
from kb.engine.advising.advice import CLASSES
from kb.engine.resolving.inputs import stack_platforms
from kb.engine.resolving.layout import choose
from kb.engine.search.probes import Probes
from kb.engine.resolving.scope import capacity_gpu, question_format
from kb.knowledge.gpu_names import gpu_values, runs_on
from kb.query.parse import parse
from kb.query.unparse import unparse

if TYPE_CHECKING:
    from typing import Protocol

    from kb.engine.assembly.answer_records import Option, WorkloadDict
    from kb.knowledge.records import GPU
    from kb.knowledge.records_rules import OptionRule

    class Answering(Protocol):
        """The engine's entry, kb.engine.answer, as the options call it."""

        def __call__(self, w: Workload, kn: Knowledge, query: str = "", *,
                     brief: bool = False) -> Answer: ...

TARGETS = (N.SPEED_FLOOR_TOK_S, "ttft_max_s", "e2e_max_s", "tokens_per_day", "deadline_hours")   # a target the query set
CHECKPOINTED = "with checkpointing"     # an option's second change: activation checkpointing
IGNORED = ("gpus", "notes", "question", "model_name", N.ACTIVE_PARAMS, "parallel", "compare")


def compute(kn: Knowledge, asked: Workload, base: Answer, answer: Answering) -> list[Option]:
    """Every option the rules offer for this answer's task, answered; best first. `asked`: the
    Workload as the query gave it (before the engine filled its defaults); `answer`: the engine's
    entry (kb.engine.answer), which asks each changed question."""
    rules = kn.advice.get("options") or []
    row = _base_row(base)
    if row is None or not rules:
        return []
    training = "training" in base.bottleneck
    w = base.workload
    out: list[Option] = []
    asked_before = _Asked(kn, answer)
    for done, rule in enumerate(rules):
        if (budget := spent()) is not None:    # the server's budget (kb.engine.search.budget) ran out
            left = len(rules) - done
            text = (f"{left} of the {len(rules)} kinds of change were not tried: this answer's "
                    f"{budget.reason()} ran out")
            note(budget, text)
            base.warnings.append(text)
            break
        if not _applies(rule, w, training, kn):
            continue
        found: list[Option] = []
        for changed, extra in _changed(kn, rule, asked, row, base):
            if (o := _ask(kn, changed, base, rule, extra, asked_before)) is not None:
                found.append(o)
                if rule["kind"] == "next_card" and _cheapest_card(o, w):
                    break
        here = [o for o in out + found if (o["gpu_id"], o["count"]) == (row.id, row.count)]
        if training and not any(o in found or o["workload_changes"] == {N.CHECKPOINTING: True} for o in here):
            found += [o for changed, extra in _checkpointed(kn, rule, asked, base)
                      if (o := _ask(kn, changed, base, rule, extra, asked_before)) is not None]
        if rule["kind"] == "next_card" and found:     # the best of the cards tried
            found = [min(found, key=_order)]
        out.extend(found)
    seen: set[str] = set()
    unique = [o for o in out if not (o["query"] in seen or seen.add(o["query"]))]  # type: ignore[func-returns-value]
    # an inference option's default speed floor is a usable reading speed; a training job's default
    # time floor (7 days for a run of 1e9 tokens it may never have asked for) does not rank changes
    targeted = not training or any(getattr(asked, k) is not None for k in TARGETS)
    unique.sort(key=lambda o: _order(o, targeted))
    for o in unique:
        o.pop("_rank")
        o.pop("_hardware")
        o.pop("_price")
    return unique


def _cheapest_card(o: Option, w: WorkloadDict) -> bool:
    """A next card tried (in order of price, at the count asked) that no later one can come
    before (_order): it holds the job, meets the target and has a price, and the count is the
    one asked, not one a how-many search finds on each card."""
    return o[N.FITS] and o[N.MEETS_TARGET] is not False and o.get("_price") is not None and (
        w.get("question") != "how_many_gpus")


def _order(o: Option, targeted: bool = True) -> tuple[bool, bool, int, int, int, bool, float]:
    """Fits first; then those that meet the target (`targeted`); then least change."""
    return (not o[N.FITS], targeted and o[N.MEETS_TARGET] is False, o.get("_hardware", 0), o["count"],
            o.get("_rank", 0), o.get("_price") is None, o.get("_price") or 0)


def _checkpointed(kn: Knowledge, rule: OptionRule, asked: Workload,
                  base: Answer) -> list[tuple[Workload, str | None]]:
    """A training change that does not fit the cards asked about on its own, with activation
    checkpointing turned on as well (LoRA instead of a full fine-tune on a 24 GB card); [] for a
    change of cards or of checkpointing itself. (A changed job that already runs with it answers
    as the change alone, which did not fit: no option.)"""
    ckpt = next((r for r in kn.advice.get("options") or [] if r["id"] == N.CHECKPOINTING), None)
    if ckpt is None or rule["kind"] != "words" or rule is ckpt:
        return []
    said = {**words_changes(kn, rule["words"]), **words_changes(kn, ckpt["words"])}
    return [(with_changes(asked, **said), CHECKPOINTED)]


def _base_row(a: Answer) -> GpuRow | None:
    asked = [g for g in a.gpus if g.requested]
    return asked[0] if asked else (a.gpus[0] if a.gpus else None)


def _applies(rule: OptionRule, w: WorkloadDict, training: bool, kn: Knowledge) -> bool:
    task = w.get(N.TASK)
    tasks = rule["tasks"]
    if training:
        ok = "training" in tasks or task in tasks
    else:
        ok = "inference" in tasks
    if not ok or (rule.get("runtimes") and w.get("runtime") not in rule["runtimes"]):
        return False            # a change spelled in another runtime's words
    if rule.get("host_memory") and w.get(N.HOST_MEMORY_GB):
        return False            # the host's memory the query gave is already used (offload)
    if precision := rule.get(N.PRECISION):
        held = kn.precisions.get(str(w.get(N.PRECISION)))
        if held is not None and held.get("experts_only"):
            # a checkpoint published with narrow experts (gpt-oss's MXFP4) keeps them in every
            # re-quantization people download (each GGUF of gpt-oss-120b is 59-65 GB): another
            # weight format does not shrink it
            return False
        now = held["bits_per_weight"] if held else None
        new = kn.precisions[precision]["bits_per_weight"]
        return now is None or new < now
    if rule["kind"] == N.USERS:
        return (w.get(N.USERS) or 1) > 1
    return True


def with_changes(w: Workload, **changes: object) -> Workload:
    """A copy of the Workload with fields changed (the comparison, if any, dropped)."""
    out = w.copy()
    out.compare = None
    for name, value in changes.items():
        setattr(out, name, value)
    return out


def words_changes(kn: Knowledge, words: str) -> dict[str, object]:
    """What an option's words (prices.yaml advice.options) set, read by the query language."""

    plain = Workload().to_dict()
    said = parse(words, kn, model_given=True).to_dict()
    return {k: v for k, v in said.items() if k != "notes" and v != plain[k]}


def _changed(kn: Knowledge, rule: OptionRule, asked: Workload, row: GpuRow,
             base: Answer) -> list[tuple[Workload, str | None]]:
    """(Workload with the rule's change applied, second change) pairs for one rule."""
    kind = rule["kind"]
    bare = next((g.capacity_gb for g in asked.gpus if g.gpu_id is None), None)   # as the query gave it
    gpu = (GpuRequest(row.id, row.count) if row.id in kn.gpus else
           GpuRequest(None, row.count, bare if bare is not None else row.vram_gb))
    if kind == "words":
        said = words_changes(kn, rule["words"])
        if all(getattr(asked, k) == v for k, v in said.items()):
            return []                   # the job already has it: not an option
        first = with_changes(asked, **said)
        more = with_changes(first, gpus=[GpuRequest(gpu.gpu_id, 0, gpu.capacity_gb)])   # count: found by _ask
        return [(first, None), (more, "more GPUs")]
    if kind == "context":           # a training job's context is its sequence length
        field = N.SEQ_LEN if "training" in base.bottleneck else N.CONTEXT_TOKENS
        ctx = base.workload.get(field)
        held = int(ctx) if isinstance(ctx, (int, float)) else 0
        return [(with_changes(asked, **{field: held // 2}), None)] if held >= 2 else []
    if kind == N.USERS:
        return [(with_changes(asked, users=int(base.workload[N.USERS] or 1) // 2), None)]
    if kind == "gpus":
        most = int(kn.advice.get("max_gpus_per_config", 1))
        needed = valid_count(kn, base.workload, row.gpus_needed or 0, most)
        return ([(with_changes(asked, gpus=[GpuRequest(gpu.gpu_id, needed, gpu.capacity_gb)]), None)]
                if needed and row.count < needed <= most else [])
    bigger = sorted((g for g in kn.gpus.values() if g["vram_gb"] > (row.vram_gb or 0) and g.get("price_usd")
                     and _same_shelf(kn, row.id, g, str(base.workload.get("runtime") or ""))
                     and _stack_supports(kn, base, g)),
                    key=lambda g: (g["price_usd"], g["vram_gb"]))
    need = base.memory.get(N.TOTAL_GB) or 0
    tries = int(kn.advice.get("next_card_tries", 1))
    fitting = [(with_changes(asked, gpus=[GpuRequest(g["id"], row.count)]), None) for g in bigger
               if g["vram_gb"] * row.count >= need]
    return fitting[:tries]   # type: ignore[return-value]


class _Asked:
    """The brief answers of one answer's options, each Workload asked once (the card a "more
    GPUs" option is first asked on is often the plain option's own Workload, and a capacity
    question's answer runs a whole search): reused answers are only read."""

    def __init__(self, kn: Knowledge, answer: Answering) -> None:
        self.kn, self.answer = kn, answer
        self.found: dict[str, Answer] = {}

    def __call__(self, w: Workload, q: str) -> Answer:
        key = repr(w.to_dict())
        found = self.found.get(key)
        if found is None:
            found = self.found[key] = self.answer(w.copy(), self.kn, q, brief=True)
        return found


def _ask(kn: Knowledge, w: Workload, base: Answer, rule: OptionRule, extra: str | None,
         answered: _Asked) -> Option | None:
    try:
        if w.gpus and w.gpus[0].count == 0:         # as many cards as then hold it
            probe = with_changes(w, gpus=[GpuRequest(w.gpus[0].gpu_id, 1, w.gpus[0].capacity_gb)])
            if _count_found(kn, probe):
                return None
            probed = answered(probe, "")
            row = _base_row(probed)
            most = int(kn.advice.get("max_gpus_per_config", 1))
            needed = valid_count(kn, probed.workload, row.gpus_needed or 0, most) if row is not None else None
            if row is None or row.fits or not needed or not 1 < needed <= most:
                return None
            w.gpus[0].count = needed
        q = unparse(w, kn)
        a = answered(w, q)
    except KbError:
        return None
    row = _base_row(a)
    if row is None:
        return None
    training = "training" in a.bottleneck
    changes: dict[str, object] = {k: v for k, v in a.workload.items() if k not in IGNORED and base.workload.get(k) != v}
    first = _base_row(base)
    hardware = 0 if (row.id, row.count) == (first.id, first.count) else 1 if row.id == first.id else 2  # type: ignore[union-attr]
    if not row.fits or (row.suits_job is False and (hardware or not _stack_runs(kn, a, row))) or (
            rule["kind"] == "words" and not changes):
        return None     # still does not fit, other cards that do not suit the job (or a stack that does
        #                 not support the cards asked about), or what the job already has
    if hardware:
        changes["gpus"] = f"{row.count}× {row.name}"
    opt: Option = {
        "change": rule["change"] + (" with activation checkpointing" if extra == CHECKPOINTED else
                                    f" on {row.count}× {row.name}" if extra else ""),
        "change_only": rule["change"],
        "workload_changes": changes, N.FITS: row.fits, N.PER_GPU_GB: row.per_gpu_gb,
        N.TOTAL_GB: a.memory.get(N.TOTAL_GB), "gpu": row.name, "gpu_id": row.id, "count": row.count,
        "quality": rule["quality"], "quality_source": rule["source"], "query": q,
        N.MEETS_TARGET: row.meets_target,
        "_rank": rule["quality_rank"], "_hardware": hardware, "_price": row.config_price_usd,
    }
    if training:
        opt[N.TRAIN_TOKENS_PER_S] = row.train_tokens_per_s
        opt[N.RUN_COST_USD] = row.run_cost_usd
    else:
        opt[N.DECODE_TOKENS_PER_S] = row.decode_tokens_per_s
        opt[N.USD_PER_MILLION_TOKENS] = row.usd_per_million_tokens
    return opt


def _count_found(kn: Knowledge, w: Workload) -> bool:
    """A how-many question on one card whose search finds a count: the job holds there at the
    search's upper bound (kb.engine.search.solve.smallest_fitting's first probe). Its answer, on the
    count found, holds the job, or does not on any count asked: either way no option, so the
    search itself is not run."""
    if w.question != "how_many_gpus" or len(w.gpus) != 1:
        return False
    asked = w.copy()
    question_format(asked, kn)                  # as kb.engine.assembly.answer reads it
    g = asked.gpus[0]
    gpu = capacity_gpu(g, kn) if g.gpu_id is None else kn.gpus[g.gpu_id]
    upper = int(kn.query["solve"]["how_many_gpus"]["upper"])
    try:
        return Probes(kn, asked, [gpu]).probe(N.GPU_COUNT, upper, gpu, upper).fits
    except KbError:
        return False


def _stack_runs(kn: Knowledge, a: Answer, row: GpuRow) -> bool:
    """The answer's training stack supports the row's platform for its task (runtimes.yaml
    well_supported): a QLoRA on the T4 asked about is a fix (its fp16 rate is slower, not
    missing), one on a Mac is not (bitsandbytes has no Apple backend). True for inference."""
    gpu, rt = kn.gpus.get(row.id), kn.runtimes.get(str(a.workload.get("runtime")))
    return (gpu is None or rt is None or "training" not in a.bottleneck
            or gpu["vendor"] in stack_platforms(rt, str(a.workload.get(N.TASK))))


def _stack_supports(kn: Knowledge, a: Answer, gpu: GPU) -> bool:
    """The training stack of answer `a` supports this card's platform for its task, and the card
    has tensor cores for the job's precision (formulas.yaml suits_job reads both); always for
    inference."""
    rt = kn.runtimes.get(str(a.workload.get("runtime")))
    precision = kn.precisions.get(str(a.workload.get(N.PRECISION)))
    if rt is None or precision is None or "training" not in a.bottleneck:
        return True
    return (gpu["vendor"] in stack_platforms(rt, str(a.workload.get(N.TASK)))
            and bool(gpu_values(gpu, 1, precision)[N.GPU_NATIVE_COMPUTE]))


def _same_shelf(kn: Knowledge, asked: str, g: GPU, runtime: str) -> bool:
    """A card the next-card-up option may offer for the card asked about: the same vendor and
    class of buyer (consumer/workstation cards, datacenter cards; kb.engine.advising.advice.CLASSES), and one the
    runtime runs on (a bare capacity keeps every card)."""
    was = kn.gpus.get(asked)
    rt = kn.runtimes.get(runtime)
    if was is None:
        return rt is None or runs_on(rt, g)
    def cls(x: GPU) -> str:
        return CLASSES.get(str(x.get("segment")), "datacenter")
    return (g["vendor"] == was["vendor"] and cls(g) == cls(was) and g.get("segment") != "apple" or
            was.get("segment") == g.get("segment") == "apple") and (rt is None or runs_on(rt, g))


def valid_count(kn: Knowledge, w: WorkloadDict, needed: int, most: int) -> int | None:
    """The fewest GPUs from `needed` up that make a canonical layout for the job (kb.engine.resolving.layout:
    tensor parallel that divides the heads inside a node, whole nodes as pipeline stages; any
    count for a layer split or data-parallel training), at most `most`; None if none does."""
    model = kn.models.get(str(w.get("model")))
    rt = kn.runtimes.get(str(w.get("runtime")))
    if model is None or rt is None or w.get(N.TASK) in kn.query["training_tasks"]:
        return needed if needed <= most else None
    node = int(kn.constants[N.GPUS_PER_NODE]["value"])
    for n in range(max(1, needed), most + 1):
        if choose(n, int(model["attention_heads"]), rt.get("multi_gpu") == "tensor_parallel", node).canonical:
            return n
    return None
