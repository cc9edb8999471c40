"""One admission cycle, as Kueue v0.17.0's ``Scheduler.schedule`` runs it (``pkg/scheduler/scheduler.go``).

1. **Nominate** each ClusterQueue's head (``nominate``, ``getAssignments``): flavors and placement
   (:mod:`.assigner`), preemption targets when the mode is Preempt (``getInitialAssignments``), and
   for a Preempt mode the topology assignment it would get after the preemptions, or in an empty
   flavor when it has no targets (``updateAssignmentForTAS``).
2. **Order** the entries (``makeClassicalIterator``): not borrowing before borrowing, then higher
   priority, then earlier creation. With fair sharing, a tournament by dominant resource share
   after admission, not-borrowing-on-its-flavors first (``fairSharingIterator``,
   ``FairSharingPrioritizeNonBorrowing`` on).
3. **Admit** in that order against the snapshot as earlier entries changed it: NoFit is skipped; a
   Preempt entry without targets reserves what it would use (up to nominal, or its borrowing limit,
   and its empty-flavor placement) unless ``reclaimWithinCohort`` is ``Any`` (``CanAlwaysReclaim``);
   an entry whose targets overlap another's, or that no longer fits after the entries before it
   (quota and ``TASFlavorSnapshot.Fits``), is skipped; a Preempt entry with targets adds its usage
   and issues the preemptions; a Fit entry is admitted (``assumeWorkload``).

Every change the cycle made to the snapshot is undone at its end: the caller (:mod:`.simulator`) then
applies what it decided, as Kueue's cache does after the cycle (admitted usage, evictions). The
snapshot usage an admission adds in-cycle is Kueue's ``ComputeTASNetUsage``, which counts a pod
set's domains once per resource on the TAS flavor (see :meth:`.assigner.Assignment.net_tas_usage`):
it only matters to later entries of the same cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field

from topogov.domain.kueue_model.assigner import (
    MODE_FIT,
    MODE_NO_FIT,
    MODE_PREEMPT,
    AssignContext,
    Assignment,
    apply_placements,
    assign,
    find_all,
    tas_requested,
    topology_requests,
)
from topogov.domain.kueue_model.objects import ClusterQueue, Workload
from topogov.domain.kueue_model.preemption import Request, Target, get_targets, oracle
from topogov.domain.kueue_model.quota import FR, compare_drs
from topogov.domain.kueue_model.state import Admitted, PodSetAdmission, Snapshot
from topogov.domain.kueue_model.topology import DomainUsage

LastTried = tuple[Mapping[str, int], ...] | None
_Answer = tuple[Assignment, tuple[Target, ...], str, LastTried]

SKIPPED_OVERLAP = "Workload has overlapping preemption targets with another workload"
SKIPPED_NO_LONGER_FITS = "Workload no longer fits after processing another workload"


@dataclass(frozen=True, slots=True)
class Head:
    """A ClusterQueue's head: the workload and the flavor-attempt state it carries
    (``workload.Info.LastAssignment``), valid for the queue generation it was made at."""

    workload: Workload
    last_tried: tuple[Mapping[str, int], ...] | None = None
    last_generation: int = 0


@dataclass(slots=True)
class Entry:
    """``entry``: a head with its assignment, targets and outcome."""

    head: Head
    cq: ClusterQueue
    assignment: Assignment
    targets: list[Target]
    message: str
    last_tried: tuple[Mapping[str, int], ...] | None
    status: str = ""  # "" (not nominated) | "skipped" | "assumed"
    requeue: str = ""  # "" | "FailedAfterNomination" | "PendingPreemption"
    admitted: Admitted | None = None
    workload: Workload = field(init=False)  # the head's

    def __post_init__(self) -> None:
        self.workload = self.head.workload


@dataclass(slots=True)
class CycleOutcome:
    entries: list[Entry] = field(default_factory=list)
    preempted: list[tuple[Target, Entry]] = field(default_factory=list)


def _usage(e: Entry, snap: Snapshot) -> tuple[dict[FR, int], dict[str, list[DomainUsage]]]:
    """``netUsage`` of an entry's assignment."""
    return dict(e.assignment.quota), e.assignment.net_tas_usage(snap.trees_of(e.cq.name))


