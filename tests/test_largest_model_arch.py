"""The largest-model search answers the largest bare size that fits, though the architecture
assumed for a bare size changes with the size (the reference nearest on a log scale,
models.yaml bare_size), so whether a size fits is not monotone in the size."""

from __future__ import annotations

import pytest

from kb import ask, get_knowledge
from kb.engine.resolving.bare_size import bare_size_ref
from kb.engine.resolving.scope import capacity_gpu, question_format
from kb.engine.search.solve import _arch_ranges, probe, step_of
from kb.query.parse import parse

GB = 1e9


def _fits(kn, w, value: float) -> bool:
    question_format(w, kn)              # the question's default format, as the answer sizes it
    req = w.gpus[0]
    gpu = kn.gpus[req.gpu_id] if req.gpu_id else capacity_gpu(req, kn)
    return probe(kn, w, "params", value, gpu, req.count).fits


def test_a40_fp8_16_users_answers_the_32b_architecture_range() -> None:
    """Hand derivation (fp16 KV cache, 16 users x 4096 tokens = 65,536 tokens; A40 usable 46.4 GB;
    a size no question named takes the current GQA architectures, models.yaml unnamed_references):
    - up to 22.0B (the geometric mean of 14.8B and 32.8B) the reference is Qwen3 14B (40 layers,
      8 KV heads x 128): 163,840 B of KV a token, 10.7 GB; 22B of fp8 weights fit beside it;
    - from 22.0B Qwen3 32B (64 layers, 8 KV heads x 128): 262,144 B a token, 17.2 GB; fp8 weights
      about 1 B a parameter (plus scales), so 46.4 - 17.2 - ~1.5 (activations, runtime) = ~27.7 GB
      of weights: 25-27.7B;
    - from 48.1B Llama 3.1 70B (80 layers, 8 KV heads): 21.5 GB of KV + 48 GB of weights > 46.4.
    So the answer is 25-27.7B, in the 32B architecture."""
    kn = get_knowledge()
    d = ask("largest model for a40 fp8 16 users").to_dict()
    value = float(d["question"]["value"])
    assert 25e9 <= value <= 27.7e9
    assert bare_size_ref(kn, value, unnamed=True) == "qwen3-32b"
    w = parse("largest model for a40 fp8 16 users", kn)
    assert _fits(kn, w, value) and not _fits(kn, w, step_of(kn, "params", value))


@pytest.mark.parametrize("query", ["largest model for a40 fp8 16 users", "largest model for 8GB bnb8 qlora",
                                   "largest model for 141GB int4-experts fine-tune",
                                   "what is the largest model i can run on 2x rtx 4090 at q4_k_m",
                                   "biggest model on a 3090", "largest model for 24GB"])
def test_no_larger_architecture_range_fits(query: str) -> None:
    """The scanned set: the next size up (3 significant digits) does not fit, and neither does the
    smallest size of any larger architecture's range (memory grows with the size inside a range,
    so a range whose smallest size does not fit holds nothing that does)."""
    kn = get_knowledge()
    value = float(ask(query).to_dict()["question"]["value"])
    w = parse(query, kn)
    spec = kn.query["solve"]["largest_model"]
    assert _fits(kn, w, value)
    assert not _fits(kn, w, step_of(kn, "params", value))
    for bottom, top in _arch_ranges(kn, spec["lower"], spec["upper"]):
        assert bare_size_ref(kn, bottom, unnamed=True) == bare_size_ref(kn, top, unnamed=True)  # one architecture a range
        if bottom > value:
            assert not _fits(kn, w, bottom), f"{bottom / GB:.3g}B fits, above the answer {value / GB:.3g}B"


def test_8gb_bnb8_qlora_takes_the_3b_architecture() -> None:
    """From 5.08B (the geometric mean of 3.21B and 8.03B) the reference is Llama 3.1 8B, whose
    128,256-word vocabulary a QLoRA step keeps the logits of as Llama 3.2 3B's does: at 5.08B the
    8-bit weights (~5.4 GB) and those logits' activations (~4.3 GB at 3B) pass 8.6 GB, so the
    answer stays in the 3B range, under 3.21B's neighbourhood."""
    kn = get_knowledge()
    value = float(ask("largest model for 8GB bnb8 qlora").to_dict()["question"]["value"])
    assert bare_size_ref(kn, value, unnamed=True) == "llama-3.2-3b" and 2.5e9 < value < 5.08e9


def test_a_named_size_keeps_its_reference() -> None:
    """A size the query names ('13B') keeps the reference nearest it (Llama 2 13B, models.yaml
    references); only the sizes a largest-model search tries take the current architectures."""
    d = ask("13B on rtx 3060").to_dict()
    assert any("Llama 2 13B's architecture" in a for a in d["assumptions"])
    d = ask("largest model for 12GB").to_dict()
    assert any("Qwen3 14B's architecture" in a and "GQA" in a for a in d["assumptions"])
