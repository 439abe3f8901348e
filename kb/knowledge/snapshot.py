"""A compiled snapshot of the validated knowledge, so a plain query starts fast.

In: a rules directory. Out: Knowledge — from `<cache>/knowledge-<name>.marshal` when a snapshot
for exactly these rule files exists, else built and validated from the YAML (kb.knowledge.build.build)
and then saved. The snapshot is keyed by a SHA-256 of every rule file's path and bytes (only
the files the knowledge names, kb.paths.rule_files: never a walk of the tree), the grammars,
the package version, the Python version (marshal's format is one Python's) and the rules
directory, so an edited rule file is never served stale. Each rules directory, kbq version and
Python has its own snapshot file; a save never deletes another's but keeps the KEEP written
last, so alternating between two rules directories builds each once.

Hashing every file (and importing hashlib) on each run is a sixth of a cold query's work, so
the snapshot also keeps each file's stat (size, mtime and ctime in ns, inode) as it was when
the key was taken, and a run whose files all stat the same trusts the key without reading
them; any difference in any file falls back to the hash, and a snapshot whose hash still
matches is kept with the new stats. As git does for its index ("racy git"), stats taken when
a file had changed within the last few seconds are not kept at all (a second write in the
same clock tick, same size, would not show), so such a snapshot is hashed on its next use.

The stored form is plain data (dicts, lists, strings, numbers) written with `marshal`, the
format of Python's own byte-code cache, which reads ~3x faster than JSON: the same values as
the JSON form (`to_data` → JSON → back), never code and nothing that can run when it is read
(no pickle). Expressions are stored as their parsed ASTs with the names they read, built into
nodes when first read (kb.expr.parse.StoredExpr) and compiled when first evaluated. What the
knowledge graph gave (each formula's evaluation order, each flow's layers) is stored, not the
graph, so a query never imports networkx; so are the tables a later stage asks it to keep
(`tables`: the query vocabulary, kb.query.words, kept as made: marshal stores its sets and
tuples as they are), which come back in Derived.tables without this package importing that stage. A
snapshot that fails to read or does not match is rebuilt, never trusted.

Cache directory: $KBQ_CACHE_DIR, else $XDG_CACHE_HOME/kbq, else ~/.cache/kbq. KBQ_NO_CACHE=1
turns it off. Nothing is written when the directory cannot be created.
"""

from __future__ import annotations

import marshal
import os
import sys
from typing import TYPE_CHECKING, Any

from kb.expr import parse as ex
from kb.knowledge.derived import derive
from kb.knowledge.data import Case, Claim, Edge, Flow, Formula, Knowledge, Node

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from pathlib import Path

    # name → what a later stage keeps of its table made from a knowledge (plain data)
    Stored = Mapping[str, Callable[[Knowledge], object]]

FORMAT = 14
KEEP = 8                        # snapshots kept in the cache directory, the most recently written
RACY_NS = 3_000_000_000         # stats of a file changed this recently (or later) are not kept
Stats = tuple[tuple[str, int, int, int, int], ...]


def cache_dir() -> str | None:
    if os.environ.get("KBQ_NO_CACHE"):
        return None
    base = os.environ.get("KBQ_CACHE_DIR")
    if base:
        return base
    xdg = os.environ.get("XDG_CACHE_HOME")
    return os.path.join(xdg if xdg else os.path.join(os.path.expanduser("~"), ".cache"), "kbq")


def _files(root: str) -> list[str]:
    from kb.paths import grammar_file_names, rule_file_names

    return rule_file_names(root) + grammar_file_names()


def content_key(root: str, files: list[str] | None = None) -> str:
    import hashlib

    from kb.paths import MAX_FILE_BYTES
    from kb.version import __version__

    h = hashlib.sha256(f"kbq {__version__} snapshot {FORMAT} python {_python()}\n".encode())
    for p in _files(root) if files is None else files:
        # a grammar by its directory and name (grammar/query.lark), a rule file from the root
        h.update((os.path.join(*p.rsplit(os.sep, 2)[-2:]) if p.endswith(".lark")
                  else os.path.relpath(p, root)).encode())
        h.update(b"\0")
        try:
            with open(p, "rb") as f:    # a file over the cap is refused by the build: its head will do
                h.update(f.read(MAX_FILE_BYTES + 1))
        except OSError:                 # unreadable: the build says so, with the file's name
            h.update(b"\0unreadable")
        h.update(b"\0")
    h.update(os.path.realpath(root).encode())
    return h.hexdigest()


def _stats(files: list[str]) -> Stats | None:
    """Each file's path, size, mtime, ctime and inode; None when one cannot be read."""
    out = []
    for p in files:
        try:
            st = os.stat(p)
        except OSError:
            return None
        out.append((p, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino))
    return tuple(out)


