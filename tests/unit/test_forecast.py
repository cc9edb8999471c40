"""Start estimates (``topogov.logic.whatif.forecast``): the Kueue model run forward from now, on cases
small enough to work out by hand. The running jobs are admitted by the model itself first (their
recorded admission is what Kueue would have written), then the clock runs."""

from __future__ import annotations

import pytest

from topogov.domain.kueue import cluster_queue_name
from topogov.domain.kueue_model import PodSet, PodSetAdmission, TopologyAssignment, TopologyRequest, Workload
from topogov.domain.kueue_model.simulator import REQUEUE_BATCH_S
from topogov.domain.labels import layer_label
from topogov.domain.policy import load_policy
from topogov.logic.whatif.forecast import (
    Expected,
    Model,
    Queued,
    Running,
    alternatives,
    expected_from,
    forecast,
)
from topogov.logic.whatif.inputs import synthetic_fleet

POLICY = """
priorityClasses:
  - {name: high, value: 1000}
  - {name: low, value: 100}
fairShare: disabled
teams:
  team-a:
    principals: ["arn:aws:iam::123456789012:user/a"]
    quota: {nvidia.com/gpu: 64, vpc.amazonaws.com/efa: 0, cpu: 0, memory: 0}
    sharing: LendAndBorrow
    borrowLimit: {nvidia.com/gpu: 64}
    priorityClasses: [high, low]
    defaultPriorityClass: low
  team-b:
    principals: ["arn:aws:iam::123456789012:user/b"]
    quota: {nvidia.com/gpu: 64, vpc.amazonaws.com/efa: 0, cpu: 0, memory: 0}
    sharing: LendAndBorrow
    borrowLimit: {nvidia.com/gpu: 64}
    priorityClasses: [low]
"""
L2, L3 = layer_label(2), layer_label(3)
REQUEUE = REQUEUE_BATCH_S  # Kueue moves inadmissible workloads back in batches (1 s) after a change


@pytest.fixture(scope="module")
def model():
    policy = load_policy(POLICY)
    # 16 p5.48xlarge (128 GPUs): 2 layer-2 nodes of 2 layer-3 nodes of 4 hosts
    return Model(synthetic_fleet("p5.48xlarge", (1, 2, 2), 4), policy)


def workload(model, team, name, pods, *, required=None, preferred=None, priority=100, created=-1000.0):
    topology = TopologyRequest(required=required, preferred=preferred) if required or preferred else None
    queue = cluster_queue_name(model.policy.teams[team])
    return Workload(
        f"{team}/{name}", queue, (PodSet(pods, {"nvidia.com/gpu": 8}, topology=topology),), priority, created
    )


def running(model, *specs):
    """Admit ``specs`` ((workload, started_s, expected_s), ...) one by one on the model, as Kueue
    would have, and return them as the running jobs it recorded."""
    out = []
    for wl, started, seconds in specs:
        cluster = model.cluster(out)
        cluster.submit(wl)
        cluster.advance(started)
        adm = cluster.admitted()[wl.name]
        out.append(Running(wl, adm.pod_sets, started, Expected(seconds, "expected_duration")))
    return out


def test_a_job_waits_until_the_one_holding_its_room_ends_and_says_so(model):
    # the fleet is full: team-a's 64 GPUs end at 500 s, team-b's own 64 at 3600 s; b-wait borrows
    # team-a's idle quota once a-big ends and lands on its nodes
    held = running(
        model,
        (workload(model, "team-a", "a-big", 8, preferred=L3), -100.0, 600.0),
        (workload(model, "team-b", "b-run", 8, preferred=L3), -50.0, 3650.0),
    )
    wait = Queued(workload(model, "team-b", "b-wait", 4, required=L3), Expected(60.0, "expected_duration"))
    est = forecast(model, held, [wait])["team-b/b-wait"]
    assert est.start_s == 500.0 + REQUEUE  # started 100 s ago, 600 s long; then Kueue's requeue batch
    assert est.waits_for == ("team-a/a-big",)
    assert set(est.hosts) < set(held[0].pod_sets[0].pods)
    assert est.preempts == () and est.unknown_ends == () and est.overdue == ()


def test_an_unknown_end_leaves_no_estimate_and_names_the_job(model):
    held = running(
        model,
        (workload(model, "team-a", "a-big", 8, preferred=L3), -100.0, 600.0),
        (workload(model, "team-b", "b-run", 8, preferred=L3), -50.0, 3650.0),
    )
    unknown = [Running(r.workload, r.pod_sets, r.started_s) for r in held]
    est = forecast(model, unknown, [Queued(workload(model, "team-b", "b-wait", 4, required=L3))])
    assert est["team-b/b-wait"].start_s is None
    assert est["team-b/b-wait"].unknown_ends == ("team-a/a-big", "team-b/b-run")
    # one known end is enough
    est = forecast(
        model, [held[0], unknown[1]], [Queued(workload(model, "team-b", "b-wait", 4, required=L3))]
    )
    assert est["team-b/b-wait"].start_s == 500.0 + REQUEUE


