"""Records: classes declared as dataclasses are, made without the dataclasses module.

In: a class body with annotated fields (defaults, `field(default_factory=…, repr=, compare=)`).
Out: the class with `__init__`, `__repr__`, `__eq__` (and `__hash__` when frozen, as
`dataclasses` gives them), `__match_args__` and `__record_fields__`. A plain `kbq "QUERY"`
makes ~25 such classes; `@dataclass` writes each one's methods as source and compiles them,
and importing `dataclasses` imports `inspect` with it, together nearly a quarter of the cold
start's work. Here the methods are shared functions that read the class's field table, so
making a class costs a dict walk. Type checkers read `@record` as a dataclass
(`typing.dataclass_transform`).

What reads dataclasses' own metadata (pydantic's JSON Schema of an Answer) gets it from
`as_dataclass`, which gives the record the fields of an equivalent real dataclass.
`replace`, `fields` and `is_record` stand in for their `dataclasses` namesakes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar, dataclass_transform, overload

if TYPE_CHECKING:
    T = TypeVar("T")


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()


if TYPE_CHECKING:
    class RecordInstance(Protocol):
        """What the shared methods read of an instance of a record class."""

        __record_fields__: tuple[Field, ...]
        __dict__: dict[str, object]


class Field:
    """One field of a record: its name, default or default factory, and whether it shows in
    the repr and takes part in ==."""

    __slots__ = ("name", "type", "default", "default_factory", "repr", "compare", "hash")

    def __init__(self, default: object = MISSING,
                 default_factory: Callable[[], object] | _Missing = MISSING,
                 repr: bool = True, compare: bool = True, hash: bool | None = None) -> None:
        if default is not MISSING and default_factory is not MISSING:
            raise ValueError("cannot specify both default and default_factory")
        self.name = ""
        self.type: object = None       # the annotation, as written (a string)
        self.default = default
        self.default_factory = default_factory
        self.repr = repr
        self.compare = compare
        self.hash = compare if hash is None else hash

    def __repr__(self) -> str:
        return f"Field(name={self.name!r})"


def field(*, default: object = MISSING, default_factory: Callable[[], object] | _Missing = MISSING,
          repr: bool = True, compare: bool = True, hash: bool | None = None) -> Any:
    """As dataclasses.field: a field's default or default factory, and whether it shows in
    the repr, takes part in == and in the hash. Typed as dataclasses.field is: the value stands
    in the class body for a value of the field's own type."""
    return Field(default, default_factory, repr, compare, hash)


def fields(obj: object) -> tuple[Field, ...]:
    """The fields of a record class or instance, in order."""
    flds: tuple[Field, ...] = obj.__record_fields__  # type: ignore[attr-defined]
    return flds


def is_record(obj: object) -> bool:
    return hasattr(obj, "__record_fields__")


def replace(obj: T, /, **changes: object) -> T:
    """A copy of a record with some fields changed (dataclasses.replace)."""
    for f in fields(obj):
        if f.name not in changes:
            changes[f.name] = getattr(obj, f.name)
    return obj.__class__(**changes)


def frozen_error(message: str) -> AttributeError:
    """dataclasses.FrozenInstanceError, the error an assignment to a frozen dataclass raises
    (imported only then)."""
    from dataclasses import FrozenInstanceError

    return FrozenInstanceError(message)


def _frozen_setattr(self: object, name: str, value: object) -> None:
    raise frozen_error(f"cannot assign to field {name!r}")


def _frozen_delattr(self: object, name: str) -> None:
    raise frozen_error(f"cannot delete field {name!r}")


def _make_init(cls: type, flds: tuple[Field, ...]) -> Callable[..., None]:
    names = tuple(f.name for f in flds)
    allowed = frozenset(names)
    # every field in order, its default where it has one (the instance's __dict__ keeps this
    # order, as a dataclass's __init__ gives it)
    base = {f.name: f.default for f in flds}
    factories = tuple((f.name, f.default_factory) for f in flds
                      if not isinstance(f.default_factory, _Missing))
    required = tuple(f.name for f in flds if f.default is MISSING and f.default_factory is MISSING)
    n_names, n_required = len(names), len(required)     # the required fields come first
    post_init = getattr(cls, "__post_init__", None)
    qualname = cls.__qualname__

    def __init__(self: RecordInstance, *args: object, **kwargs: object) -> None:
        n = len(args)
        if n > n_names:
            raise TypeError(f"{qualname}.__init__() takes {n_names + 1} positional arguments "
                            f"but {n + 1} were given")
        d = self.__dict__
        d.update(base)
        for name, make in factories:
            d[name] = make()
        if n:
            d.update(zip(names, args))
        if kwargs:
            if not allowed.issuperset(kwargs):
                bad = next(k for k in kwargs if k not in allowed)
                raise TypeError(f"{qualname}.__init__() got an unexpected keyword argument {bad!r}")
            for name in names[:n]:
                if name in kwargs:
                    raise TypeError(f"{qualname}.__init__() got multiple values for argument {name!r}")
            d.update(kwargs)
        if n < n_required:
            missing = [r for r in required[n:] if r not in kwargs]
            if missing:
                raise TypeError(f"{qualname}.__init__() missing required argument(s): "
                                + ", ".join(repr(m) for m in missing))
        if post_init is not None:
            self.__post_init__()  # type: ignore[attr-defined]

    __init__.__qualname__ = f"{qualname}.__init__"
    return __init__


