"""``topogov local --hyperpod`` end to end (issue 25): the local stack as a SageMaker HyperPod cluster.

The stack is deployed with ``-c topogov:hyperpodClusterArn`` by the CDK CLI (teams.yaml becomes
ComputeQuotas in the AWS emulator), the nodes are HyperPod's (providerIDs, ``ml.`` types, health labels,
two unhealthy), and the task governance add-on's emulation writes the Kueue objects into the real API
server, which real Kueue admits from. Then:

* AWS's example Job (a batch/v1 Job asking ``podset-required-topology: network-node-layer-3``, in
  ``hyperpod-ns-team-a`` with the add-on's LocalQueue) runs with its pods in one layer-3 domain;
* the reconcile pass runs in HyperPod mode, writes no node (the API server's audit log: no PATCH or
  UPDATE of a Node as ``topogov:reconciler``) and no Kueue object (none labelled managed-by topogov),
  and its governor reports no drift from the add-on's objects;
* a policy change shipped with ``cdk deploy`` reaches the add-on's ClusterQueue.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest

from topogov.domain.labels import MANAGED_BY_LABEL, layer_label
from topogov_local import events
from topogov_local.rehearse.privilege import audit_events
from topogov_local.stack import LocalStack, StackOptions
from topogov_local.walkthrough.hyperpod import example_job, example_pods, nominal_gpus, policy_with_more_gpus
from topogov_local.walkthrough.labeler import invoke

FLEET = "p5.48xlarge=16,p6-b200.48xlarge=2,c5.2xlarge=1"
KUEUE = "/apis/kueue.x-k8s.io/v1beta1"
NAMESPACE = "hyperpod-ns-team-a"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: Any) -> Iterator[LocalStack]:
    directory = tmp_path_factory.mktemp("local-hyperpod")
    options = StackOptions(
        directory=directory, fleet=FLEET, ec2_rate=1000, ec2_burst=1000, api_port=0, hyperpod=True,
        audit_log=True,
    )  # fmt: skip
    with LocalStack(options) as s:
        saved = dict(os.environ)
        os.environ.update(s.env())
        try:
            yield s
        finally:
            os.environ.clear()
            os.environ.update(saved)


def wait_for(what: str, check: Any, timeout_s: float = 180.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not after {timeout_s:.0f} s")
        time.sleep(1.0)


@pytest.fixture(scope="module")
def first_pass(stack: LocalStack) -> dict[str, Any]:
    return invoke(events.scheduled_event())


def test_the_pass_runs_in_hyperpod_mode_and_reads_the_nodes_as_hyperpod_labels_them(
    stack: LocalStack, first_pass: dict[str, Any]
) -> None:
    assert first_pass["cluster_mode"] == "hyperpod", first_pass
    assert first_pass["cluster_mode_why"].startswith("configured (topogov:hyperpodClusterArn")
    assert NAMESPACE in first_pass["cluster_mode_why"]
    assert first_pass["patched"] == 0 and first_pass["ec2_calls"] == 0
    assert first_pass["hyperpod_nodes"] >= 18 and first_pass["unavailable"] >= 2
    governor = first_pass["governor"]
    # none of the add-on's objects written: only Topogov's own team pod rules (ConfigMaps)
    assert governor["mode"] == "hyperpod"
    assert [(c["kind"], c["name"]) for c in governor["pod_rules"]] == [
        ("ConfigMap", f"pod-rules-team-{t}") for t in "abc"
    ]
    assert governor["drift"] == [], governor
    assert governor["expected"] == governor["matching"] > 0


def test_aws_example_job_runs_in_one_layer3_domain(stack: LocalStack, first_pass: dict[str, Any]) -> None:
    kube = stack.kube()
    job, count = example_job(), example_pods()  # AWS's, as published: 10 pods
    resp = kube.request("POST", f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs", body=job)
    assert resp.status == 201, resp.body

    def running() -> list[dict[str, Any]]:
        pods = kube.request(
            "GET", f"/api/v1/namespaces/{NAMESPACE}/pods", query={"labelSelector": "job-name=test-tas-job"}
        ).body["items"]
        up = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
        return up if len(up) == count else []

    pods = wait_for(f"the example Job's {count} pods Running", running)
    nodes = {n["metadata"]["name"]: n for n in kube.request("GET", "/api/v1/nodes").body["items"]}
    on = [nodes[p["spec"]["nodeName"]] for p in pods]
    assert len({n["metadata"]["labels"][layer_label(3)] for n in on}) == 1, [
        n["metadata"]["name"] for n in on
    ]
    assert all(
        n["metadata"]["labels"]["sagemaker.amazonaws.com/node-health-status"] == "Schedulable" for n in on
    )
    # admitted by Kueue from the add-on's queue, with a topology assignment (TAS placed it)
    (workload,) = kube.request("GET", f"{KUEUE}/namespaces/{NAMESPACE}/workloads").body["items"]
    admission = workload["status"]["admission"]
    assert admission["clusterQueue"] == "hyperpod-ns-team-a-clusterqueue"
    assert admission["podSetAssignments"][0]["topologyAssignment"]["levels"]


def test_no_kueue_object_is_topogovs_and_the_reconciler_never_writes_a_node(
    stack: LocalStack, first_pass: dict[str, Any]
) -> None:
    invoke(events.scheduled_event())  # a second pass, with the job running
    kube = stack.kube()
    for plural in (
        "clusterqueues",
        "localqueues",
        "resourceflavors",
        "workloadpriorityclasses",
        "topologies",
    ):
        items = kube.request("GET", f"{KUEUE}/{plural}", query={"labelSelector": MANAGED_BY_LABEL}).body[
            "items"
        ]
        assert items == [], plural
    assert kube.request("GET", f"{KUEUE}/clusterqueues").body["items"], "the add-on wrote the queues"
    events_seen = audit_events(stack.dir / "audit.log", "topogov:reconciler")
    assert events_seen, "the audit log recorded the reconciler's requests"
    writes = [
        e for e in events_seen
        if (e.get("objectRef") or {}).get("resource") == "nodes" and e.get("verb") in ("patch", "update")
    ]  # fmt: skip
    assert writes == []
    assert any(
        (e.get("objectRef") or {}).get("resource") == "nodes" and e["verb"] == "list" for e in events_seen
    )


def test_a_policy_change_through_cdk_deploy_reaches_the_addons_cluster_queue(stack: LocalStack) -> None:
    kube = stack.kube()
    queue = f"{KUEUE}/clusterqueues/hyperpod-ns-team-c-clusterqueue"
    before = nominal_gpus(kube.request("GET", queue).body)
    text, wanted = policy_with_more_gpus(stack.options.policy_file.read_text(), "team-c", before, 8)
    stack.redeploy(text)
    after = wait_for(
        "the add-on's ClusterQueue with the new quota",
        lambda: (n := nominal_gpus(kube.request("GET", queue).body)) == wanted and n,
        timeout_s=60,
    )
    assert (before, after) == (wanted - 8, wanted)
    os.environ.update(stack.env())  # the functions of the new deployment: teams.yaml as changed
    summary = invoke(events.scheduled_event())
    assert summary["governor"]["drift"] == [], summary["governor"]


def test_preflight_checks_the_addon_the_nodes_labels_and_prints_what_the_addon_wrote(
    stack: LocalStack, monkeypatch: Any, capsys: Any
) -> None:
    from pathlib import Path

    from topogov_cli.main import main

    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", stack.aws_url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    # CDK's bootstrap gives its CloudFormation execution role AdministratorAccess, an AWS managed policy
    # the emulator (moto) does not load: the same actions are granted to it inline here
    import json

    from topogov_cli.preflight_hyperpod import HANDLER_ACTIONS

    exec_role = "cdk-hnb659fds-cfn-exec-role-123456789012-us-east-1"
    iam = stack.client("iam")
    allow = {"Effect": "Allow", "Action": list(HANDLER_ACTIONS), "Resource": "*"}
    grant = {"Version": "2012-10-17", "Statement": [allow]}
    iam.put_role_policy(RoleName=exec_role, PolicyName="as-administrator", PolicyDocument=json.dumps(grant))
    root = Path(__file__).resolve().parents[2]
    arn = f"topogov:hyperpodClusterArn={stack.hyperpod_arn}"
    argv = ["preflight", "--app", str(root), "--cluster", "topogov-local",
            "--kubeconfig", str(stack.kubeconfig), "-c", arn]  # fmt: skip
    main(argv)
    lines = {}
    for line in capsys.readouterr().out.splitlines():
        m = re.match(r"^(ok  |FAIL)  (\S.*?)  +(\S.*)$", line)
        if m:
            lines[m.group(2).strip()] = f"{m.group(1).strip()} {m.group(3)}"
    assert lines["HyperPod cluster"].startswith("ok topogov-local InService"), lines
    assert lines["task governance add-on"].startswith("ok amazon-sagemaker-hyperpod-taskgovernance"), lines
    assert lines["task governance add-on"].endswith("ACTIVE")
    assert lines["SageMaker permissions"] == (
        f"ok arn:aws:iam::123456789012:role/{exec_role} may call the 17 actions the deploy needs"
    ), lines
    assert re.match(r"ok 18 of 18 HyperPod nodes carry .*; 2 not available", lines["node topology labels"]), (
        lines
    )
    team_a = lines["ClusterQueue hyperpod-ns-team-a-clusterqueue"]
    assert team_a.startswith("ok cohort shared-pool; preemption ") and "ml.p5.48xlarge: " in team_a
    assert lines["Topology hyperpod-topology"].startswith("ok levels topology.k8s.aws/network-node-layer-1")
    # a HyperPod node without the layer labels fails the check, naming the fix
    from topogov_cli.preflight_hyperpod import node_labels_check

    kube = stack.kube()
    name = next(
        n["metadata"]["name"]
        for n in kube.request("GET", "/api/v1/nodes").body["items"]
        if n["metadata"]["name"].startswith("hyperpod-")
    )
    patch = {"metadata": {"labels": {layer_label(k): None for k in (1, 2, 3)}}}
    resp = kube.request(
        "PATCH", f"/api/v1/nodes/{name}", body=patch, content_type="application/merge-patch+json"
    )
    assert resp.status == 200, resp.body
    _name, ok, detail = node_labels_check(kube)
    assert not ok and detail.startswith("17 of 18 HyperPod nodes carry") and "1 without" in detail
    # CloudFormation's execution role denied one of the handlers' actions: named, with the fix
    from topogov_cli.preflight import Aws
    from topogov_cli.preflight_hyperpod import permissions_check

    deny = {"Version": "2012-10-17", "Statement": [
        {"Effect": "Deny", "Action": "sagemaker:DeleteComputeQuota", "Resource": "*"}]}  # fmt: skip
    iam.put_role_policy(RoleName=exec_role, PolicyName="no-delete", PolicyDocument=json.dumps(deny))
    try:
        _name, ok, detail = permissions_check(Aws(None, "us-east-1"))
    finally:
        iam.delete_role_policy(RoleName=exec_role, PolicyName="no-delete")
    assert not ok and detail.startswith(
        f"arn:aws:iam::123456789012:role/{exec_role} may not sagemaker:DeleteComputeQuota —"
    )
    # a cluster without the add-on says so and how to install it
    stack.client("eks").create_cluster(
        name="no-addon", roleArn="arn:aws:iam::123456789012:role/eks", resourcesVpcConfig={"subnetIds": []}
    )
    from topogov_cli.preflight_hyperpod import addon_check

    name, ok, detail = addon_check(Aws(None, "us-east-1"), "no-addon")
    assert (name, ok) == ("task governance add-on", False)
    assert "not installed on no-addon" in detail and "aws eks create-addon" in detail


def call(stack: LocalStack, method: str, path: str, body: Any = None, profile: str = "topogov-team-a") -> Any:
    from topogov_cli.sigv4 import credentials_for_profile, signed_request

    creds = credentials_for_profile(profile, str(stack.credentials))
    return signed_request(method, stack.api.url + path, credentials=creds, region="us-east-1", json_body=body)


def test_the_api_submits_as_the_addon_expects_and_reads_the_quota_from_its_queue(
    stack: LocalStack, first_pass: dict[str, Any]
) -> None:
    # the API (as topogov:api, deploy/rbac.yaml) reads team-a's quota from the add-on's ClusterQueue
    team = call(stack, "GET", "/v1/teams/team-a")
    assert team.status_code == 200, team.text
    assert (
        team.json()["quota_source"]
        == "ClusterQueue hyperpod-ns-team-a-clusterqueue (HyperPod task governance)"
    )
    body = {
        "job_name": "hp-api", "image": "pytorch:latest", "accelerators": 8, "replica_count": 4,
        "required_topology": layer_label(3),
    }  # fmt: skip
    # where the HyperPodPyTorchJob CRD is served, a high-level request becomes one, as hyp writes it
    resp = call(stack, "POST", "/v1/jobs", body=body)
    assert resp.status_code == 201, resp.text
    answer = resp.json()
    assert answer["decision"]["rendered_as"].startswith("sagemaker.amazonaws.com/v1 HyperPodPyTorchJob")
    job = answer["job"]
    assert (job["kind"], job["metadata"]["namespace"], job["metadata"]["name"]) == (
        "HyperPodPyTorchJob",
        NAMESPACE,
        "hp-api",
    )
    pod = job["spec"]["replicaSpecs"][0]["template"]
    for labels in (job["metadata"]["labels"], pod["metadata"]["labels"]):
        assert labels["kueue.x-k8s.io/queue-name"] == "hyperpod-ns-team-a-localqueue"
        assert labels["kueue.x-k8s.io/priority-class"] == "experimentation-priority"
    assert pod["metadata"]["annotations"]["kueue.x-k8s.io/podset-required-topology"] == layer_label(3)
    # the stand-in operator makes its Workload, Kueue admits and places it: 4 pods in one layer-3 domain
    labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in _nodes(stack)}

    def running() -> list[dict[str, Any]]:
        pods = (
            stack.kube()
            .request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods", query={"labelSelector": "HPJob=hp-api"})
            .body["items"]
        )
        return pods if len(pods) == 4 and all(p["status"].get("phase") == "Running" for p in pods) else []

    pods = wait_for("hp-api's 4 pods Running", running)
    assert len({labels[p["spec"]["nodeName"]][layer_label(3)] for p in pods}) == 1
    # the operator writes its Running condition after the pods run: the API reads that condition
    view = wait_for(
        "the API's view of hp-api Running",
        lambda: (v := call(stack, "GET", "/v1/jobs/team-a/hp-api").json())["status"] == "Running" and v,
    )
    assert view["kind"] == "HyperPodPyTorchJob", view
    # a topology beside an instance type: kept, as hyp writes it, and the decision says it pins the flavor
    both = call(
        stack, "POST", "/v1/jobs?dryRun=true",
        body={**body, "job_name": "hp-both", "instance_type": "p5.48xlarge"},
    )  # fmt: skip
    assert both.status_code == 200, both.text
    template = both.json()["job"]["spec"]["replicaSpecs"][0]["template"]
    assert template["spec"]["nodeSelector"]["node.kubernetes.io/instance-type"] == "ml.p5.48xlarge"
    assert "pins it to that type's flavor" in both.json()["decision"]["topology"]["reason"]
    # forced to a batch/v1 Job, the high-level request still runs
    forced = call(
        stack, "POST", "/v1/jobs?dryRun=true", body={**body, "job_name": "hp-job", "render_as": "job"}
    )
    assert forced.status_code == 200 and forced.json()["job"]["kind"] == "Job", forced.text
    assert call(stack, "DELETE", "/v1/jobs/team-a/hp-api").json()["kind"] == "HyperPodPyTorchJob"


def _nodes(stack: LocalStack) -> list[dict[str, Any]]:
    return stack.kube().request("GET", "/api/v1/nodes").body["items"]


def test_doctor_says_the_cluster_is_hyperpods_and_who_writes_its_labels_and_queues(
    stack: LocalStack, monkeypatch: Any, capsys: Any
) -> None:
    from topogov_cli.main import main

    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(stack.credentials))
    main(["doctor", "--kubeconfig", str(stack.kubeconfig), "--endpoint", stack.api.url,
          "--profile", "topogov-team-a"])  # fmt: skip
    out = capsys.readouterr().out
    seen = (
        r"ok  +HyperPod +18 HyperPod node\(s\); the task governance add-on's namespaces: "
        r"hyperpod-ns-team-a, hyperpod-ns-team-b, hyperpod-ns-team-c \(HyperPod mode\)"
    )
    assert re.search(seen, out), out
    assert re.search(r"ok  +Kueue ClusterQueues +hyperpod-ns-team-a-clusterqueue", out), out
