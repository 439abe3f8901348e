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
    (rec.Source, sc.SourceSchema, set()),
    (rec.Precision, sc.PrecisionSchema, set()),
    (rec.Interconnect, sc.InterconnectSchema, set()),
    # capacities (kb.knowledge.checks) and prices (kb.knowledge.prices.merge)
    (rec.GPU, sc.GpuSchema, {"memory_gb", "memory_gib", "price_usd", "cloud_usd_per_hour"}),
    (rec.Mla, sc.MlaSchema, set()),
    (rec.Moe, sc.MoeSchema, set()),
    (rec.Recurrent, sc.RecurrentSchema, set()),
    (rec.PerLayerEmbedding, sc.PerLayerEmbeddingSchema, set()),
    (rec.Model, sc.ModelSchema, set()),
    (rec.RecipeWhen, sc.RecipeWhenSchema, set()),
    (rec.RecipeSet, sc.RecipeSetSchema, set()),
    (rec.Recipe, sc.RecipeSchema, set()),
    (rec.Runtime, sc.RuntimeSchema, set()),
    (rec.RuntimeDefaults, sc.RuntimeDefaultsSchema, set()),
    (rec.Sharding, sc.ShardingSchema, set()),
    (rec.ShardingTable, sc.ShardingFile, set()),
    (rec.Objective, sc.ObjectiveSchema, set()),
    (rr.Input, sc.InputSchema, set()),
    (rr.Constant, sc.ConstantSchema, set()),
    (rr.Defaults, sc.DefaultsSchema, set()),
    (rr.Solve, sc.SolveSchema, set()),
    (rr.Unit, sc.UnitSchema, set()),
    (rr.Phrase, sc.PhraseSchema, set()),
    (rr.QueryRules, sc.QueryFile, set()),
    (rr.BandRuntime, sc.BandRuntimeSchema, set()),
    (rr.BandPoint, sc.BandPointSchema, set()),
    (rr.Band, sc.BandSchema, set()),
    (rr.ErrorBands, sc.ErrorBandsFile, set()),
    (rr.CloudPrice, sc.CloudPriceSchema, set()),
    # the cloud price an answer uses and its spread (kb.knowledge.prices.table), the file (with_prices)
    (rr.Price, sc.PriceSchema, {"cloud_usd_per_hour", "cloud_rule", "cloud_low", "cloud_high",
                          "cloud_pages", "cloud_disagree", "as_of", "file"}),
    (rr.SortKey, sc.SortKeySchema, set()),
    (rr.OptionRule, sc.OptionRuleSchema, set()),
    (rr.CloudRule, sc.CloudRuleSchema, set()),
    (rr.PriceAdvice, sc.AdviceSchema, set()),
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
