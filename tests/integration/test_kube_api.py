"""The local Kubernetes API emulator, driven over real HTTP by the real `kubernetes` client and `kubectl`.

Every test resets the emulator first (``POST /_emulator/reset``), so each one starts from the three
default namespaces and no fault rules.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from topogov_local.kube_api import KubeApiServer, write_kubeconfig

TOKEN = "test-token-123"
LAYER1 = "topology.k8s.aws/network-node-layer-1"
LAYER2 = "topology.k8s.aws/network-node-layer-2"
ROOT = Path(__file__).resolve().parents[2]


# -- fixtures -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server():
    srv = KubeApiServer(token=TOKEN).start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def kubeconfig(server, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("kube") / "kubeconfig"
    write_kubeconfig(path, server.url, TOKEN)
    return path


@pytest.fixture(scope="module")
def api(kubeconfig):
    cfg = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=cfg)
    with client.ApiClient(cfg) as api_client:
        yield api_client


@pytest.fixture
def core(api) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture
def batch(api) -> client.BatchV1Api:
    return client.BatchV1Api(api)


@pytest.fixture
def custom(api) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


@pytest.fixture(autouse=True)
def clean(server):
    emulator(server, "POST", "/_emulator/reset")
    emulator(server, "DELETE", "/_emulator/faults")
    yield


@pytest.fixture(scope="module")
def kubectl(kubeconfig, tmp_path_factory):
    exe = shutil.which("kubectl")
    if not exe:
        pytest.skip("kubectl is not installed")
    cache = tmp_path_factory.mktemp("kubectl-cache")

    def run(*args: str, check: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        out = subprocess.run(
            [exe, "--kubeconfig", str(kubeconfig), "--cache-dir", str(cache), *args],
            capture_output=True,
            text=True,
            timeout=60,
            input=stdin,
            check=False,
        )
        if check:
            assert out.returncode == 0, f"kubectl {' '.join(args)}: {out.stderr}"
        return out

    return run


# -- helpers ------------------------------------------------------------------------------------------


def http(
    server: KubeApiServer,
    method: str,
    path: str,
    body: Any = None,
    *,
    token: str | None = TOKEN,
    content_type: str = "application/json",
    accept: str = "application/json",
    raw: bytes | None = None,
) -> tuple[int, Any, dict[str, str]]:
    """One plain-HTTP request; returns (status, parsed JSON or text, headers)."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(server.url + path, data=data, method=method)
    req.add_header("Accept", accept)
    if data is not None:
        req.add_header("Content-Type", content_type)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            status, payload, headers = resp.status, resp.read(), dict(resp.headers)
    except urllib.error.HTTPError as err:
        status, payload, headers = err.code, err.read(), dict(err.headers)
    try:
        return status, json.loads(payload), headers
    except ValueError:
        return status, payload.decode(), headers


def emulator(server: KubeApiServer, method: str, path: str, body: Any = None) -> Any:
    status, payload, _ = http(server, method, path, body, token=None)
    assert status < 300, payload
    return payload


def node_body(name: str, labels: dict[str, str] | None = None, ready: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"providerID": f"aws:///us-east-1a/i-{abs(hash(name)) % 10**12:012d}"},
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True" if ready else "False", "reason": "KubeletReady"}
            ],
            "nodeInfo": {
                "kubeletVersion": "v1.32.1-eks-5e0fdde",
                "kubeProxyVersion": "",
                "architecture": "amd64",
                "bootID": "b",
                "machineID": "m",
                "systemUUID": "s",
                "containerRuntimeVersion": "containerd://1.7",
                "kernelVersion": "6.1",
                "operatingSystem": "linux",
                "osImage": "Amazon Linux 2023",
            },
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
            "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
            "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
        },
    }


def pod_body(name: str, node: str | None = None, owner: Any = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if owner is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": owner.metadata.name,
                "uid": owner.metadata.uid,
                "controller": True,
            }
        ]
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": meta, "spec": spec}


def job_body(name: str, **spec: Any) -> dict[str, Any]:
    template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"template": template, **spec},
    }


def status_of(err: ApiException) -> dict[str, Any]:
    return json.loads(err.body)


def names(items: list[Any]) -> list[str]:
    return [i.metadata.name for i in items]


# -- create / get / errors ----------------------------------------------------------------------------


def test_create_then_get_returns_the_object_with_server_set_metadata(core):
    # Given a node created through the client
    created = core.create_node(node_body("n1", {"a": "b"}))
    # When it is read back
    got = core.read_node("n1")
    # Then the server filled in uid, creationTimestamp, resourceVersion and generation
    assert got.metadata.uid == created.metadata.uid and len(got.metadata.uid) == 36
    assert got.metadata.creation_timestamp is not None
    assert got.metadata.resource_version.isdigit()
    assert got.metadata.generation == 1
    assert got.metadata.labels == {"a": "b"}
    # and a node keeps the status it was created with
    assert got.status.conditions[0].type == "Ready"


