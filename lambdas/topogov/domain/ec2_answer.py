"""Parse DescribeInstanceTopology answers (pure, no I/O)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from topogov.domain.labels import InstanceTopology

MIN_LAYERS = 1


def parse_instances(instances: Iterable[Mapping[str, Any]], fetched_at: float) -> dict[str, InstanceTopology]:
    """Map ``Instances`` entries of DescribeInstanceTopology pages to instance id -> topology.

    EC2 returns ``NetworkNodes`` top layer first: three layers for most types, four for
    p6-b200/p6-b300. Entries without an id or without network nodes are dropped (EC2 never sends
    them; a defensive parse keeps one odd entry from failing a pass).
    """
    result: dict[str, InstanceTopology] = {}
    for item in instances:
        instance_id = item.get("InstanceId")
        nodes = tuple(str(n) for n in item.get("NetworkNodes") or ())
        if not instance_id or len(nodes) < MIN_LAYERS:
            continue
        result[instance_id] = InstanceTopology(
            instance_id=instance_id,
            network_nodes=nodes,
            instance_type=item.get("InstanceType", ""),
            availability_zone=item.get("AvailabilityZone", ""),
            zone_id=item.get("ZoneId", ""),
            group_name=item.get("GroupName", ""),
            fetched_at=fetched_at,
        )
    return result


def batches(ids: Iterable[str], size: int = 100) -> list[list[str]]:
    """Split instance ids into request batches (DescribeInstanceTopology takes at most 100)."""
    if not 1 <= size <= 100:
        raise ValueError("batch size must be 1..100")
    seq = list(ids)
    return [seq[i : i + size] for i in range(0, len(seq), size)]
