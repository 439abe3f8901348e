"""The typed dicts of kb.knowledge.records and kb.knowledge.records_rules have the keys of the schema models they
mirror: a key added to or dropped from a rule file's schema must be added to or dropped from the
record the engine is type-checked against."""

from __future__ import annotations

from typing import Any

import pytest

from kb.knowledge import records as rec
from kb.knowledge import records_rules as rr
from kb.knowledge import schema as sc
from kb.knowledge.checks import CAPACITY_KEYS
from kb.knowledge.prices import GPU_PRICE_KEYS, PRICE_KEYS
from kb.knowledge.views import view_of

# record → schema model; the keys kbq adds after validation are read from their declaration
# (kb.knowledge.views.VIEWS, which takes them from the code that adds them)
PAIRS = [
    (rec.Source, sc.SourceSchema),
    (rec.Precision, sc.PrecisionSchema),
    (rec.Interconnect, sc.InterconnectSchema),
    (rec.GPU, sc.GpuSchema),
    (rec.Mla, sc.MlaSchema),
    (rec.Moe, sc.MoeSchema),
    (rec.Recurrent, sc.RecurrentSchema),
    (rec.PerLayerEmbedding, sc.PerLayerEmbeddingSchema),
    (rec.Model, sc.ModelSchema),
    (rec.RecipeWhen, sc.RecipeWhenSchema),
    (rec.RecipeSet, sc.RecipeSetSchema),
    (rec.Recipe, sc.RecipeSchema),
    (rec.Runtime, sc.RuntimeSchema),
    (rec.RuntimeDefaults, sc.RuntimeDefaultsSchema),
    (rec.Sharding, sc.ShardingSchema),
    (rec.ShardingTable, sc.ShardingFile),
    (rec.Objective, sc.ObjectiveSchema),
    (rr.Input, sc.InputSchema),
    (rr.Constant, sc.ConstantSchema),
    (rr.Defaults, sc.DefaultsSchema),
    (rr.Solve, sc.SolveSchema),
    (rr.Unit, sc.UnitSchema),
    (rr.Phrase, sc.PhraseSchema),
    (rr.QueryRules, sc.QueryFile),
    (rr.BandRuntime, sc.BandRuntimeSchema),
    (rr.BandPoint, sc.BandPointSchema),
    (rr.Band, sc.BandSchema),
    (rr.ErrorBands, sc.ErrorBandsFile),
    (rr.CloudPrice, sc.CloudPriceSchema),
    (rr.Price, sc.PriceSchema),
    (rr.SortKey, sc.SortKeySchema),
    (rr.OptionRule, sc.OptionRuleSchema),
    (rr.CloudRule, sc.CloudRuleSchema),
    (rr.PriceAdvice, sc.AdviceSchema),
]


@pytest.mark.parametrize(("record", "model"), PAIRS, ids=[p[0].__name__ for p in PAIRS])
def test_record_has_the_schema_keys(record: Any, model: Any) -> None:
    keys = set(record.__required_keys__) | set(record.__optional_keys__)
    assert keys == set(model.model_fields) | set(view_of(model).added)


def test_the_keys_declared_added_are_the_keys_kbq_adds() -> None:
    """A loaded GPU and price entry hold their schema's keys and exactly the keys declared as
    added: a key added in code but not declared, or declared but no longer added, fails here."""
    from kb import get_knowledge
    from kb.knowledge.prices import with_prices
    from kb.paths import rules_dir

    kn = get_knowledge()
    for gpu in kn.gpus.values():
        assert set(gpu) - set(sc.GpuSchema.model_fields) == set(CAPACITY_KEYS) | set(GPU_PRICE_KEYS)
    # `file` comes with a second price file (with_prices): the shipped one, read again
    priced = with_prices(kn, rules_dir() / "prices.yaml")
    for entry in priced.prices.values():
        assert set(entry) - set(sc.PriceSchema.model_fields) == set(PRICE_KEYS)


def test_a_dumped_record_has_the_keys_of_its_record() -> None:
    """What the knowledge holds has the keys its record names (the ones not optional at least)."""
    from kb import get_knowledge

    kn = get_knowledge()
    gpu = next(iter(kn.gpus.values()))
    model = next(iter(kn.models.values()))
    runtime = next(iter(kn.runtimes.values()))
    for value, record in ((gpu, rec.GPU), (model, rec.Model), (runtime, rec.Runtime),
                          (kn.query, rr.QueryRules)):
        assert set(record.__required_keys__) <= set(value)
