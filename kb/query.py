"""Query text → Workload.

In: what a person typed ("serve llama-3.1-70b awq 32 users 8k context on 2x L40S").
Out: a Workload, or a QueryError with the column of the bad token, what was expected and the
nearest valid word. grammar/query.lark (lark, LALR) finds the structure; the words are matched,
longest phrase first, against the vocabulary of the rules (tasks, questions, knobs and fillers
from query.yaml; GPU, model and precision ids and aliases).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kb.errors import QueryError, nearest
from kb.model import Knowledge, norm
from kb.workload import GpuRequest, Workload

MAX_QUERY_CHARS = 500
MAX_PHRASE_TOKENS = 6

_parser: Any = None
_errors: Any = None    # the module whose Unexpected* exceptions the parser raises


def _get_parser() -> Any:
    """The LALR parser of grammar/query.lark, making Tok items as it reduces (_Items): the
    generated standalone module when it was built from this very grammar (no lark import),
    else lark itself."""
    global _parser, _errors
    if _parser is None:
        import hashlib

        from kb.paths import grammar_dir

        path = grammar_dir() / "query.lark"
        try:
            from kb import _query_parser as standalone

            current = standalone.GRAMMAR_SHA256 == hashlib.sha256(path.read_bytes()).hexdigest()
        except (ImportError, AttributeError, OSError):
            current = False
        if current:
            _parser, _errors = standalone.Lark_StandAlone(transformer=_Items()), standalone
        else:
            import lark
            from lark import exceptions

            _parser = lark.Lark.open(str(path), parser="lalr", maybe_placeholders=False,
                                     transformer=_Items())
            _errors = exceptions
    return _parser


@dataclass
class Tok:
    kind: str          # word num size moe count mem tokens unit_num vs
    text: str
    col: int           # 1-based
    value: Any = None
    unit: str | None = None
    number_first: bool = False
    unit_text: str = ""

    @property
    def end(self) -> int:
        return self.col + len(self.text)


@dataclass
class Vocab:
    """Every phrase the resolver knows: normalised key → (kind, value), plus display forms."""
    table: dict[str, tuple[str, str]]
    display: dict[str, str]
    max_tokens: int
    prefixes: frozenset[str]        # every leading part of a key (the keys too)


def vocabulary(kn: Knowledge) -> Vocab:
    """The phrase table of one Knowledge, built once and kept on it."""
    cached = kn.cache.get("vocabulary")
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    table: dict[str, tuple[str, str]] = {}
    display: dict[str, str] = {}

    def add(phrase: str, kind: str, value: str) -> None:
        key = norm(phrase)
        if key and key not in table:
            table[key] = (kind, value)
            display.setdefault(key, phrase)

    q = kn.query
    for task, words in q["tasks"].items():
        for w in words:
            add(w, "task", task)
    for question, words in q["questions"].items():
        for w in words:
            add(w, "question", question)
    for knob, words in q["knobs"].items():
        for w in words:
            add(w, "knob", knob)
    for kind, items in (("precision", kn.precisions), ("gpu", kn.gpus), ("model", kn.models),
                        ("runtime", kn.runtimes)):
        for item_id, item in items.items():
            add(item_id, kind, item_id)
            for a in item.get("aliases", []):
                add(a, kind, item_id)
        alias = {"precision": kn.precision_alias, "gpu": kn.gpu_alias, "model": kn.model_alias,
                 "runtime": kn.runtime_alias}[kind]
        for key, item_id in alias.items():
            table.setdefault(key, (kind, item_id))
    for w in q["fillers"]:
        add(str(w), "filler", str(w))
    for gpu_id, gpu in kn.gpus.items():
        for a in [gpu["name"], *gpu.get("aliases", [])]:
            m = re.match(r"^(?:nvidia\s+)?(?:geforce\s+)?rtx\s*(\d{4})$", a.lower())
            if m:
                add(m.group(1), "gpu", gpu_id)
    for family in sorted({m["family"] for m in kn.models.values()}):
        add(family, "family", family)
    longest = max((len(p.split()) for p in display.values()), default=1)
    prefixes = frozenset(key[:i] for key in table for i in range(1, len(key) + 1))
    vocab = Vocab(table, display, min(MAX_PHRASE_TOKENS, longest + 2), prefixes)
    kn.cache["vocabulary"] = vocab
    return vocab


# ---------------------------------------------------------------- tokens

_UNIT_MAP = [
    (re.compile(r"^(concurrent\s+users?|users?|sessions?|streams?|concurrency|requests?)$", re.I), "users"),
    (re.compile(r"^(context\s+length|context|ctx)$", re.I), "context"),
    (re.compile(r"^(sequence\s+length|seq[\s_-]?len|sequence|seq)$", re.I), "seq"),
    (re.compile(r"^(batch\s+size|micro[\s_-]?batch|batch|bs)$", re.I), "batch"),
    (re.compile(r"^(lora\s+rank|rank)$", re.I), "rank"),
    (re.compile(r"^prompt$", re.I), "prompt"),
    (re.compile(r"^(output|outputs|gen|generate)$", re.I), "output"),
]


# which Workload field a number with that unit sets
_UNIT_FIELDS = {"users": "users", "context": "context_tokens", "seq": "seq_len", "batch": "batch",
                "rank": "lora_rank", "prompt": "prompt_tokens", "output": "output_tokens"}


def _number(text: str, binary_k: bool) -> float:
    text = text.strip().lower()
    mult = 1.0
    if text.endswith("k"):
        mult, text = (1024.0 if binary_k else 1000.0), text[:-1]
    elif text.endswith("m"):
        mult, text = (1024.0 ** 2 if binary_k else 1e6), text[:-1]
    return float(text) * mult


_DIGITS = re.compile(r"\d+")
_DECIMAL = re.compile(r"[\d.]+")


class _Items:
    """What the parser makes of the rules of grammar/query.lark as it reduces them (lark's
    transformer hook: no parse tree is built). `start` gets the one-token items as lark tokens
    (_single makes each a Tok with the token's own column); the two-token items (tokens,
    number_then_unit, unit_then_number) span the text between their tokens, which only the
    query holds, so they come back as (kind, first, second) and _pair makes the Tok."""

    def start(self, items: list[Any]) -> list[Any]:
        return items

    def tokens(self, children: list[Any]) -> tuple[str, Any, Any]:
        return ("tokens", children[0], children[1])

    def number_then_unit(self, children: list[Any]) -> tuple[str, Any, Any]:
        return ("number_then_unit", children[0], children[1])

    def unit_then_number(self, children: list[Any]) -> tuple[str, Any, Any]:
        return ("unit_then_number", children[0], children[1])


# terminal → the Tok of a one-token item
_SINGLE: dict[str, Callable[[str, int], Tok]] = {
    "WORD": lambda t, col: Tok("word", t, col),
    "DIGIT_WORD": lambda t, col: Tok("word", t, col),
    "UNIT": lambda t, col: Tok("word", t, col),           # a unit word in a question phrase
    "NUMBER": lambda t, col: Tok("num", t, col, t),
    "SIZE": lambda t, col: Tok("size", t, col, float(t[:-1]), "billion"),
    "MOE_SIZE": lambda t, col: Tok("moe", t, col),
    "COUNT": lambda t, col: Tok("count", t, col, int(_DIGITS.match(t).group())),  # type: ignore[union-attr]
    "MEMORY": lambda t, col: Tok("mem", t, col, float(_DECIMAL.match(t).group())),  # type: ignore[union-attr]
    "VS": lambda t, col: Tok("vs", t, col),
}


def _single(token: Any) -> Tok:
    return _SINGLE[token.type](str(token), token.column or 1)


def _pair(query: str, item: tuple[str, Any, Any]) -> Tok:
    """The Tok of a two-token item: its text runs from the first token to the second."""
    kind, first, second = item
    text = query[first.start_pos:second.end_pos]
    col = first.column or 1
    if kind == "tokens":
        raw = str(first)
        if raw.lower().endswith("b"):
            return Tok("tokens", text, col, float(raw[:-1]), "billion")
        return Tok("tokens", text, col, _number(raw, False))
    number_first = kind == "number_then_unit"
    num, unit = (first, second) if number_first else (second, first)
    return Tok("unit_num", text, col, str(num), _unit_name(str(unit)), number_first, str(unit))


def _lex(query: str) -> list[Tok]:
    """The query's items as Toks; a QueryError where lark cannot read a character or token."""
    parser = _get_parser()
    try:
        items = parser.parse(query)
    except _errors.UnexpectedCharacters as exc:
        ch = query[exc.pos_in_stream]
        raise QueryError(query, exc.column, f"the character {ch!r} has no meaning here",
                         expected=["words", "numbers", "?"]) from None
    except _errors.UnexpectedToken as exc:
        tok = exc.token
        if tok.type == "$END":
            col = len(query.rstrip()) + 1
            raise QueryError(query, col, "the query ends after a word that needs a number",
                             expected=["a number, e.g. 'batch 8', 'seq 4096'"]) from None
        raise QueryError(query, tok.column or 1, f"'{tok}' cannot follow here",
                         expected=_expected(exc.expected), width=len(str(tok))) from None
    except _errors.UnexpectedEOF:
        raise QueryError(query, len(query) + 1, "the query ends too early") from None
    return _resplit([_pair(query, item) if item.__class__ is tuple else _single(item) for item in items])


