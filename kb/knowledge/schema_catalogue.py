"""The schemas of the catalogue rule files: sources.yaml, precisions.yaml, runtimes.yaml and
gpus.yaml (unknown keys are errors); models.yaml's are in kb.knowledge.schema_models.

In: plain data from YAML (kb.knowledge.loader). Out: validated models (SourcesFile, PrecisionsFile,
RuntimesFile, GpusFile and the records in them); kb.knowledge.schema lists them with the other
files' models in FILES.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from kb.knowledge.schema_base import (Count, Fraction, Name, NonNeg, Optimizer, Positive, Slug, Strict, Text,
                                      WebUrl)
from kb.knowledge.kinds import Segment, Vendor

# ---------------------------------------------------------------- sources.yaml

class SourceSchema(Strict):
    id: Slug
    title: str
    publisher: str | None = None
    date: str | None = None
    url: WebUrl | None = None
    kind: Literal["seed", "datasheet", "whitepaper", "spec-page", "paper", "measurement",
                  "model-card", "documentation", "review", "blog", "kbq"]
    notes: str | None = None


class ClaimSchema(Strict):
    id: Slug
    source: Slug
    text: str
    computed: str
    unit: Text
    value: float | tuple[float, float]
    tolerance: NonNeg = 0.1
    applies_when: str
    example_query: str
    note: str


class SourcesFile(Strict):
    sources: list[SourceSchema]
    claims: list[ClaimSchema] = []


# ---------------------------------------------------------------- precisions.yaml

TensorPrecision = Literal["fp32", "tf32", "fp16", "bf16", "fp8", "int8", "int4", "fp4"]


class PrecisionSchema(Strict):
    id: Slug
    name: Name
    kind: Literal["float", "int", "quant"]
    bits_per_weight: Positive
    compute: TensorPrecision
    quantizes_embeddings: bool = True
    experts_only: bool = False
    weight_only: bool = False
    fallback: list[TensorPrecision] = []
    dequantized: list[TensorPrecision] = []
    # an experts_only format: the bits of the tensors it leaves out (attention, shared experts,
    # router); 16-bit when absent
    others_bits: Positive | None = None
    aliases: list[Name] = []
    # the one runtime that loads a file of this format (EXL2: ExLlamaV2), when only one does
    runtime: Slug | None = None
    source: Slug
    notes: str | None = None


class PrecisionsFile(Strict):
    precisions: list[PrecisionSchema]


# ---------------------------------------------------------------- runtimes.yaml



class RecipeWhenSchema(Strict):
    tasks: list[Slug] = []
    min_gpus: int = Field(default=1, gt=0)
    max_gpus: int | None = Field(default=None, gt=0)
    min_params: NonNeg = 0


class RecipeSetSchema(Strict):
    optimizer: Optimizer | None = None
    checkpointing: bool | None = None
    paged: bool | None = None
    optimizer_in_backward: bool | None = None
    offload: bool | None = None
    checkpoint_offload: bool | None = None
    lora_attention_only: bool | None = None
    quantized_base: bool | None = None      # a LoRA with no format named loads its base in 4 bits (QLoRA)


class RecipeSchema(Strict):
    """What a runtime's documented recipe does for a kind of job (a default, said in the answer)."""
    when: RecipeWhenSchema
    set: RecipeSetSchema
    text: str
    source: Slug


class ShardingSchema(Strict):
    stage: int = Field(ge=0, le=3)
    name: Name
    source: Slug
    layout: Slug | None = None      # the strategy it runs as, when it is a runtime's name for one
    model_parallel: bool = False    # splits each layer (tensor) and the layers (pipeline) over GPUs
    mfu: Fraction | None = None     # model FLOPS utilisation published for this stack at scale
    mfu_source: Slug | None = None


