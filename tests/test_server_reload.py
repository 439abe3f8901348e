"""Edited rules under `kbq serve --rules DIR` are rebuilt in a child process (server.rebuild):
the result is the knowledge `build` makes, bad rules keep their file:line errors, and a worker's
memory comes back near its level after a large edit is reverted, since the build's peak was the
child's (the former server rebuilt inside each worker: 68 → 255 MB, kept after the revert)."""

from __future__ import annotations

import copy
import shutil
import time
from pathlib import Path

import pytest
import yaml

from kb import answer_in
from kb.knowledge.build import build
from kb.paths import rules_dir
from server.rebuild import RebuildFailed, rebuild
from tests.test_server_limits import tree_rss_mb
from tests.test_server_processes import get

QUERIES = ["serve 70B int4 16 users", "train 13B qlora on 20GB?", "max users for llama-3.1-8b"]


def test_a_rebuild_gives_the_knowledge_build_gives(tmp_path):
    root = tmp_path / "rules"
    shutil.copytree(rules_dir(), root)
    built, rebuilt = build(root), rebuild(root)
    for q in QUERIES:
        assert answer_in(rebuilt, q).to_dict() == answer_in(built, q).to_dict()


def test_a_rebuild_of_bad_rules_says_where(tmp_path):
    root = tmp_path / "rules"
    shutil.copytree(rules_dir(), root)
    path = root / "precisions.yaml"
    path.write_text(path.read_text(encoding="utf-8") + "\n  - {id: broken, bits_per_wieght: 4}\n",
                    encoding="utf-8")
    with pytest.raises(RebuildFailed) as err:
        rebuild(root)
    assert any("precisions.yaml" in (e.get("file") or e["message"]) for e in err.value.errors)


def _grow(root: Path, times: int) -> None:
    """The GPU and model catalogues `times` over (each copy its own id, no aliases)."""
    for name, key in (("gpus.yaml", "gpus"), ("models.yaml", "models")):
        data = yaml.safe_load((root / name).read_text(encoding="utf-8"))
        extra = []
        for k in range(1, times):
            for item in data[key]:
                clone = copy.deepcopy(item)
                clone.update(id=f"{item['id']}-x{k}", aliases=[], name=f"{item['name']} x{k}")
                extra.append(clone)
        data[key] += extra
        (root / name).write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def _reloaded(base: str, after: str, seconds: float = 120) -> None:
    """Until every process of two answers with rules loaded after `after`."""
    deadline = time.monotonic() + seconds
    done: set[int] = set()
    while len(done) < 2 and time.monotonic() < deadline:
        _, body = get(base, "/api/health")
        if body["rules"]["loaded_at"] > after and not body["rules"]["errors"]:
            done.add(body["process"])
        time.sleep(0.1)
    assert len(done) == 2, "the workers did not reload"


def _no_rebuild_running(pid: int, seconds: float = 60) -> None:
    """Until the server is its master and two workers again: a rebuild child (an edit seen
    half-written starts a second rebuild) would count in the tree's memory."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        pids, count = [str(pid)], 0
        while pids:
            p = pids.pop()
            count += 1
            try:
                pids += Path(f"/proc/{p}/task/{p}/children").read_text().split()
            except OSError:
                pass
        if count <= 3:
            return
        time.sleep(0.2)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads memory from /proc")
def test_memory_comes_back_after_a_large_edit_is_reverted(serve, tmp_path):
    root = tmp_path / "rules"
    shutil.copytree(rules_dir(), root)
    originals = {n: (root / n).read_text(encoding="utf-8") for n in ("gpus.yaml", "models.yaml")}
    served = serve("--processes", "2", "--rules", str(root))
    _, first = get(served.base, "/api/health")
    time.sleep(1.1)
    start = tree_rss_mb(served.proc.pid)
    _grow(root, 10)
    _reloaded(served.base, first["rules"]["loaded_at"])
    _no_rebuild_running(served.proc.pid)
    grown = tree_rss_mb(served.proc.pid)
    _, body = get(served.base, "/api/health")
    time.sleep(1.1)
    for name, text in originals.items():
        (root / name).write_text(text, encoding="utf-8")
    _reloaded(served.base, body["rules"]["loaded_at"])
    _no_rebuild_running(served.proc.pid)
    time.sleep(0.5)
    end = tree_rss_mb(served.proc.pid)
    print(f"server memory: {start:.0f} MB, {grown:.0f} MB with 10x catalogues, {end:.0f} MB reverted")
    # rebuilt in each worker, the former server kept ~20 MB a worker of the build after the revert
    assert end - start < 25, (start, grown, end)
