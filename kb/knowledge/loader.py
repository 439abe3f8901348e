"""Read rule files: YAML text → plain data, with the line and column of every key and value.

In: a path. Out: `Doc(data, positions, path)`; `positions[("gpus", 3, "vram_gb")]` is the
(line, column) of that value, 1-based. Only safe YAML is read: a tag that would build a Python
object is an error with its position. Also maps pydantic errors to `file:line:col` RuleErrors.
"""

from __future__ import annotations

import re
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import yaml
from pydantic import ValidationError
from yaml.constructor import SafeConstructor

from kb.errors import RuleError, nearest
from kb.knowledge.schema import public_name
from kb.paths import MAX_FILE_BYTES

if TYPE_CHECKING:
    from pydantic import BaseModel
    from pydantic_core import ErrorDetails

    from kb.knowledge.records import JSON

Pos = tuple[int, int]
# a place in a rule file: mapping keys (YAML keys are words or numbers), list positions, and
# "<key>" for a key itself
Path_ = tuple[str | int | float, ...]
M = TypeVar("M", bound="BaseModel")

MAX_DEPTH = 40


class _Loader(yaml.SafeLoader):
    """SafeLoader that also reads 1e9 and 70.6e9 as numbers (YAML 1.1 wants 1.0e+9), and
    refuses aliases: `*name` lets a few hundred bytes stand for an exponential amount of data."""

    _depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.check_event(yaml.events.AliasEvent):
            event = self.get_event()  # type: ignore[no-untyped-call]   # untyped in types-PyYAML
            raise yaml.composer.ComposerError(
                None, None, f"aliases (*{event.anchor}) are not used in rule files; "
                "write the value out", event.start_mark)
        if self._depth > MAX_DEPTH:         # before PyYAML's own recursion can overflow
            mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
            raise _TooDeep(mark.line + 1, mark.column + 1)
        self._depth += 1
        try:
            node: yaml.Node | None = super().compose_node(parent, index)
            return node
        finally:
            self._depth -= 1


class _FastLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """libyaml's scanner, parser and composer (C, about ten times faster than PyYAML's own)
    with the same resolvers as _Loader. It is used only for text that `_fast_node` checked
    first; whatever it refuses, _Loader reads again, so every error is _Loader's."""


for _cls in (_Loader, _FastLoader):     # 1e9 and 70.6e9 are numbers
    _cls.add_implicit_resolver("tag:yaml.org,2002:float",
                               re.compile(r"^[-+]?(?:\d[\d_]*(?:\.\d*)?|\.\d+)[eE][-+]?\d+$"),
                               list("-+0123456789."))

_OPEN = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_CLOSE = (yaml.MappingEndEvent, yaml.SequenceEndEvent)


def _fast_node(text: str) -> tuple[_FastLoader, yaml.Node | None] | None:
    """The composed document and its loader through libyaml, or None where _Loader must read
    the text: no libyaml, an alias, nesting near MAX_DEPTH (both checked on the events before
    anything is composed), or any YAML error."""
    if not getattr(yaml, "__with_libyaml__", False):
        return None
    try:
        depth = 0
        for event in yaml.parse(text, Loader=_FastLoader):
            if isinstance(event, _OPEN):
                depth += 1
                if depth >= MAX_DEPTH - 2:
                    return None
            elif isinstance(event, _CLOSE):
                depth -= 1
            elif isinstance(event, yaml.AliasEvent):
                return None
        loader = _FastLoader(text)
        try:
            return loader, loader.get_single_node()
        except BaseException:
            loader.dispose()
            raise
    except yaml.YAMLError:
        return None


class _TooDeep(Exception):
    def __init__(self, line: int, column: int) -> None:
        super().__init__(line, column)
        self.line, self.column = line, column


@dataclass
class Doc:
    path: Path
    data: JSON
    positions: dict[Path_, Pos]
    display: str
    lines: list[str] = field(default_factory=list)   # the text, for positions inside values

    def pos(self, loc: Path_) -> Pos:
        """Position of the deepest known prefix of `loc`."""
        loc = tuple(loc)
        while loc:
            if loc in self.positions:
                return self.positions[loc]
            loc = loc[:-1]
        return (1, 1)

    def error(self, loc: Path_, message: str, suggestion: str | None = None,
              column_offset: int = 0) -> RuleError:
        line, col = self.pos(loc)
        return RuleError(self.display, line, col + column_offset, message, suggestion)


def display_name(path: Path, root: Path | None) -> str:
    if root is not None:
        try:
            return str(Path(root.name) / path.relative_to(root))
        except ValueError:
            pass
    return str(path)


