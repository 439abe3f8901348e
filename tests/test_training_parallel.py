"""Training over several GPUs, framework recipes and training objectives, against figures
derived by hand from their sources (each test names the source and the tolerance).

Units: GB = 1e9 bytes; GiB = 1.073741824 GB."""

import math

import pytest

from kb import ask, get_knowledge
from kb.engine import answer
from kb.query.parse import parse

REL = 1e-3        # exact arithmetic on the inputs; 0.1% covers rounding
GIB = 1.073741824
KN = get_knowledge()


def per_gpu(query):
    return ask(query).to_dict()["memory"]["per_gpu_breakdown"]


def row(query):
    return ask(query).to_dict()["gpus"][0]


def with_sharding(query, sharding):
    """The Workload field the query language fills ("with fsdp", "zero2"), set directly."""
    w = parse(query, KN)
    w.sharding = sharding
    return answer(w, KN, query).to_dict()


# ---------------------------------------------------------------- ZeRO stages (Rajbhandari et al.)

PSI = 7.5e9       # ZeRO paper, Figure 1: Ψ = 7.5B parameters, N_d = 64 GPUs, K = 12 (mixed-precision Adam)
N = 64
ZERO_FIG1 = {     # per-device model-state memory the figure prints, GB
    "ddp": (2 + 2 + 12) * PSI / 1e9,                    # 120 GB
    "zero1": (2 + 2) * PSI / 1e9 + 12 * PSI / N / 1e9,   # 31.4 GB
    "zero2": 2 * PSI / 1e9 + (2 + 12) * PSI / N / 1e9,   # 16.6 GB
}


@pytest.mark.parametrize("sharding", sorted(ZERO_FIG1))
def test_model_states_per_gpu_follow_the_zero_paper(sharding):
    # https://arxiv.org/abs/1910.02054 Figure 1: 120 GB, 31.4 GB, 16.6 GB; exact formulas above
    b = with_sharding(f"full fine-tune 7.5B on {N}x a100", sharding)["memory"]["per_gpu_breakdown"]
    states = b["weights_gb"] + b["gradients_gb"] + b["optimizer_gb"]
    assert states == pytest.approx(ZERO_FIG1[sharding], rel=REL)


def test_zero3_shards_everything_plus_the_layers_being_gathered():
    # Figure 1: P_os+g+p = 16Ψ/N_d = 1.875 GB. A fully sharded rank also holds the full weights of
    # the layer it runs and the prefetched next one, and one layer's full gradients before the
    # reduce-scatter: (2 × 2Ψ + 2Ψ) / layers.
    a = with_sharding(f"full fine-tune 7.5B on {N}x a100", "zero3")
    layers = KN.models[a["workload"]["model"]]["layers"]
    b = a["memory"]["per_gpu_breakdown"]
    expected = 16 * PSI / N / 1e9 + (2 * 2 * PSI + 2 * PSI) / layers / 1e9
    assert b["weights_gb"] + b["gradients_gb"] + b["optimizer_gb"] == pytest.approx(expected, rel=REL)


# ---------------------------------------------------------------- data parallel is the default

def test_ddp_keeps_a_full_copy_on_every_gpu():
    # DDP asked for (torchrun's plain data parallel): 70B × 16 B/param = 1120 GB of model state on
    # every rank, so 16 H100s hold no less per GPU than one does (activations stay per rank)
    one, many = ask("full fine-tune 70b on 1x h100").to_dict(), ask("full fine-tune 70b on 16x h100 ddp").to_dict()
    b = many["memory"]["per_gpu_breakdown"]
    assert b["weights_gb"] + b["gradients_gb"] + b["optimizer_gb"] == pytest.approx(70e9 * 16 / 1e9, rel=REL)
    assert many["gpus"][0]["per_gpu_gb"] == pytest.approx(one["gpus"][0]["per_gpu_gb"], rel=REL)
    assert not many["gpus"][0]["fits"] and many["gpus"][0]["gpus_needed"] == 0
    assert "no number of them holds it" in many["verdict"]
    assert many["memory"]["sharding"] == "ddp"


