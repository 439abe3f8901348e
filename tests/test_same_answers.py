"""Behaviour guard for refactors: the same `--json` bytes as a base revision, query for query.

In: a base revision (env KBQ_SAME_AS, default HEAD~1; a merge-base works too) and a corpus of
generated queries covering every question kind, task, precision, runtime, named GPU, GPU count
and bare capacity, plus a few subcommands and --model-config asks. Out: a failure listing the
first queries whose exit code, stdout or stderr differ.

The base is built as a wheel (`pip wheel --no-deps` of `git archive BASE`) and installed in a
temporary venv that sees this interpreter's site-packages (no download). Each side runs the
same driver, which calls `kb.cli.main.main([...])` in one process with stdout and stderr captured,
so the bytes compared are the CLI's own. Both sides first build their knowledge snapshot, so the
answers are read from the snapshot, as a normal `kbq` run reads them.

    KBQ_SAME_AS=main pytest tests/test_same_answers.py -m slow
"""

from __future__ import annotations

import io
import json
import os
import random
import site
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "rules"
CONFIG = Path(__file__).parent / "data" / "llama-3.1-8b-config.json"
MIN_QUERIES = 600

# Runs in both venvs: argv lists on stdin → [exit code, stdout, stderr] per list on stdout.
DRIVER = r"""
import io, json, sys
try:
    from kb.cli.main import main        # kb/ in packages by stage
except ImportError:
    from kb.cli import main             # a base from before the packages
out = []
for argv in json.load(sys.stdin):
    real_out, real_err = sys.stdout, sys.stderr
    sys.stdout = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    sys.stderr = io.StringIO()
    try:
        code = main(argv)
        sys.stdout.flush()
        text = sys.stdout.buffer.getvalue().decode("utf-8")
        err = sys.stderr.getvalue()
    finally:
        sys.stdout, sys.stderr = real_out, real_err
    out.append([code, text, err])
json.dump(out, sys.stdout)
"""


def _ids(name: str, key: str) -> list[dict[str, object]]:
    return yaml.safe_load((RULES / f"{name}.yaml").read_text())[key]


def _alias(item: dict[str, object], rng: random.Random) -> str:
    aliases = [str(a) for a in item.get("aliases") or []]  # type: ignore[union-attr]
    return rng.choice([str(item["id"]), *aliases])


def queries() -> list[list[str]]:
    """Deterministic corpus: every GPU, model, precision and runtime appears, in every kind."""
    rng = random.Random(17)
    gpus, models = _ids("gpus", "gpus"), _ids("models", "models")
    precs, runtimes = _ids("precisions", "precisions"), _ids("runtimes", "runtimes")
    sizes = ["1B", "3B", "7B", "8B", "13B", "34B", "70B", "123B", "405B"]
    caps = ["8GB", "12GB", "16GB", "20GB", "24GB", "48GB", "80GB", "141GB", "192GB"]
    infer = ["infer", "serve", "prefill", "run", "generate"]
    train = ["full fine-tune", "lora", "qlora", "pretrain", "train", "fine-tune"]
    extras = ["", "", "16 users", "32k context", "batch 8", "seq 4096", "fp8 kv cache",
              "with checkpointing", "no checkpointing", "flash attention", "eager", "rank 64",
              "prompt 2000 output 500", "1B tokens", "sgd", "offload", "paged", "attention only"]

    def model() -> str:
        return _alias(rng.choice(models), rng) if rng.random() < 0.6 else rng.choice(sizes)

    def target() -> str:
        r = rng.random()
        if r < 0.15:
            return ""
        if r < 0.35:
            return f"on {rng.choice(caps)}"
        gpu = _alias(rng.choice(gpus), rng)
        if r < 0.6:
            return f"on {rng.randint(2, 8)}x {gpu}"
        if r < 0.7:
            return f"on {gpu} vs {_alias(rng.choice(gpus), rng)}"
        return f"on {gpu}"

    def words(*parts: str) -> str:
        return " ".join(p for p in parts if p)

    out: list[str] = []
    for g in gpus:                                  # every GPU by name
        out.append(words(rng.choice(infer), model(), _alias(rng.choice(precs), rng), f"on {_alias(g, rng)}"))
    for m in models:                                # every model, inference and training
        out.append(words(rng.choice(infer), _alias(m, rng), rng.choice(extras), target()))
        out.append(words(rng.choice(train), _alias(m, rng), rng.choice(extras), target()))
    for p in precs:
        out.append(words(rng.choice(infer), model(), _alias(p, rng), target()))
        out.append(words(rng.choice(train), model(), _alias(p, rng), target()))
    for r in runtimes:
        out.append(words(rng.choice(infer + train), model(), f"with {_alias(r, rng)}", target()))
    while len(out) < 380:                           # plain questions, mixed
        task = rng.choice(infer + train)
        prec = _alias(rng.choice(precs), rng) if rng.random() < 0.6 else ""
        rt = f"with {_alias(rng.choice(runtimes), rng)}" if rng.random() < 0.2 else ""
        out.append(words(task, model(), prec, rng.choice(extras), rng.choice(extras), rt, target()))
    for _ in range(45):                             # the question kinds
        prec = _alias(rng.choice(precs), rng)
        gpu = _alias(rng.choice(gpus), rng)
        out.append(words("which gpu for", model(), prec, rng.choice(["", *train, *infer])))
        out.append(words("max users for", model(), prec, f"on {gpu}", rng.choice(["", "at 32k context", "at 8k context"])))
        out.append(words("max context for", model(), prec, f"on {gpu}"))
        out.append(words("largest model for", rng.choice(caps + [gpu]), prec, rng.choice(["", *train])))
        out.append(words("how many", gpu, "for", model(), prec, rng.choice(["", "16 users", *train])))
    out += ["", "serve 70B on", "trian 7B", "infer 7B on h1000", "serve 70B int4 -3 users",
            "max users for 70B", "which gpu", "largest model for", "how many for 70B",
            "infer 7B fp16 on 0x h100", "serve 70B int4 16 users on 99999GB", "xyzzy"]
    argvs = [["--json", q] for q in out]
    argvs += [["--all", "--no-trace", q] for q in out[:20]]
    argvs += [["--markdown", q] for q in out[20:40]]
    argvs += [["--json", "--model-config", str(CONFIG), q] for q in
              ["serve int4 16 users on rtx 4090", "lora on 24GB", "which gpu for fp8",
               "max context for int4 on l4", "infer fp16"]]
    argvs += [["gpus", "--json"], ["models", "--json"], ["gpus"], ["models"]]
    return argvs


