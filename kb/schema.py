"""The shape of every rule file, as pydantic models (unknown keys are errors).

In: plain data from YAML (kb.loader). Out: validated models, and the JSON Schema of each file
(`kbq schema NAME`, committed under rules/schema/). Cross-file checks (names that resolve,
units that agree, flows that are sound) are in kb.knowledge, not here.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema, field_validator

Slug = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_.\-]*$", max_length=80)]
NodeId = Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_]*$", max_length=60)]
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNeg = Annotated[float, Field(ge=0, allow_inf_nan=False)]


def _plain_text(value: Any) -> Any:
    """`unit: 1` and `expr: 0` are fine to type; read them as text."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value


Text = Annotated[str, BeforeValidator(_plain_text), WithJsonSchema({"type": ["string", "number"]})]
Optimizer = Literal["adamw", "adam8bit", "sgd"]
Vendor = Literal["nvidia", "amd", "intel", "apple", "google", "aws"]
SortName = Literal["value", "cost", "speed", "memory", "power"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# ---------------------------------------------------------------- sources.yaml

class Source(Strict):
    id: Slug
    title: str
    publisher: str | None = None
    date: str | None = None
    url: str | None = None
    kind: Literal["seed", "datasheet", "whitepaper", "spec-page", "paper", "measurement",
                  "model-card", "documentation", "review", "blog", "kbq"]
    notes: str | None = None


class Claim(Strict):
    id: Slug
    source: Slug
    text: str
    computed: str
    unit: Text
    value: float | tuple[float, float]
    tolerance: NonNeg = 0.1
    applies_when: str
    example_query: str
    note: str


class SourcesFile(Strict):
    sources: list[Source]
    claims: list[Claim] = []


# ---------------------------------------------------------------- precisions.yaml

TensorPrecision = Literal["fp32", "tf32", "fp16", "bf16", "fp8", "int8", "int4", "fp4"]


class Precision(Strict):
    id: Slug
    name: str
    kind: Literal["float", "int", "quant"]
    bits_per_weight: Positive
    compute: TensorPrecision
    quantizes_embeddings: bool = True
    experts_only: bool = False
    fallback: list[TensorPrecision] = []
    aliases: list[str] = []
    source: Slug
    notes: str | None = None


class PrecisionsFile(Strict):
    precisions: list[Precision]


# ---------------------------------------------------------------- runtimes.yaml

Fraction = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]


class RecipeWhen(Strict):
    tasks: list[Slug] = []
    min_gpus: int = Field(default=1, gt=0)
    max_gpus: int | None = Field(default=None, gt=0)
    min_params: NonNeg = 0


class RecipeSet(Strict):
    optimizer: Optimizer | None = None
    checkpointing: bool | None = None
    paged: bool | None = None
    optimizer_in_backward: bool | None = None
    offload: bool | None = None
    checkpoint_offload: bool | None = None
    lora_attention_only: bool | None = None


class Recipe(Strict):
    """What a runtime's documented recipe does for a kind of job (a default, said in the answer)."""
    when: RecipeWhen
    set: RecipeSet
    text: str
    source: Slug


class Sharding(Strict):
    stage: int = Field(ge=0, le=3)
    name: str
    source: Slug
    layout: Slug | None = None      # the strategy it runs as, when it is a runtime's name for one


class ShardingFile(Strict):
    default: Slug
    offload_default: Slug
    no_count_note: str
    strategies: dict[str, Sharding]


class Objective(Strict):
    method: Literal["full_ft", "lora", "qlora"]
    sequences: int = Field(default=1, gt=0)
    reference: bool = False
    critic: bool = False
    rollout: bool = False
    generations: int = Field(default=1, gt=0)
    text: str
    source: Slug


class Runtime(Strict):
    id: Slug
    name: str
    kind: Literal["inference", "training", "both"]
    aliases: list[str] = []
    multi_gpu: Literal["tensor_parallel", "layer_split"]
    platforms: list[Vendor] = Field(min_length=1)
    decode_bandwidth_efficiency: Fraction | None = None
    quant_kernel_efficiency: Fraction | None = None
    hbm_decode_efficiency: Fraction = 1.0
    moe_expert_kernel_s: NonNeg = 0.0
    decode_step_overhead_s: NonNeg | None = None
    prefill_compute_efficiency: Fraction | None = None
    gemm_accumulate: Literal["fp32", "fp16"] = "fp32"
    gemm_accumulate_source: Slug | None = None
    memory_utilization: Fraction = 1.0
    overhead_gb: NonNeg
    training_mfu: Fraction | None = None
    logits_memory_fraction: Fraction = 1.0
    master_weights: bool = True
    default_context_tokens: int | None = Field(default=None, gt=0)
    checkpointing: bool | None = None
    optimizer: Optimizer | None = None
    sharding: Slug | None = None
    recipes: list[Recipe] = []
    source: Slug
    notes: str | None = None


