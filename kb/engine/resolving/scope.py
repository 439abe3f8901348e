"""Workload → scope: every field the query left out filled in, and the names formulas read.

In: a Workload (kb.query.parse) and the Knowledge. Out: Resolved (the workload with its defaults, the
model, precision, KV precision and runtime, and the assumptions and warnings that say what was
assumed). Its inputs, the names formulas read, are kb.engine.resolving.inputs.base_scope.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from kb.engine.resolving import training as tr
from kb.engine.resolving.bare_size import bare_model
from kb.knowledge.gpu_names import runs_on
from kb.knowledge.data import Knowledge, capacity_fields
from kb.query.workload import GpuRequest, Workload, is_gguf
from kb.knowledge import names as N

if TYPE_CHECKING:
    from kb.knowledge.records import GPU, Model, Precision, Runtime, Value
    from kb.engine.assembly.answer_records import Parallel


@dataclass(slots=True)
class Resolved:
    workload: Workload
    runtime: Runtime
    model: Model
    precision: Precision
    kv_precision: Precision
    assumptions: list[str]
    warnings: list[str]
    is_training: bool
    workload_parallel: Parallel | None = None


def resolve_workload(w: Workload, kn: Knowledge) -> Resolved:
    """Fill every field the query left out; say what was assumed."""
    d = kn.defaults
    q = kn.query
    assumptions: list[str] = list(w.notes) + _capacity_assumptions(w, kn)
    warnings: list[str] = []
    is_training = w.task in q["training_tasks"]
    model = _resolve_model(w, kn, assumptions)

    def default(attr: str, value: Value, text: str) -> None:
        if getattr(w, attr) is None:
            setattr(w, attr, value)
            assumptions.append(text)

    if not w.task_explicit:
        assumptions.append(f"task: {w.task} (no task word in the query)")
    if is_training:
        tr.resolve_objective(w, kn, assumptions)
    runtime = _resolve_runtime(w, kn, is_training, assumptions)
    runtime = _runtime_for_devices(w, kn, runtime, is_training, assumptions)
    runtime = _runtime_for_model(w, kn, runtime, model, assumptions)
    native = model.get("native_precision")
    if w.precision is None and native and not is_training:
        default(N.PRECISION, native, f"precision: {native}, {model['name']}'s published checkpoint format "
                f"({kn.precisions[native]['name']}; name another, e.g. 'fp16' or 'int4', to change it)")
    scaled = None
    if is_training:
        tr.apply_recipes(w, kn, runtime, model, assumptions)
        scaled = tr.resolve_at_scale(w, kn, runtime, float(model["params_total"]), assumptions)
    if w.precision is None:
        key: Literal["qlora_precision", "training_precision", "inference_precision"] = (
            "qlora_precision") if w.task == "qlora" else (
            "training_precision" if is_training else "inference_precision")
        default(N.PRECISION, d[key], f"precision: {d[key]} ({'QLoRA base' if w.task == 'qlora' else 'training' if is_training else 'inference'} default)")
    default("kv_precision", d["kv_precision"], f"KV cache precision: {d['kv_precision']}")
    if is_training:
        default(N.BATCH, d[N.BATCH], f"micro-batch: {d['batch']}")
        default(N.SEQ_LEN, min(d[N.SEQ_LEN], model["max_context"]),
                f"sequence length: {min(d['seq_len'], model['max_context'])} tokens")
        opt = runtime.get(N.OPTIMIZER) or d[N.OPTIMIZER]
        ckpt = runtime.get(N.CHECKPOINTING)
        ckpt = d[N.CHECKPOINTING] if ckpt is None else ckpt
        default(N.OPTIMIZER, opt, f"optimizer: {opt} ({runtime['name']} default)")
        default(N.CHECKPOINTING, ckpt,
                f"activation checkpointing: {'on' if ckpt else 'off'} ({runtime['name']} default)")
        if w.task in ("lora", "qlora"):
            default(N.LORA_RANK, d[N.LORA_RANK], f"LoRA rank: {d['lora_rank']}, on "
                    + ("the attention projections" if w.lora_attention_only else "every linear layer"))
        if w.quantized_inputs_kept and w.task == "qlora":
            assumptions.append("bitsandbytes before 0.43.2: its 4-bit layers keep their inputs for the "
                               "backward pass, although their weights are frozen [bitsandbytes-4bit-saved-input]")
        default(N.TRAIN_TOKENS, d[N.TRAIN_TOKENS], f"{TOKENS_DEFAULT}{d['train_tokens']:.3g}")
        w.users = w.users or 1
    else:
        default(N.USERS, d[N.USERS], f"concurrent users: {d['users']}")
        default(N.BATCH, 1, "")
        ctx = min(runtime.get("default_context_tokens") or d[N.CONTEXT_TOKENS], model["max_context"])
        if w.context_tokens is None and w.prompt_tokens and w.output_tokens and w.prompt_tokens + w.output_tokens <= ctx:
            w.context_tokens = w.prompt_tokens + w.output_tokens      # the traffic's own lengths
            assumptions.append(f"context per user: {w.context_tokens} tokens, the request's prompt "
                               f"({w.prompt_tokens}) + output ({w.output_tokens}); a paged KV cache holds the "
                               "prompt and half the output on average over a request's life")
        default(N.CONTEXT_TOKENS, ctx, f"context per user: {ctx} tokens (prompt + output)"
                + (f" ({runtime['name']} default)" if runtime.get("default_context_tokens") else ""))
        prompt = min(d[N.PROMPT_TOKENS], w.context_tokens or ctx)
        default(N.PROMPT_TOKENS, prompt, f"prompt: {prompt} tokens")
        default(N.OUTPUT_TOKENS, d[N.OUTPUT_TOKENS], f"output: {d['output_tokens']} tokens")
        _context_holds_the_work(w, assumptions)
    default(N.FLASH_ATTENTION, d[N.FLASH_ATTENTION],
            f"fused (flash) attention: {'on' if d['flash_attention'] else 'off'}")
    w.seq_len = w.seq_len or min(d[N.SEQ_LEN], model["max_context"])
    w.lora_rank = w.lora_rank or d[N.LORA_RANK]
    w.optimizer = w.optimizer or d[N.OPTIMIZER]
    w.checkpointing = bool(w.checkpointing)
    w.train_tokens = w.train_tokens or d[N.TRAIN_TOKENS]
    for attr in (N.USERS, N.BATCH, N.CONTEXT_TOKENS, N.PROMPT_TOKENS, N.OUTPUT_TOKENS):
        if getattr(w, attr) is None:
            setattr(w, attr, d.get(attr, 1))
    if is_training:
        tr.resolve_sharding(w, kn, runtime, assumptions, scaled)
    _fp8_scales(w, model, kn, is_training, assumptions)
    assumptions[:] = [a for a in assumptions if a]
    warnings += _too_long(w, model, is_training)
    precision = kn.precisions[w.precision or d["inference_precision"]]
    kv = kn.precisions.get(w.kv_precision or d["kv_precision"], kn.precisions[d["kv_precision"]])
    return Resolved(w, runtime, model, precision, kv, assumptions, warnings, is_training)


def fp8_block_scaled(w: Workload, model: Model) -> bool:
    """FP8 weights scaled per 128x128 block: as the query says, else as the model's publisher
    released its FP8 checkpoint (models.yaml fp8_scales)."""
    return (w.fp8_scales or model.get("fp8_scales")) == "block"


def _fp8_scales(w: Workload, model: Model, kn: Knowledge, is_training: bool, assumptions: list[str]) -> None:
    """Says FP8 weights served are taken as block-scaled (formulas.yaml gemm_rate_share), and why."""
    if is_training or w.precision != "fp8" or not fp8_block_scaled(w, model):
        return
    const = kn.constants[N.FP8_BLOCK_RATE_SHARE]
    why = "as asked" if w.fp8_scales else f"as {model['name']}'s FP8 checkpoint is published"
    assumptions.append(f"FP8 weights with a scale per 128x128 block, {why}: their GEMMs, where the card multiplies in FP8, at {const['value']:g} "
                       f"of per-tensor FP8's rate [{const['source']}] ('per-tensor' to change it)")


TOKENS_DEFAULT = "training tokens: "     # how the assumptions say the token count is a default
FORMAT_DEFAULT = "a default: no format was named"     # how the assumptions mark question_format's choice


def question_format(w: Workload, kn: Knowledge) -> None:
    """An inference question asking which GPU, the cheapest way or the largest model, that names no
    format: sized at the format the people who ask it run (query.yaml question_formats), unless the
    model's own checkpoint format is as narrow; said in the notes (the answer's assumptions) with
    the reason. Called on the question as asked, before a capacity search drops its kind."""
    if (w.precision is not None or w.compare is not None or w.question is None
            or w.task in kn.query["training_tasks"]):
        return
    model: dict[str, object] = dict(kn.models.get(w.model_id or "") or {})
    segments = ({str(kn.gpus[g.gpu_id].get("segment")) if g.gpu_id else "any" for g in w.gpus}
                or set(w.segments) or {"any"})
    users = w.users or 1
    native = kn.precisions.get(str(model.get("native_precision")))
    for rule in kn.query.get("question_formats") or []:
        if (w.question not in rule["questions"] or (rule["sorts"] is not None and w.sort not in rule["sorts"])
                or users < rule["min_users"] or (rule["max_users"] is not None and users > rule["max_users"])
                or (rule["segments"] is not None and not segments <= set(rule["segments"]))
                or (w.runtime is not None and w.runtime not in rule["named_runtimes"])):
            continue
        fmt = kn.precisions[rule[N.PRECISION]]
        if native is not None and native["bits_per_weight"] <= fmt["bits_per_weight"]:
            return          # the published checkpoint is already as narrow: it is what people run
        w.precision = rule[N.PRECISION]
        if rule["runtime"] is not None and w.runtime is None:
            w.runtime = rule["runtime"]
            w.notes.append(f"runtime: {kn.runtimes[rule['runtime']]['name']}, with the format below")
        w.notes.append(f"precision: {rule['precision']}, {FORMAT_DEFAULT}, so the question is "
                     f"sized at {rule['text']} [{rule['source']}]")
        return


def fleet_kv(w: Workload, kn: Knowledge) -> None:
    """A how-many question serving several users (or a volume) at FP8 or FP4 weights that names no
    KV format: sized with the KV cache the checkpoints served at scale carry (query.yaml fleet_kv),
    under a runtime that follows it and on cards with a tensor rate in it; said in the notes."""
    rule = kn.query.get("fleet_kv")
    if (rule is None or w.kv_precision is not None or w.question != "how_many_gpus"
            or w.task in kn.query["training_tasks"] or w.precision not in rule["weights"]
            or ((w.users or 1) <= 1 and w.tokens_per_day is None)
            or (w.runtime is not None and w.runtime not in rule["runtimes"])
            or any(g.gpu_id is not None and kn.gpus[g.gpu_id]["tensor_tflops"].get(rule["kv"]) is None
                   for g in w.gpus)):
        return
    w.kv_precision = rule["kv"]
    w.notes.append(f"KV cache precision: {rule['kv']}, {rule['text']} [{rule['source']}]")


def _too_long(w: Workload, model: Model, is_training: bool) -> list[str]:
    """A context (a training sequence) longer than the model's."""
    held = w.context_tokens if not is_training else w.seq_len
    if held and held > model["max_context"]:
        return [f"{held} tokens is longer than {model['name']}'s maximum context ({model['max_context']})"]
    return []


