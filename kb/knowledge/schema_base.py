"""The building blocks of the rule-file schemas: constrained scalar types and the strict base model.

In: nothing (pydantic types). Out: `Strict` (unknown keys are errors, frozen), the field types
every rule file uses (Slug, NodeId, Name, PurchaseUsd, UsdPerHour, Positive, NonNeg, Count,
Fraction, Month, Text, WebUrl), the shared literals (Optimizer, SortName; Vendor and Segment in kb.knowledge.kinds) and `SortKeySchema`. The files'
models are in kb.knowledge.schema and kb.knowledge.schema_catalogue.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema

from kb.paths import MAX_NAME_CHARS

Slug = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_.\-]*$", max_length=80)]
NodeId = Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_]*$", max_length=60)]
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNeg = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Count = Annotated[int, Field(gt=0)]          # a whole number of things: layers, heads, users
# a name people type or read (a GPU's name, an alias, a query word, a formula's name): bounded,
# as every name that enters kbq is (kb.paths.MAX_NAME_CHARS)
Name = Annotated[str, Field(max_length=MAX_NAME_CHARS)]


def _plain_text(value: object) -> object:
    """`unit: 1` and `expr: 0` are fine to type; read them as text."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value


Text = Annotated[str, BeforeValidator(_plain_text), WithJsonSchema({"type": ["string", "number"]})]


def _a_price(value: object) -> object:
    """`true` is not a price (pydantic would read it as 1), nor .nan or .inf."""
    if isinstance(value, bool):
        raise ValueError("a price is a number, not true or false")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"a price is a finite number, not {value}")
    return value


# Prices (prices.yaml and `kbq --prices FILE`): finite, and within what a GPU costs. No accelerator
# sells for under $10 or over $10M (a whole GB200 NVL72 rack of 72 GPUs lists at about $3M), and
# none rents for under $0.01 or over $1,000 an hour; a figure outside is a typo or a unit slip
# (cents, a rack price), and 1e-320 or 1e308 would print as $0.00 or a 309-digit sum.
PurchaseUsd = Annotated[float, BeforeValidator(_a_price), Field(ge=10, le=1e7, allow_inf_nan=False)]
UsdPerHour = Annotated[float, BeforeValidator(_a_price), Field(ge=0.01, le=1000, allow_inf_nan=False)]
Optimizer = Literal["adamw", "adam8bit", "sgd"]
SortName = Literal["value", "cost", "speed", "memory", "power"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _web_address(value: str) -> str:
    """An http or https address (kb.links): what a page may render as a link. Anything else
    (javascript:, data:, a path, a bare host) would be run or resolved by the reader's browser."""
    from kb.links import problem

    why = problem(value)
    if why is not None:
        raise ValueError(why)
    return value


# an address a source or a measurement is found at, rendered as a link
WebUrl = Annotated[str, AfterValidator(_web_address),
                   Field(max_length=2000, json_schema_extra={"pattern": r"^[Hh][Tt][Tt][Pp][Ss]?://[^\s<>\"\\`]+$"})]

Fraction = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]
Month = Annotated[str, Field(pattern=r"^\d{4}(-(0[1-9]|1[0-2])(-(0[1-9]|[12]\d|3[01]))?)?$")]


class SortKeySchema(Strict):               # a figure to order by: flows' ranking, prices' sorts
    by: str
    order: Literal["asc", "desc"]

