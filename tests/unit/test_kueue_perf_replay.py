"""Kueue's TAS performance shape replayed on the model with a running Kueue's costs
(``topogov bench kueue-perf``): what the timing model must keep true."""

from __future__ import annotations

import pytest

from topogov_local.bench.admission import bench_kueue_perf_shape
from topogov_local.bench.kueue_timing import Timing

# configs/tas/rangespec.yaml in sigs.k8s.io/kueue@v0.17.0: means of 10 CI runs (comments)
UPSTREAM_WALL_S = 401.472
UPSTREAM_LARGE_S = {
    "large-balanced-rack": 37.862,
    "large-preferred-rack": 39.573,
    "large-required-rack": 39.625,
}


@pytest.fixture(scope="module")
def replay() -> dict:
    return bench_kueue_perf_shape(Timing())


def test_every_workload_is_admitted_and_written(replay: dict) -> None:
    assert replay["admitted"] == 15_000
    assert replay["workload_writes"] >= replay["admitted"]


def test_the_span_is_bounded_by_the_write_rate(replay: dict) -> None:
    timing = Timing()
    assert replay["simulated_span_s"] >= (replay["workload_writes"] - timing.burst) / timing.qps


def test_the_span_is_within_15_percent_of_upstreams_wall_time(replay: dict) -> None:
    assert replay["simulated_span_s"] == pytest.approx(UPSTREAM_WALL_S, rel=0.15)


def test_large_workloads_wait_within_15_percent_of_upstreams_means(replay: dict) -> None:
    for cls, mean in UPSTREAM_LARGE_S.items():
        assert replay["mean_wait_s"][cls] == pytest.approx(mean, rel=0.15), cls


def test_smaller_workloads_wait_longer_as_upstream(replay: dict) -> None:
    waits = replay["mean_wait_s"]
    large = max(v for k, v in waits.items() if k.startswith("large"))
    medium = [v for k, v in waits.items() if k.startswith("medium")]
    small = [v for k, v in waits.items() if k.startswith("small")]
    assert large < min(medium) and max(medium) < min(small)
