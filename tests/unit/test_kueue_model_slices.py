"""Pod-set slices in the model (``tas.find_slice_assignment``) against Kueue v0.17.0's own table:
``pkg/cache/scheduler/tas_cache_test.go`` ``TestFindTopologyAssignments``, every case with
``PodSetSliceSize`` / ``PodSetSliceRequiredTopology`` that needs neither balanced placement
(``TASBalancedPlacement``, off), multi-layer slices (``TASMultiLayerTopology``, off) nor a pod-set group
(Kueue's job webhooks refuse a group with slices), translated as written: nodes, the pod set,
expected assignment or message (the case names are quoted). 17 of upstream's 34 slice cases; the
other 17 are skipped: 10 balanced placement, 6 multi-layer constraints, 1 a group with slices
("BestFit: podset group workers spread across hosts").

Then what the table leaves out, by property: on any fleet, the ranks the ungater gives pods
(``TopologyAssignment.ranks``) put every ``size`` consecutive pods in one slice-level domain and a
required pod set in one domain of its level, within every host's room, whatever the node order."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topogov.domain.kueue_model import (
    HOSTNAME,
    FlavorTree,
    Node,
    ResourceFlavor,
    TASRequest,
    Topology,
    TopologyRequest,
    find_assignment,
)
from topogov.domain.kueue_model.assigner import has_level
from topogov.domain.kueue_model.convert import workload_of
from topogov.domain.kueue_model.groups import find_assignments
from topogov.domain.kueue_model.topology import DomainUsage
from topogov.domain.views.workload import WorkloadView

BLOCK, RACK = "cloud.com/topology-block", "cloud.com/topology-rack"
THREE = (BLOCK, RACK, HOSTNAME)
CPU1 = {"cpu": 1000}
GI = 2**30


def node(b: str, r: str, h: str, cpu: float, *, mem: int = 0, pods: int = 10) -> Node:
    """Upstream's ``b1-r1-x3`` node: block, rack and hostname labels, CPU (and memory) and pods."""
    alloc = {"cpu": int(cpu * 1000), "pods": pods}
    if mem:
        alloc["memory"] = mem
    return Node(f"{b}-{r}-{h}", {BLOCK: b, RACK: r, HOSTNAME: h}, alloc)


def tree(nodes: list[Node], levels: tuple[str, ...] = THREE) -> FlavorTree:
    return FlavorTree(ResourceFlavor("f", {}, "default"), Topology("default", levels), nodes)


def place(nodes: list[Node], count: int, topology: TopologyRequest, requests=None):
    """The pod set placed: its hosts and counts in assignment order, or the failure message."""
    got = find_assignment(tree(nodes), TASRequest("main", count, requests or CPU1, topology))
    if got.assignment is None:
        return got.failure
    assert got.failure == ""
    return [(values[-1], n) for values, n in got.assignment.domains]


def hosts_of(b: str, r: str, *cpus: tuple[str, float]) -> list[Node]:
    return [node(b, r, h, cpu) for h, cpu in cpus]


# tas_cache_test.go's defaultNodes and scatteredNodes
DEFAULT = [
    node("b1", "r1", "x3", 1, mem=GI),
    node("b1", "r2", "x5", 1, mem=GI),
    node("b1", "r2", "x1", 1, mem=GI),
    node("b1", "r2", "x6", 1, mem=GI),
    node("b2", "r1", "x2", 1, mem=GI),
    node("b2", "r2", "x4", 2, mem=4 * GI, pods=40),
]
SCATTERED = [
    node("b1", "r1", "x3", 4, mem=GI),
    node("b1", "r1", "x5", 1, mem=GI),
    node("b1", "r1", "x1", 1, mem=GI),
    node("b2", "r1", "x6", 2, mem=GI),
    node("b2", "r1", "x2", 1, mem=GI),
]


def slices(level: str | None = None, size: int | None = None, **kw) -> TopologyRequest:
    return TopologyRequest(slice_level=level, slice_size=size, **kw)


