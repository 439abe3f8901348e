"""Rule files cannot do harm by size: deep nesting, numbers that are not finite, huge files, bytes
that are not UTF-8, control characters. Each ends as a load error at its position."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from rules_harm_common import EXPR_LINE, ask_with, edit, error_at, load_errors

# ---------------------------------------------------------------- deep nesting

NESTINGS = [
    ("parentheses", "(" * 500 + "model.hidden_size" + ")" * 500),
    ("minus signs", "-" * 500 + "model.hidden_size"),
    ("not", "not " * 500 + "is_training"),
    ("powers", "2 ^ " * 500 + "model.hidden_size"),
    ("a long sum", " + ".join(["model.hidden_size"] * 500)),
    ("calls", "max(" * 500 + "model.hidden_size" + ")" * 500),
]


@pytest.mark.parametrize("expr", [n[1] for n in NESTINGS], ids=[n[0] for n in NESTINGS])
def test_deep_nesting_in_a_formula_is_an_error(rules: Path, expr: str) -> None:
    line, column = edit(rules, "formulas.yaml", EXPR_LINE, f"expr: {expr}")
    errors = load_errors(rules)
    error_at(errors, "formulas.yaml", line, column + len("expr: "), "nested")


def test_yaml_nested_a_little_too_deep_is_an_error(rules: Path) -> None:
    text = (rules / "formulas.yaml").read_text(encoding="utf-8")
    line = text.count("\n") + 1
    (rules / "formulas.yaml").write_text(text + "extra: " + "[" * 50 + "1" + "]" * 50 + "\n",
                                         encoding="utf-8")
    errors = load_errors(rules)
    error_at(errors, "formulas.yaml", line, len("extra: ") + 41, "nested deeper than")


@pytest.mark.parametrize("nesting", ["[" * 500 + "1" + "]" * 500,
                                     "{a: " * 500 + "1" + "}" * 500], ids=["lists", "mappings"])
def test_yaml_nested_500_deep_is_an_error_not_a_recursion_error(rules: Path, nesting: str) -> None:
    text = (rules / "formulas.yaml").read_text(encoding="utf-8")
    line = text.count("\n") + 1
    (rules / "formulas.yaml").write_text(text + "extra: " + nesting + "\n", encoding="utf-8")
    errors = load_errors(rules)
    assert any(e.startswith(f"rules/formulas.yaml:{line}:") and "nested" in e for e in errors)


# ---------------------------------------------------------------- numbers

NOT_FINITE = ["1e400", "-1e400", ".inf", "-.Inf", ".nan", ".NaN", "1" + "0" * 400]
NOT_FINITE_IDS = [v if len(v) < 10 else "10**400" for v in NOT_FINITE]


@pytest.mark.parametrize("value", NOT_FINITE, ids=NOT_FINITE_IDS)
def test_a_constant_that_is_not_a_finite_number_is_an_error(rules: Path, value: str) -> None:
    line, column = edit(rules, "formulas.yaml", "1.0e9, unit: B/GB", f"{value}, unit: B/GB")
    errors = load_errors(rules)
    error_at(errors, "formulas.yaml", line, column, "constants.bytes_per_gb.value")


def test_a_bad_constant_reports_only_its_own_error(rules: Path) -> None:
    line, column = edit(rules, "formulas.yaml", "1.0e9, unit: B/GB", "1e400, unit: B/GB")
    errors = load_errors(rules)
    assert len(errors) == 1 and errors[0].startswith(f"rules/formulas.yaml:{line}:{column}: ")


@pytest.mark.parametrize("value", NOT_FINITE, ids=NOT_FINITE_IDS)
def test_a_catalogue_figure_that_is_not_a_finite_number_is_an_error(rules: Path, value: str) -> None:
    line, column = edit(rules, "gpus.yaml", "bandwidth_gb_s: 600", f"bandwidth_gb_s: {value}",
                        after="id: a10g")
    errors = load_errors(rules)
    error_at(errors, "gpus.yaml", line, column + len("bandwidth_gb_s: "), "bandwidth_gb_s")


@pytest.mark.parametrize("value", ["1e400", "-1e400", ".inf", ".nan"])
def test_a_runtime_figure_that_is_not_a_finite_number_is_an_error(rules: Path, value: str) -> None:
    line, column = edit(rules, "runtimes.yaml", "decode_bandwidth_efficiency: 0.861",
                        f"decode_bandwidth_efficiency: {value}", after="id: ollama")
    errors = load_errors(rules)
    error_at(errors, "runtimes.yaml", line, column + len("decode_bandwidth_efficiency: "),
             "decode_bandwidth_efficiency")


@pytest.mark.parametrize("expr, offset", [("1e400 * model.hidden_size", 0),
                                          ("model.hidden_size * 1e400", 20),
                                          ("model.hidden_size * " + "9" * 400, 20)],
                         ids=["1e400 first", "1e400 second", "400 nines"])
def test_a_huge_literal_in_a_formula_is_an_error(rules: Path, expr: str, offset: int) -> None:
    line, column = edit(rules, "formulas.yaml", EXPR_LINE, f"expr: {expr}")
    errors = load_errors(rules)
    error_at(errors, "formulas.yaml", line, column + len("expr: ") + offset, "too large")


# ---------------------------------------------------------------- size and encoding

def test_a_huge_rule_file_is_refused(rules: Path) -> None:
    path = rules / "models.yaml"
    path.write_text(path.read_text(encoding="utf-8") + ("#" + "x" * 99 + "\n") * 41_000,
                    encoding="utf-8")
    errors = load_errors(rules)
    error_at(errors, "models.yaml", 1, 1, "larger than")


def test_a_rule_file_that_is_not_utf8_is_refused(rules: Path) -> None:
    path = rules / "models.yaml"
    raw = path.read_bytes()
    path.write_bytes(raw[:100] + b"\xff\xfe" + raw[100:])
    errors = load_errors(rules)
    error_at(errors, "models.yaml", 1, 101, "UTF-8")


def test_a_5001_digit_integer_is_an_error_at_its_position(rules: Path) -> None:
    # Python refuses to convert integers over 4,300 digits (int_max_str_digits)
    line, column = edit(rules, "gpus.yaml", "release_year: 2018", "release_year: " + "9" * 5001,
                        after="v100-sxm2-32gb")
    errors = load_errors(rules)
    error_at(errors, "gpus.yaml", line, column + len("release_year: "), "too long")


@pytest.mark.parametrize("char", ["\x00", "\x07", "\x1b"])
def test_a_control_character_is_an_error_at_its_position(rules: Path, char: str) -> None:
    line, column = edit(rules, "gpus.yaml", "release_year: 2018", "release_year: 20" + char + "18",
                        after="v100-sxm2-32gb")
    errors = load_errors(rules)
    error_at(errors, "gpus.yaml", line, column + len("release_year: 20"), "control character")


def test_the_untouched_copy_loads_and_answers(rules: Path) -> None:
    """The fixture itself is sound: every failure above comes from its edit."""
    d = ask_with(rules, "serve 70B int4 16 users on h100")
    assert d["memory"]["total_gb"] and math.isfinite(d["memory"]["total_gb"])


def test_a_formula_that_fails_on_some_gpus_only_fails_on_those(rules: Path) -> None:
    # headroom_gb is unchanged except on 24 GiB cards (25.77 GB), where it divides by zero
    edit(rules, "formulas.yaml", "expr: usable_vram_gb - per_gpu_gb\n",
         "expr: (usable_vram_gb - per_gpu_gb) / if(gpu.vram_gb > 25.7 and gpu.vram_gb < 25.8, 0, 1)\n")
    every = ask_with(rules, "serve llama-3.1-8b", one_card=True)
    rows = {g["id"]: g for g in every["gpus"]}
    for gpu_id in ("rtx-4090", "rtx-3090"):      # (an L4's nvidia-smi total is 23,034 MiB)
        assert rows[gpu_id]["headroom_gb"] is None, gpu_id
    assert rows["h100-sxm5"]["headroom_gb"] == pytest.approx(
        rows["h100-sxm5"]["usable_vram_gb"] - rows["h100-sxm5"]["per_gpu_gb"])
    assert every["gpus"][0]["vram_gb"] != 24
    assert not any(w.startswith("headroom_gb") for w in every["warnings"]), every["warnings"]

    first = ask_with(rules, "serve llama-3.1-8b on rtx 4090 vs h100")
    assert [g["headroom_gb"] is None for g in first["gpus"]] == [True, False]
    assert any(w.startswith("headroom_gb could not be computed") and "division by zero" in w
               for w in first["warnings"]), first["warnings"]
    second = ask_with(rules, "serve llama-3.1-8b on h100 vs rtx 4090")
    assert [g["headroom_gb"] is None for g in second["gpus"]] == [False, True]
    assert not any(w.startswith("headroom_gb") for w in second["warnings"]), second["warnings"]
