"""One figure, one value: every count and figure the verdict states is the one the table and
the key figures show, over the generated corpus of test_same_answers (600+ queries of every
kind, task, precision, runtime, named GPU, count and bare capacity).

Checked on the plain text answer with every row (`--all`) and the options: each "N× GPU" of
the verdict is a row of the table at that count (or an option's configuration), and each
number of the verdict is a number the rest of the answer shows, written the same way. Left
out, by design: the sentence saying what binds (it is about the value just beyond the answer,
which no row holds), a borderline note (the error band is behind --explain), the layout's
head and node counts, and speed ratios ("2.5×", computed from two table figures).
"""

from __future__ import annotations

import re

from kb import ask
from kb.errors import KbError
from kb.present import render
from test_same_answers import MIN_QUERIES, queries

NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?")
CONFIG = re.compile(r"\b\d+× [A-Z~]")
EXEMPT = ("binds", "would need", "would get", "Memory would allow", "search stops", "valid layout",
          "Borderline", "more than", "at most", "Ask for less", "even at", "under the",
          "As asked")     # a how-long answered with the least change: the job as asked is no row


def corpus() -> list[str]:
    return [argv[1] for argv in queries() if argv[0] == "--json" and len(argv) == 2]


def sentences(verdict: str) -> list[str]:
    return re.split(r"(?<=[.!?])\s+(?=[A-Z~$\d])", verdict)


def test_the_corpus_is_large_enough():
    assert len(corpus()) >= MIN_QUERIES


def check(query: str) -> list[str]:
    """What in the verdict the rest of the answer does not show (empty: consistent)."""
    try:
        a = ask(query)
    except KbError:
        return []
    verdict = a.verdict
    if verdict.startswith("Unknown: "):
        return []
    plain = render.text(a)
    problems = [f"{len(plain.splitlines())} lines"] if len(plain.splitlines()) > 45 else []
    problems += [f"{len(verdict.split())} words"] if len(verdict.split()) > 45 else []
    body = render.text(a, None, explain=False).split("\n", 3)[3]       # all but query, rule, verdict
    body += "\n".join(render.options_lines(a))
    shown = {n.replace(",", "") for n in NUMBER.findall(body)}
    configs = ({(g.count, g.name) for g in a.gpus} | {(o["count"], o["gpu"]) for o in a.options or []}
               | {(g.gpus_needed, g.name) for g in a.gpus if g.gpus_needed})   # the 'fewest by memory' column
    rest = verdict
    for count, name in sorted(configs, key=lambda c: -len(c[1])):
        rest = rest.replace(f"{count}× {name}", "")
    rest = rest.replace(str(a.workload.get("precision")), "")         # a precision's name, not a figure
    problems += [f"config {m!r} is no row" for m in CONFIG.findall(rest)]
    for sentence in sentences(rest):
        if any(word in sentence for word in EXEMPT):
            continue
        for n in NUMBER.findall(re.sub(r"\d+(?:\.\d+)?×", "", sentence)):
            if n.replace(",", "") not in shown:
                problems.append(f"{n} ({sentence!r}) is not in the table or key figures")
    return problems


def test_every_verdict_figure_is_the_table_figure():
    # and every plain answer is at most 45 lines, every verdict at most 45 words (issue 23)
    bad = {q: p for q in corpus() if (p := check(q))}
    assert not bad, "\n".join(f"{q}: {p[:2]}" for q, p in list(bad.items())[:15]) + f"\n({len(bad)} queries)"
