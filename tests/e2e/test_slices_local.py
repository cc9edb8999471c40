"""Pod-set slices decided by the API, against the real Kueue v0.17.0 (issue 40): a job asking for
slices of 4 pods at layer-3 inside layer-2 runs with every 4 consecutive completion indexes on one
layer-3 domain and all of them in one layer-2 domain, as its pods and their nodes' labels show; and
``auto`` slices a job twice as wide as a layer-3 domain, saying so in the dry run."""

from __future__ import annotations

import pytest

from tests.stacks import labelled_stack, node_labels, pods_of, wait_until
from topogov.domain.labels import HOSTNAME_LABEL, INDEX_LABEL, layer_label
from topogov_cli.sigv4 import credentials_for_profile, signed_request

FLEET = "p5.48xlarge=32"  # one layer-1 domain: 2 layer-2 domains of 16 nodes, 8 layer-3 of 4
L2, L3 = layer_label(2), layer_label(3)
NS = "hyperpod-ns-team-a"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with labelled_stack(tmp_path_factory.mktemp("slices"), FLEET, api_port=0, api_snapshot_ttl_s=0) as s:
        yield s


def call(stack, method, path, body=None):
    creds = credentials_for_profile("topogov-team-a", str(stack.credentials))
    return signed_request(method, stack.api.url + path, credentials=creds, region="us-east-1", json_body=body)


def gpu_job(name, pods, topology):
    """An Indexed Job of whole p5 nodes (8 GPUs a pod: one pod a node)."""
    return {"job_name": name, "image": "x", "accelerators": 8, "replica_count": pods, "topology": topology,
            "render_as": "job", "command": ["sleep", "600"]}  # fmt: skip


def placed(stack, name, pods):
    """Completion index -> the labels of the node its pod was bound to, once every pod is bound."""

    def bound():
        items = pods_of(stack, NS, name)
        on = {int(p["metadata"]["annotations"][INDEX_LABEL]): p["spec"].get("nodeName") for p in items}
        return len(on) == pods and all(on.values()) and on

    on = wait_until(bound, f"every pod of {name} is bound to a node", timeout_s=120)
    labels = node_labels(stack)
    return {index: labels[node] for index, node in on.items()}


def test_every_slice_of_four_consecutive_pods_runs_in_one_layer3_domain_inside_one_layer2(stack):
    topology = {"mode": "required", "level": "layer-2", "slice": {"level": "layer-3", "size": 4}}
    resp = call(stack, "POST", "/v1/jobs", gpu_job("sliced", 16, topology))
    assert resp.status_code == 201, resp.text
    told = resp.json()["decision"]["topology"]
    assert (told["level"], told["slice_level"], told["slice_size"]) == (L2, L3, 4), told
    template = resp.json()["job"]["spec"]["template"]["metadata"]["annotations"]
    assert template["kueue.x-k8s.io/podset-slice-required-topology"] == L3
    assert template["kueue.x-k8s.io/podset-slice-size"] == "4"
    labels = placed(stack, "sliced", 16)
    assert len({labels[i][L2] for i in range(16)}) == 1, labels
    slices = [{labels[i][L3] for i in range(s, s + 4)} for s in range(0, 16, 4)]
    assert all(len(domains) == 1 for domains in slices), slices
    assert len(set().union(*slices)) == 4  # four slices of a whole rack each: four racks
    # the dry run's domain_now is where the real Kueue put it (the model's slice placement)
    assert told["domain_now"] == labels[0][L2]
    assert call(stack, "DELETE", "/v1/jobs/team-a/sliced").status_code == 200


def test_auto_slices_a_job_twice_as_wide_as_a_layer3_domain_and_says_why(stack):
    resp = call(stack, "POST", "/v1/jobs?dryRun=true", gpu_job("wide", 8, {"mode": "auto"}))
    assert resp.status_code == 200, resp.text
    told = resp.json()["decision"]["topology"]
    assert (told["mode"], told["level"], told["slice_level"], told["slice_size"]) == ("preferred", L2, L3, 4)
    assert "no layer-3 domain holds all 8 pods (the largest: 4)" in told["reason"], told["reason"]
    assert "every 4 consecutive pods (by completion index) go in one layer-3 domain" in told["reason"]
    # ... and the job it made runs that way
    assert call(stack, "POST", "/v1/jobs", gpu_job("wide", 8, {"mode": "auto"})).status_code == 201
    labels = placed(stack, "wide", 8)
    assert len({labels[i][L2] for i in range(8)}) == 1
    assert [len({labels[i][L3] for i in range(s, s + 4)}) for s in (0, 4)] == [1, 1], labels
    assert call(stack, "DELETE", "/v1/jobs/team-a/wide").status_code == 200


