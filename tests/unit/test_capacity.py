"""Capacity and fragmentation (domain/capacity.py) and where Kueue would place a job now
(CapacityIndex.kueue_pick, the Kueue model's BestFit) on a 2 x 2 x 4 x 4 fleet."""

from __future__ import annotations

from topogov.domain.capacity import capacity_view, closest_domain
from topogov.domain.labels import layer_label
from topogov.domain.placement import CapacityIndex
from topogov.domain.placement_quality import JobPod
from topogov.domain.quantity import Resources
from topogov.domain.tree import NodeCapacity

P5 = Resources(8, 32, 191450, 2002 * 2**30)
BUSY = {0, 1, 2, 5, 20, 33}  # nodes whose 8 GPUs are in use (by team-b's b-train)


def fleet(busy=BUSY):
    nodes = {}
    for i in range(64):
        path = (f"a{i // 32}", f"b{i // 16}", f"c{i // 4}")
        used = Resources(8, 32, 0, 0) if i in busy else Resources()
        nodes[f"n{i:02d}"] = NodeCapacity(f"n{i:02d}", path, "p5.48xlarge", "", P5, used)
    return nodes


def test_per_layer_free_gpus_wholly_free_domains_and_the_largest_job_now():
    (p5,) = capacity_view(fleet())["instance_types"]
    assert (p5["instance_type"], p5["nodes"], p5["gpus_per_node"], p5["free_gpus"]) == (
        "p5.48xlarge",
        64,
        8,
        464,
    )
    by = {lv["level"]: lv for lv in p5["levels"]}
    # layer-1: a0 has 5 busy nodes, a1 one: the largest whole-node job now is a1's 31 free nodes
    assert by["layer-1"]["wholly_free"] == 0 and by["layer-1"]["largest_now_nodes"] == 31
    assert by["layer-1"]["free"][0] == {"domain": "a1", "nodes": 32, "free_gpus": 248, "free_nodes": 31}
    # layer-2: b3 is untouched (nodes 48-63); b0 has 4 busy nodes
    assert by["layer-2"]["wholly_free"] == 1 and by["layer-2"]["largest_now_nodes"] == 16
    assert {d["domain"]: d["free_nodes"] for d in by["layer-2"]["free"]} == {
        "b0": 12,
        "b1": 15,
        "b2": 15,
        "b3": 16,
    }
    # layer-3: 16 domains of 4, 4 of them touched
    assert by["layer-3"]["wholly_free"] == 12 and by["layer-3"]["largest_now_nodes"] == 4
    assert all(
        lv["largest_empty_nodes"] == {"layer-1": 32, "layer-2": 16, "layer-3": 4}[lv["level"]]
        for lv in p5["levels"]
    )


def test_a_full_fleet_has_no_room_now_but_room_when_empty():
    (p5,) = capacity_view(fleet(busy=set(range(64))))["instance_types"]
    assert all(lv["largest_now_nodes"] == 0 and lv["wholly_free"] == 0 for lv in p5["levels"])
    assert p5["free_gpus"] == 0


