"""grammar/query.lark carries the query language: a question is read as its phrases.

Each row: a query and the grammar's phrases found in it, in order (rule names of
grammar/query.lark; fillers are dropped by the classifier, so they make no phrase). The rows
were written from the grammar's rules by hand. The parser that runs the grammar is the module
lark's standalone tool generates from it (kb/query/standalone_parser.py), checked at the end.
"""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from kb import get_knowledge
from kb.query import parse as query
from kb.query.resolve import Resolver

KN = get_knowledge()

CASES = [
    ("serve 70B int4 16 users on h100", ["task", "size", "precision", "quantity", "gpu"]),
    ("mixtral 8x7b awq on a single l40s", ["model", "precision", "gpu"]),
    ("8b on 2x rtx 3080 10gb", ["size", "gpu"]),
    ("8b on 3060 12gb", ["size", "gpu"]),
    ("train 13B qlora on 20GB?", ["task", "size", "task", "capacity"]),
    ("price per 1M output tokens for qwen2.5-14b on an l4", ["cost", "model", "gpu"]),
    ("serve 8b prompt 2000 tokens output of 500 tokens", ["task", "size", "quantity", "quantity"]),
    ("serve 8b with a 2000 token prompt", ["task", "size", "quantity"]),
    ("llama 3.1 70b fp8 vs int4 on h100", ["model", "comparison", "gpu"]),
    ("8b vllm or sglang on h100", ["size", "comparison", "gpu"]),
    ("llama 3.1 8b compared to qwen3 8b", ["comparison"]),
    ("infer 7B fp16 on rtx 4000 ada vs rtx 6000 ada", ["task", "size", "precision", "cards"]),
    ("70b on 2x or 4x h100", ["size", "gpu"]),
    ("which gpu for 13b under $1500", ["question", "size", "money"]),
    ("which gpu for 13b budget 5k", ["question", "size", "quantity"]),
    ("serve 70b at $2 per gpu hour", ["task", "size", "money"]),
    ("what gpu for 32b models at home", ["question", "size", "situation"]),
    ("full fine-tune 8b with torchtune adamw on 4090", ["task", "size", "runtime", "knob", "gpu"]),
    ("full fine-tune 13b zero-3 on 8x a100", ["task", "size", "setting", "gpu"]),
    ("serve 70b on 4 gpus", ["task", "size", "quantity"]),
    ("two gpus 70b int4", ["count", "unit", "size", "precision"]),
    ("qwen 14b at 30 tok/s", ["model", "quantity"]),
    ("max context for 8b on 4090 128k", ["question", "size", "gpu", "number"]),
    ("ttft under 2 s", ["ttft", "quantity"]),
    ("qwen 7b vs 14b on l4", ["model", "gpu"]),
]


def _phrases(q):
    r = Resolver(q, query._lex(q), KN, query._phrases(q))
    assert r.classify() is None
    return [rule for rule, _ in r.grammar(r.phrases)]


@pytest.mark.parametrize("q,rules", CASES, ids=[c[0] for c in CASES])
def test_a_question_is_read_as_its_phrases(q, rules):
    assert _phrases(q) == rules


@pytest.mark.parametrize("family,a,b", [("qwen", "7b", "14b"), ("llama", "8b", "70b"), ("mistral", "7b", "123b"),
                                        ("llama 3.1", "8b", "405b")])
def test_sizes_after_vs_are_the_family_models_each_size_names_alone(family, a, b):
    """'qwen 7b vs 14b' compares the two models 'qwen 7b' and 'qwen 14b' name on their own."""
    from kb.query.parse import parse

    w = parse(f"{family} {a} vs {b}", KN)
    alone = [parse(f"{family} {size}", KN).model_id for size in (a, b)]
    assert w.compare == {"field": "model_id", "values": alone}


# ---------------------------------------------------------------- the generated parser module

ROOT = Path(__file__).resolve().parent.parent
GENERATED = ROOT / "kb" / "query" / "standalone_parser.py"


def _standalone(grammar: Path) -> str:
    """What lark's standalone tool writes for `grammar`, with the options kb.query.parse reads
    it with (LALR, the basic lexer, no placeholders)."""
    return subprocess.run([sys.executable, "-m", "lark.tools.standalone", "-l", "basic", str(grammar)],
                          capture_output=True, text=True, check=True, timeout=120).stdout


def _tables(text: str) -> tuple[str, object]:
    """A generated module as (its code, its tables in a canonical form). lark numbers the parser's
    states and symbols in an order that changes from run to run (it follows sets of objects), so
    the states are renumbered breadth-first from the start state, following each state's actions
    in the order of their symbols' names, each symbol is its name and each rule its definition."""
    head, rest = text.split("\nDATA = (\n", 1)
    data_text, rest = rest.split("\n)\nMEMO = (\n", 1)
    memo_text, tail = rest.split("\n)\n", 1)
    data, memo = ast.literal_eval(data_text), ast.literal_eval(memo_text)

    def resolved(x: object) -> object:
        if isinstance(x, dict):
            return resolved(memo[x["@"]]) if set(x) == {"@"} else {k: resolved(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return type(x)(resolved(v) for v in x)
        return x

    table = data["parser"]["parser"]
    names, states = table["tokens"], table["states"]
    order: dict[int, int] = {}
    queue = [table["start_states"]["start"]]
    while queue:
        state = queue.pop(0)
        if state not in order:
            order[state] = len(order)
            queue += [arg for sym, (kind, arg) in sorted(states[state].items(), key=lambda a: names[a[0]])
                      if kind == 0]
    assert len(order) == len(states), "a state the start state does not reach"
    canonical = {order[s]: {names[sym]: ("shift", order[arg]) if kind == 0 else ("reduce", repr(resolved(arg)))
                            for sym, (kind, arg) in actions.items()} for s, actions in states.items()}
    rest_of = {k: v for k, v in data.items() if k != "parser"}
    front = {**data["parser"], "parser": None}
    front["parser_conf"] = {**front["parser_conf"],
                            "rules": sorted(repr(resolved(r)) for r in front["parser_conf"]["rules"])}
    rest_of["rules"] = sorted(repr(resolved(r)) for r in rest_of["rules"])
    return head + tail, (canonical, order[table["end_states"]["start"]], resolved(front), rest_of)


def test_the_generated_parser_is_lark_standalone_tool_output_for_the_grammar():
    """kb/query/standalone_parser.py is what `python -m lark.tools.standalone -l basic
    grammar/query.lark` writes with the lark installed: the same code, byte for byte, and the
    same parse tables (up to lark's numbering). When the grammar or lark changes, write it again
    with that command (`-o kb/query/standalone_parser.py`)."""
    code, tables = _tables(_standalone(ROOT / "grammar" / "query.lark"))
    shipped_code, shipped_tables = _tables(GENERATED.read_text(encoding="utf-8"))
    assert shipped_code == code
    assert shipped_tables == tables


def test_the_generated_parser_check_sees_a_changed_grammar(tmp_path):
    """The comparison above can fail: one rule of the grammar changed gives other tables."""
    grammar = (ROOT / "grammar" / "query.lark").read_text(encoding="utf-8")
    assert "\nsize: SIZE\n" in grammar
    (tmp_path / "query.lark").write_text(grammar.replace("\nsize: SIZE\n", "\nsize: SIZE SIZE?\n"),
                                         encoding="utf-8")
    assert _tables(_standalone(tmp_path / "query.lark"))[1] != _tables(GENERATED.read_text(encoding="utf-8"))[1]
