"""The model's input types: the parts of Kubernetes and Kueue v0.17.0 objects the scheduler reads.

Quantities are Kueue's ``resources.Requests`` units (``pkg/resources/requests.go``, ``ResourceValue``):
CPU in millicores, every other resource in its integer value (memory in bytes, devices in units).
:func:`requests_of` converts Kubernetes quantity strings and :func:`requests_from` converts Topogov's
:class:`~topogov.domain.quantity.Resources`.

Field names follow the upstream API (``apis/kueue/v1beta2``): a :class:`ClusterQueue` has
``resource_groups`` of :class:`FlavorQuotas` with a :class:`ResourceQuota` per resource
(``nominalQuota``, ``borrowingLimit``, ``lendingLimit``), a ``cohort``, :class:`Preemption`,
:class:`FlavorFungibility` (defaults as ``pkg/cache/scheduler/clusterqueue.go``,
``defaultFlavorFungibility``: ``whenCanBorrow: MayStopSearch``, ``whenCanPreempt: TryNextFlavor``),
a fair-sharing weight and a ``stopPolicy``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from topogov.domain.labels import HOSTNAME_LABEL
from topogov.domain.quantity import CPU, EFA, GPU, MEMORY, Resources, parse_quantity

HOSTNAME = HOSTNAME_LABEL
PODS = "pods"

Requests = Mapping[str, int]
PreemptionPolicy = Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority", "Any"]
StopPolicy = Literal["None", "Hold", "HoldAndDrain"]
FungibilityPolicy = Literal["MayStopSearch", "TryNextFlavor"]


def requests_of(quantities: Mapping[str, str | int]) -> dict[str, int]:
    """Kubernetes quantities as Kueue counts them: ``MilliValue`` for CPU, ``Value`` (rounded up) for
    the rest (``pkg/resources/requests.go``, ``ResourceValue``)."""
    return {name: _resource_value(name, raw) for name, raw in quantities.items()}


@functools.lru_cache(maxsize=4096)
def _resource_value(name: str, raw: str | int) -> int:
    """One quantity as Kueue counts it (a cluster's few distinct request strings, parsed once)."""
    value = parse_quantity(raw)
    return math.ceil(value * 1000) if name == CPU else math.ceil(value)


def requests_from(resources: Resources) -> dict[str, int]:
    """Topogov's four governed resources as Kueue requests (zero amounts left out)."""
    pairs = ((GPU, resources.gpu), (EFA, resources.efa), (CPU, resources.cpu_m), (MEMORY, resources.memory))
    return {name: amount for name, amount in pairs if amount}


@dataclass(frozen=True, slots=True)
class Taint:
    """A node taint (core/v1); only ``NoSchedule`` and ``NoExecute`` keep pods away."""

    key: str
    value: str = ""
    effect: str = "NoSchedule"

    def __str__(self) -> str:
        """As ``corev1.Taint.ToString`` writes it (used in Kueue's exclusion messages)."""
        return f"{self.key}:{self.effect}" if not self.value else f"{self.key}={self.value}:{self.effect}"


@dataclass(frozen=True, slots=True)
class Toleration:
    """A toleration (core/v1); ``operator`` ``Equal`` (the default) or ``Exists``."""

    key: str = ""
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        """``corev1.Toleration.ToleratesTaint`` (k8s.io/api core/v1/toleration.go)."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        return True if self.operator == "Exists" else self.value == taint.value


@dataclass(frozen=True, slots=True)
class Node:
    """A node as Kueue's TAS cache keeps it (``pkg/cache/scheduler/tas_flavor.go``, ``nodeInfo``):
    labels, taints, ``status.allocatable``; ``ready`` is the ``Ready`` condition and ``unschedulable``
    ``spec.unschedulable`` (``tas_nodes_cache.go``, ``nodesCache.sync``)."""

    name: str
    labels: Mapping[str, str]
    allocatable: Requests
    taints: tuple[Taint, ...] = ()
    ready: bool = True
    unschedulable: bool = False


@dataclass(frozen=True, slots=True)
class NonTASPod:
    """A scheduled, non-terminated pod Kueue does not place (DaemonSets, pods outside Kueue): its
    requests come off its node's free capacity, and it takes one of the node's ``pods``
    (``pkg/cache/scheduler/tas_non_tas_pod_cache.go``, ``usagePerNode``)."""

    name: str
    node: str
    requests: Requests = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Topology:
    """``Topology.spec.levels``: node-label keys, coarsest first."""

    name: str
    levels: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ResourceFlavor:
    """``ResourceFlavor.spec``: ``nodeLabels``, ``topologyName`` (TAS flavor when set) and the
    ``tolerations`` TAS adds to every pod set's own (``tas_flavor_snapshot.go``, ``fillInCounts``)."""

    name: str
    node_labels: Mapping[str, str] = field(default_factory=dict)
    topology_name: str | None = None
    tolerations: tuple[Toleration, ...] = ()


@dataclass(frozen=True, slots=True)
class ResourceQuota:
    """``nominalQuota``, ``borrowingLimit`` (None: unlimited), ``lendingLimit`` (None: all of it)."""

    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(frozen=True, slots=True)
class FlavorQuotas:
    name: str
    resources: Mapping[str, ResourceQuota]


@dataclass(frozen=True, slots=True)
class ResourceGroup:
    covered_resources: tuple[str, ...]
    flavors: tuple[FlavorQuotas, ...]


@dataclass(frozen=True, slots=True)
class Preemption:
    """``ClusterQueue.spec.preemption``; the defaults are Kueue's (``clusterqueue.go``,
    ``defaultPreemption``: both ``Never``; ``borrowWithinCohort`` absent = ``Never``)."""

    within_cluster_queue: PreemptionPolicy = "Never"
    reclaim_within_cohort: PreemptionPolicy = "Never"
    borrow_within_cohort: Literal["Never", "LowerPriority"] = "Never"
    max_priority_threshold: int | None = None


@dataclass(frozen=True, slots=True)
class FlavorFungibility:
    when_can_borrow: FungibilityPolicy = "MayStopSearch"
    when_can_preempt: FungibilityPolicy = "TryNextFlavor"
    preference: Literal["BorrowingOverPreemption", "PreemptionOverBorrowing"] | None = None


@dataclass(frozen=True, slots=True)
class ClusterQueue:
    """A ClusterQueue (queueing strategy ``BestEffortFIFO``, the default; see the package docstring)."""

    name: str
    resource_groups: tuple[ResourceGroup, ...]
    cohort: str | None = None
    preemption: Preemption = Preemption()
    flavor_fungibility: FlavorFungibility = FlavorFungibility()
    fair_weight: float = 1.0
    stop_policy: StopPolicy = "None"

    def flavor_names(self) -> list[str]:
        return [f.name for rg in self.resource_groups for f in rg.flavors]

    def group_of(self, resource: str) -> ResourceGroup | None:
        """``ClusterQueueSnapshot.RGByResource``."""
        for rg in self.resource_groups:
            if resource in rg.covered_resources:
                return rg
        return None

    def quota(self, flavor: str, resource: str) -> ResourceQuota:
        for rg in self.resource_groups:
            for f in rg.flavors:
                if f.name == flavor and resource in f.resources:
                    return f.resources[resource]
        return ResourceQuota(0)


@dataclass(frozen=True, slots=True)
class TopologyRequest:
    """A pod set's topology annotations: ``podset-required-topology``, ``podset-preferred-topology``
    or ``podset-unconstrained-topology: "true"`` (at most one is set), and the pod-set slices'
    ``podset-slice-required-topology`` and ``podset-slice-size`` (``podSetSliceRequiredTopology``,
    ``podSetSliceSize``: every ``slice_size`` consecutive pods in one domain of ``slice_level``;
    alone, without required or preferred, they ask for the top level, ``jobframework/tas.go``).

    A group with slices, or a slice size below 1, is refused (``ValueError``) as Kueue's job webhooks
    refuse the annotations (``jobframework/tas_validation.go``, ``ValidateTASPodSetRequest``): only a
    Workload written by hand carries them, which Kueue v0.17.0 places with a leader (a group) or
    divides by (a size of 0), and the model does not cover."""

    required: str | None = None
    preferred: str | None = None
    unconstrained: bool = False
    # ``podSetGroupName`` (``kueue.x-k8s.io/podset-group-name``, kept only beside required or
    # preferred: ``jobframework/tas.go``): the pod sets of one workload placed as one (groups.py)
    group: str | None = None
    slice_level: str | None = None
    slice_size: int | None = None

    def __post_init__(self) -> None:
        if self.slice_size is not None and self.slice_size < 1:
            raise ValueError(f"podset-slice-size {self.slice_size}: must be greater than or equal to 1")
        if self.group is not None and (self.slice_level is not None or self.slice_size is not None):
            raise ValueError(
                f"pod-set group {self.group!r} with slices: kueue.x-k8s.io/podset-group-name may not be set "
                "with kueue.x-k8s.io/podset-slice-required-topology or podset-slice-size"
            )

    @property
    def explicit(self) -> bool:
        """``workload.IsExplicitlyRequestingTAS`` (``pkg/workload/workload.go``): slices' fields
        count."""
        return (
            self.required is not None
            or self.preferred is not None
            or self.unconstrained
            or self.slice_level is not None
            or self.slice_size is not None
        )


@dataclass(frozen=True, slots=True)
class PodSet:
    """``count`` identical pods each requesting ``requests`` (the pod spec's requests, as
    ``resources.NewRequestsFromPodSpec``), with the template's ``nodeSelector`` and tolerations."""

    count: int
    requests: Requests
    name: str = "main"
    topology: TopologyRequest | None = None
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()

    def total(self) -> dict[str, int]:
        """``PodSetResources.Requests``: the per-pod requests times ``count``."""
        return {name: value * self.count for name, value in self.requests.items()}


@dataclass(frozen=True, slots=True)
class Workload:
    """A Workload: its key ``name``, the ClusterQueue its LocalQueue points at, pod sets, priority
    (``spec.priority``) and creation time in seconds (``metadata.creationTimestamp``, the FIFO key).
    ``uid`` is the last tie-break of Kueue's orderings (``metadata.uid``; default: the name) and
    ``job_uid`` the owner's UID, both only in preemption messages."""

    name: str
    cluster_queue: str
    pod_sets: tuple[PodSet, ...]
    priority: int = 0
    created: float = 0.0
    uid: str = ""
    job_uid: str = ""

    @property
    def key(self) -> str:
        return self.uid or self.name

    def pod_set(self, name: str) -> PodSet:
        return next(ps for ps in self.pod_sets if ps.name == name)


def cohort_members(queues: Iterable[ClusterQueue]) -> dict[str, list[str]]:
    """Cohort name -> its ClusterQueues, by name."""
    out: dict[str, list[str]] = {}
    for cq in sorted(queues, key=lambda q: q.name):
        if cq.cohort:
            out.setdefault(cq.cohort, []).append(cq.name)
    return out
