"""The rule expression language: formula text (grammar/expr.lark) → typed nodes → values with units.

parse       the expression grammar's parser and the stored form of a parsed expression
nodes_base  the node classes and their evaluation over scalars and columns
nodes       constant folding, names and units of a parsed expression
functions   the functions a formula may call (min, max, if, ceil…)
units       units and their arithmetic
columns     a value per candidate GPU (a column) and its operations
"""
