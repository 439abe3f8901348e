"""Assembling an Answer from evaluated scopes: GPU rows, ranking, memory, speed, bands.

In: the Resolved workload, the Evaluated scope over the candidates and the first GPU's view,
the Knowledge. Out: the parts of an Answer (kb.engine.answer): rows in rank order, the memory
breakdown, the bottleneck, error bands per figure, warnings; and the brief Answer of the
figures alone (no walk, trace, claims or advice).
"""

from __future__ import annotations

from kb.hints import TYPE_CHECKING, cast

from kb.engine import margins
from kb.engine import training as tr
from kb.engine.answer import Answer, GpuRow
from kb.engine.evaluate import Evaluated, Scope, evaluate
from kb.engine.scope import Resolved
from kb.expr.parse import Col, at
from kb.knowledge.data import Knowledge

if TYPE_CHECKING:
    from kb.knowledge.records import GPU, Value
    from kb.engine.answer_records import Bottleneck, ErrorBand, Memory, Throughput, WorkloadDict

# Answer keys → formula names (what the answer shows); the names live in rules/formulas.yaml.
BREAKDOWN = ("weights_gb", "kv_cache_gb", "activations_gb", "gradients_gb", "optimizer_gb",
             "adapters_gb", "overhead_gb", "other_models_gb")
# a training answer shows the memory as the ranks hold it, added up over the GPUs
TRAINING_BREAKDOWN = {"weights_gb": "job_weights_gb", "activations_gb": "job_activations_gb",
                      "gradients_gb": "job_gradients_gb", "optimizer_gb": "job_optimizer_gb",
                      "adapters_gb": "job_adapters_gb"}
INFERENCE_SPEED = ("decode_tokens_per_s", "decode_tokens_per_s_aggregate",
                   "prefill_tokens_per_s", "ttft_s")
TRAINING_SPEED = ("train_tokens_per_s", "train_time_s")
ROW_MEMORY = ("usable_vram_gb", "per_gpu_gb", "fits", "headroom_gb", "gpus_needed",
              "rank_speed_tokens_per_s")
ROW_FORMULAS = {False: ROW_MEMORY + INFERENCE_SPEED, True: ROW_MEMORY + TRAINING_SPEED}


ROW_FIELDS = ("usable_vram_gb", "per_gpu_gb", "fits", "headroom_gb", "gpus_needed",
              "gpu.compute_tflops", "_compute_precision", "decode_tokens_per_s",
              "decode_tokens_per_s_aggregate", "prefill_tokens_per_s", "ttft_s",
              "train_tokens_per_s", "train_time_s")


def rows_of(ev: Evaluated, candidates: list[tuple[GPU, int, bool]], order: list[int]) -> list[GpuRow]:
    s = ev.scope
    n = len(candidates)
    values = list(zip(*[v if (v := s.get(k)).__class__ is Col else [v] * n for k in ROW_FIELDS]))
    rows = []
    for rank, i in enumerate(order, 1):
        gpu, count, requested = candidates[i]
        (usable, per_gpu, fits, headroom, needed, tflops, cprec, decode, aggregate, prefill,
         ttft, train, train_time) = values[i]
        rows.append(GpuRow(
            gpu["id"], gpu["name"], count, gpu["memory_gb"], usable, per_gpu, bool(fits), headroom,
            int(needed) if needed is not None else None, gpu.get("bandwidth_gb_s"), tflops, cprec,
            decode, aggregate, prefill, ttft, train, train_time, gpu.get("tdp_w"), rank, requested))
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
    speeds of what does not fit withheld (kb.engine.margins), and the warnings that says so."""
    shown = tr.shown(r.is_training, BREAKDOWN, TRAINING_BREAKDOWN) + ("total_gb",) + (
        TRAINING_SPEED if r.is_training else INFERENCE_SPEED)
    evaluate(kn, primary, shown)
    s = primary.scope

    def get(k: str) -> float | None:
        return s.get(k) if k in shown else None
    throughput: Throughput = {
        "decode_tokens_per_s": get("decode_tokens_per_s"),
        "decode_tokens_per_s_aggregate": get("decode_tokens_per_s_aggregate"),
        "prefill_tokens_per_s": get("prefill_tokens_per_s"), "ttft_s": get("ttft_s"),
        "train_tokens_per_s": get("train_tokens_per_s"), "train_time_s": get("train_time_s")}
    return shown, throughput, margins.withhold_speeds(rows, throughput, bool(s.get("fits")))


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
    d["params"] = r.model["params_total"]
    d["active_params"] = r.model["params_active"]
    d["parallel"] = r.workload_parallel
    return cast("WorkloadDict", d)


def memory(s: Scope, r: Resolved) -> Memory:
    keys = {k: TRAINING_BREAKDOWN.get(k, k) if r.is_training else k for k in BREAKDOWN}
    return {"total_gb": s.get("total_gb"),
            "breakdown": {k: s.get(name) for k, name in keys.items()},
            "per_gpu_gb": s.get("per_gpu_gb"),
            "kv_cache_gb_per_user": s.get("kv_cache_gb_per_user") if not r.is_training else None,
            "gpu": s.get("gpu.name"), "gpu_count": s.get("gpu_count"),
            **tr.memory_extras(s, r.workload, r.is_training)}


def bottleneck(s: Scope, r: Resolved) -> Bottleneck:
    if r.is_training:
        return {"training": s.get("train_bound"),
                "arithmetic_intensity": {"training": s.get("train_intensity")},
                "ridge_point": s.get("ridge_point"), "gpu": s.get("gpu.name"), "gpu_id": s.get("gpu.id")}
    return {"decode": s.get("decode_bound"), "prefill": s.get("prefill_bound"),
            "arithmetic_intensity": {"decode": s.get("decode_intensity"), "prefill": s.get("prefill_intensity")},
            "ridge_point": s.get("ridge_point"), "gpu": s.get("gpu.name"), "gpu_id": s.get("gpu.id")}


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
        per_gpu = at(s.get("per_gpu_gb"), i)
        if requested and not at(s.get("fits"), i) and per_gpu is not None:
            out.append(f"does not fit on {at(s['gpu_count'], i)}× {gpu['name']}: needs "
                       f"{per_gpu:.1f} GB per GPU")
    return out
