"""Validated knowledge: rules/ → one `Knowledge` object the engine reads.

In: a rules directory. Out: `Knowledge` (GPUs, models, precisions, compiled formulas, flows,
sources and claims, and the networkx graph of formulas and flow nodes, kb.graph, that gives each
formula's evaluation order and each flow's layers), or
`RuleErrors` listing every problem as `file:line:col: message` in one run.

Checks beyond the schema: ids and aliases unique, every source id known, every expression
parses, every name resolves, units agree, no cycles between formulas, flows acyclic with every
node reachable and every question's branches covered; and every formula a finite number on at
least one reference workload (kb.reference).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kb import expr as ex
from kb import prices as kb_prices
from kb.errors import RuleError, RuleErrors, nearest
from kb.graph import (add_flow, evaluation_orders, flow_cycle, flow_layers, formula_cycles,
                      knowledge_graph, unreachable)
from kb.loader import Doc, display_name, load, validate
from kb.model import (GPU_INPUT_PREFIX, PER_GPU_INPUTS, TEMPLATE_FIELD, TEMPLATE_SPEC, Case, Claim,
                      Edge, Flow, Formula, Knowledge, Node, capacity_fields, norm)
from kb.paths import OPTIONAL_RULE_FILES, REQUIRED_RULE_FILES
from kb.schema import FILES

__all__ = ["build", "Knowledge", "Formula", "Flow", "Node", "Edge", "Claim", "Case", "norm",
           "TEMPLATE_FIELD", "GPU_INPUT_PREFIX", "PER_GPU_INPUTS"]

# ---------------------------------------------------------------- building

class _Collector:
    def __init__(self) -> None:
        self.errors: list[RuleError] = []

    def add(self, err: RuleError) -> None:
        self.errors.append(err)


def build(root: Path) -> Knowledge:
    """Load and check every rule file under root. Raises RuleErrors with all problems."""
    root = Path(root)
    errs = _Collector()
    docs: dict[str, Doc] = {}
    parsed: dict[str, Any] = {}
    for name in REQUIRED_RULE_FILES:
        path = root / f"{name}.yaml"
        if not path.is_file():
            errs.add(RuleError(f"{root.name}/{name}.yaml", 1, 1, "file is missing"))
            continue
        _load_one(path, root, FILES[name], name, docs, parsed, errs)
    for name in OPTIONAL_RULE_FILES:
        if (root / f"{name}.yaml").is_file():
            _load_one(root / f"{name}.yaml", root, FILES[name], name, docs, parsed, errs)
    flow_paths = sorted((root / "flows").glob("*.yaml")) if (root / "flows").is_dir() else []
    if not flow_paths:
        errs.add(RuleError(f"{root.name}/flows", 1, 1, "no flow files"))
    for path in flow_paths:
        _load_one(path, root, FILES["flow"], f"flow:{path.stem}", docs, parsed, errs)
    if errs.errors:
        _check_the_rest(root, docs, parsed, errs)
        raise RuleErrors(errs.errors)
    kn = _assemble(root, docs, parsed, errs)
    from kb import reference

    problems = reference.check(kn, docs["query"], docs["formulas"])
    if problems:
        raise RuleErrors(problems)
    return kn


_STAND_INS = REQUIRED_RULE_FILES


def _check_the_rest(root: Path, docs: dict[str, Doc], parsed: dict[str, Any], errs: _Collector) -> None:
    """Some files failed their schema: still run the cross-file checks on the ones that passed,
    so one run reports every error. A file that failed stands in as empty, and the checks that
    would only echo its failure (sources, names from formulas.yaml) are left out."""
    from kb import schema as sc

    missing = [n for n in _STAND_INS if n not in parsed or n not in docs]
    if any(n not in docs for n in _STAND_INS):
        return  # a file is missing or unreadable: nothing sound to cross-check
    empty = {
        "sources": sc.SourcesFile.model_construct(sources=[], claims=[]),
        "precisions": sc.PrecisionsFile.model_construct(precisions=[]),
        "gpus": sc.GpusFile.model_construct(gpus=[]),
        "models": sc.ModelsFile.model_construct(models=[], bare_size=sc.BareSize.model_construct(references=[])),
        "formulas": sc.FormulasFile.model_construct(inputs={}, constants={}, formulas={}),
        "runtimes": sc.RuntimesFile.model_construct(runtimes=[], defaults=None),
    }
    if "query" in missing or "runtimes" in missing:
        return  # defaults and runtime defaults are read everywhere below
    trial = dict(parsed)
    for name in missing:
        trial[name] = empty[name]
    before = len(errs.errors)
    probe = _Collector()
    try:
        _assemble(root, docs, trial, probe, skip_sources="sources" in missing,
                  skip_names="formulas" in missing, skip_precisions="precisions" in missing)
    except RuleErrors:
        pass
    except Exception:  # a stand-in the checks cannot use: report what the schema found
        return
    seen = {e.render() for e in errs.errors[:before]}
    errs.errors.extend(e for e in probe.errors if e.render() not in seen)


def _load_one(path: Path, root: Path, model: Any, key: str, docs: dict[str, Doc],
              parsed: dict[str, Any], errs: _Collector) -> None:
    try:
        doc = load(path, root)
    except RuleError as err:
        errs.add(err)
        if key in _STAND_INS:     # stands in as empty, so the other files are still checked
            docs[key] = Doc(path, None, {}, display_name(path, root))
        return
    docs[key] = doc
    if doc.data is None:
        errs.add(RuleError(doc.display, 1, 1, "file is empty"))
        return
    value, problems = validate(doc, model)
    for p in problems:
        errs.add(p)
    if value is not None:
        parsed[key] = value


def _assemble(root: Path, docs: dict[str, Doc], parsed: dict[str, Any],
              errs: _Collector, skip_sources: bool = False, skip_names: bool = False,
              skip_precisions: bool = False) -> Knowledge:
    src_doc = docs["sources"]
    sources = {s.id: s.model_dump() for s in parsed["sources"].sources}
    _unique(src_doc, [("sources", i, "id") for i in range(len(sources))],
            [s.id for s in parsed["sources"].sources], "source id", errs)
    known_sources = set(sources)

    def need_source(doc: Doc, loc: tuple[Any, ...], sid: str) -> None:
        if not skip_sources and sid not in known_sources:
            errs.add(doc.error(loc, f"unknown source '{sid}'", nearest(sid, known_sources)))

    gpus, gpu_alias = _catalogue(docs["gpus"], "gpus", [g.model_dump() for g in parsed["gpus"].gpus], errs)
    for i, g in enumerate(parsed["gpus"].gpus):
        need_source(docs["gpus"], ("gpus", i, "source"), g.source)
        for fname, sid in g.field_sources.items():
            if fname not in type(g).model_fields:
                errs.add(docs["gpus"].error(("gpus", i, "field_sources", fname, "<key>"),
                                            f"'{fname}' is not a GPU field",
                                            nearest(fname, type(g).model_fields)))
            need_source(docs["gpus"], ("gpus", i, "field_sources", fname), sid)
    models, model_alias = _catalogue(docs["models"], "models", [m.model_dump() for m in parsed["models"].models], errs)
    for i, m in enumerate(parsed["models"].models):
        need_source(docs["models"], ("models", i, "source"), m.source)
        if m.params_active > m.params_total:
            errs.add(docs["models"].error(("models", i, "params_active"),
                                          "params_active is larger than params_total"))
    refs = list(parsed["models"].bare_size.references)
    for i, ref in enumerate(refs):
        if ref not in models:
            errs.add(docs["models"].error(("bare_size", "references", i),
                                          f"unknown model '{ref}'", nearest(ref, models)))
    runtimes, runtime_alias = _catalogue(docs["runtimes"], "runtimes", [r.model_dump() for r in parsed["runtimes"].runtimes], errs)
    rdoc = docs["runtimes"]
    for i, rt in enumerate(parsed["runtimes"].runtimes):
        need_source(rdoc, ("runtimes", i, "source"), rt.source)
        if rt.gemm_accumulate_source:
            need_source(rdoc, ("runtimes", i, "gemm_accumulate_source"), rt.gemm_accumulate_source)
        if rt.kind in ("inference", "both"):
            for key in ("decode_bandwidth_efficiency", "quant_kernel_efficiency",
                        "decode_step_overhead_s", "prefill_compute_efficiency"):
                if getattr(rt, key) is None:
                    errs.add(rdoc.error(("runtimes", i, "id"), f"inference runtime '{rt.id}' needs {key}"))
        if rt.kind in ("training", "both") and rt.training_mfu is None:
            errs.add(rdoc.error(("runtimes", i, "id"), f"training runtime '{rt.id}' needs training_mfu"))
        for j, recipe in enumerate(rt.recipes):
            need_source(rdoc, ("runtimes", i, "recipes", j, "source"), recipe.source)
    sharding, objectives = _training_tables(parsed["runtimes"], rdoc, need_source, errs)
    if "error_bands" in parsed:
        need_source(docs["error_bands"], ("source",), parsed["error_bands"].source)
    rdefaults = parsed["runtimes"].defaults.model_dump()
    need_source(rdoc, ("defaults", "source"), rdefaults["source"])
    for key in ("inference", "gguf", "training"):
        if rdefaults[key] not in runtimes:
            errs.add(rdoc.error(("defaults", key), f"unknown runtime '{rdefaults[key]}'",
                                nearest(rdefaults[key], runtimes)))
    precisions, precision_alias = _catalogue(docs["precisions"], "precisions", [p.model_dump() for p in parsed["precisions"].precisions], errs)
    for i, p in enumerate(parsed["precisions"].precisions):
        need_source(docs["precisions"], ("precisions", i, "source"), p.source)
    if not skip_precisions:
        _check_native(docs["models"], parsed["models"].models, precisions, need_source, errs)

    fdoc = docs["formulas"]
    ffile = parsed["formulas"]
    inputs = {k: v.model_dump() for k, v in ffile.inputs.items()}
    constants = {k: v.model_dump() for k, v in ffile.constants.items()}
    for name, c in ffile.constants.items():
        need_source(fdoc, ("constants", name, "source"), c.source)
    for name, f in ffile.formulas.items():
        for j, sid in enumerate(f.sources):
            need_source(fdoc, ("formulas", name, "sources", j), sid)
    for name in set(inputs) & set(constants) | set(inputs) & set(ffile.formulas) | set(constants) & set(ffile.formulas):
        errs.add(fdoc.error(("formulas", name, "<key>") if name in ffile.formulas else ("constants", name, "<key>"),
                            f"'{name}' is defined twice (inputs, constants and formulas share one namespace)"))
    units: dict[str, ex.Unit] = {}
    for table in (inputs, constants, ffile.formulas):
        for name, item in table.items():
            unit_text = item["unit"] if isinstance(item, dict) else item.unit
            units[name] = ex.parse_unit(str(unit_text))
    _capacities(gpus, constants)
    formulas = _compile_formulas(fdoc, ffile, units, errs)
    graph = knowledge_graph(formulas)
    closure = _closures(fdoc, graph, errs)
    formulas = _mark_per_gpu(formulas, closure)

    query = parsed["query"].model_dump()
    qdoc = docs["query"]
    need_source(qdoc, ("defaults", "source"), parsed["query"].defaults.source)
    most = constants.get("max_gpu_count", {}).get("value")
    counts = parsed["query"].limits.get("gpu_count")
    if most is not None and counts is not None and counts[1] != most:
        errs.add(qdoc.error(("limits", "gpu_count"),
                            f"limits.gpu_count ends at {counts[1]:g}, but formulas.yaml's max_gpu_count "
                            f"(the most GPUs kbq sizes) is {most:g}; make them agree"))
    for key in ("inference_precision", "training_precision", "qlora_precision", "kv_precision"):
        pid = query["defaults"][key]
        if not skip_precisions and pid not in precisions:
            errs.add(qdoc.error(("defaults", key), f"unknown precision '{pid}'", nearest(pid, precisions)))

    flows = []
    for key in sorted(k for k in docs if k.startswith("flow:")):
        if key in parsed and not skip_names:
            flows.append(_compile_flow(docs[key], parsed[key], units, set(ffile.formulas), need_source, errs,
                                       graph))
    _unique(None, [], [f.id for f in flows], "flow id", errs, docs=[docs[k] for k in sorted(docs) if k.startswith("flow:")])
    flows.sort(key=lambda f: (f.order, f.id))
    if not skip_names and not any(f.role == "sizing" for f in flows):
        errs.add(RuleError(f"{root.name}/flows", 1, 1, "no flow has role: sizing"))

    claims = []
    for i, c in enumerate([] if skip_names else parsed["sources"].claims):
        need_source(src_doc, ("claims", i, "source"), c.source)
        computed = _expr(src_doc, ("claims", i, "computed"), c.computed, units, errs)
        when = _expr(src_doc, ("claims", i, "applies_when"), c.applies_when, units, errs, want=ex.BOOL)
        if computed is None or when is None:
            continue
        _check_unit(src_doc, ("claims", i, "computed"), computed, units, ex.parse_unit(c.unit), errs)
        # checked against every GPU row only when the claim names a GPU property itself
        per_gpu = any(n.startswith(GPU_INPUT_PREFIX) for n in when.names)
        line = src_doc.pos(("claims", i))[0]
        claims.append(Claim(c.id, c.source, c.text, computed, c.unit, c.value, c.tolerance, when,
                            c.example_query, c.note, per_gpu, f"{src_doc.display}:{line}"))
    _unique(src_doc, [("claims", i, "id") for i in range(len(claims))], [c.id for c in claims], "claim id", errs)

    prices: dict[str, Any] = {}
    gpus_sound = not any(e.render().startswith(docs["gpus"].display + ":") for e in errs.errors)
    if "prices" in parsed and gpus and gpus_sound and not skip_names:   # else it echoes their errors
        kb_prices.check(docs["prices"], parsed["prices"], gpus, set(ffile.formulas) | set(inputs),
                        need_source, errs.add)
        prices = kb_prices.table(parsed["prices"])
        gpus = kb_prices.merge(gpus, prices)

    if errs.errors:
        raise RuleErrors(errs.errors)
    for flow in flows:
        flow.layers = flow_layers(graph, flow)
    from kb.derived import derive

    return derive(Knowledge(root=root, gpus=gpus, models=models, precisions=precisions, sources=sources,
                     inputs=inputs, constants=constants, formulas=formulas, closure=closure,
                     flows=flows, claims=claims, query=query, bare_size_refs=refs,
                     gpu_alias=gpu_alias, model_alias=model_alias, precision_alias=precision_alias,
                     runtimes=runtimes, runtime_alias=runtime_alias, runtime_defaults=rdefaults,
                     sharding=sharding, objectives=objectives,
                     error_bands=parsed["error_bands"].model_dump() if "error_bands" in parsed else {},
                     prices=prices, advice=kb_prices.advice_table(parsed.get("prices")), graph=graph))


def _training_tables(rfile: Any, rdoc: Doc, need_source: Any,
                     errs: _Collector) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """runtimes.yaml's sharding strategies and training objectives, their sources and names checked."""
    sharding = rfile.sharding.model_dump() if rfile.sharding is not None else {}
    strategies = sharding.get("strategies", {})
    for name, st in strategies.items():
        need_source(rdoc, ("sharding", "strategies", name, "source"), st["source"])
    for key in ("default", "offload_default"):
        if sharding and sharding[key] not in strategies:
            errs.add(rdoc.error(("sharding", key), f"unknown sharding '{sharding[key]}'",
                                nearest(sharding[key], strategies)))
    for i, rt in enumerate(rfile.runtimes):
        if rt.sharding is not None and rt.sharding not in strategies:
            errs.add(rdoc.error(("runtimes", i, "sharding"), f"unknown sharding '{rt.sharding}'",
                                nearest(rt.sharding, strategies)))
    objectives = {k: o.model_dump() for k, o in rfile.objectives.items()}
    for name, o in objectives.items():
        need_source(rdoc, ("objectives", name, "source"), o["source"])
    return sharding, objectives


