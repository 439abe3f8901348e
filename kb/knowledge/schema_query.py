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
    host_memory_gb: Positive | None = None      # the host's memory an offload word assumes when none is named
    host_memory_source: Slug | None = None
    source: Slug


class SolvePrecisionSchema(Strict):
    """How finely a search over a continuous value (the parameters of the largest model) is
    carried (query.yaml solve.largest_model.precision), and why."""
    digits: int = Field(ge=1)           # significant digits the answer keeps, rounded down
    tolerance: Positive                 # the bisection stops when high / low is at most this
    next_ratio: Positive                # "the next size up" the verdict weighs is value × this
    reason: str = Field(min_length=1)


class SolveSchema(Strict):
    vary: Literal["users", "context_tokens", "params", "gpu_count", "batch"]
    unit: str
    lower: Positive
    upper: Positive
    verdict: str
    holds: str = "fits"                  # the bool formula the value must keep (formulas.yaml)
    verdict_floor: str | None = None     # when the speed floor, not memory, stops the search
    verdict_layout: str | None = None    # when fewer GPUs fit but form no valid layout
    verdict_replicas: str | None = None  # serving: replicas of a layout (kb.engine.search.replicas)
    verdict_disaggregated: str | None = None  # ...and prefill on workers of its own, when that takes fewer GPUs
    precision: SolvePrecisionSchema | None = None   # a continuous value (params): how fine


LimitName = Literal["users", "batch", "context", "seq", "prompt", "output", "rank", "tokens",
                    "params", "gpu_count", "memory_gb", "parallel", "speed", "duration",
                    "hours_per_day", "usd", "examples", "epochs", "requests", "draft_tokens", "layers"]


class UnitSchema(Strict):
    """A unit word and what the number beside it sets (query.yaml `units`)."""
    field: Literal["users", "context_tokens", "seq_len", "batch", "lora_rank", "prompt_tokens",
                   "output_tokens", "tokens", "tp", "pp", "speed_floor_tok_s", "tokens_per_day",
                   "hours_per_day", "duration", "gpu_count", "budget_usd", "examples", "epochs", "requests_per_day",
                   "draft_tokens", "offload_layers", "gpu_layers", "cpu_moe_layers",
                   "dp", "ep", "etp", "dep", "replicas"]
    limit: LimitName
    words: list[Name] = Field(min_length=1)
    # words that are this unit only right after a number ('2k in', '500 out'); anywhere else
    # they keep their own meaning (the filler 'in' of 'in 24 hours')
    after_number: list[Name] = []
    # words that are this unit beside a number ('responses 400 tokens', '500 responses'); alone
    # ('short responses') they are no unit, but a filler
    beside_number: list[Name] = []
    scale: Positive = 1.0
    binary_k: bool = False
    focus: Literal["memory", "speed", "time", "fit", "cost"] | None = None
    # the word without a number: a filler, asks the time, one of it, spans every GPU named, offload
    # asked, or a replica's layout split over its attention GPUs ('expert parallel')
    alone: Literal["filler", "time", "one", "all", "offload", "replica"] | None = None
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


class FleetKvSchema(Strict):
    """The KV-cache format a fleet is sized at when the query names none (query.yaml `fleet_kv`):
    a how-many question serving several users at one of the `weights` formats, under one of the
    `runtimes` (or none named), on cards with a tensor rate in `kv`."""
    weights: list[str] = Field(min_length=1)     # precision ids whose served checkpoints carry the KV format
    kv: str                                      # the KV cache's precision id
    runtimes: list[str] = Field(min_length=1)    # runtimes that load the checkpoint's KV format as published
    text: str
    source: str


class CostBatchSchema(Strict):
    """The batch a serving cost question that names no user count is priced at (query.yaml
    `cost_batch`): the capacity question `solve` answers on the configuration asked."""
    solve: Literal["max_users"]
    text: str
    source: str


class HfQuantizationRuleSchema(Strict):
    """One row of query.yaml `hf_quantization.rules`: a checkpoint's config.json
    quantization_config that matches every condition given is stored in `precision` (in
    `moe_precision` for a mixture of experts, when given). Rows are tried in order."""
    quant_method: str | None = None         # quantization_config.quant_method
    fmt_prefix: str | None = None           # quantization_config.fmt starts with it (lower case)
    bits: int | None = None                 # quantization_config.bits
    flag: str | None = None                 # a true flag of quantization_config (load_in_4bit)
    weight_bits: int | None = None          # compressed-tensors: some config_groups' weights.num_bits
    weight_type: str | None = None          # … whose weights.type is this
    precision: Slug
    moe_precision: Slug | None = None


class HfQuantizationSchema(Strict):
    """How a Hugging Face checkpoint's quantization_config names its stored format (query.yaml
    `hf_quantization`): the rows, first match wins; no match is a 16-bit checkpoint or a format
    kbq has no entry for."""
    rules: list[HfQuantizationRuleSchema] = Field(min_length=1)
    source: Slug


