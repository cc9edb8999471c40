"""Escape attempts (issue #7, item 5): manifests that try to leave the team's lane. Every one is
refused with a 4xx whose error names the field, and nothing is created or charged — checked in the
cluster and the ledger, not in the answer alone."""

from __future__ import annotations

import copy
import json

import pytest

from topogov_local.aws_example import AWS_EXAMPLE

from .conftest import call
from .invariants import consistent, ledger_vs_cluster

NS = "hyperpod-ns-team-a"


def manifest(name: str, **changes) -> dict:
    m = copy.deepcopy(AWS_EXAMPLE)
    m["metadata"]["name"] = name
    m["spec"]["template"]["metadata"]["labels"]["job-name"] = name  # the API server checks it is the Job's
    for path, value in changes.items():
        target = m
        keys = path.split("__")
        for k in keys[:-1]:
            target = target.setdefault(k, {})
        target[keys[-1]] = value
    return m


TEMPLATE_SPEC = "spec__template__spec__"


class Raw(str):
    """A JSON text sent as is (json.dumps cannot write 5,000 levels: it recurses)."""


def nested(depth: int) -> Raw:
    return Raw('{"a":' * depth + "{}" + "}" * depth)


ATTEMPTS = [
    # (id, body, expected status, field named in error.details.field (prefix))
    (
        "another-namespace",
        {"manifest": manifest("esc-ns", metadata__namespace="hyperpod-ns-team-b")},
        403,  # the namespace of a team the caller is no principal of
        "manifest.metadata.namespace",
    ),
    (
        "another-teams-queue",
        {
            "manifest": manifest(
                "esc-queue",
                metadata__labels={"kueue.x-k8s.io/queue-name": "hyperpod-ns-team-b-localqueue"},
            )
        },
        400,
        "manifest.metadata.labels.kueue.x-k8s.io/queue-name",
    ),
    (
        "suspend-false",
        {"manifest": manifest("esc-suspend", spec__suspend=False)},
        400,
        "manifest.spec.suspend",
    ),
    (
        "label-value-not-a-label-value",
        {"manifest": manifest("esc-label", metadata__labels={"team": "a b/c"})},
        400,
        "manifest.metadata.labels.team",
    ),
    (
        "label-value-too-long",
        {"manifest": manifest("esc-label-long", metadata__labels={"team": "x" * 64})},
        400,
        "manifest.metadata.labels.team",
    ),
    (
        "pod-label-value-invalid",
        {"manifest": manifest("esc-pod-label", spec__template__metadata__labels={"job-name": "-bad-"})},
        400,
        "manifest.spec.template.metadata.labels.job-name",
    ),
    (
        "pinned-to-a-node",
        {"manifest": manifest("esc-nodename", **{TEMPLATE_SPEC + "nodeName": "i-0123.ec2.internal"})},
        400,
        "manifest.spec.template.spec.nodeName",
    ),
    (
        "scheduler-priority-class",
        {"manifest": manifest("esc-pc", **{TEMPLATE_SPEC + "priorityClassName": "system-cluster-critical"})},
        400,
        "manifest.spec.template.spec.priorityClassName",
    ),
    (
        "managed-by-another-controller",
        {"manifest": manifest("esc-managed", spec__managedBy="example.com/not-the-job-controller")},
        400,
        "manifest.spec.managedBy",
    ),
    ("deeply-nested-json", Raw('{"manifest":' + nested(5000) + "}"), 400, None),
    (
        "deeply-nested-inside-a-job",
        Raw(
            json.dumps({"manifest": manifest("esc-deep", metadata__annotations={"x": "@"})}).replace(
                '"@"', nested(3000)
            )
        ),
        400,
        None,
    ),
    (
        "oversized-json",
        {"manifest": manifest("esc-big", metadata__annotations={"x": "y" * 1_100_000})},
        413,
        None,
    ),
]


def snapshot_of(stack) -> tuple:
    state = []
    for team in ("team-a", "team-b"):
        ns = f"hyperpod-ns-{team}"
        jobs = stack.kube().request("GET", f"/apis/batch/v1/namespaces/{ns}/jobs").body["items"]
        in_flight = call(stack, "GET", f"/v1/teams/{team}", "topogov-admin").json()["in_flight"]
        state.append((sorted(j["metadata"]["name"] for j in jobs), in_flight))
    return tuple(state)


def send(stack, profile: str, body: dict | Raw):
    from topogov_cli.sigv4 import credentials_for_profile, signed_request

    return signed_request(
        "POST",
        stack.api.url + "/v1/jobs",
        credentials=credentials_for_profile(profile, str(stack.credentials)),
        region="us-east-1",
        body=body if isinstance(body, Raw) else json.dumps(body),
        headers={"Content-Type": "application/json"},
    )


def check_refused(stack, report, resp, status, field, before) -> None:
    refused = 400 <= resp.status_code < 500
    report.add("escape", attempts=1, refused=int(refused))
    assert refused, (resp.status_code, resp.text[:300])
    assert resp.status_code == status, resp.text[:300]
    error = resp.json()["error"]
    assert error["code"] and error["message"]
    if field is not None:
        assert (error.get("details") or {}).get("field", "").startswith(field), error
    assert snapshot_of(stack) == before
    assert consistent(ledger_vs_cluster(stack))


@pytest.mark.parametrize(("body", "status", "field"), [a[1:] for a in ATTEMPTS], ids=[a[0] for a in ATTEMPTS])
def test_an_escape_attempt_is_refused_naming_the_field_and_leaves_nothing(stack, report, body, status, field):
    before = snapshot_of(stack)
    check_refused(stack, report, send(stack, "topogov-team-a", body), status, field, before)


def test_a_priority_the_team_may_not_use_is_refused(stack, report):
    before = snapshot_of(stack)
    m = manifest("esc-prio")
    m["metadata"]["namespace"] = "hyperpod-ns-team-b"
    m["metadata"]["labels"] = {
        "kueue.x-k8s.io/queue-name": "hyperpod-ns-team-b-localqueue",
        "kueue.x-k8s.io/priority-class": "inference-priority",  # team-b's policy does not allow it
    }
    resp = send(stack, "topogov-team-b", {"manifest": m})
    check_refused(stack, report, resp, 422, None, before)
    assert resp.json()["error"]["code"] == "PRIORITY_NOT_ALLOWED"


def test_a_manifest_without_the_queue_label_is_put_in_the_teams_queue(stack, report):
    m = manifest("esc-no-queue")
    del m["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    resp = call(stack, "POST", "/v1/jobs", body={"manifest": m})
    assert resp.status_code == 201, resp.text
    job = stack.kube().request("GET", f"/apis/batch/v1/namespaces/{NS}/jobs/esc-no-queue").body
    labels = job["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "hyperpod-ns-team-a-localqueue"
    assert resp.json()["job"]["spec"]["suspend"] is True  # created suspended (Kueue unsuspends it)
    report.add("escape", attempts=1, refused=1)  # not refused, but governed: the queue is the team's
