"""The kbq console script, run as a user runs it: installed, from another directory."""

import json
import shutil
import subprocess

import pytest

KBQ = shutil.which("kbq")
pytestmark = pytest.mark.skipif(KBQ is None, reason="the kbq console script is not installed")


def run(*args, cwd=None, stdin=None):
    return subprocess.run([KBQ, *args], capture_output=True, text=True, cwd=cwd, input=stdin,
                          timeout=120)


def test_text_answer_from_another_directory(tmp_path):
    r = run("serve 70B int4 16 users", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[2].startswith("VERDICT")                      # the verdict comes first
    for part in ("MEMORY", "SPEED", "GPUS", "ASSUMPTIONS", "TRACE"):
        assert part in r.stdout
    assert "Traceback" not in r.stderr


def test_json_answer_keys(tmp_path):
    r = run("--json", "serve 70B int4 16 users", cwd=tmp_path)
    assert r.returncode == 0
    a = json.loads(r.stdout)
    assert {"query", "workload", "assumptions", "memory", "throughput", "bottleneck", "gpus",
            "verdict", "path", "trace", "disagreements", "warnings"} <= set(a)
    assert set(a["memory"]["breakdown"]) == {"weights_gb", "kv_cache_gb", "activations_gb",
                                             "gradients_gb", "optimizer_gb", "adapters_gb", "overhead_gb"}
    assert set(a["throughput"]) == {"decode_tokens_per_s", "decode_tokens_per_s_aggregate",
                                    "prefill_tokens_per_s", "ttft_s", "train_tokens_per_s", "train_time_s"}
    step = a["trace"][0]
    assert set(step) >= {"node", "rule", "formula", "values", "result", "unit", "source"}


def test_markdown_answer():
    r = run("--markdown", "full fine-tune 7B")
    assert r.returncode == 0
    assert r.stdout.startswith("### `full fine-tune 7B`")
    assert "| part | GB |" in r.stdout and "<details>" in r.stdout


def test_query_error_exits_2_with_caret():
    r = run("train 13B qloraxyz on 20GB")
    assert r.returncode == 2
    assert r.stdout == ""
    err = r.stderr.splitlines()
    assert err[0].startswith("Error: cannot read the query at column 11")
    assert err[2].index("^") == err[1].index("qloraxyz")
    assert "did you mean 'qlora'?" in r.stderr
    assert "Traceback" not in r.stderr


def test_unknown_option_exits_2():
    r = run("--jsn", "serve 70B")
    assert r.returncode == 2 and "no such option" in r.stderr


def test_gpus_and_models_listings():
    r = run("gpus", "--json", "--min-vram", "80", "--vendor", "amd")
    assert r.returncode == 0
    items = json.loads(r.stdout)
    assert items and all(g["vram_gb"] >= 80 and g["vendor"] == "amd" for g in items)
    r = run("models", "--family", "llama")
    assert r.returncode == 0 and "llama-3.1-70b" in r.stdout
    r = run("models", "--json")
    assert len(json.loads(r.stdout)) >= 50


def test_validate_shipped_rules():
    r = run("validate")
    assert r.returncode == 0, r.stderr
    assert "ok" in r.stdout


def test_batch_json_lines(tmp_path):
    f = tmp_path / "q.txt"
    f.write_text("serve 70B int4 16 users\ntrain 13B qloraxyz\n\n# a comment\ninfer 7B\n")
    r = run("--batch", str(f))
    assert r.returncode == 0
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert len(lines) == 3
    assert "verdict" in lines[0] and lines[1]["error"]["column"] == 11 and "verdict" in lines[2]


def test_batch_in_worker_processes_keeps_the_order_of_the_lines(tmp_path):
    # 600 lines: more than one chunk for the workers; every 7th a typo, every 11th a comment
    queries = ["serve 70B int4 16 users", "train 13B qlora on 20GB?", "which gpu for 13B lora",
               "infer 7B fp16 on rtx 4090"]
    lines, expected = [], []
    for i in range(600):
        if i % 11 == 0:
            lines.append("# comment")
            continue
        q = "train 13B qloraxyz" if i % 7 == 0 else f"{queries[i % 4]} {i % 50 + 1} users"
        lines.append(q)
        expected.append(q)
    f = tmp_path / "q.txt"
    f.write_text("\n".join(lines) + "\n")
    parallel = run("--batch", str(f), "--jobs", "2")
    single = run("--batch", str(f), "--jobs", "1")
    assert parallel.returncode == 0 == single.returncode, parallel.stderr
    got = [json.loads(x) for x in parallel.stdout.splitlines()]
    assert [g["query"] for g in got] == expected
    assert sum("error" in g for g in got) == sum(q.endswith("qloraxyz") for q in expected)
    assert parallel.stdout == single.stdout          # the same bytes, whichever process answered
    assert run("--batch", str(f), "--jobs", "0").returncode == 2


def test_ctrl_c_stops_a_parallel_batch_cleanly(tmp_path):
    import os
    import signal

    f = tmp_path / "q.txt"
    f.write_text("serve 70B int4 16 users\nwhich gpu for 13B lora\n" * 20_000)
    proc = subprocess.Popen([KBQ, "--batch", str(f), "--jobs", "2"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        assert proc.stdout.readline().startswith(b'{"query"')     # the workers are answering
        os.killpg(proc.pid, signal.SIGINT)                        # what Ctrl-C in a terminal does
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130
    assert b"Traceback" not in err


def test_batch_reads_past_a_line_that_is_not_utf8_and_names_a_missing_file(tmp_path):
    f = tmp_path / "q.txt"
    f.write_bytes(b"serve 70B\xff int4\nwhich gpu for 13B lora\n")
    r = run("--batch", str(f))
    assert r.returncode == 0, r.stderr
    first, second = [json.loads(x) for x in r.stdout.splitlines()]
    assert first["error"]["column"] == 10 and "verdict" in second
    r = subprocess.run([KBQ, "--batch", "-"], input=f.read_bytes(), capture_output=True, timeout=120)
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 2
    r = run("--batch", str(tmp_path / "missing.txt"))
    assert r.returncode == 2 and r.stderr.startswith("Error: cannot read") and "Traceback" not in r.stderr


def test_help_and_version():
    assert run("--help").returncode == 0
    r = run("--version")
    assert r.returncode == 0 and r.stdout.startswith("kbq ")
