"""Fuzzing the REST API (issue #7, item 1): schemathesis generates requests for every route and method
of the OpenAPI document the API serves (``GET /v1/openapi.json``, the same as ``docs/openapi.json``),
positive (fitting the schema) and negative (breaking it), and each one is SigV4-signed as a real caller
(``topogov-team-a``, and ``topogov-admin`` to reach the cross-team paths) over the exact bytes sent,
through the local API Gateway to the api handler. Nothing is patched.

What must hold for every request: no 5xx, and every 4xx carries the API's error shape
``{"error": {"code": str, "message": str, "details": object (optional)}}`` (API Gateway's own
``{"message": ...}`` 403s would mean a signing mismatch: they count as failures too).

Most submissions are ``?dryRun=true`` so the team's in-flight cap is not the only answer; the rest
create real jobs (a 429 ``IN_FLIGHT_LIMIT`` is a fine 4xx, as long as it has the shape). Path
parameters are generated, and sometimes pinned to ``team-a``/``team-b`` and to jobs that exist so
the authorised code paths are reached as well as the 404s and 403s.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode

from topogov_cli.sigv4 import credentials_for_profile, sign

from .conftest import FULL, call, scale

DOC = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"
REGION = "us-east-1"
PROFILES = ("topogov-team-a", "topogov-admin")
SEEDED = ("fuzz-seed-1", "fuzz-seed-2", "fuzz-seed-3")  # team-a jobs that exist, for GET/DELETE
# Headers ``requests`` adds itself: sent unsigned (SigV4 signs what the caller chooses, plus host).
_UNSIGNED = frozenset({"content-length", "connection", "accept-encoding", "user-agent", "accept"})


def _operations() -> list[tuple[str, str]]:
    doc = json.loads(DOC.read_text())
    return sorted((method.upper(), path) for path, item in doc["paths"].items() for method in item)


OPERATIONS = _operations()

# Examples per (operation, profile): bounded ~200 requests in all, full well over 1,000.
BUDGET = {
    ("POST", "/v1/jobs"): scale(30, 250),
    ("GET", "/v1/jobs"): scale(12, 80),
    ("GET", "/v1/jobs/{team}/{name}"): scale(15, 90),
    ("DELETE", "/v1/jobs/{team}/{name}"): scale(15, 90),
    ("GET", "/v1/teams"): scale(1, 1),  # no inputs: one request per profile
    ("GET", "/v1/teams/{team}"): scale(12, 70),
    ("GET", "/v1/topology"): scale(8, 40),
    ("GET", "/v1/openapi.json"): scale(1, 1),
    ("POST", "/v1/whatif"): scale(8, 40),
}
TOTALS: Counter[str] = Counter()  # across the module, checked by test_fuzz_volume


def error_shape_problem(response: requests.Response) -> str | None:
    """Why a 4xx answer does not have the API's error shape (None when it does)."""
    try:
        body = response.json()
    except ValueError:
        return f"not JSON: {response.text[:200]!r}"
    if not isinstance(body, dict) or set(body) != {"error"}:
        return f"not {{'error': ...}}: {str(body)[:200]}"
    err = body["error"]
    if not isinstance(err, dict):
        return f"error is not an object: {err!r}"
    if not isinstance(err.get("code"), str) or not err["code"]:
        return f"error.code is not a string: {err!r}"
    if not isinstance(err.get("message"), str):
        return f"error.message is not a string: {err!r}"
    if "details" in err and not isinstance(err["details"], dict):
        return f"error.details is not an object: {err!r}"
    extra = set(err) - {"code", "message", "details"}
    if extra:
        return f"unexpected keys in error: {sorted(extra)}"
    return None


@pytest.fixture(scope="module")
def schema(stack):
    """The document the API serves, loaded by schemathesis."""
    resp = call(stack, "GET", "/v1/openapi.json")
    assert resp.status_code == 200, resp.text
    served = resp.json()
    assert sorted((m.upper(), p) for p, item in served["paths"].items() for m in item) == OPERATIONS
    return schemathesis.openapi.from_dict(served)


@pytest.fixture(scope="module")
def seeded(stack):
    """A few team-a jobs that exist, so GET and DELETE reach past the 404."""
    for name in SEEDED:
        body = {"job_name": name, "image": "pytorch:latest", "accelerators": 8, "replica_count": 1}
        resp = call(stack, "POST", "/v1/jobs", body=body)
        assert resp.status_code == 201, resp.text
    return SEEDED


