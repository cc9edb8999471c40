"""Kueue's TAS performance shape replayed on the model with a running Kueue's costs
(``topogov bench kueue-perf``): what the timing model must keep true."""

from __future__ import annotations

import pytest

from topogov_local.bench.admission import KUEUE_TAS_MEANS_S, KUEUE_TAS_WALL_S, bench_kueue_perf_shape
from topogov_local.bench.kueue_timing import Timing


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
    assert replay["simulated_span_s"] == pytest.approx(KUEUE_TAS_WALL_S, rel=0.15)


def test_every_class_waits_within_15_percent_of_upstreams_means(replay: dict) -> None:
    for cls, mean in KUEUE_TAS_MEANS_S.items():
        assert replay["mean_wait_s"][cls] == pytest.approx(mean, rel=0.15), cls


def test_the_runner_falls_behind_only_while_the_generator_creates(replay: dict) -> None:
    assert replay["loaded_until_s"] == pytest.approx(20.4)  # the last large workload: 17 x 1.2 s
    assert replay["finish_lag_p50_while_loaded_s"] > 1.0 > 0.05 > replay["finish_lag_p50_after_s"]


def test_the_nodes_are_labelled_as_upstreams_generator_so_hostnames_repeat_per_rack() -> None:
    from topogov.domain.kueue_model.topology import FlavorTree
    from topogov_local.bench.admission import _perf_shape

    cluster, _, _, _ = _perf_shape()
    node = cluster.nodes["node-b0-r3-n11"]
    assert node.labels["kubernetes.io/hostname"] == "node-11"
    assert node.labels["cloud.provider.com/topology-rack"] == "rack-3"
    tree = FlavorTree(
        cluster.flavors["tas-flavor"], cluster.topologies["default-topology"], cluster.nodes.values()
    )
    free = tree.free_by_leaf()
    assert sorted(free) == sorted(f"node-{h}" for h in range(64))  # one leaf per hostname, as Kueue keys it
    assert {leaf["cpu"] for leaf in free.values()} == {960_000}  # the ten nodes of a hostname add up


def test_smaller_workloads_wait_longer_as_upstream(replay: dict) -> None:
    waits = replay["mean_wait_s"]
    large = max(v for k, v in waits.items() if k.startswith("large"))
    medium = [v for k, v in waits.items() if k.startswith("medium")]
    small = [v for k, v in waits.items() if k.startswith("small")]
    assert large < min(medium) and max(medium) < min(small)


# configs/tas/generator.yaml in sigs.k8s.io/kueue@v0.17.0: (class, count per queue, creationIntervalMs)
GENERATOR_SETS = [
    ("small-required-rack", 120, 100),
    ("small-preferred-rack", 120, 100),
    ("small-balanced-rack", 110, 100),
    ("medium-required-rack", 34, 500),
    ("medium-preferred-rack", 33, 500),
    ("medium-balanced-rack", 33, 500),
    ("large-required-rack", 17, 1200),
    ("large-preferred-rack", 17, 1200),
    ("large-balanced-rack", 16, 1200),
]


def _scheduled() -> dict[str, float]:
    return {
        f"cq-{q}-cohort-{c}-{name}-{i}": (i + 1) * interval / 1000
        for c in range(5)
        for q in range(6)
        for name, count, interval in GENERATOR_SETS
        for i in range(count)
    }


def test_a_replay_on_arrivals_equal_to_the_intervals_is_the_replay_on_the_intervals(replay: dict) -> None:
    on_arrivals = bench_kueue_perf_shape(Timing(), _scheduled())
    drop = ("model_cpu_s",)
    assert {k: v for k, v in on_arrivals.items() if k not in drop} == {
        k: v for k, v in replay.items() if k not in drop
    }


def test_later_arrivals_are_replayed_later() -> None:
    late = {name: at + 100.0 for name, at in _scheduled().items()}
    result = bench_kueue_perf_shape(Timing(), late)
    assert result["admitted"] == 15_000
    assert result["simulated_span_s"] >= 100.0 + (result["workload_writes"] - Timing().burst) / Timing().qps


def test_arrivals_without_a_workload_are_refused_with_its_name() -> None:
    arrivals = _scheduled()
    del arrivals["cq-3-cohort-2-medium-required-rack-5"]
    with pytest.raises(ValueError, match="cq-3-cohort-2-medium-required-rack-5"):
        bench_kueue_perf_shape(Timing(), arrivals)
