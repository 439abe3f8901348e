"""Training jobs: objective, framework recipe and sharding, resolved from the rules.

In: a Workload being resolved by kb.engine, the Knowledge (runtimes.yaml `objectives`,
`sharding` and each runtime's `recipes`), the runtime and model chosen. Out: the Workload's
training fields filled (each default said in the assumptions, with its source), the scope values
the training formulas read, and the training keys of the answer's memory dict.
Pure: no I/O.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from kb.engine.resolving.layout import Layout, Note
from kb.knowledge.data import Knowledge
from kb.query.workload import Workload
from kb.knowledge import names as N

if TYPE_CHECKING:
    from kb.engine.evaluate import Scope
    from kb.knowledge.records import AtScale, Model, Runtime, Value
    from kb.engine.assembly.answer_records import Memory, MemoryExtras, Parallel

RECIPE_FIELDS = (N.OPTIMIZER, N.CHECKPOINTING, N.PAGED, N.OPTIMIZER_IN_BACKWARD, N.OFFLOAD,
                 N.CHECKPOINT_OFFLOAD, N.LORA_ATTENTION_ONLY)
# memory dict key → formula: what one GPU (one rank) holds
PER_GPU_BREAKDOWN = {N.WEIGHTS_GB: N.RANK_WEIGHTS_GB, N.GRADIENTS_GB: N.RANK_GRADIENTS_GB,
                     N.OPTIMIZER_GB: N.RANK_OPTIMIZER_STATES_GB,
                     N.OPTIMIZER_STEP_GB: N.RANK_OPTIMIZER_STEP_EXTRA_GB, N.ADAPTERS_GB: N.ADAPTERS_GB,
                     N.ACTIVATIONS_GB: N.RANK_ACTIVATIONS_GB,
                     N.OTHER_MODELS_GB: N.RANK_OTHER_MODELS_GB, N.OVERHEAD_GB: N.RUNTIME_OVERHEAD_GB}


def gpu_count(w: Workload) -> int:
    """GPUs the job runs on: the largest count the query names (1 when it names none)."""
    return max((g.count for g in w.gpus), default=w.gpu_count or 1)


def in_window(count: int, window: tuple[int, int | None]) -> bool:
    """Whether a count of GPUs lies in a recipe's window (runtimes.yaml recipes: min_gpus, max_gpus)."""
    return count >= window[0] and (window[1] is None or count <= window[1])


def count_windows(w: Workload, runtime: Runtime) -> tuple[tuple[int, int | None], ...]:
    """The GPU-count windows of the runtime's recipes for this task that not every count lies in:
    where the job the recipes make changes with the count alone (empty: it does not)."""
    return tuple((r["when"]["min_gpus"], r["when"]["max_gpus"]) for r in runtime.get("recipes") or []
                 if (not r["when"]["tasks"] or w.task in r["when"]["tasks"])
                 and (r["when"]["min_gpus"] > 1 or r["when"]["max_gpus"] is not None))


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
        if (when["tasks"] and w.task not in when["tasks"]) or not in_window(count, (when["min_gpus"], when["max_gpus"])) or (
                model["params_total"] < when["min_params"]):
            continue
        sets: dict[str, object] = dict(recipe["set"])
        if sets.get("quantized_base") and w.task == "lora" and w.precision is None:
            w.task = "qlora"        # its notebooks load the base in 4 bits unless 16-bit is said
            assumptions.append(f"recipe: {recipe['text']} [{recipe['source']}]")
            continue
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


def resolve_at_scale(w: Workload, kn: Knowledge, runtime: Runtime, params: float,
                     assumptions: list[str]) -> AtScale | None:
    """A full fine-tune or pretraining too large for one GPU's copy, on several GPUs, with no
    sharding named and a runtime that would copy the model state to every GPU: the layout people
    run at that scale (_at_scale), with the checkpointing its published runs use unless asked."""
    state_gb = None if gpu_count(w) < 2 else copy_gb(w, kn, runtime, params)
    row = None if state_gb is None else _at_scale(w, kn, state_gb)
    if row is None:
        return None
    w.sharding = row["strategy"]
    if row.get(N.CHECKPOINTING) is not None and w.checkpointing is None:
        w.checkpointing = row[N.CHECKPOINTING]
        assumptions.append(f"activation checkpointing: {'on' if w.checkpointing else 'off'} "
                           f"(as the published runs of {kn.sharding['strategies'][w.sharding]['name'].split(' (')[0]} at this scale)")
    return row


