from topogov.domain.labels import layer_label
from topogov.domain.quantity import Resources
from topogov.domain.tree import NodeCapacity, build_tree, to_mermaid


def node(name, *path, gpu=8):
    labels = {layer_label(i): v for i, v in enumerate(path, start=1)}
    return NodeCapacity.from_labels(name, labels, allocatable=Resources(gpu=gpu))


def test_tree_sums_capacity_per_domain_and_keeps_nodes_without_topology():
    # Given two nodes under one layer-3 domain, one elsewhere, one four-layer node, one CPU node
    tree = build_tree(
        [
            node("a", "L1", "L2", "L3a"),
            node("b", "L1", "L2", "L3a"),
            node("c", "L1", "L2", "L3b"),
            node("d", "L1x", "L2x", "L3x", "L4x"),
            node("cpu", gpu=0),
        ]
    )
    # Then capacities aggregate up the tree
    l1 = tree.roots["L1"]
    assert l1.node_count == 3 and l1.allocatable.gpu == 24
    assert l1.children["L2"].children["L3a"].allocatable.gpu == 16
    assert tree.depth == 4
    assert [n.name for n in tree.unplaced] == ["cpu"]
    doc = tree.to_json()
    assert doc["levels"][-1] == layer_label(4)
    assert doc["unplaced"] == ["cpu"]


def test_mermaid_has_root_layers_leaves_and_an_unplaced_group():
    tree = build_tree([node("ip-10-0-0-1", "nn-a", "nn-b", "nn-c", "nn-d"), node("cpu-1")])
    text = to_mermaid(tree)
    lines = text.splitlines()
    assert lines[0] == "flowchart TD"
    assert 'L4_nn_d["Layer 4: nn-d"]' in text
    assert "L3_nn_c --> L4_nn_d" in text
    assert "L4_nn_d --> N_ip_10_0_0_1" in text
    assert "unplaced --> N_cpu_1" in text
