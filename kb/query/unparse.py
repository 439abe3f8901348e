"""Workload → query text: the one place a Workload is written back in the query language.

In: a Workload as kb.query.parse made it (fields the question set; defaults not filled) and the
Knowledge. Out: query text that parses to the same Workload (tests/test_unparse.py checks it over
the phrasings table and generated workloads). Every word is the first word the rules list for
the value (query.yaml tasks, questions, units, knobs, phrases, situations; catalogue ids), so
the text is what the page links and the CLI prints for an option or a side of a comparison.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from kb.knowledge.data import Knowledge
    from kb.query.workload import GpuRequest, Workload

# Workload fields written as "<number> <unit word>" (query.yaml units, by field)
_UNIT_FIELDS = ("users", "batch", "context_tokens", "prompt_tokens", "output_tokens", "seq_len",
                "lora_rank", "tp", "pp", "speed_floor_tok_s", "tokens_per_day", "hours_per_day",
                "draft_tokens")
# Boolean fields set by a knob word (query.yaml knobs): field → (knob when true, knob when false)
_KNOBS = {"checkpointing": ("checkpointing", "no_checkpointing"), "flash_attention": ("flash", "eager"),
          "offload": ("offload", None), "optimizer_in_backward": ("optimizer_in_backward", None),
          "paged": ("paged", None), "lora_attention_only": ("lora_attention_only", None),
          "quantized_inputs_kept": ("quantized_inputs_kept", None)}


def num(value: float) -> str:
    """A number as the query language reads it back exactly: digits, no scale suffix."""
    if float(value).is_integer() and abs(value) < 1e16:
        return str(int(value))
    return repr(float(value))


def _phrase(kn: Knowledge, wanted: dict[str, object]) -> str | None:
    """The first word of the query.yaml phrase that sets exactly these fields."""
    for p in kn.query.get("phrases", []):
        if p["set"] == wanted:
            return p["words"][0]
    return None


def _gpu(kn: Knowledge, g: GpuRequest) -> str:
    what = g.gpu_id if g.gpu_id is not None else f"{num(g.capacity_gb or 0)}gb"
    return what if g.count == 0 else f"{g.count}x {what}"      # 0: a compared card with no count


def value_text(kn: Knowledge, field: str, value: object) -> str:
    """One value as a query writes it ('8B' for a parameter count, query.yaml's billion)."""
    if field == "params":
        return f"{num(float(value) / kn.billion)}B"      # type: ignore[arg-type]
    return str(value)


def unparse(w: Workload, kn: Knowledge) -> str:
    """The query text of a Workload (see the module's docstring): its task and question, the
    values it names, its knobs, its quantities, its money, its phrases and its cards, in that
    order; an FP8 KV cache that would run into a model's name goes last."""
    out = _task_words(w, kn) + _value_words(w, kn)
    kv = _kv_words(w, kn)
    kv_last = kv if kv and out and _joins_a_name(kn, out[-1], kv) else None
    if kv and kv_last is None:
        out.append(kv)      # 'glm-4.5 fp8 kv cache' would read as the name 'glm-4.5-fp8'
    out += _knob_words(w, kn) + _quantity_words(w, kn) + _money_words(w) + _phrase_words(w, kn)
    out += _card_words(w, kn)
    out.append(kv_last or "")
    return " ".join(x for x in out if x)


def _task_words(w: Workload, kn: Knowledge) -> list[str]:
    """The task (with its objective) when the question named it, the question, the focus."""
    q = kn.query
    out: list[str] = []
    if w.task_explicit:
        if w.objective:
            out.append(q["tasks"][w.objective][0])
        out.append(q["tasks"][w.task][0])
    if w.question:
        out.append(q["questions"][w.question][0])
    if w.focus:
        out.append(_phrase(kn, {"focus": w.focus}) or "")
    return out


def _value_words(w: Workload, kn: Knowledge) -> list[str]:
    """The model, size, precision and runtime, the compared one as 'a vs b'."""
    cmp = w.compare
    out: list[str] = []
    for field in ("model_id", "params", "precision", "runtime"):
        value = getattr(w, field)
        if value is None:
            continue
        if cmp is not None and cmp["field"] == field:
            out.append(" vs ".join(value_text(kn, field, v) for v in cmp["values"]))
        else:
            out.append(value_text(kn, field, value))
    return out


def _kv_words(w: Workload, kn: Knowledge) -> str | None:
    """The knob of the KV cache's format, if the question named one."""
    return kn.query["knobs"][f"{w.kv_precision}_kv"][0] if w.kv_precision else None


def _knob_words(w: Workload, kn: Knowledge) -> list[str]:
    """The optimizer and the boolean knobs (each field's word when true, or when false)."""
    q = kn.query
    out = [q["knobs"][w.optimizer][0]] if w.optimizer else []
    for field, (on, off) in _KNOBS.items():
        value = getattr(w, field)
        knob = on if value else off if value is False else None
        if knob is not None:
            out.append(q["knobs"][knob][0])
    out.append(_speculative(kn, w))
    return out


def _quantity_words(w: Workload, kn: Knowledge) -> list[str]:
    """Each number with its unit word: the unit fields, the training tokens, the deadline, the
    first-token and end-to-end targets and their percentiles."""
    q = kn.query
    by_field = _unit_words(kn)
    out = [f"{num(getattr(w, field))} {by_field[field]}" for field in _UNIT_FIELDS
           if getattr(w, field) is not None]
    if w.train_tokens is not None:
        out.append(f"{num(w.train_tokens)} {by_field['tokens']}")
    if w.deadline_hours is not None:
        out.append(f"{num(w.deadline_hours * 3600)} {by_field['duration']}")
    if w.ttft_max_s is not None:
        out.append(f"{q['ttft_words'][0]} {num(w.ttft_max_s)} {by_field['duration']}")
    if w.ttft_percentile is not None:       # after the bound: a number before it would read as its own
        out.append(f"p{w.ttft_percentile:g}")
    if w.e2e_max_s is not None:
        out.append(f"{q['e2e_words'][0]} {num(w.e2e_max_s)} {by_field['duration']}")
    if w.e2e_percentile is not None:
        out.append(f"p{w.e2e_percentile:g}")
    if w.host_memory_gb:            # '64gb ddr5': the host's memory, by the first word of its kind
        kind = w.host_memory_kind or "any"
        word = next((k for k, v in q.get("host_memory_words", {}).items() if v == kind), "ram")
        out.append(f"{num(w.host_memory_gb)}gb {word}")
    return out


def _unit_words(kn: Knowledge) -> dict[str, str]:
    """Each field's first unit word; a unit that scales its number ('nodes' × 8 GPUs, 'hours' ×
    3,600 s) cannot write a field back as it is."""
    return {spec["field"]: spec["words"][0] for spec in kn.query["units"].values()
            if spec.get("scale", 1.0) == 1.0}


def _money_words(w: Workload) -> list[str]:
    """A budget and a price per GPU hour."""
    out: list[str] = []
    if w.budget_usd is not None:
        out.append(f"${num(w.budget_usd)}")
    if w.usd_per_gpu_hour is not None:
        out.append(f"${num(w.usd_per_gpu_hour)}/h")
    return out


def _phrase_words(w: Workload, kn: Knowledge) -> list[str]:
    """The query.yaml phrases that set sharding, renting, sorting, options, DP attention and FP8
    scaling, and the situation."""
    q = kn.query
    out: list[str] = []
    for field in ("sharding", "rent", "sort", "want_options", "dp_attention", "fp8_scales"):
        value = getattr(w, field)
        if value is not None:
            wanted: dict[str, object] = {field: value}
            if field == "sharding":
                wanted = next((dict(p["set"]) for p in q.get("phrases", []) if p["set"].get("sharding") == value),
                              wanted)
            out.append(_phrase(kn, wanted) or "")
    if w.segment:
        out.append(q["situations"][w.segment]["words"][0])
    return out


def _card_words(w: Workload, kn: Knowledge) -> list[str]:
    """The cards ('on 2x h100 vs 4x l40s') and a count waiting for its card ('4 gpus')."""
    out = ["on " + " vs ".join(_gpu(kn, g) for g in w.gpus)] if w.gpus else []
    if w.gpu_count is not None:
        out.append(f"{w.gpu_count} {_unit_words(kn)['gpu_count']}")
    return out


def _speculative(kn: Knowledge, w: Workload) -> str:
    """Speculative decoding as a query says it: the draft before the word 'draft' (its model id
    or size), else the method's word; '' without it."""
    knobs = kn.query["knobs"]
    if w.spec_method is None:
        return ""
    if w.spec_method != "draft":
        return str(knobs[f"spec_{w.spec_method}"][0])
    draft = w.draft_model_id or (value_text(kn, "params", w.draft_params) if w.draft_params else None)
    return f"{draft} {knobs['spec_draft'][0]}" if draft else str(knobs["speculative"][0])


def _joins_a_name(kn: Knowledge, before: str, phrase: str) -> bool:
    """The text before and the phrase's first word together spell a model's name or alias."""
    return _name_key(f"{before} {phrase.split()[0]}") in _name_keys(kn)


def _name_key(text: str) -> str:
    return text.lower().replace("-", " ").replace("_", " ")


def _name_keys(kn: Knowledge) -> frozenset[str]:
    """Every model's name and aliases as _name_key spells them, kept with the knowledge (for
    the models it was made from)."""
    kept = kn.derived.tables.get("query.model_name_keys")
    if not (isinstance(kept, tuple) and kept[0] is kn.models):
        kept = kn.derived.tables["query.model_name_keys"] = (kn.models, frozenset(
            _name_key(name) for mid, m in kn.models.items() for name in (mid, *m.get("aliases", []))))
    return cast("frozenset[str]", kept[1])
