"""The local cluster is the real thing: what a real API server and Kueue refuse, they refuse here
(issue 14). Each object below was accepted by the Python emulator the cluster replaced; the real
kube-apiserver v1.35.4 and Kueue v0.17.0 (CRD schemas, CEL rules, webhooks, conversion) refuse it
with their own status and message. kubectl is the one built from Kubernetes v1.35.4.
"""

from __future__ import annotations

import copy
import json
import subprocess

import pytest

from topogov_local.cluster import build

KUEUE = "/apis/kueue.x-k8s.io/v1beta1"
KUEUE2 = "/apis/kueue.x-k8s.io/v1beta2"


def kubectl(server, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    _cluster, cfg = server
    return subprocess.run(
        [str(build.bin_dir() / "kubectl"), "--kubeconfig", cfg, *args],
        capture_output=True, text=True, timeout=60, check=check,
    )  # fmt: skip


def cq(name: str, **spec) -> dict:
    base = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": 8}]}],
            }
        ],
    }
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": {**base, **spec}}  # fmt: skip


def with_borrowing_limit_but_no_cohort(obj: dict) -> dict:
    obj = copy.deepcopy(obj)
    obj["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] = 4
    return obj


INVALID_KUEUE = {
    # CEL rule of the ClusterQueue CRD: "borrowingLimit must be nil when cohort is empty"
    "borrowingLimit without a cohort": (
        f"{KUEUE}/clusterqueues",
        with_borrowing_limit_but_no_cohort(cq("bl")),
    ),
    "an unknown queueingStrategy": (f"{KUEUE}/clusterqueues", cq("qs", queueingStrategy="Random")),
    "an unknown stopPolicy": (f"{KUEUE}/clusterqueues", cq("sp", stopPolicy="Pause")),
    "an unknown preemption policy": (
        f"{KUEUE}/clusterqueues",
        cq("pre", preemption={"withinClusterQueue": "Always"}),
    ),
    "a negative nominal quota": (
        f"{KUEUE}/clusterqueues",
        cq(
            "neg",
            resourceGroups=[
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": "-1"}]}],
                }
            ],
        ),
    ),
    "a flavor resource not covered": (
        f"{KUEUE}/clusterqueues",
        cq(
            "cov",
            resourceGroups=[
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {"name": "default", "resources": [{"name": "memory", "nominalQuota": "1Gi"}]}
                    ],
                }
            ],
        ),
    ),
    "a Topology with hostname above the lowest level": (
        f"{KUEUE}/topologies",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "Topology",
            "metadata": {"name": "t"},
            "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}, {"nodeLabel": "rack"}]},
        },
    ),
    "a topologyName without nodeLabels": (
        f"{KUEUE}/resourceflavors",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "ResourceFlavor",
            "metadata": {"name": "rf"},
            "spec": {"topologyName": "t"},
        },
    ),
    "a WorkloadPriorityClass without a value": (
        f"{KUEUE}/workloadpriorityclasses",
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "WorkloadPriorityClass", "metadata": {"name": "w"}},
    ),
}


# Refused by Kueue's validating webhook (403 Forbidden, "admission webhook ... denied the request"),
# the others by the CRD's schema or CEL rules (422 Invalid).
BY_WEBHOOK = {"a negative nominal quota", "a flavor resource not covered"}


@pytest.mark.parametrize("case", list(INVALID_KUEUE))
def test_kueue_refuses_what_its_crds_and_webhooks_refuse(kube, case):
    path, obj = INVALID_KUEUE[case]
    resp = kube.request("POST", path, body=obj)
    if case in BY_WEBHOOK:
        assert resp.status == 403 and resp.body["reason"] == "Forbidden", (resp.status, resp.body)
        assert "admission webhook" in resp.body["message"] and "denied the request" in resp.body["message"]
    else:
        assert resp.status in (400, 422), (resp.status, resp.body)
        assert resp.body["reason"] in ("Invalid", "BadRequest"), resp.body
    assert resp.body["kind"] == "Status" and resp.body["message"], resp.body