def test_qlora_70b_does_not_fit_four_24gb_cards_under_ddp():
    # DDP named: with no sharding named, a base one card cannot hold is sharded (FSDP + QLoRA)
    # each rank holds the whole NF4 base: Llama-3.1-70B at ≥ 4 bits is ≥ 70.6e9 × 0.5 B = 35.3 GB > 24 GB
    r = row("qlora llama-3.1-70b on 4x rtx 4090 with ddp")
    assert not r["fits"] and r["per_gpu_gb"] > 70.6e9 * 0.5 / 1e9


def test_fsdp_divides_the_model_state_but_not_the_activations():
    # 70B full fine-tune under FSDP on 16 GPUs: 1120 GB / 16 = 70 GB of sharded state per rank
    a = with_sharding("full fine-tune 70b on 16x h100", "fsdp")
    one = with_sharding("full fine-tune 70b on 1x h100", "fsdp")
    b = a["memory"]["per_gpu_breakdown"]
    m = KN.models[a["workload"]["model"]]
    gathered = (2 * 2 * 70e9 + 2 * 70e9) / m["layers"] / 1e9
    # the HF Trainer's FSDP wraps each decoder layer, so the token embedding and output head stay in
    # the root unit, which FSDP does not reshard after forward (torch/distributed/fsdp/_runtime_utils.py
    # _post_forward_reshard): each rank holds them whole in 16 bits, beyond its own 1/16 share
    embeddings = m["vocab_size"] * m["hidden_size"] * (1 if m["tie_embeddings"] else 2)
    root = embeddings * 2 * (1 - 1 / 16) / 1e9
    assert b["weights_gb"] + b["gradients_gb"] + b["optimizer_gb"] == pytest.approx(
        70e9 * 16 / 16 / 1e9 + gathered + root, rel=REL)
    assert b["activations_gb"] == pytest.approx(one["memory"]["per_gpu_breakdown"]["activations_gb"], rel=REL)


def test_how_many_gpus_follows_the_sharding():
    ddp = ask("how many h100 for full fine-tune 70b ddp").to_dict()
    assert ddp["question"]["value"] is None and "Under ddp" in ddp["verdict"]
    # with no sharding named, several GPUs run the layout people use at that scale (FSDP), which
    # holds it on some count: never fewer than the model state alone needs, 1120 GB over 85.5 GB
    scaled = ask("how many h100 for full fine-tune 70b").to_dict()
    assert scaled["question"]["value"] >= math.ceil(70e9 * 16 / 1e9 / 85.5)
    w = parse("how many h100 for full fine-tune 70b", KN)
    w.sharding = "fsdp"
    fsdp = answer(w, KN, "").to_dict()
    n = fsdp["question"]["value"]
    # never fewer than the model state alone needs: 1120 GB over 80 GB cards
    assert n >= math.ceil(70e9 * 16 / 1e9 / 80)
    assert fsdp["question"]["answer"]["fits_at_value"] and not fsdp["question"]["answer"]["fits_at_previous"]


# ---------------------------------------------------------------- CPU offload and host RAM

def test_zero2_offload_host_ram_matches_deepspeeds_estimator():
    # DeepSpeed estimate_zero2_model_states_mem_needs(cpu_offload=True), 1 node of 4 GPUs:
    # GPU 2·P (16-bit weights), CPU P · max(4·4, 16) · 1.5 (the 1.5 is its safety buffer).
    # https://deepspeed.readthedocs.io/en/latest/memory.html
    a = ask("full fine-tune 7B on 4x a100 with zero2 cpu offload").to_dict()
    assert a["memory"]["host_ram_gb"] == pytest.approx(7e9 * 16 * 1.5 / 1.5 / 1e9, rel=REL)
    b = a["memory"]["per_gpu_breakdown"]
    assert b["weights_gb"] == pytest.approx(2 * 7e9 / 1e9, rel=REL) and b["optimizer_gb"] == 0


def test_zero3_offload_host_ram_matches_deepspeeds_estimator():
    # estimate_zero3_model_states_mem_needs(offload_param=cpu, offload_optimizer=cpu): CPU 18·P
    # (before its 1.5 buffer): 16-bit weights 2 + FP32 master 4 + Adam 8 + FP32 gradients 4
    a = ask("full fine-tune 7B on 4x a100 with zero3 cpu offload").to_dict()
    assert a["memory"]["host_ram_gb"] == pytest.approx(7e9 * 18 / 1e9, rel=REL)
    assert a["memory"]["per_gpu_breakdown"]["optimizer_gb"] == 0


