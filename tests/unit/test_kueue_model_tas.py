"""The model's topology-aware placement against Kueue v0.17.0's own examples and tests.

Cases cite their source: the KEP (``keps/2724-topology-aware-scheduling/README.md``, "Computing the
assignment") and ``pkg/cache/scheduler/tas_cache_test.go`` ``TestFindTopologyAssignments`` (the case
names are quoted), whose expected assignments and messages are copied here as the oracle.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
from topogov.domain.kueue_model.groups import find_assignments
from topogov.domain.kueue_model.topology import DomainUsage

BLOCK, RACK = "cloud.com/topology-block", "cloud.com/topology-rack"
GI = 2**30


def node(name, labels, cpu, *, mem=GI, pods=10, ready=True, unschedulable=False, taints=()):
    alloc = {"cpu": int(cpu * 1000), "memory": mem, "pods": pods}
    return Node(name, labels, alloc, tuple(taints), ready, unschedulable)


def brh(b, r, h, cpu, **kw):
    """A node in block ``b``, rack ``r``, hostname ``h`` (upstream's ``b1-r1-x3`` naming)."""
    return node(f"{b}-{r}-{h}", {BLOCK: b, RACK: r, HOSTNAME: h}, cpu, **kw)


#      b1                   b2
#   /      \\             /      \\
#  r1       r2          r1       r2
#  |      /  |  \\       |         |
#  x3    x5  x1  x6     x2       x4      (tas_cache_test.go: defaultNodes)
DEFAULT = [
    brh("b1", "r1", "x3", 1),
    brh("b1", "r2", "x5", 1),
    brh("b1", "r2", "x1", 1),
    brh("b1", "r2", "x6", 1),
    brh("b2", "r1", "x2", 1),
    brh("b2", "r2", "x4", 2, mem=4 * GI, pods=40),
]
SCATTERED = [
    brh("b1", "r1", "x3", 4),
    brh("b1", "r1", "x5", 1),
    brh("b1", "r1", "x1", 1),
    brh("b2", "r1", "x6", 2),
    brh("b2", "r1", "x2", 1),
]
BINARY = [
    brh(b, r, x, 1)
    for b, r, x in [
        ("b1", "r1", "x3"),
        ("b1", "r1", "x5"),
        ("b1", "r2", "x1"),
        ("b1", "r2", "x6"),
        ("b2", "r1", "x2"),
        ("b2", "r1", "x4"),
        ("b2", "r2", "x7"),
        ("b2", "r2", "x8"),
    ]
]
TWO = (BLOCK, RACK)
THREE = (BLOCK, RACK, HOSTNAME)


def tree(nodes, levels=THREE, node_labels=None, pods=(), tolerations=()):
    flavor = ResourceFlavor("f", node_labels or {}, "default", tuple(tolerations))
    return FlavorTree(flavor, Topology("default", levels), nodes, pods)


def place(t, count, requests, *, required=None, preferred=None, unconstrained=False, **kw):
    tr = None
    if required or preferred or unconstrained:
        tr = TopologyRequest(required, preferred, unconstrained)
    return find_assignment(t, TASRequest("main", count, requests, tr, implied=tr is None, **kw))


def hosts(p):
    assert p.failure == "", p.failure
    assert p.assignment is not None
    return [(values[-1], n) for values, n in p.assignment.domains]


def domains(p):
    assert p.failure == "", p.failure
    assert p.assignment is not None
    return [(values, n) for values, n in p.assignment.domains]


CPU1 = {"cpu": 1000}


# --- the KEP's worked example -------------------------------------------------------------------
KEP_HOSTS = [node(f"h{i}", {RACK: "r1", HOSTNAME: f"h{i}"}, c) for i, c in enumerate((3, 3, 2, 1), start=1)]


def test_kep_bestfit_places_3_3_1():
    """Given a rack whose hosts hold 3, 3, 2 and 1 pods, when 7 pods must share the rack, then
    BestFit takes the two hosts of 3 and, for the last pod, the host that holds exactly 1."""
    assert hosts(place(tree(KEP_HOSTS, (RACK, HOSTNAME)), 7, CPU1, required=RACK)) == [
        ("h1", 3),
        ("h2", 3),
        ("h4", 1),
    ]


def test_kep_least_free_capacity_places_1_2_3_1():
    """Given the same hosts, when 7 unconstrained pods are placed, then LeastFreeCapacity starts
    from the emptiest-fitting end: 1, 2, 3 and the last pod on the other host of 3."""
    assert hosts(place(tree(KEP_HOSTS, (RACK, HOSTNAME)), 7, CPU1, unconstrained=True)) == [
        ("h1", 3),
        ("h2", 1),
        ("h3", 2),
        ("h4", 1),
    ]


# --- tas_cache_test.go TestFindTopologyAssignments --------------------------------------------
@pytest.mark.parametrize(
    ("case", "nodes", "levels", "count", "requests", "kw", "want"),
    [
        ("rack required; single Pod fits in a rack; BestFit", DEFAULT, TWO, 1, CPU1, {"required": RACK},
         [(("b1", "r1"), 1)]),
        ("rack required; multiple Pods fit in a rack; BestFit", DEFAULT, TWO, 3, CPU1, {"required": RACK},
         [(("b1", "r2"), 3)]),
        ("rack required; multiple Pods fit in some racks; BestFit", DEFAULT, TWO, 2, CPU1, {"required": RACK},
         [(("b2", "r2"), 2)]),
        ("block required; single Pod fits in a block and a single rack; BestFit", DEFAULT, TWO, 1, CPU1,
         {"required": BLOCK}, [(("b2", "r1"), 1)]),
        ("block required; Pods fit in a block spread across two racks; BestFit", DEFAULT, TWO, 4, CPU1,
         {"required": BLOCK}, [(("b1", "r1"), 1), (("b1", "r2"), 3)]),
        ("rack required; single Pod requiring memory; BestFit", DEFAULT, TWO, 4, {"memory": 1024},
         {"required": RACK}, [(("b1", "r1"), 4)]),
        ("rack preferred; but only block can accommodate the workload; BestFit", DEFAULT, TWO, 4, CPU1,
         {"preferred": RACK}, [(("b1", "r1"), 1), (("b1", "r2"), 3)]),
        ("rack preferred; but only multiple blocks can accommodate the workload; BestFit", DEFAULT, TWO, 6,
         CPU1, {"preferred": RACK}, [(("b1", "r1"), 1), (("b1", "r2"), 3), (("b2", "r2"), 2)]),
        ("block preferred; but only multiple blocks can accommodate the workload; BestFit", DEFAULT, TWO, 6,
         CPU1, {"preferred": BLOCK}, [(("b1", "r1"), 1), (("b1", "r2"), 3), (("b2", "r2"), 2)]),
        ("host required; single Pod fits in the host; BestFit", DEFAULT, THREE, 1, CPU1,
         {"required": HOSTNAME}, [(("x3",), 1)]),
        ("block required; 4 pods fit into one host each; BestFit", BINARY, THREE, 4, CPU1,
         {"required": BLOCK}, [(("x3",), 1), (("x5",), 1), (("x1",), 1), (("x6",), 1)]),
        ("unconstrained; a single pod fits into each host; LeastFreeCapacity; TASProfileMixed", DEFAULT,
         THREE, 1, CPU1, {"unconstrained": True}, [(("x3",), 1)]),
        ("unconstrained; 6 pods fit into hosts scattered across the whole datacenter even they could fit "
         "into single rack; BestFit", SCATTERED, THREE, 6, CPU1, {"unconstrained": True},
         [(("x1",), 1), (("x3",), 1), (("x5",), 1), (("x2",), 1), (("x6",), 2)]),
        ("no annotation; implied default to unconstrained; 6 pods fit into hosts scattered across the whole "
         "datacenter even they could fit into single rack; BestFit", SCATTERED, THREE, 6, CPU1, {},
         [(("x1",), 1), (("x3",), 1), (("x5",), 1), (("x2",), 1), (("x6",), 2)]),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)  # fmt: skip
def test_upstream_assignments(case, nodes, levels, count, requests, kw, want):
    """Given upstream's nodes and request, when the model places the pods, then it gets upstream's
    expected assignment, domain for domain and in the same order."""
    assert domains(place(tree(nodes, levels), count, requests, **kw)) == want, case


def test_minimize_the_number_of_used_racks_before_optimizing_the_number_of_nodes():
    """tas_cache_test.go: "minimize the number of used racks before optimizing the number of nodes;
    BestFit": the one rack holding 4 beats two racks of 2 pods each."""
    nodes = [
        node("b1-r1-x3", {BLOCK: "b1", RACK: "r1", HOSTNAME: "x3"}, 2),
        node("b1-r2-x5", {BLOCK: "b1", RACK: "r2", HOSTNAME: "x5"}, 2, pods=20),
    ] + [node(f"b1-r3-{h}", {BLOCK: "b1", RACK: "r3", HOSTNAME: h}, 1) for h in ("x1", "x6", "x2", "x4")]
    got = place(tree(nodes), 4, CPU1, required=BLOCK)
    assert hosts(got) == [("x1", 1), ("x2", 1), ("x4", 1), ("x6", 1)]


def test_choose_the_node_that_can_accommodate_all_pods():
    """tas_cache_test.go: "choose the node that can accommodate all Pods"."""
    nodes = [brh("b1", "r1", "x3", 2), brh("b1", "r1", "x5", 1), brh("b1", "r1", "x1", 1)]
    assert hosts(place(tree(nodes), 2, CPU1, required=BLOCK)) == [("x3", 2)]


def test_block_preferred_pods_fit_in_2_blocks():
    """tas_cache_test.go: "block preferred; Pods fit in 2 blocks; BestFit": at the top level the
    blocks are taken largest first, the last swapped for the tightest (b2 holds exactly 1)."""
    nodes = [
        node("b1", {BLOCK: "b1"}, 2, pods=20),
        node("b2", {BLOCK: "b2"}, 1, pods=10),
        node("b3", {BLOCK: "b3"}, 4, pods=40),
    ]
    assert domains(place(tree(nodes, (BLOCK,)), 5, CPU1, preferred=BLOCK)) == [(("b2",), 1), (("b3",), 4)]


@pytest.mark.parametrize(
    ("case", "count", "requests", "kw", "want"),
    [
        ("rack required; too many pods to fit in any rack; BestFit", 4, CPU1, {"required": RACK},
         'topology "default" allows to fit only 3 out of 4 pod(s)'),
        ("block required; single Pod which cannot be split; BestFit", 1, {"cpu": 4000}, {"required": BLOCK},
         'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 4; '
         'excluded: resource "cpu": 4'),
        ("block required; too many Pods to fit requested; BestFit", 5, CPU1, {"required": BLOCK},
         'topology "default" allows to fit only 4 out of 5 pod(s)'),
        ("block preferred; but the workload cannot be accommodate in entire topology; BestFit", 10, CPU1,
         {"preferred": BLOCK}, 'topology "default" allows to fit only 7 out of 10 pod(s)'),
    ],
)  # fmt: skip
def test_upstream_failure_messages(case, count, requests, kw, want):
    """Given upstream's default nodes on block and rack, when nothing fits, then the reason is
    Kueue's, word for word."""
    got = place(tree(DEFAULT, TWO), count, requests, **kw)
    assert (got.assignment, got.failure) == (None, want), case


def one_host(**kw):
    return [node("x3", {HOSTNAME: "x3", "zone": "zone-a"}, 1, **kw)]


def test_skip_node_which_has_untolerated_taint_and_allow_a_tolerated_one():
    """tas_cache_test.go: "skip node which has untolerated taint; BestFit" and "allow to schedule on
    node with tolerated taint; BestFit"."""
    nodes = one_host(taints=[Taint("example.com/gpu", "present", "NoSchedule")])
    t = tree(nodes, (HOSTNAME,), {"zone": "zone-a"})
    assert place(t, 1, CPU1, required=HOSTNAME).failure == (
        'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 1; excluded: '
        'taint "example.com/gpu=present:NoSchedule": 1'
    )
    tolerated = place(
        t, 1, CPU1, required=HOSTNAME, tolerations=(Toleration("example.com/gpu", "Equal", "present"),)
    )
    assert hosts(tolerated) == [("x3", 1)]


def test_detailed_failure_message_with_exclusion_stats():
    """tas_cache_test.go: "detailed failure message with exclusion stats"."""
    nodes = [
        node("x1", {HOSTNAME: "x1"}, 1, taints=[Taint("key", "value", "NoSchedule")]),
        node("x2", {HOSTNAME: "x2", "zone": "zone-b"}, 1),
        node("x3", {HOSTNAME: "x3", "zone": "zone-b"}, 2),
        node("x4", {HOSTNAME: "x4", "zone": "zone-a"}, 0.1),
    ]
    got = place(tree(nodes, (HOSTNAME,)), 1, CPU1, required=HOSTNAME, node_selector={"zone": "zone-a"})
    assert got.failure == (
        'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 4; excluded: '
        'nodeSelector: 2, resource "cpu": 1, taint "key=value:NoSchedule": 1'
    )


def test_resource_exclusion_picks_most_restrictive_resource():
    """tas_cache_test.go: "resource exclusion picks most restrictive resource" (ties alphabetical)."""
    n = Node("dual-shortage", {HOSTNAME: "dual-shortage"}, {"cpu": 500, "pods": 10, "example.com/gpu": 0})
    got = place(tree([n], (HOSTNAME,)), 1, {"cpu": 1000, "example.com/gpu": 1}, required=HOSTNAME)
    assert got.failure.endswith('excluded: resource "cpu": 1')


def test_no_assignment_as_node_does_not_have_enough_allocatable_pods():
    """tas_cache_test.go: "... not have enough allocatable pods (.status.allocatable['pods'])": a
    running non-TAS pod takes the node's only pod slot."""
    t = tree(one_host(pods=1), (HOSTNAME,), pods=[NonTASPod("test-running", "x3", {"cpu": 300})])
    assert place(t, 1, {"cpu": 300}, required=HOSTNAME).failure.endswith('excluded: resource "pods": 1')


def test_include_usage_from_non_tas_pods_pod_usage():
    """tas_cache_test.go: "include usage from non-TAS pods; pod usage": two pods of 10 slots used."""
    n = Node("x3", {HOSTNAME: "x3"}, {"pods": 10})
    t = tree([n], (HOSTNAME,), pods=[NonTASPod("running1", "x3"), NonTASPod("running2", "x3")])
    assert (
        place(t, 9, {"cpu": 0}, required=HOSTNAME).failure
        == 'topology "default" allows to fit only 8 out of 9 pod(s)'
    )


def test_include_usage_from_running_non_tas_pods_found_free_capacity_on_another_node():
    """tas_cache_test.go: "include usage from running non-TAS pods, found free capacity on another
    node; BestFit"."""
    nodes = [node("x3", {HOSTNAME: "x3"}, 1), node("x5", {HOSTNAME: "x5"}, 1)]
    t = tree(nodes, (HOSTNAME,), pods=[NonTASPod("test-pod", "x3", {"cpu": 600})])
    assert hosts(place(t, 1, {"cpu": 600}, required=HOSTNAME)) == [("x5", 1)]


@pytest.mark.parametrize(
    "kw", [{"ready": False}, {"unschedulable": True}], ids=["not ready", "unschedulable"]
)
def test_no_assignment_as_node_is_not_ready_or_unschedulable(kw):
    """tas_cache_test.go: "no assignment as node is not ready" / "... is unschedulable": the node is
    not in the tree at all."""
    t = tree(one_host(**kw), (HOSTNAME,), {"zone": "zone-a"})
    assert (
        place(t, 1, CPU1, required=HOSTNAME).failure == "no topology domains at level: kubernetes.io/hostname"
    )


def test_only_nodes_with_matching_labels_and_every_level_are_considered():
    """tas_cache_test.go: "only nodes with matching labels are considered; no matching node" and
    "only nodes with matching levels are considered; no host label on node" (NodeMatchesFlavor)."""
    assert tree(one_host(), (HOSTNAME,), {"zone": "zone-b"}).leaf_ids == []
    no_host = [Node("n", {"zone": "zone-a", RACK: "r1"}, {"cpu": 1000, "pods": 10})]
    assert tree(no_host, (RACK, HOSTNAME)).leaf_ids == []


def test_multiple_podsets_rack_required_for_both_and_temporary_state_cleanup():
    """tas_cache_test.go: "multiple podsets: block required for one, unconstrained for another;
    TASProfileMixed" (the second pod set sees the first as assumed usage) and "temporary state cleanup
    prevents leakage across PodSets"."""
    multipod = [
        brh("b1", "r1", "x3", 10), brh("b1", "r2", "x5", 10), brh("b1", "r2", "x1", 10),
        brh("b1", "r2", "x6", 10), brh("b2", "r1", "x2", 10), brh("b2", "r2", "x4", 20, mem=4 * GI, pods=40),
    ]  # fmt: skip
    got = find_assignments(
        tree(multipod),
        [
            TASRequest("podset1", 8, CPU1, TopologyRequest(required=BLOCK)),
            TASRequest("podset2", 2, CPU1, TopologyRequest(unconstrained=True)),
        ],
    )
    assert hosts(got["podset1"]) == [("x2", 8)] and hosts(got["podset2"]) == [("x2", 2)]
    two = [node(f"n{i}", {HOSTNAME: f"x{i}"}, 4, mem=4 * GI) for i in (1, 2)]
    got = find_assignments(
        tree(two, (HOSTNAME,)),
        [
            TASRequest("ps1", 1, {"cpu": 1000, "memory": 1000}, implied=True),
            TASRequest(
                "ps2", 1, {"cpu": 1000, "memory": 1000}, implied=True, node_selector={"never": "match"}
            ),
        ],
    )
    assert hosts(got["ps1"]) == [("x1", 1)]
    assert got["ps2"].failure == (
        'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 2; excluded: nodeSelector: 2'
    )


def test_tas_usage_is_subtracted_and_simulate_empty_ignores_it():
    """Given a host already assigned 3 of its 4 pods' worth by an admitted workload, when 2 pods must
    share it, then they do not fit, and they do when the flavor is taken as empty (the "as if
    empty" re-run of ``assignFlavors``)."""
    t = tree([node("x1", {HOSTNAME: "x1"}, 4)], (HOSTNAME,))
    t.change_usage([DomainUsage(("x1",), CPU1, 3)], 1)
    assert (
        place(t, 2, CPU1, required=HOSTNAME).failure
        == 'topology "default" allows to fit only 1 out of 2 pod(s)'
    )
    empty = find_assignment(
        t, TASRequest("main", 2, CPU1, TopologyRequest(required=HOSTNAME)), simulate_empty=True
    )
    assert hosts(empty) == [("x1", 2)]
    t.change_usage([DomainUsage(("x1",), CPU1, 3)], -1)
    assert hosts(place(t, 2, CPU1, required=HOSTNAME)) == [("x1", 2)]


def test_unknown_level_is_kueues_message():
    assert place(tree(DEFAULT, TWO), 1, CPU1, required=HOSTNAME).failure == (
        "no requested topology level: kubernetes.io/hostname"
    )


# --- properties ---------------------------------------------------------------------------------
@st.composite
def fleets(draw):
    nodes = []
    for i in range(draw(st.integers(1, 24))):
        b, r = draw(st.sampled_from("ab")), draw(st.sampled_from("cde"))
        nodes.append(
            node(
                f"n{i:02d}",
                {BLOCK: b, RACK: b + r, HOSTNAME: f"n{i:02d}"},
                draw(st.sampled_from([0, 1, 2, 4, 8])),
            )
        )
    return nodes


requests_st = st.fixed_dictionaries({"cpu": st.sampled_from([500, 1000, 2000])})
kinds = st.sampled_from([{"required": RACK}, {"required": BLOCK}, {"required": HOSTNAME}, {"preferred": RACK},
                         {"preferred": HOSTNAME}, {"unconstrained": True}, {}])  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(fleets(), st.integers(1, 30), requests_st, kinds, st.randoms(use_true_random=False))
def test_placement_properties(nodes, count, requests, kind, rnd):
    """Given any fleet and pod set, when the model places it, then: every pod is placed exactly once;
    no host gets more pods than its free capacity holds; a required pod set sits in one domain of its
    level; a failure is the only other outcome; and node order (Kueue iterates maps) changes nothing."""
    got = place(tree(nodes), count, requests, **kind)
    shuffled = list(nodes)
    rnd.shuffle(shuffled)
    assert place(tree(shuffled), count, requests, **kind) == got
    if got.failure:
        assert got.assignment is None
        return
    assert got.assignment is not None and got.assignment.pods == count
    by_host = {n.labels[HOSTNAME]: n for n in nodes}
    for (host,), pods in got.assignment.domains:
        alloc = by_host[host].allocatable
        assert 0 < pods <= min(alloc["cpu"] // requests["cpu"], alloc["pods"])
    if "required" in kind:
        level = kind["required"]
        assert len({by_host[h].labels[level] for (h,), _ in got.assignment.domains}) == 1


@settings(max_examples=100, deadline=None)
@given(fleets(), st.integers(1, 12), requests_st)
def test_a_preferred_pod_set_fits_whenever_the_fleet_holds_it(nodes, count, requests):
    """Given any fleet, when a preferred pod set is no larger than what all hosts hold together, then
    it is placed (preferred only ever widens), and a required one only if some rack holds it."""

    def holds(n):  # by CPU and by the node's pod slots (requests carry 1 pod each)
        return min(n.allocatable["cpu"] // requests["cpu"], n.allocatable["pods"])

    total = sum(holds(n) for n in nodes)
    preferred = place(tree(nodes), count, requests, preferred=RACK)
    assert (preferred.failure == "") == (count <= total)
    per_rack: dict[str, int] = {}
    for n in nodes:
        per_rack[n.labels[RACK]] = per_rack.get(n.labels[RACK], 0) + holds(n)
    required = place(tree(nodes), count, requests, required=RACK)
    assert (required.failure == "") == (count <= max(per_rack.values()))


def test_ten_thousand_nodes_place_deterministically():
    """Given 10,000 hosts in 2,500 racks, when the same pod set is placed twice (nodes in another
    order), then the answers are identical."""
    rng = random.Random(1)
    nodes = [
        node(
            f"n{i:05d}",
            {BLOCK: f"b{i // 400}", RACK: f"r{i // 4}", HOSTNAME: f"n{i:05d}"},
            rng.choice([2, 4, 8]),
        )
        for i in range(10_000)
    ]
    a = place(tree(nodes), 16, CPU1, required=RACK)
    rng.shuffle(nodes)
    assert place(tree(nodes), 16, CPU1, required=RACK) == a and a.failure == ""