class Fuzzer:
    """Sends cases signed as one profile and keeps the tally."""

    def __init__(self, stack: Any, profile: str) -> None:
        self.base = stack.api.url
        self.credentials = credentials_for_profile(profile, str(stack.credentials))
        self.session = requests.Session()
        self.statuses: Counter[int] = Counter()
        self.codes: Counter[str] = Counter()  # error codes of the 4xx answers
        self.failures: list[str] = []
        self.unsendable = 0
        self.bad_shape = 0
        self.status_5xx = 0
        self.gateway_403 = 0
        self.seen: set[tuple] = set()

    def send(self, case: Any, raw_body: bytes | None = None, content_type: str | None = None) -> bool:
        """Send ``case`` signed; ``raw_body``/``content_type`` replace its body bytes/Content-Type.
        False, sending nothing, when the same request was sent already (or cannot be built)."""
        kwargs = case.as_transport_kwargs(base_url=self.base)
        kwargs.pop("cookies", None)
        try:  # what requests would put on the wire: final URL (query encoded) and body bytes
            prepared = requests.Request(
                method=kwargs["method"],
                url=kwargs["url"],
                headers=kwargs.get("headers") or {},
                params=kwargs.get("params") or {},
                json=kwargs.get("json"),
                data=kwargs.get("data"),
            ).prepare()
        except (ValueError, TypeError, requests.RequestException):
            self.unsendable += 1  # the client cannot even build it (e.g. NaN in JSON): nothing to send
            return False
        body = prepared.body.encode() if isinstance(prepared.body, str) else (prepared.body or b"")
        if raw_body is not None:
            body = raw_body
            prepared.headers["Content-Type"] = "application/json"
        if content_type is not None:
            prepared.headers["Content-Type"] = content_type
        to_sign = {k: v for k, v in prepared.headers.items() if k.lower() not in _UNSIGNED}
        key = (prepared.method, prepared.url, body, to_sign.get("Content-Type"))
        if key in self.seen:
            return False
        self.seen.add(key)
        headers = sign(
            prepared.method or "GET",
            prepared.url or "",
            credentials=self.credentials,
            region=REGION,
            body=body,
            headers=to_sign,
        )
        what = f"{prepared.method} {prepared.url} body={body[:300]!r}"
        try:
            resp = self.session.request(
                prepared.method or "GET", prepared.url or "", data=body, headers=headers, timeout=60
            )
        except requests.RequestException as exc:  # the server dropped the connection: its fault
            self.failures.append(f"{what}: no answer ({type(exc).__name__}: {exc})")
            return True
        self.statuses[resp.status_code] += 1
        if resp.status_code >= 500:
            self.status_5xx += 1
            self.failures.append(f"{what}: {resp.status_code} {resp.text[:300]}")
        elif 400 <= resp.status_code < 500:
            problem = error_shape_problem(resp)
            if problem is None:
                self.codes[resp.json()["error"]["code"]] += 1
            else:
                self.bad_shape += 1
                if resp.status_code == 403 and resp.headers.get("x-amzn-ErrorType"):
                    self.gateway_403 += 1
                    problem = f"API Gateway refused a signed request ({resp.headers['x-amzn-ErrorType']})"
                self.failures.append(f"{what}: {resp.status_code} {problem}")
        return True

    @property
    def sent(self) -> int:
        return sum(self.statuses.values()) + len([f for f in self.failures if ": no answer (" in f])


