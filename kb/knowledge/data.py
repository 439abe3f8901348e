"""The knowledge as plain data: what the engine reads.

In: built by kb.knowledge.build (from YAML, validated) or kb.knowledge.snapshot (from a JSON snapshot).
Out: Knowledge and its parts (Formula, Flow, Node, Edge, Claim). No heavy imports here, so a
plain query needs neither pydantic, PyYAML, networkx nor lark.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from kb.expr import parse as ex
from kb.recordtype import field, record

if TYPE_CHECKING:
    import networkx as nx

    from kb.knowledge.derived import Derived
    from kb.knowledge.records import (GPU, Model, Objective, Precision, Runtime, RuntimeDefaults, ShardingTable,
                            Source)
    from kb.knowledge.records_rules import Advice, Constant, Defaults, ErrorBands, Input, Price, QueryRules

GPU_INPUT_PREFIX = "gpu."
PER_GPU_INPUTS = frozenset({"gpu_count"})
# a format spec a verdict may use: width up to 2 digits, up to 6 decimals ({total_gb:.1f}, {x:,.0f})
TEMPLATE_SPEC = re.compile(r"^[<>^]?\d{0,2},?(\.[0-6])?[fgde%]?$")
TEMPLATE_FIELD = re.compile(r"\{([A-Za-z_][A-Za-z0-9_.]*)(?::([^{}]*))?\}")
_SEPARATORS = r"[\s_\-]+"          # compiled on first use (re caches it): off a plain query's path
# how a figure's name reads in a template shown without an answer ({per_gpu_gb:.1f} → ‹per-GPU GB›)
_NAME_WORDS = {"gpu": "GPU", "gpus": "GPUs", "gb": "GB", "vram": "VRAM", "kv": "KV", "tdp": "TDP",
               "tflops": "TFLOPS", "w": "W", "s": "s", "mb": "MB", "tb": "TB"}


def readable_name(name: str) -> str:
    """'per_gpu_gb' → 'per-GPU GB', 'runtime.overhead_gb' → 'runtime overhead GB'."""
    words = " ".join(_NAME_WORDS.get(w, w) for w in re.split(r"[._]+", name) if w)
    return words.replace("per GPU", "per-GPU")


def readable_template(text: str) -> str:
    """A verdict template for people, where no answer fills it: each {name:spec} as ‹name›,
    without a unit the text says next ('{headroom_gb:.1f} GB' → '‹headroom› GB')."""
    def one(m: re.Match[str]) -> str:
        name = readable_name(m.group(1))
        unit = name.rsplit(" ", 1)[-1]
        if " " in name and unit in _NAME_WORDS.values() and text.startswith(f" {unit}", m.end()):
            name = name.rsplit(" ", 1)[0]
        return f"‹{name}›"
    return TEMPLATE_FIELD.sub(one, text)


def norm(text: str) -> str:
    """Alias key: lowercase, separators dropped ('RTX 4000 Ada' == 'rtx-4000-ada')."""
    return re.sub(_SEPARATORS, "", text.lower())


@record(frozen=True)
class Case:
    when: ex.Expr | None
    expr: ex.Expr
    note: str | None


@record(frozen=True)
class Formula:
    name: str
    unit: str
    meaning: str
    cases: tuple[Case, ...]
    sources: tuple[str, ...]
    where: str                      # rules/formulas.yaml:LINE
    names: tuple[str, ...]          # every name any case reads
    deps: tuple[str, ...]           # formulas among them
    per_gpu: bool                   # reads gpu.* or gpu_count, directly or through deps
    note: str | None = None

    @property
    def text(self) -> str:
        if len(self.cases) == 1 and self.cases[0].when is None:
            return self.cases[0].expr.text
        return " | ".join(f"{c.expr.text} if {c.when.text}" if c.when else c.expr.text
                          for c in self.cases)


@record(frozen=True)
class Edge:
    to: str
    when: ex.Expr | None
    label: str | None


@record(frozen=True)
class Node:
    id: str
    kind: str
    text: str
    compute: tuple[str, ...]
    edges: tuple[Edge, ...]
    style: str | None
    where: str


@record
class Flow:
    id: str
    title: str
    role: str
    order: int
    source: str
    entry: str
    nodes: dict[str, Node]
    ranking: list[tuple[str, str]]
    where: str
    # the nodes in layers, from the knowledge graph (kb.knowledge.graph.flow_layers), set when it is
    # built; () for a flow made by hand (kb.knowledge.graph.layers_of builds them then)
    layers: tuple[tuple[str, ...], ...] = ()


@record(frozen=True)
class Claim:
    id: str
    source: str
    text: str
    computed: ex.Expr
    unit: str
    value: float | tuple[float, float]
    tolerance: float
    applies_when: ex.Expr
    example_query: str
    note: str
    per_gpu: bool
    where: str


@record(frozen=True)
class Knowledge:
    """The validated rules. Never changed once built: a view with another model or other prices
    is a new Knowledge (kb.knowledge.derived.with_model, kb.knowledge.prices.with_prices)."""
    root: str                       # the rules directory
    gpus: dict[str, GPU]
    models: dict[str, Model]
    precisions: dict[str, Precision]
    sources: dict[str, Source]
    inputs: dict[str, Input]
    constants: dict[str, Constant]
    formulas: dict[str, Formula]
    closure: dict[str, tuple[str, ...]]       # formula → formulas to compute first, in order
    flows: list[Flow]
    claims: list[Claim]
    query: QueryRules
    bare_size_refs: list[str]
    config_defaults: dict[str, int]           # models.yaml config_defaults: what --model-config fills in
    gpu_alias: dict[str, str]
    model_alias: dict[str, str]
    precision_alias: dict[str, str]
    runtimes: dict[str, Runtime]
    runtime_alias: dict[str, str]
    runtime_defaults: RuntimeDefaults
    sharding: ShardingTable                   # runtimes.yaml sharding ({} without one)
    objectives: dict[str, Objective]
    error_bands: ErrorBands                   # rules/error_bands.yaml ({} without one)
    prices: dict[str, Price]                  # gpu id → prices.yaml entry
    advice: Advice                            # prices.yaml advice: sort orders ({} without one)
    # the tables derived from the rest, set once by kb.knowledge.derived.derive (None only before that)
    derived: Derived = field(default=None, repr=False, compare=False)
    # the networkx graph of formulas and flow nodes (kb.knowledge.graph) when built from YAML; None when
    # read from a snapshot, which keeps what the graph gave (closure, each flow's layers)
    graph: nx.DiGraph | None = field(default=None, repr=False, compare=False)

    @property
    def defaults(self) -> Defaults:
        return self.query["defaults"]

    @property
    def billion(self) -> float:
        """What the B of '70B' stands for (query.yaml)."""
        return float(self.query["billion"])

    def flow(self, flow_id: str) -> Flow:
        for f in self.flows:
            if f.id == flow_id:
                return f
        raise KeyError(flow_id)


def capacity_fields(memory_bytes: float, per_gb: float | None,
                    per_gib: float | None) -> tuple[float | None, float | None]:
    """`memory_gb` and `memory_gib` of a capacity in bytes (None where a unit is not defined)."""
    return (memory_bytes / per_gb if per_gb else None,
            memory_bytes / per_gib if per_gib else None)
