"""The Kubernetes adapter (the kubernetes client's ApiClient) against the local Kubernetes API."""

from __future__ import annotations

import time

import pytest

from topogov.adapters.kube import KubeHttp, KubeNodes, PatchOutcome
from topogov.adapters.kube_auth import kubeconfig_api_client
from topogov_local.cluster.controlplane import write_kubeconfig


def node(name, labels=None):
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"providerID": f"aws:///us-east-1a/i-{abs(hash(name)) % 16**17:017x}"},
        "status": {"allocatable": {"nvidia.com/gpu": "8", "cpu": "192", "memory": "2Ti"}},
    }


def fault(kube, **rule):
    assert kube.request("POST", "/_emulator/faults", body=rule).status in (200, 201)


def test_lists_every_node_across_pages(kube):
    for i in range(25):
        kube.request("POST", "/api/v1/nodes", body=node(f"n{i:02d}"))
    nodes = KubeNodes(kube, page_size=10)
    reads = kube.counters.reads
    names = [o.name for o in nodes.list_nodes()]
    assert names == sorted(f"n{i:02d}" for i in range(25))
    assert kube.counters.reads - reads == 3


def test_patch_touches_only_the_given_labels_and_removes_with_none(kube):
    kube.request(
        "POST", "/api/v1/nodes", body=node("a", {"team": "x", "topology.k8s.aws/network-node-layer-4": "d"})
    )
    result = KubeNodes(kube).patch_labels(
        "a", {"topology.k8s.aws/network-node-layer-1": "nn-1", "topology.k8s.aws/network-node-layer-4": None}
    )
    assert result.outcome is PatchOutcome.PATCHED
    labels = kube.request("GET", "/api/v1/nodes/a").body["metadata"]["labels"]
    assert labels == {"team": "x", "topology.k8s.aws/network-node-layer-1": "nn-1"}


def test_a_node_deleted_between_list_and_patch_is_gone_not_an_error(kube):
    kube.request("POST", "/api/v1/nodes", body=node("b"))
    fault(kube, method="PATCH", path="/api/v1/nodes/b$", delete_before=True, times=1)
    result = KubeNodes(kube).patch_labels("b", {"x": "y"})
    assert result.outcome is PatchOutcome.GONE and result.status == 404


@pytest.mark.parametrize("status", [409, 429, 500, 503])
def test_transient_errors_are_retried(kube, status):
    kube.request("POST", "/api/v1/nodes", body=node("c"))
    fault(kube, method="PATCH", path="/api/v1/nodes/c$", status=status, times=2)
    retries = kube.counters.retries
    result = KubeNodes(kube).patch_labels("c", {"k": "v"})
    assert result.outcome is PatchOutcome.PATCHED
    assert kube.counters.retries - retries == 2


def test_a_persistent_error_is_a_failed_outcome_not_an_exception(kube):
    kube.request("POST", "/api/v1/nodes", body=node("d"))
    fault(kube, method="PATCH", path="/api/v1/nodes/d$", status=500, times=50)
    result = KubeNodes(kube).patch_labels("d", {"k": "v"})
    assert result.outcome is PatchOutcome.FAILED and result.status == 500


def test_requested_resources_are_summed_per_node_for_unfinished_pods(kube):
    kube.request("POST", "/api/v1/nodes", body=node("e"))

    def pod(name, phase, gpu):
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "nodeName": "e",
                "containers": [
                    # an extended resource needs its limit (the API server refuses it otherwise)
                    {
                        "name": "c",
                        "image": "x",
                        "resources": {
                            "requests": {"nvidia.com/gpu": str(gpu)},
                            "limits": {"nvidia.com/gpu": str(gpu)},
                        },
                    }
                ],
            },
            "status": {"phase": phase},
        }

    for name, phase, gpu in (("p1", "Running", 4), ("p2", "Pending", 2), ("p3", "Succeeded", 8)):
        assert (
            kube.request("POST", "/api/v1/namespaces/default/pods", body=pod(name, phase, gpu)).status == 201
        )
        # status is the kubelet's to set, through the status subresource (create resets it)
        kube.request(
            "PATCH",
            f"/api/v1/namespaces/default/pods/{name}/status",
            body={"status": {"phase": phase}},
            content_type="application/merge-patch+json",
        )
    assert KubeNodes(kube).requested_by_node()["e"].gpu == 6


def test_a_wrong_token_is_refused(server, tmp_path):
    cluster, _ = server
    cfg = tmp_path / "bad"
    write_kubeconfig(cfg, cluster.url, cluster.pki.ca, token="wrong")
    resp = KubeHttp(kubeconfig_api_client(str(cfg)), max_attempts=1).request("GET", "/api/v1/nodes")
    assert resp.status == 401


