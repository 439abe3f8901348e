"""The query language: what people type → Workload; what it cannot read → a caret and a way out."""

import functools
import re
import string
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kb import get_knowledge
from kb.errors import QueryError
from kb.query.parse import parse

KN = get_knowledge()


def gpus(w):
    return [(g.gpu_id, g.count, g.capacity_gb) for g in w.gpus]


# Every example of design.md, plus the issue's forms.
@pytest.mark.parametrize("query, expect", [
    ("train 13B qlora on 20GB?", dict(task="qlora", params=13e9, gpus=[(None, 1, 20.0)])),
    ("serve 70B int4 16 users", dict(task="serve", params=70e9, precision="int4", users=16)),
    ("serve llama-3.1-70b awq 32 users 8k context on 2x L40S",
     dict(task="serve", model_id="llama-3.1-70b", precision="awq", users=32, context_tokens=8192,
          gpus=[("l40s", 2, None)])),
    ("fine-tune mistral 7b lora bf16 seq 4096 batch 8 on rtx 4090",
     dict(task="lora", precision="bf16", seq_len=4096, batch=8, gpus=[("rtx-4090", 1, None)])),
    ("full fine-tune 7B on 8x H100 for 20B tokens",
     dict(task="full_ft", params=7e9, train_tokens=20e9, gpus=[("h100-sxm5", 8, None)])),
    ("infer 7B fp16 on rtx 4000 ada vs rtx 6000 ada",
     dict(task="infer", precision="fp16", gpus=[("rtx-4000-ada", 0, None), ("rtx-6000-ada", 0, None)])),
    ("which gpu for 13B lora", dict(task="lora", question="which_gpu", params=13e9)),
    ("max users for 70B int4 on h200 at 32k context",
     dict(question="max_users", precision="int4", context_tokens=32768, gpus=[("h200-sxm", 1, None)])),
    ("largest model for 24GB int4", dict(question="largest_model", precision="int4", gpus=[(None, 1, 24.0)])),
    ("mixtral 8x7b q4_k_m on 2x 3090",
     dict(model_id="mixtral-8x7b", precision="q4_k_m", gpus=[("rtx-3090", 2, None)])),
    ("4 x a100-80gb serve 70B", dict(gpus=[("a100-sxm4-80gb", 4, None)])),
    ("SERVE 70B INT4 16 USERS?", dict(task="serve", users=16, precision="int4")),
    ("16 users serve int4 70B", dict(task="serve", users=16, precision="int4")),
    ("users 16 serve 70B", dict(users=16)),
    ("serve 70B fp8 kv cache", dict(kv_precision="fp8")),
    ("full fine-tune 7B with checkpointing 8-bit adam", dict(checkpointing=True, optimizer="adam8bit")),
    ("lora llama-2-13b rank 8", dict(task="lora", lora_rank=8, model_id="llama-2-13b")),
    ("prefill 2048 tokens llama-2-7b fp16", dict(task="prefill", prompt_tokens=2048)),
    ("llama 3 70b", dict(model_id="llama-3-70b")),
    ("max context for 8B fp16 on rtx 4090", dict(question="max_context", params=8e9)),
    ("how many h100 for 405B fp8", dict(question="how_many_gpus", params=405e9, gpus=[("h100-sxm5", 1, None)])),
])
def test_reads(query, expect):
    w = parse(query, KN)
    for key, value in expect.items():
        got = gpus(w) if key == "gpus" else getattr(w, key)
        assert got == value, (key, got)


@pytest.mark.parametrize("query, column, suggestion", [
    ("train 13B qloraxyz on 20GB", 11, "qlora"),       # too far to be read as qlora
    ("serve 70B int4 on h10", 19, "h100"),
    ("infer 7b on rtx 4000 adaa", 13, "rtx-4000-ada"),   # the whole GPU name, and the card
    ("serve 70B 16", 11, "16 users"),
    ("serve 70B users", 11, "16 users"),
    ("serve 70B # 4", 11, None),
    ("serve llama-3.1-70b int4 on 2x", 29, None),
])
def test_errors_point_at_the_token(query, column, suggestion):
    with pytest.raises(QueryError) as info:
        parse(query, KN)
    err = info.value
    assert err.column == column, err.render()
    if suggestion is not None:
        assert err.suggestion == suggestion
    text = err.render()
    assert query in text and "^" in text
    caret_line = text.splitlines()[2]
    assert caret_line.index("^") - 2 == column - 1


