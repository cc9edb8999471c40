"""The governor against the local Kubernetes API: create, correct drift, leave unowned objects alone,
stop and drain a removed team's queue, delete what the policy no longer has.

The kubernetes client's ApiClient speaks real HTTP to the emulator; the server's own request
counters say what was written.
"""

from __future__ import annotations

import copy
import json

import pytest

from topogov.adapters.kube_objects import KubeObjects, object_path
from topogov.domain.labels import MANAGED_BY_LABEL
from topogov.domain.policy import load_policy as _load_text
from topogov.domain.team_pods import RULES_NAMESPACE
from topogov.logic.governor import Action, Governor, format_plan

from ..unit.test_governor_render import sample_snapshot

V1B1 = "kueue.x-k8s.io/v1beta1"


def load_policy(doc: dict):
    return _load_text(json.dumps(doc))  # JSON is YAML


VALUES = {"high": 1000, "mid": 500, "low": 100}
CQ_A = "hyperpod-ns-team-a-clusterqueue"
CQ_B = "hyperpod-ns-team-b-clusterqueue"


def policy_doc(teams=("team-a", "team-b"), classes=("high", "low")) -> dict:
    return {
        "priorityClasses": [{"name": c, "value": VALUES[c]} for c in classes],
        "teams": {
            t: {
                "principals": [f"arn:aws:iam::111122223333:role/{t}"],
                "quota": {"nvidia.com/gpu": 64, "vpc.amazonaws.com/efa": 256, "cpu": 1024, "memory": "8Ti"},
                "priorityClasses": [classes[-1]],
            }
            for t in teams
        },
    }


class Recorder:
    """A logger that keeps (message, extra) of everything logged, as the Lambda's logger would log it."""

    def __init__(self, into: list) -> None:
        self.into = into

    def info(self, message: str, extra: dict) -> None:
        self.into.append((message, extra))

    warning = info


@pytest.fixture
def logged():
    return []


@pytest.fixture
def governor(kube, logged):
    # topogov-system, where the governor keeps the team pod rules, as deploy/rbac.yaml declares it
    kube.request("POST", "/api/v1/namespaces", body={"metadata": {"name": RULES_NAMESPACE}})
    kube.request("DELETE", "/_emulator/requests")
    return Governor(KubeObjects(kube), log=Recorder(logged))


def writes(kube) -> dict[str, int]:
    counts = kube.request("GET", "/_emulator/requests").body
    return {k: v for k, v in counts.items() if not k.startswith(("GET", "WATCH"))}


def get(kube, kind_path: str) -> dict | None:
    resp = kube.request("GET", kind_path)
    return resp.body if resp.status == 200 else None


def cq_path(name: str) -> str:
    return object_path(V1B1, "ClusterQueue", name)


def test_first_pass_creates_everything_and_the_next_writes_nothing(kube, governor):
    policy = load_policy(policy_doc())
    summary = governor.run(policy, sample_snapshot(), kube.counters)
    assert summary.complete, summary.failures
    plan = summary.plan
    # 2 namespaces, 2 Topologies (3 and 4 layers), 2 flavors, 1 cohort, 2 priority classes, 2 ClusterQueues,
    # 2 LocalQueues; and the 2 teams' pod rules (ConfigMaps in topogov-system)
    assert plan.count(Action.CREATE) == 15 and summary.applied == 15
    rules = [c.name for c in plan.changes if c.kind == "ConfigMap"]
    assert rules == ["pod-rules-team-a", "pod-rules-team-b"]
    ns = get(kube, "/api/v1/namespaces/hyperpod-ns-team-a")
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
    lq = get(kube, object_path(V1B1, "LocalQueue", "hyperpod-ns-team-a-localqueue", "hyperpod-ns-team-a"))
    assert lq["spec"]["clusterQueue"] == CQ_A  # (Kueue defaults stopPolicy: None on it)
    assert get(kube, cq_path(CQ_A))["metadata"]["labels"][MANAGED_BY_LABEL] == "topogov"

    kube.request("DELETE", "/_emulator/requests")
    again = governor.run(policy, sample_snapshot(), kube.counters)
    assert again.plan.changes == [] and again.plan.unchanged == 13
    assert writes(kube) == {}  # no write without drift
    assert again.k8s_reads == 8  # one list per kind, whatever the number of teams (and the pod rules')


