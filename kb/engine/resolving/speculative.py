"""Speculative decoding: the names formulas read of the draft, and the sentence that says it.

In: a Workload whose spec_method is set (kb.query: "with a 0.5b draft", "eagle-3", "mtp",
"prompt lookup"), the Knowledge, and the first row's evaluated scope. Out: the draft's inputs
(rules/formulas.yaml spec_method, spec_draft_tokens_asked, draft.*) and the assumption that
names the draft, its acceptance rate with the source, its length and the speed-up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kb.engine.resolving.bare_size import bare_model
from kb.knowledge import names as N

if TYPE_CHECKING:
    from kb.engine.evaluate import Scope
    from kb.knowledge.data import Knowledge
    from kb.knowledge.records import Model
    from kb.query.workload import Workload

NONE = "none"
# each method's acceptance constant in rules/formulas.yaml (its value and source are read there)
ACCEPTANCE = {"draft": N.SPEC_DRAFT_ACCEPTANCE, "eagle": N.SPEC_EAGLE_ACCEPTANCE,
              "eagle3": N.SPEC_EAGLE3_ACCEPTANCE, "mtp": N.SPEC_MTP_ACCEPTANCE,
              "ngram": N.SPEC_NGRAM_ACCEPTANCE}
METHOD_NAMES = {"eagle": "EAGLE head", "eagle3": "EAGLE-3 head", "mtp": "MTP head",
                "ngram": "n-gram (prompt lookup)"}


def draft_model(w: Workload, kn: Knowledge) -> Model | None:
    """The draft model of a draft-model method: the one named, a bare size's reference
    architecture, or the default draft size (formulas.yaml spec_default_draft_params)."""
    if w.spec_method != "draft":
        return None
    if w.draft_model_id is not None:
        return kn.models[w.draft_model_id]
    params = w.draft_params or float(kn.constants[N.SPEC_DEFAULT_DRAFT_PARAMS]["value"])
    return bare_model(kn, params)[0]


def spec_inputs(w: Workload, kn: Knowledge) -> Scope:
    """The names formulas read of a speculative draft (zeros where there is none)."""
    d = draft_model(w, kn)
    return {
        N.SPEC_METHOD: w.spec_method or NONE,
        N.SPEC_DRAFT_TOKENS_ASKED: w.draft_tokens or 0,
        N.DRAFT_PARAMS: float(d["params_total"]) if d else 0.0,
        N.DRAFT_ATTENTION_LAYERS: (d.get("attention_layers") or d["layers"]) if d else 0,
        N.DRAFT_KV_HEADS: d["kv_heads"] if d else 0,
        N.DRAFT_HEAD_DIM: d["head_dim"] if d else 0,
    }


def spec_note(w: Workload, kn: Knowledge, s: Scope) -> str:
    """'speculative decoding: 0.5B draft (…), acceptance 0.7 per token (source), 4 draft tokens:
    ×1.9 decode', from the first row's figures; '' without speculative decoding."""
    if not w.spec_method:
        return ""
    d = draft_model(w, kn)
    if d is not None:
        size = f"{float(d['params_total']) / kn.billion:g}B"
        what = f"{size} draft ({d['name']})" if w.draft_model_id else f"{size} draft"
        if not w.draft_model_id and not w.draft_params:
            what += " (no draft named: spec_default_draft_params)"
    else:
        what = METHOD_NAMES[w.spec_method]
    source = kn.constants[ACCEPTANCE[w.spec_method]]["source"]
    speedup, memory = s.get(N.SPEC_SPEEDUP), s.get(N.DRAFT_GB)
    memory_said = f", {memory:.3g} GB with its KV cache" if isinstance(memory, float) and memory > 0 else ""
    k = s.get(N.SPEC_DRAFT_TOKENS)
    speed_said = f": ×{speedup:.2g} decode" if isinstance(speedup, float) else ""
    if isinstance(speedup, float) and speedup < 1:
        speed_said += " (slower: at this batch verifying k + 1 tokens a sequence is compute-bound)"
    return (f"speculative decoding: {what}{memory_said}, acceptance {s.get('spec_acceptance'):g} per token "
            f"[{source}], {k:g} draft token{'' if k == 1 else 's'}, {s.get('spec_expected_tokens'):.3g} "
            f"tokens a verification step{speed_said}")
