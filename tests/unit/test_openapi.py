"""The OpenAPI document is generated from the code and committed: the two must not differ."""

import json
from pathlib import Path

from topogov.handlers.api import openapi_document

COMMITTED = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"


def test_committed_openapi_matches_the_code():
    generated = openapi_document()
    assert COMMITTED.read_text() == generated, "run `make openapi` and commit docs/openapi.json"


def test_every_design_route_is_documented_with_its_body():
    doc = json.loads(openapi_document())
    paths = doc["paths"]
    for route, methods in {
        "/v1/jobs": {"get", "post"},
        "/v1/jobs/{team}/{name}": {"get", "delete"},
        "/v1/teams": {"get"},
        "/v1/teams/{team}": {"get"},
        "/v1/topology": {"get"},
        "/v1/openapi.json": {"get"},
    }.items():
        assert methods <= set(paths[route]), route
    body = paths["/v1/jobs"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert {r["$ref"].rsplit("/", 1)[-1] for r in body["oneOf"]} == {"JobRequest", "ManifestRequest"}
    job = doc["components"]["schemas"]["JobRequest"]
    assert job["additionalProperties"] is False and "job_name" in job["required"]