def test_get_of_a_missing_object_is_a_404_status_in_kube_format(core, batch):
    # When a node and a job that do not exist are read
    with pytest.raises(ApiException) as node_err:
        core.read_node("n1")
    with pytest.raises(ApiException) as job_err:
        batch.read_namespaced_job("j", "default")
    # Then both are 404 Status objects with kube's exact messages and details
    assert node_err.value.status == 404
    assert status_of(node_err.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'nodes "n1" not found',
        "reason": "NotFound",
        "details": {"name": "n1", "kind": "nodes"},
        "code": 404,
    }
    body = status_of(job_err.value)
    assert body["message"] == 'jobs.batch "j" not found'
    assert body["details"] == {"name": "j", "group": "batch", "kind": "jobs"}


def test_creating_an_existing_name_is_a_409_already_exists(core):
    # Given a node
    core.create_node(node_body("n1"))
    # When a second node of the same name is created
    with pytest.raises(ApiException) as err:
        core.create_node(node_body("n1"))
    # Then it is refused with AlreadyExists
    assert err.value.status == 409
    assert status_of(err.value)["reason"] == "AlreadyExists"
    assert status_of(err.value)["message"] == 'nodes "n1" already exists'


def test_namespaced_create_in_a_missing_namespace_is_a_404(core):
    # When a pod is created in a namespace that does not exist
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod("nowhere", pod_body("p"))
    # Then the namespace is reported missing
    assert err.value.status == 404
    assert status_of(err.value)["message"] == 'namespaces "nowhere" not found'


def test_generate_name_gets_a_random_suffix(core):
    # When two config maps are created from the same generateName
    a = core.create_namespaced_config_map("default", {"metadata": {"generateName": "cfg-"}})
    b = core.create_namespaced_config_map("default", {"metadata": {"generateName": "cfg-"}})
    # Then each got a distinct name with a 5-character suffix
    assert a.metadata.name.startswith("cfg-") and len(a.metadata.name) == 9
    assert a.metadata.name != b.metadata.name


def test_invalid_label_value_is_a_422_invalid(core):
    # When a node is created with a label value kube would refuse
    with pytest.raises(ApiException) as err:
        core.create_node(node_body("n1", {"ok": "has spaces"}))
    # Then it is 422 Invalid with kube's field error
    body = status_of(err.value)
    assert err.value.status == 422 and body["reason"] == "Invalid"
    assert body["message"].startswith('Node "n1" is invalid: metadata.labels: Invalid value: "has spaces"')


def test_malformed_json_is_400_and_unknown_patch_type_is_415(server, core):
    # Given a node
    core.create_node(node_body("n1"))
    # When a body is not JSON
    status, body, _ = http(server, "POST", "/api/v1/nodes", raw=b"{not json")
    # Then it is a 400 BadRequest Status
    assert status == 400 and body["reason"] == "BadRequest" and body["kind"] == "Status"
    # When a patch has an unknown content type
    status, body, _ = http(server, "PATCH", "/api/v1/nodes/n1", {}, content_type="text/plain")
    # Then it is 415
    assert status == 415 and body["reason"] == "UnsupportedMediaType"
    # and a strategic merge patch of a custom resource is refused as kube refuses it
    http(
        server,
        "POST",
        "/apis/kueue.x-k8s.io/v1beta1/clusterqueues",
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "cq"}},
    )
    status, _, _ = http(
        server,
        "PATCH",
        "/apis/kueue.x-k8s.io/v1beta1/clusterqueues/cq",
        {"spec": {}},
        content_type="application/strategic-merge-patch+json",
    )
    assert status == 415


def test_requests_without_the_token_are_401_but_health_is_open(server):
    # When the API is called without a token, or with a wrong one
    status, body, _ = http(server, "GET", "/api/v1/nodes", token=None)
    wrong, _, _ = http(server, "GET", "/api/v1/nodes", token="wrong")
    # Then both are 401 Unauthorized Status objects
    assert status == 401 and wrong == 401
    assert body["reason"] == "Unauthorized" and body["code"] == 401
    # while the health endpoints answer without one
    assert http(server, "GET", "/healthz", token=None)[:2] == (200, "ok")
    assert http(server, "GET", "/readyz", token=None)[0] == 200