UPSTREAM = [
    ("block required for podset; host required for slices; BestFit",
     hosts_of("b1", "r1", ("x3", 3), ("x5", 3), ("x1", 3)), 6, slices(HOSTNAME, 2, required=BLOCK),
     [("x1", 2), ("x3", 2), ("x5", 2)]),
    ("block required for podset; host required for slices; prioritize more free slice capacity first and "
     "then tight fit; BestFit",
     hosts_of("b1", "r1", ("x3", 6), ("x5", 5), ("x1", 4), ("x6", 2)), 12,
     slices(HOSTNAME, 2, required=BLOCK), [("x1", 4), ("x3", 6), ("x6", 2)]),
    ("block required for podset; host required for slices; select domains with tight fit; BestFit",
     hosts_of("b1", "r1", ("x3", 3), ("x5", 2), ("x1", 2)), 4, slices(HOSTNAME, 2, required=BLOCK),
     [("x1", 2), ("x5", 2)]),
    ("block required for podset; rack required for slices; BestFit",
     hosts_of("b1", "r1", ("x3", 1), ("x5", 1)) + hosts_of("b1", "r2", ("x1", 1), ("x6", 1), ("x2", 1))
     + hosts_of("b2", "r1", ("x4", 1), ("x7", 1)), 4, slices(RACK, 2, required=BLOCK),
     [("x3", 1), ("x5", 1), ("x1", 1), ("x2", 1)]),
    ("block preferred for podset; rack required for slices; BestFit",
     DEFAULT, 4, slices(RACK, 2, preferred=BLOCK), [("x1", 1), ("x5", 1), ("x4", 2)]),
    ("block required for podset; host required for slices; optimize last domain; BestFit",
     hosts_of("b1", "r1", ("x3", 4), ("x5", 3), ("x1", 2)), 6, slices(HOSTNAME, 2, required=BLOCK),
     [("x1", 2), ("x3", 4)]),
    ("block preferred for podset; host required for slices; 2 blocks with unbalanced subdomains; BestFit",
     hosts_of("b1", "r1", ("x3", 3), ("x5", 3), ("x1", 3)) + hosts_of("b2", "r1", ("x6", 6)), 12,
     slices(HOSTNAME, 3, preferred=BLOCK), [("x1", 3), ("x3", 3), ("x6", 6)]),
    ("block required for podset; rack required for slices; podset fits in a block, but slices do not fit "
     "in racks",
     hosts_of("b1", "r1", ("x3", 2)) + hosts_of("b1", "r2", ("x5", 2)) + hosts_of("b1", "r3", ("x1", 2)), 6,
     slices(RACK, 3, required=BLOCK), 'topology "default" doesn\'t allow to fit any of 2 slice(s)'),
    ("block required for podset; rack required for slices; only 1 out of 2 slices fit the topology",
     hosts_of("b1", "r1", ("x3", 3)) + hosts_of("b1", "r2", ("x5", 1)) + hosts_of("b1", "r3", ("x1", 1))
     + hosts_of("b1", "r4", ("x6", 1)), 6, slices(RACK, 3, required=BLOCK),
     'topology "default" allows to fit only 1 out of 2 slice(s)'),
    ("block required for podset; rack required for slices; podset fits in both blocks, but slices fit in "
     "only one block",
     hosts_of("b1", "r1", ("x3", 2)) + hosts_of("b1", "r2", ("x5", 2)) + hosts_of("b1", "r3", ("x1", 2))
     + hosts_of("b2", "r4", ("x6", 3)) + hosts_of("b2", "r5", ("x2", 3)), 6, slices(RACK, 3, required=BLOCK),
     [("x6", 3), ("x2", 3)]),
    ("slice required topology level cannot be above the main required topology level",
     DEFAULT, 1, slices(BLOCK, 1, required=HOSTNAME),
     "podset slice topology cloud.com/topology-block is above the podset topology kubernetes.io/hostname"),
    ("slice size is required when slice topology is requested",
     DEFAULT, 1, slices(HOSTNAME, required=BLOCK), "slice topology requested, but slice size not provided"),
    ("cannot request not existing slice topology",
     DEFAULT, 1, slices("not-existing-topology-level", 1, required=BLOCK),
     "no requested topology level for slices: not-existing-topology-level"),
    ("no topology for podset; host required for slices; BestFit",
     hosts_of("b1", "r1", ("x3", 3), ("x5", 3), ("x1", 3)), 6, slices(HOSTNAME, 2),
     [("x1", 2), ("x3", 2), ("x5", 2)]),
    ("no topology for podset; host required for slices; multiple blocks; BestFit",
     SCATTERED, 6, slices(HOSTNAME, 2), [("x3", 4), ("x6", 2)]),
    ("no topology for podset; rack required for slices; multiple blocks; BestFit",
     DEFAULT, 4, slices(RACK, 2), [("x1", 1), ("x5", 1), ("x4", 2)]),
    ("multi-layer topology: no feature gate; additional layers ignored",
     hosts_of("b1", "r1", ("x1", 1), ("x2", 4)) + hosts_of("b1", "r2", ("x3", 3), ("x4", 4)), 8,
     slices(RACK, 4, required=BLOCK), [("x1", 1), ("x2", 3), ("x3", 3), ("x4", 1)]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "nodes", "count", "topology", "want"), UPSTREAM, ids=[c[0] for c in UPSTREAM]
)
def test_upstream_slice_cases(case, nodes, count, topology, want):
    """Given upstream's nodes and pod set, when the model places it, then it gets upstream's expected
    assignment (host for host, in order) or message, word for word."""
    assert place(nodes, count, topology) == want, case


