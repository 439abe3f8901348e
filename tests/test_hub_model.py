"""A model the catalogue lacks, named by its Hugging Face Hub id: read from its config.json (and
its safetensors index and headers) through huggingface_hub, from a local cache in the library's
own layout (tests/hub_cache.py), with HF_HUB_OFFLINE=1: never the network.

Reference: the test model has Mistral 7B v0.1's shapes under a name that says 13B. Its parameters
are counted here from the config's shapes (tests/hub_cache.py, the tensors transformers'
MistralForCausalLM holds): 7,241,732,096, which is also Mistral-7B-v0.1's published count (its
model.safetensors.index.json: total_size 14,483,464,192 bytes at 2 bytes a bf16 weight).
Weights at bf16 must be within 20% of 2 bytes × that count (issue 38's acceptance band).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

import hub_cache
from hub_cache import COMMIT, CONFIG, REPO

KBQ = shutil.which("kbq") or "kbq"
pytestmark = pytest.mark.usefixtures("kbq_installed")
PUBLISHED_PARAMS = 7_241_732_096           # Mistral-7B-v0.1, model.safetensors.index.json total_size / 2
BAND = 0.20                                # issue 38: weights within 20% of 2 bytes × parameters


def hub_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_ENDPOINT")}
    return {**env, "HF_HOME": str(home), "HF_HUB_OFFLINE": "1"}


def kbq(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([KBQ, *args], capture_output=True, text=True, timeout=120, env=hub_env(home),
                          cwd=home)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """HF_HOME with the 13B-named model's config.json cached at COMMIT (no index, no weights)."""
    hub_cache.write(hub_cache.snapshot(tmp_path), "config.json", CONFIG)
    return tmp_path


def answer(home: Path, query: str) -> dict:
    r = kbq(home, "--json", query)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_the_reference_count_is_the_published_one() -> None:
    assert hub_cache.parameters() == PUBLISHED_PARAMS


def test_a_hub_id_is_sized_from_its_config_not_its_name(home: Path) -> None:
    a = answer(home, f"serve {REPO} bf16")
    weights = a["memory"]["breakdown"]["weights_gb"]
    expected = 2 * hub_cache.parameters() / 1e9          # 14.5 GB; a generic 13B would be ~26 GB
    assert abs(weights - expected) <= BAND * expected, (weights, expected)
    src = a["model_source"]
    assert src["kind"] == "hub" and src["repo_id"] == REPO and src["revision"] == COMMIT
    assert src["params_from"] == "shapes" and src["model_id"] == a["workload"]["model_id"]
    assert Path(src["config_path"]).parent.name == COMMIT
    said = [s for s in a["assumptions"] if REPO in s and "config.json" in s]
    assert said and COMMIT in said[0] and "Hugging Face Hub" in said[0]
    assert not any("bare 13B" in s for s in a["assumptions"])     # no guess from the name


def test_the_index_gives_the_parameter_count(home: Path) -> None:
    snap = hub_cache.snapshot(home)
    hub_cache.index(snap)
    a = answer(home, f"serve {REPO}")
    assert a["model_source"]["params_from"] == "index"
    assert a["model_source"]["params_total"] == PUBLISHED_PARAMS      # total_size / 2 bytes (bfloat16)
    assert a["model_source"]["dtypes"] is None                         # no weights cached
    assert any("total_size" in s for s in a["assumptions"])


def test_cached_safetensors_headers_give_the_exact_count_and_dtypes(home: Path) -> None:
    snap = hub_cache.snapshot(home)
    hub_cache.index(snap)
    hub_cache.shards(snap)
    a = answer(home, f"serve {REPO}")
    src = a["model_source"]
    assert src["params_from"] == "headers"
    assert src["dtypes"] == {"BF16": PUBLISHED_PARAMS} and src["params_total"] == PUBLISHED_PARAMS


def test_offline_and_not_cached_is_a_clear_error(tmp_path: Path) -> None:
    r = kbq(tmp_path, "serve acme/Nowhere-13B 16 users")
    assert r.returncode == 2 and r.stdout == ""
    assert "Traceback" not in r.stderr
    assert "  serve acme/Nowhere-13B 16 users\n        ^^^^^^^^^^^^^^^^\n" in r.stderr   # under the id
    for part in ("acme/Nowhere-13B", "HF_HUB_OFFLINE", "hf download acme/Nowhere-13B config.json",
                 "huggingface-cli download acme/Nowhere-13B config.json", "--model-config"):
        assert part in r.stderr, (part, r.stderr)


