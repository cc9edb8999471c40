"""The authorization matrix (issue #7, item 2): every route of the API x every kind of caller, one test
per cell, through the local API Gateway (IAM/SigV4 emulated) to the api handler. Nothing is patched.

Callers, all on team-a's resources (teams.yaml):

* ``member``  - ``topogov-team-a``, a principal of team-a;
* ``other``   - ``topogov-team-b``, a principal of team-b only;
* ``admin``   - ``topogov-admin``, one of the policy's admins (every team);
* ``unsigned`` - no ``Authorization`` header at all;
* ``wrong-signature`` - signed correctly, then one character of ``Signature=`` altered;
* ``expired`` - honestly signed as of 20 minutes ago (API Gateway allows 5 minutes of skew).

The last three never reach the handler: API Gateway answers 403 with its own body (``{"message"}`` and
``x-amzn-ErrorType``). A member of another team gets 403 ``FORBIDDEN`` in the API's error shape, and
neither reads nor changes anything: after its DELETE the job is still in Kubernetes and its ledger
record still charged; its reads carry nothing but the error.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import requests

from topogov_cli.sigv4 import credentials_for_profile, sign
from topogov_local.apigw import MISSING_AUTHENTICATION_TOKEN, SIGNATURE_MISMATCH

from .conftest import call

REGION = "us-east-1"
NAMESPACE = "hyperpod-ns-team-a"
READ = "authz-read"  # team-a's job every read (and every refused DELETE) targets
CANCELLED_BY = {"member": "authz-cancel-member", "admin": "authz-cancel-admin"}
TEAM_B_JOB = "authz-b-job"
PROFILES = {"member": "topogov-team-a", "other": "topogov-team-b", "admin": "topogov-admin"}
CALLERS = ["member", "other", "admin", "unsigned", "wrong-signature", "expired"]
GATEWAY = {"unsigned", "wrong-signature", "expired"}
JOB_FIELDS = ("submitted_by", "submitted_at", "decision", "namespace", "status", "events", "why_pending")
TEAM_FIELDS = ("quota", "borrow_limit", "in_flight", "admitted", "max_in_flight", "local_queue")
STAMP = r"\d{8}T\d{6}Z"


def job_body(name: str, team: str = "team-a") -> dict[str, Any]:
    return {"job_name": name, "image": "pytorch:latest", "accelerators": 8, "replica_count": 1, "team": team}


# -- sending as each kind of caller -------------------------------------------------------------------
def send(stack: Any, caller: str, method: str, path: str, body: Any = None) -> requests.Response:
    url = stack.api.url + path
    data = json.dumps(body).encode() if body is not None else b""
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if caller in PROFILES:
        return call(stack, method, path, profile=PROFILES[caller], body=body)
    if caller == "unsigned":
        return requests.request(method, url, data=data, headers=headers, timeout=30)
    creds = credentials_for_profile("topogov-team-a", str(stack.credentials))
    when = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=20) if caller == "expired" else None
    signed = sign(method, url, credentials=creds, region=REGION, body=data, headers=headers, timestamp=when)
    if caller == "wrong-signature":
        signed["Authorization"] = _alter_signature(signed["Authorization"])
    return requests.request(method, url, data=data, headers=signed, timeout=30)


def _alter_signature(authorization: str) -> str:
    """The same header with the last hex digit of ``Signature=`` changed (still well-formed)."""
    m = re.search(r"Signature=([0-9a-f]+)$", authorization)
    assert m, authorization
    last = m.group(1)[-1]
    return authorization[:-1] + ("0" if last != "0" else "1")


# -- what Kubernetes and the ledger hold -------------------------------------------------------------------
def kube_job(stack: Any, name: str, namespace: str = NAMESPACE) -> dict[str, Any] | None:
    resp = stack.kube().request("GET", f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}")
    return resp.body if resp.status == 200 else None


def ledger_state(stack: Any, team: str, name: str) -> str | None:
    item = (
        stack.client("dynamodb")
        .get_item(
            TableName=stack.output("LedgerTable"),
            Key={"team": {"S": team}, "name": {"S": name}},
            ConsistentRead=True,
        )
        .get("Item")
    )
    return None if item is None else item["state"]["S"]


@pytest.fixture(scope="module")
def jobs(stack):
    """team-a's jobs to read and cancel, and one of team-b's, created through the API."""
    for name in (READ, *CANCELLED_BY.values()):
        resp = call(stack, "POST", "/v1/jobs", body=job_body(name))
        assert resp.status_code == 201, resp.text
    resp = call(stack, "POST", "/v1/jobs", profile="topogov-team-b", body=job_body(TEAM_B_JOB, "team-b"))
    assert resp.status_code == 201, resp.text
    return stack


# -- the expected answers ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Route:
    method: str
    path: str  # may contain {caller}
    body: Callable[[str], Any] | None = None

    def target(self, caller: str) -> str:
        name = CANCELLED_BY.get(caller, READ) if self.method == "DELETE" else READ
        return self.path.format(caller=caller, name=name)


WHATIF_TRACE = "submit_s,team,name,pods,gpus_per_pod,duration_s\n0,team-a,wi-1,2,8,60\n"
ROUTES = {
    "POST /v1/jobs": Route("POST", "/v1/jobs", body=lambda caller: job_body(f"authz-post-{caller}")),
    "POST /v1/jobs?dryRun=true": Route(
        "POST", "/v1/jobs?dryRun=true", body=lambda caller: job_body(f"authz-dry-{caller}")
    ),
    "GET /v1/jobs": Route("GET", "/v1/jobs"),
    "GET /v1/jobs?team=team-a": Route("GET", "/v1/jobs?team=team-a"),
    "GET /v1/jobs/team-a/{name}": Route("GET", "/v1/jobs/team-a/{name}"),
    "DELETE /v1/jobs/team-a/{name}": Route("DELETE", "/v1/jobs/team-a/{name}"),
    "GET /v1/teams": Route("GET", "/v1/teams"),
    "GET /v1/teams/team-a": Route("GET", "/v1/teams/team-a"),
    "GET /v1/topology": Route("GET", "/v1/topology"),
    "GET /v1/openapi.json": Route("GET", "/v1/openapi.json"),
    "POST /v1/whatif": Route("POST", "/v1/whatif", body=lambda caller: {"trace": WHATIF_TRACE}),
}

# Signed callers: the status each one gets on each route (FORBIDDEN for the other team's member).
EXPECTED = {
    "POST /v1/jobs": {"member": 201, "other": 403, "admin": 201},
    "POST /v1/jobs?dryRun=true": {"member": 200, "other": 403, "admin": 200},
    "GET /v1/jobs": {"member": 200, "other": 200, "admin": 200},
    "GET /v1/jobs?team=team-a": {"member": 200, "other": 403, "admin": 200},
    "GET /v1/jobs/team-a/{name}": {"member": 200, "other": 403, "admin": 200},
    "DELETE /v1/jobs/team-a/{name}": {"member": 200, "other": 403, "admin": 200},
    "GET /v1/teams": {"member": 200, "other": 200, "admin": 200},
    "GET /v1/teams/team-a": {"member": 200, "other": 403, "admin": 200},
    "GET /v1/topology": {"member": 200, "other": 200, "admin": 200},
    "GET /v1/openapi.json": {"member": 200, "other": 200, "admin": 200},
    "POST /v1/whatif": {"member": 403, "other": 403, "admin": 200},  # admins only
}
GATEWAY_ANSWER = {  # x-amzn-ErrorType, message pattern
    "unsigned": ("MissingAuthenticationTokenException", re.escape(MISSING_AUTHENTICATION_TOKEN)),
    "wrong-signature": ("InvalidSignatureException", re.escape(SIGNATURE_MISMATCH)),
    "expired": (
        "InvalidSignatureException",
        rf"Signature expired: {STAMP} is now earlier than {STAMP} \({STAMP} - 5 min\.\)",
    ),
}


def _names(resp: requests.Response) -> set[tuple[str, str]]:
    return {(j["team"], j["name"]) for j in resp.json()["jobs"]}


def check_gateway_refusal(resp: requests.Response, caller: str) -> None:
    error_type, pattern = GATEWAY_ANSWER[caller]
    assert resp.status_code == 403, resp.text
    assert resp.headers.get("x-amzn-ErrorType") == error_type, dict(resp.headers)
    body = resp.json()
    assert set(body) == {"message"} and re.fullmatch(pattern, body["message"]), body


def check_forbidden(resp: requests.Response) -> None:
    """403 FORBIDDEN in the API's shape, and nothing but the error (no job or team data)."""
    assert resp.status_code == 403, resp.text
    body = resp.json()
    assert set(body) == {"error"}, body
    err = body["error"]
    assert err["code"] == "FORBIDDEN" and isinstance(err["message"], str), err
    assert set(err) <= {"code", "message", "details"}, err
    leaked = [f for f in (*JOB_FIELDS, *TEAM_FIELDS) if f in json.dumps(err.get("details", {}))]
    assert not leaked, err
    assert "topogov-team-a" not in resp.text  # nobody's identity but the caller's


