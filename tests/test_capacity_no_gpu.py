"""A capacity question that names no GPU is answered on the first configuration of the ranking,
at that configuration's count. A 70B at 16 bits is 141 GB of weights: more than any one card of
96 GB holds, so the answer is on two or more cards, never 'does not fit even at 1 user' on one."""

import kb


def test_max_users_with_no_gpu_is_answered_on_the_ranked_configuration() -> None:
    a = kb.ask("max users for 70B")
    row = next(g for g in a.gpus if g.requested)
    assert row.fits and row.count * (row.usable_vram_gb or 0) > 141
    assert a.question is not None and a.question["answer"]["found"] and a.question["value"] > 1
    assert "even at" not in a.verdict, a.verdict
