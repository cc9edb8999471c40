"""The cluster as Kueue v0.17.0 keeps it between cycles: queues, admitted workloads, events.

Queues (``pkg/cache/queue/cluster_queue.go``, ``BestEffortFIFO``)
    Each ClusterQueue has a heap ordered by the workload it is preempting for first (the *sticky*
    workload, set when it issues preemptions), then higher priority, earlier creation, UID
    (``baseCompareFunc``), and a set of *inadmissible* workloads. A cycle pops one head per active
    ClusterQueue (``Manager.heads``). A head that is not admitted goes back to the heap when it was
    skipped after nomination, issued preemptions, or has flavors left to try (``requeueIfNotPresent``,
    ``RequeueIfNotPresent``); otherwise it waits among the inadmissible until something frees
    capacity: a workload finishing, deleted or evicted in its cohort, or a node change
    (``QueueAssociatedInadmissibleWorkloadsAfter``, ``NotifyRetryInadmissible``), which moves every
    inadmissible workload of the cohort back to the heaps after a 1 s batch period
    (``requeueBatchPeriod``, ``queueInadmissibleWorkloads``). A pending workload's message is therefore
    the one of its last attempt, which may predate later admissions, as in Kueue.

Flavor attempts
    A head carries the flavor index its last attempt stopped at (``LastAssignment``) and resumes
    after it; the state is dropped when the ClusterQueue's ``AllocatableResourceGeneration`` grew
    (an admitted workload of it was removed: ``clusterQueue.deleteWorkload``), after a skip, or when
    preemptions were issued (``setSkipped``; ``schedule``).

Evictions
    Preempted workloads release their quota and placement at the end of the cycle that preempted
    them (Kueue: once their Job is stopped) and are requeued at once (``Requeued=True`` for
    preemption); their message is the preemption message until their next attempt. ``HoldAndDrain``
    evicts a ClusterQueue's admitted workloads (reason ``ClusterQueueStopped``); a stopped queue is
    not scheduled and its pending workloads read ``ClusterQueue <name> is inactive`` (reason
    ``Inadmissible``: ``WorkloadReconciler.Reconcile``, ``!r.cache.ClusterQueueActive``). Workloads it
    drained carry ``Requeued=False`` and return, once it restarts, with the inadmissible requeue,
    after the heads already queued (in Kueue a race with the workload controller, usually won so).

Admissions the API server rejects
    Kueue v0.17.0 may place a pod-set group on no domain at all (its two faults, :mod:`.groups`). The
    scheduler admits it, but the Workload CRD requires a topology assignment's ``slices`` and the
    status patch fails (``Scheduler.admit``: "Could not admit Workload and assign flavors in
    apiserver"): the cache forgets the workload, its ClusterQueue's generation grows, and it is
    requeued at once (``FailedAfterNomination``), its status untouched (none, for a new workload). It
    misses the next cycle (its admission is in flight when that cycle takes its heads, so the
    workloads behind it in its queue are tried), then it heads its queue again: Kueue retries it in
    every cycle until the cluster changes so that it is placed, which may be never. The model does the
    same and counts it as settled once rejected twice in a row since the snapshot last changed
    (:meth:`Cluster.has_heads`); :meth:`Cluster.pending` marks it ``rejected``. In Kueue the cache may
    still hold the rejected workload's quota when the next cycle takes its snapshot (the API server's
    answer races with it); the model releases it at once.

Time is an input: ``submit`` takes the workload's creation time, the other events and cycles a ``now``
(seconds); nothing here reads a clock.
"""

from __future__ import annotations

import copy
import dataclasses
import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from topogov.domain.kueue_model.objects import (
    ClusterQueue,
    Node,
    NonTASPod,
    ResourceFlavor,
    StopPolicy,
    Topology,
    Workload,
)
from topogov.domain.kueue_model.preemption import preemption_message
from topogov.domain.kueue_model.scheduler import Entry, Head, Nominations, run_cycle
from topogov.domain.kueue_model.state import Admitted, PodSetAdmission, Snapshot
from topogov.domain.kueue_model.topology import FlavorTree

