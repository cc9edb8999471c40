"""Forecasts from what a warm service keeps (``forecast.Forecaster``): the model's cluster kept and
brought up to date when only the queued Workloads change, and the last run kept for a few seconds,
give the very estimates a forecast on a cluster built afresh gives — at the kept run's start, shifted
to the asking time — whatever changed in between (queued jobs gone, new or changed under the same
name, running jobs, held queues, expected lengths, the clock)."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from topogov.domain.kueue import cluster_queue_name
from topogov.domain.kueue_model import PodSet, TopologyRequest, Workload
from topogov.domain.kueue_model.simulator import heads_of
from topogov.domain.labels import layer_label
from topogov.domain.policy import load_policy
from topogov.logic.whatif.forecast import Expected, Forecaster, Model, Queued, Running, alternatives, forecast
from topogov.logic.whatif.inputs import synthetic_fleet

POLICY = """
priorityClasses:
  - {name: high, value: 1000}
  - {name: low, value: 100}
fairShare: disabled
teams:
  team-a:
    principals: ["arn:aws:iam::123456789012:user/a"]
    quota: {nvidia.com/gpu: 96, vpc.amazonaws.com/efa: 0, cpu: 0, memory: 0}
    sharing: LendAndBorrow
    borrowLimit: {nvidia.com/gpu: 96}
    priorityClasses: [high, low]
    defaultPriorityClass: low
  team-b:
    principals: ["arn:aws:iam::123456789012:user/b"]
    quota: {nvidia.com/gpu: 96, vpc.amazonaws.com/efa: 0, cpu: 0, memory: 0}
    sharing: LendAndBorrow
    borrowLimit: {nvidia.com/gpu: 96}
    priorityClasses: [high, low]
    defaultPriorityClass: low
