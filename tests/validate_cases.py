"""The broken rule fixtures of tests/test_validate.py: each a full copy of the shipped rules/ with
one defect, made at test time by a small text edit (the table CASES), with the errors kbq must
print at positions computed from the edited text."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kb.paths import rules_dir

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
STEP_MEM = "    expr: max(decode_bytes_per_step_gb - offload_read_gb, 0) / effective_bandwidth_gb_s + offload_step_s\n"
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
KV_PER_USER = ("    expr: kv_bytes_per_value * (kv_values_per_token_global_layer * (model.attention_layers - "
               "model.sliding_window_layers) * context_tokens + kv_values_per_token_layer * "
               "model.sliding_window_layers * kv_window_tokens + kv_compressed_values_per_user) / "
               "bytes_per_gb + kv_indexer_gb_per_user + recurrent_state_gb_per_user\n")
FIRST_REFERENCE = "serve 70B int4 16 users on h100"      # the first of query.yaml reference_queries
CYCLE_MSG = "the flow has a cycle: TASK → FT → TASK"

CASES = [
    Case("unknown-architecture-from", "models.yaml", "    architecture_from: deepseek-v3\n",
         "    architecture_from: deepseek-v33\n",
         (("deepseek-v33", "unknown model 'deepseek-v33' (did you mean 'deepseek-v3'?)"),)),
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
         "    expr: max(decode_bytes_per_step_gb - offload_read_gb, 0) / * effective_bandwidth_gb_s + offload_step_s\n",
         (("* effective", "unexpected '*'"),)),
    Case("unknown-name-suggestion", "formulas.yaml", STEP_MEM,
         "    expr: max(decode_bytes_per_step_gb - offload_read_gb, 0) / efective_bandwidth_gb_s + offload_step_s\n",
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
    Case("verdict-template-unknown-field", "query.yaml", '    sides_held: ", {more}× would hold it"\n',
         '    sides_held: ", {mroe}× would hold it"\n',
         (("mroe", "unknown field '{mroe}' in template 'sides_held'; it is filled with {more} (did you mean 'more'?)"),
          ('", {mroe}', "template 'sides_held' leaves out {more}, which the code fills"))),
    Case("verdict-template-format-spec", "query.yaml", "    borderline: \"Borderline: {spare} GB",
         "    borderline: \"Borderline: {spare:.1f} GB",
         (("spare:", "format ':.1f' of {spare} in template 'borderline': the code fills each field with text "
                     "already written out (kb.figures), which a format spec does not apply to"),)),
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
         "    expr: max(decode_bytes_per_step_gb - offload_read_gb, 0) / effective_bandwidth_gb_s + offload_step_s * 1e400\n",
         (("1e400", "number 1e400 is too large"),)),
    Case("deep-nesting-yaml", "gpus.yaml", V100, DEEP_V100,
         # the value of vram_gb is at depth 3 (file, gpus, item): the 39th '[' is at depth 41
         ((DEEP_V100.index("[[") + 38, "nested deeper than 40 levels"),)),
    Case("deep-nesting-expression", "formulas.yaml", STEP_MEM, f"    expr: {PARENS}\n",
         (("(", "expression nested deeper than 60 levels"),)),
    # a formula that no reference workload (query.yaml reference_queries) computes to a number
    Case("formula-never-finite", "formulas.yaml", KV_PER_USER, KV_PER_USER.replace(
        "/ bytes_per_gb + kv_indexer", "/ bytes_per_gb / 0 + kv_indexer"),
         (("kv_bytes_per_value", ("kv_cache_gb_per_user is never a finite number on the "
                                         "reference workloads (query.yaml reference_queries) ("
                                         f"{FIRST_REFERENCE}: division by zero)")),)),
    # an address every surface renders as a link: http(s) only, never a script to run
    Case("url-not-http", "sources.yaml", "    url: https://arxiv.org/abs/2001.08361\n",
         "    url: \"javascript:alert(1)\"\n",
         (("\"javascript", ("sources[kaplan-2020-scaling].url: an address must start with https:// "
                            "or http://, not 'javascript:alert(1)'")),)),
    Case("url-without-host", "sources.yaml", "    url: https://arxiv.org/abs/2001.08361\n",
         "    url: \"https:///abs/2001.08361\"\n",
         (("\"https:", ("sources[kaplan-2020-scaling].url: an address must name a host after https://, "
                        "not 'https:///abs/2001.08361'")),)),
    Case("merge-key", "gpus.yaml", V100, V100.replace("    vram_gb: 32\n", "    <<: {vram_gb: 32}\n"),
         (("<<", "YAML merge keys (<<) are not used"),)),
]


def position(text: str, index: int) -> tuple[int, int]:
    line = text.count("\n", 0, index) + 1
    return line, index - (text.rfind("\n", 0, index) + 1) + 1


def edited_text(case: Case, original: str) -> tuple[str, int]:
    """The edited text and where `new` starts in it."""
    if case.old is None:
        return case.new, 0
    assert original.count(case.old) == 1, f"{case.id}: the text to edit is not unique in {case.file}"
    start = original.index(case.old)
    return original[:start] + case.new + original[start + len(case.old):], start


def where_of(case: Case, where: Where, edited: str, start: int) -> tuple[int, int]:
    if isinstance(where, tuple):
        return where
    if isinstance(where, Find):
        assert edited.count(where.text) == 1, f"{case.id}: {where.text!r} is not unique"
        return position(edited, edited.index(where.text) + where.text.index(where.at))
    if isinstance(where, int):
        return position(edited, start + where)
    return position(edited, start + case.new.index(where))


def broken_copy(case: Case, tmp_path: Path) -> tuple[Path, list[str]]:
    """A copy of rules/ with the case's defect, and the stderr lines kbq should print."""
    root = tmp_path / "rules"
    shutil.copytree(RULES, root)
    target = root / case.file
    edited, start = edited_text(case, target.read_text(encoding="utf-8"))
    target.write_text(edited, encoding="utf-8")
    lines = []
    for where, message in case.errors:
        line, col = where_of(case, where, edited, start)
        lines.append(f"rules/{case.file}:{line}:{col}: {message}")
    return root, lines
