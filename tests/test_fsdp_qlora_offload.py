"""QLoRA of a 70B on two 24 GB cards: Answer.AI's FSDP + QLoRA (rules/sources.yaml answerai-fsdp-qlora,
2024-03-06) trains Llama 2 70B on two 24 GB gaming cards with FSDP sharding the 4-bit base, activation
checkpointing and CPU offload of the sharded weights. Without the offload each card keeps half the
NF4 base (70.6e9 x ~0.56 B / 2 = about 20 GB) plus its activations and runtime: more than 24 GB.
"""

import kb


def test_fsdp_alone_does_not_hold_it_and_cpu_offload_is_the_fix() -> None:
    a = kb.ask("qlora 70b on 2x 3090 with fsdp")
    assert not next(g for g in a.gpus if g.requested).fits
    fix = next(o for o in a.options or [] if o["fits"])
    assert fix["change"] == "CPU offload" and fix["count"] == 2 and fix["per_gpu_gb"] < 24
    assert "With CPU offload on 2×, it fits" in a.verdict, a.verdict


def test_offload_named_on_two_cards_keeps_fsdp_as_answer_ai_runs_it() -> None:
    a = kb.ask("qlora llama-3-70b on 2x rtx-4090 with offload")
    row = next(g for g in a.gpus if g.requested)
    assert row.fits and a.memory["sharding"] == "fsdp"


def test_a_full_fine_tune_offloaded_with_no_sharding_is_still_zero_offload() -> None:
    a = kb.ask("full fine tune llama 3.1 8b on 2x 4090 with offload")
    assert a.memory["sharding"] == "deepspeed"
