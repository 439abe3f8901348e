"""A bare size ("13B", or a size a largest-model search tries): the model it stands for and the
reference architecture it takes.

In: the Knowledge (models.yaml bare_size references) and a size in
parameters. Out: the model dict and the assumption that says what it is (bare_model) and the
names base_scope gives of a size (size_inputs).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from kb.knowledge.data import Knowledge
from kb.knowledge import names as N

if TYPE_CHECKING:
    from kb.engine.evaluate import Scope
    from kb.knowledge.records import Model


def bare_size_refs(kn: Knowledge, unnamed: bool = False) -> list[str]:
    """The reference architectures a size stands for: a size typed in the query takes the
    references; a size no question named (the sizes a largest-model search tries) takes the
    current architectures of `unnamed_references`."""
    return kn.bare_size_unnamed_refs if unnamed else kn.bare_size_refs


def bare_size_ref(kn: Knowledge, params: float, unnamed: bool = False) -> str:
    """The reference architecture of a bare size: the reference nearest it on a log scale."""
    return min(bare_size_refs(kn, unnamed), key=lambda r: abs(math.log(kn.models[r]["params_total"] / params)))


def bare_model(kn: Knowledge, params: float, unnamed: bool = False) -> tuple[Model, str]:
    """A bare size's model (its reference's architecture at that size) and what the assumptions
    say of it."""
    size = f"{params / kn.billion:g}B"
    ref_id = bare_size_ref(kn, params, unnamed)
    ref = kn.models[ref_id]
    model = ref.copy()
    model.update({"params_total": params, "params_active": params, "name": f"{size} model", "id": ref_id})
    return model, (f"model: a {size} dense model with {ref['name']}'s architecture "
                   f"({ref['layers']} layers, {ref['kv_heads']} KV heads × {ref['head_dim']}, "
                   f"{ref['attention'].upper()}); weights use {size} parameters "
                   + ("(models.yaml bare_size unnamed_references: no model was named)" if unnamed
                      else "(models.yaml bare_size)"))


def size_inputs(m: Model) -> Scope:
    """The names base_scope gives of a model's size."""
    return {N.PARAMS: float(m["params_total"]), N.ACTIVE_PARAMS: float(m["params_active"])}
