"""The governance API end to end: SigV4-signed REST calls -> local API Gateway (IAM auth emulated)
-> the api Lambda handler -> DynamoDB (moto) and the Kubernetes API. Nothing is patched."""

from __future__ import annotations

import concurrent.futures as cf
import copy
import json
import re
import shutil
import subprocess

import pytest

from tests.stacks import hold_queue, node_labels, pods_of, shared_stack, wait_until
from topogov.adapters.kube_jobs import KubeJobs
from topogov_cli.sigv4 import credentials_for_profile, signed_request
from topogov_local import events
from topogov_local.aws_example import AWS_EXAMPLE
from topogov_local.lambda_context import LocalContext

OTHER_QUEUE = {"kueue.x-k8s.io/queue-name": "hyperpod-ns-team-b-localqueue"}


@pytest.fixture(scope="module")
def stack(shared_stacks):
    with shared_stack(shared_stacks, "api") as s:
        yield s


def call(stack, method, path, profile="topogov-team-a", body=None):
    creds = credentials_for_profile(profile, str(stack.credentials))
    return signed_request(method, stack.api.url + path, credentials=creds, region="us-east-1", json_body=body)


def job(name, **kw):
    return {
        "job_name": name,
        "image": "pytorch:latest",
        "accelerators": 8,
        "efa": 32,
        "replica_count": 4,
        **kw,
    }


def test_aws_example_job_is_accepted_as_is(stack):
    resp = call(stack, "POST", "/v1/jobs", body={"manifest": AWS_EXAMPLE})
    assert resp.status_code == 201, resp.text
    body = resp.json()
    assert body["decision"]["priority_class"] == "inference-priority"
    assert body["decision"]["topology"]["mode"] == "required"
    created = (
        stack.kube().request("GET", "/apis/batch/v1/namespaces/hyperpod-ns-team-a/jobs/test-tas-job").body
    )
    template = created["spec"]["template"]
    assert body["job"]["spec"]["suspend"] is True and created["spec"]["parallelism"] == 10
    assert template["metadata"]["annotations"]["kueue.x-k8s.io/podset-required-topology"] == (
        "topology.k8s.aws/network-node-layer-3"
    )
    assert template["spec"]["containers"][0]["image"] == "public.ecr.aws/docker/library/alpine:latest"
    # Kueue admits it, its 10 pods land on nodes of one layer-3 domain and run (AWS's verification
    # step: kubectl get pods -o wide)
    record = wait_until(
        lambda: (r := call(stack, "GET", "/v1/jobs/team-a/test-tas-job").json())["status"] == "Running" and r,
        "test-tas-job runs",
    )
    assert record["why_pending"] is None
    pods = wait_until(
        lambda: (
            (p := pods_of(stack, "hyperpod-ns-team-a", "test-tas-job"))
            and len(p) == 10
            and all(x["status"].get("phase") == "Running" for x in p)
            and p
        ),
        "its 10 pods run",
    )
    labels = node_labels(stack)
    domains = {labels[p["spec"]["nodeName"]]["topology.k8s.aws/network-node-layer-3"] for p in pods}
    assert len(domains) == 1, domains
    # and GET /v1/jobs/... shows where it landed: the same nodes, the one layer-3 domain, Kueue's events
    view = call(stack, "GET", "/v1/jobs/team-a/test-tas-job").json()
    placement = view["placement"]
    assert placement["placed"] == 10 and placement["phases"] == {"Running": 10}
    assert placement["tightest"] == {"level": "layer-3", "domain": domains.pop()}
    assert {r["node"]: r["pods"] for r in placement["by_node"]} == {
        n: sum(p["spec"]["nodeName"] == n for p in pods) for n in {p["spec"]["nodeName"] for p in pods}
    }
    whats = [e["what"] for e in view["events"]]
    assert whats[0] == "submitted" and {"kueue: QuotaReserved", "kueue: Admitted"} <= set(whats)


