"""The schema of models.yaml: each model's architecture as its config.json gives it, with the
blocks for the designs that change its parameter count or its cache (multi-head latent attention,
experts, linear-attention and state-space layers, Gemma 4's global layers, DeepSeek V4's
compressed attention, a sparse-attention indexer), and the rules for a bare size and for a
config.json's missing fields (unknown keys are errors).

In: plain data from YAML (kb.knowledge.loader). Out: a validated ModelsFile; kb.knowledge.schema
lists it with the other files' models in FILES.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from kb.knowledge.schema_base import Count, Name, NonNeg, Positive, Slug, Strict

# ---------------------------------------------------------------- models.yaml

class MlaSchema(Strict):
    kv_lora_rank: Count
    qk_rope_head_dim: int = Field(ge=0)
    qk_nope_head_dim: int | None = None
    v_head_dim: int | None = None
    q_lora_rank: int | None = None


class MoeSchema(Strict):
    experts: Count
    experts_per_token: Count
    shared_experts: int = Field(default=0, ge=0)
    moe_layers: int | None = None
    shared_expert_intermediate_size: int | None = Field(default=None, gt=0)
    dense_intermediate_size: int | None = Field(default=None, gt=0)
    # blocks with a dense FFN; by default every layer without routed experts. 0 where the blocks
    # without experts are token mixers alone (Nemotron-H: Mamba2, attention and MoE blocks apart)
    dense_layers: int | None = Field(default=None, ge=0)


class RecurrentSchema(Strict):
    """Linear-attention or state-space layers: a fixed-size state per sequence, no KV cache."""
    kind: Literal["mamba2", "gated-deltanet", "kda"]
    layers: Count
    heads: Count
    head_dim: Count
    state_dim: Count
    groups: Count
    conv_kernel: Count


class GlobalAttentionSchema(Strict):
    """Gemma 4: the full-attention layers' own KV geometry; the sliding-window layers keep the
    model's kv_heads and head_dim."""
    kv_heads: Count                 # num_global_key_value_heads
    head_dim: Count                 # global_head_dim
    shared_kv: bool = False         # attention_k_eq_v: keys and values from one projection (no v_proj)


class IndexerSchema(Strict):
    """DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5): a lightning indexer scores every earlier
    token with its own small key, cached per token and layer beside the attention's, and each
    query attends to the topk it picks."""
    heads: Count                    # index_n_heads
    head_dim: Count                 # index_head_dim: the width of the cached key
    topk: Count                     # index_topk
    key_bits: Positive | None = None    # bits per cached key value (FP8 and its scales); the KV cache's when absent
    layers_per_indexer: Count = 1       # GLM-5.2's IndexShare: one indexer (and its keys) serves this many layers


class CompressedAttentionSchema(Strict):
    """DeepSeek V4's hybrid attention. Queries come through a low-rank projection; each layer has
    one key-value head whose vector serves as key and value; the output goes through a grouped
    low-rank projection. Every layer attends to a raw window of the latest tokens (the model's
    sliding_window) and to pooled rows of the older ones: a sparse layer keeps one row per
    sparse_ratio tokens and an indexer key per row, which picks indexer_topk rows for each query
    (Compressed Sparse Attention); a heavy layer keeps one row per heavy_ratio tokens and reads
    them all (Heavily Compressed Attention)."""
    q_lora_rank: Count
    o_lora_rank: Count
    o_groups: Count
    sparse_layers: int = Field(ge=0)
    sparse_ratio: Count
    heavy_layers: int = Field(ge=0)
    heavy_ratio: Count
    indexer_heads: Count
    indexer_head_dim: Count
    indexer_topk: Count


class PerLayerEmbeddingSchema(Strict):
    """Gemma 3n per-layer embeddings: each layer looks up its own vocab_size × width table (no matmul)."""
    vocab_size: Count
    width: Count


class ModelSchema(Strict):
    id: Slug
    name: Name
    family: Name
    aliases: list[Name] = []
    params_total: Positive
    params_active: Positive
    layers: Count
    hidden_size: Count
    intermediate_size: Count
    attention_heads: Count
    kv_heads: Count
    head_dim: Count
    vocab_size: Count
    max_context: Count
    attention: Literal["mha", "gqa", "mqa", "mla"]
    tie_embeddings: bool = False
    mlp: Literal["gated", "plain"] = "gated"
    active_embeddings: Literal["both", "output", "none"] = "both"
    encoder_params: NonNeg | None = None
    # lookup-only tables beside the decoder (DeepSeek's Engram, Qwen's N-gram embedding): held with the
    # weights and counted in params_total, never multiplied, so not in params_active
    lookup_params: NonNeg | None = None
    card_rounding: float | None = Field(default=None, gt=0, lt=0.5)
    # a catalogue model whose architecture the entry assumes where its own config was not published;
    # the answer says so in its assumptions
    architecture_from: Slug | None = None
    sliding_window: int | None = Field(default=None, gt=0)
    sliding_window_layers: int | None = Field(default=None, ge=0)
    local_attention: Literal["sliding", "chunked"] | None = None
    attention_layers: int | None = Field(default=None, ge=0)
    kv_shared_layers: int | None = Field(default=None, ge=0)
    # multi-token-prediction layers the checkpoint holds beside its decoder layers (the config's
    # num_nextn_predict_layers, mtp_num_hidden_layers); held in memory when served with its MTP head
    mtp_layers: int | None = Field(default=None, ge=0)
    per_layer_embedding: PerLayerEmbeddingSchema | None = None
    global_attention: GlobalAttentionSchema | None = None
    compressed_attention: CompressedAttentionSchema | None = None
    indexer: IndexerSchema | None = None
    mla: MlaSchema | None = None
    moe: MoeSchema | None = None
    recurrent: RecurrentSchema | None = None
    native_precision: Slug | None = None
    native_source: Slug | None = None
    # how the publisher's own FP8 checkpoint scales its weights ("block": one scale per 128x128
    # block, as Qwen's and DeepSeek's): the GEMMs of 'fp8' of this model run at that kernel's rate
    fp8_scales: Literal["block"] | None = None
    fp8_source: Slug | None = None
    source: Slug
    notes: str | None = None


class BareSizeSchema(Strict):
    references: list[Slug] = Field(min_length=1)
    unnamed_references: list[Slug] = []


class ConfigDefaultsSchema(Strict):
    """What `--model-config` takes where a config.json leaves a field out (or sets it to 0):
    the default of the transformers configuration class that reads that field."""
    full_attention_interval: Count      # Qwen3-Next: every Nth layer has full attention
    linear_conv_kernel_dim: Count       # Qwen3-Next: the Gated DeltaNet's convolution width
    mamba_n_heads: Count                # Falcon-H1, Granite 4.0-H, Bamba: Mamba2 heads
    mamba_expand: Count                 # the Mamba2 inner width over the hidden size
    mamba_n_groups: Count               # Mamba2 state groups
    mamba_d_conv: Count                 # Mamba2 convolution width
    no_rope_layer_interval: Count       # Llama 4: every Nth layer is global (no RoPE, not chunked)
    source: Slug


class ModelsFile(Strict):
    models: list[ModelSchema]
    bare_size: BareSizeSchema
    config_defaults: ConfigDefaultsSchema
