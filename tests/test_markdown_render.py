"""The wiki pages render the same in python-markdown (MkDocs) as on GitHub: no backslash that
python-markdown would show, no raw HTML from rule text."""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

import markdown
import pytest

from kb import get_knowledge
from kb.present.export import markdown_pages, md
from kb.knowledge.build import build
from kb.paths import rules_dir

# MkDocs' default Markdown plus the extensions kbq's README asks for
EXTENSIONS = ["tables", "fenced_code", "toc"]
CODE = re.compile(r"<(code|pre)>.*?</\1>", re.S)
STRAY = re.compile(r"\\[^\s]")


def visible(page: str) -> str:
    """The rendered text outside code, as a reader sees it."""
    out = markdown.markdown(page, extensions=EXTENSIONS)
    return html.unescape(re.sub(r"<[^>]+>", "", CODE.sub("", out)))


@pytest.fixture(scope="module")
def pages() -> dict[str, str]:
    return markdown_pages(get_knowledge())


def test_no_page_shows_a_stray_escape(pages):
    for rel, text in pages.items():
        shown = visible(text)
        match = STRAY.search(shown)
        assert match is None, f"{rel}: …{shown[max(0, match.start() - 60):match.end() + 20]}…"


@pytest.mark.parametrize("text", ["~40 GB", "a|b", "<img src=x onerror=alert(1)>", "$5 & more",
                                  "[x](y) *b* _i_ `c`", "back\\slash"])
def test_md_text_renders_as_itself(text):
    assert visible(md(text)).strip() == text


def test_hostile_gpu_name_is_text_on_every_page(tmp_path: Path):
    root = tmp_path / "rules"
    shutil.copytree(rules_dir(), root)
    path = root / "gpus.yaml"
    source = path.read_text(encoding="utf-8")
    name = "NVIDIA GeForce RTX 4090 24GB"
    assert f"name: {name}" in source
    path.write_text(source.replace(f"name: {name}", "name: \"<img src=x onerror=alert(1)> ~4090|x\"", 1),
                    encoding="utf-8")
    for rel, text in markdown_pages(build(root)).items():
        rendered = markdown.markdown(text, extensions=EXTENSIONS)
        assert "<img" not in rendered, rel


def test_kbq_markdown_escapes_a_gpu_name_from_a_rule_file(tmp_path: Path):
    import subprocess
    import sys

    root = tmp_path / "rules"
    shutil.copytree(rules_dir(), root)
    path = root / "gpus.yaml"
    source = path.read_text(encoding="utf-8")
    name = "NVIDIA GeForce RTX 4090 24GB"
    path.write_text(source.replace(f"name: {name}", "name: \"<img src=x onerror=alert(1)> 4090\"", 1),
                    encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "kb.cli.main", "--markdown", "--rules", str(root),
                        "serve 7B fp16 on rtx-4090"], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    assert "<img" not in r.stdout and "&lt;img src=x" in r.stdout
    rendered = markdown.markdown(r.stdout, extensions=EXTENSIONS)
    assert "<img" not in rendered and "onerror=alert(1)&gt; 4090" in rendered
