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

import datetime as _dt
from collections.abc import Iterable, Mapping
from typing import Any, Literal, cast

from topogov.domain.kueue_model.objects import (
    HOSTNAME,
    ClusterQueue,
    FlavorQuotas,
    Node,
    NonTASPod,
    PodSet,
    Preemption,
    PreemptionPolicy,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    StopPolicy,
    Toleration,
    Topology,
    TopologyRequest,
    Workload,
    requests_from,
    requests_of,
)
from topogov.domain.kueue_model.state import PodSetAdmission
from topogov.domain.kueue_model.tas import TopologyAssignment
from topogov.domain.labels import INSTANCE_TYPE_LABEL, layer_label
from topogov.domain.tree import NodeCapacity
from topogov.domain.views.batch import PodSpecView
from topogov.domain.views.objects import (
    ClusterQueueView,
    LocalQueueView,
    ResourceFlavorView,
    TopologyView,
    object_view,
)
from topogov.domain.views.workload import WorkloadView

BorrowWithinCohort = Literal["Never", "LowerPriority"]
TolerationOperator = Literal["Equal", "Exists"]


def _amount(resource: str, value: Any) -> int:
    return requests_of({resource: value})[resource]


def cluster_queue_of(cq: ClusterQueueView) -> ClusterQueue:
    """A rendered ``ClusterQueue`` (``spec.cohort`` in v1beta1, ``spec.cohortName`` in v1beta2)."""
    groups = []
    for rg in cq.resource_groups:
        flavors = []
        for f in rg.flavors:
            quotas = {}
            for item in f.resources:
                name, borrow, lend = item.name, item.borrowing_limit, item.lending_limit
                quotas[name] = ResourceQuota(
                    _amount(name, item.nominal_quota),
                    None if borrow is None else _amount(name, borrow),
                    None if lend is None else _amount(name, lend),
                )
            flavors.append(FlavorQuotas(f.name, quotas))
        groups.append(ResourceGroup(rg.covered_resources, tuple(flavors)))
    # The policies' values are Kueue's enums (its CRD's validation); the view keeps them as written.
    return ClusterQueue(
        cq.name,
        tuple(groups),
        cq.cohort,
        Preemption(
            cast(PreemptionPolicy, cq.within_cluster_queue),
            cast(PreemptionPolicy, cq.reclaim_within_cohort),
            cast(BorrowWithinCohort, cq.borrow_within_cohort),
        ),
        fair_weight=float(cq.fair_weight),
        stop_policy=cast(StopPolicy, cq.stop_policy),
    )


def objects_of(
    rendered: Iterable[Mapping[str, Any]],
) -> tuple[list[Topology], list[ResourceFlavor], list[ClusterQueue], dict[str, str]]:
    """Topologies, flavors, ClusterQueues and the LocalQueue (``namespace/name``) → ClusterQueue map
    of rendered objects (other kinds are ignored), read through their views."""
    topologies, flavors, queues, local = [], [], [], {}
    for obj in map(object_view, rendered):
        if isinstance(obj, TopologyView):
            topologies.append(Topology(obj.name, obj.levels))
        elif isinstance(obj, ResourceFlavorView):
            flavors.append(ResourceFlavor(obj.name, dict(obj.node_labels), obj.topology_name))
        elif isinstance(obj, ClusterQueueView):
            queues.append(cluster_queue_of(obj))
        elif isinstance(obj, LocalQueueView):
            local[f"{obj.namespace}/{obj.name}"] = obj.cluster_queue or ""
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


# -- live Workloads (kueue.x-k8s.io/v1beta1, as the API server returns them) ---------------------------


def timestamp(text: str | None) -> float:
    """An RFC 3339 timestamp (``metadata.creationTimestamp``) in epoch seconds; 0 when absent."""
    if not text:
        return 0.0
    return _dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _pod_spec_requests(spec: PodSpecView) -> dict[str, int]:
    """``resources.NewRequestsFromPodSpec``: the containers' requests summed, each init container's
    taken if larger, plus the pod overhead (``pkg/resources/requests.go``)."""
    total: dict[str, int] = {}
    for requests in spec.container_requests:
        for name, value in requests_of(requests).items():
            total[name] = total.get(name, 0) + value
    for requests in spec.init_container_requests:
        for name, value in requests_of(requests).items():
            total[name] = max(total.get(name, 0), value)
    for name, value in requests_of(spec.overhead).items():
        total[name] = total.get(name, 0) + value
    return total


def _tolerations(spec: PodSpecView) -> tuple[Toleration, ...]:
    return tuple(
        Toleration(t.key, cast(TolerationOperator, t.operator), t.value, t.effect) for t in spec.tolerations
    )


def workload_state(obj: WorkloadView) -> str:
    """``finished``, ``admitted`` (holds quota: ``QuotaReserved=True``) or ``pending``."""
    finished = obj.condition("Finished")
    if finished and finished.true:
        return "finished"
    reserved = obj.condition("QuotaReserved")
    return "admitted" if reserved and reserved.true else "pending"


def workload_of(obj: WorkloadView, cluster_queue_of_local: Mapping[str, str]) -> Workload:
    """A live Workload as the model's: key ``namespace/name``; its ClusterQueue from its admission, else
    from its LocalQueue (``namespace/queueName`` in ``cluster_queue_of_local``, as
    :func:`objects_of` gives it); pod sets with their template's requests, ``nodeSelector``,
    tolerations and ``topologyRequest`` (with its slices); ``spec.priority``;
    ``metadata.creationTimestamp``. Raises ``KeyError`` for a Workload whose LocalQueue is not one of
    the given, ``ValueError`` for a pod-set group with slices (:class:`~.objects.TopologyRequest`)."""
    cq = obj.admitted_queue or cluster_queue_of_local[f"{obj.namespace}/{obj.queue_name}"]
    pod_sets = []
    for ps in obj.pod_sets:
        tr = ps.topology_request
        topology = (
            TopologyRequest(
                tr.required, tr.preferred, tr.unconstrained, tr.group, tr.slice_level, tr.slice_size
            )
            if tr.asked or tr.slices
            else None
        )
        pod_sets.append(
            PodSet(
                ps.count,
                _pod_spec_requests(ps.template),
                ps.name,
                topology,
                dict(ps.template.node_selector),
                _tolerations(ps.template),
            )
        )
    return Workload(
        f"{obj.namespace}/{obj.name}",
        cq,
        tuple(pod_sets),
        obj.priority,
        timestamp(obj.creation_timestamp),
        obj.uid,
        obj.owner_uid,
    )


def admission_of(obj: WorkloadView) -> tuple[PodSetAdmission, ...]:
    """An admitted Workload's ``status.admission.podSetAssignments`` (v1beta1: ``topologyAssignment``
    with ``levels`` and ``domains`` of ``values`` and ``count``)."""
    out = []
    for psa in obj.pod_set_assignments:
        ta = psa.topology_assignment
        topology = TopologyAssignment(ta.levels, ta.domains) if ta is not None else None
        out.append(
            PodSetAdmission(psa.name, dict(psa.flavors), requests_of(psa.resource_usage), psa.count, topology)
        )
    return tuple(out)


def reserved_at(obj: WorkloadView) -> float:
    """When the Workload's quota was reserved (``QuotaReserved``'s ``lastTransitionTime``), epoch s."""
    reserved = obj.condition("QuotaReserved")
    return timestamp(reserved.last_transition_time if reserved else None)