def _capacities(gpus: dict[str, dict[str, Any]], constants: dict[str, dict[str, Any]]) -> None:
    """Each GPU's capacity from its bytes: `memory_gb` (decimal, what every comparison uses)
    and `memory_gib` (binary, how the memory is sold)."""
    per_gb = constants.get("bytes_per_gb", {}).get("value")
    per_gib = constants.get("bytes_per_gib", {}).get("value")
    for g in gpus.values():
        g.update(capacity_fields(g["memory_bytes"], per_gb, per_gib))


def _unique(doc: Doc | None, locs: list[tuple[Any, ...]], values: list[str], what: str,
            errs: _Collector, docs: list[Doc] | None = None) -> None:
    seen: dict[str, int] = {}
    for i, v in enumerate(values):
        if v in seen:
            if doc is not None:
                errs.add(doc.error(locs[i], f"duplicate {what} '{v}'"))
            elif docs:
                errs.add(docs[i].error(("id",), f"duplicate {what} '{v}'"))
        seen[v] = i


def _catalogue(doc: Doc, section: str, items: list[dict[str, Any]],
               errs: _Collector) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Items by id, and an alias table (normalised id, name and aliases → id)."""
    by_id: dict[str, dict[str, Any]] = {}
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


def _is_gpu_name(name: str) -> bool:
    return name.startswith(GPU_INPUT_PREFIX) or name in PER_GPU_INPUTS


def _col_offset(doc: Doc, loc: tuple[Any, ...]) -> int:
    """Column offset from the YAML value's start to the expression text (quotes)."""
    line, col = doc.pos(loc)
    try:
        text = doc.lines[line - 1]
    except IndexError:
        return col - 1
    return col - 1 + (1 if text[col - 1:col] in "\"'" else 0)