REQUEUE_BATCH_S = 1.0


@dataclass(frozen=True, slots=True)
class Pending:
    """A pending workload: ``QuotaReserved=False`` with this reason and message (both empty if it has
    no such condition yet). ``rejected``: its last admission was rejected by the API server (a pod set
    placed on no domain, see the module docstring), so it keeps the status it had and is retried."""

    name: str
    cluster_queue: str
    reason: str
    message: str
    rejected: bool = False


@dataclass(frozen=True, slots=True)
class Eviction:
    """An admitted workload evicted: ``Evicted`` reason ``Preempted`` (``preemption_reason``
    ``InClusterQueue`` / ``InCohortReclamation`` / ...) or ``ClusterQueueStopped``."""

    name: str
    cluster_queue: str
    reason: str
    preemption_reason: str
    message: str
    by: str = ""


@dataclass(slots=True)
class CycleResult:
    admitted: list[Admitted] = field(default_factory=list)
    evicted: list[Eviction] = field(default_factory=list)
    pending: list[Pending] = field(default_factory=list)


@dataclass(slots=True)
class _Record:
    workload: Workload
    admitted: Admitted | None = None
    reason: str = ""
    message: str = ""
    last_tried: tuple[Mapping[str, int], ...] | None = None
    last_generation: int = 0
    requeued: bool = True  # the Requeued condition is not False
    rejected: tuple[int, int] | None = None  # (the cluster's changes, rejections in a row at them)

    def copy(self) -> _Record:
        return _Record(
            self.workload,
            self.admitted,
            self.reason,
            self.message,
            self.last_tried,
            self.last_generation,
            self.requeued,
            self.rejected,
        )


@dataclass(slots=True)
class _Queue:
    heap: list[tuple[int, float, str, str]] = field(default_factory=list)
    where: dict[str, str] = field(default_factory=dict)  # name -> "heap" | "inadmissible"
    sticky: str = ""
    generation: int = 0
    heads: int = 0  # how many names are in the heap
    parked: dict[str, None] = field(default_factory=dict)  # the inadmissible names
    rejected: dict[str, None] = field(default_factory=dict)  # rejected last cycle, back after the next

    def copy(self) -> _Queue:
        return _Queue(
            list(self.heap),
            dict(self.where),
            self.sticky,
            self.generation,
            self.heads,
            dict(self.parked),
            dict(self.rejected),
        )

    def reorder(self, workloads: Mapping[str, Workload]) -> None:
        """The heap made again from the workloads in it (``workloads``: each one's current object),
        without the entries of workloads deleted since (a name submitted again after a delete sorts
        by its new priority and creation time only)."""
        self.heap = [
            (-wl.priority, wl.created, wl.key, wl.name)
            for name, where in self.where.items()
            if where == "heap"
            for wl in (workloads[name],)
        ]
        heapq.heapify(self.heap)

    def _move(self, name: str, where: str | None) -> None:
        old = self.where.get(name)
        if old == "heap":
            self.heads -= 1
        elif old == "inadmissible":
            del self.parked[name]
        if where is None:
            self.where.pop(name, None)
            return
        self.where[name] = where
        if where == "heap":
            self.heads += 1
        else:
            self.parked[name] = None

    def push(self, wl: Workload) -> None:
        if self.where.get(wl.name) != "heap":
            self._move(wl.name, "heap")
            heapq.heappush(self.heap, (-wl.priority, wl.created, wl.key, wl.name))

    def push_all(self, workloads: Sequence[Workload]) -> None:
        """:meth:`push` of each, the heap ordered once (the same pops: its entries are unique)."""
        for wl in workloads:
            if self.where.get(wl.name) != "heap":
                self._move(wl.name, "heap")
                self.heap.append((-wl.priority, wl.created, wl.key, wl.name))
        heapq.heapify(self.heap)

    def park(self, name: str) -> None:
        self._move(name, "inadmissible")

    def drop(self, name: str) -> None:
        self._move(name, None)
        self.rejected.pop(name, None)
        if self.sticky == name:
            self.sticky = ""

    def has_heads(self) -> bool:
        return self.heads > 0

    def pop(self) -> str:
        if self.sticky and self.where.get(self.sticky) == "heap":
            name = self.sticky
        else:
            name = ""
            while self.heap:
                candidate = heapq.heappop(self.heap)[3]
                if self.where.get(candidate) == "heap":
                    name = candidate
                    break
        if name:
            self._move(name, None)
        return name


