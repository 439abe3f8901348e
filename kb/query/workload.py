"""What a query asks: the Workload.

In: built by kb.query.parse from a query's words. Out: a plain dataclass the engine reads (pydantic
validates it at the API edge). Fields left None are filled by the engine from
rules/query.yaml defaults, and each default used is listed in the answer's assumptions.
"""

from __future__ import annotations

import copy
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
    # how FP8 weights are scaled ('per-tensor': "tensor", also per channel; 'blockwise': "block");
    # None: as the model's publisher released its FP8 checkpoint (models.yaml fp8_scales)
    fp8_scales: str | None = None
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
    quantized_inputs_kept: bool | None = None   # bitsandbytes < 0.43.2: 4-bit layers keep their inputs
    runtime: str | None = None
    # The GPU backend named ("vulkan", "rocm", "hip", "metal", "cuda", "sycl": query.yaml
    # backends): the runtime's build for it where the rules hold one (llama.cpp's Vulkan build).
    backend: str | None = None
    # Parallel layout and sharding asked for ("tp 2", "pp 2", "with fsdp", "zero3", "deepspeed",
    # "dp attention"); None: the engine chooses and says so.
    tp: int | None = None
    pp: int | None = None
    sharding: str | None = None               # ddp zero1 zero2 zero3 fsdp deepspeed
    dp_attention: bool | None = None
    # Targets the question sets ("at 20 tok/s", "ttft under 1 s", "for 5M tokens a day",
    # "finish in 24 hours").
    speed_floor_tok_s: float | None = None
    ttft_max_s: float | None = None
    ttft_percentile: float | None = None      # 'p99 ttft': the bound holds for that share of requests
    e2e_max_s: float | None = None            # 'e2e under 10 s': a request's whole time, first token to last
    e2e_percentile: float | None = None       # 'p95 e2e 12 s': the bound holds for that share of requests
    tokens_per_day: float | None = None
    deadline_hours: float | None = None
    # Money ("at $2/h", "budget $5000", "under $8000", "at 24/7", "rent", "cheapest", "what if").
    usd_per_gpu_hour: float | None = None
    budget_usd: float | None = None
    hours_per_day: float | None = None
    rent: bool | None = None
    sort: str | None = None                   # value cost speed memory power
    want_options: bool | None = None
    # The figure the question asks for first ("how much vram" → memory, "how fast" → speed,
    # "how long to train" → time, "can i run" → fit, "what does it cost" → cost).
    focus: str | None = None
    task_explicit: bool = False
    notes: list[str] = field(default_factory=list)   # how the query's words were read
    # Words the vocabulary lacks that are no near miss of a known word ('please', 'vulkan'):
    # the rest of the question is answered and the answer says these were not used.
    unused_words: list[str] = field(default_factory=list)
    # The host's (CPU's) memory: "with 64gb ddr5", "32gb ram" (query.yaml host_memory_words);
    # its kind (ddr4, ddr5) when said. Never a GPU's memory.
    host_memory_gb: float | None = None
    host_memory_kind: str | None = None
    # llama.cpp's offload asked in its own words ("-ngl 40", "--n-cpu-moe 30", "-ot exps=CPU",
    # "experts on cpu"): weights kept in the host's memory. With no count, what does not fit the
    # GPUs; with one, what the count places there: gpu_layers the layers kept on the GPUs
    # (-ngl N), offload_layers the layers kept in the host's memory ("20 layers on cpu"),
    # cpu_moe_layers the layers whose experts are (--n-cpu-moe N), experts_on_cpu every
    # expert (--cpu-moe, -ot exps=CPU).
    host_offload: bool | None = None
    offload_layers: int | None = None
    gpu_layers: int | None = None
    cpu_moe_layers: int | None = None
    experts_on_cpu: bool | None = None
    # the host memory's channels ("quad channel ddr4", "8 channel ddr5"); None: a desktop's two
    host_channels: int | None = None
    # A GPU count without a GPU name ("on 4 gpus", "two gpus"); a named GPU without its own
    # count takes it.
    gpu_count: int | None = None
    # Training objective beyond supervised fine-tuning (dpo orpo kto grpo ppo cpt; runtimes.yaml
    # objectives), and Unsloth-style offload of the checkpointed layer inputs to CPU memory.
    objective: str | None = None
    checkpoint_offload: bool | None = None
    # The classes of card the question is about (gpus.yaml segment: consumer, workstation,
    # datacenter, apple; "at home" reads as consumer and workstation); empty: every card. A
    # ranking judges only these.
    segments: list[str] = field(default_factory=list)
    # Where the question is asked from (query.yaml situations: "at home"): it sets `segments`,
    # and its runtime and format are the defaults.
    segment: str | None = None
    # Two or more values of one field joined by "vs", "or", "compared to":
    # {"field": "precision", "values": ["fp8", "int4"]}; the field itself holds the first.
    compare: dict[str, Any] | None = None
    # `params` is a size a largest-model search tries, not one the query named: it takes the
    # current architectures (models.yaml bare_size unnamed_references).
    size_unnamed: bool = False
    # Speculative decoding ("with a 0.5b draft", "eagle-3", "mtp", "prompt lookup"): the method
    # (formulas.yaml spec_method: draft eagle eagle3 mtp ngram), a draft model by name or size,
    # and the draft tokens per step ("4 draft tokens"); None: no speculative decoding / defaults.
    spec_method: str | None = None
    draft_model_id: str | None = None
    draft_params: float | None = None
    draft_tokens: int | None = None

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)         # every field is a plain value, but for these two lists
        d["gpus"] = [dict(g.__dict__) for g in self.gpus]
        d["notes"] = list(self.notes)
        d["unused_words"] = list(self.unused_words)
        d["segments"] = list(self.segments)
        if self.compare is not None:
            d["compare"] = {"field": self.compare["field"], "values": list(self.compare["values"])}
        return d

    def copy(self) -> Workload:
        """What copy.deepcopy gives, made faster: every field is a plain value but the two lists,
        the GPUs asked for and the comparison, each copied here."""
        out = object.__new__(Workload)
        out.__dict__.update(self.__dict__)
        out.gpus = [GpuRequest(g.gpu_id, g.count, g.capacity_gb) for g in self.gpus]
        out.notes = list(self.notes)
        out.unused_words = list(self.unused_words)
        out.segments = list(self.segments)
        if self.compare is not None:
            out.compare = copy.deepcopy(self.compare)
        return out


def is_gguf(precision: str | None) -> bool:
    """The precision id is one of llama.cpp's GGUF formats (q4_k_m, q8_0, iq2_xs…), which the
    GGUF default runtime loads (runtimes.yaml runtime_defaults gguf)."""
    return bool(precision and precision.startswith(("q2_", "q3_", "q4_", "q5_", "q6_", "q8_", "iq2_")))
