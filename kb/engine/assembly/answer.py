"""The Answer: one object that every surface renders (text, JSON, Markdown, HTML).

In: filled by kb.engine. Out: `to_dict()` gives the `kbq --json` contract:
query, workload, assumptions, memory, throughput, bottleneck, gpus, verdict, path, trace,
disagreements, warnings (plus advice, claims_checked, units, question, …, model_source).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kb.knowledge.records import Value
    from kb.engine.assembly.answer_records import (Advice, Bottleneck, ClaimChecked, ErrorBand, Memory,
                                          ModelSource, Option, PricesUsed, Question, Recommendation,
                                          Replicas, Side, Throughput, WorkloadDict)


@dataclass
class Step:
    node: str
    rule: str
    formula: str
    values: dict[str, Value]
    result: Value
    unit: str
    source: str
    note: str | None = None
    rule_id: str = ""                                   # the formula or edge, without its place
    location: str = ""                                  # file:line of the rule
    sources: list[str] = field(default_factory=list)    # the source ids, one by one


@dataclass
class GpuRow:
    id: str
    name: str
    count: int
    vram_gb: float | None
    usable_vram_gb: float | None
    per_gpu_gb: float | None
    fits: bool
    headroom_gb: float | None
    gpus_needed: int | None
    bandwidth_gb_s: float | None
    compute_tflops: float | None
    compute_precision: str | None
    decode_tokens_per_s: float | None
    decode_tokens_per_s_aggregate: float | None
    prefill_tokens_per_s: float | None
    ttft_s: float | None
    train_tokens_per_s: float | None
    train_time_s: float | None
    tdp_w: float | None
    rank: int = 0
    requested: bool = False
    # what it costs (rules/prices.yaml, rules/formulas.yaml); None where there is no price
    price_usd: float | None = None              # one card
    cloud_usd_per_hour: float | None = None     # one GPU-hour
    config_price_usd: float | None = None       # every card of the row, modules with their servers
    servers_bought: int = 0                     # the servers those modules are bought in (0 for cards)
    config_usd_per_hour: float | None = None    # every GPU of the row, per hour
    usd_per_million_tokens: float | None = None  # serving
    run_hours: float | None = None               # training
    run_cost_usd: float | None = None            # training
    breakeven_months: float | None = None
    meets_target: bool | None = None             # speed floor (serving) or time floor (training)
    within_budget: bool | None = None
    suits_job: bool | None = None                # training: native tensor cores and a usable run time
    offload_gb: float | None = None              # inference: each GPU's weights kept in the host's memory (formulas.yaml offload_gb)


_NO_PRICES: PricesUsed = {}


@dataclass
class Answer:
    query: str
    workload: WorkloadDict
    assumptions: list[str]
    memory: Memory
    throughput: Throughput
    bottleneck: Bottleneck
    gpus: list[GpuRow]
    verdict: str
    path: list[str]
    trace: list[Step]
    disagreements: list[ClaimChecked]
    warnings: list[str]
    advice: list[Advice] = field(default_factory=list)
    claims_checked: list[ClaimChecked] = field(default_factory=list)
    question: Question | None = None
    error_bands: dict[str, ErrorBand] = field(default_factory=dict)
    units: str = "GB = 10^9 bytes (decimal); GPU memory as marketed; TFLOPS dense (no sparsity)"
    recommendation: Recommendation | None = None    # the pick and one runner-up per class
    options: list[Option] | None = None     # what to change so it fits (when computed)
    prices: PricesUsed = field(default_factory=lambda: _NO_PRICES.copy())   # which prices were used, as of when
    comparison: list[Side] | None = None    # "fp8 vs int4": each side's figures (kb.engine.advising.compare)
    model_source: ModelSource | None = None  # a model read from a config.json (the Hub's or --model-config's)
    replicas: Replicas | None = None        # serving capacity: replicas of a layout (kb.engine.search.replicas)
    unused_words: list[str] = field(default_factory=list)   # words of the query not used ('please')

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract. Built by hand (dataclasses.asdict deep-copies every value).
        Every float in an Answer is finite: the engine turns a non-finite result into None
        with a warning, and rule files cannot hold one (kb.knowledge.schema)."""
        d = dict(self.__dict__)
        d["gpus"] = [dict(g.__dict__) for g in self.gpus]
        d["trace"] = [dict(s.__dict__) for s in self.trace]
        return d

    def to_json(self) -> bytes:
        """to_dict() as compact JSON, the same bytes, without the copies to_dict makes: orjson
        writes each dataclass (the Answer, its rows and steps) as its fields, in order."""
        import orjson

        return orjson.dumps(self)
