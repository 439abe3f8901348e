"""Cards compared with no count are compared at what each takes to run the job (kb.engine.advising.compare_counts).

Hand derivations, from rules/gpus.yaml and rules/models.yaml:
- DeepSeek-R1 at fp8 is about 673 GB of weights (671B parameters at one byte, plus the 16-bit
  embeddings). An H200's usable 136 GB needs 5 cards by memory, and tensor parallel must divide R1's
  128 heads, so 8; a B200's usable 173 GB needs 4 (4 x 173 = 692 GB).
- Llama 3.1 70B at fp16 is 141 GB of weights: two 80 GB cards (77 GB usable each) hold it, one does not.
- Llama 3 8B at fp16 is 16.1 GB: an RTX 4070's 12 GB cannot hold it. At Q4_K_M (4.9 GB) both an RTX
  4070 and an M4 Pro do; decode is memory-bound, so the 4070 (504 GB/s) is faster than the M4 Pro
  (273 GB/s) by about their bandwidth ratio, 1.85x (the fitted per-token costs move it within 15%).
"""

import pytest
from practitioner_reading import KN

import kb
from kb.engine.assembly.answer import Answer, GpuRow


def requested(a: Answer) -> dict[str, GpuRow]:
    return {g.id: g for g in a.gpus if g.requested}


def alone(query: str) -> int:
    """The count the how-many question of one card gives."""
    a = kb.ask(query)
    return next(g.count for g in a.gpus if g.requested)


def test_each_card_is_sized_at_the_fewest_that_hold_it() -> None:
    a = kb.ask("b200 vs h200 for deepseek r1")
    rows = requested(a)
    assert rows["b200-sxm"].count == 4 and rows["h200-sxm"].count == 8, rows
    assert all(g.fits for g in rows.values())
    # the same counts as asking how many of each card alone
    assert rows["b200-sxm"].count == alone("how many b200 for deepseek r1")
    assert rows["h200-sxm"].count == alone("how many h200 for deepseek r1")
    assert a.verdict.startswith("Each card sized at the fewest that hold it (no count given)."), a.verdict
    assert any("4× NVIDIA B200" in x and "8× NVIDIA H200" in x for x in a.assumptions), a.assumptions


def test_two_datacenter_cards_for_a_70b_at_16_bits_are_two_each() -> None:
    rows = requested(kb.ask("h100 vs a100 for llama 3.1 70b"))
    assert {g.count for g in rows.values()} == {2}, rows
    assert all(g.fits for g in rows.values())


def test_cards_that_each_hold_it_stay_one_each_and_say_nothing_more() -> None:
    a = kb.ask("rtx 4090 vs rtx 3090 for llama 3 8b")
    assert {g.count for g in requested(a).values()} == {1}
    assert not a.verdict.startswith("No count"), a.verdict


def test_own_cards_are_compared_at_the_format_people_run_before_a_second_card() -> None:
    a = kb.ask("whats faster for llama 3 8b, m4 pro or rtx 4070")
    rows = requested(a)
    assert {g.count for g in rows.values()} == {1} and all(g.fits for g in rows.values()), rows
    assert a.workload["precision"] == KN.query["local_fallback"]["precision"] == "q4_k_m"
    assert a.verdict.startswith("At fp16 NVIDIA GeForce RTX 4070 12GB does not hold it: compared at q4_k_m."), a.verdict
    assert "1× NVIDIA GeForce RTX 4070 12GB: 6.4" in a.verdict, a.verdict      # each card's figures follow
    ratio = (rows["rtx-4070"].decode_tokens_per_s or 0) / (rows["apple-m4-pro"].decode_tokens_per_s or 1)
    assert ratio == pytest.approx(504 / 273, rel=0.15)


def test_a_typed_count_is_kept() -> None:
    rows = requested(kb.ask("1x b200 vs 1x h200 for deepseek r1"))
    assert {g.count for g in rows.values()} == {1} and not any(g.fits for g in rows.values())


def test_how_many_of_two_cards_gives_each_its_own_count() -> None:
    a = kb.ask("how many b200 vs h200 for deepseek r1")
    rows = requested(a)
    assert rows["b200-sxm"].count == 4 and rows["h200-sxm"].count == 8, rows
    assert "4× NVIDIA B200" in a.verdict and "8× NVIDIA H200" in a.verdict, a.verdict


def test_counted_cards_compared_on_ones_own_desk_share_the_format_people_run() -> None:
    # 32B at fp16 is 65 GB: neither 2x 24 GB nor one 32 GB card holds it; at Q4_K_M (~20 GB) both do
    a = kb.ask("what's faster for qwen 2.5 32b: 2x 3090 or 1x 5090")
    rows = requested(a)
    assert a.workload["precision"] == "q4_k_m" and rows["rtx-3090"].count == 2 and rows["rtx-5090"].count == 1
    assert all(g.fits for g in rows.values()) and "2× NVIDIA GeForce RTX 3090" in a.verdict and "1× NVIDIA GeForce RTX 5090" in a.verdict
