"""Questions that compare cards or ask which card to buy without naming a model (query.yaml unnamed_model),
and a budget build that a server module cannot be.

What people compare cards on when no model is named is the cards' published benchmark: llama.cpp's
tables run Llama 2 7B at Q4_0 on consumer, workstation and Apple cards (discussion #4167), MLPerf
Inference runs Llama 2 70B on datacenter cards. Decode at one user is memory-bound, so two cards that
both hold the model differ by about their bandwidth: RTX 4090 1008 GB/s against RTX 3090 936 GB/s,
1.08x (the fitted per-token cost moves it within 10%).
"""

import pytest
from practitioner_reading import KN

import kb
from kb.errors import QueryError
from kb.query.parse import parse


def test_two_consumer_cards_with_no_model_are_compared_on_llama_cpps_benchmark_model() -> None:
    a = kb.ask("which is better for inference 4090 or 3090")
    # Llama 3 8B Q4_K_M, the model of XiongjieDai's llama.cpp tables of these cards (grouped-query
    # attention, as the models people run now; Llama 2 7B's full multi-head attention is not)
    assert a.workload["model"] == "llama-3.1-8b" and a.workload["precision"] == "q4_k_m"
    rows = {g.id: g for g in a.gpus if g.requested}
    assert all(g.fits and g.count == 1 for g in rows.values())
    ratio = (rows["rtx-4090"].decode_tokens_per_s or 0) / (rows["rtx-3090"].decode_tokens_per_s or 1)
    assert ratio == pytest.approx(1008 / 936, rel=0.10)
    assert any("no model named" in x and "xiongjiedai-gpu-benchmarks" in x for x in a.assumptions), a.assumptions


def test_datacenter_cards_with_no_model_are_compared_on_mlperfs_model() -> None:
    a = kb.ask("h100 vs a100")
    assert a.workload["model"] == "llama-2-70b"
    # 69B at 16 bits is 138 GB: two 80 GB cards each
    assert {g.count for g in a.gpus if g.requested} == {2}


def test_a_which_gpu_question_with_no_model_ranks_on_the_benchmark_model_within_its_budget() -> None:
    a = kb.ask("whats the best gpu for local llms under 500")
    assert a.workload["model"] == "llama-3.1-8b" and a.workload["budget_usd"] == 500
    pick = a.gpus[0]
    assert pick.fits and (pick.config_price_usd or 0) <= 500
    assert KN.gpus[pick.id]["segment"] in ("consumer", "workstation")     # 'local': one's own machine


@pytest.mark.parametrize("q", ["serve 16 users on h100", "how fast on a 4090", "on 2x 3090"])
def test_a_question_about_one_configuration_still_asks_which_model(q: str) -> None:
    with pytest.raises(QueryError, match="which model"):
        parse(q, KN)


def test_a_budget_build_is_cards_one_can_plug_in_before_server_modules() -> None:
    # a $10k budget buys no 8-GPU baseboard: an MI250X OAM module ($8,000 alone) is not the pick
    a = kb.ask("best setup within $10k to serve 70b for 20 users")
    pick = a.gpus[0]
    assert pick.fits and (pick.config_price_usd or 0) <= 10_000
    assert KN.gpus["mi250x"]["form_factor"].upper().startswith("OAM")          # the module it picked before
    assert not str(KN.gpus[pick.id]["form_factor"]).upper().startswith(("SXM", "OAM")), pick.id
