"""Assembling an Answer from evaluated scopes: GPU rows, ranking, memory, speed, bands.

In: the Resolved workload, the Evaluated scope over the candidates and the first GPU's view,
the Knowledge. Out: the parts of an Answer (kb.engine.assembly.answer): rows in rank order, the memory
breakdown, the bottleneck, error bands per figure, warnings; and the brief Answer of the
figures alone (no walk, trace, claims or advice).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from kb.engine.verdicts import margins
from kb.engine.resolving import training as tr
from kb.engine.assembly.answer import Answer, GpuRow
from kb.engine.evaluate import Evaluated, Scope, evaluate
from kb.engine.resolving.scope import Resolved
from kb.expr.parse import Col, at
from kb.knowledge.data import Knowledge
from kb.knowledge import names as N

if TYPE_CHECKING:
    from kb.knowledge.records import GPU, Value
    from kb.engine.assembly.answer_records import Bottleneck, ErrorBand, Memory, Throughput, WorkloadDict

# Answer keys → formula names (what the answer shows); the names live in rules/formulas.yaml.
BREAKDOWN = (N.WEIGHTS_GB, N.KV_CACHE_GB, N.ACTIVATIONS_GB, N.GRADIENTS_GB, N.OPTIMIZER_GB,
             N.ADAPTERS_GB, N.OVERHEAD_GB, N.OTHER_MODELS_GB)
# a training answer shows the memory as the ranks hold it, added up over the GPUs
TRAINING_BREAKDOWN = {N.WEIGHTS_GB: N.JOB_WEIGHTS_GB, N.ACTIVATIONS_GB: N.JOB_ACTIVATIONS_GB,
                      N.GRADIENTS_GB: N.JOB_GRADIENTS_GB, N.OPTIMIZER_GB: N.JOB_OPTIMIZER_GB,
                      N.ADAPTERS_GB: N.JOB_ADAPTERS_GB}
INFERENCE_SPEED = (N.DECODE_TOKENS_PER_S, N.DECODE_TOKENS_PER_S_AGGREGATE,
                   N.PREFILL_TOKENS_PER_S, N.TTFT_S)
UNDER_LOAD = (N.SERVING_TOKENS_PER_S_PER_USER, N.SERVING_TOKENS_PER_S_PER_GPU, N.SERVING_TTFT_S,
              N.SERVING_REQUESTS_PER_S)
TRAINING_SPEED = (N.TRAIN_TOKENS_PER_S, N.TRAIN_TIME_S)
ROW_MEMORY = (N.USABLE_VRAM_GB, N.PER_GPU_GB, N.FITS, N.HEADROOM_GB, N.GPUS_NEEDED,
              N.RANK_SPEED_TOKENS_PER_S)
ROW_FORMULAS = {False: ROW_MEMORY + INFERENCE_SPEED, True: ROW_MEMORY + TRAINING_SPEED}


ROW_FIELDS = (N.USABLE_VRAM_GB, N.PER_GPU_GB, N.FITS, N.HEADROOM_GB, N.GPUS_NEEDED,
              N.GPU_COMPUTE_TFLOPS, "_compute_precision", N.DECODE_TOKENS_PER_S,
              N.DECODE_TOKENS_PER_S_AGGREGATE, N.PREFILL_TOKENS_PER_S, N.TTFT_S,
              N.TRAIN_TOKENS_PER_S, N.TRAIN_TIME_S)


def rows_of(ev: Evaluated, candidates: list[tuple[GPU, int, bool]], order: list[int]) -> list[GpuRow]:
    s = ev.scope
    n = len(candidates)
    values = list(zip(*[v if (v := s.get(k)).__class__ is Col else [v] * n for k in ROW_FIELDS]))
    off = s.get(N.OFFLOAD_GB)
    offloads = off if off.__class__ is Col else [off] * n
    rows = []
    for rank, i in enumerate(order, 1):
        gpu, count, requested = candidates[i]
        (usable, per_gpu, fits, headroom, needed, tflops, cprec, decode, aggregate, prefill,
         ttft, train, train_time) = values[i]
        rows.append(GpuRow(
            gpu["id"], gpu["name"], count, gpu["memory_gb"], usable, per_gpu, bool(fits), headroom,
            int(needed) if needed is not None else None, gpu.get("bandwidth_gb_s"), tflops, cprec,
            decode, aggregate, prefill, ttft, train, train_time, gpu.get("tdp_w"), rank, requested,
            offload_gb=offloads[i] or None))
    return rows


def rank_order(ranking: list[tuple[str, str]], ev: Evaluated, n: int) -> list[int]:
    """Candidate indices, best first; a figure without a value ranks last."""
    cols = [(ev.scope.get(name), order == "desc") for name, order in ranking]

    def key(i: int) -> tuple[tuple[int, Value], ...]:
        out: list[tuple[int, Value]] = []
        for col, desc in cols:
            v = col[i] if col.__class__ is Col else col
            if v is None:
                out.append((1, 0))
            else:
                v = int(v) if isinstance(v, bool) else v
                out.append((0, -v if desc else v))
        return tuple(out)
    return sorted(range(n), key=key)


def shown_figures(kn: Knowledge, r: Resolved, primary: Evaluated,
                  rows: list[GpuRow]) -> tuple[tuple[str, ...], Throughput, list[str]]:
    """The memory parts, total and speeds an answer shows, computed; its throughput, with the
    speeds of what does not fit withheld (kb.engine.verdicts.margins), and the warnings that says so."""
    shown = tr.shown(r.is_training, BREAKDOWN, TRAINING_BREAKDOWN) + (N.TOTAL_GB,) + (
        TRAINING_SPEED if r.is_training else INFERENCE_SPEED + UNDER_LOAD)
    evaluate(kn, primary, shown)
    s = primary.scope

    def get(k: str) -> float | None:
        return s.get(k) if k in shown else None
    throughput: Throughput = {
        N.DECODE_TOKENS_PER_S: get(N.DECODE_TOKENS_PER_S),
        N.DECODE_TOKENS_PER_S_AGGREGATE: get(N.DECODE_TOKENS_PER_S_AGGREGATE),
        N.PREFILL_TOKENS_PER_S: get(N.PREFILL_TOKENS_PER_S), N.TTFT_S: get(N.TTFT_S),
        N.TRAIN_TOKENS_PER_S: get(N.TRAIN_TOKENS_PER_S), N.TRAIN_TIME_S: get(N.TRAIN_TIME_S)}
    fits = bool(s.get(N.FITS))
    for name in UNDER_LOAD:         # nothing under load for what does not fit
        throughput[name] = get(name) if fits else None      # type: ignore[literal-required]
    return shown, throughput, margins.withhold_speeds(kn, rows, throughput, fits)


def brief_answer(kn: Knowledge, r: Resolved, primary: Evaluated, rows: list[GpuRow], query: str) -> Answer:
    """The figures of an answer without its walk, trace, claims and advice (answer(brief=True))."""
    _, throughput, _ = shown_figures(kn, r, primary, rows)
    s = primary.scope
    return Answer(
        query=query, workload=workload_dict(r), assumptions=r.assumptions, memory=memory(s, r),
        throughput=throughput,
        bottleneck=bottleneck(s, r), gpus=rows, verdict="", path=[], trace=[], disagreements=[],
        warnings=list(r.warnings), advice=[], claims_checked=[], error_bands={}, recommendation=None,
        prices={})


def error_bands(kn: Knowledge, r: Resolved) -> dict[str, ErrorBand]:
    """How far this kind of figure has been from published measurements (per runtime when the
    runtime has 3+ points, else over all runtimes), and which measurements say so."""
    return {figure: {**band, "measurements": list(band["measurements"])}
            for figure, band in kn.derived.error_bands[r.runtime["id"], r.is_training].items()}


def workload_dict(r: Resolved) -> WorkloadDict:
    d = r.workload.to_dict()
    d.pop("task_explicit", None)
    d.pop("notes", None)
    d.pop("unused_words", None)         # on the Answer itself (Answer.unused_words)
    d["model"] = r.model["id"]
    d["model_name"] = r.model["name"]
    d[N.PARAMS] = r.model["params_total"]
    d[N.ACTIVE_PARAMS] = r.model["params_active"]
    d["parallel"] = r.workload_parallel
    return cast("WorkloadDict", d)


def memory(s: Scope, r: Resolved) -> Memory:
    keys = {k: TRAINING_BREAKDOWN.get(k, k) if r.is_training else k for k in BREAKDOWN}
    return {N.TOTAL_GB: s.get(N.TOTAL_GB),
            "breakdown": {k: s.get(name) for k, name in keys.items()},
            N.PER_GPU_GB: s.get(N.PER_GPU_GB),
            N.KV_CACHE_GB_PER_USER: s.get(N.KV_CACHE_GB_PER_USER) if not r.is_training else None,
            "gpu": s.get(N.GPU_NAME), N.GPU_COUNT: s.get(N.GPU_COUNT),
            **tr.memory_extras(s, r.workload, r.is_training)}


def bottleneck(s: Scope, r: Resolved) -> Bottleneck:
    if r.is_training:
        return {"training": s.get(N.TRAIN_BOUND),
                "arithmetic_intensity": {"training": s.get(N.TRAIN_INTENSITY)},
                N.RIDGE_POINT: s.get(N.RIDGE_POINT), "gpu": s.get(N.GPU_NAME), "gpu_id": s.get(N.GPU_ID)}
    return {"decode": s.get(N.DECODE_BOUND), "prefill": s.get(N.PREFILL_BOUND),
            "arithmetic_intensity": {"decode": s.get(N.DECODE_INTENSITY), "prefill": s.get(N.PREFILL_INTENSITY)},
            N.RIDGE_POINT: s.get(N.RIDGE_POINT), "gpu": s.get(N.GPU_NAME), "gpu_id": s.get(N.GPU_ID)}


def gpu_warnings(every: Evaluated, candidates: list[tuple[GPU, int, bool]],
                  r: Resolved) -> list[str]:
    out: list[str] = []
    compute = r.precision["compute"]
    s = every.scope
    for i, (gpu, _count, requested) in enumerate(candidates):
        if not requested and len(candidates) > 1:
            continue
        used = at(s.get("_compute_precision"), i)
        if used and used != compute and compute in gpu.get("tensor_unpublished", ()):
            out.append(f"{gpu['name']}'s {compute.upper()} tensor rate is not published; "
                       f"computed at its {used.upper()} rate (a lower bound)")
        elif used and used != compute:
            out.append(f"{gpu['name']} has no native {compute.upper()} tensor math; "
                       f"computed at its {used.upper()} rate")
        per_gpu = at(s.get(N.PER_GPU_GB), i)
        if requested and not at(s.get(N.FITS), i) and per_gpu is not None:
            out.append(f"does not fit on {at(s['gpu_count'], i)}× {gpu['name']}: needs "
                       f"{per_gpu:.1f} GB per GPU")
    return out