def test_the_revision_is_shown_in_the_explained_answer(home: Path) -> None:
    r = kbq(home, "--explain", f"serve {REPO}")
    assert r.returncode == 0, r.stderr
    assert f"read from its config.json on the Hugging Face Hub at revision {COMMIT}" in r.stdout


def test_a_catalogue_model_named_by_its_hub_id_keeps_its_entry(tmp_path: Path) -> None:
    """An empty cache, offline: a model models.yaml holds is never looked up on the Hub."""
    a = answer(tmp_path, "serve meta-llama/Llama-3.1-8B-Instruct")
    assert a["workload"]["model_id"] == "llama-3.1-8b" and a["model_source"] is None


def test_options_name_the_model_as_the_query_did(home: Path) -> None:
    """A suggested change is a query that can be asked again: it names the Hub id."""
    a = answer(home, f"serve {REPO} bf16 on rtx 4060 ti 8gb")
    queries = [o["query"] for o in a["options"] or []]
    assert queries and all(REPO in q for q in queries), queries
    again = answer(home, queries[0])
    assert again["model_source"]["repo_id"] == REPO


def test_two_hub_models_in_one_query_is_a_query_error(home: Path) -> None:
    r = kbq(home, f"serve {REPO} vs acme/Other-7B")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "acme/Other-7B" in r.stderr


