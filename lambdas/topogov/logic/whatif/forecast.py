"""When will a pending job start? The Kueue model run forward from now (pure).

The cluster as it is now — the snapshot's nodes, the Kueue objects the governor renders for the
policy, every Workload holding quota with its recorded admission (flavors, usage, topology
assignment) and every pending Workload with its priority and creation time — goes into
:class:`topogov.domain.kueue_model.Cluster`. Then the virtual clock runs: each running job ends at
its expected end, each job the model admits runs for its expected length, a ``required`` job still
pending at its ``fallbackAfter`` is relaxed to ``preferred`` (as the reconcile pass does), and Kueue's
cycles admit, place and preempt as v0.17.0 would. A pending job's estimate is the virtual time the
model admits it, the nodes it gets, the jobs whose end freed them ("waits for") and the jobs its
admission preempts.

**Never a promise.** It assumes no new arrivals, that every job runs for its expected length (a job
already past it is taken to end now), and that nodes neither fail nor join. A job with no expected
length is taken to run past the horizon: an estimate that depends on its end is None, and the
answer names it. Expected lengths are the caller's (:class:`Expected`: the submission's
``expected_duration``, the Job's ``activeDeadlineSeconds`` as an upper bound, or the team's observed
median for jobs of that size); the answer carries the basis of each.

:func:`alternatives` answers "could it start now another way?": the same job required at each looser
level, then preferred at its own level, tried on the cluster as it is now (one admission pass each).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from topogov.domain.kueue import flavors_from_nodes, render
from topogov.domain.kueue_model import Cluster, PodSetAdmission, TopologyRequest, Workload
from topogov.domain.kueue_model.convert import nodes_of, objects_of
from topogov.domain.labels import layer_label, layer_of
from topogov.domain.policy import Policy
from topogov.domain.quantity import CPU, EFA, GPU, MEMORY, Resources
from topogov.domain.tree import NodeCapacity

HORIZON_S = 14 * 24 * 3600.0  # an estimate further out than two weeks is "not within the horizon"
ASSUMES = (
    "no new submissions; every job runs for its expected length (one past it ends now); "
    "nodes neither fail nor join"
)


@dataclass(frozen=True, slots=True)
class Expected:
    """How long a job is expected to run, and what says so."""

    seconds: float | None
    basis: str  # "expected_duration", "activeDeadlineSeconds", "team median (...)" or "unknown"


UNKNOWN = Expected(None, "unknown")


@dataclass(frozen=True, slots=True)
class Running:
    """A Workload holding quota: its recorded admission, when it started (seconds from now, <= 0)."""

    workload: Workload
    pod_sets: tuple[PodSetAdmission, ...]
    started_s: float
    expected: Expected = UNKNOWN


@dataclass(frozen=True, slots=True)
class Queued:
    """A pending Workload; ``fallback_s``: when (seconds from now) the pass relaxes it to preferred."""

    workload: Workload
    expected: Expected = UNKNOWN
    fallback_s: float | None = None


@dataclass(slots=True)
class Estimate:
    name: str
    start_s: float | None = None  # seconds from now; None: not within the horizon
    hosts: tuple[str, ...] = ()
    waits_for: tuple[str, ...] = ()  # the jobs whose end frees its place (or its quota)
    preempts: tuple[str, ...] = ()  # the jobs Kueue preempts to admit it
    unknown_ends: tuple[str, ...] = ()  # running jobs with no expected end, taken to run on
    relaxed: bool = False  # started only after its fallbackAfter relaxed it to preferred
    cut_short: bool = False  # the run was stopped (its time budget) before this job started
    age_s: float = 0.0  # how much earlier than asked the forecast was made (a kept run's)
    overdue: tuple[str, ...] = ()  # running jobs already past their expected end, taken to end now

    def to_json(self) -> dict[str, Any]:
        return {
            "start_in_s": None if self.start_s is None else round(self.start_s, 1),
            "nodes": list(self.hosts),
            "waits_for": list(self.waits_for),
            "preempts": list(self.preempts),
            "unknown_ends": list(self.unknown_ends),
            "overdue": list(self.overdue),
            "after_fallback": self.relaxed,
            "assumes": ASSUMES,
        }


@dataclass
class Model:
    """The model's static inputs for a fleet and policy (built once, reused for each run)."""

    nodes: Sequence[NodeCapacity]
    policy: Policy
    local_queues: dict[str, str] = field(default_factory=dict)  # namespace/LocalQueue -> ClusterQueue
    _objects: tuple[Any, ...] = ()

    def __post_init__(self) -> None:
        rendered = render(self.policy, flavors_from_nodes(self.nodes), api_version="v1beta2")
        topologies, flavors, queues, local = objects_of(rendered)
        self.local_queues = local
        self._objects = (topologies, flavors, queues)

    def cluster(self, running: Sequence[Running]) -> Cluster:
        """A model cluster with ``running`` admitted; each node's other pods are what the snapshot
        says it requests minus the running Workloads' pods on it (the snapshot counts both)."""
        topologies, flavors, queues = self._objects
        held: dict[str, Resources] = {}
        for r in running:
            for ps in r.pod_sets:
                if ps.topology is None or not ps.count:
                    continue
                u = ps.usage
                one = Resources(
                    gpu=u.get(GPU, 0) // ps.count,
                    efa=u.get(EFA, 0) // ps.count,
                    cpu_m=u.get(CPU, 0) // ps.count,
                    memory=u.get(MEMORY, 0) // ps.count,
                )
                for values, n in ps.topology.domains:
                    host = values[-1]
                    for _ in range(n):
                        held[host] = held.get(host, Resources()) + one
        others = [
            replace(n, requested=_minus(n.requested, held[n.name])) if n.name in held else n
            for n in self.nodes
        ]
        model_nodes, busy = nodes_of(others)
        cluster = Cluster(
            nodes=model_nodes,
            flavors=flavors,
            topologies=topologies,
            cluster_queues=queues,
            non_tas_pods=busy,
        )
        for r in running:
            cluster.add_admitted(r.workload, r.pod_sets, r.started_s)
        return cluster


