"""`kbq export`: wiki pages and Mermaid charts from the rules (kb.present.export).

The pages are written by the installed console script. Their figures are checked against the
engine itself (kb.engine.assembly.answer on the same query), the Mermaid charts are parsed back and
compared with the flows, and every relative link must reach a page and an anchor on it. The Mermaid charts are in
tests/test_export_mermaid.py, a rule file's way to the wiki in tests/test_export_round_trip.py.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from export_common import export, table_rows

from kb.engine import answer
from kb.knowledge.build import Knowledge
from kb.present.export import literal, math, number, with_unit
from kb.query.parse import parse

# ---------------------------------------------------------------- the pages

def test_every_page_is_written(pages: dict[str, str], kn: Knowledge) -> None:
    expected = {"index.md", "gpus.md", "gpus-full.md", "models.md", "precisions.md", "runtimes.md",
                "formulas.md", "sources.md", "prices.md"}
    expected |= {f"flows/{f.id}.md" for f in kn.flows}
    assert set(pages) == expected
    for text in pages.values():
        assert text.startswith("# ") and text.endswith("\n") and not text.endswith("\n\n")


def test_same_rules_same_bytes(tmp_path: Path) -> None:
    first = export(tmp_path / "a", env={"PYTHONHASHSEED": "1"})
    second = export(tmp_path / "b", env={"PYTHONHASHSEED": "2"})
    assert first == second


def test_a_second_export_into_the_same_directory_changes_nothing(tmp_path: Path) -> None:
    assert export(tmp_path) == export(tmp_path)


LINK = re.compile(r"\]\(([^)\s]+)\)")
ANCHOR = re.compile(r'<a id="([^"]+)"></a>')


def test_links_reach_pages_and_anchors(pages: dict[str, str]) -> None:
    anchors = {path: set(ANCHOR.findall(text)) for path, text in pages.items()}
    for path, text in pages.items():
        for target in LINK.findall(text):
            if re.match(r"^[a-z]+:", target):
                continue
            file, _, frag = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
            assert dest in pages, f"{path}: link to missing page {target}"
            if frag:
                assert frag in anchors[dest], f"{path}: link to missing anchor {target}"


def test_anchors_are_unique(pages: dict[str, str]) -> None:
    for path, text in pages.items():
        ids = ANCHOR.findall(text)
        assert len(ids) == len(set(ids)), path


def test_index_links_every_page(pages: dict[str, str]) -> None:
    linked = {t.partition("#")[0] for t in LINK.findall(pages["index.md"])}
    assert linked == set(pages) - {"index.md"}


def test_gpu_page_leads_with_the_figures_people_compare(pages: dict[str, str], kn: Knowledge) -> None:
    """gpus.md: name, VRAM, bandwidth, FP16 and FP8 TFLOPS, power and price (issue 23), each GPU
    linked to its entry on the full table's page."""
    header = next(line for line in pages["gpus.md"].splitlines() if line.startswith("| GPU |"))
    assert [c.strip() for c in header.split("|")[1:-1]] == [
        "GPU", "memory GB", "GB/s", "FP16 TFLOPS", "FP8 TFLOPS", "TDP W", "buy; rent"]
    rows = table_rows(pages["gpus.md"], "GPU")
    assert len(rows) == len(kn.gpus)
    for row, gpu in zip(rows, kn.gpus.values()):
        assert row[0].endswith(f"(gpus-full.md#gpu-{gpu['id']})")
        fp8 = gpu["tensor_tflops"]["fp8"]
        assert float(row[1].replace(",", "")) == pytest.approx(gpu["memory_gb"], rel=0.005)   # decimal GB, as answers
        assert row[2:5] == [number(gpu["bandwidth_gb_s"]),
                            "–" if gpu["tensor_tflops"]["fp16"] is None else number(gpu["tensor_tflops"]["fp16"]),
                            "–" if fp8 is None else number(fp8)]
    assert "[the full table](gpus-full.md)" in pages["gpus.md"]


def test_gpu_table_has_every_gpu_and_its_figures(pages: dict[str, str], kn: Knowledge) -> None:
    rows = table_rows(pages["gpus-full.md"], "GPU")
    assert [r[1].strip("`") for r in rows] == list(kn.gpus)
    for row, gpu in zip(rows, kn.gpus.values()):
        assert float(row[6].replace(",", "")) == pytest.approx(gpu["memory_gb"], rel=0.005)  # decimal GB, 3 digits as answers show it
        assert row[8] == number(gpu["bandwidth_gb_s"])
        fp16 = gpu["tensor_tflops"]["fp16"]
        assert row[11] == ("–" if fp16 is None else number(fp16))
        assert f"(sources.md#src-{gpu['source']})" in row[-1]


def test_models_and_precisions_tables(pages: dict[str, str], kn: Knowledge) -> None:
    models = table_rows(pages["models.md"], "model")
    assert [r[1].strip("`") for r in models] == list(kn.models)
    precisions = table_rows(pages["precisions.md"], "precision")
    assert [r[1].strip("`") for r in precisions] == list(kn.precisions)
    for row, p in zip(precisions, kn.precisions.values()):
        assert row[4] == number(p["bits_per_weight"] / 8)


# ---------------------------------------------------------------- formulas.md

