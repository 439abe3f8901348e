"""The query's items → a Workload: which phrase each run of words is, which number each unit
word belongs to, and what a word the vocabulary lacks most likely means.

In: the items kb.query.parse's lexer cut (Tok), the Knowledge. Out: a Workload, or a QueryError with
the column, width and a suggestion. Every word comes from the rules (kb.query.words.Vocab).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from kb.errors import QueryError
from kb.knowledge.data import Knowledge, norm
from kb.query.finish import Finisher
from kb.query.unknown_words import Entry, Unknown
from kb.query.words import money, number, scaled, vocab_of
from kb.query.tokens import Tok, TokValue
from kb.query.workload import GpuRequest, Workload



_PHRASE_KINDS = frozenset(("word", "num", "size", "moe", "mem"))
_SPACED = frozenset(("count", "mem", "money"))        # items whose text may hold white space
Hit = tuple[str, str]


class Resolver(Finisher, Unknown):
    def __init__(self, query: str, toks: list[Tok], kn: Knowledge, model_given: bool = False) -> None:
        self.model_given = model_given
        self.q = query
        keys = []                  # norm of a phrase == the joined norms of its items
        for tok in toks:
            if tok.unit == "billion":          # "70B": the B is query.yaml's billion
                tok.value, tok.unit = tok.value * kn.billion, None
            # norm(): the grammar's words, numbers and sizes hold no white space to drop
            keys.append(norm(tok.text) if tok.kind in _SPACED else
                        tok.text.lower().replace("-", "").replace("_", ""))
        self.toks = toks
        self.keys = keys
        self.kn = kn
        self.query_rules = kn.query
        self.limits = kn.query["limits"]
        self.vocab = vocab_of(kn)
        self.w = Workload()
        self.tasks: list[str] = []
        self.pending_count: Tok | None = None
        self.family: tuple[str, Tok] | None = None
        self.runtime_tok: Tok | None = None
        self.size_tok: Tok | None = None
        self.tokens_tok: Tok | None = None
        self.length_tok: Tok | None = None       # a bare "128k"
        self.durations: list[tuple[Tok, float]] = []
        self.ttft = False
        self.formats: list[str] = []
        self.counted: set[int] = set()           # ids of GpuRequests whose count was typed
        self.gpu_span = (-1, -1)                  # the tokens of the last GPU name read

    def fail(self, tok: Tok, message: str, suggestion: str | None = None,
             expected: list[str] | None = None, width: int | None = None) -> QueryError:
        return QueryError(self.q, tok.col, message, suggestion, expected or [],
                          width or max(1, len(tok.text)))

    def _tok(self, kind: str, text: str, col: int, value: TokValue = None) -> Tok:
        return Tok(kind, text, col, value)

    def run(self) -> Workload:
        i = 0
        while i < len(self.toks):
            i = self.step(i)
        if self.pending_count is not None:
            raise self.fail(self.pending_count, f"'{self.pending_count.text}' needs a GPU after it",
                            expected=["a GPU name, e.g. '2x h100'"])
        if self.family is not None:
            fam, tok = self.family
            raise self.fail(tok, f"which {fam} model? add its size or version",
                            self._family_example(fam))
        self.finish()
        return self.w

    # ------------------------------------------------------------ one item

    def step(self, i: int) -> int:
        tok = self.toks[i]
        if tok.kind == "count":
            lo, hi = self.limits["gpu_count"]
            if not lo <= tok.value <= hi:
                raise self.fail(tok, f"the GPU count must be between {lo:g} and {hi:g}")
            self.pending_count = tok
            return i + 1
        if tok.kind == "money":
            return self.money(i)
        if tok.kind == "vs":
            return i + 1
        found = self.match(i, self.vocab.table)
        if found is not None:
            hit, end = found
            if hit[0] == "unit":
                return self.unit_first(i, end, hit[1])
            self.apply(hit, self.toks[i:end])
            if hit[0] == "gpu":
                self.gpu_span = (i, end)
            return end
        return self.unmatched(i)

    def match(self, i: int, table: Mapping[str, Entry]) -> tuple[Entry, int] | None:
        """The longest phrase of `table` from toks[i] over words, numbers and sizes; a last
        word may be a plural ('4090s', 'h100s')."""
        toks, keys, prefixes = self.toks, self.keys, self.vocab.prefixes
        found: tuple[Entry, int] | None = None
        key = ""
        for j in range(i, min(len(toks), i + self.vocab.max_tokens)):
            if toks[j].kind not in _PHRASE_KINDS:
                break
            if toks[j].kind == "num" and self._unit_follows(j, table) and (
                    found is not None or (j == i and not self._number_at(j + 2))):
                break                       # 'hqq 4 users': the 4 counts users, not 'hqq4';
                                            # '5060 context': a context, not an RTX 5060 (but
                                            # '4090 batch 2' is the card, then 'batch 2')
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
                found = (hit, j + 1)
            if key not in prefixes:
                break
        return found

    def _number_at(self, j: int) -> bool:
        return j < len(self.toks) and self.toks[j].kind == "num"

    def _unit_follows(self, j: int, table: Mapping[str, Entry]) -> bool:
        """The token after number j is a unit word, so the number belongs to it."""
        nxt = table.get(self.keys[j + 1]) if j + 1 < len(self.toks) else None
        return nxt is not None and nxt[0] == "unit"

    def unit_first(self, i: int, end: int, unit: str) -> int:
        """'seq 4096', 'batch 8': a unit word takes the number after it."""
        if end < len(self.toks) and self.toks[end].kind == "num":
            self.set_unit(unit, self.toks[i], self.toks[end])
            return end + 1
        spec = self.query_rules["units"][unit]
        if spec.get("focus"):
            self.w.focus = self.w.focus or spec["focus"]
            return end
        if spec["field"] == "gpu_count" and self.pending_count is not None:
            self.w.gpu_count = self.take_count()
            return end
        if spec["field"] == "gpu_count":
            return end                              # "gpu" alone: a filler
        tok = self.toks[i]
        text = self.q[tok.col - 1:self.toks[end - 1].end - 1]
        raise self.fail(tok, f"'{text}' needs a number", f"16 {text}",
                        expected=[f"16 {text}", f"{text} 16"], width=len(text))

    def unmatched(self, i: int) -> int:
        tok = self.toks[i]
        if tok.kind in ("num", "size"):
            unit = self.match(i + 1, self.vocab.units) if i + 1 < len(self.toks) else None
            if unit is not None and tok.kind == "size" and \
                    self.query_rules["units"][unit[0]]["field"] not in ("tokens", "tokens_per_day"):
                unit = None                          # "70B users": a size, then a unit alone
            if unit is not None:                     # "16 users", "4096 token prompt"
                end = unit[1]
                self.set_unit(unit[0], tok, self.toks[end - 1], number_first=True)
                return end
        if tok.kind == "num":
            return self.bare_number(i)
        if tok.kind == "mem":            # not part of a GPU name ("a100 40gb"): a bare capacity
            lo, hi = self.limits["memory_gb"]
            if not lo <= tok.value <= hi:
                raise self.fail(tok, f"the memory size must be between {lo:g} and {hi:g} GB")
            counted = self.pending_count is not None
            self.add_gpu(GpuRequest(None, self.take_count(), tok.value), counted)
            return i + 1
        if tok.kind == "size":
            self.bare_size(tok)
            return i + 1
        if tok.kind == "word":
            return self.word(i)
        raise self.unknown(i)

    def bare_number(self, i: int) -> int:
        tok = self.toks[i]
        nxt = self.match(i + 1, self.vocab.table) if i + 1 < len(self.toks) else None
        if nxt is not None and nxt[0][0] == "gpu":         # "2 4090s", "8 h100"
            count = number(tok.text)
            if count != int(count):
                raise self.fail(tok, f"{tok.text} GPUs is not a whole number")
            lo, hi = self.limits["gpu_count"]
            if not lo <= count <= hi:
                raise self.fail(tok, f"the GPU count must be between {lo:g} and {hi:g}")
            self.pending_count = Tok("count", tok.text, tok.col, int(count))
            return i + 1
        if scaled(tok.text) and self.length_tok is None:   # "128k", "1m": a length
            self.length_tok = tok
            return i + 1
        raise self.fail(tok, f"the number {tok.text} has no unit", f"{tok.text} users",
                        expected=["users", "context", "seq", "batch", "rank", "tokens"])

    # ------------------------------------------------------------ numbers with units

    def set_unit(self, unit: str, first: Tok, last: Tok, number_first: bool = False) -> None:
        spec = self.query_rules["units"][unit]
        num = first if number_first else last
        span = Tok("unit_num", self.q[first.col - 1:last.end - 1], first.col)
        if num.kind == "size":
            value = float(num.value)
        else:
            value = number(num.text, spec.get("binary_k", False)) * spec.get("scale", 1.0)
        self.check_range(span, value, *self.limits[spec["limit"]])
        field = spec["field"]
        if field == "tokens":
            self.tokens_tok = Tok("tokens", span.text, span.col, value)
        elif field == "duration":
            self.durations.append((span, value))
        elif field in ("speed_floor_tok_s", "tokens_per_day", "hours_per_day"):
            setattr(self.w, field, value)
        else:
            setattr(self.w, field, int(round(value)))

    def check_range(self, tok: Tok, value: float, lo: float, hi: float) -> None:
        if not (math.isfinite(value) and lo <= value <= hi):
            raise self.fail(tok, f"{value:g} is out of range ({lo:g} to {hi:g})")

    def money(self, i: int) -> int:
        tok = self.toks[i]
        value, per_hour = money(tok.text)
        end = i + 1
        if not per_hour:
            words = self.vocab.per_hour
            key = ""
            for j in range(i + 1, min(len(self.toks), i + 5)):
                key += self.keys[j]
                if key in words:
                    per_hour, end = True, j + 1
        self.check_range(tok, value, *self.limits["usd"])
        if per_hour:
            self.w.usd_per_gpu_hour = value
        else:
            self.w.budget_usd = value
        return end

    # ------------------------------------------------------------ phrases

    def take_count(self) -> int:
        if self.pending_count is None:
            return 1
        count = int(self.pending_count.value)
        self.pending_count = None
        return count

    def add_gpu(self, req: GpuRequest, counted: bool = False) -> None:
        self.w.gpus.append(req)
        if counted:
            self.counted.add(id(req))

    def apply(self, hit: Hit, toks: list[Tok]) -> None:
        kind, value = hit
        w = self.w
        first = toks[0]
        if kind == "task":
            self.tasks.append(value)
        elif kind == "question":
            w.question = value
        elif kind == "knob":
            self.knob(value)
        elif kind == "precision":
            w.precision = value
        elif kind == "gpu":
            counted = self.pending_count is not None
            self.add_gpu(GpuRequest(value, self.take_count()), counted)
        elif kind == "model":
            if w.model_id is not None and w.model_id != value:
                raise self.fail(first, "one model per query", expected=["compare GPUs with 'vs'"])
            w.model_id = value
            self.family = None
        elif kind == "family":
            self.family = (value, first)
        elif kind == "runtime":
            w.runtime = value
            self.runtime_tok = first
        elif kind == "set":
            self.set_fields(self.query_rules["phrases"][int(value)]["set"], first)
        elif kind == "ttft":
            self.ttft = True

    def set_fields(self, fields: Mapping[str, str | bool | int | float], first: Tok) -> None:
        for name, value in fields.items():
            if name == "gpu_count":
                self.pending_count = Tok("count", first.text, first.col, int(value))
            elif name == "runtime":
                self.w.runtime = str(value)
                self.runtime_tok = first
            elif name == "vs":
                continue
            elif name in ("question", "focus") and getattr(self.w, name) is not None:
                continue                          # the first question form decides
            else:
                setattr(self.w, name, value)

    def bare_size(self, tok: Tok) -> None:
        self.check_range(tok, tok.value, *self.limits["params"])
        if self.family is not None:
            fam, ftok = self.family
            model = self._family_model(fam, tok.value)
            if model is None:
                raise self.fail(ftok, f"no {fam} model near {tok.text} in models.yaml",
                                self._family_example(fam), width=tok.end - ftok.col)
            self.w.model_id = model
            self.w.notes.append(f"'{self.q[ftok.col - 1:tok.end - 1]}' read as {model}")
            self.family = None
            return
        if self.w.params is not None and self.w.params != tok.value:
            raise self.fail(tok, "one model size per query")
        self.w.params = tok.value
        self.size_tok = tok

    def _family_model(self, family: str, params: float) -> str | None:
        best = None
        for mid, m in self.kn.models.items():
            if m["family"] != family:
                continue
            ratio = abs(math.log(m["params_total"] / params))
            if ratio < 0.25 and (best is None or ratio <= best[0] + 1e-9):
                best = (ratio, mid)
        return best[1] if best else None

    def _family_example(self, family: str) -> str | None:
        for mid, m in self.kn.models.items():
            if m["family"] == family:
                return mid
        return None
