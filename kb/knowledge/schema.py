"""The shape of every rule file, as pydantic models (unknown keys are errors).

In: plain data from YAML (kb.knowledge.loader). Out: validated models, and the JSON Schema of each file
(`kbq schema NAME`, committed under rules/schema/). Cross-file checks (names that resolve,
units that agree, flows that are sound) are in kb.knowledge.build, not here.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, field_validator

from kb.knowledge.schema_base import (Count, Month, Name, NodeId, NonNeg, Optimizer, Positive,
                                      PurchaseUsd, Slug, SortKey, SortName, Strict, Text, UsdPerHour)
from kb.knowledge.schema_catalogue import (BareSize, Claim, ConfigDefaults, Gpu, GpusFile, Interconnect, Mla, Model,
                                 ModelsFile, Moe, Objective, PerLayerEmbedding, Precision,
                                 PrecisionsFile, Recipe, RecipeSet, RecipeWhen, Recurrent,
                                 Runtime, RuntimeDefaults, RuntimesFile, Sharding, ShardingFile,
                                 Source, SourcesFile, TensorPrecision, TensorTflops)

# The catalogue files' models (kb.knowledge.schema_catalogue) and the shared types (kb.knowledge.schema_base), read
# from here as from one module.
__all__ = ["BareSize", "Claim", "ConfigDefaults", "Gpu", "GpusFile", "Interconnect", "Mla", "Model", "ModelsFile",
           "Moe", "Objective", "PerLayerEmbedding", "Precision", "PrecisionsFile", "Recipe",
           "RecipeSet", "RecipeWhen", "Recurrent", "Runtime", "RuntimeDefaults", "RuntimesFile",
           "Sharding", "ShardingFile", "Source", "SourcesFile", "TensorPrecision", "TensorTflops",
           "Month", "Name", "NodeId", "NonNeg", "Optimizer", "Positive", "PurchaseUsd", "Slug",
           "SortKey", "SortName", "Strict", "Text", "UsdPerHour", "FILES", "json_schema"]


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
    inputs: dict[Name, Input]
    constants: dict[Name, Constant]
    formulas: dict[Name, Formula]


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
    users: Count
    batch: Count
    context_tokens: Count
    prompt_tokens: Count
    output_tokens: Count
    seq_len: Count
    lora_rank: Count
    inference_precision: Slug
    training_precision: Slug
    qlora_precision: Slug
    kv_precision: Slug
    gpu_count: Count
    max_gpus: Count
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
                   "hours_per_day", "duration", "gpu_count", "budget_usd"]
    limit: LimitName
    words: list[Name] = Field(min_length=1)
    scale: Positive = 1.0
    binary_k: bool = False
    focus: Literal["memory", "speed", "time", "fit", "cost"] | None = None
    alone: Literal["filler"] | None = None      # the word without a number: a filler


class CostPer(Strict):
    """Words that make a number and its unit the quantity priced (query.yaml `cost_per`)."""
    words: list[str] = Field(min_length=1)
    units: list[str] = Field(min_length=1)
    focus: Literal["memory", "speed", "time", "fit", "cost"]


class Situation(Strict):
    """Where a question is asked from (query.yaml `situations`)."""
    words: list[str] = Field(min_length=1)
    segments: list[Literal["datacenter", "workstation", "consumer", "apple"]] = Field(min_length=1)
    runtime: str | None = None
    precision: str | None = None
    text: str
    source: str


class Phrase(Strict):
    """Words that set Workload fields (query.yaml `phrases`)."""
    set: dict[Literal["focus", "question", "sort", "rent", "want_options", "sharding", "runtime",
                      "dp_attention", "hours_per_day", "gpu_count", "vs"], str | bool | int | float]
    words: list[Name] = Field(min_length=1)


class QueryFile(Strict):
    tasks: dict[Name, list[Name]]
    task_resolution: dict[Name, Name] = {}
    training_tasks: list[Name]
    inference_tasks: list[Name]
    questions: dict[Literal["which_gpu", "max_users", "max_context", "largest_model",
                            "how_many_gpus", "max_batch"], list[Name]]
    solve: dict[Literal["max_users", "max_context", "largest_model", "how_many_gpus", "max_batch"], Solve]
    billion: Positive
    limits: dict[LimitName, tuple[NonNeg, Positive]]
    fillers: list[Name]
    units: dict[Name, Unit] = {}
    ttft_words: list[Name] = []
    per_hour_words: list[Name] = []
    number_words: dict[Name, Positive] = {}
    cost_per: CostPer | None = None
    situations: dict[Name, Situation] = {}
    phrases: list[Phrase] = []
    model_suffixes: list[Name] = []
    model_prefixes: list[Name] = []
    format_suffixes: dict[Name, Name] = {}
    gpu_words: list[Name] = []
    focus_lead: dict[str, str] = {}
    reference_queries: list[str] = []
    knobs: dict[Literal["checkpointing", "no_checkpointing", "flash", "eager", "adam8bit", "sgd",
                        "adamw", "offload", "fp8_kv", "int8_kv", "optimizer_in_backward", "paged",
                        "lora_attention_only", "quantized_inputs_kept"], list[Name]]
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



class CloudPrice(Strict):
    usd_per_hour: UsdPerHour
    provider: str
    date: Month
    source: Slug


class Price(Strict):
    gpu: Slug
    purchase_usd: PurchaseUsd | None
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
    disagree_ratio: Annotated[float, Field(ge=1, allow_inf_nan=False)]   # highest / lowest at or above this: they disagree
    source: Slug


class Advice(Strict):
    cloud_price: CloudRule
    options: list[OptionRule] = []
    default_sort: SortName
    sorts: dict[SortName, list[SortKey]]
    rent_cost_key: str
    rent_ignores: list[str] = []
    training_only: list[str] = []   # keys read only when ranking a training job
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
