"""The compiled snapshot gives the same answers as the YAML, and is rebuilt when anything changes."""

import json
import marshal
import os
import shutil

import pytest

from kb.knowledge import snapshot
from kb.knowledge.codec import stored_fields
from kb.knowledge.data import Knowledge
from kb.engine import answer
from kb.knowledge.build import build
from kb.paths import rules_dir
from kb.query.parse import parse

QUERIES = ["serve 70B int4 16 users", "full fine-tune 7B", "infer 7B fp16 on rtx 4000 ada vs rtx 6000 ada",
           "max users for 70B int4 on h200 at 32k context", "qlora llama-3.1-8b seq 2048 batch 2 with torchtune on rtx 4090"]


def test_snapshot_round_trip_answers_the_same():
    built = build(rules_dir())
    again = snapshot.from_data(json.loads(json.dumps(snapshot.to_data(built))), built.root)
    for q in QUERIES:
        assert answer(parse(q, again), again, q).to_dict() == answer(parse(q, built), built, q).to_dict()



def test_the_json_form_leaves_the_later_stages_tables_out():
    """to_data is the knowledge alone: read back, its Derived.tables is empty and the query
    vocabulary is made from the knowledge on first use, equal to the built one's."""
    from dataclasses import fields

    from kb.query.words import vocab_of, vocabulary

    built = build(rules_dir())
    again = snapshot.from_data(json.loads(json.dumps(snapshot.to_data(built))), built.root)
    assert again.derived.tables == {}
    want, got = vocabulary(built), vocab_of(again)
    for f in fields(want):
        assert getattr(got, f.name) == getattr(want, f.name), f.name


def test_the_vocabulary_read_from_a_saved_snapshot_equals_the_built_one(cache):
    """The saved snapshot keeps the vocabulary as made (frozensets, tuples), not in its JSON
    form: read back through load_or_build it equals the built one, with the same types."""
    from dataclasses import fields

    from kb import STORED
    from kb.query.words import Vocab, vocab_of

    directory, rules = cache
    built = snapshot.load_or_build(rules, STORED)       # builds and saves
    again = snapshot.load_or_build(rules, STORED)       # reads
    assert again is not built
    assert type(again.derived.tables["vocabulary"]) is dict     # stored, not made again
    want, got = vocab_of(built), vocab_of(again)
    assert type(got) is Vocab and again.derived.tables["vocabulary"] is got
    assert all(type(v) is tuple for v in got.table.values())
    assert list(got.table) == list(want.table)        # the table keeps its order of first entry
    for f in fields(want):
        mine, theirs = getattr(got, f.name), getattr(want, f.name)
        assert mine == theirs and type(mine) is type(theirs), f.name
    assert all(type(v) is tuple for v in got.table.values())
    assert list(got.table) == list(want.table)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KBQ_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KBQ_NO_CACHE", raising=False)
    rules = tmp_path / "rules"
    shutil.copytree(rules_dir(), rules)
    return tmp_path / "cache", rules


def test_edit_invalidates_and_corrupt_snapshot_is_rebuilt(cache):
    directory, rules = cache
    kn = snapshot.load_or_build(rules)
    files = list(directory.glob("knowledge-*"))
    assert len(files) == 1
    # an edited rule file gets a new key: the old snapshot is not served
    text = (rules / "gpus.yaml").read_text()
    (rules / "gpus.yaml").write_text(text.replace("bandwidth_gb_s: 3350", "bandwidth_gb_s: 3351", 1))
    kn2 = snapshot.load_or_build(rules)
    assert kn2.gpus["h100-sxm5"]["bandwidth_gb_s"] == 3351 != kn.gpus["h100-sxm5"]["bandwidth_gb_s"]
    files = list(directory.glob("knowledge-*"))
    assert len(files) == 1
    # a corrupt snapshot is rebuilt, not trusted
    for junk in (b"{not marshal", b"", marshal.dumps((1, 2)), marshal.dumps(({"format": 8}, []))):
        files[0].write_bytes(junk)
        assert snapshot.load_or_build(rules).gpus["h100-sxm5"]["bandwidth_gb_s"] == 3351
    # a snapshot whose key does not match its files is rebuilt too
    header, data = marshal.loads(files[0].read_bytes())
    header["key"], header["stats"] = "0" * 64, None
    gpus = [f.name for f in stored_fields(Knowledge)].index("gpus")   # a record is its fields' list
    data["knowledge"][gpus]["h100-sxm5"]["bandwidth_gb_s"] = 1
    files[0].write_bytes(marshal.dumps((header, data)))
    assert snapshot.load_or_build(rules).gpus["h100-sxm5"]["bandwidth_gb_s"] == 3351


def _no_hashing(*args):
    raise AssertionError("the rule files were hashed")


def _no_build(*args):
    raise AssertionError("the knowledge was built")


