"""Label diffing: properties that must hold for every node and every EC2 answer."""

from hypothesis import given
from hypothesis import strategies as st

from topogov.domain.labels import (
    ZONE_ID_LABEL,
    InstanceTopology,
    apply_patch,
    desired_labels,
    label_patch,
    layer_label,
    layer_of,
    network_path,
)

node_ids = st.from_regex(r"nn-[0-9a-f]{17}", fullmatch=True)
topologies = st.builds(
    InstanceTopology,
    instance_id=st.just("i-0123456789abcdef0"),
    network_nodes=st.lists(node_ids, min_size=3, max_size=4).map(tuple),
    zone_id=st.sampled_from(["use1-az1", "use1-az2", ""]),
)
foreign_keys = st.sampled_from(
    ["kubernetes.io/hostname", "node.kubernetes.io/instance-type", "team", "topology.k8s.aws/ultraserver-id"]
)
owned_keys = st.sampled_from([layer_label(i) for i in range(1, 7)] + [ZONE_ID_LABEL])
label_maps = st.dictionaries(st.one_of(foreign_keys, owned_keys), node_ids, max_size=10)


@given(label_maps, topologies)
def test_applying_the_patch_yields_the_desired_labels(current, topo):
    # Given any current labels and an EC2 answer / When the patch is applied
    result = apply_patch(current, label_patch(current, topo))
    # Then every desired label is set and no layer deeper than EC2's answer remains
    for key, value in desired_labels(topo).items():
        assert result[key] == value
    deepest = len(topo.network_nodes)
    assert all(layer_of(k) is None or layer_of(k) <= deepest for k in result)


@given(label_maps, topologies)
def test_diffing_again_gives_an_empty_patch(current, topo):
    once = apply_patch(current, label_patch(current, topo))
    assert label_patch(once, topo) == {}


def is_owned(label: str) -> bool:
    """The labels the labeler owns (the README's label table): network-node layers and the zone id."""
    return label == ZONE_ID_LABEL or layer_of(label) is not None


@given(label_maps, topologies)
def test_labels_not_owned_are_never_touched(current, topo):
    patch = label_patch(current, topo)
    assert all(is_owned(k) for k in patch)
    result = apply_patch(current, patch)
    assert {k: v for k, v in result.items() if not is_owned(k)} == {
        k: v for k, v in current.items() if not is_owned(k)
    }


def test_zone_id_is_kept_when_ec2_gives_none():
    # Given a node with a zone-id label and an answer without ZoneId
    topo = InstanceTopology("i-1", ("a", "b", "c"))
    current = {ZONE_ID_LABEL: "use1-az1", **desired_labels(topo)}
    # Then nothing is removed
    assert label_patch(current, topo) == {}


def test_fewer_layers_than_the_node_has_removes_the_deeper_ones():
    current = {layer_label(1): "a", layer_label(2): "b", layer_label(3): "c", layer_label(4): "d"}
    patch = label_patch(current, InstanceTopology("i-1", ("a", "b", "c")))
    assert patch == {layer_label(4): None}


def test_network_path_stops_at_the_first_gap():
    labels = {layer_label(1): "a", layer_label(2): "b", layer_label(4): "d"}
    assert network_path(labels) == ("a", "b")


def test_layer_label_rejects_zero():
    try:
        layer_label(0)
    except ValueError as exc:
        assert "layer" in str(exc)
    else:
        raise AssertionError("layer 0 accepted")
