"""Assembling the answer: evaluated scopes → the Answer every surface renders.

Entry: `assemble` (GPU rows, ranking, memory, speed, bottleneck and error bands) and `answer`
(the Answer record and its JSON contract; its parts typed in `answer_records`).
"""