def _minus(a: Resources, b: Resources) -> Resources:
    return Resources(
        gpu=max(0, a.gpu - b.gpu),
        efa=max(0, a.efa - b.efa),
        cpu_m=max(0, a.cpu_m - b.cpu_m),
        memory=max(0, a.memory - b.memory),
    )


def _hosts(pod_sets: Sequence[PodSetAdmission]) -> tuple[str, ...]:
    return tuple(h for ps in pod_sets for h in ps.pods)


def _host_set(pod_sets: Sequence[PodSetAdmission]) -> set[str]:
    """The hosts of ``_hosts``, read from the assignments' domains (one per host, not per pod)."""
    return {
        values[-1]
        for ps in pod_sets
        if ps.topology is not None
        for values, count in ps.topology.domains
        if count
    }


def _relaxed(wl: Workload) -> Workload | None:
    """``ledger_sync.fall_back``: every pod set's required level, preferred instead (a pod-set group
    stays one)."""
    if not any(ps.topology is not None and ps.topology.required is not None for ps in wl.pod_sets):
        return None
    return replace(wl, pod_sets=tuple(_prefer(ps.topology, ps) for ps in wl.pod_sets))


def _prefer(request: TopologyRequest | None, ps: Any) -> Any:
    if request is None or request.required is None:
        return ps
    return replace(ps, topology=replace(request, required=None, preferred=request.required))