def test_no_offload_needs_no_host_ram():
    assert ask("full fine-tune 7B on 4x a100 with zero3").to_dict()["memory"]["host_ram_gb"] == 0


def test_cpu_offload_with_no_sharding_named_is_zero_offload():
    a = ask("full fine-tune 7B on 4x a100 cpu offload").to_dict()
    assert a["memory"]["sharding"] == "deepspeed" and a["memory"]["zero_stage"] == 2
    assert any("cpu offload with no sharding named" in x for x in a["assumptions"])


# ---------------------------------------------------------------- framework recipes

def test_peft_qlora_turns_checkpointing_on():
    # prepare_model_for_kbit_training(use_gradient_checkpointing=True) — the product's own example
    a = ask("train 13B qlora on 20GB?").to_dict()
    assert a["workload"]["checkpointing"] is True
    assert any("prepare_model_for_kbit_training" in x for x in a["assumptions"])
    assert a["gpus"][0]["fits"] and 9 < a["gpus"][0]["per_gpu_gb"] < 11.5
    # without checkpointing the activations alone are ~12 GB: ~21 GB in all, more than a 16 GiB
    # card (17.2 GB)
    off = ask("train 13B qlora no checkpointing on 16GB?").to_dict()
    assert not off["gpus"][0]["fits"] and off["gpus"][0]["per_gpu_gb"] > 17.2


def test_torchtune_single_device_full_fine_tune_recipe():
    # llama3_1/8B_full_single_device.yaml: PagedAdamW8bit + optimizer_in_bwd. torchtune README:
    # 18.9 GiB peak on 1x RTX 4090 (batch 2, seq 2048); https://github.com/pytorch/torchtune#memory-and-training-speed
    a = ask("full fine-tune llama-3.1-8b seq 2048 batch 2 on rtx 4090 with torchtune").to_dict()
    w = a["workload"]
    assert (w["optimizer"], w["paged"], w["optimizer_in_backward"]) == ("adam8bit", True, True)
    assert a["gpus"][0]["per_gpu_gb"] == pytest.approx(18.9 * GIB, rel=0.10)
    # the paged 8-bit states (2 B/param) wait in CPU memory: 8.03e9 × 2 B
    assert a["memory"]["host_ram_gb"] == pytest.approx(8.03e9 * 2 / 1e9, rel=REL)


def test_torchtune_70b_multi_gpu_full_fine_tune_offloads():
    # llama3_1/70B_full.yaml: fsdp_cpu_offload: True; README: 13.9 GiB per GPU on 8x A100
    a = ask("full fine-tune llama-3.1-70b seq 2048 batch 2 on 8x a100 with torchtune").to_dict()
    assert a["workload"]["offload"] is True and a["memory"]["sharding"] == "fsdp"
    assert a["gpus"][0]["per_gpu_gb"] == pytest.approx(13.9 * GIB, rel=0.20)
    # pure bf16 (no FP32 master; full_finetune_distributed.py: "When dtype=bf16, all activations,
    # gradients and optimizer states are in bfloat16"): AdamW moments 2 x 2 + bf16 gradients 2 +
    # bf16 weights 2 = 8 B/param in host RAM
    assert a["memory"]["host_ram_gb"] == pytest.approx(70.6e9 * 8 / 1e9, rel=REL)
    single = ask("full fine-tune llama-3.1-8b on 2x a100 with torchtune").to_dict()
    assert single["workload"]["offload"] is None      # the 8B distributed recipe does not offload