def _expr(doc: Doc, loc: tuple[Any, ...], text: str, units: dict[str, ex.Unit],
          errs: _Collector, want: ex.Unit | None = None) -> ex.Expr | None:
    line, col = doc.pos(loc)
    try:
        compiled = ex.parse(text)
    except ex.ExprSyntaxError as exc:
        offset = _col_offset(doc, loc) - (col - 1)
        errs.add(RuleError(doc.display, line, col + offset + exc.column - 1, exc.message,
                           exc.suggestion))
        return None
    ok = True
    for name in compiled.names:
        if name not in units:
            ok = False
            c = compiled.name_columns.get(name, 1)
            offset = _col_offset(doc, loc) - (col - 1)
            errs.add(RuleError(doc.display, line, col + offset + c - 1, f"unknown name '{name}'",
                               nearest(name, units)))
    if ok and want is not None:
        _check_unit(doc, loc, compiled, units, want, errs)
    return compiled if ok else None


def _check_native(doc: Doc, models: list[Any], precisions: dict[str, Any], need_source: Any,
                  errs: _Collector) -> None:
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


def _check_unit(doc: Doc, loc: tuple[Any, ...], compiled: ex.Expr, units: dict[str, ex.Unit],
                want: ex.Unit, errs: _Collector) -> None:
    try:
        got = ex.infer_unit(compiled.ast, units)
    except ex.UnitError as exc:
        errs.add(doc.error(loc, f"units: {exc}"))
        return
    if got is not None and got != want:
        errs.add(doc.error(loc, f"units: the expression gives {ex.format_unit(got)}, "
                                f"expected {ex.format_unit(want)}"))


