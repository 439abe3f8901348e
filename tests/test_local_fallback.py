"""A plain question about one person's own card that names no format (issue 26 §1, a word read in
its situation): when the 16-bit default does not fit the card, the answer is at the format people
run there, GGUF Q4_K_M (Ollama's default download, source ollama-docs), with the 16-bit figure
said first. A 16-bit default that fits, a format or runtime named, several users and datacenter
cards keep the 16-bit default."""

from __future__ import annotations

import pytest

from kb import ask, get_knowledge

KN = get_knowledge()


@pytest.mark.parametrize("q, card", [("phi 4 on a 4070 super", "rtx-4070-super"),
                                     ("qwen3 8b on a 5060 ti 16gb", "rtx-5060-ti-16gb"),
                                     ("can i run llama 3.1 70b on 2x 3090", "rtx-3090")])
def test_too_big_at_16_bits_is_answered_at_q4_k_m(q, card):
    # Hand check for phi 4: 14.7B parameters x 2 bytes = 29.4 GB of weights at fp16, more than a
    # 12 GB card; at Q4_K_M (4.89 bits a weight, rules/precisions.yaml from llama.cpp's quantize table) ~9.0 GB, which fits.
    a = ask(q)
    assert a.workload["precision"] == "q4_k_m" and a.workload["runtime"] == "llama.cpp"
    assert a.gpus[0].id == card and a.gpus[0].fits
    assert a.verdict.startswith("As asked, at fp16, it does not fit (")
    assert "q4_k_m, Ollama's default download, it does." in a.verdict
    assert any("ollama-docs" in s for s in a.assumptions)


@pytest.mark.parametrize("q", ["llama 3.1 8b on a 4090",          # 16 GB of weights fit 24 GB
                               "phi 4 fp16 on a 4070 super",      # a format named
                               "phi 4 on a 4070 super with vllm",  # a runtime named
                               "phi 4 on a 4070 super for 8 users",  # serving several users
                               "llama 3.1 70b on an h100"])       # a datacenter card
def test_otherwise_the_16_bit_default_stays(q):
    a = ask(q)
    assert a.workload["precision"] != "q4_k_m"
    assert not a.verdict.startswith("As asked, at")