# -- submission bodies that get past the schema ------------------------------------------------------
# The document's schemas cannot say everything the API checks (one resource at least, one topology
# field, a Job manifest's inner shape), so schemathesis' bodies mostly stop at 400. These strategies
# draw plausible submissions - real teams, levels, priorities, quantities - and then break a few
# places in them, so the decision, the manifest checks, the ledger and the Kubernetes create are
# fuzzed too.
TEAMS = ["team-a", "team-a", "team-b", "team-c", "team-z"]
NAMESPACES = ["hyperpod-ns-team-a", "hyperpod-ns-team-b", "kube-system"]
LEVELS = [
    "layer-1",
    "layer-2",
    "layer-3",
    "layer-4",
    "hostname",
    "topology.k8s.aws/network-node-layer-3",
    "kubernetes.io/hostname",
    "topology.k8s.aws/network-node-layer-9",
    "rack",
]
PRIORITIES = ["inference-priority", "training-priority", "experimentation-priority", "nope"]
INSTANCE_TYPES = ["p5.48xlarge", "p6-b200.48xlarge", "c5.2xlarge", "x9.huge"]
QUANTITIES = st.one_of(
    st.sampled_from(["1", "8", "32", "500m", "16Gi", "1.5", "0", "-1", "1e3", "2Ti", "1Ki", ".5", "+2"]),
    st.sampled_from(["abc", "", " 1 ", "1E", "1e9999", "1e-9999", "9" * 40, "1Ei", "0.0001m", "Infinity"]),
    st.integers(-3, 64),
    st.floats(-1, 1e6, allow_nan=False),
    st.booleans(),
    st.none(),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=1),
)
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)
NAMES = st.from_regex(r"[a-z][a-z0-9-]{0,20}[a-z0-9]", fullmatch=True) | st.sampled_from(SEEDED)


