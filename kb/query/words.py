"""The words of the query language, as data: the phrase table, numbers with their scale,
near misses, and pasted model repository names.

In: a Knowledge (query.yaml's tasks, questions, units, phrases, fillers and name lists; the ids
and aliases of GPUs, models, precisions and runtimes). Out: a Vocab, made once per Knowledge on
first use and kept with it (vocab_of; a knowledge snapshot stores it through stored_vocabulary,
which kb.get_knowledge hands the snapshot); helpers kb.query.parse uses to read one word.
Nothing is built at import.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Literal

from kb.knowledge.data import Knowledge, norm

if TYPE_CHECKING:
    from kb.knowledge.records_rules import QueryRules

MAX_PHRASE_TOKENS = 7


@dataclass(slots=True)
class Vocab:
    """Every phrase the resolver knows: normalised key → (kind, value), plus display forms."""
    table: dict[str, tuple[str, str]]
    display: dict[str, str]
    max_tokens: int
    keys: tuple[str, ...]           # every key of table and units, sorted: has_prefix reads it
    units: dict[str, str]           # unit phrase key → unit name, whatever else the key means
    gpu_words: frozenset[str]       # words of GPU names (query.yaml gpu_words)
    gpu_keys: frozenset[str]        # every key that names a GPU
    precision_keys: dict[str, str]  # every key that names a precision → its id
    words: dict[str, tuple[str, str]]   # single-token keys, for near misses (built on first use)
    # query.yaml's lists as the resolver tests them, made once here rather than per query
    training_tasks: frozenset[str]
    inference_tasks: frozenset[str]
    generic_tasks: frozenset[str]   # a task a specific training kind overrides ("train", "lora", "dpo")
    per_hour: frozenset[str]        # keys of the words that make money a rate ("per hour")
    name_suffixes: frozenset[str]   # pasted names: variant words dropped ('instruct')
    name_prefixes: frozenset[str]   # leading words dropped ('meta')
    name_formats: dict[str, str]    # format words kept apart ('awq', 'q4km') → precision or runtime
    gpu_names: dict[str, str]       # key of every GPU's name and alias → its id
    after_number: frozenset[str]    # keys of words that are a unit only right after a number ('2k in')
    beside_number: frozenset[str]   # keys of words that are a unit beside a number, a filler alone ('responses')
    users_per_period: frozenset[str]    # keys of counts of users over a day or a month, refused ('dau')


_RTX = r"^(?:nvidia\s+)?(?:geforce\s+)?rtx\s*(\d{4}(?:\s*ti)?(?:\s*super)?)$"   # compiled on first use


def vocabulary(kn: Knowledge) -> Vocab:
    """The phrase table of one Knowledge (built once, with its derived tables)."""
    table: dict[str, tuple[str, str]] = {}
    display: dict[str, str] = {}

    def add(phrase: str, kind: str, value: str) -> None:
        key = norm(phrase)
        if key and key not in table:
            table[key] = (kind, value)
            display.setdefault(key, phrase)

    q = kn.query
    _query_words(q, add)
    _catalogue_words(kn, add, table)
    units = _unit_words(q, add)
    for w in q["fillers"]:
        add(str(w), "filler", str(w))
    _names_of_cards_and_series(kn, add)
    longest = max((len(p.split()) for p in display.values()), default=1)
    keys = tuple(sorted({*table, *units}))     # linear in the names' length, unlike their prefixes
    gpu_words = frozenset(norm(w) for w in q.get("gpu_words", []))
    gpu_keys = frozenset(k for k, (kind, _) in table.items() if kind == "gpu")
    precision_keys = {k: v for k, (kind, v) in table.items() if kind == "precision"}
    gpu_names = {norm(g["name"]): gid for gid, g in kn.gpus.items()}     # an alias wins over a name
    gpu_names.update({norm(a): gid for gid, g in kn.gpus.items() for a in g.get("aliases", [])})
    name_formats = {norm(k): v for k, v in q.get("format_suffixes", {}).items()}
    for key, pid in precision_keys.items():         # '-Q4_K_M', '-IQ4_XS'
        name_formats.setdefault(key, pid)
    per_period = q.get("users_per_period")
    vocab = Vocab(table, display, min(MAX_PHRASE_TOKENS, longest + 2), keys, units, gpu_words,
                  gpu_keys, precision_keys, {},
                  training_tasks=frozenset(q["training_tasks"]),
                  inference_tasks=frozenset(q["inference_tasks"]),
                  generic_tasks=frozenset([*q["task_resolution"], "lora", *kn.objectives]),
                  per_hour=frozenset(norm(w) for w in q.get("per_hour_words", [])),
                  name_suffixes=frozenset(s.lower() for s in q.get("model_suffixes", [])),
                  name_prefixes=frozenset(p.lower() for p in q.get("model_prefixes", [])),
                  name_formats=name_formats,
                  gpu_names=gpu_names,
                  after_number=_unit_lists(q, "after_number"),
                  beside_number=_unit_lists(q, "beside_number"),
                  users_per_period=frozenset(norm(w) for w in per_period["words"]) if per_period else frozenset())
    return vocab


def _unit_lists(q: QueryRules, key: Literal["after_number", "beside_number"]) -> frozenset[str]:
    """The keys of the words every unit of query.yaml lists under `key`."""
    return frozenset(norm(w) for spec in q.get("units", {}).values() for w in spec.get(key, []))


Add = Callable[[str, str, str], None]


def _query_words(q: QueryRules, add: Add) -> None:
    """query.yaml's words: tasks, questions, knobs, phrases, situations and latency targets."""
    for section, kind in ((q["tasks"], "task"), (q["questions"], "question"), (q["knobs"], "knob")):
        for name, words in section.items():
            for w in words:
                add(w, kind, name)
    for i, phrase in enumerate(q.get("phrases", [])):
        for w in phrase["words"]:
            add(w, "set", str(i))
    for name, situation in q.get("situations", {}).items():
        for w in situation["words"]:
            add(w, "situation", name)
    for target, words in (("ttft", q.get("ttft_words", [])), ("e2e", q.get("e2e_words", [])),
                          ("tpot", q.get("tpot_words", []))):
        for w in words:
            add(w, target, target)