class ThresholdSchema(Strict):
    """A limit of the verdict's policy and why it has that value (query.yaml `verdict`)."""
    value: Positive
    reason: str = Field(min_length=1)


class VerdictTemplatesSchema(Strict):
    """The verdict's sentences (query.yaml `verdict.templates`): str.format templates whose
    named fields the code fills (kb/engine/verdict*.py, unknown.py)."""
    sides_on: str
    sides_head: str
    sides_where: str
    sides_held: str
    sides_no_fit: str
    sides_memory: str
    sides_figure: str
    sides_fits: str
    sides_held_each: str
    sides_none_fit: str
    sides_only: str
    sides_cheaper: str
    sides_faster: str
    sides_less_memory: str
    sides_quality: str
    sides_even: str
    sides_both: str
    fix_first: str
    fix_more: str
    misses_target: str
    compare_none: str
    compare_only: str
    compare_faster: str
    compare_faster_cheaper: str
    compare_same_speed: str
    compare_cheaper: str
    compare_tie: str
    none_fit: str
    none_fit_fewest: str
    solved_floor_at_lower: str
    solved_memory_alone: str
    solved_no_count: str
    solved_no_count_fastest: str = ""
    solved_no_fit: str
    solved_largest_model: str
    solved_best_model: str = ""
    solved_model_max_context: str
    solved_memory_allows: str
    solved_max_context: str
    solved_each_at: str
    solved_max_users: str
    solved_value: str
    solved_floor_binds: str
    solved_binds: str
    solved_stops: str
    count_holds: str
    count_memory_alone: str
    count_layout: str
    count_target: str
    count_memory_binds: str
    count_speed: str
    unknown: str
    borderline: str
    tight: str
    tight_more_context: str
    tight_training: str
    tight_inference: str
    roomier: str
    config: str
    speed_training: str
    speed_decode: str
    speed_line: str
    rate_training: str
    rate_decode: str
    lead_memory: str
    lead_memory_each: str
    lead_memory_parts: str
    lead_memory_part: str
    lead_speed_prefill: str
    lead_speed_training: str
    lead_speed_decode: str
    lead_time_training: str
    lead_time_paid: str
    lead_time_gpu_hours: str
    lead_time_rented: str
    lead_time_fits: str
    lead_ttft: str
    offloaded: str
    withheld: str
    withheld_decode: str
    withheld_training: str
    withheld_prefill: str
    cost_run: str
    cost_tokens: str
    cost_tokens_most: str
    word_user: str
    word_users: str
    cost_month: str
    cost_buy: str
    cost_buy_payback: str
    price_run: str
    price_hour: str
    price_server: str
    price_servers: str
    module_lacks: str
    compare_memory: str
    compare_memory_tight: str
    compare_line: str
    compare_no_fit: str
    which_pick: str
    which_cheapest: str
    which_fastest: str
    which_figures: str
    which_cost: str
    said_format: str
    said_runtime: str
    alt_faster: str
    alt_cheaper: str
    alt_cheaper_tight: str
    alt_rent: str
    target_deadline: str
    target_speed: str
    target_ttft: str
    target_first_token: str = ""
    target_percentile: str = ""
    target_volume: str = ""
    target_e2e: str
    no_count: str
    no_count_memory: str
    layout_tp: str
    layout_pp: str
    layout_dp_attention: str
    fleet_one_replica: str
    fleet_binds: str
    fleet_per_hour: str
    fleet_side: str
    fleet_side_unserved: str
    fleet_side_unserved_too: str
    fleet_fewer: str
    fleet_cheaper: str
    fleet_even: str
    assumption_layout: str
    layout_past_node: str
    layout_heads: str
    layout_tp_heads: str
    layout_tp_node: str
    layout_tp_count: str
    layout_fallback: str
    layout_model_parallel: str
    counts_one_short: str
    counts_neither: str
    counts_none: str
    counts_fallback: str
    counts_short: str
    counts_fallback_note: str
    counts_fewest: str
    counts_fewest_also: str
    counts_fewest_note: str


class VerdictSchema(Strict):
    """The verdict's policy (query.yaml `verdict`): its word limit, the leads an A vs B verdict
    names, and the wording of its sentences."""
    max_words: ThresholdSchema
    faster_ratio: ThresholdSchema
    less_memory_fraction: ThresholdSchema
    most_fixes: ThresholdSchema
    most_alternatives: ThresholdSchema
    memory_parts_named: ThresholdSchema
    # tensor formats a module (SXM, OAM) proposed to a buyer is said to lack when its tensor cores
    # have no rate in them (an old V100 SXM2: no BF16, no FP8)
    module_formats: list[str] = []
    templates: VerdictTemplatesSchema


class BackendSchema(Strict):
    """A GPU backend named in words (query.yaml `backends`): its name, the runtime build that
    runs it for each runtime named ('none': no runtime named), and where that comes from."""
    name: str
    platforms: list[Name] = []
    runtimes: dict[Name, Name] = {}
    source: Name


