"""A module is bought in a server (issue 37, 'what a cluster costs'): SXM and OAM modules are
priced with the servers they need, never offered as cheaper than a card by leaving the server
out, and an old one proposed says what it lacks.

Reference prices: a used V100 SXM2 32GB at $600 (rules/prices.yaml) in a used Dell C4130
barebone with its 4-module SXM2 board, a little under $2,000 (l4rz, 2020, rules/sources.yaml
l4rz-v100-sxm2-box); an HGX H100 8-GPU server at $317,000 (Thinkmate, 2024), $77,000 beyond eight
H100 SXM at $30,000."""

from __future__ import annotations

import pytest

from kb import ask
from kb.engine.verdicts.verdict_lead import module_lacks
from kb import get_knowledge

KN = get_knowledge()


def _row(query: str):  # noqa: ANN202 - a GpuRow
    a = ask(query)
    return a, a.gpus[0]


@pytest.mark.parametrize(("count", "servers"), [(1, 1), (4, 1), (5, 2)])
def test_v100_sxm2_is_priced_in_its_four_module_server(count: int, servers: int) -> None:
    _, g = _row(f"serve llama-3.1-8b int4 on {count}x v100 sxm2")
    assert g.servers_bought == servers
    assert g.config_price_usd == pytest.approx(count * 600 + servers * 2000)


def test_h100_sxm_is_priced_in_an_8_gpu_hgx_server() -> None:
    a, g = _row("how much does it cost to serve llama-3.1-70b fp8 on 8x h100 sxm")
    assert g.servers_bought == 1 and g.config_price_usd == pytest.approx(8 * 30000 + 317000 - 8 * 30000)
    assert "To buy: $317,000 with the server it needs" in a.verdict


def test_a_card_is_priced_alone() -> None:
    _, g = _row("serve llama-3.1-8b int4 on 2x rtx 4090")
    assert g.servers_bought == 0
    assert g.config_price_usd == pytest.approx(2 * KN.gpus["rtx-4090"]["price_usd"])


def test_no_module_is_offered_cheaper_than_it_is_bought() -> None:
    # every module row of a ranking costs at least its modules and one server's price beyond them
    a = ask("cheapest gpu for llama 3.1 70b int4 16 users")
    modules = [g for g in a.gpus if g.config_price_usd and KN.gpus[g.id].get("form_factor", "").upper().startswith(("SXM", "OAM"))]
    assert modules
    for g in modules:
        assert g.servers_bought >= 1
        assert g.config_price_usd >= g.price_usd * g.count + (KN.gpus[g.id].get("server_usd") or 0) - 1e-6


def test_an_old_module_says_what_it_lacks() -> None:
    # the V100 SXM2 32GB (Volta) has FP16 tensor cores only: no BF16, no FP8 (NVIDIA's V100 datasheet)
    _, v100 = _row("serve llama-3.1-8b int4 on 2x v100 sxm2")
    assert module_lacks(KN, v100) == ", an SXM2 module without BF16 or FP8 tensor cores"
    _, h100 = _row("serve llama-3.1-70b fp8 on 8x h100 sxm")
    assert module_lacks(KN, h100) == ""          # BF16 and FP8 tensor cores: nothing to say
    _, card = _row("serve llama-3.1-8b int4 on rtx 2080 ti")
    assert module_lacks(KN, card) == ""          # a card is not a module
