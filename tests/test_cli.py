"""The kbq console script, run as a user runs it: installed, from another directory."""

import json
import shutil
import subprocess

import pytest
from advice_common import PRICE_H100

KBQ = shutil.which("kbq") or "kbq"
pytestmark = pytest.mark.usefixtures("kbq_installed")     # fails, never skips, without kbq


def run(*args, cwd=None, stdin=None):
    return subprocess.run([KBQ, *args], capture_output=True, text=True, cwd=cwd, input=stdin,
                          timeout=120)


def test_text_answer_from_another_directory(tmp_path):
    r = run("serve 70B int4 16 users", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[2].startswith("VERDICT")                      # the verdict comes first
    for part in ("KEY FIGURES", "memory", "speed", "GPUS", "ASSUMPTIONS", "--explain"):
        assert part in r.stdout
    assert "TRACE" not in r.stdout and len(lines) <= 45         # the trace is behind a flag
    assert "Traceback" not in r.stderr
    full = run("--explain", "serve 70B int4 16 users", cwd=tmp_path)
    for part in ("MEMORY", "TRACE", "THE SOURCES' FLOWCHARTS SAY", "ASSUMPTIONS"):
        assert part in full.stdout
    assert "TRACE" not in run("--explain", "--no-trace", "serve 70B int4 16 users", cwd=tmp_path).stdout


def test_json_answer_keys(tmp_path):
    r = run("--json", "serve 70B int4 16 users", cwd=tmp_path)
    assert r.returncode == 0
    a = json.loads(r.stdout)
    assert {"query", "workload", "assumptions", "memory", "throughput", "bottleneck", "gpus",
            "verdict", "path", "trace", "disagreements", "warnings"} <= set(a)
    assert set(a["memory"]["breakdown"]) == {"weights_gb", "kv_cache_gb", "activations_gb",
                                             "gradients_gb", "optimizer_gb", "adapters_gb", "overhead_gb",
                                             "other_models_gb"}
    assert {"host_ram_gb", "sharding", "zero_stage", "per_gpu_breakdown"} <= set(a["memory"])
    assert set(a["throughput"]) == {"decode_tokens_per_s", "decode_tokens_per_s_aggregate",
                                    "prefill_tokens_per_s", "ttft_s", "train_tokens_per_s", "train_time_s",
                                    # added: the figures under load (continuous batching, prompts counted)
                                    "serving_tokens_per_s_per_user", "serving_tokens_per_s_per_gpu",
                                    "serving_ttft_s", "serving_requests_per_s"}
    step = a["trace"][0]
    assert set(step) >= {"node", "rule", "formula", "values", "result", "unit", "source"}


def test_markdown_answer():
    r = run("--markdown", "full fine-tune 7B")
    assert r.returncode == 0
    assert r.stdout.startswith("### `full fine-tune 7B`")
    assert "| part | GB |" in r.stdout and "<details>" in r.stdout


def test_query_error_exits_2_with_caret():
    # letters with digits could name a card or a format: refused, never left out
    r = run("train 13B zq9xw on 20GB")
    assert r.returncode == 2
    assert r.stdout == ""
    err = r.stderr.splitlines()
    assert err[0].startswith("Error: cannot read the query at column 11")
    assert err[2].index("^") == err[1].index("zq9xw")
    assert "Traceback" not in r.stderr


def test_a_word_outside_the_vocabulary_is_answered_and_named():
    # no near miss of any known word: the rest of the question is answered, the word named
    r = run("train 13B zqxwv on 20GB")
    assert r.returncode == 0
    assert "not used: 'zqxwv'" in r.stdout


def test_near_miss_is_read_and_said():
    # one edit from exactly one known word: answered, and the reading is stated
    r = run("--json", "train 13B qlroa on 20GB")
    assert r.returncode == 0
    d = json.loads(r.stdout)
    assert d["workload"]["task"] == "qlora"
    assert any("read 'qlroa' as 'qlora'" in s for s in d["assumptions"] + d["warnings"])


def test_unknown_option_exits_2():
    r = run("--jsn", "serve 70B")
    assert r.returncode == 2 and "no such option" in r.stderr.lower()


def test_gpus_and_models_listings():
    r = run("gpus", "--json", "--min-vram", "80", "--vendor", "amd")
    assert r.returncode == 0
    items = json.loads(r.stdout)
    assert items and all(g["vram_gb"] >= 80 and g["vendor"] == "amd" for g in items)
    r = run("models", "--family", "llama")
    assert r.returncode == 0 and "llama-3.1-70b" in r.stdout
    r = run("models", "--json")
    assert len(json.loads(r.stdout)) >= 50


def test_gpus_min_bandwidth_filters_in_catalogue_order_with_every_field():
    import yaml

    from kb.paths import rules_dir

    r = run("gpus", "--json", "--min-bandwidth", "3000")
    assert r.returncode == 0
    items = json.loads(r.stdout)
    shipped = yaml.safe_load((rules_dir() / "gpus.yaml").read_text(encoding="utf-8"))["gpus"]
    # gpus.yaml by hand: every card of at least 3,000 GB/s, in the file's order (H100 SXM5 3,350 GB/s is in,
    # A100 SXM4 80GB 2,039 GB/s is out)
    assert [g["id"] for g in items] == [g["id"] for g in shipped if g["bandwidth_gb_s"] >= 3000]
    assert "h100-sxm5" in [g["id"] for g in items] and "a100-sxm4-80gb" not in [g["id"] for g in items]
    assert all(set(g) <= set(items[0]) and {"memory_bytes", "memory_gb", "memory_gib"} <= set(items[0])
               for g in shipped)
    # a GiB capacity like a query's: an RTX 4090 holds 24 GiB (25.8 GB), so --min-vram 25 leaves it out
    ids = [g["id"] for g in json.loads(run("gpus", "--json", "--min-vram", "24").stdout)]
    assert "rtx-4090" in ids and "rtx-4090" not in [g["id"] for g in json.loads(run("gpus", "--json", "--min-vram", "25").stdout)]
    assert run("gpus", "--min-bandwidth", "lots").returncode == 2


def test_validate_shipped_rules():
    r = run("validate")
    assert r.returncode == 0, r.stderr
    assert "ok" in r.stdout


def test_batch_json_lines(tmp_path):
    f = tmp_path / "q.txt"
    f.write_text("serve 70B int4 16 users\nserve 70B on h10\n\n# a comment\ninfer 7B\n")
    r = run("--batch", str(f))
    assert r.returncode == 0
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert len(lines) == 3
    assert "verdict" in lines[0] and lines[1]["error"]["column"] == 14 and "verdict" in lines[2]


def test_batch_in_worker_processes_keeps_the_order_of_the_lines(tmp_path):
    # 600 lines: more than one chunk for the workers; every 7th a typo, every 11th a comment
    queries = ["serve 70B int4 16 users", "train 13B qlora on 20GB?", "which gpu for 13B lora",
               "infer 7B fp16 on rtx 4090"]
    lines, expected = [], []
    for i in range(600):
        if i % 11 == 0:
            lines.append("# comment")
            continue
        q = "serve 70B on h10" if i % 7 == 0 else f"{queries[i % 4]} {i % 50 + 1} users"
        lines.append(q)
        expected.append(q)
    f = tmp_path / "q.txt"
    f.write_text("\n".join(lines) + "\n")
    parallel = run("--batch", str(f), "--jobs", "2")
    single = run("--batch", str(f), "--jobs", "1")
    assert parallel.returncode == 0 == single.returncode, parallel.stderr
    got = [json.loads(x) for x in parallel.stdout.splitlines()]
    assert [g["query"] for g in got] == expected
    assert sum("error" in g for g in got) == sum(q.endswith("h10") for q in expected)
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


# ---------------------------------------------------------------- --prices, --sort, --options on every path

PRICES = 'as_of: "2026-11"\nprices:\n' + PRICE_H100     # advice_common: one H100, two cloud listings


def _decode_order_holds(answer):
    """--sort speed: among the rows that fit and suit the job (prices.yaml sorts.speed: the cards
    the runtime supports well first), the decode speed never rises down the table (the cards
    without a speed figure come after those with one)."""
    speeds = [g["decode_tokens_per_s"] for g in answer["gpus"] if g["fits"] and g["suits_job"] is not False]
    timed = [s for s in speeds if s is not None]
    return (len(timed) > 3 and speeds[:len(timed)] == timed
            and all(a >= b for a, b in zip(timed, timed[1:])))


def test_batch_passes_prices_sort_and_options(tmp_path):
    (tmp_path / "p.yaml").write_text(PRICES, encoding="utf-8")
    f = tmp_path / "q.txt"
    f.write_text("which gpu for 7b\nserve 70b int4 on h100 sxm\n", encoding="utf-8")
    r = run("--batch", str(f), "--prices", str(tmp_path / "p.yaml"), "--sort", "speed", "--options",
            "--jobs", "1")
    assert r.returncode == 0, r.stderr
    which, h100 = (json.loads(line) for line in r.stdout.splitlines())
    assert which["recommendation"]["sort"].startswith("speed") and _decode_order_holds(which)
    assert which["options"] is not None and h100["options"] is not None      # asked for, though both fit
    row = h100["gpus"][0]
    assert row["id"] == "h100-sxm5"
    assert row["price_usd"] == 20000                                # the file's price, not the shipped one
    assert row["cloud_usd_per_hour"] == pytest.approx(3.0)          # median of the file's 2.0 and 4.0 $/h
    # each line is what the plain query prints with the same options
    plain = run("--json", "--prices", str(tmp_path / "p.yaml"), "--sort", "speed", "--options",
                "serve 70b int4 on h100 sxm")
    assert json.loads(plain.stdout) == h100


def test_batch_stops_on_a_price_file_it_cannot_read(tmp_path):
    f = tmp_path / "q.txt"
    f.write_text("which gpu for 7b\n", encoding="utf-8")
    (tmp_path / "p.yaml").write_text(PRICES.replace("h100-sxm5", "h100-sxn5"), encoding="utf-8")
    r = run("--batch", str(f), "--prices", str(tmp_path / "p.yaml"))
    assert r.returncode == 2 and r.stdout == ""
    assert "p.yaml:3:10: unknown gpu 'h100-sxn5' (did you mean 'h100-sxm5'?)" in r.stderr
    r = run("--batch", str(f), "--sort", "cots")
    assert r.returncode == 2 and "did you mean 'cost'" in r.stderr


def test_ask_passes_prices_sort_and_options(tmp_path):
    (tmp_path / "p.yaml").write_text(PRICES, encoding="utf-8")
    r = run("ask", "--json", "--prices", str(tmp_path / "p.yaml"), "--sort", "speed", "--options",
            "which gpu for 7b")
    assert r.returncode == 0, r.stderr
    a = json.loads(r.stdout)
    assert a["recommendation"]["sort"].startswith("speed") and _decode_order_holds(a)
    assert a["options"] is not None
    assert next(g for g in a["gpus"] if g["id"] == "h100-sxm5")["price_usd"] == 20000
    bad = run("ask", "--sort", "cots", "which gpu for 7b")
    assert bad.returncode == 2 and "did you mean 'cost'" in bad.stderr


# ---------------------------------------------------------------- one declaration of the query options

def test_ask_and_the_plain_query_read_the_same_options():
    """Every option `kbq --help` lists for a query (but --batch and --jobs, which only the plain
    form takes) is an option of `kbq ask`, and the two print the same bytes."""
    import re

    def listed(helptext):           # the flags of the Options section
        section = helptext.split("\nOptions:")[1].split("\nCommands:")[0]
        return set(re.findall(r"^  (?:-h, )?(--[a-z-]+)", section, re.M)) - {"--version", "--help"}

    plain, ask = listed(run("--help").stdout), listed(run("ask", "--help").stdout)
    assert plain - {"--batch", "--jobs"} == ask
    assert {"--json", "--markdown", "--all", "--no-trace", "--rules", "--model-config", "--prices",
            "--sort", "--options"} <= ask
    for args in (["--json", "--sort", "cost"], ["--no-trace", "--all"], ["--markdown", "--options"]):
        q = "serve 70B int4 16 users on h100"
        a, b = run(*args, q), run("ask", *args, q)
        assert a.returncode == b.returncode == 0 and a.stdout == b.stdout, args
    bad = run("ask", " ")
    assert bad.returncode == 2 and "missing QUERY" in bad.stderr


@pytest.mark.parametrize("args", [["--all", "--json", "serve 70B int4 16 users"],
                                  ["serve 70B int4 on h100 and qzx9"], ["--sort", "spead", "serve 7B"]])
def test_the_one_shot_exit_gives_the_same_bytes_and_status_as_main(args, tmp_path):
    """A plain query leaves without tearing the interpreter down (kb.cli.main.console): its output,
    the longest one included (every GPU as JSON, well past a pipe's buffer), must still be
    flushed whole, with the same exit status and stderr as kb.cli.main.main run in a process that
    exits as usual."""
    import sys

    r = run(*args, cwd=tmp_path)
    code = ("import sys; from kb.cli.main import main; sys.exit(main(sys.argv[1:]))")
    want = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)
    assert (r.returncode, r.stderr) == (want.returncode, want.stderr)
    assert r.stdout == want.stdout
    assert len(r.stdout) > 65536 or r.returncode == 2