def test_model_config_wins_over_a_hub_id(tmp_path: Path) -> None:
    """--model-config gives the model: a Hub id in the query is not looked up (the cache is empty)."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(CONFIG), encoding="utf-8")
    r = kbq(tmp_path, "--json", "--model-config", str(path), "serve acme/Else-13B")
    assert r.returncode == 0, r.stderr
    src = json.loads(r.stdout)["model_source"]
    assert src["kind"] == "config.json" and src["revision"] is None and src["config_path"] == str(path)


def test_a_hub_id_is_never_read_as_the_size_its_name_says() -> None:
    """The resolver hands a Hub id the catalogue lacks to the entry (kb.answered), which reads
    its config; a pasted name without an organisation is still a bare size, said so."""
    from kb import get_knowledge
    from kb.errors import HubModelNamed, QueryError
    from kb.query.parse import parse

    kn = get_knowledge()
    with pytest.raises(HubModelNamed) as named:
        parse("lora acme/super-coder-34b on a100", kn)
    assert named.value.repo_id == "acme/super-coder-34b" and named.value.column == len("lora ") + 1
    w = parse("lora super-coder-34b on a100", kn)
    assert w.params == 34e9 and any("bare 34B" in n for n in w.notes)
    with pytest.raises(QueryError):           # two known words with a slash: not a Hub id
        parse("serve fp8/int4 70b", kn)


def test_a_plain_query_never_imports_huggingface_hub(tmp_path: Path) -> None:
    code = ("import sys\nfrom kb.cli.main import main\n"
            "code = main(['--json', 'serve 70B int4 16 users'])\n"
            "sys.stderr.write(str('huggingface_hub' in sys.modules))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.stderr.strip().endswith("False"), r.stderr[-300:]


def test_the_api_answers_a_hub_id_and_refuses_an_uncached_one(home: Path, serve) -> None:
    served = serve(env=hub_env(home))
    q = urllib.parse.quote_plus(f"serve {REPO} bf16")
    with urllib.request.urlopen(f"{served.base}/api/answer?q={q}", timeout=60) as r:
        a = json.load(r)
    assert a["model_source"]["revision"] == COMMIT and a["model_source"]["repo_id"] == REPO
    expected = 2 * hub_cache.parameters() / 1e9
    assert abs(a["memory"]["breakdown"]["weights_gb"] - expected) <= BAND * expected
    q = urllib.parse.quote_plus("serve acme/Nowhere-13B")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(f"{served.base}/api/answer?q={q}", timeout=60)
    assert err.value.code == 400
    body = json.load(err.value)
    assert body["error"]["column"] == len("serve ") + 1
    assert "hf download acme/Nowhere-13B config.json" in body["error"]["message"]
    assert "--model-config" in body["error"]["message"]


def test_a_hub_that_does_not_answer_is_given_up_on_within_the_timeout(tmp_path: Path) -> None:
    """Online with nothing cached and a Hub that takes the connection but never answers (a
    socket on this machine that listens and reads nothing): a clear error within about
    KBQ_HUB_TIMEOUT, however the installed huggingface_hub retries (2.x backs off for half a
    minute; 1.0 gives up after the first timeout)."""
    import socket
    import time

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        env = {**hub_env(tmp_path), "HF_HUB_OFFLINE": "0",
               "HF_ENDPOINT": f"http://127.0.0.1:{silent.getsockname()[1]}", "KBQ_HUB_TIMEOUT": "2"}
        start = time.monotonic()
        r = subprocess.run([KBQ, "serve acme/Nowhere-13B"], capture_output=True, text=True,
                           timeout=60, env=env, cwd=tmp_path)
        took = time.monotonic() - start
    assert took < 15, took
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "within 2 s" in r.stderr or "the Hub cannot be reached" in r.stderr, r.stderr
    assert "hf download acme/Nowhere-13B config.json" in r.stderr


def test_a_cached_index_or_config_that_makes_no_sense_is_not_believed(home: Path) -> None:
    """An index whose total_size is not a size counts nothing (the shapes do); a config.json in
    the cache that is not JSON is a clear error, not a traceback."""
    snap = hub_cache.snapshot(home)
    (snap / "model.safetensors.index.json").write_text('{"metadata": {"total_size": 1e400}, "weight_map": {}}')
    a = answer(home, f"serve {REPO}")
    assert a["model_source"]["params_from"] == "shapes"
    assert a["model_source"]["params_total"] == pytest.approx(PUBLISHED_PARAMS, rel=0.01)
    (snap / "config.json").write_text("{not json")
    r = kbq(home, f"serve {REPO}")
    assert r.returncode == 2 and "Traceback" not in r.stderr and "config.json is not JSON" in r.stderr


def test_a_quote_s_alternatives_are_the_same_model(home: Path) -> None:
    """`kbq --quote`: the alternatives (the question asked again with no GPU named) size the Hub
    model, not the bare size its name says: the same memory per GPU on one card."""
    import re

    r = kbq(home, "--quote", f"serve {REPO} bf16 on rtx 4090")
    assert r.returncode == 0, r.stderr
    mine = re.search(r"- Memory: ([\d.]+) of", r.stdout)
    other = re.search(r"with no GPU named: 1× [^*]+\*\*: ([\d.]+) of", r.stdout)
    assert mine and other, r.stdout
    assert mine.group(1) == other.group(1)
    assert COMMIT in r.stdout


def test_the_server_keeps_answering_while_a_hub_read_waits(tmp_path: Path, serve) -> None:
    """`kbq serve`: a question whose Hub read hangs (a Hub that never answers) holds neither the
    event loop nor another client's question; it ends as a JSON 400 within about KBQ_HUB_TIMEOUT."""
    import socket
    import threading
    import time

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        env = {**hub_env(tmp_path), "HF_HUB_OFFLINE": "0",
               "HF_ENDPOINT": f"http://127.0.0.1:{silent.getsockname()[1]}", "KBQ_HUB_TIMEOUT": "4"}
        served = serve("--forwarded-allow-ips", "127.0.0.1", env=env)    # as behind a local proxy
        got: dict[str, object] = {}

        def hub_question() -> None:
            q = urllib.parse.quote_plus("serve acme/Nowhere-13B")
            start = time.monotonic()
            try:
                urllib.request.urlopen(f"{served.base}/api/answer?q={q}", timeout=60)
            except urllib.error.HTTPError as err:
                got["status"], got["body"] = err.code, json.load(err)
            got["took"] = time.monotonic() - start

        asking = threading.Thread(target=hub_question)
        asking.start()
        time.sleep(0.5)                                   # the Hub read is under way
        start = time.monotonic()
        with urllib.request.urlopen(f"{served.base}/api/health", timeout=30) as r:
            assert r.status == 200
        # another client's question (the server believes the local proxy's X-Forwarded-For) is
        # computed on the other answer thread meanwhile; the same client's would wait its turn
        other = urllib.request.Request(f"{served.base}/api/answer?q=serve+7B",
                                       headers={"X-Forwarded-For": "192.0.2.7"})
        with urllib.request.urlopen(other, timeout=30) as r:
            assert r.status == 200
        assert time.monotonic() - start < 3 and asking.is_alive()
        asking.join(60)
    assert got["status"] == 400 and float(got["took"]) < 20        # type: ignore[arg-type]
    assert "hf download acme/Nowhere-13B config.json" in got["body"]["error"]["message"]  # type: ignore[index]