def _resplit(toks: list[Tok]) -> list[Tok]:
    """'rtx 4090 context 128' lexes as 'rtx' '4090 context' '128'; when a number follows a
    number-then-unit pair, the unit belongs to that number: 'rtx' '4090' 'context 128'."""
    out: list[Tok] = []
    for i, tok in enumerate(toks):
        nxt = toks[i + 1] if i + 1 < len(toks) else None
        if (tok.kind == "unit_num" and tok.number_first and nxt is not None and nxt.kind == "num"
                and out and out[-1].kind == "word"):
            num_text = str(tok.value)
            out.append(Tok("num", num_text, tok.col, num_text))
            unit_col = tok.col + tok.text.lower().rindex(tok.unit_text.lower())
            out.append(Tok("unit_num", f"{tok.unit_text} {nxt.text}", unit_col, nxt.value, tok.unit))
            toks[i + 1] = Tok("skip", "", nxt.col)
            continue
        if tok.kind != "skip":
            out.append(tok)
    return out


def _unit_name(text: str) -> str:
    for pattern, name in _UNIT_MAP:
        if pattern.match(text.strip()):
            return name
    return text.lower()


def _expected(names: set[str]) -> list[str]:
    human = {"NUMBER": "a number", "WORD": "a word", "SIZE": "a model size like 13B",
             "UNIT": "users/context/seq/batch/rank", "TOKENS": "tokens", "COUNT": "a GPU count like 2x",
             "MEMORY": "a memory size like 24GB", "VS": "vs", "MOE_SIZE": "8x7b"}
    return sorted({human.get(n, n.lower()) for n in names})[:6]