def load(path: Path, root: Path | None = None) -> Doc:
    display = display_name(path, root)
    try:
        with path.open("rb") as f:          # never more than the cap, whatever the file is
            raw = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise RuleError(display, 1, 1, f"cannot read: {exc.strerror}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise RuleError(display, 1, 1, f"file is larger than {MAX_FILE_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RuleError(display, 1, exc.start + 1, "not UTF-8 text") from None
    bad = _control_char(text)
    if bad is not None:
        line, col = _line_col(text, bad)
        raise RuleError(display, line, col, f"control character U+{ord(text[bad]):04X} in the text")
    fast = _fast_node(text)
    try:
        loader: _Loader | _FastLoader = fast[0] if fast else _Loader(text)
    except yaml.reader.ReaderError as exc:
        line, col = _line_col(text, exc.position)
        raise RuleError(display, line, col, f"YAML: {exc.reason}") from None
    try:
        node = fast[1] if fast else loader.get_single_node()
        positions: dict[Path_, Pos] = {}
        data = _build(loader, node, (), positions, display, 0) if node is not None else None
    except _TooDeep as exc:
        raise RuleError(display, exc.line, exc.column, f"nested deeper than {MAX_DEPTH} levels") from None
    except yaml.MarkedYAMLError as exc:
        raise _yaml_error(exc, text, display) from None
    except yaml.YAMLError as exc:
        raise RuleError(display, 1, 1, f"YAML: {exc}") from None
    except RecursionError:
        raise RuleError(display, 1, 1, f"nested deeper than {MAX_DEPTH} levels") from None
    finally:
        loader.dispose()
    return Doc(path, data, positions, display, text.splitlines())


_OPENERS = {"while parsing a flow sequence": "[", "while parsing a flow mapping": "{",
            "while scanning a quoted scalar": None}      # None: the quote at the mark


def _yaml_error(exc: yaml.MarkedYAMLError, text: str, display: str) -> RuleError:
    """A YAML error at its problem; but where a bracket or quote was left open, PyYAML notices
    it only later (at the next key, or the end of the file): then the error stands where the
    bracket or quote opened, and says where it was noticed."""
    mark, problem = exc.problem_mark or exc.context_mark, exc.problem or exc.context or "invalid YAML"
    start = exc.context_mark
    if start is not None and exc.context in _OPENERS and mark is not None and mark is not start:
        opener = _OPENERS[exc.context] or text[start.index:start.index + 1]
        where = f"{display}:{mark.line + 1}:{mark.column + 1}"
        return RuleError(display, start.line + 1, start.column + 1,
                         f"YAML: this {opener} is not closed (noticed at {where}: {problem})")
    line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
    return RuleError(display, line, col, f"YAML: {problem}")


def _build(loader: SafeConstructor, node: yaml.Node, loc: Path_,
           positions: dict[Path_, Pos], display: str, depth: int) -> JSON:
    positions.setdefault(loc, (node.start_mark.line + 1, node.start_mark.column + 1))
    if depth > MAX_DEPTH:
        raise RuleError(display, node.start_mark.line + 1, node.start_mark.column + 1,
                        f"nested deeper than {MAX_DEPTH} levels")
    if isinstance(node, yaml.MappingNode):
        if node.tag != "tag:yaml.org,2002:map":
            raise _bad_tag(node, display)
        out: dict[str, JSON] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise RuleError(display, key_node.start_mark.line + 1,
                                key_node.start_mark.column + 1, "YAML merge keys (<<) are not used")
            key = _build(loader, key_node, loc + ("<key>",), {}, display, depth + 1)
            if not isinstance(key, (str, int, float, bool)) or key is None:
                raise RuleError(display, key_node.start_mark.line + 1,
                                key_node.start_mark.column + 1, "a key must be a plain word")
            if key in out:
                raise RuleError(display, key_node.start_mark.line + 1,
                                key_node.start_mark.column + 1, f"duplicate key '{key}'")
            positions[loc + (key,)] = (value_node.start_mark.line + 1,
                                       value_node.start_mark.column + 1)
            positions[loc + (key, "<key>")] = (key_node.start_mark.line + 1,
                                               key_node.start_mark.column + 1)
            # a number or truth value as a key is kept as it is; the schemas then refuse it
            out[key] = _build(loader, value_node, loc + (key,), positions, display, depth + 1)  # type: ignore[index]
        return out
    if isinstance(node, yaml.SequenceNode):
        if node.tag != "tag:yaml.org,2002:seq":
            raise _bad_tag(node, display)
        return [_build(loader, item, loc + (i,), positions, display, depth + 1)
                for i, item in enumerate(node.value)]
    if not node.tag.startswith("tag:yaml.org,2002:"):
        raise _bad_tag(node, display)
    try:
        value: JSON = loader.construct_object(node, deep=True)
        return value
    except yaml.constructor.ConstructorError:
        raise _bad_tag(node, display) from None
    except ValueError:      # an integer longer than Python converts (4,300 digits)
        raise RuleError(display, node.start_mark.line + 1, node.start_mark.column + 1,
                        "number too long to read") from None


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _control_char(text: str) -> int | None:
    """Offset of the first character YAML refuses (NUL and other C0 controls), or None."""
    m = _CONTROL.search(text)
    return m.start() if m else None


def _line_col(text: str, offset: int) -> Pos:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _bad_tag(node: yaml.Node, display: str) -> RuleError:
    return RuleError(display, node.start_mark.line + 1, node.start_mark.column + 1,
                     f"the tag {node.tag} is not allowed; rule files hold plain data only")


# ---------------------------------------------------------------- pydantic → RuleError

def validate(doc: Doc, model: type[M]) -> tuple[M | None, list[RuleError]]:
    """Validate doc.data against a pydantic model; every problem as a positioned RuleError."""
    try:
        return model.model_validate(doc.data), []
    except ValidationError as exc:
        return None, [_to_rule_error(doc, model, err) for err in exc.errors()]


def _to_rule_error(doc: Doc, model: type[BaseModel], err: ErrorDetails) -> RuleError:
    loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and _is_union_tag(p)))
    kind = err["type"]
    if kind == "string_too_long":       # a name past the cap: said short, at the key if it is one
        return _too_long(doc, loc, err, is_key=err["loc"][-1:] == ("[key]",))
    where = record_path(doc.data, loc)
    if kind == "extra_forbidden":
        key = loc[-1]
        valid = _fields_at(model, loc[:-1])
        return doc.error(loc + ("<key>",), f"unknown key '{key}'",
                         nearest(str(key), valid) if valid else None)
    if kind == "missing":
        return doc.error(loc[:-1], f"missing key '{loc[-1]}'" + (f" in {record_path(doc.data, loc[:-1])}" if loc[:-1] else ""))
    if kind == "literal_error":
        allowed = _literal_values(model, loc)
        value = err.get("input")
        return doc.error(loc, f"{where}: '{value}' is not one of {', '.join(allowed)}",
                         nearest(str(value), allowed) if allowed else None)
    message = err["msg"].removeprefix("Value error, ")     # a validator's own sentence
    if kind == "model_type":              # "… instance of ModelSchema": the record's public name

        cls = str((err.get("ctx") or {}).get("class_name", ""))
        message = message.replace(cls, public_name(cls)) if cls else message
    return doc.error(loc, f"{where}: {message}")


