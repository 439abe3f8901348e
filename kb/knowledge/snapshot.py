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
(no pickle). Each record is stored as its declaration says (kb.knowledge.codec: no code per
record), and the snapshot's format is a digest of the declarations (format_key), so a field
added to a record, a schema or a kept table, or a key kbq adds after validation, never reads an
old snapshot. Expressions are stored as their parsed ASTs with the names they read, built into
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
import time
import zlib
from dataclasses import fields
from typing import TYPE_CHECKING, Any

from kb.knowledge.codec import encode_record, record_decoder
from kb.knowledge.data import Knowledge
from kb.knowledge.derived import derive
from kb.knowledge.shapes_digest import RECORDS, SCHEMAS
from kb.paths import MAX_FILE_BYTES, grammar_file_names, rule_file_names
from kb.version import __version__
from kb.paths import cache_dir

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from pathlib import Path

    # name → what a later stage keeps of its table made from a knowledge (plain data), and the
    # record class whose fields that is (asked for when the snapshot's format is taken)
    Stored = Mapping[str, tuple[Callable[[Knowledge], object], Callable[[], type]]]

KEEP = 8                        # snapshots kept in the cache directory, the most recently written
RACY_NS = 3_000_000_000         # stats of a file changed this recently (or later) are not kept
Stats = tuple[tuple[str, int, int, int, int], ...]


def _files(root: str) -> list[str]:
    return rule_file_names(root) + grammar_file_names()


def format_key(tables: Stored | None = None) -> str:
    """What the stored form depends on besides the rule files: the declarations of the
    knowledge's records (kb.knowledge.codec.signature) and of the rule files' schemas, as
    digested in kb.knowledge.shapes_digest (generated from them, so a plain query reads two
    strings; tests/test_shapes.py fails while it is stale), and the fields of each later
    stage's table. A field added to any of them makes another format."""
    text = "".join(f"{name}: " + ", ".join(f"{f.name}: {f.type}" for f in fields(shape())) + "\n"
                   for name, (_, shape) in sorted((tables or {}).items()))
    return f"{RECORDS}-{SCHEMAS}-{zlib.crc32(text.encode()):08x}"


def content_key(root: str, files: list[str] | None = None, fmt: str = "") -> str:
    # hashing runs only when a rule file's stats changed: hashlib is imported then, not on every
    # start (2.5 ms of a cold `kbq "QUERY"`, whose budget is 10x a bare interpreter; bench/README.md)
    import hashlib

    h = hashlib.sha256(f"kbq {__version__} snapshot {fmt} python {_python()}\n".encode())
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


def snapshot_path(directory: str, root: str, fmt: str) -> str:
    # one file per rules directory, kbq version, Python and format (the header says which; a
    # name collision only rebuilds), named by a 32-bit FNV-1a of the four
    h = 0x811C9DC5
    for byte in f"{root}|{__version__}|{_python()}|{fmt}".encode():
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return os.path.join(directory, f"knowledge-{h:08x}.marshal")


def load_or_build(root: str | Path, tables: Stored | None = None) -> Knowledge:
    """`tables`: the tables later stages make from a knowledge (kb.query.words' vocabulary) that
    a saved snapshot keeps too, each as its function gives it (plain data marshal can write);
    they come back in Derived.tables. This package imports none of those stages."""
    root = os.fspath(root)
    directory = cache_dir()
    fmt = format_key(tables)
    path = snapshot_path(directory, root, fmt) if directory else None
    files = _files(root)
    stats = _stats(files)
    key = None
    if path is not None and stats is not None:
        try:
            with open(path, "rb") as f:
                header, data = marshal.loads(f.read())
            if header["format"] == fmt and header["root"] == root:
                if header["stats"] == stats:
                    return from_data(data, root)
                key = content_key(root, files, fmt)
                if header["key"] == key:    # touched, not changed: keep it with the new stats
                    _save(path, {**header, "stats": _settled(stats, time.time_ns())}, data)
                    return from_data(data, root)
        except (OSError, ValueError, EOFError, KeyError, TypeError, IndexError, AttributeError):
            pass  # unreadable or not ours: rebuild below
    from kb.knowledge.build import build

    if key is None:                         # of the files as they were before the build reads them
        key = content_key(root, files, fmt)
    kn = build(root)
    if path is not None:
        _save(path, {"format": fmt, "root": root, "key": key,
                     "stats": _settled(stats, time.time_ns())}, stored(kn, tables))
    return kn


def stored(kn: Knowledge, tables: Stored | None = None) -> dict[str, object]:
    """The knowledge as the plain data a snapshot holds (marshal writes it; from_data reads it),
    with the later stages' `tables` as their functions make them (kept as made)."""
    import json                         # only when a snapshot is written

    data = json.loads(json.dumps(to_data(kn), separators=(",", ":")))
    data["tables"] = {name: make(kn) for name, (make, _) in (tables or {}).items()}
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
    directory = os.path.dirname(path)
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        import tempfile     # only when a snapshot is written (2.6 ms of a cold start otherwise)

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

def to_data(kn: Knowledge) -> dict[str, object]:
    """The knowledge as plain data, as its records declare it (kb.knowledge.codec): the list of
    its stored fields' values, under "knowledge"."""
    return {"knowledge": encode_record(kn)}


def from_data(d: dict[str, Any], root: str | Path) -> Knowledge:
    kn = record_decoder(Knowledge)(d["knowledge"], root=os.fspath(root))
    assert isinstance(kn, Knowledge)        # what record_decoder(Knowledge) makes
    return derive(kn, dict(d.get("tables") or {}))
