"""The engine: Workload + Knowledge → Answer.

In: a Workload (kb.query) and the Knowledge (kb.knowledge). Out: an Answer (kb.answer).
Steps: resolve the model, precision and defaults (each default becomes an assumption); fill a
scope with the workload's inputs and the constants; evaluate every candidate GPU at once (a
per-GPU name holds a kb.expr.Col, one value per candidate); rank them by the sizing flow's
ranking; on the first GPU's own view, walk each flow from its entry, following the first edge
whose condition holds and tracing every formula a node computes; check the sources' claims.
Pure: no I/O, no printing.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kb import training as tr
from kb import advice as rightsize
from kb import unknown
from kb.answer import Answer, GpuRow, Step
from kb.errors import EvalError
from kb.expr import MISSING, RAISED, Col, Failed, at, filled, guarded
from kb import margins
from kb.layout import Layout, choose, scope_values
from kb.model import TEMPLATE_FIELD, TEMPLATE_SPEC, Flow, Formula, Knowledge, capacity_fields
from kb.workload import GpuRequest, Workload

Scope = dict[str, Any]

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


@dataclass
class Evaluated:
    """A scope and, for each formula computed in it, the index of the case used and any error.
    In a scope over several candidate GPUs a value, case or error may be a Col (kb.expr): one
    entry per candidate (its name is then in `columns`); `view(i)` is candidate i's own scope."""
    scope: Scope
    cases: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, Any] = field(default_factory=dict)
    columns: list[str] = field(default_factory=list)   # the names whose value is a Col

    def view(self, i: int) -> Evaluated:
        scope = dict(self.scope)
        for k in self.columns:
            scope[k] = scope[k][i]
        return Evaluated(scope, {k: v[i] if v.__class__ is Col else v for k, v in self.cases.items()},
                         {k: e for k, v in self.errors.items() if (e := at(v, i)) is not None})


def evaluate(kn: Knowledge, ev: Evaluated, names: Iterable[str]) -> None:
    """Compute formulas (and what they depend on) into ev.scope, in dependency order."""
    scope = ev.scope
    order = _order(kn)
    for name in names:
        if name in scope:
            continue
        for dep in order[name]:
            if dep not in scope:
                value = scope[dep] = _eval_formula(kn.formulas[dep], ev)
                if value.__class__ is Col:
                    ev.columns.append(dep)


def _order(kn: Knowledge) -> dict[str, tuple[str, ...]]:
    """Each formula after the formulas it needs, in the order to compute them."""
    found = kn.cache.get("order")
    if found is None:
        found = kn.cache["order"] = {n: deps + (n,) for n, deps in kn.closure.items()}
    return found  # type: ignore[no-any-return]


def _eval_formula(f: Formula, ev: Evaluated) -> Any:
    """The first case whose condition holds. A figure the workload lacks (None, e.g. the
    bandwidth of a bare '20GB') makes the result None; any other failure is recorded."""
    scope = ev.scope
    for i, case in enumerate(f.cases):
        if case.when is not None:
            try:
                holds = case.when.fn(scope)
            except RAISED as exc:
                return _failed(f, ev, case.when.message(exc, scope), scope)
            if holds.__class__ is Col:
                return _eval_cases_each(f, ev, i, holds)
            if not holds:
                continue
        try:
            value = case.expr.fn(scope)
        except RAISED as exc:
            return _failed(f, ev, case.expr.message(exc, scope), scope)
        ev.cases[f.name] = i
        if value.__class__ is Col:
            return _checked(f, ev, value, case.expr)
        if value.__class__ is float and (value != value or value in (math.inf, -math.inf)):
            ev.errors[f.name] = "the result is not a finite number"
            return None
        return value
    return None


def _failed(f: Formula, ev: Evaluated, message: str, scope: Scope) -> None:
    if not any(scope.get(n) is None for n in f.names):
        ev.errors[f.name] = message
    return None


def _checked(f: Formula, ev: Evaluated, col: Col, expr: Any) -> Col:
    """A result over the candidates: failed or non-finite elements become None, with an error."""
    holes = col.holes
    try:
        clean = math.isfinite(math.fsum(filled(col, holes) if holes else col))
    except (TypeError, OverflowError, ValueError):      # text, truth values, failures, inf
        clean = False
    if clean and not holes:
        return col                                      # all numbers, all finite: the common case
    positions = holes if clean else range(len(col))
    out = list(col)
    errors: dict[int, str] = {}
    for i in positions:
        v = out[i]
        if v.__class__ is Failed:
            out[i] = None
            if v is not MISSING and not any(at(ev.scope.get(n), i) is None for n in f.names):
                errors[i] = expr.message(v.error, {n: at(ev.scope.get(n), i) for n in expr.names})
        elif v.__class__ is float and (v != v or v in (math.inf, -math.inf)):
            out[i] = None
            errors[i] = "the result is not a finite number"
    if errors:
        ev.errors[f.name] = Col(errors.get(i) for i in range(len(out)))
    return Col.of(out, holes if clean else None)


def _eval_cases_each(f: Formula, ev: Evaluated, start: int, first: Col) -> Any:
    """Cases whose conditions differ between candidates: each candidate takes its first case
    that holds, as it would on its own."""
    scope = ev.scope
    n = len(first)
    chosen: list[Any] = [None] * n          # case index, or a Failed condition
    holds: Any = first
    for i in range(start, len(f.cases)):
        case = f.cases[i]
        if i > start:
            holds = True if case.when is None else guarded(case.when.fn, scope)
        for k in range(n):
            if chosen[k] is None:
                h = holds[k] if holds.__class__ is Col else holds
                if h.__class__ is Failed:
                    chosen[k] = h
                elif h:
                    chosen[k] = i
    values = {i: guarded(f.cases[i].expr.fn, scope) for i in {c for c in chosen if c.__class__ is int}}
    col = Col.of([c if c is None or c.__class__ is Failed else at(values[c], k)
               for k, c in enumerate(chosen)])
    ev.cases[f.name] = Col(c if c.__class__ is int else len(f.cases) - 1 for c in chosen)
    return _checked(f, ev, col, f.cases[next((c for c in chosen if c.__class__ is int), -1)].expr)