def _topology() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {"mode": st.sampled_from(["required", "preferred", "auto", "none", "strict"])},
        optional={
            "level": st.sampled_from(LEVELS),
            "fallbackAfter": st.sampled_from(["15m", "1h30m", "90s", "0s", "soon", ""]),
        },
    )


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every place in a JSON document (dict keys and list indices), parents first."""
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out += _paths(item, (*prefix, i))
    return out


@st.composite
def _broken(draw: Any, base: st.SearchStrategy[dict[str, Any]], most: int = 2) -> dict[str, Any]:
    """``base``, with up to ``most`` places replaced by arbitrary JSON or removed."""
    doc = draw(base)
    for _ in range(draw(st.integers(0, most))):
        places = _paths(doc)
        if not places:
            break
        *parent_path, last = draw(st.sampled_from(places))
        parent = doc
        for step in parent_path:
            parent = parent[step]
        if isinstance(parent, dict) and draw(st.booleans()):
            parent.pop(last, None)
        else:
            parent[last] = draw(JSON | QUANTITIES)
    return doc


def _container() -> st.SearchStrategy[dict[str, Any]]:
    resources = st.dictionaries(
        st.sampled_from(["nvidia.com/gpu", "vpc.amazonaws.com/efa", "cpu", "memory", "example.com/foo"]),
        QUANTITIES,
        max_size=4,
    )
    return st.fixed_dictionaries(
        {"name": st.just("main"), "image": st.just("pytorch:latest")},
        optional={
            "resources": st.fixed_dictionaries({}, optional={"requests": resources, "limits": resources})
        },
    )


@st.composite
def _job(draw: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "job_name": draw(NAMES),
        "image": "pytorch:latest",
        "accelerators": draw(st.integers(1, 16)),
        **draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "efa": st.integers(0, 32),
                    "vcpu": st.integers(0, 200) | st.floats(0, 400),
                    "memory": st.integers(0, 2048),
                    "tasks_per_node": st.integers(1, 8) | st.sampled_from(["auto", "cpu", "gpu"]),
                    "instance_type": st.sampled_from(INSTANCE_TYPES),
                    "priority": st.sampled_from(PRIORITIES),
                    "team": st.sampled_from(TEAMS),
                    "max_retry": st.integers(0, 5),
                    "command": st.lists(st.text(max_size=8), max_size=3),
                    "environment": st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=2),
                },
            )
        ),
    }
    pods = draw(st.sampled_from([None, "replica_count", "node_count"]))
    if pods:
        body[pods] = draw(st.integers(1, 80))
    where = draw(st.sampled_from([None, "required_topology", "preferred_topology", "topology"]))
    if where == "topology":
        body[where] = draw(_topology())
    elif where:
        body[where] = draw(st.sampled_from(LEVELS))
    if draw(st.integers(0, 5)) == 0:
        body["namespace"] = draw(st.sampled_from(NAMESPACES))
    if draw(st.integers(0, 5)) == 0:
        body["queue_name"] = draw(st.sampled_from(["hyperpod-ns-team-a-localqueue", "other-queue"]))
    return body


JOB_BODIES = st.one_of(_job(), _job(), _broken(_job(), most=1))  # a third broken


@st.composite
def _manifest(draw: Any) -> dict[str, Any]:
    name = draw(NAMES)
    labels = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "kueue.x-k8s.io/queue-name": st.sampled_from(
                    ["hyperpod-ns-team-a-localqueue", "hyperpod-ns-team-b-localqueue"]
                ),
                "kueue.x-k8s.io/priority-class": st.sampled_from(PRIORITIES),
            },
        )
    )
    annotations = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "kueue.x-k8s.io/podset-required-topology": st.sampled_from(LEVELS),
                "kueue.x-k8s.io/podset-preferred-topology": st.sampled_from(LEVELS),
            },
        )
    )
    pod = {"restartPolicy": "Never", "containers": draw(st.lists(_container(), min_size=1, max_size=2))}
    if draw(st.booleans()):
        pod["initContainers"] = draw(st.lists(_container(), min_size=1, max_size=1))
    if draw(st.booleans()):
        pod["nodeSelector"] = {"node.kubernetes.io/instance-type": draw(st.sampled_from(INSTANCE_TYPES))}
    metadata: dict[str, Any] = {"name": name, "labels": labels}
    if draw(st.booleans()):
        metadata["namespace"] = draw(st.sampled_from(NAMESPACES))
    spec: dict[str, Any] = {"template": {"metadata": {"annotations": annotations}, "spec": pod}}
    for field in ("parallelism", "completions"):
        if draw(st.booleans()):
            spec[field] = draw(st.integers(1, 64))
    if draw(st.booleans()):
        spec["suspend"] = draw(st.booleans())
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": spec}


MANIFEST_BODIES = _broken(
    st.fixed_dictionaries(
        {"manifest": _manifest()},
        optional={"team": st.sampled_from(TEAMS), "topology": _topology()},
    ),
    most=2,
)


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def _deep_manifest(depth: int) -> bytes:
    """A valid submission with a ``depth``-deep list in a field nobody reads."""
    pod = {"containers": [{"name": "m", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}
    pod["restartPolicy"] = "Never"  # a Job's pods must have one (the API server refuses it otherwise)
    pod["x-nested"] = _nested(depth)
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": f"deep-{depth}"}}
    job["spec"] = {"template": {"spec": pod}}
    return json.dumps({"manifest": job}).encode()


RAW_BODIES = st.one_of(
    st.binary(max_size=40),  # mostly not UTF-8
    st.sampled_from(
        [
            b'{"job_name": "nan", "image": "x", "accelerators": 1, "vcpu": NaN}',
            b'{"job_name": "inf", "image": "x", "accelerators": 1, "memory": Infinity}',
            b'{"job_name": "big", "image": "x", "accelerators": 1' + b"0" * 5000 + b"}",
            b"[" * 100_000,
            b'{"a":' * 20_000 + b"1" + b"}" * 20_000,
            b'{"manifest": {"apiVersion": "batch/v1", "kind": "Job", "spec": {"parallelism": -0.0}}}',
            b'\xef\xbb\xbf{"job_name": "bom", "image": "x", "accelerators": 1}',
            b'{"job_name": "dup", "job_name": "dup2", "image": "x", "accelerators": 1}',
            b"null",
            b'"a string"',
            b"",
            _deep_manifest(40),
            _deep_manifest(400),
            _deep_manifest(900),
        ]
    ),
)
CONTENT_TYPES = [
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=xyz",
    "multipart/form-data",
    "text/plain",
    "application/json; charset=latin-1",
    "application/xml",
]


def _rarely(strategy: st.SearchStrategy[Any], one_in: int) -> st.SearchStrategy[Any]:
    """``strategy`` once in ``one_in`` draws, else ``None`` (the simplest draws are ``None``)."""
    return st.sampled_from([False] * (one_in - 1) + [True]).flatmap(
        lambda pick: strategy if pick else st.just(None)
    )


def _variants(method: str, path: str) -> st.SearchStrategy[dict[str, Any]]:
    """What to pin on top of the generated case (``None`` = keep what schemathesis generated); only
    what applies to the operation, so an operation without inputs has one request per profile."""
    keep = st.just(None)
    pins: dict[str, st.SearchStrategy[Any]] = {}
    if "{team}" in path:  # generated (404s, 400s), or a real team and an existing job
        pins["team"] = st.one_of(keep, keep, st.sampled_from(["team-a", "team-a", "team-b", "team-c"]))
    if "{name}" in path:
        pins["name"] = st.one_of(keep, st.sampled_from(SEEDED))
    if (method, path) == ("GET", "/v1/jobs"):
        pins["query_team"] = st.one_of(keep, st.sampled_from(["team-a", "team-b", ""]))
    if method == "POST":
        # mostly ?dryRun=true, so the in-flight cap does not answer everything
        pins["dry_run"] = st.sampled_from([None, "true", "true", "true"])
        # schemathesis' body, or a plausible submission (a third of them broken somewhere)
        pins["body"] = st.one_of(keep, JOB_BODIES, MANIFEST_BODIES, MANIFEST_BODIES)
        # the body's team pinned to one the caller may (or may not) submit for
        pins["body_team"] = st.one_of(keep, keep, st.sampled_from(["team-a", "team-b"]))
        # now and then bytes that are not a JSON document at all, or another media type
        pins["raw_body"] = _rarely(RAW_BODIES, 10)
        pins["content_type"] = _rarely(st.sampled_from(CONTENT_TYPES), 15)
    return st.fixed_dictionaries(pins)


def _pin(case: Any, variant: dict[str, Any]) -> None:
    params = case.path_parameters
    if variant.get("team") is not None:
        params["team"] = variant["team"]
        if variant.get("name") is not None:
            params["name"] = variant["name"]
    if variant.get("query_team") is not None:
        case.query = {**(case.query or {}), "team": variant["query_team"]}
    if variant.get("body") is not None:
        case.body = variant["body"]
        case.media_type = "application/json"
    if variant.get("dry_run") is not None:
        case.query = {**(case.query or {}), "dryRun": variant["dry_run"]}
    if variant.get("body_team") is not None and isinstance(case.body, dict) and "job_name" in case.body:
        case.body = {**case.body, "team": variant["body_team"]}


def _has_inputs(op: Any) -> bool:
    definition = op.definition.raw
    return bool(definition.get("parameters") or definition.get("requestBody"))


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_fuzz(stack, schema, seeded, report, method, path, profile):
    op = schema[path][method.lower()]
    modes = [GenerationMode.POSITIVE] + ([GenerationMode.NEGATIVE] if _has_inputs(op) else [])
    cases = st.one_of(*(op.as_strategy(mode) for mode in modes))
    fuzzer = Fuzzer(stack, profile)

    @settings(
        max_examples=BUDGET[(method, path)],
        deadline=None,
        database=None,
        derandomize=not FULL,  # make test: the same requests every run; make hardening: new ones
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=cases, variant=_variants(method, path))
    def fuzz(case: Any, variant: dict[str, Any]) -> None:
        _pin(case, variant)
        fresh = fuzzer.send(case, raw_body=variant.get("raw_body"), content_type=variant.get("content_type"))
        assume(fresh)  # a repeat is not an example: the budget counts distinct requests

    try:
        fuzz()
    finally:
        sent = fuzzer.sent
        TOTALS["requests"] += sent
        TOTALS[f"{method} {path}"] += sent
        report.add(
            "fuzz",
            requests=sent,
            status_5xx=fuzzer.status_5xx,
            bad_error_shape=fuzzer.bad_shape,
            gateway_403=fuzzer.gateway_403,
            unsendable=fuzzer.unsendable,
            **{f"status_{code}": n for code, n in sorted(fuzzer.statuses.items())},
            **{f"code_{code}": n for code, n in sorted(fuzzer.codes.items())},
        )
    assert sent > 0
    assert not fuzzer.failures, f"{len(fuzzer.failures)} bad answers:\n" + "\n".join(fuzzer.failures[:20])


def test_fuzz_volume(report):
    """Every route was fuzzed, and the run has the size it claims (~200 bounded, 1,000+ full)."""
    ran = {key for key in TOTALS if key != "requests"}
    if len(ran) < len(OPERATIONS):
        pytest.skip("only part of the module ran (-k?)")
    report.add("fuzz", routes=len(ran))
    assert ran == {f"{m} {p}" for m, p in OPERATIONS}
    assert TOTALS["requests"] >= scale(150, 1000), TOTALS


def test_error_shape_check_tells_apart():
    """The shape check itself: the API's errors pass, API Gateway's and Powertools' bodies do not."""

    def resp(body: Any) -> requests.Response:
        r = requests.Response()
        r.status_code = 400
        r._content = (body if isinstance(body, str) else json.dumps(body)).encode()
        return r

    assert error_shape_problem(resp({"error": {"code": "NOT_FOUND", "message": "no", "details": {}}})) is None
    assert error_shape_problem(resp({"error": {"code": "FORBIDDEN", "message": "no"}})) is None
    assert error_shape_problem(resp({"message": "Missing Authentication Token"}))
    assert error_shape_problem(resp({"statusCode": 404, "message": "Not found"}))
    assert error_shape_problem(resp({"error": {"code": "X", "message": "m", "details": []}}))
    assert error_shape_problem(resp({"error": {"code": 400, "message": "m"}}))
    assert error_shape_problem(resp("<html>"))
    assert re.search("not JSON", error_shape_problem(resp("<html>")) or "")


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/teams/%C3%92%16"),  # found by the fuzzer: a control character in {team}
        ("GET", "/v1/jobs/team-a/%C2%B0%F2%B9%89%83"),
        ("DELETE", "/v1/jobs/%0D/x"),
    ],
)
def test_unrouted_requests_get_the_error_shape(stack, method, path):
    """Regression: a path no route matches got Powertools' ``{"statusCode": 404, "message": "Not
    found"}``; it is a 404 ``NOT_FOUND`` in the API's error shape. (These reach the function: API
    Gateway's ``{team}`` takes any segment; the resolver's patterns refuse control characters.)"""
    resp = call(stack, method, path)
    assert resp.status_code == 404, resp.text
    assert error_shape_problem(resp) is None, resp.text
    assert resp.json()["error"]["code"] == "NOT_FOUND"


