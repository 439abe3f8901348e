"""Rule files cannot do harm.

A copy of rules/ is edited the way a careless or hostile contributor might, and each edit must
end as a load error at its position (`rules/<file>:line:col: message`) — or, for a value that
only goes wrong at evaluation (a division by zero), as an answer that names the formula in its
warnings. Never code run, a file written, a crash, a RecursionError or a hang.
"""

from __future__ import annotations


import json
import math
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kb.engine import answer
from kb.errors import KbError, RuleErrors
from kb.knowledge.build import build
from kb.paths import rules_dir
from kb.query.parse import parse
from kb.recordtype import replace

SHAPE = re.compile(r"^rules/[\w./-]+:\d+:\d+: \S")


@pytest.fixture
def rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the shipped rules in tmp_path/rules; the working directory is tmp_path and
    the knowledge snapshot cache goes there too."""
    root = tmp_path / "rules"
    shutil.copytree(rules_dir(), root)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KBQ_CACHE_DIR", str(tmp_path / "cache"))
    return root


def edit(root: Path, name: str, old: str, new: str, after: str | None = None) -> tuple[int, int]:
    """Replace the first `old` (after `after`, when given) in root/name with `new`; return the
    1-based (line, column) where `new` starts."""
    path = root / name
    text = path.read_text(encoding="utf-8")
    start = text.index(after) if after is not None else 0
    i = text.index(old, start)
    if after is None:
        assert text.count(old) == 1, f"{old!r} is not unique in {name}"
    path.write_text(text[:i] + new + text[i + len(old):], encoding="utf-8")
    line = text.count("\n", 0, i) + 1
    column = i - (text.rfind("\n", 0, i) + 1) + 1
    return line, column


def load_errors(root: Path) -> list[str]:
    with pytest.raises(RuleErrors) as info:
        build(root)
    rendered = [e.render() for e in info.value.errors]
    assert rendered
    for text in rendered:
        assert SHAPE.match(text), text
    return rendered


def error_at(errors: list[str], file: str, line: int, column: int, *fragments: str) -> str:
    """The one error at file:line:col; it must hold every fragment."""
    prefix = f"rules/{file}:{line}:{column}: "
    hits = [e for e in errors if e.startswith(prefix)]
    assert hits, f"no error at {prefix!r} in {errors}"
    for fragment in fragments:
        assert any(fragment in h for h in hits), (fragment, hits)
    return hits[0]


def ask_with(root: Path, q: str, one_card: bool = False) -> dict:
    kn = build(root)
    if one_card:       # every GPU on one card, ranked by the sizing flow (no prices.yaml advice)
        kn = replace(kn, advice={})
    d = answer(parse(q, kn), kn, q).to_dict()
    json.dumps(d, allow_nan=False)
    return d


# ---------------------------------------------------------------- YAML tags

def _system(target: Path) -> str:
    return f'!!python/object/apply:os.system ["echo pwned > {target}"]'


# (file, text replaced, replacement with {tag}, anchor): the tag as a mapping value, a list,
# a flow-mapping value, a key, a list item and a flow's node text.
PLACES = [
    ("gpus.yaml", "aliases: [a10g, nvidia a10g, a10g 24gb, aws a10g]", "aliases: {tag}", None),
    ("formulas.yaml", "expr: 3 * model.hidden_size * model.intermediate_size", "expr: {tag}", None),
    ("formulas.yaml", "1.0e9, unit: B/GB", "{tag}, unit: B/GB", None),
    ("models.yaml", "models:\n", "{tag}: 1\nmodels:\n", None),
    ("query.yaml", '"yes", "no", "off", be,', '"yes", {tag}, "off", be,', None),
    ("flows/sizing.yaml", "text: Training or inference?", "text: {tag}", None),
    ("runtimes.yaml", "decode_bandwidth_efficiency: 0.861", "decode_bandwidth_efficiency: {tag}",
     "id: ollama"),
]


@pytest.mark.parametrize("file, old, new, after", PLACES, ids=[f"{p[0]}:{p[2][:12]}" for p in PLACES])
def test_a_python_tag_anywhere_is_an_error_and_never_runs(
        rules: Path, tmp_path: Path, file: str, old: str, new: str, after: str | None) -> None:
    target = tmp_path / "PWNED"
    line, column = edit(rules, file, old, new.format(tag=_system(target)), after)
    column += new.index("{tag}")
    errors = load_errors(rules)
    error_at(errors, file, line, column, "tag:yaml.org,2002:python/object/apply:os.system",
             "not allowed")
    assert not target.exists() and not (tmp_path / "pwned").exists()


TAGS = [
    '!!python/object/apply:os.system ["echo pwned > {target}"]',
    '!!python/object/new:os.system ["echo pwned > {target}"]',
    '!!python/object/apply:subprocess.check_output [["sh", "-c", "echo pwned > {target}"]]',
    "!!python/name:os.system ''",
    "!!python/module:os ''",
    "!!python/object:builtins.object {{}}",
    "!!python/tuple [1, 2]",
    '!<tag:yaml.org,2002:python/object/apply:os.system> ["echo pwned > {target}"]',
    '!os.system ["echo pwned > {target}"]',
    "!!binary aGVsbG8=",
]


@pytest.mark.parametrize("tag", TAGS, ids=[t.split()[0] for t in TAGS])
def test_every_kind_of_tag_is_refused(rules: Path, tmp_path: Path, tag: str) -> None:
    target = tmp_path / "PWNED"
    line, column = edit(rules, "gpus.yaml", "bandwidth_gb_s: 600", "bandwidth_gb_s: "
                        + tag.format(target=target), after="id: a10g")
    errors = load_errors(rules)
    error_at(errors, "gpus.yaml", line, column + len("bandwidth_gb_s: "))
    assert not target.exists()


def test_a_tagged_document_is_refused(rules: Path, tmp_path: Path) -> None:
    target = tmp_path / "PWNED"
    (rules / "sources.yaml").write_text(f"--- {_system(target)}\n", encoding="utf-8")
    errors = load_errors(rules)
    error_at(errors, "sources.yaml", 1, 5, "not allowed")
    assert not target.exists()


def test_a_python_tag_is_refused_through_the_snapshot_path_too(rules: Path, tmp_path: Path) -> None:
    """ask(rules_dir=…) goes through the knowledge snapshot: the same error, nothing run,
    nothing cached."""
    from kb import ask

    target = tmp_path / "PWNED"
    edit(rules, "formulas.yaml", "expr: 3 * model.hidden_size * model.intermediate_size",
         f"expr: {_system(target)}")
    with pytest.raises(RuleErrors):
        ask("serve 7B", rules_dir=rules)
    assert not target.exists()
    assert not list((tmp_path / "cache").glob("knowledge-*"))


# ---------------------------------------------------------------- expressions reaching out

EXPR_LINE = "expr: 3 * model.hidden_size * model.intermediate_size"

# (expression, what the error says, column of the error within the expression, 0-based)
ESCAPES = [
    ("__import__('os')", "unknown function '__import__'", 0),
    ("__import__('os').system('echo pwned')", "unexpected '.'", 16),
    ("open('x')", "unknown function 'open'", 0),
    ("eval('1')", "unknown function 'eval'", 0),
    ("exec('import os')", "unknown function 'exec'", 0),
    ("getattr(model, 'hidden_size')", "unknown function 'getattr'", 0),
    ("os.system('echo pwned')", "unexpected '('", 9),
    ("model.__class__.__mro__", "unknown name 'model.__class__.__mro__'", 0),
    ("gpu.__class__.__init__.__globals__", "unknown name 'gpu.__class__.__init__.__globals__'", 0),
    ("__builtins__", "unknown name '__builtins__'", 0),
    ("().__class__", "unexpected ')'", 1),
    ("[].__class__", "unexpected character '['", 0),
    ("'x'.join('y')", "unexpected '.'", 3),
    ("lambda: 1", "unexpected character ':'", 6),
    ("model.hidden_size; import os", "unexpected character ';'", 17),
]


@pytest.mark.parametrize("expr, message, offset", ESCAPES, ids=[e[0] for e in ESCAPES])
def test_an_expression_cannot_reach_outside(rules: Path, expr: str, message: str,
                                            offset: int) -> None:
    quoted = json.dumps(expr)            # a YAML double-quoted scalar
    line, column = edit(rules, "formulas.yaml", EXPR_LINE, f"expr: {quoted}")
    errors = load_errors(rules)
    error_at(errors, "formulas.yaml", line, column + len("expr: ") + 1 + offset, message)


def test_code_in_a_string_stays_text(rules: Path) -> None:
    line, column = edit(rules, "formulas.yaml", EXPR_LINE,
                        """expr: '"__import__(''os'').system(''echo pwned'')"'""")
    errors = load_errors(rules)
    error_at(errors, "formulas.yaml", line, column + len("expr: "), "units")


def test_a_flow_condition_cannot_reach_outside(rules: Path) -> None:
    line, column = edit(rules, "flows/sizing.yaml", "when: is_training,",
                        "when: \"__import__('os')\",")
    errors = load_errors(rules)
    error_at(errors, "flows/sizing.yaml", line, column + len('when: "'),
             "unknown function '__import__'")


def test_a_verdict_template_cannot_reach_attributes(rules: Path) -> None:
    line, _ = edit(rules, "flows/sizing.yaml", "Needs {total_gb} GB in all; ",
                   "Needs {gpu.__class__.__init__.__globals__} GB in all; ")
    errors = load_errors(rules)
    hits = [e for e in errors if e.startswith(f"rules/flows/sizing.yaml:{line}:")]
    assert hits and "unknown name 'gpu.__class__.__init__.__globals__'" in hits[0], errors


def test_a_verdict_format_spec_cannot_blow_up_the_answer(rules: Path) -> None:
    edit(rules, "flows/sizing.yaml", "Needs {total_gb} GB in all; ",
         "Needs {total_gb:>10000000} GB in all; ")
    try:
        d = ask_with(rules, "serve 7B")
    except RuleErrors:
        return
    assert len(d["verdict"]) < 10_000


# ---------------------------------------------------------------- deep nesting

NESTINGS = [
    ("parentheses", "(" * 500 + "model.hidden_size" + ")" * 500),
    ("minus signs", "-" * 500 + "model.hidden_size"),
    ("not", "not " * 500 + "is_training"),
    ("powers", "2 ^ " * 500 + "model.hidden_size"),
    ("a long sum", " + ".join(["model.hidden_size"] * 500)),
    ("calls", "max(" * 500 + "model.hidden_size" + ")" * 500),
]


@pytest.mark.parametrize("expr", [n[1] for n in NESTINGS], ids=[n[0] for n in NESTINGS])
def test_deep_nesting_in_a_formula_is_an_error(rules: Path, expr: str) -> None:
    line, column = edit(rules, "formulas.yaml", EXPR_LINE, f"expr: {expr}")
    errors = load_errors(rules)
    error_at(errors, "formulas.yaml", line, column + len("expr: "), "nested")


def test_yaml_nested_a_little_too_deep_is_an_error(rules: Path) -> None:
    text = (rules / "formulas.yaml").read_text(encoding="utf-8")
    line = text.count("\n") + 1
    (rules / "formulas.yaml").write_text(text + "extra: " + "[" * 50 + "1" + "]" * 50 + "\n",
                                         encoding="utf-8")
    errors = load_errors(rules)
    error_at(errors, "formulas.yaml", line, len("extra: ") + 41, "nested deeper than")


@pytest.mark.parametrize("nesting", ["[" * 500 + "1" + "]" * 500,
                                     "{a: " * 500 + "1" + "}" * 500], ids=["lists", "mappings"])
def test_yaml_nested_500_deep_is_an_error_not_a_recursion_error(rules: Path, nesting: str) -> None:
    text = (rules / "formulas.yaml").read_text(encoding="utf-8")
    line = text.count("\n") + 1
    (rules / "formulas.yaml").write_text(text + "extra: " + nesting + "\n", encoding="utf-8")
    errors = load_errors(rules)
    assert any(e.startswith(f"rules/formulas.yaml:{line}:") and "nested" in e for e in errors)


# ---------------------------------------------------------------- numbers

NOT_FINITE = ["1e400", "-1e400", ".inf", "-.Inf", ".nan", ".NaN", "1" + "0" * 400]
NOT_FINITE_IDS = [v if len(v) < 10 else "10**400" for v in NOT_FINITE]


@pytest.mark.parametrize("value", NOT_FINITE, ids=NOT_FINITE_IDS)
def test_a_constant_that_is_not_a_finite_number_is_an_error(rules: Path, value: str) -> None:
    line, column = edit(rules, "formulas.yaml", "1.0e9, unit: B/GB", f"{value}, unit: B/GB")
    errors = load_errors(rules)
    error_at(errors, "formulas.yaml", line, column, "constants.bytes_per_gb.value")


def test_a_bad_constant_reports_only_its_own_error(rules: Path) -> None:
    line, column = edit(rules, "formulas.yaml", "1.0e9, unit: B/GB", "1e400, unit: B/GB")
    errors = load_errors(rules)
    assert len(errors) == 1 and errors[0].startswith(f"rules/formulas.yaml:{line}:{column}: ")


@pytest.mark.parametrize("value", NOT_FINITE, ids=NOT_FINITE_IDS)
def test_a_catalogue_figure_that_is_not_a_finite_number_is_an_error(rules: Path, value: str) -> None:
    line, column = edit(rules, "gpus.yaml", "bandwidth_gb_s: 600", f"bandwidth_gb_s: {value}",
                        after="id: a10g")
    errors = load_errors(rules)
    error_at(errors, "gpus.yaml", line, column + len("bandwidth_gb_s: "), "bandwidth_gb_s")


@pytest.mark.parametrize("value", ["1e400", "-1e400", ".inf", ".nan"])
def test_a_runtime_figure_that_is_not_a_finite_number_is_an_error(rules: Path, value: str) -> None:
    line, column = edit(rules, "runtimes.yaml", "decode_bandwidth_efficiency: 0.861",
                        f"decode_bandwidth_efficiency: {value}", after="id: ollama")
    errors = load_errors(rules)
    error_at(errors, "runtimes.yaml", line, column + len("decode_bandwidth_efficiency: "),
             "decode_bandwidth_efficiency")


@pytest.mark.parametrize("expr, offset", [("1e400 * model.hidden_size", 0),
                                          ("model.hidden_size * 1e400", 20),
                                          ("model.hidden_size * " + "9" * 400, 20)],
                         ids=["1e400 first", "1e400 second", "400 nines"])
def test_a_huge_literal_in_a_formula_is_an_error(rules: Path, expr: str, offset: int) -> None:
    line, column = edit(rules, "formulas.yaml", EXPR_LINE, f"expr: {expr}")
    errors = load_errors(rules)
    error_at(errors, "formulas.yaml", line, column + len("expr: ") + offset, "too large")


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
    (kb.engine.sweep) rather than let every inference answer carry the warning."""
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
         "expr: runtime.decode_bandwidth_efficiency * if(gemm_weight_only, "
         "runtime.quant_kernel_efficiency, 1) * if(gpu.hbm, runtime.hbm_decode_efficiency, 1)",
         "expr: round(runtime.decode_bandwidth_efficiency, precision)")
    try:
        d = ask_with(rules, "serve 7B on h100")
    except RuleErrors:
        return
    assert any(w.startswith("kernel_efficiency could not be computed") for w in d["warnings"])