# -- list: selectors, pagination ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("tier=gpu", ["a", "b"]),
        ("tier==gpu", ["a", "b"]),
        ("tier!=gpu", ["c", "d"]),
        ("zone in (z1,z3)", ["a", "c"]),
        ("zone notin (z1)", ["b", "c", "d"]),
        ("spot", ["b"]),
        ("!spot", ["a", "c", "d"]),
        ("tier=gpu,zone=z2", ["b"]),
        ("tier=gpu,!spot", ["a"]),
    ],
)
def test_label_selectors_support_every_operator(core, selector, expected):
    # Given four nodes with different labels
    core.create_node(node_body("a", {"tier": "gpu", "zone": "z1"}))
    core.create_node(node_body("b", {"tier": "gpu", "zone": "z2", "spot": "true"}))
    core.create_node(node_body("c", {"tier": "cpu", "zone": "z3"}))
    core.create_node(node_body("d", {}))
    # When they are listed with a selector
    got = core.list_node(label_selector=selector)
    # Then exactly the matching ones come back, in name order
    assert names(got.items) == expected


def test_field_selectors_match_names_namespaces_and_dotted_paths(core):
    # Given pods on two nodes in two namespaces, one of them Succeeded
    core.create_namespace({"metadata": {"name": "team-a"}})
    core.create_namespaced_pod("default", pod_body("p1", node="n1"))
    core.create_namespaced_pod("default", pod_body("p2", node="n2"))
    core.create_namespaced_pod("team-a", pod_body("p3", node="n1"))
    core.patch_namespaced_pod_status("p3", "team-a", {"status": {"phase": "Succeeded"}})
    # When pods are listed across namespaces with field selectors
    on_n1 = core.list_pod_for_all_namespaces(field_selector="spec.nodeName=n1")
    running_n1 = core.list_pod_for_all_namespaces(
        field_selector="spec.nodeName=n1,status.phase!=Failed,status.phase!=Succeeded"
    )
    by_name = core.list_pod_for_all_namespaces(field_selector="metadata.name==p2")
    by_ns = core.list_pod_for_all_namespaces(field_selector="metadata.namespace=team-a")
    # Then each selector picks the right pods
    assert names(on_n1.items) == ["p1", "p3"]
    assert names(running_n1.items) == ["p1"]
    assert names(by_name.items) == ["p2"]
    assert names(by_ns.items) == ["p3"]
    # and events can be found by the object they are about
    core.create_namespaced_event(
        "default",
        {
            "metadata": {"name": "e1"},
            "involvedObject": {"kind": "Node", "name": "n1"},
            "reason": "Test",
            "message": "hello",
        },
    )
    events = core.list_event_for_all_namespaces(
        field_selector="involvedObject.name=n1,involvedObject.kind=Node"
    )
    assert names(events.items) == ["e1"]


def test_pagination_returns_every_item_once_in_order(core):
    # Given 25 nodes created in random order
    order = [f"node-{i:02d}" for i in range(25)]
    for name in reversed(order):
        core.create_node(node_body(name))
    # When they are listed 10 at a time, following the continue token
    pages, token = [], None
    while True:
        page = core.list_node(limit=10, _continue=token)
        pages.append(page)
        token = page.metadata._continue
        if not token:
            break
    # Then there are 3 pages, with every name exactly once, in order
    assert [len(p.items) for p in pages] == [10, 10, 5]
    assert [n for p in pages for n in names(p.items)] == order
    assert [p.metadata.remaining_item_count for p in pages] == [15, 5, None]


# -- optimistic concurrency and patches ---------------------------------------------------------------


