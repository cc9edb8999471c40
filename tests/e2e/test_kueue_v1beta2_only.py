"""A cluster whose Kueue no longer serves v1beta1 (as Kueue v0.20, kubernetes-sigs/kueue #14558),
end to end: the local stack's Kueue v0.17.0 with every ``kueue.x-k8s.io`` CRD's v1beta1 set
``served: false`` once it runs (``StackOptions(kueue_v1beta1=False)``). The reconcile pass's governor
writes its objects at v1beta2 (chosen by discovery), a job is submitted through the API, admitted, and
its placement read back; a pending job's Workload is switched from required to preferred by the
fallback's JSON patch, at v1beta2; and the Kueue release is read from the Deployment that records it."""

from __future__ import annotations

import re

import pytest

from tests.stacks import hold_queue, labelled_stack, wait_until
from topogov.adapters.kube_jobs import KubeJobs
from topogov.adapters.kueue_api import KueueApi
from topogov_cli.sigv4 import credentials_for_profile, signed_request

FLEET = "p5.48xlarge=16"  # one layer-2 domain of 16 nodes: 4 layer-3 domains of 4
NS = "hyperpod-ns-team-a"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with labelled_stack(
        tmp_path_factory.mktemp("v1beta2-only"), FLEET, api_port=0, api_snapshot_ttl_s=0, kueue_v1beta1=False
    ) as s:
        yield s


def call(stack, method, path, body=None):
    creds = credentials_for_profile("topogov-team-a", str(stack.credentials))
    return signed_request(method, stack.api.url + path, credentials=creds, region="us-east-1", json_body=body)


def gpu_job(name, pods, topology):
    return {"job_name": name, "image": "x", "accelerators": 8, "replica_count": pods, "topology": topology,
            "command": ["sleep", "600"]}  # fmt: skip


def test_a_v1beta2_only_cluster_is_governed_and_places_jobs(stack, monkeypatch, capsys):
    kube = stack.kube()
    assert kube.request("GET", "/apis/kueue.x-k8s.io/v1beta1/clusterqueues").status == 404
    api = KueueApi(kube)
    assert api.served().versions == ("v1beta2",) and api.version() == "v1beta2"
    found = api.kueue_version()
    assert found.shown == "v0.17.0" and "registry.k8s.io/kueue/kueue:v0.17.0" in found.source

    # the reconcile pass (labelled_stack ran one) wrote the governor's objects, at v1beta2
    cq = kube.request("GET", f"/apis/kueue.x-k8s.io/v1beta2/clusterqueues/{NS}-clusterqueue")
    assert cq.status == 200, cq.body
    # (named as Topogov's writer, not the client library's default manager, its user agent)
    managers = {f["manager"]: f["apiVersion"] for f in cq.body["metadata"]["managedFields"]}
    assert managers == {"topogov-governor": "kueue.x-k8s.io/v1beta2", "kueue": "kueue.x-k8s.io/v1beta2"}

    # submitted through the API, admitted by Kueue, its placement read back
    l3 = {"mode": "required", "level": "layer-3"}
    assert call(stack, "POST", "/v1/jobs", gpu_job("tight", 4, l3)).status_code == 201
    view = wait_until(
        lambda: (
            (v := call(stack, "GET", "/v1/jobs/team-a/tight").json())["status"] == "Running"
            and v["placement"]["placed"] == 4
            and v
        ),
        "tight runs",
    )
    assert view["placement"]["verdict"] == "layer-3 ×1" and view["placement"]["inside_asked"] is True
    # the Workload's topologyAssignment, as v1beta2 encodes it (slices), read as domains
    jobs = KubeJobs(kube)
    (workload,) = jobs.workloads(NS)
    (assignment,) = workload.pod_set_assignments
    assert assignment.topology_assignment is not None
    domains = assignment.topology_assignment.domains
    assert sum(count for _, count in domains) == 4
    hosts = {values[-1] for values, _ in domains}
    assert hosts == {r["node"] for r in view["placement"]["by_node"]}

    # a job waiting (its queue held) has its job and its Workload switched from required to
    # preferred by the fallback's JSON patches, at v1beta2; let go, Kueue admits it as preferred
    hold_queue(stack, f"{NS}-clusterqueue")
    assert call(stack, "POST", "/v1/jobs", gpu_job("wide", 4, l3)).status_code == 201
    job = wait_until(lambda: jobs.get(NS, "wide"), "the job exists")
    waiting = wait_until(lambda: jobs.workload_for(NS, job.uid), "its Workload")
    level = waiting.pod_sets[0].topology_request.required
    # while it waits, the API's estimate says which Kueue release the model answers for (read as
    # topogov:api from the Deployment that records it)
    estimate = wait_until(
        lambda: (call(stack, "GET", "/v1/jobs/team-a/wide").json().get("estimate") or {}).get("kueue"),
        "an estimate that states its Kueue",
    )
    assert estimate == {
        "version": "v0.17.0",
        "source": "the Kueue Deployment's image registry.k8s.io/kueue/kueue:v0.17.0",
        "modelProfile": "v0.17.0",
        "mayDiffer": [],
    }
    assert level and jobs.relax_topology(NS, "wide", level) == "switched"
    hold_queue(stack, f"{NS}-clusterqueue", "None")
    wl = wait_until(lambda: (w := jobs.workload_for(NS, job.uid)) and w.admitted_queue and w, "wide admitted")
    assert [ps.topology_request.preferred for ps in wl.pod_sets] == [level]
    assert not any(ps.topology_request.required for ps in wl.pod_sets)
    for name in ("tight", "wide"):
        assert call(stack, "DELETE", f"/v1/jobs/team-a/{name}").status_code == 200

    # doctor says it: the release and where it was learnt, the versions served, the one used, the model
    from topogov_cli.main import main

    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(stack.credentials))
    main(["doctor", "--kubeconfig", str(stack.kubeconfig), "--endpoint", stack.api.url,
          "--profile", "topogov-team-a"])  # fmt: skip
    out = capsys.readouterr().out
    assert re.search(
        r"^ok +Kueue +v0\.17\.0 \(from the Kueue Deployment's image "
        r"registry\.k8s\.io/kueue/kueue:v0\.17\.0\); serves v1beta2, Topogov uses v1beta2; "
        r"model profile Kueue v0\.17\.0 \(the model's profile\)$",
        out,
        re.M,
    ), out
    assert re.search(r"^ok +Kueue ClusterQueues +hyperpod-ns-team-a-clusterqueue", out, re.M), out
