"""The answer leads with the figure the question asked for."""

import pytest

from kb import ask


@pytest.mark.parametrize("query, starts, figure", [
    ("how much vram for llama 3 8b on rtx 4090", "Memory: ", ("memory", "per_gpu_gb")),
    ("vram needed for qwen2.5 7b fp16 on l40s", "Memory: ", ("memory", "per_gpu_gb")),
    ("how fast is llama 3 8b on rtx 4090", "Speed: ", ("throughput", "decode_tokens_per_s")),
    ("tokens per second for 8b q4_k_m on 3090", "Speed: ", ("throughput", "decode_tokens_per_s")),
    ("how long to qlora llama 3 8b on 4090 for 10m tokens", "Time: ", ("throughput", "train_time_s")),
])
def test_the_verdict_leads_with_the_asked_figure(query, starts, figure):
    from kb.figures import duration, num

    a = ask(query).to_dict()
    assert a["verdict"].startswith(starts), a["verdict"]
    section, key = figure
    value = a[section][key]
    shown = duration(value) if key == "train_time_s" else num(value)
    assert shown in a["verdict"]


def test_a_plain_query_keeps_its_verdict():
    a = ask("serve llama 3 8b on rtx 4090").to_dict()
    assert a["verdict"].startswith(("Fits", "Does not fit"))


def test_no_speed_lead_for_what_does_not_fit():
    a = ask("how fast is llama 3.1 70b fp16 on rtx 4090").to_dict()
    assert not a["verdict"].startswith("Speed")