def test_put_with_a_stale_resource_version_is_a_409_conflict(core):
    # Given a node read by one writer and then changed by another
    stale = core.read_node(core.create_node(node_body("n1")).metadata.name)
    core.patch_node("n1", {"metadata": {"labels": {"x": "1"}}})
    # When the first writer PUTs its stale copy
    stale.metadata.labels = {"y": "2"}
    with pytest.raises(ApiException) as err:
        core.replace_node("n1", stale)
    # Then the server refuses with kube's Conflict
    assert err.value.status == 409
    body = status_of(err.value)
    assert body["reason"] == "Conflict"
    assert body["message"] == (
        'Operation cannot be fulfilled on nodes "n1": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )


def test_patch_carrying_a_stale_resource_version_is_a_409_conflict(core):
    # Given a node whose resourceVersion we remember, then a change
    rv = core.create_node(node_body("n1")).metadata.resource_version
    core.patch_node("n1", {"metadata": {"labels": {"x": "1"}}})
    # When a merge patch names the old resourceVersion
    with pytest.raises(ApiException) as err:
        core.patch_node(
            "n1",
            {"metadata": {"resourceVersion": rv, "labels": {"x": "2"}}},
            _content_type="application/merge-patch+json",
        )
    # Then it is a Conflict, while the current resourceVersion succeeds
    assert err.value.status == 409 and status_of(err.value)["reason"] == "Conflict"
    current = core.read_node("n1").metadata.resource_version
    ok = core.patch_node(
        "n1",
        {"metadata": {"resourceVersion": current, "labels": {"x": "2"}}},
        _content_type="application/merge-patch+json",
    )
    assert ok.metadata.labels["x"] == "2" and int(ok.metadata.resource_version) > int(current)


def test_merge_patch_null_removes_a_label_and_a_no_op_writes_nothing(core):
    # Given a node with two labels
    core.create_node(node_body("n1", {LAYER1: "nn-1", LAYER2: "nn-2"}))
    # When a merge patch sets one of them to null
    patched = core.patch_node(
        "n1", {"metadata": {"labels": {LAYER2: None}}}, _content_type="application/merge-patch+json"
    )
    # Then only that label is gone
    assert patched.metadata.labels == {LAYER1: "nn-1"}
    # and patching to the same value again changes nothing, not even the resourceVersion
    again = core.patch_node(
        "n1", {"metadata": {"labels": {LAYER1: "nn-1"}}}, _content_type="application/merge-patch+json"
    )
    assert again.metadata.resource_version == patched.metadata.resource_version


def test_strategic_merge_patch_merges_lists_by_key(core):
    # Given a pod with two containers
    body = pod_body("p1")
    body["spec"]["containers"] = [
        {"name": "a", "image": "img-a", "env": [{"name": "X", "value": "1"}]},
        {"name": "b", "image": "img-b"},
    ]
    core.create_namespaced_pod("default", body)
    # When a strategic merge patch changes one container's image and env, and deletes the other
    patch = {
        "spec": {
            "containers": [
                {"name": "a", "image": "img-a2", "env": [{"name": "Y", "value": "2"}]},
                {"name": "b", "$patch": "delete"},
            ]
        }
    }
    pod = core.patch_namespaced_pod("p1", "default", patch)  # the client's default: strategic merge
    # Then containers merged by name and env entries by name
    assert [c.name for c in pod.spec.containers] == ["a"]
    assert pod.spec.containers[0].image == "img-a2"
    assert [(e.name, e.value) for e in pod.spec.containers[0].env] == [("X", "1"), ("Y", "2")]
    # and status conditions merge by type through the status subresource
    core.patch_namespaced_pod_status(
        "p1", "default", {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}
    )
    status = core.patch_namespaced_pod_status(
        "p1", "default", {"status": {"conditions": [{"type": "PodScheduled", "status": "True"}]}}
    ).status
    assert sorted((c.type, c.status) for c in status.conditions) == [
        ("PodScheduled", "True"),
        ("Ready", "False"),
    ]


def test_json_patch_operations_and_a_failing_test_op(core):
    # Given a node with a slash in a label key
    core.create_node(node_body("n1", {LAYER1: "nn-1"}))
    key = LAYER1.replace("/", "~1")
    # When a JSON patch tests, replaces, adds and removes
    node = core.patch_node(
        "n1",
        [
            {"op": "test", "path": f"/metadata/labels/{key}", "value": "nn-1"},
            {"op": "replace", "path": f"/metadata/labels/{key}", "value": "nn-9"},
            {"op": "add", "path": "/metadata/labels/new", "value": "yes"},
            {"op": "copy", "from": "/metadata/labels/new", "path": "/metadata/labels/copied"},
            {"op": "remove", "path": "/metadata/labels/new"},
        ],
    )
    # Then all operations applied
    assert node.metadata.labels == {LAYER1: "nn-9", "copied": "yes"}
    # When a test operation fails
    with pytest.raises(ApiException) as err:
        core.patch_node(
            "n1",
            [
                {"op": "test", "path": f"/metadata/labels/{key}", "value": "nn-1"},
                {"op": "remove", "path": "/metadata/labels/copied"},
            ],
        )
    # Then nothing changes and the server answers 422 as kube does
    assert err.value.status == 422 and status_of(err.value)["reason"] == "Invalid"
    assert core.read_node("n1").metadata.labels == {LAYER1: "nn-9", "copied": "yes"}


def test_server_side_apply_creates_merges_and_records_the_manager(core):
    def apply(data: dict[str, str]) -> Any:
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cfg", "labels": {"app": "x"}},
            "data": data,
        }
        return core.patch_namespaced_config_map(
            "cfg",
            "default",
            body,
            field_manager="topogov",
            force=True,
            _content_type="application/apply-patch+yaml",
        )

    # When a config map is applied twice, the second time without one key
    created = apply({"a": "1", "b": "2"})
    # and someone else adds a key in between
    core.patch_namespaced_config_map("cfg", "default", {"data": {"c": "3"}}, field_manager="other")
    updated = apply({"a": "10"})
    # Then the first apply created it, the second merged: the dropped key is gone, the other manager's stays
    assert created.data == {"a": "1", "b": "2"}
    assert updated.data == {"a": "10", "c": "3"}
    managers = {(m.manager, m.operation) for m in updated.metadata.managed_fields}
    assert ("topogov", "Apply") in managers and ("other", "Update") in managers
    # and apply without a fieldManager is refused as kube does
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_config_map(
            "cfg",
            "default",
            {"apiVersion": "v1", "kind": "ConfigMap"},
            _content_type="application/apply-patch+yaml",
        )
    assert err.value.status == 422