def test_torchtune_lora_recipe_adapts_the_attention_only():
    # torchtune's llama3_1/8B_lora_single_device.yaml and 70B_lora.yaml (as of the README's
    # memory table, commit 30b8519e8): apply_lora_to_mlp: False; the qlora configs set it True.
    lora = ask("lora llama-3.1-8b seq 2048 batch 2 no checkpointing on rtx a6000 with torchtune").to_dict()
    qlora = ask("qlora llama-3.1-8b seq 2048 batch 2 on rtx 4090 with torchtune").to_dict()
    assert lora["workload"]["lora_attention_only"] is True
    assert not qlora["workload"]["lora_attention_only"]
    # So the frozen MLP keeps no inputs. Llama-3.1-8B (h 4096, 32 x 128 query heads, 8 x 128 KV
    # heads, f 14336), no dropout (lora_dropout: 0.0), fused attention, per token and layer:
    # norms 2 x 4096 x 4 B = 32,768; 2 B x (4096 + 2 x 4096 + 2 x 1024 + 3 x 14336) = 114,688;
    # 147,456 B in all; x 32 layers x 2 x 2048 tokens = 19.33 GB of layer activations
    per_token_layer = 32_768 + 2 * (4096 + 2 * 4096 + 2 * 1024 + 3 * 14336)
    assert step_result(lora, "activation_bytes_per_token_layer") == pytest.approx(per_token_layer, rel=REL)
    # torchtune README (Peak Memory per GPU, LoRA on 1x A6000, batch 2 packed to 2048, compiled):
    # 30.3 GiB, https://github.com/pytorch/torchtune/blob/30b8519e86d2094879576e16ab1f8d21a6f6f9f7/README.md;
    # kbq counts no torch.compile recomputation, so within 15%
    assert lora["gpus"][0]["per_gpu_gb"] == pytest.approx(30.3 * GIB, rel=0.15)


def test_unsloth_offloads_its_checkpoints():
    # use_gradient_checkpointing="unsloth": each layer's saved input (2 B × hidden per token) waits
    # in CPU memory. Llama-3.1-8B, seq 2048, batch 2: 32 × 2 × 4096 × 4096 tokens = 1.074 GB
    a = ask("qlora llama-3.1-8b seq 2048 batch 2 on rtx 4090 with unsloth").to_dict()
    ckpt = 32 * 2 * 4096 * 4096 / 1e9
    assert a["memory"]["host_ram_gb"] == pytest.approx(ckpt, rel=REL)
    base = step_result(a, "activations_gb")
    assert a["memory"]["per_gpu_breakdown"]["activations_gb"] == pytest.approx(base - ckpt * 31 / 32, rel=REL)


def step_result(a, name):
    return next(s["result"] for s in a["trace"] if s["rule"].startswith(name + " "))


# ---------------------------------------------------------------- objectives (TRL trainers)

def test_dpo_holds_a_reference_model_and_a_pair_per_example():
    # full DPO: a frozen bf16 reference = 8.03e9 × 2 B; chosen + rejected double the sequences
    a = ask("dpo llama-3.1-8b on h100").to_dict()
    assert a["workload"]["task"] == "full_ft" and a["workload"]["objective"] == "dpo"
    assert a["memory"]["per_gpu_breakdown"]["other_models_gb"] == pytest.approx(8.03e9 * 2 / 1e9, rel=REL)
    sft = ask("full fine-tune llama-3.1-8b on h100").to_dict()
    assert step_result(a, "sequences") == 2 * step_result(sft, "sequences")


def test_lora_dpo_uses_the_base_as_reference():
    a = ask("dpo llama-3.1-8b lora on h100").to_dict()
    assert a["workload"]["task"] == "lora" and a["memory"]["per_gpu_breakdown"]["other_models_gb"] == 0


def test_grpo_holds_the_rollout_engine():
    # rollout engine: 16-bit weights 8.03e9 × 2 B, plus the KV cache of 8 completions (TRL
    # num_generations) of 2048 tokens: 32 layers × 2 × 8 KV heads × 128 × 2 B = 131,072 B/token
    a = ask("grpo llama-3.1-8b lora on h100").to_dict()
    rollout = (8.03e9 * 2 + 131072 * 2048 * 8) / 1e9
    assert a["memory"]["per_gpu_breakdown"]["other_models_gb"] == pytest.approx(rollout, rel=REL)


def test_rlhf_is_ppo_with_a_critic():
    ppo, grpo = ask("rlhf llama-3.1-8b on 8x h100 with zero3").to_dict(), ask("grpo llama-3.1-8b on 8x h100 with zero3").to_dict()
    assert ppo["workload"]["objective"] == "ppo"
    assert ppo["memory"]["per_gpu_breakdown"]["other_models_gb"] > grpo["memory"]["per_gpu_breakdown"]["other_models_gb"]


