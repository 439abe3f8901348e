"""Searching: capacity and how-many questions solved on the forward model.

Entry: `capacity.answer` (one strategy per capacity question kind: max users, max batch, max
context, largest model, how many GPUs). The forward model at each value is a probe (`probes`,
`single_probe`), evaluated over every card at once as columns; `solve` and `bracket` bisect or
step to the boundary; `fewest` and `scaled` answer a how-many over the catalogue; `replicas`
sizes serving many users as replicas of a layout; `budget` bounds the costliest searches.
"""
