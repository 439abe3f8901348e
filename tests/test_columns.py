"""Evaluating over every candidate GPU at once (kb.expr.parse.Col) gives what evaluating each GPU on its
own gives: the same value, the same failure, the same case, the same error.

The reference is the one-value-per-scope evaluation (Expr.__call__ on a plain scope); nothing
here is copied from the code's output.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kb import get_knowledge
from kb.expr import parse as ex
from kb.engine import ROW_FORMULAS, Evaluated, base_scope, evaluate, gpu_scope, layout_of, resolve_workload
from kb.engine.verdicts.margins import SPEEDS
from kb.engine.run import ranked
from kb.errors import EvalError
from kb.query.parse import parse

KN = get_knowledge()
N = 4   # candidates per column in the expression properties


def _texts() -> list[str]:
    out = []
    for f in KN.formulas.values():
        for case in f.cases:
            out.append(case.expr.text)
            if case.when is not None:
                out.append(case.when.text)
    for claim in KN.claims:
        out.append(claim.computed.text)
    return sorted(set(out))


TEXTS = _texts() + [
    "a / b", "a ^ b", "sqrt(a)", "log2(b)", "ceil(a / b)", "round(a, b)", "clamp(a, b, 1)",
    "if(a > b, a / b, b / a)", "if(t, 1 / a, 1 / b)", "t and a / b > 1", "t or a / b > 1",
    "not t", "-a", "min(a, b, 3)", "max(a)", "a == b", "s == 'x'", "if(s == 'x', a, s)",
    "abs(a - b) + floor(b)", "a / b > 1 and t", "a / b > 1 or t", "if(a / b > 1, a, b)",
    "not (a / b > 1)", "if(t, s, 'y') == 'x'",
]
AWKWARD = st.one_of(st.sampled_from([0.0, -1.0, 1.0, 2.5, 1e308, -1e308, 5e-324, None, True, False,
                                     "x", "y", 3, 0]),
                    st.floats(allow_nan=False, allow_infinity=False))


def _names(expr: ex.Expr) -> list[str]:
    return sorted(set(expr.names) | {"a", "b", "t", "s"})


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(TEXTS), st.data())
def test_a_column_evaluates_like_each_element_alone(text: str, data: Any) -> None:
    expr = ex.parse(text)
    scope: dict[str, Any] = {}
    for name in _names(expr):
        if data.draw(st.booleans(), label=f"{name} varies"):
            values = data.draw(st.lists(AWKWARD, min_size=N, max_size=N), label=name)
            # with its holes known (the engine's columns), or not (then found the slow way)
            scope[name] = ex.Col.of(values) if data.draw(st.booleans(), label="holes") else ex.Col(values)
        else:
            scope[name] = data.draw(AWKWARD, label=name)
    alone: list[Any] = []
    for i in range(N):
        one = {k: ex.at(v, i) for k, v in scope.items()}
        try:
            alone.append(("ok", expr(one)))
        except EvalError:
            alone.append(("failed", None))
    try:
        together = expr.fn(scope)
    except ex.RAISED:
        assert all(kind == "failed" for kind, _ in alone), (text, scope, alone)
        return
    for i, (kind, value) in enumerate(alone):
        got = ex.at(together, i)
        if kind == "failed":
            assert got.__class__ is ex.Failed, (text, i, scope, got)
        else:
            assert got.__class__ is not ex.Failed, (text, i, scope, got)
            assert got == value or (got != got and value != value), (text, i, scope, got, value)
            assert type(got) is type(value), (text, i, got, value)


def test_a_failure_in_a_branch_not_taken_does_not_matter() -> None:
    expr = ex.parse("if(b > 0, a / b, 0)")
    got = expr.fn({"a": 1.0, "b": ex.Col([2.0, 0.0, -1.0])})
    assert list(got) == [0.5, 0, 0]


def test_a_failure_propagates_and_a_missing_figure_is_not_an_error() -> None:
    got = ex.parse("(a / b) * 2 + 1").fn({"a": ex.Col.of([1.0, None, 1.0]), "b": ex.Col([1.0, 1.0, 0.0])})
    assert got[0] == 3.0
    assert got[1] is ex.MISSING                       # a figure the GPU lacks
    assert got[2].__class__ is ex.Failed and got[2] is not ex.MISSING
    assert "division by zero" in str(got[2].error)


# ---------------------------------------------------------------- the engine

ROW_FIELDS = ("usable_vram_gb", "per_gpu_gb", "fits", "headroom_gb", "gpus_needed",
              "decode_tokens_per_s", "decode_tokens_per_s_aggregate", "prefill_tokens_per_s",
              "ttft_s", "train_tokens_per_s", "train_time_s")


def _alone(q: str, gpu_id: str, count: int) -> Evaluated:
    """One GPU on its own scope, as kb.engine.search.solve probes it."""
    w = parse(q, KN)
    r = resolve_workload(w, KN)
    ev = Evaluated(gpu_scope(base_scope(r, KN), KN.gpus[gpu_id], count, r.precision, layout_of(r, KN, count)))
    evaluate(KN, ev, [n for n, f in KN.formulas.items() if not f.per_gpu])
    evaluate(KN, ev, ROW_FORMULAS[r.is_training])
    return ev


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return a == b


def _check_rows(q: str) -> None:
    a = ranked(parse(q, KN), KN, q)     # the ranking itself (answer() may settle on the fewest GPUs)
    assert a.gpus
    for row in a.gpus:
        s = _alone(q, row.id, row.count).scope
        for name in ROW_FIELDS:
            want = s.get(name)
            if name == "fits":
                want = bool(want)
            elif name == "gpus_needed" and want is not None:
                want = int(want)
                if row.requested and not row.fits:     # searched by the forward model: never fewer
                    assert row.gpus_needed >= want, (q, row.id)
                    continue
            elif name in SPEEDS and not row.fits:      # no speed for what does not fit
                want = None
            assert _same(getattr(row, name), want), (q, row.id, name, getattr(row, name), want)
    # the trace is the first row's GPU on its own view: its own values, never a column
    first = _alone(q, a.gpus[0].id, a.gpus[0].count).scope
    for step in a.trace:
        assert not isinstance(step.result, list) and not any(isinstance(v, list) for v in step.values.values())
        if step.rule_id in first:
            assert _same(step.result, first[step.rule_id]), (q, step.rule_id, step.result)


@pytest.mark.parametrize("q", [
    "serve 70B int4 16 users", "train 13B qlora", "full fine-tune 7B", "which gpu for 13B lora",
    "serve llama-3.1-70b fp8 64 users 32k context with vllm", "pretrain 1B batch 32",
    "infer deepseek-v3 fp8", "serve mixtral-8x7b awq 8 users with sglang",
])
def test_every_catalogue_row_equals_that_gpu_alone(q: str) -> None:
    _check_rows(q)


def test_requested_gpus_of_different_counts_equal_each_alone() -> None:
    q = "serve llama-3.1-70b awq 32 users on 2x l40s vs 4x rtx 4090 vs 1x h100"
    _check_rows(q)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(sorted(KN.models)), st.sampled_from(sorted(KN.precisions)),
       st.integers(1, 256), st.sampled_from(["serve", "lora", "full fine-tune"]))
def test_random_workloads_over_the_catalogue_equal_each_gpu_alone(model: str, precision: str,
                                                                 users: int, task: str) -> None:
    if task != "serve" and KN.precisions[precision]["kind"] != "float":
        precision = "bf16"
    _check_rows(f"{task} {model} {precision} {users} users")


def test_the_catalogue_columns_built_once_equal_the_columns_built_per_answer() -> None:
    """kb.knowledge.derived builds the catalogue's GPU columns once per precision key, sharing the card's
    own names between keys; each must equal gpu_columns over the same cards (the per-answer
    construction), name for name, in order, with the same element types and holes."""
    from kb.knowledge.gpu_names import gemm_of, gpu_columns, precision_key, runs_on

    for precision in KN.precisions.values():
        for runtime in KN.runtimes.values():
            cards = [(g, 1) for g in KN.gpus.values() if runs_on(runtime, g, precision["id"])]
            want = gpu_columns(cards, precision, gemm_of(runtime))
            got = KN.derived.gpu_columns[precision_key(precision, runtime)]
            assert list(got) == list(want)
            for name, value in want.items():
                other = got[name]
                assert other.__class__ is value.__class__ and other == value, name
                if isinstance(value, ex.Col):
                    assert [v.__class__ for v in other] == [v.__class__ for v in value], name
                    assert other.holes == value.holes, name


def test_the_knowledge_is_never_changed_after_it_is_built() -> None:
    import dataclasses

    with pytest.raises(dataclasses.FrozenInstanceError):
        KN.gpus = {}  # type: ignore[misc]
    with pytest.raises(TypeError):
        KN.derived.order["weights_gb"] = ()  # type: ignore[index]


# ---------------------------------------------------------------- a formula's cases over a column

# (condition, expression)… then the else: two cases (the C-level path) and three
CASES = [("a > b", "a / b", "b / a"), ("t", "a", "s"), ("s == 'x'", "sqrt(a)", "b"),
         ("a / b > 1", "1 / a", "1 / b"), ("not t", "a - b", "log2(b)"),
         ("a > b", "a / b", "t", "b", "1 / a"), ("s == 'y'", "log2(a)", "a / b > 2", "s", "t")]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(CASES), st.data())
def test_a_formula_with_a_condition_and_an_else_evaluates_each_candidate_as_alone(
        texts: tuple[str, ...], data: Any) -> None:
    """Each candidate takes the case it takes alone, with the value, the case and the error it
    has alone; a condition that fails or reads a missing figure as it does alone."""
    from kb.engine.evaluate import _eval_formula
    from kb.knowledge.data import Case, Formula

    exprs = [ex.parse(t) for t in texts]
    cases = tuple(Case(exprs[i], exprs[i + 1], None) for i in range(0, len(exprs) - 1, 2)) + (
        Case(None, exprs[-1], None),)
    names = tuple(sorted({n for e in exprs for n in e.names}))
    f = Formula("f", "1", "", cases, (), "test:1", names, (), False)
    columns = {n: [data.draw(AWKWARD) for _ in range(N)] for n in names}
    cols = Evaluated({n: ex.Col.of(v) for n, v in columns.items()})
    got = _eval_formula(f, cols)
    for k in range(N):
        alone = Evaluated({n: v[k] for n, v in columns.items()})
        want = _eval_formula(f, alone)
        value = got[k] if got.__class__ is ex.Col else got
        assert _same(value, want), (texts, k, value, want)
        case = cols.cases.get("f")
        assert (case[k] if case.__class__ is ex.Col else case) == alone.cases.get("f", case[k] if case.__class__ is ex.Col else case)
        error = cols.errors.get("f")
        assert (error[k] if error.__class__ is ex.Col else error) == alone.errors.get("f"), (texts, k)
