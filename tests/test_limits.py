"""Bounds on what enters kbq: name lengths, numeric options, prices, and formulas that no
workload of a kind can compute.

Each CLI case runs the installed `kbq` console script, as a user does: a bad value ends as exit 2
with a message that says what was wrong, never a traceback, an "internal error" or a silently
empty listing. Rule-file errors are compared at the position the edit put them (computed from the
edited text, not copied from kbq's output).
"""

from __future__ import annotations

import io
import json
import math
import shutil
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from kb import get_knowledge
from kb.paths import rules_dir
from kb.query.words import vocab_of

KBQ = shutil.which("kbq")
pytestmark = pytest.mark.skipif(KBQ is None, reason="the kbq console script is not installed")
RULES = rules_dir()
CAP = 200           # kb.paths.MAX_NAME_CHARS, as the README states it
LLAMA = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
         "num_key_value_heads": 8, "vocab_size": 128256, "intermediate_size": 14336,
         "max_position_embeddings": 131072, "model_type": "llama"}   # Llama-3.1-8B's config.json


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    assert KBQ is not None
    return subprocess.run([KBQ, *args], capture_output=True, text=True, cwd=cwd, timeout=300,
                          check=False)


def refused(r: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stderr[-600:])
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr[-600:]
    for fragment in fragments:
        assert fragment in r.stderr, (fragment, r.stderr[-600:])


def edited_rules(tmp_path: Path, file: str, old: str, new: str,
                 start: int | None = None) -> tuple[Path, str, int]:
    """A copy of rules/ with `old` (unique, or the one at `start`) replaced by `new` in `file`;
    the edited text and where `new` starts in it."""
    root = tmp_path / "rules"
    shutil.copytree(RULES, root)
    path = root / file
    text = path.read_text(encoding="utf-8")
    if start is None:
        assert text.count(old) == 1, f"{old!r} is not unique in {file}"
        start = text.index(old)
    assert text[start:start + len(old)] == old
    edited = text[:start] + new + text[start + len(old):]
    path.write_text(edited, encoding="utf-8")
    return root, edited, start


def position(text: str, index: int) -> tuple[int, int]:
    return text.count("\n", 0, index) + 1, index - (text.rfind("\n", 0, index) + 1) + 1


# ---------------------------------------------------------------- names: the vocabulary

def test_the_vocabulary_does_not_grow_with_the_square_of_a_name() -> None:
    """Every prefix of a 20,000-character name is 20,000 strings of 10,000 characters on
    average: ~200 MB. The name itself is 20 kB; building the vocabulary with it must cost
    about that, not its square (5 MB allows the shipped vocabulary's own ~1 MB several times)."""
    from dataclasses import replace

    from kb.query.words import vocabulary

    kn = get_knowledge()
    model = {**next(iter(kn.models.values())), "id": "long-family", "family": "x" * 20_000, "aliases": []}
    view = replace(kn, models={**kn.models, "long-family": model})
    tracemalloc.start()
    try:
        vocab = vocabulary(view)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert vocab.table["x" * 20_000] == ("family", "x" * 20_000)
    assert peak < 5_000_000, f"{peak / 1e6:.0f} MB"


def test_a_key_prefix_is_found_exactly_as_the_set_of_every_prefix_found_it() -> None:
    """The reference is the former structure itself, built here: every non-empty prefix of
    every key of the table and the unit words."""
    from kb.query.words import has_prefix

    vocab = vocab_of(get_knowledge())
    keys = [*vocab.table, *vocab.units]
    every = {k[:i] for k in keys for i in range(1, len(k) + 1)}
    probes = every | {p + c for p in list(every)[::7] for c in "az09.~"} | {"", "~", "zzzzzz"}
    wrong = [p for p in probes if has_prefix(vocab, p) != (p in every)]
    assert not wrong, wrong[:10]


# ---------------------------------------------------------------- names: where they enter

LONG = "x" * (CAP + 1)


@pytest.mark.parametrize("file, old, new, at", [
    ("gpus.yaml", "    aliases: [t4, tesla t4,", f"    aliases: [t4, {LONG}, tesla t4,", LONG),
    ("query.yaml", "  qlora: [qlora]\n", f"  qlora: [qlora, {LONG}]\n", LONG),
    ("formulas.yaml", "  kv_cache_gb:\n", f"  {LONG}:\n    unit: GB\n    meaning: m\n    expr: 1\n"
     "    sources: [kwon-2023-pagedattention]\n  kv_cache_gb:\n", LONG),
], ids=["gpu-alias", "query-word", "formula-name"])
def test_a_name_past_the_cap_in_a_rule_file_is_refused_where_it_stands(
        tmp_path: Path, file: str, old: str, new: str, at: str) -> None:
    root, edited, start = edited_rules(tmp_path, file, old, new)
    line, col = position(edited, start + new.index(at))
    r = run("validate", str(root), cwd=tmp_path)
    refused(r, f"rules/{file}:{line}:{col}: ", f"is {CAP + 1} characters long; a name has at most {CAP}")
    assert r.stderr.splitlines()[-1] == "1 error(s)"
    assert LONG not in r.stderr                 # said short, not echoed whole


