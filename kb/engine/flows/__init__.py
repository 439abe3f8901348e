"""Walking the flows and checking the sources' claims.

Entry: `walk.walk` (each flow from its entry, the first edge whose condition holds, with the
trace) and `claims` (each source's claim against the engine's figure). `reference` and `sweep`
compute every formula on the reference and generated workloads when a rules directory is built.
"""
