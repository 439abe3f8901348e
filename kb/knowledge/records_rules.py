"""The records of formulas.yaml, query.yaml, error_bands.yaml and prices.yaml as the type
checker sees them: typed dicts, no code (the catalogue's records are in kb.knowledge.records).

In: nothing. Out: `TypedDict` types keyed as kb.knowledge.schema dumps those files' models. Import this
module only under `if TYPE_CHECKING:`, as kb.knowledge.records.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict


# ---------------------------------------------------------------- formulas.yaml

class Input(TypedDict):
    unit: str
    meaning: str


class Constant(TypedDict):
    value: float
    unit: str
    meaning: str
    source: str


# ---------------------------------------------------------------- query.yaml

class Defaults(TypedDict):
    params: float
    users: int
    batch: int
    context_tokens: int
    prompt_tokens: int
    output_tokens: int
    seq_len: int
    lora_rank: int
    inference_precision: str
    training_precision: str
    qlora_precision: str
    kv_precision: str
    gpu_count: int
    max_gpus: int
    train_tokens: float
    checkpointing: bool
    flash_attention: bool
    optimizer: str
    source: str


class Solve(TypedDict):
    vary: Literal["users", "context_tokens", "params", "gpu_count", "batch"]
    unit: str
    lower: float
    upper: float
    verdict: str
    holds: str
    verdict_floor: str | None
    verdict_layout: str | None


class Unit(TypedDict):
    field: str
    limit: str
    words: list[str]
    scale: float
    binary_k: bool
    focus: str | None
    alone: str | None


class CostPer(TypedDict):
    words: list[str]
    units: list[str]
    focus: str


class Situation(TypedDict):
    words: list[str]
    segments: list[str]
    runtime: str | None
    precision: str | None
    text: str
    source: str


class QuestionFormat(TypedDict):
    questions: list[str]
    sorts: list[str] | None
    min_users: int
    max_users: int | None
    segments: list[str] | None
    precision: str
    runtime: str | None
    named_runtimes: list[str]
    text: str
    source: str


class CostBatch(TypedDict):
    solve: str
    text: str
    source: str


class Phrase(TypedDict):
    set: dict[str, str | bool | int | float]
    words: list[str]


class QueryRules(TypedDict):
    tasks: dict[str, list[str]]
    task_resolution: dict[str, str]
    training_tasks: list[str]
    inference_tasks: list[str]
    questions: dict[str, list[str]]
    solve: dict[str, Solve]
    billion: float
    limits: dict[str, tuple[float, float]]
    fillers: list[str]
    units: dict[str, Unit]
    ttft_words: list[str]
    per_hour_words: list[str]
    number_words: dict[str, float]
    cost_per: CostPer | None
    cost_batch: CostBatch | None
    situations: dict[str, Situation]
    question_formats: list[QuestionFormat]
    phrases: list[Phrase]
    model_suffixes: list[str]
    model_prefixes: list[str]
    model_variants: list[str]
    format_suffixes: dict[str, str]
    gpu_words: list[str]
    focus_lead: dict[str, str]
    reference_queries: list[str]
    knobs: dict[str, list[str]]
    defaults: Defaults


# ---------------------------------------------------------------- error_bands.yaml

class BandRuntime(TypedDict):
    n: int
    median_pct: float
    p90_pct: float


class BandPoint(TypedDict):
    id: str
    runtime: str
    url: str


class Band(BandRuntime):
    worst_pct: float
    by_runtime: dict[str, BandRuntime]
    measurements: list[BandPoint]


class ErrorBands(TypedDict, total=False):       # {} without rules/error_bands.yaml
    source: str
    kinds: dict[str, Band]


# ---------------------------------------------------------------- prices.yaml

class CloudPrice(TypedDict):
    usd_per_hour: float
    provider: str
    date: str
    source: str


class Price(TypedDict):
    """A prices.yaml entry with the cloud price an answer uses and the spread behind it
    (kb.knowledge.prices.table), and the file it came from when another was given (kb.knowledge.prices.with_prices)."""
    gpu: str
    purchase_usd: float | None
    purchase_kind: Literal["list", "street", "used", "estimate"]
    purchase_date: str
    purchase_source: str
    note: str | None
    cloud: list[CloudPrice]
    cloud_usd_per_hour: float | None
    cloud_rule: str
    cloud_low: float | None
    cloud_high: float | None
    cloud_pages: int
    cloud_disagree: bool | None
    as_of: str
    file: NotRequired[str | None]


class SortKey(TypedDict):
    by: str
    order: Literal["asc", "desc"]


class OptionRule(TypedDict):
    id: str
    change: str
    kind: Literal["words", "context", "users", "gpus", "next_card"]
    words: str
    precision: str | None
    tasks: list[str]
    quality_rank: int
    quality: str
    source: str


class CloudRule(TypedDict):
    use: Literal["median", "lowest", "highest"]
    disagree_ratio: float
    source: str


class PriceAdvice(TypedDict, total=False):           # {} without an advice section
    cloud_price: CloudRule
    options: list[OptionRule]
    default_sort: str
    sorts: dict[str, list[SortKey]]
    rent_cost_key: str
    rent_ignores: list[str]
    training_only: list[str]
    untargeted_training_ignores: dict[str, list[str]]
    says: dict[str, str]
    max_gpus_per_config: int
    next_card_tries: int
    source: str
