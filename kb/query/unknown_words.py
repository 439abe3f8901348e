"""Words the vocabulary lacks, and what they most likely mean: a pasted repository name, a
number run on to its unit ('16users'), a near miss ('lamma'), a GPU the catalogue lacks.

In: one unmatched word of kb.query.resolve.Resolver. Out: the word read (with a note saying how)
or a QueryError with the nearest real words; a suggestion always names a real item.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, TypeVar

from kb.errors import HubModelNamed, QueryError, nearest
from kb.knowledge.data import norm
from kb.query.words import NameReading, near_misses, read_name
from kb.query.workload import Workload

if TYPE_CHECKING:
    Entry = TypeVar("Entry", tuple[str, str], str)
    from kb.knowledge.data import Knowledge
    from kb.query.tokens import Tok, TokValue
    from kb.query.words import Vocab
    from kb.knowledge.records_rules import QueryRules

# what a phrase table holds per key: (kind, value) in Vocab.table, a unit name in Vocab.units

_LEADING_NUMBER = r"^(\d+(?:\.\d+)?)([a-z/].*)$"      # these compile on first use (re caches them):
_PHRASE_KINDS = frozenset(("word", "num", "size", "moe", "mem"))
_NAME_PARTS = r"[-_]"                                  # only unknown words reach them
_HAS_SIZE = r"\d+(\.\d+)?b"
_WORDS = r"[\s_-]+"
_BPW = r"(\d+(?:\.\d+)?)\s*bpw"                        # '4.65bpw': bits per weight
# a Hugging Face Hub model id as huggingface_hub.utils.validate_repo_id reads one: org/name,
# word characters, '.' and '-' (no '--' or '..', tested apart), at most 96 characters a part
_HUB_ID = r"^[A-Za-z0-9][\w.\-]{0,95}/[\w.\-]{0,95}[A-Za-z0-9]$"


# set while a near miss is tried in a word's place (Unknown._changes_nothing): no check inside it
_CHECKING: ContextVar[bool] = ContextVar("kbq_near_miss_check", default=False)


def _question(w: Workload) -> dict[str, object]:
    """A workload as the question it asks: its fields but how its words were read."""
    d = w.to_dict()
    for key in ("notes", "unused_words"):
        d.pop(key, None)
    return d


def is_hub_id(text: str) -> bool:
    """Whether a word is spelt as a Hub model id (org/name)."""
    return re.match(_HUB_ID, text) is not None and "--" not in text and ".." not in text


class Unknown:
    """Part of kb.query.resolve.Resolver (its attributes are declared there)."""

    q: str
    kn: Knowledge
    w: Workload
    vocab: Vocab
    toks: list[Tok]
    keys: list[str]
    query_rules: QueryRules
    limits: dict[str, tuple[float, float]]
    size_tok: Tok | None
    model_given: bool
    reread: Callable[[str], Workload] | None
    formats: list[str]
    gpu_span: tuple[int, int]
    notes_ahead: list[str]
    unused_toks: list[Tok]

    def match(self, i: int, table: Mapping[str, Entry]) -> tuple[Entry, int] | None:
        raise NotImplementedError

    def apply(self, hit: tuple[str, str], toks: list[Tok]) -> None:
        raise NotImplementedError

    def bare_size(self, tok: Tok) -> None:
        raise NotImplementedError

    def fail(self, tok: Tok, message: str, suggestion: str | None = None,
             expected: list[str] | None = None, width: int | None = None) -> QueryError:
        raise NotImplementedError

    def check_range(self, tok: Tok, value: float, lo: float, hi: float) -> None:
        raise NotImplementedError

    def _tok(self, kind: str, text: str, col: int, value: TokValue = None) -> Tok:
        raise NotImplementedError

    def emit(self, terminal: str, start: int, end: int, value: object = None) -> None:
        raise NotImplementedError

    def host_words(self) -> dict[str, str]:
        """query.yaml host_memory_words by their joined keys ('systemram' → any)."""
        return {norm(k).replace("-", "").replace("_", ""): v
                for k, v in self.query_rules.get("host_memory_words", {}).items()}

    def host_word_end(self, i: int) -> tuple[str, int] | None:
        """The longest host-memory phrase from item i: its kind and end; None when none."""
        words, key, found = self.host_words(), "", None
        for j in range(i, min(len(self.toks), i + 4)):
            if self.toks[j].kind not in ("word", "num", "size"):
                break
            key += self.keys[j]
            if key in words:
                found = (words[key], j + 1)
        return found

    def _host_after_channels(self, j: int) -> tuple[str, int] | None:
        """'64gb quad channel ddr4', '64gb of 8-channel ddr5': the channels (a query.yaml phrase
        that sets host_channels), read into the workload, then the host-memory words after them;
        None when the words are not so."""
        k = j + 1 if j < len(self.toks) and self.keys[j] == "of" else j
        hit = self.match(k, self.vocab.table) if k < len(self.toks) else None
        if hit is None or hit[0][0] != "set":
            return None
        fields = self.query_rules["phrases"][int(hit[0][1])]["set"]
        if "host_channels" not in fields:
            return None
        found = self.host_word_end(hit[1])
        if found is not None:
            self.w.host_channels = int(fields["host_channels"])
        return found

    def host_memory(self, i: int) -> int | None:
        """A memory size item i followed by host-memory words ('64gb ddr5', '32gb of ram'): the
        host's memory, read into the workload and said in the notes; the end of its words, or
        None when no such word follows."""
        found = self.host_word_end(i + 1) or self._host_after_channels(i + 1)
        if found is None:
            return None
        kind, end = found
        tok = self.toks[i]
        lo, hi = self.limits["memory_gb"]
        if not lo <= float(tok.value) <= hi:
            raise self.fail(tok, f"the memory size must be between {lo:g} and {hi:g} GB")
        self.w.host_memory_gb = float(tok.value)
        if kind != "any":
            self.w.host_memory_kind = kind
        text = self.q[tok.col - 1:self.toks[end - 1].end - 1]
        self.w.notes.append(f"read '{text}' as the host's (system) memory, not a GPU's")
        return end

    def word(self, i: int) -> int:
        """Classify a word the vocabulary lacks: a pasted name (NAME), a number run on to its
        unit (cut in two and classified again), a near miss (read as the known word, with a
        note), else the error."""
        tok = self.toks[i]
        host = self.host_word_end(i)
        if host is not None:                      # 'on ddr5': the kind of the host's memory
            if host[0] != "any":
                self.w.host_memory_kind = host[0]
            return host[1]
        reading = self.pasted_reading(tok)
        if reading is not None:
            self.emit("NAME", i, i + 1, reading)
            return i + 1
        bits = re.fullmatch(_BPW, tok.text, re.I)
        if bits:                                  # '4.65bpw': the EXL2 file nearest in bits
            return self.nearest_bpw(i, float(bits.group(1)))
        m = re.match(_LEADING_NUMBER, tok.text, re.I)
        if m:                                     # "16users", "500ms", "1s": a number and a unit
            num = self._tok("num", m.group(1), tok.col, m.group(1))
            rest = self._tok("word", m.group(2), tok.col + len(m.group(1)))
            self.toks[i:i + 1] = [num, rest]
            self.keys[i:i + 1] = [norm(num.text), norm(rest.text)]
            if self.match(i + 1, self.vocab.units) is not None:
                return i
            self.toks[i:i + 2], self.keys[i:i + 2] = [tok], [norm(tok.text)]
        candidates = near_misses(tok.text, self.vocab) if not any(c.isdigit() for c in tok.text) else []
        meanings = {self.vocab.words[c] for c in candidates}
        if len(candidates) == 1 or (candidates and len(meanings) == 1):
            shown = self.vocab.display.get(candidates[0], candidates[0])
            self.keys[i] = candidates[0]
            if self.match(i, self.vocab.table) is not None:
                self.notes_ahead.append(f"read '{tok.text}' as '{shown}'")
                return i
            self.keys[i] = norm(tok.text)
        elif len(candidates) > 1:
            options = [self.vocab.display.get(c, c) for c in candidates][:6]
            raise self.fail(tok, f"unknown word '{tok.text}': it could be "
                            + " or ".join(f"'{o}'" for o in options), None, expected=options)
        return self.unused(i)

    def unused(self, i: int) -> int:
        """A word that is no near miss of a known word ('please', 'vulkan' where no runtime
        is called so) is left out and the answer says it was not used; a word that could name a
        GPU, a format or a size (letters with digits), or that a phrase of the vocabulary nearly
        spells from this very word, is refused with the error (kb.query.resolve.Resolver.run
        refuses the first unused word too when no phrase at all was read)."""
        tok = self.toks[i]
        if tok.kind != "word" or any(c.isdigit() for c in tok.text) or self.gpu_like(i):
            raise self.unknown(i)
        if self._where_a_card_goes(i):
            raise self.missing_gpu(i)       # 'phi-3 mini on a raspberry pi': hardware kbq lacks
        near = self._phrase_near_miss(i)
        if near is not None and not self._changes_nothing(i, near):
            raise self.unknown(i)
        self.unused_toks.append(tok)
        return i + 1

    def _where_a_card_goes(self, i: int) -> bool:
        """Word i stands where a card is named ('on a raspberry pi': after a word that opens
        one, query.yaml card_openers) and the query names no card before it."""
        if i == 0 or self.gpu_span != (-1, -1) or any(t.kind == "count" for t in self.toks[:i]):
            return False
        return self.keys[i - 1] in {norm(w) for w in self.query_rules.get("card_openers", [])}

    def _changes_nothing(self, i: int, near: tuple[float, str, int]) -> bool:
        """The phrase word i nearly spells, read in its place, gives the question the word left
        out gives ('hey guys' is no 'gpus': alone the word counts nothing): the word is then no
        near miss that would change the answer. Checked once a query (no check inside a check),
        both readings with the query's other words as they are."""
        if _CHECKING.get() or self.reread is None:
            return False
        parse = self.reread

        run = self._words_from(i)[:near[2]] or [self.toks[i]]
        start, end = run[0].col - 1, run[-1].end - 1
        tok = self.toks[i]
        token = _CHECKING.set(True)
        try:
            left_out = parse(self.q[:tok.col - 1] + " " * len(tok.text) + self.q[tok.end - 1:])
        except (QueryError, HubModelNamed):       # a Hub model is read once, for the query itself
            _CHECKING.reset(token)
            return False
        try:           # a reading that is no question is no plausible meaning of the word
            near_read = parse(self.q[:start] + self.vocab.display[near[1]] + self.q[end:])
        except QueryError:
            return True
        except HubModelNamed:
            return False
        finally:
            _CHECKING.reset(token)
        return _question(near_read) == _question(left_out)

    def nearest_bpw(self, i: int, bits: float) -> int:
        """An average bits per weight the catalogue lacks ('4.65bpw': EXL2 mixes layers to any
        average) read as the format of precisions.yaml typed '<bits>bpw' nearest in bits, said in
        the notes."""
        tok = self.toks[i]
        sized = [p for p in self.kn.precisions.values()
                 if any(re.fullmatch(_BPW, a, re.I) for a in p["aliases"])]
        if not sized:
            raise self.unknown(i)
        best = min(sized, key=lambda p: abs(p["bits_per_weight"] - bits))
        self.notes_ahead.append(f"read '{tok.text}' as {best['name']}, the nearest format of "
                                f"precisions.yaml ({best['bits_per_weight']:g} bits a weight)")
        self.emit("PRECISION", i, i + 1, ("precision", best["id"]))
        return i + 1

    def pasted_reading(self, tok: Tok) -> tuple[NameReading, tuple[str, str] | None] | None:
        """'meta-llama/Llama-3.1-8B-Instruct', 'Qwen2.5-72B-Instruct-AWQ', 'foo-13b': what the
        name reads as (kb.query.words.read_name) and the model it names, if any, or ('hub', id)
        for a Hub id (org/name) that names no model and no other word (unless --model-config
        gives the model); None when it is not a pasted name."""
        if not any(c in tok.text for c in "-/_.") or len(tok.text) < 3:
            return None
        reading = read_name(tok.text, self.vocab)
        hit = self.vocab.table.get(reading.key)
        if hit is None and reading.size_b is not None:
            hit = self._shorter(tok.text)
        if hit is not None and hit[0] == "model":
            return reading, hit
        if hit is None and not self.model_given and "/" in tok.text and is_hub_id(tok.text):
            return reading, ("hub", tok.text)    # a Hub id: read from its config, never guessed
        if reading.size_b is not None:
            return reading, hit
        return None

    def apply_pasted(self, tok: Tok, read: tuple[NameReading, tuple[str, str] | None]) -> None:
        """The model a pasted name names, its format, or the bare size of an unknown model; a
        Hub id the catalogue lacks raises kb.errors.HubModelNamed (its config is read)."""
        reading, hit = read
        if hit is not None and hit[0] == "hub":
            raise HubModelNamed(self.q, tok.col, hit[1])
        if hit is not None and hit[0] == "model":
            self.apply(hit, [tok])
            self.w.notes.append(f"read '{tok.text}' as {hit[1]}")
        elif reading.size_b is not None and reading.key and not reading.key[0].isdigit():
            params = reading.size_b * self.kn.billion
            self.check_range(tok, params, *self.limits["params"])
            self.w.params = params
            self.size_tok = tok
            self.w.notes.append(f"no model '{tok.text}' in models.yaml: answered for the bare "
                                f"{reading.size_b:g}B reference architecture")
        elif reading.size_b is not None:
            self.bare_size(self._tok("size", tok.text, tok.col, reading.size_b * self.kn.billion))
        self.formats.extend(reading.formats)

    def _shorter(self, text: str) -> tuple[str, str] | None:
        """'Qwen3-30B-A3B-Instruct-2507': the name without trailing parts after its size."""
        parts = [p for p in re.split(_NAME_PARTS, text.rpartition("/")[2]) if p]
        for n in range(len(parts) - 1, 0, -1):
            key = read_name("-".join(parts[:n]), self.vocab).key
            if not re.search(_HAS_SIZE, key):
                break           # the size went with the parts cut: 'Qwen3-VL-235B-A22B' is no 'Qwen3-VL'
            hit = self.vocab.table.get(key)
            if hit is not None and hit[0] == "model":
                return hit
        return None

    def gpu_like(self, i: int) -> bool:
        """A word of a GPU name ('rx', 'macbook', 'ti'), or a known card's name run on ('3090ti')."""
        key = self.keys[i]
        if key in self.vocab.gpu_words:
            return True
        return any(key.startswith(k) for k in self.vocab.gpu_keys if len(k) >= 3)

    def _words_from(self, i: int) -> list[Tok]:
        """The run of items from i that a phrase can span (words, numbers, sizes), up to the
        first that none can ('2x', '$500'): a phrase is read over adjacent items only."""
        return list(itertools.takewhile(lambda t: t.kind in _PHRASE_KINDS, self.toks[i:]))

    def _phrase_near_miss(self, i: int) -> tuple[float, str, int] | None:
        """The phrase of the vocabulary nearest to the words from item i (difflib ratio 0.75 and
        up), as (score, key, words), when the word that differs is item i itself: a phrase that
        another word of the query spells wrong is no reading of this one."""
        import difflib

        toks = self._words_from(i)[: self.vocab.max_tokens]
        run = toks if toks else [self.toks[i]]
        tok = run[0]
        best: tuple[float, str, int] | None = None
        keys = list(self.vocab.table)
        for n in range(1, len(run) + 1):
            phrase = norm("".join(t.text for t in run[:n]))
            for hit in difflib.get_close_matches(phrase, keys, n=1, cutoff=0.75):
                if self.vocab.table[hit][0] == "filler":
                    continue                # a filler read in its place would change nothing
                if hit.startswith(phrase) and len(hit) - len(phrase) > 2:
                    continue                # a word cut short is another word ('through' is no 'throughput')
                shown = norm(self.vocab.display[hit])
                bad = next((t for t in run[:n] if norm(t.text) not in shown), tok)
                if bad is not tok:
                    continue
                score = difflib.SequenceMatcher(None, phrase, hit).ratio() + 0.01 * n
                if best is None or score > best[0]:
                    best = (score, hit, n)
        return best

    def unknown(self, i: int) -> QueryError:
        if self.gpu_like(i):
            start = self.gpu_span[0] if self.gpu_span[1] == i else i
            return self.missing_gpu(start)
        tok = self.toks[i]
        best = self._phrase_near_miss(i)
        if best is not None:
            _, hit, n = best
            run = self._words_from(i)[:n] or [tok]
            span = run[-1].end - tok.col
            parts = re.split(_WORDS, self.vocab.display[hit])
            if n > 1 and len(parts) == n:         # the one wrong word, put right
                return QueryError(self.q, tok.col, f"unknown word '{tok.text}'",
                                  parts[0], [self.vocab.display[hit]], max(1, len(tok.text)))
            return QueryError(self.q, tok.col, f"unknown word '{tok.text}'",
                              self.vocab.display[hit], [], span)
        words = [d for d in self.vocab.display.values() if " " not in d]
        return self.fail(tok, f"unknown word '{tok.text}'", nearest(tok.text, words),
                         expected=["a task, model, size, precision or GPU"])

    def missing_gpu(self, start: int) -> QueryError:
        """'rx 7900 xtx', '3090 ti': a GPU name the catalogue lacks, with the nearest cards."""
        n = start + 1
        while n < len(self.toks) and self.toks[n].kind in ("word", "num", "mem") and (
                self.keys[n] in self.vocab.gpu_words or self.keys[n] not in self.vocab.table):
            n += 1
        first, last = self.toks[start], self.toks[n - 1]
        name = self.q[first.col - 1:last.end - 1]
        names = self.vocab.gpu_names
        import difflib                  # a GPU the catalogue lacks: off a plain query's path

        close = difflib.get_close_matches(norm(name), list(names), n=8, cutoff=0.3)
        ids = list(dict.fromkeys(names[c] for c in close))[:3]
        shown = [self.kn.gpus[g]["name"] for g in ids]
        return QueryError(self.q, first.col, f"no GPU called '{name}' in the catalogue (gpus.yaml)"
                          + (f"; nearest: {', '.join(shown)}" if shown else ""),
                          ids[0] if ids else None, shown, len(name))
