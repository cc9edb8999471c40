"""Start estimates for pending jobs, from the cluster as it is (the API's ``estimate`` use case).

Reads, per team namespace: the ledger's records (a job's ``expected_duration``, the run times of
finished jobs), the Jobs (``activeDeadlineSeconds``) and the Workloads (what holds quota, with its
recorded admission, and what waits, with its priority and creation time): three list calls per team.
With the snapshot's nodes and the policy it runs :func:`topogov.logic.whatif.forecast.forecast`.

What the answer rests on is in it: each involved job's expected-length basis, the assumptions
(:data:`~topogov.logic.whatif.forecast.ASSUMES`) and the age of the node data ("as of the pass
40 s ago").
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from topogov.domain.kueue_model import PodSetAdmission, Workload
from topogov.domain.kueue_model.convert import (
    admission_of,
    reserved_at,
    timestamp,
    workload_of,
    workload_state,
)
from topogov.domain.policy import Policy
from topogov.domain.submission import parse_duration
from topogov.domain.tree import NodeCapacity
from topogov.domain.views.batch import JobView
from topogov.domain.views.workload import WorkloadView
from topogov.logic.whatif.forecast import (
    ASSUMES,
    Estimate,
    Expected,
    Forecaster,
    Model,
    Queued,
    Running,
    alternatives,
    expected_from,
)

GPU = "nvidia.com/gpu"


class LedgerLister(Protocol):
    """What an estimate reads of the ledger: a team's live records and its recent run times by GPU
    count, never its released records (its cost grows with live jobs, not with history)."""

    def live(self, team: str) -> list[dict[str, Any]]: ...
    def runs(self, team: str) -> dict[int, list[float]]: ...


class ClusterLister(Protocol):
    def list_jobs(self, namespace: str) -> list[JobView]: ...
    def workloads(self, namespace: str) -> list[WorkloadView]: ...


def epoch(stamp: str | None) -> float | None:
    """An RFC 3339 time in epoch seconds; None when absent or unreadable."""
    try:
        return timestamp(stamp) if stamp else None
    except ValueError:
        return None


@dataclass
class Owner:
    team: str
    job: str  # the Job's name ('' for a Workload whose Job is gone)
    expected: Expected


@dataclass
class State:
    """The cluster now, as the model's inputs; ``owners`` maps a Workload key to its team and Job."""

    running: list[Running]
    queued: list[Queued]
    owners: dict[str, Owner]
    stopped: set[str]  # ClusterQueues whose pending Workloads say they are inactive (stopPolicy)

    def key_of(self, team: str, job: str) -> str | None:
        return next((k for k, o in self.owners.items() if o.team == team and o.job == job), None)


def _gpus(wl: Any) -> int:
    return sum(ps.count * ps.requests.get(GPU, 0) for ps in wl.pod_sets)


@dataclass(frozen=True)
class Read:
    """One Workload as the model reads it: its state, the model's Workload (None: not in one of the
    policy's queues), its admission and when it was reserved, and whether its queue is stopped."""

    state: str
    workload: Workload | None
    admission: tuple[PodSetAdmission, ...] = ()
    reserved_at: float = 0.0
    stopped: bool = False
    gpus: int = 0


def read_workload(obj: WorkloadView, local_queues: Mapping[str, str]) -> Read:
    state = workload_state(obj)
    if state == "finished":
        return Read(state, None)
    try:
        wl = workload_of(obj, local_queues)
    except KeyError:
        return Read(state, None)  # not in one of the policy's queues: not Topogov's to forecast
    except ValueError:
        return Read(state, None)  # a pod-set group with slices: no job makes one, the model refuses it
    if state == "admitted":
        return Read(state, wl, admission_of(obj), reserved_at(obj), gpus=_gpus(wl))
    reserved = obj.condition("QuotaReserved")
    stopped = reserved is not None and f"ClusterQueue {wl.cluster_queue} is inactive" in reserved.message
    return Read(state, wl, stopped=stopped, gpus=_gpus(wl))


@dataclass(frozen=True)
class _TeamRead:
    """One team's part of the state, with what it was read from (to tell whether it still holds)."""

    records: list[dict[str, Any]]
    observed: dict[int, list[float]]
    jobs: list[JobView]
    workloads: list[WorkloadView]
    local_queues: Mapping[str, str]
    reads: list[tuple[tuple[str, str], Read]]
    running: list[Running]
    queued: list[Queued]
    owners: dict[str, Owner]
    stopped: set[str]

    def holds(
        self,
        records: list[dict[str, Any]],
        observed: dict[int, list[float]],
        jobs: list[JobView],
        workloads: list[WorkloadView],
        local_queues: Mapping[str, str],
    ) -> bool:
        """Whether it was read from these: the same views (a warm adapter returns the very objects
        while their ``resourceVersion`` is unchanged) and records of equal content."""
        return (
            local_queues is self.local_queues
            and _same(jobs, self.jobs)
            and _same(workloads, self.workloads)
            and records == self.records
            and observed == self.observed
        )


