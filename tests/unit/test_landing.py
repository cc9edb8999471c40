"""Where a job landed (domain/landing.py) and the status vocabulary (domain/jobs.job_status)."""

from __future__ import annotations

import pytest

from topogov.domain.jobs import job_status
from topogov.domain.landing import PlacedPod, kueue_events, landing, pods_from, verdict
from topogov.domain.tree import NodeCapacity
from topogov.domain.views.batch import JobView, PodView
from topogov.domain.views.workload import WorkloadView

NODES = {
    n.name: n
    for n in [
        NodeCapacity("a1", ("nn-1", "nn-11", "nn-111"), "p5.48xlarge"),
        NodeCapacity("a2", ("nn-1", "nn-11", "nn-111"), "p5.48xlarge"),
        NodeCapacity("b1", ("nn-1", "nn-11", "nn-112"), "p5.48xlarge"),
        NodeCapacity("c1", ("nn-1", "nn-12", "nn-121"), "p5.48xlarge"),
        NodeCapacity("d1", ("nn-2", "nn-21", "nn-211"), "p5.48xlarge"),
        NodeCapacity("x1", (), "c5.2xlarge"),
    ]
}


def pods(*nodes: str | None, phase: str = "Running") -> list[PlacedPod]:
    return [PlacedPod(f"p{i}", n, phase) for i, n in enumerate(nodes)]


def test_pods_in_one_layer_3_domain_name_it_as_the_tightest():
    got = landing(pods("a1", "a1", "a2"), NODES)
    assert got["tightest"] == {"level": "layer-3", "domain": "nn-111"}
    assert [d["domains"] for d in got["domains"]] == [1, 1, 1]
    assert got["nodes"] == 2 and got["placed"] == 3 and got["phases"] == {"Running": 3}
    assert got["by_node"] == [
        {
            "node": "a1",
            "pods": 2,
            "indexes": [],
            "instance_type": "p5.48xlarge",
            "path": ["nn-1", "nn-11", "nn-111"],
        },
        {
            "node": "a2",
            "pods": 1,
            "indexes": [],
            "instance_type": "p5.48xlarge",
            "path": ["nn-1", "nn-11", "nn-111"],
        },
    ]
    assert got["verdict"] == "layer-3 ×1"


@pytest.mark.parametrize(
    ("nodes", "tightest", "counts"),
    [
        (("a1", "b1"), {"level": "layer-2", "domain": "nn-11"}, [1, 1, 2]),
        (("a1", "c1"), {"level": "layer-1", "domain": "nn-1"}, [1, 2, 2]),
        (("a1", "d1"), None, [2, 2, 2]),
    ],
)
def test_the_tightest_layer_is_the_deepest_holding_every_pod(nodes, tightest, counts):
    got = landing(pods(*nodes), NODES)
    assert got["tightest"] == tightest
    assert [d["domains"] for d in got["domains"]] == counts


def test_unplaced_pods_count_but_place_nothing():
    got = landing(pods(None, None, phase="Pending"), NODES)
    assert got["pods"] == 2 and got["placed"] == 0 and got["nodes"] == 0
    assert got["tightest"] is None and got["domains"] == [] and got["phases"] == {"Pending": 2}


def test_a_node_without_topology_or_unknown_to_the_snapshot_claims_no_domain():
    assert landing(pods("a1", "x1"), NODES)["tightest"] is None
    got = landing(pods("a1", "new-node"), NODES)
    assert got["unknown_nodes"] == ["new-node"] and got["tightest"] is None
    unknown = {"node": "new-node", "pods": 1, "indexes": [], "instance_type": None, "path": None}
    assert unknown in got["by_node"]


def test_pods_from_kubernetes_objects():
    items = [
        PodView.from_api(p)
        for p in (
            {"metadata": {"name": "j-b"}, "spec": {"nodeName": "a1"}, "status": {"phase": "Running"}},
            {"metadata": {"name": "j-a"}, "spec": {}, "status": {}},
        )
    ]
    assert pods_from(items) == [PlacedPod("j-a", None, "Pending"), PlacedPod("j-b", "a1", "Running")]
    indexed = [
        PodView.from_api(
            {"metadata": {"name": f"j-{i}", "labels": {"batch.kubernetes.io/job-completion-index": str(i)}},
             "spec": {"nodeName": "a1" if i < 2 else "b1"}, "status": {"phase": "Running"}}
        )
        for i in (3, 0, 2, 1)
    ]  # fmt: skip
    pods = pods_from(indexed)
    assert [p.index for p in pods] == [0, 1, 2, 3]
    got = landing(pods, NODES)
    assert [(r["node"], r["indexes"]) for r in got["by_node"]] == [("a1", [0, 1]), ("b1", [2, 3])]