def test_a_job_past_its_expected_end_is_taken_to_end_now(model):
    held = running(
        model,
        (workload(model, "team-a", "a-big", 8, preferred=L3), -700.0, 600.0),
        (workload(model, "team-b", "b-run", 8, preferred=L3), -50.0, 3650.0),
    )
    est = forecast(model, held, [Queued(workload(model, "team-b", "b-wait", 4, required=L3))])[
        "team-b/b-wait"
    ]
    assert est.start_s == 0.0 and est.overdue == ("team-a/a-big",)


def test_the_queue_runs_in_kueues_order_each_job_for_its_expected_length(model):
    big = running(model, (workload(model, "team-a", "a-big", 16, preferred=L3), 0.0, 300.0))
    first = Queued(workload(model, "team-a", "a-1", 8, created=-50.0), Expected(200.0, "expected_duration"))
    second = Queued(workload(model, "team-a", "a-2", 8, created=-40.0), Expected(100.0, "expected_duration"))
    late = Queued(workload(model, "team-a", "a-3", 16, created=-30.0), Expected(100.0, "expected_duration"))
    est = forecast(model, big, [second, late, first])
    # a-1 and a-2 (64 GPUs each) both start when a-big ends at 300; a-3 (all 128) once both ended
    assert est["team-a/a-1"].start_s == 300.0 + REQUEUE and est["team-a/a-2"].start_s == 300.0 + REQUEUE
    assert est["team-a/a-3"].start_s == 500.0 + 2 * REQUEUE
    assert est["team-a/a-3"].waits_for == ("team-a/a-1", "team-a/a-2", "team-a/a-big")  # all on its nodes
    only = forecast(model, big, [second, late, first], targets=["team-a/a-1"])
    assert list(only) == ["team-a/a-1"] and only["team-a/a-1"].start_s == 300.0 + REQUEUE


def test_a_team_reclaiming_its_lent_quota_starts_now_by_preempting_the_borrower(model):
    # team-a runs on all 128 GPUs, 64 of them team-b's; team-b's job takes its quota back
    big = running(model, (workload(model, "team-a", "a-big", 16), -100.0, 3600.0))
    est = forecast(model, big, [Queued(workload(model, "team-b", "b-back", 8))])["team-b/b-back"]
    assert est.start_s == 0.0 and est.preempts == ("team-a/a-big",)


def hand_placed(model, team, name, hosts, started_s, seconds):
    """A running job as Kueue records it: hostname-level topology assignment on ``hosts``."""
    wl = workload(model, team, name, len(hosts), required=L3)
    ps = PodSetAdmission(
        "main",
        {"nvidia.com/gpu": "p5.48xlarge"},
        {"nvidia.com/gpu": 8 * len(hosts)},
        len(hosts),
        TopologyAssignment(("kubernetes.io/hostname",), tuple(((h,), 1) for h in hosts)),
    )
    return Running(wl, (ps,), started_s, Expected(seconds, "expected_duration"))


def test_a_required_job_starts_once_its_fallback_relaxes_it(model):
    # two hosts busy in each of the four layer-3 nodes (4 hosts each): none has 4 free hosts while
    # these run; the fallback at 120 s makes it preferred and it starts then, across two
    held = [
        hand_placed(model, "team-a", f"a-{leaf}", (f"n{4 * leaf:05d}", f"n{4 * leaf + 1:05d}"), -10.0, 3600.0)
        for leaf in range(4)
    ]
    hosts = {h for r in held for ps in r.pod_sets for h in ps.pods}
    wait = Queued(workload(model, "team-b", "b-req", 4, required=L3), fallback_s=120.0)
    est = forecast(model, held, [wait])["team-b/b-req"]
    assert est.start_s == 120.0 and est.relaxed and not set(est.hosts) & hosts
    assert est.waits_for == ()  # nothing ended: the fallback let it start
    # and the cheapest way to start now: required one level up (a layer-2 node has 4 free hosts)
    alt = alternatives(model, held, [wait], "team-b/b-req")
    assert alt == [{"topology": f"required {L2}", "nodes": alt[0]["nodes"], "preempts": []}]
    assert len(alt[0]["nodes"]) == 4 and not set(alt[0]["nodes"]) & hosts


def test_nothing_to_offer_when_the_job_already_asks_for_the_loosest_way(model):
    big = running(model, (workload(model, "team-a", "a-big", 16, preferred=L3), -100.0, 600.0))
    wait = Queued(workload(model, "team-b", "b-any", 4))
    assert alternatives(model, big, [wait], "team-b/b-any") == []


