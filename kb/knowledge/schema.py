"""The shape of every rule file, as pydantic models (unknown keys are errors).

In: plain data from YAML (kb.knowledge.loader). Out: validated models, and the JSON Schema of each file
(`kbq schema NAME`, committed under rules/schema/). Cross-file checks (names that resolve,
units that agree, flows that are sound) are in kb.knowledge.build, not here.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, field_validator

from kb.knowledge.schema_base import (Month, Name, NodeId, NonNeg, Optimizer, Positive,
                                      PurchaseUsd, Slug, SortKeySchema, SortName, Strict, Text, UsdPerHour,
                                      WebUrl)
from kb.knowledge.schema_query import (CostBatchSchema, CostPerSchema, DefaultsSchema, LocalFallbackSchema, PhraseSchema,
                                       QuestionFormatSchema, QueryFile, SituationSchema, SolveSchema, UnitSchema,
                                       UnnamedModelSchema)
from kb.knowledge.schema_catalogue import (ClaimSchema, GpuSchema, GpusFile, InterconnectSchema, ObjectiveSchema, PrecisionSchema,
                                 PrecisionsFile, RecipeSchema, RecipeSetSchema, RecipeWhenSchema,
                                 RuntimeSchema, RuntimeDefaultsSchema, RuntimesFile, ShardingSchema, ShardingFile,
                                 SourceSchema, SourcesFile, TensorPrecision, TensorTflopsSchema)
from kb.knowledge.schema_models import (BareSizeSchema, CompressedAttentionSchema, ConfigDefaultsSchema, GlobalAttentionSchema,
                                        IndexerSchema, MlaSchema, ModelSchema, ModelsFile, MoeSchema, PerLayerEmbeddingSchema,
                                        RecurrentSchema)

# The catalogue files' and query.yaml's models (kb.knowledge.schema_catalogue, schema_models, schema_query) and the shared types (kb.knowledge.schema_base), read
# from here as from one module.
__all__ = ["CostBatchSchema", "CostPerSchema", "DefaultsSchema", "LocalFallbackSchema", "PhraseSchema",
           "QuestionFormatSchema", "QueryFile", "SituationSchema", "SolveSchema", "UnitSchema", "UnnamedModelSchema",
           "BareSizeSchema", "ClaimSchema", "ConfigDefaultsSchema", "GpuSchema", "GpusFile", "InterconnectSchema", "MlaSchema", "ModelSchema", "ModelsFile",
           "CompressedAttentionSchema", "GlobalAttentionSchema", "IndexerSchema", "MoeSchema", "ObjectiveSchema", "PerLayerEmbeddingSchema", "PrecisionSchema", "PrecisionsFile", "RecipeSchema",
           "RecipeSetSchema", "RecipeWhenSchema", "RecurrentSchema", "RuntimeSchema", "RuntimeDefaultsSchema", "RuntimesFile",
           "ShardingSchema", "ShardingFile", "SourceSchema", "SourcesFile", "TensorPrecision", "TensorTflopsSchema",
           "Month", "Name", "NodeId", "NonNeg", "Optimizer", "Positive", "PurchaseUsd", "Slug",
           "SortKeySchema", "SortName", "Strict", "Text", "UsdPerHour", "FILES", "json_schema", "public_name"]


# ---------------------------------------------------------------- formulas.yaml

class InputSchema(Strict):
    unit: Text
    meaning: str


class ConstantSchema(Strict):
    value: float = Field(allow_inf_nan=False)
    unit: Text
    meaning: str
    source: Slug


class CaseSchema(Strict):
    when: str | None = None
    expr: Text
    note: str | None = None


class FormulaSchema(Strict):
    unit: Text
    meaning: str
    expr: Text | None = None
    cases: list[CaseSchema] | None = None
    note: str | None = None
    sources: list[Slug] = Field(min_length=1)

    @field_validator("cases")
    @classmethod
    def _cases_end_in_otherwise(cls, cases: list[CaseSchema] | None) -> list[CaseSchema] | None:
        if cases is not None:
            if not cases:
                raise ValueError("cases needs at least one case")
            if cases[-1].when is not None:
                raise ValueError("the last case needs no 'when' (it is the otherwise case)")
        return cases


class FormulasFile(Strict):
    inputs: dict[Name, InputSchema]
    constants: dict[Name, ConstantSchema]
    formulas: dict[Name, FormulaSchema]


# ---------------------------------------------------------------- flows/*.yaml

class EdgeSchema(Strict):
    to: NodeId
    when: str | None = None
    label: str | None = None


class NodeSchema(Strict):
    id: NodeId
    kind: Literal["start", "question", "compute", "verdict"]
    text: str
    compute: list[str] = []
    edges: list[EdgeSchema] = []
    style: Literal["compute", "bandwidth", "good", "warn"] | None = None
    # an advice flow's outcome against kbq's own answer: a condition on the answer's figures that
    # holds when they agree, and why they do not, shown under the sources' disagreements
    agrees: str | None = None
    differs: str | None = None


class FlowFile(Strict):
    id: Slug
    title: str
    role: Literal["sizing", "advice"]
    order: int
    source: Slug
    entry: NodeId
    ranking: list[SortKeySchema] = []
    nodes: list[NodeSchema] = Field(min_length=1)
    applies: str | None = None      # a condition on the answer's figures; the flow is left out when false



class BandRuntimeSchema(Strict):           # one runtime's measurements: how many, median and p90 error
    n: int
    median_pct: NonNeg
    p90_pct: NonNeg


class BandPointSchema(Strict):
    id: str
    runtime: str = ""
    url: WebUrl


class BandSchema(BandRuntimeSchema):             # all measurements of a kind of figure, then by runtime
    worst_pct: NonNeg
    by_runtime: dict[str, BandRuntimeSchema] = {}
    measurements: list[BandPointSchema] = []


class ErrorBandsFile(Strict):
    source: Slug
    kinds: dict[Literal["decode_tokens_per_s", "aggregate_tokens_per_s", "prefill_tokens_per_s",
                        "inference_memory", "training_memory", "train_tokens_per_s"], BandSchema]


# ---------------------------------------------------------------- prices.yaml



class CloudPriceSchema(Strict):
    usd_per_hour: UsdPerHour
    provider: str
    date: Month
    source: Slug


class ServerPriceSchema(Strict):
    """What a module is bought in (SXM, OAM, a superchip's rack): the server beyond its GPUs, and
    how many GPUs one holds. A module priced without one is bought in an 8-GPU HGX-class server
    (formulas.yaml node_usd_beyond_gpus)."""
    usd_beyond_gpus: float = Field(ge=0, le=1e7, allow_inf_nan=False)
    gpus: int = Field(ge=1, le=72)
    kind: Literal["list", "street", "used", "estimate"]
    date: Month
    source: Slug
    note: str | None = None


class PriceSchema(Strict):
    gpu: Slug
    purchase_usd: PurchaseUsd | None
    purchase_kind: Literal["list", "street", "used", "estimate"]
    purchase_date: Month
    purchase_source: Slug
    note: str | None = None
    server: ServerPriceSchema | None = None
    cloud: list[CloudPriceSchema] = []


class OptionRuleSchema(Strict):
    id: Slug
    change: str
    kind: Literal["words", "context", "users", "gpus", "next_card"]
    words: str = ""                 # appended to the query (kind words)
    precision: Slug | None = None   # the weight precision it sets: offered only when it has fewer bits
    runtimes: list[Slug] = []       # offered only under these runtimes (empty: under any)
    host_memory: bool = False       # it names the host's memory: offered only when the query names none
    tasks: list[Literal["inference", "training", "full_ft", "lora"]]
    quality_rank: Annotated[int, Field(ge=0, le=9)]   # 0: no quality cost; higher costs more
    quality: str
    source: Slug


class CloudRuleSchema(Strict):
    """Which of a card's on-demand prices an answer uses, and when the price pages disagree."""
    use: Literal["median", "lowest", "highest"]
    disagree_ratio: Annotated[float, Field(ge=1, allow_inf_nan=False)]   # highest / lowest at or above this: they disagree
    source: Slug


class AdviceSchema(Strict):
    cloud_price: CloudRuleSchema
    options: list[OptionRuleSchema] = []
    default_sort: SortName
    sorts: dict[SortName, list[SortKeySchema]]
    budget_sorts: dict[SortName, list[SortKeySchema]] = {}   # a sort's order when the question sets a budget
    rent_cost_key: str
    rent_ignores: list[str] = []
    training_only: list[str] = []   # keys read only when ranking a training job
    untargeted_training_ignores: dict[str, list[str]] = {}   # sort → keys a training job with no deadline skips
    says: dict[str, str]            # each sort key's words in "ranked by value (fits, …, then fastest)"
    max_gpus_per_config: Annotated[int, Field(ge=1, le=64)]
    next_card_tries: Annotated[int, Field(ge=1, le=8)] = 3
    source: Slug


class PricesFile(Strict):
    as_of: Month
    advice: AdviceSchema | None = None
    prices: list[PriceSchema]


FILES: dict[str, type[BaseModel]] = {
    "sources": SourcesFile,
    "precisions": PrecisionsFile,
    "gpus": GpusFile,
    "models": ModelsFile,
    "formulas": FormulasFile,
    "flow": FlowFile,
    "query": QueryFile,
    "runtimes": RuntimesFile,
    "error_bands": ErrorBandsFile,
    "prices": PricesFile,
}


def public_name(class_name: str) -> str:
    """The name a rule file's reader sees for a schema class: its record's name (ModelSchema →
    Model), as the published JSON Schema and the rule errors say it."""
    return class_name.removesuffix("Schema")


def json_schema(name: str) -> dict[str, Any]:
    """The JSON Schema of one rule file kind (a key of FILES), each record under its public name."""
    schema = _public(FILES[name].model_json_schema())
    assert isinstance(schema, dict)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = f"kbq rules: {name}"
    return schema


def _public(value: object) -> object:
    """A JSON Schema with the schema classes' names (in $defs, $ref and titles) made public."""
    if isinstance(value, dict):
        out: dict[str, object] = {}
        for key, item in value.items():
            if key == "$defs" and isinstance(item, dict):
                out[key] = {public_name(k): _public(v) for k, v in sorted(      # in order of name,
                    item.items(), key=lambda kv: public_name(kv[0]))}              # as pydantic sorts them
            elif key == "$ref" and isinstance(item, str) and item.startswith("#/$defs/"):
                out[key] = "#/$defs/" + public_name(item.removeprefix("#/$defs/"))
            elif key == "title" and isinstance(item, str):
                out[key] = public_name(item)
            else:
                out[key] = _public(item)
        return out
    if isinstance(value, list):
        return [_public(v) for v in value]
    return value