@pytest.mark.parametrize(("method", "path"), [("GET", "/v1/no-such-route"), ("PUT", "/v1/jobs")])
def test_a_route_or_method_the_api_does_not_deploy_never_reaches_the_function(stack, method, path):
    """API Gateway answers a resource or method the REST API lacks itself: 403 ``Missing
    Authentication Token`` (MissingAuthenticationTokenException), signed or not, as the deployed API
    does; the local gateway serves the deployed routes only."""
    resp = call(stack, method, path)
    assert resp.status_code == 403, resp.text
    assert resp.json() == {"message": "Missing Authentication Token"}
    assert resp.headers["x-amzn-ErrorType"].startswith("MissingAuthenticationTokenException")


# -- regressions: what the fuzzer (and reading the code it pointed at) found -------------------------------
def _manifest_with(container: Any = None, **changes: Any) -> dict[str, Any]:
    """A valid submission (team-a, one container asking 1 cpu) with ``changes`` applied at dotted paths."""
    job: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "regression", "labels": {}},
        "spec": {
            "template": {
                "metadata": {},
                "spec": {
                    "containers": [
                        container
                        if container is not None
                        else {"name": "m", "image": "x", "resources": {"requests": {"cpu": "1"}}}
                    ]
                },
            }
        },
    }
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        at = job
        for step in parents:
            at = at[step]
        at[last] = value
    return {"manifest": job}