class AtScaleSchema(Strict):
    min_gpus: int = Field(gt=1)
    tasks: list[Slug] = ["full_ft", "pretrain"]     # the training tasks the row is the layout of
    strategy: Slug
    checkpointing: bool | None = None   # what the stack's published runs do, unless the query says
    text: str
    source: Slug


class ShardingFile(Strict):
    default: Slug
    offload_default: Slug
    no_count_note: str
    strategies: dict[Name, ShardingSchema]
    at_scale: list[AtScaleSchema] = []


class ObjectiveSchema(Strict):
    method: Literal["full_ft", "lora", "qlora"]
    sequences: int = Field(default=1, gt=0)
    reference: bool = False
    critic: bool = False
    rollout: bool = False
    generations: int = Field(default=1, gt=0)
    text: str
    source: Slug


class RuntimeSchema(Strict):
    id: Slug
    name: Name
    kind: Literal["inference", "training", "both"]
    aliases: list[Name] = []
    multi_gpu: Literal["tensor_parallel", "layer_split"]
    platforms: list[Vendor] = Field(min_length=1)
    decode_bandwidth_efficiency: Fraction | None = None
    quant_kernel_efficiency: Fraction | None = None
    hbm_decode_efficiency: Fraction = 1.0
    moe_expert_kernel_s: NonNeg = 0.0
    moe_layer_kernel_s: NonNeg = 0.0
    fallback_moe_layer_kernel_s: NonNeg | None = None
    mla_layer_kernel_s: NonNeg = 0.0
    decode_step_overhead_s: NonNeg | None = None
    prefill_compute_efficiency: Fraction | None = None
    apple_prefill_compute_efficiency: Fraction | None = None
    apple_decode_step_overhead_s: NonNeg | None = None
    amd_decode_bandwidth_efficiency: Fraction | None = None
    amd_decode_step_overhead_s: NonNeg | None = None
    experts_only_rest_bits: NonNeg | None = None
    unsupported_models: list[Slug] = []
    unsupported_models_source: Slug | None = None
    unsupported_models_runtime: Slug | None = None
    experts_only_rest_bits_source: Slug | None = None
    hopper_warpgroup_mma: bool = True
    hopper_warpgroup_mma_source: Slug | None = None
    # Blackwell modules: an MXFP4 experts-only checkpoint's expert GEMMs run on the MX tensor
    # cores at the FP8 rate (TensorRT-LLM's and vLLM's gpt-oss MoE kernels), not weight-only
    blackwell_mx_experts: bool = False
    blackwell_mx_experts_source: Slug | None = None
    native_gemm: list[Slug] = []
    native_gemm_source: Slug | None = None
    gemm_accumulate: Literal["fp32", "fp16"] = "fp32"
    gemm_accumulate_source: Slug | None = None
    decode_efficiency_source: Slug | None = None    # a measurement its decode efficiency is fitted to
    amd_decode_efficiency_source: Slug | None = None    # the measurements its AMD decode figures are fitted to
    prefill_efficiency_source: Slug | None = None   # a measurement its prefill efficiency is fitted to
    memory_utilization: Fraction = 1.0
    overhead_gb: NonNeg
    training_mfu: Fraction | None = None
    logits_memory_fraction: Fraction = 1.0
    master_weights: bool = True
    lora_dropout: Fraction = 0.0
    lora_dropout_source: Slug | None = None
    quantizes_output_head: bool = False
    quantizes_output_head_source: Slug | None = None
    # FSDP leaves the input embedding and output head in the root unit, which it keeps gathered
    # from forward through backward (not resharded after forward)
    fsdp_root_embeddings: bool = False
    fsdp_root_embeddings_source: Slug | None = None
    default_context_tokens: int | None = Field(default=None, gt=0)
    # inference: the format its users run when the query names none (Ollama: GGUF Q4_K_M)
    default_precision: Slug | None = None
    default_precision_source: Slug | None = None
    checkpointing: bool | None = None
    optimizer: Optimizer | None = None
    sharding: Slug | None = None
    recipes: list[RecipeSchema] = []
    # training: the platforms whose GPUs the stack supports well (not only runs on), by task id
    # (qlora, lora, full_ft…) or `default`; a card of another platform does not suit the job
    well_supported: dict[Slug, list[Vendor]] = {}
    well_supported_source: Slug | None = None
    # architectures of a platform the runtime runs on that it does not support (vLLM on NVIDIA
    # needs compute capability 7.0: no Pascal, Maxwell or Kepler card)
    unsupported_architectures: list[str] = []
    unsupported_architectures_source: Slug | None = None
    # formats (precisions.yaml ids) whose kernels the runtime does not run on these architectures
    # (vLLM's AWQ kernels need compute capability 7.5: no Volta)
    unsupported_formats: dict[Slug, list[str]] = {}
    unsupported_formats_source: Slug | None = None
    source: Slug
    notes: str | None = None