class RuntimeDefaults(Strict):
    inference: Slug
    gguf: Slug
    training: Slug
    source: Slug


class RuntimesFile(Strict):
    runtimes: list[Runtime]
    sharding: ShardingFile | None = None
    objectives: dict[str, Objective] = {}
    defaults: RuntimeDefaults


# ---------------------------------------------------------------- gpus.yaml

class TensorTflops(Strict):
    tf32: NonNeg | None
    fp16: NonNeg | None
    bf16: NonNeg | None
    fp8: NonNeg | None
    int8: NonNeg | None
    int4: NonNeg | None
    fp4: NonNeg | None
    fp16_acc16: NonNeg | None = None   # FP16 with FP16 accumulate, where a card runs it faster


class Interconnect(Strict):
    kind: Literal["nvlink", "xgmi", "infinity-fabric", "pcie", "ethernet", "unified", "ici", "neuronlink"]
    generation: str | None = None
    gb_s: NonNeg | None = None


class Gpu(Strict):
    id: Slug
    name: str
    vendor: Vendor
    segment: Literal["datacenter", "workstation", "consumer", "apple"]
    architecture: str
    release_year: int = Field(ge=2010, le=2035)
    aliases: list[str] = []
    vram_gb: Positive
    memory_bytes: int = Field(gt=0)
    memory_type: str
    bandwidth_gb_s: Positive
    bus_width_bits: int | None = Field(default=None, gt=0)
    memory_data_rate_gbps: Positive | None = None
    fp32_tflops: NonNeg | None
    tensor_tflops: TensorTflops
    tdp_w: Positive | None
    interconnect: Interconnect
    pcie_generation: int | None = None
    ecc: bool
    form_factor: str
    source: Slug
    field_sources: dict[str, Slug] = {}
    notes: str | None = None


class GpusFile(Strict):
    gpus: list[Gpu]


# ---------------------------------------------------------------- models.yaml

class Mla(Strict):
    kv_lora_rank: int = Field(gt=0)
    qk_rope_head_dim: int = Field(ge=0)
    qk_nope_head_dim: int | None = None
    v_head_dim: int | None = None
    q_lora_rank: int | None = None


class Moe(Strict):
    experts: int = Field(gt=0)
    experts_per_token: int = Field(gt=0)
    shared_experts: int = Field(default=0, ge=0)
    moe_layers: int | None = None
    shared_expert_intermediate_size: int | None = Field(default=None, gt=0)
    dense_intermediate_size: int | None = Field(default=None, gt=0)


class Recurrent(Strict):
    """Linear-attention or state-space layers: a fixed-size state per sequence, no KV cache."""
    kind: Literal["mamba2", "gated-deltanet"]
    layers: int = Field(gt=0)
    heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    state_dim: int = Field(gt=0)
    groups: int = Field(gt=0)
    conv_kernel: int = Field(gt=0)


class PerLayerEmbedding(Strict):
    """Gemma 3n per-layer embeddings: each layer looks up its own vocab_size × width table (no matmul)."""
    vocab_size: int = Field(gt=0)
    width: int = Field(gt=0)


class Model(Strict):
    id: Slug
    name: str
    family: str
    aliases: list[str] = []
    params_total: Positive
    params_active: Positive
    layers: int = Field(gt=0)
    hidden_size: int = Field(gt=0)
    intermediate_size: int = Field(gt=0)
    attention_heads: int = Field(gt=0)
    kv_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    vocab_size: int = Field(gt=0)
    max_context: int = Field(gt=0)
    attention: Literal["mha", "gqa", "mqa", "mla"]
    tie_embeddings: bool = False
    mlp: Literal["gated", "plain"] = "gated"
    active_embeddings: Literal["both", "output", "none"] = "both"
    encoder_params: NonNeg | None = None
    card_rounding: float | None = Field(default=None, gt=0, lt=0.5)
    sliding_window: int | None = Field(default=None, gt=0)
    sliding_window_layers: int | None = Field(default=None, ge=0)
    local_attention: Literal["sliding", "chunked"] | None = None
    attention_layers: int | None = Field(default=None, ge=0)
    kv_shared_layers: int | None = Field(default=None, ge=0)
    per_layer_embedding: PerLayerEmbedding | None = None
    mla: Mla | None = None
    moe: Moe | None = None
    recurrent: Recurrent | None = None
    native_precision: Slug | None = None
    native_source: Slug | None = None
    source: Slug
    notes: str | None = None


