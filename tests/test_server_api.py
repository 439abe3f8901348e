"""The JSON API: the answer is the CLI's JSON, one error shape, JSON bodies decoded as the standard
library writes them, catalogues, health and the OpenAPI description."""

from __future__ import annotations

import datetime
import decimal
import json
import math
import os
import re
import shutil
import subprocess
import uuid

import pytest
from server_common import QUERY, q

from kb import ask, get_knowledge

# ---------------------------------------------------------------- JSON API

def test_api_answer_is_the_cli_json(client, tmp_path):
    kbq = shutil.which("kbq")
    if kbq is None:
        pytest.skip("the kbq console script is not installed")
    cli = subprocess.run([kbq, "--json", QUERY], capture_output=True, text=True, cwd=tmp_path,
                         timeout=120, check=False)
    assert cli.returncode == 0, cli.stderr
    assert client.get(f"/api/answer?q={q(QUERY)}").get_json() == json.loads(cli.stdout)


def test_api_lists_options_when_the_gpu_asked_about_is_too_small_like_the_cli(client):
    # 70B in 16 bits is about 140 GB of weights alone; an RTX 4090 holds 24 GB
    query = "can I run llama 3 70B on a 4090"
    got = client.get(f"/api/answer?q={q(query)}").get_json()
    assert not got["gpus"][0]["fits"] and got["options"]
    assert got == ask(query).to_dict()


@pytest.mark.parametrize("query", ["serve 70B int4 16 users on rtx 4090", "can I run llama 3 70B on a 4090",
                                   "train llama-2-7b paged on 12GB"])
def test_an_option_without_a_price_says_na_not_na_per_unit(client, query):
    # an option on a card nobody rents has no $/M tok (and a run without a price no cost: QLoRA on
    # a bare 12 GB; a 13B QLoRA on 8 GB has no usable next card since the training stack's
    # supported platforms rank cards, so it no longer serves here):
    # the options table says "n/a", never "n/a/M tok"
    page = client.get(f"/?q={q(query)}").get_data(as_text=True)
    assert "What to change" in page
    assert "n/a/M tok" not in page and "n/a/run" not in page


@pytest.mark.parametrize("query", ["serve 70B int4 16 users", "train 13B qlora on 20GB",
                                   "serve 70B int4 on h100 sxm"])
def test_what_to_change_only_when_it_does_not_fit(client, query):
    """A job that fits (and meets any target) lists no changes on the page (issue 23, item 4)."""
    a = ask(query)
    assert a.gpus[0].fits and a.gpus[0].meets_target is not False
    assert "What to change" not in client.get(f"/?q={q(query)}").get_data(as_text=True)


def test_api_answer_keeps_the_contract_key_order(client):
    got = client.get(f"/api/answer?q={q(QUERY)}").get_data(as_text=True)
    assert list(json.loads(got)) == list(ask(QUERY).to_dict())


def test_api_post_equals_get(client):
    got = client.get(f"/api/answer?q={q(QUERY)}").get_json()
    posted = client.post("/api/answer", json={"q": QUERY})
    assert posted.status_code == 200
    assert posted.get_json() == got


def test_api_answer_validates_against_the_answer_model(client):
    from server.api import answer_model

    answer_model().validate_python(client.get(f"/api/answer?q={q(QUERY)}").get_json())


ERROR_CASES = [
    ("get", "/api/answer", {}, 400, "missing query parameter"),
    ("get", "/api/answer?q=" + q("serve 70B on h10"), {}, 400, "unknown word"),
    ("get", "/api/answer?q=" + "x" * 501, {}, 400, "longer than 500"),
    ("get", "/api/answer?q=", {}, 400, "empty"),
    ("post", "/api/answer", {"data": "{not json", "content_type": "application/json"}, 400, "not valid JSON"),
    ("post", "/api/answer", {"data": "q=serve", "content_type": "application/x-www-form-urlencoded"}, 400,
     "Content-Type: application/json"),
    ("post", "/api/answer", {"json": ["serve 70B"]}, 400, "'q' field"),
    ("post", "/api/answer", {"json": {"query": QUERY}}, 400, "'q' field"),
    ("post", "/api/answer", {"json": {"q": 70}}, 400, "as a string"),
    ("get", "/api/nope", {}, 404, "not found"),
    ("get", "/api", {}, 404, "not found"),
    ("delete", "/api/answer", {}, 405, "not allowed"),
    ("post", "/api/gpus", {"json": {}}, 405, "not allowed"),
    ("post", "/api/answer", {"data": "x" * (64 * 1024 + 1), "content_type": "application/json"}, 413,
     "larger than 64 KiB"),
]


@pytest.mark.parametrize("method, url, kwargs, status, words", ERROR_CASES)
def test_api_errors_have_one_shape(client, method, url, kwargs, status, words):
    r = getattr(client, method)(url, **kwargs)
    assert r.status_code == status
    assert r.mimetype == "application/json"
    body = r.get_json()
    assert set(body) == {"error"}
    assert {"message", "column", "suggestion"} <= set(body["error"])
    assert words.lower() in body["error"]["message"].lower()


def test_api_query_error_has_column_and_suggestion(client):
    query = "serve 70B int4 on h10"
    err = client.get("/api/answer?q=" + q(query)).get_json()["error"]
    assert err["column"] == query.index("h10") + 1             # where the unknown word starts
    assert err["suggestion"].lower() == "h100"
    assert "^^^" in err["text"]


