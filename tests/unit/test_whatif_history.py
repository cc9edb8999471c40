"""The ledger's history as a what-if trace (``topogov whatif --history 7d``): what a submission
asked, with the run time the reconcile pass observed; what has no run time is left out and counted."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from topogov.domain.submission import WhatIfRequest, parse_window
from topogov.logic.whatif.history import trace_from_records
from topogov.logic.whatif.inputs import TraceJob

NOW = 1_764_000_000.0  # 2025-11-24T16:00:00Z


def stamp(ago_s: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(NOW - ago_s, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def record(name: str, ago_s: float, *, team: str = "team-a", **extra: object) -> dict[str, object]:
    base: dict[str, object] = {
        "team": team,
        "name": name,
        "state": "released",
        "release_reason": "finished",
        "submitted_at": stamp(ago_s),
        "decision": {"team": team, "pods": 4, "topology": {"mode": "preferred", "level": "layer-3"}},
        "shape": {"per_pod_gpu": 8, "instance_type": "p5.48xlarge"},
        "request": {"job_name": name, "topology": {"mode": "auto"}},
        "ran_s": 600,
    }
    base.update(extra)
    return base


def test_a_finished_job_is_replayed_as_it_was_asked_with_its_observed_run_time():
    records = [
        record("first", 7200),
        record(
            "strict",
            3600,
            team="team-b",
            request={
                "job_name": "strict",
                "priority": "training-priority",
                "topology": {"mode": "required", "level": "layer-2", "fallbackAfter": "10m"},
            },
            ran_s=1234.4,
        ),
    ]
    history = trace_from_records(records, now=NOW, window_s=86400)
    assert history.jobs == [
        TraceJob(0.0, "team-a", "first", 4, 8, 600.0, "p5.48xlarge", "auto", None, None, None),
        TraceJob(
            3600.0, "team-b", "strict", 4, 8, 1235.0, "p5.48xlarge", "required", "layer-2", 600.0,
            "training-priority",
        ),
    ]  # fmt: skip
    assert history.left_out == {}


def test_a_manifest_submission_asks_what_the_api_decided_and_the_old_flags_are_read():
    records = [
        record("manifest", 100, request={"manifest": {"kind": "Job"}}),
        record("old-flag", 50, request={"job_name": "old-flag", "required_topology": "layer-3"}),
        record("no-topology", 10, request={"job_name": "no-topology"}),
    ]
    jobs = {j.name: j for j in trace_from_records(records, now=NOW, window_s=3600).jobs}
    assert (jobs["manifest"].topology_mode, jobs["manifest"].topology_level) == ("preferred", "layer-3")
    assert (jobs["old-flag"].topology_mode, jobs["old-flag"].topology_level) == ("required", "layer-3")
    assert (jobs["no-topology"].topology_mode, jobs["no-topology"].topology_level) == ("none", None)


def test_what_has_no_run_time_is_left_out_by_why_and_the_window_bounds_the_rest():
    records = [
        record("kept", 60),
        record("running", 60, state="submitted", ran_s=None),
        record("pending", 60, state="reserving", ran_s=None),
        record("cancelled", 60, release_reason="cancelled", ran_s=None),
        record("vanished", 60, release_reason="vanished", ran_s=None),
        record("failed", 60, ran_s=None),
        record("too-old", 8 * 86400),
        record("no-stamp", 0, submitted_at=None),
    ]
    history = trace_from_records(records, now=NOW, window_s=7 * 86400)
    assert [j.name for j in history.jobs] == ["kept"]
    assert history.left_out == {"cancelled": 1, "failed": 1, "running": 2, "vanished": 1}
    assert history.summary() == {"window_s": 7 * 86400, "jobs": 1, "left_out": history.left_out}


@pytest.mark.parametrize(
    ("text", "seconds"), [("7d", 604800), ("36h", 129600), ("1d12h", 129600), ("90m", 5400)]
)
def test_a_window_reads_days_hours_and_minutes(text, seconds):
    assert parse_window(text) == seconds


@pytest.mark.parametrize(
    ("text", "says"),
    [("7", "must be a window like 7d"), ("1w", "must be a window like 7d"), ("32d", "at most 31d"),
     ("0d", "longer than 0m")],
)  # fmt: skip
def test_a_wrong_window_says_what_is_wrong(text, says):
    with pytest.raises(ValueError, match=says):
        parse_window(text)


def test_a_whatif_request_takes_a_trace_or_a_history_never_both_or_neither():
    assert WhatIfRequest.model_validate({"history": "7d"}).history == "7d"
    for body in ({}, {"history": "7d", "trace": "submit_s\n"}):
        with pytest.raises(ValidationError, match=r"either trace .* or history"):
            WhatIfRequest.model_validate(body)
    with pytest.raises(ValidationError, match="must be a window like 7d"):
        WhatIfRequest.model_validate({"history": "a week"})