@pytest.mark.parametrize("key, value", [
    ("model_type", "x" * 100_000), ("model_type", "x" * 300_000),
    ("_name_or_path", "org/" + "y" * 300), ("architectures", ["LlamaForCausalLM", "z" * 500]),
], ids=["model_type-100k", "model_type-300k", "name_or_path", "architectures"])
def test_a_config_json_name_past_the_cap_is_refused(tmp_path: Path, key: str, value: Any) -> None:
    (tmp_path / "config.json").write_text(json.dumps({**LLAMA, key: value}))
    r = run("--json", "--model-config", "config.json", "serve 4 users", cwd=tmp_path)
    longest = max(len(v) for v in (value if isinstance(value, list) else [value]))
    refused(r, f"config.json: {key} is {longest} characters long; a name has at most {CAP}")


def test_a_config_json_name_at_the_cap_answers(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({**LLAMA, "_name_or_path": "n" * CAP}))
    r = run("--json", "--model-config", "config.json", "serve 4 users", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-400:]


def test_a_query_word_past_the_cap_is_refused_with_a_caret(tmp_path: Path) -> None:
    query = f"serve {LONG} on h100"
    r = run(query, cwd=tmp_path)
    refused(r, f"at column 7: a word of {CAP + 1} characters; a name has at most {CAP}")
    lines = r.stderr.splitlines()
    assert lines[2] == "  " + " " * 6 + "^" * (CAP + 1)


# ---------------------------------------------------------------- formulas no workload computes

KV_CASE = "        expr: kv_cache_gb_per_user * sequences * kv_held_share\n"
LORA_OPTIMIZER = "        expr: lora_params * optimizer_bytes_per_param / bytes_per_gb\n"


@pytest.mark.parametrize("old, divisor, formula, kinds", [
    (KV_CASE, " / (users - users)", "kv_cache_gb", "infer, serve and prefill"),
    (LORA_OPTIMIZER, " / (seq_len - seq_len)", "optimizer_gb", "lora and qlora"),
], ids=["inference-kv-cache", "lora-optimizer"])
def test_a_formula_never_finite_on_a_kind_it_applies_to_is_refused(
        tmp_path: Path, old: str, divisor: str, formula: str, kinds: str) -> None:
    """Finite for the other kinds (their case is another), so the reference workloads, which
    span both, pass it; every answer of these kinds would then say Unknown."""
    new = old.rstrip("\n") + divisor + "\n"
    root, edited, start = edited_rules(tmp_path, "formulas.yaml", old, new)
    line, col = position(edited, start + new.index("expr: ") + len("expr: "))
    r = run("validate", str(root), cwd=tmp_path)
    refused(r, f"rules/formulas.yaml:{line}:{col}: {formula} is never a finite number for {kinds} "
               "workloads", "division by zero", "give it a case for the workloads it does not apply to")
    assert r.stderr.splitlines()[-1] == "1 error(s)"


def test_a_formula_finite_on_some_workloads_of_each_kind_still_validates(tmp_path: Path) -> None:
    """(users - 1) / (users - 1) fails at 1 user only: not a formula that is never finite."""
    old = "kv_compressed_values_per_user) / bytes_per_gb + kv_indexer_gb_per_user + recurrent_state_gb_per_user\n"
    root, _, _ = edited_rules(tmp_path, "formulas.yaml", old, old.replace(
        "/ bytes_per_gb", "/ bytes_per_gb * (users - 1) / (users - 1)"))
    r = run("validate", str(root), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-600:]


def test_the_generated_workloads_span_every_task_precision_and_size() -> None:
    from kb.engine import resolve_workload
    from kb.query.parse import parse
    from kb.engine.flows.sweep import AXES, PER_TASK, workload_queries

    kn = get_knowledge()
    made = workload_queries(kn)
    tasks = [t for t, _ in made]
    assert set(tasks) == set(kn.query["tasks"]) and all(tasks.count(t) == PER_TASK for t in set(tasks))
    for _, query in made:
        resolve_workload(parse(query, kn), kn)               # each is a workload the rules answer
    words = " ".join(q for _, q in made).split()
    assert set(kn.precisions) <= set(words)
    for unit in AXES:                               # the limits' ends and the default are met
        spec = kn.query["units"][unit]
        lo, hi = kn.query["limits"][spec["limit"]]
        said = {int(a) for a, b in zip(words, words[1:]) if b == spec["words"][0] and a.isdigit()}
        assert {max(1, int(lo)), int(math.sqrt(max(lo, 1) * hi))} <= said, unit


# ---------------------------------------------------------------- numeric options