def copy_gb(w: Workload, kn: Knowledge, runtime: Runtime, params: float) -> float | None:
    """The model state every GPU keeps a copy of under the runtime's own data parallel, where a
    GPU that cannot hold it runs the job in the layout people use at scale (runtimes.yaml
    sharding.at_scale): no sharding named, a runtime that shards nothing, a task the layouts
    cover, no CPU offload of a full fine-tune. None where no such layout applies. For LoRA and
    QLoRA the frozen base in its format (the adapters are small); else 16-bit weights and
    gradients, FP32 master weights and AdamW's two FP32 moments."""
    strategies = kn.sharding.get("strategies", {})
    own = strategies.get(runtime.get(N.SHARDING) or kn.sharding.get("default", ""))
    if w.sharding in strategies or own is None or own["stage"] > 0:
        return None
    if not any(w.task in r["tasks"] for r in kn.sharding.get("at_scale") or []) or (
            w.offload and w.task not in ("lora", "qlora")):
        return None         # (a LoRA or QLoRA offloads under FSDP, as Answer.AI's FSDP + QLoRA does)
    c = kn.constants
    per_gb = float(c[N.BYTES_PER_GB]["value"])
    if w.task in ("lora", "qlora"):
        d = kn.defaults
        fmt = w.precision or str(d["qlora_precision"] if w.task == "qlora" else d["training_precision"])
        return params * float(kn.precisions[fmt]["bits_per_weight"]) / 8 / per_gb
    return params * (2 * float(c[N.GRAD_BYTES]["value"]) + float(c[N.MASTER_WEIGHT_BYTES]["value"])
                     + float(c[N.ADAMW_STATE_BYTES]["value"])) / per_gb


def resolve_sharding(w: Workload, kn: Knowledge, runtime: Runtime, assumptions: list[str],
                     scaled: AtScale | None = None) -> None:
    """How the GPUs share the job: as asked, else the runtime's way, else plain data parallel.
    "cpu offload" with no sharding runs as DeepSpeed ZeRO-Offload."""
    table = kn.sharding
    strategies = table.get("strategies", {})
    if not strategies:
        return
    why = f"{gpu_count(w)} GPUs: {scaled['text']}" if scaled else "as asked"
    if w.sharding not in strategies:
        rt = runtime.get(N.SHARDING)
        if w.offload and rt in (None, table["default"]):
            w.sharding, why = table["offload_default"], "cpu offload with no sharding named"
        elif rt is not None:
            w.sharding, why = rt, f"{runtime['name']} default"
        else:
            w.sharding, why = table["default"], "the default"
    st = strategies[w.sharding]
    if gpu_count(w) > 1 or w.offload:
        hint = "; name fsdp or zero3 to shard the model" if st["stage"] < 3 and not st.get(N.MODEL_PARALLEL) else ""
        mfu = (f"; model FLOPS utilisation {st['mfu']:.0%}, as published for this stack [{st['mfu_source']}]"
               if st.get("mfu") else "")
        assumptions.append(f"several GPUs: {st['name']} ({why}) [{st['source']}]{hint}{mfu}")


def _at_scale(w: Workload, kn: Knowledge, state_gb: float) -> AtScale | None:
    """The layout people run a full fine-tune, pretraining or LoRA / QLoRA in on this many GPUs
    (runtimes.yaml sharding.at_scale) when one GPU asked about cannot hold the copy of the model
    state (copy_gb) the runtime's own way keeps on each."""
    rows = [r for r in kn.sharding.get("at_scale") or [] if w.task in r["tasks"]]
    count = gpu_count(w)
    if not rows or count < 2:
        return None
    sizes = [float(kn.gpus[g.gpu_id]["memory_gb"] or 0) for g in w.gpus if g.gpu_id in kn.gpus]
    smallest = min(sizes, default=None)
    if smallest is None or state_gb <= smallest:
        return None
    found = [r for r in rows if count >= r["min_gpus"]]
    return max(found, key=lambda r: r["min_gpus"]) if found else None


