"""A running Kueue's costs (``topogov_local.bench.kueue_timing``) and the readers of upstream's
performance-test output (``topogov_local.bench.kueue_perf``)."""

from __future__ import annotations

import io
import json
import tarfile

import pytest

from topogov_local.bench.kueue_perf import cycle_stats, upstream_means, write_rate
from topogov_local.bench.kueue_timing import KueueClock, Runner, Timing, TokenBucket


def test_the_bucket_lets_a_burst_through_then_one_request_per_interval() -> None:
    bucket = TokenBucket(qps=50, burst=100)
    granted = [bucket.take(0.0) for _ in range(150)]
    assert granted[:100] == pytest.approx([0.0] * 100, abs=1e-9)
    assert granted[100] == pytest.approx(0.02)
    assert granted[149] == pytest.approx(50 * 0.02)
    assert bucket.granted == 150


def test_the_bucket_refills_while_idle_up_to_its_burst() -> None:
    bucket = TokenBucket(qps=10, burst=5)
    for _ in range(5):
        bucket.take(0.0)
    assert bucket.take(0.0) == pytest.approx(0.1)  # empty: the next token
    later = [bucket.take(100.0) for _ in range(6)]
    assert later[:5] == pytest.approx([100.0] * 5)  # refilled, but only to the burst
    assert later[5] == pytest.approx(100.1)


def test_admissions_are_written_in_the_background_and_counted_from_when_written() -> None:
    timing = Timing(qps=10, burst=1, cycle_s=0.001, request_s=0.005, watch_s=0.002)
    clock = KueueClock(timing)
    end, seen = clock.cycle(0.0, ["a", "b", "c"], [], [])
    assert end == pytest.approx(0.001)  # the cycle does not wait for them
    assert seen["a"] == pytest.approx(0.001 + 0.007)
    assert seen["c"] == pytest.approx(0.201 + 0.007)  # third token of a 10/s bucket with no burst


def test_a_pending_head_is_written_in_the_cycle_only_when_its_message_changed() -> None:
    timing = Timing(qps=10, burst=1, cycle_s=0.0, request_s=0.0, backoff_s=(0.0, 0.0))
    clock = KueueClock(timing)
    end, _ = clock.cycle(0.0, ["a"], [], [("w", "insufficient quota, 2 more needed")])
    assert end == pytest.approx(0.1)  # behind a's write
    assert clock.workloads.granted == 2
    end2, _ = clock.cycle(end, [], [], [("w", "insufficient quota, 2 more needed")])
    assert clock.workloads.granted == 2 and end2 == pytest.approx(end)
    clock.cycle(end2, [], [], [("w", "insufficient quota, 1 more needed")])
    assert clock.workloads.granted == 3


def test_a_workload_admitted_and_then_pending_again_is_written_again() -> None:
    clock = KueueClock(Timing(backoff_s=(0.0, 0.0)))
    clock.cycle(0.0, [], [], [("w", "same")])
    clock.cycle(1.0, ["w"], [], [])
    clock.cycle(2.0, [], [], [("w", "same")])
    assert clock.workloads.granted == 3


def test_evictions_are_awaited_in_the_cycle() -> None:
    clock = KueueClock(Timing(qps=10, burst=1, cycle_s=0.0, request_s=0.004))
    end, _ = clock.cycle(0.0, ["p"], ["v1", "v2"], [])
    assert end == pytest.approx(0.2 + 0.004)


def test_cycles_that_admit_nothing_back_off_doubling_to_the_cap() -> None:
    clock = KueueClock(Timing(cycle_s=0.0, backoff_s=(0.001, 0.010)))
    gaps = []
    t = 0.0
    for _ in range(6):
        end, _ = clock.cycle(t, [], [], [])
        gaps.append(round(end - t, 6))
        t = end
    assert gaps == [0.001, 0.002, 0.004, 0.008, 0.01, 0.01]
    end, _ = clock.cycle(t, ["a"], [], [])
    assert end == pytest.approx(t)  # an admission resets it
    end2, _ = clock.cycle(end, [], [], [])
    assert end2 - end == pytest.approx(0.001)


