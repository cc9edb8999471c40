"""The model's admission (quota, flavors, preemption, queues) against Kueue v0.17.0's own tests.

Single-cycle cases reproduce ``pkg/scheduler/scheduler_tas_test.go`` (``TestScheduleForTASPreemption``,
``TestScheduleForTASCohorts``; case names quoted) with their nodes, queues, pre-admitted workloads and
expected messages; the rest check the quota arithmetic of ``pkg/cache/scheduler/resource_node.go``,
the flavor assigner's messages, stop policies, fair sharing, and invariants over random event
sequences.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topogov.domain.kueue_model import (
    HOSTNAME,
    Cluster,
    ClusterQueue,
    FlavorQuotas,
    Node,
    PodSet,
    PodSetAdmission,
    Preemption,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Topology,
    TopologyAssignment,
    TopologyRequest,
    Workload,
)
from topogov.domain.kueue_model.quota import QuotaState
from topogov.domain.kueue_model.simulator import heads_of

GI = 2**30
HOST_ONLY = Topology("tas-single-level", (HOSTNAME,))
TAS_DEFAULT = ResourceFlavor("tas-default", {"tas-node": "true"}, "tas-single-level")


def host(name, cpu, mem_gi):
    return Node(
        name, {"tas-node": "true", HOSTNAME: name}, {"cpu": cpu * 1000, "memory": mem_gi * GI, "pods": 10}
    )


def cq(name, cpu, mem_gi, *, cohort=None, borrow=None, flavor="tas-default", **pre):
    quotas = {
        "cpu": ResourceQuota(cpu * 1000, borrow),
        "memory": ResourceQuota(mem_gi * GI, 0 if borrow == 0 else None),
    }
    group = ResourceGroup(("cpu", "memory"), (FlavorQuotas(flavor, quotas),))
    return ClusterQueue(name, (group,), cohort=cohort, preemption=Preemption(**pre))


def wl(
    name, queue, count, cpu, *, required=None, preferred=None, priority=0, created=0.0, uid="", job_uid=""
):
    topology = TopologyRequest(required=required, preferred=preferred)
    return Workload(
        name, queue, (PodSet(count, {"cpu": cpu * 1000}, "one", topology),), priority, created, uid, job_uid
    )


def on(cluster, workload, hosts_counts, cpu_each, at=0.0):
    """Pre-admit ``workload`` with this topology assignment (upstream's ``ReserveQuotaAt``)."""
    count = sum(n for _, n in hosts_counts)
    ta = TopologyAssignment((HOSTNAME,), tuple(((h,), n) for h, n in hosts_counts))
    ps = PodSetAdmission("one", {"cpu": "tas-default"}, {"cpu": cpu_each * 1000 * count}, count, ta)
    cluster.add_admitted(workload, [ps], at)


def cluster(nodes, queues, **kw):
    return Cluster(nodes=nodes, flavors=[TAS_DEFAULT], topologies=[HOST_ONLY], cluster_queues=queues, **kw)


def admitted_hosts(c, name):
    return [(values[-1], n) for values, n in c.admitted()[name].pod_sets[0].topology.domains]


# --- TestScheduleForTASPreemption ---------------------------------------------------------------
MAIN = cq("tas-main", 50, 50, within_cluster_queue="LowerPriority")


def test_low_priority_workload_is_preempted_mid_priority_workload_survives():
    """scheduler_tas_test.go: "low priority workload is preempted, mid-priority workload survives"."""
    c = cluster([host("x1", 5, 5)], [MAIN])
    on(c, wl("mid-priority-admitted", "tas-main", 1, 2, required=HOSTNAME, priority=2), [("x1", 1)], 2)
    on(c, wl("low-priority-admitted", "tas-main", 1, 2, required=HOSTNAME, priority=1), [("x1", 1)], 2)
    c.submit(wl("foo", "tas-main", 1, 2, preferred=HOSTNAME, priority=3, uid="wl-foo", job_uid="job-foo"))
    result = c.cycle(0)
    assert [(e.name, e.reason, e.preemption_reason) for e in result.evicted] == [
        ("low-priority-admitted", "Preempted", "InClusterQueue")
    ]
    assert result.evicted[0].message == (
        "Preempted to accommodate a workload (UID: wl-foo, JobUID: job-foo) due to prioritization in the "
        "ClusterQueue; preemptor path: /tas-main; preemptee path: /tas-main"
    )
    assert c.pending()["foo"].message == (
        "couldn't assign flavors to pod set one: topology \"tas-single-level\" doesn't allow to fit any of 1 "
        'pod(s). Total nodes: 1; excluded: resource "cpu": 1. Pending the preemption of 1 workload(s)'
    )
    assert heads_of(c) == ["foo"]  # wantLeft: tas-main: foo


def test_low_priority_workload_is_preempted_even_though_there_is_enough_capacity_but_fragmented():
    """scheduler_tas_test.go: "low priority workload is preempted even though there is enough
    capacity, but fragmented": 1 unit free on each of two hosts, 2 pods required on one host."""
    c = cluster([host("x1", 5, 5), host("y1", 5, 5)], [MAIN])
    on(c, wl("mid-priority-admitted", "tas-main", 1, 4, required=HOSTNAME, priority=2), [("x1", 1)], 4)
    on(c, wl("low-priority-admitted", "tas-main", 1, 4, required=HOSTNAME, priority=1), [("y1", 1)], 4)
    c.submit(wl("foo", "tas-main", 2, 1, required=HOSTNAME, priority=3, uid="wl-foo", job_uid="job-foo"))
    result = c.cycle(0)
    assert [e.name for e in result.evicted] == ["low-priority-admitted"]
    assert c.pending()["foo"].message == (
        'couldn\'t assign flavors to pod set one: topology "tas-single-level" allows to fit only 1 out of 2 '
        "pod(s). Pending the preemption of 1 workload(s)"
    )
    c.settle(1)
    assert admitted_hosts(c, "foo") == [("y1", 2)]


def test_workload_with_equal_priority_awaits_for_other_workloads_to_complete():
    """scheduler_tas_test.go: "workload with equal priority awaits for other workloads to complete":
    the waiting head cannot preempt an equal priority, becomes inadmissible, and the lower-priority
    workload behind it is still queued after the cycle (admitted by the next one)."""
    c = cluster([host("x1", 5, 5)], [MAIN])
    on(c, wl("mid-priority-admitted", "tas-main", 1, 4, required=HOSTNAME, priority=2), [("x1", 1)], 4)
    c.submit(wl("low-priority-which-would-fit", "tas-main", 1, 1, required=HOSTNAME, priority=1, created=1))
    c.submit(wl("mid-priority-waiting", "tas-main", 2, 1, required=HOSTNAME, priority=2, created=2))
    result = c.cycle(0)
    assert not result.admitted and not result.evicted
    assert c.pending()["mid-priority-waiting"].message == (
        "couldn't assign flavors to pod set one: "
        'topology "tas-single-level" allows to fit only 1 out of 2 pod(s)'
    )
    assert heads_of(c) == ["low-priority-which-would-fit"]
    assert [a.name for a in c.cycle(1).admitted] == ["low-priority-which-would-fit"]


# --- TestScheduleForTASCohorts ------------------------------------------------------------------
TWO_HOSTS = [host("x1", 3, 5), host("y1", 5, 3)]
CQ_A = cq(
    "tas-cq-a",
    4,
    4,
    cohort="tas-cohort-main",
    within_cluster_queue="LowerPriority",
    reclaim_within_cohort="Any",
)
CQ_B = cq("tas-cq-b", 4, 4, cohort="tas-cohort-main", reclaim_within_cohort="Any")


def test_workload_which_requires_borrowing_gets_scheduled():
    """scheduler_tas_test.go: "workload which requires borrowing gets scheduled": 6 pods preferred
    per host fit no host, so at the top level y1 takes 5 and the tightest host the last one."""
    c = cluster(TWO_HOSTS, [CQ_A, CQ_B])
    c.submit(wl("a1", "tas-cq-a", 6, 1, preferred=HOSTNAME))
    assert [a.name for a in c.cycle(0).admitted] == ["a1"]
    assert admitted_hosts(c, "a1") == [("x1", 1), ("y1", 5)]


def test_reclaim_within_cohort_single_borrowing_workload_gets_preempted():
    """scheduler_tas_test.go: "reclaim within cohort; single borrowing workload gets preempted"."""
    c = cluster(TWO_HOSTS, [CQ_A, CQ_B])
    on(c, wl("a1-admitted", "tas-cq-a", 5, 1, required=HOSTNAME), [("x1", 5)], 1)
    c.submit(wl("b1", "tas-cq-b", 4, 1, preferred=HOSTNAME, uid="wl-b1", job_uid="job-b1"))
    result = c.cycle(0)
    assert [(e.name, e.preemption_reason) for e in result.evicted] == [("a1-admitted", "InCohortReclamation")]
    assert result.evicted[0].message == (
        "Preempted to accommodate a workload (UID: wl-b1, JobUID: job-b1) due to reclamation within the "
        "cohort; preemptor path: /tas-cohort-main/tas-cq-b; preemptee path: /tas-cohort-main/tas-cq-a"
    )
    assert c.pending()["b1"].message == (
        "couldn't assign flavors to pod set one: insufficient unused quota for cpu in flavor tas-default, "
        "1 more needed. Pending the preemption of 1 workload(s)"
    )


@pytest.mark.parametrize("reclaim", ["LowerPriority", "Any"])
def test_preempting_workload_without_targets_reserves_capacity_unless_it_can_always_reclaim(reclaim):
    """scheduler_tas_test.go: "preempting workload without targets reserves capacity so that lower
    priority workload cannot use it" / "... doesn't reserve capacity when it can always reclaim"."""
    a = cq("tas-cq-a", 8, 4, cohort="tas-cohort-main", borrow=0, within_cluster_queue="LowerPriority",
           reclaim_within_cohort=reclaim)  # fmt: skip
    c = cluster([host("y1", 5, 3)], [a, CQ_B])
    on(c, wl("a1-admitted", "tas-cq-a", 2, 1, required=HOSTNAME, priority=2), [("y1", 2)], 1)
    c.submit(wl("a2", "tas-cq-a", 4, 1, preferred=HOSTNAME, priority=2))
    c.submit(wl("b1", "tas-cq-b", 3, 1, preferred=HOSTNAME, priority=1))
    result = c.cycle(0)
    assert c.pending()["a2"].message == (
        "couldn't assign flavors to pod set one: "
        'topology "tas-single-level" allows to fit only 3 out of 4 pod(s)'
    )
    if reclaim == "Any":
        assert [x.name for x in result.admitted] == ["b1"]
    else:
        assert not result.admitted
        assert c.pending()["b1"].message == "Workload no longer fits after processing another workload"
        assert heads_of(c) == ["b1"]  # wantLeft: tas-cq-b: b1 (skipped entries go back at once)


# --- quota and flavors --------------------------------------------------------------------------
def test_lending_and_borrowing_limits():
    """resource_node.go ``available`` / ``potentialAvailable``: A lends 4 of 10 (keeps 6 local), B
    may borrow 3 above its 10. Unused, A can reach 20 and B 13; once A uses 12 (2 of B's), B has 8."""
    fr = ("f", "cpu")
    a = ClusterQueue(
        "a", (ResourceGroup(("cpu",), (FlavorQuotas("f", {"cpu": ResourceQuota(10, None, 4)}),)),), "c"
    )
    b = ClusterQueue(
        "b", (ResourceGroup(("cpu",), (FlavorQuotas("f", {"cpu": ResourceQuota(10, 3)}),)),), "c"
    )
    q = QuotaState([a, b])
    assert (q.available("a", fr), q.potential_available("a", fr)) == (20, 20)
    assert (q.available("b", fr), q.potential_available("b", fr)) == (13, 13)
    q.add("a", {fr: 12})
    assert (q.available("a", fr), q.available("b", fr)) == (8, 8)
    assert q.borrow_height("a", fr, 0) == (1, False) and q.borrow_height("b", fr, 1) == (0, True)


GPU_NODES = [
    Node(f"g{i}", {"tas-node": "true", HOSTNAME: f"g{i}"}, {"nvidia.com/gpu": 8, "pods": 110})
    for i in range(2)
]


def gpu_cq(name, gpus, **kw):
    group = ResourceGroup(
        ("nvidia.com/gpu",), (FlavorQuotas("tas-default", {"nvidia.com/gpu": ResourceQuota(gpus)}),)
    )
    return ClusterQueue(name, (group,), **kw)


ON_ONE_HOST = TopologyRequest(required=HOSTNAME)


def gpu_wl(name, queue, pods, gpus, topology=ON_ONE_HOST, **kw):
    return Workload(name, queue, (PodSet(pods, {"nvidia.com/gpu": gpus}, topology=topology),), **kw)


def test_quota_messages_are_kuesues():
    """fitsResourceQuota: over the queue's maximum capacity is NoFit, short of unused quota waits."""
    c = cluster(GPU_NODES, [gpu_cq("q", 8)])
    c.submit(gpu_wl("too-big", "q", 2, 8))
    c.submit(gpu_wl("fits", "q", 1, 8, created=1))
    c.submit(gpu_wl("waits", "q", 1, 4, created=2))
    c.settle(0)
    assert set(c.admitted()) == {"fits"}
    assert c.pending()["too-big"].message == (
        "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor "
        "tas-default, previously considered podsets requests (0) + current podset request (16) > maximum "
        "capacity (8)"
    )
    assert c.pending()["waits"].message == (
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor "
        "tas-default, 4 more needed"
    )
    c.finish("fits", 1)
    c.settle(1)
    assert set(c.admitted()) == {"waits"}


def test_a_flavor_whose_quota_fits_but_topology_does_not_yields_to_the_next_flavor_next_cycle():
    """assignFlavors: quota picks flavor a; placement fails there even empty (NoFit), and the head's
    flavor attempt state sends the next cycle to flavor b (PendingFlavors, NextFlavorToTry)."""
    nodes = [Node("a0", {"t": "a", HOSTNAME: "a0"}, {"nvidia.com/gpu": 4, "pods": 110})]
    nodes += [
        Node(f"b{i}", {"t": "b", HOSTNAME: f"b{i}"}, {"nvidia.com/gpu": 8, "pods": 110}) for i in range(2)
    ]
    flavors = [
        ResourceFlavor("a", {"t": "a"}, "tas-single-level"),
        ResourceFlavor("b", {"t": "b"}, "tas-single-level"),
    ]
    quota = {"nvidia.com/gpu": ResourceQuota(16)}
    group = ResourceGroup(("nvidia.com/gpu",), (FlavorQuotas("a", quota), FlavorQuotas("b", quota)))
    c = Cluster(
        nodes=nodes, flavors=flavors, topologies=[HOST_ONLY], cluster_queues=[ClusterQueue("q", (group,))]
    )
    c.submit(gpu_wl("job", "q", 1, 8))
    first = c.cycle(0)
    assert not first.admitted and heads_of(c) == ["job"]
    message = c.pending()["job"].message
    assert message.endswith('any of 1 pod(s). Total nodes: 1; excluded: resource "nvidia.com/gpu": 1')
    assert c.cycle(1).admitted[0].pod_sets[0].flavors == {"nvidia.com/gpu": "b"}


def test_a_queue_with_a_non_tas_flavor_skips_it_for_a_tas_pod_set():
    """tas_flavorassigner.go: a pod set asking for topology skips a flavor without ``topologyName``
    that provides its resources ("workload requiring TAS skips the non-TAS flavor")."""
    nodes = [Node("g0", {"tas-node": "true", HOSTNAME: "g0"}, {"nvidia.com/gpu": 8, "pods": 110})]
    flavors = [ResourceFlavor("plain"), TAS_DEFAULT]
    quota = {"nvidia.com/gpu": ResourceQuota(8)}
    group = ResourceGroup(
        ("nvidia.com/gpu",), (FlavorQuotas("plain", quota), FlavorQuotas("tas-default", quota))
    )
    c = Cluster(
        nodes=nodes, flavors=flavors, topologies=[HOST_ONLY], cluster_queues=[ClusterQueue("q", (group,))]
    )
    c.submit(gpu_wl("job", "q", 1, 8))
    c.settle(0)
    assert c.admitted()["job"].pod_sets[0].flavors == {"nvidia.com/gpu": "tas-default"}
    assert c.admitted()["job"].pod_sets[0].pods == ("g0",)


# --- queues, stop policies ----------------------------------------------------------------------
def test_stop_policies_hold_hold_and_drain_and_resume():
    """Hold keeps admitted work and admits nothing ("ClusterQueue q is inactive"); HoldAndDrain
    evicts it ("The ClusterQueue is stopped"); None resumes, queued heads first."""
    c = cluster(GPU_NODES, [gpu_cq("q", 16)])
    c.submit(gpu_wl("running", "q", 1, 8))
    c.settle(0)
    c.set_stop_policy("q", "Hold", 1)
    c.submit(gpu_wl("held", "q", 1, 8, created=1))
    c.settle(1)
    assert set(c.admitted()) == {"running"}
    assert (c.pending()["held"].reason, c.pending()["held"].message) == (
        "Inadmissible",
        "ClusterQueue q is inactive",
    )
    drained = c.set_stop_policy("q", "HoldAndDrain", 2)
    assert [(e.name, e.reason, e.message) for e in drained] == [
        ("running", "ClusterQueueStopped", "The ClusterQueue is stopped")
    ]
    c.settle(2)
    assert c.admitted() == {}
    c.set_stop_policy("q", "None", 3)
    order = [a.name for r in c.settle(3) for a in r.admitted]
    assert order == ["held", "running"]
    assert [c.admitted()[n].pod_sets[0].pods for n in order] == [("g0",), ("g1",)]


def test_an_inadmissible_workload_waits_for_capacity_to_be_freed_in_its_cohort():
    """BestEffortFIFO: a workload that did not fit is not retried by later cycles until a workload of
    its cohort finishes (QueueAssociatedInadmissibleWorkloadsAfter); its message stays the old one."""
    c = cluster(GPU_NODES, [gpu_cq("a", 16, cohort="c"), gpu_cq("b", 0, cohort="c")])
    c.submit(gpu_wl("big", "a", 2, 8, TopologyRequest(unconstrained=True)))
    c.submit(gpu_wl("next", "a", 1, 8, created=1))
    c.settle(0)
    assert set(c.admitted()) == {"big"} and "next" in c.pending()
    stale = c.pending()["next"].message
    c.cancel("big", 1)
    c.settle(1)
    assert set(c.admitted()) == {"next"} and stale.endswith("8 more needed")


# --- fair sharing -------------------------------------------------------------------------------
def test_dominant_resource_share_and_fair_reclaim():
    """fair_sharing.go ``dominantResourceShare``: borrowing 4 of 16 lendable GPUs is 250 per mille
    (125 with weight 2). A queue within nominal reclaims outright (FairSharingPreemptWithinNominal),
    taking the borrowing queue's most recent workload."""
    queues = [
        gpu_cq("a", 8, cohort="c", preemption=Preemption(reclaim_within_cohort="Any")),
        gpu_cq("b", 8, cohort="c"),
    ]
    c = cluster(GPU_NODES, queues, fair_sharing=True)
    for i in range(3):
        c.submit(Workload(f"b{i}", "b", (PodSet(1, {"nvidia.com/gpu": 4}),), created=i))
        c.settle(i)
    drs = c.snapshot.quota.drs("b")
    assert (drs.borrowing, drs.unweighted_ratio, drs.dominant_resource) == (True, 250.0, "nvidia.com/gpu")
    c.submit(Workload("a0", "a", (PodSet(1, {"nvidia.com/gpu": 8}),), created=10))
    evicted = [e for r in c.settle(10) for e in r.evicted]
    assert [(e.name, e.preemption_reason) for e in evicted] == [("b2", "InCohortReclamation")]
    assert "a0" in c.admitted()


# --- invariants over random sequences -----------------------------------------------------------
LAYER = "rack"
RANDOM_NODES = [
    Node(
        f"n{i}",
        {"tas-node": "true", LAYER: f"r{i // 3}", HOSTNAME: f"n{i}"},
        {"nvidia.com/gpu": 8, "cpu": 64_000, "pods": 110},
    )
    for i in range(9)
]
RANDOM_TOPOLOGY = Topology("tas-single-level", (LAYER, HOSTNAME))


def random_queues():
    def group(nominal, borrow):
        quota = {"nvidia.com/gpu": ResourceQuota(nominal, borrow)}
        return ResourceGroup(("nvidia.com/gpu",), (FlavorQuotas("tas-default", quota),))

    return [
        ClusterQueue("a", (group(32, 16),), "c", Preemption("LowerPriority", "Any")),
        ClusterQueue("b", (group(24, None),), "c", Preemption("Never", "Any")),
        ClusterQueue("d", (group(16, 0),), "c", Preemption("LowerOrNewerEqualPriority", "LowerPriority")),
    ]


events_st = st.lists(
    st.tuples(
        st.sampled_from(["submit", "submit", "submit", "finish", "cancel"]),
        st.sampled_from(["a", "b", "d"]),
        st.integers(1, 6),
        st.sampled_from([1, 2, 4, 8]),
        st.sampled_from([None, "rack", HOSTNAME]),
        st.sampled_from([0, 10]),
        st.integers(0, 50),
    ),
    max_size=25,
)


def replay(events, fair):
    c = Cluster(
        nodes=RANDOM_NODES,
        flavors=[TAS_DEFAULT],
        topologies=[RANDOM_TOPOLOGY],
        cluster_queues=random_queues(),
        fair_sharing=fair,
    )
    snapshots = []
    for i, (kind, queue, pods, gpus, level, priority, pick) in enumerate(events):
        live = sorted(c.records)
        if kind == "submit" or not live:
            tr = TopologyRequest(required=level) if level else TopologyRequest(unconstrained=True)
            c.submit(
                Workload(
                    f"w{i}", queue, (PodSet(pods, {"nvidia.com/gpu": gpus}, topology=tr),), priority, float(i)
                )
            )
        elif kind == "finish":
            c.finish(live[pick % len(live)], float(i))
        else:
            c.cancel(live[pick % len(live)], float(i))
        c.settle(float(i))
        check_invariants(c)
        snapshots.append(
            ({n: (a.cluster_queue, a.pod_sets[0].pods) for n, a in c.admitted().items()}, c.pending())
        )
    return snapshots


def check_invariants(c):
    q = c.snapshot.quota
    used: dict = {}
    per_host: dict[str, int] = {}
    for name, a in c.admitted().items():
        for fr, v in a.quota.items():
            used[(a.cluster_queue, fr)] = used.get((a.cluster_queue, fr), 0) + v
        ps = a.pod_sets[0]
        for (h,), n in ps.topology.domains:
            per_host[h] = per_host.get(h, 0) + n * (ps.usage["nvidia.com/gpu"] // ps.count)
        tr = c.records[name].workload.pod_sets[0].topology
        if tr.required:
            assert len({c.nodes[h].labels[tr.required] for (h,), _ in ps.topology.domains}) == 1
    for cq_name, usage in q.usage.items():
        for fr, v in usage.items():
            assert v == used.get((cq_name, fr), 0)  # the books match the admitted workloads
            quota = q.quota(cq_name, fr)
            if quota.borrowing_limit is not None:
                assert v <= quota.nominal + quota.borrowing_limit
    for cohort, members in q.members.items():
        for fr in {fr for m in members for fr in q.frs(m)}:
            assert q.cohort_usage(cohort, fr) <= q.cohort_quota(cohort, fr)
    for h, gpus in per_host.items():
        assert gpus <= c.nodes[h].allocatable["nvidia.com/gpu"]  # no node over-committed


@settings(max_examples=200, deadline=None)
@given(events_st, st.booleans())
def test_random_sequences_keep_the_invariants_and_are_deterministic(events, fair):
    """Given any sequence of submissions, completions and cancellations, when each settles, then
    usage never passes nominal + borrowing limit nor the cohort's lendable quota, no node holds more
    than it has, required pod sets sit in one domain, and replaying gives the same answer."""
    assert replay(events, fair) == replay(events, fair)


# --- on what the governor renders ---------------------------------------------------------------
def test_the_model_runs_on_the_queues_the_governor_renders():
    """Given the sample policy rendered for 32 p5.48xlarge hosts (4 per layer-3) as the governor
    writes it (v1beta2), when team-a submits 8 pods × 8 GPUs that require one layer-2 domain and
    team-b a job beyond its nominal quota, then the first lands on two whole layer-3 domains of one
    layer-2 domain and the second waits with Kueue's quota message."""
    from pathlib import Path

    from topogov.domain.kueue import flavors_from_nodes, render
    from topogov.domain.kueue_model.convert import nodes_of, objects_of
    from topogov.domain.labels import layer_label
    from topogov.domain.policy import load_policy_file
    from topogov.domain.quantity import Resources
    from topogov.domain.tree import NodeCapacity

    alloc = Resources(gpu=8, efa=32, cpu_m=191_450, memory=2002 * GI)
    fleet = [
        NodeCapacity(
            f"n{i:02d}", (f"nn-a{i // 16}", f"nn-b{i // 8}", f"nn-c{i // 4}"), "p5.48xlarge", "", alloc
        )
        for i in range(32)
    ]
    policy = load_policy_file(Path(__file__).resolve().parents[2] / "teams.yaml")
    topologies, flavors, queues, local = objects_of(
        render(policy, flavors_from_nodes(fleet), api_version="v1beta2")
    )
    nodes, pods = nodes_of(fleet)
    c = Cluster(nodes=nodes, flavors=flavors, topologies=topologies, cluster_queues=queues, non_tas_pods=pods)
    team_a, team_b = (
        local[f"{t.namespace}/{t.local_queue}"] for t in (policy.teams["team-a"], policy.teams["team-b"])
    )
    per_pod = {"nvidia.com/gpu": 8, "vpc.amazonaws.com/efa": 32, "cpu": 8000, "memory": 64 * GI}
    c.submit(
        Workload("train", team_a, (PodSet(8, per_pod, topology=TopologyRequest(required=layer_label(2))),))
    )
    b_gpus = queues[[q.name for q in queues].index(team_b)].quota("p5.48xlarge", "nvidia.com/gpu")
    too_many = b_gpus.nominal + (b_gpus.borrowing_limit or 0) + 8
    c.submit(Workload("huge", team_b, (PodSet(too_many // 8, per_pod),), created=1))
    c.settle(0)
    hosts = c.admitted()["train"].pod_sets[0].pods
    by_name = {n.name: n for n in nodes}
    assert len(set(hosts)) == 8  # one pod per host: 8 GPUs each
    assert {by_name[h].labels[layer_label(2)] for h in hosts} == {"nn-b0"}
    assert "insufficient quota for nvidia.com/gpu in flavor p5.48xlarge" in c.pending()["huge"].message
