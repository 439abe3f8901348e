"""The query's items → the phrase terminals of grammar/query.lark: each run of words classified
by the vocabulary, longest phrase first.

In: the items the lexer cut (Tok), the vocabulary (kb.query.words.Vocab: query.yaml's words and
the catalogue's ids and aliases). Out: Toks whose `type` is a terminal the grammar declares (GPU,
MODEL, PRECISION, UNIT, COUNT_WORD, COST…) and whose value holds what the word is (the phrase
table's hit) and the items it covers; fillers are dropped. A word the vocabulary lacks is read
as a pasted name, a number run on to its unit or a near miss, or ends the classification with
the error kbq reports once the phrases before it are read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from kb.errors import QueryError
from kb.knowledge.data import norm
from kb.query.tokens import Tok
from kb.query.words import has_prefix, money

if TYPE_CHECKING:
    from kb.knowledge.data import Knowledge
    from kb.knowledge.records_rules import QueryRules
    from kb.query.unknown_words import Entry
    from kb.query.words import Vocab

_PHRASE_KINDS = frozenset(("word", "num", "size", "moe", "mem"))
_COUNTED_WORD = r"(\d+)-?([a-z].*)"           # '40-core' (compiled on first use; re caches it)
# the phrase table's kinds → the grammar's terminals
TERMINALS = {"task": "TASK", "question": "QUESTION", "knob": "KNOB", "precision": "PRECISION",
             "gpu": "GPU", "model": "MODEL", "family": "FAMILY", "runtime": "RUNTIME",
             "situation": "SITUATION", "ttft": "TTFT", "e2e": "TTFT", "tpot": "TTFT",
             "set": "SETTING"}
# a unit's field → its terminal (the rest are UNIT)
UNIT_TERMINALS = {"context_tokens": "LENGTH", "prompt_tokens": "LENGTH", "output_tokens": "LENGTH",
                  "seq_len": "LENGTH", "tokens": "TOKENS", "tokens_per_day": "DAILY", "gpu_count": "GPUS"}
_COMPARED = frozenset(("PRECISION", "RUNTIME", "MODEL", "SIZE"))     # one value each
_CARD_ENDS = frozenset(("GPU", "MEMORY"))
_CARD_STARTS = frozenset(("GPU", "MEMORY", "COUNT", "COUNT_WORD", "NUMBER"))
_COUNTS = frozenset(("COUNT", "COUNT_WORD"))
_ITEM_TERMINALS = {"count": "COUNT", "money": "MONEY", "vs": "VS", "num": "NUMBER", "size": "SIZE",
                   "mem": "MEMORY"}


class Classifier:
    """Part of kb.query.resolve.Resolver (its attributes are declared there)."""

    q: str
    kn: Knowledge
    toks: list[Tok]
    keys: list[str]
    vocab: Vocab
    query_rules: QueryRules
    gpu_span: tuple[int, int]
    phrases: list[Tok]
    notes_ahead: list[str]
    unused_toks: list[Tok]

    if TYPE_CHECKING:           # the other parts of the Resolver
        def word(self, i: int) -> int: ...

        def unknown(self, i: int) -> QueryError: ...

        def cost_end(self, i: int) -> tuple[int, bool, tuple[str, int]] | None: ...

        def host_memory(self, i: int) -> int | None: ...

        def fail(self, tok: Tok, message: str, suggestion: str | None = None,
                 expected: list[str] | None = None, width: int | None = None) -> QueryError: ...

    def classify(self) -> QueryError | None:
        """Every item classified into self.phrases; the error that stopped it, if any."""
        i = 0
        try:
            while i < len(self.toks):
                i = self.classify_at(i)
        except QueryError as err:
            self.versus()
            return err
        self.versus()
        return None

    def versus(self) -> None:
        """A 'vs', 'or', 'compared to' between two values of one thing is VERSUS: two
        precisions, runtimes, models or sizes, two cards or capacities, two counts."""
        p = self.phrases
        for k in range(1, len(p) - 1):
            if p[k].type not in ("VS", "JOIN"):
                continue
            before, after = p[k - 1].type, p[k + 1].type
            after2 = p[k + 2].type if k + 2 < len(p) else None
            if (before == after and before in _COMPARED and (before != "SIZE" or after2 not in ("TOKENS", "DAILY"))) \
                    or (before in _CARD_ENDS and after in _CARD_STARTS) \
                    or (before in _COUNTS and after in _COUNTS) \
                    or (before in ("MODEL", "SIZE") and after == "SIZE" and after2 not in ("TOKENS", "DAILY")):
                p[k].type = "VERSUS"

    def time_per_token(self, i: int) -> bool:
        """'50 ms per output token': after a duration, a time-per-token phrase (query.yaml
        tpot_words) is a latency target, not a cost ('per 1M tokens')."""
        last = self.phrases[-1] if self.phrases else None
        if last is None or last.type != "UNIT":
            return False
        unit = last.value[0]
        if not isinstance(unit, str) or self.query_rules["units"][unit]["field"] != "duration":
            return False
        found = self.match(i, self.vocab.table)
        return found is not None and found[0][0] == "tpot"

    def emit(self, terminal: str, start: int, end: int, value: object = None) -> None:
        """One terminal over items start..end-1; notes waiting for it go with it."""
        toks = self.toks[start:end]
        first = toks[0]
        text = self.q[first.col - 1:toks[-1].end - 1]
        tok = Tok("phrase", text, first.col, (value, toks, self.notes_ahead), None, terminal)
        self.notes_ahead = []
        self.phrases.append(tok)

    def emit_unit(self, start: int, end: int, unit: str) -> None:
        field = self.query_rules["units"][unit]["field"]
        self.emit(UNIT_TERMINALS.get(field, "UNIT"), start, end, unit)

    def classify_at(self, i: int) -> int:
        tok = self.toks[i]
        if tok.kind == "word":
            self.users_per_period(i)
        if tok.kind == "money":
            return self.classify_money(i)
        if tok.kind in ("count", "vs"):
            self.emit(_ITEM_TERMINALS[tok.kind], i, i + 1)
            return i + 1
        cost = None if self.time_per_token(i) else self.cost_end(i)
        if cost is not None:                 # 'per' 1M 'output tokens'
            words_end, numbered, (unit, end) = cost
            self.emit("COST", i, words_end)
            if numbered:
                self.emit("NUMBER", words_end, words_end + 1)
            self.emit_unit(words_end + int(numbered), end, unit)
            return end
        found = self.match(i, self.vocab.table)
        if found is None:
            return self.classify_unmatched(i)
        hit, end = found
        kind, value = hit
        if kind == "unit":
            return self.classify_unit_first(i, end, value)
        if kind == "filler":
            return end
        terminal = TERMINALS[kind]
        if kind == "set":
            fields = self.query_rules["phrases"][int(value)]["set"]
            terminal = "COUNT_WORD" if "gpu_count" in fields else "JOIN" if "vs" in fields else terminal
        if kind == "gpu":
            self.gpu_span = (i, end)
        self.emit(terminal, i, end, hit)
        return end

    def classify_money(self, i: int) -> int:
        """A sum, and the words after it that make it a price per GPU hour."""
        self.emit("MONEY", i, i + 1)
        key, end = "", i + 1
        if money(self.toks[i].text)[1]:          # '$2/h': the rate is in the item
            return end
        for j in range(i + 1, min(len(self.toks), i + 5)):
            key += self.keys[j]
            if key in self.vocab.per_hour:
                end = j + 1
        if end > i + 1:
            self.emit("PER_HOUR", i + 1, end)
        return end

    def users_per_period(self, i: int) -> None:
        """'10k daily active users', '50k MAU': a count of users over a day or a month is no
        concurrency, and kbq has no source for the share of them served at once, so it is
        refused at its words (query.yaml users_per_period) with the forms that size a fleet."""
        spec, words, key = self.query_rules.get("users_per_period"), self.vocab.users_per_period, ""
        if not spec or not words:
            return
        for j in range(i, min(len(self.toks), i + 4)):
            if self.toks[j].kind != "word":
                return
            key += self.keys[j]
            if key in words:
                start = i - 1 if i > 0 and self.toks[i - 1].kind == "num" else i
                if start < i and self.phrases and self.phrases[-1].value[1][-1] is self.toks[start]:
                    self.phrases.pop()      # its number is this count's, not one read alone first
                raise self.fail(self.toks[start], spec["message"], spec["suggestion"], spec["expected"],
                                width=self.toks[j].end - self.toks[start].col)

    def classify_unit_first(self, i: int, end: int, unit: str) -> int:
        """'seq 4096', 'prompt 2000 tokens': a unit word takes the number after it, but for one
        that says nothing alone when the number has a unit of its own ('arrival rate 2/s')."""
        spec = self.query_rules["units"][unit]
        if spec.get("alone") == "filler" and not (
                self._number_at(end) and not self._same_unit_follows(end, unit)):
            return end          # no number for it to take, or one with a unit of its kind: a filler
                                # ('arrival rate 2/s', 'budget'; but 'request rate 100 isl 500')
        if not self._number_at(end) and "".join(self.keys[i:end]) in self.vocab.beside_number:
            return end          # a unit only beside a number ('short responses'): no unit here
        if spec["field"] == "gpu_count" and self._number_at(end) and self._unit_follows(end, self.vocab.table):
            return end          # 'per gpu, 1k/1k', 'gpus for 50M tokens a day': the number has its own unit
        last = self.phrases[-1] if self.phrases else None
        if (not self._number_at(end) and i > 0 and last is not None and last.value[0] == unit
                and last.value[1][-1] is self.toks[i - 1]):
            return end          # the same unit's word again ('50 concurrent agents'): one count in two words
        self.emit_unit(i, end, unit)
        if end < len(self.toks) and self.toks[end].kind == "num":
            self.emit("NUMBER", end, end + 1)
            field = self.query_rules["units"][unit]["field"]
            after = self.match(end + 1, self.vocab.units) if UNIT_TERMINALS.get(field) == "LENGTH" else None
            if after is not None and after[0] == "tokens":
                self.emit_unit(end + 1, after[1], "tokens")
                return after[1]
            return end + 1
        return end

    def classify_unmatched(self, i: int) -> int:
        tok = self.toks[i]
        detail = self._card_detail(i)
        if detail is not None:                   # 'm3 max 40 core': said as not used
            return detail
        named = self._name_after_size(i) if tok.kind in ("size", "moe") else None
        if named is not None:                    # '8x7b mixtral', '70b llama 3': one model
            self.emit("MODEL", i, named[1], named[0])
            return named[1]
        latency = self._bare_latency(i) if tok.kind == "num" else None
        if latency is not None:                 # '--ttft 2000 --tpot 50 concurrency 500': the latency's
            self.emit("BARE", i, i + 1, ("latency", latency))   # number, not the next unit's
            return i + 1                        # (kb.query.resolve bare_latency)
        if tok.kind in ("num", "size"):
            unit = self.match(i + 1, self.vocab.units) if i + 1 < len(self.toks) else None
            if unit is not None and tok.kind == "size" and \
                    self.query_rules["units"][unit[0]]["field"] not in ("tokens", "tokens_per_day"):
                unit = self._tokens_alone(i + 1)    # "70B users": a size, then a unit alone
            if unit is not None:                     # "16 users", "4096 token prompt"
                self.emit(_ITEM_TERMINALS[tok.kind], i, i + 1)
                self.emit_unit(i + 1, unit[1], unit[0])
                return unit[1]
        if tok.kind == "num":               # a count before a card ('2 used p40s': fillers
            nxt = self._after_fillers(i + 1)  # between them), else a number alone
            card = nxt is not None and nxt[0][0] == "gpu"
            if not card and self._after_backend():
                self.unused_toks.append(tok)  # 'rocm 6.4', 'cuda 12.4': a version, not used
                return i + 1
            self.emit("NUMBER" if card else "BARE", i, i + 1)
            return i + 1
        if tok.kind == "mem" and (host := self.host_memory(i)) is not None:
            return host                     # '64gb ddr5': the host's memory, not a GPU's
        if tok.kind in ("mem", "size"):
            self.emit(_ITEM_TERMINALS[tok.kind], i, i + 1)
            return i + 1
        if tok.kind == "word":
            return self.word(i)
        raise self.unknown(i)

    def _same_unit_follows(self, j: int, unit: str) -> bool:
        """Number j is followed by a unit word that sets what `unit` sets ('2 rps' after 'arrival rate')."""
        after = self.match(j + 1, self.vocab.units) if j + 1 < len(self.toks) else None
        units = self.query_rules["units"]
        return after is not None and units[after[0]]["field"] == units[unit]["field"]

    def _bare_latency(self, i: int) -> str | None:
        """The kind of latency ('ttft', 'e2e', 'tpot') whose word number i comes right after, with
        nothing but separators between them ('--ttft 2000', 'tpot=50', 'ttft <= 1500'), where the word
        is no word following its own duration ('50 ms per token, 1500 rpm': query.yaml
        tpot_after_duration) and no unit of time follows the number; else None."""
        last = self.phrases[-1] if self.phrases else None
        tok = self.toks[i]
        if last is None or last.type != "TTFT" or self.q[last.end - 1:tok.col - 1].strip(" =:<>≤~"):
            return None
        said = norm(" ".join(t.text for t in last.value[1]))         # its words, as the vocabulary spells them
        if said in {norm(w) for w in self.query_rules.get("tpot_after_duration", [])}:
            return None
        unit = self.match(i + 1, self.vocab.units) if i + 1 < len(self.toks) else None
        if unit is not None and self.query_rules["units"][unit[0]]["field"] == "duration":
            return None
        return str(last.value[0][0])           # the hit of the word: (kind, value)

    def match(self, i: int, table: Mapping[str, Entry]) -> tuple[Entry, int] | None:
        """The longest phrase of `table` from toks[i] over words, numbers and sizes; a last
        word may be a plural ('4090s', 'h100s')."""
        toks, keys, vocab = self.toks, self.keys, self.vocab
        found: tuple[Entry, int] | None = None
        shorter: tuple[Entry, int] | None = None          # the phrase found before `found`
        key = ""
        for j in range(i, min(len(toks), i + self.vocab.max_tokens)):
            if toks[j].kind not in _PHRASE_KINDS and (j == i or toks[j].kind != "vs"):
                break                       # 'rent vs buy': a vs inside a phrase of the rules
            if j > i and any(c in self.q[toks[j - 1].end - 1:toks[j].col - 1] for c in ",;"):
                break                       # no phrase spans a comma or a semicolon ('500 tokens, output speed')
            if toks[j].kind == "num" and self._unit_follows(j, table) and not self._card_opened(j, table) and (
                    found is not None or (j == i and not self._takes_next_number(j + 1, table))):
                break                       # 'hqq 4 users': the 4 counts users, not 'hqq4';
                                            # '5060 context': a context, not an RTX 5060 (but
                                            # '4090 batch 2' is the card, then 'batch 2';
                                            # '8000 prompt 300 output' is 8000 prompt tokens)
            part = keys[j]
            if part.endswith("s") and len(part) > 2 and table.get(key + part) is None:
                plural = table.get(key + part[:-1])
                if plural is not None and plural[0] == "gpu":
                    found = (plural, j + 1)
            key += part
            hit = table.get(key)
            if hit is None and key.endswith("."):     # 'llama.cpp.'
                hit = table.get(key.rstrip("."))
            if hit is not None:
                shorter, found = found, (hit, j + 1)
            if not has_prefix(vocab, key):
                break
        if (found is not None and shorter is not None and shorter[1] == found[1] - 1
                and found[0][0] not in ("gpu", "question") and keys[found[1] - 1] != "of" and self._opens_quantity(found[1] - 1)):
            return shorter          # '1t tokens in 30 days': 'in' opens '30 days', so the
        return found                # phrase is 'tokens', not 'tokens in' (a prompt); a card's
                                    # name keeps its last word ('m3 max 512 prompt'), a question
                                    # its own ('gpus needed for 100 users'); a phrase ending in
                                    # 'of' takes the number after it ('concurrency of 1000
                                    # ISL=1000 OSL=1000')

    def _card_detail(self, i: int) -> int | None:
        """A count of a card's cores beside the card ('m3 max 40 core', '40-core m3 max':
        query.yaml card_details): no figure of kbq's reads it, so it is left out and said as not
        used, never refused. The end of its words, or None."""
        details = {norm(w) for w in self.query_rules.get("card_details", [])}
        tok, end = self.toks[i], None
        m = re.fullmatch(_COUNTED_WORD, tok.text) if tok.kind == "word" else None
        if m is not None and norm(m.group(2)) in details:
            end = i + 1
        elif tok.kind == "num":
            key = ""
            for j in range(i + 1, min(len(self.toks), i + 3)):
                key += self.keys[j]
                if key in details:
                    end = j + 1
        if end is None:
            return None
        beside = (self.phrases and self.phrases[-1].type == "GPU") or (
            end < len(self.toks) and (hit := self.match(end, self.vocab.table)) is not None and hit[0][0] == "gpu")
        if not beside:
            return None
        last = self.toks[end - 1]
        self.unused_toks.append(Tok("word", self.q[tok.col - 1:last.end - 1], tok.col))
        return end

    def _after_backend(self) -> bool:
        """The phrase before is a GPU backend's word ('rocm', 'cuda': query.yaml phrases that
        set backend), so a number right after it is its version."""
        if not self.phrases or self.phrases[-1].type != "SETTING":
            return False
        hit = self.phrases[-1].value[0]
        return "backend" in self.query_rules["phrases"][int(hit[1])]["set"]

    def _card_opened(self, j: int, table: Mapping[str, Entry]) -> bool:
        """Number j names a card and a word that opens one stands before it ('on a 3090 tok/s':
        query.yaml card_openers), so the unit after it does not take it."""
        hit = table.get(self.keys[j])
        if j == 0 or hit is None or hit[0] != "gpu":
            return False
        return self.keys[j - 1] in {norm(w) for w in self.query_rules.get("card_openers", [])}

    def _after_fillers(self, j: int) -> tuple[tuple[str, str], int] | None:
        """The phrase at item j past the fillers that describe a card (query.yaml card_fillers:
        'used', 'second hand'), None at the end."""
        card_words = {norm(w) for w in self.query_rules.get("card_fillers", [])}
        while j < len(self.toks):
            found = self.match(j, self.vocab.table)
            if found is None or found[0][0] != "filler" or "".join(self.keys[j:found[1]]) not in card_words:
                return found
            j = found[1]
        return None

    def _name_after_size(self, i: int) -> tuple[tuple[str, str], int] | None:
        """A size typed before the name it completes ('8x7b mixtral' is mixtral 8x7b): the model
        and the end of its words, the longest such name; None when the words after it name none."""
        found: tuple[tuple[str, str], int] | None = None
        key = ""
        for j in range(i + 1, min(len(self.toks), i + self.vocab.max_tokens)):
            if self.toks[j].kind not in _PHRASE_KINDS:
                break
            key += self.keys[j]
            hit = self.vocab.table.get(key + self.keys[i])
            if hit is not None and hit[0] == "model":
                found = (hit, j + 1)
        return found

    def _tokens_alone(self, j: int) -> tuple[str, int] | None:
        """The unit of word j alone when it counts tokens ('20B tokens'), else None."""
        one = self.vocab.units.get(self.keys[j]) if j < len(self.toks) else None
        if one is None or self.query_rules["units"][one]["field"] != "tokens":
            return None
        return one, j + 1

    def _number_at(self, j: int) -> bool:
        return j < len(self.toks) and self.toks[j].kind == "num"

    def _opens_quantity(self, j: int) -> bool:
        """Item j is a filler word ('in', 'for') and a number with its unit word follows it, or a
        unit word that alone is one of it ('in a month', 'in a week': query.yaml units, alone)."""
        k = j
        while k < len(self.toks) and (hit := self.vocab.table.get(self.keys[k])) is not None and hit[0] == "filler":
            k += 1                  # 'in under 30 days'
        if k > j and k < len(self.toks) and (unit := self.vocab.units.get(self.keys[k])) is not None:
            return self.query_rules["units"][unit].get("alone") == "one"
        return k > j and self._number_at(k) and k + 1 < len(self.toks) and self.keys[k + 1] in self.vocab.units

    def _takes_next_number(self, j: int, table: Mapping[str, Entry]) -> bool:
        """The unit word j is followed by a number that has no unit word of its own, so the
        unit takes that number ('4090 batch 2') and the number before it is something else."""
        return self._number_at(j + 1) and not self._unit_follows(j + 1, table)

    def _unit_follows(self, j: int, table: Mapping[str, Entry]) -> bool:
        """The token after number j is a unit word (or a word that is one only after a number,
        '2k in'), so the number belongs to it."""
        if j + 1 >= len(self.toks):
            return False
        nxt = table.get(self.keys[j + 1])
        return (nxt is not None and nxt[0] == "unit") or self.keys[j + 1] in self.vocab.units
