"""Phrases read as a whole: a number word ("300 billion"), a cost phrase ("per 1M output
tokens"), a card's memory variant ("3060 12gb"), and two values of one thing (a comparison when
joined by "vs", "or", "compared to"; an error otherwise).

In: the items of kb.query.resolve.Resolver. Out: the items merged or consumed, Workload fields
set, or a QueryError with a caret on the second value. Every word comes from rules/query.yaml
(number_words, cost_per, phrases) and the catalogue.
"""

from __future__ import annotations

import re

from typing import TYPE_CHECKING

from kb.knowledge.data import norm
from kb.query.tokens import Tok
from kb.query.words import number, vocab_of

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from kb.errors import QueryError
    from kb.knowledge.data import Knowledge
    from kb.knowledge.records_rules import QueryRules
    from kb.query.unknown_words import Entry
    from kb.query.words import Vocab
    from kb.query.workload import Workload

# what a Workload field compared is called in an error
LABELS = {"precision": "precisions", "runtime": "runtimes", "model_id": "models", "params": "model sizes"}


def merge_number_words(toks: list[Tok], keys: list[str], words: Mapping[str, float], q: str) -> None:
    """'300 billion' → one number 3e11; 'million' alone → 1e6 (query.yaml number_words)."""
    i = 0
    while i < len(toks):
        scale = words.get(keys[i]) if toks[i].kind == "word" else None
        if scale is None:
            i += 1
            continue
        prev = toks[i - 1] if i > 0 else None
        if prev is not None and prev.kind == "num" and not isinstance(prev.value, float):
            text = q[prev.col - 1:toks[i].end - 1]
            toks[i - 1:i + 1] = [Tok("num", text, prev.col, number(prev.text) * scale)]
            keys[i - 1:i + 1] = [norm(text)]
            continue
        toks[i] = Tok("num", toks[i].text, toks[i].col, float(scale))
        i += 1


def merge_sized_numbers(toks: list[Tok], keys: list[str], rules: QueryRules) -> None:
    """'125m model', '350M params', '7 billion parameters': a number of at least the smallest
    model size (limits.params), right before a parameter word (size_words), is a model size."""
    words, lowest = frozenset(norm(w) for w in rules.get("size_words", [])), rules["limits"]["params"][0]
    for i in range(len(toks) - 1):
        if toks[i].kind == "num" and keys[i + 1] in words:
            value = tok_number(toks[i])
            if value >= lowest:
                toks[i] = Tok("size", toks[i].text, toks[i].col, value)


def _rewrite(toks: list[Tok], keys: list[str], at: Callable[[int], tuple[int, int, list[Tok]] | None]) -> None:
    """Each item, left to right, that `at` rewrites: toks[start:end] become its parts (their keys as
    the vocabulary spells them), and reading goes on after them."""
    i = 0
    while i < len(toks):
        found = at(i)
        if found is None:
            i += 1
            continue
        start, end, parts = found
        toks[start:end] = parts
        keys[start:end] = [norm(t.text) if t.kind == "word" else t.text.lower() for t in parts]
        i = start + len(parts)


_GLUED_UNITS = r"(?:[a-z]+\d+)+"
_GLUED_PART = r"([a-z]+)(\d+)"


def split_glued_units(toks: list[Tok], keys: list[str], vocab: Vocab, rules: QueryRules) -> None:
    """'tp2', 'dep4', 'tp1pp1dp4etp1ep4': words of a parallel layout (query.yaml units whose limit is
    `parallel`) each run on to its number, where the word is no name the vocabulary knows ('h100',
    'l40s'); read as each unit and its number in turn. Other units stay whole ('h10' is no 10 hours)."""
    units = rules["units"]

    def at(i: int) -> tuple[int, int, list[Tok]] | None:
        text = toks[i].text.lower()
        if toks[i].kind != "word" or keys[i] in vocab.table or not re.fullmatch(_GLUED_UNITS, text):
            return None
        found = re.findall(_GLUED_PART, text)
        names = [vocab.units.get(norm(unit)) for unit, _ in found]
        if not all(name is not None and units[name]["limit"] == "parallel" for name in names):
            return None
        col, parts = toks[i].col, []
        for unit, digits in found:
            parts += [Tok("word", unit, col), Tok("num", digits, col + len(unit), digits)]
            col += len(unit) + len(digits)
        return i, i + 1, parts
    _rewrite(toks, keys, at)


_PER_TOKEN = r"(\d+(?:\.\d+)?)?([a-z]+)/([a-z]+)"