def forecast(
    model: Model,
    running: Sequence[Running],
    queued: Sequence[Queued],
    *,
    targets: Collection[str] | None = None,
    horizon_s: float = HORIZON_S,
    stopped: Collection[str] = (),
    stop: Callable[[], bool] | None = None,
    now_s: float = 0.0,
) -> dict[str, Estimate]:
    """The estimate of each queued job (or of ``targets`` only: the run stops once they started);
    ``stopped``: ClusterQueues held (``stopPolicy``), which admit nothing; ``stop``: asked between
    steps, True ends the run (the caller's time budget) and the jobs not started yet are
    ``cut_short``. Times (starts, fallbacks, creation) are on the clock of ``now_s``; the estimates'
    are from ``now_s``."""
    cluster = model.cluster(running)
    for q in queued:
        cluster.submit(q.workload)
    run = _Forecast(cluster, running, queued, stopped, now_s, horizon_s)
    return run.until([q.workload.name for q in queued] if targets is None else targets, stop)


class Forecaster:
    """Forecasts for one model (snapshot and policy) from what a warm Lambda keeps between requests.

    **The cluster**: built once for a set of running jobs — each held admission and its start — and
    brought up to date when only the queued Workloads changed (the ones gone or changed cancelled,
    the new ones submitted, the queues' order made again: what a cluster built afresh from the same
    jobs holds); built again when a running job changed or after ``max_age_s``. A forecast runs on
    a copy, so the kept cluster stays as built.

    **The last run**: kept with the time it started from; a request at most ``fresh_s`` later, on
    the same cluster, expected lengths, fallbacks and held queues, is answered from it — continued
    until the asked jobs start — as of that time (``Estimate.age_s``), not run again.

    Either way an estimate is the one :func:`forecast` gives on the same jobs at the run's start
    (tests/unit/test_forecast_kept.py)."""

    def __init__(
        self,
        model: Model,
        *,
        max_age_s: float = 300.0,
        fresh_s: float = 10.0,
        on_build: Callable[[], None] | None = None,
    ) -> None:
        self.model = model
        self.max_age_s, self.fresh_s = max_age_s, fresh_s
        self.on_build = on_build  # called after each build: the kept cluster lives on from there
        self.builds = 0  # how many times the cluster was built
        self.runs = 0  # how many runs were started
        self._base: Cluster | None = None
        self._version = 0  # bumped by every change of the kept cluster
        self._built_at = -math.inf
        self._running: dict[str, tuple[Workload, tuple[PodSetAdmission, ...], float]] = {}
        self._queued: dict[str, Workload] = {}
        self._run: tuple[Hashable, _Forecast] | None = None

    def cluster(self, running: Sequence[Running], queued: Sequence[Queued], *, at: float) -> Cluster:
        """A copy of the kept cluster holding ``running`` and ``queued``; ``at``: the caller's clock
        (monotonic seconds), for the cluster's age."""
        return self._sync(running, queued, at).copy()

    def with_variant(
        self, running: Sequence[Running], queued: Sequence[Queued], variant: Workload, *, at: float
    ) -> Cluster:
        """:meth:`cluster` with ``variant`` in place of the queued job of its name: what bringing the
        kept cluster up to date with that queue does (the job cancelled, the variant submitted, the
        queues' order made again), done on the copy, so the kept cluster and run stay valid for the
        queue as it is (the alternatives of every single-job request would otherwise end them)."""
        cluster = self.cluster(running, queued, at=at)
        cluster.cancel(variant.name, 0.0)
        cluster.submit(variant)
        cluster.reorder_queues()
        cluster.forget_requeues()
        return cluster

    def _held(self, running: Sequence[Running]) -> bool:
        """Whether ``running`` is what the kept cluster holds (the same jobs, in the same order
        first: a warm service reads the same objects for the Workloads that did not change)."""
        kept = self._running
        if len(running) == len(kept) and all(
            r.workload is w and r.pod_sets is p and r.started_s == t
            for r, (w, p, t) in zip(running, kept.values(), strict=True)
        ):
            return True
        return {r.workload.name: (r.workload, r.pod_sets, r.started_s) for r in running} == kept

    def _sync(self, running: Sequence[Running], queued: Sequence[Queued], at: float) -> Cluster:
        if self._base is None or at - self._built_at > self.max_age_s or not self._held(running):
            held = {r.workload.name: (r.workload, r.pod_sets, r.started_s) for r in running}
            self._base, self._running, self._queued = self.model.cluster(running), held, {}
            self._built_at = at
            self._version += 1
            self.builds += 1
            if self.on_build is not None:
                self.on_build()
        base, want = self._base, {q.workload.name: q.workload for q in queued}
        changed = [name for name, wl in self._queued.items() if want.get(name) != wl]
        for name in changed:
            base.cancel(name, 0.0)
        added = [wl for name, wl in want.items() if self._queued.get(name) != wl]
        for wl in added:
            base.submit(wl)
        if changed or added:
            base.reorder_queues()
            base.forget_requeues()
            self._version += 1
        self._queued = want
        return base

    def forecast(
        self,
        running: Sequence[Running],
        queued: Sequence[Queued],
        *,
        at: float,
        targets: Collection[str] | None = None,
        horizon_s: float = HORIZON_S,
        stopped: Collection[str] = (),
        stop: Callable[[], bool] | None = None,
        now_s: float = 0.0,
    ) -> dict[str, Estimate]:
        """:func:`forecast` on a copy of the kept cluster, or from the kept run."""
        if targets is not None and not targets:
            return {}
        base = self._sync(running, queued, at)
        key = (
            self._version,
            frozenset(stopped),
            horizon_s,
            tuple(r.expected.seconds for r in running),
            tuple((q.expected.seconds, q.fallback_s) for q in queued),
        )
        kept = self._run
        if kept is None or kept[0] != key or not kept[1].now <= now_s <= kept[1].now + self.fresh_s:
            kept = self._run = (key, _Forecast(base.copy(), running, queued, stopped, now_s, horizon_s))
            self.runs += 1
        return kept[1].until([q.workload.name for q in queued] if targets is None else targets, stop, now_s)


