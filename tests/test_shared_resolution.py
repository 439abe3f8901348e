"""A search's probes resolve a workload once for every value that resolves alike (kb.engine.
resolutions): GPU counts of one count_regime (kb.engine.training) on the GPUs a query names, bare
sizes of one size_regime (kb.engine.bare_size), users, batches and contexts. What a probe reads of the shared resolution must be what resolving
the workload at its own value gives: the job (every workload field but the count the GPUs are
asked at), the model, the formats, the runtime and the warnings; for a bare size also the
assumptions and the scope's inputs, which then differ only in the size.

The workloads are the generated corpus's (tests/test_same_answers.py), so every runtime, task,
sharding and recipe window the rules hold is met."""

from __future__ import annotations

import pytest

from kb import get_knowledge
from kb.engine.resolutions import Resolutions
from kb.engine.bare_size import size_regime
from kb.engine.inputs import base_scope
from kb.engine.scope import PASSED_ON, at_size, resolve
from kb.engine.single_probe import at_value
from kb.errors import KbError
from kb.query.parse import parse
from test_same_answers import queries

COUNTS = [1, 2, 3, 4, 7, 8, 9, 16, 24, 31, 32, 64, 100, 128, 256, 512, 1000, 1024, 4096]
SIZES = [1e8, 3e8, 8e8, 1.2e9, 1.9e9, 3e9, 5e9, 7e9, 8e9, 1.3e10, 2e10, 3.4e10, 7e10, 1.23e11, 2e11,
         4.05e11, 1e12, 5e12]


def _workloads(named: bool):
    kn = get_knowledge()
    seen = set()
    for argv in queries():
        q = argv[-1]
        if q in seen or q.startswith("-"):
            continue
        seen.add(q)
        try:
            w = parse(q, kn)
        except KbError:
            continue
        if bool(w.gpus) == named:
            yield q, w


def _job(r):
    w = r.workload.to_dict()
    w.pop("gpus", None)
    return (w, r.model, r.precision["id"], r.kv_precision["id"], r.runtime["id"], r.warnings,
            r.is_training)


def test_counts_of_one_regime_resolve_to_the_same_job() -> None:
    kn = get_knowledge()
    checked = 0
    for q, w in _workloads(named=True):
        p = Resolutions(kn, w)
        for count in COUNTS:
            own = resolve(at_value(w, "gpu_count", count, kn), kn)
            assert _job(p.resolved("gpu_count", count)) == _job(own), (q, count)
            checked += 1
    assert checked > 3000        # the corpus holds hundreds of queries that name GPUs


def test_the_counts_a_regime_joins_differ_only_in_what_it_does_not_read() -> None:
    """The regime is not the count itself: 9 to 16 GPUs of a job with no window there share one."""
    kn = get_knowledge()
    p = Resolutions(kn, parse("full fine-tune 8b on 2x h100", kn))
    assert p.resolved("gpu_count", 9) is p.resolved("gpu_count", 16)
    assert p.resolved("gpu_count", 1) is not p.resolved("gpu_count", 2)


def test_sizes_of_one_regime_resolve_as_resolving_each_size_does() -> None:
    kn = get_knowledge()
    checked = derived = 0
    for q, w in [*_workloads(named=True), *_workloads(named=False)]:
        p = Resolutions(kn, w)
        for size in SIZES:
            mine = at_value(w, "params", size, kn)
            own = resolve(mine.copy(), kn)
            got = p.resolved("params", size)
            assert _job(got) == _job(own) and got.assumptions == own.assumptions, (q, size)
            assert p.inputs("params", size) == base_scope(own, kn), (q, size)
            derived += (size_regime(kn, mine, own.runtime, size) is not None)
            checked += 1
    assert checked > 10000 and derived > checked // 2


def test_a_size_of_another_regime_is_resolved_anew() -> None:
    """A recipe made for sizes from some size up (runtimes.yaml recipes min_params) splits the
    sizes of one architecture."""
    kn = get_knowledge()
    with_min = [(rt, r["when"]["min_params"]) for rt in kn.runtimes.values()
                for r in rt.get("recipes") or [] if r["when"]["min_params"] > 0]
    if not with_min:
        pytest.skip("no recipe in the rules has a smallest size")
    rt, size = with_min[0]
    w = parse(f"full fine-tune 8b with {rt['id']}", kn)
    below, above = at_value(w, "params", size * 0.99, kn), at_value(w, "params", size * 1.01, kn)
    r = resolve(below.copy(), kn)
    assert size_regime(kn, below, r.runtime, size * 0.99) != size_regime(kn, above, r.runtime, size * 1.01)


def test_at_size_is_resolve_at_that_size() -> None:
    kn = get_knowledge()
    w = parse("lora 7b on 24gb", kn)
    first = resolve(at_value(w, "params", 6e9, kn), kn)
    other = resolve(at_value(w, "params", 6.5e9, kn), kn)
    made = at_size(first, kn, 6.5e9)
    assert _job(made) == _job(other) and made.assumptions == other.assumptions


VALUES = {"users": (1, 2, 5, 17, 64, 300, 4096), "batch": (1, 2, 5, 17, 64, 300, 4096),
          "context_tokens": (1, 2, 64, 600, 2048, 8192, 32768, 131072, 10**6)}


@pytest.mark.parametrize("vary", [*PASSED_ON, "context_tokens"])
def test_users_batches_and_contexts_resolve_as_resolving_each_value_does(vary: str) -> None:
    kn = get_knowledge()
    checked = derived = 0
    for q, w in [*_workloads(named=True), *_workloads(named=False)]:
        p = Resolutions(kn, w)
        for value in VALUES[vary]:
            own = resolve(at_value(w, vary, value, kn), kn)
            got = p.resolved(vary, value)
            assert _job(got) == _job(own) and got.assumptions == own.assumptions, (q, value)
            assert p.inputs(vary, value) == base_scope(own, kn), (q, value)
            derived += p.derived_from(p.key(vary, value)) is not None
            checked += 1
    assert checked > 5000 and derived > checked // 2
