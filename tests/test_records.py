"""The typed dicts of kb.knowledge.records and kb.knowledge.records_rules have the keys of the schema models they
mirror: a key added to or dropped from a rule file's schema must be added to or dropped from the
record the engine is type-checked against."""

from __future__ import annotations

import pytest

from kb.knowledge import records as rec
from kb.knowledge import records_rules as rr
from kb.knowledge import schema as sc
# record → (schema model, the keys kbq adds after validation, and where)
PAIRS = [
    (rec.Source, sc.Source, set()),
    (rec.Precision, sc.Precision, set()),
    (rec.Interconnect, sc.Interconnect, set()),
    # capacities (kb.knowledge.checks) and prices (kb.knowledge.prices.merge)
    (rec.GPU, sc.Gpu, {"memory_gb", "memory_gib", "price_usd", "cloud_usd_per_hour"}),
    (rec.Mla, sc.Mla, set()),
    (rec.Moe, sc.Moe, set()),
    (rec.Recurrent, sc.Recurrent, set()),
    (rec.PerLayerEmbedding, sc.PerLayerEmbedding, set()),
    (rec.Model, sc.Model, set()),
    (rec.RecipeWhen, sc.RecipeWhen, set()),
    (rec.RecipeSet, sc.RecipeSet, set()),
    (rec.Recipe, sc.Recipe, set()),
    (rec.Runtime, sc.Runtime, set()),
    (rec.RuntimeDefaults, sc.RuntimeDefaults, set()),
    (rec.Sharding, sc.Sharding, set()),
    (rec.ShardingTable, sc.ShardingFile, set()),
    (rec.Objective, sc.Objective, set()),
    (rr.Input, sc.Input, set()),
    (rr.Constant, sc.Constant, set()),
    (rr.Defaults, sc.Defaults, set()),
    (rr.Solve, sc.Solve, set()),
    (rr.Unit, sc.Unit, set()),
    (rr.Phrase, sc.Phrase, set()),
    (rr.QueryRules, sc.QueryFile, set()),
    (rr.BandRuntime, sc.BandRuntime, set()),
    (rr.BandPoint, sc.BandPoint, set()),
    (rr.Band, sc.Band, set()),
    (rr.ErrorBands, sc.ErrorBandsFile, set()),
    (rr.CloudPrice, sc.CloudPrice, set()),
    # the cloud price an answer uses and its spread (kb.knowledge.prices.table), the file (with_prices)
    (rr.Price, sc.Price, {"cloud_usd_per_hour", "cloud_rule", "cloud_low", "cloud_high",
                          "cloud_pages", "cloud_disagree", "as_of", "file"}),
    (rr.SortKey, sc.SortKey, set()),
    (rr.OptionRule, sc.OptionRule, set()),
    (rr.CloudRule, sc.CloudRule, set()),
    (rr.Advice, sc.Advice, set()),
]


@pytest.mark.parametrize(("record", "model", "added"), PAIRS, ids=[p[0].__name__ for p in PAIRS])
def test_record_has_the_schema_keys(record: type, model: type, added: set[str]) -> None:
    keys = set(record.__required_keys__) | set(record.__optional_keys__)
    assert keys == set(model.model_fields) | added


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
