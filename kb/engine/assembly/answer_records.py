"""The parts of an Answer as the type checker sees them: typed dicts, no code.

In: nothing. Out: `TypedDict` types for the plain-data parts of a kb.engine.assembly.answer.Answer (its
workload, memory, throughput, bottleneck, the claims checked, the flows' advice, the
recommendation, the prices used, the error bands (kb.knowledge.records.ErrorBand, re-exported), the question solved and the options), keyed
as the `kbq --json` contract writes them.

At run time these are plain dicts built by kb.engine. Import this module only under
`if TYPE_CHECKING:` so that a plain query pays nothing for it.
"""

from __future__ import annotations

from typing import Any

from typing_extensions import NotRequired, TypedDict

from kb.knowledge.records import ErrorBand as ErrorBand  # the knowledge derives it (kb.knowledge.derived)
from kb.knowledge.records import Value


class GpuAsked(TypedDict):          # kb.query.workload.GpuRequest as a dict
    gpu_id: str | None
    count: int
    capacity_gb: float | None


class Compare(TypedDict):
    field: str
    values: list[object]


class WorkloadDict(TypedDict):
    """The answer's workload: kb.query.workload.Workload's fields (but task_explicit and notes) and
    what the engine resolved: the model, its sizes and the parallel layout."""
    task: str
    question: str | None
    model_id: str | None
    params: float | None
    precision: str | None
    kv_precision: str | None
    gpus: list[GpuAsked]
    users: int | None
    batch: int | None
    context_tokens: int | None
    prompt_tokens: int | None
    output_tokens: int | None
    seq_len: int | None
    lora_rank: int | None
    train_tokens: float | None
    fp8_scales: str | None
    checkpointing: bool | None
    flash_attention: bool | None
    optimizer: str | None
    offload: bool | None
    optimizer_in_backward: bool | None
    paged: bool | None
    lora_attention_only: bool | None
    quantized_inputs_kept: bool | None
    runtime: str | None
    tp: int | None
    pp: int | None
    sharding: str | None
    dp_attention: bool | None
    speed_floor_tok_s: float | None
    ttft_max_s: float | None
    ttft_percentile: float | None
    e2e_max_s: float | None
    e2e_percentile: float | None
    tokens_per_day: float | None
    deadline_hours: float | None
    usd_per_gpu_hour: float | None
    budget_usd: float | None
    hours_per_day: float | None
    rent: bool | None
    sort: str | None
    want_options: bool | None
    focus: str | None
    gpu_count: int | None
    objective: str | None
    checkpoint_offload: bool | None
    segments: list[str]                 # the classes of card asked about
    segment: str | None                 # query.yaml situations ("at home")
    compare: Compare | None             # "fp8 vs int4": the field and its values
    size_unnamed: bool                  # params is a size a largest-model search tried
    spec_method: str | None             # speculative decoding: draft eagle eagle3 mtp ngram
    draft_model_id: str | None          # the draft model named ("qwen3-0.6b draft")
    draft_params: float | None          # a draft named by its size ("0.5b draft")
    draft_tokens: int | None            # draft tokens per step asked ("4 draft tokens")
    model: str
    model_name: str
    active_params: float
    parallel: Parallel | None


class Parallel(TypedDict):
    """The layout the answer's GPUs run (kb.engine.resolving.layout.Layout.as_dict); a training job's also says
    its sharding and offload (kb.engine.resolving.training.parallel)."""
    tp: int
    pp: int
    dp: int
    sharding: NotRequired[str | None]
    offload: NotRequired[bool]


class MemoryExtras(TypedDict):
    """The training memory keys (kb.engine.resolving.training.memory_extras); None for inference."""
    host_ram_gb: float | None
    sharding: str | None
    zero_stage: int | None
    per_gpu_breakdown: dict[str, float | None] | None


class Memory(MemoryExtras):
    total_gb: float | None
    breakdown: dict[str, float | None]          # kb.engine.assembly.assemble.BREAKDOWN → GB
    per_gpu_gb: float | None
    kv_cache_gb_per_user: float | None
    gpu: str | None
    gpu_count: int | None


class Throughput(TypedDict):
    decode_tokens_per_s: float | None
    decode_tokens_per_s_aggregate: float | None
    prefill_tokens_per_s: float | None
    ttft_s: float | None
    train_tokens_per_s: float | None
    train_time_s: float | None
    # under load: continuous batching with the arriving prompts counted (formulas.yaml serving_*)
    serving_tokens_per_s_per_user: NotRequired[float | None]
    serving_tokens_per_s_per_gpu: NotRequired[float | None]
    serving_ttft_s: NotRequired[float | None]
    serving_requests_per_s: NotRequired[float | None]


