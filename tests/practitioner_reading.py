"""The practitioner table (tests/data/practitioner_questions.yaml) and the one check of a question's
reading that its two test files share: each expected field, written from the question's words."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kb import get_knowledge
from kb.errors import QueryError
from kb.query.parse import parse

KN = get_knowledge()
TABLE: dict[str, Any] = yaml.safe_load(
    (Path(__file__).parent / "data" / "practitioner_questions.yaml").read_text(encoding="utf-8"))


def gpus_of(w: Any) -> list[list[Any]]:
    return [[g.gpu_id, g.count] if g.capacity_gb is None else [g.gpu_id, g.count, g.capacity_gb]
            for g in w.gpus]


def assert_reads(case: dict[str, Any]) -> None:
    """The query of `case` reads as its `read` says: an error where it says error, else every field
    (gpus as [[id, count]] or [[null, count, GB]], model_in: any of these models, numbers to 1e-9)."""
    want = case["read"]
    if want.get("error"):
        with pytest.raises(QueryError):
            parse(case["q"], KN)
        return
    w = parse(case["q"], KN)
    for key, value in want.items():
        if isinstance(value, str) and value[:1].isdigit() and "e" in value:
            value = float(value)                 # YAML 1.1 reads 7e9 as text
        if key == "gpus":
            assert gpus_of(w) == value, gpus_of(w)
        elif key == "model_in":
            assert w.model_id in value, w.model_id
        elif isinstance(value, float) or key in ("params", "train_tokens"):
            assert getattr(w, key) == pytest.approx(float(value), rel=1e-9), key
        else:
            assert getattr(w, key) == value, (key, getattr(w, key))
