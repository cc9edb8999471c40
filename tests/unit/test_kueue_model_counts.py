"""The Kueue model's per-level pod counts, kept in the tree and caught up leaf by leaf with each
admission or finish (``tas.Counts.catch_up``), equal a recount from scratch, and every placement and
failure message read from them equals the one a fresh tree with the same usage gives."""

from __future__ import annotations

import random

import pytest

from topogov.domain.kueue_model import (
    HOSTNAME,
    FlavorTree,
    Node,
    NonTASPod,
    ResourceFlavor,
    Taint,
    TASRequest,
    Toleration,
    Topology,
    TopologyRequest,
    find_assignment,
)
from topogov.domain.kueue_model.tas import level_counts
from topogov.domain.kueue_model.topology import DomainUsage

LEVELS = ("topology.k8s.aws/network-node-layer-1", "topology.k8s.aws/network-node-layer-2", HOSTNAME)
GPU = "nvidia.com/gpu"


def fleet(rng: random.Random) -> tuple[list[Node], list[NonTASPod]]:
    nodes = []
    for i in range(96):
        gpus = rng.choice([8, 8, 8, 4])
        taints = (Taint("maintenance"),) if i % 17 == 5 else ()
        labels = {LEVELS[0]: f"a{i // 32}", LEVELS[1]: f"b{i // 8}", HOSTNAME: f"h{i:03d}"}
        if i % 3:
            labels["zone"] = "z1"
        nodes.append(Node(f"h{i:03d}", labels, {GPU: gpus, "cpu": 96_000, "pods": 110}, taints))
    return nodes, [NonTASPod("daemon", "h007", {"cpu": 90_000})]


FLAVOR = ResourceFlavor("p5", {}, "t")
TOPOLOGY = Topology("t", LEVELS)
QUESTIONS = [
    TASRequest("main", 1, {GPU: 8}),
    TASRequest("main", 1, {GPU: 2, "cpu": 4_000}),
    TASRequest("main", 1, {GPU: 1}, tolerations=(Toleration("maintenance", "Exists"),)),
    TASRequest("main", 1, {GPU: 4}, node_selector={"zone": "z1"}),
]
SHAPES = [
    (TopologyRequest(required=LEVELS[1]), 4),
    (TopologyRequest(required=LEVELS[1]), 9),
    (TopologyRequest(preferred=LEVELS[1]), 12),
    (TopologyRequest(preferred=HOSTNAME), 3),
    (TopologyRequest(unconstrained=True), 1),
    (TopologyRequest(unconstrained=True), 20),
    (None, 7),
    (TopologyRequest(required=LEVELS[0]), 200),
]


def answers(tree: FlavorTree) -> list:
    out: list = [level_counts(tree, q) for q in QUESTIONS]
    for q in QUESTIONS:
        for topology, count in SHAPES:
            request = TASRequest(
                "main", count, q.requests, topology, topology is None, q.node_selector, q.tolerations
            )
            out.append(find_assignment(tree, request))
    return out


def fresh(nodes, pods, applied) -> FlavorTree:
    tree = FlavorTree(FLAVOR, TOPOLOGY, nodes, pods)
    for usage in applied:
        tree.change_usage(usage, 1)
    return tree


def random_usage(rng: random.Random, nodes: list[Node]) -> list[DomainUsage]:
    single = rng.choice([{GPU: 8}, {GPU: 2, "cpu": 4_000}, {GPU: 1}, {"cpu": 1_000}])
    hosts = rng.sample(nodes, rng.choice([1, 1, 2, 4]))
    return [DomainUsage((n.labels[HOSTNAME],), single, rng.choice([1, 1, 2])) for n in hosts]


def random_change(
    rng: random.Random, nodes: list[Node], tree: FlavorTree, applied: list[list[DomainUsage]], finishes: float
) -> None:
    """One finish (of a share ``finishes`` of the steps) or admission on ``tree``; ``applied``: the
    usage it holds. Admissions over-commit too: counts may go negative, as in Kueue."""
    if applied and rng.random() < finishes:
        tree.change_usage(applied.pop(rng.randrange(len(applied))), -1)
    else:
        applied.append(random_usage(rng, nodes))
        tree.change_usage(applied[-1], 1)


