"""kb.recordtype makes classes that behave as the same class body under @dataclass does: the
reference is the dataclasses module itself, on twin classes declared both ways."""

from __future__ import annotations

import dataclasses

import pytest

from kb.recordtype import as_dataclass, field, fields, is_record, record, replace


def _twins(frozen: bool) -> tuple[type, type]:
    def body() -> dict[str, object]:
        return {"__annotations__": {"a": "int", "b": "str", "c": "list[int]", "d": "float | None"},
                "b": "x", "c": field(default_factory=list), "d": None}

    def dc_body() -> dict[str, object]:
        ns = body()
        ns["c"] = dataclasses.field(default_factory=list)
        return ns

    rec = record(frozen=frozen)(type("Thing", (), body()))
    dc = dataclasses.dataclass(frozen=frozen)(type("Thing", (), dc_body()))
    return rec, dc


@pytest.mark.parametrize("frozen", [False, True])
def test_construction_repr_and_equality_match_a_dataclass(frozen):
    rec, dc = _twins(frozen)
    for args, kwargs in [((1,), {}), ((1, "y"), {}), ((1,), {"d": 2.5}), ((), {"a": 3, "c": [1]}),
                         ((1, "y", [2], 0.5), {})]:
        r, d = rec(*args, **kwargs), dc(*args, **kwargs)
        assert repr(r) == repr(d)
        assert list(r.__dict__.items()) == list(d.__dict__.items())    # the same fields, in order
        assert r == rec(*args, **kwargs) and not (r != rec(*args, **kwargs))
    assert rec(1).c is not rec(1).c                                      # a fresh list each time
    assert rec(1) != rec(2) and rec(1) != dc(1)
    assert rec.__match_args__ == dc.__match_args__ == ("a", "b", "c", "d")


@pytest.mark.parametrize("args, kwargs", [((), {}), ((1, "y", [], None, 5), {}), ((1,), {"a": 2}),
                                          ((1,), {"e": 2}), ((), {"b": "y"})])
def test_bad_arguments_raise_type_error_as_a_dataclass_does(args, kwargs):
    rec, dc = _twins(False)
    with pytest.raises(TypeError):
        dc(*args, **kwargs)
    with pytest.raises(TypeError):
        rec(*args, **kwargs)


def test_frozen_records_hash_and_refuse_assignment():
    rec, dc = _twins(True)
    r = rec(1, "y", (), None)
    assert hash(r) == hash(rec(1, "y", (), None))
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.a = 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        del r.a
    mutable, _ = _twins(False)
    with pytest.raises(TypeError):
        hash(mutable(1))


def test_post_init_replace_fields_and_fields_left_out_of_repr_and_eq():
    @record
    class Base:
        x: int
        hidden: int = field(default=0, repr=False, compare=False)

        def __post_init__(self) -> None:
            self.doubled = self.x * 2

    b = Base(2, 9)
    assert b.doubled == 4 and repr(b).endswith(".Base(x=2)") and b == Base(2, 0)
    c = replace(b, x=5)
    assert (c.x, c.hidden, c.doubled) == (5, 9, 10) and b.x == 2
    assert [f.name for f in fields(Base)] == ["x", "hidden"] and is_record(b) and not is_record(1)


def test_mutable_defaults_and_default_order_are_refused():
    with pytest.raises(ValueError):
        record(type("Bad", (), {"__annotations__": {"a": "list[int]"}, "a": []}))
    with pytest.raises(TypeError):
        record(type("Bad", (), {"__annotations__": {"a": "int", "b": "int"}, "a": 1}))


def test_as_dataclass_gives_the_dataclass_metadata():
    rec, dc = _twins(False)
    assert not dataclasses.is_dataclass(rec)
    as_dataclass(rec)
    assert dataclasses.is_dataclass(rec)
    got = [(f.name, f.type, f.default, f.default_factory) for f in dataclasses.fields(rec)]
    want = [(f.name, f.type, f.default, f.default_factory) for f in dataclasses.fields(dc)]
    assert got == want
    assert dataclasses.replace(rec(1), b="z") == rec(1, "z")