def condition(expr: Any, scope: Scope) -> bool:
    """An edge or claim condition; one that reads a figure the workload lacks does not hold."""
    if expr is None:
        return True
    try:
        return bool(expr(scope))
    except EvalError:
        return False


# ---------------------------------------------------------------- workload → scope

@dataclass
class Resolved:
    workload: Workload
    runtime: dict[str, Any]
    model: dict[str, Any]
    precision: dict[str, Any]
    kv_precision: dict[str, Any]
    assumptions: list[str]
    warnings: list[str]
    is_training: bool
    workload_parallel: dict[str, int] | None = None


def resolve(w: Workload, kn: Knowledge) -> Resolved:
    """Fill every field the query left out; say what was assumed."""
    d = kn.defaults
    q = kn.query
    assumptions: list[str] = list(w.notes) + _capacity_assumptions(w, kn)
    warnings: list[str] = []
    is_training = w.task in q["training_tasks"]
    model = _resolve_model(w, kn, assumptions)

    def default(attr: str, value: Any, text: str) -> None:
        if getattr(w, attr) is None:
            setattr(w, attr, value)
            assumptions.append(text)

    if not w.task_explicit:
        assumptions.append(f"task: {w.task} (no task word in the query)")
    if is_training:
        tr.resolve_objective(w, kn, assumptions)
    runtime = _resolve_runtime(w, kn, is_training, assumptions)
    runtime = _runtime_for_devices(w, kn, runtime, is_training, assumptions)
    native = model.get("native_precision")
    if w.precision is None and native and not is_training:
        default("precision", native, f"precision: {native}, {model['name']}'s published checkpoint format "
                f"({kn.precisions[native]['name']}; name another, e.g. 'fp16' or 'int4', to change it)")
    if is_training:
        tr.apply_recipes(w, kn, runtime, model, assumptions)
    if w.precision is None:
        key = "qlora_precision" if w.task == "qlora" else (
            "training_precision" if is_training else "inference_precision")
        default("precision", d[key], f"precision: {d[key]} ({'QLoRA base' if w.task == 'qlora' else 'training' if is_training else 'inference'} default)")
    default("kv_precision", d["kv_precision"], f"KV cache precision: {d['kv_precision']}")
    if is_training:
        default("batch", d["batch"], f"micro-batch: {d['batch']}")
        default("seq_len", min(d["seq_len"], model["max_context"]),
                f"sequence length: {min(d['seq_len'], model['max_context'])} tokens")
        opt = runtime.get("optimizer") or d["optimizer"]
        ckpt = runtime.get("checkpointing")
        ckpt = d["checkpointing"] if ckpt is None else ckpt
        default("optimizer", opt, f"optimizer: {opt} ({runtime['name']} default)")
        default("checkpointing", ckpt,
                f"activation checkpointing: {'on' if ckpt else 'off'} ({runtime['name']} default)")
        if w.task in ("lora", "qlora"):
            default("lora_rank", d["lora_rank"], f"LoRA rank: {d['lora_rank']}, on every linear layer")
        default("train_tokens", d["train_tokens"], f"training tokens: {d['train_tokens']:.3g}")
        w.users = w.users or 1
    else:
        default("users", d["users"], f"concurrent users: {d['users']}")
        default("batch", 1, "")
        ctx = min(runtime.get("default_context_tokens") or d["context_tokens"], model["max_context"])
        default("context_tokens", ctx, f"context per user: {ctx} tokens (prompt + output)"
                + (f" ({runtime['name']} default)" if runtime.get("default_context_tokens") else ""))
        prompt = min(d["prompt_tokens"], w.context_tokens or ctx)
        default("prompt_tokens", prompt, f"prompt: {prompt} tokens")
        default("output_tokens", d["output_tokens"], f"output: {d['output_tokens']} tokens")
        _context_holds_the_work(w, assumptions)
    default("flash_attention", d["flash_attention"],
            f"fused (flash) attention: {'on' if d['flash_attention'] else 'off'}")
    w.seq_len = w.seq_len or min(d["seq_len"], model["max_context"])
    w.lora_rank = w.lora_rank or d["lora_rank"]
    w.optimizer = w.optimizer or d["optimizer"]
    w.checkpointing = bool(w.checkpointing)
    w.train_tokens = w.train_tokens or d["train_tokens"]
    for attr in ("users", "batch", "context_tokens", "prompt_tokens", "output_tokens"):
        if getattr(w, attr) is None:
            setattr(w, attr, d.get(attr, 1))
    if is_training:
        tr.resolve_sharding(w, kn, runtime, assumptions)
    assumptions[:] = [a for a in assumptions if a]
    ctx = w.context_tokens if not is_training else w.seq_len
    if ctx and ctx > model["max_context"]:
        warnings.append(f"{ctx} tokens is longer than {model['name']}'s maximum context "
                        f"({model['max_context']})")
    precision = kn.precisions[w.precision or d["inference_precision"]]
    kv = kn.precisions.get(w.kv_precision or d["kv_precision"], kn.precisions[d["kv_precision"]])
    return Resolved(w, runtime, model, precision, kv, assumptions, warnings, is_training)


def _context_holds_the_work(w: Workload, assumptions: list[str]) -> None:
    """A user's context holds at least the prompt and the output: a longer prompt + output grows it."""
    need = (w.prompt_tokens or 0) + (w.output_tokens or 0)
    if w.context_tokens is not None and need > w.context_tokens:
        assumptions[:] = [a for a in assumptions if not a.startswith(f"context per user: {w.context_tokens} tokens")]
        assumptions.append(f"context per user: {need} tokens, grown from {w.context_tokens} to hold "
                           f"the prompt ({w.prompt_tokens}) + output ({w.output_tokens})")
        w.context_tokens = need


def _resolve_runtime(w: Workload, kn: Knowledge, is_training: bool, assumptions: list[str]) -> dict[str, Any]:
    rd = kn.runtime_defaults
    if w.runtime is not None:     # kb.query has checked that its kind suits the task
        return kn.runtimes[w.runtime]
    if is_training:
        key = "training"
    elif w.precision and w.precision.startswith(("q2_", "q3_", "q4_", "q5_", "q6_", "q8_", "iq2_")):
        key = "gguf"
    else:
        key = "inference"
    rt = kn.runtimes[rd[key]]
    w.runtime = rt["id"]
    assumptions.append(f"runtime: {rt['name']} (the {'GGUF' if key == 'gguf' else key} default; "
                       "name one with 'with vllm', 'using llama.cpp', 'with torchtune'…)")
    return rt