def test_an_immutable_field_cannot_change(kube):
    """``Topology.spec.levels`` and a LocalQueue's ``clusterQueue`` are immutable (CEL ``self ==
    oldSelf``), a flavor's ``topologyName`` once set (what the governor re-creates flavors for)."""
    topo = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Topology", "metadata": {"name": "imm"},
            "spec": {"levels": [{"nodeLabel": "rack"}, {"nodeLabel": "kubernetes.io/hostname"}]}}  # fmt: skip
    assert kube.request("POST", f"{KUEUE}/topologies", body=topo).status == 201
    patch = {"spec": {"levels": [{"nodeLabel": "block"}, {"nodeLabel": "kubernetes.io/hostname"}]}}
    resp = kube.request(
        "PATCH", f"{KUEUE}/topologies/imm", body=patch, content_type="application/merge-patch+json"
    )
    assert resp.status == 422 and "immutable" in resp.body["message"], resp.body
    rf = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "rf-imm"},
          "spec": {"nodeLabels": {"a": "b"}, "topologyName": "imm"}}  # fmt: skip
    assert kube.request("POST", f"{KUEUE}/resourceflavors", body=rf).status == 201
    resp = kube.request(
        "PATCH", f"{KUEUE}/resourceflavors/rf-imm", body={"spec": {"topologyName": "other"}},
        content_type="application/merge-patch+json",
    )  # fmt: skip
    assert resp.status == 422 and "topologyName is immutable" in resp.body["message"], resp.body


def test_a_v1beta2_read_of_a_clusterqueue_has_cohort_name(kube):
    """Kueue's conversion webhook: written as v1beta1 (``cohort``), read as v1beta2 (``cohortName``)."""
    obj = cq("conv", cohort="team-cohort")
    assert kube.request("POST", f"{KUEUE}/clusterqueues", body=obj).status == 201
    spec = kube.request("GET", f"{KUEUE2}/clusterqueues/conv").body["spec"]
    assert spec["cohortName"] == "team-cohort" and "cohort" not in spec


INVALID_BUILTINS = {
    "a Node with unschedulable: 'yes'": (
        "/api/v1/nodes",
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "bad"}, "spec": {"unschedulable": "yes"}},
        400,
    ),
    "a Job with parallelism -1": (
        "/apis/batch/v1/namespaces/default/jobs",
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "neg"},
            "spec": {
                "parallelism": -1,
                "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}},
            },
        },
        422,
    ),
    "a Job with restartPolicy Always": (
        "/apis/batch/v1/namespaces/default/jobs",
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "always"},
            "spec": {
                "template": {"spec": {"restartPolicy": "Always", "containers": [{"name": "c", "image": "x"}]}}
            },
        },
        422,
    ),
    "a Namespace with an invalid name": (
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "Not_A_Name"}},
        422,
    ),
}


@pytest.mark.parametrize("case", list(INVALID_BUILTINS))
def test_the_api_server_refuses_invalid_builtins(kube, case):
    path, obj, status = INVALID_BUILTINS[case]
    resp = kube.request("POST", path, body=obj)
    assert resp.status == status, (resp.status, resp.body)
    assert resp.body["kind"] == "Status" and resp.body["message"], resp.body


def test_kubectl_explain_auth_can_i_create_job_and_drain_work(server, kube):
    assert "resourceGroups" in kubectl(server, "explain", "clusterqueue.spec").stdout
    can = kubectl(server, "auth", "can-i", "patch", "nodes", "--as", "x", "--as-group", "topogov:reconciler",
                  check=False)  # fmt: skip
    assert can.stdout.strip() == "no"  # (this cluster has no deploy/rbac.yaml; the local stack's does)
    assert kubectl(server, "auth", "can-i", "create", "jobs").stdout.strip() == "yes"
    out = kubectl(server, "create", "job", "hello", "--image=busybox", "--", "sleep", "1").stdout
    assert "job.batch/hello created" in out
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "drainme", "annotations": {"kwok.x-k8s.io/node": "fake"}},
            "status": {"allocatable": {"cpu": "4", "memory": "4Gi", "pods": "10"},
                       "capacity": {"cpu": "4", "memory": "4Gi", "pods": "10"}}}  # fmt: skip
    assert kube.request("POST", "/api/v1/nodes", body=node).status == 201
    drained = kubectl(server, "drain", "drainme", "--ignore-daemonsets", "--timeout=60s")
    assert "drained" in drained.stdout, drained
    spec = json.loads(kubectl(server, "get", "node", "drainme", "-o", "json").stdout)["spec"]
    assert spec["unschedulable"] is True
