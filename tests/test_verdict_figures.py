"""The verdict's figures agree with the rest of the answer: one precision for memory, and a
refusal never shows a capacity larger than the need it refuses."""

from __future__ import annotations

import math
import re

import pytest

from kb import ask

GB = re.compile(r"(\d[\d,]*(?:\.\d+)?)(?= GB| of )")      # "needs 23.3 GB", "17.7 of 23.2 GB"


def sig3(x: float) -> float:
    """3 significant digits, as every figure of an answer is shown (kb.figures)."""
    return round(x, 2 - math.floor(math.log10(abs(x))))

# need and capacity close together (the 8B FP16 answer for 11 users on a 24 GiB card needs 23.3
# GB of the 23.2 GB usable) and far apart, fitting and not fitting
QUERIES = [f"serve llama-3.1-8b fp16 {users} users on {gpu}"
           for users in (1, 6, 7, 8, 9, 12, 40) for gpu in ("rtx 4090", "rtx 3090", "l4", "a100 40gb")]


@pytest.mark.parametrize("query", QUERIES)
def test_verdict_memory_figures_use_the_answer_precision(query):
    a = ask(query).to_dict()
    row = a["gpus"][0]
    shown = [float(x.replace(",", "")) for x in GB.findall(a["verdict"])]
    need, capacity = shown[0], shown[1]
    # 3 significant digits, as the table and the key figures show them: the answer's own figures
    assert need == pytest.approx(sig3(row["per_gpu_gb"]), abs=1e-9)
    assert capacity == pytest.approx(sig3(row["usable_vram_gb"]), abs=1e-9)
    if a["verdict"].startswith("Does not fit: needs"):
        assert capacity <= need, a["verdict"]
    else:
        assert a["verdict"].startswith("Fits:") and capacity >= need


def test_the_reported_rtx_4090_case():
    # 24 GiB = 25.77 GB, 90% usable under vLLM = 23.19 GB, shown as 23.2 beside a need just above it
    verdict = ask("serve llama-3.1-8b fp16 11 users on rtx 4090").verdict
    assert verdict.startswith("Does not fit: needs 23.3 GB") and "which has 23.2 GB" in verdict