def test_high_level_required_layer3_that_fits(stack):
    resp = call(stack, "POST", "/v1/jobs", body=job("fits-l3", required_topology="layer-3"))
    assert resp.status_code == 201, resp.text
    d = resp.json()["decision"]
    assert d["topology"] == {
        **d["topology"],
        "mode": "required",
        "level": "topology.k8s.aws/network-node-layer-3",
    }
    manifest = resp.json()["job"]
    assert manifest["spec"]["completionMode"] == "Indexed" and manifest["spec"]["parallelism"] == 4
    labels = manifest["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "hyperpod-ns-team-a-localqueue"
    assert labels["kueue.x-k8s.io/priority-class"]


def test_a_required_topology_that_can_never_fit_is_422_with_what_would(stack):
    resp = call(
        stack,
        "POST",
        "/v1/jobs?dryRun=true",
        body=job("never-l3", replica_count=8, required_topology="layer-3"),
    )
    assert resp.status_code == 422, resp.text
    err = resp.json()["error"]
    assert err["code"] == "TOPOLOGY_INFEASIBLE"
    assert err["details"]["largest_domain_holds"] == 4
    assert err["details"]["tightest_level_that_holds"] == "topology.k8s.aws/network-node-layer-2"


def test_a_level_the_flavor_has_not_is_422_naming_the_levels_it_has(stack):
    """Kueue skips a flavor whose Topology lacks the asked level (kueue v0.17.0
    pkg/scheduler/flavorassigner/tas_flavorassigner.go, "does not contain the requested level"), for
    required and preferred alike; p5 nodes carry three network layers, so a p5 job at layer-4 would
    wait forever. Without an instance type the job can get the p6-b200 flavor, which has layer-4."""
    for ask in ({"required_topology": "layer-4"}, {"preferred_topology": "layer-4"}):
        resp = call(
            stack,
            "POST",
            "/v1/jobs?dryRun=true",
            body=job("p5-l4", replica_count=2, instance_type="p5.48xlarge", **ask),
        )
        assert resp.status_code == 422, resp.text
        err = resp.json()["error"]
        assert err["code"] == "TOPOLOGY_INFEASIBLE" and err["details"]["field"] == "topology.level"
        assert err["details"]["levels"] == {"p5.48xlarge": ["layer-1", "layer-2", "layer-3", "hostname"]}
        assert "p5.48xlarge nodes have layer-1, layer-2, layer-3, hostname" in err["message"]
    anywhere = call(
        stack,
        "POST",
        "/v1/jobs?dryRun=true",
        body=job("any-l4", replica_count=2, efa=8, required_topology="layer-4"),
    )
    assert anywhere.status_code == 200, anywhere.text
    assert anywhere.json()["decision"]["topology"]["level"] == "topology.k8s.aws/network-node-layer-4"


def test_a_priority_not_allowed_is_422(stack):
    resp = call(
        stack, "POST", "/v1/jobs", profile="topogov-team-b", body=job("prio", priority="inference-priority")
    )
    assert resp.status_code == 422
    err = resp.json()["error"]
    assert err["code"] == "PRIORITY_NOT_ALLOWED" and "inference-priority" not in err["details"]["allowed"]


def test_dry_run_explains_and_creates_nothing(stack):
    resp = call(stack, "POST", "/v1/jobs?dryRun=true", body=job("dry", topology={"mode": "auto"}))
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["dry_run"] and not body["created"]
    assert (
        body["decision"]["topology"]["mode"] == "preferred"
        and "auto:" in body["decision"]["topology"]["reason"]
    )
    assert stack.kube().request("GET", "/apis/batch/v1/namespaces/hyperpod-ns-team-a/jobs/dry").status == 404
    assert call(stack, "GET", "/v1/jobs/team-a/dry").status_code == 404


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"job_name": "Bad_Name", "image": "x", "accelerators": 1}, "job_name"),
        ({"job_name": "ok", "image": "x", "accelerators": "8"}, "accelerators"),
        ({"job_name": "ok", "image": "x", "accelerators": 1, "colour": "red"}, "colour"),
        ({"job_name": "ok", "image": "x", "accelerators": 1, "replica_count": 0}, "replica_count"),
        ({"job_name": "ok", "image": "x", "accelerators": 1, "required_topology": "rack"}, "topology.level"),
        (
            {
                "job_name": "ok",
                "image": "x",
                "accelerators": 1,
                "topology": {"mode": "required", "level": "layer-3", "fallbackAfter": "soon"},
            },
            "topology",
        ),
        ({"job_name": "ok", "image": "x", "accelerators": 10**9}, "accelerators"),
        ({"job_name": "näme", "image": "x", "accelerators": 1}, "job_name"),
        (
            {
                "manifest": {
                    **AWS_EXAMPLE,
                    "metadata": {**AWS_EXAMPLE["metadata"], "namespace": "hyperpod-ns-team-b"},
                }
            },
            "namespace",
        ),
        (
            {"manifest": {**AWS_EXAMPLE, "metadata": {**AWS_EXAMPLE["metadata"], "labels": OTHER_QUEUE}}},
            "queue-name",
        ),
        ({"manifest": {**AWS_EXAMPLE, "spec": {**AWS_EXAMPLE["spec"], "suspend": False}}}, "suspend"),
        (
            {"manifest": {**AWS_EXAMPLE, "metadata": {**AWS_EXAMPLE["metadata"], "labels": {"team": "a b"}}}},
            "labels.team",
        ),
    ],
)
def test_bad_input_is_a_400_naming_the_field_and_creates_nothing(stack, body, field):
    def jobs():  # their names: Kueue and the job controller keep writing their status
        return sorted(
            j["metadata"]["name"] for j in stack.kube().request("GET", "/apis/batch/v1/jobs").body["items"]
        )

    before = jobs()
    resp = call(stack, "POST", "/v1/jobs", body=body)
    assert resp.status_code in (400, 403), resp.text
    err = resp.json()["error"]
    assert field in json.dumps(err)
    assert jobs() == before