def _to_reserve(e: Entry, snap: Snapshot) -> dict[FR, int]:
    """``quotaResourcesToReserve`` for a Preempt entry without targets."""
    q, out = snap.quota, {}
    for fr, usage in e.assignment.quota.items():
        quota, used = q.quota(e.cq.name, fr), q.used(e.cq.name, fr)
        if e.assignment.borrowing > 0:
            limit = quota.borrowing_limit
            out[fr] = usage if limit is None else min(usage, quota.nominal + limit - used)
        else:
            out[fr] = max(0, min(usage, quota.nominal - used))
    return out


def nominate(snap: Snapshot, head: Head, generation: int) -> Entry:
    """``nominate`` + ``getAssignments`` for one head."""
    wl = head.workload
    cq = snap.queues[wl.cluster_queue]
    ctx = AssignContext(snap.quota, snap.trees_of(cq.name), snap.flavors, oracle(snap), snap.fair_sharing)
    last = head.last_tried if head.last_tried is not None and generation <= head.last_generation else None
    assignment = assign(ctx, wl, cq, last, generation)
    targets: list[Target] = []
    if assignment.mode() == MODE_PREEMPT:
        need = frozenset(
            (f.flavor, r)
            for ps in assignment.pod_sets
            for r, f in ps.flavors.items()
            if f.mode == MODE_PREEMPT
        )
        tas = topology_requests(ctx, wl, cq, assignment)
        quota = {fr: v for fr, v in assignment.quota.items() if v}  # TotalRequestsFor skips zeros
        targets = get_targets(snap, Request(wl, cq.name, quota, need, tas))
        # updateAssignmentForTAS
        if any(tas_requested(ps, cq, ctx.trees) for ps in wl.pod_sets):
            if targets:
                for t in targets:
                    snap.remove(t.victim)
                apply_placements(assignment, find_all(ctx.trees, tas))
                for t in targets:
                    snap.add(t.victim)
            else:
                apply_placements(assignment, find_all(ctx.trees, tas, simulate_empty=True))
    return Entry(head, cq, assignment, targets, assignment.message(), tuple(assignment.last_tried))