def _requests(**quantities: Any) -> dict[str, Any]:
    return {"name": "m", "image": "x", "resources": {"requests": quantities}}


CONTAINER = "manifest.spec.template.spec.containers[0]"
REGRESSIONS = {
    # found by the fuzzer: parse_quantity got a JSON object (TypeError: unhashable type) -> 502
    "quantity-object": (_manifest_with(_requests(cpu={"a": 1})), f"{CONTAINER}.resources.requests.cpu"),
    "quantity-null": (_manifest_with(_requests(cpu=None)), f"{CONTAINER}.resources.requests.cpu"),
    "quantity-list": (_manifest_with(_requests(memory=[1])), f"{CONTAINER}.resources.requests.memory"),
    # decimal.Overflow raising 10 to a huge power -> 502
    "quantity-overflow": (
        _manifest_with(_requests(cpu="1e999999999")),
        f"{CONTAINER}.resources.requests.cpu",
    ),
    # a 5,000-digit count: int -> str in the 422's details fails (Python's 4,300-digit limit) -> 502
    "quantity-huge": (
        _manifest_with(_requests(**{"nvidia.com/gpu": "1e5000"})),
        f"{CONTAINER}.resources.requests.nvidia.com/gpu",
    ),
    # init containers were not checked, then parsed: ValueError -> 502
    "init-container-quantity": (
        _manifest_with(spec__template__spec__initContainers=[_requests(cpu="abc")]),
        "manifest.spec.template.spec.initContainers[0].resources.requests.cpu",
    ),
    "container-not-object": (_manifest_with(5), CONTAINER),
    # "requests": null next to limits: None.setdefault -> 502
    "requests-null": (
        _manifest_with({"name": "m", "image": "x", "resources": {"requests": None, "limits": {"cpu": "1"}}}),
        None,
    ),
    # "labels": null accepted, then None["..."] = ... while completing the manifest -> 502
    "labels-null": (_manifest_with(metadata__labels=None), None),
    "template-metadata-string": (
        _manifest_with(spec__template__metadata="x"),
        "manifest.spec.template.metadata",
    ),
    "annotations-string": (
        _manifest_with(spec__template__metadata={"annotations": "kueue.x-k8s.io/podset-required-topology"}),
        "manifest.spec.template.metadata.annotations",
    ),
    "node-selector-list": (
        _manifest_with(spec__template__spec__nodeSelector=["x"]),
        "manifest.spec.template.spec.nodeSelector",
    ),
}


