"""The import graph of kb/ and server/, read from the source with `ast`: no cycles, the
library never imports the server, and the stages import neither the web nor the CLI libraries.

Every import counts, at module level, inside a function (a lazy import is still a dependency)
or under `if TYPE_CHECKING:` (a type a module names is part of what it depends on: a cycle there
is still two modules that each need the other to be read).

The stage packages import only downward, in the order a question goes through them backwards:
the command line and the server, then kb.present, kb.engine, kb.query, kb.knowledge, kb.expr,
and the ground floor (kb.errors, kb.paths, kb.figures, kb.version). The package
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
    assert g.has_edge("kb.engine", "kb.engine.run") and g.has_edge("kb.engine.run", "kb.engine.search.solve")
    assert g.has_edge("kb.cli.serve", "server.serving")
    assert not g.edges["kb.cli.serve", "server.serving"]["top"]     # lazily, in `kbq serve`


def test_no_import_cycles() -> None:
    cycles = sorted(_canonical(c) for c in nx.simple_cycles(graph()))
    assert cycles == []


GROUND = {"kb.errors", "kb.paths", "kb.figures", "kb.version", "kb.links"}
STAGES = ("kb.expr", "kb.knowledge", "kb.query", "kb.engine", "kb.present")
# (importer, imported) → why it runs upward; docs/structure.md lists each one
LAYER_EXCEPTIONS = {
    ("kb.knowledge.build", "kb.engine.flows.reference"):
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
    assert g.has_edge("kb.knowledge.build", "kb.engine.flows.reference")     # the one listed exception
    assert layer("kb.figures") == 0 and layer("kb.cli.main") == layer("server.api") == 7


def test_the_library_never_imports_the_server() -> None:
    g = graph()
    for module, target, data in g.edges(data=True):
        if module.startswith("kb") and target.startswith("server"):
            assert module in CLI and not data["top"], (module, target)


def third_party_imports(module: str, known: dict[str, Path]) -> set[str]:
    """The top-level names of every package a module of ours imports that is not ours, at
    module level, inside a function or under TYPE_CHECKING."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(known[module].read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found - {"kb", "server"}


SURFACE_LIBRARIES = {"flask", "werkzeug", "jinja2", "click", "gunicorn", "gevent"}


def test_the_stages_import_neither_the_web_nor_the_cli_libraries() -> None:
    """The engine and the stages below and above it (kb.expr to kb.present, and the package
    kb) are a pure core: only kb.cli and server name flask, click or the server's libraries."""
    known = modules()
    core = [m for m in known if m == "kb" or m.startswith(STAGES)]
    assert "kb.engine.run" in core and "kb.cli.main" not in core
    assert third_party_imports("kb.knowledge.graph", known) >= {"networkx"}     # the walk sees imports
    named = {m: found for m in core if (found := third_party_imports(m, known) & SURFACE_LIBRARIES)}
    assert named == {}


def test_answering_a_query_loads_neither_the_web_nor_the_cli_libraries(tmp_path: Path) -> None:
    """kb.ask, as a program that embeds kbq calls it: an answer and a query error, with the
    knowledge read from its snapshot (built first, by another process), leave flask, click and
    the server's libraries unimported."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "KBQ_CACHE_DIR": str(tmp_path)}
    subprocess.run([sys.executable, "-c", "from kb import get_knowledge; get_knowledge()"], env=env, check=True)
    code = ("import sys\n"
            "from kb import ask\n"
            "from kb.errors import QueryError\n"
            "print(ask('serve 70B int4 16 users').verdict != '')\n"
            "try:\n"
            "    ask('serve 70B int4 16 users on 2x')\n"
            "except QueryError:\n"
            "    print('QueryError')\n"
            f"print(sorted(m for m in {sorted(SURFACE_LIBRARIES)!r} if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert done.stdout.splitlines() == ["True", "QueryError", "[]"], done.stderr
