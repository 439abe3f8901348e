"""The runtime a question is answered under when it names none (issue 26 §5): an embedded module
runs what its vendor's tutorials run there, a named runtime is kept. Each expected value names
its source."""

from __future__ import annotations

import pytest

from kb import ask, get_knowledge

KN = get_knowledge()


@pytest.mark.parametrize("q", ["llama 3.2 1b on a jetson orin nano", "llama 3.1 8b fp16 on jetson agx orin",
                               "how fast is qwen2.5 3b on an orin nano super"])
def test_a_jetson_runs_llama_cpp_by_default(q):
    # NVIDIA's Jetson AI Lab tutorial (source jetson-ai-lab-ollama) runs Ollama, llama.cpp
    # underneath, on AGX Orin, Orin NX and Orin Nano; TensorRT-LLM's main branch does not support
    # Jetson. The default is the rules' (runtimes.yaml defaults.embedded, form factor SoM) and said.
    a = ask(q)
    assert KN.gpus[a.gpus[0].id]["form_factor"] == "SoM"
    assert a.workload["runtime"] == "llama.cpp"
    assert any(s.startswith("runtime: llama.cpp (the inference default on an embedded module")
               and "jetson-ai-lab-ollama" in s for s in a.assumptions)


def test_a_runtime_named_for_a_jetson_is_kept():
    a = ask("llama 3.2 1b on a jetson orin nano with vllm")
    assert a.workload["runtime"] == "vllm"


def test_a_discrete_card_keeps_the_serving_default():
    # only the embedded form factors take the embedded default: an RTX 4090 question stays vLLM
    assert ask("llama 3.1 8b on a 4090").workload["runtime"] == "vllm"


def test_jetson_decode_is_bandwidth_bound_near_the_hand_figure():
    # Hand derivation: Llama 3.2 1B at fp16 is 1.24e9 x 2 B = 2.47 GB of weights read per token;
    # the Orin Nano Super's 102 GB/s x llama.cpp's decode efficiency 0.861 (runtimes.yaml) ≈ 88 GB/s
    # -> 35.5 tok/s before the per-step overhead (1.9 ms) -> ~33 tok/s. Tolerance ±15%.
    a = ask("llama 3.2 1b on a jetson orin nano")
    assert a.gpus[0].decode_tokens_per_s == pytest.approx(33, rel=0.15)