def test_malformed_json_and_oversized_bodies(stack):
    from topogov_cli.sigv4 import sign

    creds = credentials_for_profile("topogov-team-a", str(stack.credentials))
    import requests

    for payload, status in ((b"{not json", 400), (b"{" + b" " * (1024 * 1024 + 10) + b"}", 413)):
        headers = sign(
            "POST",
            stack.api.url + "/v1/jobs",
            credentials=creds,
            region="us-east-1",
            body=payload,
            headers={"Content-Type": "application/json"},
        )
        resp = requests.post(stack.api.url + "/v1/jobs", data=payload, headers=headers, timeout=30)
        assert resp.status_code == status, resp.text
        assert resp.json()["error"]["code"] == "VALIDATION_ERROR"


def test_never_admissible_is_422_with_the_numbers(stack):
    resp = call(stack, "POST", "/v1/jobs", profile="topogov-team-c", body=job("huge", replica_count=100))
    assert resp.status_code == 422
    err = resp.json()["error"]
    assert err["code"] == "NEVER_ADMISSIBLE" and err["details"]["resources"][0]["asked"] == 800


def test_another_teams_job_is_forbidden(stack):
    assert call(stack, "GET", "/v1/jobs/team-a/fits-l3", profile="topogov-team-b").status_code == 403
    assert call(stack, "DELETE", "/v1/jobs/team-a/fits-l3", profile="topogov-team-b").status_code == 403
    assert call(stack, "GET", "/v1/jobs/team-a/fits-l3", profile="topogov-admin").status_code == 200


def test_a_burst_never_passes_the_cap_and_every_accepted_job_exists_twice(stack):
    team = call(stack, "GET", "/v1/teams/team-c", profile="topogov-team-c").json()
    cap = team["max_in_flight"]["nvidia.com/gpu"]
    before = team["in_flight"]["nvidia.com/gpu"]
    n = 50
    with cf.ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(
            lambda i: call(stack, "POST", "/v1/jobs", profile="topogov-team-c",
                           body=job(f"burst-{i}", replica_count=1, efa=0)),
            range(n),
        ))  # fmt: skip
    codes = [r.status_code for r in results]
    assert set(codes) <= {201, 429}, [
        (r.status_code, r.text[:300]) for r in results if r.status_code not in (201, 429)
    ]
    accepted = [f"burst-{i}" for i, r in enumerate(results) if r.status_code == 201]
    assert before + 8 * len(accepted) <= cap
    assert len(accepted) == (cap - before) // 8, (before, cap, codes)
    refused = next(r for r in results if r.status_code == 429).json()["error"]
    assert refused["code"] == "IN_FLIGHT_LIMIT" and refused["details"]["resources"][0]["cap"] == cap
    after = call(stack, "GET", "/v1/teams/team-c", profile="topogov-team-c").json()["in_flight"][
        "nvidia.com/gpu"
    ]
    assert after == before + 8 * len(accepted)
    for name in accepted:
        assert (
            stack.kube().request("GET", f"/apis/batch/v1/namespaces/hyperpod-ns-team-c/jobs/{name}").status
            == 200
        )
        assert call(stack, "GET", f"/v1/jobs/team-c/{name}", profile="topogov-team-c").status_code == 200


def test_cancel_releases_the_charge_once(stack):
    assert call(stack, "POST", "/v1/jobs", body=job("to-cancel", replica_count=1)).status_code == 201
    used = call(stack, "GET", "/v1/teams/team-a").json()["in_flight"]["nvidia.com/gpu"]
    resp = call(stack, "DELETE", "/v1/jobs/team-a/to-cancel")
    assert resp.status_code == 200 and resp.json()["charge_released"] is True
    again = call(stack, "DELETE", "/v1/jobs/team-a/to-cancel").json()
    assert again["charge_released"] is False
    assert call(stack, "GET", "/v1/teams/team-a").json()["in_flight"]["nvidia.com/gpu"] == used - 8
    assert (
        stack.kube().request("GET", "/apis/batch/v1/namespaces/hyperpod-ns-team-a/jobs/to-cancel").status
        == 404
    )


def test_a_failed_create_rolls_back_the_charge(stack):
    kube = stack.kube()
    used = call(stack, "GET", "/v1/teams/team-a").json()["in_flight"]["nvidia.com/gpu"]
    kube.request(
        "POST", "/_emulator/faults", body={"method": "POST", "path": "/jobs$", "status": 500, "times": 1}
    )
    resp = call(stack, "POST", "/v1/jobs", body=job("rollback", replica_count=1))
    kube.request("DELETE", "/_emulator/faults")
    assert resp.status_code == 503 and resp.json()["error"]["code"] == "UNAVAILABLE"
    assert call(stack, "GET", "/v1/teams/team-a").json()["in_flight"]["nvidia.com/gpu"] == used
    assert call(stack, "GET", "/v1/jobs/team-a/rollback").status_code == 404


