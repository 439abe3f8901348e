"""Hostile input to the command line ends as a usage error (exit 2, one line, no traceback).

--model-config files that are deep, huge, or hold sizes no model has; an export target that is
not a directory; unbounded inputs such as /dev/zero.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

KBQ = shutil.which("kbq")
pytestmark = pytest.mark.skipif(KBQ is None, reason="the kbq console script is not installed")

# A Llama-3.1-8B-shaped config.json (figures from meta-llama/Llama-3.1-8B config.json)
LLAMA = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
         "num_key_value_heads": 8, "vocab_size": 128256, "intermediate_size": 14336,
         "max_position_embeddings": 131072, "model_type": "llama"}


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([KBQ, *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def refused(r: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stderr[-400:])
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr[-400:]
    for fragment in fragments:
        assert fragment in r.stderr, (fragment, r.stderr[-400:])
    assert len(r.stderr) < 2000


def test_the_plain_config_answers(tmp_path: Path) -> None:
    """The base config is sound: every refusal below comes from its edit."""
    (tmp_path / "config.json").write_text(json.dumps(LLAMA))
    r = run("--json", "--model-config", "config.json", "serve 4 users", cwd=tmp_path)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("text, fragment", [
    ("[" * 100_000 + "]" * 100_000, "nested too deep"),
    ('{"hidden_size": ' + "9" * 5001 + "}", "too long"),
    ('{"hidden_size": 4096,\n "layers": }', "config.json:2:12"),
], ids=["100k-deep", "5001-digits", "syntax"])
def test_a_config_json_that_cannot_be_read_is_a_usage_error(tmp_path: Path, text: str,
                                                            fragment: str) -> None:
    (tmp_path / "config.json").write_text(text)
    refused(run("--json", "--model-config", "config.json", "serve 4 users", cwd=tmp_path), fragment)


@pytest.mark.parametrize("key", ["sliding_window", "hidden_size", "max_position_embeddings"])
def test_a_size_no_model_has_is_refused_by_name(tmp_path: Path, key: str) -> None:
    (tmp_path / "config.json").write_text(json.dumps({**LLAMA, key: 1e20}))
    refused(run("--json", "--model-config", "config.json", "serve 4 users", cwd=tmp_path), key)


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_an_endless_config_is_refused_after_the_cap(tmp_path: Path) -> None:
    refused(run("--model-config", "/dev/zero", "serve 4 users", cwd=tmp_path), "larger than")


def test_export_to_a_file_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "pages.md").write_text("x")
    refused(run("export", "--out", "pages.md", cwd=tmp_path), "pages.md")
    assert (tmp_path / "pages.md").read_text() == "x"


@pytest.mark.skipif(not os.path.exists("/dev/null"), reason="needs /dev/null")
def test_export_to_dev_null_is_a_usage_error(tmp_path: Path) -> None:
    refused(run("export", "--out", "/dev/null", cwd=tmp_path), "not a directory")
