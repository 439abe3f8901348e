"""The JSON API under /api.

In: a query (GET ?q=…&sort=…&options=1 or POST {"q": "…", "sort": "…", "options": true}).
Out: the Answer dict, the same as `kbq --json [--sort NAME] [--options]`;
the GPU and model catalogues; the health of the rules; an OpenAPI 3.1 description.
Every error is `{"error": {"message", "column", "suggestion"}}` with its HTTP status.
"""

from __future__ import annotations

import json
import math
import os
from functools import cache
from typing import Any, cast, get_args

import orjson
from flask import Blueprint, Flask, Response, current_app, jsonify, request
from flask.json.provider import DefaultJSONProvider
from pydantic import TypeAdapter

from kb.errors import KbError, QueryError, nearest
from server.live import LiveKnowledge, NoKnowledge
from kb import __version__
from kb.engine.assembly.answer import Answer
from kb.knowledge.schema import SortName

bp = Blueprint("api", __name__, url_prefix="/api")


class SafeJSON(DefaultJSONProvider):
    """JSON with <, > and & written as \\u escapes, so a response is inert even if a browser
    were ever talked into reading it as HTML. Decoded, the values are unchanged.

    Response bodies (jsonify) are written by orjson: an Answer is ~50 kB of nested dicts, which
    the standard library takes ~0.5 ms to write and orjson ~0.08 ms. Keys keep their order;
    text is UTF-8 rather than \\u escapes; NaN and infinity are written as null (never as the
    bare NaN that is not JSON); dates are written as Flask writes them. What orjson refuses
    (an int beyond 64 bits, a lone surrogate, a key that is not a string) goes to the standard
    library with the same guarantees."""

    sort_keys = False

    def dumps(self, obj: Any, **kwargs: Any) -> str:
        return _inert(super().dumps(obj, **kwargs))

    def response(self, *args: Any, **kwargs: Any) -> Response:
        if args and kwargs:
            raise TypeError("jsonify() takes positional or keyword arguments, not both")
        obj = args[0] if len(args) == 1 else (args or kwargs or None)
        app = cast(Flask, self._app)
        if self.compact is False or (self.compact is None and app.debug):
            return cast(Response, super().response(obj))      # indented, for people
        return app.response_class(self.dump_bytes(obj) + b"\n", mimetype=self.mimetype)

    def dump_bytes(self, obj: Any) -> bytes:
        """Compact JSON as UTF-8, with <, > and & escaped and NaN/infinity as null."""
        try:
            body = orjson.dumps(obj, default=self.default, option=orjson.OPT_PASSTHROUGH_DATETIME)
        except TypeError:         # orjson.JSONEncodeError is a TypeError
            return self.dumps(_finite(obj), separators=(",", ":")).encode()
        return body.replace(b"&", b"\\u0026").replace(b"<", b"\\u003c").replace(b">", b"\\u003e")


def _inert(text: str) -> str:
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def _finite(value: Any) -> Any:
    """NaN and infinity as None, anywhere in lists, tuples and dict values."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def live() -> LiveKnowledge:
    return current_app.extensions["kbq"]  # type: ignore[no-any-return]


def error(message: str, status: int, column: int | None = None, suggestion: str | None = None,
          **extra: Any) -> tuple[Response, int]:
    return jsonify({"error": {"message": message, "column": column, "suggestion": suggestion,
                              **extra}}), status


TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off", "")


def _flag(value: Any, name: str) -> bool | tuple[Response, int]:
    """options=1|0|true|false (a query string) or a JSON boolean; anything else is a 400."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in TRUE_WORDS + FALSE_WORDS:
        return value.strip().lower() in TRUE_WORDS
    return error(f"'{name}' must be true or false (1 or 0), not {json.dumps(value)[:40]}", 400)


def _sort(value: Any, kn: Any) -> str | None | tuple[Response, int]:
    """A sort order the rules define (rules/prices.yaml advice.sorts), or None when not given."""
    if value is None:
        return None
    names = list((kn.advice or {}).get("sorts") or {})
    if isinstance(value, str) and value in names:
        return value
    hint = nearest(value, names) if isinstance(value, str) else None
    choices = ", ".join(names) if names else "none (these rules define no sort orders)"
    return error(f"'sort' must be one of {choices}, not {json.dumps(value)[:40]}", 400, suggestion=hint)