def split_time_per_token(toks: list[Tok], keys: list[str], vocab: Vocab) -> None:
    """'40 ms/token', '30ms/tok': a unit of time (its number run on to it or not), a slash and what
    it counts, read as the number, the unit, 'per' and the rest, where that is a time-per-output-token
    phrase (query.yaml tpot_words); any other word with a slash stays as it is ('org/model')."""
    def at(i: int) -> tuple[int, int, list[Tok]] | None:
        m = re.fullmatch(_PER_TOKEN, toks[i].text, re.IGNORECASE) if toks[i].kind == "word" else None
        hit = vocab.table.get(norm("per " + m[3])) if m else None
        if m is None or hit is None or hit[0] != "tpot" or norm(m[2]) not in vocab.units:
            return None
        col, lead = toks[i].col, len(m[1] or "")
        return i, i + 1, ([Tok("num", m[1], col, m[1])] if m[1] else []) + [
            Tok("word", m[2], col + lead), Tok("word", "per", col + lead + len(m[2])),
            Tok("word", m[3], col + lead + len(m[2]) + 1)]
    _rewrite(toks, keys, at)


def drop_count_labels(toks: list[Tok], keys: list[str], rules: QueryRules) -> None:
    """'batch of 200 users': a label before a number whose unit comes after it, and names what the
    number counts, goes (query.yaml count_labels: the label, and the words after the number that
    take it); 'batch of 64' alone stays a batch."""
    labels = [(tuple(norm(w) for w in label.split()), frozenset(norm(w) for w in after))
              for label, after in rules.get("count_labels", {}).items()]
    i = 0
    while i < len(toks):
        if toks[i].kind == "num" and i + 1 < len(toks):
            for words, after in labels:
                n = len(words)
                if i >= n and tuple(keys[i - n:i]) == words and keys[i + 1] in after:
                    del toks[i - n:i], keys[i - n:i]
                    i -= n
                    break
        i += 1


_PAIR = r"(\d+(?:\.\d+)?[kmt]?)[/:](\d+(?:\.\d+)?[kmt]?)"


def split_length_pairs(toks: list[Tok], keys: list[str], rules: QueryRules, phrases: Mapping[str, object]) -> None:
    """'2k/500', '2k / 500', '2000:500', 'in/out 2000/500', 'ISL/OSL 4000/500': a pair of numbers joined by a slash (or a colon),
    that no phrase of the vocabulary spells ('24/7'), is a prompt length and an output length,
    each then written with its unit's first word; a label before it (length_pair_words) goes, and so
    does a word after it that only says what the two count (length_pair_after: '8000/500 tokens')."""
    labels = frozenset(norm(w) for w in rules.get("length_pair_words", []))
    after = frozenset(norm(w) for w in rules.get("length_pair_after", []))
    units = rules["units"]

    def at(i: int) -> tuple[int, int, list[Tok]] | None:
        m = re.fullmatch(_PAIR, toks[i].text, re.IGNORECASE) if toks[i].kind == "word" else None
        if m is None or keys[i] in phrases:
            return None
        col = toks[i].col
        split = [Tok("num", m[1], col, m[1]), Tok("word", units["prompt"]["words"][0], col + len(m[1])),
                 Tok("num", m[2], col + len(m[1]) + 1, m[2]), Tok("word", units["output"]["words"][0], col + len(m[0]))]
        start = i - 1 if i > 0 and keys[i - 1] in labels else i
        end = i + 2 if i + 1 < len(toks) and keys[i + 1] in after else i + 1
        return start, end, split
    _rewrite(toks, keys, at)


def tok_number(tok: Tok, binary_k: bool = False) -> float:
    """The number an item stands for: a merged number word's value, else its text read."""
    if isinstance(tok.value, float) and tok.kind == "num":
        return tok.value
    return number(tok.text, binary_k)


