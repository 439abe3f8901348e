"""The import graph of kb/ and server/, read from the source with `ast`: no cycles, and the
library never imports the server.

Every import counts, at module level, inside a function (a lazy import is still a dependency)
or under `if TYPE_CHECKING:` (a type a module names is part of what it depends on: a cycle there
is still two modules that each need the other to be read).

The stage packages import only downward, in the order a question goes through them backwards:
the command line and the server, then kb.present, kb.engine, kb.query, kb.knowledge, kb.expr,
and the ground floor (kb.errors, kb.paths, kb.recordtype, kb.figures, kb.version). The package
`kb` itself (kb.ask, kb.get_knowledge) sits above the stages and below the surfaces. An
exception is listed in LAYER_EXCEPTIONS with its reason, and docs/structure.md names it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("kb", "server")
# The entry points, which may import the server lazily (`kbq serve`).
CLI = {"kb.cli.serve"}


def modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            out[".".join(parts)] = path
    return out


def _target(name: str, known: dict[str, Path]) -> str | None:
    """The module of ours `import name` loads, if any (import kb.expr.parse → kb.expr.parse)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports(module: str, known: dict[str, Path]) -> list[tuple[str, bool]]:
    """(imported module of ours, at module level?) for every import, run or type-only."""
    path = known[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[str, bool]] = []

    def visit(node: ast.AST, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                found.extend((t, top) for a in child.names if (t := _target(a.name, known)))
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parts = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                for a in child.names:       # from kb import expr → kb.expr.parse; from kb import ask → kb
                    sub = f"{base}.{a.name}"
                    target = sub if sub in known else base if base in known else None
                    if target:
                        found.append((target, top))
            inner = top and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                   ast.Lambda))
            visit(child, inner)

    visit(ast.parse(path.read_text(encoding="utf-8")), True)
    return found


def graph() -> nx.DiGraph:
    known = modules()
    g = nx.DiGraph()
    for module in known:
        g.add_node(module)
        for target, top in imports(module, known):
            if target != module:
                g.add_edge(module, target, top=g.get_edge_data(module, target, {}).get("top") or top)
    return g


def _canonical(cycle: list[str]) -> list[str]:
    i = cycle.index(min(cycle))
    return cycle[i:] + cycle[:i]


def test_the_graph_is_read() -> None:
    g = graph()
    assert g.has_edge("kb.engine.evaluate", "kb.expr.parse") and g.has_edge("server.api", "kb")
    assert g.has_edge("kb.engine", "kb.engine.run") and g.has_edge("kb.engine.run", "kb.engine.solve")
    assert g.has_edge("kb.cli.serve", "server.serving")
    assert not g.edges["kb.cli.serve", "server.serving"]["top"]     # lazily, in `kbq serve`


def test_no_import_cycles() -> None:
    cycles = sorted(_canonical(c) for c in nx.simple_cycles(graph()))
    assert cycles == []


GROUND = {"kb.errors", "kb.paths", "kb.recordtype", "kb.figures", "kb.hints", "kb.version"}
STAGES = ("kb.expr", "kb.knowledge", "kb.query", "kb.engine", "kb.present")
# (importer, imported) → why it runs upward; docs/structure.md lists each one
LAYER_EXCEPTIONS = {
    ("kb.knowledge.build", "kb.engine.reference"):
        "validation evaluates every formula on the reference queries, which needs the query "
        "parser and the engine; imported lazily, only when a rules directory is built",
}


def layer(module: str) -> int:
    """0 the ground floor, 1-5 the stages from kb.expr up to kb.present, 6 the package kb,
    7 the surfaces (kb.cli, server)."""
    if module in GROUND:
        return 0
    for i, stage in enumerate(STAGES, 1):
        if module == stage or module.startswith(stage + "."):
            return i
    if module == "kb":
        return 6
    if module.startswith(("kb.cli", "server")):
        return 7
    raise AssertionError(f"{module} is in no layer: add it to one")


def test_the_stages_import_only_downward() -> None:
    upward = {(a, b) for a, b in graph().edges if layer(b) > layer(a) or (layer(a) == layer(b) == 6)}
    assert upward == set(LAYER_EXCEPTIONS)


def test_each_layer_exception_is_documented() -> None:
    doc = (ROOT / "docs" / "structure.md").read_text(encoding="utf-8")
    for importer, imported in LAYER_EXCEPTIONS:
        assert f"`{importer}` → `{imported}`" in doc, (importer, imported)


def test_the_layers_are_read() -> None:
    """The layer check sees a real downward import and would see an upward one."""
    g = graph()
    assert g.has_edge("kb.engine.run", "kb.query.workload") and layer("kb.engine.run") > layer("kb.query.workload")
    assert g.has_edge("kb.knowledge.build", "kb.engine.reference")     # the one listed exception
    assert layer("kb.figures") == 0 and layer("kb.cli.main") == layer("server.api") == 7


def test_the_library_never_imports_the_server() -> None:
    g = graph()
    for module, target, data in g.edges(data=True):
        if module.startswith("kb") and target.startswith("server"):
            assert module in CLI and not data["top"], (module, target)


# The longest a module of ours may be: a new maintainer reads one in a sitting (issue 17).
MAX_LINES = 400


def test_every_module_is_at_most_400_lines() -> None:
    """Every module in kb/ and server/; a module over the limit is
    split along a seam, not squeezed."""
    known = modules()
    assert "kb.knowledge.build" in known and "server.charts" in known      # the walk found both trees
    long = {m: n for m, path in known.items() if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}


def test_every_test_and_bench_module_is_at_most_400_lines() -> None:
    """The suite and the benchmarks are read as the library is: a test file over the limit is split
    by topic (shared fixtures in tests/conftest.py, shared helpers in a module without the test_
    prefix), a benchmark along its runs."""
    files = sorted((ROOT / "tests").rglob("*.py")) + sorted((ROOT / "bench").glob("*.py"))
    named = {path.relative_to(ROOT).as_posix(): path for path in files}
    assert "tests/conftest.py" in named and "bench/soak.py" in named     # the walk found both trees
    long = {name: n for name, path in named.items()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}
