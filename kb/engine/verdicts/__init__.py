"""The verdict: the answer to what was asked, first, in at most the words query.yaml allows.

Entry: `verdict.compose`. Its pieces: `verdict_lead` (a configuration and its speed),
`verdict_room` (headroom), `verdict_sides` (an A vs B), `verdict_count` (how many GPUs),
`verdict_fleet` (replicas serving a load), `unknown` (a deciding figure that could not be
computed) and `margins` (no speed for what cannot run, borderline margins). Wording and
thresholds come from rules/query.yaml `verdict`.
"""
