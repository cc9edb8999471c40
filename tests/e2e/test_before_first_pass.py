"""The API before the reconcile function's first pass: no topology snapshot exists yet (issue 11,
item 3). Jobs without a topology request are decided; a topology request, and the topology view,
answer 503 TOPOLOGY_UNAVAILABLE saying why. Nothing is charged for a refused request."""

from __future__ import annotations

from topogov_cli.sigv4 import credentials_for_profile, signed_request

# The stack is tests/e2e/conftest.py's: the labeler's kind of tests/stacks.py, which no reconcile
# pass has run on since its start or its last reset, so no snapshot exists (the reset puts the
# bucket back as it was just after the start).


def call(stack, method, path, body=None):
    creds = credentials_for_profile("topogov-team-a", str(stack.credentials))
    return signed_request(method, stack.api.url + path, credentials=creds, region="us-east-1", json_body=body)


def job(name, **kw):
    return {"job_name": name, "image": "pytorch:latest", "accelerators": 8, "replica_count": 2, **kw}


def test_a_topology_request_is_503_with_the_reason_and_charges_nothing(stack):
    resp = call(stack, "POST", "/v1/jobs", body=job("needs-topology", required_topology="layer-3"))
    assert resp.status_code == 503, resp.text
    err = resp.json()["error"]
    assert err["code"] == "TOPOLOGY_UNAVAILABLE"
    assert "no topology snapshot yet" in err["message"] and "first pass" in err["message"]
    assert call(stack, "GET", "/v1/teams/team-a").json()["in_flight"]["nvidia.com/gpu"] == 0
    assert call(stack, "GET", "/v1/jobs/team-a/needs-topology").status_code == 404


def test_a_job_without_topology_is_decided_and_created(stack):
    resp = call(stack, "POST", "/v1/jobs", body=job("no-topology", topology={"mode": "none"}))
    assert resp.status_code == 201, resp.text
    assert resp.json()["decision"]["topology"]["mode"] == "none"


def test_the_topology_view_is_503(stack):
    resp = call(stack, "GET", "/v1/topology")
    assert resp.status_code == 503 and resp.json()["error"]["code"] == "TOPOLOGY_UNAVAILABLE"