def _compile_formulas(doc: Doc, ffile: Any, units: dict[str, ex.Unit],
                      errs: _Collector) -> dict[str, Formula]:
    out: dict[str, Formula] = {}
    for name, f in ffile.formulas.items():
        base = ("formulas", name)
        if (f.expr is None) == (f.cases is None):
            errs.add(doc.error(base, f"formula '{name}' needs either expr or cases (one of them)"))
            continue
        raw_cases: list[tuple[Any, ...]] = [(None, f.expr, None, base + ("expr",), None)] if f.expr is not None else [
            (c.when, c.expr, c.note, base + ("cases", i, "expr"), base + ("cases", i, "when"))
            for i, c in enumerate(f.cases or [])]
        cases: list[Case] = []
        want = units[name]
        for when_text, expr_text, note, eloc, wloc in raw_cases:
            e = _expr(doc, eloc, expr_text, units, errs, want=want)
            w = _expr(doc, wloc, when_text, units, errs, want=ex.BOOL) if when_text else None
            if e is not None and (when_text is None or w is not None):
                cases.append(Case(w, e, note))
        if len(cases) != len(raw_cases):
            continue
        names: list[str] = []
        for c in cases:
            names.extend(c.expr.names)
            if c.when:
                names.extend(c.when.names)
        names = list(dict.fromkeys(names))
        deps = tuple(n for n in names if n in ffile.formulas)
        line = doc.pos(base + ("<key>",))[0]
        out[name] = Formula(name, f.unit, f.meaning, tuple(cases), tuple(f.sources),
                            f"{doc.display}:{line}", tuple(names), deps, False, f.note)
    return out