VENDORS = {"nvidia": "NVIDIA", "amd": "AMD", "intel": "Intel", "apple": "Apple", "google": "Google",
           "aws": "AWS"}


def runs_on(runtime: dict[str, Any], gpu: dict[str, Any]) -> bool:
    """The runtime runs on this GPU's platform (a bare capacity runs anywhere)."""
    return gpu.get("vendor") == "any" or gpu["vendor"] in runtime["platforms"]


def _runtime_for_devices(w: Workload, kn: Knowledge, rt: dict[str, Any], is_training: bool,
                         assumptions: list[str]) -> dict[str, Any]:
    """A runtime that runs on every GPU the query named: the one chosen if it does, else the
    defaults, then the catalogue in order (runtimes.yaml `platforms`), said as an assumption."""
    named = [kn.gpus[g.gpu_id] for g in w.gpus if g.gpu_id is not None]
    if all(runs_on(rt, g) for g in named):
        return rt
    kinds = ("training", "both") if is_training else ("inference", "both")
    rd = kn.runtime_defaults
    preferred = [kn.runtimes[rd[k]] for k in (("training",) if is_training else ("inference", "gguf"))]
    for other in preferred + list(kn.runtimes.values()):
        if other["kind"] in kinds and all(runs_on(other, g) for g in named):
            bad = next(g for g in named if not runs_on(rt, g))
            assumptions[:] = [a for a in assumptions if not a.startswith(f"runtime: {rt['name']} (the ")]
            assumptions.append(f"runtime: {other['name']} instead of {rt['name']}, which does not run on "
                               f"{VENDORS.get(bad['vendor'], bad['vendor'])} GPUs such as the {bad['name']} "
                               "(runtimes.yaml platforms)")
            w.runtime = other["id"]
            return other
    return rt


def _resolve_model(w: Workload, kn: Knowledge, assumptions: list[str]) -> dict[str, Any]:
    if w.model_id is not None:
        return dict(kn.models[w.model_id])
    params = w.params if w.params is not None else kn.defaults["params"]
    size = f"{params / kn.billion:g}B"
    ref_id = min(kn.bare_size_refs,
                 key=lambda r: abs(math.log(kn.models[r]["params_total"] / params)))
    ref = kn.models[ref_id]
    model = dict(ref)
    model.update(params_total=params, params_active=params, name=f"{size} model", id=ref_id)
    assumptions.append(f"model: a {size} dense model with {ref['name']}'s architecture "
                       f"({ref['layers']} layers, {ref['kv_heads']} KV heads × {ref['head_dim']}, "
                       f"{ref['attention'].upper()}); weights use {size} parameters "
                       "(models.yaml bare_size)")
    return model


def _constants(kn: Knowledge) -> Scope:
    found = kn.cache.get("constants")
    if found is None:
        found = kn.cache["constants"] = {name: c["value"] for name, c in kn.constants.items()}
    return found  # type: ignore[no-any-return]


def base_scope(r: Resolved, kn: Knowledge) -> Scope:
    w, m = r.workload, r.model
    training = set(kn.query["training_tasks"])
    sliding = m.get("sliding_window") or 0
    mla = m.get("mla") or {}
    scope: Scope = dict(_constants(kn))
    scope.update({
        "params": float(m["params_total"]), "active_params": float(m["params_active"]),
        "users": w.users, "batch": w.batch, "context_tokens": w.context_tokens,
        "prompt_tokens": w.prompt_tokens, "output_tokens": w.output_tokens,
        "seq_len": w.seq_len, "lora_rank": w.lora_rank, "train_tokens": w.train_tokens,
        "is_training": w.task in training, "is_inference": w.task not in training,
        "is_full_ft": w.task == "full_ft", "is_lora": w.task == "lora",
        "is_qlora": w.task == "qlora", "is_pretrain": w.task == "pretrain",
        "is_prefill_only": w.task == "prefill",
        "checkpointing": bool(w.checkpointing), "flash_attention": bool(w.flash_attention),
        "offload": bool(w.offload), "paged": bool(w.paged),
        "checkpoint_offload": bool(w.checkpoint_offload),
        **tr.scope_values(w, kn),
        "optimizer_in_backward": bool(w.optimizer_in_backward),
        "lora_attention_only": bool(w.lora_attention_only),
        "optimizer": w.optimizer, "precision": w.precision, "task": w.task,
        "gpu_named": bool(w.gpus),
        "dp_attention": bool(w.dp_attention),
        "speed_floor_tok_s": w.speed_floor_tok_s or kn.constants["decode_speed_floor_tok_s"]["value"],
        "weight_bytes_per_param": r.precision["bits_per_weight"] / 8,
        "kv_bytes_per_value": r.kv_precision["bits_per_weight"] / 8,
        "model.id": m["id"], "model.layers": m["layers"], "model.hidden_size": m["hidden_size"],
        "model.intermediate_size": m["intermediate_size"],
        "model.attention_heads": m["attention_heads"], "model.kv_heads": m["kv_heads"],
        "model.head_dim": m["head_dim"], "model.vocab_size": m["vocab_size"],
        "model.attention": m["attention"], "model.sliding_window": sliding,
        "model.sliding_window_layers": (m.get("sliding_window_layers") if m.get("sliding_window_layers") is not None else m["layers"]) if sliding else 0,
        "model.kv_lora_rank": mla.get("kv_lora_rank", 0),
        "model.qk_rope_head_dim": mla.get("qk_rope_head_dim", 0),
        "model.experts": (m.get("moe") or {}).get("experts", 1),
        "model.experts_per_token": (m.get("moe") or {}).get("experts_per_token", 1),
        "model.shared_experts": (m.get("moe") or {}).get("shared_experts", 0),
        "model.tie_embeddings": bool(m.get("tie_embeddings")),
        "gpu_candidates": None, "fitting_gpus": None, "fewest_gpus_needed": None,
        "precision.kind": r.precision["kind"],
        "precision.experts_only": bool(r.precision.get("experts_only")),
    })
    scope.update(_layer_kinds(m))
    rt = r.runtime
    scope.update({
        "runtime.decode_bandwidth_efficiency": rt.get("decode_bandwidth_efficiency"),
        "runtime.quant_kernel_efficiency": rt.get("quant_kernel_efficiency"),
        "runtime.hbm_decode_efficiency": rt.get("hbm_decode_efficiency", 1.0),
        "runtime.moe_expert_kernel_s": rt.get("moe_expert_kernel_s", 0.0),
        "runtime.decode_step_overhead_s": rt.get("decode_step_overhead_s"),
        "runtime.prefill_compute_efficiency": rt.get("prefill_compute_efficiency"),
        "_gemm_accumulate": rt.get("gemm_accumulate", "fp32"),
        "runtime.memory_utilization": rt.get("memory_utilization", 1.0),
        "runtime.overhead_gb": rt.get("overhead_gb"),
        "runtime.training_mfu": rt.get("training_mfu"),
        "runtime.tensor_parallel": rt.get("multi_gpu") == "tensor_parallel",
        "runtime.logits_memory_fraction": rt.get("logits_memory_fraction", 1.0),
        "runtime.master_weights": rt.get("master_weights", True),
        "precision.quantizes_embeddings": r.precision.get("quantizes_embeddings", True),
    })
    scope.update(target_inputs(w))
    return scope


