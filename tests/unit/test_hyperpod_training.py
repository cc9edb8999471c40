"""The stand-in HyperPod training operator's pure part (``local/topogov_local/hyperpod/training.py``): the
Workload and pods it writes for the object ``hyp create hyp-pytorch-job`` posts, and the status
conditions ``hyp list`` reads (the last True one is the job's STATUS)."""

from __future__ import annotations

import copy
import hashlib
from typing import Any

from topogov_local.hyperpod import training
from topogov_local.hyperpod.crd import STATUS, crd

# What sagemaker-hyperpod 3.12.0 posts for `hyp create hyp-pytorch-job --job-name demo --node-count 4
# --instance-type ml.p5.48xlarge --preferred-topology topology.k8s.aws/network-node-layer-3 ...`
# (captured from the released CLI), with the uid the API server gives it.
LABELS = {
    "kueue.x-k8s.io/queue-name": "hyperpod-ns-team-a-localqueue",
    "kueue.x-k8s.io/priority-class": "training-priority",
}
ANNOTATIONS = {"kueue.x-k8s.io/podset-preferred-topology": "topology.k8s.aws/network-node-layer-3"}
JOB: dict[str, Any] = {
    "apiVersion": "sagemaker.amazonaws.com/v1",
    "kind": "HyperPodPyTorchJob",
    "metadata": {"name": "demo", "namespace": "hyperpod-ns-team-a", "uid": "u-1", "labels": LABELS,
                 "annotations": ANNOTATIONS},
    "spec": {
        "nprocPerNode": "1",
        "replicaSpecs": [{
            "name": "pod", "replicas": 4, "spares": 0,
            "template": {
                "metadata": {"annotations": ANNOTATIONS, "labels": LABELS, "name": "demo"},
                "spec": {
                    "containers": [{"image": "pytorch:latest", "imagePullPolicy": "Always",
                                    "name": "pytorch-job-container",
                                    "resources": {"limits": {"nvidia.com/gpu": 8},
                                                  "requests": {"cpu": "179"}}}],
                    "nodeSelector": {"node.kubernetes.io/instance-type": "ml.p5.48xlarge"},
                },
            },
        }],
        "runPolicy": {"cleanPodPolicy": "None", "jobMaxRetryCount": 1, "ttlSecondsAfterFinished": 0},
    },
}  # fmt: skip
FLAVOR = {
    "nodeLabels": {"node.kubernetes.io/instance-type": "ml.p5.48xlarge"},
    "topologyName": "hyperpod-topology",
}


def admitted(workload: dict[str, Any], tas: bool = True) -> dict[str, Any]:
    wl = copy.deepcopy(workload)
    assignment: dict[str, Any] = {
        "name": "demo-pod-podset",
        "count": 4,
        "flavors": {"nvidia.com/gpu": "ml.p5.48xlarge"},
    }
    if tas:
        assignment["topologyAssignment"] = {"levels": ["kubernetes.io/hostname"], "slices": []}
    wl["status"] = {
        "conditions": [{"type": "Admitted", "status": "True"}],
        "admission": {"clusterQueue": "hyperpod-ns-team-a-clusterqueue", "podSetAssignments": [assignment]},
    }
    return wl


