"""A bare size ("13B", or a size a largest-model search tries): the model it stands for, the
reference architecture it takes, and what resolving it reads of the size.

In: the Knowledge (models.yaml bare_size references, runtimes.yaml recipes) and a size in
parameters. Out: the model dict and the assumption that says what it is (bare_model), the names
base_scope gives of a size (size_inputs), and the choices the size makes (size_regime), by which
a search resolves a size the way an earlier one was (kb.engine.resolutions).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, cast

from kb.engine import training as tr
from kb.knowledge.data import Knowledge
from kb.query.workload import Workload

if TYPE_CHECKING:
    from kb.engine.evaluate import Scope
    from kb.knowledge.records import Model, Runtime


KEPT_SIZES = 4096       # sizes whose reference is kept with the knowledge (a search tries a few dozen)


def bare_size_ref(kn: Knowledge, params: float) -> str:
    """The reference architecture of a bare size: the reference nearest it on a log scale."""
    kept = cast("dict[float, str]", kn.derived.tables.setdefault("engine.bare_size_ref", {}))
    found = kept.get(params)
    if found is None:
        found = min(kn.bare_size_refs, key=lambda r: abs(math.log(kn.models[r]["params_total"] / params)))
        if len(kept) < KEPT_SIZES:
            kept[params] = found
    return found


def bare_model(kn: Knowledge, params: float) -> tuple[Model, str]:
    """A bare size's model (its reference's architecture at that size) and what the assumptions
    say of it."""
    size = f"{params / kn.billion:g}B"
    ref_id = bare_size_ref(kn, params)
    ref = kn.models[ref_id]
    model = ref.copy()
    model.update({"params_total": params, "params_active": params, "name": f"{size} model", "id": ref_id})
    return model, (f"model: a {size} dense model with {ref['name']}'s architecture "
                   f"({ref['layers']} layers, {ref['kv_heads']} KV heads × {ref['head_dim']}, "
                   f"{ref['attention'].upper()}); weights use {size} parameters "
                   "(models.yaml bare_size)")


def size_regime(kn: Knowledge, w: Workload, runtime: Runtime, params: float) -> tuple[object, ...] | None:
    """What kb.engine.scope.resolve reads of a bare size `params` (w names no model; `runtime`
    is the one it resolves to, which the size does not choose): of its reference architecture
    (bare_size_ref), the context length (the default sequence or context, what the warnings say
    of a longer one) and the checkpoint format (an inference job's default precision); and
    which of the runtime's recipes the size is too small for (training.apply_recipes). Sizes
    with the same tuple resolve alike but for the model (kb.engine.scope.at_size). None on
    several GPUs, where the size also chooses the layout at scale (training.resolve_at_scale)."""
    if tr.gpu_count(w) > 1:
        return None
    ref = kn.models[bare_size_ref(kn, params)]
    return (ref["max_context"], ref.get("native_precision"),
            *(params < r["when"]["min_params"] for r in runtime.get("recipes") or []))


def size_inputs(m: Model) -> Scope:
    """The names base_scope gives of a model's size."""
    return {"params": float(m["params_total"]), "active_params": float(m["params_active"])}
