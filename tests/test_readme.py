"""The README's examples are what kbq prints today.

Each fenced block that starts with `$ kbq …` is run through the installed console script. A text
block shows lines of the output in order ("…" stands for lines left out); a JSON block shows a
trimmed Answer, whose every key and value must be in the real one. The list of queries "that it
reads" must each give an answer.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
KBQ = shutil.which("kbq") or "kbq"
pytestmark = pytest.mark.usefixtures("kbq_installed")     # fails, never skips, without kbq

EXAMPLES = re.findall(r"```\n\$ (kbq [^\n]*)\n(.*?)```", README, re.S)


def run(command: str) -> subprocess.CompletedProcess[str]:
    args = shlex.split(command.split("#", 1)[0])
    return subprocess.run([KBQ, *args[1:]], capture_output=True, text=True, timeout=120)


def _inside(shown: Any, real: Any, path: str = "") -> None:
    if isinstance(shown, dict):
        assert isinstance(real, dict), path
        for key, value in shown.items():
            assert key in real, f"{path}.{key} is not in the answer"
            _inside(value, real[key], f"{path}.{key}")
    elif isinstance(shown, list):
        assert isinstance(real, list) and len(shown) <= len(real), path
        for i, (s, r) in enumerate(zip(shown, real)):
            _inside(s, r, f"{path}[{i}]")
    else:
        assert shown == real, f"{path}: README shows {shown!r}, kbq gives {real!r}"


def test_the_readme_has_examples() -> None:
    assert len(EXAMPLES) >= 4


@pytest.mark.parametrize("command, shown", EXAMPLES, ids=[c for c, _ in EXAMPLES])
def test_an_example_is_what_kbq_prints(command: str, shown: str) -> None:
    r = run(command)
    out = r.stdout + r.stderr
    if "--json" in command:
        _inside(json.loads(shown), json.loads(r.stdout))
        return
    if "exit status 2" in command:
        assert r.returncode == 2
    lines = out.splitlines()
    at = 0
    for line in shown.rstrip("\n").splitlines():
        if line.strip() == "…":
            continue
        assert line in lines[at:], f"{command}: README line not in the output (in order): {line!r}"
        at = lines.index(line, at) + 1


def test_every_query_it_reads_answers() -> None:
    block = README.split('More that it reads', 1)[1].split("```", 2)[1]
    queries = [q for q in block.strip().splitlines() if q.strip()]
    assert len(queries) >= 10
    for q in queries:
        r = run(f"kbq --no-trace {shlex.quote(q)}")
        assert r.returncode == 0 and r.stdout.splitlines()[2].startswith("VERDICT"), (q, r.stderr)
