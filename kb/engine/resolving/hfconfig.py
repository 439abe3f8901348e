"""A model not in models.yaml: a Hugging Face config.json → a model entry.

In: the path of a config.json (`read`, for --model-config), or a config already parsed
(`model_of`; `from_hub`: one read from the Hugging Face Hub by kb.query.hub). Out: a model dict
shaped like a models.yaml entry (validated by kb.knowledge.schema.ModelSchema), with parameter
counts from the arch_params_* formulas of rules/formulas.yaml, or, for a Hub model, from its
checkpoint where that counts them. `read` reads its one file; nothing here uses the network.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, cast

from kb.errors import KbError
from kb.knowledge.hflayers import extend, obj, whole
from kb.knowledge.data import norm
from kb.paths import MAX_NAME_CHARS
from kb.knowledge import names as N
from kb.engine import Evaluated, base_scope, evaluate, resolve_workload
from kb.knowledge.derived import with_model
from kb.query.workload import Workload

if TYPE_CHECKING:
    from kb.knowledge.data import Knowledge
    from kb.query.hub import HubModel
    from kb.knowledge.records import JSON, Config, Mla, Model


class ConfigError(KbError):
    """A config.json that cannot be read as a model."""


def _first(cfg: Config, *keys: str, default: JSON = None) -> JSON:
    for k in keys:
        if cfg.get(k) is not None:
            return cfg[k]
    return default


_SHOWN_AS = " (config.json)"     # after the model's name in every answer
MAX_CONFIG_BYTES = 4_000_000     # the rule-file cap; real config.json files are a few kB
MAX_CONFIG_VALUE = 2 ** 53       # larger sizes are not a model; exact as a float up to here


def read(path: str | Path, kn: Knowledge) -> Model:
    """The model entry of a config.json file (`--model-config`)."""
    p = Path(path)
    return model_of(_parse(p, _read_capped(p)), str(p), kn, p.parent.name)


def model_of(raw: JSON, origin: str, kn: Knowledge, folder: str = "", *, name: str | None = None,
             aliases: list[str] | None = None) -> Model:
    """The model entry of a parsed config.json. `origin` names it in errors; its name is
    `name`, else the config's _name_or_path, else `folder` (the folder the file is in);
    `aliases`: further words a query names it by."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{origin}: a config.json holds one JSON object")
    text_config = raw.get("text_config")
    cfg: Config = text_config if isinstance(text_config, dict) else raw
    _check_names(origin, raw, cfg)
    try:
        model = extend(_model(cfg, name or str(cfg.get("_name_or_path") or folder or "config")),
                       cfg, raw, kn.config_defaults, kn.query.get("hf_quantization"))
    except (TypeError, ValueError, KeyError, OverflowError, ZeroDivisionError) as exc:
        raise ConfigError(f"{origin}: {exc}") from None   # int(1e999), hidden_size // 0 heads …
    if aliases:
        model["aliases"] = aliases
    _check_sizes(model, cfg, origin)
    from pydantic import ValidationError

    from kb.knowledge.schema import ModelSchema

    try:
        ModelSchema.model_validate({k: v for k, v in model.items()})
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ConfigError(f"{origin}: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    return _with_params(model, kn)


def _read_capped(p: Path) -> bytes:
    """At most MAX_CONFIG_BYTES + 1 bytes: /dev/zero or a huge file is refused, not read whole."""
    try:
        with p.open("rb") as fh:
            data = fh.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read: {exc.strerror}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{p}: larger than {MAX_CONFIG_BYTES} bytes; a config.json is a few kB")
    return data


def _parse(p: Path, data: bytes) -> JSON:
    try:
        value: JSON = json.loads(data.decode("utf-8"))
        return value
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{p}: not UTF-8 text at byte {exc.start}") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{p}:{exc.lineno}:{exc.colno}: not a JSON config: {exc.msg}") from None
    except RecursionError:
        raise ConfigError(f"{p}: JSON nested too deep for a config.json") from None
    except ValueError as exc:   # an integer longer than Python converts
        raise ConfigError(f"{p}: a number is too long to read ({str(exc).split(';')[0]})") from None


NAME_KEYS = ("model_type", "_name_or_path", "architectures")    # the names a config.json gives


