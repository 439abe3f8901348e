"""Bugs the fuzzing found (tests/test_fuzz.py), each kept as a test of its own."""

from __future__ import annotations

import re

import pytest
from fuzz_checks import check_expr, check_query
from fuzz_exprs import EXPR_GENERATORS, finite_float
from fuzz_queries import KN, QUERY_GENERATORS, SPECIALS, long_text

from kb import ask
from kb.errors import EvalError, QueryError
from kb.expr import parse as ex

# ---------------------------------------------------------------- bugs the fuzzing found

def test_column_after_a_line_break_points_at_the_bad_word() -> None:
    q = "serve 70B\nzq9xw"          # letters and digits: a name kbq cannot place, still refused
    with pytest.raises(QueryError) as info:
        ask(q)
    assert info.value.column == q.index("zq9xw") + 1


@pytest.mark.parametrize("fn", ["ceil", "floor", "round"])
def test_eval_rounding_infinity_is_an_eval_error(fn: str) -> None:
    with pytest.raises(EvalError):
        ex.parse(f"{fn}(a * b)")({"a": 1e200, "b": 1e200})


@pytest.mark.parametrize("fn", ["ceil", "floor", "round"])
def test_eval_rounding_nan_is_an_eval_error(fn: str) -> None:
    with pytest.raises(EvalError):
        ex.parse(f"{fn}(a * a - a * a)")({"a": 1e200})


@pytest.mark.parametrize("text, scope", [("round(1, a * a)", {"a": 1e200}),
                                         ("round(1, 'x')", {})])
def test_eval_round_digits_is_checked(text: str, scope: dict[str, float]) -> None:
    with pytest.raises(EvalError):
        ex.parse(text)(scope)


def _gpu_aliases(with_memory_size: bool) -> list[tuple[str, str]]:
    out = []
    for gpu_id, gpu in KN.gpus.items():
        for alias in [gpu_id, *gpu.get("aliases", [])]:
            if bool(re.search(r"\d\s*(gb|gib|g)\b", alias, re.I)) == with_memory_size:
                out.append((alias, gpu_id))
    return out


def test_every_id_and_alias_reads_as_its_item() -> None:
    """Model, precision and runtime ids and aliases, and GPU ones without a memory size."""
    from kb.query.parse import parse

    wrong = []
    for alias, gpu_id in _gpu_aliases(with_memory_size=False):
        w = parse(f"serve 7B on {alias}", KN)
        if [(g.gpu_id, g.count, g.capacity_gb) for g in w.gpus] != [(gpu_id, 1, None)]:
            wrong.append((alias, gpu_id))
    for attr, items, template in (("model_id", KN.models, "serve {}"),
                                  ("precision", KN.precisions, "serve 7B {}"),
                                  ("runtime", KN.runtimes, "serve 7B with {}")):
        for item_id, item in items.items():
            for alias in [item_id, *item.get("aliases", [])]:
                if attr == "runtime" and item["kind"] == "training":
                    template = "lora 7B with {}"     # a training runtime needs a training task
                w = parse(template.format(alias), KN)
                if getattr(w, attr) != item_id:
                    wrong.append((alias, item_id))
    assert wrong == []


def test_gpu_aliases_with_a_memory_size_read_as_their_gpu() -> None:
    from kb.query.parse import parse

    aliases = _gpu_aliases(with_memory_size=True)
    assert len(aliases) >= 30
    wrong = []
    for alias, gpu_id in aliases:
        try:
            w = parse(f"serve 7B on {alias}", KN)
            got: object = [(g.gpu_id, g.count, g.capacity_gb) for g in w.gpus]
        except QueryError as err:
            got = err.message
        if got != [(gpu_id, 1, None)]:
            wrong.append((alias, gpu_id, got))
    assert wrong == []


def test_runtime_of_the_wrong_kind_is_shown_in_the_query() -> None:
    q = "train 7B with vllm"
    with pytest.raises(QueryError) as info:
        ask(q)
    assert info.value.query == q
    assert info.value.column == q.index("vllm") + 1


def test_size_that_contradicts_the_model_is_shown_in_the_query() -> None:
    q = "serve llama-3.1-8b 70B"
    with pytest.raises(QueryError) as info:
        ask(q)
    assert info.value.query == q
    assert q[info.value.column - 1:].startswith(("llama-3.1-8b", "70B"))


def test_the_error_for_a_control_character_does_not_carry_it() -> None:
    q = "serve 70B \x1b[2J\x1b[31mpwned"
    with pytest.raises(QueryError) as info:
        ask(q)
    assert info.value.column == q.index("\x1b") + 1
    assert not any(ord(c) < 32 and c != "\n" for c in info.value.render())


def test_generators_cover_what_they_promise() -> None:
    """The generators do produce both outcomes, and the awkward characters."""
    import random

    r = random.Random(1)
    kinds = {check_query(QUERY_GENERATORS[name](r)) for name in QUERY_GENERATORS for _ in range(40)}
    assert {"answer", "QueryError"} <= kinds
    assert "\x00" in SPECIALS and "\u202e" in SPECIALS and "😀" in SPECIALS
    assert len(long_text(random.Random(3))) >= 450
    exprs = {check_expr(EXPR_GENERATORS[name](r), lambda: finite_float(r)).split(":")[0]
             for name in EXPR_GENERATORS for _ in range(300)}
    assert {"ExprSyntaxError", "value", "EvalError"} <= exprs