class PhraseSchema(Strict):
    """Words that set Workload fields (query.yaml `phrases`)."""
    set: dict[Literal["focus", "question", "sort", "rent", "want_options", "sharding", "runtime",
                      "dp_attention", "hours_per_day", "gpu_count", "vs", "ttft_percentile", "backend", "host_offload", "experts_on_cpu", "host_channels",
                      "fp8_scales"], str | bool | int | float]
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


class RankedModelSchema(Strict):
    """One model of a ranking (query.yaml best_models.rankings): its catalogue id and its score."""
    model: Name
    score: float


class RankingSchema(Strict):
    """A sourced ranking of catalogue models for one use, best first (query.yaml best_models)."""
    use: Name
    text: str
    source: str
    models: list[RankedModelSchema] = Field(min_length=1)


class BestModelsSchema(Strict):
    """'The best model I can run on X' (query.yaml best_models): the words that ask it, the words
    that name a use, how many models the answer names, and the rankings by use."""
    words: list[Name] = Field(min_length=1)
    uses: dict[Name, list[Name]] = {}
    count: int = Field(ge=1)
    rankings: list[RankingSchema] = Field(min_length=1)


class FleetsComparedSchema(Strict):
    """How many cards' fleets one question compares (query.yaml `fleets_compared`), why, and the note
    that names the cards left out."""
    most: int = Field(ge=2)
    reason: str
    note: str


class UsersPerPeriodSchema(Strict):
    """Counts of users over a period, refused (query.yaml `users_per_period`): the words, the
    error's message, its suggestion and the forms it lists."""
    words: list[Name] = Field(min_length=1)
    message: str
    suggestion: str
    expected: list[str] = Field(min_length=1)


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
    # fillers that describe a card ('used', 'refurbished'): a number before them counts the card after
    card_fillers: list[Name] = []
    # words before a number that make it a card's ('on a 3090 tok/s': the card, not 3090 tok/s)
    card_openers: list[Name] = []
    # words after a number beside a card that count its cores ('m3 max 40 core'): not used, said so
    card_details: list[Name] = []
    units: dict[Name, UnitSchema] = {}
    ttft_words: list[Name] = []
    # words that make a duration the bound on a request's end-to-end latency ('e2e under 10 s')
    e2e_words: list[Name] = []
    # words that make a duration the time per output token, read as the per-user speed ('tpot 50 ms')
    tpot_words: list[Name] = []
    # the tpot words that follow their duration ('50 ms per token'): a bare number after one is not its
    tpot_after_duration: list[Name] = []
    users_per_period: UsersPerPeriodSchema | None = None
    fleets_compared: FleetsComparedSchema | None = None
    fleet_users: ThresholdSchema | None = None
    # a latency word's bare number: milliseconds from this value up, seconds below ('--ttft 2000')
    bare_latency_ms_from: dict[Literal["ttft", "e2e", "tpot"], Positive] = {}
    # a label before 'prompt/output' lengths written as one pair ('in/out 2000/500', 'ISL/OSL 4000/500')
    length_pair_words: list[Name] = []
    # a word after such a pair that only says what it counts ('8000/500 tokens')
    length_pair_after: list[Name] = []
    # a label before a number whose unit after it says what it counts: the label goes ('batch of 200 users')
    count_labels: dict[str, list[Name]] = {}
    per_hour_words: list[Name] = []
    budget_words: list[Name] = []
    number_words: dict[Name, Positive] = {}
    size_words: list[Name] = []
    cost_per: CostPerSchema | None = None
    cost_batch: CostBatchSchema | None = None
    situations: dict[Name, SituationSchema] = {}
    question_formats: list[QuestionFormatSchema] = []
    fleet_kv: FleetKvSchema | None = None
    best_models: BestModelsSchema | None = None
    local_fallback: LocalFallbackSchema | None = None
    hf_quantization: HfQuantizationSchema | None = None
    verdict: VerdictSchema
    unnamed_model: list[UnnamedModelSchema] = []
    phrases: list[PhraseSchema] = []
    model_suffixes: list[Name] = []
    model_prefixes: list[Name] = []
    model_variants: list[Name] = []
    host_memory_words: dict[Name, Name] = {}
    backends: dict[Name, BackendSchema] = {}
    example_length_words: list[Name] = []
    format_suffixes: dict[Name, Name] = {}
    gpu_words: list[Name] = []
    focus_lead: dict[str, str] = {}
    reference_queries: list[str] = []
    knobs: dict[Literal["checkpointing", "no_checkpointing", "flash", "eager", "adam8bit", "sgd",
                        "adamw", "offload", "fp8_kv", "fp16_kv", "int8_kv", "q4_0_kv", "optimizer_in_backward", "paged",
                        "lora_attention_only", "quantized_inputs_kept", "speculative", "spec_draft",
                        "spec_eagle", "spec_eagle3", "spec_mtp", "spec_ngram"], list[Name]]
    defaults: DefaultsSchema
