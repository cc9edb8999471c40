"""Reading a run of Kueue's own TAS performance test (``topogov bench kueue-perf``): the run's
arrivals and the runner's finish lag, from minimalkueue's level-2 log (lines as v0.17.0 writes them)."""

from __future__ import annotations

import json
from pathlib import Path

from topogov_local.bench.kueue_perf import arrivals, finish_lag

RUN_S = {"small-required-rack": 0.2, "large-balanced-rack": 1.0}


def _line(at: str, message: str, **fields: object) -> str:
    body = json.dumps({"replica-role": "standalone", **fields})
    parts = [f"2026-12-03T20:40:{at}Z", "LEVEL(-2)", "workload-reconciler", "wc.go", message, body]
    return "\t".join(parts) + "\n"


def _create(at: str, ns: str, name: str) -> str:
    return _line(
        at, "Workload create event", workload={"name": name, "namespace": ns}, queue=ns, status="pending"
    )


def _update(at: str, ns: str, name: str, status: str) -> str:
    prev = {"admitted": "pending", "finished": "admitted"}[status]
    wl = {"name": name, "namespace": ns}
    return _line(at, "Workload update event", workload=wl, queue=ns, status=status, prevStatus=prev)


def _log(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "minimalkueue.err.log"
    path.write_text("".join(lines) + "2026-12-03T20:41:00.000000000Z\tINFO\tnot a tab-separated event\n")
    return path


def test_arrivals_are_named_as_the_model_names_them_and_counted_from_the_first(tmp_path: Path) -> None:
    log = _log(
        tmp_path,
        [
            _create("17.500000000", "cq-0-2-cohort-4", "small-required-rack-0-7-0"),
            _create("18.250000000", "cq-0-0-cohort-1", "large-balanced-rack-8-3-0"),
            _update("18.300000000", "cq-0-0-cohort-1", "large-balanced-rack-8-3-0", "admitted"),
            _create("19.000000000", "other", "not-generated"),
        ],
    )
    assert arrivals(log) == {
        "cq-2-cohort-4-small-required-rack-7": 0.0,
        "cq-0-cohort-1-large-balanced-rack-3": 0.75,
    }


def test_finish_lag_is_split_at_the_last_creation(tmp_path: Path) -> None:
    ns = "cq-0-1-cohort-0"
    log = _log(
        tmp_path,
        [
            _create("10.000000000", ns, "large-balanced-rack-8-0-0"),
            _update("11.000000000", ns, "large-balanced-rack-8-0-0", "admitted"),
            _create("12.000000000", ns, "small-required-rack-0-0-0"),
            # admitted at 11 s, before the last creation: finished 3 s after its 1 s run
            _update("15.000000000", ns, "large-balanced-rack-8-0-0", "finished"),
            _update("20.000000000", ns, "small-required-rack-0-0-0", "admitted"),
            # admitted at 20 s, after it: finished 0.05 s after its 0.2 s run
            _update("20.250000000", ns, "small-required-rack-0-0-0", "finished"),
        ],
    )
    assert finish_lag(log, RUN_S) == {
        "finish_lag_p50_while_creating_s": 3.0,
        "finish_lag_p50_after_s": 0.05,
    }


def test_a_log_without_finishes_has_no_lag(tmp_path: Path) -> None:
    log = _log(tmp_path, [_create("10.000000000", "cq-0-1-cohort-0", "small-required-rack-0-0-0")])
    assert finish_lag(log, RUN_S) == {"finish_lag_p50_while_creating_s": None, "finish_lag_p50_after_s": None}