JSON_VALUES = [
    {"text": "<script>&</script>", "é": "→ ≤ 漢"},
    {"nan": float("nan"), "inf": [float("inf"), -float("inf")], "tuple": (1.5, 2)},
    {"beyond_64_bits": 2**70, "nan": float("nan")},        # orjson refuses: the fallback writes it
    {"surrogate": "\ud800<"},                               # orjson refuses
    {1: "an int key", "b": None},                          # orjson refuses
    {"date": datetime.date(2024, 5, 1), "uuid": uuid.UUID(int=5), "decimal": decimal.Decimal("1.25")},
    [1, True, None, 0.1, 1e300, -0.0, "x" * 10],
]


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


@pytest.mark.parametrize("value", JSON_VALUES, ids=range(len(JSON_VALUES)))
def test_api_json_bodies_decode_to_what_the_standard_library_writes(app, value):
    # the bodies are written by orjson (or the standard library where orjson refuses): the same
    # values as json.dumps with Flask's defaults, NaN and infinity as null, and inert as HTML
    with app.app_context():
        body = app.json.response(value).get_data()
        reference = json.loads(json.dumps(value, default=app.json.default))
    assert body.endswith(b"\n")
    assert json.loads(body) == _finite(reference)
    assert not re.search(rb"[<>&]|NaN|Infinity", body)


def test_api_answer_body_is_the_answer_dict(client):
    body = client.get(f"/api/answer?q={q(QUERY)}").get_data()
    assert json.loads(body) == ask(QUERY).to_dict()
    assert not re.search(rb"[<>&]|NaN|Infinity", body)


def test_api_error_with_a_lone_surrogate_is_valid_json(client):
    r = client.post("/api/answer", data='{"q": "serve 70B \\ud800<x"}', content_type="application/json")
    assert r.status_code == 400
    assert b"<" not in r.get_data()
    assert json.loads(r.get_data())["error"]["query"] == "serve 70B \ud800<x"


def test_api_body_just_under_the_limit_is_read(client):
    body = json.dumps({"q": QUERY, "pad": "x" * (60 * 1024)})
    assert client.post("/api/answer", data=body, content_type="application/json").status_code == 200


def test_api_catalogues_match_the_rules(client):
    kn = get_knowledge()
    assert [g["id"] for g in client.get("/api/gpus").get_json()] == list(kn.gpus)
    assert [m["id"] for m in client.get("/api/models").get_json()] == list(kn.models)


def test_api_health(client):
    body = client.get("/api/health").get_json()
    assert body["status"] == "ok"
    assert body["rules"]["errors"] == [] and body["warnings"] == []
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", body["rules"]["loaded_at"])
    assert body["process"] == os.getpid()     # which `kbq serve` process answered


def test_openapi_describes_every_api_route(app, client):
    doc = client.get("/api/openapi.json").get_json()
    assert doc["openapi"].startswith("3.1")
    methods: dict[str, set[str]] = {}
    for rule in app.url_map.iter_rules():
        if rule.rule.startswith("/api/"):
            methods.setdefault(rule.rule, set()).update(m.lower() for m in rule.methods - {"HEAD", "OPTIONS"})
    assert methods == {path: set(ops) for path, ops in doc["paths"].items()}
    schemas = doc["components"]["schemas"]
    assert "Answer" in schemas and "Error" in schemas
    refs = set(re.findall(r'"\$ref": "#/components/schemas/([^"]+)"', json.dumps(doc)))
    assert refs <= set(schemas)
    assert set(schemas["Answer"]["required"]) >= {"query", "verdict", "memory", "gpus", "trace"}


def test_openapi_is_valid():
    validator = pytest.importorskip("openapi_spec_validator")
    from server.api import openapi_document

    validator.validate(openapi_document())


def test_openapi_describes_sort_and_options(client):
    doc = client.get("/api/openapi.json").get_json()
    params = {p["name"]: p for p in doc["paths"]["/api/answer"]["get"]["parameters"]}
    assert params["sort"]["schema"]["enum"] == list(get_knowledge().advice["sorts"])
    assert "1" in params["options"]["schema"]["enum"]
    body = doc["paths"]["/api/answer"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body["properties"]["options"]["type"] == "boolean"
    assert body["properties"]["sort"]["enum"] == params["sort"]["schema"]["enum"]


@pytest.mark.parametrize("body", ["[" * 5000 + "]" * 5000, '{"q": ' + "[" * 5000 + "]" * 5000 + "}"],
                         ids=["array", "inside-q"])
def test_json_nested_5000_deep_is_a_400_with_a_position(client, body):
    r = client.post("/api/answer", data=body, content_type="application/json")
    # the standard library's decoder raised RecursionError here: HTTP 500
    assert r.status_code == 400
    assert r.get_json()["error"]["message"]


def test_json_refused_by_both_decoders_says_where(client):
    r = client.post("/api/answer", data='{"q": "serve 7B",\n  "x": }', content_type="application/json")
    assert r.status_code == 400
    err = r.get_json()["error"]
    assert err["message"].startswith("the body is not valid JSON: ") and "line 2" in err["message"]
    assert err["column"] == 8
