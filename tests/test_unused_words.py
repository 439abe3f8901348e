"""A readable question is never refused for a word outside the vocabulary: the rest is answered
and every surface says which words were not used. A near miss of a known word, a word that could
name a GPU or format, or a query with nothing to read is still refused with a caret."""

from __future__ import annotations

import pytest
from server_common import q

from kb import ask
from kb.errors import QueryError
from kb.present.render import markdown, text

# words no rule file knows, none a near miss of a known word: they change nothing
HARMLESS = [
    ("serve llama 3 8b on a 4090 tonight", "serve llama 3 8b on a 4090", ["tonight"]),
    ("kindly infer qwen 7b int4 on rtx 3090 overnight", "infer qwen 7b int4 on rtx 3090", ["kindly", "overnight"]),
    ("serve 70b int4 16 users at work", "serve 70b int4 16 users", ["work"]),
]


@pytest.mark.parametrize("query, plain, unused", HARMLESS)
def test_a_harmless_word_is_answered_and_named(query, plain, unused):
    a, b = ask(query), ask(plain)
    assert a.unused_words == unused
    assert a.memory["total_gb"] == b.memory["total_gb"]          # the word changed nothing
    assert [g.name for g in a.gpus[:3]] == [g.name for g in b.gpus[:3]]
    said = "not used: " + ", ".join(f"'{w}'" for w in unused)
    assert said in text(a)
    assert said.replace("'", "") in markdown(a).replace("'", "").replace("\\", "")
    assert b.unused_words == []


def test_the_page_and_the_api_name_the_words_not_used(client):
    query = "serve llama 3 8b on a 4090 tonight"
    got = client.get("/api/answer?q=" + q(query)).get_json()
    assert got["unused_words"] == ["tonight"]
    page = client.get("/?q=" + q(query)).get_data(as_text=True)
    assert "not used:" in page and "tonight" in page


@pytest.mark.parametrize("query, bad, suggestion", [
    ("serve 70b on 2x h10", "h10", "h100"),       # a near miss of a GPU: it would change the answer
])
def test_a_near_miss_is_still_refused_with_a_caret(query, bad, suggestion):
    with pytest.raises(QueryError) as e:
        ask(query)
    assert e.value.column == query.index(bad) + 1
    assert (e.value.suggestion or "").lower() == suggestion


def test_a_near_miss_with_one_reading_is_read_as_it_and_said():
    a = ask("train 13b qlroa on 20gb")
    assert a.workload["task"] == "qlora" and a.unused_words == []
    assert any("qlroa" in x and "qlora" in x for x in a.assumptions)


def test_nothing_to_read_is_refused():
    with pytest.raises(QueryError) as e:
        ask("xyzzy frobnicate")
    assert e.value.column == 1


def test_a_suggestion_is_built_from_the_word_itself():
    """Every refused word's suggestion shares letters with that word, never only another's."""
    query = "serve 70b on 2x h10 tonight"
    with pytest.raises(QueryError) as e:
        ask(query)
    assert "tonight" not in (e.value.suggestion or "")


def test_a_word_near_only_a_filler_is_not_used_rather_than_refused():
    # 'fro' is near only fillers ('for', 'from'): reading it so would change nothing
    a = ask("llama 3.1 8b on rx 7900 xtx fro")
    assert a.unused_words == ["fro"]