def check_allowed(route_id: str, caller: str, resp: requests.Response) -> None:
    body = resp.json()
    if route_id == "POST /v1/whatif":
        (job,) = body["scenarios"]["baseline"]["jobs"]
        assert body["jobs"] == 1 and job["name"] == "wi-1" and len(job["nodes"]) == 2, body
    elif route_id.startswith("POST"):
        assert body["decision"]["team"] == "team-a" and body["dry_run"] is route_id.endswith("true")
    elif route_id == "GET /v1/jobs":
        names = _names(resp)
        if caller == "member":
            assert (("team-a", READ) in names) and all(t == "team-a" for t, _ in names), names
        elif caller == "other":
            assert ("team-b", TEAM_B_JOB) in names and all(t == "team-b" for t, _ in names), names
        else:
            assert {("team-a", READ), ("team-b", TEAM_B_JOB)} <= names, names
    elif route_id == "GET /v1/jobs?team=team-a":
        names = _names(resp)
        assert ("team-a", READ) in names and all(t == "team-a" for t, _ in names), names
    elif route_id == "GET /v1/jobs/team-a/{name}":
        assert (
            body["team"] == "team-a"
            and body["name"] == READ
            and body["submitted_by"].endswith("user/topogov-team-a")
        )
    elif route_id == "DELETE /v1/jobs/team-a/{name}":
        name = CANCELLED_BY[caller]
        assert body == {
            "team": "team-a",
            "name": name,
            "kind": "Job",
            "job_deleted": True,
            "charge_released": True,
        }
    elif route_id == "GET /v1/teams":
        want = {"member": ["team-a"], "other": ["team-b"], "admin": ["team-a", "team-b", "team-c"]}[caller]
        assert [t["team"] for t in body["teams"]] == want, body
    elif route_id == "GET /v1/teams/team-a":
        assert body["team"] == "team-a" and body["in_flight"]["nvidia.com/gpu"] >= 8, body
    elif route_id == "GET /v1/topology":
        assert body["levels"], body
    else:
        assert body["paths"] and body["info"]["title"] == "Topogov"


