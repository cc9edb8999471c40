"""The fleet's placement quality (domain/placement_quality.py): per layer, the share of running
multi-pod jobs inside one domain, overall, per team and per asked mode."""

from __future__ import annotations

from topogov.domain.placement_quality import JobPod, job_pod, quality
from topogov.domain.tree import NodeCapacity
from topogov.domain.views.batch import PodView

NODES = {
    n.name: n
    for n in [
        NodeCapacity("a1", ("L1a", "L2a", "L3a")),
        NodeCapacity("a2", ("L1a", "L2a", "L3a")),
        NodeCapacity("b1", ("L1a", "L2a", "L3b")),
        NodeCapacity("c1", ("L1a", "L2c", "L3c")),
        NodeCapacity("d1", ("L1d", "L2d", "L3d")),
    ]
}
TEAMS = {"ns-a": "team-a", "ns-b": "team-b"}


def job(uid, nodes, ns="ns-a", mode="required"):
    return [JobPod(ns, uid, uid, n, mode, None, 8) for n in nodes]


def test_shares_per_layer_overall_per_team_and_per_mode():
    pods = [
        *job("tight", ["a1", "a2"]),  # one layer-3 domain
        *job("l2", ["a1", "b1"], mode="preferred"),  # one layer-2 domain, two layer-3
        *job("spread", ["a1", "d1"], ns="ns-b", mode="auto"),  # two layer-1 domains
        *job("single", ["a1"]),  # one pod: left out
        *job("elsewhere", ["a1", "zz"]),  # a node the snapshot does not know: left out
    ]
    got = quality(pods, NODES, TEAMS)
    assert got["jobs"] == 3
    assert got["in_one_domain"] == {"layer-1": 0.667, "layer-2": 0.667, "layer-3": 0.333}
    assert got["teams"]["team-a"] == {
        "jobs": 2,
        "in_one_domain": {"layer-1": 1.0, "layer-2": 1.0, "layer-3": 0.5},
    }
    assert got["teams"]["team-b"]["in_one_domain"] == {"layer-1": 0.0, "layer-2": 0.0, "layer-3": 0.0}
    assert set(got["modes"]) == {"required", "preferred", "auto"}
    assert got["modes"]["required"]["in_one_domain"]["layer-3"] == 1.0


def test_no_running_multi_pod_job_is_no_figure():
    assert quality([], NODES, TEAMS) == {"jobs": 0, "in_one_domain": {}, "teams": {}, "modes": {}}


def test_only_running_pods_kueue_admitted_for_a_job_count():
    def pod(phase="Running", podset=True, node="a1", labels=None, annotations=None):
        lab = {
            "batch.kubernetes.io/controller-uid": "u1",
            "batch.kubernetes.io/job-name": "j",
            **(labels or {}),
        }
        if podset:
            lab["kueue.x-k8s.io/podset"] = "main"
        return PodView.from_api(
            {"metadata": {"namespace": "ns-a", "labels": lab, "annotations": annotations or {}},
             "spec": {"nodeName": node}, "status": {"phase": phase}}
        )  # fmt: skip

    assert job_pod(pod(), 8) == JobPod("ns-a", "j", "u1", "a1", "none", None, 8)
    assert job_pod(pod(phase="Pending"), 8) is None and job_pod(pod(podset=False), 8) is None
    assert job_pod(pod(node=None), 8) is None
    required = {"kueue.x-k8s.io/podset-required-topology": "topology.k8s.aws/network-node-layer-3"}
    assert job_pod(pod(annotations=required), 8).mode == "required"
    asked = {"topogov.io/topology-mode": "auto", "topogov.io/priority-class": "training-priority"}
    got = job_pod(pod(labels=asked, annotations=required), 8)
    assert (got.mode, got.priority) == ("auto", "training-priority")
