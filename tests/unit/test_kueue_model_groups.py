"""Pod-set groups in the model (domain/kueue_model/groups.py) against Kueue v0.17.0's own table:
``pkg/cache/scheduler/tas_cache_test.go`` ``TestFindTopologyAssignments``, every case with a
``podSetGroupName`` that neither slices a pod set nor turns on balanced placement (the model has
neither), translated as written: its nodes, pod sets in order, expected assignments and messages (the
case names are quoted). Then what those cases leave out, checked by property: a group of like pods
lands where one pod set of all of them would, on any fleet."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topogov.domain.kueue_model import HOSTNAME, FlavorTree, Node, ResourceFlavor, TASRequest, Topology
from topogov.domain.kueue_model import TopologyRequest as TR
from topogov.domain.kueue_model.groups import find_assignments

BLOCK, RACK = "cloud.com/topology-block", "cloud.com/topology-rack"
GPU = "example.com/gpu"
GI = 2**30


def node(name: str, labels: dict[str, str], cpu: float, gpu: int, mem: int = 0, pods: int = 10) -> Node:
    alloc = {"cpu": int(cpu * 1000), GPU: gpu, "pods": pods}
    if mem:
        alloc["memory"] = mem
    return Node(name, labels, alloc, (), True, False)


def block(name: str, cpu: float, gpu: int, **kw) -> Node:
    return node(name, {BLOCK: name}, cpu, gpu, **kw)


def host(b: str, r: str, h: str, cpu: float, gpu: int) -> Node:
    return node(f"{b}-{r}-{h}", {BLOCK: b, RACK: r, HOSTNAME: h}, cpu, gpu)


def group(name: str, count: int, requests: dict[str, int], *, required: str | None = None) -> TASRequest:
    return TASRequest(name, count, requests, TR(required=required, group="sameGroup"))


def place(nodes: list[Node], levels: tuple[str, ...], *requests: TASRequest):
    tree = FlavorTree(ResourceFlavor("f", {}, "default", ()), Topology("default", levels), nodes)
    out = find_assignments(tree, list(requests))
    return {
        name: (p.failure or None) if p.assignment is None else (p.assignment.levels, p.assignment.domains)
        for name, p in out.items()
    }


LEADER_CPU = {"cpu": 1000}
WORKER = {"cpu": 1000, GPU: 1}
ONE = (BLOCK,)
THREE = (BLOCK, RACK, HOSTNAME)


def blocks(*values: str, count: int) -> tuple[tuple[str, ...], tuple]:
    return ONE, tuple(((v,), count) for v in values)


CASES = {
    "find topology assignment for two podsets with the same group": (
        [block("b1", 2, 2, mem=2 * GI), block("b2", 5, 4), block("b3", 2, 2)],
        ONE,
        [group("leader", 1, LEADER_CPU, required=BLOCK), group("workers", 4, WORKER, required=BLOCK)],
        {"leader": (ONE, ((("b2",), 1),)), "workers": (ONE, ((("b2",), 4),))},
    ),
    "find topology assignment for two podsets with the same group with domains that can tightly fit "
    "leader and workers": (
        [block("b1", 2, 2), block("b2", 8, 8), block("b3", 2, 2)],
        ONE,
        [
            group("leader", 1, LEADER_CPU, required=BLOCK),
            group("workers", 4, {"cpu": 1000, GPU: 2}, required=BLOCK),
        ],
        {"leader": (ONE, ((("b2",), 1),)), "workers": (ONE, ((("b2",), 4),))},
    ),
    "find topology assignment for two podsets with the same group - no fit": (
        [block("b1", 1, 0), block("b2", 4, 4)],
        ONE,
        [group("leader", 1, LEADER_CPU, required=BLOCK), group("workers", 4, WORKER, required=BLOCK)],
        {
            name: 'topology "default" allows to fit only 4 out of 4 pod(s). Total nodes: 2; excluded: '
            'resource "example.com/gpu": 1'
            for name in ("leader", "workers")
        },
    ),
    "find topology assignment for two podsets with the same group - optimizes domain for both leader "
    "and workers": (
        [block("b1", 11, 8), block("b2", 4, 4)],
        ONE,
        [group("leader", 1, LEADER_CPU, required=BLOCK), group("workers", 4, WORKER, required=BLOCK)],
        {"leader": (ONE, ((("b1",), 1),)), "workers": (ONE, ((("b1",), 4),))},
    ),
    "find topology assignment for two podsets with the same group - leader does not fit anywhere": (
        [block("b1", 4, 4), block("b2", 4, 4)],
        ONE,
        [group("leader", 1, {"cpu": 10_000}, required=BLOCK), group("workers", 4, WORKER, required=BLOCK)],
        {name: 'topology "default" allows to fit only 4 out of 4 pod(s)' for name in ("leader", "workers")},
    ),
    "find topology assignment for two podsets with the same group - multiple hosts": (
        [
            host("b1", "r1", "x3", 2, 1),
            host("b1", "r1", "x5", 2, 1),
            host("b1", "r1", "x1", 2, 1),
            host("b2", "r4", "x6", 1, 1),
            host("b2", "r5", "x2", 2, 1),
            host("b2", "r6", "x4", 2, 1),
        ],
        THREE,
        [group("leader", 1, {"cpu": 2000}, required=BLOCK), group("workers", 2, WORKER, required=BLOCK)],
        {
            "leader": ((HOSTNAME,), ((("x1",), 1),)),
            "workers": ((HOSTNAME,), ((("x3",), 1), (("x5",), 1))),
        },
    ),
    "find topology assignment for two podsets with the same group requesting same resources and nodes "
    "in the same rack": (
        [
            host(b, r, x, 1, 1)
            for b, r, x in [
                ("b1", "r1", "x3"),
                ("b1", "r1", "x5"),
                ("b1", "r2", "x1"),
                ("b1", "r2", "x6"),
                ("b2", "r3", "x2"),
                ("b2", "r3", "x4"),
                ("b2", "r4", "x7"),
                ("b2", "r4", "x8"),
            ]
        ],
        THREE,
        [group("leader", 1, WORKER, required=BLOCK), group("workers", 2, WORKER, required=BLOCK)],
        {
            "leader": ((HOSTNAME,), ((("x3",), 1),)),
            "workers": ((HOSTNAME,), ((("x5",), 1), (("x1",), 1))),
        },
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_upstream_group_cases(name):
    nodes, levels, requests, want = CASES[name]
    assert place(nodes, levels, *requests) == want


def test_a_group_of_like_pods_lands_where_one_pod_set_of_all_of_them_would_on_a_three_level_fleet():
    """On an empty, uniform fleet a leader and its workers of one shape are placed as one pod set of
    all of them is (the leader on the first host the pod set would use)."""
    nodes = [
        host(f"b{b}", f"r{b}{r}", f"x{b}{r}{h}", 8, 8) for b in range(2) for r in range(2) for h in range(3)
    ]
    alone = place(nodes, THREE, TASRequest("all", 13, {GPU: 2}, TR(required=BLOCK)))["all"]
    grouped = place(
        nodes,
        THREE,
        group("master", 1, {GPU: 2}, required=BLOCK),
        group("worker", 12, {GPU: 2}, required=BLOCK),
    )
    hosts = {values[0]: n for values, n in alone[1]}
    placed = {values[0]: n for values, n in grouped["worker"][1]}
    for values, n in grouped["master"][1]:
        placed[values[0]] = placed.get(values[0], 0) + n
    assert placed == hosts


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 1), st.integers(0, 2), st.integers(0, 8)), min_size=1, max_size=14),
    st.integers(1, 20),
    st.integers(1, 4),
    st.sampled_from(["required", "preferred"]),
)
def test_a_group_is_placed_whole_or_not_at_all(layout, workers, lead, mode):
    """Whatever the fleet: a group fails with one reason for both pod sets, or is placed whole (its
    exact pods, no host over its capacity, a required group inside one block), or, Kueue v0.17.0's
    two known faults below, gets no domain at all for either pod set; never a part of it."""
    nodes = [host(f"b{b}", f"r{b}{r}", f"x{i}", 8, gpus) for i, (b, r, gpus) in enumerate(layout)]
    tr = TR(required=BLOCK, group="g") if mode == "required" else TR(preferred=BLOCK, group="g")
    out = place(
        nodes, THREE, TASRequest("leader", 1, {GPU: lead}, tr), TASRequest("workers", workers, {GPU: 2}, tr)
    )
    if isinstance(out["workers"], str):
        assert out["leader"] == out["workers"]
        return
    if out["leader"][1] == () or out["workers"][1] == ():
        assert out["leader"][1] == out["workers"][1] == ()
        return
    by_host = {n.labels[HOSTNAME]: n for n in nodes}
    used: dict[str, int] = {}
    for name, per_pod in (("leader", lead), ("workers", 2)):
        _, domains = out[name]
        assert sum(n for _, n in domains) == (1 if name == "leader" else workers)
        for (h,), n in domains:
            used[h] = used.get(h, 0) + per_pod * n
    assert all(used[h] <= by_host[h].allocatable[GPU] for h in used)
    if mode == "required":
        assert len({by_host[h].labels[BLOCK] for h in used}) == 1


def test_kueue_0_17_counts_a_full_node_as_room_for_the_leader_and_then_places_nothing():
    """Kueue v0.17.0 counts a domain's room beside the leader as its workers' room less the smallest
    loss the leader causes on one of its nodes, a full node's (none) included (``fillInCountsHelper``):
    a rack of two free nodes and a full one is taken to hold a leader and two workers of one node
    each. Phase 2b then runs out (``updateCountsToMinimumGeneric`` logs "unexpected
    remainingCount") and both pod sets get an assignment of no domain, with no failure; the API
    server then rejects the admission (the last test below). Fixed after v0.17.0
    (kubernetes-sigs/kueue#10783, "Fix TAS stateWithLeader aggregation for grouped podsets"; #13766
    in release-0.19)."""
    nodes = [host("b1", "r1", "x1", 8, 8), host("b1", "r1", "x2", 8, 8), host("b1", "r1", "x3", 8, 0)]
    tr = TR(required=BLOCK, group="g")
    out = place(nodes, THREE, TASRequest("master", 1, {GPU: 8}, tr), TASRequest("worker", 2, {GPU: 8}, tr))
    assert out == {"master": ((HOSTNAME,), ()), "worker": ((HOSTNAME,), ())}
    # without the full node the same rack is (rightly) found too small
    assert isinstance(place(nodes[:2], THREE, TASRequest("master", 1, {GPU: 8}, tr),
                            TASRequest("worker", 2, {GPU: 8}, tr))["worker"], str)  # fmt: skip


def test_kueue_0_17_best_fit_may_pick_a_host_without_room_for_a_bigger_leader():
    """Kueue v0.17.0's phase 2b optimises the last domain by ``stateWithLeader`` alone
    (``findBestFitDomainBy``), so it may pick a host that cannot hold the leader; both pod sets then
    get no domain (and the real Kueue's admission is rejected, as above). v0.19.2's
    ``findBestFitDomainBy`` skips such hosts."""
    nodes = [host("b1", "r10", "x0", 8, 1), host("b1", "r10", "x1", 8, 4)]
    tr = TR(required=BLOCK, group="g")
    # equal counts: the second pod set (2 GPUs) leads, the first (1 GPU) is the "workers"
    out = place(nodes, THREE, TASRequest("small", 1, {GPU: 1}, tr), TASRequest("big", 1, {GPU: 2}, tr))
    assert out == {"small": ((HOSTNAME,), ()), "big": ((HOSTNAME,), ())}


# --- the leader columns kept per question and caught up, against a recount -----------------------------


def group_answers(tree):
    from tests.unit.test_kueue_model_counts import GPU as G
    from tests.unit.test_kueue_model_counts import LEVELS

    out = []
    for lead, worker in (({G: 8}, {G: 8}), ({G: 1}, {G: 2, "cpu": 4_000}), ({"cpu": 1_000}, {G: 4})):
        for topology, count in (
            (TR(required=LEVELS[1], group="g"), 7),
            (TR(required=LEVELS[1], group="g"), 3),
            (TR(preferred=LEVELS[1], group="g"), 12),
            (TR(preferred=LEVELS[0], group="g"), 40),
            (TR(required=LEVELS[0], group="g"), 200),
        ):
            out.append(
                find_assignments(
                    tree, [TASRequest("lead", 1, lead, topology), TASRequest("work", count, worker, topology)]
                )
            )
    return out


@pytest.mark.parametrize("seed", range(3))
def test_group_placements_caught_up_after_each_admission_and_finish_equal_a_fresh_trees(seed):
    """The leader's columns are kept per question (``groups._Leaders``) and caught up leaf by leaf;
    every group placement and failure read from them equals a fresh tree's with the same usage, on the
    live tree and on copies of it."""
    import random

    from tests.unit.test_kueue_model_counts import FLAVOR, TOPOLOGY, fleet, fresh, random_change

    rng = random.Random(seed)
    nodes, pods = fleet(rng)
    live = FlavorTree(FLAVOR, TOPOLOGY, nodes, pods)
    applied: list = []
    for step in range(120):
        random_change(rng, nodes, live, applied, 0.4)
        if step % 3 == 0:
            group_answers(live)  # asked now and then: kept columns catch up over several changes
        if step % 20 == 19:
            assert group_answers(live) == group_answers(fresh(nodes, pods, applied))
            assert group_answers(live.copy()) == group_answers(fresh(nodes, pods, applied))


# --- a group in the cluster: flavors together, admissions the API server rejects ---------------------


def group_cluster(nodes: list[Node], gpu_quota: int, gpu: str = GPU):
    from topogov.domain.kueue_model import (
        Cluster,
        ClusterQueue,
        FlavorQuotas,
        ResourceGroup,
        ResourceQuota,
        Topology,
    )

    quotas = {"cpu": ResourceQuota(1_000_000), gpu: ResourceQuota(gpu_quota)}
    queue = ClusterQueue("q", (ResourceGroup(("cpu", gpu), (FlavorQuotas("f", quotas),)),))
    return Cluster(
        nodes=nodes,
        flavors=[ResourceFlavor("f", {}, "default")],
        topologies=[Topology("default", THREE)],
        cluster_queues=[queue],
    )


def group_workload(name: str, created: float, *pod_sets: tuple[str, int, int]):
    from topogov.domain.kueue_model import PodSet, Workload

    tr = TR(required=RACK, group="g")
    return Workload(
        name, "q", tuple(PodSet(n, {"cpu": 1000, GPU: g}, ps, tr) for ps, n, g in pod_sets), created=created
    )


def test_a_group_short_of_quota_is_reported_for_each_member_with_the_groups_total():
    """Kueue v0.17.0 assigns a group's flavors once, for the sum of its pod sets' requests, and gives
    each member the result (``assignFlavors``): the message names both, with the total (as the real
    Kueue wrote it in tests/integration/test_kueue_model_vs_kueue.py, scenario "groups")."""
    cluster = group_cluster([host("b1", "r1", f"x{i}", 64, 8) for i in range(4)], 16)
    cluster.submit(group_workload("g", 1.0, ("master", 1, 8), ("worker", 3, 8)))
    cluster.settle(1.0)
    part = (
        "insufficient quota for example.com/gpu in flavor f, previously considered podsets requests (0) + "
        "current podset request (32) > maximum capacity (16)"
    )
    want = [f"couldn't assign flavors to pod set {ps}: {part}" for ps in ("master", "worker")]
    assert cluster.pending()["g"].message == "; ".join(want)


def test_a_group_placed_on_no_domain_is_rejected_retried_and_lets_the_queue_behind_it_through():
    """The full-node fault in the cluster: the scheduler admits the group on no domain, the API server
    rejects the status (the CRD requires ``slices``), and the group stays without a status, retried
    in every cycle; a Job behind it in its queue is admitted in the cycle the group's admission is in
    flight; once that Job takes the two free hosts the group simply does not fit; when another rack
    frees up it is placed there. As the real Kueue v0.17.0 did (the integration scenario "groups")."""
    from topogov.domain.kueue_model import PodSet, Workload

    nodes = [host("b1", "r1", f"x{i}", 64, 8) for i in (1, 2)] + [host("b1", "r1", "x3", 64, 0)]
    nodes += [host("b1", "r2", f"y{i}", 64, 8) for i in (1, 2, 3)]
    cluster = group_cluster(nodes, 1000)
    tr = TR(required=RACK)
    cluster.submit(Workload("busy", "q", (PodSet(3, {"cpu": 1000, GPU: 8}, "main", tr),), created=0.0))
    cluster.settle(0.0)
    assert set(cluster.admitted()) == {"busy"}
    cluster.submit(group_workload("g", 1.0, ("master", 1, 8), ("worker", 2, 8)))
    cluster.settle(1.0)  # returns: a rejection repeated on an unchanged cluster is settled
    pending = cluster.pending()["g"]
    assert (pending.rejected, pending.reason, pending.message) == (True, "", "")
    assert not cluster.has_heads()
    cluster.submit(Workload("after", "q", (PodSet(2, {"cpu": 1000, GPU: 8}, "main", tr),), created=2.0))
    cluster.settle(2.0)
    assert cluster.admitted()["after"].pod_sets[0].pods == ("x1", "x2")
    pending = cluster.pending()["g"]
    assert not pending.rejected and "doesn't allow to fit any of 2 pod(s)" in pending.message
    cluster.finish("busy", 3.0)
    cluster.settle(3.0)
    placed = cluster.admitted()["g"]
    assert [ps.pods for ps in placed.pod_sets] == [("y1",), ("y2", "y3")]
    assert not cluster.pending()


def test_two_groups_placed_on_no_domain_take_turns_at_the_head_and_the_queue_behind_waits():
    """Two such groups head their queue by priority: each cycle pops the one not rejected in the cycle
    before, so they take turns and a Job behind them is never tried (Kueue retries both in every
    cycle so, until the cluster changes so that one is placed). The model settles instead of cycling
    without end."""
    from topogov.domain.kueue_model import PodSet, Workload

    nodes = [host("b1", "r1", f"x{i}", 64, 8) for i in (1, 2)] + [host("b1", "r1", "x3", 64, 0)]
    nodes += [host("b1", "r2", f"y{i}", 64, 8) for i in (1, 2, 3)]
    cluster = group_cluster(nodes, 1000)
    tr = TR(required=RACK)
    cluster.submit(Workload("busy", "q", (PodSet(3, {"cpu": 1000, GPU: 8}, "main", tr),), created=0.0))
    cluster.settle(0.0)
    cluster.submit(group_workload("g1", 1.0, ("master", 1, 8), ("worker", 2, 8)))
    cluster.submit(group_workload("g2", 1.5, ("master", 1, 8), ("worker", 2, 8)))
    cluster.submit(Workload("after", "q", (PodSet(2, {"cpu": 1000, GPU: 8}, "main", tr),), created=2.0))
    cluster.settle(2.0)
    pending = cluster.pending()
    assert pending["g1"].rejected and pending["g2"].rejected
    assert (pending["after"].reason, pending["after"].message) == ("", "")  # never tried
    assert not cluster.has_heads()
    cluster.finish("busy", 3.0)  # rack r2 frees up, but BestFit still takes r1 for the faulty count
    cluster.settle(3.0)
    assert not cluster.admitted() and cluster.pending()["g1"].rejected and not cluster.has_heads()


def test_a_group_that_preempts_and_is_then_rejected_is_cut_as_a_livelock():
    """A group short of quota preempts a lower-priority Job, is then placed on no domain (the full-node
    fault) and rejected; the Job is readmitted, the group preempts it again, and so on: Kueue keeps
    evicting the Job as long as nothing else changes. The model stops when the cycles repeat and
    names both in ``livelocked``."""
    from topogov.domain.kueue_model import (
        Cluster,
        ClusterQueue,
        FlavorQuotas,
        PodSet,
        Preemption,
        ResourceGroup,
        ResourceQuota,
        Topology,
        Workload,
    )

    nodes = [host("b1", "r1", f"x{i}", 64, 8) for i in (1, 2)] + [host("b1", "r1", "x3", 64, 0)]
    nodes += [host("b1", "r2", "y1", 64, 8)]
    quotas = {"cpu": ResourceQuota(1_000_000), GPU: ResourceQuota(24)}
    queue = ClusterQueue(
        "q",
        (ResourceGroup(("cpu", GPU), (FlavorQuotas("f", quotas),)),),
        preemption=Preemption(within_cluster_queue="LowerPriority"),
    )
    cluster = Cluster(
        nodes=nodes,
        flavors=[ResourceFlavor("f", {}, "default")],
        topologies=[Topology("default", THREE)],
        cluster_queues=[queue],
    )
    low = Workload("low", "q", (PodSet(1, {"cpu": 1000, GPU: 8}, "main", TR(required=RACK)),), created=0.0)
    cluster.submit(low)
    cluster.settle(0.0)
    assert set(cluster.admitted()) == {"low"}
    high = group_workload("g", 1.0, ("master", 1, 8), ("worker", 2, 8))
    cluster.submit(dataclasses.replace(high, priority=100))
    results = cluster.settle(1.0)
    assert any(e.name == "low" and e.by == "g" for r in results for e in r.evicted)
    assert cluster.livelocked == {"low", "g"}
    assert cluster.pending()["g"].rejected
