"""Quota arithmetic of ClusterQueues in a cohort: Kueue v0.17.0's ``resourceNode``
(``pkg/cache/scheduler/resource_node.go``) for a *flat* cohort (ClusterQueues under one Cohort with
no quota of its own; hierarchical cohorts are out of scope), and the dominant resource share of fair
sharing (``pkg/cache/scheduler/fair_sharing.go``).

Per (flavor, resource) ``fr`` of a ClusterQueue with nominal ``N``, borrowing limit ``B`` (None:
unlimited) and lending limit ``L`` (None: lend everything):

* local quota ``max(0, N - L)`` when ``L`` is set, else 0: quota the cohort never sees (``localQuota``);
* the cohort's quota is the sum of ``N - local`` over its ClusterQueues and its usage the sum of
  ``max(0, usage - local)`` (``accumulateFromChild``; kept incrementally by ``addUsage`` /
  ``removeUsage``, which amounts to the same sums);
* ``available`` = ``max(0, local - usage)`` + the cohort's unused quota, capped by ``B`` as
  ``N - local - max(0, usage - local) + B``; floored at 0 (``ClusterQueueSnapshot.Available``);
* ``potential_available`` = ``local + cohort quota``, capped at ``N + B`` (``potentialAvailable``):
  the largest request that could ever fit;
* borrowing = usage (plus the request) above ``N`` (``BorrowingWith``); a flat cohort has height 1,
  so a borrowing assignment has borrowing level 1 (``FindHeightOfLowestSubtreeThatFits``,
  ``getNodeHeight``).

Stopped (Hold/HoldAndDrain) ClusterQueues still count in their cohort: their quota and usage stay in
the cohort's resource node; they are only left out of the snapshot's ClusterQueues
(``pkg/cache/scheduler/snapshot.go``, ``InactiveClusterQueueSets``).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from topogov.domain.kueue_model.objects import ClusterQueue, ResourceQuota, cohort_members

FR = tuple[str, str]  # (flavor, resource): resources.FlavorResource
_NO_QUOTA = ResourceQuota(0)


@dataclass(frozen=True, slots=True)
class DRS:
    """``DRS``: the dominant resource share of a ClusterQueue (per mille of the cohort's lendable
    quota of the resource it borrows most of), with its weight."""

    fair_weight: float = 1.0
    unweighted_ratio: float = 0.0
    dominant_resource: str = ""
    borrowing: bool = False
    borrowed_frs: tuple[FR, ...] = field(default_factory=tuple)

    def is_zero(self) -> bool:
        return self.unweighted_ratio == 0

    def zero_weight_borrows(self) -> bool:
        return self.fair_weight == 0 and not self.is_zero()

    def weighted_share(self) -> float:
        """``PreciseWeightedShare``."""
        if self.is_zero():
            return 0.0
        if self.fair_weight == 0:
            return float("inf")
        return self.unweighted_ratio / self.fair_weight

    def borrowing_on(self, requested: Mapping[FR, int]) -> bool:
        """``IsBorrowingOn``."""
        return any(requested.get(fr, 0) > 0 for fr in self.borrowed_frs)


NEGATIVE_DRS = DRS(1.0, -1.0)


def compare_drs(a: DRS, b: DRS) -> int:
    """``CompareDRS``: -1 when ``a`` is the fairer (lower) share."""
    if a.zero_weight_borrows() and b.zero_weight_borrows():
        x, y = a.unweighted_ratio, b.unweighted_ratio
    elif a.zero_weight_borrows():
        return 1
    elif b.zero_weight_borrows():
        return -1
    else:
        x, y = a.weighted_share(), b.weighted_share()
    return (x > y) - (x < y)


class QuotaState:
    """Usage per ClusterQueue and (flavor, resource), and the arithmetic above."""

    def __init__(self, queues: Iterable[ClusterQueue]) -> None:
        self.queues: dict[str, ClusterQueue] = {q.name: q for q in queues}
        self.usage: dict[str, dict[FR, int]] = {name: {} for name in self.queues}
        self.members = cohort_members(self.queues.values())
        self._quotas: dict[str, dict[FR, ResourceQuota]] = {}
        for q in self.queues.values():
            self._quotas[q.name] = {
                (f.name, r): rq
                for rg in q.resource_groups
                for f in rg.flavors
                for r, rq in f.resources.items()
            }
        self._cohort_frs: dict[str, set[FR]] = {
            c: {fr for m in ms for fr in self._quotas[m]} for c, ms in self.members.items()
        }
        # the quotas never change: local quotas and the cohorts' quotas computed once; the cohorts'
        # usage (the sum of their members' usage above local quota) kept up to date by add
        self._local: dict[str, dict[FR, int]] = {
            name: {
                fr: max(0, rq.nominal - rq.lending_limit)
                for fr, rq in quotas.items()
                if rq.lending_limit is not None
            }
            for name, quotas in self._quotas.items()
        }
        self._cohort_quota: dict[tuple[str, FR], int] = {}
        self._cohort_used: dict[str, dict[FR, int]] = {c: {} for c in self.members}
        self._cohort_of: dict[str, str | None] = {
            name: (q.cohort if q.cohort in self.members else None) for name, q in self.queues.items()
        }

    def copy(self) -> QuotaState:
        """The same quotas and usage, to change on their own."""
        other = copy.copy(self)
        other.queues = dict(self.queues)
        other.usage = {name: dict(usage) for name, usage in self.usage.items()}
        other._cohort_used = {name: dict(usage) for name, usage in self._cohort_used.items()}
        return other

    # -- usage -------------------------------------------------------------------------------------
    def add(self, cq: str, quota: Mapping[FR, int], sign: int = 1) -> None:
        usage = self.usage[cq]
        cohort = self._cohort_of[cq]
        if cohort is None:
            for fr, value in quota.items():
                usage[fr] = usage.get(fr, 0) + sign * value
            return
        local, pooled = self._local[cq], self._cohort_used[cohort]
        for fr, value in quota.items():
            before = usage.get(fr, 0)
            after = usage[fr] = before + sign * value
            own = local.get(fr, 0) if local else 0
            if before >= own and after >= own:  # above the local quota before and after: all of it
                change = after - before
            else:
                change = max(0, after - own) - max(0, before - own)
            if change:
                pooled[fr] = pooled.get(fr, 0) + change

    def used(self, cq: str, fr: FR) -> int:
        return self.usage[cq].get(fr, 0)

    # -- one ClusterQueue --------------------------------------------------------------------------
    def quota(self, cq: str, fr: FR) -> ResourceQuota:
        return self._quotas[cq].get(fr) or _NO_QUOTA

    def frs(self, cq: str) -> list[FR]:
        return list(self._quotas[cq])

    def local_quota(self, cq: str, fr: FR) -> int:
        """``max(0, nominal - lendingLimit)`` when a lending limit is set, else 0."""
        return self._local[cq].get(fr, 0)

    def local_available(self, cq: str, fr: FR) -> int:
        """``LocalAvailable``."""
        return max(0, self.local_quota(cq, fr) - self.used(cq, fr))

    def cohort_quota(self, cohort: str, fr: FR) -> int:
        """The sum of the members' ``nominal - local``."""
        value = self._cohort_quota.get((cohort, fr))
        if value is None:
            value = self._cohort_quota[(cohort, fr)] = sum(
                self.quota(m, fr).nominal - self.local_quota(m, fr) for m in self.members.get(cohort, ())
            )
        return value

    def cohort_usage(self, cohort: str, fr: FR) -> int:
        """The sum of the members' ``max(0, usage - local)`` (kept by :meth:`add`)."""
        pooled = self._cohort_used.get(cohort)
        return pooled.get(fr, 0) if pooled is not None else 0

    def available(self, cq: str, fr: FR) -> int:
        """``ClusterQueueSnapshot.Available`` (``available`` floored at 0)."""
        q, used, cohort = self.quota(cq, fr), self.used(cq, fr), self.queues[cq].cohort
        if not cohort:
            return max(0, q.nominal - used)
        parent = self.cohort_quota(cohort, fr) - self.cohort_usage(cohort, fr)
        local = self.local_quota(cq, fr)
        if q.borrowing_limit is not None:
            stored = q.nominal - local
            in_parent = max(0, used - local)
            parent = min(stored - in_parent + q.borrowing_limit, parent)
        return max(0, max(0, local - used) + parent)

    def potential_available(self, cq: str, fr: FR) -> int:
        """``potentialAvailable``: the most this ClusterQueue could hold, assuming no usage."""
        q, cohort = self.quota(cq, fr), self.queues[cq].cohort
        if not cohort:
            return q.nominal
        value = self.local_quota(cq, fr) + self.cohort_quota(cohort, fr)
        if q.borrowing_limit is not None:
            value = min(q.nominal + q.borrowing_limit, value)
        return value

    def borrowing_with(self, cq: str, fr: FR, value: int = 0) -> bool:
        """``BorrowingWith``: usage plus ``value`` above nominal."""
        return self.used(cq, fr) + value > self.quota(cq, fr).nominal

    def borrow_height(self, cq: str, fr: FR, value: int) -> tuple[int, bool]:
        """``FindHeightOfLowestSubtreeThatFits`` for a flat cohort: (borrowing level, whether the
        fitting subtree is smaller than the whole tree, i.e. reclaim within it is possible)."""
        cohort = self.queues[cq].cohort
        if not self.borrowing_with(cq, fr, value) or not cohort:
            return 0, bool(cohort)
        return 1, False

    def within_nominal(self, cq: str, frs: Iterable[FR]) -> bool:
        """``IsWithinNominalInResources``: usage ≤ nominal for every ``fr``."""
        return all(self.used(cq, fr) <= self.quota(cq, fr).nominal for fr in frs)

    def fits_in_nominal(self, cq: str, requests: Mapping[FR, int]) -> bool:
        """``QuantitiesFitInQuota`` on the ClusterQueue: usage + request ≤ nominal for all."""
        return all(self.used(cq, fr) + v <= self.quota(cq, fr).nominal for fr, v in requests.items())

    def fits(self, cq: str, quota: Mapping[FR, int]) -> bool:
        """The quota half of ``ClusterQueueSnapshot.Fits``."""
        return all(self.available(cq, fr) >= v for fr, v in quota.items())

    # -- fair sharing ------------------------------------------------------------------------------
    def drs(self, cq: str, request: Mapping[FR, int] | None = None) -> DRS:
        """``dominantResourceShare`` of a ClusterQueue (``request`` added to its usage)."""
        queue = self.queues[cq]
        base = DRS(queue.fair_weight)
        if not queue.cohort:
            return base
        borrowed: dict[str, int] = {}
        frs: list[FR] = []
        for fr, q in self._quotas[cq].items():
            amount = (request or {}).get(fr, 0) + self.used(cq, fr) - q.nominal
            if amount > 0:
                borrowed[fr[1]] = borrowed.get(fr[1], 0) + amount
                frs.append(fr)
        if not borrowed:
            return base
        lendable: dict[str, int] = {}
        for fr in self._cohort_frs[queue.cohort]:
            lendable[fr[1]] = lendable.get(fr[1], 0) + self.cohort_quota(queue.cohort, fr)
        ratio, dominant = 0.0, ""
        for resource, amount in borrowed.items():
            lr = lendable.get(resource, 0)
            if lr > 0:
                r = amount * 1000.0 / lr
                if r > ratio or (r == ratio and resource < dominant):
                    ratio, dominant = r, resource
        return DRS(queue.fair_weight, ratio, dominant, True, tuple(frs))
