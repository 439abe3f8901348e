"""What a query asks: the Workload.

In: built by kb.query from a query's words. Out: a plain dataclass the engine reads (pydantic
validates it at the API edge). Fields left None are filled by the engine from
rules/query.yaml defaults, and each default used is listed in the answer's assumptions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class GpuRequest:
    gpu_id: str | None          # None: a bare capacity ("on 20GB")
    count: int = 1
    capacity_gb: float | None = None


@dataclass
class Workload:
    task: str = "infer"                       # infer serve prefill full_ft lora qlora pretrain
    question: str | None = None               # which_gpu max_users max_context largest_model how_many_gpus
    model_id: str | None = None
    params: float | None = None               # a bare size ("13B")
    precision: str | None = None
    kv_precision: str | None = None
    gpus: list[GpuRequest] = field(default_factory=list)
    users: int | None = None
    batch: int | None = None
    context_tokens: int | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    seq_len: int | None = None
    lora_rank: int | None = None
    train_tokens: float | None = None
    checkpointing: bool | None = None
    flash_attention: bool | None = None
    optimizer: str | None = None
    offload: bool | None = None
    optimizer_in_backward: bool | None = None
    paged: bool | None = None
    lora_attention_only: bool | None = None
    runtime: str | None = None
    task_explicit: bool = False
    notes: list[str] = field(default_factory=list)   # how the query's words were read

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)         # every field is a plain value, but for these two lists
        d["gpus"] = [dict(g.__dict__) for g in self.gpus]
        d["notes"] = list(self.notes)
        return d
