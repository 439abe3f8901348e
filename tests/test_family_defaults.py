"""A format family or a model family named alone reads as what people mean by it.

- 'exl2' with no bits: ExLlamaV2's README benchmarks EXL2 at 4.0 bits a weight (runtimes.yaml
  exllamav2 default_precision). Mistral 7B's 7.25e9 weights: the embedding and output matrices
  (2 x 32768 x 4096 = 0.268e9) kept at 16 bits are 0.537 GB, the other 6.98e9 at 4.0 bits 3.49 GB:
  4.03 GB.
- 'mixtral' alone: Mixtral 8x7B (mistralai/Mixtral-8x7B-v0.1, the model the name was given to;
  the 8x22B is always named with its size).
"""

import pytest
from practitioner_reading import KN

import kb
from kb.query.parse import parse


def test_exl2_with_no_bits_is_sized_at_the_readmes_4_bits() -> None:
    a = kb.ask("mistral 7b exl2 on 3060")
    assert a.workload["precision"] == "exl2-4.0bpw" and a.workload["runtime"] == "exllamav2"
    assert a.memory["breakdown"]["weights_gb"] == pytest.approx(0.537 + 3.49, rel=0.02)
    assert any("exl2-4.0bpw" in x and "exllamav2-readme" in x for x in a.assumptions), a.assumptions


def test_exl2_with_its_bits_keeps_them() -> None:
    assert parse("llama 3 8b exl2 4.5bpw on 3060", KN).precision == "exl2-4.5bpw"


@pytest.mark.parametrize("q, model", [("mixtral on 2x 3090", "mixtral-8x7b"),
                                      ("mixtral 8x22b on 4x h100", "mixtral-8x22b"),
                                      ("mixtral 8x7b q4_k_m on a 4090", "mixtral-8x7b")])
def test_mixtral_alone_is_the_8x7b(q: str, model: str) -> None:
    assert parse(q, KN).model_id == model
