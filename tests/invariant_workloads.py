"""What the invariant tests share (tests/test_invariants*.py): the catalogue's ids, the workloads
hypothesis draws (inference and training), the query each one reads as, and the memory an answer
gives."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st

from kb import ask, get_knowledge
from kb.engine.assembly.answer import Answer

KN = get_knowledge()
# Every catalogue GPU judged on one card (as without rules/prices.yaml's advice, which judges
# each at the fewest cards that hold the job): the one-card invariants of
# tests/test_invariants_gpus.py compare these.
ONE_CARD = replace(KN, advice={})


def one_card(q: str) -> Any:
    from kb.engine import answer
    from kb.query.parse import parse

    return answer(parse(q, ONE_CARD), ONE_CARD, q)

MODELS = sorted(KN.models)
GPUS = sorted(KN.gpus)
PRECISIONS = sorted(KN.precisions)
INFERENCE_RUNTIMES = sorted(k for k, rt in KN.runtimes.items() if rt["kind"] in ("inference", "both"))
TRAINING_RUNTIMES = sorted(k for k, rt in KN.runtimes.items() if rt["kind"] in ("training", "both"))
TRAINING_TASKS = ("lora", "qlora", "full fine-tune", "pretrain")

PROPERTY = settings(max_examples=200, deadline=None)


def bits(precision: str) -> float:
    return float(KN.precisions[precision]["bits_per_weight"])


def quantizes_embeddings(precision: str) -> bool:
    return bool(KN.precisions[precision].get("quantizes_embeddings", True))


def sixteen_bit_share(precision: str) -> float:
    """How much a format leaves in 16 bits: 0 nothing, 1 the embeddings and head, 2 everything
    but the routed experts (a MoE checkpoint's experts-only format), between 1 and 2 when an
    experts-only format keeps the embeddings in 16 bits and the rest in fewer (precisions.yaml
    others_bits: 8 → 1.5)."""
    p = KN.precisions[precision]
    if p.get("experts_only"):
        return 1 + (p.get("others_bits") or 16) / 16
    return 0 if p.get("quantizes_embeddings", True) else 1


def is_hbm(gpu_id: str) -> bool:
    return str(KN.gpus[gpu_id].get("memory_type", "")).upper().startswith("HBM")


def is_apple(gpu_id: str) -> bool:
    return KN.gpus[gpu_id]["vendor"] == "apple"


# ---------------------------------------------------------------- workloads → queries

@st.composite
def inference_workloads(draw: Any) -> dict[str, Any]:
    return {
        "task": draw(st.sampled_from(["serve", "infer"])),
        "model": draw(st.sampled_from(MODELS)),
        "precision": draw(st.sampled_from(PRECISIONS)),
        "users": draw(st.integers(1, 512)),
        "context": draw(st.integers(1, 131_072)),
        "batch": draw(st.integers(1, 8)),
        "seq": draw(st.integers(1, 8192)),
        "gpu": draw(st.sampled_from(GPUS)),
        "count": draw(st.integers(1, 8)),
        "runtime": draw(st.sampled_from(INFERENCE_RUNTIMES)),
    }


@st.composite
def training_workloads(draw: Any) -> dict[str, Any]:
    task = draw(st.sampled_from(TRAINING_TASKS))
    return {
        "task": task,
        "model": draw(st.sampled_from(MODELS)),
        "precision": draw(st.sampled_from(["bf16", "fp16", "fp32"])) if task != "qlora" else "nf4",
        "users": draw(st.integers(1, 64)),
        "context": draw(st.integers(1, 32_768)),
        "batch": draw(st.integers(1, 16)),
        "seq": draw(st.integers(1, 16_384)),
        "gpu": draw(st.sampled_from(GPUS)),
        "count": draw(st.integers(1, 8)),
        "runtime": draw(st.sampled_from(TRAINING_RUNTIMES)),
    }


def workloads() -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(inference_workloads(), training_workloads())


def query(w: dict[str, Any], gpus: bool = True) -> str:
    parts = [w["task"], w["model"]]
    if w.get("precision"):
        parts.append(w["precision"])
    # thousands separated as people write them, so that a count such as 3,060 users is not read
    # as the RTX 3060 a bare '3060' names
    parts += [f"{w['users']:,} users", f"{w['context']:,} context", f"batch {w['batch']}",
              f"seq {w['seq']}"]
    if gpus:
        parts.append(f"on {w['count']}x {w['gpu']}")
    parts.append(f"with {w['runtime']}")
    return " ".join(parts)


def total_gb(q: str, answer: Answer | None = None) -> float:
    value = (answer or ask(q)).memory["total_gb"]
    assert isinstance(value, float) and math.isfinite(value), (q, value)
    return value
