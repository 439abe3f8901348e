"""The query language: what people type → Workload; what it cannot read → a caret and a way out."""


import pytest

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


def test_lark_lexer_errors_keep_kbq_messages():
    """lark's lexer cuts the query; a character no item starts with is kbq's QueryError at that
    character's column (lark's UnexpectedCharacters mapped), with what is expected."""
    for query, column in [("serve 70B # 4", 11), ("serve 70B é", 11), ("# serve 70B", 1)]:
        with pytest.raises(QueryError) as err:
            parse(query, KN)
        assert err.value.column == column, query
        assert err.value.message == f"the character {query[column - 1]!r} has no meaning here"
        assert err.value.expected == ["words", "numbers", "?"]


def test_lark_lexer_columns_are_the_query_columns():
    from kb.query.parse import _lex

    toks = _lex("  serve 70B, 2x H100 --tp 2")
    assert [(t.type, t.text, t.col) for t in toks] == [
        ("WORD", "serve", 3), ("SIZE", "70B", 9), ("COUNT", "2x", 14), ("WORD", "H100", 17),
        ("WORD", "tp", 24), ("NUMBER", "2", 27)]


def _fresh_parser_race(monkeypatch, threads: int) -> list[BaseException]:
    """Many threads ask their first questions at once in a process whose parser is not built
    yet, as a server worker's first requests do; the exceptions they raise (QueryError aside)."""
    import threading

    from kb.query import parse as query

    monkeypatch.setattr(query, "_parser", None)
    start, errors = threading.Barrier(threads), []

    def ask(i: int) -> None:
        start.wait()
        try:
            parse(f"serve {i + 1}B int4 {i + 2} users", KN)
        except QueryError:
            pass
        except BaseException as exc:          # noqa: BLE001 - what the race raises is the finding
            errors.append(exc)

    workers = [threading.Thread(target=ask, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(30)
    return errors


def test_concurrent_first_questions_share_one_finished_parser(monkeypatch):
    """The parser is built once, under a lock, and published only whole: threads that ask while
    it is being built (made slow here, so every thread arrives during the build) wait for it
    and all parse; none sees a half-made parser."""
    import time

    from kb.query import parse as query

    real, builds = query._build, []

    def slow_build():
        builds.append(1)
        made = real()
        time.sleep(0.2)
        return made
    monkeypatch.setattr(query, "_build", slow_build)
    for _ in range(3):
        assert _fresh_parser_race(monkeypatch, 24) == []
    assert len(builds) == 3


def test_concurrent_first_questions_on_a_fresh_parser(monkeypatch):
    """The same without a slowed build, threads switching as often as Python lets them and the
    regular-expression cache empty (a fresh process): a parser published before its lexer made
    half of such rounds fail with "'Parser' object has no attribute 'lex'" (issue 39)."""
    import re
    import sys

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for _ in range(10):
            re.purge()
            assert _fresh_parser_race(monkeypatch, 32) == []
    finally:
        sys.setswitchinterval(interval)


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


# Backends and layouts in words: a backend picks the runtime's build for it where the rules hold
# one (llama.cpp's Vulkan build), else keeps the runtime; a layout word with no number spans
# every GPU named, and with none named still needs its number.
@pytest.mark.parametrize("query, expect", [
    ("llama 3.1 8b on rtx 3090 with vulkan", dict(backend="vulkan", runtime="llama.cpp-vulkan")),
    ("llama 3.1 8b on rtx 3090 llama.cpp vulkan", dict(runtime="llama.cpp-vulkan")),
    ("llama 3.1 8b on mi300x with vllm on rocm", dict(backend="rocm", runtime="vllm")),
    ("llama 3.1 8b on rtx 4090 with llama.cpp on cuda", dict(backend="cuda", runtime="llama.cpp")),
    ("llama 3.1 70b on 2x 3090 tensor parallel", dict(tp=2)),
    ("llama 3.1 70b on 4x 3090 row split", dict(tp=4)),
    ("llama 3.1 70b on 2x 3090 layer split", dict(pp=2)),
    ("llama 3.1 70b on 4x 3090 tp 2", dict(tp=2)),
    ("llama 3.1 70b q4_k_m on rtx 4090 -ngl 40", dict(gpu_layers=40, host_offload=True, host_memory_gb=32.0)),
    ("llama 3.1 70b q4_k_m on rtx 4090 with 64gb ddr5 20 layers on cpu", dict(offload_layers=20, gpu_layers=None)),
    ("gpt-oss-120b on rtx 3090 with 96gb ddr5 --n-cpu-moe 30", dict(cpu_moe_layers=30, gpu_layers=None)),
    ("qwen3 30b a3b on rtx 3060 with 64gb ddr5 experts on cpu", dict(host_offload=True, experts_on_cpu=True, host_memory_gb=64.0)),
    # llama.cpp's --override-tensor value, whatever pattern names the experts' tensors
    ("gpt-oss-120b on rtx 3090 with 96gb ddr5 -ot exps=CPU", dict(experts_on_cpu=True)),
    ('gpt-oss-120b on rtx 3090 with 96gb ddr5 --override-tensor "exps=CPU"', dict(experts_on_cpu=True)),
    ("qwen3 30b a3b on rtx 3060 with 32gb ddr4 -ot .ffn_.*_exps.=CPU", dict(experts_on_cpu=True)),
])
def test_backend_layout_and_offload_words(query, expect):
    w = parse(query, KN)
    assert w.unused_words == []
    for k, v in expect.items():
        assert getattr(w, k) == v, (k, getattr(w, k))


@pytest.mark.parametrize("query, gpu_id, count", [
    ("llama 3.1 70b q4_k_m on 2 used p40s", "tesla-p40", 2),
    ("llama 3.1 70b q4_k_m on two used 3090s", "rtx-3090", 2),
    ("llama 3.1 70b q4_k_m on 4x used 3090", "rtx-3090", 4),
    ("qwen2.5 32b on 3 refurbished 3060s", "rtx-3060-12gb", 3),
])
def test_a_count_of_used_cards_reads_with_the_filler_between(query, gpu_id, count):
    """A number, a filler ('used', 'refurbished'), then a card: the number counts the cards, as
    a count word or '4x' before the filler does."""
    w = parse(query, KN)
    assert w.unused_words == []
    assert [(g.gpu_id, g.count) for g in w.gpus] == [(gpu_id, count)]


def test_a_layout_word_with_no_gpu_count_still_needs_its_number():
    with pytest.raises(QueryError) as e:
        parse("llama 3.1 70b tensor parallel", KN)
    assert "needs a number" in str(e.value)


# Forum questions that were refused for ordinary words and now read (each a class: a flag's
# spelling, a filler an English sentence opens with, a version after a backend, a card's cores…)
@pytest.mark.parametrize("query, expect", [
    ("llama-server -m qwen3-30b-a3b-q4_k_m.gguf -ngl 99 -c 32768 on a 4090", dict(context_tokens=32768, gpu_layers=99)),
    ("what context can i fit with mistral nemo 12b q5_k_m on 12gb 3060", dict(question="max_context")),
    ("deepseek r1 671b q2_k_xl on 4x 3090", dict(precision="q2_k")),
    ("vllm --kv-cache-dtype fp8_e5m2 llama 3.1 8b on l40s", dict(kv_precision="fp8")),
    ("koboldcpp 20b on 2x p40 with 4 bit cache", dict(kv_precision="q4_0")),
    ("thinking about getting 2x used 3090s for llama 3.3 70b q4_k_m", dict(unused_words=[])),
    ("rocm 6.4 on mi210 for llama 3.1 70b awq vllm", dict(unused_words=["6.4"])),
    ("is the arc b580 good for llms", dict(question="largest_model", unused_words=["good"])),
    ("hey guys, can my 3060 12gb run qwen2.5 14b q4_k_m?", dict(unused_words=["hey", "guys"])),
    ("how fast does a 4090 chew through a 512 token prompt on llama 3 8b q4_k_m", dict(unused_words=["chew", "through"])),
    ("llama 2 7b q4_0 on 7900 xtx with rocm, tg speed?", dict(unused_words=["tg"])),
    ("llama 3 8b q4_k_m on m3 max 40 core", dict(unused_words=["40 core"])),
    ("llama 3.3 70b q4_k_m on a 4090 + 64gb ddr5", dict(host_memory_gb=64.0)),
    ("gemma 2 9b q4_k_m on rtx 2080 with 64gb quad channel ddr4 -ngl 36", dict(host_channels=4, host_memory_kind="ddr4")),
])
def test_forum_words_read(query, expect):
    w = parse(query, KN)
    for k, v in expect.items():
        assert getattr(w, k) == v, (k, getattr(w, k))


@pytest.mark.parametrize("query, gpu_id, extra", [
    ("llama 3 8b q4_k_m on a 3090 tok/s", "rtx-3090", {}),                   # the card, not 3090 tok/s
    ("llama 3 8b q4_k_m on m3 max 512 prompt", "apple-m3-max", {"prompt_tokens": 512}),
    ("4x used mi50 for qwen2.5 72b q4_k_m", "instinct-mi50-32gb", {}),
])
def test_a_card_keeps_its_words(query, gpu_id, extra):
    w = parse(query, KN)
    assert [g.gpu_id for g in w.gpus] == [gpu_id]
    for k, v in extra.items():
        assert getattr(w, k) == v, (k, getattr(w, k))


@pytest.mark.parametrize("query, expect", [
    # a near miss is read over adjacent words only: 'gives me 2x on qwen2.5 coder 32b' is no model name
    ("speculative decoding gives me 2x on qwen2.5 coder 32b with 0.5b draft on 3090?", dict(unused_words=["gives"])),
    ("I have a 7900 XTX, which models can I run?", dict(question="largest_model")),
    ("llama 3.1 70b q4_k_m on 3x 3090 (72GB VRAM) with 32k context", dict(context_tokens=32768)),
])
def test_more_forum_words_read(query, expect):
    w = parse(query, KN)
    for k, v in expect.items():
        assert getattr(w, k) == v, (k, getattr(w, k))


def test_a_format_typed_after_a_model_is_the_format_asked() -> None:
    # 'qwen3.6 27b fp8' was read as the alias of Qwen3.6 27B's FP8 checkpoint ('qwen3.6-27b-fp8'),
    # the model at its bf16 default: the format typed was lost. Every model alias that ends in
    # a format, typed as words or pasted whole, asks for that format.
    from kb.query.words import NameReading, read_name, vocab_of

    vocab = vocab_of(KN)
    checked = 0
    for model_id, model in KN.models.items():
        for alias in model.get("aliases", []):
            reading: NameReading = read_name(alias, vocab)
            if not reading.formats or reading.formats[-1] not in KN.precisions:
                continue
            for text in (alias, alias.replace("-", " ")):
                w = parse(f"serve {text}", KN)
                assert (w.model_id, w.precision) == (model_id, reading.formats[-1]), (text, w.model_id, w.precision)
            checked += 1
    assert checked >= 3


def test_a_size_typed_after_a_series_name_picks_that_size() -> None:
    # 'qwen3 coder 30b' was refused ("Qwen3-Coder 480B-A35B has 480B parameters, not 30b"): the
    # alias 'qwen3-coder' names the 480B, but the series has a 30B too. Every alias without a
    # size, typed with the size of another model of its series (the ids up to their size part),
    # reads as that model. Sizes: the catalogue's params_total, within the 0.3 log tolerance.
    import math
    import re

    size_part = re.compile(r"^\d+(\.\d+)?[bm]$")
    checked = 0
    for model_id, model in KN.models.items():
        parts = model_id.split("-")
        cut = next((i for i, p in enumerate(parts) if size_part.match(p)), None)
        if not cut:
            continue
        prefix = "-".join(parts[:cut])
        if prefix not in model.get("aliases", []):
            continue
        for other_id, other in KN.models.items():
            rest = other_id[len(prefix) + 1:]
            if other_id == model_id or not other_id.startswith(prefix + "-") or not size_part.match(rest.split("-")[0]):
                continue
            size = rest.split("-")[0]
            typed = float(size[:-1]) * (1e9 if size[-1] == "b" else 1e6)
            if abs(math.log(typed / other["params_total"])) > 0.3 or abs(math.log(typed / model["params_total"])) <= 0.3:
                continue
            w = parse(f"serve {prefix.replace('-', ' ')} {size}", KN)
            assert w.model_id == other_id, (prefix, size, w.model_id)
            checked += 1
    assert checked >= 1
