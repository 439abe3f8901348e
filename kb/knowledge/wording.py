"""The verdict's sentences as the code fills them: each template of rules/query.yaml
`verdict.templates` and the names the code passes it (`FIELDS`), checked at build.

In: the query.yaml document (kb.knowledge.loader.Doc, for file:line:col) and its templates. Out:
a RuleError for each template that names a field the code does not fill (at the field's column,
with the nearest name it could use), leaves out one the code fills (at the template), has a
format spec (the fields are text already written out), or that the code does not know. The wording is the rules';
which template is said and the values filled in are the code's (kb.engine.verdicts.wording.say).
"""

from __future__ import annotations

import string
from collections.abc import Mapping

from kb.errors import RuleError, nearest
from kb.knowledge.checks import col_offset
from kb.knowledge.loader import Doc

# template → the names the code fills it with (each must appear in the template, no other may)
FIELDS: dict[str, tuple[str, ...]] = {
    "sides_on": ("count", "gpu"),
    "sides_head": ("on",),
    "sides_where": ("on",),
    "sides_held": ("more",),
    "sides_no_fit": ("label", "where", "per_gpu", "usable", "held"),
    "sides_memory": ("per_gpu", "usable"),
    "sides_figure": ("value", "unit"),
    "sides_fits": ("label", "where", "memory", "figure"),
    "sides_held_each": ("more",),
    "sides_none_fit": ("none", "held"),
    "sides_only": ("label",),
    "sides_cheaper": ("ratio", "unit"),
    "sides_faster": ("verb", "ratio"),
    "sides_less_memory": ("gap",),
    "sides_quality": (),
    "sides_even": (),
    "sides_both": ("first", "then"),
    "fix_first": ("change", "what", "per_gpu"),
    "fix_more": ("change",),
    "misses_target": (),
    "compare_none": (),
    "compare_only": ("config",),
    "compare_faster": ("config", "ratio"),
    "compare_faster_cheaper": ("config", "ratio"),
    "compare_same_speed": ("pct",),
    "compare_cheaper": ("config",),
    "compare_tie": (),
    "none_fit": ("total",),
    "none_fit_fewest": ("count", "gpu"),
    "solved_floor_at_lower": ("on", "lower", "unit", "speed", "floor"),
    "solved_memory_alone": ("fewest",),
    "solved_no_count": ("gpu", "upper", "target", "memory"),
    "solved_no_count_fastest": ("speed", "ttft", "layout"),
    "solved_no_fit": ("on", "lower", "unit"),
    "solved_largest_model": ("size", "precision", "on"),
    "solved_best_model": ("model", "precision", "on", "gb", "speed", "size"),
    "solved_model_max_context": ("value", "on"),
    "solved_memory_allows": ("value",),
    "solved_max_context": ("value", "on"),
    "solved_each_at": ("speed",),
    "solved_max_users": ("value", "on", "each"),
    "solved_value": ("value", "unit", "on"),
    "solved_floor_binds": ("next", "speed", "floor"),
    "solved_binds": ("what", "next", "per_gpu", "usable"),
    "solved_stops": ("upper", "unit"),
    "count_holds": ("n", "gpu", "verb", "per_gpu", "usable"),
    "count_memory_alone": ("fewest",),
    "count_layout": ("memory", "n", "heads", "node"),
    "count_target": ("memory", "previous", "target"),
    "count_memory_binds": ("previous", "per_gpu"),
    "count_speed": ("speed",),
    "unknown": ("figures", "failed", "error"),
    "borderline": ("spare", "pct"),
    "tight": ("per_gpu", "usable", "pct", "gives"),
    "tight_more_context": ("tokens",),
    "tight_training": (),
    "tight_inference": (),
    "roomier": ("config", "cost"),
    "config": ("count", "gpu"),
    "speed_training": ("value",),
    "speed_decode": ("value",),
    "speed_line": ("speed",),
    "rate_training": ("value",),
    "rate_decode": ("value",),
    "lead_memory": ("total", "each", "parts"),
    "lead_memory_each": ("per_gpu",),
    "lead_memory_parts": ("parts",),
    "lead_memory_part": ("label", "value"),
    "lead_speed_prefill": ("prefill", "ttft", "config"),
    "lead_speed_training": ("tokens", "config"),
    "lead_speed_decode": ("per_user", "aggregate", "config"),
    "lead_time_training": ("tokens", "duration", "config", "paid"),
    "lead_time_paid": ("items",),
    "lead_time_gpu_hours": ("hours",),
    "lead_time_rented": ("cost",),
    "lead_time_fits": ("lead", "per_gpu", "usable"),
    "lead_ttft": ("ttft", "config"),
    "offloaded": ("gb",),
    "withheld": ("speeds",),
    "withheld_decode": ("value",),
    "withheld_training": ("value",),
    "withheld_prefill": ("value",),
    "cost_run": ("cost", "config", "hours", "per_hour"),
    "cost_tokens": ("cost", "config", "users", "users_word", "per_hour"),
    "cost_tokens_most": ("cost", "config", "users", "users_word", "per_hour", "one_user"),
    "word_user": (),
    "word_users": (),
    "cost_month": ("hours", "cost"),
    "cost_buy": ("price",),
    "cost_buy_payback": ("price", "months"),
    "price_run": ("cost", "per_hour"),
    "price_hour": ("per_hour",),
    "price_server": ("price",),
    "price_servers": ("price", "count"),
    "module_lacks": ("form", "formats"),
    "compare_memory": ("per_gpu", "usable"),
    "compare_memory_tight": ("per_gpu", "usable"),
    "compare_line": ("config", "figures"),
    "compare_no_fit": ("config", "per_gpu", "usable"),
    "which_pick": ("config", "said", "figures"),
    "which_cheapest": ("config", "said", "figures"),
    "which_fastest": ("config", "said", "figures"),
    "which_figures": ("figures",),
    "which_cost": ("cost",),
    "said_format": ("precision", "runtime"),
    "said_runtime": ("runtime",),
    "alt_faster": ("config", "said", "price", "speed"),
    "alt_cheaper": ("config", "said", "price", "speed"),
    "alt_cheaper_tight": ("config", "said", "price", "speed"),
    "alt_rent": ("config", "per_hour"),
    "target_deadline": ("duration",),
    "target_speed": ("speed",),
    "target_ttft": (),
    "target_first_token": ("seconds", "percentile"),
    "target_percentile": ("p",),
    "target_volume": (),
    "target_e2e": ("seconds",),
    "no_count": ("gpu", "upper", "memory"),
    "no_count_memory": ("fewest",),
    "layout_tp": ("tp",),
    "layout_pp": ("pp",),
    "layout_dp_attention": (),
    "fleet_one_replica": (),
    "fleet_binds": ("binds",),
    "fleet_per_hour": ("usd_per_hour",),
    "fleet_side": ("gpus", "gpu", "replicas", "layout", "per_hour"),
    "fleet_side_unserved": ("gpu",),
    "fleet_side_unserved_too": ("gpu",),
    "fleet_fewer": ("gpu", "ratio"),
    "fleet_cheaper": ("gpu", "ratio"),
    "fleet_even": (),
    "assumption_layout": ("note",),
    "layout_past_node": ("count", "tp", "pp"),
    "layout_heads": ("count", "heads", "tp", "pp"),
    "layout_tp_heads": ("tp", "heads"),
    "layout_tp_node": ("tp", "node"),
    "layout_tp_count": ("tp", "pp", "gpus", "count"),
    "layout_fallback": ("problems", "tp", "pp"),
    "layout_model_parallel": ("count", "tp", "pp", "dp"),
    "counts_one_short": ("gpu",),
    "counts_neither": (),
    "counts_none": (),
    "counts_fallback": ("asked", "which", "precision"),
    "counts_short": ("gpu", "per_gpu", "usable"),
    "counts_fallback_note": ("asked", "short", "precision", "text", "source"),
    "counts_fewest": (),
    "counts_fewest_also": (),
    "counts_fewest_note": ("counted",),
}