class Nominations:
    """What :func:`nominate` answered since the snapshot last changed, by the question asked.

    A nomination is a function of the snapshot and of the head's ClusterQueue, pod sets (counts,
    requests, topology request, ``nodeSelector``, tolerations), priority, flavor-attempt state and
    queue generation — and of its creation time only where a queue preempts
    ``LowerOrNewerEqualPriority`` (``SatisfiesPreemptionPolicy``) — never of its name. A head asking
    what another asked since gets the same assignment, targets and message, without the search
    (Kueue searches again; the answer is the same).

    Of the snapshot it reads only its own cohort (the quota, admitted workloads and active queues of
    the cohort's members, or of the queue alone without one) and, when it places pods on the usage,
    the TAS trees (counted by ``FlavorTree.reads``). So a change in one ClusterQueue
    (:meth:`changed`: an admission, a finish, an eviction) forgets the answers of its cohort and those
    that read a tree; anything else (:meth:`clear`) forgets them all."""

    def __init__(self, queues: Mapping[str, ClusterQueue]) -> None:
        self.by_created = any(
            "LowerOrNewerEqualPriority"
            in (q.preemption.within_cluster_queue, q.preemption.reclaim_within_cohort)
            for q in queues.values()
        )
        self.scope = {name: q.cohort or name for name, q in queues.items()}
        self.placed: dict[Hashable, _Answer] = {}  # the answers that read a tree's usage
        self.unplaced: dict[str, dict[Hashable, _Answer]] = {}  # the others, by cohort (or queue)
        self._shapes: dict[str, tuple[Workload, int]] = {}  # name -> (its workload, its shape's id)
        self._ids: dict[Hashable, int] = {}  # shape -> a small number, quicker to hash
        self._lasts: dict[int, tuple[object, Hashable]] = {}  # id(last_tried) -> (it, its key)

    def clear(self) -> None:
        self.placed.clear()
        self.unplaced.clear()

    def changed(self, cq: str) -> None:
        """``cq``'s admitted workloads changed (and so the TAS usage)."""
        self.placed.clear()
        self.unplaced.pop(self.scope[cq], None)

    def shape(self, wl: Workload) -> int:
        """The id of what a nomination reads of ``wl``."""
        known = self._shapes.get(wl.name)
        if known is not None and known[0] is wl:
            return known[1]
        if len(self._shapes) > 200_000:
            self._shapes.clear()
            self._lasts.clear()
        key = (
            wl.cluster_queue,
            wl.priority,
            wl.created if self.by_created else None,
            tuple(
                (
                    ps.name,
                    ps.count,
                    tuple(sorted(ps.requests.items())),
                    ps.topology,
                    tuple(sorted(ps.node_selector.items())),
                    ps.tolerations,
                )
                for ps in wl.pod_sets
            ),
        )
        shape = self._ids.setdefault(key, len(self._ids))
        self._shapes[wl.name] = (wl, shape)
        return shape

    def _last(self, last: tuple[Mapping[str, int], ...] | None) -> Hashable:
        """A flavor-attempt state as a key (the same state object is shared by many heads)."""
        if last is None:
            return None
        known = self._lasts.get(id(last))
        if known is None or known[0] is not last:
            known = self._lasts[id(last)] = (last, tuple(tuple(sorted(tried.items())) for tried in last))
        return known[1]

    def nominate(self, snap: Snapshot, head: Head, generation: int) -> Entry:
        """:func:`nominate`, or the answer to the same question since the last change."""
        last = head.last_tried if head.last_tried is not None and generation <= head.last_generation else None
        key = (self.shape(head.workload), generation, self._last(last))
        scope = self.scope[head.workload.cluster_queue]
        unplaced = self.unplaced.setdefault(scope, {})
        known = self.placed.get(key) or unplaced.get(key)
        if known is None:
            reads = sum(t.reads for t in snap.trees.values())
            e = nominate(snap, head, generation)
            answer = (e.assignment, tuple(e.targets), e.message, e.last_tried)
            if sum(t.reads for t in snap.trees.values()) != reads:
                self.placed[key] = answer
            else:
                unplaced[key] = answer
            return e
        assignment, targets, message, last_tried = known
        return Entry(
            head, snap.queues[head.workload.cluster_queue], assignment, list(targets), message, last_tried
        )


def _classical_order(entries: list[Entry]) -> list[Entry]:
    """``makeClassicalIterator``; ties (Kueue: map order) by UID and name."""
    return sorted(
        entries,
        key=lambda e: (e.assignment.borrowing, -e.workload.priority, e.workload.created, e.workload.key),
    )


def _fair_order(snap: Snapshot, entries: list[Entry]) -> Callable[[], Entry | None]:
    """``fairSharingIterator.pop`` for flat cohorts (cohorts taken in name order)."""
    left = {e.cq.name: e for e in entries}

    def pop() -> Entry | None:
        if not left:
            return None
        first = left[min(left)]
        cohort = first.cq.cohort
        if not cohort:
            return left.pop(first.cq.name)
        drs, requested = {}, {}
        for name in snap.quota.members[cohort]:
            if name in left:
                e = left[name]
                quota, tas = _usage(e, snap)
                snap.add_usage(name, quota, tas)
                drs[name], requested[name] = snap.quota.drs(name), quota
                snap.add_usage(name, quota, tas, -1)
        best: Entry | None = None
        for name in snap.quota.members[cohort]:
            if name not in left:
                continue
            e = left[name]
            if best is None:
                best = e
                continue
            b = best.cq.name
            a_borrow, b_borrow = drs[name].borrowing_on(requested[name]), drs[b].borrowing_on(requested[b])
            if a_borrow != b_borrow:
                better = not a_borrow
            elif (c := compare_drs(drs[name], drs[b])) != 0:
                better = c < 0
            elif e.workload.priority != best.workload.priority:
                better = e.workload.priority > best.workload.priority
            else:
                better = e.workload.created < best.workload.created
            if better:
                best = e
        assert best is not None
        return left.pop(best.cq.name)

    return pop