def _answer(query: Any, sort: Any = None, options: Any = False) -> tuple[Response, int] | Response:
    if not isinstance(query, str):
        return error("give the query as a string in 'q', e.g. ?q=serve+70B+int4+16+users", 400)
    want = _flag(options, "options")
    if not isinstance(want, bool):
        return want
    try:
        kn = live().get()
        order = _sort(sort, kn)
        if isinstance(order, tuple):
            return order
        body = live().answer_bytes(query, current_app.json.dump_bytes, kn,  # type: ignore[attr-defined]
                                   sort=order, options=want)
        return current_app.response_class(body + b"\n", mimetype="application/json")
    except QueryError as err:
        d = err.to_dict()
        return error(err.message, 400, err.column, err.suggestion, query=d["query"],
                     expected=d["expected"], text=d["text"])
    except NoKnowledge as err:
        return error("the rule files do not validate; see /api/health", 503, rules=err.errors)
    except KbError as err:
        return error(str(err), 400)


@bp.get("/answer")
def answer_get() -> Any:
    if "q" not in request.args:
        return error("missing query parameter 'q', e.g. /api/answer?q=serve+70B+int4+16+users", 400)
    return _answer(request.args["q"], request.args.get("sort"), request.args.get("options", False))


@bp.post("/answer")
def answer_post() -> Any:
    if not request.is_json:
        return error("send the query as JSON: Content-Type: application/json, body {\"q\": \"…\"}", 400)
    body, problem = _json_body(request.get_data(cache=False))
    if problem is not None:
        return error(f"the body is not valid JSON: {problem.msg} at line {problem.lineno} "
                     f"column {problem.colno}", 400, column=problem.colno)
    if not isinstance(body, dict) or "q" not in body:
        return error("the JSON body needs a 'q' field, e.g. {\"q\": \"serve 70B int4 16 users\"}", 400)
    return _answer(body["q"], body.get("sort"), body.get("options", False))


def _json_body(data: bytes) -> tuple[Any, orjson.JSONDecodeError | None]:
    """The decoded body, or the error with its position. orjson refuses nesting deeper than
    1,024 (the standard library would recurse until RecursionError) and lone surrogates, which
    the standard library reads; so a body orjson refuses is given to the standard library,
    and refused with orjson's position only if that fails too."""
    try:
        return orjson.loads(data), None
    except orjson.JSONDecodeError as err:
        try:
            return json.loads(data), None
        except (ValueError, RecursionError):
            return None, err


@bp.get("/gpus")
def gpus() -> Any:
    return jsonify(list(live().get().gpus.values()))


@bp.get("/models")
def models() -> Any:
    return jsonify(list(live().get().models.values()))


@bp.get("/health")
def health() -> Any:
    status = live().status()
    warnings = [e["message"] for e in status["errors"]]
    ok = status["loaded_at"] is not None
    # each `kbq serve` process holds and reloads its own rules: say which one answered
    state = ("degraded" if status["errors"] else "ok") if ok else "error"
    body = {"status": state, "rules": status, "warnings": warnings,
            "process": os.getpid(), "answer_cache": live().cache.stats(),
            "computing": live().gate.stats()}
    return jsonify(body), 200 if ok else 503


@bp.get("/openapi.json")
def openapi() -> Any:
    return jsonify(openapi_document())


# ---------------------------------------------------------------- OpenAPI

def _error_response(text: str) -> dict[str, Any]:
    return {"description": text,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}


def _list_of(text: str) -> dict[str, Any]:
    return {"200": {"description": text, "content": {"application/json": {"schema": {
        "type": "array", "items": {"type": "object"}}}}}}


@cache
def answer_model() -> TypeAdapter[Answer]:
    """The Answer as pydantic sees it: its JSON schema, and a check of an answer's JSON.
    kb.engine.assembly.answer names the types of its parts (kb.knowledge.records, kb.engine.assembly.answer_records) for the type checker
    only, so that a query does not import them; they are imported here, where pydantic finds
    them (a TypeAdapter resolves the names its type leaves open in its caller's scope)."""
    from kb.knowledge.records import Value  # noqa: F401
    from kb.engine.assembly.answer_records import (Advice, Bottleneck, ClaimChecked, ErrorBand,  # noqa: F401
                                   Memory, ModelSource, Option, PricesUsed, Question, Recommendation,
                                   Replicas, ReplicaLayout, Disaggregated, Side, Throughput, WorkloadDict)

    return TypeAdapter(Answer)


