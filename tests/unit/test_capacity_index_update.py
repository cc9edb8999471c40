"""``CapacityIndex.update``: an index kept up to date node by node answers every question exactly as
an index built afresh from the same nodes does (the simulator keeps one live index per replay)."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from topogov.domain.labels import HOSTNAME_LABEL, layer_label
from topogov.domain.placement import CapacityIndex, tightest_level
from topogov.domain.quantity import Resources
from topogov.logic.whatif.inputs import synthetic_fleet

LEVELS = [HOSTNAME_LABEL, *(layer_label(i) for i in (4, 3, 2, 1))]
PODS = [Resources(gpu=8), Resources(gpu=4, efa=8), Resources(gpu=1), Resources(cpu_m=1000)]


def answers(index: CapacityIndex) -> list:
    out = []
    for pod in PODS:
        for now in (True, False):
            for label in LEVELS:
                for itype in (None, "p5.48xlarge", "p6-b200.48xlarge"):
                    out.append(index.best_domain(label, pod, now=now, instance_type=itype))
        for count in (1, 3, 9, 40):
            out.append(tightest_level(index, pod, count))
    return out


@pytest.mark.parametrize("seed", range(5))
def test_an_index_updated_node_by_node_answers_as_a_fresh_one(seed):
    rng = random.Random(seed)
    nodes = {n.name: n for n in synthetic_fleet("p5.48xlarge", (2, 2, 3), 4)}
    nodes |= {n.name: n for n in synthetic_fleet("p6-b200.48xlarge", (1, 1, 2, 2), 2, prefix="b-")}
    live = CapacityIndex(nodes.values())
    for step in range(120):
        name = rng.choice(sorted(nodes))
        node = nodes[name]
        gpus = rng.choice([0, 0, 2, 4, 8])
        requested = Resources(gpu=gpus, efa=rng.choice([0, 8]))
        node = replace(node, requested=requested, available=rng.random() > 0.05)
        nodes[name] = node
        live.update(node)
        if step % 10 == 9:
            fresh = CapacityIndex(nodes.values())
            assert answers(live) == answers(fresh)
            assert live.node_count == fresh.node_count
            assert sorted(live.by_level) == sorted(fresh.by_level)
            for label in fresh.by_level:
                firsts = sorted(d for _, d in fresh.by_level[label])
                assert sorted(d for _, d in live.by_level[label]) == firsts


def test_an_update_may_not_move_a_node_or_add_one():
    (node, *_) = nodes = synthetic_fleet("p5.48xlarge", (1, 1, 1), 2)
    index = CapacityIndex(nodes)
    with pytest.raises(ValueError, match="not in the index"):
        index.update(replace(node, path=("x", "y", "z")))
    with pytest.raises(ValueError, match="not in the index"):
        index.update(replace(node, name="elsewhere"))


def test_a_class_no_node_has_any_more_is_no_host():
    nodes = synthetic_fleet("p5.48xlarge", (1, 1, 1), 2)
    index = CapacityIndex(nodes)
    for n in nodes:  # every node full: the class of empty p5s has no node left
        index.update(replace(n, requested=Resources(gpu=8)))
    fit = index.best_domain(HOSTNAME_LABEL, Resources(gpu=8), now=True)
    assert (fit.domain, fit.pods) == (nodes[0].name, 0)
    assert answers(index) == answers(CapacityIndex(replace(n, requested=Resources(gpu=8)) for n in nodes))