class Bottleneck(TypedDict):
    """What bounds each phase: "memory-bound" or "compute-bound" (None without a figure);
    decode and prefill for inference, training for a training job."""
    decode: NotRequired[str | None]
    prefill: NotRequired[str | None]
    training: NotRequired[str | None]
    arithmetic_intensity: dict[str, float | None]   # phase → FLOP per byte
    ridge_point: float | None
    gpu: str | None
    gpu_id: str | None


class ClaimChecked(TypedDict):
    """A source's claim against the engine's figure (Answer.disagreements, .claims_checked)."""
    id: str
    source: str
    source_title: str | None
    claim: str
    claimed: float | list[float] | None         # a figure, or a [low, high] range (None: a flowchart's outcome)
    computed: float | None
    unit: str
    difference_pct: float | None
    agrees: bool
    gpu: str | None
    formula: str
    note: str
    rule: str


class Advice(TypedDict):
    """Where an advice flow's walk ended (Answer.advice)."""
    flow: str
    title: str
    source: str
    conclusion: str
    node: str


class Brief(TypedDict):
    """One configuration of a recommendation."""
    gpu: str
    gpu_id: str
    count: int
    price_usd: float | None
    usd_per_hour: float | None
    meets_target: bool | None
    headroom_gb: float | None


class Recommendation(TypedDict):
    pick: Brief
    runners_up: dict[str, Brief]                # class (consumer, datacenter, cloud…) → config
    sort: str | None
    why: str


class PriceUsed(TypedDict):
    purchase_usd: float | None
    purchase_kind: str | None
    purchase_date: str | None
    purchase_source: str | None
    cloud_usd_per_hour: float | None
    cloud_rule: str | None
    cloud_low: float | None
    cloud_high: float | None
    cloud_pages: int | None
    cloud_disagree: bool | None
    cloud: list[str]
    file: str | None


class PricesUsed(TypedDict, total=False):      # {} in a brief answer (kb.engine.advising.options)
    as_of: str | None
    usd_per_gpu_hour: float | None
    budget_usd: float | None
    hours_per_day: float | None
    rent: bool
    gpus: dict[str, PriceUsed]


class PerGpuValue(TypedDict):
    gpu: str
    gpu_id: str
    value: float | None


class Question(TypedDict):
    """The question an answer solved (Answer.question): a capacity question's value and how
    it was found on each GPU, or which GPU ranks first."""
    kind: str
    vary: str | None
    unit: str | None
    value: float | str | None
    gpu: str | None
    answer: NotRequired[dict[str, Value]]     # kb.engine.search.solve.solve_row
    per_gpu: NotRequired[list[PerGpuValue]]
    ranking: NotRequired[list[str]]
    # what kb.engine.verdicts.verdict composes the verdict from, besides the rows and the recommendation
    focus: NotRequired[str | None]              # the figure asked for first (Workload.focus)
    outcome: NotRequired[str | None]            # the sizing flow's verdict node reached
    outcome_text: NotRequired[str | None]       # that node's text, filled in
    unknown: NotRequired[str | None]            # why a deciding figure is unknown (kb.engine.verdicts.unknown)
    total_gb: NotRequired[float | None]
    fitting_gpus: NotRequired[float | None]
    gpu_candidates: NotRequired[int]
    fewest_gpus_needed: NotRequired[float | None]
    fewest_by_memory: NotRequired[int | None]   # how_many_gpus: the fewest by memory alone
    model_max_context: NotRequired[int]         # max_context: the model's own limit, when memory allows more
    memory_allows: NotRequired[float]
    lower: NotRequired[float]
    upper: NotRequired[float]
    note: NotRequired[str | None]
    one_user_usd_per_million: NotRequired[float]    # cost priced loaded (kb.engine.resolving.cost_batch): one user's
    per_card: NotRequired[dict[str, str]]       # a ranking's runtime and format per card (kb.engine.advising.per_card)
    value_b: NotRequired[float]                 # largest_model: the value and the next, in billions
    next_b: NotRequired[float]
    best_models: NotRequired[list[dict[str, Any]]]     # largest_model asked as 'best model': the ranked models that fit
    best_models_use: NotRequired[str]                   # the use asked (query.yaml best_models.uses; general)
    best_models_ranking: NotRequired[dict[str, str]]    # the ranking used: its use, text and source
    # how_many_gpus for a fleet no count serves: the fastest one replica serves one user
    # (kb.engine.search.replicas.fastest_one_user: tp, pp, dp_attention, tokens_per_s_per_user, ttft_s)
    fastest_one_user: NotRequired[dict[str, Any] | None]


