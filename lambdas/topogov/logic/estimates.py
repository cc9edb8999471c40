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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

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
    Model,
    Queued,
    Running,
    alternatives,
    expected_from,
    forecast,
)

GPU = "nvidia.com/gpu"


class LedgerLister(Protocol):
    def list(self, team: str) -> list[dict[str, Any]]: ...


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


def read_state(
    policy: Policy, model: Model, ledger: LedgerLister, cluster: ClusterLister, now_s: float
) -> State:
    """Every team namespace's Workloads as the model's running and queued jobs (times relative to
    ``now_s``), each with its expected length."""
    running, queued, owners, stopped = [], [], {}, set()
    for team_name, team in policy.teams.items():
        records = {r["name"]: r for r in ledger.list(team_name)}
        observed: dict[int, list[float]] = {}
        for r in records.values():
            if r.get("ran_s") is not None:
                d = r.get("decision") or {}
                gpus = int(d.get("pods") or 0) * int((r.get("shape") or {}).get("per_pod_gpu") or 0)
                observed.setdefault(gpus, []).append(float(r["ran_s"]))
        jobs = {j.uid: j for j in cluster.list_jobs(team.namespace)}
        for obj in cluster.workloads(team.namespace):
            state = workload_state(obj)
            if state == "finished":
                continue
            try:
                wl = workload_of(obj, model.local_queues)
            except KeyError:
                continue  # not in one of the policy's queues: not Topogov's to forecast
            job = jobs.get(wl.job_uid)
            job_name = job.name if job else ""
            record = records.get(job_name) or {}
            declared = ((record.get("request") or {}).get("expected_duration")) if record else None
            deadline = job.active_deadline_s if job else None
            expected = expected_from(
                None if declared is None else float(parse_duration(declared)),
                None if deadline is None else float(deadline),
                observed,
                _gpus(wl),
            )
            wl = replace(wl, created=wl.created - now_s)
            # a Workload whose Job is gone (deleted, its Workload not yet collected) is named itself
            owners[wl.name] = Owner(team_name, job_name or f"(Workload {obj.name})", expected)
            if state == "admitted":
                running.append(Running(wl, admission_of(obj), reserved_at(obj) - now_s, expected))
            else:
                queued.append(Queued(wl, expected, _fallback_s(record, now_s)))
                reserved = obj.condition("QuotaReserved")
                if reserved and f"ClusterQueue {wl.cluster_queue} is inactive" in reserved.message:
                    stopped.add(wl.cluster_queue)
    return State(running, queued, owners, stopped)


def _fallback_s(record: Mapping[str, Any], now_s: float) -> float | None:
    """When the reconcile pass relaxes a pending required job (its ``fallbackAfter`` after the
    submission; within one pass of it), relative to now; None when it has none or was relaxed."""
    topo = (record.get("decision") or {}).get("topology") or {}
    after, submitted = topo.get("fallback_after_s"), epoch(record.get("submitted_at"))
    if topo.get("mode") != "required" or not after or submitted is None or record.get("fallback"):
        return None
    return submitted + float(after) - now_s


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
    involved = sorted({*est.waits_for, *est.preempts, *est.unknown_ends, *est.overdue})

    def job_of(key: str) -> dict[str, Any]:
        owner = state.owners.get(key)
        return shown(owner) if owner is not None else {"team": None, "job": None}

    queue = next((q.workload.cluster_queue for q in state.queued if q.workload.name == est.name), "")
    start_at = None
    if est.start_s is not None:
        start_at = dt.datetime.fromtimestamp(now_s + est.start_s, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    cut = (
        {"error": f"not reached within the API's time for an estimate ({len(state.queued)} jobs waiting)"}
        if est.cut_short
        else {}
    )
    return {
        **cut,
        "start_in_s": None if est.start_s is None else round(est.start_s),
        "start_at": start_at,
        "nodes": list(est.hosts),
        "domain": common_domain(est.hosts, nodes),
        "waits_for": [job_of(k) for k in est.waits_for],
        "preempts": [job_of(k) for k in est.preempts],
        "unknown_ends": [job_of(k) for k in est.unknown_ends],
        "overdue": [job_of(k) for k in est.overdue],
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
    }


def estimate_all(
    model: Model, state: State, targets: Iterable[str], stop: Callable[[], bool] | None = None
) -> dict[str, Estimate]:
    return forecast(
        model, state.running, state.queued, targets=set(targets), stopped=state.stopped, stop=stop
    )


def alternatives_for(model: Model, state: State, key: str) -> list[dict[str, Any]]:
    return alternatives(model, state.running, state.queued, key, state.stopped)
