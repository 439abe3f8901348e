"""What people type → the workload they meant, one table (tests/data/phrasings.yaml).

Each phrasing lists the Workload fields it must give; the expected values were written by hand
from the query's own words (a model, a GPU, a number with its unit), never taken from a run.
"""

import re
from pathlib import Path

import pytest
import yaml

from kb import get_knowledge
from kb.query.parse import parse

KN = get_knowledge()
TABLE = yaml.safe_load((Path(__file__).parent / "data" / "phrasings.yaml").read_text(encoding="utf-8"))
CASES = TABLE["phrasings"]


def _gpus(w):
    return [[g.gpu_id, g.count] if g.capacity_gb is None else [g.gpu_id, g.count, g.capacity_gb]
            for g in w.gpus]


def test_the_table_is_big_enough_and_has_no_repeats():
    queries = [c["q"] for c in CASES]
    assert len(queries) >= 250
    assert len(set(q.lower() for q in queries)) == len(queries)


@pytest.mark.parametrize("case", CASES, ids=[c["q"] for c in CASES])
def test_phrasing(case):
    w = parse(case["q"], KN)
    for key, want in case.items():
        if key in ("q", "note"):
            continue
        if isinstance(want, str) and re.fullmatch(r"\d+(\.\d+)?e[+-]?\d+", want):
            want = float(want)          # YAML 1.1 reads 70.0e9 as text
        if key == "gpus":
            assert _gpus(w) == want, (key, _gpus(w))
        elif key == "notes_has":
            assert any(want in n for n in w.notes), w.notes
        elif isinstance(want, float):
            got = getattr(w, key)
            assert got is not None and got == pytest.approx(want, rel=1e-9), (key, got)
        else:
            assert getattr(w, key) == want, (key, getattr(w, key))


@pytest.mark.parametrize("case", TABLE["two_values"], ids=[c["q"] for c in TABLE["two_values"]])
def test_a_second_value_without_a_joining_word_is_an_error(case):
    from kb.errors import QueryError

    with pytest.raises(QueryError) as err:
        parse(case["q"], KN)
    assert err.value.column == case["column"], str(err.value)
    assert err.value.suggestion == case["suggestion"], str(err.value)


def test_a_length_word_without_its_number_is_no_unit():
    # query.yaml units before_number: 'responses' is the output's unit only before its number
    w = parse("serve 8b on l4 with short responses", KN)
    assert w.output_tokens is None and w.unused_words == ["short"]
    assert parse("serve 8b on l4 with responses of 300 tokens", KN).output_tokens == 300
