"""The training kinds the API governs (domain/manifests/kinds.py, domain/kinds.py): each kind's pod sets
as Kueue makes them, its charge over every pod set, its refusals named inside its own layout, the
manifest completed on every template Kueue reads, a leader and its workers placed as one pod-set group
(feasibility as Kueue counts a group), and each kind read back into one view and status."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topogov.domain.errors import TopologyInfeasible
from topogov.domain.jobs import complete_manifest, job_status
from topogov.domain.labels import (
    GROUP_ANNOTATION,
    HOSTNAME_LABEL,
    PREFERRED_ANNOTATION,
    QUEUE_LABEL,
    REQUIRED_ANNOTATION,
    layer_label,
)
from topogov.domain.manifests import ManifestProblem, Placement, inspect_manifest
from topogov.domain.manifests.kinds import MAX_POD_SETS
from topogov.domain.placement import CapacityIndex, pods_fit
from topogov.domain.policy import Caller, load_policy_file
from topogov.domain.quantity import Resources
from topogov.domain.submission import ManifestRequest
from topogov.domain.tree import NodeCapacity
from topogov.domain.views.batch import JobView
from topogov.domain.views.workload import WorkloadView
from topogov.logic.admission import decide, placement_units

ROOT = Path(__file__).resolve().parents[2]
NS, QUEUE = "hyperpod-ns-team-a", "hyperpod-ns-team-a-localqueue"
L3 = layer_label(3)
P5 = Resources(gpu=8, efa=32, cpu_m=191_000, memory=2000 * 2**30)
POLICY = load_policy_file(ROOT / "teams.yaml")
TEAM_A = Caller.of("arn:aws:iam::123456789012:user/topogov-team-a")


def container(name: str = "pytorch", gpus: int = 8, cpu: str = "4") -> dict[str, Any]:
    return {
        "name": name,
        "image": "pytorch/pytorch:2.5.1",
        "command": ["torchrun", "train.py"],
        "resources": {
            "requests": {"cpu": cpu, "nvidia.com/gpu": str(gpus)},
            "limits": {"nvidia.com/gpu": str(gpus)},
        },
    }


def template(**kw: Any) -> dict[str, Any]:
    return {"spec": {"containers": [container(**kw)], "restartPolicy": "OnFailure"}}


def pytorchjob(workers: int = 3, master: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    """A PyTorchJob of 1 master and ``workers`` workers, 8 GPUs each (Kubeflow's own example shape)."""
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "llm", "namespace": NS},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": master or template()},
                "Worker": {"replicas": workers, "restartPolicy": "OnFailure", "template": template()},
            },
            **spec,
        },
    }


def jobset(*replicated: tuple[str, int, int], **spec: Any) -> dict[str, Any]:
    """A JobSet whose replicated jobs are (name, replicas, pods per Job)."""
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "ls", "namespace": NS},
        "spec": {
            "replicatedJobs": [
                {
                    "name": name,
                    "replicas": replicas,
                    "template": {
                        "spec": {
                            "parallelism": pods,
                            "completions": pods,
                            "backoffLimit": 0,
                            "template": template(name="main"),
                        }
                    },
                }
                for name, replicas, pods in replicated
            ],
            **spec,
        },
    }


def hyp_job() -> dict[str, Any]:
    """What `hyp create hyp-pytorch-job` POSTs with the seed's flags (sagemaker-hyperpod 3.12.0, its
    request body as an API server received it)."""
    path = ROOT / "tests" / "unit" / "data" / "hyp-create-hyp-pytorch-job.json"
    return json.loads(path.read_text(encoding="utf-8"))


def inspect(manifest: Any, **kw: Any):
    return inspect_manifest(manifest, team_namespace=NS, team_queue=QUEUE, **kw)


def refused(manifest: Any, **kw: Any) -> ManifestProblem:
    with pytest.raises(ManifestProblem) as exc:
        inspect(manifest, **kw)
    return exc.value


# --- pod sets and charges --------------------------------------------------------------------------