def _layer_kinds(m: dict[str, Any]) -> Scope:
    """Attention, routed-expert and state (linear-attention / state-space) layers of a model."""
    moe = m.get("moe") or {}
    rec = m.get("recurrent") or {}
    attention = m.get("attention_layers")
    return {
        "model.attention_layers": m["layers"] if attention is None else attention,
        "model.moe_layers": (moe.get("moe_layers") or m["layers"]) if moe else 0,
        "model.dense_intermediate_size": moe.get("dense_intermediate_size") or m["intermediate_size"],
        "model.shared_intermediate_size": moe.get("shared_expert_intermediate_size") or m["intermediate_size"],
        "model.state_layers": rec.get("layers", 0),
        "model.state_heads": rec.get("heads", 0), "model.state_head_dim": rec.get("head_dim", 0),
        "model.state_dim": rec.get("state_dim", 0), "model.state_groups": rec.get("groups", 0),
        "model.state_conv_kernel": rec.get("conv_kernel", 1),
    }


def target_inputs(w: Workload) -> Scope:
    """The prices, utilisation and targets a query set (rules/formulas.yaml asked_*)."""
    return {
        "hourly_price_asked": w.usd_per_gpu_hour is not None, "asked_usd_per_gpu_hour": w.usd_per_gpu_hour,
        "hours_per_day_asked": w.hours_per_day is not None, "asked_hours_per_day": w.hours_per_day,
        "budget_asked": w.budget_usd is not None, "asked_budget_usd": w.budget_usd,
        "deadline_asked": w.deadline_hours is not None, "asked_deadline_h": w.deadline_hours,
        "ttft_asked": w.ttft_max_s is not None, "asked_ttft_max_s": w.ttft_max_s,
        "tokens_per_day_asked": w.tokens_per_day is not None, "asked_tokens_per_day": w.tokens_per_day,
        "rent_asked": bool(w.rent), "sort_order": None,
    }


# ---------------------------------------------------------------- GPUs

def _capacity_gpu(req: GpuRequest, kn: Knowledge) -> dict[str, Any]:
    """A card of a bare capacity ("on 20GB"): memory is sold in GiB, so 20 means 20 GiB."""
    cap = req.capacity_gb or 0.0
    memory_bytes = cap * kn.constants["bytes_per_gib"]["value"]
    return {"id": f"{cap:g}gb", "name": f"{cap:g} GB GPU", "vendor": "any", "vram_gb": cap,
            "memory_bytes": memory_bytes,
            **capacity_fields(memory_bytes, kn.constants["bytes_per_gb"]["value"],
                              kn.constants["bytes_per_gib"]["value"]),
            "bandwidth_gb_s": None, "fp32_tflops": None, "tensor_tflops": {}, "tdp_w": None,
            "interconnect": {"gb_s": None}}


def _capacity_assumptions(w: Workload, kn: Knowledge) -> list[str]:
    """What a bare capacity in the query was read as."""
    out = []
    for req in w.gpus:
        if req.gpu_id is None:
            gb = _capacity_gpu(req, kn)["memory_gb"]
            out.append(f"GPU: a {req.capacity_gb:g} GB card read as {req.capacity_gb:g} GiB "
                       f"({gb:.1f} GB), the unit GPU memory is sold in")
    return out


def _compute_precision(gpu: dict[str, Any], precision: dict[str, Any],
                       accumulate: str = "fp32") -> tuple[str | None, float | None]:
    """The precision and peak rate a GEMM runs at; FP16 GEMMs that accumulate in FP16 (the
    runtime's gemm_accumulate) take the card's fp16_acc16 rate where it lists one."""
    for key in [precision["compute"], *precision["fallback"]]:
        tensor = gpu.get("tensor_tflops") or {}
        value = gpu.get("fp32_tflops") if key == "fp32" else tensor.get(key)
        if key == "fp16" and accumulate == "fp16" and tensor.get("fp16_acc16"):
            value = tensor["fp16_acc16"]
        if value:
            return key, float(value)
    return None, None


def gpu_values(gpu: dict[str, Any], count: int, precision: dict[str, Any], accumulate: str = "fp32") -> Scope:
    """The names a formula reads about one GPU (and how many of it)."""
    key, tflops = _compute_precision(gpu, precision, accumulate)
    return {
        "gpu.id": gpu["id"], "gpu.name": gpu["name"], "gpu.vendor": gpu["vendor"],
        "gpu.vram_gb": gpu["memory_gb"], "gpu.bandwidth_gb_s": gpu["bandwidth_gb_s"],
        "gpu.hbm": str(gpu.get("memory_type", "")).upper().startswith("HBM"),
        "gpu.compute_tflops": tflops, "gpu.tdp_w": gpu.get("tdp_w"),
        "gpu.interconnect_gb_s": (gpu.get("interconnect") or {}).get("gb_s") or 0,
        "gpu.module": str(gpu.get("form_factor", "")).upper().startswith(("SXM", "OAM", "SUPERCHIP", "SH5")),
        "gpu.price_usd": gpu.get("price_usd"), "gpu.cloud_usd_per_hour": gpu.get("cloud_usd_per_hour"),
        "gpu_count": count, "_compute_precision": key,
    }