class Cluster:
    """Nodes, flavors, queues and workloads, advanced by events and admission cycles."""

    def __init__(
        self,
        *,
        nodes: Iterable[Node],
        flavors: Iterable[ResourceFlavor],
        topologies: Iterable[Topology],
        cluster_queues: Iterable[ClusterQueue],
        non_tas_pods: Iterable[NonTASPod] = (),
        fair_sharing: bool = False,
        requeue_batch_s: float = REQUEUE_BATCH_S,
    ) -> None:
        self.nodes = {n.name: n for n in nodes}
        self.flavors = {f.name: f for f in flavors}
        self.topologies = {t.name: t for t in topologies}
        self.non_tas_pods = {p.name: p for p in non_tas_pods}
        queues = {q.name: q for q in cluster_queues}
        self.snapshot = Snapshot(queues, self.flavors, self._trees(), fair_sharing=fair_sharing)
        self.queues = {name: _Queue() for name in queues}
        self._order = sorted(self.queues)
        self.nominations = Nominations(queues)  # cleared by every change of the snapshot
        self.records: dict[str, _Record] = {}
        self._owned: set[str] = set()  # the records this cluster may change (not shared by a copy)
        self.requeue_batch_s = requeue_batch_s
        self._requeue_due: dict[str, float] = {}  # ClusterQueue -> when its inadmissible move back
        self.changes = 0  # how many times the snapshot changed (a rejection repeats until it does)
        self.livelocked: set[str] = set()  # the workloads of the last repeat cut short (_livelock)
        self._rejecting: set[str] = set()  # the records whose last admission was rejected

    def copy(self) -> Cluster:
        """The cluster as it is now, to advance on its own (one forecast of many from one state):
        queues, records and the snapshot's usage are copied; nodes, flavors, topologies and the
        workloads themselves (immutable) are shared."""
        other = copy.copy(self)
        other.nodes, other.non_tas_pods = dict(self.nodes), dict(self.non_tas_pods)
        other.snapshot = self.snapshot.copy()
        other.queues = {name: queue.copy() for name, queue in self.queues.items()}
        other.nominations = Nominations(other.snapshot.queues)
        # records are shared until one side changes one (:meth:`_own`): a forecast changes few
        other.records, other._owned, self._owned = dict(self.records), set(), set()
        other._requeue_due = dict(self._requeue_due)
        other._rejecting = set(self._rejecting)
        other.livelocked = set(self.livelocked)
        return other

    def _changed(self, cq: str | None = None) -> None:
        """The snapshot changed: in ``cq``'s admitted workloads, or anywhere (None)."""
        self.changes += 1
        if cq is None:
            self.nominations.clear()
        else:
            self.nominations.changed(cq)

    def _own(self, name: str) -> _Record:
        """The record of ``name``, to change: copied first if a copy of the cluster may share it."""
        rec = self.records[name]
        if name not in self._owned:
            rec = self.records[name] = rec.copy()
            self._owned.add(name)
        return rec

    def forget_requeues(self) -> None:
        """Drop the requeues of inadmissible workloads that events since the start asked for (a
        cluster kept as the start of forecasts: one built afresh from the same workloads has none)."""
        self._requeue_due.clear()

    def reorder_queues(self) -> None:
        """Each queue's heap made again (see :meth:`_Queue.reorder`)."""
        workloads = {name: rec.workload for name, rec in self.records.items()}
        for queue in self.queues.values():
            queue.reorder(workloads)

    # -- topology ----------------------------------------------------------------------------------
    def _trees(self) -> dict[str, FlavorTree]:
        out = {}
        for f in self.flavors.values():
            if f.topology_name and f.topology_name in self.topologies:
                topology = self.topologies[f.topology_name]
                out[f.name] = FlavorTree(f, topology, self.nodes.values(), self.non_tas_pods.values())
        return out

    def _rebuild(self, now: float) -> None:
        """A node or non-TAS pod changed: new trees with the admitted usage, and every active queue's
        inadmissible workloads retried (TAS ``rfReconciler``: ``NotifyRetryInadmissible``)."""
        self.snapshot.trees = self._trees()
        self._changed()
        for adm in self.snapshot.all_admitted():
            for flavor, usage in adm.tas.items():
                if flavor in self.snapshot.trees:
                    self.snapshot.trees[flavor].change_usage(usage, 1)
        for name in self.snapshot.active:
            self._notify(name, now)

    def set_node(self, node: Node, now: float) -> None:
        self.nodes[node.name] = node
        self._rebuild(now)

    def delete_node(self, name: str, now: float) -> None:
        self.nodes.pop(name, None)
        self._rebuild(now)

    def set_non_tas_pod(self, pod: NonTASPod, now: float) -> None:
        self.non_tas_pods[pod.name] = pod
        self._rebuild(now)

    # -- events ------------------------------------------------------------------------------------
    def submit(self, wl: Workload) -> None:
        """A Workload created (``AddOrUpdateWorkload``): into its ClusterQueue's heap."""
        if wl.name in self.records:
            raise ValueError(f"workload {wl.name} exists")
        if wl.cluster_queue not in self.queues:
            raise ValueError(f"ClusterQueue {wl.cluster_queue} not found")
        rec = self.records[wl.name] = _Record(wl)
        self._owned.add(wl.name)
        self.queues[wl.cluster_queue].push(wl)
        self._stopped_message(rec)

    def add_admitted(self, wl: Workload, pod_sets: Sequence[PodSetAdmission], reserved_at: float) -> Admitted:
        """A workload already holding quota (as Kueue's cache starts from the Workloads' recorded
        ``status.admission``: ``Cache.AddOrUpdateWorkload``); nothing is checked, over-commitment
        included, as in Kueue's own scheduler tests."""
        if wl.name in self.records:
            raise ValueError(f"workload {wl.name} exists")
        admitted = Admitted(wl, wl.cluster_queue, tuple(pod_sets), reserved_at)
        admitted.compute_usage(self.snapshot.trees)
        self.records[wl.name] = _Record(wl, admitted)
        self._owned.add(wl.name)
        self.snapshot.add(admitted)
        self._changed(wl.cluster_queue)
        return admitted

    def finish(self, name: str, now: float) -> None:
        """The workload's job succeeded (``Finished``): its quota is released."""
        self._delete(name, now)

    def cancel(self, name: str, now: float) -> None:
        """The workload (its Job) was deleted, admitted or not."""
        self._delete(name, now)

    def _delete(self, name: str, now: float) -> None:
        rec = self.records.pop(name)
        self._owned.discard(name)
        self._rejecting.discard(name)
        cq = rec.workload.cluster_queue
        if rec.admitted is not None:
            self.snapshot.remove(rec.admitted)
            self.queues[cq].generation += 1
            self._changed(cq)
        self.queues[cq].drop(name)
        self._notify(cq, now)

    def set_stop_policy(self, cq: str, policy: StopPolicy, now: float) -> list[Eviction]:
        """Change a ClusterQueue's ``stopPolicy``; ``HoldAndDrain`` evicts its admitted workloads."""
        queue = dataclasses.replace(self.snapshot.queues[cq], stop_policy=policy)
        self.snapshot.queues[cq] = self.snapshot.quota.queues[cq] = queue
        self._changed()
        evicted = []
        if policy == "None":
            # the workload controller sets Requeued=True on workloads the stop evicted
            # ("ClusterQueueRestarted"); they return with the inadmissible requeue, after the heads
            # already in the heap (workload_controller.go, isDisabledRequeuedByClusterQueueStopped)
            self.snapshot.active.add(cq)
            for name in self.queues[cq].parked:
                self._own(name).requeued = True
        else:
            self.snapshot.active.discard(cq)
            if policy == "HoldAndDrain":
                for adm in list(self.snapshot.workloads[cq].values()):
                    rec = self._own(adm.name)
                    evicted.append(
                        Eviction(adm.name, cq, "ClusterQueueStopped", "", "The ClusterQueue is stopped")
                    )
                    self._evict(rec, now, requeued=False)
        for name, rec in list(self.records.items()):
            if rec.workload.cluster_queue == cq and rec.admitted is None:
                self._stopped_message(self._own(name))
        self._notify(cq, now)
        return evicted

    def _stopped_message(self, rec: _Record) -> None:
        cq = rec.workload.cluster_queue
        if cq not in self.snapshot.active:
            rec.reason, rec.message = "Inadmissible", f"ClusterQueue {cq} is inactive"

    def _evict(self, rec: _Record, now: float, *, requeued: bool) -> None:
        assert rec.admitted is not None
        cq = rec.admitted.cluster_queue
        self.snapshot.remove(rec.admitted)
        self._changed(cq)
        rec.admitted, rec.requeued, rec.last_tried = None, requeued, None
        queue = self.queues[cq]
        queue.generation += 1
        if requeued and cq in self.snapshot.active:
            queue.push(rec.workload)
        else:
            queue.park(rec.workload.name)
        self._notify(cq, now)

    def _notify(self, cq: str, now: float) -> None:
        """``notifyRetryInadmissibleWithoutLock``: the queue's cohort (or the queue alone)."""
        cohort = self.snapshot.queues[cq].cohort
        names = self.snapshot.quota.members[cohort] if cohort else [cq]
        for name in names:
            self._requeue_due.setdefault(name, now + self.requeue_batch_s)

    def _requeue(self, names: Iterable[str]) -> None:
        """``queueInadmissibleWorkloads``: inadmissible workloads back to the heap (not those whose
        ``Requeued`` condition is False, nor in a stopped queue)."""
        for name in names:
            queue = self.queues[name]
            if name not in self.snapshot.active:
                continue
            queue.push_all([self.records[n].workload for n in queue.parked if self.records[n].requeued])

    # -- cycles ------------------------------------------------------------------------------------
    def cycle(self, now: float) -> CycleResult:
        """One admission cycle at ``now``: the heads of the active queues, in name order."""
        heads = self._pop_heads()
        result = CycleResult()
        if not heads:
            return result
        outcome = run_cycle(self.snapshot, heads, now, self.nominations)
        for e in outcome.entries:
            self._settle(e, result)
        for target, e in outcome.preempted:
            victim = self._own(target.victim.name)
            message = preemption_message(
                e.workload,
                target.reason,
                _path(self.snapshot, e.cq.name),
                _path(self.snapshot, target.victim.cluster_queue),
            )
            result.evicted.append(
                Eviction(
                    victim.workload.name,
                    target.victim.cluster_queue,
                    "Preempted",
                    target.reason,
                    message,
                    e.workload.name,
                )
            )
            self._evict(victim, now, requeued=True)
            victim.reason, victim.message = "Pending", message
        return result

    def _pop_heads(self) -> list[tuple[Head, int]]:
        """The head of every active queue, in name order; then what was rejected in the last cycle
        goes back for the next one."""
        heads = []
        for name in self._order:
            if name not in self.snapshot.active:
                continue
            popped = self.queues[name].pop()
            if popped:
                rec = self.records[popped]
                heads.append(
                    (Head(rec.workload, rec.last_tried, rec.last_generation), self.queues[name].generation)
                )
        for queue in self.queues.values():
            if queue.rejected:
                queue.push_all([self.records[n].workload for n in queue.rejected])
                queue.rejected.clear()
        return heads

    def _settle(self, e: Entry, result: CycleResult) -> None:
        """What one entry of the cycle leaves: admitted, rejected by the API server, or pending."""
        rec = self._own(e.workload.name)
        queue = self.queues[e.cq.name]
        if e.status == "assumed" and e.admitted is not None and api_rejects(e.admitted):
            # the status patch fails: the cache forgets the workload (``forgetWorkload`` grows the
            # queue's generation) and it is requeued at once, its status as it was
            rec.last_tried, rec.last_generation = e.last_tried, e.assignment.generation
            before = rec.rejected
            rec.rejected = (self.changes, before[1] + 1 if before and before[0] == self.changes else 1)
            self._rejecting.add(rec.workload.name)
            queue.generation += 1
            queue.rejected[rec.workload.name] = None
            result.pending.append(Pending(rec.workload.name, e.cq.name, rec.reason, rec.message, True))
            return
        rec.rejected = None
        self._rejecting.discard(rec.workload.name)
        if e.status == "assumed":
            assert e.admitted is not None
            rec.admitted, rec.reason, rec.message, rec.last_tried = e.admitted, "", "", None
            self.snapshot.add(e.admitted)
            self._changed(e.cq.name)
            queue.drop(rec.workload.name)
            result.admitted.append(e.admitted)
            return
        rec.reason, rec.message = "Pending", e.message
        rec.last_tried, rec.last_generation = e.last_tried, e.assignment.generation
        if e.requeue == "PendingPreemption":
            queue.sticky = rec.workload.name
        immediate = e.status == "skipped" or e.requeue == "PendingPreemption"
        if immediate or (e.last_tried is not None and e.assignment.pending_flavors()):
            queue.push(rec.workload)
        else:
            queue.park(rec.workload.name)
        result.pending.append(Pending(rec.workload.name, e.cq.name, rec.reason, rec.message))

    def has_heads(self) -> bool:
        """Whether an active queue has a workload to offer the next cycle, not counting workloads
        rejected twice in a row since the snapshot last changed: Kueue retries them in every cycle,
        but they would be rejected again (the second attempt had no flavor-attempt state left)."""
        for n in self.snapshot.active:
            queue = self.queues[n]
            offered = queue.heads + len(queue.rejected)
            if offered and self._rejecting:
                spinning = [
                    name
                    for name in self._rejecting
                    if (queue.where.get(name) == "heap" or name in queue.rejected) and self._spinning(name)
                ]
                offered -= len(spinning)
                if len(spinning) >= 2 and self._blocked(queue):
                    continue
            if offered > 0:
                return True
        return False

    def _blocked(self, queue: _Queue) -> bool:
        """Whether the two workloads that head ``queue`` by its order are both spinning: each cycle
        pops the better of them that was not rejected in the cycle before, so they take turns and the
        workloads behind them are never tried (in Kueue as here) until the snapshot changes."""
        order = [entry for entry in queue.heap if queue.where.get(entry[3]) == "heap"]
        for name in queue.rejected:
            wl = self.records[name].workload
            order.append((-wl.priority, wl.created, wl.key, wl.name))
        if queue.sticky and queue.where.get(queue.sticky) == "heap":
            return False  # a preemptor heads it first, whatever the order
        best = heapq.nsmallest(2, order)
        return len(best) == 2 and all(self._spinning(entry[3]) for entry in best)

    def _spinning(self, name: str) -> bool:
        """Rejected twice in a row since the snapshot last changed."""
        rejection = self.records[name].rejected
        return rejection is not None and rejection[0] == self.changes and rejection[1] >= 2

    def fire_requeues(self, now: float | None = None) -> bool:
        """Move back the inadmissible workloads whose requeue is due by ``now`` (all when None)."""
        due = [n for n, t in self._requeue_due.items() if now is None or t <= now]
        for n in due:
            del self._requeue_due[n]
        self._requeue(due)
        return bool(due)

    def settle(self, now: float, max_cycles: int = 100_000) -> list[CycleResult]:
        """Cycles until no queue has a head and no requeue is waiting (the batch period is taken to
        elapse whenever the heaps are empty, as Kueue's cycles take milliseconds)."""
        results: list[CycleResult] = []
        for _ in range(max_cycles):
            if self.has_heads():
                results.append(self.cycle(now))
                if self._livelock(results):
                    return results
            elif not self.fire_requeues():
                return results
        raise RuntimeError(f"not settled after {max_cycles} cycles")

    def advance(self, now: float, max_cycles: int = 100_000) -> list[CycleResult]:
        """Fire the requeues due by ``now``, then cycle while there are heads (time-driven runs)."""
        self.fire_requeues(now)
        results: list[CycleResult] = []
        for _ in range(max_cycles):
            if not self.has_heads():
                return results
            results.append(self.cycle(now))
            if self._livelock(results):
                return results
        raise RuntimeError(f"not settled after {max_cycles} cycles")

    def _livelock(self, results: Sequence[CycleResult]) -> bool:
        """Whether the last cycles repeat, twice over, a sequence with an eviction or an admission the
        API server rejected: a group that preempts, is then placed on no domain and rejected, its victim
        readmitted, and again (Kueue v0.17.0's group faults). Kueue goes on so for as long as nothing
        changes, evicting the victim each time; the model stops at the end of the repeat, at the same
        time (no cycle takes any), and names the workloads caught in it in :attr:`livelocked`."""
        n = len(results)
        for period in range(1, min(LIVELOCK_PERIOD, n // 2) + 1):
            last = results[n - period :]
            if not any(r.evicted or any(p.rejected for p in r.pending) for r in last):
                continue
            if [_signature(r) for r in last] == [_signature(r) for r in results[n - 2 * period : n - period]]:
                self.livelocked = {e.name for r in last for e in r.evicted} | {
                    p.name for r in last for p in r.pending if p.rejected
                }
                return True
        return False

    def next_requeue(self) -> float | None:
        return min(self._requeue_due.values(), default=None)

    # -- views -------------------------------------------------------------------------------------
    def admitted(self) -> dict[str, Admitted]:
        return {n: r.admitted for n, r in sorted(self.records.items()) if r.admitted is not None}

    def pending(self) -> dict[str, Pending]:
        return {
            n: Pending(n, r.workload.cluster_queue, r.reason, r.message, r.rejected is not None)
            for n, r in sorted(self.records.items())
            if r.admitted is None
        }


LIVELOCK_PERIOD = 8  # the longest repeating sequence of cycles :meth:`Cluster._livelock` looks for


def _signature(r: CycleResult) -> tuple[Any, ...]:
    """What a cycle did, to compare cycles: who was admitted, who pends with which status, who was
    evicted by whom."""
    return (
        tuple(a.workload.name for a in r.admitted),
        tuple((p.name, p.reason, p.message, p.rejected) for p in r.pending),
        tuple((e.name, e.by) for e in r.evicted),
    )


def api_rejects(admitted: Admitted) -> bool:
    """Whether the API server rejects this admission: a pod set placed on no domain. Kueue v0.17.0
    writes such a ``topologyAssignment`` with no slice (``singleCompactSliceEncoding``: an empty
    list, which ``omitempty`` leaves out) and the Workload CRD requires ``slices``: "Workload ... is
    invalid: [status.admission.podSetAssignments[0].topologyAssignment.slices: Required value, ...]"."""
    return any(ps.topology is not None and not ps.topology.domains for ps in admitted.pod_sets)


def _path(snap: Snapshot, cq: str) -> str:
    """``buildCQPath``: ``/<cohort>/<queue>``."""
    cohort = snap.queues[cq].cohort
    return f"/{cohort}/{cq}" if cohort else f"/{cq}"


def heads_of(cluster: Cluster) -> Sequence[str]:
    """The workloads each active queue would offer next (for tests)."""
    out = []
    for name in sorted(cluster.queues):
        q = cluster.queues[name]
        if name in cluster.snapshot.active and q.has_heads():
            best = min(
                (cluster.records[n].workload for n, w in q.where.items() if w == "heap"),
                key=lambda wl: (wl.name != q.sticky, -wl.priority, wl.created, wl.key),
            )
            out.append(best.name)
    return out