def test_the_workload_is_kueues_for_the_job_owned_by_it():
    wl = training.workload_for(JOB, ("training-priority", 90))
    digest = hashlib.sha1(b"HyperPodPyTorchJob\nsagemaker.amazonaws.com\ndemo\nu-1").hexdigest()[:5]
    assert wl["metadata"]["name"] == f"hyperpodpytorchjob-demo-{digest}"  # jobframework's naming
    assert wl["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]
    assert wl["metadata"]["labels"] == {"kueue.x-k8s.io/job-uid": "u-1"}
    (owner,) = wl["metadata"]["ownerReferences"]
    assert owner == {"apiVersion": "sagemaker.amazonaws.com/v1", "kind": "HyperPodPyTorchJob", "name": "demo",
                     "uid": "u-1", "controller": True, "blockOwnerDeletion": True}  # fmt: skip
    spec = wl["spec"]
    assert spec["queueName"] == "hyperpod-ns-team-a-localqueue"
    assert (spec["priorityClassRef"]["name"], spec["priority"]) == ("training-priority", 90)
    (ps,) = spec["podSets"]
    assert (ps["name"], ps["count"]) == ("demo-pod-podset", 4)
    assert ps["topologyRequest"] == {"preferred": "topology.k8s.aws/network-node-layer-3"}
    assert ps["template"]["spec"]["nodeSelector"] == {"node.kubernetes.io/instance-type": "ml.p5.48xlarge"}
    assert set(ps["template"]["metadata"]) == {"labels", "annotations"}  # what a pod set's template may have


def test_spares_count_and_a_long_name_stays_a_dns_label():
    job = copy.deepcopy(JOB)
    job["spec"]["replicaSpecs"][0]["spares"] = 2
    assert training.workload_for(job, None)["spec"]["podSets"][0]["count"] == 6
    name = training.podset_name("j" * 63, "pod")
    assert len(name) <= 63 and name.endswith("-pod-podset")


def test_the_pods_carry_hyperpods_label_and_what_kueue_assigned():
    wl = admitted(training.workload_for(JOB, None))
    pods = training.pods_for(JOB, wl, {"ml.p5.48xlarge": FLAVOR})
    assert [p["metadata"]["name"] for p in pods] == [f"demo-pod-{i}" for i in range(4)]
    pod = pods[0]
    labels = pod["metadata"]["labels"]
    assert labels["HPJob"] == "demo" and labels["kueue.x-k8s.io/podset"] == "demo-pod-podset"
    assert labels["kueue.x-k8s.io/cluster-queue-name"] == "hyperpod-ns-team-a-clusterqueue"
    assert pod["metadata"]["annotations"]["kueue.x-k8s.io/workload"] == wl["metadata"]["name"]
    assert pod["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/topology"}]
    assert pod["spec"]["nodeSelector"] == {"node.kubernetes.io/instance-type": "ml.p5.48xlarge"}
    assert pod["spec"]["containers"][0]["name"] == "pytorch-job-container"
    assert pod["metadata"]["ownerReferences"][0]["kind"] == "HyperPodPyTorchJob"
    # without a topology assignment: no gate, no workload annotation (nothing for the ungater to do)
    plain = training.pods_for(JOB, admitted(training.workload_for(JOB, None), tas=False), {})[0]
    assert "schedulingGates" not in plain["spec"]
    assert "kueue.x-k8s.io/workload" not in plain["metadata"]["annotations"]


def last_true(status: dict[str, Any]) -> str:
    """What `hyp list` shows (cli/commands/training.py: the last condition whose status is True)."""
    return next(
        (c["type"] for c in reversed(status.get("conditions") or []) if c["status"] == "True"), "Unknown"
    )


def test_the_status_hyp_list_shows_through_a_jobs_life():
    status = training.status_for({}, "Suspended", "2026-01-01T00:00:00Z")
    assert last_true(status) == "Suspended" and "startTime" not in status
    status = training.status_for(status, "Created", "2026-01-01T00:00:01Z")
    assert last_true(status) == "Created" and status["startTime"] == "2026-01-01T00:00:01Z"
    created = next(c for c in status["conditions"] if c["type"] == "Created")
    status = training.status_for(status, "Running", "2026-01-01T00:00:02Z")
    assert last_true(status) == "Running"
    assert next(c for c in status["conditions"] if c["type"] == "Created") == created  # its time kept
    done = training.status_for(status, "Completed", "2026-01-01T00:01:00Z")
    assert last_true(done) == "Completed" and done["completionTime"] == "2026-01-01T00:01:00Z"
    failed = training.status_for(status, "Failed", "2026-01-01T00:01:00Z", "pod demo-pod-2 failed")
    assert last_true(failed) == "Failed"
    # evicted: the conditions start over (no Created, so hyp shows no age), as for a preempted job
    evicted = training.status_for(status, "Suspended", "2026-01-01T00:02:00Z", "Preempted")
    assert [c["type"] for c in evicted["conditions"]] == ["Suspended"] and "startTime" not in evicted
    assert training.status_for(evicted, "Suspended", "2026-01-01T00:03:00Z", "Preempted") == evicted


def test_the_status_holds_only_fields_hyp_accepts():
    allowed = set(STATUS["properties"])
    condition_fields = set(STATUS["properties"]["conditions"]["items"]["properties"])
    status = training.status_for({}, "Created", "t")
    status = training.status_for(status, "Completed", "t")
    assert set(status) <= allowed
    assert all(set(c) <= condition_fields for c in status["conditions"])
    names = crd()["spec"]["names"]
    assert (names["kind"], names["plural"]) == ("HyperPodPyTorchJob", "hyperpodpytorchjobs")


def test_the_phase_of_a_jobs_pods():
    def pods(*phases: str) -> list[dict[str, Any]]:
        return [{"status": {"phase": p}} for p in phases]

    assert training.phase(pods("Pending", "Running"), 2) == "Created"
    assert training.phase(pods("Running", "Running"), 2) == "Running"
    assert training.phase(pods("Running"), 2) == "Created"  # one still to be made
    assert training.phase(pods("Succeeded", "Succeeded"), 2) == "Completed"
    assert training.phase(pods("Running", "Failed"), 2) == "Failed"