def _fields(text: str) -> list[tuple[str, str, int]]:
    """Each replacement field of a str.format template: (name, format spec, column of the name)."""
    out, col = [], 0
    for literal, name, spec, _ in string.Formatter().parse(text):
        col += len(literal.replace("{", "{{").replace("}", "}}"))
        if name is None:
            continue
        out.append((name, spec or "", col + 1))
        col += 2 + len(name) + (len(spec) + 1 if spec else 0)
    return out


def check(doc: Doc, templates: Mapping[str, str]) -> list[RuleError]:
    """Every problem of query.yaml `verdict.templates` against what the code fills (FIELDS)."""
    errs = []
    for key, text in templates.items():
        loc = ("verdict", "templates", key)
        want = FIELDS.get(key)
        if want is None:
            errs.append(doc.error(loc, f"template '{key}' is not one the verdict says", nearest(key, FIELDS)))
            continue
        quote = col_offset(doc, loc) - (doc.pos(loc)[1] - 1)
        try:
            found = _fields(text)
        except ValueError as exc:
            errs.append(doc.error(loc, f"template '{key}' is not a str.format template: {exc}"))
            continue
        for name, spec, col in found:
            where = quote + col if "\n" not in text else 0
            if name not in want:
                errs.append(doc.error(loc, f"unknown field '{{{name}}}' in template '{key}'; it is filled with "
                                      + (", ".join(f"{{{w}}}" for w in want) or "nothing"),
                                      nearest(name, want), column_offset=where))
            elif spec:
                errs.append(doc.error(loc, f"format ':{spec}' of {{{name}}} in template '{key}': the code fills "
                                      "each field with text already written out (kb.figures), which a format "
                                      "spec does not apply to", column_offset=where))
        missing = [w for w in want if w not in {n for n, _, _ in found}]
        if missing:
            errs.append(doc.error(loc, f"template '{key}' leaves out "
                                  + ", ".join(f"{{{m}}}" for m in missing) + ", which the code fills"))
    return errs