@pytest.mark.parametrize("args, fragment", [
    (["gpus", "--min-vram", "nan"], "'--min-vram': 'nan' is not a finite number"),
    (["gpus", "--min-vram", "inf"], "'--min-vram': 'inf' is not a finite number"),
    (["gpus", "--min-vram", "-1"], "'--min-vram': '-1' is negative"),
    (["gpus", "--min-bandwidth", "nan"], "'--min-bandwidth': 'nan' is not a finite number"),
    (["gpus", "--max-price", "nan"], "'--max-price': 'nan' is not a finite number"),
    (["models", "--min-params", "inf"], "'--min-params': 'inf' is not a finite number"),
    (["models", "--min-context", "9" * 400], "--min-context: '9999999999999999999999999999999999999999…' "
     "is not a token count"),
    (["serve", "--cache-mb", "nan"], "'--cache-mb': 'nan' is not a finite number"),
    (["serve", "--cache-mb", "inf"], "'--cache-mb': 'inf' is not a finite number"),
    (["serve", "--connections-per-address", "0"], "'--connections-per-address': 0 is not in the range"),
    (["serve", "--forwarded-allow-ips", "127.0.0.1,proxy.local"],
     "'--forwarded-allow-ips': 'proxy.local' is not an IP address or network"),
    (["--batch", "-", "--jobs", "²"], "'--jobs': needs a number of processes"),
], ids=lambda v: " ".join(v)[:40] if isinstance(v, list) else None)
def test_a_bad_number_is_a_usage_error_that_says_what_was_wrong(tmp_path: Path, args: list[str],
                                                                 fragment: str) -> None:
    refused(run(*args, cwd=tmp_path), fragment)


def test_a_batch_file_that_fails_to_read_is_a_usage_error(tmp_path: Path) -> None:
    refused(run("--batch", "/proc/self/mem", cwd=tmp_path),
            "cannot read /proc/self/mem at line 1: Input/output error")


class _Pools:
    """multiprocessing.get_context('fork') as _batch uses it, recording the pools it starts."""

    def __init__(self) -> None:
        self.started: list[int] = []

    def __call__(self, method: str) -> _Pools:
        return self

    def Pool(self, processes: int, initializer: Any = None) -> _Pools:  # noqa: N802
        self.started.append(processes)
        return self

    def imap(self, fn: Any, items: Any, chunksize: int = 1) -> Any:
        return map(fn, items)

    def close(self) -> None: ...
    def terminate(self) -> None: ...
    def join(self) -> None: ...


@pytest.mark.parametrize("lines, started", [(2, []), (300, [5]), (5000, [64])])
def test_batch_jobs_are_capped_by_the_lines_and_a_maximum(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          lines: int, started: list[int]) -> None:
    """--jobs 1000: a 2-line batch starts no worker; 300 lines, shared 64 at a time, fill 5;
    a block of 4,096 lines fills 64 (kb.cli.query.MAX_JOBS), however many were asked for."""
    import multiprocessing

    from kb.cli import query as cli_query

    pools = _Pools()
    monkeypatch.setattr(multiprocessing, "get_context", pools)
    monkeypatch.setattr(cli_query, "_answer_line", lambda item: b"{}\n")
    batch = tmp_path / "q.txt"
    batch.write_text("serve 7B\n" * lines)
    out = io.TextIOWrapper(io.BytesIO())
    monkeypatch.setattr(sys, "stdout", out)
    from kb.cli.main import main

    assert main(["--batch", str(batch), "--jobs", "1000"]) == 0
    assert pools.started == started
    assert out.buffer.getvalue().count(b"\n") == lines


# ---------------------------------------------------------------- prices

PRICE_CASES = [
    ("purchase_usd", "true", "a price is a number, not true or false"),
    ("purchase_usd", "1e308", "Input should be less than or equal to 10000000"),
    ("purchase_usd", "1e-320", "Input should be greater than or equal to 10"),
    ("usd_per_hour", "1e-320", "Input should be greater than or equal to 0.01"),
    ("usd_per_hour", ".nan", "a price is a finite number, not nan"),
    ("usd_per_hour", "true", "a price is a number, not true or false"),
]


def _first_price(text: str, key: str) -> tuple[str, int]:
    """The first `key: number` of an entry of prices.yaml (after `prices:`, past the comments),
    and where it starts."""
    body = text.index("\nprices:")
    start = text.index(f"{key}: ", body)
    end = start + len(key) + 2
    while text[end] in "0123456789._":
        end += 1
    return text[start:end], start


@pytest.mark.parametrize("key, value, message", PRICE_CASES,
                         ids=[f"{k}={v}" for k, v, _ in PRICE_CASES])
def test_an_implausible_price_is_refused_in_the_rules_and_in_a_price_file(
        tmp_path: Path, key: str, value: str, message: str) -> None:
    text = (RULES / "prices.yaml").read_text(encoding="utf-8")
    old, at = _first_price(text, key)
    root, edited, start = edited_rules(tmp_path, "prices.yaml", old, f"{key}: {value}", at)
    line, col = position(edited, start + len(key) + 2)
    r = run("validate", str(root), cwd=tmp_path)
    refused(r, f"rules/prices.yaml:{line}:{col}: prices[0].", message)
    r = run("--prices", str(root / "prices.yaml"), "serve 7B", cwd=tmp_path)
    refused(r, f"prices.yaml:{line}:{col}: prices[0].", message)