def test_the_expected_length_comes_from_the_best_founded_source():
    assert expected_from(600.0, 7200.0, {}, 16) == Expected(600.0, "expected_duration")
    observed = {16: [100.0, 300.0, 200.0, 400.0], 8: [5.0]}
    assert expected_from(None, 7200.0, observed, 16) == Expected(
        250.0, "the team's median of 4 finished 16-GPU jobs"
    )
    assert expected_from(None, 7200.0, observed, 8) == Expected(7200.0, "activeDeadlineSeconds")
    assert expected_from(None, None, observed, 8).seconds is None


def test_a_live_workload_reads_as_the_model_s():
    from topogov.domain.kueue_model.convert import admission_of, reserved_at, workload_of, workload_state
    from topogov.domain.views.workload import WorkloadView

    body = {
        "metadata": {
            "name": "job-train-1a2b3",
            "namespace": "team-a",
            "uid": "wl-uid",
            "creationTimestamp": "2026-12-02T06:00:00Z",
            "ownerReferences": [{"kind": "Job", "uid": "job-uid"}],
        },
        "spec": {
            "queueName": "team-a-queue",
            "priority": 1000,
            "podSets": [
                {
                    "name": "main",
                    "count": 4,
                    "topologyRequest": {"required": L3},
                    "template": {
                        "spec": {
                            "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"},
                            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                            "initContainers": [{"resources": {"requests": {"cpu": "4"}}}],
                            "containers": [
                                {"resources": {"requests": {"nvidia.com/gpu": "8", "cpu": "1500m"}}},
                                {"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
                            ],
                        }
                    },
                }
            ],
        },
        "status": {
            "conditions": [
                {"type": "QuotaReserved", "status": "True", "lastTransitionTime": "2026-12-02T06:00:30Z"}
            ],
            "admission": {
                "clusterQueue": "team-a-cq",
                "podSetAssignments": [
                    {
                        "name": "main",
                        "flavors": {"nvidia.com/gpu": "p5.48xlarge", "cpu": "p5.48xlarge"},
                        "resourceUsage": {"nvidia.com/gpu": "32", "cpu": "16"},
                        "count": 4,
                        "topologyAssignment": {
                            "levels": ["kubernetes.io/hostname"],
                            "domains": [{"values": ["n1"], "count": 2}, {"values": ["n2"], "count": 2}],
                        },
                    }
                ],
            },
        },
    }
    obj = WorkloadView.from_api(body)  # as the adapter reads it
    wl = workload_of(obj, {})
    assert (wl.name, wl.cluster_queue, wl.priority, wl.uid, wl.job_uid) == (
        "team-a/job-train-1a2b3", "team-a-cq", 1000, "wl-uid", "job-uid"
    )  # fmt: skip
    ps = wl.pod_sets[0]
    # containers summed (2.5 CPU), the init container's 4 CPU larger: Kueue counts 4000m
    assert ps.count == 4 and ps.requests == {"nvidia.com/gpu": 8, "cpu": 4000, "memory": 1024**3}
    assert (
        ps.topology == TopologyRequest(required=L3)
        and ps.node_selector
        and ps.tolerations[0].operator == "Exists"
    )
    (adm,) = admission_of(obj)
    assert adm.pods == ("n1", "n1", "n2", "n2") and adm.usage == {"nvidia.com/gpu": 32, "cpu": 16000}
    assert workload_state(obj) == "admitted" and reserved_at(obj) - wl.created == 30.0
    pending = WorkloadView.from_api({**body, "status": {}})
    assert workload_state(pending) == "pending"
    assert workload_of(pending, {"team-a/team-a-queue": "team-a-cq"}).cluster_queue == "team-a-cq"
    with pytest.raises(KeyError):
        workload_of(pending, {})


def test_a_run_stopped_by_its_time_budget_says_which_jobs_it_did_not_reach(model):
    big = running(model, (workload(model, "team-a", "a-big", 16, preferred=L3), 0.0, 300.0))
    first = Queued(workload(model, "team-a", "a-1", 8, created=-50.0), Expected(200.0, "expected_duration"))
    late = Queued(workload(model, "team-a", "a-3", 16, created=-30.0), Expected(100.0, "expected_duration"))
    steps = iter(range(100))
    est = forecast(model, big, [first, late], stop=lambda: next(steps) >= 3)  # 0 s, 300 s (a-big ends), 301 s
    assert est["team-a/a-1"].start_s == 300.0 + REQUEUE and not est["team-a/a-1"].cut_short
    assert est["team-a/a-3"].start_s is None and est["team-a/a-3"].cut_short
    assert all(e.cut_short for e in forecast(model, big, [first, late], stop=lambda: True).values())
