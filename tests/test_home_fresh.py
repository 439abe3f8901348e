"""A second set of fresh home-inference questions (tests/data/home_questions_fresh.yaml): each is
answered, never refused, and its figure is within the tolerance of the published figure it cites.
A row marked known_miss names a class kbq does not model well enough yet; its test must fail
(strict), so the mark goes once the class is fixed."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kb import ask

TABLE = yaml.safe_load((Path(__file__).parent / "data" / "home_questions_fresh.yaml").read_text())["questions"]


def figure(d: dict, path: str) -> float | None:
    for part in path.split("."):
        d = d[part]
    return None if d is None else float(d)     # type: ignore[arg-type]


def _param(row: dict):
    marks = [pytest.mark.xfail(reason=row["known_miss"], strict=True)] if row.get("known_miss") else []
    return pytest.param(row, id=f"{row['class']}: {row['query']} ({row['figure']})", marks=marks)


@pytest.mark.parametrize("row", [_param(r) for r in TABLE])
def test_fresh_home_question(row):
    assert row["source"] and 0 < row["tolerance"] <= 0.35
    got = figure(ask(row["query"]).to_dict(), row["figure"])
    assert got is not None and abs(got - row["expected"]) <= row["tolerance"] * row["expected"], \
        (got, row["expected"], row["source"])


def test_the_table_covers_the_classes_of_the_issue():
    classes = {r["class"] for r in TABLE}
    assert len(TABLE) >= 30
    assert {"layer_offload", "expert_offload", "kv_format", "speculative", "backend", "mac",
            "used_cards", "strix_halo", "dgx_spark"} <= classes
