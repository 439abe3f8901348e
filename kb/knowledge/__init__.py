"""The knowledge: rules/*.yaml → one validated, frozen Knowledge with its graph.

loader     YAML text → documents with line:col positions (safe loader only)
schema*    the rule files' pydantic schemas (validation, JSON Schema)
records*   the rule-file records as typed dicts, for the type checker
names      one constant per input, constant and formula of formulas.yaml (generated)
data       the Knowledge and its parts (GPUs, models, precisions, formulas, flows…)
build      read, validate, compile and check a rules directory → Knowledge
compile    formulas and flows compiled into evaluation orders
checks     the checks beyond the schemas (names, units, cycles, coverage)
graph      the decision and formula graph (networkx)
prices     prices.yaml on the GPU catalogue; another price file for --prices
derived    tables derived from the rules (evaluation orders, trace texts, error bands; a model added from config.json)
gpu_names  the per-GPU names (gpu.vram_gb …) formulas read, as columns of the catalogue
snapshot   the built knowledge stored and read back, keyed by the rule files
store      the process's cache of built knowledge per rules directory
"""
