"""Faults (issue #7, item 4), injected at the emulators over HTTP, never into the code under test:
EC2 throttling storms; Kubernetes 500s, 429s and timeouts for a fraction of calls; DynamoDB
throttling, conflicts and lost answers; the Job create failing after the charge; the reconcile
process killed mid-pass. After each: labels equal EC2's answer, the ledger equals the cluster.

Figures per fault kind: faults injected (the emulators' own hit counts) and items lost (must be 0).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

from topogov.adapters.ec2 import Pacer, TopologyClient, ec2_client
from topogov.adapters.kube import KubeHttp, KubeNodes
from topogov.adapters.kube_auth import kubeconfig_api_client
from topogov.adapters.snapshot_store import S3SnapshotStore
from topogov.logic.labeler import Labeler, PassOptions
from topogov_local import events, fleet
from topogov_local.lambda_context import LocalContext

from .conftest import call, scale
from .invariants import consistent, items_lost, ledger_vs_cluster, mislabelled_nodes


def _http(url: str, method: str = "GET", body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read() or b"null")


def kube_fault(stack, **rule) -> int:
    return stack.kube().request("POST", "/_emulator/faults", body=rule).body["id"]


def kube_fault_hits(stack) -> int:
    return sum(f["hits"] for f in stack.kube().request("GET", "/_emulator/faults").body["rules"])


def clear_kube_faults(stack) -> None:
    stack.kube().request("DELETE", "/_emulator/faults")


def dynamo_fault(stack, **rule) -> None:
    _http(f"{stack.aws_url}/_topogov/dynamodb/faults", "POST", rule)


def dynamo_hits_and_clear(stack) -> int:
    hits = sum(r["hits"] for r in _http(f"{stack.aws_url}/_topogov/dynamodb/faults")["rules"])
    _http(f"{stack.aws_url}/_topogov/dynamodb/faults", "DELETE")
    return hits


def set_ec2_rate(stack, rate: float, burst: float) -> None:
    _http(f"{stack.aws_url}/_topogov/ec2/config", "POST", {"rate": rate, "burst": burst})


def full_pass():
    from topogov.handlers.reconcile import handler

    return handler(events.scheduled_event(), LocalContext())


def labeler(stack, *, timeout_s: float = 30.0, ec2_rate: float = 1000.0, ec2_attempts: int = 5) -> Labeler:
    """A labeler as the reconcile function builds it, with its knobs set for the fault at hand."""
    import boto3

    session = boto3.session.Session(region_name="us-east-1")
    http = KubeHttp(kubeconfig_api_client(str(stack.kubeconfig)), backoff_base_s=0.02, timeout_s=timeout_s)
    ec2 = TopologyClient(ec2_client(session, max_attempts=ec2_attempts), Pacer(ec2_rate))
    from topogov.bootstrap import retrying

    store = S3SnapshotStore(retrying(session, "s3"), stack.output("SnapshotBucket"))
    return Labeler(KubeNodes(http), ec2, store)


def drift_labels(stack, n: int) -> None:
    kube = stack.kube()
    names = sorted(o["metadata"]["name"] for o in kube.request("GET", "/api/v1/nodes").body["items"])
    for name in [x for x in names if x.startswith("i-")][:n]:
        kube.request(
            "PATCH",
            f"/api/v1/nodes/{name}",
            body={"metadata": {"labels": {"topology.k8s.aws/network-node-layer-2": "nn-drifted"}}},
            content_type="application/merge-patch+json",
        )


def converge(max_passes: int = 5) -> int:
    """Full passes until one completes with nothing left to patch; how many it took."""
    for i in range(1, max_passes + 1):
        s = full_pass()
        if s["complete"] and s["patched"] == 0:
            return i
    raise AssertionError("did not converge")


def test_an_ec2_throttling_storm_is_absorbed_and_the_labels_converge(stack, report):
    new = stack.add_instances([fleet.FleetGroup("p5.48xlarge", scale(150, 400))])
    # The storm: EC2's bucket at 0.5 request/s while the labeler (misconfigured) fires at 50/s.
    set_ec2_rate(stack, 0.5, 1)
    throttled0 = _http(f"{stack.aws_url}/_topogov/ec2/config")["throttled"]
    storm = labeler(stack, ec2_rate=50, ec2_attempts=2)
    summaries = []
    try:
        for _ in range(scale(2, 4)):
            summaries.append(storm.run(PassOptions()))
        throttled = _http(f"{stack.aws_url}/_topogov/ec2/config")["throttled"] - throttled0
    finally:
        set_ec2_rate(stack, 1000, 1000)
    extra = converge()
    wrong = mislabelled_nodes(stack)
    report.add(
        "faults.ec2_throttling", instances=len(new), storm_passes=len(summaries), passes_to_converge=extra
    )
    report.add("faults.ec2_throttling", injected=throttled, items_lost=len(wrong))
    assert throttled > 0 and not summaries[0].complete  # the storm did bite
    assert wrong == []


def test_kubernetes_500s_429s_and_timeouts_for_a_fraction_of_calls(stack, report):
    drift_labels(stack, scale(20, 60))
    stack.add_instances([fleet.FleetGroup("p5.48xlarge", scale(20, 100))])
    kube_fault(stack, method="PATCH", path="^/api/v1/nodes/", status=500, probability=0.2, times=-1)
    kube_fault(
        stack, method="GET", path="^/api/v1/nodes$", status=429, probability=0.3, times=-1, retry_after=0
    )
    kube_fault(stack, method="PATCH", path="^/api/v1/nodes/", delay_s=1.5, probability=0.05, times=-1)
    flaky = labeler(stack, timeout_s=1.0)
    passes = 0
    try:
        for _ in range(scale(3, 6)):
            flaky.run(PassOptions())
            passes += 1
        hits = kube_fault_hits(stack)
    finally:
        clear_kube_faults(stack)
    extra = converge()
    wrong = mislabelled_nodes(stack)
    report.add("faults.k8s_500_429_timeout", injected=hits, passes=passes + extra, items_lost=len(wrong))
    assert hits > 0 and wrong == []

    # The API under the same weather: creates fail for a fraction; every failure is rolled back.
    kube_fault(stack, method="POST", path="/jobs$", status=500, probability=0.3, times=-1)
    # past the API's 10 s Kubernetes timeout: the create lands after the API gave up and rolled back
    kube_fault(stack, method="POST", path="/jobs$", delay_s=11, probability=0.1, times=scale(1, 5))
    codes: dict[int, int] = {}
    try:
        for i in range(scale(20, 100)):
            body = {"job_name": f"k8s-flaky-{i}", "image": "x", "accelerators": 1, "replica_count": 1}
            code = call(stack, "POST", "/v1/jobs", "topogov-team-a", body).status_code
            codes[code] = codes.get(code, 0) + 1
        hits = kube_fault_hits(stack)
    finally:
        clear_kube_faults(stack)
    time.sleep(2)  # the last late create lands
    sync = full_pass()["ledger"]
    found = ledger_vs_cluster(stack)
    report.add("faults.k8s_create", late_creates_removed=sync["orphans_deleted"])
    report.add(
        "faults.k8s_create", injected=hits, submissions=sum(codes.values()), items_lost=items_lost(found)
    )
    assert set(codes) <= {201, 503}, codes
    assert consistent(found), found


def test_dynamodb_throttling_conflicts_and_lost_answers(stack, report):
    dynamo_fault(
        stack, action="TransactWriteItems", code="ProvisionedThroughputExceededException", probability=0.3
    )
    dynamo_fault(stack, action="TransactWriteItems", code="TransactionConflict", probability=0.2)
    dynamo_fault(stack, action="TransactWriteItems", code="InternalServerError", probability=0.15, after=True)
    dynamo_fault(stack, action="UpdateItem", code="ThrottlingException", probability=0.3)
    dynamo_fault(stack, action="GetItem", code="InternalServerError", probability=0.1)
    codes: dict[int, int] = {}
    try:
        for i in range(scale(30, 150)):
            body = {"job_name": f"ddb-{i}", "image": "x", "accelerators": 1, "replica_count": 1}
            code = call(stack, "POST", "/v1/jobs", "topogov-team-b", body).status_code
            codes[code] = codes.get(code, 0) + 1
            if i % 3 == 0:
                code = call(stack, "DELETE", f"/v1/jobs/team-b/ddb-{i}", "topogov-team-b").status_code
                codes[code] = codes.get(code, 0) + 1
    finally:
        hits = dynamo_hits_and_clear(stack)
    # A submission whose rollback itself failed leaves its charge reserved and no Job: the pass
    # releases such a charge once it is older than TOPOGOV_STALE_RESERVATION_S (300 s; 0 here, which
    # is safe: a submission still creating its Job then finds itself cancelled and removes the Job).
    os.environ["TOPOGOV_STALE_RESERVATION_S"] = "0"
    try:
        sync = full_pass()["ledger"]
    finally:
        del os.environ["TOPOGOV_STALE_RESERVATION_S"]
    report.add(
        "faults.dynamodb", abandoned_released=sync["released_abandoned"], confirmed_late=sync["confirmed"]
    )
    found = ledger_vs_cluster(stack)
    report.add("faults.dynamodb", injected=hits, requests=sum(codes.values()), items_lost=items_lost(found))
    assert hits > 0
    assert set(codes) <= {200, 201, 404, 409, 429, 503}, codes
    assert consistent(found), found


def test_the_create_failing_after_the_charge_is_rolled_back(stack, report):
    before = call(stack, "GET", "/v1/teams/team-a").json()["in_flight"]
    kube_fault(stack, method="POST", path="/jobs$", status=500, times=-1)
    n = scale(10, 50)
    try:
        codes = [
            call(
                stack,
                "POST",
                "/v1/jobs",
                body={"job_name": f"rollback-{i}", "image": "x", "accelerators": 8, "replica_count": 2},
            ).status_code
            for i in range(n)
        ]
        hits = kube_fault_hits(stack)
    finally:
        clear_kube_faults(stack)
    after = call(stack, "GET", "/v1/teams/team-a").json()["in_flight"]
    found = ledger_vs_cluster(stack)
    records = [
        j
        for j in call(stack, "GET", "/v1/jobs?team=team-a").json()["jobs"]
        if j["name"].startswith("rollback-")
    ]
    report.add("faults.create_after_charge", injected=hits, items_lost=items_lost(found) + len(records))
    assert codes == [503] * n and after == before and records == []
    assert consistent(found), found


def test_a_pass_killed_mid_way_is_finished_by_the_next(stack, report):
    kills = scale(1, 3)
    lost = 0
    for k in range(kills):
        drift_labels(stack, 40)
        stack.add_instances([fleet.FleetGroup("p5.48xlarge", 10)])
        kube_fault(stack, method="PATCH", path="^/api/v1/nodes/", delay_s=0.1, times=-1)
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        code = (
            "from topogov.handlers.reconcile import handler\n"
            "from topogov_local import events\n"
            "from topogov_local.lambda_context import LocalContext\n"
            "handler(events.scheduled_event(), LocalContext())\n"
        )
        proc = subprocess.Popen([sys.executable, "-c", code], env=env, start_new_session=True)
        try:
            deadline = time.monotonic() + 30
            patched = 0
            while time.monotonic() < deadline and patched < 5 + 5 * k:  # kill it a few patches in
                patched = stack.kube().request("GET", "/_emulator/requests").body.get("PATCH nodes", 0)
                time.sleep(0.05)
        finally:  # killed however the loop ended: a failing test leaves no pass running
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
            clear_kube_faults(stack)
            stack.kube().request("DELETE", "/_emulator/requests")
        assert proc.returncode == -signal.SIGKILL
        converge()
        lost += len(mislabelled_nodes(stack))
    found = ledger_vs_cluster(stack)
    report.add("faults.killed_mid_pass", kills=kills, items_lost=lost + items_lost(found))
    assert lost == 0 and consistent(found), found
