"""Capacity and fragmentation: per GPU instance type and network layer, the free GPUs of each domain,
the domains wholly free, and the largest job (in whole nodes) that could start now inside one domain
of the layer; and, for a job that waits, the domain that comes closest and what occupies it.

Pure. Free capacity is computed as Kueue computes it for topology-aware scheduling — allocatable
minus what the pods on the node request (Kueue: minus the TAS usage of admitted workloads and the
requests of other pods, ``pkg/cache/scheduler/tas_flavor_snapshot.go``) — from the snapshot's nodes
(their ``requested`` at the last reconcile pass; a node that is not Ready, cordoned or tainted by
the node lifecycle has nothing free: Kueue leaves it out). "Could start now" runs the Kueue model's own
placement (``kueue_model.find_assignment``, BestFit for a required level) on a flavor tree built the
way the governor renders flavors and Topologies.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from topogov.domain.kueue import flavors_from_nodes, topology_levels, topology_name
from topogov.domain.labels import INSTANCE_TYPE_LABEL, layer_label
from topogov.domain.placement_quality import JobPod
from topogov.domain.tree import NodeCapacity


@dataclass(frozen=True, slots=True)
class DomainFree:
    domain: str
    nodes: int
    free_gpus: int
    free_nodes: int  # nodes with every GPU free


def _tree(instance_type: str, depth: int, nodes: Iterable[NodeCapacity]) -> Any:
    from topogov.domain.kueue_model import FlavorTree, ResourceFlavor, Topology
    from topogov.domain.kueue_model.convert import nodes_of

    model_nodes, busy = nodes_of(nodes)
    flavor = ResourceFlavor(instance_type, {INSTANCE_TYPE_LABEL: instance_type}, topology_name(depth))
    return FlavorTree(
        flavor, Topology(topology_name(depth), tuple(topology_levels(depth))), model_nodes, busy
    )


def largest_now(tree: Any, level: str, gpus_per_pod: int, upper: int) -> int:
    """The most pods of ``gpus_per_pod`` GPUs Kueue would place now inside one domain of ``level``
    (binary search on the model's required placement; placement is monotone in the pod count)."""
    from topogov.domain.kueue_model import TASRequest, TopologyRequest, find_assignment

    def fits(k: int) -> bool:
        request = TASRequest("main", k, {"nvidia.com/gpu": gpus_per_pod}, TopologyRequest(required=level))
        return find_assignment(tree, request).assignment is not None

    lo, hi = 0, upper
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def domain_of(
    tree: Any, members: Iterable[NodeCapacity], layer: int, gpus_per_pod: int, pods: int
) -> str | None:
    """The layer-``layer`` domain where Kueue would place ``pods`` pods of ``gpus_per_pod`` GPUs now
    (the model's BestFit for a required level, as ``largest_now`` asks; its assignment names the
    hosts, whose path gives the domain); None for no pod or no fit."""
    from topogov.domain.kueue_model import TASRequest, TopologyRequest, find_assignment

    if pods <= 0:
        return None
    request = TASRequest(
        "main", pods, {"nvidia.com/gpu": gpus_per_pod}, TopologyRequest(required=layer_label(layer))
    )
    found = find_assignment(tree, request).assignment
    if found is None or not found.domains:
        return None
    paths = {n.name: n.path for n in members}
    path = paths.get(found.domains[0][0][-1], ())
    return path[layer - 1] if len(path) >= layer else None


# The layout of capacity_view's answer. A reconcile pass stores the view in the snapshot it writes
# (capacity_record); the API serves a stored view only when its layout is this one, else makes it
# from the nodes (a snapshot written by an older or newer version of the functions). Raise it when
# capacity_view's answer changes shape.
CAPACITY_LAYOUT = 1


def capacity_record(nodes: Mapping[str, NodeCapacity]) -> dict[str, Any]:
    """What a reconcile pass stores in the snapshot: the view of ``nodes`` and its layout."""
    return {"layout": CAPACITY_LAYOUT, "view": capacity_view(nodes)}


def stored_or_made(record: Mapping[str, Any], nodes: Mapping[str, NodeCapacity]) -> dict[str, Any]:
    """The view a pass stored (``record``) when it is of this layout, else made from ``nodes``."""
    if record.get("layout") == CAPACITY_LAYOUT and isinstance(record.get("view"), dict):
        return dict(record["view"])
    return capacity_view(nodes)


def capacity_view(nodes: Mapping[str, NodeCapacity]) -> dict[str, Any]:
    """Per GPU instance type: per layer (``layer_view``), the domains with their free GPUs and free
    whole nodes, how many are wholly free, and the largest whole-node job that could start now in
    one domain and on an empty fleet."""
    out = []
    for flavor in flavors_from_nodes(nodes.values()):
        members = [n for n in nodes.values() if n.instance_type == flavor.instance_type and n.path]
        if not members or flavor.allocatable.gpu <= 0:
            continue
        tree = _tree(flavor.instance_type, flavor.depth, members)
        per_node = flavor.allocatable.gpu
        out.append(
            {
                "instance_type": flavor.instance_type,
                "nodes": len(members),
                "gpus_per_node": per_node,
                "free_gpus": sum(max(0, n.allocatable.gpu - n.used.gpu) for n in members),
                "unavailable_nodes": sum(1 for n in members if not n.available),
                "levels": [
                    layer_view(tree, members, layer, per_node) for layer in range(1, flavor.depth + 1)
                ],
            }
        )
    return {"instance_types": out}


def layer_view(tree: Any, members: list[NodeCapacity], layer: int, per_node: int) -> dict[str, Any]:
    """One layer of one instance type: its domains (most free GPUs first), how many are wholly
    free, the largest whole-node job that could start now in one domain (``largest_now_nodes``, in
    the domain Kueue's BestFit would pick: ``largest_now_domain``) and on an empty fleet
    (``largest_empty_nodes``)."""
    domains: dict[str, list[NodeCapacity]] = defaultdict(list)
    for n in members:
        domains[n.path[layer - 1]].append(n)
    rows = sorted(
        (
            DomainFree(
                d,
                len(ns),
                sum(max(0, n.allocatable.gpu - n.used.gpu) for n in ns),
                sum(1 for n in ns if n.used.gpu == 0 and n.allocatable.gpu >= per_node),
            )
            for d, ns in domains.items()
        ),
        key=lambda r: (-r.free_gpus, r.domain),
    )
    biggest = max(r.nodes for r in rows)
    now = largest_now(tree, layer_label(layer), per_node, biggest)
    return {
        "level": f"layer-{layer}",
        "domains": len(rows),
        "wholly_free": sum(1 for r in rows if r.free_nodes == r.nodes),
        "largest_now_nodes": now,
        "largest_now_domain": domain_of(tree, members, layer, per_node, now),
        "largest_empty_nodes": biggest,
        "free": [
            {"domain": r.domain, "nodes": r.nodes, "free_gpus": r.free_gpus, "free_nodes": r.free_nodes}
            for r in rows
        ],
    }


def closest_domain(
    nodes: Mapping[str, NodeCapacity],
    running: Iterable[JobPod],
    *,
    level: str,
    pods: int,
    gpus_per_pod: int,
    instance_type: str | None,
    priority_of: Mapping[str, int],
    priority: int,
) -> dict[str, Any] | None:
    """For a job of ``pods`` x ``gpus_per_pod`` GPUs waiting for one domain of ``level``: the domain
    that would hold it once emptied and holds most of it now, how many of its pods fit there now,
    and the running jobs in it, cheapest to move first (lower priority, then fewer GPUs), with those
    that would have to finish or be preempted for it to fit. None when no domain could ever hold it."""
    from topogov.domain.landing import layer_of

    layer = layer_of(level)
    if layer is None or gpus_per_pod <= 0:
        return None
    best = _best_domain(nodes, layer, pods, gpus_per_pod, instance_type)
    if best is None:
        return None
    now, domain, members = best
    running = list(running)
    names = {n.name for n in members}
    occupants = sorted(
        _jobs_on(running, names),
        key=lambda j: (priority_of.get(j["priority_class"] or "", 0), j["gpus"], j["job"]),
    )
    free = {n.name: max(0, n.allocatable.gpu - n.used.gpu) for n in members}
    fits = now
    must_go = []
    for job in occupants:  # cheapest first, until the job would fit
        if fits >= pods:
            break
        for node in job["nodes"]:
            free[node] = free[node] + sum(p.gpus for p in running if p.node == node and p.job == job["job"])
        fits = min(pods, sum(min(free[n.name], n.allocatable.gpu) // gpus_per_pod for n in members))
        value = priority_of.get(job["priority_class"] or "", 0)
        must_go.append({**_public(job), "lower_priority": value < priority})
    return {
        "level": f"layer-{layer}",
        "domain": domain,
        "nodes": len(members),
        "pods_now": now,
        "pods": pods,
        "unavailable_nodes": sum(1 for n in members if not n.available),
        "occupants": [_public(j) for j in occupants],
        "to_free": must_go if fits >= pods else None,
    }


def _best_domain(
    nodes: Mapping[str, NodeCapacity], layer: int, pods: int, gpus_per_pod: int, instance_type: str | None
) -> tuple[int, str, list[NodeCapacity]] | None:
    """The domain of the layer that could hold all the pods once emptied and holds most of them
    now (then the smaller, then by name): (pods that fit now, domain, its nodes)."""
    per_domain: dict[str, list[NodeCapacity]] = defaultdict(list)
    for n in nodes.values():
        usable = len(n.path) >= layer and n.allocatable.gpu >= gpus_per_pod and bool(n.instance_type)
        if usable and (instance_type is None or n.instance_type == instance_type):
            per_domain[n.path[layer - 1]].append(n)
    candidates = []
    for domain, members in per_domain.items():
        if sum(n.allocatable.gpu // gpus_per_pod for n in members) < pods:
            continue
        now = sum(max(0, n.allocatable.gpu - n.used.gpu) // gpus_per_pod for n in members)
        candidates.append((min(now, pods), domain, members))
    if not candidates:
        return None
    return max(candidates, key=lambda c: (c[0], -len(c[2]), c[1]))


def _jobs_on(running: Iterable[JobPod], names: set[str]) -> list[dict[str, Any]]:
    """The running jobs with pods on those nodes: their GPUs there and the nodes."""
    jobs: dict[tuple[str, str], dict[str, Any]] = {}
    for p in running:
        if p.node in names:
            entry = jobs.setdefault(
                (p.namespace, p.job),
                {
                    "namespace": p.namespace,
                    "job": p.job,
                    "priority_class": p.priority,
                    "gpus": 0,
                    "nodes": set(),
                },
            )
            entry["gpus"] += p.gpus
            entry["nodes"].add(p.node)
    return list(jobs.values())


def _public(job: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "namespace": job["namespace"],
        "job": job["job"],
        "priority_class": job["priority_class"],
        "gpus": job["gpus"],
        "nodes": len(job["nodes"]),
    }
