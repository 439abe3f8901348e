"""The records of the knowledge as the type checker sees them: typed dicts, no code.

In: nothing. Out: `TypedDict` types for the plain-data records the engine reads (a GPU, a
model, a precision, a runtime, a source, a price, the query rules…), keyed as the rule files'
schemas (kb.knowledge.schema, kb.knowledge.schema_catalogue) dump them, and the aliases `Value` (one scalar of a
record or a scope) and `JSON` (JSON-shaped data).

At run time the records are dicts: `model_dump()` of the validated schema models, or the same
read back from a knowledge snapshot (kb.knowledge.snapshot). Import this module only under
`if TYPE_CHECKING:` so that a plain query pays nothing for it; tests/test_records.py checks
that each typed dict has the keys of the schema model it mirrors.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypeAlias

# typing_extensions' TypedDict: pydantic reads ErrorBand in the Answer's schema, and on Python
# < 3.12 it takes only this one
from typing_extensions import TypedDict

from kb.figures import Value as Value      # one scalar of a record or a scope

JSON: TypeAlias = "dict[str, JSON] | list[JSON] | tuple[JSON, ...] | float | int | str | bool | None"
Config: TypeAlias = "dict[str, JSON]"      # a config.json object, as json.loads gives it


# ---------------------------------------------------------------- sources.yaml

class Source(TypedDict):
    id: str
    title: str
    publisher: str | None
    date: str | None
    url: str | None
    kind: str
    notes: str | None


# ---------------------------------------------------------------- precisions.yaml

class Precision(TypedDict):
    id: str
    name: str
    kind: Literal["float", "int", "quant"]
    bits_per_weight: float
    compute: str
    quantizes_embeddings: bool
    experts_only: bool
    weight_only: bool
    fallback: list[str]
    dequantized: list[str]
    aliases: list[str]
    source: str
    notes: str | None


# ---------------------------------------------------------------- gpus.yaml

class Interconnect(TypedDict, total=False):     # only gb_s for a bare capacity
    kind: str
    generation: str | None
    gb_s: float | None


class GPU(TypedDict):
    """A gpus.yaml entry, with its capacity in GB and GiB (kb.knowledge.checks.capacities) and,
    when rules/prices.yaml is there, its prices (kb.knowledge.prices.merge). A bare capacity ("on 20GB",
    kb.engine.scope.capacity_gpu) has only the keys that are not NotRequired, vendor "any"."""
    id: str
    name: str
    vendor: str
    vram_gb: float
    memory_bytes: float
    memory_gb: float | None
    memory_gib: float | None
    bandwidth_gb_s: float | None
    fp32_tflops: float | None
    tensor_tflops: dict[str, float | None]    # tensor precision → dense TFLOPS ({} for a capacity)
    tdp_w: float | None
    interconnect: Interconnect
    segment: NotRequired[str]
    architecture: NotRequired[str]
    release_year: NotRequired[int]
    aliases: NotRequired[list[str]]
    memory_type: NotRequired[str]
    bus_width_bits: NotRequired[int | None]
    memory_data_rate_gbps: NotRequired[float | None]
    pcie_generation: NotRequired[int | None]
    ecc: NotRequired[bool]
    form_factor: NotRequired[str]
    source: NotRequired[str]
    field_sources: NotRequired[dict[str, str]]
    notes: NotRequired[str | None]
    price_usd: NotRequired[float | None]
    cloud_usd_per_hour: NotRequired[float | None]


# ---------------------------------------------------------------- models.yaml

class Mla(TypedDict):
    kv_lora_rank: int
    qk_rope_head_dim: int
    qk_nope_head_dim: NotRequired[int | None]
    v_head_dim: NotRequired[int | None]
    q_lora_rank: NotRequired[int | None]


class Moe(TypedDict):
    experts: int
    experts_per_token: int
    shared_experts: int
    moe_layers: NotRequired[int | None]
    shared_expert_intermediate_size: NotRequired[int | None]
    dense_intermediate_size: NotRequired[int | None]


class Recurrent(TypedDict):
    kind: Literal["mamba2", "gated-deltanet"]
    layers: int
    heads: int
    head_dim: int
    state_dim: int
    groups: int
    conv_kernel: int


class PerLayerEmbedding(TypedDict):
    vocab_size: int
    width: int


class Model(TypedDict):
    """A models.yaml entry. One read from a config.json (kb.engine.hfconfig) has the keys that are
    not NotRequired, and of the rest only those its config sets."""
    id: str
    name: str
    family: str
    params_total: float
    params_active: float
    layers: int
    hidden_size: int
    intermediate_size: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    vocab_size: int
    max_context: int
    attention: Literal["mha", "gqa", "mqa", "mla"]
    tie_embeddings: bool
    source: str
    aliases: NotRequired[list[str]]
    mlp: NotRequired[Literal["gated", "plain"]]
    active_embeddings: NotRequired[Literal["both", "output", "none"]]
    encoder_params: NotRequired[float | None]
    card_rounding: NotRequired[float | None]
    sliding_window: NotRequired[int | None]
    sliding_window_layers: NotRequired[int | None]
    local_attention: NotRequired[Literal["sliding", "chunked"] | None]
    attention_layers: NotRequired[int | None]
    kv_shared_layers: NotRequired[int | None]
    per_layer_embedding: NotRequired[PerLayerEmbedding | None]
    mla: NotRequired[Mla | None]
    moe: NotRequired[Moe | None]
    recurrent: NotRequired[Recurrent | None]
    native_precision: NotRequired[str | None]
    native_source: NotRequired[str | None]
    notes: NotRequired[str | None]


# ---------------------------------------------------------------- runtimes.yaml

class RecipeWhen(TypedDict):
    tasks: list[str]
    min_gpus: int
    max_gpus: int | None
    min_params: float


class RecipeSet(TypedDict):
    optimizer: str | None
    checkpointing: bool | None
    paged: bool | None
    optimizer_in_backward: bool | None
    offload: bool | None
    checkpoint_offload: bool | None
    lora_attention_only: bool | None


class Recipe(TypedDict):
    when: RecipeWhen
    set: RecipeSet
    text: str
    source: str


class Runtime(TypedDict):
    id: str
    name: str
    kind: Literal["inference", "training", "both"]
    aliases: list[str]
    multi_gpu: Literal["tensor_parallel", "layer_split"]
    platforms: list[str]
    decode_bandwidth_efficiency: float | None
    quant_kernel_efficiency: float | None
    hbm_decode_efficiency: float
    moe_expert_kernel_s: float
    moe_layer_kernel_s: float
    mla_layer_kernel_s: float
    decode_step_overhead_s: float | None
    prefill_compute_efficiency: float | None
    apple_prefill_compute_efficiency: float | None
    hopper_warpgroup_mma: bool
    hopper_warpgroup_mma_source: str | None
    native_gemm: list[str]
    native_gemm_source: str | None
    gemm_accumulate: Literal["fp32", "fp16"]
    gemm_accumulate_source: str | None
    memory_utilization: float
    overhead_gb: float
    training_mfu: float | None
    logits_memory_fraction: float
    master_weights: bool
    lora_dropout: float
    lora_dropout_source: str | None
    quantizes_output_head: bool
    quantizes_output_head_source: str | None
    default_context_tokens: int | None
    checkpointing: bool | None
    optimizer: str | None
    sharding: str | None
    recipes: list[Recipe]
    well_supported: dict[str, list[str]]
    well_supported_source: str | None
    unsupported_architectures: list[str]
    unsupported_architectures_source: str | None
    source: str
    notes: str | None


class RuntimeDefaults(TypedDict):
    inference: str
    gguf: str
    training: str
    source: str


class Sharding(TypedDict):
    stage: int
    name: str
    source: str
    layout: str | None
    model_parallel: bool
    mfu: float | None
    mfu_source: str | None


class AtScale(TypedDict):
    min_gpus: int
    tasks: list[str]
    strategy: str
    checkpointing: bool | None
    text: str
    source: str


class ShardingTable(TypedDict, total=False):    # {} when runtimes.yaml has no sharding
    default: str
    offload_default: str
    no_count_note: str
    strategies: dict[str, Sharding]
    at_scale: list[AtScale]


class Objective(TypedDict):
    method: Literal["full_ft", "lora", "qlora"]
    sequences: int
    reference: bool
    critic: bool
    rollout: bool
    generations: int
    text: str
    source: str


# ---------------------------------------------------------------- derived: error bands

class ErrorBand(TypedDict):
    """How far one kind of figure has been from published measurements (kb.knowledge.derived)."""
    median_pct: float
    p90_pct: float
    n: int
    basis: str
    measurements: tuple[str, ...] | list[str]   # a tuple in the knowledge, a list in an answer
    source: str | None
