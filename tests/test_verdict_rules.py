"""The verdict's policy lives in rules/query.yaml `verdict`: its limits (each with a reason)
and the wording of its sentences. Changing them in the rules changes the verdict, with no
Python edited; every template names only the fields the code fills."""

from __future__ import annotations

import shutil
import string
from pathlib import Path

import yaml

from kb import ask, get_knowledge

RULES = Path(__file__).resolve().parent.parent / "rules"
QUERY = "serve 8b fp16 vs int4 on h100"

# The fields each template's code fills (kb/engine/verdict*.py, unknown.py): a template that
# names another field would fail when the verdict is written.
FIELDS = {
    "sides_on": {"count", "gpu"}, "sides_head": {"on"}, "sides_where": {"on"}, "sides_held": {"more"},
    "sides_no_fit": {"label", "where", "per_gpu", "usable", "held"}, "sides_memory": {"per_gpu", "usable"},
    "sides_figure": {"value", "unit"}, "sides_fits": {"label", "where", "memory", "figure"},
    "sides_held_each": {"more"}, "sides_none_fit": {"none", "held"}, "sides_only": {"label"},
    "sides_cheaper": {"ratio", "unit"}, "sides_faster": {"verb", "ratio"}, "sides_less_memory": {"gap"},
    "sides_quality": set(), "sides_even": set(), "sides_both": {"first", "then"},
    "count_holds": {"n", "gpu", "verb", "per_gpu", "usable"}, "count_memory_alone": {"fewest"},
    "count_layout": {"memory", "n", "heads", "node"}, "count_target": {"memory", "previous", "target"},
    "count_memory_binds": {"previous", "per_gpu"}, "count_speed": {"speed"},
    "unknown": {"figures", "failed", "error"}, "borderline": {"spare", "pct"},
    "tight": {"per_gpu", "usable", "pct", "gives"}, "tight_more_context": {"tokens"},
    "tight_training": set(), "tight_inference": set(), "roomier": {"config", "cost"},
    "fix_first": {"change", "what", "per_gpu"}, "fix_more": {"change"}, "misses_target": set(),
    "compare_none": set(), "compare_only": {"config"}, "compare_faster": {"config", "ratio"},
    "compare_faster_cheaper": {"config", "ratio"}, "compare_same_speed": {"pct"},
    "compare_cheaper": {"config"}, "compare_tie": set(), "none_fit": {"total"},
    "none_fit_fewest": {"count", "gpu"},
    "solved_floor_at_lower": {"on", "lower", "unit", "speed", "floor"}, "solved_memory_alone": {"fewest"},
    "solved_no_count": {"gpu", "upper", "target", "memory"}, "solved_no_fit": {"on", "lower", "unit"},
    "solved_largest_model": {"size", "precision", "on"},
    "solved_best_model": {"model", "precision", "on", "gb", "speed", "size"}, "solved_model_max_context": {"value", "on"},
    "solved_memory_allows": {"value"}, "solved_max_context": {"value", "on"}, "solved_each_at": {"speed"},
    "solved_max_users": {"value", "on", "each"}, "solved_value": {"value", "unit", "on"},
    "solved_floor_binds": {"next", "speed", "floor"}, "solved_binds": {"what", "next", "per_gpu", "usable"},
    "solved_stops": {"upper", "unit"},
}


def test_every_template_names_only_the_fields_the_code_fills() -> None:
    templates = get_knowledge().query["verdict"]["templates"]
    assert set(templates) == set(FIELDS)
    for name, text in templates.items():
        named = {field for _, field, _, _ in string.Formatter().parse(text) if field}
        assert named <= FIELDS[name], (name, named - FIELDS[name])


def test_every_limit_says_why() -> None:
    verdict = get_knowledge().query["verdict"]
    for key in ("max_words", "faster_ratio", "less_memory_fraction"):
        assert len(verdict[key]["reason"].split()) >= 10, key


def _rules(tmp_path: Path, **changes: object) -> Path:
    root = tmp_path / "rules"
    shutil.copytree(RULES, root)
    doc = yaml.safe_load((root / "query.yaml").read_text(encoding="utf-8"))
    for key, value in changes.items():
        if key in doc["verdict"]["templates"]:
            doc["verdict"]["templates"][key] = value
        else:
            doc["verdict"][key]["value"] = value
    (root / "query.yaml").write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
    return root


def test_the_rules_word_and_weigh_an_a_vs_b_verdict(tmp_path: Path) -> None:
    """fp16 against int4 of an 8B model on one H100: int4 decodes about twice as fast and needs
    about a third of the memory (weights 16 against ~4.5 bits). A 3× lead is asked for speed and
    a 90% gap for memory: neither is named; the even sentence is the rules' own."""
    shipped = ask(QUERY).verdict
    assert "faster" in shipped and "GB less" in shipped
    root = _rules(tmp_path, faster_ratio=3.0, less_memory_fraction=0.9, sides_even="Even, by the rules.")
    changed = ask(QUERY, rules_dir=root).verdict
    assert changed.endswith("Even, by the rules."), changed
    assert "faster" not in changed and "GB less" not in changed


def test_the_rules_set_how_finely_the_largest_model_is_named(tmp_path: Path) -> None:
    """Two significant digits asked instead of three: the size named is the three-digit one
    rounded down to two (rounding down keeps a size that fits)."""
    query = "largest model for rtx 4090"
    three = ask(query).question
    root = tmp_path / "rules"
    shutil.copytree(RULES, root)
    doc = yaml.safe_load((root / "query.yaml").read_text(encoding="utf-8"))
    doc["solve"]["largest_model"]["precision"]["digits"] = 2
    (root / "query.yaml").write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
    two = ask(query, rules_dir=root).question
    assert three is not None and two is not None
    b3, b2 = float(str(three["value_b"])), float(str(two["value_b"]))
    assert b2 == float(f"{b3:.2g}") or b2 == int(b3), (b3, b2)
    assert b2 <= b3