def test_comparing_text_with_a_number_is_a_warning(rules: Path) -> None:
    edit(rules, "formulas.yaml",
         "expr: runtime.decode_bandwidth_efficiency * if(gemm_weight_only, "
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


# ---------------------------------------------------------------- size and encoding

def test_a_huge_rule_file_is_refused(rules: Path) -> None:
    path = rules / "models.yaml"
    path.write_text(path.read_text(encoding="utf-8") + ("#" + "x" * 99 + "\n") * 41_000,
                    encoding="utf-8")
    errors = load_errors(rules)
    error_at(errors, "models.yaml", 1, 1, "larger than")


def test_a_rule_file_that_is_not_utf8_is_refused(rules: Path) -> None:
    path = rules / "models.yaml"
    raw = path.read_bytes()
    path.write_bytes(raw[:100] + b"\xff\xfe" + raw[100:])
    errors = load_errors(rules)
    error_at(errors, "models.yaml", 1, 101, "UTF-8")


def test_a_5001_digit_integer_is_an_error_at_its_position(rules: Path) -> None:
    # Python refuses to convert integers over 4,300 digits (int_max_str_digits)
    line, column = edit(rules, "gpus.yaml", "release_year: 2018", "release_year: " + "9" * 5001,
                        after="v100-sxm2-32gb")
    errors = load_errors(rules)
    error_at(errors, "gpus.yaml", line, column + len("release_year: "), "too long")


@pytest.mark.parametrize("char", ["\x00", "\x07", "\x1b"])
def test_a_control_character_is_an_error_at_its_position(rules: Path, char: str) -> None:
    line, column = edit(rules, "gpus.yaml", "release_year: 2018", "release_year: 20" + char + "18",
                        after="v100-sxm2-32gb")
    errors = load_errors(rules)
    error_at(errors, "gpus.yaml", line, column + len("release_year: 20"), "control character")


def test_the_untouched_copy_loads_and_answers(rules: Path) -> None:
    """The fixture itself is sound: every failure above comes from its edit."""
    d = ask_with(rules, "serve 70B int4 16 users on h100")
    assert d["memory"]["total_gb"] and math.isfinite(d["memory"]["total_gb"])


def test_a_formula_that_fails_on_some_gpus_only_fails_on_those(rules: Path) -> None:
    # headroom_gb is unchanged except on 24 GiB cards (25.77 GB), where it divides by zero
    edit(rules, "formulas.yaml", "expr: usable_vram_gb - per_gpu_gb\n",
         "expr: (usable_vram_gb - per_gpu_gb) / if(gpu.vram_gb > 25.7 and gpu.vram_gb < 25.8, 0, 1)\n")
    every = ask_with(rules, "serve llama-3.1-8b", one_card=True)
    rows = {g["id"]: g for g in every["gpus"]}
    for gpu_id in ("rtx-4090", "rtx-3090"):      # (an L4's nvidia-smi total is 23,034 MiB)
        assert rows[gpu_id]["headroom_gb"] is None, gpu_id
    assert rows["h100-sxm5"]["headroom_gb"] == pytest.approx(
        rows["h100-sxm5"]["usable_vram_gb"] - rows["h100-sxm5"]["per_gpu_gb"])
    assert every["gpus"][0]["vram_gb"] != 24
    assert not any(w.startswith("headroom_gb") for w in every["warnings"]), every["warnings"]

    first = ask_with(rules, "serve llama-3.1-8b on rtx 4090 vs h100")
    assert [g["headroom_gb"] is None for g in first["gpus"]] == [True, False]
    assert any(w.startswith("headroom_gb could not be computed") and "division by zero" in w
               for w in first["warnings"]), first["warnings"]
    second = ask_with(rules, "serve llama-3.1-8b on h100 vs rtx 4090")
    assert [g["headroom_gb"] is None for g in second["gpus"]] == [False, True]
    assert not any(w.startswith("headroom_gb") for w in second["warnings"]), second["warnings"]