def test_status_subresource_and_generation(batch):
    # Given a job (its status reset on create, its spec defaulted)
    job = batch.create_namespaced_job("default", {**job_body("j"), "status": {"succeeded": 5}})
    assert job.status.succeeded is None and job.spec.completions == 1 and job.spec.backoff_limit == 6
    # When status is written through the main endpoint, and a label changes
    after = batch.patch_namespaced_job(
        "j", "default", {"metadata": {"labels": {"a": "b"}}, "status": {"succeeded": 1}}
    )
    # Then status is ignored and generation stays (no spec change)
    assert after.status.succeeded is None and after.metadata.generation == 1
    # When status is written through /status and the spec changes
    st = batch.patch_namespaced_job_status("j", "default", {"status": {"succeeded": 1}})
    spec = batch.patch_namespaced_job("j", "default", {"spec": {"suspend": True}})
    # Then status changed and generation was bumped once, by the spec change only
    assert st.status.succeeded == 1 and st.metadata.generation == 1
    assert spec.metadata.generation == 2


# -- delete ------------------------------------------------------------------------------------------


def test_deleting_a_job_with_background_propagation_deletes_its_pods(core, batch):
    # Given a job with two pods that it owns, and an unrelated pod
    job = batch.create_namespaced_job("default", job_body("train"))
    core.create_namespaced_pod("default", pod_body("train-1", owner=job))
    core.create_namespaced_pod("default", pod_body("train-2", owner=job))
    core.create_namespaced_pod("default", pod_body("other"))
    # When the job is deleted with background propagation
    result = batch.delete_namespaced_job("train", "default", propagation_policy="Background")
    # Then the answer is a Success Status and the owned pods are gone
    result = result if isinstance(result, dict) else result.to_dict()
    assert result["status"] == "Success" and result["details"]["name"] == "train"
    assert names(core.list_namespaced_pod("default").items) == ["other"]


def test_deleting_a_job_without_a_policy_orphans_its_pods_like_batch_v1(server, core, batch):
    # Given a job owning a pod
    job = batch.create_namespaced_job("default", job_body("train"))
    core.create_namespaced_pod("default", pod_body("train-1", owner=job))
    # When it is deleted with no propagationPolicy (batch/v1's default is Orphan)
    status, _, headers = http(server, "DELETE", "/apis/batch/v1/namespaces/default/jobs/train")
    # Then the pod stays, without its owner reference, and kube's warning is sent
    assert status == 200
    pod = core.read_namespaced_pod("train-1", "default")
    assert pod.metadata.owner_references is None
    assert "child pods are preserved" in headers.get("Warning", "")


def test_deleting_a_namespace_deletes_everything_in_it(core, batch):
    # Given a namespace with a pod, a job and a config map
    core.create_namespace({"metadata": {"name": "team-a"}})
    core.create_namespaced_pod("team-a", pod_body("p"))
    batch.create_namespaced_job("team-a", job_body("j"))
    core.create_namespaced_config_map("team-a", {"metadata": {"name": "c"}})
    # When the namespace is deleted
    core.delete_namespace("team-a")
    # Then nothing of it is left
    assert core.list_pod_for_all_namespaces().items == []
    assert batch.list_job_for_all_namespaces().items == []
    assert "team-a" not in names(core.list_namespace().items)


def test_finalizers_keep_a_deleted_object_until_the_last_one_is_removed(server, core):
    # Given a config map with a finalizer
    core.create_namespaced_config_map(
        "default", {"metadata": {"name": "c", "finalizers": ["example.com/keep"]}}
    )
    # When it is deleted
    status, body, _ = http(server, "DELETE", "/api/v1/namespaces/default/configmaps/c")
    # Then it stays, marked for deletion (202 with the object, as kube answers)
    assert status == 202 and body["metadata"]["deletionTimestamp"]
    assert core.read_namespaced_config_map("c", "default").metadata.deletion_timestamp is not None
    # When its finalizer is removed
    core.patch_namespaced_config_map("c", "default", [{"op": "remove", "path": "/metadata/finalizers"}])
    # Then it is gone
    with pytest.raises(ApiException) as err:
        core.read_namespaced_config_map("c", "default")
    assert err.value.status == 404


