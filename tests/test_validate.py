"""`kbq validate` and the published JSON Schemas.

Each broken fixture is a full copy of the shipped rules/ with one defect, made at test time by a
small text edit (the table CASES, tests/validate_cases.py). The expected position is computed from the edited text (the
spot the edit put there), not copied from kbq's output, and the whole stderr is compared: every
error as `rules/FILE:LINE:COL: message`, then `N error(s)`, exit 2.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from validate_cases import (
    CASES,
    FP16_ALIASES,
    RULES,
    V100,
    WHICH,
    Case,
    Find,
    broken_copy,
    edited_text,
    kbq,
    position,
    where_of,
)


def _params() -> list[Any]:
    out = []
    for case in CASES:
        marks: list[Any] = list(case.marks)
        if case.known_issue:
            marks.append(pytest.mark.xfail(reason=case.known_issue, strict=True))
        out.append(pytest.param(case, id=case.id, marks=marks))
    return out


@pytest.mark.parametrize("case", _params())
def test_broken_rules_give_exact_errors(case: Case, tmp_path: Path) -> None:
    root, expected = broken_copy(case, tmp_path)
    result = kbq("validate", str(root), cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    got = result.stderr.splitlines()
    assert got[-1] == f"{len(expected)} error(s)"
    assert sorted(got[:-1]) == sorted(expected)


def test_there_are_enough_broken_fixtures() -> None:
    assert len([c for c in CASES if not c.known_issue]) >= 22
    assert len({c.id for c in CASES}) == len(CASES)


def test_python_tag_is_refused_not_run(tmp_path: Path) -> None:
    case = next(c for c in CASES if c.id == "python-tag")
    root, _ = broken_copy(case, tmp_path)
    for cwd in (tmp_path, root):
        kbq("validate", str(root), cwd=cwd)
        kbq("--rules", str(root), "infer 7B", cwd=cwd)
        assert not (cwd / "PWNED").exists()


# ---------------------------------------------------------------- whole runs

def test_shipped_rules_are_clean() -> None:
    result = kbq("validate")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert ": ok — " in result.stdout


def test_a_file_path_checks_its_rules_directory(tmp_path: Path) -> None:
    case = next(c for c in CASES if c.id == "edge-to-unknown-node")
    root, expected = broken_copy(case, tmp_path)
    for path in (root / "gpus.yaml", root / WHICH):
        result = kbq("validate", str(path))
        assert result.returncode == 2
        assert result.stderr.splitlines() == [*expected, "1 error(s)"]


def _combined(tmp_path: Path, picks: list[str]) -> tuple[Path, list[str]]:
    """One rules copy with the defects of several cases (each in a different file)."""
    root = tmp_path / "rules"
    shutil.copytree(RULES, root)
    expected: list[str] = []
    for cid in picks:
        case = next(c for c in CASES if c.id == cid)
        one_root, lines = broken_copy(case, tmp_path / cid)
        shutil.copy(one_root / case.file, root / case.file)
        expected += lines
    return root, expected


def test_every_schema_error_of_every_file_in_one_run(tmp_path: Path) -> None:
    root, expected = _combined(tmp_path, ["unknown-key-suggestion", "yaml-syntax",
                                          "flow-unknown-key", "unknown-default-precision-word"])
    result = kbq("validate", str(root))
    assert result.returncode == 2
    assert sorted(result.stderr.splitlines()[:-1]) == sorted(expected)
    assert result.stderr.splitlines()[-1] == f"{len(expected)} error(s)"


def test_every_cross_file_error_in_one_run(tmp_path: Path) -> None:
    root, expected = _combined(tmp_path, ["edge-to-unknown-node", "unknown-template-name",
                                          "claim-unknown-name", "unit-mismatch",
                                          "unknown-source-suggestion"])
    result = kbq("validate", str(root))
    assert result.returncode == 2
    assert sorted(result.stderr.splitlines()[:-1]) == sorted(expected)
    assert len(expected) == 5


def test_schema_errors_do_not_hide_cross_file_errors(tmp_path: Path) -> None:
    root, expected = _combined(tmp_path, ["invalid-literal-suggestion", "edge-to-unknown-node",
                                          "claim-unknown-name"])
    result = kbq("validate", str(root))
    assert sorted(result.stderr.splitlines()[:-1]) == sorted(expected)


def test_several_directories_in_one_run(tmp_path: Path) -> None:
    case = next(c for c in CASES if c.id == "unknown-name-suggestion")
    root, expected = broken_copy(case, tmp_path)
    result = kbq("validate", str(RULES), str(root))
    assert result.returncode == 2
    assert ": ok — " in result.stdout
    assert result.stderr.splitlines() == [*expected, "1 error(s)"]


# PyYAML notices an unclosed bracket or quote later: at the ':' of the next key, or at the end
# of the file. The error stands where it opened, and names where it was noticed.
BRACE = V100.replace("vram_gb: 32", "vram_gb: {gb: 32")
UNCLOSED = [
    ("bracket", FP16_ALIASES, "    aliases: [float16, half, f16\n", "[",
     Find("    source: 003_d80bd7f97616bc0e\n  - id: bf16", ":"), "expected ',' or ']', but got ':'"),
    ("brace", V100, BRACE, "{", BRACE.index("memory_bytes:") + len("memory_bytes"), "expected ',' or '}', but got ':'"),
    # the last double quote of precisions.yaml: left open, it runs to the end of the file
    ("quote", '"exl2 8bpw"]\n', '"exl2 8bpw]\n', '"', None, "found unexpected end of stream"),
]


@pytest.mark.parametrize("kind, old, new, opener, noticed, problem", UNCLOSED,
                         ids=[u[0] for u in UNCLOSED])
def test_an_unclosed_bracket_or_quote_is_reported_where_it_opened(
        tmp_path: Path, kind: str, old: str, new: str, opener: str, noticed: Find | int | None,
        problem: str) -> None:
    file = "gpus.yaml" if kind == "brace" else "precisions.yaml"
    case = Case(f"unclosed-{kind}", file, old, new, ())
    root, _ = broken_copy(case, tmp_path)
    edited, start = edited_text(case, (RULES / file).read_text(encoding="utf-8"))
    line, col = position(edited, start + new.index(opener))
    if noticed is None:              # a quote runs to the end of the file: noticed there
        at = (edited.count("\n") + 1, 1)
    else:
        at = where_of(case, noticed, edited, start)
    result = kbq("validate", str(root))
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"rules/{file}:{line}:{col}: YAML: this {opener} is not closed "
        f"(noticed at rules/{file}:{at[0]}:{at[1]}: {problem})", "1 error(s)"]


def test_a_constant_of_zero_is_named_where_it_is_set(tmp_path: Path) -> None:
    """bytes_per_gb: 0 makes every memory figure a division by zero. The error stands at the 0,
    and names the formulas that divide by it directly (weights_gb is one: its expressions end
    in '/ bytes_per_gb'), not every formula that reads what they give."""
    case = Case("zero-constant", "formulas.yaml", "  bytes_per_gb: {value: 1.0e9,",
                "  bytes_per_gb: {value: 0,", ())
    root, _ = broken_copy(case, tmp_path)
    edited, start = edited_text(case, (RULES / case.file).read_text(encoding="utf-8"))
    line, col = position(edited, start + case.new.index("0,"))
    result = kbq("validate", str(root))
    assert result.returncode == 2
    at_zero = [e for e in result.stderr.splitlines()
               if e.startswith(f"rules/formulas.yaml:{line}:{col}: constant bytes_per_gb is 0, and ")]
    assert len(at_zero) == 1, result.stderr
    assert "weights_gb" in at_zero[0] and "divide by it" in at_zero[0]
    assert "total_gb" not in at_zero[0]          # it reads weights_gb; it does not divide by 0
    assert "Traceback" not in result.stderr


def test_yaml_aliases_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "rules"
    shutil.copytree(RULES, root)
    lines = ["x0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"x{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 5)]
    (root / "models.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = kbq("validate", str(root))
    assert result.returncode == 2
    first = result.stderr.splitlines()[0]
    assert first.startswith(f"rules/models.yaml:2:{lines[1].index('*a0') + 1}: ")
    assert "YAML: aliases (*a0) are not used in rule files" in first


UNKNOWN_NAME = ("formulas.yaml", "model_state_gb + kv_cache_gb", "model_state_gbb + kv_cache_gb",
                "unknown name 'model_state_gbb' (did you mean 'model_state_gb'?)")
UNKNOWN_GPU_KEY = ("gpus.yaml", "\n    vram_gb:", "\n    vram_gbb:", "unknown key 'vram_gbb'")


@pytest.mark.parametrize(("broken", "other"), [
    ("gpus.yaml", UNKNOWN_NAME), ("models.yaml", UNKNOWN_NAME), ("sources.yaml", UNKNOWN_NAME),
    ("precisions.yaml", UNKNOWN_NAME), ("formulas.yaml", UNKNOWN_GPU_KEY),
])
def test_a_yaml_error_does_not_hide_errors_in_other_files(tmp_path: Path, broken, other) -> None:
    # an unclosed flow sequence in one file, a bad name or key in another: both reported
    root = tmp_path / "rules"
    shutil.copytree(RULES, root)
    path = root / broken
    text = path.read_text(encoding="utf-8")
    path.write_text("oops: [unclosed\n" + text, encoding="utf-8")
    other_file, old, new, message = other
    other_path = root / other_file
    other_text = other_path.read_text(encoding="utf-8")
    assert old in other_text
    other_path.write_text(other_text.replace(old, new, 1), encoding="utf-8")
    r = kbq("validate", str(root))
    assert r.returncode == 2
    assert f"rules/{broken}:" in r.stderr and "YAML" in r.stderr
    assert f"rules/{other_file}:" in r.stderr and message in r.stderr, r.stderr
