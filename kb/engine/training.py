"""Training jobs: objective, framework recipe and sharding, resolved from the rules.

In: a Workload being resolved by kb.engine, the Knowledge (runtimes.yaml `objectives`,
`sharding` and each runtime's `recipes`), the runtime and model chosen. Out: the Workload's
training fields filled (each default said in the assumptions, with its source), the scope values
the training formulas read, and the training keys of the answer's memory dict.
Pure: no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kb.engine.layout import Layout
from kb.knowledge.data import Knowledge
from kb.query.workload import Workload

if TYPE_CHECKING:
    from kb.engine.evaluate import Scope
    from kb.knowledge.records import Model, Runtime, Value
    from kb.engine.answer_records import Memory, MemoryExtras, Parallel

RECIPE_FIELDS = ("optimizer", "checkpointing", "paged", "optimizer_in_backward", "offload",
                 "checkpoint_offload", "lora_attention_only")
# memory dict key → formula: what one GPU (one rank) holds
PER_GPU_BREAKDOWN = {"weights_gb": "rank_weights_gb", "gradients_gb": "rank_gradients_gb",
                     "optimizer_gb": "rank_optimizer_states_gb",
                     "optimizer_step_gb": "rank_optimizer_step_extra_gb", "adapters_gb": "adapters_gb",
                     "activations_gb": "rank_activations_gb",
                     "other_models_gb": "rank_other_models_gb", "overhead_gb": "runtime.overhead_gb"}


def gpu_count(w: Workload) -> int:
    """GPUs the job runs on: the largest count the query names (1 when it names none)."""
    return max((g.count for g in w.gpus), default=w.gpu_count or 1)


def resolve_objective(w: Workload, kn: Knowledge, assumptions: list[str]) -> None:
    """A preference or RL objective: the task becomes its training method (full fine-tune unless
    a LoRA/QLoRA word was given) and the answer says what the objective holds."""
    if w.task in kn.objectives:
        w.objective = w.objective or w.task
        w.task = kn.objectives[w.task]["method"]
    if w.objective is None:
        return
    obj = kn.objectives[w.objective]
    assumptions.append(f"objective: {obj['text']}; method: {w.task} [{obj['source']}]")


def apply_recipes(w: Workload, kn: Knowledge, runtime: Runtime, model: Model,
                  assumptions: list[str]) -> None:
    """The runtime's documented recipe for this kind of job fills what the query left out."""
    count = gpu_count(w)
    for recipe in runtime.get("recipes") or []:
        when = recipe["when"]
        if (when["tasks"] and w.task not in when["tasks"]) or count < when["min_gpus"] or (
                when["max_gpus"] is not None and count > when["max_gpus"]) or (
                model["params_total"] < when["min_params"]):
            continue
        sets: dict[str, object] = dict(recipe["set"])
        asked = [n for n in RECIPE_FIELDS if sets.get(n) is not None
                 and getattr(w, n) is not None and getattr(w, n) != sets[n]]
        if asked:       # an explicit choice beats the recipe: none of its settings apply
            said = ", ".join(f"{n} {getattr(w, n)}" for n in asked)
            assumptions.append(f"from the question: {said}; not the recipe ({recipe['text']}) [{recipe['source']}]")
            continue
        changed = False
        for name in RECIPE_FIELDS:
            value = recipe["set"].get(name)
            if value is not None and getattr(w, name) is None:
                setattr(w, name, value)
                changed = True
        if changed:
            assumptions.append(f"recipe: {recipe['text']} [{recipe['source']}]")


def resolve_sharding(w: Workload, kn: Knowledge, runtime: Runtime, assumptions: list[str]) -> None:
    """How the GPUs share the job: as asked, else the runtime's way, else plain data parallel.
    "cpu offload" with no sharding runs as DeepSpeed ZeRO-Offload."""
    table = kn.sharding
    strategies = table.get("strategies", {})
    if not strategies:
        return
    why = "as asked"
    if w.sharding not in strategies:
        rt = runtime.get("sharding")
        if w.offload and rt in (None, table["default"]):
            w.sharding, why = table["offload_default"], "cpu offload with no sharding named"
        elif rt is not None:
            w.sharding, why = rt, f"{runtime['name']} default"
        else:
            w.sharding, why = table["default"], "the default"
    st = strategies[w.sharding]
    if gpu_count(w) > 1 or w.offload:
        hint = "; name fsdp or zero3 to shard the model" if st["stage"] < 3 else ""
        assumptions.append(f"several GPUs: {st['name']} ({why}) [{st['source']}]{hint}")


def layout(count: int) -> Layout:
    """A training job's GPUs as the training formulas model them: every GPU a data-parallel rank
    running its own micro-batch (no tensor or pipeline split); sharding only changes what each
    rank keeps of the model state."""
    return Layout(tp=1, pp=1, dp=count, canonical=True, note=None)


def parallel(w: Workload, kn: Knowledge, lay: Layout) -> Parallel:
    """The answer's workload.parallel for a training job: tp, pp, dp as `layout` gives them, the
    sharding the ranks run (a runtime's own name reported as the strategy it runs as) and whether
    model state is offloaded to CPU memory."""
    st = kn.sharding.get("strategies", {}).get(w.sharding or "")
    return {**lay.as_dict(), "sharding": (st["layout"] if st else None) or w.sharding,
            "offload": bool(w.offload)}


def scope_values(w: Workload, kn: Knowledge) -> dict[str, Value]:
    """The names the training formulas read about sharding and the objective."""
    st = kn.sharding.get("strategies", {}).get(w.sharding or "")
    obj = kn.objectives.get(w.objective or "")
    return {
        "zero_stage": st["stage"] if st else 0, "sharding": w.sharding or "",
        "objective_sequences": obj["sequences"] if obj else 1,
        "reference_model": bool(obj and obj["reference"]), "critic_model": bool(obj and obj["critic"]),
        "rollout_engine": bool(obj and obj["rollout"]), "rollout_generations": obj["generations"] if obj else 1,
    }


def memory_extras(s: Scope, w: Workload, is_training: bool) -> MemoryExtras:
    """The answer's training memory keys: host RAM, sharding and what one GPU holds (None for
    inference)."""
    if not is_training:
        return {"host_ram_gb": None, "sharding": None, "zero_stage": None, "per_gpu_breakdown": None}
    return {"host_ram_gb": s.get("host_ram_gb"), "sharding": w.sharding,
            "zero_stage": s.get("zero_stage"),
            "per_gpu_breakdown": {k: s.get(name) for k, name in PER_GPU_BREAKDOWN.items()}}


def shown(is_training: bool, breakdown: tuple[str, ...], names: dict[str, str]) -> tuple[str, ...]:
    """The formulas the answer's memory section reads (computed and traced)."""
    if not is_training:
        return breakdown
    return tuple(names.get(k, k) for k in breakdown) + tuple(PER_GPU_BREAKDOWN.values())[:-1] + (
        "per_gpu_gb", "host_ram_gb")


def no_count_note(kn: Knowledge, memory: Memory) -> str:
    """Why no number of GPUs holds a training job that shards less than its weights."""
    stage = memory.get("zero_stage")
    if stage is None or stage >= 3 or not kn.sharding:
        return ""
    return f" Under {memory.get('sharding')}, {kn.sharding['no_count_note']}."