@pytest.mark.parametrize(("body", "field"), list(REGRESSIONS.values()), ids=list(REGRESSIONS))
def test_malformed_manifests_are_400_not_5xx(stack, body, field):
    resp = call(stack, "POST", "/v1/jobs?dryRun=true", body=body)
    if field is None:  # null where an object may be absent: accepted as absent
        assert resp.status_code == 200, resp.text
        return
    assert resp.status_code == 400, resp.text
    assert error_shape_problem(resp) is None, resp.text
    err = resp.json()["error"]
    assert err["code"] == "VALIDATION_ERROR" and err["details"]["field"] == field, err


RAW_REGRESSIONS = {
    # found by the fuzzer: base64-decoded body that is not UTF-8 -> UnicodeDecodeError -> 502
    "not-utf8": (b'\xff\xfe{"job_name": "x"}', "application/json", 400),
    # json.loads' ValueError (integer over 4,300 digits) and RecursionError escaped the resolver -> 502
    "integer-5000-digits": (
        b'{"job_name": "a", "image": "x", "accelerators": 1' + b"0" * 5000 + b"}",
        None,
        400,
    ),
    "nested-100000": (b"[" * 100_000, None, 400),
    # not JSON, refused as such now (they were 400s already, from the models)
    "nan": (b'{"job_name": "a", "image": "x", "vcpu": NaN}', None, 400),
    "infinity": (b'{"job_name": "a", "image": "x", "memory": Infinity}', None, 400),
    # found by the fuzzer: a 400-deep value; pydantic's serializer gives up -> 502
    "nested-400-in-manifest": (_deep_manifest(400), None, 400),
    "nested-40-in-manifest": (_deep_manifest(40), None, 400),  # the ledger (DynamoDB) nests 32 at most
    # found by the fuzzer: the resolver parses multipart itself and fails -> 502; or answers 415 in its
    # own shape ({"statusCode": 415, "detail": ...})
    "multipart-no-boundary": (b"{}", "multipart/form-data", 415),
    "multipart-bom": (b"\xef\xbb\xbf--xyz--", "multipart/form-data; boundary=xyz", 415),
    "text-plain": (b"{}", "text/plain", 415),
    "form": (b"job_name=a", "application/x-www-form-urlencoded", 415),
}


@pytest.mark.parametrize(
    ("raw", "content_type", "status"), list(RAW_REGRESSIONS.values()), ids=list(RAW_REGRESSIONS)
)
def test_bodies_that_are_not_json_documents_are_4xx_not_5xx(stack, raw, content_type, status):
    from topogov_cli.sigv4 import signed_request

    creds = credentials_for_profile("topogov-team-a", str(stack.credentials))
    resp = signed_request(
        "POST",
        stack.api.url + "/v1/jobs?dryRun=true",
        credentials=creds,
        region=REGION,
        body=raw,
        headers={"Content-Type": content_type or "application/json"},
    )
    assert resp.status_code == status, resp.text
    assert error_shape_problem(resp) is None, resp.text
    assert resp.json()["error"]["code"] == "VALIDATION_ERROR"


def test_a_manifest_nested_as_deep_as_real_ones_is_accepted(stack):
    """The depth limit leaves room for real manifests (affinity terms nest ~15 levels)."""
    resp = call(stack, "POST", "/v1/jobs", body=json.loads(_deep_manifest(12)))
    assert resp.status_code == 201, resp.text