def test_owned_object_edited_by_hand_is_corrected_and_logged(kube, governor, logged):
    policy = load_policy(policy_doc())
    governor.run(policy, sample_snapshot())
    cq = get(kube, cq_path(CQ_A))
    rendered_gpu = cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"]
    edited = copy.deepcopy(cq)
    gpu = edited["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    gpu["nominalQuota"] = 999
    gpu["lendingLimit"] = 0  # a field Topogov does not render, inside the quotas
    edited["spec"]["stopPolicy"] = "Hold"
    edited["spec"]["queueingStrategy"] = "StrictFIFO"  # outside the quotas and not rendered: not Topogov's
    edited["metadata"]["labels"]["owner"] = "someone"
    assert kube.request("PUT", cq_path(CQ_A), body=edited).status == 200

    plan = governor.plan(policy, sample_snapshot())
    (change,) = plan.changes
    assert change.action == Action.UPDATE and change.name == CQ_A
    # (Kueue hands quantities back as strings once its conversion webhook has had them: "999")
    gpu_path = "spec.resourceGroups[0].flavors[p5.48xlarge].resources[nvidia.com/gpu]"
    assert {line.replace('"', "") for line in change.diff} == {
        f"{gpu_path}.nominalQuota: 999 -> {int(rendered_gpu)}",
        f"{gpu_path}.lendingLimit: 0 -> (absent)",
        "spec.stopPolicy: Hold -> None",
    }
    assert "~ update   ClusterQueue " + CQ_A in format_plan(plan)

    summary = governor.apply(plan)
    assert summary.complete and summary.applied == 1
    fixed = get(kube, cq_path(CQ_A))
    assert fixed["spec"]["resourceGroups"] == cq["spec"]["resourceGroups"]
    assert fixed["spec"]["stopPolicy"] == "None"
    assert fixed["metadata"]["labels"]["owner"] == "someone"  # other labels are kept
    assert change.reason == "edited by hand"
    assert (
        "corrected drift",
        {"object": f"ClusterQueue {CQ_A}", "diff": change.diff, "why": "edited by hand"},
    ) in logged
    assert governor.plan(policy, sample_snapshot()).changes == []


def test_equal_quantities_written_differently_are_not_drift(kube, governor):
    policy = load_policy(policy_doc())
    governor.run(policy, sample_snapshot())
    cq = get(kube, cq_path(CQ_A))
    for flavor in cq["spec"]["resourceGroups"][0]["flavors"]:
        memory = flavor["resources"][3]
        assert memory["name"] == "memory"
        from topogov.domain.quantity import parse_quantity

        memory["nominalQuota"] = str(int(parse_quantity(memory["nominalQuota"])))  # bytes, no suffix
    assert kube.request("PUT", cq_path(CQ_A), body=cq).status == 200
    assert governor.plan(policy, sample_snapshot()).changes == []


def test_same_named_object_not_owned_is_left_alone_and_reported(kube, governor, logged):
    theirs = {
        "apiVersion": V1B1,
        "kind": "ClusterQueue",
        "metadata": {"name": CQ_B, "labels": {"owner": "platform"}},
        "spec": {"namespaceSelector": {}, "resourceGroups": []},
    }
    assert kube.request("POST", object_path(V1B1, "ClusterQueue"), body=theirs).status == 201
    before = get(kube, cq_path(CQ_B))

    summary = governor.run(load_policy(policy_doc()), sample_snapshot())
    unowned = [c for c in summary.plan.changes if c.action == Action.UNOWNED]
    assert [(c.kind, c.name) for c in unowned] == [("ClusterQueue", CQ_B)]
    assert "not Topogov's, left alone" in unowned[0].reason
    after = get(kube, cq_path(CQ_B))
    # Untouched by the governor. (Not the resourceVersion: Kueue writes the queue's status on its
    # own schedule, seen in CI as 536 -> 537 between the two reads; a status write changes neither
    # the generation nor the spec, labels or annotations.)
    kept = ("generation", "labels", "annotations")
    assert {k: after["metadata"].get(k) for k in kept} == {k: before["metadata"].get(k) for k in kept}
    assert after["spec"] == before["spec"]
    writers = {
        (f.get("manager"), f.get("subresource"))
        for f in after["metadata"].get("managedFields") or []
        if f not in (before["metadata"].get("managedFields") or [])
    }
    assert all(subresource == "status" for _, subresource in writers), writers
    assert ("object not owned by topogov left alone", {"object": f"ClusterQueue {CQ_B}"}) in logged
    # ... and never deleted either, even once the policy drops the team.
    summary = governor.run(load_policy(policy_doc(teams=("team-a",))), sample_snapshot())
    assert get(kube, cq_path(CQ_B)) is not None
    assert all(c.name != CQ_B for c in summary.plan.changes)


def _job(name: str, namespace: str, queue: str | None = None) -> dict:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "suspend": True,
            "template": {
                "spec": {
                    "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}],
                    "restartPolicy": "Never",
                }
            },
        },
    }
    if queue:
        job["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": queue}
    return job