def check_nothing_changed(stack: Any, route_id: str, caller: str) -> None:
    """A refused request created, cancelled and released nothing."""
    if route_id.startswith("POST /v1/jobs"):
        name = ROUTES[route_id].body(caller)["job_name"]  # type: ignore[misc]
        assert kube_job(stack, name) is None, f"{name} was created"
        assert ledger_state(stack, "team-a", name) is None, f"{name} was charged"
    # team-a's job that refused reads and DELETEs target is untouched
    job = kube_job(stack, READ)
    assert job is not None, f"{READ} was deleted"
    assert ledger_state(stack, "team-a", READ) == "submitted", "its charge was released"


CELLS = [(route_id, caller) for route_id in ROUTES for caller in CALLERS]


@pytest.mark.parametrize(("route_id", "caller"), CELLS, ids=[f"{r} as {c}" for r, c in CELLS])
def test_authorization(jobs, report, route_id, caller):
    stack = jobs
    route = ROUTES[route_id]
    ok = False
    try:
        resp = send(
            stack, caller, route.method, route.target(caller), route.body(caller) if route.body else None
        )
        if caller in GATEWAY:
            check_gateway_refusal(resp, caller)
            check_nothing_changed(stack, route_id, caller)
        else:
            expected = EXPECTED[route_id][caller]
            if expected == 403:
                check_forbidden(resp)
                check_nothing_changed(stack, route_id, caller)
            else:
                assert resp.status_code == expected, resp.text
                check_allowed(route_id, caller, resp)
                if route_id.startswith("DELETE"):  # the member's (admin's) own cancel did happen
                    name = CANCELLED_BY[caller]
                    assert kube_job(stack, name) is None
                    assert ledger_state(stack, "team-a", name) == "released"
        ok = True
    finally:
        report.add("auth", cases=1, failures=0 if ok else 1)


def test_the_matrix_covers_every_route_of_the_document():
    """Each (method, path) of docs/openapi.json has cells above (a new route must be added here)."""
    from pathlib import Path

    doc = json.loads((Path(__file__).resolve().parents[2] / "docs" / "openapi.json").read_text())
    documented = {(m.upper(), p) for p, item in doc["paths"].items() for m in item}
    covered = {
        (
            r.method,
            re.sub(r"\?.*", "", r.path)
            .replace("team-a/{name}", "{team}/{name}")
            .replace("/team-a", "/{team}"),
        )
        for r in ROUTES.values()
    }
    assert documented == covered, documented ^ covered
