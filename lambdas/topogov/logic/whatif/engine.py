"""Replay a job trace on a fleet under a policy, with a virtual clock, on the Kueue model (pure).

The simulation is the service's own path, end to end, with time made up:

1. **Submission**: each trace job becomes the ``POST /v1/jobs`` body it would be
   (:func:`~topogov.logic.whatif.inputs.as_request`) and goes through the API's decision
   (:func:`topogov.logic.admission.decide`: team, priority class, never-admissible, the ``auto``
   level from the fleet's capacity at that moment, ``required`` feasibility and ``fallbackAfter``);
   a refusal is recorded with the API's message. The team's in-flight cap is then checked as the
   ledger checks it (``adapters/ledger.py``, ``reserve``: every governed resource, charge + in
   flight <= cap).
2. **Kueue**: the decision becomes a Workload (priority = the class's value, the pod set's topology
   request from the annotation the API writes) in the team's ClusterQueue, on the very objects the
   governor renders for this policy and fleet (:func:`topogov.domain.kueue.render`, read back by
   :mod:`topogov.domain.kueue_model.convert`). :class:`topogov.domain.kueue_model.Cluster` admits,
   places and preempts as Kueue v0.17.0 does; cycles take no virtual time (see docs/data-scientists.md's
   agreement figures for what that leaves out).
3. **Running**: an admitted job runs ``duration_s`` times the penalty of its placement
   (:class:`Penalty`; none unless given), then finishes; a preempted job starts over when admitted
   again (a Job's pods are restarted).
4. **The reconcile pass** runs every ``pass_interval_s`` (the deployed schedule: 5 minutes): a
   ``required`` job still pending past its ``fallbackAfter`` is relaxed to ``preferred`` at that
   pass, as ``logic/ledger_sync.fall_back`` does (its Workload is replaced by one preferring the same
   level, with its creation time, so its place in the queue is kept).

Assumptions (also in docs/architecture.md, "Assumptions"): no fair sharing (Kueue's Configuration
default, as the local cluster runs it); nodes never fail; a job's run time does not depend on its
neighbours; the in-flight charge is released when the job ends (the pass releases it within 5
minutes in the service).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from topogov.domain.errors import Refusal
from topogov.domain.jobs import GROUP_NAME
from topogov.domain.kinds import BATCH_JOB, PYTORCH_JOB
from topogov.domain.kueue import cluster_queue_name, flavors_from_nodes, render
from topogov.domain.kueue_model import Cluster, PodSet, TopologyRequest, Workload, requests_from
from topogov.domain.kueue_model.convert import nodes_of, objects_of
from topogov.domain.labels import INSTANCE_TYPE_LABEL
from topogov.domain.placement import CapacityIndex, tightest_level
from topogov.domain.policy import Caller, Policy
from topogov.domain.quantity import (
    CPU,
    EFA,
    GPU,
    MEMORY,
    Resources,
    over_cap,
    over_cap_message,
    resources_from,
)
from topogov.domain.render import requests_from as job_requests
from topogov.domain.tree import NodeCapacity
from topogov.logic.admission import Admission, decide
from topogov.logic.whatif.inputs import TraceJob, as_request

PASS_INTERVAL_S = 300.0  # the reconcile schedule (infra: rate(5 minutes))
TOPOGOV_FALLBACK_S = 600.0  # the "topogov" regime's fallbackAfter
# 256-GPU job, ms per step: 412 inside one network node, 631 first-fit, 905 split (the mission's
# published example; see docs/benchmarks.md, "Do Topogov's decisions help?")
STEP_MS = {"inside": 412.0, "adjacent": 631.0, "split": 905.0}

REGIMES: dict[str, str] = {
    "as-submitted": "each job's topology as the trace gives it",
    "plain-kueue": "no topology annotation: Kueue places the pods where they fit",
    "preferred": "every job preferred at the tightest level that holds it (auto)",
    "required": "every multi-node job required at the tightest level that can hold it",
    "topogov": "multi-node jobs required at the tightest level, preferred after 10 min; others auto",
}


# the kinds a trace row may be (inputs.TRACE_KINDS): the simulated cluster serves them
TRACE_SERVED = frozenset({BATCH_JOB.kind, PYTORCH_JOB.kind})


@dataclass(frozen=True, slots=True)
class Penalty:
    """A job's run time, relative to all its pods inside one bottom-layer network node: ``adjacent``
    when they span bottom nodes of one layer above, ``split`` when farther apart."""

    inside: float = 1.0
    adjacent: float = STEP_MS["adjacent"] / STEP_MS["inside"]
    split: float = STEP_MS["split"] / STEP_MS["inside"]

    def factor(self, spread: int) -> float:
        return self.inside if spread <= 0 else self.adjacent if spread == 1 else self.split

    def scaled(self, s: float) -> Penalty:
        """The excess over ``inside`` times ``s`` (0: no penalty, 1: as given)."""
        return Penalty(self.inside, 1 + s * (self.adjacent - 1), 1 + s * (self.split - 1))


NO_PENALTY = Penalty(1.0, 1.0, 1.0)


@dataclass(slots=True)
class JobRun:
    """What became of one trace job."""

    name: str
    team: str
    submit_s: float
    gpus: int
    pods: int
    duration_s: float  # the trace's (inside one network node)
    mode: str = "none"  # the topology the API decided
    level: str | None = None
    refused: str | None = None
    start_s: float | None = None  # first admission
    last_start_s: float | None = None
    end_s: float | None = None
    nodes: tuple[str, ...] = ()  # the hosts of its (last) run, one per pod by completion index
    spread: int | None = None  # 0 inside one bottom network node, 1 one layer up, 2 farther
    shared_layers: int = 0  # how many layers (from layer 1) all its hosts share
    preemptions: int = 0
    fallback_s: float | None = None
    runs: int = 0

    @property
    def wait_s(self) -> float | None:
        return None if self.start_s is None else self.start_s - self.submit_s

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "team": self.team,
            "submit_s": self.submit_s,
            "start_s": self.start_s,
            "end_s": self.end_s,
            "nodes": sorted(set(self.nodes)),
            "mode": self.mode,
            "level": self.level,
            "refused": self.refused,
            "preemptions": self.preemptions,
            "fallback_s": self.fallback_s,
        }


@dataclass(slots=True)
class Timeline:
    """Time integrals, from the first submission to the last event."""

    start_s: float = 0.0
    end_s: float = 0.0
    gpu_s: dict[str, float] = field(default_factory=dict)  # per team: GPU-seconds held
    borrowed_gpu_s: dict[str, float] = field(default_factory=dict)  # above the team's nominal quota
    free_domains_s: float = 0.0  # integral of the number of wholly free bottom network nodes
    free_domains_min: int = 0
    window_end_s: float = 0.0  # the last submission: the figures "while jobs arrive" end there
    window_gpu_s: float = 0.0  # GPU-seconds held within the window
    window_useful_gpu_s: float = 0.0  # of finished runs, GPUs x their trace duration, within the window


@dataclass(slots=True)
class Run:
    """One scenario's simulation."""

    name: str
    regime: str
    jobs: list[JobRun]
    timeline: Timeline
    fleet_gpus: int
    bottom_domains: int
    quota_gpus: dict[str, int]
    cycles: int = 0