@pytest.mark.parametrize("seed", range(4))
def test_counts_caught_up_after_each_admission_and_finish_equal_a_recount(seed):
    rng = random.Random(seed)
    nodes, pods = fleet(rng)
    live = FlavorTree(FLAVOR, TOPOLOGY, nodes, pods)
    applied: list[list[DomainUsage]] = []
    for step in range(150):
        random_change(rng, nodes, live, applied, 0.4)
        level_counts(live, rng.choice(QUESTIONS))  # some questions catch up step by step, others later
        if step % 15 == 14:
            assert answers(live) == answers(fresh(nodes, pods, applied))


def test_counts_far_behind_are_counted_afresh_and_still_equal():
    rng = random.Random(7)
    nodes, pods = fleet(rng)
    live = FlavorTree(FLAVOR, TOPOLOGY, nodes, pods)
    before = answers(live)
    applied = []
    for _ in range(700):  # more leaf changes than the tree keeps (4 x 96 leaves + 1024): the log is dropped
        usage = random_usage(rng, nodes)
        applied.append(usage)
        live.change_usage(usage, 1)
    for usage in applied[:350]:
        live.change_usage(usage, -1)
    assert live.changed_base > 0
    assert answers(live) == answers(fresh(nodes, pods, applied[350:]))
    for usage in applied[350:]:
        live.change_usage(usage, -1)
    assert answers(live) == before


def test_an_admission_and_its_finish_leave_the_counts_as_they_were():
    rng = random.Random(3)
    nodes, pods = fleet(rng)
    live = FlavorTree(FLAVOR, TOPOLOGY, nodes, pods)
    before = answers(live)
    usage = [DomainUsage(("h010",), {GPU: 8}, 1), DomainUsage(("h011",), {GPU: 4}, 1)]
    live.change_usage(usage, 1)
    after = answers(live)
    assert after != before
    counts = level_counts(live, QUESTIONS[0])
    assert counts[-1][10] == 0 and counts[-1][11] == 0  # full host, and 4 of 8 GPUs left: no 8-GPU pod
    live.change_usage(usage, -1)
    assert answers(live) == before


@pytest.mark.parametrize("seed", range(3))
def test_the_first_domain_holding_a_count_is_the_first_a_scan_finds(seed):
    """``Counts.first_holding`` (heaps kept with the counts) answers what ``states[level].index``
    answers, after admissions and finishes caught up leaf by leaf and on copies of the tree."""
    rng = random.Random(seed)
    nodes, pods = fleet(rng)
    live = FlavorTree(FLAVOR, TOPOLOGY, nodes, pods)
    applied: list[list[DomainUsage]] = []
    checked = 0
    for step in range(200):
        random_change(rng, nodes, live, applied, 0.4)
        if step % 50 == 49:
            live = live.copy()
        level_counts(live, rng.choice(QUESTIONS))
        for counts in live.memo.values():
            counts.catch_up()
            for level, state in enumerate(counts.states):
                for held in counts.hists[level]:
                    assert counts.first_holding(level, held) == state.index(held), (step, level, held)
                    checked += 1
    assert checked > 1000


def test_usage_changes_made_from_remembered_steps_equal_the_sums():
    """``FlavorTree.change_usage`` reuses a step's outcome for every leaf making the same change: the
    usage it holds is still each leaf's sum of what was added and removed, and its class is the one a
    tree built with that usage at once has."""
    rng = random.Random(11)
    nodes, pods = fleet(rng)
    live = FlavorTree(FLAVOR, TOPOLOGY, nodes, pods)
    applied: list[list[DomainUsage]] = []
    for step in range(400):
        random_change(rng, nodes, live, applied, 0.45)
        if step == 200:
            live = live.copy()  # copies share the remembered steps
    want: dict[str, dict[str, int]] = {}
    for usage in applied:
        for u in usage:
            leaf = want.setdefault(u.values[-1], {})
            for name, value in u.single.items():
                leaf[name] = leaf.get(name, 0) + value * u.count
            leaf["pods"] = leaf.get("pods", 0) + u.count
    got = {k: {n: v for n, v in u.items() if v} for k, u in live.usage_by_leaf().items()}
    assert got == {k: {n: v for n, v in u.items() if v} for k, u in want.items() if any(u.values())}
    once = fresh(nodes, pods, [[u for usage in applied for u in usage]])
    assert [live.class_remaining[c] for c in live.leaf_class] == [
        once.class_remaining[c] for c in once.leaf_class
    ]
    assert len(live._steps) > 0
