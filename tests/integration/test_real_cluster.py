"""The local cluster is the real thing: what a real API server and Kueue refuse, they refuse here
(issue 14). The Python emulator the cluster replaced accepted objects like those below; the real
kube-apiserver v1.35.4 and Kueue v0.17.0 (CRD schemas, CEL rules, webhooks, conversion) refuse each
object and change with their own status and message, which the tests assert. kubectl is the one
built from Kubernetes v1.35.4.
"""

from __future__ import annotations

import json
import subprocess
from typing import NamedTuple

import pytest

from topogov_local.cluster import build
from topogov_local.cluster.controlplane import object_path

KUEUE = "/apis/kueue.x-k8s.io/v1beta1"
KUEUE2 = "/apis/kueue.x-k8s.io/v1beta2"


def kubectl(server, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    _cluster, cfg = server
    return subprocess.run(
        [str(build.bin_dir() / "kubectl"), "--kubeconfig", cfg, *args],
        capture_output=True, text=True, timeout=60, check=check,
    )  # fmt: skip


class Refusal(NamedTuple):
    """How the real server refuses: its HTTP status and a distinctive part of its message; ``webhook``
    names the Kueue validating webhook that denies it (403); :func:`crd` is a CRD's schema or CEL rule."""

    status: int
    message: str
    webhook: str | None = None


REASONS = {400: "BadRequest", 403: "Forbidden", 422: "Invalid", 500: "InternalError"}


def crd(message: str) -> Refusal:
    return Refusal(422, message)


def webhook(name: str, message: str) -> Refusal:
    return Refusal(403, message, f"{name}.kb.io")


def assert_refused(resp, refusal: Refusal) -> None:
    assert resp.status == refusal.status, (resp.status, resp.body)
    assert resp.body["kind"] == "Status" and resp.body["reason"] == REASONS[refusal.status], resp.body
    assert refusal.message in resp.body["message"], resp.body["message"]
    if refusal.webhook:
        assert resp.body["message"].startswith(f'admission webhook "{refusal.webhook}" denied the request: ')


def kueue(kind: str, name: str, namespace: str | None = None, **fields) -> dict:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": kind, "metadata": meta, **fields}


def group(flavor: str = "default", resource: str = "cpu", nominal=8, covered=None, **limits) -> dict:
    """One resource group: one flavor with one resource's quota (``limits``: borrowing/lendingLimit)."""
    quota = {"name": resource, "nominalQuota": nominal, **limits}
    return {"coveredResources": covered or [resource], "flavors": [{"name": flavor, "resources": [quota]}]}


def cq(name: str, **spec) -> dict:
    return kueue("ClusterQueue", name, spec={"namespaceSelector": {}, "resourceGroups": [group()], **spec})


def lq(name: str, **spec) -> dict:
    return kueue("LocalQueue", name, "default", spec=spec)


def rf(name: str, **spec) -> dict:
    return kueue("ResourceFlavor", name, spec=spec)


def topology(name: str, *levels: str) -> dict:
    return kueue("Topology", name, spec={"levels": [{"nodeLabel": label} for label in levels]})


def cohort(name: str, **spec) -> dict:
    return kueue("Cohort", name, spec=spec)


def wpc(name: str, **fields) -> dict:
    return kueue("WorkloadPriorityClass", name, **fields)


def podset(name: str = "main", count: int = 2, **fields) -> dict:
    pod = {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}
    return {"name": name, "count": count, "template": {"spec": pod}, **fields}


def workload(name: str, *podsets: dict, **spec) -> dict:
    return kueue("Workload", name, "default", spec={"podSets": list(podsets or [podset()]), **spec})


HOSTNAME = "kubernetes.io/hostname"
# Refused with this part of the message by the schema of every CRD's quantity fields (nominalQuota,
# borrowingLimit, lendingLimit, fairSharing.weight).
QUANTITY_PATTERN = "in body should match '^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))"
DNS_SUBDOMAIN = "in body should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'"

# Each case names the rule it hits: the CRD's CEL rule (x-kubernetes-validations), enum, pattern,
# minimum, min/maxItems, maxLength, maxProperties, type or required field (v1beta1 schema of the CRDs
# in ../shared/kueue-crds/, newer than v0.17.0's: a case says where the two differ), else the function
# of Kueue v0.17.0's validating webhook (pkg/webhooks/) that refuses it.
INVALID_KUEUE = {
    # --- ClusterQueue: CRD ---
    # spec CEL: !has(self.cohort) && has(self.resourceGroups) ? ... !has(r.borrowingLimit) ...
    "borrowingLimit without a cohort": (
        cq("bl", resourceGroups=[group(borrowingLimit=4)]),
        crd("spec: Invalid value: borrowingLimit must be nil when cohort is empty"),
    ),
    # spec.queueingStrategy enum: StrictFIFO, BestEffortFIFO
    "an unknown queueingStrategy": (
        cq("qs", queueingStrategy="Random"),
        crd('spec.queueingStrategy: Unsupported value: "Random": supported values: "StrictFIFO"'),
    ),
    # spec.stopPolicy enum: None, Hold, HoldAndDrain
    "an unknown stopPolicy": (
        cq("sp", stopPolicy="Pause"),
        crd('spec.stopPolicy: Unsupported value: "Pause": supported values: "None", "Hold", "HoldAndDrain"'),
    ),
    # spec.preemption.withinClusterQueue enum: Never, LowerPriority, LowerOrNewerEqualPriority
    "an unknown preemption policy": (
        cq("pre", preemption={"withinClusterQueue": "Always"}),
        crd('spec.preemption.withinClusterQueue: Unsupported value: "Always"'),
    ),
    # spec.flavorFungibility.whenCanBorrow enum: MayStopSearch, TryNextFlavor, Borrow
    "an unknown whenCanBorrow": (
        cq("fung", flavorFungibility={"whenCanBorrow": "Always"}),
        crd('spec.flavorFungibility.whenCanBorrow: Unsupported value: "Always"'),
    ),
    # spec.preemption CEL: !(self.reclaimWithinCohort == 'Never' && ... borrowWithinCohort.policy != 'Never')
    "borrowWithinCohort while reclaimWithinCohort is Never": (
        cq(
            "rwc",
            preemption={"reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "LowerPriority"}},
        ),
        crd("spec.preemption: Invalid value: reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never"),
    ),
    # spec.flavorFungibility CEL: !has(self.preference) || (whenCanBorrow == 'TryNextFlavor' && ...)
    "a fungibility preference without TryNextFlavor": (
        cq("pref", flavorFungibility={"whenCanBorrow": "Borrow", "preference": "BorrowingOverPreemption"}),
        crd("preference can only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor"),
    ),
    # spec.resourceGroups[] CEL: self.flavors.all(x, size(x.resources) == size(self.coveredResources))
    "fewer flavor resources than coveredResources": (
        cq("cnt", resourceGroups=[group(covered=["cpu", "memory"])]),
        crd("spec.resourceGroups[0]: Invalid value: flavors must have the same number of resources as the"),
    ),
    # spec.cohort pattern (a DNS subdomain)
    "a cohort that is not a DNS subdomain": (
        cq("coh", cohort="Team_A"),
        crd(f'spec.cohort: Invalid value: "Team_A": spec.cohort {DNS_SUBDOMAIN}'),
    ),
    # spec.resourceGroups maxItems 16
    "17 resource groups": (
        cq("many", resourceGroups=[group(f"f{i}", f"r{i}") for i in range(17)]),
        crd("spec.resourceGroups: Too many: 17: must have at most 16 items"),
    ),
    # spec.resourceGroups[].flavors: x-kubernetes-list-type map, keyed by name
    "a flavor twice in a resource group": (
        cq("twice", resourceGroups=[{**group(), "flavors": group()["flavors"] * 2}]),
        crd('spec.resourceGroups[0].flavors[1]: Duplicate value: {"name":"default"}'),
    ),
    # spec.resourceGroups[].flavors[].resources[].nominalQuota pattern (a quantity). The server answers
    # 500, not 422: Kueue's mutating webhook is called (with the object converted to v1beta2, which
    # cannot parse it) before the schema is checked.
    "a nominal quota that is not a quantity": (
        cq("lots", resourceGroups=[group(nominal="lots")]),
        Refusal(500, "conversion webhook for kueue.x-k8s.io/v1beta1, Kind=ClusterQueue failed: quantities"),
    ),
    # --- ClusterQueue: webhook (ValidateClusterQueue) ---
    # validateResourceQuantity
    "a negative nominal quota": (
        cq("neg", resourceGroups=[group(nominal="-1")]),
        webhook(
            "vclusterqueue",
            'resources[0].nominalQuota: Invalid value: "-1": must be greater than or equal to 0',
        ),
    ),
    # validateFlavorQuotas: the CEL rule counts the resources, the webhook checks their names
    "a flavor resource not covered": (
        cq("cov", resourceGroups=[group(resource="memory", nominal="1Gi", covered=["cpu"])]),
        webhook(
            "vclusterqueue",
            'resources[0].name: Invalid value: "memory": must match the name in coveredResources',
        ),
    ),
    # validateLendingLimit
    "a lendingLimit above the nominal quota": (
        cq("lend", cohort="c", resourceGroups=[group(lendingLimit=9)]),
        webhook(
            "vclusterqueue",
            'lendingLimit: Invalid value: "9": must be less than or equal to the nominalQuota',
        ),
    ),
    # validateLimit: the CRD's CEL rule covers borrowingLimit only, the webhook lendingLimit too
    "a lendingLimit without a cohort": (
        cq("lendnc", resourceGroups=[group(lendingLimit=4)]),
        webhook("vclusterqueue", 'lendingLimit: Invalid value: "4": must be nil when cohort is empty'),
    ),
    # validateResourceGroups: a flavor in one resource group only
    "a flavor in two resource groups": (
        cq("twogroups", resourceGroups=[group(), group(resource="memory", nominal="8Gi")]),
        webhook("vclusterqueue", 'spec.resourceGroups[1].flavors[0].name: Duplicate value: "default"'),
    ),
    # validateResourceGroups: a resource covered by one resource group only
    "a resource covered by two resource groups": (
        cq("tworesources", resourceGroups=[group("a"), group("b")]),
        webhook("vclusterqueue", 'spec.resourceGroups[1].coveredResources[0]: Duplicate value: "cpu"'),
    ),
    # validateFairSharing
    "a negative fair-sharing weight": (
        cq("weight", fairSharing={"weight": "-1"}),
        webhook("vclusterqueue", 'spec.fairSharing: Invalid value: "-1": must be greater than or equal to 0'),
    ),
    # ValidateLabelSelector on spec.namespaceSelector
    "a namespaceSelector with an unknown operator": (
        cq("sel", namespaceSelector={"matchExpressions": [{"key": "team", "operator": "Maybe"}]}),
        webhook("vclusterqueue", 'operator: Invalid value: "Maybe": not a valid selector operator'),
    ),
    # --- LocalQueue: CRD (no validating webhook) ---
    # spec.clusterQueue pattern (a DNS subdomain)
    "a LocalQueue whose clusterQueue is not a DNS subdomain": (
        lq("lq-name", clusterQueue="Team_A"),
        crd(f'spec.clusterQueue: Invalid value: "Team_A": spec.clusterQueue {DNS_SUBDOMAIN}'),
    ),
    # spec.clusterQueue maxLength 253
    "a LocalQueue whose clusterQueue is too long": (
        lq("lq-long", clusterQueue="a" * 254),
        crd("spec.clusterQueue: Too long: may not be more than 253 bytes"),
    ),
    # spec.stopPolicy enum: None, Hold, HoldAndDrain
    "a LocalQueue with an unknown stopPolicy": (
        lq("lq-stop", clusterQueue="team-a", stopPolicy="Pause"),
        crd('spec.stopPolicy: Unsupported value: "Pause": supported values: "None", "Hold", "HoldAndDrain"'),
    ),
    # spec.fairSharing.weight pattern (a quantity)
    "a LocalQueue weight that is not a quantity": (
        lq("lq-weight", clusterQueue="team-a", fairSharing={"weight": "heavy"}),
        crd(f'spec.fairSharing.weight: Invalid value: "heavy": spec.fairSharing.weight {QUANTITY_PATTERN}'),
    ),
    # --- ResourceFlavor: CRD ---
    # spec CEL: !has(self.topologyName) || self.nodeLabels.size() >= 1 (without nodeLabels the rule
    # fails to evaluate; the server says so around the rule's message)
    "a topologyName without nodeLabels": (
        rf("rf", topologyName="t"),
        crd(
            "no such key: nodeLabels evaluating rule: at least one nodeLabel is required when topology is set"
        ),
    ),
    "a topologyName with empty nodeLabels": (
        rf("rf-empty", topologyName="t", nodeLabels={}),
        crd("spec: Invalid value: at least one nodeLabel is required when topology is set"),
    ),
    # spec.topologyName pattern (a DNS subdomain)
    "a topologyName that is not a DNS subdomain": (
        rf("rf-topo", topologyName="Bad_Topo", nodeLabels={"a": "b"}),
        crd(f'spec.topologyName: Invalid value: "Bad_Topo": spec.topologyName {DNS_SUBDOMAIN}'),
    ),
    # spec.nodeLabels maxProperties 8
    "nine nodeLabels": (
        rf("rf-labels", nodeLabels={f"label-{i}": "x" for i in range(9)}),
        crd("spec.nodeLabels: Too many: 9: must have at most 8 items"),
    ),
    # spec.nodeTaints CEL: self.all(x, x.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])
    "a nodeTaint with an unknown effect": (
        rf("rf-taint", nodeTaints=[{"key": "a", "effect": "Sometimes"}]),
        crd(
            "spec.nodeTaints: Invalid value: supported taint effect values: 'NoSchedule', 'PreferNoSchedule'"
        ),
    ),
    # spec.tolerations CEL: self.all(x, !has(x.key) ? x.operator == 'Exists' : true)
    "a toleration without a key whose operator is Equal": (
        rf("rf-tol-key", tolerations=[{"operator": "Equal", "value": "x"}]),
        crd("spec.tolerations: Invalid value: operator must be Exists when 'key' is empty"),
    ),
    # spec.tolerations CEL: self.all(x, has(x.tolerationSeconds) ? x.effect == 'NoExecute' : true)
    "tolerationSeconds on a NoSchedule toleration": (
        rf(
            "rf-tol-s",
            tolerations=[{"key": "a", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}],
        ),
        crd("spec.tolerations: Invalid value: effect must be 'NoExecute' when 'tolerationSeconds' is set"),
    ),
    # spec.tolerations CEL: self.all(x, !has(x.operator) || x.operator in ['Equal', 'Exists'])
    "a toleration with an unknown operator": (
        rf("rf-tol-op", tolerations=[{"key": "a", "operator": "In"}]),
        crd("spec.tolerations: Invalid value: supported toleration values: 'Equal'(default), 'Exists'"),
    ),
    # spec.tolerations CEL: self.all(x, has(x.operator) && x.operator == 'Exists' ? !has(x.value) : true)
    "a value on an Exists toleration": (
        rf("rf-tol-val", tolerations=[{"key": "a", "operator": "Exists", "value": "v"}]),
        crd("spec.tolerations: Invalid value: a value must be empty when 'operator' is 'Exists'"),
    ),
    # --- ResourceFlavor: webhook (ValidateResourceFlavor) ---
    # metavalidation.ValidateLabels on spec.nodeLabels
    "a nodeLabel value that is not a label value": (
        rf("rf-value", nodeLabels={"a": "not a value!"}),
        webhook("vresourceflavor", 'spec.nodeLabels: Invalid value: "not a value!": a valid label must be'),
    ),
    # validateNodeTaints: unique by key and effect
    "two nodeTaints with the same key and effect": (
        rf("rf-dup", nodeTaints=[{"key": "a", "value": v, "effect": "NoSchedule"} for v in ("1", "2")]),
        webhook("vresourceflavor", "spec.nodeTaints[1]: Duplicate value: "),
    ),
    # --- Topology: CRD (no validating webhook) ---
    # spec.levels CEL: ... self[size(self) - 1].nodeLabel == 'kubernetes.io/hostname'
    "a Topology with hostname above the lowest level": (
        topology("t", HOSTNAME, "rack"),
        crd("spec.levels: Invalid value: the kubernetes.io/hostname label can only be used at the lowest"),
    ),
    # spec.levels CEL: size(self.filter(i, size(self.filter(j, j == i)) > 1)) == 0
    "a Topology with a level twice": (
        topology("t-dup", "rack", "rack"),
        crd("spec.levels: Invalid value: must be unique"),
    ),
    # spec.levels minItems 1
    "a Topology without levels": (
        topology("t-none"),
        crd("spec.levels: Invalid value: 0: spec.levels in body should have at least 1 items"),
    ),
    # spec.levels maxItems 16
    "a Topology with 17 levels": (
        topology("t-deep", *(f"level-{i}" for i in range(17))),
        crd("spec.levels: Too many: 17: must have at most 16 items"),
    ),
    # spec.levels[].nodeLabel pattern (a label key)
    "a Topology level that is not a label key": (
        topology("t-label", "not a label"),
        crd(
            'spec.levels[0].nodeLabel: Invalid value: "not a label": spec.levels[0].nodeLabel in body should'
        ),
    ),
    # --- WorkloadPriorityClass: CRD ---
    # required: [value]
    "a WorkloadPriorityClass without a value": (
        wpc("w"),
        crd("value: Required value"),
    ),
    # value: type integer
    "a WorkloadPriorityClass with a string value": (
        wpc("w-str", value="high"),
        crd('value: Invalid value: "string": value in body must be of type integer: "string"'),
    ),
    # --- Cohort: CRD ---
    # spec.parentName pattern (a DNS subdomain)
    "a Cohort whose parent is not a DNS subdomain": (
        cohort("c-parent", parentName="Root_Cohort"),
        crd(f'spec.parentName: Invalid value: "Root_Cohort": spec.parentName {DNS_SUBDOMAIN}'),
    ),
    # spec.resourceGroups[] CEL: self.flavors.all(x, size(x.resources) == size(self.coveredResources))
    "a Cohort with fewer flavor resources than coveredResources": (
        cohort("c-count", resourceGroups=[group(covered=["cpu", "memory"])]),
        crd("spec.resourceGroups[0]: Invalid value: flavors must have the same number of resources as the"),
    ),
    # --- Cohort: webhook (validateCohort) ---
    # validateLimit (a Cohort's CRD has no CEL rule for it)
    "a Cohort borrowingLimit without a parent": (
        cohort("c-borrow", resourceGroups=[group(borrowingLimit=4)]),
        webhook("vcohort", 'borrowingLimit: Invalid value: "4": must be nil when parent is empty'),
    ),
    # validateResourceQuantity
    "a Cohort with a negative nominal quota": (
        cohort("c-neg", resourceGroups=[group(nominal="-1")]),
        webhook("vcohort", 'nominalQuota: Invalid value: "-1": must be greater than or equal to 0'),
    ),
    # validateFairSharing
    "a Cohort with a negative fair-sharing weight": (
        cohort("c-weight", fairSharing={"weight": "-2"}),
        webhook("vcohort", 'spec.fairSharing: Invalid value: "-2": must be greater than or equal to 0'),
    ),
    # --- Workload: CRD (Kueue creates them for jobs; Topogov reads them) ---
    # spec.podSets[] CEL: has(self.minCount) ? self.minCount <= self.count : true
    "a Workload podSet whose minCount exceeds its count": (
        workload("wl-min", podset(count=2, minCount=3)),
        crd("spec.podSets[0]: Invalid value: minCount should be positive and less or equal to count"),
    ),
    # spec CEL: has(self.priorityClassName) ? has(self.priority) : true
    "a Workload with a priorityClassName and no priority": (
        workload("wl-prio", priorityClassName="high"),
        crd("spec: Invalid value: priority should not be nil when priorityClassName is set"),
    ),
    # spec.podSets maxItems: 8 in Kueue v0.17.0's CRD (the newer one in ../shared/kueue-crds/ says 18)
    "a Workload with nine podSets": (
        workload("wl-many", *(podset(f"ps-{i}") for i in range(9))),
        crd("spec.podSets: Too many: 9: must have at most 8 items"),
    ),
    # spec.podSets[].count minimum 0
    "a Workload podSet with a negative count": (
        workload("wl-neg", podset(count=-1)),
        crd("spec.podSets[0].count: Invalid value: -1: spec.podSets[0].count in body should be greater than"),
    ),
    # --- Workload: webhook (ValidateWorkload) ---
    "a Workload with two variable-count podSets": (
        workload("wl-var", podset("a", minCount=1), podset("b", minCount=1)),
        webhook("vworkload", "spec.podSets: Invalid value: 2: at most one podSet can use minCount"),
    ),
}


@pytest.mark.parametrize("case", list(INVALID_KUEUE))
def test_kueue_refuses_what_its_crds_and_webhooks_refuse(kube, case):
    obj, refusal = INVALID_KUEUE[case]
    resp = kube.request("POST", object_path(obj).rsplit("/", 1)[0], body=obj)
    assert_refused(resp, refusal)


class Change(NamedTuple):
    created: dict
    patch: dict  # a merge patch
    refusal: Refusal
    version: str = "v1beta1"  # the API version the patch is sent to


TAS_FLAVOR = rf(
    "rf-tas", nodeLabels={"pool": "a"}, topologyName="t", tolerations=[{"key": "x", "operator": "Exists"}]
)
COHORT_MEMBER = cq("member", cohort="team-cohort", resourceGroups=[group(borrowingLimit=4)])

INVALID_KUEUE_CHANGES = {
    # Topology spec.levels CEL: self == oldSelf
    "a Topology's levels": Change(
        topology("imm", "rack", HOSTNAME),
        {"spec": {"levels": [{"nodeLabel": "block"}, {"nodeLabel": HOSTNAME}]}},
        crd("spec.levels: Invalid value: field is immutable"),
    ),
    # The same through v1beta2: v0.17.0's v1beta2 schema has self == oldSelf too; the newer CRD in
    # ../shared/kueue-crds/ lets levels change while kubernetes.io/hostname stays the lowest.
    "a Topology's levels through v1beta2": Change(
        topology("imm2", "rack", HOSTNAME),
        {"spec": {"levels": [{"nodeLabel": "block"}, {"nodeLabel": HOSTNAME}]}},
        crd("spec.levels: Invalid value: field is immutable"),
        version="v1beta2",
    ),
    # LocalQueue spec.clusterQueue CEL: self == oldSelf
    "a LocalQueue's clusterQueue": Change(
        lq("lq-imm", clusterQueue="team-a"),
        {"spec": {"clusterQueue": "team-b"}},
        crd('spec.clusterQueue: Invalid value: "team-b": field is immutable'),
    ),
    # ResourceFlavor spec CEL: !has(oldSelf.topologyName) || (has(self.topologyName) && ... == ...)
    # (what the governor re-creates flavors for)
    "a flavor's topologyName": Change(
        TAS_FLAVOR,
        {"spec": {"topologyName": "other"}},
        crd("spec: Invalid value: topologyName is immutable when topologyName is set"),
    ),
    "a flavor's topologyName removed": Change(
        TAS_FLAVOR,
        {"spec": {"topologyName": None}},
        crd("spec: Invalid value: topologyName is immutable when topologyName is set"),
    ),
    # ResourceFlavor spec CEL "nodeLabels/tolerations are immutable when topologyName is set": in Kueue
    # v0.17.0's CRD; the newer CRD in ../shared/kueue-crds/ no longer has these two rules.
    "a topology flavor's nodeLabels": Change(
        TAS_FLAVOR,
        {"spec": {"nodeLabels": {"pool": "b"}}},
        crd("spec: Invalid value: nodeLabels are immutable when topologyName is set"),
    ),
    "a topology flavor's tolerations": Change(
        TAS_FLAVOR,
        {"spec": {"tolerations": [{"key": "y", "operator": "Exists"}]}},
        crd("spec: Invalid value: tolerations are immutable when topologyName is set"),
    ),
    # ClusterQueue spec CEL "borrowingLimit must be nil when cohort is empty", on update: a queue leaving
    # its cohort must drop its borrowing limits in the same change
    "a ClusterQueue leaving its cohort with a borrowingLimit": Change(
        COHORT_MEMBER,
        {"spec": {"cohort": None}},
        crd("spec: Invalid value: borrowingLimit must be nil when cohort is empty"),
    ),
    # ClusterQueue webhook (ValidateClusterQueueUpdate = ValidateClusterQueue): validateResourceQuantity
    "a ClusterQueue's quota made negative": Change(
        COHORT_MEMBER,
        {"spec": {"resourceGroups": [group(nominal="-2")]}},
        webhook("vclusterqueue", 'nominalQuota: Invalid value: "-2": must be greater than or equal to 0'),
    ),
}


@pytest.mark.parametrize("case", list(INVALID_KUEUE_CHANGES))
def test_kueue_refuses_invalid_changes(kube, case):
    change = INVALID_KUEUE_CHANGES[case]
    path = object_path(change.created)
    assert kube.request("POST", path.rsplit("/", 1)[0], body=change.created).status == 201
    resp = kube.request(
        "PATCH", path.replace("/v1beta1/", f"/{change.version}/"), body=change.patch,
        content_type="application/merge-patch+json",
    )  # fmt: skip
    assert_refused(resp, change.refusal)


def test_a_v1beta2_read_of_a_clusterqueue_has_cohort_name(kube):
    """Kueue's conversion webhook: written as v1beta1 (``cohort``), read as v1beta2 (``cohortName``)."""
    obj = cq("conv", cohort="team-cohort")
    assert kube.request("POST", f"{KUEUE}/clusterqueues", body=obj).status == 201
    spec = kube.request("GET", f"{KUEUE2}/clusterqueues/conv").body["spec"]
    assert spec["cohortName"] == "team-cohort" and "cohort" not in spec


JOB_PATH = "/apis/batch/v1/namespaces/default/jobs"


def job(name: str, restart_policy: str = "Never", **spec) -> dict:
    pod = {"restartPolicy": restart_policy, "containers": [{"name": "c", "image": "x"}]}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {**spec, "template": {"spec": pod}}}  # fmt: skip


INVALID_BUILTINS = {
    # NodeSpec.unschedulable is a bool: refused when decoded, before validation (400)
    "a Node with unschedulable: 'yes'": (
        "/api/v1/nodes",
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "bad"}, "spec": {"unschedulable": "yes"}},
        Refusal(400, "cannot unmarshal string into Go struct field NodeSpec.spec.unschedulable of type bool"),
    ),
    "a Job with parallelism -1": (
        JOB_PATH,
        job("neg", parallelism=-1),
        Refusal(422, "spec.parallelism: Invalid value: -1: must be greater than or equal to 0"),
    ),
    "a Job with restartPolicy Always": (
        JOB_PATH,
        job("always", "Always"),
        Refusal(422, 'spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"'),
    ),
    "a Namespace with an invalid name": (
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "Not_A_Name"}},
        Refusal(422, 'metadata.name: Invalid value: "Not_A_Name": a lowercase RFC 1123 label must consist'),
    ),
}