def _wait(predicate, what: str, timeout_s: float = 30):
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout_s:.0f}s: {what}")


def test_removed_team_with_running_jobs_is_stopped_and_drained_not_deleted(kube, governor):
    """Kueue counts the team's Workloads on its ClusterQueue (its controller writes the status): the
    queue of a team removed from the policy is held while Kueue reports any or a Job is unfinished."""
    governor.run(load_policy(policy_doc(teams=("team-a", "team-b", "team-c"))), sample_snapshot())
    ns = "hyperpod-ns-team-c"
    cq_c = "hyperpod-ns-team-c-clusterqueue"
    job = _job("train", ns, queue="hyperpod-ns-team-c-localqueue")
    assert kube.request("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", body=job).status == 201
    # no node in this cluster: Kueue creates the Workload and keeps it pending
    _wait(lambda: (get(kube, cq_path(cq_c)).get("status") or {}).get("pendingWorkloads"), "Kueue counts it")

    smaller = load_policy(policy_doc(teams=("team-a", "team-b")))
    plan = governor.plan(smaller, sample_snapshot())
    by = {(c.kind, c.name): c for c in plan.changes}
    hold = by[("ClusterQueue", cq_c)]
    assert hold.action == Action.HOLD
    assert hold.diff == ['spec.stopPolicy: "None" -> "HoldAndDrain"']
    assert (
        "Kueue reports 1 pendingWorkloads" in hold.reason
        and f"1 unfinished Job(s) in {ns}: train" in hold.reason
    )
    assert by[("LocalQueue", "hyperpod-ns-team-c-localqueue")].action == Action.KEEP
    assert Action.DELETE not in {c.action for c in plan.changes if c.kind != "ConfigMap"}
    assert by[("ConfigMap", "pod-rules-team-c")].action == Action.DELETE  # no new pod of a removed team

    assert governor.apply(plan).complete
    cq = get(kube, cq_path(cq_c))
    assert cq["spec"]["stopPolicy"] == "HoldAndDrain"
    assert get(kube, object_path(V1B1, "LocalQueue", "hyperpod-ns-team-c-localqueue", ns)) is not None

    # Next pass: already held, nothing written.
    again = governor.plan(smaller, sample_snapshot())
    assert again.count(Action.HOLD) == 0 and again.count(Action.KEEP) == 2 and not again.writes

    # The job goes (its Workload with it) and Kueue's counts drop to zero: queue and LocalQueue go;
    # the namespace stays.
    kube.request(
        "DELETE", f"/apis/batch/v1/namespaces/{ns}/jobs/train", query={"propagationPolicy": "Foreground"}
    )
    _wait(lambda: get(kube, f"/apis/batch/v1/namespaces/{ns}/jobs/train") is None, "the Job is gone")
    _wait(
        lambda: not any(int((get(kube, cq_path(cq_c)).get("status") or {}).get(k) or 0) for k in
                        ("pendingWorkloads", "reservingWorkloads", "admittedWorkloads")),
        "Kueue counts nothing",
    )  # fmt: skip
    final = governor.run(smaller, sample_snapshot())
    assert final.complete
    deleted = [(c.kind, c.name) for c in final.plan.changes if c.action == Action.DELETE]
    assert deleted == [("LocalQueue", "hyperpod-ns-team-c-localqueue"), ("ClusterQueue", cq_c)], deleted
    _wait(lambda: get(kube, cq_path(cq_c)) is None, "Kueue releases the queue's finalizer")
    assert get(kube, f"/api/v1/namespaces/{ns}") is not None