def gpu_scope(base: Scope, gpu: dict[str, Any], count: int, precision: dict[str, Any],
              layout: Layout | None = None) -> Scope:
    """The scope of one GPU (and the parallel layout of `count` of them)."""
    scope = dict(base)
    scope.update(gpu_values(gpu, count, precision, base.get("_gemm_accumulate", "fp32")))
    scope.update(scope_values(layout or Layout(count, 1, 1, True, None)))
    return scope


def layout_of(r: Resolved, kn: Knowledge, count: int) -> Layout:
    """The parallel layout of `count` GPUs for this job (kb.layout); training keeps its split."""
    if r.is_training:
        return Layout(count, 1, 1, True, None)
    w = r.workload
    return choose(count, int(r.model["attention_heads"]), r.runtime.get("multi_gpu") == "tensor_parallel",
                  int(kn.constants["gpus_per_node"]["value"]), w.tp, w.pp)


def layout_columns(layouts: list[Layout]) -> Scope:
    """tp, pp and dp over the candidates: one value when all agree, else a Col."""
    out: Scope = {}
    for name in ("tp", "pp", "dp"):
        col = Col.of(scope_values(x)[name] for x in layouts)
        out[name] = col[0] if all(v == col[0] for v in col) else col
    return out


def gpu_columns(candidates: list[tuple[dict[str, Any], int]], precision: dict[str, Any],
                accumulate: str = "fp32") -> Scope:
    """The GPU names over several candidates: a Col per name, or one value where every
    candidate has the same (then formulas reading only such names are computed once)."""
    rows = [gpu_values(gpu, count, precision, accumulate) for gpu, count in candidates]
    out: Scope = {}
    for name in rows[0]:
        col = Col.of(r[name] for r in rows)
        first = col[0]
        same = all(v == first and v.__class__ is first.__class__ for v in col)
        out[name] = first if same else col
    return out


def _catalogue_columns(kn: Knowledge, precision: dict[str, Any], runtime: dict[str, Any]) -> Scope:
    """gpu_columns of the catalogue GPUs the runtime runs on, once per compute precision and
    platform list (derived from rules)."""
    acc = runtime.get("gemm_accumulate", "fp32")
    key = "gpu_columns:" + ",".join([precision["compute"], *precision["fallback"], *runtime["platforms"], acc])
    cols = kn.cache.get(key)
    if cols is None:
        cols = kn.cache[key] = gpu_columns([(g, 1) for g in kn.gpus.values() if runs_on(runtime, g)],
                                           precision, acc)
    return cols


ROW_FIELDS = ("usable_vram_gb", "per_gpu_gb", "fits", "headroom_gb", "gpus_needed",
              "gpu.compute_tflops", "_compute_precision", "decode_tokens_per_s",
              "decode_tokens_per_s_aggregate", "prefill_tokens_per_s", "ttft_s",
              "train_tokens_per_s", "train_time_s")


def _rows(ev: Evaluated, candidates: list[tuple[dict[str, Any], int, bool]], order: list[int]) -> list[GpuRow]:
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


def _ranking(ranking: list[tuple[str, str]], ev: Evaluated, n: int) -> list[int]:
    """Candidate indices, best first; a figure without a value ranks last."""
    cols = [(ev.scope.get(name), order == "desc") for name, order in ranking]

    def key(i: int) -> tuple[Any, ...]:
        out: list[Any] = []
        for col, desc in cols:
            v = col[i] if col.__class__ is Col else col
            if v is None:
                out.append((1, 0))
            else:
                v = int(v) if isinstance(v, bool) else v
                out.append((0, -v if desc else v))
        return tuple(out)
    return sorted(range(n), key=key)


# ---------------------------------------------------------------- the walk

class Tracer:
    def __init__(self, kn: Knowledge, ev: Evaluated) -> None:
        self.kn = kn
        self.ev = ev
        self.steps: list[Step] = []
        self.done: set[str] = set()

    def formula(self, node: str, name: str) -> None:
        done = self.done
        for dep in _order(self.kn)[name]:
            if dep not in done:
                done.add(dep)
                self.steps.append(self._step(node, self.kn.formulas[dep]))

    def _step(self, node: str, f: Formula) -> Step:
        s = self.ev.scope
        idx = self.ev.cases.get(f.name)
        names, text, note, rule, source = _case_text(self.kn, f, idx if idx is not None else len(f.cases) - 1)
        if f.name in self.ev.errors:
            note = f"not computed: {self.ev.errors[f.name]}"
        elif s.get(f.name) is None:
            missing = [n for n in names if s.get(n) is None]
            note = "not computed: no value for " + ", ".join(missing) if missing else note
        return Step(node, rule, text, {n: s.get(n) for n in names}, s.get(f.name), f.unit, source,
                    note, f.name, f.where, list(f.sources))

    def edge(self, node: str, flow: Flow, when: Any, to: str, label: str | None) -> None:
        if when is None:
            return
        s = self.ev.scope
        where = flow.nodes[node.split("/")[-1]].where
        self.steps.append(Step(node=node, rule=f"edge {node} → {flow.id}/{to} ({where})",
                               formula=when.text, values={n: s.get(n) for n in when.names},
                               result=True, unit="bool", source=flow.source, note=label,
                               rule_id=f"edge {node} → {flow.id}/{to}", location=where,
                               sources=[flow.source]))


def _case_text(kn: Knowledge, f: Formula, idx: int) -> tuple[tuple[str, ...], str, str | None, str, str]:
    """What a trace step shows of a formula's case that does not depend on the workload: the
    names it reads, its text, its note, the rule and its sources (derived once per knowledge)."""
    table = kn.cache.get("case_text")
    if table is None:
        table = kn.cache["case_text"] = {}
    found = table.get((f.name, idx))
    if found is None:
        case = f.cases[idx]
        names = tuple(dict.fromkeys(case.expr.names + (case.when.names if case.when else ())))
        text = case.expr.text + (f"   [when {case.when.text}]" if case.when else "")
        found = table[f.name, idx] = (names, text, case.note or f.note, f"{f.name} ({f.where})",
                                      ", ".join(f.sources))
    return found  # type: ignore[no-any-return]


