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

from topogov.domain.tree import NodeCapacity

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


def pods_from(items: Iterable[Mapping[str, Any]]) -> list[PlacedPod]:
    """PlacedPods from Pod objects as the Kubernetes API lists them."""
    out = []
    for pod in items:
        meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
        out.append(
            PlacedPod(
                str(meta.get("name", "")), spec.get("nodeName") or None, status.get("phase") or "Pending"
            )
        )
    return sorted(out, key=lambda p: p.name)


def landing(pods: Iterable[PlacedPod], nodes: Mapping[str, NodeCapacity]) -> dict[str, Any]:
    """The placement of ``pods`` over ``nodes`` (the snapshot's, by node name), as JSON.

    ``tightest`` is the deepest layer at which every placed pod shares one domain (None when the
    pods are spread over several layer-1 domains, or none is placed, or a node has no topology);
    ``domains`` counts distinct domains per layer among the placed pods' nodes; ``unknown_nodes``
    are nodes the snapshot does not know yet (added since the last pass)."""
    pods = list(pods)
    phases = Counter(p.phase for p in pods)
    per_node: dict[str, int] = Counter(p.node for p in pods if p.node)
    unknown = sorted(n for n in per_node if n not in nodes)
    paths = [nodes[n].path for n in per_node if n in nodes]
    depth = min((len(p) for p in paths), default=0)
    domains = []
    tightest = None
    for level in range(1, depth + 1):
        distinct = sorted({p[:level] for p in paths})
        domains.append({"level": f"layer-{level}", "domains": len(distinct)})
        if len(distinct) == 1 and not unknown:
            tightest = {"level": f"layer-{level}", "domain": distinct[0][-1]}
    by_node = [
        {
            "node": name,
            "pods": count,
            "instance_type": nodes[name].instance_type if name in nodes else None,
            "path": list(nodes[name].path) if name in nodes else None,
        }
        for name, count in sorted(
            per_node.items(), key=lambda kv: (nodes[kv[0]].path if kv[0] in nodes else (), kv[0])
        )
    ]
    return {
        "pods": len(pods),
        "phases": dict(sorted(phases.items())),
        "placed": sum(per_node.values()),
        "nodes": len(per_node),
        "domains": domains,
        "tightest": tightest,
        "by_node": by_node,
        "unknown_nodes": unknown,
    }


def kueue_events(workload: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The Workload's true conditions of ``KUEUE_CONDITIONS`` as job events: ``at`` (the condition's
    lastTransitionTime), ``what`` (``kueue: Admitted``), Kueue's own ``reason`` and ``message``."""
    if not workload:
        return []
    events = []
    for cond in (workload.get("status") or {}).get("conditions") or []:
        if cond.get("type") in KUEUE_CONDITIONS and cond.get("status") == "True":
            event = {"at": cond.get("lastTransitionTime"), "what": f"kueue: {cond['type']}"}
            if cond.get("reason"):
                event["reason"] = cond["reason"]
            if cond.get("message"):
                event["message"] = cond["message"]
            events.append(event)
    order = {t: i for i, t in enumerate(KUEUE_CONDITIONS)}
    return sorted(events, key=lambda e: (e["at"] or "", order[e["what"].split(": ", 1)[1]]))