def test_a_duplicate_name_is_409(stack):
    assert (
        call(stack, "POST", "/v1/jobs", body=job("fits-l3", required_topology="layer-3")).status_code == 409
    )


def test_unsigned_requests_are_refused_by_the_gateway(stack):
    import requests

    resp = requests.get(stack.api.url + "/v1/teams", timeout=10)
    assert resp.status_code == 403 and resp.json()["message"] == "Missing Authentication Token"


def test_topology_and_openapi_routes(stack):
    mermaid = call(stack, "GET", "/v1/topology?format=mermaid")
    assert mermaid.status_code == 200 and mermaid.text.startswith("flowchart TD")
    tree = call(stack, "GET", "/v1/topology").json()
    assert tree["depth"] == 4
    doc = call(stack, "GET", "/v1/openapi.json").json()
    assert "/v1/jobs" in doc["paths"] and "/v1/jobs/{team}/{name}" in doc["paths"]


def test_an_admin_replays_a_trace_under_a_proposed_policy_on_the_snapshots_fleet(stack):
    from pathlib import Path

    examples = Path(__file__).resolve().parents[2] / "examples" / "whatif"
    trace = (examples / "trace.csv").read_text()
    body = {
        "trace": trace,
        "policy": (examples / "teams-proposed.yaml").read_text(),
        "fleet_change": ["+p5.48xlarge=8"],
    }
    resp = call(stack, "POST", "/v1/whatif", profile="topogov-admin", body=body)
    assert resp.status_code == 200, resp.text
    out = resp.json()
    assert out["jobs"] == 150 and out["nodes"]["proposed"] == out["nodes"]["baseline"] + 8
    for name in ("baseline", "proposed"):
        scenario = out["scenarios"][name]
        assert len(scenario["jobs"]) == 150 and set(scenario["teams"]) >= {"team-a", "team-c"}
    # a wrong row is named by line and field, and a member may not replay at all
    wrong = trace.splitlines()[0] + "\n0,team-a,no-pods,0,8,p5.48xlarge,60,,,,\n"
    bad = call(stack, "POST", "/v1/whatif", profile="topogov-admin", body={"trace": wrong})
    assert bad.status_code == 400 and bad.json()["error"]["details"]["field"] == "trace", bad.text
    assert bad.json()["error"]["message"] == "trace: line 2, pods: must be at least 1, got '0'", bad.text
    change = call(
        stack, "POST", "/v1/whatif", profile="topogov-admin", body={"trace": trace, "fleet_change": ["p5=1"]}
    )
    assert change.status_code == 400 and change.json()["error"]["details"]["field"].startswith("fleet_change")
    member = call(stack, "POST", "/v1/whatif", body={"trace": trace})
    assert member.status_code == 403 and member.json()["error"]["code"] == "FORBIDDEN"


def test_an_admin_replays_the_ledgers_history_with_the_run_times_observed(stack):
    """``POST /v1/whatif`` with ``history`` and ``topogov whatif --history`` (the CLI as a
    subprocess, signing with the admin profile): a job that finished and was released is replayed
    for the run time the reconcile pass recorded; what has none is counted, not replayed."""
    # Given a job of team-b that ran (its pod sleeps 2 s), finished and was released by a pass,
    # and one still running
    long = job("hist-long", replica_count=1, team="team-b")
    assert call(stack, "POST", "/v1/jobs", profile="topogov-team-b", body=long).status_code == 201
    try:
        _replays_history(stack)
    finally:
        call(stack, "DELETE", "/v1/jobs/team-b/hist-long", profile="topogov-team-b")
        # and its Workload gone with it (Kueue has let its quota go): the tests after this one count
        # team-b's admitted GPUs, and on a loaded machine the garbage collector may take a while
        wait_until(
            lambda: not _workloads_of(stack, "hyperpod-ns-team-b", "hist-long"), "hist-long's Workload goes"
        )


def _workloads_of(stack, namespace, job_name):
    path = f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{namespace}/workloads"
    items = stack.kube().request("GET", path).body.get("items") or []
    return [
        w for w in items if any(o.get("name") == job_name for o in w["metadata"].get("ownerReferences") or [])
    ]


