"""A started local stack put back as it was just after its start, so that one stack can serve test
module after test module (tests/stacks.py, ``SharedStacks``) without anything of one module reaching
the next: :class:`Baseline` records what the stack holds once started (and seeded, and after its
first pass when the suite runs one); :func:`reset` removes what came since and puts back what was
changed, on every side of the stack:

* the cluster: Jobs, Workloads, Pods, Events and every other listed kind in the namespaces (the ones
  created since are deleted whole), Kueue's cluster-scoped objects and LocalQueues (created ones
  deleted, changed ones given their recorded spec, labels and annotations back, removed ones made
  again), Nodes (added ones deleted; labels, annotations, taints and cordons as recorded; removed ones
  registered again), the fault proxy's faults and request counts;
* AWS: the deployed tables emptied, every version of every object of the snapshot bucket deleted,
  instances launched since terminated, DynamoDB faults cleared, the DescribeInstanceTopology and
  Lambda account settings as recorded, the IAM decisions (returned, for the caller's least-privilege
  check, then cleared), the policy deployed at the start deployed again if a redeploy changed it;
* the API: its service built again (no cache of an earlier snapshot);
* files: anything written beside the stack's directory (its parent's parent, where ``topogov
  local`` ran) since the start.

Waits are on the thing itself (the objects gone, Kueue's queues empty), never on a deadline alone.
"""

from __future__ import annotations

import copy
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from topogov_local.processes import spent

if TYPE_CHECKING:
    from topogov_local.deployment import Deployment
    from topogov_local.stack import LocalStack

KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
KUEUE_CLUSTER = ("clusterqueues", "resourceflavors", "topologies", "cohorts", "workloadpriorityclasses")
# Namespaced kinds whose objects a module may leave: (list path under the namespace, delete whole
# collection). Jobs first (their pods follow them), Kueue's Workloads after (their finalizer is
# Kueue's), then the rest.
# the training kinds first (their Jobs, pods and Services follow them; a kind not served lists
# nothing), then the Jobs
TRAINING_JOBS = (
    ("/apis/kubeflow.org/v1/namespaces/{ns}/pytorchjobs", True),
    ("/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets", True),
    ("/apis/sagemaker.amazonaws.com/v1/namespaces/{ns}/hyperpodpytorchjobs", True),
)
NAMESPACED = (
    *TRAINING_JOBS,
    ("/apis/batch/v1/namespaces/{ns}/jobs", True),
    (KUEUE + "/namespaces/{ns}/workloads", True),
    ("/api/v1/namespaces/{ns}/pods", True),
    ("/api/v1/namespaces/{ns}/events", True),
    ("/apis/events.k8s.io/v1/namespaces/{ns}/events", True),
    (KUEUE + "/namespaces/{ns}/localqueues", False),  # as recorded: the governor made them
    ("/api/v1/namespaces/{ns}/configmaps", False),
    ("/api/v1/namespaces/{ns}/secrets", False),
    ("/api/v1/namespaces/{ns}/serviceaccounts", False),
    ("/api/v1/namespaces/{ns}/resourcequotas", False),
    ("/api/v1/namespaces/{ns}/limitranges", False),
    ("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles", False),
    ("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings", False),
    ("/apis/coordination.k8s.io/v1/namespaces/{ns}/leases", False),
    ("/apis/apps/v1/namespaces/{ns}/deployments", False),
    ("/apis/apps/v1/namespaces/{ns}/statefulsets", False),
    ("/apis/apps/v1/namespaces/{ns}/daemonsets", False),
    ("/apis/batch/v1/namespaces/{ns}/cronjobs", False),
    ("/api/v1/namespaces/{ns}/services", False),  # a rendered Job's headless Service
)
WAITED = len(TRAINING_JOBS) + 3  # what the reset waits to see gone: the jobs of every kind, Workloads, pods
# Namespaces the reset only compares with the record (what was made since deleted), never empties:
# the system's own; and two whose objects the control plane makes and removes itself (controllers'
# leases, the nodes' heartbeats) and no test writes.
SYSTEM_NAMESPACES = frozenset({"default", "kube-public", "kueue-system"})
UNTOUCHED_NAMESPACES = frozenset({"kube-system", "kube-node-lease"})
NOW = {"propagationPolicy": "Background", "gracePeriodSeconds": 0}
EC2_SETTINGS = ("rate", "burst", "default_max_results", "id_page_size", "enforce_regions", "unknown_ids")


