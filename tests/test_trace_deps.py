"""The page's trace keeps the steps the answer's figures depend on, and only those."""

from __future__ import annotations

import pytest

from kb import ask, get_knowledge
from kb.engine.assembly.answer import Step
from server.trace_deps import figure_roots, needed, relevant

SERVE = "serve llama-3.1-70b fp16 16 users"
QLORA = "train 13B qlora on 20GB?"


def _names(steps: list[Step]) -> list[str]:
    return [s.rule_id for s in steps]


def test_serving_trace_has_no_training_steps():
    kn = get_knowledge()
    shown = _names(relevant(ask(SERVE), kn))
    assert "lora_params" not in shown and "optimizer_bytes_per_param" not in shown
    assert {"weights_gb", "kv_cache_gb", "total_gb", "decode_tokens_per_s", "fits"} <= set(shown)


def test_training_trace_keeps_its_adapter_steps():
    kn = get_knowledge()
    shown = _names(relevant(ask(QLORA), kn))
    assert {"lora_params", "adapters_gb", "optimizer_gb", "total_gb", "fits"} <= set(shown)
    assert "decode_step_s" not in shown


@pytest.mark.parametrize("query", [SERVE, QLORA, "serve 7B on 20GB", "full fine-tune 7B on 8x H100"])
def test_kept_steps_are_closed_under_what_they_read(query):
    """Every formula a kept step read (and that did something) is kept too, and every kept
    formula lies in the declared closure of some figure the answer shows."""
    kn = get_knowledge()
    a = ask(query)
    keep = needed(a, kn)
    steps = {s.rule_id: s for s in a.trace}
    for name in keep:
        for dep in steps[name].values:
            idle = dep in steps and not steps[dep].values and not steps[dep].result
            if dep in kn.formulas and not idle:
                assert dep in keep, (name, dep)
    roots = figure_roots(a, kn)
    declared = {d for r in roots for d in kn.closure.get(r, ())} | roots
    assert keep <= declared
    assert len(keep) < len([n for n in steps if n in kn.formulas])