def _fits(snap: Snapshot, e: Entry, removed: Sequence[Admitted]) -> bool:
    """``fits``: with the cycle's and the entry's targets removed, quota and topology fit."""
    for v in removed:
        snap.remove(v)
    try:
        quota, tas = _usage(e, snap)
        if not snap.quota.fits(e.cq.name, quota):
            return False
        return all(snap.trees[f].fits(u) for f, u in tas.items())
    finally:
        for v in removed:
            snap.add(v)


def _admission(e: Entry, now: float, snap: Snapshot) -> Admitted:
    pod_sets = tuple(
        PodSetAdmission(
            ps.name,
            {r: f.flavor for r, f in ps.flavors.items()},
            {r: ps.requests[r] for r in ps.flavors},
            ps.count,
            ps.topology,
        )
        for ps in e.assignment.pod_sets
    )
    admitted = Admitted(e.workload, e.cq.name, pod_sets, now)
    admitted.compute_usage(snap.trees)
    return admitted


def run_cycle(
    snap: Snapshot, heads: Sequence[tuple[Head, int]], now: float, nominations: Nominations | None = None
) -> CycleOutcome:
    """One cycle over ``heads`` (each with its ClusterQueue's generation). The snapshot is unchanged
    on return; the outcome says what was admitted, preempted and requeued. ``nominations``: the
    answers since the snapshot last changed, reused (all heads are nominated before any change)."""
    nom = nominate if nominations is None else nominations.nominate
    out = CycleOutcome([nom(snap, head, gen) for head, gen in heads])
    undo: list[tuple[str, dict[FR, int], dict[str, list[DomainUsage]]]] = []
    preempted: dict[str, Admitted] = {}
    pop = (
        _fair_order(snap, out.entries) if snap.fair_sharing else iter(_classical_order(out.entries)).__next__
    )
    try:
        while True:
            try:
                e = pop()
            except StopIteration:
                break
            if e is None:
                break
            mode = e.assignment.mode()
            if mode == MODE_NO_FIT:
                continue
            if mode == MODE_PREEMPT and not e.targets:
                if e.cq.preemption.reclaim_within_cohort != "Any":
                    reserve = (e.cq.name, _to_reserve(e, snap), _usage(e, snap)[1])
                    snap.add_usage(*reserve)
                    undo.append(reserve)
                continue
            if any(t.victim.name in preempted for t in e.targets):
                e.status, e.message, e.last_tried = "skipped", SKIPPED_OVERLAP, None
                continue
            if not _fits(snap, e, [*preempted.values(), *(t.victim for t in e.targets)]):
                e.status, e.message, e.last_tried = "skipped", SKIPPED_NO_LONGER_FITS, None
                continue
            for t in e.targets:
                preempted[t.victim.name] = t.victim
            usage = (e.cq.name, *_usage(e, snap))
            snap.add_usage(*usage)
            undo.append(usage)
            if mode == MODE_PREEMPT:
                e.last_tried = None
                out.preempted += [(t, e) for t in e.targets]
                if e.targets:
                    e.message += f". Pending the preemption of {len(e.targets)} workload(s)"
                    e.requeue = "PendingPreemption"
                continue
            assert mode == MODE_FIT
            e.status, e.admitted = "assumed", _admission(e, now, snap)
    finally:
        for cq, quota, tas in reversed(undo):
            snap.add_usage(cq, quota, tas, -1)
    return out
