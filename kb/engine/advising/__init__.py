"""Advising: what to buy or change, and comparisons.

Entry: `options.compute` (the same question with one or two things changed, each answered by the
engine's entry it is handed), `advice` (right-sizing: the configurations judged, their cost and
the pick), `train_choice` (the training method a which-GPU or cheapest question is ranked at),
`compare` and `compare_counts` (the sides of an A vs B), `per_card` (a ranking's runtime per card).
"""
