"""The engine: Workload + Knowledge → Answer, as a package of small modules.

In: a Workload (kb.query.parse) and the Knowledge (kb.knowledge.build). Out: an Answer (kb.engine.assembly.answer).
Its sub-packages, each with one entry point (docs/structure.md):
  resolving  workload → a scope of inputs (scope.resolve_workload, inputs.base_scope)
  flows      the flows walked, with the trace; the sources' claims checked
  search     capacity and how-many questions searched on the forward model (capacity.answer)
  advising   options, the training method chosen, comparisons (options.compute)
  verdicts   the verdict (verdict.compose)
  assembly   GPU rows, memory, speed and bands of an Answer (assemble), the Answer itself
and, flat: evaluate (formulas over a scope of scalars and columns, in dependency order), run
(the entry: answer(workload, knowledge, query)) and pipeline (query text → Answer with options).
This module re-exports what the rest of kb, the server, the tests and the benchmarks use.
"""

from __future__ import annotations

from kb.engine.assembly.assemble import ROW_FORMULAS, error_bands
from kb.engine.evaluate import Evaluated, Scope, evaluate
from kb.engine.resolving.gpus import gpu_scope, layout_of
from kb.engine.run import answer
from kb.engine.resolving.inputs import base_scope
from kb.engine.resolving.scope import Resolved, resolve_workload
from kb.knowledge.gpu_names import gpu_columns, gpu_values, runs_on

__all__ = ["ROW_FORMULAS", "Evaluated", "Resolved", "Scope", "answer", "base_scope", "error_bands",
           "evaluate", "gpu_columns", "gpu_scope", "gpu_values", "layout_of", "resolve_workload", "runs_on"]
