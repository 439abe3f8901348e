"""A which-GPU or cheapest training question that names no method is ranked at the way people run
the job on that money (kb.engine.advising.train_choice), said in the assumptions.

Hand derivations (rules/models.yaml, rules/precisions.yaml, prices.yaml):
- Llama 3.1 70B's 70.6e9 weights are 141 GB at 16 bits: a 16-bit LoRA needs a card of more than
  141 GB (the cheapest that holds it is an MI300X at $15,000). QLoRA keeps the base in NF4, about
  0.56 bytes a weight (4 bits plus the block scales): about 40 GB, which a 96 GB card at $8,565 holds.
- Mistral 7B's 16-bit LoRA without activation checkpointing keeps every layer's activations at
  2048 tokens beside its 14.5 GB of weights, more than a 24 GB card holds; with checkpointing a
  24 GB RTX 3090 ($700) holds it, under a $1,200 budget.
"""

import pytest

import kb
from kb.engine.assembly.answer import Answer


def method(a: Answer) -> str:
    return next((x for x in a.assumptions if x.startswith("method:")), "")


def test_the_cheapest_way_to_fine_tune_a_70b_is_a_4_bit_base() -> None:
    a = kb.ask("what's the cheapest way to fine-tune llama 3.1 70b")
    plain = kb.ask("what's the cheapest way to fine-tune llama 3.1 70b with checkpointing adamw bf16")
    assert a.workload["task"] == "qlora" and "QLoRA" in method(a) and "dettmers-2023-qlora" in method(a)
    assert a.memory["breakdown"]["weights_gb"] == pytest.approx(70.6e9 * 0.56 / 1e9, rel=0.10)
    assert (a.gpus[0].config_price_usd or 0) < (plain.gpus[0].config_price_usd or 0)


def test_a_budget_fine_tune_is_ranked_with_checkpointing_when_that_fits_the_money() -> None:
    a = kb.ask("best gpu to fine-tune mistral 7b under $1200")
    pick = a.gpus[0]
    assert pick.fits and (pick.config_price_usd or 0) <= 1200
    assert a.workload["checkpointing"] is True and "activation checkpointing" in method(a)


def test_a_full_fine_tune_named_stays_a_full_fine_tune() -> None:
    a = kb.ask("full fine tune llama 3.1 8b cheapest")
    assert a.workload["task"] == "full_ft"


@pytest.mark.parametrize("q", ["cheapest gpu for qlora llama 3.1 8b with checkpointing",
                               "best gpu to fine-tune mistral 7b with 8-bit adam under $1200"])
def test_a_method_named_is_kept(q: str) -> None:
    assert method(kb.ask(q)) == ""


def test_a_pretraining_run_no_single_card_finishes_is_sized_at_the_fewest_gpus_that_do() -> None:
    # 6 x 7e9 x 2e12 = 8.4e22 FLOPs: no card does that in 30 days (formulas.yaml
    # usable_train_horizon_h = 720 h); the fewest GPUs that finish within it are searched
    a = kb.ask("pretrain a 7b model on 2 trillion tokens")
    assert a.question is not None and a.question["kind"] == "how_many_gpus"
    row = next(g for g in a.gpus if g.requested)
    assert row.count > 1 and (row.run_hours or 0) <= 720
    assert a.assumptions[0].startswith("no single card trains 2,000,000,000,000 tokens within 30 days"), a.assumptions[0]


def test_a_small_pretraining_run_stays_a_ranking_of_single_cards() -> None:
    # 6 x 125e6 x 10e9 = 7.5e18 FLOPs: hours on one consumer card
    a = kb.ask("pretrain 125m model on 10b tokens")
    assert a.question is not None and a.question["kind"] == "which_gpu" and a.gpus[0].count == 1