def _replays_history(stack):
    import os
    import sys
    from pathlib import Path

    from topogov.handlers.reconcile import handler

    body = job("hist-job", replica_count=2, command=["sleep", "2s"], team="team-b")
    assert call(stack, "POST", "/v1/jobs", profile="topogov-team-b", body=body).status_code == 201
    wait_until(
        lambda: (
            call(stack, "GET", "/v1/jobs/team-b/hist-job", profile="topogov-team-b").json()["status"]
            == "Succeeded"
        ),
        "hist-job succeeds",
    )
    wait_until(
        lambda: (
            handler(events.scheduled_event(), LocalContext())
            and (v := call(stack, "GET", "/v1/jobs/team-b/hist-job", profile="topogov-team-b").json())[
                "ran_s"
            ]
            is not None
            and v
        ),
        "a pass releases hist-job with its run time",
    )
    ran_s = call(stack, "GET", "/v1/jobs/team-b/hist-job", profile="topogov-team-b").json()["ran_s"]
    assert 2 <= ran_s <= 120
    # When an admin replays the last hour under the policy in force and a fleet with 8 more nodes
    request = {"history": "1h", "fleet_change": ["+p5.48xlarge=8"]}
    resp = call(stack, "POST", "/v1/whatif", profile="topogov-admin", body=request)
    assert resp.status_code == 200, resp.text
    out = resp.json()
    # Then the job is in both scenarios, running for its observed time; the module's other jobs
    # that have not finished are counted as left out
    for name in ("baseline", "proposed"):
        (replayed,) = [j for j in out["scenarios"][name]["jobs"] if j["name"] == "hist-job"]
        assert replayed["team"] == "team-b" and replayed["end_s"] - replayed["start_s"] == ran_s
        assert len(replayed["nodes"]) == 2
    assert out["history"]["window_s"] == 3600 and out["history"]["jobs"] == out["jobs"] >= 1
    assert out["history"]["left_out"].get("running", 0) >= 1, out["history"]
    # and the CLI runs the README's two commands (text inside 100 columns, then JSON)
    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "TOPOGOV_", "COLUMNS"))}
    env.update(
        AWS_SHARED_CREDENTIALS_FILE=str(stack.credentials),
        AWS_PROFILE="topogov-admin",
        AWS_EC2_METADATA_DISABLED="true",
        TOPOGOV_ENDPOINT=stack.api.url,
        PYTHONPATH=str(root / "lambdas"),
    )

    def cli(*argv):
        done = subprocess.run([sys.executable, "-m", "topogov_cli.main", "whatif", *argv], cwd=root,
                              env=env, capture_output=True, text=True, timeout=180, check=False)  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout

    text = cli("--history", "7d", "--policy", "examples/whatif/teams-proposed.yaml")
    assert re.match(
        r"\d+ jobs from the ledger's last 7d, .*\n  left out, no run time observed: .*\d+ running", text
    ), text
    assert "proposed:" in text and "teams-proposed.yaml" in text, text
    assert max(map(len, text.splitlines())) <= 100, text
    doc = json.loads(cli("--history", "1d", "--fleet-change", "+p5.48xlarge=32", "--output", "json"))
    assert doc["nodes"]["proposed"] == doc["nodes"]["baseline"] + 32
    assert "hist-job" in {j["name"] for j in doc["scenarios"]["proposed"]["jobs"]}
    # a member may not, and a wrong window or both inputs are named refusals
    member = call(stack, "POST", "/v1/whatif", body={"history": "1h"})
    assert member.status_code == 403
    wrong = call(stack, "POST", "/v1/whatif", profile="topogov-admin", body={"history": "1w"})
    assert wrong.status_code == 400 and wrong.json()["error"]["details"]["field"] == "history", wrong.text
    both = call(stack, "POST", "/v1/whatif", profile="topogov-admin", body={"history": "1h", "trace": "x"})
    assert both.status_code == 400 and "either trace" in both.json()["error"]["message"], both.text


def test_kubectl_sees_the_jobs(stack):
    assert shutil.which("kubectl"), "kubectl is required (make kubectl)"
    cmd = ["kubectl", "--kubeconfig", str(stack.kubeconfig), "get", "jobs", "-n", "hyperpod-ns-team-a"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=True).stdout
    assert "test-tas-job" in out and "fits-l3" in out