def walk(flow: Flow, kn: Knowledge, ev: Evaluated, tracer: Tracer) -> tuple[list[str], str]:
    node = flow.nodes[flow.entry]
    path: list[str] = []
    for _ in range(len(flow.nodes) + 1):
        nid = f"{flow.id}/{node.id}"
        path.append(nid)
        if node.compute:
            evaluate(kn, ev, node.compute)
            for name in node.compute:
                tracer.formula(nid, name)
        if node.kind == "verdict":
            return path, render_template(node.text, ev.scope)
        for edge in node.edges:
            if condition(edge.when, ev.scope):
                tracer.edge(nid, flow, edge.when, edge.to, edge.label)
                node = flow.nodes[edge.to]
                break
    raise EvalError(f"flow {flow.id} did not reach a verdict")


def render_template(text: str, scope: Scope) -> str:
    def fill(m: Any) -> str:
        value = scope.get(m.group(1))
        if value is None:
            return "n/a"
        if isinstance(value, bool) or isinstance(value, str):
            return str(value)
        spec = m.group(2) or ".3g"
        if not TEMPLATE_SPEC.match(spec):
            spec = ".3g"
        try:
            return format(value, spec)
        except (ValueError, TypeError):
            return str(value)
    return TEMPLATE_FIELD.sub(fill, text)


# ---------------------------------------------------------------- answer

def answer(w: Workload, kn: Knowledge, query: str = "") -> Answer:
    """The answer to a workload; a capacity question is solved first, then answered at its value."""
    from kb.focus import lead_with_focus

    if w.question in kn.query["solve"]:
        return lead_with_focus(_answer_question(w, kn, query), kn.query.get("focus_lead", {}))
    result = _answer(w, kn, query)
    if w.question == "which_gpu":
        result.question = {"kind": "which_gpu", "vary": None, "unit": None,
                           "value": result.gpus[0].name if result.gpus else None,
                           "gpu": result.gpus[0].name if result.gpus else None,
                           "ranking": [g.id for g in result.gpus if g.fits]}
    return lead_with_focus(result, kn.query.get("focus_lead", {}))


def _answer_question(w: Workload, kn: Knowledge, query: str) -> Answer:
    from kb import solve

    question = w.question or ""
    if w.gpus:
        targets = [(_capacity_gpu(g, kn) if g.gpu_id is None else kn.gpus[g.gpu_id], g.count) for g in w.gpus]
    elif question == "how_many_gpus":
        rt = resolve(copy.deepcopy(w), kn).runtime
        targets = [(g, 1) for g in kn.gpus.values() if runs_on(rt, g)]
    else:
        targets = [(kn.gpus[_first_ranked(w, kn)], 1)]
    rows = [solve.solve_row(kn, w, question, gpu, count) for gpu, count in targets]
    found = [r for r in rows if r["found"]]
    if w.gpus or not found:
        primary = rows[0]
    elif question == "how_many_gpus":
        primary = min(found, key=lambda r: (r["value"], -kn.gpus[r["gpu_id"]]["bandwidth_gb_s"]))
    else:
        primary = max(found, key=lambda r: r["value"])
    spec = kn.query["solve"][question]
    w2 = solve._with(w, spec["vary"], primary["value"], kn) if primary["found"] else solve._with(w, "users", w.users or 1)
    w2.gpus = [g for g in w2.gpus] or []
    if not w.gpus:
        from kb.workload import GpuRequest

        w2.gpus = [GpuRequest(primary["gpu_id"], int(primary.get("count") or 1))]
        if primary["found"] and spec["vary"] == "gpu_count":
            w2.gpus[0].count = int(primary["value"])
    elif primary["found"] and spec["vary"] == "gpu_count":
        for g in w2.gpus:
            g.count = int(primary["value"])
    result = _answer(w2, kn, query)
    if primary["found"] or not unknown.is_unknown(result.verdict):    # else: why it is unknown
        result.verdict = solve.verdict(kn, question, primary)
    if question == "how_many_gpus" and not primary["found"]:
        result.verdict += tr.no_count_note(kn, result.memory)
    if spec.get("holds") == "serves_at_floor":
        floor = w.speed_floor_tok_s or kn.constants["decode_speed_floor_tok_s"]["value"]
        result.assumptions.append(f"speed floor: every user decodes at {floor:g} tokens/s or more"
                                  + ("" if w.speed_floor_tok_s else " (formulas.yaml decode_speed_floor_tok_s)"))
    result.question = {"kind": question, "vary": spec["vary"], "unit": spec["unit"],
                       "value": primary["value"], "gpu": primary["gpu"], "answer": primary,
                       "per_gpu": [{"gpu": r["gpu"], "gpu_id": r["gpu_id"], "value": r["value"]} for r in rows]}
    if question == "max_context" and primary["found"]:
        mm = (kn.models.get(result.workload["model"]) or {}).get("max_context")
        if mm and primary["value"] > mm:
            result.warnings.append(f"memory allows {primary['value']:.0f} tokens, but the model's "
                                   f"maximum context is {mm}")
    result.path.insert(0, f"question/{question}")
    return result


def _exact_gpus_needed(kn: Knowledge, w: Workload, rows: list[GpuRow],
                       candidates: list[tuple[dict[str, Any], int, bool]], order: list[int],
                       primary: Evaluated) -> None:
    """Rows that do not fit get the fewest GPUs that hold the job by the forward model (the
    even-split formula can be too few when the KV cache is replicated over tensor-parallel ranks)."""
    from kb import solve

    steps = int(kn.constants["gpus_per_node"]["value"]) ** 2
    for rank, i in enumerate(order):
        row = rows[rank]
        if row.fits or not row.gpus_needed:
            continue
        found = solve.fewest_gpus(kn, w, candidates[i][0], row.gpus_needed, steps)
        if found is not None:
            row.gpus_needed = found
            if rank == 0:
                primary.scope["gpus_needed"] = found


def _first_ranked(w: Workload, kn: Knowledge) -> str:
    """The first card of the sizing flow's ranking for the workload as asked (a capacity
    question with no GPU is answered on it)."""
    plain = copy.deepcopy(w)
    plain.question = None
    return _answer(plain, kn).gpus[0].id


