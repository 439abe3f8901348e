"""The shape of rules/query.yaml, the query language's words and defaults, as pydantic models
(unknown keys are errors); kb.knowledge.schema reads it from here with the other files' models.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from kb.knowledge.kinds import Segment
from kb.knowledge.schema_base import Count, Name, NonNeg, Optimizer, Positive, Slug, Strict


class DefaultsSchema(Strict):
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


class SolveSchema(Strict):
    vary: Literal["users", "context_tokens", "params", "gpu_count", "batch"]
    unit: str
    lower: Positive
    upper: Positive
    verdict: str
    holds: str = "fits"                  # the bool formula the value must keep (formulas.yaml)
    verdict_floor: str | None = None     # when the speed floor, not memory, stops the search
    verdict_layout: str | None = None    # when fewer GPUs fit but form no valid layout
    verdict_replicas: str | None = None  # serving: replicas of a layout (kb.engine.replicas)
    verdict_disaggregated: str | None = None  # ...and prefill on workers of its own, when that takes fewer GPUs


LimitName = Literal["users", "batch", "context", "seq", "prompt", "output", "rank", "tokens",
                    "params", "gpu_count", "memory_gb", "parallel", "speed", "duration",
                    "hours_per_day", "usd", "examples", "epochs", "requests"]


class UnitSchema(Strict):
    """A unit word and what the number beside it sets (query.yaml `units`)."""
    field: Literal["users", "context_tokens", "seq_len", "batch", "lora_rank", "prompt_tokens",
                   "output_tokens", "tokens", "tp", "pp", "speed_floor_tok_s", "tokens_per_day",
                   "hours_per_day", "duration", "gpu_count", "budget_usd", "examples", "epochs", "requests_per_day"]
    limit: LimitName
    words: list[Name] = Field(min_length=1)
    # words that are this unit only right after a number ('2k in', '500 out'); anywhere else
    # they keep their own meaning (the filler 'in' of 'in 24 hours')
    after_number: list[Name] = []
    scale: Positive = 1.0
    binary_k: bool = False
    focus: Literal["memory", "speed", "time", "fit", "cost"] | None = None
    alone: Literal["filler", "time", "one"] | None = None  # the word without a number: a filler, or asks the time
    # 'how many' before the word without a number asks this capacity question ('how many concurrent users')
    asks: Literal["max_users", "max_batch"] | None = None


class CostPerSchema(Strict):
    """Words that make a number and its unit the quantity priced (query.yaml `cost_per`)."""
    words: list[str] = Field(min_length=1)
    units: list[str] = Field(min_length=1)
    focus: Literal["memory", "speed", "time", "fit", "cost"]


class SituationSchema(Strict):
    """Where a question is asked from (query.yaml `situations`)."""
    words: list[str] = Field(min_length=1)
    segments: list[Segment] = Field(min_length=1)
    runtime: str | None = None
    precision: str | None = None
    text: str
    source: str


class QuestionFormatSchema(Strict):
    """The weight format a question is sized at when it names none (query.yaml `question_formats`):
    the first rule whose `questions`, `sorts`, user range and card segments match."""
    questions: list[Literal["which_gpu", "largest_model", "how_many_gpus"]] = Field(min_length=1)
    sorts: list[str] | None = None          # the ranking asked for ("cheapest": cost); None: any
    min_users: int = 1
    max_users: int | None = None
    segments: list[Segment | Literal["any"]] | None = None
    precision: str
    runtime: str | None = None              # the runtime it sizes under when none is named
    named_runtimes: list[str] = []          # runtimes a question may name for the rule to apply
    text: str
    source: str


class CostBatchSchema(Strict):
    """The batch a serving cost question that names no user count is priced at (query.yaml
    `cost_batch`): the capacity question `solve` answers on the configuration asked."""
    solve: Literal["max_users"]
    text: str
    source: str


class PhraseSchema(Strict):
    """Words that set Workload fields (query.yaml `phrases`)."""
    set: dict[Literal["focus", "question", "sort", "rent", "want_options", "sharding", "runtime",
                      "dp_attention", "hours_per_day", "gpu_count", "vs", "ttft_percentile"], str | bool | int | float]
    words: list[Name] = Field(min_length=1)


class LocalFallbackSchema(Strict):
    """A plain question about one person's own card that names no format or runtime, whose 16-bit
    default does not fit the card: answered at the format people run there (query.yaml
    `local_fallback`), the 16-bit figure said first."""
    segments: list[Segment] = Field(min_length=1)
    max_users: int = 1
    precision: str
    text: str
    source: str


class UnnamedModelSchema(Strict):
    """The model a question that compares cards or asks which card to buy is sized on when it names
    none (query.yaml `unnamed_model`): the model those cards' published benchmarks use."""
    segments: list[Segment | Literal["any"]] = Field(min_length=1)
    model: Name
    precision: str | None = None
    runtime: str | None = None
    text: str
    source: str


class QueryFile(Strict):
    tasks: dict[Name, list[Name]]
    task_resolution: dict[Name, Name] = {}
    training_tasks: list[Name]
    inference_tasks: list[Name]
    questions: dict[Literal["which_gpu", "max_users", "max_context", "largest_model",
                            "how_many_gpus", "max_batch"], list[Name]]
    solve: dict[Literal["max_users", "max_context", "largest_model", "how_many_gpus", "max_batch"], SolveSchema]
    billion: Positive
    limits: dict[LimitName, tuple[NonNeg, Positive]]
    fillers: list[Name]
    units: dict[Name, UnitSchema] = {}
    ttft_words: list[Name] = []
    # words that make a duration the bound on a request's end-to-end latency ('e2e under 10 s')
    e2e_words: list[Name] = []
    # a label before 'prompt/output' lengths written as one pair ('in/out 2000/500', 'ISL/OSL 4000/500')
    length_pair_words: list[Name] = []
    per_hour_words: list[Name] = []
    budget_words: list[Name] = []
    number_words: dict[Name, Positive] = {}
    size_words: list[Name] = []
    cost_per: CostPerSchema | None = None
    cost_batch: CostBatchSchema | None = None
    situations: dict[Name, SituationSchema] = {}
    question_formats: list[QuestionFormatSchema] = []
    local_fallback: LocalFallbackSchema | None = None
    unnamed_model: list[UnnamedModelSchema] = []
    phrases: list[PhraseSchema] = []
    model_suffixes: list[Name] = []
    model_prefixes: list[Name] = []
    model_variants: list[Name] = []
    format_suffixes: dict[Name, Name] = {}
    gpu_words: list[Name] = []
    focus_lead: dict[str, str] = {}
    reference_queries: list[str] = []
    knobs: dict[Literal["checkpointing", "no_checkpointing", "flash", "eager", "adam8bit", "sgd",
                        "adamw", "offload", "fp8_kv", "int8_kv", "optimizer_in_backward", "paged",
                        "lora_attention_only", "quantized_inputs_kept"], list[Name]]
    defaults: DefaultsSchema