def test_a_pytorchjob_is_a_master_and_a_worker_pod_set_charged_for_all_four_pods():
    shape = inspect(pytorchjob(workers=3))
    assert [(ps.name, ps.count) for ps in shape.pod_sets] == [("master", 1), ("worker", 3)]
    assert shape.pods == 4 and shape.total.gpu == 32 and shape.kind == "kubeflow.org/v1 PyTorchJob"
    assert shape.grouped  # a master of one pod and its workers: one pod-set group


def test_a_pytorchjobs_charge_sums_unlike_pod_sets():
    shape = inspect(pytorchjob(workers=2, master=template(gpus=1, cpu="64")))
    assert shape.total == Resources(gpu=1 + 2 * 8, cpu_m=64_000 + 2 * 4_000)


def test_a_jobset_pod_set_is_replicas_times_the_pods_of_one_job():
    shape = inspect(jobset(("leader", 1, 1), ("workers", 3, 2)))
    assert [(ps.name, ps.count) for ps in shape.pod_sets] == [("leader", 1), ("workers", 6)]
    assert shape.total.gpu == 7 * 8 and shape.grouped


def test_a_jobset_of_two_multi_pod_sets_is_placed_pod_set_by_pod_set():
    shape = inspect(jobset(("a", 2, 1), ("b", 2, 1)))
    assert not shape.grouped and [u.names for u in placement_units(shape)] == [("a",), ("b",)]


def test_a_jobsets_pods_at_once_are_the_smaller_of_parallelism_and_completions():
    m = jobset(("w", 2, 4))
    m["spec"]["replicatedJobs"][0]["template"]["spec"]["completions"] = 3
    assert inspect(m).pod_sets[0].count == 2 * 3


def test_the_hyp_clis_job_is_accepted_on_hyperpod_only():
    shape = inspect(hyp_job(), hyperpod=True)
    assert [(ps.name, ps.count) for ps in shape.pod_sets] == [("pod", 4)]
    assert shape.total.gpu == 32 and shape.placement == Placement("preferred", L3)
    problem = refused(hyp_job())
    assert problem.field == "manifest.kind"
    for kind in ("batch/v1 Job", "kubeflow.org/v1 PyTorchJob", "jobset.x-k8s.io/v1alpha2 JobSet"):
        assert kind in problem.message
    assert "on SageMaker HyperPod" in problem.message


def test_a_kind_not_accepted_is_refused_listing_the_accepted_kinds():
    problem = refused({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {}})
    assert problem.field == "manifest.kind"
    assert problem.message.startswith(
        "must be one of the accepted kinds: batch/v1 Job, kubeflow.org/v1 PyTorchJob"
    )


# --- refusals, named inside each kind's layout ----------------------------------------------------------

W = "manifest.spec.pytorchReplicaSpecs.Worker"


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        (lambda m: m["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"].update(hostNetwork=True),
         f"{W}.template.spec.hostNetwork", "host"),
        (lambda m: m["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"].update(
            serviceAccountName="admin"), f"{W}.template.spec.serviceAccountName", "ServiceAccounts"),
        (lambda m: m["spec"]["pytorchReplicaSpecs"]["Master"].update(replicas=2),
         "manifest.spec.pytorchReplicaSpecs.Master.replicas", "one master"),
        (lambda m: (r := m["spec"]["pytorchReplicaSpecs"]).update(worker=r.pop("Worker")),
         "manifest.spec.pytorchReplicaSpecs.worker", "Master or Worker"),
        (lambda m: m["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0].update(
            name="main"), f"{W}.template.spec.containers", "'pytorch'"),
        (lambda m: m["spec"].update(runPolicy={"suspend": False}),
         "manifest.spec.runPolicy.suspend", "Kueue"),
        (lambda m: m["spec"].update(runPolicy={"managedBy": "kueue.x-k8s.io/multikueue"}),
         "manifest.spec.runPolicy.managedBy", "outside Kueue"),
        (lambda m: m["spec"].update(runPolicy={"schedulingPolicy": {"minAvailable": 4}}),
         "manifest.spec.runPolicy.schedulingPolicy", "Kueue's"),
        (lambda m: m["spec"].update(elasticPolicy={"minReplicas": 1, "maxReplicas": 8}),
         "manifest.spec.elasticPolicy", "uncharged"),
        (lambda m: m["spec"]["pytorchReplicaSpecs"]["Worker"]["template"].update(
            metadata={"annotations": {GROUP_ANNOTATION: "x"}}),
         f"{W}.template.metadata.annotations.{GROUP_ANNOTATION}", "Kueue's"),
        (lambda m: m["spec"]["pytorchReplicaSpecs"]["Master"]["template"].update(
            metadata={"annotations": {REQUIRED_ANNOTATION: L3}}) or
         m["spec"]["pytorchReplicaSpecs"]["Worker"]["template"].update(
            metadata={"annotations": {PREFERRED_ANNOTATION: L3}}),
         f"{W}.template.metadata.annotations", "one topology"),
    ],
)  # fmt: skip
def test_a_pytorchjob_is_refused_naming_the_field_in_its_own_layout(change, field, words):
    m = pytorchjob()
    change(m)
    problem = refused(m)
    assert problem.field == field and words in problem.message, (problem.field, problem.message)


