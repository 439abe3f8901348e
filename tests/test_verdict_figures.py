"""The verdict's figures agree with the rest of the answer: one precision for memory, and a
refusal never shows a capacity larger than the need it refuses."""

from __future__ import annotations

import re

import pytest

from kb import ask

GB = re.compile(r"(\d[\d,]*(?:\.\d+)?) GB")

# need and capacity close together (the 8B FP16 answer on a 24 GB card needs 21.7 GB of the
# 21.6 GB usable) and far apart, fitting and not fitting
QUERIES = [f"serve llama-3.1-8b fp16 {users} users on {gpu}"
           for users in (1, 6, 7, 8, 9, 12, 40) for gpu in ("rtx 4090", "rtx 3090", "l4", "a100 40gb")]


@pytest.mark.parametrize("query", QUERIES)
def test_verdict_memory_figures_use_the_answer_precision(query):
    a = ask(query).to_dict()
    row = a["gpus"][0]
    shown = [float(x.replace(",", "")) for x in GB.findall(a["verdict"])]
    need, capacity = shown[0], shown[1]
    # one decimal, as the memory bar shows them: a rounding of the answer's own figures
    assert need == pytest.approx(round(row["per_gpu_gb"], 1), abs=1e-9)
    assert capacity == pytest.approx(round(row["usable_vram_gb"], 1), abs=1e-9)
    if a["verdict"].startswith("Does not fit: needs"):
        assert capacity <= need, a["verdict"]
    else:
        assert a["verdict"].startswith("Fits:") and capacity >= need


def test_the_reported_rtx_4090_case():
    verdict = ask("serve llama-3.1-8b fp16 8 users on rtx 4090").verdict
    assert "needs 21.7 GB" in verdict and "which has 21.6 GB" in verdict
