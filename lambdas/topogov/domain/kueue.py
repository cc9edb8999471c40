"""The Kueue objects that put the team policy into force (pure, no I/O).

:func:`render` turns the policy and the GPU flavors of the fleet (:func:`flavors_from_snapshot`) into
every object the governor keeps in sync, in dependency order and deterministically:

1. a core/v1 ``Namespace`` per team;
2. one ``Topology`` per network depth the GPU flavors have (:func:`topology_name`: ``topogov-3-layers``,
   ``topogov-4-layers``), whose levels are ``network-node-layer-1`` … ``-<depth>`` (top layer first)
   and ``kubernetes.io/hostname`` last (Kueue allows hostname only as the lowest level);
3. one ``ResourceFlavor`` per GPU instance type, named after it, selecting its nodes by
   ``node.kubernetes.io/instance-type`` and referencing the Topology of *its own* depth
   (``spec.topologyName``; none while no node of the type is labelled yet).
4. the ``Cohort`` the teams share (served in both ``v1beta1`` and ``v1beta2``);
5. one ``WorkloadPriorityClass`` per policy priority class (``value``, ``description``);
6. per team a ``ClusterQueue`` and a ``LocalQueue`` in the team's namespace that points at it.

Why one Topology per depth
    Kueue puts a node into a flavor's topology tree only when it matches the flavor's ``nodeLabels``
    *and* carries a label for every level of the flavor's Topology (kubernetes-sigs/kueue v0.17.0
    ``pkg/util/tas/node.go``, ``NodeMatchesFlavor``, called from
    ``pkg/cache/scheduler/tas_nodes_cache.go``), and it skips a flavor whose Topology lacks the level a
    pod set asks for (``pkg/scheduler/flavorassigner/tas_flavorassigner.go``,
    ``checkPodSetAndFlavorMatchForTAS``: "does not contain the requested level"). EC2 reports three
    network layers for most types and four for p6-b200/p6-b300, so one Topology with four layers would
    drop every three-layer node. A flavor's depth is the fewest layers any *labelled* node of its type
    carries (:func:`flavors_from_nodes`), so every labelled node of a flavor carries every level of its
    Topology. A Topology's levels are immutable in Kueue v0.17 (CRD rule ``self == oldSelf``) and its
    name says its depth, so a Topology never has to change; a flavor's ``topologyName`` is immutable
    once set, so a flavor that must move to another Topology is re-created by the governor.

Every object carries ``app.kubernetes.io/managed-by: topogov``. Field names follow the upstream CRDs
(kubernetes-sigs/kueue ``config/components/crd/bases``): the one difference between the versions
that matters here is the ClusterQueue's cohort, ``spec.cohort`` in ``v1beta1`` and
``spec.cohortName`` in ``v1beta2``.

ClusterQueue
    One resource group covering the four governed resources (``nvidia.com/gpu``,
    ``vpc.amazonaws.com/efa``, ``cpu``, ``memory``, in that order, every flavor listing them in the
    same order as Kueue requires) with every GPU flavor in it. ``namespaceSelector`` matches
    ``kubernetes.io/metadata.name: <team namespace>``. Preemption: ``reclaimWithinCohort: Any`` (a
    team always gets its lent nominal quota back), ``withinClusterQueue`` = the team's
    ``preemptTeamTasks`` (``LowerPriority`` | ``Never``), ``borrowWithinCohort: {policy: Never}``
    (Kueue's default, written out: a borrowing team never preempts another team's work to borrow
    more; only reclaiming nominal quota preempts across teams). ``fairSharing.weight`` = the team's
    ``fairShareWeight`` when the policy's ``fairShare`` is ``enabled``; omitted when ``disabled``.
    ``stopPolicy: None`` is written out (Kueue's default), so a queue stopped by hand counts as drift;
    the governor sets ``HoldAndDrain`` itself on the queue of a team removed while it has work.

Sharing (see :mod:`topogov.domain.policy`)
    ``LendAndBorrow``  ``borrowingLimit`` = the team's borrow limit (split as below), no ``lendingLimit``.
    ``Lend``           ``borrowingLimit: 0``, no ``lendingLimit``.
    ``DontLend``       ``borrowingLimit: 0`` and ``lendingLimit: 0``.

Quota split across flavors
    Kueue counts a ClusterQueue's quota per (flavor, resource) and sums it across flavors, so a team's
    policy quota Q of a resource is *split* over the flavors, never repeated on each. The rule
    (:func:`split`): in proportion to each flavor's cluster capacity of that resource (per-node
    allocatable × node count), by the largest-remainder method: each flavor gets
    ``floor(Q × cap_f / Σcap)`` and the units left over go one each to the flavors with the largest
    remainders (ties: flavor order, i.e. instance type name). When no flavor has any capacity of the
    resource (say EFA on a fleet without EFA), the GPU capacities are the weights. The split is done
    in a whole unit when the amount is a whole number of it (cores for CPU, GiB or MiB for memory),
    so quotas stay readable. **Invariant**: the per-flavor amounts of a team sum exactly to its policy
    amount, for the nominal quota and the borrowing limit alike, and none is negative.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, NamedTuple

from topogov.domain.labels import (
    HOSTNAME_LABEL,
    INSTANCE_TYPE_LABEL,
    KUEUE_GROUP,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    NAMESPACE_NAME_LABEL,
    TEAM_LABEL,
    layer_label,
)
from topogov.domain.policy import Policy, Team
from topogov.domain.quantity import CPU, GOVERNED, GPU, MEMORY, Resources, amount_of, quantity_json
from topogov.domain.snapshot import Snapshot
from topogov.domain.team_pods import pod_security_labels
from topogov.domain.tree import NodeCapacity

ApiVersion = Literal["v1beta1", "v1beta2"]
API_VERSIONS: tuple[ApiVersion, ...] = ("v1beta1", "v1beta2")

TOPOLOGY_PREFIX = "topogov-"
DEFAULT_COHORT = "topogov"
CLUSTER_QUEUE_SUFFIX = "-clusterqueue"
MAX_DEPTH = 15  # Kueue allows at most 16 topology levels, hostname included


class FlavorInput(NamedTuple):
    """One GPU instance type of the fleet: its per-node allocatable resources, how many nodes, and
    how many network layers every labelled node of the type carries (0: none labelled yet)."""

    instance_type: str
    allocatable: Resources
    nodes: int
    depth: int = 3

    @property
    def topology(self) -> str:
        """The name of this flavor's Topology."""
        return topology_name(self.depth)

    @property
    def levels(self) -> list[str]:
        """The node labels of this flavor's Topology levels, coarsest first."""
        return topology_levels(self.depth)

    @property
    def capacity(self) -> Resources:
        a, n = self.allocatable, self.nodes
        return a.times(n)


