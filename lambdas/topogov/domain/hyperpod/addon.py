"""The Kueue objects HyperPod task governance's add-on writes for a set of ComputeQuotas and the
cluster policy (pure): the one place that rendering is modelled. The local stack's emulation of the
add-on writes them (``topogov_local.hyperpod.addon``); Topogov's drift check compares the cluster's
with :func:`expected_objects` of ``teams.yaml``.

Documented (SageMaker Developer Guide, task governance pages; aws/sagemaker-hyperpod-cli): per team a
namespace ``hyperpod-ns-<team>`` labelled ``sagemaker-managed-queue: "true"`` and
``quota-allocation-id: <team>``, a ClusterQueue ``hyperpod-ns-<team>-clusterqueue`` and a LocalQueue
``hyperpod-ns-<team>-localqueue``; a ResourceFlavor per instance type named after it
(``ml.p5.48xlarge``); a WorkloadPriorityClass ``<name>-priority`` per priority class; with idle resource
sharing on, ``hyperpod-ns-idle-resource-sharing-cq-<n>`` queues, one per flavor. Everything else here
is an **assumption**, each one a row of docs/hyperpod.md's table and a constant or a rule below:
the cohort's name, the Topology and its levels, the namespace selector, the resources covered, the
ratio fills and their rounding, ``borrowingLimit``/``lendingLimit``, the preemption fields,
the fair-sharing weight, ``ActivationState``, and the idle queues' quota and selector.

Amounts (per instance type of the cluster and resource; a type or a resource a quota does not give
is 0): ``Count`` n gives n × the type's nominal figures (:mod:`.instances`); ``Accelerators``, ``VCpu``
and ``MemoryInGiB`` replace their resource; when some of the three are missing they are filled "by
the ratio of the instance" the first given one makes (Accelerators, else VCpu, else MemoryInGiB:
compute-allocation.html), Accelerators left at 0 when only VCpu or memory is given; EFA follows the
accelerators' ratio. Fills are rounded down to a millicore, a byte, a device.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any, Literal

from topogov.domain.hyperpod import api
from topogov.domain.hyperpod.instances import GPU_DEVICE, NEURON_DEVICE, NOMINAL, InstanceSpec
from topogov.domain.hyperpod.mapping import (
    PRIORITY_SUFFIX,
    cluster_queue,
    local_queue,
    namespace,
)
from topogov.domain.labels import (
    ACTIVATE_QUOTA_LABEL,
    HOSTNAME_LABEL,
    INSTANCE_TYPE_LABEL,
    KUEUE_GROUP,
    QUOTA_ALLOCATION_LABEL,
    SAGEMAKER_MANAGED_QUEUE_LABEL,
    layer_label,
)
from topogov.domain.quantity import CPU, EFA, MEMORY, quantity_json

ApiVersion = Literal["v1beta1", "v1beta2"]
COHORT = "shared-pool"  # assumption: the one name a public deployment record shows
TOPOLOGY = "hyperpod-topology"  # assumption
TOPOLOGY_LAYERS = 3  # S2: the add-on labels network-node-layer-1..3
IDLE_QUEUE_PREFIX = "hyperpod-ns-idle-resource-sharing-cq-"
IDLE_TEAM = "idle-resource-sharing"  # assumption: the idle queues' namespace selector value
RESOURCE_ORDER = (CPU, MEMORY, GPU_DEVICE, NEURON_DEVICE, EFA)
LIVE_STATUSES = frozenset(
    {"Creating", "Created", "Updating", "Updated", "UpdateFailed", "UpdateRollbackFailed"}
)

Amounts = dict[str, int]  # resource -> millicores (cpu), bytes (memory) or devices


# --- amounts ----------------------------------------------------------------------------------------
def instance_amounts(spec: InstanceSpec, ratio: Fraction = Fraction(1)) -> Amounts:
    """``ratio`` of one instance of the type, per resource it has, rounded down."""
    out = {CPU: int(ratio * spec.vcpus * 1000), MEMORY: int(ratio * spec.memory_gib * 2**30)}
    if spec.accelerators:
        out[spec.accelerator] = int(ratio * spec.accelerators)
    if spec.efa:
        out[EFA] = int(ratio * spec.efa)
    return out


def _fill_ratio(item: Mapping[str, Any], spec: InstanceSpec) -> Fraction:
    """The ratio the first given of Accelerators, VCpu, MemoryInGiB makes of one instance."""
    for key, total in (
        ("Accelerators", spec.accelerators),
        ("VCpu", spec.vcpus),
        ("MemoryInGiB", spec.memory_gib),
    ):
        if item.get(key) is not None and total:
            return Fraction(item[key]) / total
    return Fraction(0)


def item_amounts(item: Mapping[str, Any], spec: InstanceSpec) -> Amounts:
    """The amounts one ComputeQuotaResourceConfig gives on its instance type (see the module doc)."""
    given = {k: item[k] for k in ("Accelerators", "VCpu", "MemoryInGiB") if item.get(k) is not None}
    if item.get("Count") is not None:
        out = {r: a * int(item["Count"]) for r, a in instance_amounts(spec).items()}
    elif given:
        ratio = _fill_ratio(item, spec)
        out = instance_amounts(spec, ratio)
        if "Accelerators" not in given and spec.accelerators:  # "Accelerators are set to 0"
            out[spec.accelerator] = 0
            if EFA in out:
                out[EFA] = 0
    else:
        out = {r: 0 for r in instance_amounts(spec)}
    if "Accelerators" in given and spec.accelerators:
        out[spec.accelerator] = int(given["Accelerators"])
    if "VCpu" in given:
        out[CPU] = int(Fraction(given["VCpu"]) * 1000)
    if "MemoryInGiB" in given:
        out[MEMORY] = int(Fraction(given["MemoryInGiB"]) * 2**30)
    return out


def by_type(items: Sequence[Mapping[str, Any]]) -> dict[str, Amounts]:
    """Amounts per instance type of a ComputeQuotaResourceConfig list (types Topogov knows)."""
    out: dict[str, Amounts] = {}
    for item in items:
        spec = NOMINAL.get(str(item.get("InstanceType")))
        if spec is not None:
            amounts = item_amounts(item, spec)
            total = out.setdefault(str(item["InstanceType"]), {})
            for r, a in amounts.items():
                total[r] = total.get(r, 0) + a
    return out


def _borrowing(config: Mapping[str, Any], quota: Mapping[str, Amounts]) -> dict[str, Amounts]:
    """Per type and resource, how much the team may borrow (assumption: BorrowLimit % of each nominal
    amount rounded down; AbsoluteBorrowLimits' amounts on the types they name)."""
    sharing = config.get("ResourceSharingConfig") or {}
    if sharing.get("Strategy", api.DEFAULT_STRATEGY) != "LendAndBorrow":
        return {t: {r: 0 for r in a} for t, a in quota.items()}
    percent = int(sharing.get("BorrowLimit", api.DEFAULT_BORROW_LIMIT))
    out = {t: {r: a * percent // 100 for r, a in amounts.items()} for t, amounts in quota.items()}
    for t, amounts in by_type(sharing.get("AbsoluteBorrowLimits") or []).items():
        out[t] = dict(amounts)
    return out


# --- objects ----------------------------------------------------------------------------------------
def _meta(name: str, team: str | None = None, ns: str | None = None) -> dict[str, Any]:
    labels = {SAGEMAKER_MANAGED_QUEUE_LABEL: "true"}
    if team is not None:
        labels[QUOTA_ALLOCATION_LABEL] = team
    meta: dict[str, Any] = {"name": name}
    if ns is not None:
        meta["namespace"] = ns
    return meta | {"labels": labels}


def _kueue(kind: str, api_version: ApiVersion, metadata: dict[str, Any], **body: Any) -> dict[str, Any]:
    return {"apiVersion": f"{KUEUE_GROUP}/{api_version}", "kind": kind, "metadata": metadata, **body}


def _quantity(resource: str, amount: int) -> int | str:
    return quantity_json(resource if resource in (CPU, MEMORY) else EFA, amount)


def covered(types: Sequence[str]) -> list[str]:
    """The resources the instance types have, in :data:`RESOURCE_ORDER` (one resource group)."""
    have = {r for t in types for r in instance_amounts(NOMINAL[t])}
    return [r for r in RESOURCE_ORDER if r in have]


def _flavor_items(
    types: Sequence[str],
    nominal: Mapping[str, Amounts],
    borrow: Mapping[str, Amounts] | None,
    lend_none: bool,
) -> list[dict[str, Any]]:
    resources = covered(types)
    out = []
    for t in types:
        items = []
        for r in resources:
            item: dict[str, Any] = {"name": r, "nominalQuota": _quantity(r, nominal.get(t, {}).get(r, 0))}
            if borrow is not None:
                item["borrowingLimit"] = _quantity(r, borrow.get(t, {}).get(r, 0))
            if lend_none:
                item["lendingLimit"] = _quantity(r, 0)
            items.append(item)
        out.append({"name": t, "resources": items})
    return out


def _queue_spec(api_version: ApiVersion, selector_team: str, groups: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        ("cohort" if api_version == "v1beta1" else "cohortName"): COHORT,
        "namespaceSelector": {"matchLabels": {QUOTA_ALLOCATION_LABEL: selector_team}},
        "resourceGroups": groups,
    }


def team_queue(
    quota: Mapping[str, Any], types: Sequence[str], fair_share: bool, api_version: ApiVersion
) -> dict[str, Any]:
    """The ClusterQueue of one described ComputeQuota (assumptions: see the module doc)."""
    team = str(quota["ComputeQuotaTarget"]["TeamName"])
    config = quota.get("ComputeQuotaConfig") or {}
    nominal = by_type(config.get("ComputeQuotaResources") or [])
    strategy = (config.get("ResourceSharingConfig") or {}).get("Strategy", api.DEFAULT_STRATEGY)
    flavors = _flavor_items(types, nominal, _borrowing(config, nominal), strategy == "DontLend")
    spec = _queue_spec(api_version, team, [{"coveredResources": covered(types), "flavors": flavors}])
    spec["preemption"] = {
        "withinClusterQueue": config.get("PreemptTeamTasks", api.DEFAULT_PREEMPT_TEAM_TASKS),
        "reclaimWithinCohort": "Any",
        "borrowWithinCohort": {"policy": "Never"},
    }
    if fair_share:
        weight = quota["ComputeQuotaTarget"].get("FairShareWeight", api.DEFAULT_FAIR_SHARE_WEIGHT)
        spec["fairSharing"] = {"weight": weight}
    return _kueue("ClusterQueue", api_version, _meta(cluster_queue(team), team), spec=spec)


def idle_queues(
    quotas: Sequence[Mapping[str, Any]], instance_types: Mapping[str, int], api_version: ApiVersion
) -> list[dict[str, Any]]:
    """One queue per flavor holding what no team was given (assumption: nominal = count × the type's
    figures − every team's nominal there, at least 0; it lends all and borrows nothing)."""
    allocated: dict[str, Amounts] = {}
    for quota in quotas:
        for t, amounts in by_type(
            (quota.get("ComputeQuotaConfig") or {}).get("ComputeQuotaResources") or []
        ).items():
            for r, a in amounts.items():
                allocated.setdefault(t, {})[r] = allocated.get(t, {}).get(r, 0) + a
    out = []
    for i, t in enumerate(sorted(instance_types), start=1):
        whole = {r: a * instance_types[t] for r, a in instance_amounts(NOMINAL[t]).items()}
        idle = {t: {r: max(0, a - allocated.get(t, {}).get(r, 0)) for r, a in whole.items()}}
        groups = [{"coveredResources": covered([t]), "flavors": _flavor_items([t], idle, {}, False)}]
        spec = _queue_spec(api_version, IDLE_TEAM, groups)
        out.append(_kueue("ClusterQueue", api_version, _meta(f"{IDLE_QUEUE_PREFIX}{i}"), spec=spec))
    return out


def _namespace(quota: Mapping[str, Any]) -> dict[str, Any]:
    team = str(quota["ComputeQuotaTarget"]["TeamName"])
    meta = _meta(namespace(team), team)
    meta["labels"][ACTIVATE_QUOTA_LABEL] = str(quota.get("ActivationState") or "Enabled")
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def _shared(
    types: Sequence[str], scheduler: Mapping[str, Any], api_version: ApiVersion
) -> list[dict[str, Any]]:
    """The Topology, the flavors, the cohort and the priority classes."""
    levels = [layer_label(i) for i in range(1, TOPOLOGY_LAYERS + 1)] + [HOSTNAME_LABEL]
    out = [
        _kueue("Topology", api_version, _meta(TOPOLOGY), spec={"levels": [{"nodeLabel": n} for n in levels]})
    ]
    out += [
        _kueue(
            "ResourceFlavor",
            api_version,
            _meta(t),
            spec={"nodeLabels": {INSTANCE_TYPE_LABEL: t}, "topologyName": TOPOLOGY},
        )
        for t in types
    ]
    out.append(_kueue("Cohort", api_version, _meta(COHORT), spec={}))
    out += [
        _kueue(
            "WorkloadPriorityClass",
            api_version,
            _meta(f"{pc['Name']}{PRIORITY_SUFFIX}"),
            value=int(pc["Weight"]),
        )
        for pc in scheduler.get("PriorityClasses") or []
    ]
    return out


def objects(
    quotas: Sequence[Mapping[str, Any]],
    scheduler: Mapping[str, Any] | None,
    instance_types: Mapping[str, int],
    *,
    api_version: ApiVersion = "v1beta1",
) -> list[dict[str, Any]]:
    """Every object the add-on writes for these described ComputeQuotas (DescribeComputeQuota's
    answers; those being deleted or failed to create are skipped), the cluster policy's
    ``SchedulerConfig`` (None: there is none) and the cluster's instance types with their counts
    (DescribeCluster's instance groups), in the order they are applied."""
    types = sorted(t for t in instance_types if t in NOMINAL)
    live = sorted(
        (q for q in quotas if q.get("Status", "Created") in LIVE_STATUSES),
        key=lambda q: str(q["ComputeQuotaTarget"]["TeamName"]),
    )
    config = scheduler or {}
    fair_share = config.get("FairShare", "Enabled") == "Enabled"
    out = [_namespace(q) for q in live] + _shared(types, config, api_version)
    out += [team_queue(q, types, fair_share, api_version) for q in live]
    if config.get("IdleResourceSharing") == "Enabled":
        out += idle_queues(live, {t: instance_types[t] for t in types}, api_version)
    for q in live:
        team = str(q["ComputeQuotaTarget"]["TeamName"])
        spec = {"clusterQueue": cluster_queue(team)}
        out.append(
            _kueue("LocalQueue", api_version, _meta(local_queue(team), team, namespace(team)), spec=spec)
        )
    return out


def described(request: Mapping[str, Any], status: str = "Created") -> dict[str, Any]:
    """What DescribeComputeQuota answers for a quota made by this CreateComputeQuota ``request``."""
    keep = (
        "Name",
        "Description",
        "ClusterArn",
        "ComputeQuotaConfig",
        "ComputeQuotaTarget",
        "ActivationState",
    )
    return {k: request[k] for k in keep if k in request} | {"Status": status}