R = "manifest.spec.replicatedJobs"


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        (lambda m: m["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"].update(
            hostPID=True), f"{R}[1].template.spec.template.spec.hostPID", "host"),
        (lambda m: m["spec"].update(suspend=False), "manifest.spec.suspend", "Kueue"),
        (lambda m: m["spec"]["replicatedJobs"][0]["template"]["spec"].update(manualSelector=True),
         f"{R}[0].template.spec.manualSelector", "adopt"),
        (lambda m: m["spec"]["replicatedJobs"][0].update(replicas=0), f"{R}[0].replicas", "integer"),
        (lambda m: m["spec"]["replicatedJobs"][1].update(name="Workers"), f"{R}[1].name", "DNS-1123"),
        (lambda m: m["spec"]["replicatedJobs"][1].update(name="leader"), f"{R}[1].template.spec.template",
         "repeats"),
        (lambda m: m["metadata"].update(annotations={"alpha.jobset.sigs.k8s.io/exclusive-topology": L3}),
         "manifest.metadata.annotations.alpha.jobset.sigs.k8s.io/exclusive-topology", "affinity"),
        (lambda m: m["spec"].update(managedBy="kueue.x-k8s.io/multikueue"), "manifest.spec.managedBy",
         "outside Kueue"),
    ],
)  # fmt: skip
def test_a_jobset_is_refused_naming_the_field_in_its_own_layout(change, field, words):
    m = jobset(("leader", 1, 1), ("workers", 3, 1))
    change(m)
    problem = refused(m)
    assert problem.field == field and words in problem.message, (problem.field, problem.message)


def test_more_pod_sets_than_a_workload_holds_are_refused_up_front():
    m = jobset(*[(f"r{i}", 1, 1) for i in range(MAX_POD_SETS + 1)])
    problem = refused(m)
    assert problem.field == R and "at most 8" in problem.message
    assert len(inspect(jobset(*[(f"r{i}", 1, 1) for i in range(MAX_POD_SETS)])).pod_sets) == MAX_POD_SETS


def test_a_hyperpod_job_with_spares_or_another_queue_is_refused():
    m = hyp_job()
    m["spec"]["replicaSpecs"][0]["spares"] = 1
    assert refused(m, hyperpod=True).field == "manifest.spec.replicaSpecs[0].spares"
    m = hyp_job()
    m["spec"]["replicaSpecs"][0]["template"]["metadata"]["labels"][QUEUE_LABEL] = "other"
    assert (
        refused(m, hyperpod=True).field
        == f"manifest.spec.replicaSpecs[0].template.metadata.labels.{QUEUE_LABEL}"
    )


# --- completed as governance decided -----------------------------------------------------------------


