"""The knowledge as plain data: what the engine reads.

In: built by kb.knowledge.build (from YAML, validated) or kb.knowledge.snapshot (from a JSON snapshot).
Out: Knowledge and its parts (Formula, Flow, Node, Edge, Claim), and the shape of the tables
kb.knowledge.derived computes from it (Derived, Lazy). No heavy imports here, so a
plain query needs neither pydantic, PyYAML, networkx nor lark.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from kb.expr import parse as ex

if TYPE_CHECKING:
    import networkx as nx

    from kb.knowledge.gpu_names import Gemm, Scope
    from kb.knowledge.records import (GPU, ErrorBand, Model, Objective, Precision, Runtime, RuntimeDefaults,
                                      ShardingTable, Source)
    from kb.knowledge.records_rules import PriceAdvice, Constant, Defaults, ErrorBands, Input, Price, QueryRules

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


@dataclass(frozen=True, slots=True)
class Case:
    when: ex.Expr | None
    expr: ex.Expr
    note: str | None


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
class Edge:
    to: str
    when: ex.Expr | None
    label: str | None


@dataclass(frozen=True, slots=True)
class Node:
    id: str
    kind: str
    text: str
    compute: tuple[str, ...]
    edges: tuple[Edge, ...]
    style: str | None
    where: str
    agrees: ex.Expr | None = None       # an advice outcome agrees with kbq's answer (flows/*.yaml)
    differs: str | None = None          # and why it does not, when it does not


@dataclass(slots=True)
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
    applies: ex.Expr | None = None      # the flow is walked only where this holds (None: always)


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
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
    bare_size_unnamed_refs: list[str]         # models.yaml bare_size unnamed_references (else the references)
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
    advice: PriceAdvice                            # prices.yaml advice: sort orders ({} without one)
    # the tables derived from the rest, set once by kb.knowledge.derived.derive (None only before that)
    derived: Derived = field(default=None, repr=False, compare=False)  # type: ignore[assignment]
    # the networkx graph of formulas and flow nodes (kb.knowledge.graph) when built from YAML; None when
    # read from a snapshot, which keeps what the graph gave (closure, each flow's layers)
    graph: nx.DiGraph[str] | None = field(default=None, repr=False, compare=False)

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


# ---------------------------------------------------------------- the derived tables (kb.knowledge.derived)

# what a trace step shows of a formula's case: the names it reads, its text, its note, the
# rule ("name (file:line)") and its sources
CaseText = tuple[tuple[str, ...], str, str | None, str, str]
# what the catalogue's columns at one precision key are made of: the cards (one each), the
# precision and the runtime's GEMM accumulation
CardsAt = tuple[list[tuple["GPU", int]], "Precision", "Gemm"]


if TYPE_CHECKING:
    K = TypeVar("K")
    A = TypeVar("A")
    V = TypeVar("V")


class Lazy(Mapping["K", "V"]):
    """A read-only table: `index()` gives every key with what computing its value needs (made
    on first use), `compute(arg)` one value, computed on first read and kept. (What the index
    holds, A, is the type checker's per table, checked where the table is made.)"""

    __slots__ = ("_index", "_make_index", "_compute", "_done")

    def __init__(self, index: Callable[[], dict[K, A]], compute: Callable[[A], V]) -> None:
        self._make_index: Callable[[], Mapping[K, object]] = index
        self._compute: Callable[[object], V] = compute      # type: ignore[assignment]  # A, as above
        self._index: Mapping[K, object] | None = None
        self._done: dict[K, V] = {}

    def _keys(self) -> Mapping[K, object]:
        index = self._index
        if index is None:
            index = self._index = self._make_index()
        return index

    def __getitem__(self, key: K) -> V:
        try:
            return self._done[key]
        except KeyError:
            pass
        arg = self._keys()[key]         # KeyError for a key the table does not have
        value = self._done[key] = self._compute(arg)
        return value

    def __iter__(self) -> Iterator[K]:
        return iter(self._keys())

    def __len__(self) -> int:
        return len(self._keys())


@dataclass(frozen=True, slots=True)
class Derived:
    order: Mapping[str, tuple[str, ...]]            # formula → the formulas it needs, then itself
    constants: Mapping[str, float]                  # constant → value
    case_text: Mapping[tuple[str, int], CaseText]   # (formula, case index) → its trace text
    claim_formulas: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]]  # claim → (when, value)
    error_bands: Mapping[tuple[str, bool], Mapping[str, ErrorBand]]  # (runtime, training) → bands
    gpu_columns: Mapping[tuple[str, ...], Scope]    # kb.knowledge.gpu_names.precision_key → columns
    # what a later stage makes from this knowledge once and keeps with it (kb.query.words'
    # vocabulary): plain data as the snapshot stored it until that stage reads it; never copied
    # into a Knowledge whose names differ (kb.knowledge.derived.with_model starts it empty)
    tables: dict[str, object] = field(default_factory=dict, repr=False, compare=False)