def test_dry_run_writes_nothing_and_deletecollection_honours_selectors(server, core):
    # When a config map is created with dryRun=All
    status, body, _ = http(server, "POST", "/api/v1/namespaces/default/configmaps?dryRun=All",
                           {"metadata": {"name": "dry"}})  # fmt: skip
    # Then the answer is the would-be object, and nothing was stored
    assert status == 201 and body["metadata"]["name"] == "dry" and "resourceVersion" not in body["metadata"]
    assert core.list_namespaced_config_map("default").items == []
    # Given three config maps, two of them labelled
    for name, labels in (("a", {"g": "x"}), ("b", {"g": "x"}), ("c", {})):
        core.create_namespaced_config_map("default", {"metadata": {"name": name, "labels": labels}})
    # When the labelled ones are deleted as a collection
    status, body, _ = http(server, "DELETE", "/api/v1/namespaces/default/configmaps?labelSelector=g%3Dx")
    # Then exactly those are gone, and returned as a list
    assert status == 200 and body["kind"] == "ConfigMapList"
    assert [i["metadata"]["name"] for i in body["items"]] == ["a", "b"]
    assert names(core.list_namespaced_config_map("default").items) == ["c"]


# -- Kueue ----------------------------------------------------------------------------------------------


def test_kueue_objects_are_served_in_v1beta1_and_v1beta2(custom):
    # Given a ClusterQueue created through v1beta1
    cq = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": "cq-a"},
        "spec": {"namespaceSelector": {}},
    }
    custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta1", "clusterqueues", cq)
    # When it is read through v1beta2, and merge-patched
    got = custom.get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", "cq-a")
    patched = custom.patch_cluster_custom_object(
        "kueue.x-k8s.io", "v1beta1", "clusterqueues", "cq-a", {"spec": {"cohort": "all"}}
    )
    # Then it is the same object in the requested version
    assert got["apiVersion"] == "kueue.x-k8s.io/v1beta2" and got["metadata"]["name"] == "cq-a"
    assert patched["spec"] == {"namespaceSelector": {}, "cohort": "all"}
    assert patched["metadata"]["generation"] == 2


# -- watch --------------------------------------------------------------------------------------------


def test_watch_streams_existing_and_new_events(core):
    # Given a node
    core.create_node(node_body("n1"))
    events: list[tuple[str, str]] = []
    watching = threading.Event()

    def consume() -> None:
        for ev in watch.Watch().stream(core.list_node, timeout_seconds=5):
            events.append((ev["type"], ev["object"].metadata.name))
            watching.set()
            if len(events) == 3:
                return

    t = threading.Thread(target=consume)
    t.start()
    assert watching.wait(timeout=5), "the watch never delivered the existing node"
    # When a node is labelled and another created while watching
    core.patch_node("n1", {"metadata": {"labels": {"a": "b"}}})
    core.create_node(node_body("n2"))
    t.join(timeout=5)
    # Then the watch saw the existing node, the change and the new node
    assert events == [("ADDED", "n1"), ("MODIFIED", "n1"), ("ADDED", "n2")]


# -- fault injection and counters ---------------------------------------------------------------------


def test_injected_500_fails_once_then_the_request_succeeds(server, core):
    # Given a node and a rule failing the next PATCH of nodes with a 500
    core.create_node(node_body("n1"))
    emulator(
        server,
        "POST",
        "/_emulator/faults",
        {"method": "PATCH", "path": "^/api/v1/nodes/", "status": 500, "times": 1},
    )
    # When the node is patched twice
    with pytest.raises(ApiException) as err:
        core.patch_node("n1", {"metadata": {"labels": {"a": "b"}}})
    ok = core.patch_node("n1", {"metadata": {"labels": {"a": "b"}}})
    # Then the first answer was a 500 InternalError Status and the second went through
    assert err.value.status == 500 and status_of(err.value)["reason"] == "InternalError"
    assert ok.metadata.labels == {"a": "b"}


def test_injected_429_carries_retry_after(server, core):
    # Given a rule throttling the next GET
    emulator(server, "POST", "/_emulator/faults", {"method": "GET", "path": "/api/v1/nodes$", "status": 429})
    # When nodes are listed
    status, body, headers = http(server, "GET", "/api/v1/nodes")
    # Then it is a 429 TooManyRequests with Retry-After: 1
    assert (status, body["reason"], headers.get("Retry-After")) == (429, "TooManyRequests", "1")
    assert http(server, "GET", "/api/v1/nodes")[0] == 200


def test_delete_before_removes_the_object_so_the_patch_gets_404(server, core):
    # Given a node listed by a client, then deleted before the client's patch lands
    core.create_node(node_body("n1"))
    emulator(
        server, "POST", "/_emulator/faults", {"method": "PATCH", "path": "/nodes/n1$", "delete_before": True}
    )
    # When the client patches it
    with pytest.raises(ApiException) as err:
        core.patch_node("n1", {"metadata": {"labels": {"a": "b"}}})
    # Then the patch finds it gone
    assert err.value.status == 404
    assert core.list_node().items == []


