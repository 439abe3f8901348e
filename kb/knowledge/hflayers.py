"""The parts of a config.json beyond a plain transformer: hybrid, sliding/chunked and MoE
layouts, and the checkpoint's quantization_config.

In: the text config (a dict from config.json) and the model entry kb.engine.resolving.hfconfig built so far.
Out: the entry with the models.yaml fields these describe (attention_layers, recurrent,
sliding_window(_layers), local_attention, moe layer counts and widths, native_precision: the
quantization_config read through the table rules/query.yaml hf_quantization gives, and fp8_scales
where it scales per block).
Reads nothing else; unknown layouts leave the entry as it was.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal
from kb.knowledge import names as N

if TYPE_CHECKING:
    from collections.abc import Mapping

    from kb.knowledge.records import JSON, Config, Model, Moe, Recurrent
    from kb.knowledge.records_rules import HfQuantization, HfQuantizationRule

_STATE_KINDS = ("mamba", "linear_attention")


def whole(value: JSON) -> int:
    """A config value read as a whole number (as int() reads it: 4096, 4096.0, "4096")."""
    if isinstance(value, (int, float, str)):
        return int(value)
    raise TypeError(f"{json_kind(value)} where a number belongs")


def obj(value: JSON) -> Config:
    """A config value that should be a JSON object; {} when it is anything else."""
    return value if isinstance(value, dict) else {}


def json_kind(value: JSON) -> str:
    """What a JSON value is, in JSON's words (for an error message)."""
    if value is None:
        return "null"
    return "an object" if isinstance(value, dict) else "a list" if isinstance(value, (list, tuple)) else repr(value)


def _types(cfg: Config) -> list[str]:
    types = cfg.get("layer_types") or cfg.get("layers_block_type")
    return [str(t) for t in types] if isinstance(types, list) else []


def _count(types: list[str], *words: str) -> int:
    return sum(1 for t in types if any(w in t for w in words))