def test_requests_sent_while_the_generator_creates_take_the_loaded_round_trip() -> None:
    timing = Timing(qps=1000, burst=10, cycle_s=0.0, request_s=0.005, loaded_request_s=0.08, watch_s=0.002)
    clock = KueueClock(timing, loaded_until=10.0)
    assert clock.round_trip(9.99) == pytest.approx(0.08)
    assert clock.round_trip(10.0) == pytest.approx(0.005)
    end, seen = clock.cycle(1.0, ["a"], [], [("w", "insufficient quota")])
    assert seen["a"] == pytest.approx(1.0 + 0.08 + 0.002)
    assert end == pytest.approx(1.0 + 0.08)  # the in-cycle write too
    end, seen = clock.cycle(20.0, ["b"], [], [("v", "insufficient quota")])
    assert seen["b"] == pytest.approx(20.0 + 0.005 + 0.002)
    assert end == pytest.approx(20.005)


def test_the_runner_finishes_one_workload_at_a_time() -> None:
    clock = KueueClock(Timing(request_s=0.005, loaded_request_s=0.1, watch_s=0.002), loaded_until=5.0)
    runner = Runner(clock)
    # three runs ending together while loaded: each finish waits for the one before
    seen = [runner.finish(0.0, 1.0) for _ in range(3)]
    assert seen == pytest.approx([1.102, 1.202, 1.302])
    # later, unloaded and the worker idle: one round trip and the watch
    assert runner.finish(9.0, 1.0) == pytest.approx(10.007)
    assert [lag for _, lag in runner.lags] == pytest.approx([0.102, 0.202, 0.302, 0.007])


def test_upstream_means_are_read_from_the_rangespec_comments(tmp_path) -> None:
    spec = tmp_path / "test/performance/scheduler/configs/tas/rangespec.yaml"
    spec.parent.mkdir(parents=True)
    spec.write_text(
        "wlClassesMaxAvgTimeToAdmissionMs:\n"
        "  large-balanced-rack:    46_000        # 37862 / 1573 / 4.15%\n"
        "  small-required-rack:   297_000       # 246755 / 5023 / 2.04%\n"
    )
    assert upstream_means(tmp_path) == {"large-balanced-rack": 37.862, "small-required-rack": 246.755}


def _line(ts: str, msg: str, **fields: object) -> str:
    when = f"2026-12-02T21:53:{ts}Z"
    return "\t".join([when, "LEVEL(-2)", "scheduler", "scheduler.go:1", msg, json.dumps(fields)]) + "\n"


def test_cycle_stats_read_minimalkueues_log(tmp_path) -> None:
    wl = {"name": "w", "namespace": "ns"}
    log = tmp_path / "minimalkueue.err.log"
    log.write_text(
        _line("38.000000Z", "Snapshot taken", schedulingCycle=1, duration="1ms")
        + _line("38.001000Z", "Nomination done", schedulingCycle=1, duration="500µs")
        + _line("38.002000Z", "Workload assumed in the cache", schedulingCycle=1, workload=wl)
        + _line("38.100000Z", "Scheduling cycle complete", schedulingCycle=1, duration="2.5s")
        + _line("38.252000Z", "Workload successfully admitted and assigned flavors", workload=wl)
        + "a line of another shape\n"
    )
    stats = cycle_stats(log)
    assert stats["cycles"] == 1 and stats["cycle_time_s"] == 2.5
    assert stats["compute_p50_ms"] == 1.5
    assert stats["fastest_admission_write_ms"] == pytest.approx(250.0)


def test_write_rate_is_the_patch_count_between_the_first_and_last_scrape(tmp_path) -> None:
    dump = tmp_path / "metricsDump.tgz"
    with tarfile.open(dump, "w:gz") as tar:
        for ms, patches in ((1_000_000, 100), (1_010_000, 600)):
            body = (
                f'rest_client_requests_total{{code="200",host="h",method="PATCH"}} {patches}\n'
                'rest_client_requests_total{code="200",host="h",method="PUT"} 999\n'
            ).encode()
            info = tarfile.TarInfo(f"{ms}.prometheus")
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    assert write_rate(dump) == {"patches": 600.0, "patches_per_s": 50.0}
