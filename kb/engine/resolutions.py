"""The workload of a capacity search resolved at each value it tries, once for the values that
resolve alike (kb.engine.probes).

In: the Knowledge and the question's Workload. Out: at a value (a GPU count, a size, a number of
users…), the Resolved workload (kb.engine.scope.resolve) and its inputs (base_scope), each made
once and shared by every value that resolves to the same job:

- GPU counts, when the query names no GPU: the count changes nothing of the workload, but for a
  runtime recipe made for some counts only (kb.engine.training.count_windows): the counts that
  fall in the same windows share one.
- GPU counts, when it names GPUs: the counts of one kb.engine.training.count_regime share one. It
  differs from each count's own only in the count the GPUs are asked at, which every probe is
  given apart.
- Bare sizes of one kb.engine.bare_size.size_regime: the first size's, made again at each other
  size by kb.engine.scope.at_size (the model, its reference architecture and what is said of
  it), its inputs that one's with the model's own (kb.engine.inputs.model_inputs).
- Users or a batch (kb.engine.scope.PASSED_ON, which resolving passes on as asked): the first
  value's, with the value set (passed_on), its inputs that one's with the value's own.
- Contexts whose prompt and output the search sets, the context holding both (holds_its_work):
  the first one's, with the three set and what the warnings say of the length (at_context).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kb.engine import training as tr
from kb.engine.bare_size import bare_model, size_regime
from kb.engine.evaluate import Scope
from kb.engine.inputs import base_scope, model_inputs
from kb.engine.scope import (CONTEXT_FIELDS, PASSED_ON, Resolved, at_context, at_size, holds_its_work,
                             passed_on, resolve)
from kb.engine.single_probe import at_value
from kb.knowledge.data import Knowledge
from kb.query.workload import Workload

if TYPE_CHECKING:
    from kb.knowledge.records import Runtime

Key = tuple[str, float | None]


class Resolutions:
    """The resolved workload of one search at each value, shared where values resolve alike."""

    def __init__(self, kn: Knowledge, w: Workload) -> None:
        self.kn, self.w = kn, w
        self._resolved: dict[Key, Resolved] = {}
        self._inputs: dict[Key, Scope] = {}
        self._windows: tuple[tuple[int, int | None], ...] | None = None     # (key)
        self._regimes: dict[tuple[bool, ...], float] = {}
        self._keys: dict[float, Key] = {}        # each GPU count's (key)
        # the first value resolved of each group that resolves alike (_group), and the one each
        # later value's is made from
        self._runtime: Runtime | None = None
        self._firsts: dict[tuple[object, ...], Key] = {}
        self._like: dict[Key, Key] = {}
        self._said: dict[Key, str] = {}

    def key(self, vary: str, value: float) -> Key:
        """The value's workload: (vary, the first value asked that resolves alike), or
        (vary, None) for the workload itself; the value itself where no other is alike."""
        if vary != "gpu_count":
            return (vary, value)
        found = self._keys.get(value)
        if found is None:
            found = self._keys[value] = self._count_key(value)
        return found

    def _count_key(self, value: float) -> Key:
        if self._windows is None:
            runtime = resolve(self.w.copy(), self.kn).runtime
            self._windows = (tuple((r["when"]["min_gpus"], r["when"]["max_gpus"]) for r in runtime.get("recipes") or [])
                             if self.w.gpus else tr.count_windows(self.w, runtime))
        if self.w.gpus:
            return ("gpu_count", self._regimes.setdefault(tr.count_regime(self.kn, self._windows, int(value)), value))
        if not self._windows:
            return ("gpu_count", None)
        return ("gpu_count", self._regimes.setdefault(tuple(tr.in_window(int(value), win) for win in self._windows), value))

    def resolved(self, vary: str, value: float) -> Resolved:
        key = self.key(vary, value)
        found = self._resolved.get(key)
        if found is not None:
            return found
        w = at_value(self.w, vary, value if key[1] is None else key[1], self.kn)
        group = self._group(vary, value, w)
        like = None if group is None else self._firsts.get(group)
        if like is not None:            # a value that resolves as an earlier one did
            found = self._resolved[key] = self._made_from(like, vary, value, w)
            self._like[key] = like
            return found
        if key[1] is not None and vary == "gpu_count" and not w.gpus:
            w.gpu_count = int(key[1])       # the count the recipes read
        found = self._resolved[key] = resolve(w, self.kn)
        if vary == "params" and self._runtime is None:
            self._runtime = found.runtime   # (which the size does not choose)
            group = self._group(vary, value, w)
        if group is not None:
            self._firsts.setdefault(group, key)
        return found

    def _group(self, vary: str, value: float, w: Workload) -> tuple[object, ...] | None:
        """The values that resolve alike, as far as this value's workload `w` tells (None: not
        known to resolve as any other)."""
        if vary == "params":
            if self._runtime is None or self.w.model_id is not None:
                return None
            regime = size_regime(self.kn, self.w, self._runtime, float(value))
            return None if regime is None else (vary, *regime)
        if vary in PASSED_ON:
            return (vary,) if value >= 1 else None
        if vary == "context_tokens":
            return (vary,) if holds_its_work(w) else None
        return None

    def _made_from(self, like: Key, vary: str, value: float, w: Workload) -> Resolved:
        first = self._resolved[like]
        if vary == "params":
            said = self._said.get(like)
            if said is None:        # what the first size's assumptions say of its model
                said = self._said[like] = bare_model(self.kn, float(first.model["params_total"]))[1]
            return at_size(first, self.kn, float(value), said)
        if vary == "context_tokens":
            return at_context(first, w)
        return passed_on(first, vary, int(value))

    def inputs(self, vary: str, value: float) -> Scope:
        """base_scope of the workload at this value (a copy, made once per workload: key)."""
        self.resolved(vary, value)
        return dict(self._base(self.key(vary, value)))

    def _base(self, key: Key) -> Scope:
        found = self._inputs.get(key)
        if found is None:
            like = self._like.get(key)
            found = self._inputs[key] = (base_scope(self._resolved[key], self.kn) if like is None
                                         else {**self._base(like), **self.changes(key)})
        return found

    def derived_from(self, key: Key) -> Key | None:
        """The key of the workload this one's was made from (None: resolved itself)."""
        return self._like.get(key)

    def changes(self, key: Key) -> Scope:
        """The inputs in which a workload made from another (derived_from) differs from it: of a
        size, its model's (model_inputs), the users or batch, or the context with its prompt
        and output."""
        r = self._resolved[key]
        if key[0] == "params":         # those of the model's names that differ from the other's
            was = self._base(self._like[key])
            return {n: v for n, v in model_inputs(self.kn, r.model).items()
                    if v.__class__ is not (w := was[n]).__class__ or v != w}
        fields = CONTEXT_FIELDS if key[0] == "context_tokens" else (key[0],)
        return {f: getattr(r.workload, f) for f in fields}