def _repr(self: RecordInstance) -> str:
    return f"{self.__class__.__qualname__}(" + ", ".join(
        f"{f.name}={getattr(self, f.name)!r}" for f in self.__record_fields__ if f.repr) + ")"


def _eq(self: RecordInstance, other: object) -> object:     # a bool, or NotImplemented
    if other.__class__ is not self.__class__:
        return NotImplemented
    return tuple(getattr(self, f.name) for f in self.__record_fields__ if f.compare) == \
        tuple(getattr(other, f.name) for f in fields(other) if f.compare)


def _hash(self: RecordInstance) -> int:
    return hash(tuple(getattr(self, f.name) for f in self.__record_fields__ if f.hash))


def _make(cls: type[T], frozen: bool) -> type[T]:
    own = cls.__dict__.get("__annotations__", {})
    by_name: dict[str, Field] = {}
    for base in reversed(cls.__mro__[1:]):
        for f in base.__dict__.get("__record_fields__", ()):
            by_name[f.name] = f
    for name, annotation in own.items():
        if isinstance(annotation, str) and annotation.startswith(("ClassVar", "typing.ClassVar")):
            continue
        value = cls.__dict__.get(name, MISSING)
        if isinstance(value, Field):
            f = value
            if f.default is MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, f.default)
        else:
            if isinstance(value, (list, dict, set)):
                raise ValueError(f"mutable default {type(value)} for field {name} is not allowed: "
                                 "use default_factory")
            f = Field(value)
        f.name, f.type = name, annotation
        by_name[name] = f
    flds = tuple(by_name.values())
    seen_default = False
    for f in flds:
        if f.default is MISSING and f.default_factory is MISSING:
            if seen_default:
                raise TypeError(f"non-default argument {f.name!r} follows default argument")
        else:
            seen_default = True
    body = cls.__dict__
    made: dict[str, object] = {"__record_fields__": flds, "__record_frozen__": frozen,
                            "__match_args__": tuple(f.name for f in flds),
                            "__init__": _make_init(cls, flds)}
    if "__repr__" not in body:
        made["__repr__"] = _repr
    if "__eq__" not in body:
        made["__eq__"] = _eq
    # as dataclasses: a __hash__ the class wrote stays; else a frozen record hashes its fields
    # and a mutable one is unhashable
    if "__hash__" not in body or (body["__hash__"] is None and "__eq__" in body):
        made["__hash__"] = _hash if frozen else None
    if frozen:
        made["__setattr__"], made["__delattr__"] = _frozen_setattr, _frozen_delattr
    for name, value in made.items():
        setattr(cls, name, value)
    return cls


@overload
def record(cls: type[T], /) -> type[T]: ...


@overload
def record(*, frozen: bool = False) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(field_specifiers=(field, Field))
def record(cls: type[T] | None = None, /, *,
           frozen: bool = False) -> type[T] | Callable[[type[T]], type[T]]:
    """@record or @record(frozen=True) on a class body, as @dataclass."""
    if cls is None:
        return lambda c: _make(c, frozen)
    return _make(cls, frozen)


def as_dataclass(*classes: type) -> None:
    """Give each record (and the records its module holds, which its fields may name) the
    metadata of the equivalent dataclass, so that what reads dataclasses (pydantic's JSON
    Schema, dataclasses.fields) reads it. Its methods stay its own."""
    import dataclasses
    import sys

    todo = list(classes)
    for cls in classes:
        module = sys.modules.get(cls.__module__)
        todo += [v for v in vars(module).values() if isinstance(v, type) and is_record(v)] if module else []
    for cls in todo:
        if "__dataclass_fields__" in cls.__dict__:
            continue
        annotations: dict[str, object] = {}
        ns: dict[str, object] = {"__module__": cls.__module__, "__qualname__": cls.__qualname__,
                                 "__doc__": cls.__doc__, "__annotations__": annotations}
        for f in fields(cls):
            annotations[f.name] = _annotation(cls, f)
            if f.default is not MISSING:
                ns[f.name] = dataclasses.field(default=f.default, repr=f.repr, compare=f.compare,
                                               hash=f.hash)
            elif not isinstance(f.default_factory, _Missing):
                ns[f.name] = dataclasses.field(default_factory=f.default_factory, repr=f.repr,
                                               compare=f.compare, hash=f.hash)
            else:
                ns[f.name] = dataclasses.field(repr=f.repr, compare=f.compare, hash=f.hash)
        twin: type = dataclasses.dataclass(frozen=cls.__dict__.get("__record_frozen__", False))(
            type(cls.__name__, (), ns))
        type.__setattr__(cls, "__dataclass_fields__", twin.__dict__["__dataclass_fields__"])
        type.__setattr__(cls, "__dataclass_params__", twin.__dict__["__dataclass_params__"])
        if cls.__doc__ is None:
            type.__setattr__(cls, "__doc__", twin.__doc__)


def _annotation(cls: type, f: Field) -> object:
    """The field's annotation from the class (or base) that declares it; a field is always made
    from one, so the fallback is the annotation the field kept."""
    for klass in cls.__mro__:
        found = klass.__dict__.get("__annotations__", {})
        if f.name in found:
            return found[f.name]
    return f.type
