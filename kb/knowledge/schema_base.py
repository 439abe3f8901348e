"""The building blocks of the rule-file schemas: constrained scalar types and the strict base model.

In: nothing (pydantic types). Out: `Strict` (unknown keys are errors, frozen), the field types
every rule file uses (Slug, NodeId, Positive, NonNeg, Count, Fraction, Month, Text), the shared
literals (Optimizer, Vendor, SortName) and `SortKeySchema`. The files' models are in kb.knowledge.schema and
kb.knowledge.schema_catalogue.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema

Slug = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_.\-]*$", max_length=80)]
NodeId = Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_]*$", max_length=60)]
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNeg = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Count = Annotated[int, Field(gt=0)]          # a whole number of things: layers, heads, users


def _plain_text(value: object) -> object:
    """`unit: 1` and `expr: 0` are fine to type; read them as text."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value


Text = Annotated[str, BeforeValidator(_plain_text), WithJsonSchema({"type": ["string", "number"]})]
Optimizer = Literal["adamw", "adam8bit", "sgd"]
Vendor = Literal["nvidia", "amd", "intel", "apple", "google", "aws"]
SortName = Literal["value", "cost", "speed", "memory", "power"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


Fraction = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]
Month = Annotated[str, Field(pattern=r"^\d{4}(-(0[1-9]|1[0-2])(-(0[1-9]|[12]\d|3[01]))?)?$")]


class SortKeySchema(Strict):               # a figure to order by: flows' ranking, prices' sorts
    by: str
    order: Literal["asc", "desc"]