def _run(python: str, argvs: list[list[str]], cache: Path, cwd: Path) -> list[list[object]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KBQ_", "PYTHONPATH"))}
    env["KBQ_CACHE_DIR"] = str(cache)
    subprocess.run([python, "-c", "from kb import get_knowledge; get_knowledge()"],
                   env=env, cwd=cwd, check=True)
    done = subprocess.run([python, "-c", DRIVER], input=json.dumps(argvs), env=env, cwd=cwd,
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def _base_python(tmp: Path) -> str:
    base = os.environ.get("KBQ_SAME_AS", "HEAD~1")
    tar = subprocess.run(["git", "-C", str(ROOT), "archive", base], capture_output=True, check=True)
    src = tmp / "src"
    src.mkdir()
    with tarfile.open(fileobj=io.BytesIO(tar.stdout)) as t:
        t.extractall(src, filter="data")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    # run from a venv, this interpreter's packages are the venv's, which --system-site-packages
    # does not reach: a .pth file names them
    here = subprocess.run([python, "-c", "import site; print(site.getsitepackages()[0])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(here, "base-sees-this.pth").write_text("\n".join(site.getsitepackages()) + "\n", encoding="utf-8")
    wheels = tmp / "wheels"
    subprocess.run([python, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(src)],
                   check=True)
    # --force-reinstall: a kbq already in the interpreter's site-packages (which the venv sees)
    # must not stand in for the base revision's wheel
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall",
                    *map(str, wheels.glob("*.whl"))], check=True)
    return python


def test_the_corpus_covers_every_kind() -> None:
    argvs = queries()
    text = [a[-1] for a in argvs]
    assert len(argvs) >= MIN_QUERIES
    for word in ("which gpu", "max users", "max context", "largest model", "how many",
                 "qlora", "pretrain", "serve", "prefill", " with ", "GB", "x "):
        assert any(word in q for q in text), word


@pytest.mark.slow
def test_same_json_as_the_base_revision(tmp_path: Path) -> None:
    argvs = queries()
    before = _run(_base_python(tmp_path), argvs, tmp_path / "cache-base", tmp_path)
    after = _run(sys.executable, argvs, tmp_path / "cache-now", tmp_path)
    differ = [(argv, b, a) for argv, b, a in zip(argvs, before, after) if a != b]
    answered = sum(1 for b in before if b[0] == 0)
    assert answered >= MIN_QUERIES * 0.8, f"only {answered} queries answered"
    assert not differ, f"{len(differ)} of {len(argvs)} differ: {[d[0] for d in differ]}; first: {differ[0]}"