def _corrected(err):
    """The query with the suggestion in place of the marked text, as the page offers it."""
    start = err.column - 1
    return err.query[:start] + err.suggestion + err.query[start + err.width:]


def test_typo_inside_a_gpu_name_suggests_the_name():
    with pytest.raises(QueryError) as info:
        parse("infer 7b on rtx 4000 adaa", KN)
    assert info.value.suggestion is not None
    assert gpus(parse(_corrected(info.value), KN)) == [("rtx-4000-ada", 1, None)]


# A suggestion is always a real query: put in place of the marked text, the query parses.
@pytest.mark.parametrize("query", [
    "serve 70b on 2x3090 16", "serve 70B 16", "serve 70B users", "infer 7b on rtx 4000 adaa",
    "serve 70B int4 on h10", "train 13B qloraxyz on 20GB", "serve 7B 5 on 2 x 4090",
    "serve 70b on rx 6600 xt", "serve 70B batch", "lora 8b rnakzz 16 on 4090",
    "serve llama-3.1-70b fp16 on 2x h100 sevrez", "serve 70b on 2x3090 16 sers",
])
def test_suggestions_parse(query):
    with pytest.raises(QueryError) as info:
        parse(query, KN)
    err = info.value
    if err.suggestion is not None:
        parse(_corrected(err), KN)


@pytest.mark.parametrize("query, words", [
    ("", "empty"),
    ("   ", "empty"),
    ("serve int4 16 users", "which model"),
    ("x" * 600, "longer than"),
    ("serve 70B\x00", "control"),
    ("serve 70B batch", "needs a number"),
    ("train serve 70B", "either training or inference"),
    ("serve 70B 0 users", "out of range"),
    ("serve 70B on 0x h100", "between 1"),
])
def test_errors_say_what_is_wrong(query, words):
    with pytest.raises(QueryError) as info:
        parse(query, KN)
    assert words in info.value.message


def test_error_dict_has_message_column_suggestion():
    with pytest.raises(QueryError) as info:
        parse("train 13B qloraxyz", KN)
    d = info.value.to_dict()
    assert {"message", "column", "suggestion"} <= set(d)
    assert d["column"] == 11 and d["suggestion"] == "qlora"


# The forms the accuracy issue names: each must parse and land in the Answer's keys.
@pytest.mark.parametrize("query, runtime, key", [
    ("infer llama-3-8b q4_k_m on rtx 4090 with llama.cpp", "llama.cpp", "decode_tokens_per_s"),
    ("serve llama-2-70b fp16 on 4x a100-80gb with lmdeploy batch 1", "lmdeploy", "decode_tokens_per_s"),
    ("prefill 2048 tokens llama-2-7b fp16 on a100-40gb with tensorrt-llm", "tensorrt-llm", "prefill_tokens_per_s"),
    ("qlora llama-3.1-8b seq 2048 batch 2 with torchtune on rtx 4090", "torchtune", "train_tokens_per_s"),
    ("full fine-tune llama-2-7b seq 1024 batch 1 with checkpointing on a100-80gb", "hf-peft", "train_tokens_per_s"),
    ("lora llama-2-13b rank 8 with litgpt on a100-40gb", "litgpt", "train_tokens_per_s"),
    ("infer llama-3-70b q4_k_m on 2x rtx 3090 with llama.cpp context 8192", "llama.cpp", "decode_tokens_per_s"),
])
def test_accuracy_issue_forms(query, runtime, key):
    from kb import ask

    a = ask(query).to_dict()
    assert a["workload"]["runtime"] == runtime
    if a["gpus"][0]["fits"]:
        assert a["throughput"][key] > 0
    else:   # no speed for what does not fit; the warning gives it "if it fitted"
        assert a["throughput"][key] is None and any("if it fitted" in x for x in a["warnings"])
    assert a["gpus"][0]["per_gpu_gb"] > 0 and a["memory"]["total_gb"] > 0


