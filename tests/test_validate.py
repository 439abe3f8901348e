"""`kbq validate` and the published JSON Schemas.

Each broken fixture is a full copy of the shipped rules/ with one defect, made at test time by a
small text edit (the table CASES). The expected position is computed from the edited text (the
spot the edit put there), not copied from kbq's output, and the whole stderr is compared: every
error as `rules/FILE:LINE:COL: message`, then `N error(s)`, exit 2.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kb.cli.common import dump
from kb.paths import rules_dir
from kb.knowledge.schema import FILES, json_schema

RULES = rules_dir()
SCHEMA_NAMES = ("sources", "precisions", "gpus", "models", "formulas", "query", "flow")


def kbq(*args: str, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The installed console script, as a user runs it."""
    return subprocess.run(["kbq", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, check=False)


# ---------------------------------------------------------------- the broken fixtures

@dataclass(frozen=True)
class Find:
    """An error position elsewhere in the edited file: the unique `text`, at `at` inside it."""
    text: str
    at: str = ""


Where = str | int | Find | tuple[int, int]   # text or offset in `new`; Find; (line, col)


@dataclass(frozen=True)
class Case:
    id: str
    file: str                    # relative to rules/
    old: str | None              # unique text to replace; None: replace the whole file
    new: str
    errors: tuple[tuple[Where, str], ...]   # (where, message)
    known_issue: str | None = None           # why kbq does not give this yet (strict xfail)
    marks: tuple[Any, ...] = field(default=())


V100 = ("  - id: v100-sxm2-32gb\n    name: NVIDIA Tesla V100 SXM2 32GB\n    vendor: nvidia\n"
        "    segment: datacenter\n    architecture: Volta\n    release_year: 2018\n"
        "    aliases: [v100, v100 32gb, v100 sxm2, v100-32gb, tesla v100]\n    vram_gb: 32\n"
        "    memory_bytes: 34_359_738_368\n    memory_type: HBM2\n    bandwidth_gb_s: 900\n")
V100_ID = Find("  - id: v100-sxm2-32gb\n", "id:")
T4 = "  - id: t4\n    name: NVIDIA T4 16GB\n"
T4_ALIASES = "    aliases: [t4, tesla t4, nvidia t4, t4 16gb, colab t4, google colab t4, kaggle t4]\n"
# a formula no flow node computes directly (a broken one that is computed: see "cascade")
STEP_MEM = "    expr: decode_bytes_per_step_gb / effective_bandwidth_gb_s\n"
HEADROOM = "    expr: usable_vram_gb - per_gpu_gb\n"
WEIGHTS_READ = "      - expr: active_params * weight_bytes_per_param / bytes_per_gb\n"
MODEL_STATE = "    expr: weights_gb + gradients_gb + optimizer_gb + adapters_gb\n"
ADAMW_CLAIM = "    computed: model_state_gb * bytes_per_gb / params\n    unit: B/param\n    value: 16\n"
FP16_ALIASES = "    aliases: [float16, half, f16]\n"
WHICH = "flows/which_gpu.yaml"
CYCLE_EDGE = "      - {to: TASK, when: is_pretrain, label: start over}\n"
QL_EDGE = "      - {to: QL_SIZE, when: is_lora or is_qlora, label: LoRA/QLoRA}\n"
DEEP_V100 = V100.replace("vram_gb: 32", "vram_gb: " + "[" * 50 + "]" * 50)
PARENS = "(" * 61 + "decode_bytes_per_step_gb / effective_bandwidth_gb_s" + ")" * 61
KV_PER_USER = ("    expr: kv_values_per_token_layer * kv_bytes_per_value * ((model.attention_layers - "
               "model.sliding_window_layers) * context_tokens + model.sliding_window_layers * "
               "kv_window_tokens) / bytes_per_gb + recurrent_state_gb_per_user\n")
FIRST_REFERENCE = "serve 70B int4 16 users on h100"      # the first of query.yaml reference_queries
CYCLE_MSG = "the flow has a cycle: TASK → FT → TASK"

CASES = [
    Case("unknown-native-gemm-precision", "runtimes.yaml", "    native_gemm: [fp8, int8]\n",
         "    native_gemm: [fp8, int88]\n",
         (("int88", "unknown precision 'int88' (did you mean 'int8'?)"),)),
    Case("unknown-key-suggestion", "gpus.yaml", V100,
         V100.replace("bandwidth_gb_s: 900", "bandwith_gb_s: 900"),
         (("bandwith_gb_s", "unknown key 'bandwith_gb_s' (did you mean 'bandwidth_gb_s'?)"),
          (V100_ID, "missing key 'bandwidth_gb_s' in gpus[v100-sxm2-32gb]"))),
    Case("missing-key", "gpus.yaml", V100, V100.replace("    memory_type: HBM2\n", ""),
         ((V100_ID, "missing key 'memory_type' in gpus[v100-sxm2-32gb]"),)),
    Case("wrong-type", "gpus.yaml", V100, V100.replace("vram_gb: 32", "vram_gb: lots"),
         (("lots", ("gpus[v100-sxm2-32gb].vram_gb: Input should be a valid number, unable to parse string "
                   "as a number")),)),
    Case("invalid-literal-suggestion", "gpus.yaml", V100,
         V100.replace("vendor: nvidia", "vendor: nvidai"),
         (("nvidai", ("gpus[v100-sxm2-32gb].vendor: 'nvidai' is not one of nvidia, amd, intel, apple, google, aws "
                     "(did you mean 'nvidia'?)")),)),
    # records are named by id where they have one, by position where they do not
    Case("flow-node-named-by-id", WHICH, "  - id: FT_SIZE\n    kind: question\n",
         "  - id: FT_SIZE\n    kind: questoin\n",
         (("questoin", ("nodes[FT_SIZE].kind: 'questoin' is not one of start, question, compute, "
                       "verdict (did you mean 'question'?)")),)),
    Case("record-without-id-by-position", "runtimes.yaml",
         "        set: {offload: true}\n        text: \"torchtune's one-node 70B",
         "        set: {offload: true}\n        txt: \"torchtune's one-node 70B",
         (("txt", "unknown key 'txt' (did you mean 'text'?)"),
          ((Find("      - when: {tasks: [full_ft], min_gpus: 2", "when")),
           "missing key 'text' in runtimes[torchtune].recipes[1]"))),
    Case("yaml-syntax", "precisions.yaml", FP16_ALIASES, "    aliases: [float16, half, f16]]\n",
         (("]\n", "YAML: expected <block end>, but found ']'"),)),
    Case("python-tag", "gpus.yaml", V100,
         V100.replace("vram_gb: 32", 'vram_gb: !!python/object/apply:os.system ["touch PWNED"]'),
         (("!!python", ("the tag tag:yaml.org,2002:python/object/apply:os.system is not "
                       "allowed; rule files hold plain data only")),)),
    Case("duplicate-key", "gpus.yaml", V100,
         V100.replace("    vram_gb: 32\n", "    vram_gb: 32\n    vram_gb: 40\n"),
         (("vram_gb: 40", "duplicate key 'vram_gb'"),)),
    Case("duplicate-id", "gpus.yaml", T4, T4.replace("id: t4", "id: v100-sxm2-32gb"),
         (("v100-sxm2-32gb", "duplicate id 'v100-sxm2-32gb'"),)),
    Case("duplicate-alias", "gpus.yaml", T4_ALIASES,
         T4_ALIASES.replace("kaggle t4]", "kaggle t4, tesla v100]"),
         (("tesla v100", "alias 'tesla v100' already names 'v100-sxm2-32gb'"),)),
    Case("unknown-source-suggestion", "gpus.yaml", "    form_factor: SXM2\n    source: nvidia-v100-datasheet\n",
         "    form_factor: SXM2\n    source: nvidia-v100-datashet\n",
         (("nvidia-v100-datashet", ("unknown source 'nvidia-v100-datashet' "
                                   "(did you mean 'nvidia-v100-datasheet'?)")),)),
    Case("expression-syntax-column", "formulas.yaml", STEP_MEM,
         "    expr: decode_bytes_per_step_gb / * effective_bandwidth_gb_s\n",
         (("* effective", "unexpected '*'"),)),
    Case("unknown-name-suggestion", "formulas.yaml", STEP_MEM,
         "    expr: decode_bytes_per_step_gb / efective_bandwidth_gb_s\n",
         (("efective", ("unknown name 'efective_bandwidth_gb_s' "
                       "(did you mean 'effective_bandwidth_gb_s'?)")),)),
    Case("cascade-from-a-broken-formula", "formulas.yaml", HEADROOM,
         "    expr: usable_vram_gb - per_gpu_bg\n",
         (("per_gpu_bg", "unknown name 'per_gpu_bg' (did you mean 'per_gpu_gb'?)"),)),
    Case("unit-mismatch", "formulas.yaml", WEIGHTS_READ,
         "      - expr: active_params * weight_bytes_per_param\n",
         (("active_params", "units: the expression gives B, expected GB"),)),
    Case("unit-mismatch-sum", "formulas.yaml", HEADROOM,
         "    expr: usable_vram_gb - per_gpu_gb + bytes_per_gb\n",
         (("usable_vram_gb", "units: '+': GB and B/GB do not agree"),)),
    Case("formula-cycle", "formulas.yaml", MODEL_STATE,
         "    expr: total_gb - kv_cache_gb - activations_gb - overhead_gb\n",
         ((Find("  model_state_gb:\n", "model_state_gb"),
           "formulas depend on each other in a cycle: model_state_gb → total_gb → model_state_gb"),)),
    Case("edge-to-unknown-node", WHICH, "      - {to: FT_SIZE, label: Full fine-tune}\n",
         "      - {to: FT_SIZ, label: Full fine-tune}\n",
         (("FT_SIZ", "edge to unknown node 'FT_SIZ' (did you mean 'FT_SIZE'?)"),)),
    # two edges between the same nodes would be one edge of the knowledge graph, which the walk follows
    Case("second-edge-to-the-same-node", WHICH, "      - {to: FT_SIZE, label: Full fine-tune}\n",
         "      - {to: FT_SIZE, when: params > 1e12, label: Huge}\n"
         "      - {to: FT_SIZE, label: Full fine-tune}\n",
         (("FT_SIZE, label: Full", ("a second edge from 'FT' to 'FT_SIZE'; join the two conditions "
                              "with 'or' in one edge")),)),
    Case("unreachable-node", "flows/compute_or_bandwidth.yaml",
         "      - {to: E, when: is_lora or is_qlora, label: LoRA/QLoRA}\n",
         "      - {to: G, when: is_lora or is_qlora, label: LoRA/QLoRA}\n",
         ((Find("  - id: E\n", "E"), "node 'E' cannot be reached from the entry 'A'"),)),
    Case("flow-cycle", WHICH, QL_EDGE, CYCLE_EDGE + QL_EDGE,
         (("TASK", CYCLE_MSG),)),                 # at the edge FT → TASK that closes the cycle
    Case("last-edge-has-condition", WHICH, "      - {to: INF_MULTI, label: Needs >48 GB}\n",
         "      - {to: INF_MULTI, when: total_gb > 48, label: Needs >48 GB}\n",
         (("{to: INF_MULTI", ("the last edge of 'INF_SIZE' has a condition, so some workloads "
                             "match no branch; leave its 'when' out to make it the otherwise "
                             "branch")),)),
    Case("flow-unknown-key", WHICH, "      - {to: FT_SIZE, label: Full fine-tune}\n",
         "      - {to: FT_SIZE, lable: Full fine-tune}\n",
         (("lable", "unknown key 'lable' (did you mean 'label'?)"),)),
    Case("unknown-default-precision-word", "query.yaml", "  optimizer: adamw\n",
         "  optimizer: adamv\n",
         (("adamv", ("defaults.optimizer: 'adamv' is not one of adamw, adam8bit, sgd "
                    "(did you mean 'adamw'?)")),)),
    Case("edge-condition-not-bool", WHICH, "when: total_gb <= 20, label: Fits", "when: total_gb, label: Fits",
         (("total_gb", "units: the expression gives GB, expected bool"),)),
    Case("unknown-formula-in-compute", WHICH, "    text: Model + precision fits in VRAM?\n    compute: [total_gb]\n",
         "    text: Model + precision fits in VRAM?\n    compute: [totl_gb]\n",
         (("totl_gb", "unknown formula 'totl_gb' (did you mean 'total_gb'?)"),)),
    Case("unknown-template-name", "flows/sizing.yaml",
         "{usable_vram_gb} GB per GPU on", "{usable_vram} GB per GPU on",
         (("usable_vram", "unknown name 'usable_vram' in the verdict text (did you mean 'usable_vram_gb'?)"),)),
    Case("claim-unknown-name", "sources.yaml", ADAMW_CLAIM,
         ADAMW_CLAIM.replace("/ params\n", "/ param\n"),
         (("param\n", "unknown name 'param' (did you mean 'params'?)"),)),
    Case("unknown-default-precision", "query.yaml", "  inference_precision: fp16\n",
         "  inference_precision: fp61\n",
         (("fp61", "unknown precision 'fp61' (did you mean 'fp16'?)"),)),
    Case("empty-file", "precisions.yaml", None, "", (((1, 1), "file is empty"),)),
    Case("comments-only-file", "precisions.yaml", None, "# nothing yet\n",
         (((1, 1), "file is empty"),)),
    Case("huge-number-yaml", "gpus.yaml", V100, V100.replace("vram_gb: 32", "vram_gb: 1e999"),
         (("1e999", "gpus[v100-sxm2-32gb].vram_gb: Input should be a finite number"),)),
    Case("huge-number-expression", "formulas.yaml", STEP_MEM,
         "    expr: decode_bytes_per_step_gb / effective_bandwidth_gb_s * 1e400\n",
         (("1e400", "number 1e400 is too large"),)),
    Case("deep-nesting-yaml", "gpus.yaml", V100, DEEP_V100,
         # the value of vram_gb is at depth 3 (file, gpus, item): the 39th '[' is at depth 41
         ((DEEP_V100.index("[[") + 38, "nested deeper than 40 levels"),)),
    Case("deep-nesting-expression", "formulas.yaml", STEP_MEM, f"    expr: {PARENS}\n",
         (("(", "expression nested deeper than 60 levels"),)),
    # a formula that no reference workload (query.yaml reference_queries) computes to a number
    Case("formula-never-finite", "formulas.yaml", KV_PER_USER, KV_PER_USER.replace(
        "/ bytes_per_gb + recurrent", "/ bytes_per_gb / 0 + recurrent"),
         (("kv_values_per_token_layer", ("kv_cache_gb_per_user is never a finite number on the "
                                         "reference workloads (query.yaml reference_queries) ("
                                         f"{FIRST_REFERENCE}: division by zero)")),)),
    Case("merge-key", "gpus.yaml", V100, V100.replace("    vram_gb: 32\n", "    <<: {vram_gb: 32}\n"),
         (("<<", "YAML merge keys (<<) are not used"),)),
]


def _position(text: str, index: int) -> tuple[int, int]:
    line = text.count("\n", 0, index) + 1
    return line, index - (text.rfind("\n", 0, index) + 1) + 1


def _edit(case: Case, original: str) -> tuple[str, int]:
    """The edited text and where `new` starts in it."""
    if case.old is None:
        return case.new, 0
    assert original.count(case.old) == 1, f"{case.id}: the text to edit is not unique in {case.file}"
    start = original.index(case.old)
    return original[:start] + case.new + original[start + len(case.old):], start


def _where(case: Case, where: Where, edited: str, start: int) -> tuple[int, int]:
    if isinstance(where, tuple):
        return where
    if isinstance(where, Find):
        assert edited.count(where.text) == 1, f"{case.id}: {where.text!r} is not unique"
        return _position(edited, edited.index(where.text) + where.text.index(where.at))
    if isinstance(where, int):
        return _position(edited, start + where)
    return _position(edited, start + case.new.index(where))


def broken_copy(case: Case, tmp_path: Path) -> tuple[Path, list[str]]:
    """A copy of rules/ with the case's defect, and the stderr lines kbq should print."""
    root = tmp_path / "rules"
    shutil.copytree(RULES, root)
    target = root / case.file
    edited, start = _edit(case, target.read_text(encoding="utf-8"))
    target.write_text(edited, encoding="utf-8")
    lines = []
    for where, message in case.errors:
        line, col = _where(case, where, edited, start)
        lines.append(f"rules/{case.file}:{line}:{col}: {message}")
    return root, lines


def _params() -> list[Any]:
    out = []
    for case in CASES:
        marks: list[Any] = list(case.marks)
        if case.known_issue:
            marks.append(pytest.mark.xfail(reason=case.known_issue, strict=True))
        out.append(pytest.param(case, id=case.id, marks=marks))
    return out


@pytest.mark.parametrize("case", _params())
def test_broken_rules_give_exact_errors(case: Case, tmp_path: Path) -> None:
    root, expected = broken_copy(case, tmp_path)
    result = kbq("validate", str(root), cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    got = result.stderr.splitlines()
    assert got[-1] == f"{len(expected)} error(s)"
    assert sorted(got[:-1]) == sorted(expected)


def test_there_are_enough_broken_fixtures() -> None:
    assert len([c for c in CASES if not c.known_issue]) >= 22
    assert len({c.id for c in CASES}) == len(CASES)


def test_python_tag_is_refused_not_run(tmp_path: Path) -> None:
    case = next(c for c in CASES if c.id == "python-tag")
    root, _ = broken_copy(case, tmp_path)
    for cwd in (tmp_path, root):
        kbq("validate", str(root), cwd=cwd)
        kbq("--rules", str(root), "infer 7B", cwd=cwd)
        assert not (cwd / "PWNED").exists()


# ---------------------------------------------------------------- whole runs

def test_shipped_rules_are_clean() -> None:
    result = kbq("validate")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert ": ok — " in result.stdout


def test_a_file_path_checks_its_rules_directory(tmp_path: Path) -> None:
    case = next(c for c in CASES if c.id == "edge-to-unknown-node")
    root, expected = broken_copy(case, tmp_path)
    for path in (root / "gpus.yaml", root / WHICH):
        result = kbq("validate", str(path))
        assert result.returncode == 2
        assert result.stderr.splitlines() == [*expected, "1 error(s)"]


def _combined(tmp_path: Path, picks: list[str]) -> tuple[Path, list[str]]:
    """One rules copy with the defects of several cases (each in a different file)."""
    root = tmp_path / "rules"
    shutil.copytree(RULES, root)
    expected: list[str] = []
    for cid in picks:
        case = next(c for c in CASES if c.id == cid)
        one_root, lines = broken_copy(case, tmp_path / cid)
        shutil.copy(one_root / case.file, root / case.file)
        expected += lines
    return root, expected


def test_every_schema_error_of_every_file_in_one_run(tmp_path: Path) -> None:
    root, expected = _combined(tmp_path, ["unknown-key-suggestion", "yaml-syntax",
                                          "flow-unknown-key", "unknown-default-precision-word"])
    result = kbq("validate", str(root))
    assert result.returncode == 2
    assert sorted(result.stderr.splitlines()[:-1]) == sorted(expected)
    assert result.stderr.splitlines()[-1] == f"{len(expected)} error(s)"


def test_every_cross_file_error_in_one_run(tmp_path: Path) -> None:
    root, expected = _combined(tmp_path, ["edge-to-unknown-node", "unknown-template-name",
                                          "claim-unknown-name", "unit-mismatch",
                                          "unknown-source-suggestion"])
    result = kbq("validate", str(root))
    assert result.returncode == 2
    assert sorted(result.stderr.splitlines()[:-1]) == sorted(expected)
    assert len(expected) == 5


def test_schema_errors_do_not_hide_cross_file_errors(tmp_path: Path) -> None:
    root, expected = _combined(tmp_path, ["invalid-literal-suggestion", "edge-to-unknown-node",
                                          "claim-unknown-name"])
    result = kbq("validate", str(root))
    assert sorted(result.stderr.splitlines()[:-1]) == sorted(expected)


def test_several_directories_in_one_run(tmp_path: Path) -> None:
    case = next(c for c in CASES if c.id == "unknown-name-suggestion")
    root, expected = broken_copy(case, tmp_path)
    result = kbq("validate", str(RULES), str(root))
    assert result.returncode == 2
    assert ": ok — " in result.stdout
    assert result.stderr.splitlines() == [*expected, "1 error(s)"]


# PyYAML notices an unclosed bracket or quote later: at the ':' of the next key, or at the end
# of the file. The error stands where it opened, and names where it was noticed.
BRACE = V100.replace("vram_gb: 32", "vram_gb: {gb: 32")
UNCLOSED = [
    ("bracket", FP16_ALIASES, "    aliases: [float16, half, f16\n", "[",
     Find("    source: 003_d80bd7f97616bc0e\n  - id: bf16", ":"), "expected ',' or ']', but got ':'"),
    ("brace", V100, BRACE, "{", BRACE.index("memory_bytes:") + len("memory_bytes"), "expected ',' or '}', but got ':'"),
    # the last double quote of precisions.yaml: left open, it runs to the end of the file
    ("quote", '"exl2 8bpw"]\n', '"exl2 8bpw]\n', '"', None, "found unexpected end of stream"),
]


@pytest.mark.parametrize("kind, old, new, opener, noticed, problem", UNCLOSED,
                         ids=[u[0] for u in UNCLOSED])
def test_an_unclosed_bracket_or_quote_is_reported_where_it_opened(
        tmp_path: Path, kind: str, old: str, new: str, opener: str, noticed: Find | int | None,
        problem: str) -> None:
    file = "gpus.yaml" if kind == "brace" else "precisions.yaml"
    case = Case(f"unclosed-{kind}", file, old, new, ())
    root, _ = broken_copy(case, tmp_path)
    edited, start = _edit(case, (RULES / file).read_text(encoding="utf-8"))
    line, col = _position(edited, start + new.index(opener))
    if noticed is None:              # a quote runs to the end of the file: noticed there
        at = (edited.count("\n") + 1, 1)
    else:
        at = _where(case, noticed, edited, start)
    result = kbq("validate", str(root))
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"rules/{file}:{line}:{col}: YAML: this {opener} is not closed "
        f"(noticed at rules/{file}:{at[0]}:{at[1]}: {problem})", "1 error(s)"]


def test_a_constant_of_zero_is_named_where_it_is_set(tmp_path: Path) -> None:
    """bytes_per_gb: 0 makes every memory figure a division by zero. The error stands at the 0,
    and names the formulas that divide by it directly (weights_gb is one: its expressions end
    in '/ bytes_per_gb'), not every formula that reads what they give."""
    case = Case("zero-constant", "formulas.yaml", "  bytes_per_gb: {value: 1.0e9,",
                "  bytes_per_gb: {value: 0,", ())
    root, _ = broken_copy(case, tmp_path)
    edited, start = _edit(case, (RULES / case.file).read_text(encoding="utf-8"))
    line, col = _position(edited, start + case.new.index("0,"))
    result = kbq("validate", str(root))
    assert result.returncode == 2
    at_zero = [e for e in result.stderr.splitlines()
               if e.startswith(f"rules/formulas.yaml:{line}:{col}: constant bytes_per_gb is 0, and ")]
    assert len(at_zero) == 1, result.stderr
    assert "weights_gb" in at_zero[0] and "divide by it" in at_zero[0]
    assert "total_gb" not in at_zero[0]          # it reads weights_gb; it does not divide by 0
    assert "Traceback" not in result.stderr


def test_yaml_aliases_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "rules"
    shutil.copytree(RULES, root)
    lines = ["x0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"x{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 5)]
    (root / "models.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = kbq("validate", str(root))
    assert result.returncode == 2
    first = result.stderr.splitlines()[0]
    assert first.startswith(f"rules/models.yaml:2:{lines[1].index('*a0') + 1}: ")
    assert "YAML: aliases (*a0) are not used in rule files" in first


# ---------------------------------------------------------------- JSON Schema files

def _cli_schema_names() -> set[str]:
    from kb.cli.rulefiles import schema

    return set(schema.params[0].type.choices)  # type: ignore[attr-defined]


def _schema_name_params() -> list[Any]:
    offered = _cli_schema_names()
    return [pytest.param(name, marks=[] if name in offered else [pytest.mark.xfail(
        strict=True, reason=f"kbq schema does not offer '{name}': its list of names in "
        "kb/cli/rulefiles.py is written out by hand instead of taken from kb.knowledge.schema.FILES")])
        for name in FILES]


def test_every_kind_in_the_brief_has_a_schema() -> None:
    assert set(SCHEMA_NAMES) <= set(FILES)


@pytest.mark.parametrize("name", _schema_name_params())
def test_committed_schema_is_what_kbq_prints(name: str) -> None:
    printed = kbq("schema", name)
    assert printed.returncode == 0, printed.stderr
    committed = (RULES / "schema" / f"{name}.schema.json").read_text(encoding="utf-8")
    assert committed == printed.stdout, f"regenerate: kbq schema {name} > rules/schema/{name}.schema.json"


@pytest.mark.parametrize("name", list(FILES))
def test_committed_schema_is_current(name: str) -> None:
    """The same check without the CLI, for every kind kb.knowledge.schema knows."""
    committed = (RULES / "schema" / f"{name}.schema.json").read_text(encoding="utf-8")
    assert committed == dump(json_schema(name)), f"regenerate rules/schema/{name}.schema.json"


def _rule_files() -> list[Path]:
    return sorted(RULES.glob("*.yaml")) + sorted((RULES / "flows").glob("*.yaml"))


@pytest.mark.parametrize("path", _rule_files(), ids=lambda p: p.relative_to(RULES).as_posix())
def test_each_rule_file_names_its_schema(path: Path) -> None:
    kind = "flow" if path.parent.name == "flows" else path.stem
    first = path.read_text(encoding="utf-8").splitlines()[0]
    prefix = "# yaml-language-server: $schema="
    assert first.startswith(prefix)
    schema = (path.parent / first[len(prefix):]).resolve()
    assert schema == (RULES / "schema" / f"{kind}.schema.json").resolve()
    assert json.loads(schema.read_text(encoding="utf-8"))["title"] == f"kbq rules: {kind}"


def _schema_params() -> list[Any]:
    out = []
    for path in _rule_files():
        marks = []
        out.append(pytest.param(path, id=path.relative_to(RULES).as_posix(), marks=marks))
    return out


@pytest.mark.parametrize("path", _schema_params())
def test_shipped_rule_files_pass_their_published_schema(path: Path) -> None:
    """What an editor checks with the JSON Schema agrees with kbq on the shipped files."""
    jsonschema = pytest.importorskip("jsonschema")
    from kb.knowledge.loader import load

    kind = "flow" if path.parent.name == "flows" else path.stem
    schema = json.loads((RULES / "schema" / f"{kind}.schema.json").read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    problems = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
                for e in validator.iter_errors(load(path, RULES).data)]
    assert problems == []


def test_schema_rejects_a_misspelt_key_as_kbq_does() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((RULES / "schema" / "gpus.schema.json").read_text(encoding="utf-8"))
    from kb.knowledge.loader import load

    data = load(RULES / "gpus.yaml", RULES).data
    gpu = dict(data["gpus"][0])
    gpu["bandwith_gb_s"] = gpu.pop("bandwidth_gb_s")
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors({"gpus": [gpu]}))
    assert {e.validator for e in errors} == {"additionalProperties", "required"}


# ---------------------------------------------------------------- the editors' guide

DOC = Path(__file__).resolve().parent.parent / "docs" / "rules.md"


def test_the_guide_covers_the_expression_language() -> None:
    from kb.expr import parse as ex
    from kb.knowledge.schema import NodeSchema

    text = DOC.read_text(encoding="utf-8")
    for fn in ex.FUNCTIONS:
        assert f"`{fn}(" in text, fn
    for word in ex.COUNTS:
        assert f"`{word}`" in text, word
    for op in ("+", "-", "*", "/", "^", "<", "<=", ">", ">=", "==", "!=", "and", "or"):
        assert f"`a {op} b`" in text, op
    assert "`not a`" in text and "`-a`" in text
    for field_name in ("kind", "style"):
        for word in _literals(NodeSchema.model_fields[field_name].annotation):
            assert f" {word} " in text or f" {word}\n" in text, word
    for command in ("kbq validate", "kbq export --format markdown --out", "kbq export flow",
                    "kbq schema NAME"):
        assert command in text


def _literals(tp: Any) -> list[str]:
    if typing.get_origin(tp) is typing.Literal:
        return [str(a) for a in typing.get_args(tp)]
    return [w for arg in typing.get_args(tp) for w in _literals(arg)]


UNKNOWN_NAME = ("formulas.yaml", "model_state_gb + kv_cache_gb", "model_state_gbb + kv_cache_gb",
                "unknown name 'model_state_gbb' (did you mean 'model_state_gb'?)")
UNKNOWN_GPU_KEY = ("gpus.yaml", "\n    vram_gb:", "\n    vram_gbb:", "unknown key 'vram_gbb'")


@pytest.mark.parametrize(("broken", "other"), [
    ("gpus.yaml", UNKNOWN_NAME), ("models.yaml", UNKNOWN_NAME), ("sources.yaml", UNKNOWN_NAME),
    ("precisions.yaml", UNKNOWN_NAME), ("formulas.yaml", UNKNOWN_GPU_KEY),
])
def test_a_yaml_error_does_not_hide_errors_in_other_files(tmp_path: Path, broken, other) -> None:
    # an unclosed flow sequence in one file, a bad name or key in another: both reported
    root = tmp_path / "rules"
    shutil.copytree(RULES, root)
    path = root / broken
    text = path.read_text(encoding="utf-8")
    path.write_text("oops: [unclosed\n" + text, encoding="utf-8")
    other_file, old, new, message = other
    other_path = root / other_file
    other_text = other_path.read_text(encoding="utf-8")
    assert old in other_text
    other_path.write_text(other_text.replace(old, new, 1), encoding="utf-8")
    r = kbq("validate", str(root))
    assert r.returncode == 2
    assert f"rules/{broken}:" in r.stderr and "YAML" in r.stderr
    assert f"rules/{other_file}:" in r.stderr and message in r.stderr, r.stderr
