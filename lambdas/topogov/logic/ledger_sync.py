"""Keep the job ledger true to the cluster (run by the reconcile pass).

A charge is held while its Job is queued or running. When the Job finished (Complete/Failed) or
vanished (deleted outside the API), its charge is released, exactly once (the ledger's release is
conditional). A record still ``reserving`` long after its submission (the API died between the
charge and the create) is released when no Job of that name exists. Jobs found in team
namespaces that the API did not create are reported, never adopted.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from topogov.adapters.kube_jobs import job_status

STALE_RESERVATION_S = 300


class LedgerPort(Protocol):
    def list(self, team: str) -> list[dict[str, Any]]: ...
    def usage(self, team: str) -> Any: ...
    def release(self, team: str, name: str, reason: str) -> bool: ...


class JobLister(Protocol):
    def list_jobs(self, namespace: str) -> list[dict[str, Any]]: ...


@dataclass
class SyncSummary:
    checked: int = 0
    released_finished: int = 0
    released_vanished: int = 0
    released_abandoned: int = 0
    unmanaged_jobs: list[str] = field(default_factory=list)
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


def sync_ledger(
    policy: Any,
    ledger: LedgerPort,
    jobs: JobLister,
    *,
    now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
) -> SyncSummary:
    summary = SyncSummary()
    for team_name, team in sorted(policy.teams.items()):
        in_cluster = {j["metadata"]["name"]: j for j in jobs.list_jobs(team.namespace)}
        records = ledger.list(team_name)
        known = {r["name"] for r in records}
        for record in records:
            if record.get("state") == "released":
                continue
            summary.checked += 1
            job = in_cluster.get(record["name"])
            if record.get("state") == "reserving":
                if job is None and _age_s(record.get("submitted_at"), now()) > STALE_RESERVATION_S:
                    summary.released_abandoned += ledger.release(team_name, record["name"], "abandoned")
                continue
            status, _ = job_status(job, None)
            if status == "Vanished":
                summary.released_vanished += ledger.release(team_name, record["name"], "vanished")
            elif status in ("Succeeded", "Failed"):
                summary.released_finished += ledger.release(team_name, record["name"], status.lower())
        summary.unmanaged_jobs.extend(f"{team.namespace}/{n}" for n in sorted(in_cluster) if n not in known)
        summary.in_flight_gpu[team_name] = ledger.usage(team_name).gpu
    return summary