class EmbeddedDefaultSchema(Strict):
    # inference on an embedded module (gpus.yaml form_factor, e.g. SoM: Jetson) runs this runtime
    form_factors: list[str] = Field(min_length=1)
    runtime: Slug
    text: str
    source: Slug


class PerCardDefaultSchema(Strict):
    # a ranking whose runtime came from a default ranks the cards that runtime does not run under
    # this one, the format as it runs there (precision id → precision id); a format not listed is
    # not run there, and those cards stay out
    runtime: Slug
    precisions: dict[Slug, Slug] = Field(min_length=1)
    max_users: int | None = Field(default=None, ge=1)   # a question for more users keeps one runtime
    text: str
    source: Slug


class RuntimeDefaultsSchema(Strict):
    inference: Slug
    gguf: Slug
    training: Slug
    embedded: EmbeddedDefaultSchema | None = None
    per_card: PerCardDefaultSchema | None = None
    source: Slug


class RuntimesFile(Strict):
    runtimes: list[RuntimeSchema]
    sharding: ShardingFile | None = None
    objectives: dict[Name, ObjectiveSchema] = {}
    defaults: RuntimeDefaultsSchema


# ---------------------------------------------------------------- gpus.yaml

class TensorTflopsSchema(Strict):
    tf32: NonNeg | None
    fp16: NonNeg | None
    bf16: NonNeg | None
    fp8: NonNeg | None
    int8: NonNeg | None
    int4: NonNeg | None
    fp4: NonNeg | None
    fp16_acc16: NonNeg | None = None   # FP16 with FP16 accumulate, where a card runs it faster


class InterconnectSchema(Strict):
    kind: Literal["nvlink", "xgmi", "infinity-fabric", "pcie", "ethernet", "unified", "ici", "neuronlink"]
    generation: str | None = None
    gb_s: NonNeg | None = None


class GpuSchema(Strict):
    id: Slug
    name: Name
    vendor: Vendor
    segment: Segment
    architecture: str
    release_year: int = Field(ge=2010, le=2035)
    aliases: list[Name] = []
    vram_gb: Positive
    memory_bytes: Count
    memory_type: str
    bandwidth_gb_s: Positive
    bus_width_bits: int | None = Field(default=None, gt=0)
    memory_data_rate_gbps: Positive | None = None
    fp32_tflops: NonNeg | None
    tensor_tflops: TensorTflopsSchema
    # tensor precisions the hardware runs whose rate the vendor does not publish (left null above);
    # a null rate not listed here means the card has no native tensor math for that precision
    tensor_unpublished: list[Literal["tf32", "fp16", "bf16", "fp8", "int8", "int4", "fp4"]] = []
    tdp_w: Positive | None
    interconnect: InterconnectSchema
    pcie_generation: int | None = None
    ecc: bool
    form_factor: str
    source: Slug
    field_sources: dict[str, Slug] = {}
    notes: str | None = None


class GpusFile(Strict):
    gpus: list[GpuSchema]