def test_formulas_read_as_math(pages: dict[str, str], kn: Knowledge) -> None:
    text = pages["formulas.md"]
    assert "`weights_gb = params × weight_bytes_per_param ÷ bytes_per_gb`" in text
    assert "when `is_full_ft or is_pretrain`: `weights_gb = params × grad_bytes ÷ bytes_per_gb`" in text
    for name, f in kn.formulas.items():
        assert f'<a id="f-{name}"></a>\n### {name}\n' in text
        assert f"Unit: {f.unit}." in text.split(f"### {name}\n", 1)[1].split("\n### ", 1)[0]


def _sections(text: str) -> dict[str, str]:
    parts = re.split(r"^### (\S+)\n", text, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2]))


WORKED = re.compile(r"Worked example: `kbq \"([^\"]+)\"`(?:, case (\d+))?, ([^:]+):\n\n```text\n"
                    r"(.*?)\n```", re.DOTALL)


def test_worked_examples_are_the_engines_figures(pages: dict[str, str], kn: Knowledge) -> None:
    """Each worked example shows the case, values and result of that query's trace."""
    sections = _sections(pages["formulas.md"])
    answers: dict[str, object] = {}
    traced = 0
    for name, body in sections.items():
        m = WORKED.search(body)
        if m is None:
            assert "No worked example" in body, name
            continue
        query, _case, how, block = m.groups()
        if query not in answers:
            answers[query] = answer(parse(query, kn), kn, query)
        last = block.splitlines()[-1]
        if how == "from its trace":
            traced += 1
            step = next(s for s in answers[query].trace  # type: ignore[attr-defined]
                        if s.rule.startswith(f"{name} (") and s.result is not None)
            assert last.split("= ", 1)[1] == with_unit(number(step.result), kn.formulas[name].unit)
            for value in step.values.values():
                assert number(value) in block
        assert block.splitlines()[0].startswith(f"{name} = ") or block.splitlines()[0].strip().startswith("when ")
    assert traced >= len(kn.formulas) // 2


def test_a_worked_example_by_hand(pages: dict[str, str]) -> None:
    """7B at FP16: 7e9 parameters × 2 bytes ÷ 1e9 = 14 GB (decimal GB, seed 000's arithmetic)."""
    body = _sections(pages["formulas.md"])["weights_gb"]
    assert "weights_gb = params × weight_bytes_per_param ÷ bytes_per_gb\n" in body
    assert "           = 7e9 × 2 ÷ 1e9\n           = 14 GB\n" in body


# ---------------------------------------------------------------- sources.md

def test_every_source_and_claim_with_the_engines_comparison(pages: dict[str, str],
                                                            kn: Knowledge) -> None:
    text = pages["sources.md"]
    for sid in kn.sources:
        assert f'<a id="src-{sid}"></a>' in text
    for claim in kn.claims:
        block = text.split(f'<a id="claim-{claim.id}"></a>', 1)[1].split("\n\n", 2)[1]
        a = answer(parse(claim.example_query, kn), kn, claim.example_query)
        entries = [e for e in a.claims_checked + a.disagreements if e["id"] == claim.id]
        assert entries, f"{claim.id} does not apply to its own example query"
        e = entries[0]
        assert f"kbq computes {with_unit(number(e['computed']), claim.unit)}" in block
        assert ("agrees" if e["agrees"] else "differs") in block
        assert f'`kbq "{claim.example_query}"`' in block


def _ascii(text: str) -> str:
    for sym, op in (("×", "*"), ("÷", "/"), ("≤", "<="), ("≥", ">="), ("≠", "!="), (" = ", " == ")):
        text = text.replace(sym, op)
    return text


TRICKY = ["a - (b - c)", "(a - b) - c", "a / (b * c)", "-(a ^ b)", "(-a) ^ b", "a ^ b ^ c",
          "(a ^ b) ^ c", "not (a and b)", "not a and b", "(a or b) and c", "(a < b) == c",
          "a * -b", "a - -b", "min(a, b - c) * 2", "1e9 * 2.5e-3", 'if(a > 0, "x", "y") == "x"']


def _shipped_expressions(kn: Knowledge) -> list[Any]:
    out: list[Any] = []
    for f in kn.formulas.values():
        for c in f.cases:
            out += [c.expr] + ([c.when] if c.when else [])
    for flow in kn.flows:
        out += [e.when for n in flow.nodes.values() for e in n.edges if e.when]
    for claim in kn.claims:
        out += [claim.computed, claim.applies_when]
    return out


def test_math_reads_back_as_the_same_expression(kn: Knowledge) -> None:
    """The readable math keeps every parenthesis the meaning needs, and no more than that."""
    from kb.expr import parse as ex
    for compiled in [ex.parse(t) for t in TRICKY] + _shipped_expressions(kn):
        shown = math(compiled.ast)
        assert ex.parse(_ascii(shown)).ast == compiled.ast, shown
    assert math(ex.parse("(a - b) - c").ast) == "a - b - c"
    assert math(ex.parse("a * (b / c)").ast) == "a × (b ÷ c)"


@pytest.mark.parametrize(("value", "text"), [(7e9, "7e9"), (70.6e9, "7.06e10"), (2.0, "2"),
                                             (0.75, "0.75"), (1e12, "1e12"), (4096.0, "4096")])
def test_literals_are_written_as_in_a_rule(value: float, text: str) -> None:
    assert literal(value) == text