def caller_for(policy: Policy, team: str) -> str:
    """An ARN that the team's first principal pattern matches (the simulation authenticates no one)."""
    pattern = policy.teams[team].principals[0]
    return pattern.replace("*", "simulated").replace("?", "x")


def _spread(hosts: Sequence[str], paths: Mapping[str, tuple[str, ...]]) -> tuple[int, int]:
    """(spread, shared layers) of a placement: see :attr:`JobRun.spread`."""
    distinct = sorted(set(hosts))
    first = paths[distinct[0]]
    depth = len(first)
    shared = depth
    for h in distinct[1:]:
        p = paths[h]
        k = 0
        while k < min(shared, len(p)) and p[k] == first[k]:
            k += 1
        shared = k
    if len(distinct) == 1:
        return 0, depth
    return max(0, depth - shared), shared


class Simulation:
    """The state of one replay; :func:`simulate` runs it."""

    def __init__(
        self,
        nodes: Sequence[NodeCapacity],
        policy: Policy,
        *,
        regime: str = "as-submitted",
        penalty: Penalty = NO_PENALTY,
        pass_interval_s: float = PASS_INTERVAL_S,
        fallback_after_s: float = TOPOGOV_FALLBACK_S,
        release_lag_s: float = 0.0,
    ) -> None:
        if regime not in REGIMES:
            raise ValueError(f"regime must be one of {', '.join(REGIMES)}, got {regime!r}")
        self.policy, self.regime, self.penalty = policy, regime, penalty
        self.pass_interval_s, self.fallback_after_s = pass_interval_s, fallback_after_s
        self.release_lag_s = release_lag_s  # admission to pods running, and the end to quota released
        self.nodes = {n.name: n for n in nodes}
        self.paths = {n.name: n.path for n in nodes}
        objects = render(policy, flavors_from_nodes(nodes), api_version="v1beta2")
        topologies, flavors, queues, _ = objects_of(objects)
        model_nodes, busy = nodes_of(nodes)
        self.cluster = Cluster(
            nodes=model_nodes,
            flavors=flavors,
            topologies=topologies,
            cluster_queues=queues,
            non_tas_pods=busy,
        )
        self.static_index = CapacityIndex(nodes)
        self.live = CapacityIndex(nodes)
        self.used: dict[str, Resources] = {}  # node -> what admitted pods request
        self.bottom = {n.name: (n.instance_type, n.path) for n in nodes if n.path}
        self.domain_busy: dict[tuple[str, tuple[str, ...]], int] = {d: 0 for d in self.bottom.values()}
        self.free_domains = len(self.domain_busy)
        self.jobs: dict[str, JobRun] = {}
        self.trace: dict[str, TraceJob] = {}
        self.workloads: dict[str, Workload] = {}
        self.in_flight: dict[str, Resources] = {t: Resources() for t in policy.teams}
        self.charge: dict[str, Resources] = {}
        self.team_gpus: dict[str, int] = {t: 0 for t in policy.teams}
        self.quota = {t: self.policy.teams[t].quota_resources.gpu for t in policy.teams}
        self.timeline = Timeline()
        self.events: list[tuple[float, int, str, Any]] = []
        self.seq = 0
        self.now = 0.0
        self.cycles = 0
        self._memo: dict[tuple[Any, ...], Any] = {}
        self.callers = {t: caller_for(policy, t) for t in policy.teams}

    # -- the clock -----------------------------------------------------------------------------------
    def push(self, t: float, kind: str, arg: Any) -> None:
        heapq.heappush(self.events, (t, self.seq, kind, arg))
        self.seq += 1

    def _advance_clock(self, t: float) -> None:
        dt = t - self.now
        if dt > 0:
            tl = self.timeline
            for team, gpus in self.team_gpus.items():
                if gpus:
                    tl.gpu_s[team] = tl.gpu_s.get(team, 0.0) + gpus * dt
                    over = gpus - self.quota[team]
                    if over > 0:
                        tl.borrowed_gpu_s[team] = tl.borrowed_gpu_s.get(team, 0.0) + over * dt
            tl.free_domains_s += self.free_domains * dt
            inside = max(0.0, min(t, tl.window_end_s) - self.now)
            if inside:
                tl.window_gpu_s += sum(self.team_gpus.values()) * inside
        self.now = t

    # -- submission (the API) ------------------------------------------------------------------------
    def _topology(self, job: TraceJob) -> tuple[str, str | None, float | None]:
        """The topology the regime submits: (mode, level, fallbackAfter)."""
        if self.regime == "as-submitted":
            return job.topology_mode, job.topology_level, job.fallback_after_s
        if self.regime == "plain-kueue":
            return "none", None, None
        if self.regime == "preferred" or job.pods == 1:
            return "auto", None, None
        level = self._ever_level(job)
        if level is None:
            return "auto", None, None
        return "required", level, (self.fallback_after_s if self.regime == "topogov" else None)

    def _ever_level(self, job: TraceJob) -> str | None:
        key = ("level", job.pods, job.gpus_per_pod, job.instance_type)
        if key not in self._memo:
            req = as_request(job, spec_mode="none")
            per_pod = resources_from(job_requests(req.accelerators, req.vcpu, req.memory, req.efa))
            choice = tightest_level(
                self.static_index, per_pod, job.pods, instance_type=job.instance_type, bases=("allocatable",)
            )
            self._memo[key] = choice.level
        level: str | None = self._memo[key]
        return level

    def index(self) -> CapacityIndex:
        """The capacity index as the snapshot would show it now (kept up to date node by node)."""
        return self.live

    def submit(self, job: TraceJob) -> None:
        """``POST /v1/jobs``: the API's decision, the in-flight charge, then the Workload."""
        key = f"{job.team}/{job.name}"
        run = self.jobs[key] = JobRun(
            job.name, job.team, job.submit_s, job.pods * job.gpus_per_pod, job.pods, job.duration_s
        )
        self.trace[key] = job
        admission = self._decide(job, run)
        if admission is None:
            return
        charge, cap = admission.charge, admission.cap
        over = over_cap(self.in_flight[job.team], charge, cap)
        if over:
            run.refused = over_cap_message(job.team, over)
            return
        self.in_flight[job.team] = self.in_flight[job.team] + charge
        self.charge[key] = charge
        topo = admission.decision.topology
        run.mode, run.level = topo.mode, topo.level
        self._enqueue(key, job, admission)
        if topo.mode == "required" and topo.fallback_after_s:
            due = job.submit_s + topo.fallback_after_s
            every = self.pass_interval_s
            self.push(math.ceil(due / every) * every if every else due, "fallback", key)

    def _decide(self, job: TraceJob, run: JobRun) -> Admission | None:
        """The API's decision for the regime's topology, or None with the refusal on ``run``."""
        mode, level, fallback = self._topology(job)
        try:
            req = as_request(job, spec_mode=mode, level=level, fallback_after_s=fallback)
            caller = self.callers.get(job.team, "")
            return decide(
                req, caller=Caller.of(caller), policy=self.policy, index=self.index, where_now=False,
                served=TRACE_SERVED,
            )  # fmt: skip
        except Refusal as exc:
            run.refused = exc.message
        except ValueError as exc:  # a trace row the API's validation refuses
            run.refused = str(exc).splitlines()[0]
        return None

    def _enqueue(self, key: str, job: TraceJob, admission: Admission) -> None:
        """The Workload Kueue makes of the Job the API creates, into the team's ClusterQueue."""
        topo = admission.decision.topology
        request = (
            TopologyRequest(required=topo.level) if topo.mode == "required"
            else TopologyRequest(preferred=topo.level) if topo.mode == "preferred"
            else None
        )  # fmt: skip
        if request is not None and topo.slice_level and topo.slice_size:  # its pod-set slices, as written
            request = replace(request, slice_level=topo.slice_level, slice_size=topo.slice_size)
        selector = {INSTANCE_TYPE_LABEL: job.instance_type} if job.instance_type else {}
        shape = admission.shape
        group = GROUP_NAME if shape.grouped and request is not None and not topo.slice_level else None
        pod_sets = tuple(
            PodSet(
                ps.count,
                requests_from(ps.per_pod),
                ps.name,
                replace(request, group=group) if request is not None else None,
                selector,
            )
            for ps in shape.pod_sets
        ) or (PodSet(job.pods, requests_from(shape.per_pod), topology=request, node_selector=selector),)
        queue = cluster_queue_name(self.policy.teams[job.team])
        wl = Workload(key, queue, pod_sets, admission.decision.priority_value, self.now, key)
        self.workloads[key] = wl
        self.cluster.submit(wl)

    def fall_back(self, name: str) -> None:
        """``ledger_sync.fall_back`` at a pass: still pending -> its Workload prefers the level."""
        run = self.jobs[name]
        wl = self.workloads.get(name)
        if wl is None or run.end_s is not None or self._holds(name) or run.fallback_s is not None:
            return
        relaxed = replace(
            wl,
            pod_sets=tuple(
                replace(ps, topology=replace(ps.topology, required=None, preferred=ps.topology.required))
                if ps.topology is not None and ps.topology.required is not None
                else ps
                for ps in wl.pod_sets
            ),
        )
        self.cluster.cancel(name, self.now)
        self.cluster.submit(relaxed)
        self.workloads[name] = relaxed
        run.fallback_s, run.mode = self.now, "preferred"

    # -- running ------------------------------------------------------------------------------------
    def _holds(self, name: str) -> bool:
        record = self.cluster.records.get(name)
        return record is not None and record.admitted is not None

    def _hold(self, name: str, hosts: Sequence[str], sign: int) -> None:
        wl = self.workloads[name]
        per_pod = wl.pod_sets[0].requests
        pod = Resources(
            gpu=per_pod.get(GPU, 0),
            efa=per_pod.get(EFA, 0),
            cpu_m=per_pod.get(CPU, 0),
            memory=per_pod.get(MEMORY, 0),
        )
        for h in hosts:
            self.used[h] = self.used.get(h, Resources()) + pod if sign > 0 else self.used[h] - pod
            self.live.update(replace(self.nodes[h], requested=self.nodes[h].requested + self.used[h]))
            key = self.bottom.get(h)
            if key is not None and pod.gpu:
                before = self.domain_busy[key]
                after = self.domain_busy[key] = before + sign * pod.gpu
                self.free_domains += (before > 0 and after == 0) - (before == 0 and after > 0)
        self.team_gpus[self.jobs[name].team] += sign * pod.gpu * len(hosts)

    def admitted(self, name: str, hosts: tuple[str, ...]) -> None:
        run = self.jobs[name]
        run.runs += 1
        if run.start_s is None:
            run.start_s = self.now
        run.last_start_s, run.nodes = self.now, hosts
        if hosts:
            run.spread, run.shared_layers = _spread(hosts, self.paths)
        self._hold(name, hosts, 1)
        factor = self.penalty.factor(run.spread or 0)
        self.push(self.now + run.duration_s * factor + self.release_lag_s, "finish", (name, run.runs))

    def evicted(self, name: str) -> None:
        run = self.jobs[name]
        run.preemptions += 1
        self._hold(name, run.nodes, -1)

    def finish(self, name: str, run_no: int) -> None:
        run = self.jobs[name]
        if run.runs != run_no or run.end_s is not None or not self._holds(name):
            return  # preempted since this run started
        self.cluster.finish(name, self.now)
        self._hold(name, run.nodes, -1)
        run.end_s = self.now
        assert run.last_start_s is not None
        tl = self.timeline
        overlap = max(0.0, min(self.now, tl.window_end_s) - max(run.last_start_s, tl.start_s))
        if self.now > run.last_start_s:  # the run's useful work, spread over its (penalised) run time
            tl.window_useful_gpu_s += run.gpus * run.duration_s * overlap / (self.now - run.last_start_s)
        self.in_flight[run.team] = self.in_flight[run.team] - self.charge.pop(name)

    # -- the loop ----------------------------------------------------------------------------------
    def run(self, trace: Sequence[TraceJob], name: str = "baseline") -> Run:
        for job in trace:
            self.push(job.submit_s, "submit", job)
        if trace:
            self.now = self.timeline.start_s = min(j.submit_s for j in trace)
            self.timeline.window_end_s = max(j.submit_s for j in trace)
        self.timeline.free_domains_min = self.free_domains
        last_change = self.now
        while self.events or self.cluster.next_requeue() is not None:
            due = self.cluster.next_requeue()
            t = min(self.events[0][0] if self.events else math.inf, math.inf if due is None else due)
            self._advance_clock(t)
            if self._step(t):
                last_change = t
            self.timeline.free_domains_min = min(self.timeline.free_domains_min, self.free_domains)
        # the span ends with the last submission, start, eviction or end, not with a requeue that
        # found nothing to admit (held constant since: only the free domains can be non-zero)
        self.timeline.free_domains_s -= (self.now - last_change) * self.free_domains
        self.timeline.end_s = self.now = last_change
        gpus = sum(n.allocatable.gpu for n in self.nodes.values())
        jobs = list(self.jobs.values())
        return Run(
            name, self.regime, jobs, self.timeline, gpus, len(self.domain_busy), dict(self.quota), self.cycles
        )

    def _step(self, t: float) -> bool:
        """The events due at ``t``, then Kueue's cycles; whether anything happened."""
        changed = bool(self.events) and self.events[0][0] <= t
        while self.events and self.events[0][0] <= t:
            _, _, kind, arg = heapq.heappop(self.events)
            if kind == "submit":
                self.submit(arg)
            elif kind == "finish":
                self.finish(*arg)
            else:
                self.fall_back(arg)
        for result in self.cluster.advance(t):
            self.cycles += 1
            changed = changed or bool(result.admitted or result.evicted)
            for ev in result.evicted:
                self.evicted(ev.name)
            for adm in result.admitted:
                self.admitted(adm.name, tuple(h for ps in adm.pod_sets for h in ps.pods))
        return changed


def simulate(
    trace: Sequence[TraceJob],
    nodes: Sequence[NodeCapacity],
    policy: Policy,
    *,
    name: str = "baseline",
    regime: str = "as-submitted",
    penalty: Penalty = NO_PENALTY,
    pass_interval_s: float = PASS_INTERVAL_S,
    fallback_after_s: float = TOPOGOV_FALLBACK_S,
    release_lag_s: float = 0.0,
) -> Run:
    """Replay ``trace`` on ``nodes`` under ``policy`` (see the module docstring)."""
    sim = Simulation(
        nodes, policy, regime=regime, penalty=penalty, pass_interval_s=pass_interval_s,
        fallback_after_s=fallback_after_s, release_lag_s=release_lag_s,
    )  # fmt: skip
    return sim.run(trace, name)