def _answer(w: Workload, kn: Knowledge, query: str = "") -> Answer:
    r = resolve(w, kn)
    sizing = next(f for f in kn.flows if f.role == "sizing")

    # every candidate GPU at once: per-GPU names hold one value per candidate (kb.expr.Col)
    if w.gpus:
        candidates = [(_capacity_gpu(req, kn) if req.gpu_id is None else kn.gpus[req.gpu_id], req.count, True)
                      for req in w.gpus]
        gpus = gpu_columns([(g, c) for g, c, _ in candidates], r.precision, r.runtime.get("gemm_accumulate", "fp32"))
    else:
        candidates = [(g, 1, False) for g in kn.gpus.values() if runs_on(r.runtime, g)]
        gpus = _catalogue_columns(kn, r.precision, r.runtime)
    # a formula is computed when the rows, a flow or a claim first needs it
    layouts = [layout_of(r, kn, c) for _, c, _ in candidates]
    gpus = {**gpus, **layout_columns(layouts)}
    base = base_scope(r, kn)
    every = Evaluated({**base, **gpus}, columns=[k for k, v in gpus.items() if v.__class__ is Col])
    evaluate(kn, every, ROW_FORMULAS[r.is_training])
    if not w.gpus and kn.advice:    # judge each GPU at the fewest cards that hold the job
        candidates = rightsize.configurations(kn, every.scope.get("gpus_needed"), [g for g, _, _ in candidates])
        layouts = [layout_of(r, kn, c) for _, c, _ in candidates]
        gpus = {**gpu_columns([(g, c) for g, c, _ in candidates], r.precision, r.runtime.get("gemm_accumulate", "fp32")), **layout_columns(layouts)}
        every = Evaluated({**base, **gpus}, columns=[k for k, v in gpus.items() if v.__class__ is Col])
        evaluate(kn, every, ROW_FORMULAS[r.is_training])
    evaluate(kn, every, rightsize.cost_formulas(r.is_training))
    n = len(candidates)
    order = list(range(n)) if w.gpus else _ranking(rightsize.sort_keys(kn, w, sizing.ranking), every, n)
    rows = _rows(every, candidates, order)
    rightsize.fill_rows(every.scope, rows, order, r.is_training)
    fits = every.scope.get("fits")
    primary = every.view(order[0])
    if layouts[order[0]].note:
        r.assumptions.append(f"layout: {layouts[order[0]].note}")
    r.workload_parallel = layouts[order[0]].as_dict() if not r.is_training else None
    if w.gpus and not r.is_training and r.runtime.get("multi_gpu") == "tensor_parallel":
        _exact_gpus_needed(kn, w, rows, candidates, order, primary)
    primary.scope["gpu_candidates"] = n
    primary.scope["fitting_gpus"] = sum(map(bool, fits)) if fits.__class__ is Col else n * bool(fits)
    primary.scope["fewest_gpus_needed"] = rightsize.fewest_needed(rows)
    primary.scope["sort_order"] = rightsize.sort_text(kn, w) or "fit, speed and power"

    tracer = Tracer(kn, primary)
    path: list[str] = []
    verdict = ""
    advice: list[dict[str, Any]] = []
    for flow in kn.flows:
        flow_path, text = walk(flow, kn, primary, tracer)
        path.extend(flow_path)
        if flow.role == "sizing":
            verdict = unknown.sizing_verdict(kn, flow, flow_path, primary.scope, primary.errors) or text
        else:
            advice.append({"flow": flow.id, "title": flow.title, "source": flow.source,
                           "conclusion": text, "node": flow_path[-1]})
    speed = TRAINING_SPEED if r.is_training else INFERENCE_SPEED
    shown = tr.shown(r.is_training, BREAKDOWN, TRAINING_BREAKDOWN)
    evaluate(kn, primary, shown)
    for name in shown + ("total_gb",) + speed:
        tracer.formula("answer", name)
    warnings = list(r.warnings) + _gpu_warnings(every, candidates, r) + [
        f"{name} could not be computed: {msg}" for name, msg in primary.errors.items()]
    disagreements, agreements = check_claims(kn, every, primary, order)
    s = primary.scope
    bands = error_bands(kn, r)
    throughput = {k: (s.get(k) if k in speed else None) for k in INFERENCE_SPEED + TRAINING_SPEED}
    warnings += margins.withhold_speeds(rows, throughput, bool(s.get("fits")))
    tight = margins.borderline(s.get("per_gpu_gb"), s.get("headroom_gb"), bool(s.get("fits")),
                               bands.get("total_gb")) if w.gpus else None
    if tight:
        verdict = f"{verdict} {tight}"
    rec = rightsize.recommendation(kn, w, rows, r.is_training) if not w.gpus else None
    r.assumptions.extend(rightsize.price_assumptions(kn, w, rows[0]))
    if rec is not None:
        verdict = f"{verdict} {rightsize.verdict_text(rec)}"
    return Answer(
        query=query, workload=_workload_dict(r), assumptions=r.assumptions,
        memory=_memory(s, r),
        throughput=throughput,
        bottleneck=_bottleneck(s, r),
        gpus=rows, verdict=verdict, path=path, trace=tracer.steps,
        disagreements=disagreements, warnings=warnings, advice=advice,
        claims_checked=agreements, error_bands=bands, recommendation=rec,
        prices=rightsize.prices_used(kn, w, [row.id for row in rows]))


# figure of the answer → kind of measurement in rules/error_bands.yaml
BAND_KINDS = {
    "inference": {"decode_tokens_per_s": "decode_tokens_per_s",
                  "decode_tokens_per_s_aggregate": "aggregate_tokens_per_s",
                  "prefill_tokens_per_s": "prefill_tokens_per_s", "total_gb": "inference_memory"},
    "training": {"train_tokens_per_s": "train_tokens_per_s", "total_gb": "training_memory"},
}


def error_bands(kn: Knowledge, r: Resolved) -> dict[str, Any]:
    """How far this kind of figure has been from published measurements (per runtime when the
    runtime has 3+ points, else over all runtimes), and which measurements say so."""
    key = f"error_bands:{r.runtime['id']}:{r.is_training}"
    if key not in kn.cache:
        kn.cache[key] = _error_bands(kn, r.runtime["id"], r.is_training)
    return {figure: {**band, "measurements": list(band["measurements"])}
            for figure, band in kn.cache[key].items()}


