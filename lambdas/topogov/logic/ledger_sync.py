"""Keep the job ledger true to the cluster (run by the reconcile pass).

A charge is held while its Job is queued or running. When the Job finished (Complete/Failed) or
vanished (deleted outside the API), its charge is released, exactly once (the ledger's release is
conditional). A record still ``reserving`` long after its submission (the API died between the
charge and the create) is released when no Job of that name exists, and confirmed when its Job
does. A cancelled job whose Job is still there is deleted (the cancel is finished). A suspended Job
labelled as the API's with no record at all (a submission rolled back whose create landed late) is
deleted; any other Job found in a team namespace that the API did not create is reported, never
adopted.

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
    def delete(self, namespace: str, name: str) -> bool: ...
    def workload_for(self, namespace: str, job_uid: str) -> WorkloadView | None: ...
    def relax_topology(self, namespace: str, name: str, level: str) -> str: ...


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
    outcome = jobs.relax_topology(record["namespace"], record["name"], level)
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
        ),
    }
    return ledger.record_fallback(team, record["name"], fallback)


def sync_ledger(
    policy: Policy,
    ledger: LedgerPort,
    jobs: JobLister,
    *,
    now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    stale_after_s: float = STALE_RESERVATION_S,
) -> SyncSummary:
    summary = SyncSummary()
    for team_name, team in sorted(policy.teams.items()):
        in_cluster = {j.name: j for j in jobs.list_jobs(team.namespace)}
        records = ledger.list(team_name)
        known = {r["name"] for r in records}
        for record in records:
            if record.get("state") == "released":
                job = in_cluster.get(record["name"])
                if job is not None and record.get("release_reason") == "cancelled":
                    status, _ = job_status(job, None)
                    if status not in ("Succeeded", "Failed"):
                        # Cancelled, but its Job is still there (the delete failed, or a submission
                        # racing the cancel created it): finish the cancel, never run it uncharged.
                        summary.cancels_completed += jobs.delete(team.namespace, record["name"])
                continue
            summary.checked += 1
            job = in_cluster.get(record["name"])
            if record.get("state") == "reserving":
                if job is not None:
                    # The Job was created but the API could not confirm the record: confirm it now.
                    summary.confirmed += ledger.confirm(team_name, record["name"], {"job_uid": job.uid})
                elif _age_s(record.get("submitted_at"), now()) >= stale_after_s:
                    summary.released_abandoned += ledger.release(team_name, record["name"], "abandoned")
                    continue
                else:
                    continue
            status, _ = job_status(job, None)
            if status == "Pending" and job is not None:
                if fall_back(team_name, record, job, ledger, jobs, now()):
                    summary.fallbacks.append(f"{team_name}/{record['name']}")
            elif status == "Vanished":
                summary.released_vanished += ledger.release(team_name, record["name"], "vanished")
            elif status in ("Succeeded", "Failed"):
                ran = run_seconds(job) if status == "Succeeded" else None
                summary.released_finished += ledger.release(team_name, record["name"], status.lower(), ran)
        for name in sorted(set(in_cluster) - known):
            job = in_cluster[name]
            if job.labels.get(MANAGED_BY_LABEL) == "topogov" and ledger.get(team_name, name) is None:
                # The API's own Job with no record: a submission that failed (its create timed out,
                # was rolled back, and landed late). Never charged: remove it, started or not (Kueue
                # admits a late create within a second; it must not run uncharged). The record is
                # read again first: the API writes it before it creates the Job, so a submission
                # that raced this pass's listing has one by now.
                summary.orphans_deleted += jobs.delete(team.namespace, name)
            else:
                summary.unmanaged_jobs.append(f"{team.namespace}/{name}")
        summary.in_flight_gpu[team_name] = ledger.usage(team_name).gpu
    return summary