def _settled(stats: Stats | None, now_ns: int) -> Stats | None:
    """The stats, when every file last changed long enough before now to trust them."""
    if stats is None or any(max(mtime, ctime) > now_ns - RACY_NS for _, _, mtime, ctime, _ in stats):
        return None
    return stats


def _python() -> str:
    """The interpreter a snapshot is for: marshal's format is that of one Python version."""
    return f"{sys.implementation.cache_tag}-{marshal.version}"


def snapshot_path(directory: str, root: str) -> str:
    from kb.version import __version__

    # one file per rules directory, kbq version, Python and format (the header says which; a
    # name collision only rebuilds), named by a 32-bit FNV-1a of the four
    h = 0x811C9DC5
    for byte in f"{root}|{__version__}|{_python()}|{FORMAT}".encode():
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return os.path.join(directory, f"knowledge-{h:08x}.marshal")


def load_or_build(root: str | Path, tables: Stored | None = None) -> Knowledge:
    """`tables`: the tables later stages make from a knowledge (kb.query.words' vocabulary) that
    a saved snapshot keeps too, each as its function gives it (plain data marshal can write);
    they come back in Derived.tables. This package imports none of those stages."""
    import time

    root = os.fspath(root)
    directory = cache_dir()
    path = snapshot_path(directory, root) if directory else None
    files = _files(root)
    stats = _stats(files)
    key = None
    if path is not None and stats is not None:
        try:
            with open(path, "rb") as f:
                header, data = marshal.loads(f.read())
            if header["format"] == FORMAT and header["root"] == root:
                if header["stats"] == stats:
                    return from_data(data, root)
                key = content_key(root, files)
                if header["key"] == key:    # touched, not changed: keep it with the new stats
                    _save(path, {**header, "stats": _settled(stats, time.time_ns())}, data)
                    return from_data(data, root)
        except (OSError, ValueError, EOFError, KeyError, TypeError, IndexError, AttributeError):
            pass  # unreadable or not ours: rebuild below
    from kb.knowledge.build import build

    if key is None:                         # of the files as they were before the build reads them
        key = content_key(root, files)
    kn = build(root)
    if path is not None:
        _save(path, {"format": FORMAT, "root": root, "key": key,
                     "stats": _settled(stats, time.time_ns())}, stored(kn, tables))
    return kn


def stored(kn: Knowledge, tables: Stored | None = None) -> dict[str, object]:
    """The knowledge as the plain data a snapshot holds (marshal writes it; from_data reads it),
    with the later stages' `tables` as their functions make them (kept as made)."""
    import json                         # the stored values are exactly the JSON form's

    data = json.loads(json.dumps(to_data(kn), separators=(",", ":")))
    data["tables"] = {name: make(kn) for name, make in (tables or {}).items()}
    shared = _shared(data, {})
    assert isinstance(shared, dict)     # _shared gives a dict for a dict
    return shared


def _shared(value: object, seen: dict[str, str]) -> object:
    """The same data with each distinct string one object, so marshal writes a repeated
    string once and refers back to it (a fifth smaller, and read ~30% faster)."""
    if type(value) is str:
        return seen.setdefault(value, value)
    if type(value) is dict:
        return {_shared(k, seen): _shared(v, seen) for k, v in value.items()}
    if type(value) is list:
        return [_shared(v, seen) for v in value]
    if type(value) is tuple:
        return tuple(_shared(v, seen) for v in value)
    if type(value) is frozenset:
        return frozenset(_shared(v, seen) for v in value)
    return value


def _save(path: str, header: dict[str, object], data: dict[str, object]) -> None:
    import tempfile             # only when a snapshot is written: kept off the plain-query path

    directory = os.path.dirname(path)
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".knowledge-", dir=directory)
        with os.fdopen(fd, "wb") as f:
            f.write(marshal.dumps((header, data)))
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
        _prune(directory, path)
    except OSError:
        pass  # a read-only home is fine: the next run builds again


def _prune(directory: str, kept: str) -> None:
    """Keep the KEEP snapshots written last (the one just written among them): another rules
    directory, kbq version or Python keeps its own snapshot until KEEP newer ones push it out."""
    found = []
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        if name.startswith("knowledge-") and name.endswith(".marshal") and path != kept:
            try:
                found.append((os.stat(path).st_mtime_ns, path))
            except FileNotFoundError:
                pass
    for _, path in sorted(found, reverse=True)[KEEP - 1:]:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


# ---------------------------------------------------------------- Knowledge ⇄ JSON

def _expr(e: ex.Expr | None) -> list[object] | None:
    return None if e is None else [e.text, e.ast.to_list(), e.name_columns, list(e.names)]


def _unexpr(d: Any) -> ex.Expr | None:
    return None if d is None else ex.StoredExpr(d[0], d[1], tuple(d[3]), d[2])


