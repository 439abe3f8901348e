"""The shortcuts of the capacity searches give the answers of the searches they stand for:
an option's how-many answer over the catalogue (kb.engine.search.fewest) leads with the row every
card's search leads with; a size search that brackets the boundary by the margin
(kb.engine.search.bracket) finds the plain bisection's size; Workload.copy is copy.deepcopy."""

from __future__ import annotations

import copy
import math

import pytest

from kb import get_knowledge
from kb.engine import answer
from kb.engine.search.probes import Probes
from kb.engine.resolving.scope import capacity_gpu
from kb.engine.search.solve import _arch_ranges, _floor_digits, largest_fitting
from kb.query.parse import parse

HOW_MANY = ["how many gpus for mistral-small-3.1-24b full fine-tune", "how many gpus for qwen3-235b lora",
            "how many gpus for deepseek-v3 int4", "how many gpus for 70b fp16", "how many gpus for 8b qlora",
            "how many gpus to train 13b full fine-tune", "how many gpus for llama-4-maverick 64 users",
            "how many gpus for kimi-k2 at 128k context", "how many gpus for qwen3-32b at 20 tok/s"]


@pytest.mark.parametrize("query", HOW_MANY)
def test_a_brief_how_many_answer_leads_with_the_full_answers_row(query: str) -> None:
    kn = get_knowledge()
    full = answer(parse(query, kn), kn, query)
    brief = answer(parse(query, kn), kn, query, brief=True)
    assert full.question is not None and brief.question is not None
    assert brief.question["answer"] == full.question["answer"]
    assert [(g.id, g.count, g.fits) for g in brief.gpus][:1] == [(g.id, g.count, g.fits) for g in full.gpus][:1]


def _bisection(kn, p, lower, upper, gpu, count, holds):
    """_largest_params as a plain bisection over the range that holds the answer: every size
    inside it probed (the search's sizes below the range fit, those above it do not)."""
    def fits(v):
        return p.probe("params", v, gpu, count, holds).fits

    ranges = _arch_ranges(kn, lower, upper)
    bottom, top = next(((b, t) for b, t in ranges if b == lower or fits(b)), ranges[-1])
    lo, hi = lower, upper
    while hi / lo > 1.001:
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if (mid < bottom or (mid <= top and fits(mid))) else (lo, mid)
    lo = max(lo, bottom)
    if hi > top and top > lo and top < upper and fits(top):
        lo = top
    value = _floor_digits(lo, 3)
    if value >= bottom or fits(value):
        return value
    return _floor_digits(lo, 4) if _floor_digits(lo, 4) >= bottom else lo


@pytest.mark.parametrize("query", ["largest model for 8GB 4bit full fine-tune", "largest model for 24GB lora",
                                   "largest model on 2x 4090 int4", "largest model for 80GB qlora",
                                   "largest model on h100 at 32k context", "largest model for 16GB 8 users"])
def test_the_size_search_finds_the_bisections_size(query: str) -> None:
    kn = get_knowledge()
    w = parse(query, kn)
    spec = kn.query["solve"]["largest_model"]
    g = w.gpus[0]
    gpu = capacity_gpu(g, kn) if g.gpu_id is None else kn.gpus[g.gpu_id]
    holds = spec.get("holds", "fits")
    lower, upper = spec["lower"], spec["upper"]
    found, capped = largest_fitting(kn, w, "params", lower, upper, gpu, g.count, holds)
    p = Probes(kn, w)
    if not p.probe("params", lower, gpu, g.count, holds).fits:
        assert found is None
    elif p.probe("params", upper, gpu, g.count, holds).fits:
        assert capped and found == upper
    else:
        assert found == _bisection(kn, p, lower, upper, gpu, g.count, holds)


@pytest.mark.parametrize("query", ["how many gpus for kimi-k2 full fine-tune", "fp8 vs int4 70b on 2 h100 at home",
                                   "train 13b qlora on 20GB", "serve 8b to 64 users on l40s or a100"])
def test_a_workload_copy_is_a_deep_copy(query: str) -> None:
    kn = get_knowledge()
    w = parse(query, kn)
    copied = w.copy()
    assert copied == copy.deepcopy(w) and copied.to_dict() == w.to_dict()
    for g in copied.gpus:
        g.count += 1
    copied.notes.append("changed")
    copied.segments.append("changed")
    assert w.to_dict() == parse(query, kn).to_dict()      # the original is untouched
