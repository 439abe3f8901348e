"""Which formulas read what: maps made once per knowledge and kept with it (Derived.tables).

In: the Knowledge (its formulas and each one's dependency order). Out: for a set of input names,
formula → whether it reads one of them, directly or through the formulas it reads; the maps a
capacity search's probes share (kb.engine.probes): what reads the card, what reads the card or
the GPU count, what reads the inputs that changed between two values of a search; and the
formulas some names need, in order, once each, but those a map marks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from kb.engine.layout import Layout, scope_values
from kb.knowledge.gpu_names import gpu_values

if TYPE_CHECKING:
    from kb.knowledge.data import Knowledge

Names = tuple[str, ...]
Reads = dict[str, bool]

KEPT_CHANGES = 64   # sets of changed inputs whose formula reads are kept with the knowledge


def read_map(kn: Knowledge, names: set[str]) -> Reads:
    """Formula → whether it reads one of `names`, directly or through the formulas it reads."""
    formulas = kn.formulas
    reads: Reads = {}
    for order in kn.derived.order.values():
        for name in order:                  # each formula after the formulas it reads
            if name not in reads:
                f = formulas[name]
                reads[name] = any(n in names for n in f.names) or any(reads.get(d, True) for d in f.deps)
    return reads


def probe_reads(kn: Knowledge) -> tuple[Reads, Reads]:
    """Formula → whether it reads a name of the card; and whether it reads the card or the
    count (gpu_count, the layout)."""
    tables = kn.derived.tables
    found = tables.get("engine.probe_reads")
    if isinstance(found, tuple):
        return cast("tuple[Reads, Reads]", found)
    some_gpu = next(iter(kn.gpus.values()))
    card = set(gpu_values(some_gpu, 1, next(iter(kn.precisions.values()))))
    count = card | set(scope_values(Layout(1, 1, 1, True, None)))
    reads = tables["engine.probe_reads"] = (read_map(kn, card), read_map(kn, count))
    return reads


def card_only(kn: Knowledge, names: Names) -> Names:
    """The formulas `names` need, in order, that read a name of the card but not the count nor
    the layout (gpu_count, tp, pp, dp): the same for a card at every count."""
    kept = cast("dict[Names, Names]", kn.derived.tables.setdefault("engine.card_only", {}))
    found = kept.get(names)
    if found is None:
        card = probe_reads(kn)[0]
        count = cast("Reads | None", kn.derived.tables.get("engine.count_reads"))
        if count is None:
            count = kn.derived.tables["engine.count_reads"] = read_map(
                kn, {"gpu_count", *scope_values(Layout(1, 1, 1, True, None))})
        found = kept[names] = tuple(n for n in wanted(kn, "card", names, None) if card[n] and not count[n])
    return found


def changed_reads(kn: Knowledge, changed: frozenset[str]) -> Reads:
    """Formula → whether it reads one of the `changed` inputs; kept for the few sets a search
    changes (the varied input and what the workload derives from it)."""
    tables = kn.derived.tables
    kept = tables.get("engine.changed_reads")
    if not isinstance(kept, dict):
        kept = tables["engine.changed_reads"] = {}
    found = kept.get(changed)
    if found is None:
        found = read_map(kn, set(changed))
        if len(kept) < KEPT_CHANGES:
            kept[changed] = found
    return cast("Reads", found)


def wanted(kn: Knowledge, level: str, names: Names, skip: Reads | None) -> Names:
    """The formulas `names` need, in order, once each, but those `skip` marks (`level` names the
    map skip is, for the table kept)."""
    kept = cast("dict[tuple[str, Names], Names]", kn.derived.tables.setdefault("engine.wanted", {}))
    found = kept.get((level, names))
    if found is None:
        order = kn.derived.order
        found = kept[(level, names)] = tuple(dict.fromkeys(
            n for name in names for n in order[name] if skip is None or not skip[n]))
    return found
