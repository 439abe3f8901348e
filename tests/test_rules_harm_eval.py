"""Rule values that only go wrong at evaluation (a division by zero, an overflow, text compared
with a number, a power of workload integers): a load error or a warning naming the formula,
never a crash or a hang."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from rules_harm_common import ask_with, edit

from kb.errors import KbError, RuleErrors

# ---------------------------------------------------------------- evaluation

ZERO = [
    ("bytes_per_gb", "serve llama-3.1-8b 4 users on h100", "weights_gb"),
    ("bytes_per_gb", "max users for 70B int4 on h200", "weights_gb"),
    ("bytes_per_gb", "which gpu for 13B lora", "weights_gb"),
    ("flop_per_tflop", "serve llama-3.1-8b on h100", "decode_step_compute_s"),
    ("decode_compute_efficiency", "serve 70B int4 16 users on 2x l40s", "decode_step_compute_s"),
    ("adam_moments", "full fine-tune 7B on h100", "optimizer_step_gb"),
    ("frozen_train_flops_factor", "lora llama-3.1-8b on h100", "train_tokens_per_s"),
    ("train_flops_factor", "full fine-tune 7B on 8x h100", "train_tokens_per_s"),
]


@pytest.mark.parametrize("constant, q, formula", ZERO, ids=[f"{z[0]}:{z[1]}" for z in ZERO])
def test_division_by_a_zero_constant_is_a_warning_naming_the_formula(
        rules: Path, constant: str, q: str, formula: str) -> None:
    text = (rules / "formulas.yaml").read_text(encoding="utf-8")
    m = re.search(rf"^  {constant}: \{{value: ([^,]+),", text, re.M)
    assert m is not None
    (rules / "formulas.yaml").write_text(text[:m.start(1)] + "0" + text[m.end(1):], encoding="utf-8")
    try:
        d = ask_with(rules, q)
    except KbError as err:   # a clear error is acceptable too
        assert str(err)
        return
    assert any(w.startswith(f"{formula} could not be computed") and "division by zero" in w
               for w in d["warnings"]), d["warnings"]
    assert d["verdict"]


def test_a_formula_that_overflows_inside_ceil_is_a_load_error(rules: Path) -> None:
    """It overflows on every inference workload, so validation refuses it at its expression
    (kb.engine.flows.sweep) rather than let every inference answer carry the warning."""
    line, column = edit(rules, "formulas.yaml",
                        "expr: max(1, ceil((total_gb - overhead_gb) / (usable_vram_gb - runtime.overhead_gb)))",
                        "expr: max(1, ceil((total_gb - overhead_gb) / (usable_vram_gb - runtime.overhead_gb) "
                        "* 1e300 * 1e300))")
    with pytest.raises(RuleErrors) as err:
        ask_with(rules, "serve 7B on h100")
    text = str(err.value)
    assert text.startswith(f"rules/formulas.yaml:{line}:{column + len('expr: ')}: gpus_needed is never "
                           "a finite number for infer, serve and prefill workloads"), text
    assert "cannot convert float infinity to integer" in text


def test_round_to_a_text_number_of_digits_is_an_error(rules: Path) -> None:
    edit(rules, "formulas.yaml",
         "expr: if(gpu.vendor == \"amd\", runtime.amd_decode_bandwidth_efficiency, "
         "runtime.decode_bandwidth_efficiency) * if(gemm_weight_only, "
         "runtime.quant_kernel_efficiency, 1) * if(gpu.hbm, runtime.hbm_decode_efficiency, 1)",
         "expr: round(runtime.decode_bandwidth_efficiency, precision)")
    try:
        d = ask_with(rules, "serve 7B on h100")
    except RuleErrors:
        return
    assert any(w.startswith("kernel_efficiency could not be computed") for w in d["warnings"])


def test_comparing_text_with_a_number_is_a_warning(rules: Path) -> None:
    edit(rules, "formulas.yaml",
         "expr: if(gpu.vendor == \"amd\", runtime.amd_decode_bandwidth_efficiency, "
         "runtime.decode_bandwidth_efficiency) * if(gemm_weight_only, "
         "runtime.quant_kernel_efficiency, 1) * if(gpu.hbm, runtime.hbm_decode_efficiency, 1)",
         "expr: if(precision < 1, 1, 0.5)")
    try:
        d = ask_with(rules, "serve 7B on h100")
    except RuleErrors:
        return
    assert any(w.startswith("kernel_efficiency could not be computed") for w in d["warnings"])


def test_a_power_of_workload_integers_is_a_warning(rules: Path) -> None:
    edit(rules, "formulas.yaml", "- expr: users * batch", "- expr: users ^ batch")
    d = ask_with(rules, "serve 7B 1000 users batch 1000 on h100")
    assert any("could not be computed" in w for w in d["warnings"])


HANG_SECONDS = 10


def test_a_power_of_workload_integers_does_not_hang(rules: Path, tmp_path: Path) -> None:
    edit(rules, "formulas.yaml", "- expr: users * batch", "- expr: users ^ context_tokens")
    script = textwrap.dedent("""
        import json, sys
        from kb.engine import answer
        from kb.errors import KbError
        from kb.knowledge.build import build
        from kb.query.parse import parse
        kn = build(sys.argv[1])
        q = "serve 7B 1000 users 100000000 context on h100"
        try:
            json.dumps(answer(parse(q, kn), kn, q).to_dict())
        except KbError:
            pass
        print("done")
    """)
    try:
        result = subprocess.run([sys.executable, "-c", script, str(rules)], cwd=tmp_path,
                                capture_output=True, text=True, timeout=HANG_SECONDS)
    except subprocess.TimeoutExpired:
        pytest.fail(f"no answer after {HANG_SECONDS} s")
    assert result.stdout.strip() == "done", result.stderr