def _items(kube: Any, path: str) -> list[dict[str, Any]]:
    resp = kube.request("GET", path)
    return list(resp.body.get("items") or []) if resp.status == 200 else []


def _kept(obj: dict[str, Any]) -> dict[str, Any]:
    """What the reset restores of an object: its spec, labels and annotations (and, for a Node, its
    taints and cordon: they are in its spec)."""
    meta = obj.get("metadata") or {}
    return {
        "labels": dict(meta.get("labels") or {}),
        "annotations": dict(meta.get("annotations") or {}),
        "spec": copy.deepcopy(obj.get("spec")),
    }


def _fresh(obj: dict[str, Any], node: bool = False) -> dict[str, Any]:
    """``obj`` as a create request: no server-set metadata; of the status only what a Node is
    registered with (its capacity and allocatable, as the kubelet registers it, fleet.node_object)."""
    meta = obj["metadata"]
    keep = {k: meta[k] for k in ("name", "namespace", "labels", "annotations") if k in meta}
    out = {k: v for k, v in obj.items() if k not in ("metadata", "status")} | {"metadata": keep}
    status = obj.get("status") or {}
    if node:
        out["status"] = {k: status[k] for k in ("capacity", "allocatable") if k in status}
    return out


@dataclass
class Baseline:
    """What a started stack holds, as :func:`reset` puts it back."""

    namespaces: dict[str, dict[str, set[str]]]  # namespace -> list path -> names
    nodes: dict[str, dict[str, Any]]  # name -> the Node as recorded
    kueue: dict[str, dict[str, dict[str, Any]]]  # list path -> name -> the object as recorded
    instances: set[str]  # running EC2 instance ids
    ec2: dict[str, Any]
    lambda_limit: int
    deployment: Deployment
    policy_text: str
    files: set[str]  # entries beside the stack's directory

    @classmethod
    def take(cls, stack: LocalStack) -> Baseline:
        kube = stack.cluster.admin() if stack.cluster else stack.kube()
        namespaces = {
            ns["metadata"]["name"]: {
                path: {o["metadata"]["name"] for o in _items(kube, path.format(ns=ns["metadata"]["name"]))}
                for path, _ in NAMESPACED
            }
            for ns in _items(kube, "/api/v1/namespaces")
        }
        kueue = {
            f"{KUEUE}/{p}": {o["metadata"]["name"]: o for o in _items(kube, f"{KUEUE}/{p}")}
            for p in KUEUE_CLUSTER
        }
        for ns in namespaces:
            path = f"{KUEUE}/namespaces/{ns}/localqueues"
            kueue[path] = {o["metadata"]["name"]: o for o in _items(kube, path)}
        assert stack.emulator is not None and stack.deployment is not None
        ec2 = stack.emulator.control("GET", "/_topogov/ec2/config")
        limit = stack.emulator.control("GET", "/_topogov/lambda/account")["concurrent_executions"]
        return cls(
            namespaces=namespaces,
            nodes={n["metadata"]["name"]: n for n in _items(kube, "/api/v1/nodes")},
            kueue=kueue,
            instances=running_instances(stack),
            ec2={k: ec2[k] for k in EC2_SETTINGS if k in ec2},
            lambda_limit=int(limit),
            deployment=stack.deployment,
            policy_text=Path(stack.options.policy_file).read_text(encoding="utf-8"),
            files=set(_beside(stack)),
        )


def _beside(stack: LocalStack) -> list[str]:
    root = stack.dir.parent.parent
    return sorted(p.name for p in root.iterdir()) if root.is_dir() else []