class _Forecast:
    """One forecast run: the model's cluster on a virtual clock, driven by a heap of events (a
    running job's expected end, a queued job's ``fallbackAfter``) and by Kueue's own requeues; run
    until the jobs asked for started, and continued when later ones are asked."""

    def __init__(
        self,
        cluster: Cluster,
        running: Sequence[Running],
        queued: Sequence[Queued],
        stopped: Collection[str],
        now_s: float,
        horizon_s: float,
    ) -> None:
        """``cluster``: ``running`` admitted and ``queued`` submitted, nothing run yet."""
        self.cluster, self.now, self.horizon_s = cluster, now_s, horizon_s
        for cq in stopped:
            if cq in self.cluster.queues:
                self.cluster.set_stop_policy(cq, "Hold", now_s)
        self.out = {q.workload.name: Estimate(q.workload.name) for q in queued}
        self.expected = {q.workload.name: q.expected for q in queued}
        self.workloads = {q.workload.name: q.workload for q in queued}
        self.events: list[tuple[float, int, str, str]] = []
        self.pod_sets: dict[str, Sequence[PodSetAdmission]] = {}  # what each job holds (or last held)
        self.unknown: list[str] = []  # running jobs with no expected end
        self.overdue: list[str] = []  # running jobs past their expected end
        self.relaxed: set[str] = set()
        self.ended_on: dict[str, list[str]] = {}  # host -> the jobs that ended on it
        self.preempted: dict[str, set[str]] = {}  # preemptor -> the workloads it evicted
        self.t, self.first, self.done = now_s, True, False
        self._seed_running(running)
        for q in queued:
            if q.fallback_s is not None:
                self.events.append((max(now_s, q.fallback_s), len(self.events), "fallback", q.workload.name))
        heapq.heapify(self.events)  # as if pushed one by one: (time, sequence) is unique
        self.seq = len(self.events)

    def push(self, t: float, kind: str, name: str) -> None:
        heapq.heappush(self.events, (t, self.seq, kind, name))
        self.seq += 1

    def _seed_running(self, running: Sequence[Running]) -> None:
        """Each running job's expected end (now for one past it), or none when it has no length."""
        now, events, pod_sets, unknown, overdue = (
            self.now,
            self.events,
            self.pod_sets,
            self.unknown,
            self.overdue,
        )
        for r in running:
            name = r.workload.name
            pod_sets[name] = r.pod_sets
            seconds = r.expected.seconds
            if seconds is None:
                unknown.append(name)
                continue
            end = r.started_s + seconds
            if end < now:
                overdue.append(name)
                end = now
            events.append((end, len(events), "finish", name))

    def until(
        self, names: Collection[str], stop: Callable[[], bool] | None, now_s: float | None = None
    ) -> dict[str, Estimate]:
        """The estimates of ``names`` (queued jobs), the run continued until they started or it ends
        (nothing left to happen, or past the horizon); ``stop`` as :func:`forecast`'s. Asked at
        ``now_s`` (the run's start when None), the estimates are from then, at least 0 s, with the
        run's age."""
        pending = {n for n in names if n in self.out and self.out[n].start_s is None}
        cut = False
        while pending and not self.done:
            if stop is not None and stop():
                cut = True
                break
            self._step(pending)
        age = 0.0 if now_s is None else now_s - self.now
        out = {}
        for name in names:
            if name not in self.out:
                continue
            est = out[name] = replace(self.out[name], overdue=tuple(sorted(self.overdue)), age_s=age)
            if est.start_s is None:
                est.unknown_ends = tuple(sorted(self.unknown))
                est.cut_short = cut
            elif age:
                est.start_s = max(0.0, est.start_s - age)
        return out

    def _step(self, pending: set[str]) -> None:
        """The next time something happens: its events, then Kueue's cycles."""
        if not self.first:
            due = self.cluster.next_requeue()
            t = min(self.events[0][0] if self.events else math.inf, math.inf if due is None else due)
            if t == math.inf or t > self.now + self.horizon_s:
                self.done = True
                return
            self.t = t
        self.first = False
        t = self.t
        finished_now = self._fire(t)
        for result in self.cluster.advance(t):
            for e in result.evicted:  # Kueue evicts in one cycle, admits the preemptor in a later one
                self.preempted.setdefault(e.by, set()).add(e.name)
            for adm in result.admitted:
                self._admitted(adm.name, adm.pod_sets, t, finished_now, pending)

    def _fire(self, t: float) -> list[str]:
        """The events due by ``t``: expected ends finish their jobs; a fallback relaxes a job still
        waiting (required to preferred, as the ledger sync does). The jobs that finished now."""
        finished_now = []
        while self.events and self.events[0][0] <= t:
            _, _, kind, name = heapq.heappop(self.events)
            record = self.cluster.records.get(name)
            if kind == "finish" and record is not None and record.admitted is not None:
                self.cluster.finish(name, t)
                for host in _host_set(self.pod_sets.get(name, ())):
                    self.ended_on.setdefault(host, []).append(name)
                finished_now.append(name)
            elif kind == "fallback" and record is not None and record.admitted is None:
                wl = _relaxed(self.workloads[name])
                if wl is not None:
                    self.cluster.cancel(name, t)
                    self.cluster.submit(wl)
                    self.workloads[name] = wl
                    self.relaxed.add(name)
        return finished_now

    def _admitted(
        self,
        name: str,
        pod_sets: Sequence[PodSetAdmission],
        t: float,
        finished_now: list[str],
        pending: set[str],
    ) -> None:
        """A job admitted at ``t``: its estimate is made the first time (what it waited for: the
        jobs that ended on its nodes, else those that finished now); its expected end is
        scheduled."""
        self.pod_sets[name] = pod_sets
        est = self.out.get(name)
        if est is not None and est.start_s is None:
            hosts = _hosts(pod_sets)
            est.start_s, est.hosts = t - self.now, hosts
            est.preempts = tuple(sorted(self.preempted.get(name, ())))
            est.relaxed = name in self.relaxed
            if t > self.now:
                freed = {n for h in set(hosts) for n in self.ended_on.get(h, ())}
                est.waits_for = tuple(sorted(freed)) or tuple(sorted(finished_now))
        pending.discard(name)
        run = self.expected.get(name, UNKNOWN).seconds
        if run is not None:
            self.push(t + run, "finish", name)