class BareSize(Strict):
    references: list[Slug] = Field(min_length=1)


class ModelsFile(Strict):
    models: list[Model]
    bare_size: BareSize


# ---------------------------------------------------------------- formulas.yaml

class Input(Strict):
    unit: Text
    meaning: str


class Constant(Strict):
    value: float = Field(allow_inf_nan=False)
    unit: Text
    meaning: str
    source: Slug


class Case(Strict):
    when: str | None = None
    expr: Text
    note: str | None = None


class Formula(Strict):
    unit: Text
    meaning: str
    expr: Text | None = None
    cases: list[Case] | None = None
    note: str | None = None
    sources: list[Slug] = Field(min_length=1)

    @field_validator("cases")
    @classmethod
    def _cases_end_in_otherwise(cls, cases: list[Case] | None) -> list[Case] | None:
        if cases is not None:
            if not cases:
                raise ValueError("cases needs at least one case")
            if cases[-1].when is not None:
                raise ValueError("the last case needs no 'when' (it is the otherwise case)")
        return cases


class FormulasFile(Strict):
    inputs: dict[str, Input]
    constants: dict[str, Constant]
    formulas: dict[str, Formula]


# ---------------------------------------------------------------- flows/*.yaml

class Edge(Strict):
    to: NodeId
    when: str | None = None
    label: str | None = None


class Node(Strict):
    id: NodeId
    kind: Literal["start", "question", "compute", "verdict"]
    text: str
    compute: list[str] = []
    edges: list[Edge] = []
    style: Literal["compute", "bandwidth", "good", "warn"] | None = None


class SortKey(Strict):               # a figure to order by: flows' ranking, prices' sorts
    by: str
    order: Literal["asc", "desc"]


class Flow(Strict):
    id: Slug
    title: str
    role: Literal["sizing", "advice"]
    order: int
    source: Slug
    entry: NodeId
    ranking: list[SortKey] = []
    nodes: list[Node] = Field(min_length=1)


# ---------------------------------------------------------------- query.yaml

class Defaults(Strict):
    params: Positive
    users: int = Field(gt=0)
    batch: int = Field(gt=0)
    context_tokens: int = Field(gt=0)
    prompt_tokens: int = Field(gt=0)
    output_tokens: int = Field(gt=0)
    seq_len: int = Field(gt=0)
    lora_rank: int = Field(gt=0)
    inference_precision: Slug
    training_precision: Slug
    qlora_precision: Slug
    kv_precision: Slug
    gpu_count: int = Field(gt=0)
    max_gpus: int = Field(gt=0)
    train_tokens: Positive
    checkpointing: bool
    flash_attention: bool
    optimizer: Optimizer
    source: Slug


class Solve(Strict):
    vary: Literal["users", "context_tokens", "params", "gpu_count", "batch"]
    unit: str
    lower: Positive
    upper: Positive
    verdict: str
    holds: str = "fits"                  # the bool formula the value must keep (formulas.yaml)
    verdict_floor: str | None = None     # when the speed floor, not memory, stops the search
    verdict_layout: str | None = None    # when fewer GPUs fit but form no valid layout


LimitName = Literal["users", "batch", "context", "seq", "prompt", "output", "rank", "tokens",
                    "params", "gpu_count", "memory_gb", "parallel", "speed", "duration",
                    "hours_per_day", "usd"]


class Unit(Strict):
    """A unit word and what the number beside it sets (query.yaml `units`)."""
    field: Literal["users", "context_tokens", "seq_len", "batch", "lora_rank", "prompt_tokens",
                   "output_tokens", "tokens", "tp", "pp", "speed_floor_tok_s", "tokens_per_day",
                   "hours_per_day", "duration", "gpu_count"]
    limit: LimitName
    words: list[str] = Field(min_length=1)
    scale: Positive = 1.0
    binary_k: bool = False
    focus: Literal["memory", "speed", "time", "fit", "cost"] | None = None


class Phrase(Strict):
    """Words that set Workload fields (query.yaml `phrases`)."""
    set: dict[Literal["focus", "question", "sort", "rent", "want_options", "sharding", "runtime",
                      "dp_attention", "hours_per_day", "gpu_count", "vs"], str | bool | int | float]
    words: list[str] = Field(min_length=1)


