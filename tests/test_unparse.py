"""One function writes a Workload back as query text (kb.query.unparse): parsing that text gives
the same Workload, for every phrasing of the table (tests/data/phrasings.yaml) and every query of
the generated corpus (tests/test_same_answers.queries), and for Workloads with one change applied
(what an option is)."""

import copy
from pathlib import Path

import pytest
import yaml

from kb import get_knowledge
from kb.errors import QueryError
from kb.query.parse import parse
from kb.query.unparse import unparse
from kb.query.workload import GpuRequest
from tests.test_phrasings import CASES
from tests.test_same_answers import queries

KN = get_knowledge()


def _fields(w):
    d = w.to_dict()
    d.pop("notes")          # how the words were read, not what they say
    return d


def _round_trip(query):
    try:
        w = parse(query, KN)
    except QueryError:
        return None
    text = unparse(w, KN)
    assert _fields(parse(text, KN)) == _fields(w), (query, text)
    return text


def test_every_phrasing_reads_back_the_same():
    for case in CASES:
        assert _round_trip(case["q"]) is not None, case["q"]


def test_every_generated_query_reads_back_the_same():
    read = [q for argv in queries() if argv[0] == "--json" and len(argv) == 2
            and _round_trip(argv[1]) is not None for q in [argv[1]]]
    assert len(read) >= 400


@pytest.mark.parametrize("change", [
    {"precision": "int4"}, {"precision": "q4_k_m"}, {"kv_precision": "fp8"}, {"users": 8},
    {"context_tokens": 2048}, {"checkpointing": True}, {"optimizer": "adam8bit"}, {"offload": True},
    {"task": "qlora", "task_explicit": True}, {"gpus": [GpuRequest("h100-sxm5", 4)]},
    {"gpus": [GpuRequest(None, 2, 48.0)]}, {"budget_usd": 1500.0},
    {"segment": "home", "segments": KN.query["situations"]["home"]["segments"]},
])
def test_a_changed_workload_reads_back_the_same(change):
    for q in ("serve llama-3.1-70b awq 32 users 8k context on 2x l40s",
              "full fine-tune 7B on 8x h100 for 20B tokens", "train 13B qlora on 20GB?"):
        w = copy.deepcopy(parse(q, KN))
        for k, v in change.items():
            setattr(w, k, v)
        text = unparse(w, KN)
        if w.task in KN.query["training_tasks"] and w.context_tokens is not None and w.seq_len is None:
            # a context length in a training question is its sequence length (the engine sizes
            # training by seq_len): it reads back there
            w.seq_len, w.context_tokens = w.context_tokens, None
        assert _fields(parse(text, KN)) == _fields(w), text


def test_the_words_come_from_the_rules():
    w = parse("serve 8b 16 users on 2x rtx 4090", KN)
    text = unparse(w, KN)
    rules = yaml.safe_load((Path(__file__).parent.parent / "rules" / "query.yaml").read_text(encoding="utf-8"))
    assert rules["tasks"]["serve"][0] in text.split()
    assert f"16 {rules['units']['users']['words'][0]}" in text
    assert "2x rtx-4090" in text          # the catalogue's id


@pytest.mark.parametrize("query", [
    "serve llama-3.1-70b prompt 8000 output 300 100 users on h100",
    "serve 70B 8000 prompt 300 output 16 users",
    "serve 8b prompt 4000 output 500 ttft 2 s p95 on 8x h100",
])
def test_prompt_and_output_lengths_read_back_the_same(query):
    # '8000' is also a card's name (Quadro RTX 8000): written back before 'prompt' and another
    # number with its unit, it is the prompt's length, not the card
    w = parse(query, KN)
    assert (w.prompt_tokens, w.output_tokens) in ((8000, 300), (4000, 500))
    _round_trip(query)


def test_a_card_named_by_a_number_before_a_unit_still_reads():
    w = parse("serve 8b on 4090 batch 2", KN)
    assert [g.gpu_id for g in w.gpus] == ["rtx-4090"] and w.batch == 2