def test_every_template_kueue_reads_gets_the_topology_and_a_group_gets_its_name():
    shape = inspect(pytorchjob())
    done = complete_manifest(
        pytorchjob(), namespace=NS, queue=QUEUE, priority_class="training", submitted_by="arn",
        placement=Placement("required", L3), shape=shape,
    )  # fmt: skip
    assert done["spec"]["runPolicy"]["suspend"] is True
    assert done["metadata"]["labels"][QUEUE_LABEL] == QUEUE
    for rt in ("Master", "Worker"):
        annotations = done["spec"]["pytorchReplicaSpecs"][rt]["template"]["metadata"]["annotations"]
        assert annotations == {REQUIRED_ANNOTATION: L3, GROUP_ANNOTATION: "job"}
    m = jobset(("a", 2, 1), ("b", 3, 1), ("c", 1, 1))
    done = complete_manifest(
        m, namespace=NS, queue=QUEUE, priority_class="training", submitted_by="arn",
        placement=Placement("preferred", L3), shape=inspect(m),
    )  # fmt: skip
    assert done["spec"]["suspend"] is True
    for rj in done["spec"]["replicatedJobs"]:
        assert rj["template"]["spec"]["template"]["metadata"]["annotations"] == {PREFERRED_ANNOTATION: L3}