def _context_holds_the_work(w: Workload, assumptions: list[str]) -> None:
    """A user's context holds at least the prompt and the output: a longer prompt + output grows it."""
    need = (w.prompt_tokens or 0) + (w.output_tokens or 0)
    if w.context_tokens is not None and need > w.context_tokens:
        assumptions[:] = [a for a in assumptions if not a.startswith(f"context per user: {w.context_tokens} tokens")]
        assumptions.append(f"context per user: {need} tokens, grown from {w.context_tokens} to hold "
                           f"the prompt ({w.prompt_tokens}) + output ({w.output_tokens})")
        w.context_tokens = need


def _resolve_runtime(w: Workload, kn: Knowledge, is_training: bool, assumptions: list[str]) -> Runtime:
    rd = kn.runtime_defaults
    if w.runtime is not None:     # kb.query.parse has checked that its kind suits the task
        return kn.runtimes[w.runtime]
    key: Literal["training", "gguf", "inference"]
    if is_training:
        key = "training"
    elif is_gguf(w.precision):
        key = "gguf"
    else:
        key = "inference"
    emb = rd.get("embedded")
    named = [kn.gpus[g.gpu_id] for g in w.gpus if g.gpu_id is not None]
    if key == "inference" and emb and named and all(g.get("form_factor") in emb["form_factors"] for g in named):
        rt = kn.runtimes[emb["runtime"]]
        w.runtime = rt["id"]
        assumptions.append(f"runtime: {rt['name']} ({emb['text']}) [{emb['source']}]")
        return rt
    rt = kn.runtimes[rd[key]]
    w.runtime = rt["id"]
    assumptions.append(f"runtime: {rt['name']} (the {'GGUF' if key == 'gguf' else key} default; "
                       "name one with 'with vllm', 'using llama.cpp', 'with torchtune'…)")
    return rt