def test_a_class_or_flavor_the_policy_and_fleet_no_longer_have_is_deleted(kube, governor):
    governor.run(load_policy(policy_doc(classes=("high", "mid", "low"))), sample_snapshot())
    only_p5 = sample_snapshot()
    only_p5.nodes = {k: v for k, v in only_p5.nodes.items() if not k.startswith("b200")}
    summary = governor.run(load_policy(policy_doc(classes=("high", "low"))), only_p5)
    assert summary.complete
    deleted = [(c.kind, c.name) for c in summary.plan.changes if c.action == Action.DELETE]
    assert deleted == [
        ("WorkloadPriorityClass", "mid"),
        ("ResourceFlavor", "p6-b200.48xlarge"),
        ("Topology", "topogov-4-layers"),  # no flavor is four layers deep any more
    ]
    updated = [(c.name, c.reason) for c in summary.plan.changes if c.action == Action.UPDATE]
    assert updated == [  # their quotas moved to one flavor
        (CQ_A, "the policy or the fleet changed"),
        ("hyperpod-ns-team-b-clusterqueue", "the policy or the fleet changed"),
    ]
    cq = get(kube, cq_path(CQ_A))
    assert [f["name"] for f in cq["spec"]["resourceGroups"][0]["flavors"]] == ["p5.48xlarge"]


def test_no_gpu_flavor_in_the_snapshot_changes_and_deletes_nothing(kube, governor):
    governor.run(load_policy(policy_doc()), sample_snapshot())
    kube.request("DELETE", "/_emulator/requests")
    summary = governor.run(load_policy(policy_doc()), None)
    assert summary.plan.skipped and "nothing rendered" in summary.plan.skipped
    assert writes(kube) == {}
    assert get(kube, cq_path(CQ_A)) is not None


def test_quotas_above_capacity_are_a_warning_with_the_numbers(kube, governor):
    doc = policy_doc()
    doc["teams"]["team-a"]["quota"]["nvidia.com/gpu"] = 600  # the sample fleet has 544 GPUs
    plan = governor.plan(load_policy(doc), sample_snapshot())
    assert "nominal nvidia.com/gpu quotas add up to 664, the cluster has 544" in plan.warnings
    assert "warning: nominal nvidia.com/gpu quotas add up to 664" in format_plan(plan)


def test_v1beta2_objects_are_written_with_cohort_name(kube, governor, logged):
    gov = Governor(KubeObjects(kube), api_version="v1beta2", log=Recorder(logged))
    summary = gov.run(load_policy(policy_doc()), sample_snapshot())
    assert summary.complete
    cq = get(kube, object_path("kueue.x-k8s.io/v1beta2", "ClusterQueue", CQ_A))
    assert cq["spec"]["cohortName"] == "topogov" and "cohort" not in cq["spec"]
    assert gov.plan(load_policy(policy_doc()), sample_snapshot()).changes == []


def written_by_hand(kube, path: str, change) -> None:
    """A read, a change and a PUT, as kubectl edit does; again when the PUT meets a 409 (Kueue writes
    a queue's status at any time), so the change is surely made."""
    for _ in range(10):
        obj = get(kube, path)
        change(obj)
        if kube.request("PUT", path, body=obj).status == 200:
            return
    raise AssertionError(f"PUT {path}: a 409 ten times over")


def test_a_conflicting_writer_is_retried_and_a_failing_write_is_reported(server, kube, governor):
    policy = load_policy(policy_doc())
    governor.run(policy, sample_snapshot())
    written_by_hand(kube, cq_path(CQ_A), lambda cq: cq["spec"].update(stopPolicy="Hold"))
    plan = governor.plan(policy, sample_snapshot())
    # Someone else writes between our read and our write: our PUT gets 409, we re-read and win.
    written_by_hand(kube, cq_path(CQ_A), lambda cq: cq["metadata"].update(annotations={"touched": "yes"}))
    assert governor.apply(plan).complete
    fixed = get(kube, cq_path(CQ_A))
    assert fixed["spec"]["stopPolicy"] == "None" and fixed["metadata"]["annotations"]["touched"] == "yes"

    # A write the API server keeps refusing is reported; the other objects are still written.
    server[0].reset()
    kube.request("POST", "/api/v1/namespaces", body={"metadata": {"name": RULES_NAMESPACE}})
    rule = {"method": "POST", "path": "/clusterqueues$", "status": 500, "times": 100}
    assert kube.request("POST", "/_emulator/faults", body=rule).status in (200, 201)
    summary = governor.run(policy, sample_snapshot())
    assert not summary.complete
    assert {f["object"] for f in summary.failures} == {f"ClusterQueue {CQ_A}", f"ClusterQueue {CQ_B}"}
    assert summary.applied == 13  # the other 11 objects, and the 2 teams' pod rules
    kube.request("DELETE", "/_emulator/faults")
    assert governor.run(policy, sample_snapshot()).applied == 2  # the next pass converges