def _closures(doc: Doc, graph: Any, errs: _Collector) -> dict[str, tuple[str, ...]]:
    """For each formula, the formulas to compute before it (its ancestors in the graph, in
    topological order); cycles are errors."""
    for cycle in formula_cycles(graph):
        errs.add(doc.error(("formulas", cycle[0], "<key>"),
                           "formulas depend on each other in a cycle: " + " → ".join(cycle)))
    return {name: order[:-1] for name, order in evaluation_orders(graph).items()}


def _mark_per_gpu(formulas: dict[str, Formula], closure: dict[str, tuple[str, ...]]) -> dict[str, Formula]:
    direct = {n for n, f in formulas.items() if any(_is_gpu_name(x) for x in f.names)}
    out = {}
    for name, f in formulas.items():
        per_gpu = name in direct or any(d in direct for d in closure.get(name, ()))
        out[name] = Formula(f.name, f.unit, f.meaning, f.cases, f.sources, f.where, f.names,
                            f.deps, per_gpu, f.note)
    return out


def _compile_flow(doc: Doc, flow: Any, units: dict[str, ex.Unit], formulas: set[str],
                  need_source: Any, errs: _Collector, graph: Any) -> Flow:
    """`formulas`: every declared formula name (one that failed to compile is reported once,
    in formulas.yaml, not again at each node that computes it). The flow joins `graph` (a flow
    whose id another flow already has is checked on a graph of its own)."""
    need_source(doc, ("source",), flow.source)
    nodes: dict[str, Node] = {}
    for i, n in enumerate(flow.nodes):
        if n.id in nodes:
            errs.add(doc.error(("nodes", i, "id"), f"duplicate node id '{n.id}'"))
            continue
        for j, fname in enumerate(n.compute):
            if fname not in formulas:
                errs.add(doc.error(("nodes", i, "compute", j), f"unknown formula '{fname}'",
                                   nearest(fname, formulas)))
        edges = []
        for j, e in enumerate(n.edges):
            when = _expr(doc, ("nodes", i, "edges", j, "when"), e.when, units, errs, want=ex.BOOL) if e.when else None
            edges.append(Edge(e.to, when, e.label))
        if n.kind == "verdict":
            if n.edges:
                errs.add(doc.error(("nodes", i, "edges"), f"verdict node '{n.id}' cannot have edges"))
            text_loc = ("nodes", i, "text")
            quote = _col_offset(doc, text_loc) - (doc.pos(text_loc)[1] - 1)
            for m in TEMPLATE_FIELD.finditer(n.text):
                if m.group(1) not in units:
                    errs.add(doc.error(text_loc, f"unknown name '{m.group(1)}' in the verdict text",
                                       nearest(m.group(1), units),
                                       column_offset=quote + m.start(1) if "\n" not in n.text else 0))
                elif m.group(2) is not None and not TEMPLATE_SPEC.match(m.group(2)):
                    errs.add(doc.error(("nodes", i, "text"),
                                       f"format '{m.group(2)}' of {{{m.group(1)}}} is not allowed; "
                                       "use a width of up to 2 digits and up to 6 decimals, e.g. :.1f"))
        elif not n.edges:
            errs.add(doc.error(("nodes", i, "id"), f"node '{n.id}' has no edges; only a verdict can end a flow"))
        elif n.edges[-1].when is not None:
            errs.add(doc.error(("nodes", i, "edges", len(n.edges) - 1),
                               f"the last edge of '{n.id}' has a condition, so some workloads match no branch; "
                               "leave its 'when' out to make it the otherwise branch"))
        line = doc.pos(("nodes", i))[0]
        nodes[n.id] = Node(n.id, n.kind, n.text, tuple(n.compute), tuple(edges), n.style,
                           f"{doc.display}:{line}")
    for i, n in enumerate(flow.nodes):
        for j, e in enumerate(n.edges):
            if e.to not in nodes:
                errs.add(doc.error(("nodes", i, "edges", j, "to"), f"edge to unknown node '{e.to}'",
                                   nearest(e.to, nodes)))
    if flow.entry not in nodes:
        errs.add(doc.error(("entry",), f"entry '{flow.entry}' is not a node", nearest(flow.entry, nodes)))
    ranking = []
    for i, r in enumerate(flow.ranking):
        if r.by not in units:
            errs.add(doc.error(("ranking", i, "by"), f"unknown name '{r.by}'", nearest(r.by, units)))
        ranking.append((r.by, r.order))
    result = Flow(flow.id, flow.title, flow.role, flow.order, flow.source, flow.entry, nodes,
                  ranking, doc.display)
    if any(graph.nodes[n].get("flow") == flow.id for n in graph):
        graph = knowledge_graph({})      # a duplicate id (reported below): checked on its own
    add_flow(graph, result)
    if flow.entry in nodes and all(e.to in nodes for n in nodes.values() for e in n.edges):
        _check_graph(doc, flow, result, errs, graph)
    return result


def _check_graph(doc: Doc, raw: Any, flow: Flow, errs: _Collector, graph: Any) -> None:
    index = {n.id: i for i, n in enumerate(raw.nodes)}
    cycle = flow_cycle(graph, flow)
    if cycle is not None:
        closing_from, closing_to = cycle[-2], cycle[-1]      # the edge that closes it
        node = raw.nodes[index[closing_from]]
        j = next(k for k, e in enumerate(node.edges) if e.to == closing_to)
        errs.add(doc.error(("nodes", index[closing_from], "edges", j, "to"),
                           "the flow has a cycle: " + " → ".join(cycle)))
    for node_id in unreachable(graph, flow):
        errs.add(doc.error(("nodes", index[node_id], "id"),
                           f"node '{node_id}' cannot be reached from the entry '{flow.entry}'"))