def test_a_closed_pipe_ends_the_one_shot_run_quietly(tmp_path):
    """`kbq QUERY | head -1`: the reader goes away before the answer is written."""
    with subprocess.Popen([KBQ, "--all", "--json", "serve 70B int4 16 users"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, cwd=tmp_path) as p:
        assert p.stdout is not None and p.stderr is not None
        p.stdout.read(10)
        p.stdout.close()
        err = p.stderr.read().decode()
        assert p.wait(timeout=120) in (0, 120) and "Traceback" not in err


# ---------------------------------------------------------------- the subcommands kbq reads itself

@pytest.mark.parametrize("args", [["gpus", "--json"], ["models", "--json"], ["gpus", "--vendor", "nvdia"]])
def test_a_listing_leaves_as_a_one_shot_run_with_its_whole_output(args, tmp_path):
    """gpus, models, rules and validate are one-shot runs too (kb.cli.main.console): the listing,
    longer than a pipe's buffer, is flushed whole, with main's exit status and stderr."""
    test_the_one_shot_exit_gives_the_same_bytes_and_status_as_main(args, tmp_path)


def test_listing_options_read_both_ways_and_bad_ones_are_usage_errors():
    spaced = run("gpus", "--json", "--min-vram", "80", "--vendor", "amd", "--max-price", "1000000")
    joined = run("gpus", "--json", "--min-vram=80", "--vendor=amd", "--max-price=1000000")
    assert spaced.returncode == joined.returncode == 0 and spaced.stdout == joined.stdout
    assert {g["vendor"] for g in json.loads(spaced.stdout)} == {"amd"}
    assert run("models", "--search=llama", "--families").stdout == run("models", "--search", "llama", "--families").stdout
    for args, said in [(["gpus", "--segment=dc"], "'--segment': must be one of datacenter"),
                       (["gpus", "--min-vram"], "Option '--min-vram' requires an argument"),
                       (["models", "--moe=yes"], "Option '--moe' does not take a value"),
                       (["rules", "extra"], "unexpected extra argument (extra)"),
                       (["validate", "no/such/dir"], "path 'no/such/dir' does not exist"),
                       (["gpus", "--runtime", "nope"], "unknown runtime 'nope'")]:
        r = run(*args)
        assert r.returncode == 2 and "Error: " in r.stderr and said in r.stderr, (args, r.stderr)
        assert "Traceback" not in r.stderr and r.stdout == ""
    helptext = run("gpus", "--help").stdout
    for flag in ("--json", "--min-vram GB", "--min-bandwidth GB_S", "--vendor NAME", "--segment NAME",
                 "--runtime NAME", "--max-price USD", "--rules DIR", "-h, --help"):
        assert f"\n  {flag}" in helptext, flag
    assert run("validate", "--help").stdout.startswith("Usage: kbq validate [OPTIONS] [PATH]...")