def _too_long(doc: Doc, loc: Path_, err: ErrorDetails, is_key: bool) -> RuleError:
    value = str(err.get("input", ""))
    most = (err.get("ctx") or {}).get("max_length")
    shown = value if len(value) <= 40 else value[:40] + "…"
    if is_key:
        where = record_path(doc.data, loc[:-1])
        return doc.error(loc + ("<key>",), f"{where + ': ' if where else ''}the name '{shown}' is "
                         f"{len(value)} characters long; a name has at most {most}")
    return doc.error(loc, f"{record_path(doc.data, loc)}: '{shown}' is {len(value)} characters "
                          f"long; a name has at most {most}")


def record_path(data: JSON, loc: Path_) -> str:
    """A place in a rule file as people name it: list items by their id where they have one,
    `gpus[rtx-4090].memory_bytes`, else by position, `recipes[0]`."""
    out = ""
    for part in loc:
        if isinstance(part, int) and not isinstance(part, bool):
            item = data[part] if isinstance(data, list) and -len(data) <= part < len(data) else None
            ident = item.get("id") if isinstance(item, dict) else None
            out += f"[{ident}]" if isinstance(ident, str) and ident else f"[{part}]"
            data = item
        else:
            out += f".{part}" if out else str(part)
            data = data.get(part) if isinstance(data, dict) else None  # type: ignore[arg-type]
    return out


def _is_union_tag(part: str) -> bool:
    return part.startswith(("function-", "list[", "tuple[", "dict[")) or part in (
        "float", "int", "str", "bool", "none", "nullable") or "[" in part


def _unwrap(tp: object) -> list[object]:
    """The concrete types inside Optional/Union/Annotated."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(tp)[0])
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        out: list[object] = []
        for arg in typing.get_args(tp):
            out.extend(_unwrap(arg))
        return out
    return [tp]


def _type_at(model: type[BaseModel], loc: Path_) -> list[object]:
    types: list[object] = [model]
    for part in loc:
        nxt: list[object] = []
        for tp in types:
            for t in _unwrap(tp):
                origin = typing.get_origin(t)
                if isinstance(t, type) and hasattr(t, "model_fields") and isinstance(part, str):
                    field = t.model_fields.get(part)
                    if field is not None:
                        nxt.append(field.annotation)
                elif origin is list and isinstance(part, int):
                    nxt.append(typing.get_args(t)[0])
                elif origin is dict:
                    nxt.append(typing.get_args(t)[1])
        types = nxt
    return types


def _fields_at(model: type[BaseModel], loc: Path_) -> list[str]:
    names: list[str] = []
    for tp in _type_at(model, loc):
        for t in _unwrap(tp):
            if isinstance(t, type) and hasattr(t, "model_fields"):
                names.extend(t.model_fields)
    return names


def _literal_values(model: type[BaseModel], loc: Path_) -> list[str]:
    values: list[str] = []
    for tp in _type_at(model, loc):
        for t in _unwrap(tp):
            if typing.get_origin(t) is typing.Literal:
                values.extend(str(a) for a in typing.get_args(t))
    return values