VENDORS = {"nvidia": "NVIDIA", "amd": "AMD", "intel": "Intel", "apple": "Apple", "google": "Google",
           "aws": "AWS"}


def _runtime_for_model(w: Workload, kn: Knowledge, rt: Runtime, model: Model, assumptions: list[str]) -> Runtime:
    """A runtime that cannot load the model's architecture (runtimes.yaml unsupported_models:
    llama.cpp and Llama 3.2 Vision) hands it to the runtime its users run it under instead
    (unsupported_models_runtime), said as an assumption."""
    other = kn.runtimes.get(rt.get("unsupported_models_runtime") or "")
    if other is None or model.get("id") not in (rt.get("unsupported_models") or []):
        return rt
    if not all(runs_on(other, kn.gpus[g.gpu_id]) for g in w.gpus if g.gpu_id is not None):
        return rt
    assumptions.append(f"runtime: {other['name']} instead of {rt['name']}, which cannot load {model['name']}'s "
                       f"architecture [{rt.get('unsupported_models_source')}]")
    w.runtime = other["id"]
    return other


def _runtime_for_devices(w: Workload, kn: Knowledge, rt: Runtime, is_training: bool,
                         assumptions: list[str]) -> Runtime:
    """A runtime that runs on every GPU the query named: the one chosen if it does, else the
    defaults, then the catalogue in order (runtimes.yaml `platforms`), said as an assumption."""
    named = [kn.gpus[g.gpu_id] for g in w.gpus if g.gpu_id is not None]
    if all(runs_on(rt, g) for g in named):
        return rt
    kinds = ("training", "both") if is_training else ("inference", "both")
    rd = kn.runtime_defaults
    preferred = ([kn.runtimes[rd["training"]]] if is_training
                 else [kn.runtimes[rd["inference"]], kn.runtimes[rd["gguf"]]])
    for other in preferred + list(kn.runtimes.values()):
        if other["kind"] in kinds and all(runs_on(other, g) for g in named):
            bad = next(g for g in named if not runs_on(rt, g))
            assumptions[:] = [a for a in assumptions if not a.startswith(f"runtime: {rt['name']} (the ")]
            kind = (f"{bad['architecture']} GPUs" if bad["vendor"] in rt["platforms"]
                    else f"{VENDORS.get(bad['vendor'], bad['vendor'])} GPUs")
            assumptions.append(f"runtime: {other['name']} instead of {rt['name']}, which does not run on "
                               f"{kind} such as the {bad['name']} (runtimes.yaml platforms, "
                               "unsupported_architectures)")
            w.runtime = other["id"]
            return other
    return rt