@cache
def openapi_document() -> dict[str, Any]:
    answer_schema = answer_model().json_schema(ref_template="#/components/schemas/{model}")
    schemas = answer_schema.pop("$defs", {})
    schemas["Answer"] = answer_schema
    schemas["Error"] = {
        "type": "object", "required": ["error"],
        "properties": {"error": {
            "type": "object", "required": ["message", "column", "suggestion"],
            "properties": {
                "message": {"type": "string", "description": "what went wrong"},
                "column": {"type": ["integer", "null"], "description": "1-based column of the bad token"},
                "suggestion": {"type": ["string", "null"], "description": "the nearest valid word"},
                "text": {"type": "string", "description": "the message with the query and a caret"},
            }}}}
    q = {"name": "q", "in": "query", "required": True, "description": "the question, e.g. serve 70B int4 16 users",
         "schema": {"type": "string", "maxLength": 500}}

    sorts = list(get_args(SortName))
    sort = {"name": "sort", "in": "query", "required": False,
            "description": "the order of the GPU configurations (rules/prices.yaml advice.sorts); "
                           "default: the query's own words (cheapest, fastest…), else value",
            "schema": {"type": "string", "enum": sorts}}
    options = {"name": "options", "in": "query", "required": False,
               "description": "1 (or true) to list what to change so it fits, as `kbq --options`; "
                              "without it, listed only when the GPUs asked about do not hold the job "
                              "or the query says 'what if'",
               "schema": {"type": "string", "enum": [w for w in TRUE_WORDS + FALSE_WORDS if w]}}
    answered = {"200": {"description": "the Answer (the same as `kbq --json`)",
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Answer"}}}},
                "400": _error_response("a query the parser cannot read, a 'sort' or 'options' value "
                                       "it does not take, or a malformed request"),
                "503": _error_response("the rule files have never validated")}
    return {
        "openapi": "3.1.0",
        "info": {"title": "kbq", "version": __version__,
                 "description": "Rules-based GPU sizing answers for LLM training and inference, "
                                "with the trace of every number. GB = 10^9 bytes."},
        "paths": {
            "/api/answer": {
                "get": {"summary": "Answer a query", "operationId": "answerGet", "parameters": [q, sort, options],
                        "responses": answered},
                "post": {"summary": "Answer a query sent as JSON", "operationId": "answerPost",
                         "requestBody": {"required": True, "content": {"application/json": {"schema": {
                             "type": "object", "required": ["q"],
                             "properties": {"q": {"type": "string", "maxLength": 500},
                                            "sort": {"type": "string", "enum": sorts,
                                                     "description": sort["description"]},
                                            "options": {"type": "boolean", "default": False,
                                                        "description": options["description"]}}}}}},
                         "responses": {**answered,
                                       "413": _error_response("the body is larger than 64 KiB")}},
            },
            "/api/gpus": {"get": {"summary": "The GPU catalogue", "operationId": "gpus",
                                  "responses": _list_of("every GPU in rules/gpus.yaml")}},
            "/api/models": {"get": {"summary": "The model architectures", "operationId": "models",
                                    "responses": _list_of("every model in rules/models.yaml")}},
            "/api/health": {"get": {"summary": "Whether the rules loaded", "operationId": "health",
                                    "responses": {
                                        "200": {"description": "serving; `warnings` lists errors of newer rule files that did not validate; `process` is the id of the process that answered",
                                                "content": {"application/json": {"schema": {"type": "object"}}}},
                                        "503": {"description": "the rule files have never validated",
                                                "content": {"application/json": {"schema": {"type": "object"}}}}}}},
            "/api/openapi.json": {"get": {"summary": "This description", "operationId": "openapi",
                                          "responses": {"200": {"description": "OpenAPI 3.1",
                                                                "content": {"application/json": {"schema": {"type": "object"}}}}}}},
        },
        "components": {"schemas": schemas},
    }
