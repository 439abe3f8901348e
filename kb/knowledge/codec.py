"""Records ⇄ plain data, read from the records' own declarations.

In: a record class (a dataclass) and its fields' annotations as written. Out: `encode` (a
record → plain data: lists, dicts, strings, numbers, None, what JSON and marshal write) and
`decoder(cls)` (plain data → the record), each made once per class from its fields, and
`signature(cls)`: every record reachable from a class with its fields and their annotations,
the text a snapshot's format is keyed by (kb.knowledge.snapshot), so a field added, dropped,
renamed or retyped makes another format and no snapshot of the old one is read.

A record is stored as the list of its fields' values in declaration order; a field declared
with `compare=False` (derived, not data) is not stored. What an annotation names is found in
the declaring module: a record class is encoded field by field, an `ex.Expr` as its text,
stored AST, names and columns as its declared StoredExpression (`LEAVES`), `tuple[…]`/`list[…]`/`dict[str, …]` element by
element (a tuple comes back a tuple), and anything else — str, int, float, bool, and the
records' plain-data types (typed dicts of kb.knowledge.records, named only for the type checker)
— as itself.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, fields, is_dataclass
from typing import TYPE_CHECKING, Any

from kb.expr import parse as ex
from kb.expr.nodes import signature as node_signature

if TYPE_CHECKING:       # types only: a plain query imports this module
    from collections.abc import Callable, Sequence

    from dataclasses import Field

    Encode = Callable[[Any], object]
    Decode = Callable[[Any], object]
    # A type, read: ("plain",), ("leaf", cls), ("record", cls), ("seq", kind, item) for
    # tuple[X, ...] and list[X], ("fixed", items) for tuple[A, B], ("dict", value),
    # ("union", members) for A | B, ("optional", shape) for A | None (None is stored as itself)
    Shape = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class StoredExpression:
    """How an `ex.Expr` is stored, declared once: the fields' order is the stored list's and
    the names are the ones kb.expr.parse.StoredExpr takes; `ast` is the nodes' list form, which
    their own declarations give (kb.expr.nodes.signature). Both are part of `signature`, so a
    change to either makes another snapshot format."""
    text: str
    ast: list[object]
    name_columns: dict[str, int]
    names: list[str]


_EXPR_FIELDS = tuple(f.name for f in fields(StoredExpression))


def _expr(e: ex.Expr) -> list[object]:
    stored = {"text": e.text, "ast": e.ast.to_list(), "names": list(e.names), "name_columns": e.name_columns}
    return [stored[name] for name in _EXPR_FIELDS]


def _unexpr(d: list[Any]) -> ex.Expr:
    values = dict(zip(_EXPR_FIELDS, d))
    values["names"] = tuple(values["names"])
    return ex.StoredExpr(**values)


# classes stored by a function of their own rather than field by field: (encode, decode, the
# record declaring the stored form, the lines of what else that form depends on)
LEAVES: dict[type, tuple[Encode, Decode, type, Callable[[], list[str]]]] = {
    ex.Expr: (_expr, _unexpr, StoredExpression, node_signature)}
SCALARS = frozenset({"str", "int", "float", "bool", "None", "object"})


def stored_fields(cls: type) -> tuple[Field[Any], ...]:
    """The fields a record stores: all but those declared compare=False (derived data)."""
    return tuple(f for f in fields(cls) if f.compare)


# ---------------------------------------------------------------- annotations, read

def _split(text: str, sep: str) -> list[str]:
    """`text` split on `sep` outside brackets."""
    if "[" not in text:
        return [part.strip() for part in text.split(sep)]
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return parts


def _resolve(name: str, owner: type) -> object:
    """What a dotted name in `owner`'s module stands for; None when only the type checker sees
    it (a name imported under TYPE_CHECKING)."""
    head, *rest = name.split(".")
    module = sys.modules[owner.__module__]
    value = getattr(module, head, None)
    for part in rest:
        value = getattr(value, part, None)
    return value


_PLAIN: Shape = ("plain",)        # a shape (the types below): str, int, a typed dict…


_SHAPES: dict[tuple[str, str], Shape] = {}     # (annotation, module) → its shape, read once


def shape_of(annotation: str, owner: type) -> Shape:
    if annotation in SCALARS:
        return _PLAIN
    key = (annotation, owner.__module__)
    found = _SHAPES.get(key)
    if found is None:
        found = _SHAPES[key] = _shape_of(annotation, owner)
    return found


def _shape_of(annotation: str, owner: type) -> Shape:
    members = _split(annotation, "|")
    if "None" in members and len(members) > 1:
        return ("optional", shape_of(" | ".join(m for m in members if m != "None"), owner))
    if len(members) > 1:
        shapes = tuple(shape_of(m, owner) for m in members)
        if sum(s[0] != "plain" for s in shapes) > 1:   # a stored list would not say which
            raise TypeError(f"{owner.__qualname__}: cannot store a {annotation}")
        return ("union", shapes)
    text = members[0] if members else "None"
    if text.endswith("]"):
        head, args = text[:-1].split("[", 1)
        items = _split(args, ",")
        if head == "tuple" and len(items) == 2 and items[1] == "...":
            return ("seq", tuple, shape_of(items[0], owner))
        if head == "tuple":
            return ("fixed", tuple(shape_of(i, owner) for i in items))
        if head == "list":
            return ("seq", list, shape_of(items[0], owner))
        if head in ("dict", "Mapping"):
            return ("dict", shape_of(items[1], owner))
        raise TypeError(f"{owner.__qualname__}: cannot store a {text}")
    if text in SCALARS:
        return ("plain",)
    target = _resolve(text, owner)
    if isinstance(target, type) and target in LEAVES:
        return ("leaf", target)
    if isinstance(target, type) and is_dataclass(target):
        return ("record", target)
    if target is None:                  # a typed dict or alias of plain data, for the type checker
        return ("plain",)
    raise TypeError(f"{owner.__qualname__}: cannot store a {text} ({target!r})")


# ---------------------------------------------------------------- plain data ⇄ records

_DECODERS: dict[type, Callable[..., object]] = {}


def encode(value: Any, shape: Shape) -> object:
    kind = shape[0]
    if kind == "plain" or value is None:
        return value
    if kind == "optional":
        return encode(value, shape[1])
    if kind == "leaf":
        return LEAVES[shape[1]][0](value)
    if kind == "record":
        cls = shape[1]
        return [encode(getattr(value, f.name), shape_of(str(f.type), _declarer(cls, f)))
                for f in stored_fields(cls)]
    if kind == "seq":
        return [encode(v, shape[2]) for v in value]
    if kind == "fixed":
        return [encode(v, s) for v, s in zip(value, shape[1])]
    if kind == "dict":
        return {k: encode(v, shape[1]) for k, v in value.items()}
    # a union: the member the value is (a scalar, or the one container among them)
    container = [s for s in shape[1] if s[0] != "plain"]
    return encode(value, container[0]) if container and not isinstance(value, (str, int, float)) else value


def encode_record(value: object) -> list[object]:
    out = encode(value, ("record", type(value)))
    assert isinstance(out, list)            # a record is stored as its fields' list
    return out


def _declarer(cls: type, f: Field[Any]) -> type:
    """The class whose body declares the field (its module resolves the annotation)."""
    for klass in cls.__mro__:
        if f.name in klass.__dict__.get("__annotations__", {}):
            return klass
    return cls


def decoder(shape: Shape) -> Decode | None:
    """A function from plain data back to a value of this shape; None where the data is the
    value (nothing to convert)."""
    kind = shape[0]
    if kind == "plain":
        return None
    if kind == "optional":
        inner = decoder(shape[1])
        return None if inner is None else _optional(inner)
    if kind == "leaf":
        return LEAVES[shape[1]][1]
    if kind == "record":
        return record_decoder(shape[1])
    if kind == "seq":
        make: Decode = shape[1]         # tuple or list
        item = decoder(shape[2])
        if item is None:
            return make
        return lambda v: make([item(x) for x in v])
    if kind == "fixed":
        items = tuple(decoder(s) or _same for s in shape[1])
        return lambda v: tuple(d(x) for d, x in zip(items, v))
    if kind == "dict":
        value = decoder(shape[1])
        if value is None:
            return None
        return lambda v: {k: value(x) for k, x in v.items()}
    containers = [d for d in (decoder(s) for s in shape[1]) if d is not None]
    if not containers:
        return None
    inner = containers[0]               # as encode: the one container member, from a list
    return lambda v: inner(v) if isinstance(v, list) else v


def _same(v: object) -> object:
    return v


def _optional(fn: Decode) -> Decode:
    return lambda v: None if v is None else fn(v)


def record_decoder(cls: type) -> Callable[..., object]:
    """Plain data (a record as `encode` stores it, a list it converts in place) → the record;
    made once per class. Keyword arguments at the call give fields a value of their own (the
    knowledge's root directory)."""
    made = _DECODERS.get(cls)
    if made is None:
        made = _DECODERS[cls] = _record_decoder(cls)
    return made


def _record_decoder(cls: type) -> Callable[..., object]:
    flds = stored_fields(cls)
    index = {f.name: i for i, f in enumerate(flds)}
    convert = tuple((i, d) for i, d in enumerate(
        decoder(shape_of(str(f.type), _declarer(cls, f))) for f in flds) if d is not None)

    names = tuple(index)
    by_position = names == tuple(f.name for f in fields(cls))[:len(names)]

    def decode(data: Sequence[object], **given: object) -> object:
        # the stored list is read once (marshal or JSON made it): converted in place
        values = data if type(data) is list else list(data)
        for i, dec in convert:
            values[i] = dec(values[i])
        for name, value in given.items():
            values[index[name]] = value
        # the stored fields by position when they come first, as they mostly do (faster)
        return cls(*values) if by_position else cls(**dict(zip(names, values)))

    return decode


def signature(cls: type) -> str:
    """Every record reachable from `cls`, each with its stored fields and their annotations as
    declared, one line each, and the declared stored form of every leaf class (an expression's
    StoredExpression and its nodes): what the stored form of `cls` depends on."""
    lines: dict[object, str] = {}
    todo: list[type] = [cls]
    while todo:
        klass = todo.pop()
        if klass in lines:
            continue
        flds = stored_fields(klass)
        lines[klass] = f"{klass.__module__}.{klass.__qualname__}(" + ", ".join(
            f"{f.name}: {f.type}" for f in flds) + ")"
        for f in flds:
            for kind, found in _records_in(shape_of(str(f.type), _declarer(klass, f))):
                if kind == "leaf" and found not in lines:
                    _, _, form, more = LEAVES[found]
                    lines[found] = f"{found.__module__}.{found.__qualname__} as " + form.__qualname__
                    lines.update((line, line) for line in more())
                    todo.append(form)
                elif kind == "record":
                    todo.append(found)
    return "\n".join(sorted(lines.values()))


def _records_in(shape: Shape) -> list[tuple[str, type]]:
    if shape[0] in ("record", "leaf"):
        return [(shape[0], shape[1])]
    if shape[0] in ("seq", "dict", "optional"):
        return _records_in(shape[-1])
    if shape[0] in ("fixed", "union"):
        return [r for s in shape[1] for r in _records_in(s)]
    return []