def to_data(kn: Knowledge) -> dict[str, object]:
    return {
        "gpus": kn.gpus, "models": kn.models, "precisions": kn.precisions, "sources": kn.sources,
        "inputs": kn.inputs, "constants": kn.constants, "query": kn.query,
        "bare_size_refs": kn.bare_size_refs, "config_defaults": kn.config_defaults,
        "gpu_alias": kn.gpu_alias,
        "model_alias": kn.model_alias, "precision_alias": kn.precision_alias,
        "runtimes": kn.runtimes, "runtime_alias": kn.runtime_alias,
        "runtime_defaults": kn.runtime_defaults, "error_bands": kn.error_bands,
        "sharding": kn.sharding, "objectives": kn.objectives,
        "prices": kn.prices, "advice": kn.advice,
        "closure": {k: list(v) for k, v in kn.closure.items()},
        "formulas": [{
            "name": f.name, "unit": f.unit, "meaning": f.meaning, "sources": list(f.sources),
            "where": f.where, "names": list(f.names), "deps": list(f.deps), "per_gpu": f.per_gpu,
            "note": f.note, "cases": [[_expr(c.when), _expr(c.expr), c.note] for c in f.cases],
        } for f in kn.formulas.values()],
        "flows": [{
            "id": fl.id, "title": fl.title, "role": fl.role, "order": fl.order, "source": fl.source,
            "entry": fl.entry, "ranking": fl.ranking, "where": fl.where,
            "layers": [list(layer) for layer in fl.layers], "applies": _expr(fl.applies),
            "nodes": [{"id": n.id, "kind": n.kind, "text": n.text, "compute": list(n.compute),
                       "style": n.style, "where": n.where, "agrees": _expr(n.agrees), "differs": n.differs,
                       "edges": [[e.to, _expr(e.when), e.label] for e in n.edges]}
                      for n in fl.nodes.values()],
        } for fl in kn.flows],
        "claims": [{
            "id": c.id, "source": c.source, "text": c.text, "computed": _expr(c.computed),
            "unit": c.unit, "value": c.value, "tolerance": c.tolerance,
            "applies_when": _expr(c.applies_when), "example_query": c.example_query,
            "note": c.note, "per_gpu": c.per_gpu, "where": c.where,
        } for c in kn.claims],
    }


def from_data(d: dict[str, Any], root: str | Path) -> Knowledge:
    formulas = {}
    for f in d["formulas"]:
        cases = tuple(Case(_unexpr(w), _unexpr(e), note) for w, e, note in f["cases"])  # type: ignore[arg-type]
        formulas[f["name"]] = Formula(f["name"], f["unit"], f["meaning"], cases, tuple(f["sources"]),
                                      f["where"], tuple(f["names"]), tuple(f["deps"]), f["per_gpu"],
                                      f["note"])
    flows = []
    for fl in d["flows"]:
        nodes = {n["id"]: Node(n["id"], n["kind"], n["text"], tuple(n["compute"]),
                               tuple(Edge(to, _unexpr(w), label) for to, w, label in n["edges"]),
                               n["style"], n["where"], _unexpr(n["agrees"]), n["differs"])
                 for n in fl["nodes"]}
        flows.append(Flow(fl["id"], fl["title"], fl["role"], fl["order"], fl["source"], fl["entry"],
                          nodes, [tuple(r) for r in fl["ranking"]], fl["where"],
                          tuple(tuple(layer) for layer in fl["layers"]), _unexpr(fl["applies"])))
    claims = [Claim(c["id"], c["source"], c["text"], _unexpr(c["computed"]), c["unit"],  # type: ignore[arg-type]
                    tuple(c["value"]) if isinstance(c["value"], list) else c["value"],
                    c["tolerance"], _unexpr(c["applies_when"]), c["example_query"], c["note"],  # type: ignore[arg-type]
                    c["per_gpu"], c["where"]) for c in d["claims"]]
    return derive(Knowledge(
        root=os.fspath(root), gpus=d["gpus"], models=d["models"], precisions=d["precisions"],
        sources=d["sources"], inputs=d["inputs"], constants=d["constants"], formulas=formulas,
        closure={k: tuple(v) for k, v in d["closure"].items()}, flows=flows, claims=claims,
        query=d["query"], bare_size_refs=d["bare_size_refs"], config_defaults=d["config_defaults"],
        gpu_alias=d["gpu_alias"],
        model_alias=d["model_alias"], precision_alias=d["precision_alias"],
        runtimes=d["runtimes"], runtime_alias=d["runtime_alias"],
        runtime_defaults=d["runtime_defaults"], error_bands=d["error_bands"],
        sharding=d["sharding"], objectives=d["objectives"],
        prices=d["prices"], advice=d["advice"]), dict(d.get("tables") or {}))