def _catalogue_words(kn: Knowledge, add: Add, table: dict[str, tuple[str, str]]) -> None:
    """Every precision, GPU, model and runtime by its id, its aliases and its alias keys. A model
    alias that ends in a format ('qwen3.6-27b-fp8', a checkpoint's name) is no phrase: typed as
    words ('qwen3.6 27b fp8') the format is the format asked, and pasted whole the name is read
    with its format kept apart (read_name)."""
    formats = {norm(k) for k in kn.query.get("format_suffixes", {})} | set(kn.precision_alias) | {
        norm(p) for p in kn.precisions}
    checkpoint = {norm(a) for m in kn.models.values() for a in m.get("aliases", [])
                  if _ends_in_format(a, formats)}
    for kind, items in (("precision", kn.precisions), ("gpu", kn.gpus), ("model", kn.models),
                        ("runtime", kn.runtimes)):
        for item_id, item in items.items():
            add(item_id, kind, item_id)
            for a in item.get("aliases", []):
                if kind != "model" or norm(a) not in checkpoint:
                    add(a, kind, item_id)
        alias = {"precision": kn.precision_alias, "gpu": kn.gpu_alias, "model": kn.model_alias,
                 "runtime": kn.runtime_alias}[kind]
        for key, item_id in alias.items():
            if kind != "model" or key not in checkpoint:
                table.setdefault(key, (kind, item_id))


def _ends_in_format(name: str, formats: set[str]) -> bool:
    """'qwen3.6-27b-fp8', 'x-bnb-4bit': the name's last dash-separated part (or two) is a format."""
    parts = name.lower().split("-")
    return len(parts) > 1 and (norm(parts[-1]) in formats or len(parts) > 2 and norm(parts[-2] + parts[-1]) in formats
                               and not re.match(_SIZE_PART, parts[-2]))


def _unit_words(q: QueryRules, add: Add) -> dict[str, str]:
    """The unit words, in the phrase table and by key → unit; a unit only after a number
    ('2k in') is in the units, not in the phrase table."""
    units: dict[str, str] = {}
    for unit, spec in q.get("units", {}).items():
        for w in [*spec["words"], *spec.get("beside_number", [])]:
            add(w, "unit", unit)
            units.setdefault(norm(w), unit)
        units.update({norm(w): unit for w in spec.get("after_number", []) if norm(w) not in units})
    return units