def test_request_counters_count_reads_and_writes_by_resource(server, core):
    # Given a node and reset counters
    core.create_node(node_body("n1"))
    emulator(server, "DELETE", "/_emulator/requests")
    # When nodes are read twice and patched once
    core.list_node()
    core.read_node("n1")
    core.patch_node("n1", {"metadata": {"labels": {"a": "b"}}})
    # Then the counters say so
    assert emulator(server, "GET", "/_emulator/requests") == {"GET nodes": 2, "PATCH nodes": 1}


def test_server_side_table_for_nodes(server, core):
    # Given a ready worker and a not-ready control-plane node
    core.create_node(node_body("a", {LAYER1: "nn-1"}))
    core.create_node(node_body("b", {"node-role.kubernetes.io/control-plane": ""}, ready=False))
    # When the nodes are listed as a Table without objects
    status, table, _ = http(
        server,
        "GET",
        "/api/v1/nodes?includeObject=None",
        accept="application/json;as=Table;v=v1;g=meta.k8s.io",
    )
    # Then the columns and cells are kube's
    assert status == 200 and table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    assert [c["name"] for c in table["columnDefinitions"] if c["priority"] == 0] == [
        "Name",
        "Status",
        "Roles",
        "Age",
        "Version",
    ]
    rows = [r["cells"][:5] for r in table["rows"]]
    assert [r[:3] + r[4:] for r in rows] == [
        ["a", "Ready", "<none>", "v1.32.1-eks-5e0fdde"],
        ["b", "NotReady", "control-plane", "v1.32.1-eks-5e0fdde"],
    ]
    assert all("object" not in r for r in table["rows"])


# -- kubectl --------------------------------------------------------------------------------------------


@pytest.mark.kubectl
def test_kubectl_get_nodes_with_label_columns(core, kubectl):
    # Given nodes with and without topology labels
    core.create_node(node_body("ip-10-0-0-1", {LAYER1: "nn-aaa", LAYER2: "nn-bbb"}))
    core.create_node(node_body("ip-10-0-0-2", {LAYER1: "nn-aaa"}))
    # When kubectl lists them with -L
    out = kubectl("get", "nodes", "-L", f"{LAYER1},{LAYER2}").stdout
    # Then the label columns carry the values (empty where unlabelled)
    lines = [line.split() for line in out.strip().splitlines()]
    assert lines[0] == [
        "NAME",
        "STATUS",
        "ROLES",
        "AGE",
        "VERSION",
        "NETWORK-NODE-LAYER-1",
        "NETWORK-NODE-LAYER-2",
    ]
    assert lines[1][:3] + lines[1][4:] == [
        "ip-10-0-0-1",
        "Ready",
        "<none>",
        "v1.32.1-eks-5e0fdde",
        "nn-aaa",
        "nn-bbb",
    ]
    assert lines[2][:3] + lines[2][4:] == ["ip-10-0-0-2", "Ready", "<none>", "v1.32.1-eks-5e0fdde", "nn-aaa"]


@pytest.mark.kubectl
def test_kubectl_label_overwrite_and_removal(core, kubectl):
    # Given a labelled node
    core.create_node(node_body("n1", {LAYER1: "nn-aaa"}))
    # When kubectl relabels it with --overwrite, adds a label, and removes one
    kubectl("label", "node", "n1", f"{LAYER1}=nn-zzz", "--overwrite")
    refused = kubectl("label", "node", "n1", f"{LAYER1}=nn-yyy", check=False)
    kubectl("label", "node", "n1", "extra=1")
    kubectl("label", "node", "n1", "extra-")
    labels = json.loads(kubectl("get", "node", "n1", "-o", "jsonpath={.metadata.labels}").stdout)
    # Then the overwrite took, the relabel without --overwrite was refused, the removal took
    assert refused.returncode != 0 and "--overwrite is false" in refused.stderr
    assert labels == {LAYER1: "nn-zzz"}
    assert core.read_node("n1").metadata.labels == {LAYER1: "nn-zzz"}


