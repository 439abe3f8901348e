"""A how-many question over the catalogue for a training job no one card's copy of it holds.

Hugging Face Trainer runs several GPUs as plain DDP: each keeps the whole model state. A full
fine-tune of a 70B model in mixed precision with AdamW keeps 16 bytes a parameter (16-bit
weights and gradients, FP32 master weights and two FP32 moments: Rajbhandari et al. 2020, ZeRO,
section 3.1), 1,120 GB, more than any card holds. Named, a card is sized in the layout people
run at that scale (FSDP over the GPUs); over the catalogue the same must happen, card by card,
instead of "does not fit even at 1 GPU" on the first card of the list.
"""

from __future__ import annotations

import math

import pytest

from kb import ask, get_knowledge

FULL_70B = "codellama-70b full fine-tune"
LORA_180B = "falcon-180b lora"


@pytest.fixture(scope="module")
def full_70b():
    return ask(f"how many gpus for {FULL_70B}")


def _rows(a) -> dict[str, int | None]:
    return {r["gpu_id"]: r["value"] for r in a.question["per_gpu"]}


def test_the_catalogue_finds_a_count_for_a_job_no_card_holds_alone(full_70b):
    q = full_70b.question
    assert q["answer"]["found"] and q["value"] >= 2
    assert any("FSDP" in s for s in full_70b.assumptions)
    assert full_70b.gpus[0].fits


def test_each_count_is_at_least_the_model_state_over_the_card(full_70b):
    """16 bytes a parameter (ZeRO, section 3.1) over the card's memory, exact arithmetic: no
    count below it can hold the state, sharded or not."""
    kn = get_knowledge()
    params = float(kn.models["codellama-70b"]["params_total"])
    for gid, n in _rows(full_70b).items():
        if n is not None:
            assert n >= math.ceil(params * 16 / 1e9 / float(kn.gpus[gid]["memory_gb"])), gid


@pytest.mark.parametrize("job", [FULL_70B, LORA_180B, "llama 3.1 405b pretrain"])
def test_a_catalogue_row_is_the_count_the_card_named_gets(job):
    """The row of a card is what `how many <card> for …` answers on that card alone; a card left
    unsized is one that needs the model-parallel layouts (runtimes.yaml at_scale: Megatron from
    100 GPUs), where each card's split is its own."""
    kn = get_knowledge()
    split_at = min(r["min_gpus"] for r in kn.sharding["at_scale"]
                   if kn.sharding["strategies"][r["strategy"]].get("model_parallel"))
    rows = _rows(ask(f"how many gpus for {job}"))
    for gid in ("h100-sxm5", "mi355x", "a100-sxm4-80gb", "l40s"):
        named = ask(f"how many {gid} for {job}").question["value"]
        if rows[gid] is None:
            assert named >= split_at, (job, gid)
        else:
            assert rows[gid] == named, (job, gid)
    assert any(rows[gid] is not None for gid in ("h100-sxm5", "mi355x"))


def test_the_fewest_gpus_lead(full_70b):
    rows = {k: v for k, v in _rows(full_70b).items() if v is not None}
    assert full_70b.question["value"] == min(rows.values())


def test_a_lora_whose_base_no_card_holds_shards_it():
    """Falcon 180B's 16-bit base is 360 GB (180e9 x 2 B): more than the largest card's 288 GB."""
    a = ask(f"how many gpus for {LORA_180B}")
    assert a.question["answer"]["found"] and a.question["value"] >= 2


def test_cards_of_platforms_the_stack_does_not_support_well_are_not_sharded(full_70b):
    """FSDP at scale runs on the platforms runtimes.yaml marks well supported (NVIDIA and AMD
    for Hugging Face Trainer): Macs are not clustered for it."""
    kn = get_knowledge()
    for gid, n in _rows(full_70b).items():
        if kn.gpus[gid]["vendor"] == "apple":
            assert n is None, gid


def test_cards_past_the_model_parallel_layouts_are_said_not_sized(full_70b):
    said = [w for w in full_70b.warnings if "not sized here" in w]
    unsized = [gid for gid, n in _rows(full_70b).items() if n is None]
    assert said and unsized


