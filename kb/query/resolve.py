"""The query's items → a Workload: which phrase each run of words is, which number each unit
word belongs to, and what a word the vocabulary lacks most likely means.

In: the items kb.query.parse's lexer cut (Tok), the Knowledge. Out: a Workload, or a QueryError with
the column, width and a suggestion. Every word comes from the rules (kb.query.words.Vocab).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from kb.errors import QueryError
from kb.knowledge.data import Knowledge, norm
from kb.query.classify import Classifier
from kb.query.finish import Finisher
from kb.query.phrases import (Phrases, drop_count_labels, merge_number_words, merge_sized_numbers,
                              split_glued_units, split_length_pairs, split_time_per_token, tok_number)
from kb.query.unknown_words import Unknown
from kb.query.words import in_series, money, scaled, vocab_of
from kb.query.tokens import Tok, TokValue
from kb.query.workload import GpuRequest, Workload

_PHRASE_KINDS = frozenset(("word", "num", "size", "moe", "mem"))
_SPACED = frozenset(("count", "mem", "money"))        # items whose text may hold white space
Hit = tuple[str, str]


# the grammar's parser: the phrase terminals → the phrases, each (rule, its terminals), in order
Grammar = Callable[[list[Tok]], list[tuple[str, list[Tok]]]]


class Resolver(Classifier, Finisher, Unknown, Phrases):
    def __init__(self, query: str, toks: list[Tok], kn: Knowledge, grammar: Grammar,
                 model_given: bool = False, reread: Callable[[str], Workload] | None = None) -> None:
        self.grammar = grammar
        self.reread = reread              # another query read the same way (kb.query.parse.parse)
        self.phrases: list[Tok] = []
        self.notes_ahead: list[str] = []
        self.unused_toks: list[Tok] = []          # words left out (kb.query.unknown_words)
        self.model_text = ""                      # the words that named the model
        self.model_given = model_given
        self.q = query
        keys = []                  # norm of a phrase == the joined norms of its items
        for tok in toks:
            if tok.unit == "billion":          # "70B": the B is query.yaml's billion
                tok.value, tok.unit = tok.value * kn.billion, None
            # norm(): the grammar's words, numbers and sizes hold no white space to drop
            keys.append(norm(tok.text) if tok.kind in _SPACED else tok.value
                        if tok.type == "TENSOR_OVERRIDE" else
                        tok.text.lower().replace("-", "").replace("_", ""))
        merge_number_words(toks, keys, kn.query.get("number_words", {}), query)
        drop_count_labels(toks, keys, kn.query)
        split_time_per_token(toks, keys, vocab_of(kn))
        split_glued_units(toks, keys, vocab_of(kn), kn.query)
        split_length_pairs(toks, keys, kn.query, vocab_of(kn).table)
        merge_sized_numbers(toks, keys, kn.query)
        self.toks = toks
        self.keys = keys
        self.kn = kn
        self.query_rules = kn.query
        self.limits = kn.query["limits"]
        self.vocab = vocab_of(kn)
        self.w = Workload()
        self.tasks: list[str] = []
        self.task_toks: dict[str, Tok] = {}        # each task's first word
        self.pending_count: Tok | None = None
        self.family: tuple[str, Tok] | None = None
        self.runtime_tok: Tok | None = None
        self.size_tok: Tok | None = None
        self.tokens_tok: Tok | None = None
        self.length_tok: Tok | None = None       # a bare "128k"
        self.durations: list[tuple[Tok, float]] = []
        self.ttft = False
        self.e2e = False                          # an end-to-end latency word was read
        self.target_words: list[tuple[int, str]] = []   # (column, 'ttft', 'e2e' or 'tpot') of each latency word
        self.formats: list[str] = []
        self.counted: set[int] = set()           # ids of GpuRequests whose count was typed
        self.plural: list[Tok] | None = None      # a card typed in the plural with no count
        self.dataset: dict[str, Tok] = {}         # '100k examples', '3 epochs'
        self.layout_parts: dict[str, Tok] = {}    # 'dp 4', 'ep 4', 'dep4', '4 replicas' (finish.read_layout_parts)
        self.gpu_span = (-1, -1)                  # the tokens of the last GPU name read
        self.join: Tok | None = None              # the last 'vs', 'or', 'compared to'
        self.seen: dict[str, Tok] = {}            # the item that gave each compared field
        self.layout_all: list[tuple[str, Tok]] = []   # 'tensor parallel' with no number: over every GPU named
        self.question_end = -1                    # where the last question phrase ends (its column after)

    def fail(self, tok: Tok, message: str, suggestion: str | None = None,
             expected: list[str] | None = None, width: int | None = None) -> QueryError:
        return QueryError(self.q, tok.col, message, suggestion, expected or [],
                          width or max(1, len(tok.text)))

    def _tok(self, kind: str, text: str, col: int, value: TokValue = None) -> Tok:
        return Tok(kind, text, col, value)

    def run(self) -> Workload:
        """Classify the items (kb.query.classify), parse the phrases with the grammar, read
        each phrase in order (the on_* methods), then what the words mean together."""
        stopped = self.classify()
        if self.unused_toks and not self.phrases and stopped is None:
            raise self.unknown(self.toks.index(self.unused_toks[0]))   # no question to read
        self.w.unused_words = [t.text for t in self.unused_toks]
        phrases = self.grammar(self.phrases)
        drafts = self.draft_phrases(phrases)
        for i, (rule, children) in enumerate(phrases):
            if i in drafts:
                self.on_draft(children)
            else:
                self.read(rule, children)
        if stopped is not None:
            raise stopped
        if self.pending_count is not None:
            raise self.fail(self.pending_count, f"'{self.pending_count.text}' needs a GPU after it",
                            expected=["a GPU name, e.g. '2x h100'"])
        if self.family is not None:
            fam, tok = self.family
            raise self.fail(tok, f"which {fam} model? add its size or version",
                            self._family_example(fam))
        self.finish()
        return self.w

    # ------------------------------------------------------------ the grammar's phrases

    def draft_phrases(self, phrases: list[tuple[str, list[Tok]]]) -> set[int]:
        """The model or size phrases that name a speculative draft: next to the word 'draft'
        ('with a 0.5b draft', 'draft model qwen3-0.6b'), the smaller of the two when a model
        stands on each side, and never the query's only model (that one is the target)."""
        sized = [i for i, (rule, _) in enumerate(phrases) if rule in ("model", "size")]
        out: set[int] = set()
        for i, (rule, children) in enumerate(phrases):
            tok = children[0] if children else None
            if rule != "knob" or not isinstance(tok, Tok) or tok.value[0] != ("knob", "spec_draft"):
                continue
            near = [j for j in (i - 1, i + 1) if j in sized and j not in out]
            if near and len(sized) > len(out) + 1:
                out.add(min(near, key=lambda j: self._phrase_params(phrases[j][1])))
        return out

    def _phrase_params(self, children: list[Tok]) -> float:
        """The size a model or size phrase names (a catalogue model's, else its size item's)."""
        first = children[0]
        if first.type == "MODEL":
            return float(self.kn.models[str(first.value[0][1])]["params_total"])
        size = next((t for t in children if t.type == "SIZE"), None)
        return float(self.item(size).value) if size is not None else math.inf

    def on_draft(self, children: list[Tok]) -> None:
        """A draft model by name ('qwen3-0.6b'), family and size ('qwen3 0.6b') or size ('0.5b')."""
        first = children[0]
        size = next((t for t in children if t.type == "SIZE"), None)
        model: str | None = None
        if first.type == "MODEL":
            model = str(first.value[0][1])
        elif first.type == "FAMILY" and size is not None:
            model = self._family_model(str(first.value[0][1]), self.item(size).value)
        elif first.type == "NAME" or size is None:
            raise self.fail(self.item(first), "a draft is named by a model of the catalogue or a size",
                            "0.5b draft", expected=["0.5b draft", "qwen3-0.6b draft"])
        self.w.spec_method = "draft"
        if model is not None:
            self.w.draft_model_id = model
            self.w.notes.append(f"'{self.q[first.col - 1:children[-1].end - 1]}' read as the speculative draft {model}")
        elif size is not None:
            tok = self.item(size)
            self.check_range(tok, tok.value, *self.limits["params"])
            self.w.draft_params = tok.value

    def read(self, rule: str, children: list[Tok]) -> None:
        """One phrase of the grammar (its on_<rule>), after the notes its words carry."""
        for tok in children:
            if isinstance(tok, Tok):
                self.w.notes.extend(tok.value[2])           # 'read lamma as llama'
        getattr(self, "on_" + rule)(children)

    def on_gpu(self, children: list[Tok]) -> None:
        """[count [vs count…]] [memory] GPU [memory]: '2x rtx 3080 10gb', 'a 24gb 3090', 'a single
        l40s', '2x or 4x h100'; a memory size on either side of the card is its variant."""
        card = next(t for t in children if t.type == "GPU")
        memories = [t for t in children if t.type == "MEMORY"]
        counts: list[Tok | None] = [t for t in children if t.type in ("COUNT", "COUNT_WORD", "NUMBER")]
        for count in counts or [None]:
            if count is not None:
                self.on_count([count])
            self.apply(card.value[0], card.value[1])
            for memory in memories:
                self.gpu_variant(card, memory)

    def on_cards(self, children: list[object]) -> None:
        """Cards compared: each read as a GPU phrase of its own."""
        for child in children:
            if isinstance(child, tuple):
                self.read(*child)
            else:
                self.on_join([child])      # type: ignore[list-item]

    def on_comparison(self, children: list[Tok]) -> None:
        """Values of one thing joined by 'vs', 'or', 'compared to' (kb.query.phrases.one_value)."""
        for tok in children:
            if tok.type == "VERSUS":
                self.on_join([tok])
            elif tok.type == "SIZE":
                self.on_size([tok])
            else:
                self.apply(tok.value[0], tok.value[1])

    def on_capacity(self, children: list[Tok]) -> None:
        """[count] memory: a bare capacity ('on 20GB', '2x 24gb')."""
        if len(children) > 1:
            self.on_count(children[:1])
        tok = self.item(children[-1])
        lo, hi = self.limits["memory_gb"]
        if not lo <= tok.value <= hi:
            raise self.fail(tok, f"the memory size must be between {lo:g} and {hi:g} GB")
        counted = self.pending_count is not None
        self.add_gpu(GpuRequest(None, self.take_count(), tok.value), counted)

    def on_count(self, children: list[Tok]) -> None:
        """A count for the next card (or for 'gpus')."""
        phrase = children[0]
        tok = self.item(phrase)
        lo, hi = self.limits["gpu_count"]
        if phrase.type == "COUNT_WORD":
            fields = self.query_rules["phrases"][int(phrase.value[0][1])]["set"]
            self.pending_count = Tok("count", tok.text, tok.col, int(fields["gpu_count"]))
            return
        count = tok.value if phrase.type == "COUNT" else tok_number(tok)
        if count != int(count):
            raise self.fail(tok, f"{tok.text} GPUs is not a whole number")
        if not lo <= count <= hi:
            raise self.fail(tok, f"the GPU count must be between {lo:g} and {hi:g}")
        self.pending_count = Tok("count", tok.text, tok.col, int(count))

    def on_quantity(self, children: list[Tok]) -> None:
        """A number and its unit, in either order ('16 users', 'seq 4096', 'prompt 2000 tokens');
        a count before a replica's layout counts its replicas ('2x TP4', '3x dep8')."""
        unit = children[1].value[0] if children[0].type in ("NUMBER", "SIZE") else children[0].value[0]
        if self.pending_count is not None and self.query_rules["units"][str(unit)]["field"] in ("tp", "dep"):
            count, self.pending_count = self.pending_count, None
            self.layout_parts["replicas"] = Tok("replicas", count.text, count.col, float(count.value or 0))
        if children[0].type in ("NUMBER", "SIZE"):
            self.set_unit(children[1].value[0], self.item(children[0]), children[1].value[1][-1], number_first=True)
        else:
            self.set_unit(children[0].value[0], children[0].value[1][0], self.item(children[1]))

    def on_unit(self, children: list[Tok]) -> None:
        """A unit word with no number: a figure asked for, the GPUs a count waits for, or an error."""
        unit = str((phrase := children[0]).value[0])
        spec = self.query_rules["units"][unit]
        if spec.get("focus"):
            self.w.focus = self.w.focus or spec["focus"]
        elif self.pending_count is not None and spec["field"] not in ("gpu_count", "budget_usd"):
            self.counted_unit(unit, phrase.value[1][-1])    # 'two days', 'one week'
        elif (alone := spec.get("alone")) is not None:     # budget alone; h100 hours asks the time
            self.alone_unit(alone, unit, phrase.value[1][0])
        elif (spec.get("asks") and self.w.question == "how_many_gpus" and self.pending_count is None
              and not self.q[self.question_end - 1:phrase.col - 1].strip()):
            self.w.question = spec["asks"]          # 'how many concurrent users can an h100 serve'
        elif spec["field"] == "gpu_count":
            if self.pending_count is not None:
                self.w.gpu_count = self.take_count()
        else:
            raise self.fail(phrase.value[1][0], f"'{phrase.text}' needs a number", f"16 {phrase.text}",
                            expected=[f"16 {phrase.text}", f"{phrase.text} 16"], width=len(phrase.text))

    def on_number(self, children: list[Tok]) -> None:
        """A number alone: a latency's (kb.query.classify marks it), a length ('128k', '1m'), else an error."""
        tok = self.item(children[0])
        marked = children[0].value[0]
        if isinstance(marked, tuple) and marked[0] == "latency":
            self.bare_latency(tok, str(marked[1]))
            return
        if self.read_budget(tok, self.keys):
            return
        if scaled(tok.text) and self.length_tok is None:
            self.length_tok = tok
            return
        if self.family is not None:          # 'glm 5.9': a version of the family the catalogue lacks
            raise self.unknown_version(*self.family, tok)
        raise self.fail(tok, f"the number {tok.text} has no unit", f"{tok.text} users",
                        expected=["users", "context", "seq", "batch", "rank", "tokens"])

    def bare_latency(self, tok: Tok, kind: str) -> None:
        """A number right after a latency word with no unit of its own ('--ttft 2000 --tpot 50', as
        AIConfigurator's command line gives them): milliseconds from the word's threshold up, seconds
        below it (query.yaml bare_latency_ms_from), said in the notes."""
        value = tok_number(tok)
        ms = value >= float(self.query_rules["bare_latency_ms_from"][kind])
        seconds = value / 1000.0 if ms else value
        self.check_range(tok, seconds, *self.limits["duration"])
        self.durations.append((tok, seconds))
        self.w.notes.append(f"read the {kind} '{tok.text}' with no unit as {tok.text} {'ms' if ms else 's'}")

    def on_money(self, children: list[Tok]) -> None:
        tok = self.item(children[0])
        value, per_hour = money(tok.text)
        self.check_range(tok, value, *self.limits["usd"])
        if per_hour or len(children) > 1:
            self.w.usd_per_gpu_hour = value
        else:
            self.w.budget_usd = value

    def on_model(self, children: list[Tok]) -> None:
        """A model by name, a pasted name, or family and size; sizes after 'vs' are the same
        family's other models ('qwen 7b vs 14b')."""
        first = children[0]
        if first.type == "NAME":
            self.apply_pasted(self.item(first), first.value[0])
            return
        self.apply(first.value[0], first.value[1])
        family = (str(first.value[0][1]) if first.type == "FAMILY" else
                  self.kn.models[str(first.value[0][1])]["family"], self.item(first))
        versus = False
        for phrase in children[1:]:
            if phrase.type == "VERSUS":
                self.on_join([phrase])
                versus = True
                continue
            sibling = self.sibling(first, phrase) if versus else None
            if sibling is not None:               # 'llama 3.1 8b vs 70b': llama 3.1 70b
                self.apply(sibling, [self.item(phrase)])
                continue
            if versus:
                self.family = (family[0], self.item(phrase))
            self.on_size([phrase])

    def sibling(self, model: Tok, size: Tok) -> Hit | None:
        """The model named like `model` with `size` in place of its size ('llama 3.1 8b' and
        '70b': 'llama 3.1 70b'), when the vocabulary has that name."""
        keys = [norm(t.text) for t in model.value[1]]
        sized = [k for k, t in enumerate(model.value[1]) if t.kind == "size"]
        if model.type != "MODEL" or not sized:
            return None
        keys[sized[-1]] = norm(size.text)
        hit = self.vocab.table.get("".join(keys))
        return hit if hit is not None and hit[0] == "model" else None

    def on_size(self, children: list[Tok]) -> None:
        self.bare_size(self.item(children[0]))

    def on_cost(self, children: list[Tok]) -> None:
        """'per 1M output tokens': a cost question; the number is what is priced."""
        self.cost_phrase(children[0], children[-1])

    def on_join(self, children: list[Tok]) -> None:
        self.join = children[0].value[1][0]

    def on_phrase(self, children: list[Tok]) -> None:
        """A one-word phrase: a task, question, knob, precision, runtime, setting, situation…"""
        self.apply(children[0].value[0], children[0].value[1])

    on_family = on_task = on_question = on_knob = on_precision = on_runtime = on_phrase
    on_setting = on_situation = on_ttft = on_phrase

    def on_unknown(self, children: list[Tok]) -> None:       # pragma: no cover - classified away
        raise self.fail(children[0], f"unknown word '{children[0].text}'")

    @staticmethod
    def item(phrase: Tok) -> Tok:
        """The lexer's item a one-item terminal stands for."""
        return phrase.value[1][0]         # type: ignore[no-any-return]

    # ------------------------------------------------------------ numbers with units

    def set_unit(self, unit: str, first: Tok, last: Tok, number_first: bool = False) -> None:
        spec = self.query_rules["units"][unit]
        num = first if number_first else last
        span = Tok("unit_num", self.q[first.col - 1:last.end - 1], first.col)
        if num.kind == "size":                      # '1B tokens a month': a size's number, scaled as any
            value = float(num.value) * spec.get("scale", 1.0)
        else:
            value = tok_number(num, spec.get("binary_k", False)) * spec.get("scale", 1.0)
        self.check_range(span, value, *self.limits[spec["limit"]])
        field = spec["field"]
        if field == "tokens":
            self.tokens_tok = Tok("tokens", span.text, span.col, value)
        elif field in ("examples", "epochs", "requests_per_day"):   # read with the task and lengths (finish)
            self.dataset[field] = Tok(field, span.text, span.col, value)
        elif field in ("dp", "ep", "etp", "dep", "replicas"):        # read with tp and pp (finish)
            self.layout_parts[field] = Tok(field, span.text, span.col, value)
        elif field == "duration":
            self.durations.append((span, value))
        elif field in ("speed_floor_tok_s", "tokens_per_day", "hours_per_day", "budget_usd"):
            setattr(self.w, field, value)
        else:
            setattr(self.w, field, int(round(value)))

    def check_range(self, tok: Tok, value: float, lo: float, hi: float) -> None:
        if not (math.isfinite(value) and lo <= value <= hi):
            raise self.fail(tok, f"{value:g} is out of range ({lo:g} to {hi:g})")

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
            self.task_toks.setdefault(value, first)
        elif kind == "question":
            w.question = value
            self.question_end = toks[-1].end
        elif kind == "knob":
            self.knob(value)
        elif kind == "precision":
            if self.one_value("precision", value, first):
                w.precision = value
        elif kind == "gpu":
            counted = self.pending_count is not None
            self.add_gpu(GpuRequest(value, self.take_count()), counted)
            self.note_plural(toks, counted)
        elif kind == "model":
            if self.one_value("model_id", value, first):
                w.model_id = value
                self.model_text = " ".join(t.text for t in toks)
            self.family = None
        elif kind == "family":
            self.family = (value, first)
        elif kind == "runtime":
            if self.one_value("runtime", value, first):
                w.runtime = value
                self.runtime_tok = first
        elif kind == "situation":
            w.segment = value
        elif kind == "set":
            self.set_fields(self.query_rules["phrases"][int(value)]["set"], first)
        elif kind in ("ttft", "e2e", "tpot"):
            self.ttft = self.ttft or kind == "ttft"
            self.e2e = self.e2e or kind == "e2e"
            self.target_words.append((first.col, kind))

    def set_fields(self, fields: Mapping[str, str | bool | int | float], first: Tok) -> None:
        for name, value in fields.items():
            if name == "gpu_count":
                self.pending_count = Tok("count", first.text, first.col, int(value))
            elif name == "runtime":         # 'fsdp': its runtime, unless one is named
                if self.w.runtime is None:
                    self.w.runtime = str(value)
                    self.runtime_tok = first
            elif name == "vs":
                self.join = first
            elif name in ("question", "focus") and getattr(self.w, name) not in (None, "fit"):
                continue            # the first question form decides ('does' asks a fit only if nothing more)
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
            if self.one_value("model_id", model, ftok, width=tok.end - ftok.col):
                self.w.model_id = model
            self.w.notes.append(f"'{self.q[ftok.col - 1:tok.end - 1]}' read as {model}")
            self.family = None
            return
        if self.one_value("params", tok.value, tok):
            self.w.params = tok.value
            self.size_tok = tok

    def _family_model(self, family: str, params: float) -> str | None:
        """The family's model nearest the size; a general model before a specialised variant
        (query.yaml model_variants: 'qwen 14b' is Qwen2.5-14B, not its coder), the later listed
        of equally near ones."""
        variants = frozenset(self.query_rules["model_variants"])
        best: tuple[bool, float, str] | None = None
        for mid, m in self.kn.models.items():
            if not in_series(mid, m["family"], family):
                continue
            ratio = abs(math.log(m["params_total"] / params))
            variant = not variants.isdisjoint(mid.split("-"))
            if ratio < 0.25 and (best is None or (variant, ratio) <= (best[0], best[1] + 1e-9)):
                best = (variant, ratio, mid)
        return best[2] if best else None
