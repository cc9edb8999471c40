"""The model's inputs from what Topogov already has: the Kueue objects :func:`topogov.domain.kueue.render`
writes (v1beta1 or v1beta2 dicts, as the API server would hold them) and the snapshot's nodes
(:class:`~topogov.domain.tree.NodeCapacity`), so the model runs on the very queues Topogov deploys.

A :class:`NodeCapacity` becomes a :class:`~.objects.Node` labelled as the labeler labels it
(``topology.k8s.aws/network-node-layer-N`` per network layer, ``kubernetes.io/hostname``,
``node.kubernetes.io/instance-type``), with allocatable ``pods`` (110 unless given); what its pods
already request becomes one non-TAS pod on it (Kueue subtracts such pods' requests:
``tas_non_tas_pod_cache.go``). Quantities are parsed as Kueue reads them (``ResourceValue``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from topogov.domain.kueue_model.objects import (
    HOSTNAME,
    ClusterQueue,
    FlavorQuotas,
    Node,
    NonTASPod,
    Preemption,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Topology,
    requests_from,
    requests_of,
)
from topogov.domain.labels import INSTANCE_TYPE_LABEL, layer_label
from topogov.domain.tree import NodeCapacity


def _amount(resource: str, value: Any) -> int:
    return requests_of({resource: value})[resource]


def cluster_queue_of(obj: Mapping[str, Any]) -> ClusterQueue:
    """A rendered ``ClusterQueue`` (``spec.cohort`` in v1beta1, ``spec.cohortName`` in v1beta2)."""
    spec = obj["spec"]
    groups = []
    for rg in spec.get("resourceGroups", []):
        flavors = []
        for f in rg["flavors"]:
            quotas = {}
            for item in f["resources"]:
                name = item["name"]
                borrow, lend = item.get("borrowingLimit"), item.get("lendingLimit")
                quotas[name] = ResourceQuota(
                    _amount(name, item["nominalQuota"]),
                    None if borrow is None else _amount(name, borrow),
                    None if lend is None else _amount(name, lend),
                )
            flavors.append(FlavorQuotas(f["name"], quotas))
        groups.append(ResourceGroup(tuple(rg["coveredResources"]), tuple(flavors)))
    pre = spec.get("preemption") or {}
    borrow_within = (pre.get("borrowWithinCohort") or {}).get("policy", "Never")
    fair = (spec.get("fairSharing") or {}).get("weight", 1)
    return ClusterQueue(
        obj["metadata"]["name"],
        tuple(groups),
        spec.get("cohortName") or spec.get("cohort") or None,
        Preemption(
            pre.get("withinClusterQueue", "Never"), pre.get("reclaimWithinCohort", "Never"), borrow_within
        ),
        fair_weight=float(fair),
        stop_policy=spec.get("stopPolicy", "None"),
    )


def objects_of(
    rendered: Iterable[Mapping[str, Any]],
) -> tuple[list[Topology], list[ResourceFlavor], list[ClusterQueue], dict[str, str]]:
    """Topologies, flavors, ClusterQueues and the LocalQueue (``namespace/name``) → ClusterQueue map
    of rendered objects (other kinds are ignored)."""
    topologies, flavors, queues, local = [], [], [], {}
    for obj in rendered:
        kind, meta, spec = obj["kind"], obj["metadata"], obj.get("spec") or {}
        if kind == "Topology":
            topologies.append(Topology(meta["name"], tuple(lv["nodeLabel"] for lv in spec["levels"])))
        elif kind == "ResourceFlavor":
            flavors.append(
                ResourceFlavor(meta["name"], dict(spec.get("nodeLabels") or {}), spec.get("topologyName"))
            )
        elif kind == "ClusterQueue":
            queues.append(cluster_queue_of(obj))
        elif kind == "LocalQueue":
            local[f"{meta['namespace']}/{meta['name']}"] = spec["clusterQueue"]
    return topologies, flavors, queues, local


def nodes_of(nodes: Iterable[NodeCapacity], pods: int = 110) -> tuple[list[Node], list[NonTASPod]]:
    """Labelled nodes and, for each node with requests, one non-TAS pod holding them."""
    out, busy = [], []
    for n in sorted(nodes, key=lambda x: x.name):
        labels = {layer_label(i): domain for i, domain in enumerate(n.path, start=1)}
        labels[HOSTNAME] = n.name
        if n.instance_type:
            labels[INSTANCE_TYPE_LABEL] = n.instance_type
        out.append(Node(n.name, labels, {**requests_from(n.allocatable), "pods": pods}, ready=n.available))
        used = requests_from(n.requested)
        if used:
            busy.append(NonTASPod(f"{n.name}/requested", n.name, used))
    return out, busy
