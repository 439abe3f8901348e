"""What the type hints of kb need when it runs, without importing `typing`.

`import typing` is about 16 M instructions, 7% of a cold `kbq "QUERY"` (bench/README.md), and a
query's modules need only four of its names when they run: TYPE_CHECKING (never true then),
`cast` (the value itself), and the decorators `overload` and `dataclass_transform` (kb.recordtype),
which give back what they decorate. The type checker reads each as typing's own (mypy takes any
`TYPE_CHECKING` as true, and so reads the imports below), so a module writes
`from kb.hints import TYPE_CHECKING` and, under `if TYPE_CHECKING:`, imports what else it names
from typing (`ClassVar`, `TypeVar`, an alias as `X: TypeAlias = "…"`). tests/test_imports.py checks
that answering a query imports no typing.
"""

from __future__ import annotations

TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import cast as cast
    from typing import dataclass_transform as dataclass_transform
    from typing import overload as overload
else:
    def cast(kind, value):
        return value

    def overload(fn):
        return fn

    def dataclass_transform(**kwargs):
        return overload