def test_kueue_would_pick_the_fullest_domain_that_fits_bestfit():
    index = CapacityIndex(fleet().values())
    pick = index.kueue_pick(layer_label(3), Resources(gpu=8), 2, "p5.48xlarge")
    # BestFit: the layer-3 domain with the least free capacity that still holds 2 pods: c0 (n00-n03)
    # has 1 free node, c1 (n04-n07) 3, c5 (n20-23) 3 ...: c1 or c5 (3 free) beat the empty ones
    assert (
        pick is not None and pick.domain in ("c1", "c5") and pick.domain_nodes == 4 and pick.free_nodes == 3
    )
    assert len(pick.nodes) == 2 and all(int(n[1:]) // 4 == int(pick.domain[1:]) for n in pick.nodes)
    assert index.kueue_pick(layer_label(2), Resources(gpu=8), 17, "p5.48xlarge") is None  # never fits
    full = CapacityIndex(fleet(busy=set(range(64))).values())
    assert full.kueue_pick(layer_label(3), Resources(gpu=8), 1, None) is None


def test_the_closest_domain_names_what_occupies_it_and_what_would_have_to_go():
    nodes = fleet()
    running = [JobPod("ns-b", "b-train", "u1", n, "required", "experimentation-priority", 8)
               for n in ("n00", "n01", "n02", "n05", "n20", "n33")]  # fmt: skip
    priorities = {"experimentation-priority": 100, "training-priority": 500}
    # 16 pods at layer-2: b3 is empty and holds them all now
    got = closest_domain(nodes, running, level=layer_label(2), pods=16, gpus_per_pod=8,
                         instance_type="p5.48xlarge", priority_of=priorities, priority=500)  # fmt: skip
    assert (got["domain"], got["pods_now"], got["occupants"], got["to_free"]) == ("b3", 16, [], [])
    # with b3 taken too, the closest is b1 or b2 (15 free): b-train's one pod there must go
    taken = [
        *running,
        *(JobPod("ns-a", "a-big", "u2", f"n{i}", "auto", "training-priority", 8) for i in range(48, 64)),
    ]
    nodes = dict(fleet(busy=BUSY | set(range(48, 64))))
    got = closest_domain(nodes, taken, level=layer_label(2), pods=16, gpus_per_pod=8,
                         instance_type="p5.48xlarge", priority_of=priorities, priority=500)  # fmt: skip
    assert got["domain"] in ("b1", "b2") and got["pods_now"] == 15
    b_train = {"namespace": "ns-b", "job": "b-train", "priority_class": "experimentation-priority"}
    assert got["to_free"] == [{**b_train, "gpus": 8, "nodes": 1, "lower_priority": True}]
    assert closest_domain(nodes, taken, level=layer_label(2), pods=17, gpus_per_pod=8, instance_type=None,
                          priority_of=priorities, priority=500) is None  # fmt: skip


def test_a_node_kueue_leaves_out_has_nothing_free_now_but_counts_when_empty():
    """Kueue v0.17.0 keeps only Ready, schedulable nodes in its TAS cache (``pkg/cache/scheduler/
    tas_nodes_cache.go``) and skips nodes with an untolerated NoSchedule/NoExecute taint
    (``tas_flavor_snapshot.go``, ``fillInCounts``): a cordoned node in an otherwise empty layer-3
    domain makes it hold one node fewer now, and Kueue's pick moves to another domain."""
    from dataclasses import replace

    nodes = fleet(busy=set())
    nodes["n00"] = replace(nodes["n00"], available=False)
    (p5,) = capacity_view(nodes)["instance_types"]
    assert p5["free_gpus"] == 63 * 8 and p5["unavailable_nodes"] == 1
    layer3 = next(lv for lv in p5["levels"] if lv["level"] == "layer-3")
    assert layer3["wholly_free"] == 15 and {d["domain"]: d["free_nodes"] for d in layer3["free"]}["c0"] == 3
    assert layer3["largest_empty_nodes"] == 4  # it is still the fleet's shape
    # BestFit would have taken c0 (the first of the equally free domains) for 4 nodes: not now
    pick = CapacityIndex(nodes.values()).kueue_pick(layer_label(3), Resources(gpu=8), 4, "p5.48xlarge")
    assert pick is not None and pick.domain != "c0" and "n00" not in pick.nodes
    # a 3-node job fits c0 best now (the fullest domain that still holds it)
    pick = CapacityIndex(nodes.values()).kueue_pick(layer_label(3), Resources(gpu=8), 3, "p5.48xlarge")
    assert pick is not None and pick.domain == "c0" and "n00" not in pick.nodes
    waiting = closest_domain(nodes, [], level="layer-3", pods=4, gpus_per_pod=8, instance_type=None,
                             priority_of={}, priority=0)  # fmt: skip
    assert waiting is not None and waiting["pods_now"] == 4 and waiting["unavailable_nodes"] == 0
    # the snapshot keeps it across a round trip (and omits the field for available nodes)
    assert NodeCapacity.from_json(nodes["n00"].to_json()).available is False
    assert "available" not in nodes["n01"].to_json()


def test_a_node_is_available_when_ready_schedulable_and_without_a_lifecycle_taint():
    from topogov.domain.views.nodes import NodeView

    def view(**spec_status):
        spec = {"providerID": "aws:///us-east-1a/i-0123456789abcdef0", **spec_status.get("spec", {})}
        conditions = spec_status.get("conditions", [{"type": "Ready", "status": "True"}])
        return NodeView.from_api(
            {"metadata": {"name": "n"}, "spec": spec, "status": {"conditions": conditions}}
        )

    assert view().available
    assert not view(conditions=[{"type": "Ready", "status": "False"}]).available
    assert not view(conditions=[]).available  # no status yet: Kueue does not count it either
    assert not view(spec={"unschedulable": True}).available
    taint = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
    assert not view(spec={"taints": [taint]}).available
    # a taint a job may tolerate (the GPU nodes' own) leaves it to the job's tolerations
    assert view(
        spec={"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]}
    ).available
    assert view(spec={"taints": [{**taint, "effect": "PreferNoSchedule"}]}).available


def test_a_stored_view_is_served_only_in_this_layout():
    """A reconcile pass stores the view with its layout; the API serves it as stored, and makes it
    from the nodes when the snapshot has none or one of another layout (another version's)."""
    from topogov.domain.capacity import CAPACITY_LAYOUT, capacity_record, stored_or_made

    nodes = fleet()
    made = capacity_view(nodes)
    assert capacity_record(nodes) == {"layout": CAPACITY_LAYOUT, "view": made}
    stored = {"layout": CAPACITY_LAYOUT, "view": {"instance_types": ["as stored"]}}
    assert stored_or_made(stored, nodes) == {"instance_types": ["as stored"]}
    assert stored_or_made({}, nodes) == made
    assert stored_or_made({**stored, "layout": CAPACITY_LAYOUT + 1}, nodes) == made