class Outcome(TypedDict):
    """Where the sizing flow ended (kb.engine.run)."""
    outcome: str | None
    outcome_text: str | None
    unknown: str | None


class Option(TypedDict):
    """One change that would make it fit, answered (kb.engine.advising.options)."""
    change: str
    change_only: str
    workload_changes: dict[str, object]         # workload key → its new value (or the GPUs)
    fits: bool
    per_gpu_gb: float | None
    total_gb: float | None
    gpu: str
    gpu_id: str
    count: int
    quality: str
    quality_source: str
    query: str
    meets_target: bool | None
    train_tokens_per_s: NotRequired[float | None]
    run_cost_usd: NotRequired[float | None]
    decode_tokens_per_s: NotRequired[float | None]
    usd_per_million_tokens: NotRequired[float | None]
    _rank: NotRequired[int]                     # the sort keys, dropped once sorted
    _hardware: NotRequired[int]
    _price: NotRequired[float | None]


class ReplicaLayout(TypedDict):
    """One replica's split: tensor-parallel GPUs, pipeline stages, data-parallel attention."""
    tp: int
    pp: int
    dp_attention: bool
    gpus: int


class Disaggregated(TypedDict):
    """The same load on separate prefill and decode workers (kb.engine.search.replicas.disaggregated)."""
    gpus: int
    decode_replicas: int
    decode_layout: ReplicaLayout
    decode_gpus: int
    prefill_gpus: int
    users_per_decode_replica: int
    tokens_per_s_per_user: float | None
    ttft_s: float | None
    kv_transfer_s: float | None
    requests_per_s: float | None
    tokens_per_s_per_gpu: float | None
    fewer_gpus: bool


class Replicas(TypedDict):
    """Serving many users as replicas of a layout (kb.engine.search.replicas): the fleet and its figures
    under load (continuous batching, the prompts counted)."""
    gpu_id: str
    gpus: int
    replicas: int
    layout: ReplicaLayout
    nodes: int
    users: int
    users_per_replica: int
    most_users_per_replica: int
    tokens_per_s_per_user: float | None
    tpot_s: float | None
    ttft_s: float | None
    latency_s: float | None
    requests_per_s: float | None
    output_tokens_per_s: float | None
    tokens_per_s_per_gpu: float | None
    prefill_share: float | None
    usd_per_hour: float | None
    usd_per_million_tokens: float | None
    buy_usd: float | None               # modules in the servers they need (formulas.yaml config_price_usd)
    binds: str
    disaggregated: Disaggregated | None  # prefill and decode on separate workers, when it meets the targets


class Side(TypedDict):
    """One side of a comparison ("fp8 vs int4"): the value and its answer's figures (kb.engine.advising.compare)."""
    field: str
    value: object
    query: str
    verdict: str
    fits: bool | None
    gpu: str | None
    count: int | None
    total_gb: float | None
    per_gpu_gb: float | None
    usable_vram_gb: NotRequired[float | None]   # of the GPU row: what per_gpu_gb is held against
    gpus_needed: NotRequired[int | None]        # the fewest cards by memory, when it does not fit
    quality_rank: NotRequired[int | None]       # a precision's quality cost as the rules rank it (0: none)
    precision: NotRequired[str | None]          # the weight format the side was sized at
    decode_tokens_per_s: float | None
    prefill_tokens_per_s: float | None
    train_tokens_per_s: float | None
    usd_per_million_tokens: float | None
    run_cost_usd: float | None
    replicas: NotRequired[Replicas | None]      # a fleet's plan, when cards are compared as fleets


class ModelSource(TypedDict):
    """Where the model of an answer came from when models.yaml does not hold it: a config.json
    read from the Hugging Face Hub (kind "hub", at the commit `revision` of the cache) or given
    with --model-config (kind "config.json")."""
    kind: str                       # "hub" or "config.json"
    model_id: str                   # the id the answer's workload names it by
    repo_id: str | None             # the Hub id, as the query named it
    revision: str | None            # the commit hash of the snapshot read
    config_path: str                # the config.json read (in the Hugging Face cache for "hub")
    params_from: str                # "headers", "index" or "shapes" (kb.engine.resolving.hfconfig.COUNTED_BY)
    params_total: float
    dtypes: dict[str, int] | None   # tensor type → elements, from the cached safetensors headers