def test_no_topology_means_no_group():
    done = complete_manifest(
        pytorchjob(), namespace=NS, queue=QUEUE, priority_class="training", submitted_by="arn",
        placement=None, shape=inspect(pytorchjob()),
    )  # fmt: skip
    assert "annotations" not in done["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["metadata"]


# --- placed as one: a pod-set group, as Kueue counts it ---------------------------------------------------


NOTHING = Resources()


def node(name: str, path: tuple[str, ...], used: Resources = NOTHING) -> NodeCapacity:
    return NodeCapacity(name, path, "p5.48xlarge", "", P5, used)


def fleet(per_block: int = 4, blocks: int = 2) -> list[NodeCapacity]:
    return [node(f"n-{b}-{i}", ("A", "B", f"C{b}")) for b in range(blocks) for i in range(per_block)]


def test_a_pytorchjob_required_at_layer3_fits_when_a_block_holds_master_and_workers():
    manifest = pytorchjob(workers=3)
    manifest["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["metadata"] = {
        "annotations": {REQUIRED_ANNOTATION: L3}
    }
    manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["metadata"] = {
        "annotations": {REQUIRED_ANNOTATION: L3}
    }
    index = CapacityIndex(fleet(per_block=4))
    adm = decide(ManifestRequest(manifest=manifest), caller=TEAM_A, policy=POLICY, index=index)
    assert adm.decision.topology.mode == "required" and "one pod-set group" in adm.decision.topology.reason
    assert adm.charge.gpu == 32 and adm.decision.pods == 4
    five = pytorchjob(workers=4)
    five["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["metadata"] = {
        "annotations": {REQUIRED_ANNOTATION: L3}
    }
    with pytest.raises(TopologyInfeasible) as exc:
        decide(ManifestRequest(manifest=five), caller=TEAM_A, policy=POLICY, index=index)
    assert exc.value.details["pods"] == 5 and exc.value.details["largest_domain_holds"] == 4


def test_pod_sets_placed_one_by_one_are_each_held_to_the_level():
    m = jobset(("a", 4, 1), ("b", 4, 1))
    index = CapacityIndex(fleet(per_block=4))
    adm = decide(
        ManifestRequest(manifest=m, topology={"mode": "required", "level": "layer-3"}),
        caller=TEAM_A, policy=POLICY, index=index,
    )  # fmt: skip
    assert "placed one by one" in adm.decision.topology.reason
    m = jobset(("a", 5, 1), ("b", 2, 1))
    with pytest.raises(TopologyInfeasible) as exc:
        decide(
            ManifestRequest(manifest=m, topology={"mode": "required", "level": "layer-3"}),
            caller=TEAM_A, policy=POLICY, index=index,
        )  # fmt: skip
    assert exc.value.details["pod_sets"] == ["a"] and "of the pod set a" in exc.value.message


def test_the_leader_is_the_pod_set_of_fewer_pods_the_second_on_a_tie():
    one = inspect(jobset(("x", 1, 1), ("y", 1, 1)))
    (unit,) = placement_units(one)
    assert unit.count == 2 and unit.names == ("x", "y")
    big = pytorchjob(workers=1, master=template(gpus=8, cpu="100"))
    (unit,) = placement_units(inspect(big))
    # master 1 pod, worker 1 pod: the worker (second) leads; the master's pods are the "workers"
    assert unit.leader == Resources(gpu=8, cpu_m=4000) and unit.pod == Resources(gpu=8, cpu_m=100_000)


def kueue_group_counts(nodes, label, worker, leader, now):
    """The reference: Kueue v0.17.0's counts for a group (tas_flavor_snapshot.go fillInCounts and
    fillInCountsHelper), domain by domain, as a tree of the nodes' paths."""

    def leaf(n):
        have = n.allocatable - n.used if now else n.allocatable
        state = pods_fit(have, worker)
        holds = pods_fit(have, leader) > 0
        return state, int(holds), pods_fit(have - leader, worker) if holds else state

    depth = None if label == HOSTNAME_LABEL else int(label.rsplit("-", 1)[1])

    def sub(members, level):
        if level > len(members[0].path):
            if len(members) == 1:
                return leaf(members[0])
            kids = [leaf(n) for n in members]
            state = sum(k[0] for k in kids)
            return state, max(k[1] for k in kids), state - min(k[0] - k[2] for k in kids)
        groups = {}
        for n in members:
            groups.setdefault(n.path[level - 1], []).append(n)
        kids = [sub(ms, level + 1) for ms in groups.values()]
        state = sum(k[0] for k in kids)
        return state, max(k[1] for k in kids), state - min(k[0] - k[2] for k in kids)

    out = {}
    if depth is None:
        for n in nodes:
            _, lead, with_leader = leaf(n)
            out[n.name] = with_leader + 1 if lead else 0
        return out
    domains = {}
    for n in nodes:
        domains.setdefault(n.path[depth - 1], []).append(n)
    for d, members in domains.items():
        _, lead, with_leader = sub(members, depth + 1)
        out[d] = with_leader + 1 if lead else 0
    return out


pod_st = st.builds(Resources, st.integers(0, 8), st.just(0), st.sampled_from([0, 1000, 64_000]), st.just(0))


@settings(max_examples=150)
@given(
    st.lists(
        st.builds(
            node,
            name=st.uuids().map(str),
            path=st.tuples(st.sampled_from("ab"), st.sampled_from("cde"), st.sampled_from("fgh")),
            used=st.builds(Resources, st.sampled_from([0, 2, 7, 8]), st.just(0), st.just(0), st.just(0)),
        ),
        min_size=1,
        max_size=30,
    ),
    pod_st,
    pod_st,
    st.booleans(),
)
def test_a_groups_counts_agree_with_kueues_tree_of_nodes(nodes, worker, leader, now):
    index = CapacityIndex(nodes)
    for label in (HOSTNAME_LABEL, layer_label(1), layer_label(2), layer_label(3)):
        held = kueue_group_counts(nodes, label, worker, leader, now)
        fit = index.best_domain(label, worker, now=now, leader=leader)
        assert fit.pods == max(held.values(), default=0), label
        if fit.domain is not None:
            assert held[fit.domain] == fit.pods


def test_kueue_counts_a_full_node_as_losing_nothing_to_the_leader():
    """Kueue's count of a group takes the smallest loss the leader causes on any node of a domain,
    a full node's (none) included: a domain of one free and one full node is counted as holding the
    leader and as many workers as without it (tas_flavor_snapshot.go, fillInCountsHelper)."""
    full = Resources(gpu=8)
    nodes = [node("free", ("A", "B", "C")), node("full", ("A", "B", "C"), used=full)]
    fit = CapacityIndex(nodes).best_domain(L3, Resources(gpu=8), now=True, leader=Resources(gpu=8))
    assert fit.pods == 2  # the leader and 1 worker "fit", though one node has room for one pod


# --- read back: one view, one status vocabulary ------------------------------------------------------


def cond(kind: str, status: str = "True", at: str = "2026-12-01T10:00:00Z") -> dict[str, Any]:
    return {"type": kind, "status": status, "lastTransitionTime": at}


def test_each_kind_reads_into_one_view_and_status():
    pt = copy.deepcopy(pytorchjob())
    pt["metadata"]["uid"] = "u1"
    pt["spec"]["runPolicy"] = {"suspend": False}
    pt["status"] = {
        "conditions": [cond("Created"), cond("Running")],
        "replicaStatuses": {"Master": {"active": 1}, "Worker": {"active": 3}},
        "startTime": "2026-12-01T10:00:00Z",
    }
    view = JobView.from_api(pt)
    assert (view.kind, view.active, view.suspended) == ("PyTorchJob", 4, False)
    assert [p for p, _ in view.templates] == [
        ("spec", "pytorchReplicaSpecs", "Master", "template"),
        ("spec", "pytorchReplicaSpecs", "Worker", "template"),
    ]
    assert job_status(view, None) == ("Running", None)
    pt["status"]["conditions"].append(cond("Succeeded"))
    assert job_status(JobView.from_api(pt), None) == ("Succeeded", None)

    js = jobset(("leader", 1, 1), ("workers", 3, 1), suspend=True)
    view = JobView.from_api(js)
    assert view.suspended and job_status(view, None)[0] == "Pending"
    assert "JobSet" in (job_status(view, None)[1] or "")
    js["spec"]["suspend"] = False
    js["status"] = {
        "conditions": [
            cond("Suspended", "False", "2026-12-01T10:00:00Z"),
            cond("Completed", at="2026-12-01T11:00:00Z"),
        ],
        "replicatedJobsStatus": [{"name": "leader", "succeeded": 1}, {"name": "workers", "succeeded": 3}],
    }
    view = JobView.from_api(js)
    assert job_status(view, None) == ("Succeeded", None)
    assert (view.start_time, view.completion_time) == ("2026-12-01T10:00:00Z", "2026-12-01T11:00:00Z")

    hp = hyp_job()
    hp["status"] = {"conditions": [cond("Created")]}
    view = JobView.from_api(hp)
    admitted = WorkloadView.from_api(
        {"metadata": {"name": "w"}, "status": {"conditions": [cond("QuotaReserved"), cond("Admitted")]}}
    )
    assert view.suspended and job_status(view, admitted) == ("Admitted", None)
    hp["status"]["conditions"].append(cond("Running"))
    assert job_status(JobView.from_api(hp), admitted) == ("Running", None)


def test_the_hyp_clis_job_keeps_its_instance_type_beside_its_topology_on_hyperpod():
    """`hyp` writes the instance-type nodeSelector and the topology annotation together (on the object
    and the template): Topogov keeps both, decides the topology once and writes it on both."""
    nodes = [
        NodeCapacity(f"h{i}", ("A", "B", f"C{i // 4}"), "p5.48xlarge", "", P5, NOTHING) for i in range(8)
    ]
    adm = decide(
        ManifestRequest(manifest=hyp_job()), caller=TEAM_A, policy=POLICY, index=CapacityIndex(nodes),
        hyperpod=True,
    )  # fmt: skip
    done = adm.manifest
    template = done["spec"]["replicaSpecs"][0]["template"]
    assert template["spec"]["nodeSelector"] == {"node.kubernetes.io/instance-type": "ml.p5.48xlarge"}
    assert template["metadata"]["annotations"] == {PREFERRED_ANNOTATION: L3}
    assert done["metadata"]["annotations"][PREFERRED_ANNOTATION] == L3
    assert template["metadata"]["labels"][QUEUE_LABEL] == QUEUE
    assert adm.decision.topology.mode == "preferred" and adm.charge.gpu == 32