# --- one pager for every list: an expired continue token starts the list over ------------------
EXPIRED = {"method": "GET", "query": "continue=", "status": 410, "message": "The provided continue "
           "parameter is too old to display a consistent list result."}  # fmt: skip


def test_an_expired_continue_token_starts_the_list_over_without_duplicates(kube):
    # Given 25 nodes read 10 a page, and the second page's continue token expired (410 Expired)
    for i in range(25):
        kube.request("POST", "/api/v1/nodes", body=node(f"x{i:02d}"))
    fault(kube, path="^/api/v1/nodes$", times=1, **EXPIRED)
    reads = kube.counters.reads
    # When the nodes are listed
    names = [o.name for o in KubeNodes(kube, page_size=10).list_nodes()]
    # Then every node is there once: the first page was dropped and the list read again whole
    assert names == sorted(f"x{i:02d}" for i in range(25))
    assert kube.counters.reads - reads == 2 + 3


def test_a_token_that_keeps_expiring_is_an_error_not_a_partial_list(kube):
    from topogov.adapters.kube import MAX_LIST_RESTARTS
    from topogov.domain.errors import KubernetesError

    for i in range(3):
        kube.request("POST", "/api/v1/nodes", body=node(f"y{i}"))
    fault(kube, path="^/api/v1/nodes$", times=-1, **EXPIRED)
    reads = kube.counters.reads
    with pytest.raises(KubernetesError) as err:
        KubeNodes(kube, page_size=2).list_nodes()
    assert err.value.status == 410
    assert kube.counters.reads - reads == 2 * (MAX_LIST_RESTARTS + 1)


def test_the_pod_sums_start_over_with_the_list(kube):
    # Given 5 pods of 1 GPU each on a node, read 2 a page, the second page's token expired
    kube.request("POST", "/api/v1/nodes", body=node("f"))
    for i in range(5):
        one = {"name": "c", "image": "x", "resources": {"requests": {"nvidia.com/gpu": "1"},
                                                        "limits": {"nvidia.com/gpu": "1"}}}  # fmt: skip
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"q{i}", "namespace": "default"},
                "spec": {"nodeName": "f", "containers": [one]}}  # fmt: skip
        assert kube.request("POST", "/api/v1/namespaces/default/pods", body=body).status == 201
    fault(kube, path="^/api/v1/pods$", query="continue=", times=1, status=410)
    # Then the node's sum is 5 GPUs, not the first pages' counted twice
    assert KubeNodes(kube, page_size=2).requested_by_node()["f"].gpu == 5


def test_no_adapter_pages_a_list_but_the_one_pager():
    import re
    from pathlib import Path

    adapters = Path(__file__).resolve().parents[2] / "lambdas" / "topogov" / "adapters"
    loops = {p.name for p in adapters.glob("*.py") if re.search(r"""\[["']continue["']\]""", p.read_text())}
    assert loops == {"kube.py"}, loops  # KubeHttp.pages


def wait_for(check, timeout_s, what):
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _job(name):
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "suspend": True,
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}
            },
        },
    }


def test_a_listed_job_keeps_its_view_until_it_changes_and_leaves_with_it(kube):
    from topogov.adapters.kube_jobs import KubeJobs

    kube.request("POST", "/api/v1/namespaces", body={"metadata": {"name": "views"}})
    for name in ("a", "b"):
        assert kube.request("POST", "/apis/batch/v1/namespaces/views/jobs", body=_job(name)).status == 201
    jobs = KubeJobs(kube)

    def settled():  # the Job controller has written what it writes for a suspended Job
        listed = jobs.list_jobs("views")
        return len(listed) == 2 and all(any(c.type == "Suspended" for c in j.conditions) for j in listed)

    wait_for(settled, 60, "the Job controller to mark both Jobs suspended")
    first = {j.name: j for j in jobs.list_jobs("views")}
    again = {j.name: j for j in jobs.list_jobs("views")}
    assert again["a"] is first["a"] and again["b"] is first["b"]  # same resourceVersion: the same view
    patch = [{"op": "add", "path": "/metadata/labels", "value": {"changed": "yes"}}]
    resp = kube.request(
        "PATCH",
        "/apis/batch/v1/namespaces/views/jobs/a",
        body=patch,
        content_type="application/json-patch+json",
    )
    assert resp.status == 200
    # a Job's DELETE orphans its pods by default (a finalizer the garbage collector removes later):
    # Background deletes it at once; the listing after it is gone must not have it
    kube.request(
        "DELETE", "/apis/batch/v1/namespaces/views/jobs/b", query={"propagationPolicy": "Background"}
    )
    wait_for(
        lambda: kube.request("GET", "/apis/batch/v1/namespaces/views/jobs/b").status == 404, 60, "Job b to go"
    )
    after = {j.name: j for j in jobs.list_jobs("views")}
    assert after["a"] is not first["a"] and after["a"].labels == {"changed": "yes"}
    assert "b" not in after
