"""System memory typed with a question ("with 64gb ddr5", "32gb ram", "128 gb system memory") is
the host's memory: never a GPU's, never a GPU variant."""

from __future__ import annotations

import pytest

from kb import get_knowledge
from kb.query.parse import parse

KN = get_knowledge()


@pytest.mark.parametrize("query, gb, kind, gpu", [
    ("serve llama 3 8b on a 4090 with 64gb ddr5", 64.0, "ddr5", "rtx-4090"),
    ("infer 70b q4_k_m on rtx 3090 32gb ram", 32.0, None, "rtx-3090"),
    ("run qwen 7b with 128 gb system memory on a 4090", 128.0, None, "rtx-4090"),
    ("70b int4 on 3090 with 64gb of ram", 64.0, None, "rtx-3090"),
    ("70b int4 on 3090 with 96gb ddr4", 96.0, "ddr4", "rtx-3090"),
])
def test_system_memory_is_the_hosts(query, gb, kind, gpu):
    w = parse(query, KN)
    assert w.host_memory_gb == gb and w.host_memory_kind == kind
    assert [(g.gpu_id, g.capacity_gb) for g in w.gpus] == [(gpu, None)]    # the card as named
    assert any("host's (system) memory" in n for n in w.notes)


def test_a_bare_memory_size_is_still_a_card():
    w = parse("serve 13b on 24gb", KN)
    assert w.host_memory_gb is None and [g.capacity_gb for g in w.gpus] == [24.0]


def test_a_job_over_vram_fits_with_the_rest_in_host_memory_and_decodes_slower():
    """gpt-oss-120b (~65 GB MXFP4, ggml-org GGUF) does not fit a 24 GB card; with 64 GB of DDR5
    the experts that do not fit are kept in host memory (llama.cpp --n-cpu-moe), and decode reads
    them at the host's bandwidth: slower than on a card that holds it all, faster than 1 tok/s."""
    from kb import ask

    alone = ask("gpt-oss-120b on rtx 3090")
    host = ask("gpt-oss-120b on rtx 3090 with 64gb ddr5")
    small = ask("gpt-oss-120b on rtx 3090 with 16gb ddr5")
    assert not alone.gpus[0].fits and host.gpus[0].fits and not small.gpus[0].fits
    assert "Offloaded:" in host.verdict
    whole = ask("gpt-oss-120b on rtx pro 6000")
    assert 1 < host.throughput["decode_tokens_per_s"] < whole.throughput["decode_tokens_per_s"]
    ddr4 = ask("gpt-oss-120b on rtx 3090 with 64gb ddr4")
    assert ddr4.throughput["decode_tokens_per_s"] < host.throughput["decode_tokens_per_s"]   # 51.2 < 89.6 GB/s
