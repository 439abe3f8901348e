"""Validated knowledge: rules/ → one `Knowledge` object the engine reads.

In: a rules directory. Out: `Knowledge` (GPUs, models, precisions, compiled formulas, flows,
sources and claims, and the networkx graph of formulas and flow nodes, kb.knowledge.graph, that gives each
formula's evaluation order and each flow's layers), or
`RuleErrors` listing every problem as `file:line:col: message` in one run.

Checks beyond the schema: ids and aliases unique, every source id known, every expression
parses, every name resolves, units agree, no cycles between formulas, flows acyclic with every
node reachable and every question's branches covered; every formula a finite number on at
least one reference workload (kb.engine.reference), and on at least one workload of every task it
applies to (kb.engine.sweep). The checks are in kb.knowledge.checks, the
compiling of formulas, flows and claims in kb.knowledge.compile; this module loads the files
and assembles the Knowledge.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from kb.expr import parse as ex
from kb.knowledge import prices as kb_prices, schema as sc
from kb.errors import RuleError, RuleErrors, nearest
from kb.knowledge.graph import flow_layers, knowledge_graph
from kb.knowledge.checks import Collector, capacities, catalogue, check_native, training_tables, unique
from kb.knowledge.compile import closures, compile_claims, compile_flow, compile_formulas, mark_per_gpu
from kb.knowledge.loader import Doc, Path_, display_name, load, validate
from kb.knowledge.data import (GPU_INPUT_PREFIX, PER_GPU_INPUTS, TEMPLATE_FIELD, Case, Claim, Edge, Flow,
                      Formula, Knowledge, Node, norm)
from kb.knowledge.derived import derive
from kb.paths import OPTIONAL_RULE_FILES, REQUIRED_RULE_FILES
from kb.knowledge.schema import FILES

if TYPE_CHECKING:
    from kb.knowledge.records_rules import Price

__all__ = ["build", "Knowledge", "Formula", "Flow", "Node", "Edge", "Claim", "Case", "norm",
           "TEMPLATE_FIELD", "GPU_INPUT_PREFIX", "PER_GPU_INPUTS"]

# ---------------------------------------------------------------- building


def build(root: str | Path) -> Knowledge:
    """Load and check every rule file under root. Raises RuleErrors with all problems."""
    root = Path(root)
    errs = Collector()
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
    from kb.engine import reference

    problems = reference.check_all(kn, docs["query"], docs["formulas"])
    if problems:
        raise RuleErrors(problems)
    return kn


_STAND_INS = REQUIRED_RULE_FILES


def _check_the_rest(root: Path, docs: dict[str, Doc], parsed: dict[str, Any], errs: Collector) -> None:
    """Some files failed their schema: still run the cross-file checks on the ones that passed,
    so one run reports every error. A file that failed stands in as empty, and the checks that
    would only echo its failure (sources, names from formulas.yaml) are left out."""
    missing = [n for n in _STAND_INS if n not in parsed or n not in docs]
    if any(n not in docs for n in _STAND_INS):
        return  # a file is missing or unreadable: nothing sound to cross-check
    empty = {
        "sources": sc.SourcesFile.model_construct(sources=[], claims=[]),
        "precisions": sc.PrecisionsFile.model_construct(precisions=[]),
        "gpus": sc.GpusFile.model_construct(gpus=[]),
        "models": sc.ModelsFile.model_construct(models=[], bare_size=sc.BareSizeSchema.model_construct(references=[]),
                                               config_defaults=sc.ConfigDefaultsSchema.model_construct(source="")),
        "formulas": sc.FormulasFile.model_construct(inputs={}, constants={}, formulas={}),
        "runtimes": sc.RuntimesFile.model_construct(runtimes=[], defaults=None),
    }
    if "query" in missing or "runtimes" in missing:
        return  # defaults and runtime defaults are read everywhere below
    trial = dict(parsed)
    for name in missing:
        trial[name] = empty[name]
    before = len(errs.errors)
    probe = Collector()
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
              parsed: dict[str, Any], errs: Collector) -> None:
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
              errs: Collector, skip_sources: bool = False, skip_names: bool = False,
              skip_precisions: bool = False) -> Knowledge:
    src_doc = docs["sources"]
    sources = {s.id: s.model_dump() for s in parsed["sources"].sources}
    unique(src_doc, [("sources", i, "id") for i in range(len(sources))],
            [s.id for s in parsed["sources"].sources], "source id", errs)
    known_sources = set(sources)

    def need_source(doc: Doc, loc: Path_, sid: str) -> None:
        if not skip_sources and sid not in known_sources:
            errs.add(doc.error(loc, f"unknown source '{sid}'", nearest(sid, known_sources)))

    gpus, gpu_alias = catalogue(docs["gpus"], "gpus", [g.model_dump() for g in parsed["gpus"].gpus], errs)
    for i, g in enumerate(parsed["gpus"].gpus):
        need_source(docs["gpus"], ("gpus", i, "source"), g.source)
        for fname, sid in g.field_sources.items():
            if fname not in type(g).model_fields:
                errs.add(docs["gpus"].error(("gpus", i, "field_sources", fname, "<key>"),
                                            f"'{fname}' is not a GPU field",
                                            nearest(fname, type(g).model_fields)))
            need_source(docs["gpus"], ("gpus", i, "field_sources", fname), sid)
    models, model_alias = catalogue(docs["models"], "models", [m.model_dump() for m in parsed["models"].models], errs)
    for i, m in enumerate(parsed["models"].models):
        need_source(docs["models"], ("models", i, "source"), m.source)
        if m.params_active > m.params_total:
            errs.add(docs["models"].error(("models", i, "params_active"),
                                          "params_active is larger than params_total"))
    refs = list(parsed["models"].bare_size.references)
    config_defaults = parsed["models"].config_defaults
    need_source(docs["models"], ("config_defaults", "source"), config_defaults.source)
    for i, ref in enumerate(refs):
        if ref not in models:
            errs.add(docs["models"].error(("bare_size", "references", i),
                                          f"unknown model '{ref}'", nearest(ref, models)))
    runtimes, runtime_alias = catalogue(docs["runtimes"], "runtimes", [r.model_dump() for r in parsed["runtimes"].runtimes], errs)
    rdoc = docs["runtimes"]
    for i, rt in enumerate(parsed["runtimes"].runtimes):
        need_source(rdoc, ("runtimes", i, "source"), rt.source)
        for key in ("gemm_accumulate_source", "lora_dropout_source", "quantizes_output_head_source",
                    "native_gemm_source", "hopper_warpgroup_mma_source", "well_supported_source",
                    "unsupported_architectures_source", "unsupported_formats_source",
                    "default_precision_source"):
            if getattr(rt, key):
                need_source(rdoc, ("runtimes", i, key), getattr(rt, key))
        if rt.kind in ("inference", "both"):
            for key in ("decode_bandwidth_efficiency", "quant_kernel_efficiency",
                        "decode_step_overhead_s", "prefill_compute_efficiency"):
                if getattr(rt, key) is None:
                    errs.add(rdoc.error(("runtimes", i, "id"), f"inference runtime '{rt.id}' needs {key}"))
        if rt.kind in ("training", "both") and rt.training_mfu is None:
            errs.add(rdoc.error(("runtimes", i, "id"), f"training runtime '{rt.id}' needs training_mfu"))
        for j, recipe in enumerate(rt.recipes):
            need_source(rdoc, ("runtimes", i, "recipes", j, "source"), recipe.source)
    sharding, objectives = training_tables(parsed["runtimes"], rdoc, need_source, errs)
    if "error_bands" in parsed:
        need_source(docs["error_bands"], ("source",), parsed["error_bands"].source)
    rdefaults = parsed["runtimes"].defaults.model_dump()
    need_source(rdoc, ("defaults", "source"), rdefaults["source"])
    for key in ("inference", "gguf", "training"):
        if rdefaults[key] not in runtimes:
            errs.add(rdoc.error(("defaults", key), f"unknown runtime '{rdefaults[key]}'",
                                nearest(rdefaults[key], runtimes)))
    for key in ("embedded", "per_card"):
        if rdefaults.get(key):
            rule = rdefaults[key]
            need_source(rdoc, ("defaults", key, "source"), rule["source"])
            if rule["runtime"] not in runtimes:
                errs.add(rdoc.error(("defaults", key, "runtime"), f"unknown runtime '{rule['runtime']}'",
                                    nearest(rule["runtime"], runtimes)))
    precisions, precision_alias = catalogue(docs["precisions"], "precisions", [p.model_dump() for p in parsed["precisions"].precisions], errs)
    for i, rt in enumerate(parsed["runtimes"].runtimes):
        for pid in rt.unsupported_formats:
            if precisions and pid not in precisions:
                errs.add(rdoc.error(("runtimes", i, "unsupported_formats", pid), f"unknown precision '{pid}'",
                                    nearest(pid, precisions)))
    for pair in (rdefaults.get("per_card") or {}).get("precisions", {}).items():
        for pid in pair:
            if precisions and pid not in precisions:
                errs.add(rdoc.error(("defaults", "per_card", "precisions", pair[0]), f"unknown precision '{pid}'",
                                    nearest(pid, precisions)))
    for i, p in enumerate(parsed["precisions"].precisions):
        need_source(docs["precisions"], ("precisions", i, "source"), p.source)
    for i, p in enumerate(parsed["precisions"].precisions):
        if p.runtime is not None and runtimes and p.runtime not in runtimes:
            errs.add(docs["precisions"].error(("precisions", i, "runtime"), f"unknown runtime '{p.runtime}'",
                                              nearest(p.runtime, runtimes)))
    for i, rt in enumerate(parsed["runtimes"].runtimes):
        if rt.default_precision is not None and precisions and rt.default_precision not in precisions:
            errs.add(rdoc.error(("runtimes", i, "default_precision"), f"unknown precision '{rt.default_precision}'",
                                nearest(rt.default_precision, precisions)))
        for j, pid in enumerate(rt.native_gemm):
            if precisions and pid not in precisions:
                errs.add(rdoc.error(("runtimes", i, "native_gemm", j), f"unknown precision '{pid}'",
                                    nearest(pid, precisions)))
    if not skip_precisions:
        check_native(docs["models"], parsed["models"].models, precisions, need_source, errs)

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
    capacities(gpus, constants)
    formulas = compile_formulas(fdoc, ffile, units, errs)
    graph = knowledge_graph(formulas)
    closure = closures(fdoc, graph, errs)
    formulas = mark_per_gpu(formulas, closure)

    query = parsed["query"].model_dump()
    qdoc = docs["query"]
    need_source(qdoc, ("defaults", "source"), parsed["query"].defaults.source)
    for name, sit in parsed["query"].situations.items():
        need_source(qdoc, ("situations", name, "source"), sit.source)
        if not skip_precisions and sit.precision is not None and sit.precision not in precisions:
            errs.add(qdoc.error(("situations", name, "precision"), f"unknown precision '{sit.precision}'",
                                nearest(sit.precision, precisions)))
    if parsed["query"].cost_batch is not None:
        need_source(qdoc, ("cost_batch", "source"), parsed["query"].cost_batch.source)
    if (fb := parsed["query"].local_fallback) is not None:
        need_source(qdoc, ("local_fallback", "source"), fb.source)
        if not skip_precisions and fb.precision not in precisions:
            errs.add(qdoc.error(("local_fallback", "precision"), f"unknown precision '{fb.precision}'",
                                nearest(fb.precision, precisions)))
    for i, um in enumerate(parsed["query"].unnamed_model):
        need_source(qdoc, ("unnamed_model", i, "source"), um.source)
        if um.model not in models:
            errs.add(qdoc.error(("unnamed_model", i, "model"), f"unknown model '{um.model}'", nearest(um.model, models)))
        if runtimes and um.runtime is not None and um.runtime not in runtimes:
            errs.add(qdoc.error(("unnamed_model", i, "runtime"), f"unknown runtime '{um.runtime}'",
                                nearest(um.runtime, runtimes)))
        if not skip_precisions and um.precision is not None and um.precision not in precisions:
            errs.add(qdoc.error(("unnamed_model", i, "precision"), f"unknown precision '{um.precision}'",
                                nearest(um.precision, precisions)))
    for i, qf in enumerate(parsed["query"].question_formats):
        need_source(qdoc, ("question_formats", i, "source"), qf.source)
        if not skip_precisions and qf.precision not in precisions:
            errs.add(qdoc.error(("question_formats", i, "precision"), f"unknown precision '{qf.precision}'",
                                nearest(qf.precision, precisions)))
        for j, rid in enumerate([qf.runtime, *qf.named_runtimes]):
            if runtimes and rid is not None and rid not in runtimes:
                where = ("question_formats", i, "runtime") if j == 0 else ("question_formats", i, "named_runtimes", j - 1)
                errs.add(qdoc.error(where, f"unknown runtime '{rid}'", nearest(rid, runtimes)))
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
            flows.append(compile_flow(docs[key], parsed[key], units, set(ffile.formulas), need_source, errs,
                                       graph))
    unique(None, [], [f.id for f in flows], "flow id", errs, docs=[docs[k] for k in sorted(docs) if k.startswith("flow:")])
    flows.sort(key=lambda f: (f.order, f.id))
    if not skip_names and not any(f.role == "sizing" for f in flows):
        errs.add(RuleError(f"{root.name}/flows", 1, 1, "no flow has role: sizing"))

    claims = [] if skip_names else compile_claims(src_doc, parsed["sources"], units, need_source, errs)

    prices: dict[str, Price] = {}
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

    return derive(Knowledge(root=str(root), gpus=gpus, models=models, precisions=precisions, sources=sources,
                     inputs=inputs, constants=constants, formulas=formulas, closure=closure,
                     flows=flows, claims=claims, query=query, bare_size_refs=refs,
                     config_defaults=config_defaults.model_dump(exclude={"source"}),
                     gpu_alias=gpu_alias, model_alias=model_alias, precision_alias=precision_alias,
                     runtimes=runtimes, runtime_alias=runtime_alias, runtime_defaults=rdefaults,
                     sharding=sharding, objectives=objectives,
                     error_bands=parsed["error_bands"].model_dump() if "error_bands" in parsed else {},
                     prices=prices, advice=kb_prices.advice_table(parsed.get("prices")), graph=graph))