def flavors_from_nodes(nodes: Iterable[NodeCapacity]) -> list[FlavorInput]:
    """The GPU flavors of these nodes, by instance type name.

    A type is a flavor when some node of it has an allocatable GPU; those nodes count. A type's per-node
    allocatable is the element-wise minimum over its nodes (what every node of the type can offer),
    so a node still starting up with a smaller allocatable never inflates the type's capacity. Its
    depth is the fewest network layers of any node of the type that carries one at all, so that every
    labelled node of the type carries every level of the type's Topology (Kueue's
    ``NodeMatchesFlavor``; see the module docstring). Nodes EC2 reports no topology for carry no
    layer label and are outside topology-aware scheduling whatever the Topology.
    """
    by_type: dict[str, list[NodeCapacity]] = {}
    for node in nodes:
        if node.instance_type:
            by_type.setdefault(node.instance_type, []).append(node)
    out = []
    for instance_type in sorted(by_type):
        members = by_type[instance_type]
        items = [n.allocatable for n in members if n.allocatable.gpu > 0]
        if not items:
            continue
        per_node = Resources(
            gpu=min(r.gpu for r in items),
            efa=min(r.efa for r in items),
            cpu_m=min(r.cpu_m for r in items),
            memory=min(r.memory for r in items),
        )
        # every node of the type is in the flavor (Kueue matches by label), GPUs ready or not
        depth = min((len(n.path) for n in members if n.path), default=0)
        out.append(FlavorInput(instance_type, per_node, len(items), min(depth, MAX_DEPTH)))
    return out


def flavors_from_snapshot(snapshot: Snapshot) -> list[FlavorInput]:
    """The GPU flavors of a topology snapshot (:func:`flavors_from_nodes` of its nodes)."""
    return flavors_from_nodes(snapshot.nodes.values())


# --- quota arithmetic -------------------------------------------------------------------------------