def test_the_reconcile_pass_releases_finished_and_vanished_jobs_once_and_reports_strays(stack):
    from topogov.handlers.reconcile import handler

    kube = stack.kube()
    # (the local cluster runs a pod as long as the `sleep` of its command; KWOK then completes it)
    assert (
        call(
            stack, "POST", "/v1/jobs", body=job("done-job", replica_count=1, command=["sleep", "1s"])
        ).status_code
        == 201
    )
    assert call(stack, "POST", "/v1/jobs", body=job("gone-job", replica_count=1)).status_code == 201
    used = call(stack, "GET", "/v1/teams/team-a").json()["in_flight"]["nvidia.com/gpu"]
    # Given one job completed (Kueue admitted it, its pod ran and succeeded, the Job controller says
    # Complete) and one deleted by hand
    wait_until(
        lambda: call(stack, "GET", "/v1/jobs/team-a/done-job").json()["status"] == "Succeeded",
        "done-job succeeds",
    )
    kube.request("DELETE", "/apis/batch/v1/namespaces/hyperpod-ns-team-a/jobs/gone-job")
    # and a job created in the team's namespace outside the API
    stray = copy.deepcopy(AWS_EXAMPLE)
    stray["metadata"] = {**AWS_EXAMPLE["metadata"], "name": "stray-job", "labels": {}}
    stray["spec"]["template"]["metadata"]["labels"] = {}
    kube.request("POST", "/apis/batch/v1/namespaces/hyperpod-ns-team-a/jobs", body=stray)
    # When two reconcile passes run
    first = handler(events.scheduled_event(), LocalContext())["ledger"]
    second = handler(events.scheduled_event(), LocalContext())["ledger"]
    # Then both charges were released
    assert first["released_finished"] >= 1 and first["released_vanished"] >= 1
    assert call(stack, "GET", "/v1/jobs/team-a/done-job").json()["state"] == "released"
    assert call(stack, "GET", "/v1/jobs/team-a/gone-job").json()["state"] == "released"
    # once each: the team's counter is what its unreleased records charge, no less (the other jobs
    # of this module run 30 s and may finish, and be released, between any two of these lines, so
    # "used - 16" alone held only on an idle machine)
    after = call(stack, "GET", "/v1/teams/team-a").json()["in_flight"]["nvidia.com/gpu"]
    assert after == second["in_flight_gpu"]["team-a"] == _charged_gpu(stack, "team-a") <= used - 16
    assert "hyperpod-ns-team-a/stray-job" in first["unmanaged_jobs"]
    assert call(stack, "GET", "/v1/jobs/team-a/done-job").json()["status"] == "Succeeded"


def _charged_gpu(stack, team):
    """GPUs the ledger's records still charge: the sum of what each unreleased record asked."""
    total = 0
    for listed in call(stack, "GET", f"/v1/jobs?team={team}").json()["jobs"]:
        if listed["state"] != "released":
            view = call(stack, "GET", f"/v1/jobs/{team}/{listed['name']}").json()
            total += sum(q["asked"] for q in view["decision"]["quota"] if q["resource"] == "nvidia.com/gpu")
    return total


def test_an_idempotency_key_returns_the_first_answer_and_charges_once(stack):
    creds = credentials_for_profile("topogov-team-a", str(stack.credentials))
    url = stack.api.url + "/v1/jobs"
    body = job("idem-job", replica_count=1)
    used = call(stack, "GET", "/v1/teams/team-a").json()["in_flight"]["nvidia.com/gpu"]
    first = signed_request("POST", url, credentials=creds, region="us-east-1", json_body=body,
                           headers={"Idempotency-Key": "k-123"})  # fmt: skip
    retry = signed_request("POST", url, credentials=creds, region="us-east-1", json_body=body,
                           headers={"Idempotency-Key": "k-123"})  # fmt: skip
    assert first.status_code == retry.status_code == 201
    assert retry.json() == first.json()
    assert call(stack, "GET", "/v1/teams/team-a").json()["in_flight"]["nvidia.com/gpu"] == used + 8
    other = signed_request(
        "POST",
        url,
        credentials=creds,
        region="us-east-1",
        json_body=job("idem-other", replica_count=1),
        headers={"Idempotency-Key": "k-123"},
    )
    assert other.status_code == 409 and other.json()["error"]["details"]["field"] == "Idempotency-Key"


def test_identity_never_comes_from_a_header_or_the_body(stack):
    creds = credentials_for_profile("topogov-team-b", str(stack.credentials))
    admin = "arn:aws:iam::123456789012:user/topogov-admin"
    spoof = {"X-Amz-User-Arn": admin, "X-Caller": "topogov-team-a"}
    url = stack.api.url + "/v1/jobs/team-a/fits-l3"
    resp = signed_request("GET", url, credentials=creds, region="us-east-1", headers=spoof)
    assert resp.status_code == 403
    resp = call(
        stack, "POST", "/v1/jobs", profile="topogov-team-b", body={**job("x"), "caller": "topogov-admin"}
    )
    assert resp.status_code == 400 and "caller" in resp.json()["error"]["message"]


