"""The ledger's history as a trace (``topogov whatif --history 7d``): each job submitted in the window
becomes a trace job with the run time the reconcile pass observed (pure: records in, a trace out).

A ledger record keeps what the submission asked (``request``), what the API decided (``decision``:
the team, the pod count) and the pod shape (``shape``: GPUs per pod, instance type); the reconcile
pass adds ``ran_s`` (the Job's ``startTime`` to ``completionTime``) when it releases a finished job
(:mod:`topogov.logic.ledger_sync`). The trace job asks for topology as the submission asked
(``auto`` stays ``auto``, so a proposed policy or fleet decides it again), with the submission's
priority class as named (none: the team's default under each policy).

A job with no observed run time is left out and counted by why: ``running`` (not finished yet: its
run time is not known), ``cancelled``, ``vanished`` (deleted outside the API), ``failed`` (released
without a completion time). Each trace job's ``submit_s`` counts from the first submission of the
window.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from topogov.domain.kueue_model.convert import timestamp
from topogov.domain.submission import parse_duration
from topogov.logic.whatif.inputs import TraceJob


@dataclass(frozen=True)
class History:
    """The trace of a window and what was left out of it (``{why: count}``)."""

    jobs: list[TraceJob]
    window_s: int
    left_out: dict[str, int] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        return {"window_s": self.window_s, "jobs": len(self.jobs), "left_out": dict(self.left_out)}


def _epoch(stamp: Any) -> float | None:
    try:
        return timestamp(stamp) or None if isinstance(stamp, str) else None
    except ValueError:
        return None


def _why_left_out(record: Mapping[str, Any]) -> str | None:
    if record.get("ran_s") is not None:
        return None
    if record.get("state") != "released":
        return "running"
    reason = str(record.get("release_reason") or "")
    return reason if reason in ("cancelled", "vanished") else "failed"


def _topology(record: Mapping[str, Any]) -> tuple[str, str | None, float | None]:
    """(mode, level, fallback_after_s) as the submission asked: the request's topology (or its
    ``required_topology`` / ``preferred_topology``); a manifest without one, as the API decided."""
    request = record.get("request") or {}
    spec = request.get("topology")
    if spec is None and request.get("required_topology"):
        spec = {"mode": "required", "level": request["required_topology"]}
    if spec is None and request.get("preferred_topology"):
        spec = {"mode": "preferred", "level": request["preferred_topology"]}
    if spec is None and "manifest" in request:
        decided = (record.get("decision") or {}).get("topology") or {}
        fallback = decided.get("fallback_after_s")
        return str(decided.get("mode") or "none"), decided.get("level"), float(fallback) if fallback else None
    spec = spec or {"mode": "none"}
    fallback_text = spec.get("fallbackAfter")
    fallback = float(parse_duration(fallback_text)) if fallback_text else None
    return str(spec.get("mode") or "none"), spec.get("level"), fallback


def trace_from_records(records: Iterable[Mapping[str, Any]], *, now: float, window_s: int) -> History:
    """The trace of the jobs submitted in the ``window_s`` seconds before ``now`` (epoch seconds),
    in submission order (ties: by team and name)."""
    since = now - window_s
    kept: list[tuple[float, Mapping[str, Any]]] = []
    left: Counter[str] = Counter()
    for record in records:
        at = _epoch(record.get("submitted_at"))
        if at is None or not since <= at <= now:
            continue
        why = _why_left_out(record)
        if why is not None:
            left[why] += 1
            continue
        kept.append((at, record))
    kept.sort(key=lambda x: (x[0], str(x[1].get("team")), str(x[1].get("name"))))
    first = kept[0][0] if kept else now
    jobs = []
    for at, record in kept:
        decision = record.get("decision") or {}
        shape = record.get("shape") or {}
        request = record.get("request") or {}
        mode, level, fallback = _topology(record)
        jobs.append(
            TraceJob(
                submit_s=round(at - first, 3),
                team=str(record.get("team") or decision.get("team")),
                name=str(record.get("name")),
                pods=int(decision.get("pods") or 1),
                gpus_per_pod=int(shape.get("per_pod_gpu") or 0),
                duration_s=max(1.0, math.ceil(float(record["ran_s"]))),
                instance_type=shape.get("instance_type") or None,
                topology_mode=mode,
                topology_level=level if mode in ("preferred", "required") else None,
                fallback_after_s=fallback if mode == "required" else None,
                priority=request.get("priority") or None,
                kind=_kind(decision, str(record.get("job_kind") or "Job")),
            )
        )
    return History(jobs, window_s, dict(sorted(left.items())))


def _kind(decision: dict[str, Any], job_kind: str) -> str:
    """The trace kind of a recorded job: a leader and its workers placed as one (a PyTorchJob's master
    and workers, a JobSet's one-pod leader and workers) replay as a PyTorchJob, anything else as a Job."""
    sets = decision.get("pod_sets") or []
    grouped = len(sets) == 2 and min(int(p.get("pods") or 0) for p in sets) == 1
    return "pytorchjob" if grouped and job_kind in ("PyTorchJob", "JobSet") else "job"