@pytest.mark.parametrize(
    ("counts", "word"),
    [([1, 1, 1], "layer-3 ×1"), ([1, 1, 3], "layer-2 ×1 (3 × L3)"), ([1, 2, 4], "layer-1 ×1 (2 × L2)"),
     ([2, 3, 5], "layer-1 ×2"), ([1, 1, 1, 2], "layer-3 ×1 (2 × L4)"), ([], "no topology")],
)  # fmt: skip
def test_the_verdict_is_the_deepest_single_domain_and_the_split_below(counts, word):
    assert verdict(counts) == word


@pytest.mark.parametrize(
    ("nodes", "asked", "inside"),
    [(("a1", "a2"), "topology.k8s.aws/network-node-layer-3", True),
     (("a1", "b1"), "topology.k8s.aws/network-node-layer-3", False),
     (("a1", "b1"), "topology.k8s.aws/network-node-layer-2", True),
     (("a1", "b1"), None, None), (("a1", "b1"), "kubernetes.io/hostname", None)],
)  # fmt: skip
def test_inside_asked_says_whether_the_asked_level_holds_every_pod(nodes, asked, inside):
    assert landing(pods(*nodes), NODES, asked)["inside_asked"] is inside


# Kueue v0.17 condition reasons and messages as its scheduler and workload controller write them
# (pkg/workload/workload.go, pkg/scheduler/preemption/preemption.go).
PREEMPTED = (
    "Preempted to accommodate a workload (UID: 7225c291, JobUID: fa755c41) due to reclamation within "
    "the cohort; preemptor path: /topogov/hyperpod-ns-team-c-clusterqueue; preemptee path: "
    "/topogov/hyperpod-ns-team-a-clusterqueue"
)


def cond(type_: str, status: str, at: str, reason: str = "", message: str = "") -> dict:
    return {"type": type_, "status": status, "lastTransitionTime": at, "reason": reason or type_,
            "message": message}  # fmt: skip


def test_kueue_events_are_the_true_conditions_in_time_order():
    workload = WorkloadView.from_api(
        {
            "status": {
                "conditions": [
                    cond("Evicted", "True", "2026-12-01T10:08:03Z", "Preempted", PREEMPTED),
                    cond("QuotaReserved", "False", "2026-12-01T10:08:03Z", "Pending", "couldn't assign"),
                    cond("Admitted", "True", "2026-12-01T10:08:02Z", message="The workload is admitted"),
                    cond("Preempted", "True", "2026-12-01T10:08:03Z", "InCohortReclamation", PREEMPTED),
                    cond("PodsReady", "False", "2026-12-01T10:08:02Z"),
                    cond("SomethingElse", "True", "2026-12-01T10:00:00Z"),
                ]
            }
        }
    )
    got = kueue_events(workload)
    assert [e["what"] for e in got] == ["kueue: Admitted", "kueue: Evicted", "kueue: Preempted"]
    assert got[2] == {
        "at": "2026-12-01T10:08:03Z",
        "what": "kueue: Preempted",
        "reason": "InCohortReclamation",
        "message": PREEMPTED,
    }
    assert kueue_events(None) == [] and kueue_events(WorkloadView.from_api({})) == []


def job(suspend: bool, **status) -> JobView:
    return JobView.from_api({"spec": {"suspend": suspend}, "status": status})


def workload(*conditions: dict) -> WorkloadView:
    return WorkloadView.from_api({"status": {"conditions": list(conditions)}})


@pytest.mark.parametrize(
    ("the_job", "the_workload", "expected"),
    [
        (None, None, ("Vanished", "the job is no longer in the cluster")),
        (job(True), None, ("Pending", "waiting for Kueue to create a Workload for the Job")),
        (
            job(True),
            workload(cond("QuotaReserved", "False", "t", "Pending", "ClusterQueue cq is inactive")),
            ("Pending", "ClusterQueue cq is inactive"),
        ),
        (job(True), workload(cond("Admitted", "True", "t")), ("Admitted", None)),
        # unsuspended, pods created but gated or starting: Admitted, not Running
        (job(False, active=4, ready=0), None, ("Admitted", None)),
        (job(False, active=4, ready=1), None, ("Running", None)),
        (job(False, active=2), None, ("Running", None)),  # a status without `ready`
        (job(False), None, ("Admitted", None)),
        # every pod done, the Job not Complete yet (it waits for the pods to terminate): still Running
        (job(False, active=0, ready=0, succeeded=4), None, ("Running", None)),
        (
            job(False, ready=0, succeeded=4, conditions=[{"type": "SuccessCriteriaMet", "status": "True"}]),
            None,
            ("Running", None),
        ),
        (job(False, active=0, ready=0, failed=1), None, ("Running", None)),
        (job(False, conditions=[{"type": "Complete", "status": "True"}]), None, ("Succeeded", None)),
        (job(False, conditions=[{"type": "Failed", "status": "True"}]), None, ("Failed", None)),
    ],
)
def test_one_status_vocabulary_from_the_job_and_its_workload(the_job, the_workload, expected):
    assert job_status(the_job, the_workload) == expected
