"""The JSON API against its own OpenAPI description: schemathesis generates requests from
/api/openapi.json (valid and invalid ones) and checks every response — never a 5xx, and each
response matches what the description promises."""

import pytest
from hypothesis import HealthCheck, settings

schemathesis = pytest.importorskip("schemathesis")

from schemathesis.specs.openapi.checks import positive_data_acceptance  # noqa: E402

from server import create_app  # noqa: E402

APP = create_app()
# Any string is a schema-valid query, yet one the parser cannot read is a 400 by design (with
# the caret message); so "schema-valid data must be accepted" does not apply to /api/answer.
EXCLUDED = [positive_data_acceptance]
SCHEMA = schemathesis.openapi.from_wsgi("/api/openapi.json", APP)


@SCHEMA.parametrize()
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
def test_api_conforms_and_never_fails(case):
    # the WSGI client does not undo gzip; the bodies are checked as sent uncompressed (gzip has
    # its own tests through real HTTP, tests/test_server_http.py)
    response = case.call(headers={"Accept-Encoding": "identity"})
    assert response.status_code < 500, response.text[:500]
    case.validate_response(response, excluded_checks=EXCLUDED)
