"""Fresh home-inference questions (tests/data/home_questions.yaml): each answered, never refused,
the words not used named, and its figure within the tolerance of the published figure it cites."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kb import ask

TABLE = yaml.safe_load((Path(__file__).parent / "data" / "home_questions.yaml").read_text())["questions"]


def figure(d: dict, path: str) -> float:
    for part in path.split("."):
        d = d[part]
    return float(d)         # type: ignore[arg-type]


@pytest.mark.parametrize("row", TABLE, ids=[f"{r['class']}: {r['query']} ({r['figure']})" for r in TABLE])
def test_home_question(row):
    assert row["source"] and 0 < row["tolerance"] <= 0.35
    a = ask(row["query"])
    assert a.unused_words == row["unused"]
    got = figure(a.to_dict(), row["figure"])
    assert abs(got - row["expected"]) <= row["tolerance"] * row["expected"], (got, row["expected"], row["source"])
