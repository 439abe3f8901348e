"""Hostile input to the command line ends as a usage error (exit 2, one line, no traceback).

--model-config files that are deep, huge, or hold sizes no model has; an export target that is
not a directory; unbounded inputs such as /dev/zero, a huge file beside the rules or a huge batch
line; rule files deeper than Python's recursion limit; SIGTERM to a batch.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

KBQ = shutil.which("kbq") or "kbq"
pytestmark = pytest.mark.usefixtures("kbq_installed")     # fails, never skips, without kbq

# A Llama-3.1-8B-shaped config.json (figures from meta-llama/Llama-3.1-8B config.json)
LLAMA = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
         "num_key_value_heads": 8, "vocab_size": 128256, "intermediate_size": 14336,
         "max_position_embeddings": 131072, "model_type": "llama"}


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([KBQ, *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def refused(r: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stderr[-400:])
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr[-400:]
    for fragment in fragments:
        assert fragment in r.stderr, (fragment, r.stderr[-400:])
    assert len(r.stderr) < 2000


def test_the_plain_config_answers(tmp_path: Path) -> None:
    """The base config is sound: every refusal below comes from its edit."""
    (tmp_path / "config.json").write_text(json.dumps(LLAMA))
    r = run("--json", "--model-config", "config.json", "serve 4 users", cwd=tmp_path)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("text, fragment", [
    ("[" * 100_000 + "]" * 100_000, "nested too deep"),
    ('{"hidden_size": ' + "9" * 5001 + "}", "too long"),
    ('{"hidden_size": 4096,\n "layers": }', "config.json:2:12"),
], ids=["100k-deep", "5001-digits", "syntax"])
def test_a_config_json_that_cannot_be_read_is_a_usage_error(tmp_path: Path, text: str,
                                                            fragment: str) -> None:
    (tmp_path / "config.json").write_text(text)
    refused(run("--json", "--model-config", "config.json", "serve 4 users", cwd=tmp_path), fragment)


@pytest.mark.parametrize("key", ["sliding_window", "hidden_size", "max_position_embeddings"])
def test_a_size_no_model_has_is_refused_by_name(tmp_path: Path, key: str) -> None:
    (tmp_path / "config.json").write_text(json.dumps({**LLAMA, key: 1e20}))
    refused(run("--json", "--model-config", "config.json", "serve 4 users", cwd=tmp_path), key)


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_an_endless_config_is_refused_after_the_cap(tmp_path: Path) -> None:
    refused(run("--model-config", "/dev/zero", "serve 4 users", cwd=tmp_path), "larger than")


def test_export_to_a_file_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "pages.md").write_text("x")
    refused(run("export", "--out", "pages.md", cwd=tmp_path), "pages.md")
    assert (tmp_path / "pages.md").read_text() == "x"


@pytest.mark.skipif(not os.path.exists("/dev/null"), reason="needs /dev/null")
def test_export_to_dev_null_is_a_usage_error(tmp_path: Path) -> None:
    refused(run("export", "--out", "/dev/null", cwd=tmp_path), "not a directory")


# ---------------------------------------------------------------- depth the rule files control

def _rules_copy(tmp_path: Path) -> Path:
    from kb.paths import rules_dir

    root = tmp_path / "rules"
    shutil.copytree(rules_dir(), root)
    return root


def _chain_flow(n: int) -> str:
    """An advice flow that is one chain of n nodes: start → question × (n-2) → verdict."""
    lines = ["id: chain", "title: A long chain", "role: advice", "order: 90",
             "source: 000_1ca19009ae21ed7e", "entry: N0", "nodes:"]
    for i in range(n):
        kind = "start" if i == 0 else "verdict" if i == n - 1 else "question"
        lines += [f"  - id: N{i}", f"    kind: {kind}", f"    text: step {i}"]
        if i < n - 1:
            lines += ["    edges:", f"      - {{to: N{i + 1}}}"]
    return "\n".join(lines) + "\n"


def test_a_1200_node_chain_flow_is_drawn(tmp_path: Path) -> None:
    """Python's recursion limit is 1,000 frames: a chain longer than that once passed validate,
    then failed every page that draws it. Each node sits one layer below the last, so the
    drawing holds 1,200 node boxes, one per layer."""
    from server import create_app

    root = _rules_copy(tmp_path)
    (root / "flows" / "chain.yaml").write_text(_chain_flow(1200), encoding="utf-8")
    r = run("validate", str(root), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-400:]
    client = create_app({"KBQ_RULES": str(root), "KBQ_RELOAD_SECONDS": 0}).test_client()
    page = client.get("/flows/chain")
    assert page.status_code == 200
    svg = page.get_data(as_text=True)
    assert len(re.findall(r"<title>N\d+ \((?:start|question|verdict)\)", svg)) == 1200
    assert "N1199 (verdict): step 1199" in svg
    answer = client.get("/?q=serve+7B")
    assert answer.status_code == 200
    shown = answer.get_data(as_text=True)
    assert len(re.findall(r"<title>N\d+ \((?:start|question|verdict)\)", shown)) == 1200


def _count(summary: str, what: str) -> int:
    """'rules: ok — 97 GPUs, …, 110 formulas, …' → 110 for 'formulas'."""
    return int(re.search(rf"(\d+) {what}\b", summary).group(1))  # type: ignore[union-attr]


def test_a_1500_deep_chain_of_formulas_validates_and_answers(tmp_path: Path) -> None:
    """chain_0 needs chain_1, …, chain_1499 needs runtime.overhead_gb: 1,500 levels of
    dependency, deeper than Python's recursion limit. Nothing reads chain_0, so answers are
    unchanged."""
    root = _rules_copy(tmp_path)
    path = root / "formulas.yaml"
    text = path.read_text(encoding="utf-8")
    chain = "".join(
        f"  chain_{i}:\n    unit: GB\n    meaning: one link of a long chain\n"
        f"    expr: {f'chain_{i + 1}' if i < 1499 else 'runtime.overhead_gb'}\n"
        f"    sources: [kaplan-2020-scaling]\n" for i in range(1500))
    path.write_text(text.replace("\nformulas:\n", "\nformulas:\n" + chain, 1), encoding="utf-8")
    r = run("validate", str(root), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-400:]
    shipped = run("validate", cwd=tmp_path).stdout
    assert _count(r.stdout, "formulas") == _count(shipped, "formulas") + 1500
    assert run("--rules", str(root), "--no-trace", "serve 7B", cwd=tmp_path).returncode == 0


# ---------------------------------------------------------------- unbounded reads

MAX_RSS_KB = 400_000     # kbq with the knowledge loaded is about 70 MB; a read of the input whole is not


def peak_rss_kb(*args: str, cwd: Path, stdin: bytes | None = None,
                timeout: float = 120) -> tuple[subprocess.CompletedProcess[str], int]:
    """Run kbq and report its peak resident memory in kB (the child's ru_maxrss, from a fresh
    Python process that has no other children)."""
    probe = ("import json, resource, subprocess, sys\n"
             "r = subprocess.run(sys.argv[1:], capture_output=True, input=sys.stdin.buffer.read())\n"
             "json.dump({'rc': r.returncode, 'out': r.stdout.decode('utf-8', 'replace'),\n"
             "           'err': r.stderr.decode('utf-8', 'replace'),\n"
             "           'rss': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}, sys.stdout)\n")
    done = subprocess.run([sys.executable, "-c", probe, KBQ, *args], input=stdin or b"",
                          capture_output=True, cwd=cwd, timeout=timeout)
    got = json.loads(done.stdout)
    return subprocess.CompletedProcess(args, got["rc"], got["out"], got["err"]), got["rss"]


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_an_endless_batch_is_refused_after_the_cap(tmp_path: Path) -> None:
    """/dev/zero has no newline: its first line never ends. It is refused once a line is past
    the 4,000,000-byte cap of a rule file, not read until memory runs out."""
    r, rss = peak_rss_kb("--batch", "/dev/zero", cwd=tmp_path)
    refused(r, "/dev/zero: line 1 is longer than 4000000 bytes")
    assert rss < MAX_RSS_KB


def test_a_line_past_the_cap_ends_the_batch_after_the_lines_before_it(tmp_path: Path) -> None:
    r, rss = peak_rss_kb("--batch", "-", cwd=tmp_path,
                         stdin=b"infer 7B\n" + b"x" * 6_000_000 + b"\ninfer 8B\n")
    refused(r, "stdin: line 2 is longer than 4000000 bytes")
    assert [json.loads(line)["query"] for line in r.stdout.splitlines()] == ["infer 7B"]
    assert rss < MAX_RSS_KB


def test_a_refused_long_batch_line_is_echoed_cut_with_its_length(tmp_path: Path) -> None:
    """A 1 MB line is a query error like any other, but its answer line does not carry the
    megabyte back: the first 80 characters, '…', and the length in bytes."""
    long_line = "serve 7B " + "x" * 1_000_000
    (tmp_path / "q.txt").write_text(f"infer 7B\n{long_line}\ninfer 8B\n", encoding="utf-8")
    r = run("--batch", "q.txt", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-400:]
    first, cut, last = [json.loads(line) for line in r.stdout.splitlines()]
    assert "verdict" in first and "verdict" in last
    assert cut["query"] == long_line[:80] + "…"
    assert cut["query_bytes"] == len(long_line.encode())
    assert "longer than 500 characters" in cut["error"]["message"]
    assert len(r.stdout.splitlines()[1]) < 2000


def _sparse(path: Path, size: int) -> None:
    with path.open("wb") as f:
        f.truncate(size)


def test_rules_dir_reads_only_the_rule_files_it_names(tmp_path: Path) -> None:
    """A 600 MB YAML file beside the rules (and one in a folder under them) is not a rule file:
    neither the answer nor validate reads it, so memory stays where a plain query keeps it."""
    root = _rules_copy(tmp_path)
    _sparse(root / "stray.yaml", 600_000_000)
    (root / "old").mkdir()
    _sparse(root / "old" / "gpus.yaml", 600_000_000)
    r, rss = peak_rss_kb("--rules", str(root), "--no-trace", "serve 7B", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-400:]
    assert rss < MAX_RSS_KB
    r, rss = peak_rss_kb("validate", str(root), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-400:]
    assert rss < MAX_RSS_KB


def test_a_huge_flow_file_is_refused_after_the_cap(tmp_path: Path) -> None:
    """flows/*.yaml are rule files: one of 600 MB is refused at the cap, not read whole."""
    root = _rules_copy(tmp_path)
    _sparse(root / "flows" / "huge.yaml", 600_000_000)
    r, rss = peak_rss_kb("validate", str(root), cwd=tmp_path)
    assert r.returncode == 2
    assert "rules/flows/huge.yaml:1:1: file is larger than 4000000 bytes" in r.stderr.splitlines()
    assert rss < MAX_RSS_KB


def test_the_filesystem_root_as_rules_is_refused_without_reading_it(tmp_path: Path) -> None:
    """`--rules /` names no rule files: each missing one is reported by name, at once (the
    directory tree below / is never walked or hashed)."""
    r = run("--rules", "/", "serve 7B", cwd=tmp_path)
    refused(r, "/gpus.yaml:1:1: file is missing", "/flows:1:1: no flow files")


@pytest.mark.skipif(not hasattr(signal, "SIGTERM") or not os.path.isdir("/proc"),
                    reason="needs POSIX signals and /proc")
def test_sigterm_to_the_batch_parent_alone_stops_its_workers_quietly(tmp_path: Path) -> None:
    """`kill PID` on the batch process (not its group): before, the workers lived on and each
    printed a BrokenPipeError traceback when it next sent an answer to the gone parent."""
    f = tmp_path / "q.txt"
    f.write_text("serve 70B int4 16 users\nwhich gpu for 13B lora\n" * 20_000)
    proc = subprocess.Popen([KBQ, "--batch", str(f), "--jobs", "2"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith(b'{"query"')       # the workers are answering
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        assert len(children) >= 2
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM
    assert b"Traceback" not in err and b"BrokenPipeError" not in err, err[-600:]
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{c}").exists() for c in children) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [c for c in children if Path(f"/proc/{c}").exists()]


# ---------------------------------------------------------------- counts beyond what kbq sizes

# 7B with the default architecture (Llama 2 7B: 32 layers, 32 KV heads × 128, fp16 KV) and the
# default 4,096-token context: 2 (K and V) × 32 × 4096 × 2 B × 4096 tokens = 2.147 GB per user.
# 999,999 users need about 2,147,000 GB of KV cache; the largest memory in the catalogue is
# 512 GB (Apple M3 Ultra), so every GPU would take more than 4,190 of them, past the 4,096 GPUs
# a query may name (rules/query.yaml limits.gpu_count). 1e6 and 1M are the same as 1000000.
@pytest.mark.parametrize("users", ["999999", "1000000", "1e6", "1M"])
def test_a_job_past_the_gpu_count_cap_is_said_to_be_beyond_it(tmp_path: Path, users: str) -> None:
    r = run("--json", f"serve 7B {users} users", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-400:]
    answer = json.loads(r.stdout)
    assert answer["workload"]["users"] in (999_999, 1_000_000)
    verdict = answer["verdict"]
    assert "every GPU would take more than 4096 cards, beyond what kbq sizes" in verdict
    assert not re.search(r"\b\d{5,}×", verdict) and "Recommended" not in verdict, verdict


def test_a_named_gpu_past_the_cap_is_said_to_be_beyond_it(tmp_path: Path) -> None:
    """On an H100 (80 GB), 2,147,000 GB would take some 28,000 cards."""
    r = run("--no-trace", "serve 7B 999999 users on h100", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-400:]
    verdict = r.stdout.splitlines()[2]
    assert "it would take more than 4096 of them, beyond what kbq sizes" in verdict
    assert "would hold it" not in verdict


def test_the_gpu_count_cap_is_one_number_in_the_rules(tmp_path: Path) -> None:
    root = _rules_copy(tmp_path)
    path = root / "query.yaml"
    text = path.read_text(encoding="utf-8")
    assert text.count("  gpu_count: [1, 4096]\n") == 1
    path.write_text(text.replace("  gpu_count: [1, 4096]\n", "  gpu_count: [1, 8192]\n"), encoding="utf-8")
    refused(run("validate", str(root), cwd=tmp_path),
            "limits.gpu_count ends at 8192, but formulas.yaml's max_gpu_count")


# ---------------------------------------------------------------- a figure that cannot be computed

def _kv_fails_for_one_user(tmp_path: Path) -> Path:
    """kv_cache_gb_per_user × (users - 1) / (users - 1): the same figure, except a division by
    zero at 1 user. It passes validate (the reference workloads serve 4 and 16 users), and
    leaves the memory of every 1-user answer unknown."""
    root = _rules_copy(tmp_path)
    path = root / "formulas.yaml"
    text = path.read_text(encoding="utf-8")
    old = "kv_compressed_values_per_user) / bytes_per_gb + kv_indexer_gb_per_user + recurrent_state_gb_per_user\n"
    assert text.count(old) == 1
    path.write_text(text.replace(old, "kv_compressed_values_per_user) / bytes_per_gb * (users - 1) / (users - 1)"
                                      " + kv_indexer_gb_per_user + recurrent_state_gb_per_user\n"), encoding="utf-8")
    return root


UNKNOWN = ("could not be computed (kv_cache_gb_per_user: division by zero), so kbq cannot say "
           "whether or where it fits")


@pytest.mark.parametrize("query", ["serve 7B", "serve 7B on h100", "max users for 7B on h100",
                                   "serve 7B on 20GB"])
def test_an_answer_whose_deciding_figure_failed_says_unknown(tmp_path: Path, query: str) -> None:
    """Before, these said 'Needs n/a GB in all … n/a× …', 'Does not fit: needs n/a GB …' or
    'Does not fit on 1× … even at 1 users': a confident verdict on a figure nobody computed."""
    root = _kv_fails_for_one_user(tmp_path)
    assert run("validate", str(root), cwd=tmp_path).returncode == 0
    r = run("--json", "--rules", str(root), query, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-400:]
    verdict = json.loads(r.stdout)["verdict"]
    assert verdict.startswith("Unknown: ") and UNKNOWN in verdict, verdict
    assert "n/a" not in verdict and "Does not fit" not in verdict


def test_the_same_rules_answer_where_the_figure_is_known(tmp_path: Path) -> None:
    """At 4 users the edited formula is the shipped one: the verdict is the shipped verdict."""
    root = _kv_fails_for_one_user(tmp_path)
    edited = json.loads(run("--json", "--rules", str(root), "serve 7B 4 users on h100", cwd=tmp_path).stdout)
    shipped = json.loads(run("--json", "serve 7B 4 users on h100", cwd=tmp_path).stdout)
    assert edited["verdict"] == shipped["verdict"] and edited["verdict"].startswith("Fits: ")
