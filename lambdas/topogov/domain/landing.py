"""Where a job landed: its Pods' Nodes and those Nodes' network domains, and what Kueue did to it.

Pure. The API lists a Job's Pods (one call) and knows every Node's network path from the topology
snapshot, so ``GET /v1/jobs/{team}/{name}`` shows what ``kubectl get pods -o wide`` plus the nodes'
``topology.k8s.aws/network-node-layer-N`` labels would: per node its pods and domains, per layer the
number of distinct domains, and the tightest layer holding every placed pod in one domain.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from topogov.domain.labels import INDEX_LABEL, LAYER_LABEL_PREFIX
from topogov.domain.tree import NodeCapacity
from topogov.domain.views.batch import PodView
from topogov.domain.views.workload import WorkloadView

# Kueue's Workload conditions worth a line in a job's events, in the order they happen
# (kueue apis/kueue/v1beta2/workload_types.go: WorkloadQuotaReserved, WorkloadAdmitted, WorkloadEvicted,
# WorkloadPreempted, WorkloadRequeued, WorkloadFinished). Only a condition's latest transition is kept
# on the object, so these are the last of each kind, not a history.
KUEUE_CONDITIONS = ("QuotaReserved", "Admitted", "PodsReady", "Evicted", "Preempted", "Requeued", "Finished")


@dataclass(frozen=True, slots=True)
class PlacedPod:
    name: str
    node: str | None  # spec.nodeName; None while unscheduled (gated or pending)
    phase: str  # status.phase: Pending, Running, Succeeded, Failed, Unknown
    index: int | None = None  # the completion index of an Indexed Job's pod


def pods_from(items: Iterable[PodView]) -> list[PlacedPod]:
    """PlacedPods from the Pods the Kubernetes API lists."""
    out = []
    for pod in items:
        index = str(pod.labels.get(INDEX_LABEL) or "")
        phase = pod.phase or "Pending"
        out.append(PlacedPod(pod.name, pod.node_name, phase, int(index) if index.isdigit() else None))
    return sorted(out, key=lambda p: (p.index is None, p.index or 0, p.name))


def verdict(domains_per_level: list[int]) -> str:
    """One word to sort by: the deepest layer holding every pod in one domain, and how the next
    layer splits it — ``layer-3 ×1``, ``layer-2 ×1 (3 × L3)``; ``layer-1 ×2`` when even layer 1 is
    split; ``no topology`` when the nodes have none."""
    if not domains_per_level:
        return "no topology"
    if domains_per_level[0] != 1:
        return f"layer-1 ×{domains_per_level[0]}"
    deepest = 1
    while deepest < len(domains_per_level) and domains_per_level[deepest] == 1:
        deepest += 1
    if deepest == len(domains_per_level):
        return f"layer-{deepest} ×1"
    return f"layer-{deepest} ×1 ({domains_per_level[deepest]} × L{deepest + 1})"


def layer_of(level: str | None) -> int | None:
    """3 for ``topology.k8s.aws/network-node-layer-3`` or ``layer-3``; None for anything else."""
    if not level:
        return None
    tail = level.rsplit("-", 1)[-1]
    known = level.startswith((f"{LAYER_LABEL_PREFIX}layer-", "layer-"))
    return int(tail) if known and tail.isdigit() else None


def landing(
    pods: Iterable[PlacedPod], nodes: Mapping[str, NodeCapacity], asked_level: str | None = None
) -> dict[str, Any]:
    """The placement of ``pods`` over ``nodes`` (the snapshot's, by node name), as JSON.

    ``tightest`` is the deepest layer at which every placed pod shares one domain (None when the
    pods are spread over several layer-1 domains, or none is placed, or a node has no topology);
    ``domains`` counts distinct domains per layer among the placed pods' nodes; ``verdict`` is
    :func:`verdict` of those counts; ``inside_asked`` whether every placed pod is in one domain of
    ``asked_level`` (the level the job asked for; None when it asked none or nothing is placed);
    ``by_node`` has each node's pods and their completion indexes; ``unknown_nodes`` are nodes the
    snapshot does not know yet (added since the last pass)."""
    pods = list(pods)
    phases = Counter(p.phase for p in pods)
    per_node: dict[str, int] = Counter(p.node for p in pods if p.node)
    unknown = sorted(n for n in per_node if n not in nodes)
    paths = [nodes[n].path for n in per_node if n in nodes]
    depth = min((len(p) for p in paths), default=0)
    domains = []
    counts: list[int] = []
    tightest = None
    for level in range(1, depth + 1):
        distinct = sorted({p[:level] for p in paths})
        domains.append({"level": f"layer-{level}", "domains": len(distinct)})
        counts.append(len(distinct))
        if len(distinct) == 1 and not unknown:
            tightest = {"level": f"layer-{level}", "domain": distinct[0][-1]}
    indexes: dict[str, list[int]] = {}
    for p in pods:
        if p.node and p.index is not None:
            indexes.setdefault(p.node, []).append(p.index)
    by_node = [
        {
            "node": name,
            "pods": count,
            "indexes": sorted(indexes.get(name, [])),
            "instance_type": nodes[name].instance_type if name in nodes else None,
            "path": list(nodes[name].path) if name in nodes else None,
        }
        for name, count in sorted(
            per_node.items(), key=lambda kv: (nodes[kv[0]].path if kv[0] in nodes else (), kv[0])
        )
    ]
    asked = layer_of(asked_level)
    inside = None
    if asked is not None and per_node and not unknown:
        inside = asked <= depth and counts[asked - 1] == 1
    return {
        "pods": len(pods),
        "phases": dict(sorted(phases.items())),
        "placed": sum(per_node.values()),
        "nodes": len(per_node),
        "domains": domains,
        "tightest": tightest,
        "verdict": (verdict(counts) if paths and not unknown else "no topology") if per_node else None,
        "inside_asked": inside,
        "by_node": by_node,
        "unknown_nodes": unknown,
    }


def kueue_events(workload: WorkloadView | None) -> list[dict[str, Any]]:
    """The Workload's true conditions of ``KUEUE_CONDITIONS`` as job events: ``at`` (the condition's
    lastTransitionTime), ``what`` (``kueue: Admitted``), Kueue's own ``reason`` and ``message``."""
    if not workload:
        return []
    events = []
    for cond in workload.conditions:
        if cond.type in KUEUE_CONDITIONS and cond.true:
            event = {"at": cond.last_transition_time, "what": f"kueue: {cond.type}"}
            if cond.reason:
                event["reason"] = cond.reason
            if cond.message:
                event["message"] = cond.message
            events.append(event)
    order = {t: i for i, t in enumerate(KUEUE_CONDITIONS)}
    return sorted(events, key=lambda e: (e["at"] or "", order[e["what"].split(": ", 1)[1]]))