# Items that span two tokens take their text (and so the caret's width) from the query itself,
# whatever the spaces between the tokens.
@pytest.mark.parametrize("query, column, width", [
    ("serve 70B 0   users", 11, 9),
    ("serve 70B seq   0", 11, 7),
    ("train 7B on 8x h100 for 0   tokens", 25, 10),
    ("serve 70B on rtx 4090 context  0", 23, 10),      # the unit takes the number after it
])
def test_two_token_items_span_their_text(query, column, width):
    with pytest.raises(QueryError) as info:
        parse(query, KN)
    assert (info.value.column, info.value.width) == (column, width), info.value.render()


def test_a_unit_between_two_numbers_goes_with_the_second():
    w = parse("serve 70B on rtx 4090 context 128", KN)
    assert gpus(w) == [("rtx-4090", 1, None)] and w.context_tokens == 128


SAME_BOTH_WAYS = [
    "serve llama-3.1-70b awq 32 users 8k context on 2x L40S",
    "full fine-tune 7B on 8x H100 for 20B tokens", "prefill 2048 tokens llama-2-7b fp16",
    "infer 7B fp16 on rtx 4000 ada vs rtx 6000 ada", "serve 70B on rtx 4090 context 128",
    "mixtral 8x7b q4_k_m on 2x 3090, 8-bit adam?", "users 16 serve 70B", "serve 70B tokens",
    "train 13B qlroa on 20GB", "serve 70B # 4", "serve 70B $ 4", "serve 70B 0   users", "serve llama-3.1-70b int4 on 2x",
    "?", "serve 70B batch", "llama 70b", "4 x a100-80gb serve 70B compared  to h100",
]


def _outcome(query):
    try:
        return parse(query, KN)
    except QueryError as err:
        return (err.column, err.width, err.message, err.suggestion, err.expected)


def test_lark_reads_queries_as_the_generated_parser_does(monkeypatch):
    """kb/_query_parser.py's tables stand in for lark only while they match the grammar; lark
    itself, used otherwise, must read every query the same way."""
    from kb.query import _query_parser
    from kb.query import parse as query
    query._get_parser()
    assert query._errors.__name__ == "kb.query.lalr"      # the shipped grammar runs on the tables
    generated = [_outcome(q) for q in SAME_BOTH_WAYS]
    monkeypatch.setattr(_query_parser, "GRAMMAR", "stale")
    monkeypatch.setattr(query, "_parser", None)
    monkeypatch.setattr(query, "_errors", None)
    monkeypatch.setattr(query, "_lexer", None)     # lark's lexer, for this test only
    assert type(query._get_parser()).__module__.startswith("lark")
    assert [_outcome(q) for q in SAME_BOTH_WAYS] == generated


def test_control_character_check_matches_its_definition():
    from kb.query.parse import _UNPRINTABLE, _unprintable

    found = {i for i in range(0x110000) if re.match(_UNPRINTABLE, chr(i))}
    assert found == {i for i in range(0x110000) if _unprintable(chr(i))}
    # parse skips the search for printable ASCII: among ASCII, exactly the unprintable are not
    assert {i for i in range(128) if not chr(i).isprintable()} == {i for i in range(128) if _unprintable(chr(i))}


@functools.cache
def _lark_parser():
    import lark

    from kb.query import parse as query
    from kb.paths import grammar_dir

    return lark.Lark.open(str(grammar_dir() / "query.lark"), parser="lalr", maybe_placeholders=False,
                          transformer=query._Phrases())


def _lark_cut(q):
    """lark's own lexer on the query: the items (terminal, text, column), the ignored ones skipped."""
    from lark.exceptions import UnexpectedCharacters

    try:
        return [(t.type, str(t), t.column) for t in _lark_parser().lex(q)]
    except UnexpectedCharacters as exc:
        return ("no item starts at", exc.column)


def _kbq_cut(q):
    from kb.query import parse as query
    try:
        return [(t.type, t.text, t.col) for t in query._lex(q)]
    except QueryError as err:
        return ("no item starts at", err.column)


_PHRASINGS = [c["q"] for c in yaml.safe_load(
    (Path(__file__).parent / "data" / "phrasings.yaml").read_text(encoding="utf-8"))["phrasings"]]


