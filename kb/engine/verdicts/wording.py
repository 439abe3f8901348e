"""A verdict sentence said: the template of rules/query.yaml `verdict.templates` a piece of the
verdict chose, filled with its values (text already written out by kb.figures).

In: the Knowledge, a template's name and its fields (kb/knowledge/wording.py FIELDS lists them;
kbq validate checks the rules' templates against that list). Out: the sentence.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from kb.engine.resolving.layout import Note
    from kb.knowledge.data import Knowledge


def say(kn: Knowledge, name: str, **values: object) -> str:
    """The template `name` filled with `values`."""
    return cast("Mapping[str, str]", kn.query["verdict"]["templates"])[name].format(**values)


def layout_note(kn: Knowledge, note: Note) -> str:
    """Why a layout is not the plain one (kb.engine.resolving.layout.Note), said."""
    values: dict[str, object] = dict(note.values)
    if note.problems:
        values["problems"] = "; ".join(layout_note(kn, p) for p in note.problems)
    return say(kn, note.template, **values)
