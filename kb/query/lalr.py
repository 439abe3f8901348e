"""An LALR(1) parser that runs the tables lark computed for a grammar, without lark.

In: the tables kb.query.parsergen writes into kb/_query_parser.py from grammar/query.lark (each
state's action per symbol, each rule's origin and what its reduction keeps of its children),
a transformer (an object with a method per rule kept in the result), and tokens that carry
the grammar's terminal as `.type`. Out: what the transformer makes of the start rule.

What a reduction gives follows lark's tree builder for the grammars it is made for (kb.query.parsergen
refuses any other): a terminal lark filters out (`_SEP`) is dropped, the children of an inlined
rule (a name starting with `_`, as lark's `x*` repetitions are) are spliced into its parent,
and every other rule is handed its children by the transformer's method of that name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, cast

if TYPE_CHECKING:
    class Token(Protocol):
        """What the parser reads of a token: the grammar's terminal it was cut as."""

        @property
        def type(self) -> str: ...

SHIFT, REDUCE = 0, 1
KEEP, DROP, SPLICE = 0, 1, 2        # what a reduction does with each child
END = "$END"

# the tables: state → symbol → (SHIFT, next state) or (REDUCE, rule index); rules as
# (origin, what to do with each child)
States = Mapping[int, Mapping[str, tuple[int, int]]]
Rules = Sequence[tuple[str, tuple[int, ...]]]


class UnexpectedInput(Exception):
    """A token the grammar does not take where it stands."""

    def __init__(self, token: object) -> None:
        super().__init__(f"unexpected {getattr(token, 'type', END)}")
        self.token = token
        self.column = getattr(token, "col", None)


class UnexpectedCharacters(UnexpectedInput):
    """Never raised here (kb.query.parse's lexer reports the characters it cannot cut); named so that
    kb.query.parse handles both parsers' errors alike."""


class Parser:
    def __init__(self, states: States, rules: Rules, start_state: int, end_state: int,
                 transformer: object) -> None:
        self.states, self.rules = states, rules
        self.start_state, self.end_state = start_state, end_state
        self.callbacks: dict[str, Callable[[list[object]], object]] = {
            origin: getattr(transformer, origin) for origin, _ in rules if not origin.startswith("_")}

    def parse(self, tokens: Iterable[Token]) -> object:
        states, rules, callbacks = self.states, self.rules, self.callbacks
        state_stack = [self.start_state]
        values: list[object] = []
        for token in [*tokens, None]:
            symbol = END if token is None else token.type
            while True:
                action = states[state_stack[-1]].get(symbol)
                if action is None:
                    raise UnexpectedInput(token)
                kind, arg = action
                if kind == SHIFT:
                    state_stack.append(arg)
                    values.append(token)
                    break
                origin, plan = rules[arg]
                children: list[object] = []
                if plan:
                    taken = values[-len(plan):]
                    del values[-len(plan):]
                    del state_stack[-len(plan):]
                    for how, value in zip(plan, taken):
                        if how == KEEP:
                            children.append(value)
                        elif how == SPLICE:
                            children.extend(cast("list[object]", value))    # an inlined rule's children
                value = children if origin.startswith("_") else callbacks[origin](children)
                state_stack.append(states[state_stack[-1]][origin][1])
                values.append(value)
                if token is None and state_stack[-1] == self.end_state:
                    return value
        raise UnexpectedInput(None)     # pragma: no cover - $END always ends in the end state
