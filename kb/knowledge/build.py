"""Validated knowledge: rules/ → one `Knowledge` object the engine reads.

In: a rules directory. Out: `Knowledge` (GPUs, models, precisions, compiled formulas, flows,
sources and claims, and the networkx graph of formulas and flow nodes, kb.knowledge.graph, that gives each
formula's evaluation order and each flow's layers), or
`RuleErrors` listing every problem as `file:line:col: message` in one run.

Checks beyond the schema: ids and aliases unique, every source id known, every expression
parses, every name resolves, units agree, no cycles between formulas, flows acyclic with every
node reachable and every question's branches covered; every formula a finite number on at
least one reference workload (kb.engine.flows.reference), and on at least one workload of every task it
applies to (kb.engine.flows.sweep). The checks are in kb.knowledge.checks, the
compiling of formulas, flows and claims in kb.knowledge.compile; this module loads the files
and assembles the Knowledge.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from kb.expr import parse as ex
from kb.knowledge import prices as kb_prices, schema as sc, wording
from kb.errors import RuleError, RuleErrors, nearest
from kb.knowledge.graph import flow_layers, knowledge_graph
from kb.knowledge.checks import (Collector, capacities, catalogue, check_architecture_from, check_fp8_scales, check_native,
                                 training_tables, unique)
from kb.knowledge.compile import closures, compile_claims, compile_flow, compile_formulas, mark_per_gpu
from kb.knowledge.loader import Doc, Path_, display_name, load, validate
from kb.knowledge.data import (GPU_INPUT_PREFIX, PER_GPU_INPUTS, TEMPLATE_FIELD, Case, Claim, Edge, Flow,
                      Formula, Knowledge, Node, norm)
from kb.knowledge.derived import derive
from kb.paths import OPTIONAL_RULE_FILES, REQUIRED_RULE_FILES
from kb.knowledge.schema import FILES

if TYPE_CHECKING:
    from collections.abc import Iterable

    import networkx as nx

    from kb.knowledge.records import (GPU, EmbeddedDefault, Model, Objective, PerCardDefault, Precision, Runtime,
                                      RuntimeDefaults, ShardingTable, Source)
    from kb.knowledge.records_rules import Constant, Input, Price, QueryRules
    from kb.knowledge.schema import ConfigDefaultsSchema, RuntimesFile

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
    from kb.engine.flows import reference

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
    """The Knowledge, each file checked against the others in the order its steps run (so the
    errors are listed in that order): sources, GPUs, models, runtimes, precisions, formulas,
    query rules, flows, claims, prices."""
    b = _Assembly(root, docs, parsed, errs, skip_sources, skip_names, skip_precisions)
    sources = b.sources()
    gpus, gpu_alias = b.gpus()
    models, model_alias, (refs, unnamed_refs), config_defaults = b.models()
    runtimes, runtime_alias, sharding, objectives = b.runtimes()
    b.runtime_models(runtimes, models)
    rdefaults = b.runtime_defaults(runtimes)
    precisions, precision_alias = b.precisions(runtimes, rdefaults)
    inputs, constants, units, formulas, graph, closure = b.formulas(gpus)
    query = b.query(models, runtimes, precisions, constants)
    flows = b.flows(units, graph)
    ffile = parsed["formulas"]
    claims = [] if skip_names else compile_claims(docs["sources"], parsed["sources"], units, b.need_source, errs)
    prices, gpus = b.prices(gpus, set(ffile.formulas) | set(inputs))
    if errs.errors:
        raise RuleErrors(errs.errors)
    for flow in flows:
        flow.layers = flow_layers(graph, flow)

    return derive(Knowledge(root=str(root), gpus=gpus, models=models, precisions=precisions, sources=sources,
                     inputs=inputs, constants=constants, formulas=formulas, closure=closure,
                     flows=flows, claims=claims, query=query, bare_size_refs=refs, bare_size_unnamed_refs=unnamed_refs,
                     config_defaults=config_defaults.model_dump(exclude={"source"}),
                     gpu_alias=gpu_alias, model_alias=model_alias, precision_alias=precision_alias,
                     runtimes=runtimes, runtime_alias=runtime_alias, runtime_defaults=rdefaults,
                     sharding=sharding, objectives=objectives,
                     error_bands=parsed["error_bands"].model_dump() if "error_bands" in parsed else {},
                     prices=prices, advice=kb_prices.advice_table(parsed.get("prices")), graph=graph))


# the runtime fields that name a source of their own
_RUNTIME_SOURCES = ("gemm_accumulate_source", "lora_dropout_source", "quantizes_output_head_source",
                    "fsdp_root_embeddings_source",
                    "native_gemm_source", "hopper_warpgroup_mma_source", "blackwell_mx_experts_source", "well_supported_source",
                    "unsupported_architectures_source", "unsupported_formats_source",
                    "default_precision_source", "experts_only_rest_bits_source",
                    "unsupported_models_source", "decode_efficiency_source", "prefill_efficiency_source",
                    "amd_decode_efficiency_source")
# what an inference runtime must give
_INFERENCE_NEEDS = ("decode_bandwidth_efficiency", "quant_kernel_efficiency", "decode_step_overhead_s",
                    "prefill_compute_efficiency")


class _Assembly:
    """The steps of _assemble over the validated files, each checking what its file names of the
    others and adding every problem to `errs`. `skip_*`: a file that failed its schema stands in
    as empty (kb.knowledge.build._check_the_rest), and the checks that would only echo its
    failure are left out."""

    def __init__(self, root: Path, docs: dict[str, Doc], parsed: dict[str, Any], errs: Collector,
                 skip_sources: bool, skip_names: bool, skip_precisions: bool) -> None:
        self.root, self.docs, self.parsed, self.errs = root, docs, parsed, errs
        self.skip_sources, self.skip_names, self.skip_precisions = skip_sources, skip_names, skip_precisions
        self.known_sources: set[str] = set()

    def need_source(self, doc: Doc, loc: Path_, sid: str) -> None:
        if not self.skip_sources and sid not in self.known_sources:
            self.errs.add(doc.error(loc, f"unknown source '{sid}'", nearest(sid, self.known_sources)))

    def unknown(self, doc: Doc, loc: Path_, what: str, name: str, known: Iterable[str]) -> None:
        self.errs.add(doc.error(loc, f"unknown {what} '{name}'", nearest(name, known)))

    def precision_unknown(self, doc: Doc, loc: Path_, pid: str, precisions: dict[str, Precision]) -> None:
        """A precision id not in precisions.yaml (unless that file stands in as empty)."""
        if not self.skip_precisions and pid not in precisions:
            self.unknown(doc, loc, "precision", pid, precisions)

    def sources(self) -> dict[str, Source]:
        listed = self.parsed["sources"].sources
        sources = {s.id: s.model_dump() for s in listed}
        unique(self.docs["sources"], [("sources", i, "id") for i in range(len(sources))],
               [s.id for s in listed], "source id", self.errs)
        self.known_sources = set(sources)
        return sources

    def gpus(self) -> tuple[dict[str, GPU], dict[str, str]]:
        doc, listed = self.docs["gpus"], self.parsed["gpus"].gpus
        gpus, gpu_alias = catalogue(doc, "gpus", [g.model_dump() for g in listed], self.errs)
        for i, g in enumerate(listed):
            self.need_source(doc, ("gpus", i, "source"), g.source)
            for fname, sid in g.field_sources.items():
                if fname not in type(g).model_fields:
                    self.errs.add(doc.error(("gpus", i, "field_sources", fname, "<key>"),
                                            f"'{fname}' is not a GPU field", nearest(fname, type(g).model_fields)))
                self.need_source(doc, ("gpus", i, "field_sources", fname), sid)
        return gpus, gpu_alias

    def models(self) -> tuple[dict[str, Model], dict[str, str], tuple[list[str], list[str]], ConfigDefaultsSchema]:
        doc, mfile = self.docs["models"], self.parsed["models"]
        models, model_alias = catalogue(doc, "models", [m.model_dump() for m in mfile.models], self.errs)
        for i, m in enumerate(mfile.models):
            self.need_source(doc, ("models", i, "source"), m.source)
            if m.params_active > m.params_total:
                self.errs.add(doc.error(("models", i, "params_active"), "params_active is larger than params_total"))
        refs = list(mfile.bare_size.references)
        self.need_source(doc, ("config_defaults", "source"), mfile.config_defaults.source)
        unnamed = list(mfile.bare_size.unnamed_references) or refs
        for key, listed in (("references", refs), ("unnamed_references", list(mfile.bare_size.unnamed_references))):
            for i, ref in enumerate(listed):
                if ref not in models:
                    self.unknown(doc, ("bare_size", key, i), "model", ref, models)
        return models, model_alias, (refs, unnamed), mfile.config_defaults

    def runtimes(self) -> tuple[dict[str, Runtime], dict[str, str], ShardingTable, dict[str, Objective]]:
        """Each runtime's sources and the figures its kind needs; the training tables."""
        rdoc, rfile = self.docs["runtimes"], self.parsed["runtimes"]
        runtimes, runtime_alias = catalogue(rdoc, "runtimes", [r.model_dump() for r in rfile.runtimes], self.errs)
        for i, rt in enumerate(rfile.runtimes):
            self.need_source(rdoc, ("runtimes", i, "source"), rt.source)
            for key in _RUNTIME_SOURCES:
                if getattr(rt, key):
                    self.need_source(rdoc, ("runtimes", i, key), getattr(rt, key))
            needs = list(_INFERENCE_NEEDS) if rt.kind in ("inference", "both") else []
            for key in (k for k in needs if getattr(rt, k) is None):
                self.errs.add(rdoc.error(("runtimes", i, "id"), f"inference runtime '{rt.id}' needs {key}"))
            if rt.kind in ("training", "both") and rt.training_mfu is None:
                self.errs.add(rdoc.error(("runtimes", i, "id"), f"training runtime '{rt.id}' needs training_mfu"))
            for j, recipe in enumerate(rt.recipes):
                self.need_source(rdoc, ("runtimes", i, "recipes", j, "source"), recipe.source)
        sharding, objectives = training_tables(rfile, rdoc, self.need_source, self.errs)
        if "error_bands" in self.parsed:
            self.need_source(self.docs["error_bands"], ("source",), self.parsed["error_bands"].source)
        return runtimes, runtime_alias, sharding, objectives

    def runtime_models(self, runtimes: dict[str, Runtime], models: dict[str, Model]) -> None:
        """runtimes.yaml unsupported_models: known models, handed to a known runtime."""
        rdoc = self.docs["runtimes"]
        for i, rt in enumerate(runtimes.values()):
            for j, mid in enumerate(rt.get("unsupported_models") or []):
                if mid not in models:
                    self.unknown(rdoc, ("runtimes", i, "unsupported_models", j), "model", mid, models)
            other = rt.get("unsupported_models_runtime")
            if other is not None and other not in runtimes:
                self.unknown(rdoc, ("runtimes", i, "unsupported_models_runtime"), "runtime", other, runtimes)

    def runtime_defaults(self, runtimes: dict[str, Runtime]) -> RuntimeDefaults:
        """runtimes.yaml defaults: known runtimes, each rule with its source."""
        rdoc = self.docs["runtimes"]
        rdefaults = cast("RuntimeDefaults", self.parsed["runtimes"].defaults.model_dump())
        self.need_source(rdoc, ("defaults", "source"), rdefaults["source"])
        for key, rid in (("inference", rdefaults["inference"]), ("gguf", rdefaults["gguf"]),
                         ("training", rdefaults["training"])):
            if rid not in runtimes:
                self.unknown(rdoc, ("defaults", key), "runtime", rid, runtimes)
        rules: tuple[tuple[str, EmbeddedDefault | PerCardDefault | None], ...] = (
            ("embedded", rdefaults.get("embedded")), ("per_card", rdefaults.get("per_card")))
        for key, rule in rules:
            if rule:
                self.need_source(rdoc, ("defaults", key, "source"), rule["source"])
                if rule["runtime"] not in runtimes:
                    self.unknown(rdoc, ("defaults", key, "runtime"), "runtime", rule["runtime"], runtimes)
        return rdefaults

    def precisions(self, runtimes: dict[str, Runtime],
                   rdefaults: RuntimeDefaults) -> tuple[dict[str, Precision], dict[str, str]]:
        """The formats, and every format the runtimes and the models name checked against them."""
        pdoc, rdoc, rfile = self.docs["precisions"], self.docs["runtimes"], self.parsed["runtimes"]
        listed = self.parsed["precisions"].precisions
        precisions, precision_alias = catalogue(pdoc, "precisions", [p.model_dump() for p in listed], self.errs)
        for i, rt in enumerate(rfile.runtimes):
            for pid in rt.unsupported_formats:
                if precisions and pid not in precisions:
                    self.unknown(rdoc, ("runtimes", i, "unsupported_formats", pid), "precision", pid, precisions)
        per_card = rdefaults.get("per_card")
        for pair in (per_card["precisions"] if per_card else {}).items():
            for pid in pair:
                if precisions and pid not in precisions:
                    self.unknown(rdoc, ("defaults", "per_card", "precisions", pair[0]), "precision", pid, precisions)
        for i, p in enumerate(listed):
            self.need_source(pdoc, ("precisions", i, "source"), p.source)
        for i, p in enumerate(listed):
            if p.runtime is not None and runtimes and p.runtime not in runtimes:
                self.unknown(pdoc, ("precisions", i, "runtime"), "runtime", p.runtime, runtimes)
        self._runtime_formats(rfile, precisions)
        if not self.skip_precisions:
            check_native(self.docs["models"], self.parsed["models"].models, precisions, self.need_source, self.errs)
            check_fp8_scales(self.docs["models"], self.parsed["models"].models, self.need_source, self.errs)
            check_architecture_from(self.docs["models"], self.parsed["models"].models, self.errs)
        return precisions, precision_alias

    def _runtime_formats(self, rfile: RuntimesFile, precisions: dict[str, Precision]) -> None:
        """Each runtime's default precision and native GEMM formats are known formats."""
        rdoc = self.docs["runtimes"]
        for i, rt in enumerate(rfile.runtimes):
            if rt.default_precision is not None and precisions and rt.default_precision not in precisions:
                self.unknown(rdoc, ("runtimes", i, "default_precision"), "precision", rt.default_precision, precisions)
            for j, pid in enumerate(rt.native_gemm):
                if precisions and pid not in precisions:
                    self.unknown(rdoc, ("runtimes", i, "native_gemm", j), "precision", pid, precisions)

    def formulas(self, gpus: dict[str, GPU]) -> tuple[dict[str, Input], dict[str, Constant], dict[str, ex.Unit],
                                                    dict[str, Formula], nx.DiGraph[str], dict[str, tuple[str, ...]]]:
        """inputs, constants and formulas (one namespace), their units, the formulas compiled and
        their graph and closures; each GPU's capacity from the constants."""
        fdoc, ffile = self.docs["formulas"], self.parsed["formulas"]
        inputs = {k: v.model_dump() for k, v in ffile.inputs.items()}
        constants = {k: v.model_dump() for k, v in ffile.constants.items()}
        for name, c in ffile.constants.items():
            self.need_source(fdoc, ("constants", name, "source"), c.source)
        for name, f in ffile.formulas.items():
            for j, sid in enumerate(f.sources):
                self.need_source(fdoc, ("formulas", name, "sources", j), sid)
        for name in set(inputs) & set(constants) | set(inputs) & set(ffile.formulas) | set(constants) & set(ffile.formulas):
            self.errs.add(fdoc.error(("formulas", name, "<key>") if name in ffile.formulas else ("constants", name, "<key>"),
                                     f"'{name}' is defined twice (inputs, constants and formulas share one namespace)"))
        units: dict[str, ex.Unit] = {}
        for table in (inputs, constants, ffile.formulas):
            for name, item in table.items():
                unit_text = item["unit"] if isinstance(item, dict) else item.unit
                units[name] = ex.parse_unit(str(unit_text))
        capacities(gpus, constants)
        formulas = compile_formulas(fdoc, ffile, units, self.errs)
        graph = knowledge_graph(formulas)
        closure = closures(fdoc, graph, self.errs)
        return inputs, constants, units, mark_per_gpu(formulas, closure), graph, closure

    def query(self, models: dict[str, Model], runtimes: dict[str, Runtime], precisions: dict[str, Precision],
              constants: dict[str, Constant]) -> QueryRules:
        """query.yaml: the sources of its rules and every model, runtime and format it names."""
        query = cast("QueryRules", self.parsed["query"].model_dump())
        self._situations(precisions)
        self._unnamed_models(models, runtimes, precisions)
        self._question_formats(runtimes, precisions)
        self._fleet_kv(runtimes, precisions)
        self._best_models(models)
        self._limits(constants)
        for err in wording.check(self.docs["query"], self.parsed["query"].verdict.templates.model_dump()):
            self.errs.add(err)
        for key in ("inference_precision", "training_precision", "qlora_precision", "kv_precision"):
            self.precision_unknown(self.docs["query"], ("defaults", key), query["defaults"][key], precisions)
        return query

    def _situations(self, precisions: dict[str, Precision]) -> None:
        qdoc, q = self.docs["query"], self.parsed["query"]
        self.need_source(qdoc, ("defaults", "source"), q.defaults.source)
        for name, sit in q.situations.items():
            self.need_source(qdoc, ("situations", name, "source"), sit.source)
            if sit.precision is not None:
                self.precision_unknown(qdoc, ("situations", name, "precision"), sit.precision, precisions)
        if q.cost_batch is not None:
            self.need_source(qdoc, ("cost_batch", "source"), q.cost_batch.source)
        if (hq := q.hf_quantization) is not None:
            self.need_source(qdoc, ("hf_quantization", "source"), hq.source)
            for i, row in enumerate(hq.rules):
                for key in ("precision", "moe_precision"):
                    if (pid := getattr(row, key)) is not None:
                        self.precision_unknown(qdoc, ("hf_quantization", "rules", i, key), pid, precisions)
        if (fb := q.local_fallback) is not None:
            self.need_source(qdoc, ("local_fallback", "source"), fb.source)
            self.precision_unknown(qdoc, ("local_fallback", "precision"), fb.precision, precisions)

    def _unnamed_models(self, models: dict[str, Model], runtimes: dict[str, Runtime],
                        precisions: dict[str, Precision]) -> None:
        qdoc = self.docs["query"]
        for i, um in enumerate(self.parsed["query"].unnamed_model):
            self.need_source(qdoc, ("unnamed_model", i, "source"), um.source)
            if um.model not in models:
                self.unknown(qdoc, ("unnamed_model", i, "model"), "model", um.model, models)
            if runtimes and um.runtime is not None and um.runtime not in runtimes:
                self.unknown(qdoc, ("unnamed_model", i, "runtime"), "runtime", um.runtime, runtimes)
            if um.precision is not None:
                self.precision_unknown(qdoc, ("unnamed_model", i, "precision"), um.precision, precisions)

    def _question_formats(self, runtimes: dict[str, Runtime], precisions: dict[str, Precision]) -> None:
        qdoc = self.docs["query"]
        for i, qf in enumerate(self.parsed["query"].question_formats):
            self.need_source(qdoc, ("question_formats", i, "source"), qf.source)
            self.precision_unknown(qdoc, ("question_formats", i, "precision"), qf.precision, precisions)
            for j, rid in enumerate([qf.runtime, *qf.named_runtimes]):
                if runtimes and rid is not None and rid not in runtimes:
                    where = ("question_formats", i, "runtime") if j == 0 else ("question_formats", i, "named_runtimes", j - 1)
                    self.unknown(qdoc, where, "runtime", rid, runtimes)

    def _fleet_kv(self, runtimes: dict[str, Runtime], precisions: dict[str, Precision]) -> None:
        """The fleet KV rule's formats and runtimes are known and its source is listed."""
        qdoc, rule = self.docs["query"], self.parsed["query"].fleet_kv
        if rule is None:
            return
        self.need_source(qdoc, ("fleet_kv", "source"), rule.source)
        self.precision_unknown(qdoc, ("fleet_kv", "kv"), rule.kv, precisions)
        for i, pid in enumerate(rule.weights):
            self.precision_unknown(qdoc, ("fleet_kv", "weights", i), pid, precisions)
        for i, rid in enumerate(rule.runtimes):
            if runtimes and rid not in runtimes:
                self.unknown(qdoc, ("fleet_kv", "runtimes", i), "runtime", rid, runtimes)

    def _best_models(self, models: dict[str, Model]) -> None:
        """Each ranking's source is known and each model it ranks is in the catalogue."""
        qdoc, best = self.docs["query"], self.parsed["query"].best_models
        if best is None:
            return
        for i, ranking in enumerate(best.rankings):
            self.need_source(qdoc, ("best_models", "rankings", i, "source"), ranking.source)
            for j, ranked in enumerate(ranking.models):
                if ranked.model not in models:
                    self.unknown(qdoc, ("best_models", "rankings", i, "models", j, "model"), "model", ranked.model, models)

    def _limits(self, constants: dict[str, Constant]) -> None:
        limit = constants.get("max_gpu_count")
        most = limit.get("value") if limit is not None else None
        counts = self.parsed["query"].limits.get("gpu_count")
        if most is not None and counts is not None and counts[1] != most:
            self.errs.add(self.docs["query"].error(
                ("limits", "gpu_count"), f"limits.gpu_count ends at {counts[1]:g}, but formulas.yaml's max_gpu_count "
                f"(the most GPUs kbq sizes) is {most:g}; make them agree"))

    def flows(self, units: dict[str, ex.Unit], graph: nx.DiGraph[str]) -> list[Flow]:
        """Each flow compiled, ids unique, in order; one of them sizes."""
        docs, names = self.docs, set(self.parsed["formulas"].formulas)
        keys = sorted(k for k in docs if k.startswith("flow:"))
        flows = [compile_flow(docs[k], self.parsed[k], units, names, self.need_source, self.errs, graph)
                 for k in keys if k in self.parsed and not self.skip_names]
        unique(None, [], [f.id for f in flows], "flow id", self.errs, docs=[docs[k] for k in keys])
        flows.sort(key=lambda f: (f.order, f.id))
        if not self.skip_names and not any(f.role == "sizing" for f in flows):
            self.errs.add(RuleError(f"{self.root.name}/flows", 1, 1, "no flow has role: sizing"))
        return flows

    def prices(self, gpus: dict[str, GPU], names: set[str]) -> tuple[dict[str, Price], dict[str, GPU]]:
        """prices.yaml checked and merged into the GPUs (not where gpus.yaml has errors of its
        own, which it would only echo)."""
        gpus_sound = not any(e.render().startswith(self.docs["gpus"].display + ":") for e in self.errs.errors)
        if "prices" not in self.parsed or not gpus or not gpus_sound or self.skip_names:
            return {}, gpus
        kb_prices.check(self.docs["prices"], self.parsed["prices"], gpus, names, self.need_source, self.errs.add)
        prices = kb_prices.table(self.parsed["prices"])
        return prices, kb_prices.merge(gpus, prices)
