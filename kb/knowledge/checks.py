"""The cross-file checks of the rule files, one problem at a time, into a collector.

In: the loaded documents (kb.knowledge.loader.Doc, for file:line:col) and their validated models. Out:
problems added to a `Collector` as RuleErrors (unique ids and aliases, known sources, names that
resolve, units that agree), expressions compiled with their errors placed at the column in the
YAML (`compile_expr`), and the catalogue tables built along the way (`catalogue`,
`training_tables`, `capacities`). kb.knowledge.build runs them; kb.knowledge.compile uses them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar, cast

from kb.expr import parse as ex
from kb.errors import RuleError, nearest
from kb.knowledge.loader import Doc, Path_
from kb.knowledge.data import GPU_INPUT_PREFIX, PER_GPU_INPUTS, capacity_fields, norm
from kb.knowledge import schema as sc
if TYPE_CHECKING:
    from kb.knowledge.records import GPU, Model, Objective, Precision, Runtime, ShardingTable
    from kb.knowledge.records_rules import Constant

# need_source(doc, loc, source id): reports an unknown source id at loc
NeedSource = Callable[[Doc, Path_, str], None]
# a catalogue record: each has an id and may have aliases
Record = TypeVar("Record", "GPU", "Model", "Precision", "Runtime")


class Collector:
    """Every problem found, in the order found."""

    def __init__(self) -> None:
        self.errors: list[RuleError] = []

    def add(self, err: RuleError) -> None:
        self.errors.append(err)


def training_tables(rfile: sc.RuntimesFile, rdoc: Doc, need_source: NeedSource,
                     errs: Collector) -> tuple[ShardingTable, dict[str, Objective]]:
    """runtimes.yaml's sharding strategies and training objectives, their sources and names checked."""
    sharding = cast("ShardingTable", rfile.sharding.model_dump() if rfile.sharding is not None else {})
    strategies = sharding.get("strategies", {})
    for name, st in strategies.items():
        need_source(rdoc, ("sharding", "strategies", name, "source"), st["source"])
    for key, named in (("default", sharding.get("default")),
                       ("offload_default", sharding.get("offload_default"))):
        if named is not None and named not in strategies:
            errs.add(rdoc.error(("sharding", key), f"unknown sharding '{named}'",
                                nearest(named, strategies)))
    for name, st in strategies.items():
        if (mfu_source := st.get("mfu_source")) is not None:
            need_source(rdoc, ("sharding", "strategies", name, "mfu_source"), mfu_source)
    for i, row in enumerate(sharding.get("at_scale", [])):
        need_source(rdoc, ("sharding", "at_scale", i, "source"), row["source"])
        if row["strategy"] not in strategies:
            errs.add(rdoc.error(("sharding", "at_scale", i, "strategy"), f"unknown sharding '{row['strategy']}'",
                                nearest(row["strategy"], strategies)))
    for i, rt in enumerate(rfile.runtimes):
        if rt.sharding is not None and rt.sharding not in strategies:
            errs.add(rdoc.error(("runtimes", i, "sharding"), f"unknown sharding '{rt.sharding}'",
                                nearest(rt.sharding, strategies)))
    objectives = {k: cast("Objective", o.model_dump()) for k, o in rfile.objectives.items()}
    for name, o in objectives.items():
        need_source(rdoc, ("objectives", name, "source"), o["source"])
    return sharding, objectives


# the keys `capacities` adds to every GPU after validation, with their types: the GPU typed dict
# (kb.knowledge.views) and tests/test_records.py read them from here
CAPACITY_KEYS: dict[str, str] = {"memory_gb": "float | None", "memory_gib": "float | None"}


def capacities(gpus: dict[str, GPU], constants: dict[str, Constant]) -> None:
    """Each GPU's capacity from its bytes: `memory_gb` (decimal, what every comparison uses)
    and `memory_gib` (binary, how the memory is sold)."""
    per_gb = constants["bytes_per_gb"]["value"] if "bytes_per_gb" in constants else None
    per_gib = constants["bytes_per_gib"]["value"] if "bytes_per_gib" in constants else None
    for g in gpus.values():
        g["memory_gb"], g["memory_gib"] = capacity_fields(g["memory_bytes"], per_gb, per_gib)


def unique(doc: Doc | None, locs: list[Path_], values: list[str], what: str,
            errs: Collector, docs: list[Doc] | None = None) -> None:
    seen: dict[str, int] = {}
    for i, v in enumerate(values):
        if v in seen:
            if doc is not None:
                errs.add(doc.error(locs[i], f"duplicate {what} '{v}'"))
            elif docs:
                errs.add(docs[i].error(("id",), f"duplicate {what} '{v}'"))
        seen[v] = i