@pytest.mark.kubectl
def test_kubectl_describe_node(core, kubectl):
    # Given a node with a running pod and an event about it
    core.create_node(node_body("n1", {LAYER1: "nn-aaa"}))
    core.create_namespaced_pod("default", pod_body("p1", node="n1"))
    core.create_namespaced_event(
        "default",
        {
            "metadata": {"name": "n1.1"},
            "reason": "TopologyLabelled",
            "type": "Normal",
            "message": "labelled",
            "involvedObject": {"kind": "Node", "name": "n1", "uid": "n1"},
        },
    )
    # When kubectl describes it (it looks events up by kind, name and uid, the kubelet's uid being the name)
    out = kubectl("describe", "node", "n1").stdout
    # Then it succeeds and shows the labels, the pod and the event
    assert f"{LAYER1}=nn-aaa" in out
    assert "Non-terminated Pods:          (1 in total)" in out and "p1" in out
    assert "TopologyLabelled" in out


@pytest.mark.kubectl
def test_kubectl_apply_get_and_delete_a_job(tmp_path, core, kubectl):
    # Given a namespace created by kubectl and a Job manifest
    kubectl("create", "namespace", "team-a")
    manifest = tmp_path / "job.yaml"
    manifest.write_text(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: train\n  namespace: team-a\n"
        "  labels:\n    kueue.x-k8s.io/queue-name: lq-a\nspec:\n  suspend: true\n  completions: 4\n"
        "  parallelism: 2\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n"
        "      - name: main\n        image: busybox\n        env:\n        - {name: A, value: '1'}\n"
    )
    # When it is applied, changed and applied again (a client-side three-way strategic merge)
    assert "job.batch/train created" in kubectl("apply", "-f", str(manifest)).stdout
    manifest.write_text(manifest.read_text().replace("value: '1'", "value: '2'"))
    assert "job.batch/train configured" in kubectl("apply", "-f", str(manifest)).stdout
    # Then kubectl lists it with kube's job columns
    lines = kubectl("get", "jobs", "-n", "team-a").stdout.strip().splitlines()
    assert lines[0].split() == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    assert lines[1].split()[:3] == ["train", "Running", "0/4"]
    env = kubectl(
        "get", "job", "train", "-n", "team-a", "-o", "jsonpath={.spec.template.spec.containers[0].env}"
    )
    assert json.loads(env.stdout) == [{"name": "A", "value": "2"}]
    # When kubectl deletes it
    assert 'job.batch "train" deleted' in kubectl("delete", "job", "train", "-n", "team-a").stdout
    # Then it is gone
    assert "No resources found" in kubectl("get", "jobs", "-n", "team-a").stderr


@pytest.mark.kubectl
def test_kubectl_get_clusterqueues_through_kueue_discovery(custom, kubectl):
    # Given a ClusterQueue
    custom.create_cluster_custom_object(
        "kueue.x-k8s.io",
        "v1beta1",
        "clusterqueues",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "ClusterQueue",
            "metadata": {"name": "cq-a"},
            "spec": {},
        },
    )
    # When kubectl lists clusterqueues, by plural and by short name
    full = kubectl("get", "clusterqueues").stdout.split()
    short = kubectl("get", "cq", "-o", "name").stdout.strip()
    # Then both find it
    assert full[:3] == ["NAME", "AGE", "cq-a"]
    assert short == "clusterqueue.kueue.x-k8s.io/cq-a"


# -- process entry point and timing -------------------------------------------------------------------


def test_main_serves_writes_a_kubeconfig_and_stops_on_sigterm(tmp_path):
    # When the module runs as a program
    kc = tmp_path / "kc"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "topogov_local.kube_api",
            "--port",
            "0",
            "--token",
            "t0k",
            "--kubeconfig",
            str(kc),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT / "lambdas"), "PATH": ""},
    )
    try:
        url = proc.stdout.readline().strip()
        # Then it prints its URL once ready, having written the kubeconfig
        assert url.startswith("http://127.0.0.1:")
        assert kc.exists() and "t0k" in kc.read_text()
        with urllib.request.urlopen(url + "/readyz", timeout=5) as resp:
            assert resp.read() == b"ok"
    finally:
        proc.send_signal(signal.SIGTERM)
        # and exits cleanly on SIGTERM
        assert proc.wait(timeout=10) == 0


def test_timing_sanity_listing_many_nodes(server, core):
    # Given 5,000 nodes seeded in one request
    items = [node_body(f"node-{i:05d}", {LAYER1: f"nn-{i % 7}"}) for i in range(5000)]
    emulator(server, "POST", "/_emulator/objects", {"items": items})
    # When they are listed in pages of 500 over plain HTTP
    start, token, count = time.perf_counter(), "", 0
    while True:
        _, page, _ = http(server, "GET", "/api/v1/nodes?limit=500" + (f"&continue={token}" if token else ""))
        count += len(page["items"])
        token = page["metadata"].get("continue")
        if not token:
            break
    elapsed = time.perf_counter() - start
    # Then all came back (the time is reported, not asserted)
    assert count == 5000
    print(f"\nlisted {count} nodes in pages of 500 in {elapsed * 1000:.0f} ms (client parsing included)")