def _names_of_cards_and_series(kn: Knowledge, add: Add) -> None:
    """An RTX card by its number ("4090", "3090 ti"), the model families, and each model series:
    one model names it, several make a family the size picks from ('qwen3.5', 'glm 5')."""
    for gpu_id, gpu in kn.gpus.items():
        for a in [gpu["name"], *gpu.get("aliases", [])]:
            m = re.match(_RTX, a.lower())
            if m:
                add(m.group(1), "gpu", gpu_id)
    for family in sorted({m["family"] for m in kn.models.values()}):
        add(family, "family", family)
    for name, members in model_series(kn).items():
        if len(members) == 1:
            add(name, "model", members[0])
        else:
            add(name, "family", name)


_SIZE_WORD = r"^(\d+(?:\.\d+)?[bm]|[ae]\d+(?:\.\d+)?b|\d+x\d+(?:\.\d+)?b)$"    # 35b, a3b, e4b, 8x7b


def series_of(model_id: str) -> str | None:
    """A model id's words before its size, with their version: 'qwen3.5' of 'qwen3.5-35b-a3b',
    'llama-3.1' of 'llama-3.1-70b'; None for an id without a size ('glm-5.1')."""
    parts = model_id.split("-")
    for k, part in enumerate(parts[1:], start=1):
        if re.match(_SIZE_WORD, part):
            return "-".join(parts[:k])
    return None


def model_series(kn: Knowledge) -> dict[str, list[str]]:
    """Each series (series_of) → its ids, in catalogue order: a name typed with its version and
    no size reads as the one model of that series, or as a family whose size picks the model
    ('qwen3.5 27b')."""
    series: dict[str, list[str]] = {}
    for model_id in kn.models:
        name = series_of(model_id)
        if name is not None:
            series.setdefault(name, []).append(model_id)
    return series


def in_series(model_id: str, family: str, series: str) -> bool:
    """The model belongs to `series`: its family ('qwen'), or its family's version ('qwen3.5')."""
    return family == series or series_of(model_id) == series


def has_prefix(vocab: Vocab, text: str) -> bool:
    """Some key of the vocabulary (a phrase or a unit word) starts with `text` (non-empty): a
    binary search of the sorted keys, so the vocabulary holds each key once, not every prefix
    of it (quadratic in a name's length)."""
    keys = vocab.keys
    i = bisect_left(keys, text)
    return bool(text) and i < len(keys) and keys[i].startswith(text)


def vocab_of(kn: Knowledge) -> Vocab:
    """The vocabulary of a Knowledge: made on first use and kept with it (Derived.tables, which
    the snapshot fills with what stored_vocabulary gave when it saved this knowledge). Two
    threads that make it at once make the same one."""
    tables = kn.derived.tables
    found = tables.get("vocabulary")
    if type(found) is Vocab:
        return found
    vocab = Vocab(**found, words={}) if type(found) is dict else vocabulary(kn)
    tables["vocabulary"] = vocab
    return vocab


def stored_vocabulary(kn: Knowledge) -> dict[str, object]:
    """What a knowledge snapshot keeps of the vocabulary: its fields as made (marshal keeps its
    sets and tuples), but `words`, built on first use."""
    vocab = vocab_of(kn)
    return {f.name: getattr(vocab, f.name) for f in fields(Vocab) if f.name != "words"}


# ---------------------------------------------------------------- numbers

_SCALE = {"k": 1e3, "m": 1e6, "t": 1e12}
_BINARY = {"k": 1024.0, "m": 1024.0 ** 2, "t": 1024.0 ** 4}


def number(text: str, binary_k: bool = False) -> float:
    """'16' 16, '8k' 8000 (8192 where binary_k), '1e6', '1,000', '1M', '1t' 1e12."""
    text = text.strip().lower().replace(",", "")
    suffix = text[-1:]
    if suffix in _SCALE:
        return float(text[:-1]) * (_BINARY if binary_k else _SCALE)[suffix]
    return float(text)


def scaled(text: str) -> bool:
    """A number typed with a k/m suffix ('128k', '1m'), which alone reads as a length."""
    return text.strip().lower()[-1:] in ("k", "m")


