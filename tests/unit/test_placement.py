"""Placement: the class index must agree with a per-node brute force, on any fleet."""

from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topogov.domain.labels import HOSTNAME_LABEL, layer_label, layer_of
from topogov.domain.placement import (
    CapacityIndex,
    UnknownLevel,
    pods_fit,
    required_feasibility,
    resolve_level,
    tightest_level,
)
from topogov.domain.quantity import Resources
from topogov.domain.tree import NodeCapacity

P5 = Resources(gpu=8, efa=32, cpu_m=191_000, memory=2000 * 2**30)


NOTHING = Resources()


def node(name, path, alloc=P5, used=NOTHING, itype="p5.48xlarge"):
    return NodeCapacity(name, tuple(path), itype, "", alloc, used)


def fleet(l1=2, l2=2, l3=4, per_leaf=4):
    out = []
    for a in range(l1):
        for b in range(l2):
            for c in range(l3):
                for d in range(per_leaf):
                    out.append(node(f"n-{a}{b}{c}{d}", (f"A{a}", f"B{a}{b}", f"C{a}{b}{c}")))
    return out


nodes_st = st.lists(
    st.builds(
        node,
        name=st.uuids().map(str),
        path=st.one_of(
            st.tuples(st.sampled_from("ab"), st.sampled_from("cde"), st.sampled_from("fghi")),
            st.tuples(
                st.sampled_from("ab"), st.sampled_from("cde"), st.sampled_from("fghi"), st.sampled_from("xy")
            ),
            st.just(()),
        ),
        alloc=st.builds(
            Resources, st.sampled_from([0, 4, 8]), st.sampled_from([0, 32]), st.just(96_000), st.just(2**40)
        ),
        used=st.builds(Resources, st.sampled_from([0, 2, 8]), st.just(0), st.just(0), st.just(0)),
        itype=st.sampled_from(["p5.48xlarge", "p4d.24xlarge"]),
    ),
    max_size=40,
)
pods_st = st.builds(
    Resources, st.integers(0, 8), st.sampled_from([0, 1, 4]), st.sampled_from([0, 1000, 8000]), st.just(0)
)


def pods_on_node(node: NodeCapacity, pod: Resources, *, now: bool) -> int:
    """The reference: how many ``pod``s fit on ``node`` (by what is free now, or by allocatable)."""
    return pods_fit(node.allocatable - node.requested if now else node.allocatable, pod)


def domain_of(node: NodeCapacity, label: str) -> str | None:
    if label == HOSTNAME_LABEL:
        return node.name
    layer = layer_of(label)
    if layer is None or len(node.path) < layer:
        return None
    return node.path[layer - 1]


def kueue_domains(nodes, label, pod, now, itype):
    """Per (flavor, domain), the pods it holds, node by node, by Kueue v0.17.0's rules: a flavor is a
    GPU instance type (what the governor renders); its tree holds its nodes that carry every level of
    its Topology (pkg/util/tas/node.go NodeMatchesFlavor), whose depth is the fewest layers of its
    labelled nodes; a level the flavor's Topology lacks is none for it (tas_flavorassigner.go)."""
    flavors = {n.instance_type for n in nodes if n.allocatable.gpu > 0}
    held = defaultdict(int)
    for flavor in flavors:
        if itype and flavor != itype:
            continue
        members = [n for n in nodes if n.instance_type == flavor]
        depth = min((len(n.path) for n in members if n.path), default=0)
        levels = [layer_label(i) for i in range(1, depth + 1)] + [HOSTNAME_LABEL]
        if label not in levels:
            continue
        for n in members:
            if len(n.path) >= depth:
                held[(flavor, domain_of(n, label))] += pods_on_node(n, pod, now=now)
    return held


@settings(max_examples=200)
@given(nodes_st, pods_st, st.booleans(), st.sampled_from([None, "p5.48xlarge"]))
def test_index_agrees_with_brute_force(nodes, pod, now, itype):
    index = CapacityIndex(nodes)
    for label in [HOSTNAME_LABEL, layer_label(1), layer_label(2), layer_label(3), layer_label(4)]:
        held = kueue_domains(nodes, label, pod, now, itype)
        fit = index.best_domain(label, pod, now=now, instance_type=itype)
        assert fit.pods == max(held.values(), default=0)
        if held:
            assert held[(fit.flavor, fit.domain)] == fit.pods


def test_resolve_level_accepts_aliases_and_label_keys_only():
    assert resolve_level("layer-3") == layer_label(3)
    assert resolve_level(layer_label(2)) == layer_label(2)
    assert resolve_level("hostname") == HOSTNAME_LABEL
    for bad in ["layer-5", "rack", "topology.k8s.aws/network-node-layer-9", ""]:
        with pytest.raises(UnknownLevel, match="unknown topology level"):
            resolve_level(bad)


