"""A Hugging Face cache on disk in huggingface_hub's own layout, for the Hub-id tests (never the
network): HF_HOME/hub/models--ORG--NAME/{refs/main, snapshots/COMMIT/FILE}.

The model is one whose name says 13B but whose config.json has Mistral 7B v0.1's shapes
(mistralai/Mistral-7B-v0.1 config.json: hidden 4096, 32 layers, 32 heads, 8 KV heads,
intermediate 14336, vocab 32000, untied embeddings), and its tensors as transformers names
them (MistralForCausalLM), so a test can count its parameters without kbq.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

REPO = "acme/Foo-13B-Instruct"
COMMIT = "4f3c2b1a0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b"
CONFIG = {
    "architectures": ["MistralForCausalLM"], "model_type": "mistral",
    "_name_or_path": "/home/someone/checkpoints/final",     # the uploader's disk: not its name
    "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000,
    "max_position_embeddings": 32768, "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}


def tensors(cfg: dict = CONFIG) -> dict[str, list[int]]:
    """Every weight of a Mistral/Llama decoder and its shape, from the config alone."""
    h, inter, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    head = h // cfg["num_attention_heads"]
    kv = cfg["num_key_value_heads"] * head
    out = {"model.embed_tokens.weight": [v, h], "model.norm.weight": [h]}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out |= {p + "self_attn.q_proj.weight": [h, h], p + "self_attn.k_proj.weight": [kv, h],
                p + "self_attn.v_proj.weight": [kv, h], p + "self_attn.o_proj.weight": [h, h],
                p + "mlp.gate_proj.weight": [inter, h], p + "mlp.up_proj.weight": [inter, h],
                p + "mlp.down_proj.weight": [h, inter],
                p + "input_layernorm.weight": [h], p + "post_attention_layernorm.weight": [h]}
    if not cfg["tie_word_embeddings"]:
        out["lm_head.weight"] = [v, h]
    return out


def parameters(cfg: dict = CONFIG) -> int:
    n = 0
    for shape in tensors(cfg).values():
        size = 1
        for d in shape:
            size *= d
        n += size
    return n


def snapshot(home: Path, repo: str = REPO, commit: str = COMMIT) -> Path:
    """The snapshot folder of `repo` at `commit`, with refs/main naming it."""
    folder = home / "hub" / ("models--" + repo.replace("/", "--"))
    (folder / "refs").mkdir(parents=True, exist_ok=True)
    (folder / "refs" / "main").write_text(commit)
    snap = folder / "snapshots" / commit
    snap.mkdir(parents=True, exist_ok=True)
    return snap


def write(snap: Path, name: str, data: dict) -> None:
    (snap / name).write_text(json.dumps(data), encoding="utf-8")


def index(snap: Path, files: int = 2, cfg: dict = CONFIG) -> dict[str, list[int]]:
    """model.safetensors.index.json: total_size at 2 bytes a weight (bf16), tensors shared
    among `files` shards; returns name → shape."""
    shapes = tensors(cfg)
    names = [f"model-{k + 1:05d}-of-{files:05d}.safetensors" for k in range(files)]
    weight_map = {t: names[i % files] for i, t in enumerate(shapes)}
    write(snap, "model.safetensors.index.json",
          {"metadata": {"total_size": 2 * parameters(cfg)}, "weight_map": weight_map})
    return shapes


def shards(snap: Path, files: int = 2, cfg: dict = CONFIG) -> None:
    """The shards of index() as safetensors files holding their header only (an 8-byte
    little-endian length, then the JSON header): the weights themselves are never read."""
    shapes = tensors(cfg)
    names = [f"model-{k + 1:05d}-of-{files:05d}.safetensors" for k in range(files)]
    headers: dict[str, dict] = {n: {"__metadata__": {"format": "pt"}} for n in names}
    offsets = dict.fromkeys(names, 0)
    for i, (t, shape) in enumerate(shapes.items()):
        n = names[i % files]
        size = 2
        for d in shape:
            size *= d
        headers[n][t] = {"dtype": "BF16", "shape": shape, "data_offsets": [offsets[n], offsets[n] + size]}
        offsets[n] += size
    for n, header in headers.items():
        raw = json.dumps(header).encode()
        (snap / n).write_bytes(struct.pack("<Q", len(raw)) + raw)