@pytest.mark.parametrize("case", list(INVALID_BUILTINS))
def test_the_api_server_refuses_invalid_builtins(kube, case):
    path, obj, refusal = INVALID_BUILTINS[case]
    assert_refused(kube.request("POST", path, body=obj), refusal)


def test_kubectl_explain_auth_can_i_create_job_and_drain_work(server, kube):
    assert "resourceGroups" in kubectl(server, "explain", "clusterqueue.spec").stdout
    can = kubectl(server, "auth", "can-i", "patch", "nodes", "--as", "x", "--as-group", "topogov:reconciler",
                  check=False)  # fmt: skip
    assert can.stdout.strip() == "no"  # (this cluster has no deploy/rbac.yaml; the local stack's does)
    assert kubectl(server, "auth", "can-i", "create", "jobs").stdout.strip() == "yes"
    out = kubectl(server, "create", "job", "hello", "--image=busybox", "--", "sleep", "1").stdout
    assert "job.batch/hello created" in out
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "drainme", "annotations": {"kwok.x-k8s.io/node": "fake"}},
            "status": {"allocatable": {"cpu": "4", "memory": "4Gi", "pods": "10"},
                       "capacity": {"cpu": "4", "memory": "4Gi", "pods": "10"}}}  # fmt: skip
    assert kube.request("POST", "/api/v1/nodes", body=node).status == 201
    drained = kubectl(server, "drain", "drainme", "--ignore-daemonsets", "--timeout=60s")
    assert "drained" in drained.stdout, drained
    spec = json.loads(kubectl(server, "get", "node", "drainme", "-o", "json").stdout)["spec"]
    assert spec["unschedulable"] is True
