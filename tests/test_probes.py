"""The capacity searches (kb.engine.search.solve, kb.engine.search.probes) give what a probe made from scratch
and a plain bisection give: computing the cards as columns and narrowing the bracket by the
margin change how fast the answer comes, not the answer."""

from __future__ import annotations

import pytest

from kb import get_knowledge
from kb.engine.search.probes import Probes
from kb.engine.search.solve import largest_fitting
from kb.query.parse import parse

QUESTIONS = ["max users for 70B int4 on h200 at 32k context", "max context for 8b on 4090",
             "max users for starcoder int4 on v100 16gb", "max batch for 7b on 4090",
             "max users for mixtral 8x7b awq on 2x l40s", "max context for qwen3-32b fp8 on h100",
             "max users for 8b int4 on h100 at 30 tok/s", "max context for 7b on 24GB", "max users for 13b int8 on a10"]


def _bisection(kn, w, vary, lower, upper, gpu, count, holds):
    """The plain bisection the search stands for: lower fits, upper does not."""
    def fits(v):
        return Probes(kn, w).probe(vary, v, gpu, count, holds).fits
    if not fits(lower):
        return None
    if fits(upper):
        return upper
    lo, hi = int(lower), int(upper)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return float(lo)


@pytest.mark.parametrize("query", QUESTIONS)
def test_the_search_finds_the_bisections_value(query: str) -> None:
    kn = get_knowledge()
    w = parse(query, kn)
    spec = kn.query["solve"][w.question]
    gpu = kn.gpus[w.gpus[0].gpu_id] if w.gpus and w.gpus[0].gpu_id else None
    if gpu is None:
        from kb.engine.resolving.scope import capacity_gpu
        gpu = capacity_gpu(w.gpus[0], kn)
    count = w.gpus[0].count
    holds = spec.get("holds", "fits")
    found, _ = largest_fitting(kn, w, spec["vary"], spec["lower"], spec["upper"], gpu, count, holds)
    assert found == _bisection(kn, w, spec["vary"], spec["lower"], spec["upper"], gpu, count, holds)
    assert found is not None and found > spec["lower"]     # a real search, not an end of the range


@pytest.mark.parametrize("query", ["how many gpus for deepseek-v3", "how many gpus for 70b fp16",
                                   "how many gpus to train 13b full fine-tune"])
def test_a_probe_over_the_catalogue_is_the_probe_on_its_card(query: str) -> None:
    """Every catalogue card at one count, evaluated at once as columns: each card's Probe is
    the one a probe on that card alone gives."""
    kn = get_knowledge()
    w = parse(query, kn)
    cards = list(kn.gpus.values())
    for count in (1, 2, 8, 24):
        over = Probes(kn, w, cards).probes_at({i: count for i in range(len(cards))})
        for i, gpu in enumerate(cards):
            assert over[i] == Probes(kn, w).probe("gpu_count", count, gpu, count), (gpu["id"], count)


@pytest.mark.parametrize("query", ["how many gpus for 70b fp16", "how many gpus to train 13b full fine-tune",
                                   "how many gpus for mistral-small-3.1-24b lora",
                                   "how many gpus for 8b at 20 tok/s"])
def test_a_search_step_over_the_cards_is_each_cards_own_probe(query: str) -> None:
    """A how-many search's step at one count (every card at it) and at several counts (the
    counts as a column too): the Probes (probes_at) and verdicts (fits_at) are those of each
    card's probe made alone."""
    kn = get_knowledge()
    w = parse(query, kn)
    cards = list(kn.gpus.values())
    for counts in ({i: 2 for i in range(len(cards))}, {i: 1 + i % 3 for i in range(len(cards))}):
        among = {i: Probes(kn, w).probe("gpu_count", n, cards[i], n) for i, n in counts.items()}
        alone = {i: Probes(kn, w).probe("gpu_count", n, cards[i], n).fits for i, n in counts.items()}
        assert Probes(kn, w, cards).probes_at(counts) == among
        assert Probes(kn, w, cards).fits_at(counts) == alone
        assert {p.fits for p in among.values()} == set(alone.values()) == {True, False}   # both kinds


@pytest.mark.parametrize("query", ["how many h100 for 70b fp16", "how many 4090 to train 13b full fine-tune",
                                   "how many v100 32gb for mistral-small-3.1-24b full fine-tune",
                                   "how many 24gb for 8b lora", "how many 3090 for kimi-k2-instruct iq2_s train"])
def test_an_option_reads_whether_a_count_is_found_from_one_probe(query: str) -> None:
    """The "more GPUs" option drops a how-many answer that found a count (its row holds the job):
    the one probe at the search's most GPUs says so as the whole answer does."""
    from kb.engine import answer
    from kb.engine.advising.options import _count_found

    kn = get_knowledge()
    w = parse(query, kn)
    whole = answer(parse(query, kn), kn, brief=True)
    found = bool(whole.question and whole.question["answer"]["found"])
    assert _count_found(kn, w) == found
    assert not found or whole.gpus[0].fits


def test_a_probe_dropped_from_the_bounded_store_is_made_again_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Probes keeps at most KEPT probes (and resolved workloads); past that the oldest go, and
    one asked again is made again, the same as before."""
    from kb.engine.search import probes

    monkeypatch.setattr(probes, "KEPT", 3)
    kn = get_knowledge()
    w = parse("max users for 70B int4 on h200 at 32k context", kn)
    gpu = kn.gpus[w.gpus[0].gpu_id]
    p = Probes(kn, w)
    first = [p.probe("users", v, gpu, 1) for v in (1, 2, 4, 8, 16)]
    assert len(p._made) == 3 and len(p._resolved) == 3
    assert [p.probe("users", v, gpu, 1) for v in (1, 2, 4, 8, 16)] == first
    assert first == [Probes(kn, w).probe("users", v, gpu, 1) for v in (1, 2, 4, 8, 16)]