_MONEY = r"\$\s*([\d,]+(?:\.\d+)?[km]?)(.*)"      # compiled on first use (with re.I)


def money(text: str) -> tuple[float, bool]:
    """'$2/h' → (2.0, True: per GPU hour); '$5k' → (5000.0, False)."""
    m = re.match(_MONEY, text.strip(), re.I)
    assert m is not None                  # the grammar's MONEY terminal
    return number(m.group(1)), bool(m.group(2).strip())


# ---------------------------------------------------------------- near misses

def _distance(a: str, b: str, cap: int) -> int:
    """Optimal-string-alignment distance (a swap of two neighbours counts one), or cap + 1."""
    if abs(len(a) - len(b)) > cap:
        return cap + 1
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        if min(cur) > cap:
            return cap + 1
        prev2, prev = prev, cur
    return prev[-1]


def _single_words(vocab: Vocab) -> dict[str, tuple[str, str]]:
    if not vocab.words:
        for key, phrase in vocab.display.items():
            parts = phrase.split()
            if len(parts) == 1 and any(c.isalpha() for c in key):
                vocab.words[key] = vocab.table[key]
            else:
                for part in parts:
                    k = norm(part)
                    if len(k) >= 3 and any(c.isalpha() for c in k):
                        vocab.words.setdefault(k, ("part", k))
    return vocab.words


def near_misses(word: str, vocab: Vocab) -> list[str]:
    """The known words nearest to `word` within a small edit distance (1 for 4 letters, 2 from
    5), nearest first; empty for short words and words with digits."""
    key = norm(word)
    if len(key) < 4 or not key.isalpha():
        return []
    cap = 1 if len(key) < 5 else 2
    found: dict[tuple[int, bool, bool], list[str]] = {}
    words = _single_words(vocab)
    for known, meaning in words.items():
        if known[0] != key[0] and known[-1] != key[-1]:
            continue
        d = _distance(key, known, cap)
        if d <= cap:       # ties go to the same first letter, then to whole words over parts
            found.setdefault((d, known[0] != key[0], meaning[0] == "part"), []).append(known)
    return sorted(found[min(found)]) if found else []


# ---------------------------------------------------------------- pasted names

_SIZE_PART = r"^(\d+(?:\.\d+)?)b$"        # compiled on first use


@dataclass(slots=True)
class NameReading:
    """What a pasted model name says: the model key left, formats, dropped parts, a size."""
    key: str
    formats: list[str]
    dropped: list[str]
    size_b: float | None


def read_name(text: str, vocab: Vocab) -> NameReading:
    """'Qwen/Qwen2.5-72B-Instruct-AWQ' → key 'qwen2.572b', formats ['awq'], dropped
    ['Qwen/', 'Instruct']; the organisation and variant words go, format words (query.yaml
    format_suffixes, and every precision's name: '-Q4_K_M') are kept apart."""
    dropped: list[str] = []
    name = text
    if "/" in name:
        org, _, name = name.rpartition("/")
        dropped.append(org + "/")
    if name.lower().endswith(".gguf"):
        name = name[:-5]
        dropped.append(".gguf")
    parts = name.split("-")
    suffixes, formats_map = vocab.name_suffixes, vocab.name_formats
    formats: list[str] = []
    kept: list[str] = []
    i = 0
    while i < len(parts):
        part = parts[i].lower()
        pair = norm(part + (parts[i + 1] if i + 1 < len(parts) else "")).lower()
        if i > 0 and i + 1 < len(parts) and pair in formats_map and not re.match(_SIZE_PART, part):
            # bnb-4bit (not a size and the next part: 'gemma-3-4b-it' is an instruct model)
            formats.append(formats_map[pair])
            i += 2
            continue
        if i > 0 and norm(part) in formats_map:
            formats.append(formats_map[norm(part)])
        elif i > 0 and part in suffixes:
            dropped.append(parts[i])
        else:
            kept.append(parts[i])
        i += 1
    while len(kept) > 1 and kept[0].lower() in vocab.name_prefixes:
        dropped.append(kept.pop(0))
    size_b = None
    for part in kept:
        m = re.match(_SIZE_PART, part.lower())
        if m:
            size_b = float(m.group(1))
    return NameReading(norm("-".join(kept)), formats, dropped, size_b)