def test_the_lexer_cuts_queries_as_lark_does():
    """kb.query.parse cuts a query with one pattern of the grammar's item terminals; lark's own
    lexer is the reference: the same items, terminals and columns."""
    from kb.query import parse as query
    query._get_parser()
    assert query._lexer is not None                 # the shipped grammar takes the one-pattern lexer
    for q in [*_PHRASINGS, *SAME_BOTH_WAYS, "  serve 70B  ", "8×h100 vs 2 x a100", "$1.89/h 24/7",
              "--tensor-parallel-size 4", "serve 70B é", "4 x", "1,000 users", "1e6 tokens"]:
        assert _kbq_cut(q) == _lark_cut(q), q


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="abgkmstvxyB019.,-_/+$?!()'= \t×é", max_size=40))
def test_the_lexer_cuts_any_text_as_lark_does(q):
    assert _kbq_cut(q) == _lark_cut(q)


# the grammar's letters in both cases, and the four characters `re` matches to an ASCII letter
# when it ignores case (İ ı → i, ſ → s, the Kelvin sign → k), which the folded lexer reads as them
@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="abghikmorstuvxBGHIKMORSTUVX019.,-/$ ×\u0130\u0131\u017f\u212aÉé", max_size=30))
def test_the_folded_lexer_cuts_any_case_as_lark_does(q):
    assert _kbq_cut(q) == _lark_cut(q)


def test_the_lexer_reads_a_folded_copy_and_keeps_the_text_as_typed():
    from kb.query import parse as query
    query._get_parser()
    assert query._lexer is not None and query._lexer.folded
    for q in ["SERVE 70B INT4 16 USERS ON 2X H100", "ſerve 70B ınt4 on 4090", "\u212aV 8K \u0130NT4 70B"]:
        assert _kbq_cut(q) == _lark_cut(q), q
    assert [t.text for t in query._lex("ſerve 70B ON 2X H100")] == ["ſerve", "70B", "ON", "2X", "H100"]


def test_fold_maps_every_character_re_matches_to_an_ascii_letter_ignoring_case():
    """kb.query.parse.FOLD is what `re` does ignoring case: every character that a
    case-insensitive [a-z] matches, folded to the one letter it matches, and nothing else."""
    import sys

    from kb.query.parse import FOLD
    letter = re.compile("(?i:[a-z])")
    matched = {chr(c): chr(c).translate(FOLD) for c in range(sys.maxunicode + 1)
               if letter.fullmatch(chr(c)) and chr(c) not in string.ascii_lowercase}
    assert {k: v for k, v in matched.items() if k.isascii()} == {c: c.lower() for c in string.ascii_uppercase}
    for ch, folded in matched.items():
        assert re.fullmatch(f"(?i:{folded})", ch) and folded in string.ascii_lowercase, ch
    assert set(FOLD) == {ord(k) for k in matched}


def test_a_bare_number_after_under_is_a_budget_only_when_the_question_asks_what_to_buy():
    # rules/query.yaml budget_words: "under 500" in a which-GPU question is $500; on a card named,
    # with no question of what to buy, the number still has no unit and is refused with a caret
    from kb.errors import QueryError
    from kb.query.parse import parse
    assert parse("best gpu for llama 3.1 8b under 500", KN).budget_usd == 500
    with pytest.raises(QueryError) as err:
        parse("llama 8b on 4090 under 500", KN)
    assert err.value.column == len("llama 8b on 4090 under ") + 1


@pytest.mark.parametrize("query, tokens, seq", [
    # a count of examples times their length, not the data set given twice
    ("lora llama 3.1 8b on rtx 4090 50k samples of 1k tokens", 50e6, 1000),
    ("lora llama 3.1 8b on rtx 4090 50k samples of 1k tokens 3 epochs", 150e6, 1000),
    ("lora llama 3.1 8b seq 4096 on rtx 4090 20k examples of 2k tokens", 40e6, 4096),
])
def test_examples_of_a_length_are_their_product(query, tokens, seq):
    w = parse(query, KN)
    assert w.train_tokens == pytest.approx(tokens) and w.seq_len == seq
