"""Keep the job ledger true to the cluster (run by the reconcile pass).

A charge is held while its Job is queued or running. When the Job finished (Complete/Failed) or
vanished (deleted outside the API), its charge is released, exactly once (the ledger's release is
conditional). A record still ``reserving`` long after its submission (the API died between the
charge and the create) is released when no Job of that name exists, and confirmed when its Job
does. A cancelled job whose Job is still there is deleted (the cancel is finished). An unfinished
Job labelled as the API's with no record at all (a submission rolled back whose create landed late),
or whose charge was released, is deleted; any other Job found in a team namespace that the API did
not create is reported, never adopted.

A pass reads each team's live records only (the ledger's sparse index) and its unfinished Jobs, so
its cost grows with the work queued or running, never with the ledger's history; a finished run's
length is kept with the team's counters (the last :data:`RECENT_RUNS` by GPU count) for the start
estimates.

Time-bounded fallback: a Job submitted ``required`` with ``fallbackAfter`` that is still pending
(suspended, its Workload not admitted) once that long has passed since its submission has its
pod-template annotation switched to ``preferred`` at the same level (one atomic JSON patch, valid
only while the Job is suspended), and the ledger records when and why. The switch happens at the
first pass after the deadline: within the schedule's period (5 minutes) of it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from topogov.domain.jobs import job_status
from topogov.domain.labels import MANAGED_BY_LABEL, PREFERRED_ANNOTATION, REQUIRED_ANNOTATION
from topogov.domain.policy import Policy
from topogov.domain.views.batch import JobView
from topogov.domain.views.workload import WorkloadView
from topogov.logic.ports import LedgerPort

STALE_RESERVATION_S = 300


class JobLister(Protocol):
    def list_jobs(self, namespace: str) -> list[JobView]: ...
    def delete(self, namespace: str, name: str, kind: str = "Job") -> bool: ...
    def workload_for(self, namespace: str, job_uid: str) -> WorkloadView | None: ...
    def relax_topology(self, namespace: str, name: str, level: str, kind: str = "Job") -> str: ...


def run_seconds(job: JobView | None) -> float | None:
    """How long a finished Job ran: ``status.startTime`` to ``status.completionTime`` (batch/v1; the
    start is when the Job controller first saw it unsuspended), or None when either is missing."""
    if job is None:
        return None
    start, end = job.start_time, job.completion_time
    if not start or not end:
        return None
    seconds = (_parse(end) - _parse(start)).total_seconds()
    return seconds if seconds >= 0 else None


def _parse(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


@dataclass
class SyncSummary:
    checked: int = 0
    released_finished: int = 0
    released_vanished: int = 0
    released_abandoned: int = 0
    unmanaged_jobs: list[str] = field(default_factory=list)
    fallbacks: list[str] = field(default_factory=list)  # team/name of the jobs relaxed this pass
    confirmed: int = 0  # reservations whose Job exists but whose confirmation was lost
    cancels_completed: int = 0  # cancelled jobs found still in the cluster and deleted
    orphans_deleted: int = 0  # the API's suspended Jobs whose submission failed (no record)
    in_flight_gpu: dict[str, int] = field(default_factory=dict)  # per team, after the sync

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _age_s(stamp: str | None, now: dt.datetime) -> float:
    if not stamp:
        return float("inf")
    try:
        then = dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
    except ValueError:
        return float("inf")
    return (now - then).total_seconds()


def _stamp(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def fall_back(
    team: str,
    record: dict[str, Any],
    job: JobView,
    ledger: LedgerPort,
    jobs: JobLister,
    now: dt.datetime,
) -> bool:
    """Relax a ``required`` job past its ``fallbackAfter`` deadline and still pending; True if done."""
    topo = (record.get("decision") or {}).get("topology") or {}
    after = topo.get("fallback_after_s")
    if topo.get("mode") != "required" or not after or record.get("fallback"):
        return False
    waited = _age_s(record.get("submitted_at"), now)
    if waited == float("inf") or waited < after:
        return False
    annotations = job.template_annotations
    # A preferred annotation: switched by an earlier pass that could not record it (its Workload is
    # switched again if that pass stopped between the two patches).
    level = annotations.get(REQUIRED_ANNOTATION) or annotations.get(PREFERRED_ANNOTATION)
    if level is None:
        return False  # neither: changed by someone else, nothing to relax
    workload = jobs.workload_for(record["namespace"], job.uid)
    status, why = job_status(job, workload)
    if status != "Pending":
        return False
    outcome = jobs.relax_topology(record["namespace"], record["name"], level, job.kind)
    if outcome not in ("switched", "already"):
        return False
    deadline = now - dt.timedelta(seconds=waited - after)
    fallback = {
        "at": _stamp(now),
        "from": "required",
        "to": "preferred",
        "level": level,
        "deadline": _stamp(deadline),
        "reason": (
            f"not admitted {int(after)}s after submission (deadline {_stamp(deadline)}): the Job was still "
            f"suspended, so its pods now prefer {level} instead of requiring it"
            + (f"; it was pending: {why}" if why else "")
            + _slices_kept(topo)
        ),
    }
    return ledger.record_fallback(team, record["name"], fallback)


def _slices_kept(topo: dict[str, Any]) -> str:
    """What a fallback does to a job's pod-set slices: nothing. Kueue v0.17.0 has no preferred slice
    (``podset-slice-required-topology`` only), so only the job's level is relaxed."""
    if not topo.get("slice_level"):
        return ""
    return (
        f"; its slices of {topo.get('slice_size')} pods stay required at {topo['slice_level']} (Kueue has "
        "no preferred slice)"
    )