def _check_names(p: str, *configs: Config) -> None:
    """Refuse a name longer than any name (kb.paths.MAX_NAME_CHARS): it would become the
    model's family, a word of the query vocabulary, and its name in every answer."""
    for cfg in configs:
        for key in NAME_KEYS:
            value = cfg.get(key)
            for v in value if key == "architectures" and isinstance(value, list) else [value]:
                n = 0 if v is None else len(v) if isinstance(v, str) else len(str(v))
                if n > MAX_NAME_CHARS:
                    raise ConfigError(f"{p}: {key} is {n} characters long; a name has at most "
                                      f"{MAX_NAME_CHARS}")


def _check_sizes(model: Model, cfg: Config, p: str) -> None:
    """Refuse sizes no model has (sliding_window: 1e20), naming the config.json key."""
    for key, value in _numbers(cast("Config", model)):
        if isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) > MAX_CONFIG_VALUE:
            source = next((k for k, v in cfg.items() if isinstance(v, (int, float))
                           and not isinstance(v, bool) and v == value), key)
            raise ConfigError(f"{p}: {source} = {value:.3g} is larger than any model size "
                              f"(at most {MAX_CONFIG_VALUE})")


def _numbers(d: Config, prefix: str = "") -> list[tuple[str, JSON]]:
    out: list[tuple[str, JSON]] = []
    for k, v in d.items():
        if isinstance(v, dict):
            out += _numbers(v, f"{prefix}{k}.")
        else:
            out.append((prefix + k, v))
    return out


