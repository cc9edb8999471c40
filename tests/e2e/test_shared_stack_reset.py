"""The reset that lets modules share a local stack (tests/stacks.py, topogov_local/stack_reset.py)
leaves nothing of one module to the next: this module leaves every kind of state the shared modules
make — jobs and their Workloads and Pods through the API, objects in a team's namespace and a new
namespace, a Deployment in Kueue's, a ClusterQueue held and one added, a LocalQueue deleted, a flavor
relabelled, nodes cordoned, labelled, tainted, deleted and added (with their EC2 instances), faults in
the fault proxy and in DynamoDB, the DescribeInstanceTopology and Lambda settings changed, items and
object versions written directly, an API role's call in IAM's record (with every decision made
before the reset, gone after it), another policy deployed, a
file beside the stack — then runs the reset that runs between modules, and reads everything again
with plain list calls (not the reset's own code): it all equals what it was before the module.

Events are not compared (the control plane writes its own at any time; the reset deletes them all
in the team namespaces). Instances launched since are terminated, not erased: EC2 lists a terminated
instance for a while, as moto does; only running instances are compared.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import boto3
import pytest

from tests.hardening.conftest import call
from tests.stacks import hold_queue, process_state, shared_stack, wait_until
from topogov_local import fleet
from topogov_local.stack_reset import running_instances

KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
TEAM_NS = "hyperpod-ns-team-a"
KINDS_IN_NAMESPACES = (
    "/apis/batch/v1/namespaces/{ns}/jobs",
    KUEUE + "/namespaces/{ns}/workloads",
    KUEUE + "/namespaces/{ns}/localqueues",
    "/api/v1/namespaces/{ns}/pods",
    "/api/v1/namespaces/{ns}/configmaps",
    "/api/v1/namespaces/{ns}/secrets",
    "/apis/apps/v1/namespaces/{ns}/deployments",
)


@pytest.fixture(scope="module")
def shared(shared_stacks):
    with shared_stack(shared_stacks, "api") as stack:
        yield shared_stacks, stack


def _http(url: str, method: str = "GET", body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read() or b"null")


def _names(stack: Any, path: str) -> list[str]:
    return sorted(o["metadata"]["name"] for o in stack.kube().request("GET", path).body.get("items") or [])


def state(stack: Any) -> dict[str, Any]:
    """Everything a module could leave, read with plain calls."""
    kube = stack.kube()
    nodes = kube.request("GET", "/api/v1/nodes").body["items"]
    out: dict[str, Any] = {
        "nodes": {
            n["metadata"]["name"]: {
                "labels": n["metadata"].get("labels"),
                "taints": n["spec"].get("taints"),
                "unschedulable": n["spec"].get("unschedulable"),
            }
            for n in nodes
        },
        "namespaces": _names(stack, "/api/v1/namespaces"),
    }
    for ns in out["namespaces"]:
        if ns not in ("kube-system", "kube-node-lease"):
            for kind in KINDS_IN_NAMESPACES:
                out[kind.format(ns=ns)] = _names(stack, kind.format(ns=ns))
    for plural in ("clusterqueues", "resourceflavors", "topologies", "cohorts", "workloadpriorityclasses"):
        out[plural] = {
            o["metadata"]["name"]: {"spec": o.get("spec"), "labels": o["metadata"].get("labels")}
            for o in kube.request("GET", f"{KUEUE}/{plural}").body.get("items") or []
        }
    out["kube faults"] = kube.request("GET", "/_emulator/faults").body["rules"]
    dynamodb, s3 = stack.client("dynamodb"), stack.client("s3")
    for var, name in stack.names.items():
        if var.endswith("_TABLE"):
            items = dynamodb.scan(TableName=name, ConsistentRead=True)["Items"]
            keys = [k["AttributeName"] for k in dynamodb.describe_table(TableName=name)["Table"]["KeySchema"]]
            out[var] = sorted(json.dumps([i[k] for k in keys]) for i in items)
    versions = s3.list_object_versions(Bucket=stack.names["TOPOGOV_SNAPSHOT_BUCKET"])
    out["bucket"] = sorted(
        (v["Key"], "marker" if "Size" not in v else "version")
        for v in [*versions.get("Versions", []), *versions.get("DeleteMarkers", [])]
    )
    out["instances"] = sorted(running_instances(stack))
    out["dynamodb faults"] = _http(f"{stack.aws_url}/_topogov/dynamodb/faults")["rules"]
    ec2 = _http(f"{stack.aws_url}/_topogov/ec2/config")
    out["ec2 settings"] = {k: ec2.get(k) for k in ("rate", "burst", "default_max_results")}
    out["lambda limit"] = _http(f"{stack.aws_url}/_topogov/lambda/account")["concurrent_executions"]
    out["teams"] = call(stack, "GET", "/v1/teams", profile="topogov-admin").json()
    out["files"] = sorted(p.name for p in stack.dir.parent.parent.iterdir())
    return out


def differences(a: Any, b: Any, where: str = "") -> list[str]:
    """Where ``a`` and ``b`` differ, each place once (the deepest dict key that differs)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted({*a, *b}, key=str) for d in differences(a.get(k), b.get(k), f"{where}/{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        pairs = enumerate(zip(a, b, strict=True))
        return [d for i, (x, y) in pairs for d in differences(x, y, f"{where}/{i}")]
    return (
        []
        if a == b
        else [f"{where}: {json.dumps(a, default=str)[:300]} -> {json.dumps(b, default=str)[:300]}"]
    )


def leave_everything(stack: Any) -> None:
    """Every kind of state a shared module makes, left behind."""
    kube = stack.kube()
    body = {"job_name": "left-behind", "image": "pytorch:latest", "accelerators": 8, "replica_count": 2}
    assert call(stack, "POST", "/v1/jobs", body=body).status_code == 201
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "left"}, "data": {"a": "b"}}
    assert kube.request("POST", f"/api/v1/namespaces/{TEAM_NS}/configmaps", body=cm).status == 201
    assert kube.request("POST", "/api/v1/namespaces", body={"metadata": {"name": "left-ns"}}).status == 201
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "left", "namespace": "kueue-system"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "left"}},
            "template": {
                "metadata": {"labels": {"app": "left"}},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            },
        },
    }
    assert (
        kube.request("POST", "/apis/apps/v1/namespaces/kueue-system/deployments", body=deployment).status
        == 201
    )
    queues = _names(stack, f"{KUEUE}/clusterqueues")
    hold_queue(stack, queues[0])
    first = kube.request("GET", f"{KUEUE}/clusterqueues/{queues[0]}").body
    extra = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "left-cq"},
        "spec": {**first["spec"], "stopPolicy": "None"},
    }
    assert kube.request("POST", f"{KUEUE}/clusterqueues", body=extra).status == 201
    lq = _names(stack, f"{KUEUE}/namespaces/{TEAM_NS}/localqueues")[0]
    assert kube.request("DELETE", f"{KUEUE}/namespaces/{TEAM_NS}/localqueues/{lq}").status == 200
    flavor = _names(stack, f"{KUEUE}/resourceflavors")[0]
    patch = {"metadata": {"labels": {"left": "yes"}}}
    merge = "application/merge-patch+json"
    assert (
        kube.request("PATCH", f"{KUEUE}/resourceflavors/{flavor}", body=patch, content_type=merge).status
        == 200
    )
    gpu_nodes = [fleet.node_name(i) for i in stack.instances]
    node_patch = {
        "metadata": {"labels": {"left": "yes", "node.kubernetes.io/instance-type": None}},
        "spec": {"unschedulable": True, "taints": [{"key": "left", "value": "yes", "effect": "NoSchedule"}]},
    }
    assert (
        kube.request("PATCH", f"/api/v1/nodes/{gpu_nodes[0]}", body=node_patch, content_type=merge).status
        == 200
    )
    assert kube.request("DELETE", f"/api/v1/nodes/{gpu_nodes[1]}").status == 200
    stack.add_instances([fleet.FleetGroup("p5.48xlarge", 2)])
    assert kube.request(
        "POST", "/_emulator/faults", body={"path": "/left-behind", "status": 500, "times": -1}
    ).status
    _http(f"{stack.aws_url}/_topogov/dynamodb/faults", "POST", {"action": "DescribeContinuousBackups",
                                                                 "code": "ThrottlingException"})  # fmt: skip
    _http(f"{stack.aws_url}/_topogov/ec2/config", "POST", {"default_max_results": 7})
    dynamodb = stack.client("dynamodb")
    item = {"team": {"S": "team-c"}, "name": {"S": "written-directly"}, "state": {"S": "x"}}
    dynamodb.put_item(TableName=stack.names["TOPOGOV_LEDGER_TABLE"], Item=item)
    bucket = stack.names["TOPOGOV_SNAPSHOT_BUCKET"]
    stack.client("s3").put_object(Bucket=bucket, Key="left-behind", Body=b"x")
    stack.client("s3").delete_object(Bucket=bucket, Key="left-behind")  # a delete marker too
    role = stack.api_env()
    as_api = boto3.client(
        "dynamodb",
        endpoint_url=stack.aws_url,
        region_name=stack.options.region,
        aws_access_key_id=role["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=role["AWS_SECRET_ACCESS_KEY"],
        aws_session_token=role.get("AWS_SESSION_TOKEN"),
    )
    as_api.get_item(TableName=stack.names["TOPOGOV_LEDGER_TABLE"],
                    Key={"team": {"S": "team-a"}, "name": {"S": "nobody"}})  # fmt: skip
    stack.redeploy(stack.options.policy_file.read_text().replace("team-c", "team-z"))
    stack.build_api_service()
    # (after the redeploy: CloudFormation's update of the functions' reserved concurrency would fail)
    _http(f"{stack.aws_url}/_topogov/lambda/account", "POST", {"concurrent_executions": 10})
    (stack.dir.parent.parent / "left-behind.txt").write_text("x")


def test_a_module_that_leaves_every_kind_of_state_leaves_none_after_the_reset(shared):
    stacks, stack = shared
    before = state(stack)
    leave_everything(stack)
    during = state(stack)
    changed = sorted(k for k in before if during.get(k) != before[k])
    # every part of the state was changed (else the comparison below would prove nothing about it)
    for key in ("nodes", "namespaces", "clusterqueues", "resourceflavors", "kube faults", "dynamodb faults",
                "bucket", "instances", "ec2 settings", "lambda limit", "teams", "files",
                "TOPOGOV_LEDGER_TABLE", f"/api/v1/namespaces/{TEAM_NS}/configmaps",
                "/apis/apps/v1/namespaces/kueue-system/deployments",
                f"{KUEUE}/namespaces/{TEAM_NS}/localqueues"):  # fmt: skip
        assert key in changed, f"the module did not change {key}"
    # the API role's call is in IAM's record, with every decision until now
    api_role = stack.deployment.functions["api"].principal
    recorded = stack.emulator.decisions()
    assert any(d["principal"] == api_role and d["action"] == "dynamodb:GetItem" for d in recorded)
    until = max(d["at"] for d in recorded)
    stacks.reset("api")
    assert not [d for d in stack.emulator.decisions() if d["at"] <= until], "IAM decisions left"
    after = state(stack)
    left = differences(before, after)
    assert not left, "left after the reset (where: before -> after):\n" + "\n".join(left[:40])


def test_a_released_stack_waits_paused_and_the_next_module_gets_it_running_and_reset(shared):
    stacks, stack = shared
    kube = stack.kube()
    # Given a module that leaves an object behind and is done with the stack
    body = {"metadata": {"name": "left-by-a-module"}, "data": {"k": "v"}}
    assert kube.request("POST", f"/api/v1/namespaces/{TEAM_NS}/configmaps", body=body).status == 201
    stacks.release("api")
    # Then every server of the stack (AWS's emulator, the cluster's) is stopped where it stands
    servers = [stack.aws, *stack.cluster.procs]
    for server in servers:
        wait_until(lambda s=server: process_state(s.proc.pid) == "T", f"{server.name} paused", timeout_s=10)
    # When the next module acquires it
    again = stacks.acquire("api")
    # Then it is the same stack, running, answering, and holding nothing of the module before
    assert again is stack
    assert all(process_state(s.proc.pid) != "T" for s in servers)
    assert "left-by-a-module" not in _names(stack, f"/api/v1/namespaces/{TEAM_NS}/configmaps")
    assert stack.client("dynamodb").list_tables()["TableNames"]