def test_a_job_one_card_holds_is_answered_as_before():
    """Llama 3.1 8B: 8e9 x 16 B = 128 GB of state, which a 180 GB B200 holds alone."""
    a = ask("how many gpus for llama 3.1 8b full fine-tune")
    assert a.question["value"] == 1
    assert not any("not sized here" in w for w in a.warnings)


def test_a_plain_question_no_card_holds_is_answered_at_the_fewest_gpus():
    """`full fine-tune llama 3.1 70b` with no GPU: no card holds the 16-bytes-a-parameter state
    (about 1,130 GB) a DDP rank keeps, so a ranking of single cards has nothing to pick; the
    answer is the fewest GPUs that hold it, laid out as at scale, and says why."""
    kn = get_knowledge()
    a = ask("full fine-tune llama 3.1 70b")
    assert a.gpus[0].fits
    assert a.question and a.question["kind"] == "how_many_gpus"
    assert any("no single card holds this job" in s for s in a.assumptions)
    params = float(kn.models["llama-3.1-70b"]["params_total"])
    biggest = max(float(g["memory_gb"] or 0) for g in kn.gpus.values())
    assert a.gpus[0].count >= math.ceil(params * 16 / 1e9 / biggest)


def test_a_plain_question_a_card_holds_stays_a_ranking():
    a = ask("full fine-tune llama 3.1 8b")
    assert a.gpus[0].fits and a.gpus[0].count == 1
    assert not any("no single card holds this job" in s for s in a.assumptions)


def test_a_plain_question_whose_deadline_no_card_meets_is_answered_at_the_fewest_that_do():
    """Pretraining 7B on 1T tokens in 30 days: a single card would take years, so the ranking of
    single cards has nothing that meets the deadline; the answer is the fewest GPUs that finish
    in time. No fewer can: 6 N D training FLOPs (Kaplan et al. 2020, 4.2e22 here) over 30 days at
    the card's dense BF16 peak, as rules/gpus.yaml records it, is a floor at 100% utilisation."""
    kn = get_knowledge()
    a = ask("pretrain 7b on 1t tokens in 30 days")
    row = a.gpus[0]
    assert a.question and a.question["kind"] == "how_many_gpus"
    assert row.fits and row.meets_target is not False
    assert row.run_hours is not None and row.run_hours <= 30 * 24
    flops = kn.gpus[row.id]["tensor_tflops"]
    peak = float(flops["bf16"] or flops["fp16"]) * 1e12
    assert row.count >= math.ceil(6 * 7e9 * 1e12 / (peak * 30 * 86400))
    assert any("within the time asked" in s for s in a.assumptions)


def test_a_plain_question_whose_deadline_one_card_meets_stays_a_ranking():
    """Llama 3.1 8B on 10B tokens in 7 days: one MI355X trains about 18,000 tokens/s (rules'
    figures), 10e9 / 18e3 s = 6.4 days, so a single card meets it and the ranking stands."""
    a = ask("full fine-tune llama 3.1 8b on 10b tokens in 7 days")
    assert a.gpus[0].count == 1 and a.gpus[0].meets_target is not False
    assert not (a.question and a.question.get("kind") == "how_many_gpus")


def test_a_recipe_for_some_counts_only_is_applied_at_the_counts_it_is_for():
    """torchtune's single-device full fine-tune recipe (paged 8-bit AdamW, the optimizer step in
    the backward pass: runtimes.yaml recipes, max_gpus 1) is for one GPU. The catalogue's search
    applied it at every count, so it found a count where the answer on that many cards (AdamW)
    did not fit. Each count is now resolved with the recipes of its own count: the count found
    holds the job, and it is what the question naming the card finds."""
    job = "kimi-k2 full fine-tune batch 1 seq 1 with torchtune"
    a = ask(f"how many gpus for {job}")
    assert a.question["answer"]["found"] and a.gpus[0].fits
    assert a.workload.get("optimizer") == "adamw"
    gid, n = a.gpus[0].id, a.gpus[0].count
    assert ask(f"how many {gid} for {job}").question["value"] == n
