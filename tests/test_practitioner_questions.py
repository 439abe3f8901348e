"""Eighty-four practitioner questions (tests/data/practitioner_questions.yaml) read as their words say.

Each expected field was written from the question's words (the `why` beside it), not from a run;
the table also keeps a practitioner's judgement of the figures, and whether each answer was right
before the reader's fixes, so the right-count can be tracked (at least 90% right is the target).
"""

from pathlib import Path
from typing import Any

import pytest
import yaml

from kb import get_knowledge
from kb.errors import QueryError
from kb.query.parse import parse

KN = get_knowledge()
TABLE = yaml.safe_load((Path(__file__).parent / "data" / "practitioner_questions.yaml").read_text(encoding="utf-8"))
CASES: list[dict[str, Any]] = TABLE["questions"]


def _gpus(w: Any) -> list[list[Any]]:
    return [[g.gpu_id, g.count] if g.capacity_gb is None else [g.gpu_id, g.count, g.capacity_gb]
            for g in w.gpus]


def test_eighty_four_questions_each_with_a_reason_and_a_judgement() -> None:
    assert len(CASES) == 99
    assert len({c["q"].lower() for c in CASES}) == 99
    for c in CASES:
        assert c["read"] and c["why"] and c["answer"] and isinstance(c["before"], bool), c["q"]


def test_most_answers_are_judged_right() -> None:
    right = [c for c in CASES if c["answer"].startswith("ok")]
    assert len(right) >= 0.9 * len(CASES), [c["q"] for c in CASES if c not in right]


def _marks(c: dict[str, Any]) -> Any:
    """A question the reader is known to misread runs as a strict xfail: it fails the suite once fixed,
    so the table is updated (the reading bug and its class are in the entry's known_misread)."""
    misread = c.get("known_misread")
    return pytest.param(c, id=c["q"], marks=pytest.mark.xfail(strict=True, reason=misread) if misread else ())


@pytest.mark.parametrize("case", [_marks(c) for c in CASES])
def test_question_reads_as_its_words_say(case: dict[str, Any]) -> None:
    want = case["read"]
    if want.get("error"):
        with pytest.raises(QueryError):
            parse(case["q"], KN)
        return
    w = parse(case["q"], KN)
    for key, value in want.items():
        if key in ("params", "train_tokens"):
            assert getattr(w, key) == pytest.approx(float(value), rel=1e-9), key
        elif key == "gpus":
            assert _gpus(w) == value, _gpus(w)
        elif key == "model_in":
            assert w.model_id in value, w.model_id
        else:
            assert getattr(w, key) == value, (key, getattr(w, key))