# ---------------------------------------------------------------- resolving

_SPACES = {ord(c): " " for c in "\t\n\r\v\f"}


def _unprintable(ch: str) -> bool:
    """Control characters (C0, DEL, C1) and the bidirectional overrides that can disguise text."""
    o = ord(ch)
    return o < 32 or 0x7F <= o <= 0x9F or 0x202A <= o <= 0x202E or 0x2066 <= o <= 0x2069


def _printable(text: str) -> str:
    return "".join("?" if _unprintable(ch) else ch for ch in text)


_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")   # _unprintable


def parse(query: str, kn: Knowledge, model_given: bool = False) -> Workload:
    """Read a query into a Workload. Raises QueryError."""
    if not isinstance(query, str):
        raise QueryError(str(query), 1, "the query must be text")
    query = query.translate(_SPACES)     # a query is one line (same length: columns hold)
    if len(query) > MAX_QUERY_CHARS:
        raise QueryError(_printable(query[:80]) + "…", 1, f"the query is longer than {MAX_QUERY_CHARS} characters")
    bad = _UNPRINTABLE.search(query)
    if bad is not None:
        raise QueryError(_printable(query), bad.start() + 1, "control characters are not allowed")
    if not query.strip():
        raise QueryError(query, 1, "the query is empty",
                         expected=["a task (serve, infer, train, lora, qlora)", "a model or size"])
    toks = _lex(query)
    return _Resolver(query, toks, kn, model_given).run()