# --- the upgrade from one shared Topology (issue 11, item 1) ------------------------------------------


def legacy_objects(policy, snapshot, levels: int) -> list[dict]:
    """What the governor wrote before per-depth Topologies: one ``topogov-network`` of ``levels``
    network layers that every flavor refers to, stamped as the governor stamped it."""
    from topogov.domain.kueue import flavors_from_snapshot, render, topology_levels, topology_object
    from topogov.domain.views.objects import object_view
    from topogov.logic.governor import stamped

    objects = []
    for obj in render(policy, flavors_from_snapshot(snapshot)):
        if obj["kind"] == "Topology":
            continue
        if obj["kind"] == "ResourceFlavor":
            if all(o["kind"] != "Topology" for o in objects):
                objects.append(topology_object("topogov-network", topology_levels(levels), "v1beta1"))
            obj = copy.deepcopy(obj)
            obj["spec"]["topologyName"] = "topogov-network"
        objects.append(obj)
    return [o if o["kind"] == "Namespace" else stamped(object_view(o)) for o in objects]


def test_a_mixed_fleet_from_one_shared_topology_moves_only_the_p5_flavor(kube, governor, logged):
    """Kueue drops a node lacking any level label of its flavor's Topology (kueue v0.17.0
    pkg/util/tas/node.go NodeMatchesFlavor), so the old shared 4-layer ``topogov-network`` excluded every
    p5 node. The upgrade re-creates the p5 flavor in ``topogov-3-layers`` (topologyName is immutable:
    out of the queues, deleted, created, back in the queues) and leaves the p6-b200 flavor where it is,
    in the old Topology whose four levels are right for it."""
    policy = load_policy(policy_doc())
    for obj in legacy_objects(policy, sample_snapshot(), levels=4):
        governor.objects.create(obj)
    plan = governor.plan(policy, sample_snapshot())
    summary_text = format_plan(plan)
    assert [(c.action, c.kind, c.name) for c in plan.writes if c.kind != "ConfigMap"] == [
        (Action.CREATE, "Topology", "topogov-3-layers"),
        (Action.RECREATE, "ResourceFlavor", "p5.48xlarge"),
        (Action.UPDATE, "ClusterQueue", CQ_A),
        (Action.UPDATE, "ClusterQueue", CQ_B),
    ], summary_text
    assert 'spec.topologyName: "topogov-network" -> "topogov-3-layers"' in summary_text
    assert "topologyName is immutable in Kueue" in summary_text
    summary = governor.apply(plan)
    assert summary.complete, summary.failures
    p5 = get(kube, object_path(V1B1, "ResourceFlavor", "p5.48xlarge"))
    b200 = get(kube, object_path(V1B1, "ResourceFlavor", "p6-b200.48xlarge"))
    assert p5["spec"]["topologyName"] == "topogov-3-layers"
    assert b200["spec"]["topologyName"] == "topogov-network"
    for name in (CQ_A, CQ_B):  # both flavors back in every queue
        flavors = [f["name"] for f in get(kube, cq_path(name))["spec"]["resourceGroups"][0]["flavors"]]
        assert flavors == ["p5.48xlarge", "p6-b200.48xlarge"]
    assert any(m.startswith("re-created a flavor") for m, _ in logged)
    again = governor.plan(policy, sample_snapshot())
    assert again.changes == [], format_plan(again)
    assert again.topologies == {"p5.48xlarge": "topogov-3-layers", "p6-b200.48xlarge": "topogov-network"}


def test_a_p5_only_cluster_keeps_its_three_layer_topology(kube, governor):
    """Nothing is wrong on a fleet of one depth: the old Topology has the right levels and stays."""
    policy = load_policy(policy_doc())
    only_p5 = sample_snapshot()
    only_p5.nodes = {k: v for k, v in only_p5.nodes.items() if not k.startswith("b200")}
    for obj in legacy_objects(policy, only_p5, levels=3):
        governor.objects.create(obj)
    plan = governor.plan(policy, only_p5)
    assert [c for c in plan.changes if c.kind != "ConfigMap"] == [], format_plan(plan)
    assert plan.topologies == {"p5.48xlarge": "topogov-network"}
