"""Capacity questions answered by their kind's strategy (kb.engine.search.capacity): every kind of
rules/query.yaml `solve` has one, and the stages a kind does differently show in its answer."""

from __future__ import annotations

from kb import ask, get_knowledge
from kb.engine.search.capacity import STRATEGIES, Capacity, HowManyGpus, LargestModel, MaxContext


def test_every_solve_kind_has_its_strategy() -> None:
    """A kind added to (or renamed in) query.yaml without a strategy fails here, not in an answer."""
    assert set(get_knowledge().query["solve"]) == set(STRATEGIES)
    assert all(isinstance(s, Capacity) for s in STRATEGIES.values())
    assert isinstance(STRATEGIES["max_context"], MaxContext)
    assert isinstance(STRATEGIES["largest_model"], LargestModel)
    assert isinstance(STRATEGIES["how_many_gpus"], HowManyGpus)


def test_max_context_stops_at_the_models_own_maximum() -> None:
    """Llama 2 7B's context is 4,096 tokens (Touvron et al. 2023, 'Llama 2', Table 1: 4k, against
    Llama 1's 2k); an 80 GB card holds far more of its KV cache
    (about 0.5 MB a token at FP16: 2 × 32 layers × 4,096 × 2 bytes), so the answer is the model's
    limit, with what memory would allow said."""
    a = ask("max context for llama-2-7b on h100")
    q = a.question
    assert q["value"] == 4096 and q["model_max_context"] == 4096
    assert q["memory_allows"] > 4 * 4096
    assert q["answer"]["binds"] == "the model's maximum context"
    assert any("but the model's maximum context is 4,096" in w for w in a.warnings)


def test_how_many_over_the_catalogue_leads_with_the_fewest() -> None:
    """With no card named, every catalogue card is searched and the answer is the fewest count
    any card needs, on the card of most bandwidth among those that need that few."""
    kn = get_knowledge()
    q = ask("how many gpus for 70b fp16").question
    found = [r for r in q["per_gpu"] if r["value"] is not None]
    assert len(q["per_gpu"]) > 20                   # the catalogue, not one card
    fewest = min(r["value"] for r in found)
    assert q["value"] == fewest
    best = max((r for r in found if r["value"] == fewest), key=lambda r: kn.gpus[r["gpu_id"]]["bandwidth_gb_s"] or 0)
    assert q["answer"]["gpu_id"] == best["gpu_id"]


def test_largest_model_says_its_size_in_billions() -> None:
    """4-bit weights take at least half a byte a parameter, so 24 GiB (25.8 GB) holds under 52B of
    them, and a 10B model's 5 GB of weights fit with room for the rest; the size is said in
    billions too."""
    q = ask("largest model for 24GB int4").question
    assert q["answer"]["found"] and 10 < q["value_b"] < 52
    assert q["value_b"] * get_knowledge().billion == q["value"]
