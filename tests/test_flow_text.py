"""Flowchart node texts never show a raw template placeholder: filled from the answer where one
is shown, and in a readable form (‹per-GPU› GB) where none is."""

from __future__ import annotations

import html
import re
import subprocess
import sys
import urllib.parse

import pytest

from kb import ask, get_knowledge
from kb.present.export import markdown_pages, mermaid
from kb.knowledge.data import readable_name, readable_template

PLACEHOLDER = re.compile(r"\{[A-Za-z_][A-Za-z0-9_.]*(?::[^{}]*)?\}")


@pytest.mark.parametrize(("name", "shown"), [
    ("per_gpu_gb", "per-GPU GB"), ("runtime.overhead_gb", "runtime overhead GB"),
    ("gpu.name", "GPU name"), ("gpus_needed", "GPUs needed"), ("total_gb", "total GB"),
])
def test_readable_name(name, shown):
    assert readable_name(name) == shown


def test_readable_template_drops_a_unit_the_text_repeats():
    assert readable_template("needs {per_gpu_gb:.1f} GB on {gpu_count:.0f}× {gpu.name}") == \
        "needs ‹per-GPU› GB on ‹GPU count›× ‹GPU name›"
    assert readable_template("{total_gb} in all") == "‹total GB› in all"


def test_mermaid_and_wiki_pages_have_no_placeholders():
    kn = get_knowledge()
    for flow in kn.flows:
        assert not PLACEHOLDER.search(mermaid(flow)), flow.id
    for rel, text in markdown_pages(kn).items():
        if rel.startswith("flows/"):
            assert not PLACEHOLDER.search(text), rel


def test_kbq_export_flow_has_no_placeholders():
    r = subprocess.run([sys.executable, "-m", "kb.cli.main", "export", "flow", "sizing"],
                       capture_output=True, text=True, check=True)
    assert "‹per-GPU› GB" in r.stdout and not PLACEHOLDER.search(r.stdout)


def test_flow_page_has_no_placeholders(client):
    page = html.unescape(client.get("/flows/sizing").get_data(as_text=True))
    assert "‹per-GPU› GB" in page and not PLACEHOLDER.search(page)


def test_answer_page_fills_the_walked_verdict(client):
    query = "serve llama-3.1-8b fp16 8 users on rtx 4090"
    page = html.unescape(client.get("/?q=" + urllib.parse.quote_plus(query)).get_data(as_text=True))
    assert not PLACEHOLDER.search(page)
    verdict = ask(query).verdict
    # the SVG wraps node text over lines: the verdict's words appear in the chart in order
    assert verdict.split(":")[0] in page and "21.7" in page