class _Resolver:
    def __init__(self, query: str, toks: list[Tok], kn: Knowledge, model_given: bool = False) -> None:
        self.model_given = model_given
        self.q = query
        for tok in toks:                       # "70B": the B is query.yaml's billion
            if tok.unit == "billion":
                tok.value, tok.unit = tok.value * kn.billion, None
        self.toks = toks
        self.kn = kn
        self.limits = kn.query["limits"]
        self.tokens_tok: Tok | None = None
        self.vocab = vocabulary(kn)
        self.w = Workload()
        self.tasks: list[str] = []
        self.pending_count: Tok | None = None
        self.last_gpu: GpuRequest | None = None
        self.family: tuple[str, Tok] | None = None
        self.runtime_tok: Tok | None = None
        self.model_tok: Tok | None = None
        self.size_tok: Tok | None = None

    def fail(self, tok: Tok, message: str, suggestion: str | None = None,
             expected: list[str] | None = None, width: int | None = None) -> QueryError:
        return QueryError(self.q, tok.col, message, suggestion, expected or [],
                          width or max(1, len(tok.text)))

    def run(self) -> Workload:
        i = 0
        toks = self.toks
        while i < len(toks):
            tok = toks[i]
            if tok.kind in ("word", "num", "size", "moe", "mem"):
                i = self.phrase(i)
                continue
            self.structured(tok)
            i += 1
        if self.pending_count is not None:
            raise self.fail(self.pending_count, f"'{self.pending_count.text}' needs a GPU after it",
                            expected=["a GPU name, e.g. '2x h100'"])
        if self.family is not None:
            fam, tok = self.family
            raise self.fail(tok, f"which {fam} model? add its size or version",
                            self._family_example(fam))
        self.finish()
        return self.w

    # one structured token (numbers with units, counts, memory, vs)
    def structured(self, tok: Tok) -> None:
        if tok.kind == "count":
            lo, hi = self.limits["gpu_count"]
            if not lo <= tok.value <= hi:
                raise self.fail(tok, f"the GPU count must be between {lo:g} and {hi:g}")
            self.pending_count = tok
        elif tok.kind == "mem":
            lo, hi = self.limits["memory_gb"]
            if not lo <= tok.value <= hi:
                raise self.fail(tok, f"the memory size must be between {lo:g} and {hi:g} GB")
            count = self.take_count()
            self.add_gpu(GpuRequest(None, count, tok.value))
        elif tok.kind == "vs":
            pass
        elif tok.kind == "tokens":       # a prompt or a training budget: the task decides (finish)
            self.check_range(tok, tok.value, *self.limits["tokens"])
            self.tokens_tok = tok
        elif tok.kind == "unit_num":
            self.unit_number(tok)

    def check_range(self, tok: Tok, value: float, lo: float, hi: float) -> None:
        if not (math.isfinite(value) and lo <= value <= hi):
            raise self.fail(tok, f"{value:g} is out of range ({lo:g} to {hi:g})")

    def unit_number(self, tok: Tok) -> None:
        w = self.w
        unit = tok.unit or ""
        binary = unit in ("context", "seq", "prompt", "output")
        value = _number(str(tok.value), binary)
        self.check_range(tok, value, *self.limits[unit])
        field = _UNIT_FIELDS.get(unit)
        if field is not None:
            setattr(w, field, int(round(value)))

    def take_count(self) -> int:
        if self.pending_count is None:
            return 1
        count = int(self.pending_count.value)
        self.pending_count = None
        return count

    def add_gpu(self, req: GpuRequest) -> None:
        self.w.gpus.append(req)
        self.last_gpu = req

    # a run of words / numbers / sizes: longest known phrase first
    def phrase(self, i: int) -> int:
        toks = self.toks
        j = i
        while j < len(toks) and toks[j].kind in ("word", "num", "size", "moe", "mem"):
            j += 1
        run = toks[i:j]
        keys = [norm(t.text) for t in run]     # norm of a phrase == the joined norms of its tokens
        k = 0
        while k < len(run):
            k = self.match(run, k, keys)
        return j

    def match(self, run: list[Tok], k: int, keys: list[str]) -> int:
        # The longest phrase from run[k] that is a key. Every token's key holds a letter or a
        # digit, so a phrase whose key starts no vocabulary key cannot grow into one.
        vocab = self.vocab
        table, prefixes = vocab.table, vocab.prefixes
        found: tuple[str, str] | None = None
        end = k
        key = ""
        for j in range(k, min(len(run), k + vocab.max_tokens)):
            key += keys[j]
            hit = table.get(key) or table.get(key.rstrip(".")) if key else None
            if hit is not None:
                found, end = hit, j + 1
            if key not in prefixes:
                break
        if found is not None:
            self.apply(found, run[k:end])
            return end
        tok = run[k]
        if tok.kind == "mem":            # not part of a GPU name ("a100 40gb"): a bare capacity
            self.structured(tok)
            return k + 1
        if tok.kind == "size":
            self.bare_size(tok)
            return k + 1
        if tok.kind == "num":
            raise self.fail(tok, f"the number {tok.text} has no unit",
                            f"{tok.text} users", expected=["users", "context", "seq", "batch", "rank", "tokens"])
        raise self.unknown(run, k)

    def unknown(self, run: list[Tok], k: int) -> QueryError:
        tok = run[k]
        if any(p.match(tok.text) for p, _ in _UNIT_MAP):
            return self.fail(tok, f"'{tok.text}' needs a number", f"16 {tok.text}",
                             expected=[f"16 {tok.text}", f"{tok.text} 16"])
        # the nearest phrase over the next few tokens, for typos inside multi-word names
        best: tuple[float, str, int] | None = None
        import difflib

        keys = list(self.vocab.table)
        for n in range(1, min(len(run) - k, self.vocab.max_tokens) + 1):
            phrase = norm("".join(t.text for t in run[k:k + n]))
            for hit in difflib.get_close_matches(phrase, keys, n=1, cutoff=0.75):
                score = difflib.SequenceMatcher(None, phrase, hit).ratio() + 0.01 * n
                if best is None or score > best[0]:
                    best = (score, hit, n)
        if best is not None:
            _, hit, n = best
            last = run[k + n - 1]
            span = last.end - tok.col
            bad = next((t for t in run[k:k + n] if norm(t.text) not in norm(self.vocab.display[hit])), tok)
            if n > 1 and bad is not tok:
                span = max(1, len(bad.text))
                tok = bad
            return QueryError(self.q, tok.col, f"unknown word '{tok.text}'",
                              self.vocab.display[hit], [], span if tok is run[k] else len(tok.text))
        words = [d for d in self.vocab.display.values() if " " not in d]
        return self.fail(tok, f"unknown word '{tok.text}'", nearest(tok.text, words),
                         expected=["a task, model, size, precision or GPU"])

    def apply(self, hit: tuple[str, str], toks: list[Tok]) -> None:
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
            self.add_gpu(GpuRequest(value, self.take_count()))
        elif kind == "model":
            if w.model_id is not None and w.model_id != value:
                raise self.fail(first, "one model per query", expected=["compare GPUs with 'vs'"])
            w.model_id = value
            self.model_tok = first
            self.family = None
        elif kind == "family":
            self.family = (value, first)
        elif kind == "runtime":
            w.runtime = value
            self.runtime_tok = first
            typed = "".join(t.text for t in toks).lower().replace("-", "")
            if typed in self.kn.sharding.get("strategies", {}):     # "zero3": DeepSpeed at that stage
                w.sharding = typed
        elif kind == "filler":
            pass

    def check_runtime_and_size(self) -> None:
        w, q = self.w, self.kn.query
        training = w.task in q["training_tasks"]
        if w.runtime is not None and self.runtime_tok is not None:
            rt = self.kn.runtimes[w.runtime]
            wrong = "inference" if training else "training"
            if rt["kind"] == wrong:
                others = sorted(r["id"] for r in self.kn.runtimes.values() if r["kind"] != wrong)
                raise self.fail(self.runtime_tok, f"{rt['name']} is for {wrong}, and this is "
                                f"{'a training' if training else 'an inference'} question",
                                others[0] if others else None, expected=others[:6])
        if w.model_id is not None and w.params is not None and self.size_tok is not None:
            m = self.kn.models[w.model_id]
            if abs(math.log(w.params / m["params_total"])) > 0.3:
                size = f"{m['params_total'] / self.kn.billion:.3g}B"
                raise self.fail(self.size_tok, f"{m['name']} has {size} parameters, not "
                                f"{self.size_tok.text}", size)

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

    def knob(self, knob: str) -> None:
        w = self.w
        if knob == "checkpointing":
            w.checkpointing = True
        elif knob == "no_checkpointing":
            w.checkpointing = False
        elif knob == "flash":
            w.flash_attention = True
        elif knob == "eager":
            w.flash_attention = False
        elif knob in ("adam8bit", "sgd", "adamw"):
            w.optimizer = knob
            if "paged" in self.q.lower():
                w.paged = True
        elif knob in ("offload", "optimizer_in_backward", "paged", "lora_attention_only"):
            setattr(w, knob, True)
        elif knob == "fp8_kv":
            w.kv_precision = "fp8"
        elif knob == "int8_kv":
            w.kv_precision = "int8"

    def finish(self) -> None:
        w = self.w
        q = self.kn.query
        tasks = list(dict.fromkeys(self.tasks))
        resolved = [q["task_resolution"].get(t, t) if t in q["task_resolution"] else t for t in tasks]
        # a specific training kind wins over the generic "train"/"fine-tune"
        for specific in ("qlora", "lora", "pretrain", "full_ft"):
            if specific in tasks:
                resolved = [specific] + [t for t in resolved if t not in q["training_tasks"]]
                break
        if "full_ft" in tasks:
            resolved = ["full_ft"] + [t for t in resolved if t not in q["training_tasks"]]
        kinds = set(resolved)
        if kinds & set(q["training_tasks"]) and kinds & set(q["inference_tasks"]):
            tok = self.toks[0]
            raise self.fail(tok, "a query is either training or inference, not both",
                            expected=["train …", "serve …"])
        if resolved:
            w.task = resolved[0]
            w.task_explicit = True
        objectives = [t for t in tasks if t in self.kn.objectives]
        if objectives:              # "dpo … lora": the objective, trained the way the query says
            w.objective = objectives[0]
        if w.precision == "nf4" and w.task in ("lora", "full_ft") and "full_ft" not in tasks:
            w.task = "qlora"
        self.check_runtime_and_size()
        if self.tokens_tok is not None:
            if w.task in q["training_tasks"]:
                w.train_tokens = self.tokens_tok.value
            else:
                self.check_range(self.tokens_tok, self.tokens_tok.value, *self.limits["prompt"])
                w.prompt_tokens = int(self.tokens_tok.value)
        if w.model_id is None and w.params is None and w.question != "largest_model" and not self.model_given:
            tok = self.toks[0] if self.toks else Tok("word", "", 1)
            raise QueryError(self.q, len(self.q.rstrip()) + 1, "which model? add a size or a name",
                             "13B", ["a size like 13B", "a name like llama-3.1-8b"])