def alternatives(
    model: Model,
    running: Sequence[Running],
    queued: Sequence[Queued],
    target: str,
    stopped: Collection[str] = (),
    *,
    now_s: float = 0.0,
    kept: Forecaster | None = None,
    at: float = 0.0,
) -> list[dict[str, Any]]:
    """Ways ``target`` could start now: required at each looser level (the nearest first), then
    preferred at its own level; each tried on the cluster as it is now (a copy of ``kept``'s, at
    ``at``, when given). A variant that would only start by preempting says so."""
    wl = next((q.workload for q in queued if q.workload.name == target), None)
    if wl is None or not wl.pod_sets or wl.pod_sets[0].topology is None:
        return []
    ps = wl.pod_sets[0]
    asked = ps.topology.required if ps.topology is not None else None
    layer = layer_of(asked) if asked else None
    variants: list[tuple[str, TopologyRequest]] = []
    if asked and layer is not None:
        variants += [
            (f"required {layer_label(n)}", TopologyRequest(required=layer_label(n)))
            for n in range(layer - 1, 0, -1)
        ]
        variants.append((f"preferred {asked}", TopologyRequest(preferred=asked)))
    out = []
    for label, request in variants:
        # every pod set that asked the level is varied alike (a pod-set group stays one)
        variant = replace(
            wl,
            pod_sets=tuple(
                replace(p, topology=replace(request, group=p.topology.group))
                if p.topology is not None and p.topology.required == asked
                else p
                for p in wl.pod_sets
            ),
        )
        others = [
            q if q.workload.name != target else replace(q, workload=variant, fallback_s=None) for q in queued
        ]
        if kept is not None:
            cluster = kept.with_variant(running, queued, variant, at=at)
        else:
            cluster = model.cluster(running)
            for q in others:
                cluster.submit(q.workload)
        for cq in stopped:
            if cq in cluster.queues:
                cluster.set_stop_policy(cq, "Hold", now_s)
        results = cluster.advance(now_s)
        adm = cluster.admitted().get(target)
        if adm is not None:
            evicted = sorted({e.name for r in results for e in r.evicted if e.by == target})
            out.append({"topology": label, "nodes": list(_hosts(adm.pod_sets)), "preempts": evicted})
            return out
    return out


def expected_from(
    declared_s: float | None, deadline_s: float | None, observed: Mapping[int, Sequence[float]], gpus: int
) -> Expected:
    """The best-founded expected length: the submission's ``expected_duration``, else the team's
    observed median for jobs of ``gpus`` GPUs (3 or more finished runs), else the Job's
    ``activeDeadlineSeconds`` (an upper bound: the Job is stopped then), else unknown."""
    if declared_s is not None:
        return Expected(declared_s, "expected_duration")
    runs = sorted(observed.get(gpus, ()))
    if len(runs) >= 3:
        mid = len(runs) // 2
        median = runs[mid] if len(runs) % 2 else (runs[mid - 1] + runs[mid]) / 2
        return Expected(median, f"the team's median of {len(runs)} finished {gpus}-GPU jobs")
    if deadline_s is not None:
        return Expected(deadline_s, "activeDeadlineSeconds")
    return UNKNOWN
