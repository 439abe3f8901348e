"""Resolving a question into a scope: Workload + Knowledge → the names the formulas read.

Entry: `scope.resolve_workload` (every field the query left out filled in, with the assumptions
said) and `inputs.base_scope` (the names rules/formulas.yaml lists, with their values). Beside
them: the candidate GPUs and their parallel layouts as columns (`gpus`, `layout`), a bare size's
model (`bare_size`), training recipes (`training`), a serving volume with no user count
(`volume`, `cost_batch`), speculative decoding's inputs (`speculative`), and a model read from a
config.json (`hfconfig`).
"""
