"""What a query's words mean together, once all are read: the task, tokens as prompt or
training budget, a bare length, durations, GPU counts, formats from pasted names, knobs.

In: the state kb.query.resolve.Resolver collected. Out: the finished Workload, or a QueryError
where the words contradict each other (training and inference, a runtime of the other kind,
a size that is not the named model's).
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

from kb.errors import QueryError
from kb.knowledge.data import norm
from kb.query.words import Vocab, in_series
from kb.query.phrases import tok_number
from kb.query.tokens import Tok
from kb.query.workload import Workload, is_gguf

if TYPE_CHECKING:
    from collections.abc import Mapping

    from kb.knowledge.data import Knowledge
    from kb.knowledge.records_rules import QueryRules


class Finisher:
    """The end of kb.query.resolve.Resolver (its attributes are declared there)."""

    w: Workload
    q: str
    kn: Knowledge
    query_rules: QueryRules
    vocab: Vocab
    limits: dict[str, tuple[float, float]]
    tasks: list[str]
    unused_toks: list[Tok]
    task_toks: dict[str, Tok]
    toks: list[Tok]
    runtime_tok: Tok | None
    size_tok: Tok | None
    model_text: str
    tokens_tok: Tok | None
    length_tok: Tok | None
    durations: list[tuple[Tok, float]]
    ttft: bool
    e2e: bool
    target_words: list[tuple[int, str]]
    formats: list[str]
    counted: set[int]
    plural: list[Tok] | None
    dataset: dict[str, Tok]
    layout_parts: dict[str, Tok]
    model_given: bool
    pending_count: Tok | None
    layout_all: list[tuple[str, Tok]]

    def fail(self, tok: Tok, message: str, suggestion: str | None = None,
             expected: list[str] | None = None, width: int | None = None) -> QueryError:
        raise NotImplementedError

    def set_fields(self, fields: Mapping[str, str | bool | int | float], first: Tok) -> None:
        raise NotImplementedError

    def check_range(self, tok: Tok, value: float, lo: float, hi: float) -> None:
        raise NotImplementedError

    def set_unit(self, unit: str, first: Tok, last: Tok, number_first: bool = False) -> None:
        raise NotImplementedError

    def read_budget(self, tok: Tok, keys: list[str]) -> bool:
        """A number right after a budget word ('under 500', query.yaml budget_words) in a question
        asking which GPU to buy is a budget in dollars: set, said, True; else False."""
        i = next((k for k, t in enumerate(self.toks) if t is tok), 0)
        words = {norm(b) for b in self.query_rules.get("budget_words", [])}
        if not (i > 0 and keys[i - 1] in words and self.w.budget_usd is None
                and (self.w.question == "which_gpu" or self.w.sort is not None)):
            return False
        usd = tok_number(tok)
        self.check_range(tok, usd, *self.limits["usd"])
        self.w.budget_usd = usd
        self.w.notes.append(f"read '{tok.text}' as a budget of ${usd:,.0f}: the question asks which GPU to buy")
        return True

    def _family_example(self, family: str) -> str | None:
        for mid, m in self.kn.models.items():
            if in_series(mid, m["family"], family):
                return mid
        return None

    def unknown_version(self, family: str, ftok: Tok, tok: Tok) -> QueryError:
        """'glm 5.9': a number after a family word is a version of it the catalogue lacks (a bare
        number elsewhere needs its unit); the error offers the family's latest."""
        known = [mid for mid, m in self.kn.models.items() if in_series(mid, m["family"], family)]
        return self.fail(ftok, f"no {family} model {tok.text} in models.yaml", known[-1] if known else None,
                         expected=known[-6:], width=tok.end - ftok.col)

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
        elif knob in ("offload", "optimizer_in_backward", "paged", "lora_attention_only",
                      "quantized_inputs_kept"):
            setattr(w, knob, True)
        elif knob == "fp8_kv":
            w.kv_precision = "fp8"
        elif knob == "fp16_kv":             # vLLM's 'auto' on a 16-bit model: the KV cache a fleet default would narrow
            w.kv_precision = "fp16"
        elif knob == "int8_kv":
            w.kv_precision = "int8"
        elif knob.startswith("spec_"):            # a named method wins over the bare word
            if w.spec_method in (None, "draft") or knob != "spec_draft":
                w.spec_method = knob.removeprefix("spec_")
        elif knob == "speculative":
            w.spec_method = w.spec_method or "draft"
        elif knob == "q4_0_kv":               # llama.cpp -ctk/-ctv q4_0: 4.5 bits a value with its scales
            w.kv_precision = "q4_0"

    def resolve_task(self) -> None:
        w, v = self.w, self.vocab
        tasks = list(dict.fromkeys(self.tasks))
        if not tasks and w.lora_rank is not None:       # 'lora rank 64 qwen 14b': a LoRA's rank
            tasks = ["lora"]
            w.notes.append("read the LoRA rank as a LoRA fine-tune")
        resolution = self.query_rules["task_resolution"]
        if "full" in tasks:         # "fine-tune qwen 7b full": 'full' says which training
            if not any(t in v.training_tasks or t in resolution for t in tasks):
                raise self.fail(self.task_toks["full"], f"'{self.task_toks['full'].text}' alone: "
                                "a full fine-tune needs a training word", "full fine-tune",
                                expected=["full fine-tune", "full training"])
            tasks = list(dict.fromkeys("full_ft" if t == "full" else t for t in tasks))
        resolved = [resolution.get(t, t) for t in tasks]
        # a specific training kind wins over the generic "train"/"fine-tune"
        training = v.training_tasks
        specific = [t for t in tasks if t in training and t not in v.generic_tasks]
        if "full_ft" in tasks:
            specific = ["full_ft"]
        if specific or "lora" in tasks:
            first = specific[0] if specific else "lora"
            resolved = [first] + [t for t in resolved if t not in training]
        kinds = set(resolved)
        if not kinds.isdisjoint(training) and not kinds.isdisjoint(v.inference_tasks):
            raise self.fail(self.toks[0], "a query is either training or inference, not both",
                            expected=["train …", "serve …"])
        if resolved:
            w.task = resolved[0]
            w.task_explicit = True
        objectives = [t for t in tasks if t in self.kn.objectives]
        if objectives:              # "dpo … lora": the objective, trained the way the query says
            w.objective = objectives[0]
        if w.precision == "nf4" and w.task in ("lora", "full_ft") and "full_ft" not in tasks:
            w.task = "qlora"

    def check_runtime_and_size(self) -> None:
        w = self.w
        training = w.task in self.vocab.training_tasks
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
            # a name without a size ('qwen3 coder') and a size of another model of its series
            sized_name = re.search(r"\d(\.\d+)?[bm](?![a-z])", self.model_text.lower())
            sibling = None if sized_name else self._sibling_of_size(w.model_id, w.params)
            if sibling is not None and abs(math.log(w.params / m["params_total"])) > 0.3:
                w.notes.append(f"model: {self.kn.models[sibling]['name']}, the {self.size_tok.text} model of "
                               f"its series (the name alone reads as {m['name']})")
                w.model_id, m = sibling, self.kn.models[sibling]
            if abs(math.log(w.params / m["params_total"])) > 0.3:
                size = f"{m['params_total'] / self.kn.billion:.3g}B"
                raise self.fail(self.size_tok, f"{m['name']} has {size} parameters, not "
                                f"{self.size_tok.text}", size)

    def _sibling_of_size(self, model_id: str, params: float) -> str | None:
        """Another model of the same series as `model_id` (its id up to the first size part:
        'qwen3-coder' of 'qwen3-coder-480b-a35b') whose size is the one typed ('qwen3 coder 30b'),
        the nearest if several; None if none is."""
        parts = model_id.split("-")
        cut = next((i for i, p in enumerate(parts) if re.match(r"^\d+(\.\d+)?[bm]$", p)), None)
        if not cut:
            return None
        prefix = "-".join(parts[:cut]) + "-"
        near = [(abs(math.log(params / m["params_total"])), mid) for mid, m in self.kn.models.items()
                if mid != model_id and mid.startswith(prefix) and m.get("params_total")
                and re.match(r"^\d+(\.\d+)?[bm]", mid[len(prefix):])]
        best = min(near, default=None)
        return best[1] if best is not None and best[0] <= 0.3 else None

    def apply_formats(self) -> None:
        """Formats a pasted name carries ('-AWQ', '-GGUF', '-PerTensor'): a precision, a runtime,
        or the words of a phrase (query.yaml phrases: its fields are set)."""
        for fmt in self.formats:
            hit = self.vocab.table.get(norm(fmt))
            if hit is not None and hit[0] == "set":
                self.set_fields(self.query_rules["phrases"][int(hit[1])]["set"], self.toks[0])
            elif fmt in self.kn.precisions and self.w.precision is None:
                self.w.precision = fmt
            elif fmt in self.kn.runtimes and self.w.runtime is None:
                training = self.w.task in self.vocab.training_tasks
                if self.kn.runtimes[fmt]["kind"] != ("inference" if training else "training"):
                    self.w.runtime = fmt

    def lengths(self) -> None:
        w, training = self.w, self.w.task in self.vocab.training_tasks
        if self.tokens_tok is not None:
            if training:
                w.train_tokens = self.tokens_tok.value
            else:
                self.check_range(self.tokens_tok, self.tokens_tok.value, *self.limits["prompt"])
                w.prompt_tokens = int(self.tokens_tok.value)
        if self.length_tok is not None:             # "128k" alone: the context (seq to train)
            field, limit = ("seq_len", "seq") if training else ("context_tokens", "context")
            value = tok_number(self.length_tok, binary_k=True)
            self.check_range(self.length_tok, value, *self.limits[limit])
            if getattr(w, field) is None:
                setattr(w, field, int(value))
                w.notes.append(f"read '{self.length_tok.text}' as the "
                               f"{'sequence length' if training else 'context length'}")
        if training and w.context_tokens is not None and w.seq_len is None:
            w.seq_len, w.context_tokens = w.context_tokens, None     # "qlora … at 8k context"
            w.notes.append("read the context length as the training sequence length")
        self.dataset_tokens(training)
        self.request_rate(training)
        if self.ttft and not self.durations:        # 'ttft for 70b …': the time to first token asked
            w.focus = w.focus or "time"
        self.latency_bounds()

    def latency_bounds(self) -> None:
        """Each duration read: the bound of the latency word before it ('ttft 2 s e2e 10 s'; the
        first one when none is before it: '10 s e2e'; with several words and as many durations,
        each word its duration in order: 'ttft 2 s and 50ms tpot'), else a deadline. The bound of
        a time-per-output-token word ('tpot 50 ms') is the per-user speed, 1 / duration tokens a
        second. A percentile ('p95') goes with the end-to-end bound when no first-token bound is
        asked."""
        w = self.w
        paired = len(self.durations) == len(self.target_words) > 1    # 'ttft 2 s and 50ms tpot': in order
        for i, (tok, seconds) in enumerate(self.durations):
            if not self.target_words:
                w.deadline_hours = seconds / 3600.0
                continue
            kind = sorted(self.target_words)[i][1] if paired else next(
                (k for col, k in reversed(self.target_words) if col < tok.col), self.target_words[0][1])
            if kind == "e2e":
                w.e2e_max_s = seconds
            elif kind == "tpot":        # a time per output token is a per-user speed: the stricter of any two
                w.speed_floor_tok_s = max(w.speed_floor_tok_s or 0.0, 1.0 / seconds)
            else:
                w.ttft_max_s = seconds
        if w.e2e_max_s is not None and w.ttft_max_s is None and w.ttft_percentile is not None:
            w.e2e_percentile, w.ttft_percentile = w.ttft_percentile, None

    def dataset_tokens(self, training: bool) -> None:
        """'on 100k examples', '3 epochs': the training tokens, each example counted at the
        sequence length (query.yaml defaults.seq_len unless given: an upper bound where examples
        are shorter and not packed), times the epochs; said in the notes."""
        w, examples, epochs = self.w, self.dataset.get("examples"), self.dataset.get("epochs")
        first = examples or epochs
        if first is None:
            return
        if not training:
            raise self.fail(first, f"'{first.text}' counts a training set, and this is an inference "
                            "question", expected=["fine-tune …", "train …"])
        tokens: float | None = self.tokens_tok.value if self.tokens_tok is not None else None
        each = self.tokens_tok
        between = self.q[examples.col - 1 + len(examples.text):each.col - 1] if examples and each else ""
        if examples is not None and tokens is not None and each is not None and each.col > examples.col \
                and " ".join(between.lower().split()) in self.query_rules.get("example_length_words", []):
            # '50k samples of 1k tokens': the tokens after the examples are each one's length
            tokens = examples.value * each.value
            if w.seq_len is None:
                w.seq_len = int(round(each.value))
            w.notes.append(f"read '{examples.text} of {each.text}' as {tokens:.3g} tokens: "
                           f"{examples.value:g} examples of {each.value:g} tokens each")
        elif examples is not None:
            if tokens is not None:
                raise self.fail(examples, "the data set is given twice, in tokens and in examples",
                                expected=[self.tokens_tok.text if self.tokens_tok else ""])
            seq = w.seq_len or int(self.query_rules["defaults"]["seq_len"])
            tokens = examples.value * seq
            w.notes.append(f"read '{examples.text}' as {tokens:.3g} tokens: each example counted "
                           f"at the {seq}-token sequence length (an upper bound when examples are "
                           "shorter and not packed; name the tokens, 'on 50M tokens', to size it exactly)")
        if epochs is not None:
            if tokens is None:
                raise self.fail(epochs, f"'{epochs.text}' of what? name the data set",
                                expected=["on 100k examples", "on 50M tokens"])
            tokens *= epochs.value
            w.notes.append(f"{epochs.text}: {epochs.value:g} passes over the data set, "
                           f"{tokens:.3g} training tokens")
        w.train_tokens = tokens

    def alone_unit(self, alone: str, unit: str, word: Tok) -> None:
        """A unit word with no number that is no error: a filler ('budget'); a unit of time that
        asks the time ('h100 hours', 'gpu hours'; 'how many gpu hours' counts hours, not GPUs);
        or one of the unit ('in a week', 'within a day': query.yaml units, alone: one)."""
        if alone == "time":
            self.w.focus = self.w.focus or "time"
            if self.w.question == "how_many_gpus":
                self.w.question = None
        elif alone == "one":
            self.set_unit(unit, Tok("num", word.text, word.col, 1.0), word, number_first=True)
        elif alone == "all":
            self.layout_all.append((unit, word))
        elif alone == "offload":        # '-ngl', '--n-cpu-moe' with no count: offload asked
            self.w.host_offload = True
        elif alone == "replica":        # 'expert parallel' with no size: over the replica's GPUs
            self.layout_parts[self.query_rules["units"][unit]["field"]] = Tok("layout", word.text, word.col, 0.0)

    def layout_over_all(self) -> None:
        """'tensor parallel', 'row split', 'layer split' with no number: the layout spans every
        GPU the query names ('2x 3090 tensor parallel' is tp 2; query.yaml units, alone: all).
        With no GPU count to span, the word still needs its number."""
        for unit, word in self.layout_all:
            spec = self.query_rules["units"][unit]
            total = sum(g.count for g in self.w.gpus if g.gpu_id is not None) or (self.w.gpu_count or 0)
            if total < 1:
                raise self.fail(word, f"'{word.text}' needs a number (or a GPU count to span)",
                                f"16 {word.text}", expected=[f"16 {word.text}", f"{word.text} 16"])
            if getattr(self.w, spec["field"], None) is None and spec["field"] not in self.layout_parts:
                self.set_unit(unit, Tok("num", word.text, word.col, float(total)), word, number_first=True)
                self.w.notes.append(f"read '{word.text}' with no number as {spec['field']} {total}: "
                                    "every GPU named")

    def read_layout_parts(self) -> None:
        """A replica's layout in a serving engine's words, read into kbq's: with the experts split
        ('ep 4', 'etp 2', 'dep4'; AIConfigurator's 'tp1pp1dp4etp1ep4') one replica spans the wider
        of its attention (tp × dp) and its experts (etp × ep), and a dp above one is data-parallel
        attention inside it (kbq's tp over that width with dp attention); without them a dp counts
        replicas of tp × pp ('tp2 dp4': 4 replicas of TP2), as 'N replicas' does. The replicas times
        a replica's GPUs is the GPU count where the query gives none, else they must agree."""
        parts, w = self.layout_parts, self.w
        if not parts:
            return
        got = {k: int(round(float(t.value))) for k, t in parts.items()}
        toks = sorted(parts.values(), key=lambda t: t.col)
        said = self.q[toks[0].col - 1:toks[-1].end - 1]
        replicas = got.get("replicas")
        attention = (w.tp or 1) * got.get("dp", 1)
        if got.get("ep") == 0:          # 'expert parallel' with no size: over the attention's GPUs
            got["ep"] = attention
        experts = any(got.get(k, 1) > 1 for k in ("ep", "etp")) or "dep" in got
        if experts:
            w.tp = max(attention, got.get("etp", 1) * got.get("ep", 1), got.get("dep", 1))
            if got.get("dp", 1) > 1 or "dep" in got:
                w.dp_attention = True
        elif got.get("dp", 1) > 1:
            if replicas is not None and replicas != got["dp"]:
                raise self.fail(parts["dp"], f"'{parts['dp'].text}' and '{parts['replicas'].text}' count the replicas twice",
                                expected=[parts["dp"].text])
            replicas = got["dp"]
        width = (w.tp or 1) * (w.pp or 1)
        layout = f"TP{w.tp or 1}" + (f" × PP{w.pp}" if w.pp and w.pp > 1 else "") + (
            " with data-parallel attention" if w.dp_attention else "")
        w.notes.append(f"read '{said}' as " + (f"{replicas} replicas of {layout}" if replicas else f"a replica of {layout}")
                       + (", its experts split over its GPUs" if experts else ""))
        named = sum(g.count for g in w.gpus if g.gpu_id is not None and id(g) in self.counted) or w.gpu_count
        if named and (named % width or (replicas is not None and named != replicas * width)):
            raise self.fail(toks[0], f"the layout asked is {(replicas or 1) * width} GPUs ({replicas or 1} "
                            f"replica{'s' if (replicas or 1) > 1 else ''} of {width}), and the query names {named}",
                            expected=[f"{max(1, named // width)} replicas"])
        if replicas is None or named:
            return              # the GPUs named hold whole replicas of the layout
        w.gpu_count = replicas * width
        self.count_uncounted()

    def counted_unit(self, unit: str, word: Tok) -> None:
        """A count word before a unit word other than GPUs is its number ('two days', 'one week')."""
        count, self.pending_count = self.pending_count, None
        if count is not None:
            self.set_unit(unit, Tok("num", count.text, count.col, float(count.value or 0)), word, number_first=True)

    def request_rate(self, training: bool) -> None:
        """'at 1000 requests per minute': the tokens a day those requests generate, each request
        counted at the output length (query.yaml defaults.output_tokens unless given); said."""
        w, rate = self.w, self.dataset.get("requests_per_day")
        if rate is None:
            return
        if training or w.tokens_per_day is not None:
            raise self.fail(rate, f"'{rate.text}' is a serving rate" + (
                ", and this is a training question" if training else ", and the tokens a day are given too"),
                expected=["serve …"] if training else [])
        out = w.output_tokens or int(self.query_rules["defaults"]["output_tokens"])
        w.tokens_per_day = rate.value * out
        w.notes.append(f"read '{rate.text}' as {rate.value:,.0f} requests a day of {out} output tokens each"
                       f"{'' if w.output_tokens else ' (the default output length)'}: "
                       f"{w.tokens_per_day:.3g} tokens a day to generate")

    def note_plural(self, toks: list[Tok], counted: bool) -> None:
        """A card typed in the plural with no count before it ('on rented h100s'), kept for counts()."""
        key = "".join(norm(t.text) for t in toks)
        if not counted and key.endswith("s") and self.vocab.table.get(key) is None:
            self.plural = toks

    def traffic_on_cards(self) -> bool:
        """A card named with no count, serving a traffic (several users or a request rate) under
        a latency target (first token, end to end): the question is a fleet's ('serve gpt-oss-120b
        to 1000 users on b200 … first token under 2 s' asks how many B200s), not whether one card
        holds it; 'recommend <card> for …' asks the same of the card named. A volume (a request
        rate, tokens a day) asks it too, how many of the card carry it ('serve qwen3-32b at 5M
        tokens/hour on l40s'), one or several. A speed per user is such a target only for as many
        users as a service has (query.yaml fleet_users): home users state it of one card. Two
        cards or more, none counted, are the same question of each ('… 20 rps, ttft p95 3s: H200
        or B200?': a fleet of each, kb.engine.advising.fleets)."""
        w = self.w
        named = [g for g in w.gpus if g.gpu_id is not None]
        return (w.gpu_count is None and len(named) == len(w.gpus) >= 1
                and not any(id(g) in self.counted for g in named)
                and w.question in ((None, "which_gpu") if len(named) == 1 else (None,)) and w.compare is None
                and w.task in self.vocab.inference_tasks
                and ((w.users or 1) > 1 or w.tokens_per_day is not None)
                and (w.ttft_max_s is not None or w.e2e_max_s is not None or w.tokens_per_day is not None
                     or (w.speed_floor_tok_s is not None and (w.users or 1) >= self._fleet_users())))

    def _traffic_kind(self) -> str:
        """What makes a card with no count a fleet's question, as the notes say it."""
        w = self.w
        if w.ttft_max_s is not None or w.e2e_max_s is not None:
            return "a traffic under a latency target"
        return "a volume" if w.tokens_per_day is not None else f"{w.users} users at a speed each"

    def _fleet_users(self) -> float:
        """The users at a per-user speed that make a card with no count a fleet's (query.yaml fleet_users)."""
        spec = self.query_rules.get("fleet_users")
        return float(spec["value"]) if spec else float("inf")

    def counts(self) -> None:
        """'on h100 with 4 gpus': a named GPU whose count was not typed takes the count. A card
        typed in the plural with no count ('on rented h100s') asks how many are needed."""
        w = self.w
        if (self.plural is not None and w.gpu_count is None and len(w.gpus) == 1
                and w.question is None and w.compare is None):
            w.question = "how_many_gpus"
            text = self.q[self.plural[0].col - 1:self.plural[-1].end - 1]
            w.notes.append(f"read '{text}' with no count as: how many of them it needs")
        elif self.traffic_on_cards():
            w.question = "how_many_gpus"
            w.notes.append(f"read {' and '.join(str(g.gpu_id) for g in w.gpus)} with no count, serving "
                           f"{self._traffic_kind()}, as: how many of them it needs")
        if self.w.gpu_count is None:
            named = [g for g in w.gpus if g.gpu_id is not None]
            if (len(named) == len(w.gpus) >= 2 and w.question is None
                    and not any(id(g) in self.counted for g in named)):
                for g in named:         # cards compared with no count: the engine sizes each
                    g.count = 0         # (kb.engine.advising.compare_counts)
            return
        self.count_uncounted()

    def count_uncounted(self) -> None:
        """The GPU count asked goes to each card named without a count of its own."""
        for g in self.w.gpus:
            if g.gpu_id is not None and id(g) not in self.counted and self.w.gpu_count is not None:
                g.count = self.w.gpu_count

    def situation(self) -> None:
        """What the place asked from runs unless the query names it ('at home': llama.cpp with
        GGUF Q4_K_M for inference, unless a format is named); said in the notes."""
        w = self.w
        sit = self.query_rules.get("situations", {}).get(w.segment or "")
        if sit is None:
            return
        if w.task not in self.vocab.training_tasks and w.precision is None and w.compare is None:
            if sit["precision"] is not None:
                w.precision = sit["precision"]
            if sit["runtime"] is not None and w.runtime is None:
                w.runtime = sit["runtime"]
        w.segments = list(sit["segments"])
        w.notes.append(f"{sit['text']} [{sit['source']}]")

    def host_offload(self) -> None:
        """llama.cpp's offload in words ('-ngl 40', 'experts on cpu'): the host's memory it uses is
        the one the query names, else query.yaml defaults.host_memory_gb, said in the notes; a
        count given places what it counts (formulas.yaml offload_asked_gb), said too."""
        w = self.w
        counted = [(w.gpu_layers, "layers on the GPUs (-ngl)"),
                   (w.offload_layers, "layers in the host's memory"),
                   (w.cpu_moe_layers, "layers' experts in the host's memory (--n-cpu-moe)")]
        for count, what in counted:
            if count is not None:
                w.host_offload = True
                w.notes.append(f"offload: {count} {what}, as the query says")
        if w.experts_on_cpu:
            w.notes.append("offload: every MoE expert in the host's memory (--cpu-moe, -ot exps=CPU)")
        if not w.host_offload:
            return
        if w.runtime is None and w.task not in self.vocab.training_tasks:
            w.runtime = self.kn.runtime_defaults["gguf"]     # the offload words are llama.cpp's
            w.notes.append(f"runtime: {self.kn.runtimes[w.runtime]['name']}, whose offload the words name")
        if w.host_memory_gb is not None:
            return
        d = self.query_rules["defaults"]
        if (gb := d.get("host_memory_gb")) is not None:
            w.host_memory_gb = float(gb)
            w.notes.append(f"host memory: {gb:g} GB, assumed for the offload "
                           f"[{d.get('host_memory_source')}]; name yours ('with 64gb ddr5')")

    def backend_runtime(self, again: bool = False) -> None:
        """A GPU backend named ('vulkan', 'rocm', 'metal'…): the runtime's build for it where the
        rules hold one (query.yaml backends: llama.cpp's Vulkan, ROCm and SYCL builds, with their
        own calibrated efficiencies in runtimes.yaml), else the runtime as it is, the backend said
        in the notes. Asked `again` once the format has named the runtime ('q4_0 … rocm' runs
        llama.cpp, so its ROCm build), it only swaps in a build."""
        w = self.w
        spec = self.query_rules.get("backends", {}).get(w.backend or "")
        if spec is None:
            return
        runs = w.runtime or (self.kn.runtime_defaults["gguf"] if again and is_gguf(w.precision) else "none")
        build = None if w.task in self.vocab.training_tasks else spec["runtimes"].get(runs)
        if again and (build is None or build == w.runtime):
            return
        if build is not None and build != w.runtime:
            named = self.kn.runtimes[w.runtime]["name"] if w.runtime else None
            w.runtime = build
            w.notes.append(f"runtime: {self.kn.runtimes[build]['name']}, "
                           + (f"{named}'s build for {spec['name']}" if named else f"the runtime that runs on {spec['name']}")
                           + f" [{spec['source']}]")
        else:
            w.notes.append(f"backend: {spec['name']} [{spec['source']}]")

    def format_runtime(self) -> None:
        """An inference format only one runtime loads names that runtime ('exl2 4.0bpw': ExLlamaV2,
        precisions.yaml `runtime`); a runtime named with no format runs the one its users load
        (runtimes.yaml `default_precision`: Ollama's Q4_K_M), unless the model is published as
        narrow. Both said in the notes."""
        w, kn = self.w, self.kn
        if w.task in self.vocab.training_tasks or w.compare is not None:
            return
        prec = kn.precisions.get(w.precision or "")
        if prec is not None and prec["runtime"] and w.runtime is None:
            w.runtime = prec["runtime"]
            w.notes.append(f"runtime: {kn.runtimes[w.runtime]['name']}, the runtime that loads "
                           f"{prec['name']} files [{prec['source']}]")
        rt = kn.runtimes.get(w.runtime or "")
        if rt is None or w.precision is not None or not rt["default_precision"]:
            return
        fmt = kn.precisions[rt["default_precision"]]
        model = kn.models.get(w.model_id or "")
        native = kn.precisions.get(str(model.get("native_precision"))) if model is not None else None
        if native is not None and native["bits_per_weight"] <= fmt["bits_per_weight"]:
            return          # the published checkpoint is already as narrow: it is what gets loaded
        w.precision = fmt["id"]
        w.notes.append(f"precision: {fmt['id']}, the format {rt['name']} users load when the query "
                       f"names none [{rt['default_precision_source']}]; name one ('fp16', 'q8_0') "
                       "to size another")

    def unnamed_model(self) -> None:
        """Cards compared, or a card to buy, with no model named: sized on the model those cards'
        published benchmarks run (query.yaml `unnamed_model`), said in the notes."""
        w, kn = self.w, self.kn
        named = [kn.gpus[g.gpu_id]["segment"] for g in w.gpus if g.gpu_id is not None]
        if not (len(named) >= 2 and len(named) == len(w.gpus)) and not (w.question == "which_gpu" and not w.gpus):
            return
        held = named or w.segments or ["any"]
        rules = self.query_rules.get("unnamed_model") or []
        rule = (next((r for r in rules if set(held) <= set(r["segments"])), None)
                or next((r for r in rules if held[0] in r["segments"]), None))
        if rule is None:
            return
        w.model_id = rule["model"]
        how = ""
        if w.precision is None and w.task not in self.vocab.training_tasks and rule["precision"] is not None:
            w.precision = rule["precision"]
            w.runtime = w.runtime or rule["runtime"]
            how = f" (at {w.precision}" + (f" under {w.runtime}" if w.runtime else "") + ", as that benchmark runs it)"
        w.notes.append(f"{rule['text']}{how} [{rule['source']}]")

    def hardware_alone(self) -> None:
        """Hardware asked about in words kbq leaves out, with no model, task, user count or
        figure asked ('is the arc b580 good for llms', 'do i need nvlink for 2x 3090 with
        llama.cpp'): answered as the largest model it runs, said in the notes, rather than
        refused. A configuration alone ('on 2x 3090', 'serve 16 users on h100') still asks
        which model."""
        w = self.w
        if w.model_id is not None or not w.gpus or self.tasks or w.users is not None \
                or w.focus is not None or w.question not in (None, "fit") \
                or not (self.unused_toks or w.runtime is not None):
            return
        w.question = "largest_model"
        w.notes.append("no model named: answered as the largest model the hardware runs "
                       "(name one, e.g. 'qwen3 32b', to size it)")

    def finish(self) -> None:
        w = self.w
        self.resolve_task()
        self.apply_formats()
        self.situation()
        self.backend_runtime()
        self.host_offload()
        self.format_runtime()
        self.backend_runtime(again=True)
        self.check_runtime_and_size()
        self.lengths()
        self.counts()
        self.layout_over_all()
        self.read_layout_parts()
        if w.model_id is None and w.params is None and not self.model_given:
            self.unnamed_model()
            self.hardware_alone()
        if w.model_id is None and w.params is None and w.question != "largest_model" and not self.model_given:
            raise QueryError(self.q, len(self.q.rstrip()) + 1, "which model? add a size or a name",
                             None, ["a size like 13B", "a name like llama-3.1-8b"])