def _error_bands(kn: Knowledge, runtime: str, is_training: bool) -> dict[str, Any]:
    kinds = kn.error_bands.get("kinds", {})
    out: dict[str, Any] = {}
    for figure, kind in BAND_KINDS["training" if is_training else "inference"].items():
        band = kinds.get(kind)
        if not band:
            continue
        rt = band.get("by_runtime", {}).get(runtime)
        basis = rt or band
        out[figure] = {"median_pct": basis["median_pct"], "p90_pct": basis["p90_pct"],
                       "n": basis["n"], "basis": f"{runtime} measurements" if rt else "all runtimes",
                       "measurements": [p["id"] for p in band.get("measurements", [])
                                        if not rt or p["runtime"] == runtime][:8],
                       "source": kn.error_bands.get("source")}
    return out


def _workload_dict(r: Resolved) -> dict[str, Any]:
    d = r.workload.to_dict()
    d.pop("task_explicit", None)
    d.pop("notes", None)
    d["model"] = r.model["id"]
    d["model_name"] = r.model["name"]
    d["params"] = r.model["params_total"]
    d["active_params"] = r.model["params_active"]
    d["parallel"] = r.workload_parallel
    return d


def _memory(s: Scope, r: Resolved) -> dict[str, Any]:
    keys = {k: TRAINING_BREAKDOWN.get(k, k) if r.is_training else k for k in BREAKDOWN}
    return {"total_gb": s.get("total_gb"),
            "breakdown": {k: s.get(name) for k, name in keys.items()},
            "per_gpu_gb": s.get("per_gpu_gb"),
            "kv_cache_gb_per_user": s.get("kv_cache_gb_per_user") if not r.is_training else None,
            "gpu": s.get("gpu.name"), "gpu_count": s.get("gpu_count"),
            **tr.memory_extras(s, r.workload, r.is_training)}


def _bottleneck(s: Scope, r: Resolved) -> dict[str, Any]:
    if r.is_training:
        phases = {"training": s.get("train_bound")}
        intensity = {"training": s.get("train_intensity")}
    else:
        phases = {"decode": s.get("decode_bound"), "prefill": s.get("prefill_bound")}
        intensity = {"decode": s.get("decode_intensity"), "prefill": s.get("prefill_intensity")}
    return {**phases, "arithmetic_intensity": intensity, "ridge_point": s.get("ridge_point"),
            "gpu": s.get("gpu.name"), "gpu_id": s.get("gpu.id")}


def _gpu_warnings(every: Evaluated, candidates: list[tuple[dict[str, Any], int, bool]],
                  r: Resolved) -> list[str]:
    out: list[str] = []
    compute = r.precision["compute"]
    s = every.scope
    for i, (gpu, _count, requested) in enumerate(candidates):
        if not requested and len(candidates) > 1:
            continue
        used = at(s.get("_compute_precision"), i)
        if used and used != compute:
            out.append(f"{gpu['name']} has no native {compute.upper()} tensor math; "
                       f"computed at its {used.upper()} rate")
        per_gpu = at(s.get("per_gpu_gb"), i)
        if requested and not at(s.get("fits"), i) and per_gpu is not None:
            out.append(f"does not fit on {at(s['gpu_count'], i)}× {gpu['name']}: needs "
                       f"{per_gpu:.1f} GB per GPU")
    return out


def check_claims(kn: Knowledge, every: Evaluated, primary: Evaluated,
                 order: list[int]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Each source's claim against the engine: a per-GPU claim for every candidate (in rank
    order), any other for the answer's GPU."""
    differ: list[dict[str, Any]] = []
    agree: list[dict[str, Any]] = []
    for claim in kn.claims:
        ev = every if claim.per_gpu else primary
        s = ev.scope
        needs_when, needs_value = _claim_formulas(kn, claim)
        if claim.applies_when is None:
            applies: Any = True
        else:
            if needs_when:
                evaluate(kn, ev, needs_when)
            applies = guarded(claim.applies_when.fn, s)
        if applies.__class__ is Col:
            where = [i for i in order if (ok := applies[i]).__class__ is not Failed and ok]
        elif applies.__class__ is Failed or not applies:
            continue
        else:
            where = order if claim.per_gpu else [0]
        if needs_value:
            evaluate(kn, ev, needs_value)
        computed = guarded(claim.computed.fn, s)
        gpu = s.get("gpu.name")
        for i in where:
            value = at(computed, i)
            if value is None or value.__class__ is Failed or (
                    value.__class__ is float and not math.isfinite(value)):
                continue
            if any(at(s.get(n), i) is None for n in claim.computed.names):
                continue
            entry = _claim_entry(kn, claim, value, at(gpu, i) if claim.per_gpu else None)
            (agree if entry["agrees"] else differ).append(entry)
    return differ, agree


def _claim_formulas(kn: Knowledge, claim: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The formulas a claim's condition and its figure read (derived once per knowledge)."""
    table = kn.cache.get("claim_formulas")
    if table is None:
        table = kn.cache["claim_formulas"] = {}
    found = table.get(claim.id)
    if found is None:
        when = claim.applies_when.names if claim.applies_when is not None else ()
        found = table[claim.id] = (tuple(n for n in when if n in kn.formulas),
                                   tuple(n for n in claim.computed.names if n in kn.formulas))
    return found  # type: ignore[no-any-return]


def _claim_entry(kn: Knowledge, claim: Any, computed: float, gpu: str | None) -> dict[str, Any]:
    value = claim.value
    if isinstance(value, (tuple, list)):
        lo, hi = value
        agrees = lo <= computed <= hi
        mid = (lo + hi) / 2
        claimed: Any = [lo, hi]
    else:
        agrees = abs(computed - value) <= claim.tolerance * abs(value)
        mid = value
        claimed = value
    src = kn.sources.get(claim.source, {})
    return {"id": claim.id, "source": claim.source, "source_title": src.get("title"),
            "claim": claim.text, "claimed": claimed, "computed": computed, "unit": claim.unit,
            "difference_pct": (computed - mid) / mid * 100 if mid else None,
            "agrees": agrees, "gpu": gpu, "formula": claim.computed.text,
            "note": claim.note, "rule": claim.where}