def recurrent(cfg: Config, layers: int, defaults: Mapping[str, int]) -> tuple[Recurrent | None, int]:
    """(recurrent block, layers with attention) for Mamba2 and Gated DeltaNet hybrids; a field
    the config leaves out takes its value from `defaults` (models.yaml config_defaults)."""
    types = _types(cfg)
    if cfg.get("linear_num_value_heads"):                       # Qwen3-Next (Gated DeltaNet)
        interval = whole(cfg.get("full_attention_interval") or defaults["full_attention_interval"])
        attention = _count(types, "full") if types else layers // interval
        block: Recurrent = {
            "kind": "gated-deltanet", "layers": layers - attention,
            "heads": whole(cfg["linear_num_value_heads"]), "head_dim": whole(cfg["linear_value_head_dim"]),
            "state_dim": whole(cfg["linear_key_head_dim"]), "groups": whole(cfg["linear_num_key_heads"]),
            "conv_kernel": whole(cfg.get("linear_conv_kernel_dim") or defaults["linear_conv_kernel_dim"])}
        return (block if block["layers"] else None), attention
    if cfg.get("mamba_d_state"):                                # Granite 4.0-H, Falcon-H1, Bamba
        hidden = whole(cfg["hidden_size"])
        heads = whole(cfg.get("mamba_n_heads") or defaults["mamba_n_heads"])
        inner = whole(cfg.get("mamba_d_ssm") or whole(cfg.get("mamba_expand") or defaults["mamba_expand"]) * hidden)
        if types:
            state, attention = _count(types, "mamba"), _count(types, "attention")
        else:                                                   # Falcon-H1: both mixers in every layer
            state = attention = layers
        block = {"kind": "mamba2", "layers": state, "heads": heads,
                 "head_dim": whole(cfg.get("mamba_d_head") or inner // heads),
                 "state_dim": whole(cfg["mamba_d_state"]), "groups": whole(cfg.get("mamba_n_groups") or defaults["mamba_n_groups"]),
                 "conv_kernel": whole(cfg.get("mamba_d_conv") or defaults["mamba_d_conv"])}
        return (block if state else None), attention
    return None, layers


def local_layers(cfg: Config, layers: int, defaults: Mapping[str, int],
                 ) -> tuple[int | None, int | None, Literal["sliding", "chunked"] | None]:
    """(window, layers using it, 'sliding' | 'chunked') from the config's own layer layout."""
    types = _types(cfg)
    if cfg.get("attention_chunk_size"):                         # Llama 4 interleaved chunked attention
        norope = cfg.get("no_rope_layers")
        chunked = (_count(types, "chunked") if types
                   else sum(1 for x in norope if x) if isinstance(norope, list) and norope
                   else layers - layers // whole(cfg.get("no_rope_layer_interval") or defaults["no_rope_layer_interval"]))
        return whole(cfg["attention_chunk_size"]), chunked, "chunked"
    window = cfg.get("sliding_window") if cfg.get("use_sliding_window", True) else None
    if not window:
        return None, None, None
    if types:
        sliding = _count(types, "sliding")
    elif cfg.get("sliding_window_pattern"):                     # Gemma 3: every Nth layer is global
        sliding = layers - layers // whole(cfg["sliding_window_pattern"])
    else:
        sliding = layers
    return whole(window), sliding, "sliding"


def moe_layout(cfg: Config, layers: int, out: Moe) -> None:
    """Layer count and widths of the MoE layers, the dense ones and the shared expert, into
    the model's moe block."""
    dense = whole(cfg.get("first_k_dense_replace") or 0)
    step = whole(cfg.get("interleave_moe_layer_step") or cfg.get("decoder_sparse_step") or 1)
    only = cfg.get("mlp_only_layers")
    moe_layers = (layers - dense) // step if step > 1 else layers - dense
    if isinstance(only, list):
        moe_layers -= len(only)
    out["moe_layers"] = moe_layers
    wide = cfg.get("intermediate_size_mlp") or (cfg.get("intermediate_size") if cfg.get("moe_intermediate_size") else None)
    if moe_layers < layers and wide:
        out["dense_intermediate_size"] = whole(wide)
    shared = cfg.get("shared_expert_intermediate_size") or cfg.get("shared_intermediate_size")
    if shared:
        out["shared_expert_intermediate_size"] = whole(shared)


def shared_experts(cfg: Config) -> int:
    if cfg.get("n_shared_experts"):
        return whole(cfg["n_shared_experts"])
    if cfg.get("shared_expert_intermediate_size") or cfg.get("shared_intermediate_size"):
        return 1
    return 1 if str(cfg.get("model_type", "")).startswith("llama4") else 0


def native_precision(raw: Config, is_moe: bool, table: HfQuantization | None) -> str | None:
    """The checkpoint's format from quantization_config, as a precisions.yaml id: the first row
    of `table` (query.yaml hf_quantization) that matches; None for a 16-bit checkpoint or a
    format kbq has no entry for."""
    q = raw.get("quantization_config") or obj(raw.get("text_config")).get("quantization_config")
    if not isinstance(q, dict) or table is None:
        return None
    method = str(q.get("quant_method", "")).lower()
    fmt = str(q.get("fmt", "")).lower()
    weights = [obj(g.get("weights")) for g in obj(q.get("config_groups")).values() if isinstance(g, dict)]
    for row in table["rules"]:
        if _matches(row, q, method, fmt, weights):
            moe = row.get("moe_precision")
            return moe if is_moe and moe else row[N.PRECISION]
    return None


def block_scaled(raw: Config) -> bool:
    """Whether quantization_config scales its weights per block (weight_block_size, as DeepSeek's
    and Qwen's FP8 checkpoints give it: [128, 128])."""
    q = raw.get("quantization_config") or obj(raw.get("text_config")).get("quantization_config")
    size = q.get("weight_block_size") if isinstance(q, dict) else None
    return isinstance(size, list) and len(size) == 2


def _matches(row: HfQuantizationRule, q: Config, method: str, fmt: str, weights: list[Config]) -> bool:
    """Whether a quantization_config meets every condition a row of hf_quantization gives."""
    if (want := row.get("quant_method")) is not None and method != want:
        return False
    if (prefix := row.get("fmt_prefix")) is not None and not fmt.startswith(prefix):
        return False
    if (bits := row.get("bits")) is not None and q.get("bits") != bits:
        return False
    if (flag := row.get("flag")) is not None and not q.get(flag):
        return False
    if (wbits := row.get("weight_bits")) is None:
        return True
    wtype = row.get("weight_type")
    return any(w.get("num_bits") == wbits and (wtype is None or w.get("type") == wtype) for w in weights)


def extend(model: Model, cfg: Config, raw: Config, defaults: Mapping[str, int],
           quantization: HfQuantization | None = None) -> Model:
    """The entry with every layout and format field the config describes (`defaults`: what a
    field the config leaves out is taken to be; `quantization`: query.yaml hf_quantization)."""
    layers = model["layers"]
    block, attention = recurrent(cfg, layers, defaults)
    if block:
        model["recurrent"] = block
        model["attention_layers"] = attention
    window, local, kind = local_layers(cfg, attention, defaults)
    if window:
        model["sliding_window"], model["sliding_window_layers"], model["local_attention"] = window, local, kind
    moe = model.get("moe")
    if moe:
        moe_layout(cfg, layers, moe)
        moe["shared_experts"] = shared_experts(cfg)
    mtp = cfg.get("num_nextn_predict_layers") or cfg.get("mtp_num_hidden_layers")
    if isinstance(mtp, int) and not isinstance(mtp, bool) and mtp > 0:
        # a Nemotron-H MTP module is a run of blocks (mtp_layers_block_type: attention, moe), each
        # one of the model's layers
        blocks = cfg.get("mtp_layers_block_type")
        model["mtp_layers"] = mtp * (len(blocks) if isinstance(blocks, list) and blocks else 1)
    native = native_precision(raw, bool(model.get("moe")), quantization)
    if native:
        model["native_precision"], model["native_source"] = native, model["source"]
        if block_scaled(raw):
            model["fp8_scales"], model["fp8_source"] = "block", model["source"]
    return model