"""
L2, L3 = layer_label(2), layer_label(3)
TOPOLOGIES = [None, TopologyRequest(required=L3), TopologyRequest(preferred=L3), TopologyRequest(required=L2)]


@pytest.fixture(scope="module")
def model():
    # 24 p5.48xlarge (192 GPUs): 2 layer-2 nodes of 3 layer-3 nodes of 4 hosts
    return Model(synthetic_fleet("p5.48xlarge", (1, 2, 3), 4), load_policy(POLICY))


def workload(model, rng, name, created):
    team = rng.choice(["team-a", "team-b"])
    pods = rng.choice([1, 1, 2, 3, 4, 6, 8])
    ps = PodSet(pods, {"nvidia.com/gpu": rng.choice([8, 8, 4])}, topology=rng.choice(TOPOLOGIES))
    queue = cluster_queue_name(model.policy.teams[team])
    return Workload(f"{team}/{name}", queue, (ps,), rng.choice([100, 100, 1000]), created)


def expected(rng):
    return Expected(rng.choice([300.0, 900.0, 2400.0, 5000.0, None]), "expected_duration")


def cluster_now(model, rng):
    """Running jobs as the model admitted them an hour ago, and the jobs still waiting."""
    cluster = model.cluster([])
    for i in range(40):
        cluster.submit(workload(model, rng, f"j{i:02d}", -3600.0 - i))
    cluster.advance(-3600.0)
    admitted = cluster.admitted()
    running = [Running(a.workload, a.pod_sets, a.reserved_at, expected(rng)) for a in admitted.values()]
    queued = [
        Queued(r.workload, expected(rng), rng.choice([None, None, 120.0, 900.0]))
        for name, r in cluster.records.items()
        if name not in admitted
    ]
    return running, queued


def change(model, rng, running, queued, step):
    """What a few seconds change: queued jobs leave, arrive, change under their name; rarely a
    running job ends; expected lengths move."""
    queued = list(queued)
    if queued and rng.random() < 0.5:
        queued.pop(rng.randrange(len(queued)))
    if rng.random() < 0.5:
        queued.append(Queued(workload(model, rng, f"new{step}", -100.0 + step), expected(rng)))
    if queued and rng.random() < 0.3:  # the same name, another priority or shape
        i = rng.randrange(len(queued))
        wl = workload(model, rng, "x", queued[i].workload.created)
        queued[i] = replace(queued[i], workload=replace(wl, name=queued[i].workload.name))
    if queued and rng.random() < 0.2:
        i = rng.randrange(len(queued))
        queued[i] = replace(queued[i], expected=expected(rng))
    if running and rng.random() < 0.15:
        running = [r for r in running if r is not rng.choice(running)]
    return running, queued


def shifted(estimates, age):
    """A forecast made ``age`` seconds before it is asked: as the kept run answers."""
    out = {}
    for name, est in estimates.items():
        est = replace(est, age_s=age)
        if est.start_s is not None and age:
            est.start_s = max(0.0, est.start_s - age)
        out[name] = est
    return out


@pytest.mark.parametrize("seed", range(5))
def test_kept_forecasts_equal_fresh_ones_whatever_changed(model, seed):
    rng = random.Random(seed)
    running, queued = cluster_now(model, rng)
    assert running and queued
    kept = Forecaster(model, fresh_s=10.0)
    now, started_at, runs, builds = -40.0, None, 0, 0  # through 0: a change's requeue (at 1 s) is ahead
    for step in range(14):
        if step:
            running, queued = (
                change(model, rng, running, queued, step) if rng.random() < 0.6 else (running, queued)
            )
            now += rng.choice([0.0, 2.0, 4.0, 30.0])
        stopped = {cluster_queue_name(model.policy.teams["team-b"])} if rng.random() < 0.15 else set()
        names = [q.workload.name for q in queued]
        targets = None if rng.random() < 0.3 else rng.sample(names, min(len(names), rng.choice([1, 3])))
        got = kept.forecast(running, queued, at=now, targets=targets, stopped=stopped, now_s=now)
        if kept.runs != runs:  # a new run, from now
            runs, started_at = kept.runs, now
        assert started_at is not None
        fresh = forecast(model, running, queued, targets=targets, stopped=stopped, now_s=started_at)
        assert got == shifted(fresh, now - started_at), step
        if kept.builds != builds:
            builds = kept.builds
    assert 1 < kept.runs < 14 and kept.builds < kept.runs  # kept runs and kept clusters were used


def test_a_kept_run_is_continued_for_later_jobs_and_answers_as_of_its_start(model):
    rng = random.Random(11)
    running, queued = cluster_now(model, rng)
    queued = [replace(q, expected=Expected(600.0, "expected_duration")) for q in queued]
    kept = Forecaster(model, fresh_s=10.0)
    first, last = queued[0].workload.name, queued[-1].workload.name
    a = kept.forecast(running, queued, at=0.0, targets=[first], now_s=1000.0)
    b = kept.forecast(running, queued, at=5.0, targets=[last], now_s=1005.0)
    assert kept.runs == 1 and kept.builds == 1
    fresh = forecast(model, running, queued, now_s=1000.0)
    assert a[first] == fresh[first]
    assert b[last] == shifted({last: fresh[last]}, 5.0)[last] and b[last].age_s == 5.0
    c = kept.forecast(running, queued, at=11.0, targets=[last], now_s=1011.0)  # too old: run again
    assert kept.runs == 2 and kept.builds == 1
    assert c[last] == forecast(model, running, queued, targets=[last], now_s=1011.0)[last]


def test_alternatives_on_the_kept_cluster_equal_those_on_a_fresh_one(model):
    rng = random.Random(5)
    running, queued = cluster_now(model, rng)
    kept = Forecaster(model)
    kept.forecast(running, queued, at=0.0, now_s=50.0)
    tried = 0
    for q in queued:
        if q.workload.pod_sets[0].topology is None:
            continue
        fresh = alternatives(model, running, queued, q.workload.name, now_s=50.0)
        assert alternatives(model, running, queued, q.workload.name, now_s=50.0, kept=kept, at=0.0) == fresh
        tried += 1
    assert tried and kept.builds == 1
    kept.forecast(running, queued, at=1.0, now_s=51.0)  # the kept run still answers: no new run
    assert kept.runs == 1


def test_a_queued_job_changed_under_its_name_keeps_no_trace_of_its_old_place(model):
    # one 8-host job at a time fits; b-2 was high priority (first in line), now low: it waits its turn
    team = "team-b"
    queue = cluster_queue_name(model.policy.teams[team])

    def job(name, priority, created):
        ps = PodSet(8, {"nvidia.com/gpu": 8}, topology=TopologyRequest(required=L2))
        return Workload(f"{team}/{name}", queue, (ps,), priority, created)

    hour = Expected(3600.0, "expected_duration")
    big = model.cluster([])
    big.submit(job("b-0", 100, -900.0))
    big.advance(-900.0)
    (held,) = big.admitted().values()
    running = [Running(held.workload, held.pod_sets, -900.0, Expected(1000.0, "expected_duration"))]
    before = [Queued(job("b-1", 100, -800.0), hour), Queued(job("b-2", 1000, -700.0), hour)]
    after = [before[0], Queued(job("b-2", 100, -700.0), hour)]
    kept = Forecaster(model)
    first = kept.forecast(running, before, at=0.0, now_s=0.0)
    assert first["team-b/b-2"].start_s < first["team-b/b-1"].start_s
    again = kept.forecast(running, after, at=1.0, now_s=0.0)
    assert again == forecast(model, running, after, now_s=0.0)
    assert again["team-b/b-1"].start_s < again["team-b/b-2"].start_s


def test_a_kept_cluster_brought_up_to_date_holds_what_a_fresh_one_holds(model):
    rng = random.Random(2)
    running, queued = cluster_now(model, rng)
    kept = Forecaster(model)
    kept.cluster(running, queued, at=0.0)
    for step in range(6):
        _, queued = change(model, rng, running, queued, step)
        mine = kept.cluster(running, queued, at=0.0)
        fresh = model.cluster(running)
        for q in queued:
            fresh.submit(q.workload)
        assert mine.next_requeue() is None and fresh.next_requeue() is None  # no requeue a change asked
        assert heads_of(mine) == heads_of(fresh)
        assert mine.admitted() == fresh.admitted() and mine.pending() == fresh.pending()
    assert kept.builds == 1


def test_the_build_hook_runs_once_per_build_not_per_request(model):
    rng = random.Random(3)
    running, queued = cluster_now(model, rng)
    calls = []
    kept = Forecaster(model, on_build=lambda: calls.append(kept.builds))
    kept.forecast(running, queued, at=0.0, now_s=50.0)
    kept.forecast(running, queued, at=20.0, now_s=70.0)  # a new run on the kept cluster
    kept.cluster(running, queued, at=30.0)
    assert calls == [1] and kept.runs == 2
    kept.cluster(running[1:], queued, at=40.0)  # a running job changed: built again
    assert calls == [1, 2]