def _same(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


class WorkloadCache:
    """The Workloads of the last listing as read, by UID and ``resourceVersion`` (the API server
    gives a changed object a new version): a warm service reads only the ones that changed, and the
    model's cluster kept (:class:`~topogov.logic.whatif.forecast.Forecaster`) finds the same objects.
    Each team's part of the state is kept too, and given again while it was read from the same
    Workload and Job views and equal ledger records."""

    def __init__(self) -> None:
        self._read: dict[tuple[str, str], Read] = {}
        self._next: dict[tuple[str, str], Read] = {}
        self.teams: dict[str, _TeamRead] = {}

    def read(self, obj: WorkloadView, local_queues: Mapping[str, str]) -> Read:
        key = (obj.uid, obj.resource_version)
        if not all(key):
            return read_workload(obj, local_queues)
        known = self._read.get(key) or self._next.get(key) or read_workload(obj, local_queues)
        self._next[key] = known
        return known

    def keep(self, reads: Iterable[tuple[tuple[str, str], Read]]) -> None:
        """Workloads of this listing read before (a team's part given again)."""
        self._next.update(reads)

    def listed(self) -> None:
        """A whole listing was read: what it did not hold is forgotten."""
        self._read, self._next = self._next, {}


def read_state(
    policy: Policy,
    model: Model,
    ledger: LedgerLister,
    cluster: ClusterLister,
    cache: WorkloadCache | None = None,
) -> State:
    """Every team namespace's Workloads as the model's running and queued jobs (times in epoch
    seconds), each with its expected length; ``cache``: the Workloads read before."""
    running, queued, owners, stopped = [], [], {}, set()
    cache = cache or WorkloadCache()
    for team_name, team in policy.teams.items():
        records = list(ledger.live(team_name))
        observed = ledger.runs(team_name)
        jobs = cluster.list_jobs(team.namespace)
        workloads = cluster.workloads(team.namespace)
        part = cache.teams.get(team_name)
        if part is not None and part.holds(records, observed, jobs, workloads, model.local_queues):
            cache.keep(part.reads)
        else:
            part = _read_team(team_name, records, observed, jobs, workloads, model.local_queues, cache)
            cache.teams[team_name] = part
        running += part.running
        queued += part.queued
        owners.update(part.owners)
        stopped |= part.stopped
    cache.listed()
    return State(running, queued, owners, stopped)


def _read_team(
    team_name: str,
    records_list: list[dict[str, Any]],
    observed: dict[int, list[float]],
    job_views: list[JobView],
    workload_views: list[WorkloadView],
    local_queues: Mapping[str, str],
    cache: WorkloadCache,
) -> _TeamRead:
    """One team's Workloads as the model's running and queued jobs, with their owners."""
    running, queued, owners, stopped, reads = [], [], {}, set(), []
    records = {r["name"]: r for r in records_list}
    jobs = {j.uid: j for j in job_views}
    for obj in workload_views:
        read = cache.read(obj, local_queues)
        if obj.uid and obj.resource_version:
            reads.append(((obj.uid, obj.resource_version), read))
        wl = read.workload
        if wl is None:
            continue
        job = jobs.get(wl.job_uid)
        job_name = job.name if job else ""
        record = records.get(job_name) or {}
        declared = ((record.get("request") or {}).get("expected_duration")) if record else None
        deadline = job.active_deadline_s if job else None
        expected = expected_from(
            None if declared is None else float(_seconds(declared)),
            None if deadline is None else float(deadline),
            observed,
            read.gpus,
        )
        # a Workload whose Job is gone (deleted, its Workload not yet collected) is named itself
        owners[wl.name] = Owner(team_name, job_name or f"(Workload {obj.name})", expected)
        if read.state == "admitted":
            running.append(Running(wl, read.admission, read.reserved_at, expected))
        else:
            queued.append(Queued(wl, expected, _fallback_s(record)))
            if read.stopped:
                stopped.add(wl.cluster_queue)
    return _TeamRead(
        records_list,
        observed,
        job_views,
        workload_views,
        local_queues,
        reads,
        running,
        queued,
        owners,
        stopped,
    )


@functools.lru_cache(maxsize=65536)
def _seconds(duration: str) -> int:
    """``parse_duration``, once per distinct text (a ledger's few thousand expected durations)."""
    return parse_duration(duration)


def _fallback_s(record: Mapping[str, Any]) -> float | None:
    """When the reconcile pass relaxes a pending required job (its ``fallbackAfter`` after the
    submission; within one pass of it), epoch seconds; None when it has none or was relaxed."""
    topo = (record.get("decision") or {}).get("topology") or {}
    after, submitted = topo.get("fallback_after_s"), epoch(record.get("submitted_at"))
    if topo.get("mode") != "required" or not after or submitted is None or record.get("fallback"):
        return None
    return submitted + float(after)


def common_domain(hosts: Iterable[str], nodes: Mapping[str, NodeCapacity]) -> dict[str, Any] | None:
    """The deepest network node holding every host, and its layer (None when they share none)."""
    paths = [nodes[h].path for h in hosts if h in nodes]
    if not paths:
        return None
    shared: tuple[str, ...] = ()
    for level in zip(*paths, strict=False):
        if len(set(level)) != 1:
            break
        shared = (*shared, level[0])
    if not shared:
        return None
    return {"layer": len(shared), "domain": shared[-1]}


def when(est: Estimate, state: State, *, now_s: float) -> dict[str, Any]:
    """When the job starts, as the job list shows it (the first keys of :func:`describe`): seconds
    from now and the UTC time, and the error of a run cut short."""
    start_at = None
    if est.start_s is not None:
        start_at = dt.datetime.fromtimestamp(now_s + est.start_s, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    cut = (
        {"error": f"not reached within the API's time for an estimate ({len(state.queued)} jobs waiting)"}
        if est.cut_short
        else {}
    )
    return {**cut, "start_in_s": None if est.start_s is None else round(est.start_s), "start_at": start_at}


def describe(
    est: Estimate,
    state: State,
    *,
    nodes: Mapping[str, NodeCapacity],
    shown: Callable[[Owner], dict[str, Any]],
    now_s: float,
    as_of_s: float | None,
    alternative: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The estimate as the API answers it: when (seconds from now and the UTC time), where, what it
    waits for and would preempt (each job as ``shown`` lets the caller see it), on what basis."""
    me = state.owners[est.name]
    # every running job past its expected end is taken to end now; the answer names those on this
    # job's way (their end frees its place, or it preempts them) and counts the rest: a busy cluster
    # has thousands, the same for every job
    on_its_way = {*est.waits_for, *est.preempts}
    overdue = [k for k in est.overdue if k in on_its_way]
    involved = sorted({*est.waits_for, *est.preempts, *est.unknown_ends, *overdue})

    def job_of(key: str) -> dict[str, Any]:
        owner = state.owners.get(key)
        return shown(owner) if owner is not None else {"team": None, "job": None}

    queue = next((q.workload.cluster_queue for q in state.queued if q.workload.name == est.name), "")
    return {
        **when(est, state, now_s=now_s),
        "nodes": list(est.hosts),
        "domain": common_domain(est.hosts, nodes),
        "waits_for": [job_of(k) for k in est.waits_for],
        "preempts": [job_of(k) for k in est.preempts],
        "unknown_ends": [job_of(k) for k in est.unknown_ends],
        "overdue": [job_of(k) for k in overdue],
        "overdue_count": len(est.overdue),
        "after_fallback": est.relaxed,
        "expected_duration": {"seconds": me.expected.seconds, "basis": me.expected.basis},
        "bases": [
            {
                **job_of(k),
                "expected_s": state.owners[k].expected.seconds,
                "basis": state.owners[k].expected.basis,
            }
            for k in involved
            if k in state.owners
        ],
        "alternatives": [{**a, "preempts": [job_of(k) for k in a["preempts"]]} for a in (alternative or [])],
        "stopped_queue": queue if queue in state.stopped else None,
        "assumes": ASSUMES,
        "nodes_as_of_s": None if as_of_s is None else round(as_of_s),
        "forecast_age_s": round(est.age_s),
    }


def estimate_all(
    kept: Forecaster,
    state: State,
    targets: Iterable[str],
    *,
    now_s: float,
    at: float,
    stop: Callable[[], bool] | None = None,
) -> dict[str, Estimate]:
    """The targets' estimates from ``now_s``, on a copy of ``kept``'s cluster (``at``: monotonic)."""
    return kept.forecast(
        state.running,
        state.queued,
        at=at,
        targets=set(targets),
        stopped=state.stopped,
        stop=stop,
        now_s=now_s,
    )


def alternatives_for(
    kept: Forecaster, state: State, key: str, *, now_s: float, at: float
) -> list[dict[str, Any]]:
    return alternatives(
        kept.model, state.running, state.queued, key, state.stopped, now_s=now_s, kept=kept, at=at
    )