def test_status_follows_kueue_from_pending_to_succeeded(stack):
    """The job's status is Kueue's and the Job's: Pending with Kueue's own message while its
    ClusterQueue admits nothing (stopPolicy Hold), then Admitted/Running, Succeeded after its run
    time; the team view counts what Kueue admitted from the Workloads."""
    queue = "hyperpod-ns-team-b-clusterqueue"
    hold_queue(stack, queue)
    try:
        body = job("wl-job", replica_count=2, command=["sleep", "6s"])
        assert call(stack, "POST", "/v1/jobs", profile="topogov-team-b", body=body).status_code == 201
        view = wait_until(
            lambda: (
                (v := call(stack, "GET", "/v1/jobs/team-b/wl-job", profile="topogov-team-b").json())[
                    "why_pending"
                ]
                # Kueue's own message, not the API's "waiting for Kueue to create a Workload" that
                # comes first (a loaded CI run read that one)
                and not v["why_pending"].startswith("waiting for Kueue")
                and v
            ),
            "Kueue says why it waits",
        )
        assert (
            view["status"] == "Pending" and view["why_pending"] == f"ClusterQueue {queue} is inactive"
        )  # Kueue's words
        assert (
            call(stack, "GET", "/v1/teams/team-b", profile="topogov-team-b").json()["admitted"][
                "nvidia.com/gpu"
            ]
            == 0
        )
    finally:
        hold_queue(stack, queue, "None")
    running = wait_until(
        lambda: (
            call(stack, "GET", "/v1/jobs/team-b/wl-job", profile="topogov-team-b").json()["status"]
            in ("Admitted", "Running")
        ),
        "Kueue admits it",
    )
    assert running
    admitted = call(stack, "GET", "/v1/teams/team-b", profile="topogov-team-b").json()["admitted"]
    assert admitted["nvidia.com/gpu"] == 16  # 2 pods x 8 GPUs, from the admitted Workload
    wait_until(
        lambda: (
            call(stack, "GET", "/v1/jobs/team-b/wl-job", profile="topogov-team-b").json()["status"]
            == "Succeeded"
        ),
        "it succeeds after its 6 s",
    )
    # and a finished Workload no longer counts as admitted (Kueue keeps Admitted=True on it)
    wait_until(
        lambda: (
            call(stack, "GET", "/v1/teams/team-b", profile="topogov-team-b").json()["admitted"][
                "nvidia.com/gpu"
            ]
            == 0
        ),
        "its admitted usage is released",
    )
    view = call(stack, "GET", "/v1/jobs/team-b/wl-job", profile="topogov-team-b").json()
    assert view["placement"]["phases"] == {"Succeeded": 2}
    assert "kueue: Finished" in [e["what"] for e in view["events"]]


def _annotations(stack, name):
    """The topology annotations of a Job's pod template (Kueue adds its own, e.g. the Workload's name)."""
    job = stack.kube().request("GET", f"/apis/batch/v1/namespaces/hyperpod-ns-team-a/jobs/{name}").body
    return {k: v for k, v in job["spec"]["template"]["metadata"]["annotations"].items() if "topology" in k}


def _workload_topology(stack, name):
    """The topologyRequest of the Job's Workload: what Kueue schedules."""
    job = stack.kube().request("GET", f"/apis/batch/v1/namespaces/hyperpod-ns-team-a/jobs/{name}").body
    items = (
        stack.kube()
        .request(
            "GET",
            "/apis/kueue.x-k8s.io/v1beta2/namespaces/hyperpod-ns-team-a/workloads",
            query={"labelSelector": f"kueue.x-k8s.io/job-uid={job['metadata']['uid']}"},
        )
        .body["items"]
    )
    if not items:
        return None  # Kueue has not made it yet
    (workload,) = items
    request = workload["spec"]["podSets"][0].get("topologyRequest") or {}
    return {k: v for k, v in request.items() if k in ("required", "preferred")}


def _cordon(stack, names, unschedulable=True):
    for name in names:
        resp = stack.kube().request(
            "PATCH",
            f"/api/v1/nodes/{name}",
            body={"spec": {"unschedulable": unschedulable}},
            content_type="application/merge-patch+json",
        )
        assert resp.status == 200, resp.body


