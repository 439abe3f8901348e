"""The largest-model search answers the largest bare size that fits, though the architecture
assumed for a bare size changes with the size (the reference nearest on a log scale,
models.yaml bare_size), so whether a size fits is not monotone in the size."""

from __future__ import annotations

import pytest

from kb import ask, get_knowledge
from kb.engine.bare_size import bare_size_ref
from kb.engine.scope import capacity_gpu, question_format
from kb.engine.solve import _arch_ranges, probe, step_of
from kb.query.parse import parse

GB = 1e9


def _fits(kn, w, value: float) -> bool:
    question_format(w, kn)              # the question's default format, as the answer sizes it
    req = w.gpus[0]
    gpu = kn.gpus[req.gpu_id] if req.gpu_id else capacity_gpu(req, kn)
    return probe(kn, w, "params", value, gpu, req.count).fits


def test_a40_fp8_16_users_answers_the_34b_architecture_range() -> None:
    """Hand derivation (fp16 KV cache, 16 users x 4096 tokens = 65,536 tokens; A40 usable 46.4 GB):
    - 10.3B takes Llama 2 13B's architecture (40 layers, 40 KV heads x 128): KV cache
      2 x 40 x 40 x 128 x 2 B = 819,200 B a token, x 65,536 = 53.7 GB > 46.4: no size of that
      range fits, which is where a bisection assuming monotone fit stopped (10.2B, the 8B range);
    - from 21B the reference is CodeLlama 34B (48 layers, 8 KV heads x 128): 196,608 B a token,
      12.9 GB; fp8 weights 1 B a parameter, so about 46.4 - 12.9 - ~1.5 (activations, runtime)
      = ~32B fits;
    - from 48.8B Llama 3.1 70B (80 layers, 8 KV heads): 21.5 GB of KV + 48.8 GB of weights > 46.4,
      and the 405B range needs more still: nothing above the 34B range fits.
    So the answer is 30-32.1B (3 significant digits, rounded down), in the 34B architecture."""
    kn = get_knowledge()
    d = ask("largest model for a40 fp8 16 users").to_dict()
    value = float(d["question"]["value"])
    assert 30e9 <= value <= 32.1e9
    assert bare_size_ref(kn, value) == "codellama-34b"
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
        assert bare_size_ref(kn, bottom) == bare_size_ref(kn, top)     # one architecture a range
        if bottom > value:
            assert not _fits(kn, w, bottom), f"{bottom / GB:.3g}B fits, above the answer {value / GB:.3g}B"


def test_8gb_bnb8_qlora_takes_the_7b_architecture() -> None:
    """3.01B (Llama 3.2 3B's architecture, a 128,256-word vocabulary whose logits a QLoRA step
    keeps) did not fit on 8 GB, but from 4.65B the reference is Llama 2 7B (a 32,000-word
    vocabulary): sizes there fit, so the answer is in that range, not 2.98B."""
    kn = get_knowledge()
    value = float(ask("largest model for 8GB bnb8 qlora").to_dict()["question"]["value"])
    assert bare_size_ref(kn, value) == "llama-2-7b" and value > 4.65e9
