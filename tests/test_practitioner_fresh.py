"""Questions a fresh user typed (tests/data/practitioner_questions.yaml `fresh`) read as their words say.

Each expected field was written from the question's words (the `why` beside it), not from a run; the
table keeps a practitioner's judgement of kbq's figures before and after the reading fixes made for
it, and every answer judged off names the class of its miss.
"""

from typing import Any

import pytest
from practitioner_reading import KN, TABLE, assert_reads

from kb.errors import QueryError
from kb.query.parse import parse

FRESH: list[dict[str, Any]] = TABLE["fresh"]


def test_at_least_forty_new_questions_each_judged_with_its_class() -> None:
    assert len(FRESH) >= 40
    older = {c["q"].lower() for c in TABLE["questions"]}
    assert len({c["q"].lower() for c in FRESH} | older) == len(FRESH) + len(older)
    for c in FRESH:
        assert c["read"] and c["why"] and isinstance(c["before"], bool) and isinstance(c["after"], bool), c["q"]
        assert c["answer"].startswith("ok") == c["after"], c["q"]
        if not c["after"]:
            assert "Class:" in c["answer"], c["q"]          # every miss says which class it is


@pytest.mark.parametrize("case", FRESH, ids=[c["q"] for c in FRESH])
def test_fresh_question_reads_as_its_words_say(case: dict[str, Any]) -> None:
    assert_reads(case)


@pytest.mark.parametrize("q, column, message", [
    ("train 7b on 3 epochs on 4090", 13, "of what?"),                 # epochs with no data set
    ("serve 8b on 100k samples", 13, "counts a training set"),        # examples in an inference question
    ("lora 8b on 10k examples and 20m tokens", 12, "given twice"),
])
def test_a_data_set_that_cannot_be_read_is_an_error_with_a_caret(q: str, column: int, message: str) -> None:
    with pytest.raises(QueryError) as err:
        parse(q, KN)
    assert err.value.column == column and message in str(err.value), str(err.value)


def test_an_exl2_bits_figure_between_the_catalogues_reads_as_the_nearest_and_says_so() -> None:
    # precisions.yaml has EXL2 at 4.0 and 4.5 bpw: 4.65 is nearest 4.5, 4.1 nearest 4.0
    w = parse("llama 3 70b 4.65bpw on 2x 3090", KN)
    assert w.precision == "exl2-4.5bpw" and w.runtime == "exllamav2"
    assert any("4.65bpw" in n and "EXL2 4.5 bpw" in n for n in w.notes), w.notes
    assert parse("llama 3 8b 4.1bpw on 3060", KN).precision == "exl2-4.0bpw"


def test_examples_are_counted_at_the_sequence_length_asked() -> None:
    # 10k examples x 1024 tokens x 3 epochs = 30.72M tokens; the default 2048 when no length is given
    assert parse("qlora mistral 7b on 10k samples seq 1024 3 epochs", KN).train_tokens == 3.072e7
    w = parse("lora mistral 7b on 10k samples", KN)
    assert w.train_tokens == 1.0e4 * KN.query["defaults"]["seq_len"]
    assert any("upper bound" in n for n in w.notes), w.notes


def test_a_deadline_sets_the_count_of_a_how_many_question() -> None:
    from kb.engine import answer

    # 6 * 8.03e9 * 1e10 FLOP in 86,400 s is 5.6e15 FLOP/s: about 13 H100 (989 TFLOPS dense bf16) at
    # the 40-45% MFU of FSDP (rules/runtimes.yaml); memory alone needs 2
    q = "how many h100s to full finetune llama 3 8b on 10b tokens in 1 day"
    a = answer(parse(q, KN), KN, q)
    n = a.gpus[0].count
    assert 11 <= n <= 16, n
    assert a.gpus[0].train_time_s is not None and a.gpus[0].train_time_s <= 86400
    assert "would miss the target asked" in a.verdict and "Memory binds" not in a.verdict, a.verdict