class QueryFile(Strict):
    tasks: dict[str, list[str]]
    task_resolution: dict[str, str] = {}
    training_tasks: list[str]
    inference_tasks: list[str]
    questions: dict[Literal["which_gpu", "max_users", "max_context", "largest_model",
                            "how_many_gpus", "max_batch"], list[str]]
    solve: dict[Literal["max_users", "max_context", "largest_model", "how_many_gpus", "max_batch"], Solve]
    billion: Positive
    limits: dict[LimitName, tuple[NonNeg, Positive]]
    fillers: list[str]
    units: dict[str, Unit] = {}
    ttft_words: list[str] = []
    per_hour_words: list[str] = []
    phrases: list[Phrase] = []
    model_suffixes: list[str] = []
    model_prefixes: list[str] = []
    format_suffixes: dict[str, str] = {}
    gpu_words: list[str] = []
    focus_lead: dict[str, str] = {}
    reference_queries: list[str] = []
    knobs: dict[Literal["checkpointing", "no_checkpointing", "flash", "eager", "adam8bit", "sgd",
                        "adamw", "offload", "fp8_kv", "int8_kv", "optimizer_in_backward", "paged",
                        "lora_attention_only", "quantized_inputs_kept"], list[str]]
    defaults: Defaults


class BandRuntime(Strict):           # one runtime's measurements: how many, median and p90 error
    n: int
    median_pct: NonNeg
    p90_pct: NonNeg


class BandPoint(Strict):
    id: str
    runtime: str = ""
    url: str


class Band(BandRuntime):             # all measurements of a kind of figure, then by runtime
    worst_pct: NonNeg
    by_runtime: dict[str, BandRuntime] = {}
    measurements: list[BandPoint] = []


class ErrorBandsFile(Strict):
    source: Slug
    kinds: dict[Literal["decode_tokens_per_s", "aggregate_tokens_per_s", "prefill_tokens_per_s",
                        "inference_memory", "training_memory", "train_tokens_per_s"], Band]


# ---------------------------------------------------------------- prices.yaml

Month = Annotated[str, Field(pattern=r"^\d{4}(-(0[1-9]|1[0-2])(-(0[1-9]|[12]\d|3[01]))?)?$")]


class CloudPrice(Strict):
    usd_per_hour: Positive
    provider: str
    date: Month
    source: Slug


class Price(Strict):
    gpu: Slug
    purchase_usd: Positive | None
    purchase_kind: Literal["list", "street", "used", "estimate"]
    purchase_date: Month
    purchase_source: Slug
    note: str | None = None
    cloud: list[CloudPrice] = []


class OptionRule(Strict):
    id: Slug
    change: str
    kind: Literal["words", "context", "users", "gpus", "next_card"]
    words: str = ""                 # appended to the query (kind words)
    precision: Slug | None = None   # the weight precision it sets: offered only when it has fewer bits
    tasks: list[Literal["inference", "training", "full_ft", "lora"]]
    quality_rank: Annotated[int, Field(ge=0, le=9)]   # 0: no quality cost; higher costs more
    quality: str
    source: Slug


class CloudRule(Strict):
    """Which of a card's on-demand prices an answer uses, and when the price pages disagree."""
    use: Literal["median", "lowest", "highest"]
    disagree_ratio: Annotated[float, Field(ge=1)]   # highest / lowest at or above this: they disagree
    source: Slug


class Advice(Strict):
    cloud_price: CloudRule
    options: list[OptionRule] = []
    default_sort: SortName
    sorts: dict[SortName, list[SortKey]]
    rent_cost_key: str
    rent_ignores: list[str] = []
    says: dict[str, str]            # each sort key's words in "ranked by value (fits, …, then fastest)"
    max_gpus_per_config: Annotated[int, Field(ge=1, le=64)]
    next_card_tries: Annotated[int, Field(ge=1, le=8)] = 3
    source: Slug


class PricesFile(Strict):
    as_of: Month
    advice: Advice | None = None
    prices: list[Price]


FILES: dict[str, type[BaseModel]] = {
    "sources": SourcesFile,
    "precisions": PrecisionsFile,
    "gpus": GpusFile,
    "models": ModelsFile,
    "formulas": FormulasFile,
    "flow": Flow,
    "query": QueryFile,
    "runtimes": RuntimesFile,
    "error_bands": ErrorBandsFile,
    "prices": PricesFile,
}


def json_schema(name: str) -> dict[str, Any]:
    """The JSON Schema of one rule file kind (a key of FILES)."""
    schema = FILES[name].model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = f"kbq rules: {name}"
    return schema
