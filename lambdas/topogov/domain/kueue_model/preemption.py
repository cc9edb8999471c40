"""Preemption targets, as Kueue v0.17.0 chooses them (``pkg/scheduler/preemption``), for ClusterQueues
in a flat cohort.

Classical (``preemption.go``, ``classicalPreemptions``; ``classical/``)
    Candidates: admitted workloads of the preemptor's ClusterQueue allowed by ``withinClusterQueue``
    (``Never`` | ``LowerPriority`` | ``LowerOrNewerEqualPriority``), and, unless
    ``reclaimWithinCohort`` is ``Never``, those of cohort ClusterQueues above their nominal quota in a
    resource needing preemption allowed by ``reclaimWithinCohort`` (``LowerPriority`` | ``Any``); only
    workloads using a (flavor, resource) that needs preemption (``WorkloadUsesResources``). From another
    queue they are *hierarchical reclaim* when the preemptor fits within its own nominal quota, else
    *reclaim without borrowing* (``borrowWithinCohort: Never``) or while borrowing under the priority
    threshold (``classifyPreemptionVariant``). Each group is sorted by ``CandidatesOrdering``: other
    queues first, lower priority, most recently admitted, UID; groups in order hierarchical, priority,
    same queue (``NewCandidateIterator``). Candidates are removed in that order, skipping one whose
    queue is no longer above nominal (``candidateIsValid``), until the preemptor fits (quota and
    topology: ``workloadFits``); then, from the second last back, each is added back if it still
    fits (``fillBackWorkloads``). With and without borrowing as ``classicalPreemptions`` orders them.

Fair sharing (``fairPreemptions``; ``fairsharing/``), when the scheduler's fair sharing is enabled
    Candidates as above but from any borrowing cohort queue; queues visited by highest dominant
    resource share (``TargetClusterQueueOrdering``), own-queue candidates first, reclaiming outright
    while the preemptor stays within nominal (``FairSharingPreemptWithinNominal``, on), else rule
    S2-a (``LessThanOrEqualToFinalShare``) then S2-b (``LessThanInitialShare``), Kueue's defaults.

The oracle (``preemption_oracle.go``) answers the flavor assigner per (flavor, resource): no
candidates, preemption within the queue, or reclaim.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from topogov.domain.kueue_model.assigner import NO_CANDIDATES, PREEMPT, RECLAIM, find_all
from topogov.domain.kueue_model.objects import Workload
from topogov.domain.kueue_model.quota import DRS, FR, NEGATIVE_DRS, compare_drs
from topogov.domain.kueue_model.state import Admitted, Snapshot
from topogov.domain.kueue_model.tas import TASRequest

IN_CLUSTER_QUEUE = "InClusterQueue"
IN_COHORT_RECLAMATION = "InCohortReclamation"
IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"
IN_COHORT_FAIR_SHARING = "InCohortFairSharing"
HUMAN_REASONS = {
    IN_CLUSTER_QUEUE: "prioritization in the ClusterQueue",
    IN_COHORT_RECLAMATION: "reclamation within the cohort",
    IN_COHORT_FAIR_SHARING: "Fair Sharing within the cohort",
    IN_COHORT_RECLAIM_WHILE_BORROWING: "reclamation within the cohort while borrowing",
}
_NEVER, _WITHIN_CQ, _HIERARCHICAL, _WITHOUT_BORROWING, _WHILE_BORROWING = range(5)
_VARIANT_REASON = {
    _WITHIN_CQ: IN_CLUSTER_QUEUE,
    _HIERARCHICAL: IN_COHORT_RECLAMATION,
    _WITHOUT_BORROWING: IN_COHORT_RECLAMATION,
    _WHILE_BORROWING: IN_COHORT_RECLAIM_WHILE_BORROWING,
}


@dataclass(frozen=True, slots=True)
class Target:
    """``preemption.Target``: a workload to evict and why (the ``Preempted`` condition's reason)."""

    victim: Admitted
    reason: str


@dataclass(slots=True)
class Request:
    """What the preemptor needs: its ClusterQueue, quota by (flavor, resource), the (flavor, resource)
    pairs needing preemption and the pod sets to place (``preemptionCtx``)."""

    workload: Workload
    cluster_queue: str
    quota: dict[FR, int]
    need: frozenset[FR]
    tas: Mapping[str, Sequence[TASRequest]] = field(default_factory=dict)


def satisfies(policy: str, preemptor: Workload, candidate: Workload) -> bool:
    """``SatisfiesPreemptionPolicy`` (creation time is the queue-order timestamp)."""
    lower = preemptor.priority > candidate.priority
    if policy == "LowerPriority":
        return lower
    if policy == "LowerOrNewerEqualPriority":
        return lower or (preemptor.priority == candidate.priority and preemptor.created < candidate.created)
    return policy == "Any"


def ordering_key(victim: Admitted, preemptor_cq: str) -> tuple[bool, int, float, str]:
    """``CandidatesOrdering`` as a sort key (no victim is half-evicted in the model: see the package
    docstring): other queues first, lower priority, most recently admitted, UID."""
    wl = victim.workload
    return (victim.cluster_queue == preemptor_cq, wl.priority, -victim.reserved_at, wl.key)


def uses(victim: Admitted, need: frozenset[FR]) -> bool:
    """``WorkloadUsesResources``: a (flavor, resource) of its pod sets' assignment is needed (the keys
    of its quota usage are exactly those pairs: :meth:`~.state.Admitted.compute_usage`)."""
    return not need.isdisjoint(victim.quota)


def workload_fits(snap: Snapshot, req: Request, allow_borrowing: bool) -> bool:
    """``workloadFits``: quota (without borrowing when not allowed) and topology."""
    q = snap.quota
    for fr, value in req.quota.items():
        if not allow_borrowing and q.borrowing_with(req.cluster_queue, fr, value):
            return False
        if value > q.available(req.cluster_queue, fr):
            return False
    return not any(p.failure for p in find_all(snap.trees, req.tas).values())


Move = Callable[[Admitted], None]


def _movers(snap: Snapshot, req: Request) -> tuple[Move, Move]:
    """How a candidate leaves the snapshot and comes back while the preemptor's fit is tried:
    ``RemoveWorkload`` / ``AddWorkload``; when the preemptor has no pod set to place (the oracle's
    question), only the quota usage, all that :func:`workload_fits` then reads."""
    if any(req.tas.values()):
        return snap.remove, snap.add
    quota = snap.quota

    def leave(victim: Admitted) -> None:
        quota.add(victim.cluster_queue, victim.quota, -1)

    def back(victim: Admitted) -> None:
        quota.add(victim.cluster_queue, victim.quota)

    return leave, back


def _fill_back(
    snap: Snapshot, req: Request, targets: list[Target], allow_borrowing: bool, moves: tuple[Move, Move]
) -> list[Target]:
    """``fillBackWorkloads``, with its O(1) swap-delete (which reorders the targets)."""
    leave, back = moves
    for i in range(len(targets) - 2, -1, -1):
        back(targets[i].victim)
        if workload_fits(snap, req, allow_borrowing):
            targets[i] = targets[-1]
            targets.pop()
        else:
            leave(targets[i].victim)
    return targets


def _classical(snap: Snapshot, req: Request) -> list[Target]:
    """``classicalPreemptions`` (the module's docstring). One piece on purpose: it follows
    upstream's function step by step (candidates, variants, ordering, removal, fill-back), so that a
    reader can hold the two side by side and the upstream table tests map onto it."""
    cq = snap.queues[req.cluster_queue]
    q, pre = snap.quota, cq.preemption
    wl = req.workload
    forbidden = pre.borrow_within_cohort == "Never"

    def variant(victim: Admitted, advantage: bool) -> int:
        if not uses(victim, req.need):
            return _NEVER
        same = victim.cluster_queue == cq.name
        policy = pre.within_cluster_queue if same else pre.reclaim_within_cohort
        if not satisfies(policy, wl, victim.workload):
            return _NEVER
        if same:
            return _WITHIN_CQ
        if advantage:
            return _HIERARCHICAL
        if forbidden:
            return _WITHOUT_BORROWING
        above = victim.workload.priority >= wl.priority or (
            pre.max_priority_threshold is not None and victim.workload.priority > pre.max_priority_threshold
        )
        return _WITHOUT_BORROWING if above else _WHILE_BORROWING

    same_queue: list[tuple[Admitted, int]] = []
    if pre.within_cluster_queue != "Never":
        same_queue = [(v, m) for v in snap.workloads[cq.name].values() if (m := variant(v, False)) != _NEVER]
    hierarchy: list[tuple[Admitted, int]] = []
    priority: list[tuple[Admitted, int]] = []
    if cq.cohort and pre.reclaim_within_cohort != "Never":
        advantage = q.fits_in_nominal(cq.name, req.quota)
        bucket = hierarchy if advantage else priority
        for other in q.members[cq.cohort]:
            if other == cq.name or other not in snap.active or q.within_nominal(other, req.need):
                continue
            bucket += [
                (v, m) for v in snap.workloads[other].values() if (m := variant(v, advantage)) != _NEVER
            ]
    candidates = [
        c
        for group in (hierarchy, priority, same_queue)
        for c in sorted(group, key=lambda c: ordering_key(c[0], cq.name))
    ]
    under_nominal = all(q.used(cq.name, fr) < q.quota(cq.name, fr).nominal for fr in req.need)
    if (not hierarchy and not priority) or (forbidden and not under_nominal):
        attempts = [True]
    elif forbidden and not hierarchy:
        attempts = [False, True]
    else:
        attempts = [True, False]
    moves = leave, back = _movers(snap, req)
    for borrow in attempts:
        targets: list[Target] = []
        for victim, kind in candidates:
            if victim.cluster_queue != cq.name:
                if borrow and kind == _WITHOUT_BORROWING:
                    continue
                if q.within_nominal(victim.cluster_queue, req.need):
                    continue
            leave(victim)
            targets.append(Target(victim, _VARIANT_REASON[kind]))
            if workload_fits(snap, req, borrow):
                targets = _fill_back(snap, req, targets, borrow, moves)
                for t in targets:
                    back(t.victim)
                return targets
        for t in targets:
            back(t.victim)
    return []


class _TargetOrdering:
    """``TargetClusterQueueOrdering`` for a flat cohort."""

    def __init__(self, snap: Snapshot, preemptor_cq: str, candidates: Sequence[Admitted]) -> None:
        self.snap, self.preemptor_cq = snap, preemptor_cq
        self.by_cq: dict[str, list[Admitted]] = {}
        for c in candidates:
            self.by_cq.setdefault(c.cluster_queue, []).append(c)
        self.pruned: set[str] = set()
        self.root_pruned = False

    def drop(self, cq: str) -> None:
        self.pruned.add(cq)

    def pop(self, cq: str) -> Admitted:
        return self.by_cq[cq].pop(0)

    def has(self, cq: str) -> bool:
        return bool(self.by_cq.get(cq))

    def __iter__(self) -> Iterator[str]:
        cohort = self.snap.queues[self.preemptor_cq].cohort
        if not cohort:
            while self.has(self.preemptor_cq):
                yield self.preemptor_cq
            return
        while not self.root_pruned:
            target = self._next(cohort)
            if target is not None:
                yield target

    def _next(self, cohort: str) -> str | None:
        best: str | None = None
        best_drs = NEGATIVE_DRS
        for cq in self.snap.quota.members[cohort]:
            if cq in self.pruned or cq not in self.snap.active:
                continue
            drs = self.snap.quota.drs(cq)
            if (not drs.borrowing and cq != self.preemptor_cq) or not self.has(cq):
                self.pruned.add(cq)
            elif best is not None and compare_drs(drs, best_drs) == 0:
                mine = ordering_key(self.by_cq[cq][0], self.preemptor_cq)
                if mine < ordering_key(self.by_cq[best][0], self.preemptor_cq):
                    best = cq
            elif compare_drs(drs, best_drs) == 1:
                best, best_drs = cq, drs
        if best is None:
            self.root_pruned = True
        return best


def _fair(snap: Snapshot, req: Request) -> list[Target]:
    """``fairPreemptions`` (the module's docstring). One piece on purpose: it follows upstream's
    function step by step (candidates, queue ordering, within-nominal, rules S2-a and S2-b), so that
    a reader can hold the two side by side and the upstream table tests map onto it."""
    cq = snap.queues[req.cluster_queue]
    q, wl = snap.quota, req.workload
    candidates: list[Admitted] = []
    if cq.preemption.within_cluster_queue != "Never":
        policy = cq.preemption.within_cluster_queue
        candidates += [
            v
            for v in snap.workloads[cq.name].values()
            if satisfies(policy, wl, v.workload) and uses(v, req.need)
        ]
    if cq.cohort and cq.preemption.reclaim_within_cohort != "Never":
        policy = cq.preemption.reclaim_within_cohort
        for other in q.members[cq.cohort]:
            if other == cq.name or other not in snap.active:
                continue
            if not any(q.borrowing_with(other, fr) for fr in req.need):
                continue
            candidates += [
                v
                for v in snap.workloads[other].values()
                if satisfies(policy, wl, v.workload) and uses(v, req.need)
            ]
    if not candidates:
        return []
    candidates.sort(key=lambda v: ordering_key(v, cq.name))
    q.add(cq.name, req.quota)
    targets: list[Target] = []

    def fits() -> bool:
        q.add(cq.name, req.quota, -1)
        try:
            return workload_fits(snap, req, True)
        finally:
            q.add(cq.name, req.quota)

    def take(victim: Admitted, reason: str) -> bool:
        snap.remove(victim)
        targets.append(Target(victim, reason))
        return fits()

    def share_after(victim: Admitted) -> DRS:
        q.add(victim.cluster_queue, victim.quota, -1)
        try:
            return q.drs(victim.cluster_queue)
        finally:
            q.add(victim.cluster_queue, victim.quota)

    done = False
    retry: list[Admitted] = []
    within_nominal = not any(q.borrowing_with(cq.name, fr) for fr in req.need)
    ordering = _TargetOrdering(snap, cq.name, candidates)
    for target_cq in ordering:
        if target_cq == cq.name:
            if done := take(ordering.pop(target_cq), IN_CLUSTER_QUEUE):
                break
            continue
        if within_nominal:
            if done := take(ordering.pop(target_cq), IN_COHORT_RECLAMATION):
                break
            continue
        mine = q.drs(cq.name)
        while ordering.has(target_cq):
            victim = ordering.pop(target_cq)
            if compare_drs(mine, share_after(victim)) <= 0:  # S2-a
                done = take(victim, IN_COHORT_FAIR_SHARING)
                break
            retry.append(victim)
        if done:
            break
    if not done:
        second = _TargetOrdering(snap, cq.name, retry)
        for target_cq in second:
            if compare_drs(q.drs(cq.name), q.drs(target_cq)) < 0 and take(  # S2-b
                second.pop(target_cq), IN_COHORT_FAIR_SHARING
            ):
                done = True
                break
            second.drop(target_cq)
    q.add(cq.name, req.quota, -1)
    if not done:
        for t in targets:
            snap.add(t.victim)
        return []
    targets = _fill_back(snap, req, targets, True, (snap.remove, snap.add))
    for t in targets:
        snap.add(t.victim)
    return targets


def get_targets(snap: Snapshot, req: Request) -> list[Target]:
    """``Preemptor.getTargets``: fair or classical. The snapshot is left as it was."""
    return _fair(snap, req) if snap.fair_sharing else _classical(snap, req)


def oracle(snap: Snapshot) -> Callable[[str, Workload, FR, int], tuple[int, int]]:
    """``PreemptionOracle.SimulatePreemption``: (NO_CANDIDATES | PREEMPT | RECLAIM, borrowing level)."""

    def simulate(cq: str, wl: Workload, fr: FR, quantity: int) -> tuple[int, int]:
        targets = get_targets(snap, Request(wl, cq, {fr: quantity}, frozenset({fr})))
        if not targets:
            return NO_CANDIDATES, snap.quota.borrow_height(cq, fr, quantity)[0]
        for t in targets:  # the quota alone: what borrow_height reads
            snap.quota.add(t.victim.cluster_queue, t.victim.quota, -1)
        borrow = snap.quota.borrow_height(cq, fr, quantity)[0]
        for t in targets:
            snap.quota.add(t.victim.cluster_queue, t.victim.quota)
        return (PREEMPT if any(t.victim.cluster_queue == cq for t in targets) else RECLAIM), borrow

    return simulate


def preemption_message(preemptor: Workload, reason: str, preemptor_path: str, preemptee_path: str) -> str:
    """``preemptionMessage``: the ``Evicted``/``Preempted`` conditions' message."""
    return (
        f"Preempted to accommodate a workload (UID: {preemptor.uid or 'UNKNOWN'}, JobUID: "
        f"{preemptor.job_uid or 'UNKNOWN'}) due to {HUMAN_REASONS.get(reason, 'UNKNOWN')}; "
        f"preemptor path: {preemptor_path}; preemptee path: {preemptee_path}"
    )