def test_all_seventeen_translatable_upstream_cases_are_here():
    assert len(UPSTREAM) == 17 and len({c[0] for c in UPSTREAM}) == 17


# --- what the table does not show ----------------------------------------------------------------
def test_below_the_slice_level_a_domain_fills_its_emptiest_children_first():
    """Given a rack sliced by 4 whose hosts hold 1 and 4 pods, when one slice goes there, then it
    takes the host of 1 and 3 of the other: below the slice level children have no slices, so
    ``sortedDomains`` orders them by pods held, ascending, for BestFit too (as upstream's "no feature
    gate" case shows); without slices the same 4 pods would sit on the host of 4."""
    nodes = hosts_of("b1", "r1", ("x1", 1), ("x2", 4))
    assert place(nodes, 4, slices(RACK, 4, required=RACK)) == [("x1", 1), ("x2", 3)]
    assert place(nodes, 4, TopologyRequest(required=RACK)) == [("x2", 4)]


def test_a_slice_of_one_on_the_lowest_level_places_as_no_slices():
    """Given slices of one pod on the hosts, then the placement is the one without slices (Kueue's
    own default: ``getSliceSizeWithSinglePodAsDefault``, the lowest level)."""
    for kw, count in (({"required": BLOCK}, 3), ({"preferred": RACK}, 5), ({"required": RACK}, 4)):
        assert place(DEFAULT, count, slices(HOSTNAME, 1, **kw)) == place(
            DEFAULT, count, TopologyRequest(**kw)
        )


def test_a_count_not_a_multiple_of_the_slice_size_places_whole_slices_only():
    """Given 5 pods in slices of 2 (Kueue's job webhook checks only that a slice is no larger than the
    pod set), then Kueue v0.17.0 places ``5 // 2`` slices, 4 pods, and admits the pod set so (its
    ungater then panics on the fifth pod's rank and releases none: the slices integration test). The
    model places the same 4."""
    nodes = hosts_of("b1", "r1", ("x1", 4), ("x2", 4))
    got = find_assignment(tree(nodes), TASRequest("main", 5, CPU1, slices(HOSTNAME, 2, required=RACK)))
    assert got.failure == "" and got.assignment is not None
    assert got.assignment.domains == ((("x1",), 4),) and len(got.assignment.ranks()) == 4


def test_a_slice_message_counts_pods_when_the_slice_is_one_pod():
    """``notFitMessage`` says "pod(s)" for slices of one pod, "slice(s)" otherwise, exclusions kept."""
    assert place(DEFAULT, 4, slices(RACK, 1, required=RACK)) == (
        'topology "default" allows to fit only 3 out of 4 pod(s)'
    )
    # x4 holds one pod of 1.5 CPU, half a slice; the other five hold none
    assert place(DEFAULT, 2, slices(HOSTNAME, 2, required=RACK), {"cpu": 1500}) == (
        'topology "default" doesn\'t allow to fit any of 1 slice(s). Total nodes: 6; '
        'excluded: resource "cpu": 5'
    )