def running_instances(stack: LocalStack) -> set[str]:
    ids: set[str] = set()
    pages = (
        stack.client("ec2")
        .get_paginator("describe_instances")
        .paginate(
            Filters=[{"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]}]
        )
    )
    for page in pages:
        ids.update(i["InstanceId"] for r in page["Reservations"] for i in r["Instances"])
    return ids


def reset(stack: LocalStack, baseline: Baseline, timeout_s: float = 120) -> list[dict[str, Any]]:
    """Put ``stack`` back as ``baseline`` recorded it; returns the IAM decisions that refused a
    function's call since the last reset (the caller fails its module on any)."""
    started = time.monotonic()
    deadline = started + timeout_s
    assert stack.cluster is not None and stack.emulator is not None
    kube = stack.cluster.admin()
    proxy = stack.kube()
    proxy.request("DELETE", "/_emulator/faults")
    stack.emulator.control("DELETE", "/_topogov/dynamodb/faults")
    stack.emulator.control("POST", "/_topogov/ec2/config", baseline.ec2)
    stack.emulator.control(
        "POST", "/_topogov/lambda/account", {"concurrent_executions": baseline.lambda_limit}
    )
    if stack.deployment is not baseline.deployment:  # a module redeployed another policy
        stack.redeploy(baseline.policy_text)
        baseline.deployment = stack.deployment  # type: ignore[assignment]
    _reset_namespaces(kube, baseline, deadline)
    _reset_kueue(kube, baseline, deadline)
    _reset_nodes(stack, kube, baseline)
    _reset_aws(stack, baseline)
    denied = take_iam_decisions(stack)
    _reset_files(stack, baseline)
    if stack.api is not None:
        stack.build_api_service()
    proxy.request("DELETE", "/_emulator/requests")
    spent("stack reset", time.monotonic() - started)
    return denied


def _wait(what: str, left: Callable[[], list[str]], deadline: float) -> None:
    while True:
        remaining = left()
        if not remaining:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"reset: {what} still there: {', '.join(remaining[:8])}")
        time.sleep(0.1)


def _reset_namespaces(kube: Any, baseline: Baseline, deadline: float) -> None:
    """Namespaces made since deleted whole; in the others, what was made since deleted (Jobs,
    Workloads, Pods and Events all of them), waited for until gone."""
    current = [n["metadata"]["name"] for n in _items(kube, "/api/v1/namespaces")]
    for ns in current:
        if ns not in baseline.namespaces:
            kube.request("DELETE", f"/api/v1/namespaces/{ns}", query=NOW)
    kept = [ns for ns in current if ns in baseline.namespaces and ns not in UNTOUCHED_NAMESPACES]
    for ns in kept:
        for template, whole in NAMESPACED:
            path = template.format(ns=ns)
            if whole and ns not in SYSTEM_NAMESPACES:
                kube.request("DELETE", path, query=NOW)
                continue
            for obj in _items(kube, path):
                if obj["metadata"]["name"] not in baseline.namespaces[ns][template]:
                    kube.request("DELETE", f"{path}/{obj['metadata']['name']}", query=NOW)

    def left() -> list[str]:
        out = [ns for ns in (n["metadata"]["name"] for n in _items(kube, "/api/v1/namespaces"))
               if ns not in baseline.namespaces]  # fmt: skip
        for ns in kept:
            if ns in SYSTEM_NAMESPACES:
                continue
            for template in NAMESPACED[:WAITED]:
                out += [f"{ns}/{o['metadata']['name']}" for o in _items(kube, template[0].format(ns=ns))]
        return out

    _wait("namespaced objects", left, deadline)


def _reset_kueue(kube: Any, baseline: Baseline, deadline: float) -> None:
    """Kueue's objects as recorded, then its queues empty (no admitted, reserving or pending
    Workload counted in any ClusterQueue's status): Kueue has seen the Workloads go."""
    for path, recorded in baseline.kueue.items():
        current = {o["metadata"]["name"]: o for o in _items(kube, path)}
        for name, obj in current.items():
            if name not in recorded:
                kube.request("DELETE", f"{path}/{name}")
            elif _kept(obj) != _kept(recorded[name]):
                kept = _kept(recorded[name])
                body = {**obj, "spec": kept["spec"]}
                body["metadata"] = {
                    **obj["metadata"],
                    "labels": kept["labels"],
                    "annotations": kept["annotations"],
                }
                resp = kube.request("PUT", f"{path}/{name}", body=body)
                if resp.status != 200:
                    raise RuntimeError(f"reset: PUT {path}/{name}: HTTP {resp.status} {resp.body}")
        for name, obj in recorded.items():
            if name not in current:
                resp = kube.request("POST", path, body=_fresh(obj))
                if resp.status not in (200, 201):
                    raise RuntimeError(f"reset: POST {path} {name}: HTTP {resp.status} {resp.body}")

    def left() -> list[str]:
        out = [
            f"{path}/{o['metadata']['name']}"
            for path, recorded in baseline.kueue.items()
            for o in _items(kube, path)
            if o["metadata"]["name"] not in recorded
        ]
        for cq in _items(kube, f"{KUEUE}/clusterqueues"):
            status = cq.get("status") or {}
            if any(status.get(k) for k in ("admittedWorkloads", "reservingWorkloads", "pendingWorkloads")):
                out.append(f"workloads counted in {cq['metadata']['name']}")
        return out

    _wait("Kueue objects", left, deadline)


def _reset_nodes(stack: LocalStack, kube: Any, baseline: Baseline) -> None:
    """Nodes added since deleted, the recorded ones' labels, annotations, taints and cordon put
    back (a merge patch: ``None`` removes a key), removed ones registered again and waited Ready."""
    current = {n["metadata"]["name"]: n for n in _items(kube, "/api/v1/nodes")}
    for name in current.keys() - baseline.nodes.keys():
        kube.request("DELETE", f"/api/v1/nodes/{name}", query=NOW)
    for name, node in current.items():
        recorded = baseline.nodes.get(name)
        if recorded is None or _node_state(node) == _node_state(recorded):
            continue
        want, have = _kept(recorded), _kept(node)
        patch = {
            "metadata": {
                "labels": {**dict.fromkeys(have["labels"]), **want["labels"]},
                "annotations": {**dict.fromkeys(have["annotations"]), **want["annotations"]},
            },
            "spec": {
                "taints": (want["spec"] or {}).get("taints"),
                "unschedulable": (want["spec"] or {}).get("unschedulable"),
            },
        }
        resp = kube.request(
            "PATCH", f"/api/v1/nodes/{name}", body=patch, content_type="application/merge-patch+json"
        )
        if resp.status != 200:
            raise RuntimeError(f"reset: PATCH node {name}: HTTP {resp.status} {resp.body}")
    missing = [n for n in baseline.nodes if n not in current]
    for name in missing:
        kube.request("POST", "/api/v1/nodes", body=_fresh(baseline.nodes[name], node=True))
    if missing and stack.options.simulated_nodes:
        stack.wait_nodes_settled(missing)


def _node_state(node: dict[str, Any]) -> tuple[Any, ...]:
    spec = node.get("spec") or {}
    meta = node["metadata"]
    return (
        meta.get("labels") or {},
        meta.get("annotations") or {},
        spec.get("taints"),
        spec.get("unschedulable"),
    )


def _reset_aws(stack: LocalStack, baseline: Baseline) -> None:
    """The deployed tables emptied, the bucket's every version and delete marker removed, the
    instances launched since terminated."""
    names = stack.names
    dynamodb = stack.client("dynamodb")
    for var, table in names.items():
        if var.endswith("_TABLE"):
            _empty_table(dynamodb, table)
    s3 = stack.client("s3")
    bucket = names["TOPOGOV_SNAPSHOT_BUCKET"]
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
        doomed = [
            {"Key": v["Key"], "VersionId": v["VersionId"]}
            for v in [*page.get("Versions", []), *page.get("DeleteMarkers", [])]
        ]
        if doomed:
            s3.delete_objects(Bucket=bucket, Delete={"Objects": doomed, "Quiet": True})
    extra = sorted(running_instances(stack) - baseline.instances)
    for i in range(0, len(extra), 500):
        stack.client("ec2").terminate_instances(InstanceIds=extra[i : i + 500])
    stack.instances[:] = [i for i in stack.instances if i["InstanceId"] in baseline.instances]


def _empty_table(dynamodb: Any, table: str) -> None:
    keys = [k["AttributeName"] for k in dynamodb.describe_table(TableName=table)["Table"]["KeySchema"]]
    for page in dynamodb.get_paginator("scan").paginate(TableName=table, ConsistentRead=True):
        items = page.get("Items", [])
        for i in range(0, len(items), 25):
            requests = [{"DeleteRequest": {"Key": {k: item[k] for k in keys}}} for item in items[i : i + 25]]
            while requests:
                resp = dynamodb.batch_write_item(RequestItems={table: requests})
                requests = resp.get("UnprocessedItems", {}).get(table, [])


def take_iam_decisions(stack: LocalStack) -> list[dict[str, Any]]:
    """The refusals of the functions' calls since the last reset, then the record cleared (and
    sessions judged again, should a module have turned that off)."""
    assert stack.emulator is not None
    denied = stack.iam_record().denied
    stack.emulator.clear_decisions()
    stack.emulator.enforce_sessions(True)
    return denied


def _reset_files(stack: LocalStack, baseline: Baseline) -> None:
    root = stack.dir.parent.parent
    for name in set(_beside(stack)) - baseline.files:
        path = root / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