def test_a_required_job_that_no_layer3_domain_can_hold_is_infeasible_and_told_what_fits():
    # Given 64 p5 nodes, 4 per layer-3 domain (32 GPUs per leaf)
    index = CapacityIndex(fleet())
    gpu8 = Resources(gpu=8)
    # When 10 pods of 8 GPUs are required in one layer-3 domain
    f = required_feasibility(index, layer_label(3), gpu8, 10)
    # Then no domain holds them: the largest holds 4, and layer-2 (16 nodes) would
    assert not f.feasible and f.fit.pods == 4
    assert f.would_fit.level == layer_label(2) and f.would_fit.fit.pods == 16
    # And 4 pods fit in layer-3
    assert required_feasibility(index, layer_label(3), gpu8, 4).feasible


def test_auto_picks_the_tightest_level_by_free_capacity_then_by_allocatable():
    nodes = fleet()
    # every layer-3 domain has one busy node
    nodes = [node(n.name, n.path, used=P5) if n.name.endswith("0") else n for n in nodes]
    index = CapacityIndex(nodes)
    choice = tightest_level(index, Resources(gpu=8), 4)
    assert choice.level == layer_label(2) and choice.basis == "free"  # 3 free per leaf: layer-3 too small
    assert "layer-2" in choice.reason
    full = CapacityIndex([node(n.name, n.path, used=P5) for n in fleet()])
    choice = tightest_level(full, Resources(gpu=8), 4)
    assert choice.level == layer_label(3) and choice.basis == "allocatable"


def test_a_job_larger_than_the_cluster_fits_nowhere():
    choice = tightest_level(CapacityIndex(fleet()), Resources(gpu=8), 65)
    assert choice.level is None and "no single domain" in choice.reason


def test_a_domain_holds_one_flavors_pods():
    """Kueue gives a pod set one flavor, so a domain shared by two instance types holds the pods of the
    better one, never their sum."""
    nodes = [*fleet(1, 1, 1, 4), node("p4", ("A0", "B00", "C000"), itype="p4d.24xlarge")]
    index = CapacityIndex(nodes)
    assert (
        index.best_domain(layer_label(3), Resources(gpu=8), now=False, instance_type="p5.48xlarge").pods == 4
    )
    fit = index.best_domain(layer_label(3), Resources(gpu=8), now=False)
    assert (fit.pods, fit.flavor) == (4, "p5.48xlarge")


def test_levels_are_the_flavors_own():
    """p5 nodes carry three layers, p6-b200 four: a layer-4 domain exists only for p6-b200, and CPU
    nodes (no flavor) are never counted."""
    b200 = Resources(gpu=8, efa=8, cpu_m=191_000, memory=2000 * 2**30)
    nodes = [*fleet(1, 1, 2, 4)]
    nodes += [
        node(f"b{i}", ("A0", "B00", "C009", f"D{i // 2}"), alloc=b200, itype="p6-b200.48xlarge")
        for i in range(4)
    ]
    nodes += [node("c5", ("A0", "B00", "C000"), alloc=Resources(cpu_m=8000), itype="c5.2xlarge")]
    index = CapacityIndex(nodes)
    assert set(index.flavors) == {"p5.48xlarge", "p6-b200.48xlarge"}
    assert index.flavor_levels("p5.48xlarge") == [
        layer_label(1),
        layer_label(2),
        layer_label(3),
        HOSTNAME_LABEL,
    ]
    assert index.levels("p5.48xlarge") == [HOSTNAME_LABEL, layer_label(3), layer_label(2), layer_label(1)]
    assert index.levels() == [HOSTNAME_LABEL, layer_label(4), layer_label(3), layer_label(2), layer_label(1)]
    l4 = index.best_domain(layer_label(4), Resources(gpu=8), now=False)
    assert (l4.flavor, l4.pods) == ("p6-b200.48xlarge", 2)
    assert (
        index.best_domain(layer_label(4), Resources(gpu=8), now=False, instance_type="p5.48xlarge").domain
        is None
    )
    f = required_feasibility(index, layer_label(4), Resources(gpu=8), 2, instance_type="p5.48xlarge")
    assert not f.feasible and not f.level_known
    assert required_feasibility(index, layer_label(4), Resources(gpu=8), 2).feasible
    assert index.best_domain(HOSTNAME_LABEL, Resources(cpu_m=8000), now=False).flavor != "c5.2xlarge"