def test_unchanged_files_are_trusted_by_their_stats_and_a_changed_one_is_hashed(cache, monkeypatch):
    """Files that stat as they did when the snapshot was written are not read again; a touched
    file is hashed and, unchanged, keeps the snapshot; an edit that keeps the file's size and
    puts its mtime back still changes its ctime, so it is hashed and rebuilt."""
    import os

    import kb.knowledge.build

    directory, rules = cache
    monkeypatch.setattr(snapshot, "RACY_NS", 0)          # the copied files count as settled
    snapshot.load_or_build(rules)
    with monkeypatch.context() as m:
        m.setattr(snapshot, "content_key", _no_hashing)
        m.setattr(kb.knowledge.build, "build", _no_build)
        assert snapshot.load_or_build(rules).gpus["h100-sxm5"]["bandwidth_gb_s"] == 3350
    gpus = rules / "gpus.yaml"
    st = gpus.stat()
    os.utime(gpus, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))        # touched only
    with monkeypatch.context() as m:
        m.setattr(kb.knowledge.build, "build", _no_build)
        assert snapshot.load_or_build(rules).gpus["h100-sxm5"]["bandwidth_gb_s"] == 3350
    with monkeypatch.context() as m:                      # the new stats were kept
        m.setattr(snapshot, "content_key", _no_hashing)
        m.setattr(kb.knowledge.build, "build", _no_build)
        snapshot.load_or_build(rules)
    st = gpus.stat()
    gpus.write_text(gpus.read_text().replace("bandwidth_gb_s: 3350", "bandwidth_gb_s: 3351", 1))
    os.utime(gpus, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert gpus.stat().st_size == st.st_size and gpus.stat().st_mtime_ns == st.st_mtime_ns
    assert snapshot.load_or_build(rules).gpus["h100-sxm5"]["bandwidth_gb_s"] == 3351


def test_stats_of_files_changed_just_now_are_not_trusted(cache, monkeypatch):
    """A file written within the last seconds could be written again in the same clock tick
    with the same size: such a snapshot keeps no stats, and its next use hashes the files."""
    directory, rules = cache
    # the rules were copied just now; however slow the build, their change counts as recent
    monkeypatch.setattr(snapshot, "RACY_NS", 10**18)
    snapshot.load_or_build(rules)
    header, _ = marshal.loads(next(directory.glob("knowledge-*")).read_bytes())
    assert header["stats"] is None
    calls = []
    real = snapshot.content_key
    monkeypatch.setattr(snapshot, "content_key", lambda *a: calls.append(1) or real(*a))
    assert snapshot.load_or_build(rules).gpus["h100-sxm5"]["bandwidth_gb_s"] == 3350
    assert calls == [1]


def test_the_query_grammar_runs_from_the_generated_module_without_a_cache_file(tmp_path):
    """The query grammar's tables come with kbq (kb.query.standalone_parser, written by lark's
    standalone tool): a process reads queries without importing lark's grammar loader and
    writes no grammar cache file next to the knowledge snapshot."""
    import os
    import subprocess
    import sys

    code = ("import sys; from kb.query import parse as q; "
            "print([t.type for t in q._lex('serve 70B int4 16 users')], "
            "sorted(m for m in sys.modules if m == 'lark' or m.startswith('lark.')))")
    env = {**os.environ, "KBQ_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("KBQ_NO_CACHE", None)
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert run.stdout == "['WORD', 'SIZE', 'WORD', 'NUMBER', 'WORD'] []\n"
    assert not (tmp_path / "cache").exists() or list((tmp_path / "cache").iterdir()) == []


def test_two_rules_directories_keep_their_own_snapshots(cache, monkeypatch):
    """Alternating --rules DIR with another rules directory builds each once (issue 24): a save
    keeps the other directory's snapshot, and the cache holds at most KEEP of them."""
    directory, rules = cache
    other = rules.parent / "other"
    shutil.copytree(rules, other)
    snapshot.load_or_build(rules)
    snapshot.load_or_build(other)
    assert len(list(directory.glob("knowledge-*"))) == 2
    built: list[str] = []
    import kb.knowledge.build as kbuild

    real = kbuild.build
    monkeypatch.setattr(kbuild, "build", lambda root: built.append(str(root)) or real(root))
    for _ in range(2):
        snapshot.load_or_build(rules)
        snapshot.load_or_build(other)
    assert built == []
    # the bound: the oldest beyond KEEP go, the newest stay
    names = [directory / f"knowledge-{i:08x}.marshal" for i in range(snapshot.KEEP + 3)]
    for i, path in enumerate(names):
        path.write_bytes(b"x")
        os.utime(path, ns=(i * 10**9, i * 10**9))
    snapshot._prune(str(directory), str(names[-1]))
    left = sorted(directory.glob("knowledge-*"))
    assert len(left) == snapshot.KEEP and names[-1] in left and names[0] not in left


def test_the_snapshot_name_depends_on_the_python(monkeypatch, tmp_path):
    a = snapshot.snapshot_path(str(tmp_path), "/rules", "f")
    monkeypatch.setattr(snapshot.sys.implementation, "cache_tag", "cpython-399")
    assert snapshot.snapshot_path(str(tmp_path), "/rules", "f") != a