class Phrases:
    """Part of kb.query.resolve.Resolver (its attributes are declared there)."""

    q: str
    kn: Knowledge
    w: Workload
    toks: list[Tok]
    keys: list[str]
    query_rules: QueryRules
    join: Tok | None
    seen: dict[str, Tok]

    def match(self, i: int, table: Mapping[str, Entry]) -> tuple[Entry, int] | None:
        raise NotImplementedError

    def fail(self, tok: Tok, message: str, suggestion: str | None = None,
             expected: list[str] | None = None, width: int | None = None) -> QueryError:
        raise NotImplementedError

    def cost_end(self, i: int) -> tuple[int, bool, tuple[str, int]] | None:
        """Where 'per 1M output tokens', 'per million tokens', 'per token' ends: the end of its
        cost words, whether a number follows them, and (unit, end of the unit words); None when
        no cost phrase is here."""
        spec = self.query_rules.get("cost_per")
        if not spec:
            return None
        words = {norm(w) for w in spec["words"]}
        key, end = "", None
        for j in range(i, min(len(self.toks), i + 3)):
            if self.toks[j].kind != "word":
                break
            key += self.keys[j]
            if key in words:
                end = j + 1
        if end is None or end >= len(self.toks):
            return None
        numbered = self.toks[end].kind in ("num", "size")
        start = end + 1 if numbered else end
        unit = self.match(start, vocab_of(self.kn).units)
        if (unit is None or unit[0] not in spec["units"] or self._length_after(unit[1])
                or (numbered and self._length_marker(start, unit[1]))):
            return None
        return end, numbered, unit

    def _length_marker(self, start: int, end: int) -> bool:
        """Whether the unit words are a length's own marker after its number ('1k in', '500 out':
        query.yaml units after_number), which makes the number a request's prompt or output
        ('30 tok/s each, 1k in 1k out'), not what a cost phrase prices."""
        return end == start + 1 and self.keys[start] in vocab_of(self.kn).after_number


    def _length_after(self, at: int) -> bool:
        """A word after the unit that makes a number a length ('each 2000 tokens in', query.yaml
        units after_number): a request's prompt or output, not a cost phrase."""
        if at >= len(self.toks) or self.toks[at].kind != "word":
            return False
        return self.keys[at] in vocab_of(self.kn).after_number

    def cost_phrase(self, first: Tok, last: Tok) -> None:
        """The cost phrase's meaning: the focus is cost (the number is what is priced, not a
        length), said in the notes."""
        spec = self.query_rules["cost_per"]
        if spec is None:
            return
        if self.w.focus in (None, "fit"):       # 'does' asks a fit only if nothing more is asked
            self.w.focus = spec["focus"]
        self.w.notes.append(f"'{self.q[first.col - 1:last.end - 1]}' read as a cost question")

    def gpu_variant(self, gpu: Tok, memory: Tok) -> None:
        """A memory size right after a card's name is that card's variant ('3060 12gb',
        'h100 94gb'): the catalogue card whose name holds the words typed and has that memory;
        after a count of cards, the count's memory in all ('3x 3090 (72gb vram)') reads too."""
        mem = memory.value[1][0]
        req = self.w.gpus[-1]
        if req.gpu_id is not None and req.count > 1 and abs(
                req.count * float(self.kn.gpus[req.gpu_id]["vram_gb"]) - mem.value) <= 0.02 * mem.value + 0.5:
            self.w.notes.append(f"read '{mem.text}' as the {req.count} cards' memory in all")
            return
        typed = [norm(t.text) for t in gpu.value[1]]
        same: list[tuple[str, float]] = []
        for gid, g in self.kn.gpus.items():
            words = {norm(p) for name in (g["name"], *g.get("aliases", [])) for p in name.split()}
            words |= {norm(a) for a in g.get("aliases", [])}
            if all(k in words for k in typed) or gid == req.gpu_id:
                same.append((gid, float(g["vram_gb"])))
        fit = [gid for gid, gb in same if abs(gb - mem.value) <= 0.02 * mem.value + 0.5]
        if req.gpu_id in fit:
            return
        if fit:
            req.gpu_id = fit[0]
            return
        name = self.kn.gpus[str(req.gpu_id)]["name"]
        sizes = sorted({f"{gb:g}gb" for _, gb in same})
        raise self.fail(mem, f"gpus.yaml has no {mem.text} variant of {name}",
                        sizes[0] if sizes else None, expected=sizes)

    def one_value(self, field: str, value: object, tok: Tok, width: int | None = None) -> bool:
        """A second value for a field: a comparison when 'vs', 'or', 'compared to' stands
        between the two (the Workload keeps the first and lists both), else an error on the
        second. True when the value is the field's own."""
        w, prev = self.w, self.seen.get(field)
        if prev is None or getattr(w, field) == value:
            self.seen[field] = tok
            return True
        if self.join is not None and self.join.col > prev.col:
            cmp = w.compare
            if cmp is None:
                w.compare = {"field": field, "values": [getattr(w, field), value]}
            elif cmp["field"] == field:
                if value not in cmp["values"]:
                    cmp["values"].append(value)
            else:
                raise self.fail(tok, "one comparison per query", width=width)
            self.seen[field] = tok
            self.join = None
            return False
        label = LABELS.get(field, field)
        raise self.fail(tok, f"two {label} ('{prev.text}' and '{tok.text}'): join them with 'vs' to compare",
                        f"vs {tok.text}", expected=[f"vs {tok.text}", f"or {tok.text}"], width=width)
