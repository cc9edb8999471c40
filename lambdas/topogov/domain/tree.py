"""The cluster's network topology tree with per-domain capacity (pure, no I/O).

Built from node labels (what Kueue sees), so it renders the same against the local stack and a
real cluster. Layer-1 domains are the roots; each node hangs under its deepest layer, or, where it
carries ``topology.k8s.aws/ultraserver-id`` (set by SageMaker HyperPod task governance beside the
layers), under its UltraServer there: the innermost level. Nodes without topology labels are grouped
on their own instead of being dropped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from topogov.domain.labels import ULTRASERVER_LABEL, layer_label, network_path
from topogov.domain.quantity import Resources, total


@dataclass(frozen=True, slots=True)
class NodeCapacity:
    """A node as the topology tree and the snapshot see it."""

    name: str
    path: tuple[str, ...]  # network nodes, layer 1 first; empty = no topology
    instance_type: str = ""
    instance_id: str = ""
    allocatable: Resources = field(default_factory=Resources)
    requested: Resources = field(default_factory=Resources)
    # False when Kueue's TAS leaves the node out for now: not Ready, cordoned (spec.unschedulable) or
    # tainted NoSchedule/NoExecute by the node lifecycle (node.kubernetes.io/*) or HyperPod, which no job
    # tolerates, or a HyperPod node whose health label is not Schedulable
    available: bool = True
    ultraserver: str = ""  # topology.k8s.aws/ultraserver-id, where the node carries it

    @property
    def used(self) -> Resources:
        """What is not free now: the pods' requests, or everything on a node that is not available."""
        return self.requested if self.available else self.allocatable

    @classmethod
    def from_labels(
        cls,
        name: str,
        labels: Mapping[str, str],
        *,
        instance_type: str = "",
        instance_id: str = "",
        allocatable: Resources | None = None,
        requested: Resources | None = None,
        available: bool = True,
    ) -> NodeCapacity:
        return cls(
            name,
            network_path(labels),
            instance_type,
            instance_id,
            allocatable or Resources(),
            requested or Resources(),
            available,
            labels.get(ULTRASERVER_LABEL, ""),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "path": list(self.path),
            "instance_type": self.instance_type,
            "instance_id": self.instance_id,
            "allocatable": self.allocatable.to_json(),
            "requested": self.requested.to_json(),
            **({} if self.available else {"available": False}),
            **({"ultraserver": self.ultraserver} if self.ultraserver else {}),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> NodeCapacity:
        return cls(
            data["name"],
            tuple(data["path"]),
            data.get("instance_type", ""),
            data.get("instance_id", ""),
            Resources.from_json(data["allocatable"]),
            Resources.from_json(data["requested"]),
            bool(data.get("available", True)),
            str(data.get("ultraserver") or ""),
        )


@dataclass(slots=True)
class Domain:
    layer: int
    id: str
    children: dict[str, Domain] = field(default_factory=dict)
    nodes: list[NodeCapacity] = field(default_factory=list)
    allocatable: Resources = field(default_factory=Resources)
    requested: Resources = field(default_factory=Resources)
    node_count: int = 0
    label: str = ""  # the level's node label: layer_label(layer), or ULTRASERVER_LABEL

    def to_json(self) -> dict[str, Any]:
        return {
            "layer": self.layer,
            "label": self.label or layer_label(self.layer),
            "id": self.id,
            "node_count": self.node_count,
            "allocatable": self.allocatable.to_json(),
            "requested": self.requested.to_json(),
            "children": [c.to_json() for c in sorted(self.children.values(), key=lambda d: d.id)],
            "nodes": sorted(n.name for n in self.nodes),
        }


@dataclass(slots=True)
class TopologyTree:
    roots: dict[str, Domain] = field(default_factory=dict)
    unplaced: list[NodeCapacity] = field(default_factory=list)
    depth: int = 0  # network layers
    ultraservers: bool = False  # some node hangs under an UltraServer, the innermost level

    def to_json(self) -> dict[str, Any]:
        levels = [layer_label(i) for i in range(1, self.depth + 1)]
        return {
            "depth": self.depth,
            "levels": levels + ([ULTRASERVER_LABEL] if self.ultraservers else []),
            "domains": [d.to_json() for d in sorted(self.roots.values(), key=lambda d: d.id)],
            "unplaced": sorted(n.name for n in self.unplaced),
        }


def build_tree(nodes: Iterable[NodeCapacity]) -> TopologyTree:
    tree = TopologyTree()
    for node in nodes:
        if not node.path:
            tree.unplaced.append(node)
            continue
        tree.depth = max(tree.depth, len(node.path))
        level = tree.roots
        domain: Domain | None = None
        for layer, node_id in enumerate(node.path, start=1):
            domain = level.get(node_id)
            if domain is None:
                domain = level[node_id] = Domain(layer, node_id)
            level = domain.children
        assert domain is not None
        if node.ultraserver:
            tree.ultraservers = True
            inner = level.get(node.ultraserver)
            if inner is None:
                inner = level[node.ultraserver] = Domain(
                    len(node.path) + 1, node.ultraserver, label=ULTRASERVER_LABEL
                )
            domain = inner
        domain.nodes.append(node)
    for root in tree.roots.values():
        _sum_up(root)
    return tree


def _sum_up(domain: Domain) -> None:
    """Capacity bottom-up, once per domain (not once per node per level)."""
    for child in domain.children.values():
        _sum_up(child)
    domain.allocatable = total(
        [n.allocatable for n in domain.nodes] + [c.allocatable for c in domain.children.values()]
    )
    domain.requested = total(
        [n.requested for n in domain.nodes] + [c.requested for c in domain.children.values()]
    )
    domain.node_count = len(domain.nodes) + sum(c.node_count for c in domain.children.values())


_UNSAFE = re.compile(r"[^A-Za-z0-9_]")


def _mid(prefix: str, value: str) -> str:
    return f"{prefix}_{_UNSAFE.sub('_', value)}"


def to_mermaid(tree: TopologyTree, title: str = "Cluster") -> str:
    """A Mermaid flowchart in the shape of AWS's visualize_topology.sh (layer 4 included)."""
    lines = ["flowchart TD", f'    root["{title}"]']

    def emit(domain: Domain, parent: str) -> None:
        mid = _mid(f"L{domain.layer}", domain.id)
        title = "UltraServer" if domain.label == ULTRASERVER_LABEL else f"Layer {domain.layer}"
        lines.append(f'    {mid}["{title}: {domain.id}"]')
        lines.append(f"    {parent} --> {mid}")
        for child in sorted(domain.children.values(), key=lambda d: d.id):
            emit(child, mid)
        for node in sorted(domain.nodes, key=lambda n: n.name):
            nid = _mid("N", node.name)
            lines.append(f'    {nid}["{node.name}"]')
            lines.append(f"    {mid} --> {nid}")

    for root in sorted(tree.roots.values(), key=lambda d: d.id):
        emit(root, "root")
    if tree.unplaced:
        lines.append('    unplaced["No topology labels"]')
        lines.append("    root --> unplaced")
        for node in sorted(tree.unplaced, key=lambda n: n.name):
            nid = _mid("N", node.name)
            lines.append(f'    {nid}["{node.name}"]')
            lines.append(f"    unplaced --> {nid}")
    return "\n".join(lines) + "\n"