def test_a_required_job_not_admitted_by_its_deadline_falls_back_to_preferred_once(stack):
    """Real Kueue decides: with one node of every layer-3 domain cordoned no layer-3 domain has 4
    schedulable nodes, so a 4-pod job requiring layer-3 cannot start; past its deadline the pass
    switches its Workload (what Kueue schedules) and its Job to preferred, and Kueue starts it on
    the same cordoned cluster. A job with no deadline keeps waiting."""
    import time

    from topogov.handlers.reconcile import handler

    level = "topology.k8s.aws/network-node-layer-3"
    required = {"mode": "required", "level": "layer-3", "fallbackAfter": "1s"}
    # Given one job Kueue admits before its deadline
    resp = call(stack, "POST", "/v1/jobs", body=job("fb-admitted", replica_count=1, topology=required))
    assert resp.status_code == 201, resp.text
    wait_until(
        lambda: call(stack, "GET", "/v1/jobs/team-a/fb-admitted").json()["status"] in ("Admitted", "Running"),
        "admitted",
    )
    # and a cluster where no layer-3 domain has 4 schedulable nodes
    labels = node_labels(stack)
    by_domain = {}
    for name, node in sorted(labels.items()):
        if node.get("node.kubernetes.io/instance-type") == "p5.48xlarge" and level in node:
            by_domain.setdefault(node[level], name)
    cordoned = sorted(by_domain.values())
    _cordon(stack, cordoned)
    try:
        for name, topology in (
            ("fb-waits", required),
            ("fb-no-deadline", {"mode": "required", "level": "layer-3"}),
            ("fb-half", required),
        ):
            resp = call(stack, "POST", "/v1/jobs", body=job(name, replica_count=4, topology=topology))
            assert resp.status_code == 201, resp.text
        # (fb-half as a pass that stopped between its two patches leaves it: the Job prefers, the
        # Workload still requires; so the Workload must exist first, or Kueue would build it from the
        # relaxed Job, as a loaded CI run once saw)
        wait_until(lambda: _workload_topology(stack, "fb-half") == {"required": level}, "fb-half's Workload")
        kube_jobs = KubeJobs(stack.kube())
        half = kube_jobs.get("hyperpod-ns-team-a", "fb-half")
        assert half is not None and kube_jobs._relax_job("hyperpod-ns-team-a", half, level) == "switched"
        for name in ("fb-waits", "fb-no-deadline", "fb-half"):
            view = wait_until(
                lambda n=name: (v := call(stack, "GET", f"/v1/jobs/team-a/{n}").json())["why_pending"] and v,
                f"Kueue says why {name} waits",
            )
            assert view["status"] == "Pending", view
        time.sleep(2.1)  # the deadline (1 s, at the ledger's one-second resolution) passes
        # When the next passes run
        first = handler(events.scheduled_event(), LocalContext())["ledger"]["fallbacks"]
        second = handler(events.scheduled_event(), LocalContext())["ledger"]["fallbacks"]
        # Then the pending job, and only it, was switched to preferred at the same level, once: its
        # Workload (Kueue does not rebuild a Workload for an annotation change) and its Job
        assert "team-a/fb-waits" in first and "team-a/fb-admitted" not in first
        assert "team-a/fb-no-deadline" not in first and second == []
        assert "team-a/fb-half" in first and _workload_topology(stack, "fb-half") == {"preferred": level}
        assert _workload_topology(stack, "fb-waits") == {"preferred": level}
        assert _annotations(stack, "fb-waits") == {"kueue.x-k8s.io/podset-preferred-topology": level}
        assert _workload_topology(stack, "fb-no-deadline") == {"required": level}
        assert _annotations(stack, "fb-admitted") == {"kueue.x-k8s.io/podset-required-topology": level}
        # and Kueue starts the relaxed job on the same cordoned cluster; the other keeps waiting
        running = wait_until(
            lambda: (
                (v := call(stack, "GET", "/v1/jobs/team-a/fb-waits").json())["status"]
                in ("Admitted", "Running")
                and v
            ),
            "fb-waits starts",
        )
        assert not set(cordoned) & {r["node"] for r in (running["placement"] or {}).get("by_node", [])}
        assert call(stack, "GET", "/v1/jobs/team-a/fb-no-deadline").json()["status"] == "Pending"
    finally:
        _cordon(stack, cordoned, unschedulable=False)
    # and the ledger says when and why; GET /v1/jobs/... shows it
    view = call(stack, "GET", "/v1/jobs/team-a/fb-waits").json()
    fallback = view["fallback"]
    assert fallback["level"] == level and fallback["from"] == "required" and fallback["to"] == "preferred"
    assert "not admitted 1s after submission" in fallback["reason"]
    assert fallback["at"] >= fallback["deadline"] >= view["submitted_at"]
    assert [e["what"] for e in view["events"] if not e["what"].startswith("kueue: ")] == [
        "submitted",
        "topology-fallback",
    ]
    assert call(stack, "GET", "/v1/jobs/team-a/fb-admitted").json()["fallback"] is None
    listed = {j["name"]: j for j in call(stack, "GET", "/v1/jobs?team=team-a").json()["jobs"]}
    assert (
        listed["fb-waits"]["fallback_at"] == fallback["at"]
        and listed["fb-no-deadline"]["fallback_at"] is None
    )
    assert call(stack, "DELETE", "/v1/jobs/team-a/fb-no-deadline").status_code == 200
    # The rule the switch relies on, from Kueue itself: its webhook refuses a pod-set change on a
    # Workload that holds quota (fb-admitted's), so an admitted job is never relaxed
    admitted = (
        stack.kube().request("GET", "/apis/batch/v1/namespaces/hyperpod-ns-team-a/jobs/fb-admitted").body
    )
    wl = KubeJobs(stack.kube()).workload_for("hyperpod-ns-team-a", admitted["metadata"]["uid"])
    refused = stack.kube().request(
        "PATCH",
        f"/apis/kueue.x-k8s.io/v1beta1/namespaces/hyperpod-ns-team-a/workloads/{wl.name}",
        body=[
            {"op": "remove", "path": "/spec/podSets/0/topologyRequest/required"},
            {"op": "add", "path": "/spec/podSets/0/topologyRequest/preferred", "value": level},
        ],
        content_type="application/json-patch+json",
    )
    assert refused.status >= 400 and "immutable" in json.dumps(refused.body), refused.body
