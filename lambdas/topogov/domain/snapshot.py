"""The topology snapshot: what the labeler learned, and what the API and CLI read (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from topogov.domain.labels import InstanceTopology
from topogov.domain.tree import NodeCapacity, build_tree

SCHEMA_VERSION = 1


@dataclass(slots=True)
class Snapshot:
    """Per-instance EC2 answers (the cache that spares EC2 calls) and per-node capacity.

    An answer may be adopted from the labels EKS wrote on the node (``InstanceTopology.adopted_at``)
    rather than asked of EC2; ``fetched_at`` stays when EC2 last confirmed it (0: not yet).

    ``instances`` maps instance id -> its topology, or -> ``absent_since`` time when EC2 was asked
    and did not report it (unsupported type, not running): such an instance is not asked again
    until its entry is older than the refresh interval or a state-change event names it.
    """

    instances: dict[str, InstanceTopology] = field(default_factory=dict)
    absent: dict[str, float] = field(default_factory=dict)
    nodes: dict[str, NodeCapacity] = field(default_factory=dict)
    generated_at: float = 0.0  # when the content last changed (it is not rewritten otherwise)
    # how tight the running jobs were at the last full pass (domain/placement_quality.quality)
    placement: dict[str, Any] = field(default_factory=dict)
    # the running jobs at the last full pass, with their GPUs per node (domain/fleet_map.running_jobs)
    running: list[dict[str, Any]] = field(default_factory=list)
    # domain/capacity.capacity_record of ``nodes``, made by the pass that wrote them: the API serves
    # its view without building the model's trees per snapshot (empty: not made; the API makes it)
    capacity: dict[str, Any] = field(default_factory=dict)
    # the cluster's mode at the last full pass (domain/hyperpod/mode.Mode.to_json): the API follows it
    mode: dict[str, Any] = field(default_factory=dict)
    # what Kueue adds to a namespace's pods' requests, as the last full pass read it
    # (domain/podrequests.defaults_record): the API charges jobs with it
    pod_defaults: dict[str, Any] = field(default_factory=dict)

    def node_for_instance(self, instance_id: str) -> str | None:
        for node in self.nodes.values():
            if node.instance_id == instance_id:
                return node.name
        return None

    def to_json(self) -> dict[str, Any]:
        tree = build_tree(self.nodes.values())
        return {
            "schema": SCHEMA_VERSION,
            "generated_at": self.generated_at,
            "instances": {
                i: {
                    "network_nodes": list(t.network_nodes),
                    "instance_type": t.instance_type,
                    "availability_zone": t.availability_zone,
                    "zone_id": t.zone_id,
                    "group_name": t.group_name,
                    "fetched_at": t.fetched_at,
                    "adopted_at": t.adopted_at,
                }
                for i, t in sorted(self.instances.items())
            },
            "absent": dict(sorted(self.absent.items())),
            "nodes": [n.to_json() for n in sorted(self.nodes.values(), key=lambda n: n.name)],
            "tree": tree.to_json(),
            "placement": self.placement,
            "running": self.running,
            "capacity": self.capacity,
            **({"mode": self.mode} if self.mode else {}),
            **({"pod_defaults": self.pod_defaults} if self.pod_defaults else {}),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Snapshot:
        if data.get("schema") != SCHEMA_VERSION:
            return cls()  # an unknown layout is treated as no cache: the next pass asks EC2 again
        instances = {
            i: InstanceTopology(
                instance_id=i,
                network_nodes=tuple(v["network_nodes"]),
                instance_type=v.get("instance_type", ""),
                availability_zone=v.get("availability_zone", ""),
                zone_id=v.get("zone_id", ""),
                group_name=v.get("group_name", ""),
                fetched_at=float(v.get("fetched_at", 0.0)),
                adopted_at=float(v.get("adopted_at", 0.0)),
            )
            for i, v in (data.get("instances") or {}).items()
        }
        nodes = {n["name"]: NodeCapacity.from_json(n) for n in data.get("nodes") or []}
        absent = {i: float(t) for i, t in (data.get("absent") or {}).items()}
        placement = dict(data.get("placement") or {})
        running = list(data.get("running") or [])
        capacity = dict(data.get("capacity") or {})
        mode = dict(data.get("mode") or {})
        generated_at = float(data.get("generated_at", 0.0))
        defaults = dict(data.get("pod_defaults") or {})
        return cls(instances, absent, nodes, generated_at, placement, running, capacity, mode, defaults)