def layout(count: int, w: Workload | None = None, kn: Knowledge | None = None) -> Layout:
    """A training job's GPUs as the training formulas model them: every GPU a data-parallel rank
    running its own micro-batch (no tensor or pipeline split), sharding only changing what each
    rank keeps of the model state; under a model-parallel stack (Megatron) the tp × pp split the
    job holds (model_parallel_layouts), the rest data parallel."""
    st = kn.sharding.get("strategies", {}).get(w.sharding or "") if w is not None and kn is not None else None
    if w is None or not (st and st.get(N.MODEL_PARALLEL)):
        return Layout(tp=1, pp=1, dp=count, canonical=True, note=None)
    t, p, d = split(count, w.tp or 1, w.pp or 1)
    return Layout(tp=t, pp=p, dp=d, canonical=True,
                  note=Note("layout_model_parallel", (("count", count), ("tp", t), ("pp", p), ("dp", d))))


def split(count: int, t: int, p: int) -> tuple[int, int, int]:
    """tp, pp and dp of `count` GPUs under a model-parallel split t × p (none where it does not
    divide the count)."""
    if count % (t * p):
        t, p = 1, 1
    return t, p, max(1, count // (t * p))


def model_parallel_layouts(count: int, heads: int, kv_heads: int, layers: int, node: int) -> list[tuple[int, int]]:
    """Valid (tp, pp) splits of `count` GPUs for a model-parallel stack, fewest model-parallel GPUs
    first and tensor before pipeline: tp divides the query and KV heads and stays inside a node,
    pp is at most the layers (Megatron-Core gives the first and last stages fewer layers where pp
    does not divide them, as Llama 3 405B's 126 layers over 16 stages), and tp × pp divides the
    count (Megatron-LM checks each at start-up)."""
    out = [(t, p) for t in range(1, node + 1) if heads % t == 0 and kv_heads % t == 0 and count % t == 0
           for p in _divisors(count // t) if p <= layers]
    return sorted(out, key=lambda tp: (tp[0] * tp[1], tp[1]))      # no two splits share the key


def _divisors(n: int) -> list[int]:
    """Every divisor of n (a search probes counts in the thousands: read in √n steps)."""
    low = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return low + [n // d for d in low if d * d != n]


def is_model_parallel(w: Workload, kn: Knowledge) -> bool:
    st = kn.sharding.get("strategies", {}).get(w.sharding or "")
    return bool(st and st.get(N.MODEL_PARALLEL))


def parallel(w: Workload, kn: Knowledge, lay: Layout) -> Parallel:
    """The answer's workload.parallel for a training job: tp, pp, dp as `layout` gives them, the
    sharding the ranks run (a runtime's own name reported as the strategy it runs as) and whether
    model state is offloaded to CPU memory."""
    st = kn.sharding.get("strategies", {}).get(w.sharding or "")
    return {**lay.as_dict(), N.SHARDING: (st["layout"] if st else None) or w.sharding,
            N.OFFLOAD: bool(w.offload)}


def scope_values(w: Workload, kn: Knowledge) -> dict[str, Value]:
    """The names the training formulas read about sharding and the objective."""
    st = kn.sharding.get("strategies", {}).get(w.sharding or "")
    obj = kn.objectives.get(w.objective or "")
    return {
        N.ZERO_STAGE: st["stage"] if st else 0, N.SHARDING: w.sharding or "",
        N.MODEL_PARALLEL: bool(st and st.get(N.MODEL_PARALLEL)),
        N.STACK_MFU: (st.get("mfu") or 0.0) if st else 0.0,
        N.OBJECTIVE_SEQUENCES: obj[N.SEQUENCES] if obj else 1,
        N.REFERENCE_MODEL: bool(obj and obj["reference"]), N.CRITIC_MODEL: bool(obj and obj["critic"]),
        N.ROLLOUT_ENGINE: bool(obj and obj["rollout"]), N.ROLLOUT_GENERATIONS: obj["generations"] if obj else 1,
    }


def memory_extras(s: Scope, w: Workload, is_training: bool) -> MemoryExtras:
    """The answer's training memory keys: host RAM, sharding and what one GPU holds (None for
    inference)."""
    if not is_training:
        return {N.HOST_RAM_GB: None, N.SHARDING: None, N.ZERO_STAGE: None, "per_gpu_breakdown": None}
    return {N.HOST_RAM_GB: s.get(N.HOST_RAM_GB), N.SHARDING: w.sharding,
            N.ZERO_STAGE: s.get(N.ZERO_STAGE),
            "per_gpu_breakdown": {k: s.get(name) for k, name in PER_GPU_BREAKDOWN.items()}}


def shown(is_training: bool, breakdown: tuple[str, ...], names: dict[str, str]) -> tuple[str, ...]:
    """The formulas the answer's memory section reads (computed and traced)."""
    if not is_training:
        return breakdown
    return tuple(names.get(k, k) for k in breakdown) + tuple(PER_GPU_BREAKDOWN.values())[:-1] + (
        N.PER_GPU_GB, N.HOST_RAM_GB)


def no_count_note(kn: Knowledge, memory: Memory) -> str:
    """Why no number of GPUs holds a training job that shards less than its weights."""
    stage = memory.get(N.ZERO_STAGE)
    if stage is None or stage >= 3 or not kn.sharding:
        return ""
    return f" Under {memory.get('sharding')}, {kn.sharding['no_count_note']}."


def time_note(s: Scope) -> str:
    """On several GPUs: the training time as 6·N·D over the GPUs' peak at the stack's MFU, with
    the GPU-hours and what renting them costs (the figures of the formulas train_time_s,
    gpu_hours and run_cost_usd)."""
    count, hours = s.get(N.GPU_COUNT), s.get(N.GPU_HOURS)
    if not isinstance(count, int) or count < 2 or not hours or not s.get(N.FITS):
        return ""
    cost = s.get(N.RUN_COST_USD)
    rent = f", ${cost:,.0f} at ${s.get('cloud_usd_per_hour'):,.2f} per GPU-hour" if cost else ""
    return (f"training time: {s.get('train_flops_per_token'):.3g} FLOP a token × {s.get('train_tokens'):.3g} tokens "
            f"over {count} × {s.get('gpu.compute_tflops'):g} TFLOPS at {s.get('training_mfu'):.0%} MFU = "
            f"{s.get('run_hours'):,.0f} h; {hours:,.0f} GPU-hours{rent}")


def paged_note(s: Scope) -> str:
    """A paged optimizer: where its states live on this GPU, and the peak on a card where they
    would go the other way (the figures of paged_states_gb, paged_out and per_gpu_gb)."""
    states = s.get(N.PAGED_STATES_GB)
    if not s.get(N.PAGED) or not states:
        return ""
    peak = s.get(N.PER_GPU_GB) or 0.0
    if s.get(N.PAGED_OUT):
        return (f"paged optimizer: {s.get('gpu.name')} cannot hold its {states:.1f} GB of states beside the rest "
                f"({peak:.1f} GB), so they page out to CPU memory and each step waits on PCIe; a card with "
                f"{peak + states:.1f} GB or more keeps them on the GPU, and its peak includes them [bitsandbytes-paged-optimizers]")
    return (f"paged optimizer: its {states:.1f} GB of states fit on {s.get('gpu.name')}, so they stay there and the "
            f"peak ({peak:.1f} GB) includes them; on a card that cannot hold them they page out to CPU memory "
            f"(peak {peak - states:.1f} GB, each step waiting on PCIe) [bitsandbytes-paged-optimizers]")