def test_a_group_with_slices_or_an_empty_slice_is_refused_as_the_job_webhooks_refuse_them():
    with pytest.raises(ValueError, match="podset-group-name"):
        TopologyRequest(required=BLOCK, group="g", slice_level=HOSTNAME, slice_size=2)
    with pytest.raises(ValueError, match="podset-group-name"):
        TopologyRequest(required=BLOCK, group="g", slice_size=2)
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        TopologyRequest(required=BLOCK, slice_level=HOSTNAME, slice_size=0)


def test_slices_ask_for_topology_and_a_flavor_must_hold_their_level():
    """``IsExplicitlyRequestingTAS`` counts the slice fields; ``HasLevel`` needs the requested level
    (the top one for slices alone) and the slice level."""
    assert slices(HOSTNAME, 2).explicit and slices(size=2).explicit
    two = tree(DEFAULT, (BLOCK, RACK))
    assert has_level(two, slices(RACK, 2))
    assert not has_level(two, slices(HOSTNAME, 2, required=BLOCK))
    assert has_level(two, slices(size=2, required=BLOCK))


def test_a_workload_s_slice_fields_are_read():
    """A Workload's ``topologyRequest`` with ``podSetSliceRequiredTopology`` and ``podSetSliceSize``,
    alone or beside ``required``, becomes the model's request."""
    body = {
        "metadata": {"name": "w", "namespace": "ns", "uid": "u"},
        "spec": {
            "queueName": "q",
            "podSets": [
                {
                    "name": "main",
                    "count": 4,
                    "template": {"spec": {"containers": [{"resources": {"requests": {"cpu": "1"}}}]}},
                    "topologyRequest": {"podSetSliceRequiredTopology": RACK, "podSetSliceSize": 2},
                },
                {
                    "name": "other",
                    "count": 2,
                    "template": {"spec": {"containers": []}},
                    "topologyRequest": {
                        "required": BLOCK,
                        "podSetSliceRequiredTopology": HOSTNAME,
                        "podSetSliceSize": 2,
                    },
                },
            ],
        },
    }
    wl = workload_of(WorkloadView.from_api(body), {"ns/q": "cq"})
    assert [ps.topology for ps in wl.pod_sets] == [
        TopologyRequest(slice_level=RACK, slice_size=2),
        TopologyRequest(required=BLOCK, slice_level=HOSTNAME, slice_size=2),
    ]


def test_pod_sets_in_order_see_each_other_as_assumed_usage():
    """Two pod sets of one flavor (``FindTopologyAssignmentsForFlavor``): the second, sliced, counts
    the first as assumed usage."""
    nodes = hosts_of("b1", "r1", ("x1", 2), ("x2", 2)) + hosts_of("b1", "r2", ("x3", 4))
    got = find_assignments(
        tree(nodes),
        [
            TASRequest("first", 3, CPU1, TopologyRequest(required=RACK)),
            TASRequest("second", 4, CPU1, slices(HOSTNAME, 2, required=BLOCK)),
        ],
    )
    assert got["first"].assignment is not None and got["second"].assignment is not None
    # the first takes rack r1 (the first of two that hold 4), leaving x2 half a slice
    assert [(v[-1], n) for v, n in got["first"].assignment.domains] == [("x1", 2), ("x2", 1)]
    assert [(v[-1], n) for v, n in got["second"].assignment.domains] == [("x3", 4)]


# --- properties ----------------------------------------------------------------------------------
@st.composite
def fleets(draw):
    nodes = []
    for i in range(draw(st.integers(1, 24))):
        b, r = draw(st.sampled_from("ab")), draw(st.sampled_from("cde"))
        nodes.append(node(b, b + r, f"n{i:02d}", draw(st.sampled_from([0, 1, 2, 3, 4, 8]))))
    return nodes


shapes = st.sampled_from(
    [
        (HOSTNAME, {"required": BLOCK}),
        (HOSTNAME, {"required": RACK}),
        (HOSTNAME, {"required": HOSTNAME}),
        (RACK, {"required": BLOCK}),
        (RACK, {"required": RACK}),
        (BLOCK, {"required": BLOCK}),
        (HOSTNAME, {"preferred": RACK}),
        (RACK, {"preferred": BLOCK}),
        (HOSTNAME, {}),
        (RACK, {}),
    ]
)