def catalogue(doc: Doc, section: str, items: list[Record],
               errs: Collector) -> tuple[dict[str, Record], dict[str, str]]:
    """Items by id, and an alias table (normalised id, name and aliases → id)."""
    by_id: dict[str, Record] = {}
    alias: dict[str, str] = {}
    for i, item in enumerate(items):
        if item["id"] in by_id:
            errs.add(doc.error((section, i, "id"), f"duplicate id '{item['id']}'"))
            continue
        by_id[item["id"]] = item
        own = {norm(item["id"])}
        for j, a in enumerate(item.get("aliases", [])):
            key = norm(a)
            if key in alias and alias[key] != item["id"]:
                errs.add(doc.error((section, i, "aliases", j),
                                   f"alias '{a}' already names '{alias[key]}'"))
            own.add(key)
        for key in own:
            alias.setdefault(key, item["id"])
    return by_id, alias


def is_gpu_name(name: str) -> bool:
    return name.startswith(GPU_INPUT_PREFIX) or name in PER_GPU_INPUTS


def col_offset(doc: Doc, loc: Path_) -> int:
    """Column offset from the YAML value's start to the expression text (quotes)."""
    line, col = doc.pos(loc)
    try:
        text = doc.lines[line - 1]
    except IndexError:
        return col - 1
    return col - 1 + (1 if text[col - 1:col] in "\"'" else 0)


def compile_expr(doc: Doc, loc: Path_, text: str, units: dict[str, ex.Unit],
          errs: Collector, want: ex.Unit | None = None) -> ex.Expr | None:
    line, col = doc.pos(loc)
    try:
        compiled = ex.parse(text)
    except ex.ExprSyntaxError as exc:
        offset = col_offset(doc, loc) - (col - 1)
        errs.add(RuleError(doc.display, line, col + offset + exc.column - 1, exc.message,
                           exc.suggestion))
        return None
    ok = True
    for name in compiled.names:
        if name not in units:
            ok = False
            c = compiled.name_columns.get(name, 1)
            offset = col_offset(doc, loc) - (col - 1)
            errs.add(RuleError(doc.display, line, col + offset + c - 1, f"unknown name '{name}'",
                               nearest(name, units)))
    if ok and want is not None:
        check_unit(doc, loc, compiled, units, want, errs)
    return compiled if ok else None


def check_native(doc: Doc, models: list[sc.ModelSchema], precisions: dict[str, Precision], need_source: NeedSource,
                  errs: Collector) -> None:
    """A model's native checkpoint format names a known precision and has its own source."""
    for i, m in enumerate(models):
        if m.native_precision is None:
            continue
        if m.native_precision not in precisions:
            errs.add(doc.error(("models", i, "native_precision"),
                               f"unknown precision '{m.native_precision}'", nearest(m.native_precision, precisions)))
        if m.native_source is None:
            errs.add(doc.error(("models", i, "native_precision"), "native_precision needs native_source"))
        else:
            need_source(doc, ("models", i, "native_source"), m.native_source)


def check_fp8_scales(doc: Doc, models: list[sc.ModelSchema], need_source: NeedSource, errs: Collector) -> None:
    """A model's FP8 checkpoint scaling has its own source (the checkpoint's card or config)."""
    for i, m in enumerate(models):
        if m.fp8_scales is None:
            continue
        if m.fp8_source is None:
            errs.add(doc.error(("models", i, "fp8_scales"), "fp8_scales needs fp8_source"))
        else:
            need_source(doc, ("models", i, "fp8_source"), m.fp8_source)


def check_architecture_from(doc: Doc, models: list[sc.ModelSchema], errs: Collector) -> None:
    """A model whose architecture is assumed from another names a catalogue model that has its own."""
    own = {m.id: m for m in models}
    for i, m in enumerate(models):
        ref = m.architecture_from
        if ref is None:
            continue
        if ref not in own:
            errs.add(doc.error(("models", i, "architecture_from"), f"unknown model '{ref}'", nearest(ref, own)))
        elif own[ref].architecture_from is not None:
            errs.add(doc.error(("models", i, "architecture_from"),
                               f"'{ref}' has an assumed architecture itself; name a model with its own config"))


def check_unit(doc: Doc, loc: Path_, compiled: ex.Expr, units: dict[str, ex.Unit],
                want: ex.Unit, errs: Collector) -> None:
    try:
        got = ex.infer_unit(compiled.ast, units)
    except ex.UnitError as exc:
        errs.add(doc.error(loc, f"units: {exc}"))
        return
    if got is not None and got != want:
        errs.add(doc.error(loc, f"units: the expression gives {ex.format_unit(got)}, "
                                f"expected {ex.format_unit(want)}"))


