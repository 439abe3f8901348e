"""The items the query's lexer cuts (Tok): a word, a number, a size, a count… with its column.

In: nothing. Out: the Tok record that kb.query.parse makes and kb.query.resolve, finish and
unknown_words read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias


# what a token stands for, read as the number it is by the rules that take it (a size, a count,
# a length; the text of a number cut from a word)
TokValue: TypeAlias = "Any"


@dataclass(slots=True)
class Tok:
    kind: str          # word num size moe count mem money vs
    text: str
    col: int           # 1-based
    value: TokValue = None
    unit: str | None = None
    type: str = ""     # the grammar's terminal it was cut as (what lark's parser reads)

    @property
    def end(self) -> int:
        return self.col + len(self.text)