def split(amount: int, weights: Sequence[int], unit: int = 1) -> list[int]:
    """``amount`` split in proportion to ``weights`` (largest remainder), summing exactly to ``amount``.

    The split is in multiples of ``unit`` when ``amount`` is one (else in units of 1). All-zero
    weights split equally. Ties go to the earlier weight.
    """
    if amount < 0 or any(w < 0 for w in weights):
        raise ValueError("amount and weights must be ≥ 0")
    if not weights:
        if amount:
            raise ValueError("cannot split a positive amount over no weights")
        return []
    if unit < 1 or amount % unit:
        unit = 1
    units = amount // unit
    if sum(weights) == 0:
        weights = [1] * len(weights)
    total = sum(weights)
    shares = [units * w // total for w in weights]
    remainders = [units * w % total for w in weights]
    left = units - sum(shares)
    for i in sorted(range(len(weights)), key=lambda i: (-remainders[i], i))[:left]:
        shares[i] += 1
    return [s * unit for s in shares]


def _unit(resource: str) -> tuple[int, ...]:
    """Preferred split units of a resource, largest first."""
    if resource == CPU:
        return (1000,)
    if resource == MEMORY:
        return (2**30, 2**20)
    return (1,)


def split_resources(amounts: Resources, flavors: Sequence[FlavorInput]) -> list[Resources]:
    """``amounts`` split over ``flavors`` per resource (see the module docstring); one per flavor."""
    if not flavors:
        raise ValueError("no GPU flavors to split quota over")
    gpu_weights = [f.capacity.gpu for f in flavors]
    per_resource: dict[str, list[int]] = {}
    for resource in GOVERNED:
        amount = amount_of(amounts, resource)
        weights = [amount_of(f.capacity, resource) for f in flavors]
        if sum(weights) == 0:
            weights = gpu_weights
        unit = next((u for u in _unit(resource) if amount % u == 0), 1)
        per_resource[resource] = split(amount, weights, unit)
    return [
        Resources(
            gpu=per_resource[GPU][i],
            efa=per_resource[GOVERNED[1]][i],
            cpu_m=per_resource[CPU][i],
            memory=per_resource[MEMORY][i],
        )
        for i in range(len(flavors))
    ]


# --- names ------------------------------------------------------------------------------------------


def cluster_queue_name(team: Team) -> str:
    """The team's ClusterQueue: ``<namespace>-clusterqueue`` (as HyperPod task governance names it)."""
    return f"{team.namespace}{CLUSTER_QUEUE_SUFFIX}"


def topology_name(depth: int) -> str:
    """The Topology of flavors whose nodes carry ``depth`` network layers: ``topogov-<depth>-layers``,
    or ``topogov-hostname`` for a type none of whose nodes is labelled (hosts only). The name says
    the levels, which Kueue never lets change."""
    topology_levels(depth)  # validates the depth
    return f"{TOPOLOGY_PREFIX}{depth}-layers" if depth else f"{TOPOLOGY_PREFIX}hostname"


def topology_levels(depth: int) -> list[str]:
    """Node labels of the Topology levels: layer 1 … ``depth`` (top first), then the hostname.

    Depth 0 is the hostname alone: every node carries ``kubernetes.io/hostname``, so a GPU type EC2
    gives no topology for still takes part in topology-aware scheduling (by host). That keeps every
    ClusterQueue *TAS-only*: Kueue lets a pod set without a topology annotation use TAS flavors only
    in a queue whose flavors are all TAS (``isTASImplied``, tas_flavorassigner.go)."""
    if not 0 <= depth <= MAX_DEPTH:
        raise ValueError(f"depth must be 0..{MAX_DEPTH}, got {depth}")
    return [layer_label(i) for i in range(1, depth + 1)] + [HOSTNAME_LABEL]


# --- rendering --------------------------------------------------------------------------------------


def _meta(name: str, *, namespace: str | None = None, team: str | None = None) -> dict[str, Any]:
    labels = {MANAGED_BY_LABEL: MANAGED_BY}
    if team is not None:
        labels[TEAM_LABEL] = team
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = labels
    return meta


def namespace_object(team: Team) -> dict[str, Any]:
    """A team's Namespace as the governor creates it: Topogov's and the team's labels, and the Pod
    Security labels of the team's level (``domain/team_pods.py``)."""
    meta = _meta(team.namespace, team=team.name)
    meta["labels"] |= pod_security_labels(team)
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def _kueue(kind: str, api_version: ApiVersion, metadata: dict[str, Any], **body: Any) -> dict[str, Any]:
    return {"apiVersion": f"{KUEUE_GROUP}/{api_version}", "kind": kind, "metadata": metadata, **body}


def _flavor_resources(
    quota: Resources, borrow: Resources | None, lend: Resources | None
) -> list[dict[str, Any]]:
    out = []
    for resource in GOVERNED:
        item: dict[str, Any] = {
            "name": resource,
            "nominalQuota": quantity_json(resource, amount_of(quota, resource)),
        }
        if borrow is not None:
            item["borrowingLimit"] = quantity_json(resource, amount_of(borrow, resource))
        if lend is not None:
            item["lendingLimit"] = quantity_json(resource, amount_of(lend, resource))
        out.append(item)
    return out


def _cluster_queue(
    policy: Policy, team: Team, flavors: Sequence[FlavorInput], api_version: ApiVersion, cohort: str
) -> dict[str, Any]:
    quotas = split_resources(team.quota_resources, flavors)
    borrows = split_resources(team.borrow_resources, flavors)  # zero unless LendAndBorrow
    lending = team.lending_limit_resources  # None (lend all) or zero (DontLend)
    flavor_items = [
        {
            "name": flavor.instance_type,
            "resources": _flavor_resources(
                quota, borrow, None if lending is None else split_resources(lending, flavors)[i]
            ),
        }
        for i, (flavor, quota, borrow) in enumerate(zip(flavors, quotas, borrows, strict=True))
    ]
    spec: dict[str, Any] = {("cohort" if api_version == "v1beta1" else "cohortName"): cohort}
    spec["namespaceSelector"] = {"matchLabels": {NAMESPACE_NAME_LABEL: team.namespace}}
    spec["resourceGroups"] = [{"coveredResources": list(GOVERNED), "flavors": flavor_items}]
    spec["stopPolicy"] = "None"  # written out, so a queue stopped by hand is set going again
    spec["preemption"] = {
        "reclaimWithinCohort": "Any",
        "withinClusterQueue": team.preempt_team_tasks,
        "borrowWithinCohort": {"policy": "Never"},
    }
    if policy.fair_share == "enabled":
        spec["fairSharing"] = {"weight": team.fair_share_weight}
    return _kueue("ClusterQueue", api_version, _meta(cluster_queue_name(team), team=team.name), spec=spec)


def topology_object(name: str, levels: Sequence[str], api_version: ApiVersion) -> dict[str, Any]:
    """A Topology named ``name`` with these level labels (coarsest first)."""
    return _kueue(
        "Topology", api_version, _meta(name), spec={"levels": [{"nodeLabel": label} for label in levels]}
    )


def flavor_object(flavor: FlavorInput, api_version: ApiVersion, topology: str) -> dict[str, Any]:
    """The ResourceFlavor of ``flavor``, in Topology ``topology``."""
    spec = {"nodeLabels": {INSTANCE_TYPE_LABEL: flavor.instance_type}, "topologyName": topology}
    return _kueue("ResourceFlavor", api_version, _meta(flavor.instance_type), spec=spec)


def render(
    policy: Policy,
    flavors: Sequence[FlavorInput],
    *,
    api_version: ApiVersion = "v1beta1",
    cohort: str = DEFAULT_COHORT,
) -> list[dict[str, Any]]:
    """Every object that puts ``policy`` into force on a fleet with these GPU ``flavors``.

    One Topology per depth the flavors have (each flavor referring to its own). Raises
    ``ValueError`` for an unknown ``api_version``, a depth out of range, or no GPU flavors (a quota
    cannot be expressed without a flavor to hold it).
    """
    if api_version not in API_VERSIONS:
        raise ValueError(f"api_version must be one of {API_VERSIONS}, got {api_version!r}")
    flavors = sorted(flavors, key=lambda f: f.instance_type)
    if not flavors:
        raise ValueError("no GPU flavors: the fleet has no node with a GPU and an instance type")
    if len({f.instance_type for f in flavors}) != len(flavors):
        raise ValueError("flavors must have distinct instance types")
    teams = [policy.teams[name] for name in sorted(policy.teams)]

    objects: list[dict[str, Any]] = [namespace_object(t) for t in teams]
    for depth in sorted({f.depth for f in flavors}):
        objects.append(topology_object(topology_name(depth), topology_levels(depth), api_version))
    objects += [flavor_object(f, api_version, f.topology) for f in flavors]
    objects.append(_kueue("Cohort", api_version, _meta(cohort), spec={}))
    objects += [
        _kueue(
            "WorkloadPriorityClass",
            api_version,
            _meta(pc.name),
            value=pc.value,
            description=f"Topogov priority class {pc.name} (value {pc.value}).",
        )
        for pc in policy.priority_classes
    ]
    objects += [_cluster_queue(policy, t, flavors, api_version, cohort) for t in teams]
    objects += [
        _kueue(
            "LocalQueue",
            api_version,
            _meta(t.local_queue, namespace=t.namespace, team=t.name),
            spec={"clusterQueue": cluster_queue_name(t)},
        )
        for t in teams
    ]
    return objects


def flavor_amounts(cluster_queue: Mapping[str, Any], field: str = "nominalQuota") -> dict[str, list[Any]]:
    """Per resource, the ``field`` values of a rendered ClusterQueue's flavors, in flavor order."""
    out: dict[str, list[Any]] = {}
    for group in cluster_queue["spec"].get("resourceGroups", []):
        for flavor in group["flavors"]:
            for item in flavor["resources"]:
                if field in item:
                    out.setdefault(item["name"], []).append(item[field])
    return out


__all__ = [
    "API_VERSIONS",
    "DEFAULT_COHORT",
    "MANAGED_BY_LABEL",
    "TOPOLOGY_PREFIX",
    "FlavorInput",
    "cluster_queue_name",
    "flavor_amounts",
    "flavor_object",
    "flavors_from_nodes",
    "flavors_from_snapshot",
    "render",
    "split",
    "split_resources",
    "topology_levels",
    "topology_name",
    "topology_object",
]