@settings(max_examples=300, deadline=None)
@given(fleets(), st.integers(1, 4), st.integers(1, 6), shapes, st.randoms(use_true_random=False))
def test_every_slice_of_consecutive_ranks_shares_a_slice_level_domain(nodes, size, slices_n, shape, rnd):
    """Given any fleet and a pod set of whole slices, when the model places it, then every pod is
    placed once, within its host's room; the ranks ``k*size`` … ``k*size+size-1`` share one domain
    of the slice level; a required pod set sits in one domain of its level; and node order (Kueue
    iterates maps) changes nothing."""
    level, kw = shape
    count = size * slices_n
    request = TASRequest("main", count, CPU1, slices(level, size, **kw))
    got = find_assignment(tree(nodes), request)
    shuffled = list(nodes)
    rnd.shuffle(shuffled)
    assert find_assignment(tree(shuffled), request) == got
    if got.failure:
        assert got.assignment is None
        return
    assert got.assignment is not None and got.assignment.pods == count
    by_host = {n.labels[HOSTNAME]: n for n in nodes}
    for (host,), pods in got.assignment.domains:
        assert 0 < pods <= min(by_host[host].allocatable["cpu"] // 1000, 10)
    ranks = got.assignment.ranks()
    for k in range(slices_n):
        assert len({by_host[h].labels[level] for h in ranks[k * size : (k + 1) * size]}) == 1
    if "required" in kw:
        assert len({by_host[h].labels[kw["required"]] for h in ranks}) == 1


@settings(max_examples=200, deadline=None)
@given(
    fleets(),
    st.integers(1, 4),
    st.integers(1, 6),
    st.sampled_from([(HOSTNAME, RACK), (RACK, BLOCK), (HOSTNAME, BLOCK)]),
)
def test_a_required_pod_set_of_slices_fits_exactly_when_one_domain_holds_its_slices(
    nodes, size, slices_n, levels
):
    """Given any fleet, a required pod set of slices is placed exactly when some domain of its level
    holds that many whole slices of its slice-level domains (each holding ``pods // size``)."""
    slice_level, level = levels
    held: dict[str, int] = {}
    for n in nodes:
        held[n.labels[slice_level]] = held.get(n.labels[slice_level], 0) + min(
            n.allocatable["cpu"] // 1000, 10
        )
    per_domain: dict[str, int] = {}
    for n in {n.labels[slice_level]: n for n in nodes}.values():
        per_domain[n.labels[level]] = per_domain.get(n.labels[level], 0) + held[n.labels[slice_level]] // size
    got = place(nodes, size * slices_n, slices(slice_level, size, required=level))
    assert isinstance(got, list) == (slices_n <= max(per_domain.values()))


def test_kept_counts_caught_up_place_slices_as_a_fresh_tree_does():
    """Given a tree whose usage changes (admissions and finishes), when slices are placed on it (its
    counts kept and caught up) and on a fresh tree with the same usage, then the answers are equal."""
    rng = random.Random(7)
    nodes = [node(f"b{i // 16}", f"r{i // 4}", f"h{i:02d}", rng.choice([2, 4, 8])) for i in range(64)]
    kept, applied = tree(nodes), []
    questions = [
        TASRequest("main", 8, CPU1, slices(HOSTNAME, 2, required=BLOCK)),
        TASRequest("main", 12, CPU1, slices(RACK, 4, preferred=BLOCK)),
        TASRequest("main", 6, CPU1, slices(RACK, 3)),
    ]
    for _ in range(40):
        if applied and rng.random() < 0.4:
            usage = applied.pop(rng.randrange(len(applied)))
            kept.change_usage(usage, -1)
        else:
            host = f"h{rng.randrange(64):02d}"
            usage = [DomainUsage((host,), CPU1, 1)]
            if not kept.fits(usage):
                continue
            kept.change_usage(usage, 1)
            applied.append(usage)
        fresh = tree(nodes)
        for usage in applied:
            fresh.change_usage(usage, 1)
        assert [find_assignment(kept, q) for q in questions] == [find_assignment(fresh, q) for q in questions]
