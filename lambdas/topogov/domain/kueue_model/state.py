"""What the scheduler sees: admitted workloads and the cluster's quota and topology usage, as Kueue
v0.17.0's ``Snapshot`` (``pkg/cache/scheduler/snapshot.go``) holds them.

An :class:`Admitted` is a workload with quota reserved (``status.admission``): per pod set the flavor
of each resource, the quota it uses (``resourceUsage``), its count and topology assignment. Its usage
is what ``workload.Info`` derives from the admission (``totalRequestsFromAdmission``, ``TASUsage``):
quota per (flavor, resource), and per TAS flavor the assigned domains with the single-pod usage
``resourceUsage / count``.

The :class:`Snapshot` is live: the scheduler changes it during a cycle (admissions, reservations,
simulated removals) and every change it does not keep is undone (``SimulateWorkloadRemoval``,
``SimulateUsageAddition`` and their revert functions).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from topogov.domain.kueue_model.objects import ClusterQueue, ResourceFlavor, Workload
from topogov.domain.kueue_model.quota import FR, QuotaState
from topogov.domain.kueue_model.tas import TopologyAssignment
from topogov.domain.kueue_model.topology import DomainUsage, FlavorTree


@dataclass(frozen=True, slots=True)
class PodSetAdmission:
    """``PodSetAssignment``: flavors by resource, ``resourceUsage``, count, topology assignment."""

    name: str
    flavors: Mapping[str, str]
    usage: Mapping[str, int]
    count: int
    topology: TopologyAssignment | None = None

    @property
    def pods(self) -> tuple[str, ...]:
        """Each pod's host by completion index (hostname-lowest topologies; empty otherwise)."""
        return self.topology.ranks() if self.topology is not None else ()


@dataclass(slots=True)
class Admitted:
    """A workload holding quota in ``cluster_queue`` since ``reserved_at``."""

    workload: Workload
    cluster_queue: str
    pod_sets: tuple[PodSetAdmission, ...]
    reserved_at: float
    quota: dict[FR, int] = field(default_factory=dict)
    tas: dict[str, list[DomainUsage]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.workload.name

    def compute_usage(self, tas_flavors: Iterable[str]) -> None:
        """Quota per (flavor, resource) and, per TAS flavor, the domain usage (``Info.TASUsage``:
        each distinct flavor of a placed pod set gets all its domains)."""
        tas_set = set(tas_flavors)
        self.quota, self.tas = {}, {}
        for ps in self.pod_sets:
            for res, flavor in ps.flavors.items():
                fr = (flavor, res)
                self.quota[fr] = self.quota.get(fr, 0) + ps.usage.get(res, 0)
            if ps.topology is None or not ps.count:
                continue
            single = {r: v // ps.count for r, v in ps.usage.items() if r in ps.flavors}
            for flavor in sorted(set(ps.flavors.values()) & tas_set):
                self.tas.setdefault(flavor, []).extend(
                    DomainUsage(values, single, n) for values, n in ps.topology.domains
                )


class Snapshot:
    """ClusterQueues, their admitted workloads, quota usage and the TAS trees of the flavors."""

    def __init__(
        self,
        queues: Mapping[str, ClusterQueue],
        flavors: Mapping[str, ResourceFlavor],
        trees: Mapping[str, FlavorTree],
        *,
        fair_sharing: bool = False,
    ) -> None:
        self.queues = dict(queues)
        self.flavors = dict(flavors)
        self.trees = dict(trees)
        self.quota = QuotaState(self.queues.values())
        self.workloads: dict[str, dict[str, Admitted]] = {name: {} for name in self.queues}
        self.fair_sharing = fair_sharing
        self.active: set[str] = {n for n, q in self.queues.items() if q.stop_policy == "None"}

    def copy(self) -> Snapshot:
        """The same queues, admitted workloads and usage, to change on their own (admitted workloads
        themselves are never changed: they are shared)."""
        other = copy.copy(self)
        other.queues = dict(self.queues)
        other.trees = {name: tree.copy() for name, tree in self.trees.items()}
        other.quota = self.quota.copy()
        other.workloads = {name: dict(admitted) for name, admitted in self.workloads.items()}
        other.active = set(self.active)
        return other

    def trees_of(self, cq: str) -> dict[str, FlavorTree]:
        """``ClusterQueueSnapshot.TASFlavors``: the TAS trees of the flavors the queue lists."""
        return {f: self.trees[f] for f in self.queues[cq].flavor_names() if f in self.trees}

    def add_usage(
        self, cq: str, quota: Mapping[FR, int], tas: Mapping[str, Iterable[DomainUsage]], sign: int = 1
    ) -> None:
        """``ClusterQueueSnapshot.AddUsage`` / ``RemoveUsage`` (sign -1)."""
        self.quota.add(cq, quota, sign)
        for flavor, usage in tas.items():
            tree = self.trees.get(flavor)
            if tree is not None:
                tree.change_usage(usage, sign)

    def add(self, admitted: Admitted) -> None:
        """``Snapshot.AddWorkload``."""
        self.workloads[admitted.cluster_queue][admitted.name] = admitted
        self.add_usage(admitted.cluster_queue, admitted.quota, admitted.tas)

    def remove(self, admitted: Admitted) -> None:
        """``Snapshot.RemoveWorkload``."""
        self.workloads[admitted.cluster_queue].pop(admitted.name, None)
        self.add_usage(admitted.cluster_queue, admitted.quota, admitted.tas, -1)

    def all_admitted(self) -> list[Admitted]:
        return [a for cq in sorted(self.workloads) for a in self.workloads[cq].values()]
