"""HyperPod mode (issue 25): the mode's rule, the labeler's snapshot from the labels HyperPod sets (and no
write, no EC2), the governor's drift report against the add-on's objects, the quotas in force read from
the add-on's ClusterQueues, the API's Job as the add-on expects it, and HyperPodPyTorchJobs read-only.

The add-on's objects are those ``domain/hyperpod`` says it writes for teams.yaml (the same rendering the
local add-on emulation writes to a real API server); in-memory ports stand for the adapters."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from tests.unit.test_labeler import FakeEc2, FakeNodes, FakeStore
from topogov.domain.errors import Conflict, NeverAdmissible, QuotasUnavailable
from topogov.domain.hyperpod import expected_objects
from topogov.domain.hyperpod.mapping import cluster_queue
from topogov.domain.hyperpod.mode import detect, mode_in_force
from topogov.domain.hyperpod.quotas import in_force, policy_in_force, read_queues
from topogov.domain.labels import (
    INSTANCE_TYPE_LABEL,
    MANAGED_BY_LABEL,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    REQUIRED_ANNOTATION,
    ULTRASERVER_LABEL,
    layer_label,
)
from topogov.domain.policy import Caller, load_policy_file
from topogov.domain.quantity import Resources
from topogov.domain.snapshot import Snapshot
from topogov.domain.submission import JobRequest
from topogov.domain.tree import NodeCapacity, build_tree
from topogov.domain.views.objects import ObjectView, object_view
from topogov.domain.views.workload import WorkloadView
from topogov.logic.admission import decide
from topogov.logic.api_service import ApiService
from topogov.logic.governor.addon import DIFFERS, MISSING, UNEXPECTED, AddonWatch, compare, format_report
from topogov.logic.labeler import Labeler, PassOptions

ROOT = Path(__file__).resolve().parents[2]
POLICY = load_policy_file(ROOT / "teams.yaml")
ARN = "arn:aws:sagemaker:us-west-2:111122223333:cluster/abc123xyz789"
TEAM_A = Caller.of("arn:aws:iam::123456789012:user/topogov-team-a")
ADDON_NS = ["hyperpod-ns-team-a", "hyperpod-ns-team-b", "hyperpod-ns-team-c"]


def hp_node(
    n: int,
    *,
    health: str = "Schedulable",
    taint: str | None = None,
    ultraserver: str | None = None,
    layers: tuple[str, ...] | None = None,
) -> dict[str, Any]:
    """A HyperPod node as the service registers it: its providerID, ``ml.`` instance type, the
    sagemaker.amazonaws.com/* labels and the topology labels HyperPod sets."""
    iid = f"i-{n:017x}"
    labels = {
        INSTANCE_TYPE_LABEL: "ml.p5.48xlarge",
        "sagemaker.amazonaws.com/compute-type": "hyperpod",
        "sagemaker.amazonaws.com/node-health-status": health,
        "sagemaker.amazonaws.com/cluster-name": "abc123xyz",
        "sagemaker.amazonaws.com/instance-group-name": "workers",
    }
    for k, value in enumerate(layers or (f"nn-a-{n // 16}", f"nn-b-{n // 8}", f"nn-c-{n // 4}"), start=1):
        labels[layer_label(k)] = value
    if ultraserver:
        labels[ULTRASERVER_LABEL] = ultraserver
    spec: dict[str, Any] = {"providerID": f"aws:///usw2-az2/sagemaker/cluster/hyperpod-abc123xyz-{iid}"}
    if taint:
        spec["taints"] = [{"key": taint, "value": "Unschedulable", "effect": "NoSchedule"}]
    return {
        "metadata": {"name": f"hyperpod-{iid}", "labels": labels},
        "spec": spec,
        "status": {
            "allocatable": {"nvidia.com/gpu": "8", "cpu": "192", "memory": "2000Gi"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def ec2_node(n: int) -> dict[str, Any]:
    return {
        "metadata": {"name": f"ec2-{n}", "labels": {INSTANCE_TYPE_LABEL: "p5.48xlarge"}},
        "spec": {"providerID": f"aws:///us-west-2a/i-{n:017x}"},
        "status": {
            "allocatable": {"nvidia.com/gpu": "8"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def labeler(nodes: list[dict[str, Any]], *, arn: str | None = ARN, namespaces: Any = lambda: list(ADDON_NS)):
    fake, ec2, store = FakeNodes(nodes), FakeEc2({}), FakeStore()
    lab = Labeler(
        fake, ec2, store, wall=lambda: 2000.0, hyperpod_cluster_arn=arn, addon_namespaces=namespaces
    )
    return lab, fake, ec2, store


# --- the mode -----------------------------------------------------------------------------------------


def test_the_mode_is_hyperpod_when_either_the_deployment_or_the_addons_namespaces_say_so():
    both = detect(ARN, 4, ADDON_NS)
    assert both.hyperpod and not both.warnings and both.why.startswith("configured")
    assert "hyperpod-ns-team-a" in both.why
    configured_only = detect(ARN, 4, [])
    assert configured_only.hyperpod and "not installed" in configured_only.warnings[0]
    seen_only = detect(None, 4, ADDON_NS)
    assert (
        seen_only.hyperpod
        and seen_only.why.startswith("seen")
        and "hyperpodClusterArn" in seen_only.warnings[0]
    )
    neither = detect(None, 4, [])
    assert not neither.hyperpod and "4 HyperPod node(s) without the task governance add-on" in neither.why


def test_the_mode_in_force_is_the_last_passs_else_the_deployments():
    seen = detect(None, 4, ADDON_NS)
    assert mode_in_force(seen.to_json(), None) == seen  # the add-on seen, not configured
    assert mode_in_force(detect(None, 0, []).to_json(), ARN).name == "eks"  # the pass's answer wins
    assert mode_in_force(None, ARN).hyperpod and mode_in_force(None, ARN).why.startswith("configured")
    assert not mode_in_force(None, None).hyperpod and not mode_in_force({}, None).hyperpod


# --- the labeler ----------------------------------------------------------------------------------------


def test_in_hyperpod_mode_the_labeler_writes_no_label_asks_no_ec2_and_reads_the_nodes_labels():
    nodes = [hp_node(i) for i in range(6)]
    nodes += [
        hp_node(6, health="UnschedulablePendingReplacement"),
        hp_node(7, taint="sagemaker.amazonaws.com/node-health-status"),
        hp_node(8, ultraserver="us-0"),
        hp_node(9, ultraserver="us-0"),
        ec2_node(100),  # an EC2 node of a HyperPod-mode cluster: read, never labelled
    ]
    lab, fake, ec2, store = labeler(nodes)
    summary = lab.run(PassOptions())
    assert (summary.k8s_writes, summary.patched, summary.ec2_calls, ec2.asked) == (0, 0, 0, [])
    assert summary.cluster_mode == "hyperpod" and summary.cluster_mode_why.startswith("configured")
    assert (summary.hyperpod_nodes, summary.unavailable) == (10, 2)
    assert summary.skipped == {"hyperpod_managed": 10, "hyperpod_mode": 1}
    snap = store.snap
    assert snap is not None and snap.mode["name"] == "hyperpod"
    healthy = snap.nodes[f"hyperpod-i-{0:017x}"]
    assert healthy.instance_type == "p5.48xlarge" and healthy.available  # ml. normalised
    assert healthy.path == ("nn-a-0", "nn-b-0", "nn-c-0")
    assert healthy.allocatable == Resources(gpu=8, cpu_m=192_000, memory=2000 * 2**30)
    assert not snap.nodes[f"hyperpod-i-{6:017x}"].available  # health label not Schedulable
    assert not snap.nodes[f"hyperpod-i-{7:017x}"].available  # HyperPod's NoSchedule taint
    assert snap.nodes[f"hyperpod-i-{8:017x}"].ultraserver == "us-0"
    # the nodes' own labels are untouched (the ml. name stays where Kueue's flavors need it)
    assert all(o["metadata"]["labels"][INSTANCE_TYPE_LABEL] == "ml.p5.48xlarge" for o in nodes[:10])
    assert layer_label(1) not in fake.objs["ec2-100"]["metadata"]["labels"]


def test_the_ultraserver_is_the_innermost_level_of_the_tree():
    nodes = [hp_node(i, ultraserver=f"us-{i // 2}", layers=("a", "b", "c")) for i in range(4)]
    caps = [
        NodeCapacity.from_labels(o["metadata"]["name"], o["metadata"]["labels"], instance_type="p5.48xlarge")
        for o in nodes
    ]
    tree = build_tree(caps).to_json()
    assert tree["levels"][-1] == ULTRASERVER_LABEL and tree["depth"] == 3
    layer3 = tree["domains"][0]["children"][0]["children"][0]
    assert [(d["label"], d["id"], d["node_count"]) for d in layer3["children"]] == [
        (ULTRASERVER_LABEL, "us-0", 2),
        (ULTRASERVER_LABEL, "us-1", 2),
    ]


def test_an_unreadable_namespace_list_keeps_the_last_passs_mode_and_says_the_pass_is_incomplete():
    from topogov.domain.errors import KubernetesError

    answers = [list(ADDON_NS)]

    def namespaces() -> list[str]:
        if not answers:
            raise KubernetesError(503, "list namespaces", "unavailable")
        return answers.pop()

    lab, _, ec2, _ = labeler([hp_node(0), ec2_node(1)], arn=None, namespaces=namespaces)
    first = lab.run(PassOptions())
    assert first.cluster_mode == "hyperpod" and first.cluster_mode_why.startswith("seen")
    second = lab.run(PassOptions())
    assert second.cluster_mode == "hyperpod" and not second.complete and second.k8s_writes == 0
    assert ec2.asked == []


def test_without_hyperpod_the_plain_mode_labels_ec2_nodes_as_before():
    from tests.unit.test_labeler import node, topo

    hp = hp_node(1)
    fake, store = FakeNodes([node("n0", f"i-{0:017x}"), copy.deepcopy(hp)]), FakeStore()
    ec2 = FakeEc2({f"i-{0:017x}": topo(0)})
    lab = Labeler(fake, ec2, store, wall=lambda: 2000.0, addon_namespaces=lambda: [])
    summary = lab.run(PassOptions())
    assert summary.cluster_mode == "eks" and summary.patched == 1 and summary.hyperpod_nodes == 1
    assert fake.objs[f"hyperpod-i-{1:017x}"] == hp  # a HyperPod node is never labelled


# --- the governor's drift report --------------------------------------------------------------------------


class FakeObjects:
    """The cluster's objects as KubeObjects lists them (views), per (apiVersion, kind)."""

    def __init__(self, objs: list[dict[str, Any]]) -> None:
        self.objs = objs
        self.writes = 0

    def list(self, api_version: str, kind: str) -> list[ObjectView]:
        return [object_view(o) for o in self.objs if o["kind"] == kind and o["apiVersion"] == api_version]

    def list_in(self, api_version: str, kind: str, namespace: str) -> list[ObjectView]:
        return [v for v in self.list(api_version, kind) if v.namespace == namespace]

    def apply(self, obj: dict[str, Any], field_manager: str) -> ObjectView:
        """Topogov's own objects (the team pod rules): created or replaced whole."""
        self.writes += 1
        key = (obj["kind"], obj["metadata"]["name"], obj["metadata"].get("namespace"))
        self.objs = [
            o for o in self.objs if (o["kind"], o["metadata"]["name"], o["metadata"].get("namespace")) != key
        ]
        self.objs.append(copy.deepcopy(dict(obj)))
        return object_view(obj)

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> bool:
        self.writes += 1
        before = len(self.objs)
        self.objs = [o for o in self.objs if (o["kind"], o["metadata"]["name"]) != (kind, name)]
        return len(self.objs) < before


def addon_objects() -> list[dict[str, Any]]:
    return copy.deepcopy(expected_objects(POLICY, ARN))


def by(objs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name)


def test_the_addons_objects_as_expected_are_no_drift_and_nothing_is_written():
    objects = FakeObjects(addon_objects())
    report = AddonWatch(objects, cluster_arn=ARN).run(POLICY, detect(ARN, 4, ADDON_NS))
    assert report.expected == report.matching > 0 and report.drift == []
    assert report.to_json()["counts"] == {MISSING: 0, DIFFERS: 0, UNEXPECTED: 0}
    assert "(no drift)" in format_report(report)
    # Only Topogov's own objects are written: the team pod rules, once (none of the add-on's)
    assert [c.name for c in report.pod_rules] == [f"pod-rules-{t}" for t in sorted(POLICY.teams)]
    assert objects.writes == len(POLICY.teams)
    again = AddonWatch(objects, cluster_arn=ARN).run(POLICY, detect(ARN, 4, ADDON_NS))
    assert again.pod_rules == [] and objects.writes == len(POLICY.teams)


def test_drift_names_a_changed_quota_a_missing_queue_and_a_quota_made_outside_teams_yaml():
    live = addon_objects()
    cq = by(live, "ClusterQueue", cluster_queue("team-a"))
    resource = cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    resource["nominalQuota"] = 1  # changed in the console
    live.remove(by(live, "ClusterQueue", cluster_queue("team-b")))  # not applied yet
    stray = copy.deepcopy(by(live, "ClusterQueue", cluster_queue("team-c")))
    stray["metadata"]["name"] = "hyperpod-ns-team-z-clusterqueue"
    live.append(stray)
    mine = copy.deepcopy(by(live, "ResourceFlavor", cq["spec"]["resourceGroups"][0]["flavors"][0]["name"]))
    mine["metadata"] = {"name": "left-over", "labels": {MANAGED_BY_LABEL: "topogov"}}
    live.append(mine)
    report = AddonWatch(FakeObjects(live), cluster_arn=ARN).run(POLICY, detect(ARN, 4, ADDON_NS))
    states = {(d.state, d.name) for d in report.drift}
    assert states == {
        (DIFFERS, cluster_queue("team-a")),
        (MISSING, cluster_queue("team-b")),
        (UNEXPECTED, "hyperpod-ns-team-z-clusterqueue"),
    }
    differs = next(d for d in report.drift if d.state == DIFFERS)
    assert any("nominalQuota" in line for line in differs.diff), differs.diff
    assert any("ResourceFlavor left-over" in w and "managed-by=topogov" in w for w in report.warnings)
    text = format_report(report)
    assert "1 missing, 1 differs, 1 unexpected" in text and "~ differs" in text


def test_compare_is_pure_and_counts_matches():
    expected = [object_view(o) for o in addon_objects()]
    live = {o.ref: o for o in expected[1:]}
    matching, drift = compare(expected, live)
    assert matching == len(expected) - 1 and [d.state for d in drift] == [MISSING]


# --- the quotas in force ---------------------------------------------------------------------------------


def queues_of(objs: list[dict[str, Any]]) -> dict[str, Any]:
    views = {o["metadata"]["name"]: object_view(o) for o in objs if o["kind"] == "ClusterQueue"}
    return {team: views[cluster_queue(team)] for team in POLICY.teams}


def test_the_quotas_in_force_of_the_addons_queues_for_teams_yaml_are_teams_yamls():
    quotas = in_force(queues_of(addon_objects()))
    for name, team in POLICY.teams.items():
        q, want = quotas[name].quota, team.quota_resources
        assert (q.gpu, q.cpu_m, q.memory) == (want.gpu, want.cpu_m, want.memory), name
        assert quotas[name].sharing == team.sharing, name
    # but EFA: a ComputeQuota has none, the add-on derives it from the accelerators (docs/hyperpod.md's
    # mapping), so the quota in force is not teams.yaml's: the reason to read it from the queue
    assert quotas["team-a"].quota.efa < POLICY.teams["team-a"].quota_resources.efa
    # team-c lends and never borrows; team-a borrows up to its limit
    assert quotas["team-c"].borrow == Resources()
    assert quotas["team-a"].borrow.gpu == POLICY.teams["team-a"].borrow_resources.gpu


def test_the_api_decides_on_the_queues_quota_not_teams_yamls():
    live = addon_objects()
    cq = by(live, "ClusterQueue", cluster_queue("team-a"))
    for group in cq["spec"]["resourceGroups"]:
        for flavor in group["flavors"]:
            for r in flavor["resources"]:
                if r["name"] == "nvidia.com/gpu":
                    r["nominalQuota"] = 8 if flavor is group["flavors"][0] else 0
                    r["borrowingLimit"] = 0
    policy = policy_in_force(POLICY, in_force(queues_of(live)))
    assert policy.teams["team-a"].quota_resources.gpu == 8
    assert policy.teams["team-b"].quota_resources.gpu == POLICY.teams["team-b"].quota_resources.gpu
    request = JobRequest(job_name="big", image="busybox", node_count=2, accelerators=8)
    with pytest.raises(
        NeverAdmissible, match=r"asks 16 nvidia.com/gpu .* more than 8 \(quota 8 \+ borrow 0\)"
    ):
        decide(request, caller=TEAM_A, policy=policy, index=lambda: None, hyperpod=True)  # type: ignore[arg-type,return-value]
    decide(request, caller=TEAM_A, policy=POLICY, index=lambda: None, hyperpod=True)  # type: ignore[arg-type,return-value]


def test_a_borrowing_limit_left_out_borrows_what_the_cohort_lends():
    live = addon_objects()
    for team in POLICY.teams:
        for group in by(live, "ClusterQueue", cluster_queue(team))["spec"]["resourceGroups"]:
            for flavor in group["flavors"]:
                for r in flavor["resources"]:
                    r.pop("borrowingLimit", None)
                    r.pop("lendingLimit", None)
    quotas = in_force(queues_of(live))
    others = sum(q.quota.gpu for t, q in quotas.items() if t != "team-a")
    assert quotas["team-a"].borrow.gpu == others and quotas["team-a"].sharing == "LendAndBorrow"


def test_a_queue_the_addon_has_not_written_refuses_naming_it():
    with pytest.raises(QuotasUnavailable, match="hyperpod-ns-team-a-clusterqueue does not exist"):
        read_queues(POLICY, lambda name: None)


# --- the API's Job on HyperPod ---------------------------------------------------------------------------


def hyperpod_snapshot() -> Snapshot:
    lab, _, _, store = labeler([hp_node(i) for i in range(16)])
    lab.run(PassOptions())
    assert store.snap is not None
    return store.snap


def test_the_job_carries_queue_and_priority_on_the_job_and_its_pods_and_the_topology_without_a_selector():
    from topogov.domain.placement import CapacityIndex

    snap = hyperpod_snapshot()
    request = JobRequest(
        job_name="train", image="busybox", node_count=4, accelerators=8,
        required_topology="topology.k8s.aws/network-node-layer-3",
    )  # fmt: skip
    adm = decide(
        request, caller=TEAM_A, policy=POLICY, index=CapacityIndex(snap.nodes.values()), hyperpod=True
    )
    job = adm.manifest
    assert job["metadata"]["namespace"] == "hyperpod-ns-team-a"
    pod = job["spec"]["template"]
    for labels in (job["metadata"]["labels"], pod["metadata"]["labels"]):
        assert labels[QUEUE_LABEL] == "hyperpod-ns-team-a-localqueue"
        assert (
            labels[PRIORITY_LABEL] == "experimentation-priority"
        )  # team-a's default, as the add-on names it
    assert pod["metadata"]["annotations"][REQUIRED_ANNOTATION] == "topology.k8s.aws/network-node-layer-3"
    assert INSTANCE_TYPE_LABEL not in (pod["spec"].get("nodeSelector") or {})
    plain = decide(request, caller=TEAM_A, policy=POLICY, index=CapacityIndex(snap.nodes.values()))
    assert QUEUE_LABEL not in plain.manifest["spec"]["template"]["metadata"]["labels"]


def test_a_topology_beside_an_instance_type_is_kept_and_said_to_pin_the_flavor():
    """As `hyp` writes a job: the instance-type nodeSelector (named as HyperPod labels its nodes) and the
    topology annotation together; Kueue places it as asked, on that type's flavor only (docs/hyperpod.md,
    observed with Kueue v0.17.0), and the decision says so."""
    from topogov.domain.placement import CapacityIndex

    index = CapacityIndex(hyperpod_snapshot().nodes.values())
    both = JobRequest(
        job_name="train", image="busybox", node_count=2, accelerators=8, instance_type="p5.48xlarge",
        required_topology="topology.k8s.aws/network-node-layer-3",
    )  # fmt: skip
    adm = decide(both, caller=TEAM_A, policy=POLICY, index=index, hyperpod=True)
    pod = adm.manifest["spec"]["template"]
    assert pod["spec"]["nodeSelector"][INSTANCE_TYPE_LABEL] == "ml.p5.48xlarge"  # as HyperPod labels nodes
    assert pod["metadata"]["annotations"][REQUIRED_ANNOTATION] == "topology.k8s.aws/network-node-layer-3"
    assert (
        adm.decision.topology.mode == "required"
        and "pins it to that type's flavor" in adm.decision.topology.reason
    )
    typed = JobRequest(
        job_name="train", image="busybox", node_count=2, accelerators=8, instance_type="p5.48xlarge"
    )
    adm = decide(typed, caller=TEAM_A, policy=POLICY, index=index, hyperpod=True)
    assert adm.decision.topology.mode == "none"
    assert not (adm.manifest["spec"]["template"]["metadata"].get("annotations") or {}).keys() & {
        REQUIRED_ANNOTATION
    }


# --- HyperPodPyTorchJobs, read-only ----------------------------------------------------------------------


def hp_workload(name: str, *, admitted: bool) -> dict[str, Any]:
    conditions = [
        {"type": "Admitted", "status": "True" if admitted else "False", "reason": "x", "message": ""}
    ]
    if not admitted:
        conditions.append(
            {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "no quota"}
        )
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {
            "name": f"hyperpodpytorchjob-{name}-abcde",
            "namespace": "hyperpod-ns-team-a",
            "creationTimestamp": "2026-12-01T00:00:00Z",
            "labels": {},
            "ownerReferences": [
                {
                    "apiVersion": "sagemaker.amazonaws.com/v1",
                    "kind": "HyperPodPyTorchJob",
                    "name": name,
                    "uid": "u-1",
                }
            ],
        },
        "spec": {
            "queueName": "hyperpod-ns-team-a-localqueue",
            "podSets": [
                {
                    "name": "main",
                    "count": 2,
                    "topologyRequest": {"required": "topology.k8s.aws/network-node-layer-3"},
                    "template": {
                        "spec": {
                            "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "8"}}}]
                        }
                    },
                }
            ],
        },
        "status": {"conditions": conditions},
    }


class Ports:
    """The API's ledger, snapshots and Kubernetes side, in memory."""

    def __init__(self, snapshot: Snapshot, workloads: list[dict[str, Any]]) -> None:
        self.snapshot = snapshot
        self.wl = workloads
        self.deleted: list[str] = []
        self.queues = queues_of(addon_objects())
        self.reads = 0

    # snapshots
    def load(self) -> Snapshot:
        return self.snapshot

    # ledger
    def list(self, team: str) -> list[dict[str, Any]]:
        return []

    def live(self, team: str) -> list[dict[str, Any]]:
        return []

    def page(self, team: str, limit: int, after: str | None = None) -> tuple[list[dict[str, Any]], None]:
        return [], None

    def runs(self, team: str) -> dict[int, list[float]]:
        return {}

    def get(self, team: str, name: str) -> None:
        return None

    def usage(self, team: str) -> Resources:
        return Resources()

    # jobs
    def workloads(self, namespace: str) -> list[WorkloadView]:
        return [WorkloadView.from_api(w) for w in self.wl if w["metadata"]["namespace"] == namespace]

    def kueue_pods(self, namespace: str) -> list[Any]:
        return []

    def list_jobs(self, namespace: str) -> list[Any]:
        return []

    def admitted_usage(self, namespace: str) -> Resources:
        return Resources()

    def delete(self, namespace: str, name: str) -> bool:
        self.deleted.append(name)
        return True

    def cluster_queue(self, name: str) -> Any:
        self.reads += 1
        return next((q for q in self.queues.values() if q.name == name), None)


def api(ports: Ports, **kw: Any) -> ApiService:
    return ApiService(
        policy=POLICY, snapshots=ports, ledger=ports, jobs=ports, queues=ports,  # type: ignore[arg-type]
        hyperpod_cluster_arn=ARN, clock=lambda: "2026-12-01T00:10:00Z", **kw,
    )  # fmt: skip


def test_a_hyperpodpytorchjob_is_listed_read_only_and_cancel_refuses_it_saying_how_to_stop_it():
    ports = Ports(
        hyperpod_snapshot(), [hp_workload("llama", admitted=True), hp_workload("mixtral", admitted=False)]
    )
    service = api(ports)
    jobs, token = service.jobs_of(TEAM_A, "team-a")
    rows = {r["name"]: r for r in jobs}
    assert token is None
    assert set(rows) == {"llama", "mixtral"}
    assert rows["llama"]["read_only"] and rows["llama"]["kind"] == "HyperPodPyTorchJob"
    assert rows["llama"]["status"] == "Admitted" and rows["mixtral"]["status"] == "Pending"
    assert rows["mixtral"]["why_pending"] == "no quota" and "eta" not in rows["mixtral"]
    assert rows["llama"]["topology"] == {"mode": "required", "level": "topology.k8s.aws/network-node-layer-3"}
    assert rows["llama"]["submitted_with"] == "hyp create hyp-pytorch-job"
    with pytest.raises(Conflict) as refused:
        service.cancel(TEAM_A, "team-a", "llama")
    assert (
        "hyp delete hyp-pytorch-job --job-name llama --namespace hyperpod-ns-team-a" in refused.value.message
    )
    assert ports.deleted == []


def test_the_team_view_says_its_quota_comes_from_the_addons_queue_and_unreadable_queues_refuse():
    ports = Ports(hyperpod_snapshot(), [])
    view = api(ports).team_view(TEAM_A, "team-a")
    assert view["quota_source"] == "ClusterQueue hyperpod-ns-team-a-clusterqueue (HyperPod task governance)"
    ports.queues.pop("team-b")
    with pytest.raises(QuotasUnavailable, match="hyperpod-ns-team-b-clusterqueue"):
        api(ports).team_view(TEAM_A, "team-a")
