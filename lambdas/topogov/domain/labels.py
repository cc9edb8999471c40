"""Node topology labels: what a node should carry, and the minimal patch that gets it there.

Pure functions, no I/O. The values are the ones the cloud controller manager writes
(`topology.k8s.aws/network-node-layer-N` = EC2's ``NetworkNodes[N-1]``, top layer first, and
`topology.k8s.aws/zone-id`), so the two never fight.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

LABEL_PREFIX = "topology.k8s.aws/"
LAYER_LABEL_PREFIX = "topology.k8s.aws/network-node-"  # + "layer-N"
ZONE_ID_LABEL = "topology.k8s.aws/zone-id"
HOSTNAME_LABEL = "kubernetes.io/hostname"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
HYPERPOD_COMPUTE_TYPE_LABEL = "sagemaker.amazonaws.com/compute-type"

_LAYER_RE = re.compile(r"^topology\.k8s\.aws/network-node-layer-([1-9][0-9]*)$")

#: A label patch: key -> new value, or None to remove the key (JSON merge-patch semantics).
LabelPatch = dict[str, str | None]


def layer_label(layer: int) -> str:
    """The label key of network-node layer ``layer`` (1 = top)."""
    if layer < 1:
        raise ValueError(f"layer must be >= 1, got {layer}")
    return f"topology.k8s.aws/network-node-layer-{layer}"


def layer_of(label: str) -> int | None:
    """The layer number of a layer label key, or None for any other key."""
    m = _LAYER_RE.match(label)
    return int(m.group(1)) if m else None


@dataclass(frozen=True, slots=True)
class InstanceTopology:
    """One instance's answer from DescribeInstanceTopology."""

    instance_id: str
    network_nodes: tuple[str, ...]  # top layer first
    instance_type: str = ""
    availability_zone: str = ""
    zone_id: str = ""
    group_name: str = ""
    fetched_at: float = 0.0


def desired_labels(topology: InstanceTopology) -> dict[str, str]:
    """The owned labels a node backed by this instance must carry."""
    labels = {layer_label(i): node for i, node in enumerate(topology.network_nodes, start=1)}
    if topology.zone_id:
        labels[ZONE_ID_LABEL] = topology.zone_id
    return labels


def label_patch(current: Mapping[str, str], topology: InstanceTopology) -> LabelPatch:
    """The smallest patch that makes ``current`` carry the desired labels.

    Sets every desired label whose value differs, removes layer labels deeper than EC2's answer,
    and leaves every label the labeler does not own untouched. Empty when nothing drifted.
    """
    desired = desired_labels(topology)
    patch: LabelPatch = {k: v for k, v in desired.items() if current.get(k) != v}
    for key in current:
        if key not in desired and layer_of(key) is not None:
            patch[key] = None
    return patch


def stale_layer_patch(current: Mapping[str, str]) -> LabelPatch:
    """For a node EC2 reports no topology for: remove its network-node layer labels (the zone id
    label stays: on EKS the cloud controller manager sets it on every node)."""
    return {key: None for key in current if layer_of(key) is not None}


def apply_patch(current: Mapping[str, str], patch: Mapping[str, str | None]) -> dict[str, str]:
    """What a JSON merge patch of ``metadata.labels`` does on the server."""
    result = dict(current)
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = value
    return result


def network_path(labels: Mapping[str, str]) -> tuple[str, ...]:
    """The network-node path a node's labels describe (layer 1 first), stopping at the first gap."""
    path: list[str] = []
    layer = 1
    while (value := labels.get(layer_label(layer))) is not None:
        path.append(value)
        layer += 1
    return tuple(path)
