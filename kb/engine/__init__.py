"""The engine: Workload + Knowledge → Answer, as a package of small modules.

In: a Workload (kb.query.parse) and the Knowledge (kb.knowledge.build). Out: an Answer (kb.engine.answer).
The modules, each below the ones it imports:
  evaluate  formulas over a scope of scalars and kb.expr.parse.Col columns, in dependency order
  scope     workload → Resolved (defaults and assumptions) → the names formulas read
  gpus      the candidate GPUs and their parallel layouts as scope names (columns)
  walk      the flows, walked from their entries, and the trace
  claims    the sources' claims checked against the figures
  solve     capacity and reverse-sizing questions, searched on the forward model
  assemble  GPU rows, ranking, memory, speed, bottleneck and error bands of an Answer
  run       the entry: answer(workload, knowledge, query)
This module re-exports what the rest of kb, the server, the tests and the benchmarks use.
"""

from __future__ import annotations

from kb.engine.assemble import ROW_FORMULAS, error_bands
from kb.engine.evaluate import Evaluated, Scope, evaluate
from kb.engine.gpus import gpu_scope, layout_of
from kb.engine.run import answer
from kb.engine.inputs import base_scope
from kb.engine.scope import Resolved, resolve
from kb.knowledge.gpu_names import gpu_columns, gpu_values, runs_on

__all__ = ["ROW_FORMULAS", "Evaluated", "Resolved", "Scope", "answer", "base_scope", "error_bands",
           "evaluate", "gpu_columns", "gpu_scope", "gpu_values", "layout_of", "resolve", "runs_on"]