def _model(cfg: Config, name: str) -> Model:
    hidden = whole(_first(cfg, "hidden_size", "n_embd", "d_model"))
    heads = whole(_first(cfg, "num_attention_heads", "n_head", "num_heads"))
    kv = whole(_first(cfg, "num_key_value_heads", "num_kv_heads", default=heads))
    if cfg.get("multi_query"):
        kv = 1
    layers = whole(_first(cfg, "num_hidden_layers", "n_layer", "num_layers"))
    head_dim = whole(_first(cfg, "head_dim", default=hidden // heads))
    inter = whole(_first(cfg, "moe_intermediate_size", "intermediate_size", "ffn_hidden_size", "n_inner",
                         default=4 * hidden))
    experts = _first(cfg, "num_local_experts", "n_routed_experts", "num_experts")
    mla: Mla | None = None
    if cfg.get("kv_lora_rank"):
        mla = {"kv_lora_rank": whole(cfg["kv_lora_rank"]),
               "qk_rope_head_dim": whole(cfg.get("qk_rope_head_dim", 0))}
    window = cfg.get("sliding_window") if cfg.get("use_sliding_window", True) else None
    window_layers = None
    if window:
        types = cfg.get("layer_types")
        window_layers = sum(1 for t in types if "sliding" in str(t)) if isinstance(types, list) else layers
    if len(name) + len(_SHOWN_AS) > MAX_NAME_CHARS:          # a name at the cap, shown with its origin
        name = name[:MAX_NAME_CHARS - len(_SHOWN_AS) - 1] + "…"
    model: Model = {
        "id": "config-" + "".join(c if c.isalnum() or c in ".-_" else "-" for c in name.lower()).strip("-")[:60] or "config",
        "name": name + _SHOWN_AS, "family": str(cfg.get("model_type", "custom")).lower(),
        "params_total": 1.0, "params_active": 1.0, "layers": layers, "hidden_size": hidden,
        "intermediate_size": inter, "attention_heads": heads, "kv_heads": kv, "head_dim": head_dim,
        "vocab_size": whole(_first(cfg, "vocab_size", "padded_vocab_size")),
        "max_context": whole(_first(cfg, "max_position_embeddings", "n_positions", "seq_length", default=4096)),
        "attention": "mla" if mla else ("mqa" if kv == 1 else "mha" if kv == heads else "gqa"),
        "tie_embeddings": bool(cfg.get("tie_word_embeddings", False)),
        "source": "kbq-defaults",
    }
    if window:
        model["sliding_window"] = whole(window)
        model["sliding_window_layers"] = whole(window_layers or layers)
    if mla:
        model["mla"] = mla
    if experts:
        model["moe"] = {"experts": whole(experts),
                        "experts_per_token": whole(_first(cfg, "num_experts_per_tok", "moe_topk", default=2)),
                        "shared_experts": whole(cfg.get("n_shared_experts") or 0)}
    return model


def _with_params(model: Model, kn: Knowledge) -> Model:
    """Parameter counts from the arch_params_* formulas."""
    view = with_model(kn, model, words=False)
    r = resolve_workload(Workload(model_id=model["id"]), view)
    ev = Evaluated(base_scope(r, view))
    evaluate(view, ev, [N.ARCH_PARAMS_TOTAL, N.ARCH_PARAMS_ACTIVE])
    total, active = ev.scope.get(N.ARCH_PARAMS_TOTAL), ev.scope.get(N.ARCH_PARAMS_ACTIVE)
    most = kn.query["limits"]["params"][1]
    if total is None or active is None or not 0 < active <= total <= most:
        why = ev.errors.get(N.ARCH_PARAMS_TOTAL) or ev.errors.get(N.ARCH_PARAMS_ACTIVE) or (
            "its sizes give no finite count" if total is None or active is None
            else f"{total:.3g} parameters, outside 1 to {most:.0e} (query.yaml limits)")
        raise ConfigError(f"{model['name']}: no parameter count ({why})")
    model["params_total"] = float(total)
    model["params_active"] = float(active)
    return model


# ---------------------------------------------------------------- a model read from the Hub

COUNTED_BY = {"headers": "the safetensors headers of its cached weights",
              "index": "model.safetensors.index.json's total_size",
              "shapes": "the config's shapes (arch_params_total)"}


def from_hub(hub: HubModel, kn: Knowledge) -> tuple[Model, str, str]:
    """A Hub model's entry, named (and found by a query) by its Hub id; with how its parameters
    were counted (a COUNTED_BY key) and the sentence that says so."""
    origin = f"{hub.repo_id}: config.json at revision {hub.revision}"
    model = model_of(hub.config, origin, kn, name=hub.repo_id, aliases=[hub.repo_id])
    return counted(model, hub.config, kn, hub.total_size, hub.tensors)


def _dtype(raw: Config) -> str | None:
    """The checkpoint's tensor type as the config names it (torch_dtype; `dtype` in newer ones)."""
    for cfg in (raw, obj(raw.get("text_config"))):
        for key in ("torch_dtype", "dtype"):
            if isinstance(cfg.get(key), str):
                return str(cfg[key])
    return None


def counted(model: Model, raw: Config, kn: Knowledge, total_size: int | None,
            tensors: dict[str, int] | None) -> tuple[Model, str, str]:
    """The model with its total parameters as its checkpoint counts them, where it does: every
    tensor's elements (`tensors`, dtype → count, from the safetensors headers), else the index's
    total_size over the bytes of the config's dtype (rules/precisions.yaml). A quantized
    checkpoint's bytes and packed elements count no parameters: it keeps the count of its shapes,
    as does a count outside query.yaml's limits. Active parameters: the total for a dense model,
    the shapes' count (at most the total) for a mixture of experts."""
    shapes = model["params_total"]
    how, count = "shapes", shapes
    detail = ""
    dtype = _dtype(raw)
    key = kn.precision_alias.get(norm(dtype)) if dtype else None
    if model.get("native_precision"):
        detail = f"; the checkpoint is quantized ({model['native_precision']}), so its bytes do not count them"
    elif tensors:
        how, count = "headers", float(sum(tensors.values()))
        detail = " (" + ", ".join(f"{n:,} {t}" for t, n in sorted(tensors.items())) + ")"
    elif total_size and key is not None:
        per = kn.precisions[key]["bits_per_weight"] / 8
        how, count = "index", total_size / per
        detail = f" ({total_size:,} bytes / {per:g} bytes per {dtype} weight)"
    lo, hi = kn.query["limits"]["params"]
    if not lo <= count <= hi:
        how, count, detail = "shapes", shapes, ""
    dense = model["params_active"] == shapes
    model["params_total"] = count
    model["params_active"] = count if dense else min(model["params_active"], count)
    said = f"parameters: {count / kn.billion:.4g}B, from {COUNTED_BY[how]}{detail}"
    if how != "shapes":
        said += f"; its shapes give {shapes / kn.billion:.4g}B"
    return model, how, said