RECENT_RUNS = 50  # the run times kept per team and GPU count for the start estimates


def sync_ledger(
    policy: Policy,
    ledger: LedgerPort,
    jobs: JobLister,
    *,
    now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    stale_after_s: float = STALE_RESERVATION_S,
) -> SyncSummary:
    """One pass over every team's live records and unfinished Jobs: what it reads grows with the jobs
    queued or running, never with the ledger's history (released records are not read)."""
    summary = SyncSummary()
    for team_name, team in sorted(policy.teams.items()):
        in_cluster = {(j.kind, j.name): j for j in jobs.list_jobs(team.namespace)}
        records = ledger.live(team_name)
        ran: dict[int, list[float]] = {}
        for record in records:
            _sync_record(
                team_name,
                record,
                in_cluster.get((record.get("job_kind") or "Job", record["name"])),
                ledger,
                jobs,
                now(),
                stale_after_s,
                summary,
                ran,
            )
        _keep_runs(team_name, ledger, ran)
        known = {(r.get("job_kind") or "Job", r["name"]) for r in records}
        for key in sorted(set(in_cluster) - known):
            _sync_unrecorded(team_name, team.namespace, in_cluster[key], ledger, jobs, summary)
        summary.in_flight_gpu[team_name] = ledger.usage(team_name).gpu
    return summary


def _sync_record(
    team: str,
    record: dict[str, Any],
    job: JobView | None,
    ledger: LedgerPort,
    jobs: JobLister,
    now: dt.datetime,
    stale_after_s: float,
    summary: SyncSummary,
    ran: dict[int, list[float]],
) -> None:
    """One live record against its Job: confirm, release (finished, vanished, abandoned) or relax."""
    if record.get("state") == "released":
        return  # released a moment ago: the index has not caught up
    summary.checked += 1
    name = record["name"]
    if record.get("state") == "reserving":
        if job is not None:
            # The Job was created but the API could not confirm the record: confirm it now.
            summary.confirmed += ledger.confirm(team, name, {"job_uid": job.uid})
        elif _age_s(record.get("submitted_at"), now) >= stale_after_s:
            summary.released_abandoned += ledger.release(team, name, "abandoned")
            return
        else:
            return
    status, _ = job_status(job, None)
    if status == "Pending" and job is not None:
        if fall_back(team, record, job, ledger, jobs, now):
            summary.fallbacks.append(f"{team}/{name}")
    elif status == "Vanished":
        summary.released_vanished += ledger.release(team, name, "vanished")
    elif status in ("Succeeded", "Failed"):
        seconds = run_seconds(job) if status == "Succeeded" else None
        if ledger.release(team, name, status.lower(), seconds):
            summary.released_finished += 1
            if seconds is not None:
                ran.setdefault(_gpus(record), []).append(seconds)


def _gpus(record: dict[str, Any]) -> int:
    """The job's GPUs in all, as the estimates group run times (pods × GPUs per pod)."""
    decision = record.get("decision") or {}
    return int(decision.get("pods") or 0) * int((record.get("shape") or {}).get("per_pod_gpu") or 0)


def _keep_runs(team: str, ledger: LedgerPort, ran: dict[int, list[float]]) -> None:
    """Add this pass's finished runs to the team's recent ones (the last :data:`RECENT_RUNS` by GPU
    count): the start estimates' lengths, read without reading a released record."""
    if not ran:
        return
    kept = ledger.runs(team)
    for gpus, runs in sorted(ran.items()):
        ledger.keep_runs(team, gpus, [*kept.get(gpus, []), *runs][-RECENT_RUNS:])


def _sync_unrecorded(
    team: str, namespace: str, job: JobView, ledger: LedgerPort, jobs: JobLister, summary: SyncSummary
) -> None:
    """An unfinished Job with no live record. The API's own (Topogov's managed-by label): with no
    record at all, a submission that failed (its create timed out, was rolled back, and landed
    late): never charged, so removed, started or not (Kueue admits a late create within a second;
    it must not run uncharged); with a cancelled record, a cancel whose delete failed (or a
    submission racing the cancel): finished now; with a record released otherwise (a reservation
    abandoned before its create landed), removed too. The record is read again first: the API writes it
    before it creates the Job, so a submission that raced this pass's listing has one by now. Any
    other Job is reported, never adopted. A finished Job runs nothing: it is not looked at."""
    status, _ = job_status(job, None)
    if status in ("Succeeded", "Failed"):
        return
    if job.labels.get(MANAGED_BY_LABEL) != "topogov":
        summary.unmanaged_jobs.append(f"{namespace}/{job.name}")
        return
    record = ledger.get(team, job.name)
    if (
        record is not None
        and (record.get("job_kind") or "Job") != job.kind
        and record.get("state") != "released"
    ):
        record = None  # the live record is another kind's: this one was never charged
    if record is None:
        summary.orphans_deleted += jobs.delete(namespace, job.name, job.kind)
    elif record.get("state") == "released" and record.get("release_reason") == "cancelled":
        summary.cancels_completed += jobs.delete(namespace, job.name, job.kind)
    elif record.get("state") == "released":  # its charge was released (abandoned): not to run uncharged
        summary.orphans_deleted += jobs.delete(namespace, job.name, job.kind)