def cordon(stack, names, unschedulable=True):
    for name in names:
        resp = stack.kube().request(
            "PATCH",
            f"/api/v1/nodes/{name}",
            body={"spec": {"unschedulable": unschedulable}},
            content_type="application/merge-patch+json",
        )
        assert resp.status == 200, resp.body


def workload_request(stack, name):
    """The topologyRequest of the Job's Workload (what Kueue schedules), None before Kueue makes it."""
    kube = stack.kube()
    job = kube.request("GET", f"/apis/batch/v1/namespaces/{NS}/jobs/{name}").body
    query = {"labelSelector": f"kueue.x-k8s.io/job-uid={job['metadata']['uid']}"}
    items = kube.request("GET", f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/workloads", query=query).body
    if not items["items"]:
        return None
    request = items["items"][0]["spec"]["podSets"][0].get("topologyRequest") or {}
    return {k: v for k, v in request.items() if k != "podIndexLabel"}


def test_the_fallback_relaxes_the_level_and_keeps_the_slices(stack):
    """One node cordoned in three of the four layer-3 domains of each layer-2 domain: each layer-2
    domain keeps one whole layer-3 domain, so two slices of 4 required inside one layer-2 domain
    wait; past the deadline the pass relaxes the level to preferred, keeps the slices, and Kueue
    places one slice in each layer-2 domain's whole layer-3 domain."""
    import time

    from topogov.handlers.reconcile import handler
    from topogov_local import events
    from topogov_local.lambda_context import LocalContext

    racks: dict[str, dict[str, list[str]]] = {}
    for name, node in sorted(node_labels(stack).items()):
        if L3 in node:
            racks.setdefault(node[L2], {}).setdefault(node[L3], []).append(name)
    cordoned = [nodes[0] for by_rack in racks.values() for nodes in list(by_rack.values())[1:]]
    cordon(stack, cordoned)
    try:
        topology = {"mode": "required", "level": "layer-2", "fallbackAfter": "1s",
                    "slice": {"level": "layer-3", "size": 4}}  # fmt: skip
        resp = call(stack, "POST", "/v1/jobs", gpu_job("relaxed", 8, topology))
        assert resp.status_code == 201, resp.text
        wait_until(
            lambda: (v := call(stack, "GET", "/v1/jobs/team-a/relaxed").json())["why_pending"] and v,
            "Kueue says why the job waits",
        )
        assert workload_request(stack, "relaxed") == {
            "required": L2, "podSetSliceRequiredTopology": L3, "podSetSliceSize": 4,
        }  # fmt: skip
        time.sleep(2.1)  # past the deadline (1 s, at the ledger's one-second resolution)
        assert "team-a/relaxed" in handler(events.scheduled_event(), LocalContext())["ledger"]["fallbacks"]
        assert workload_request(stack, "relaxed") == {
            "preferred": L2, "podSetSliceRequiredTopology": L3, "podSetSliceSize": 4,
        }  # fmt: skip
        labels = placed(stack, "relaxed", 8)
        slices = [{labels[i][L3] for i in range(s, s + 4)} for s in (0, 4)]
        assert all(len(domains) == 1 for domains in slices), slices
        assert len({labels[i][L2] for i in range(8)}) == 2  # one slice in each layer-2 domain
        assert not set(cordoned) & {labels[i][HOSTNAME_LABEL] for i in range(8)}
        fallback = call(stack, "GET", "/v1/jobs/team-a/relaxed").json()["fallback"]
        assert "its slices of 4 pods stay required" in fallback["reason"], fallback
    finally:
        cordon(stack, cordoned, unschedulable=False)
    assert call(stack, "DELETE", "/v1/jobs/team-a/relaxed").status_code == 200