@pytest.mark.parametrize("word,objective", [("orpo", "orpo"), ("kto", "kto"),
                                            ("continued pretraining", "cpt")])
def test_objective_words(word, objective):
    a = ask(f"{word} llama-3.1-8b on h100").to_dict()
    assert a["workload"]["objective"] == objective and a["workload"]["task"] == "full_ft"


# ---------------------------------------------------------------- MoE training compute

def test_moe_lora_compute_follows_the_active_parameters():
    # Qwen3-30B-A3B: 3.3e9 active of 30.5e9. LoRA through a frozen base: forward + input-gradient
    # pass = 2 × 2·N FLOPs per token, plus one forward with checkpointing: 2 · 3.3e9 · (2 + 1)
    a = ask("lora qwen3-30b-a3b checkpointing on h100").to_dict()
    assert step_result(a, "train_flops_per_token") == pytest.approx(2 * 3.3e9 * 3, rel=REL)


# ---------------------------------------------------------------- the training layout (workload.parallel)
# A training job is modelled as data parallel: every GPU is one rank running its own micro-batch
# through the whole model (no tensor or pipeline split), so tp = pp = 1 and dp = the GPU count;
# the sharding says what each rank keeps of the model state (PyTorch DDP docs; ZeRO paper §5).

def parallel(query):
    return ask(query).to_dict()["workload"]["parallel"]


def test_plain_multi_gpu_training_is_ddp_over_every_gpu():
    # HF Trainer under torchrun: one DDP rank per GPU, 4 GPUs → dp 4, nothing sharded or offloaded,
    # while one GPU holds a full copy (1B × 16 B = 16 GB of model state on an 80 GB A100)
    assert parallel("full fine-tune 1B on 4x a100") == {
        "tp": 1, "pp": 1, "dp": 4, "sharding": "ddp", "offload": False}
    # 7B × 16 B = 112 GB does not fit one 80 GB card: the job runs fully sharded (FSDP)
    assert parallel("full fine-tune 7B on 4x a100") == {
        "tp": 1, "pp": 1, "dp": 4, "sharding": "fsdp", "offload": False}


def test_named_sharding_and_offload_are_the_layout():
    assert parallel("full fine-tune 70b on 16x h100 with fsdp") == {
        "tp": 1, "pp": 1, "dp": 16, "sharding": "fsdp", "offload": False}
    assert parallel("full fine-tune 7B on 8x h100 with zero3 cpu offload") == {
        "tp": 1, "pp": 1, "dp": 8, "sharding": "zero3", "offload": True}
    # "cpu offload" alone runs as DeepSpeed ZeRO-Offload at Accelerate's default stage, ZeRO-2
    assert parallel("full fine-tune 7B on 4x a100 cpu offload") == {
        "tp": 1, "pp": 1, "dp": 4, "sharding": "zero2", "offload": True}


def test_recipe_layout_is_reported():
    # torchtune llama3_1/70B_full.yaml: FSDP full shard with fsdp_cpu_offload: True, 8 ranks
    assert parallel("full fine-tune llama-3.1-70b seq 2048 batch 2 on 8x a100 with torchtune") == {
        "tp": 1, "pp": 1, "dp": 8, "sharding": "fsdp", "offload": True}


def test_one_gpu_is_one_rank():
    assert parallel("lora llama-3.1-8b on rtx 4090") == {
        "tp": 1, "pp": 1, "dp": 1, "sharding": "ddp", "offload": False}


def test_how_many_answer_reports_the_layout_of_its_count():
    # the fewest H100s that hold a 70B full fine-tune under FSDP: dp equals that count
    w = parse("how many h100 for full fine-tune 70b", KN)
    w.sharding = "fsdp"
    a = answer(w, KN, "").to_dict()
    p = a["workload"]["parallel"]
    assert (p["tp"], p["pp"], p["sharding"]) == (1, 1, "fsdp")
    assert p["dp"] == a["question"]["value"] == a["gpus"][0]["count"]