def _resolve_model(w: Workload, kn: Knowledge, assumptions: list[str]) -> Model:
    if w.model_id is not None:
        model = kn.models[w.model_id].copy()
        ref_id = model.get("architecture_from")
        if ref_id:
            moe = model.get("moe")
            experts = f", {moe['experts']} experts" if moe else ""
            assumptions.append(
                f"model: {model['name']} takes {kn.models[ref_id]['name']}'s architecture, as published "
                f"readings of its config describe it, not figures from its own config ({model['layers']} layers"
                f"{experts}); weights use its card's {model['params_total'] / kn.billion:g}B parameters "
                "(models.yaml architecture_from)")
        return model
    model, said = bare_model(kn, w.params if w.params is not None else kn.defaults[N.PARAMS],
                             unnamed=w.size_unnamed)
    assumptions.append(said)
    return model


def capacity_gpu(req: GpuRequest, kn: Knowledge) -> GPU:
    """A card of a bare capacity ("on 20GB"): memory is sold in GiB, so 20 means 20 GiB."""
    cap = req.capacity_gb or 0.0
    memory_bytes = cap * kn.constants[N.BYTES_PER_GIB]["value"]
    gb, gib = capacity_fields(memory_bytes, kn.constants[N.BYTES_PER_GB]["value"],
                              kn.constants[N.BYTES_PER_GIB]["value"])
    return {"id": f"{cap:g}gb", "name": f"{cap:g} GB GPU", "vendor": "any", "vram_gb": cap,
            "memory_bytes": memory_bytes, "memory_gb": gb, "memory_gib": gib,
            "bandwidth_gb_s": None, "fp32_tflops": None, "tensor_tflops": {}, "tdp_w": None,
            "interconnect": {"gb_s": None}}


def _capacity_assumptions(w: Workload, kn: Knowledge) -> list[str]:
    """What a bare capacity in the query was read as."""
    out = []
    for req in w.gpus:
        if req.gpu_id is None:
            gb = capacity_gpu(req, kn)["memory_gb"]
            out.append(f"GPU: a {req.capacity_gb:g} GB card read as {req.capacity_gb:g} GiB "
                       f"({gb:.1f} GB), the unit GPU memory is sold in")
    return out
