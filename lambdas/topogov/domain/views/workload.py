"""Views of Kueue's Workload (``kueue.x-k8s.io``, kubernetes-sigs/kueue v0.17.0
``apis/kueue/v1beta1/workload_types.go``; v1beta2 names the same fields the same way, but for an
admitted pod set's ``topologyAssignment``, read here in both encodings: :func:`topology_domains`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from topogov.domain.views.batch import PodSpecView, Quantities
from topogov.domain.views.common import EMPTY, Condition, conditions_of, first_condition, view


@view
class TopologyRequest:
    """A pod set's ``topologyRequest``: at most one of required/preferred/unconstrained is set;
    ``podSetSliceRequiredTopology`` and ``podSetSliceSize`` ask for slices (every ``slice_size``
    consecutive pods in one domain of ``slice_level``)."""

    required: str | None = None
    preferred: str | None = None
    unconstrained: bool = False
    group: str | None = None  # podSetGroupName: the pod sets of a job placed as one
    slice_level: str | None = None
    slice_size: int | None = None

    @property
    def asked(self) -> bool:
        return bool(self.required or self.preferred or self.unconstrained)

    @property
    def slices(self) -> bool:
        """Either slice field is set (Kueue then counts the pod set as asking for topology)."""
        return self.slice_level is not None or self.slice_size is not None


NO_TOPOLOGY_REQUEST = TopologyRequest()  # a pod set without one (shared: a view is never changed)


@view
class PodSet:
    name: str
    count: int
    template: PodSpecView  # the pod template's spec
    topology_request: TopologyRequest


@view
class TopologyAssignment:
    """``topologyAssignment``: the level labels, and per domain its values and pod count (v1beta1's
    ``domains``, or v1beta2's ``slices`` expanded: :func:`topology_domains`)."""

    levels: tuple[str, ...]
    domains: tuple[tuple[tuple[str, ...], int], ...]


@view
class PodSetAssignment:
    """One of ``status.admission.podSetAssignments``."""

    name: str
    flavors: Mapping[str, str]  # resource -> flavor
    resource_usage: Quantities
    count: int
    topology_assignment: TopologyAssignment | None


@view
class WorkloadView:
    name: str
    namespace: str
    uid: str
    labels: Mapping[str, str]
    creation_timestamp: str | None
    owner_uid: str  # the first owner's (the Job's) uid
    queue_name: str  # spec.queueName: the LocalQueue
    priority: int
    pod_sets: tuple[PodSet, ...]
    conditions: tuple[Condition, ...]
    admitted_queue: str | None  # status.admission.clusterQueue, while it holds quota
    pod_set_assignments: tuple[PodSetAssignment, ...]
    resource_version: str = ""  # metadata.resourceVersion: a changed object has a new one
    owner_kind: str = ""  # the first owner's kind: Job, or HyperPodPyTorchJob (hyp create hyp-pytorch-job)
    owner_name: str = ""

    def condition(self, kind: str) -> Condition | None:
        return first_condition(self.conditions, kind)

    @classmethod
    def from_api(cls, body: Mapping[str, Any]) -> WorkloadView:
        meta = body.get("metadata") or EMPTY
        spec = body.get("spec") or EMPTY
        status = body.get("status") or EMPTY
        admission = status.get("admission") or EMPTY
        owners = meta.get("ownerReferences") or (EMPTY,)
        return cls(
            str(meta.get("name", "")),
            str(meta.get("namespace", "")),
            str(meta.get("uid", "")),
            meta.get("labels") or {},
            meta.get("creationTimestamp"),
            str(owners[0].get("uid", "")),
            str(spec.get("queueName", "")),
            int(spec.get("priority") or 0),
            tuple([_pod_set(ps) for ps in spec.get("podSets") or ()]),
            conditions_of(status),
            admission.get("clusterQueue") or None,
            tuple([_assignment(psa) for psa in admission.get("podSetAssignments") or ()]),
            str(meta.get("resourceVersion", "")),
            str(owners[0].get("kind", "")),
            str(owners[0].get("name", "")),
        )


def _pod_set(ps: Mapping[str, Any]) -> PodSet:
    tr = ps.get("topologyRequest")
    return PodSet(
        ps.get("name", "main"),
        int(ps.get("count", 1)),
        PodSpecView.from_api((ps.get("template") or EMPTY).get("spec") or EMPTY),
        TopologyRequest(
            tr.get("required"),
            tr.get("preferred"),
            bool(tr.get("unconstrained")),
            tr.get("podSetGroupName"),
            tr.get("podSetSliceRequiredTopology"),
            None if tr.get("podSetSliceSize") is None else int(tr["podSetSliceSize"]),
        )
        if tr
        else NO_TOPOLOGY_REQUEST,
    )


def _assignment(psa: Mapping[str, Any]) -> PodSetAssignment:
    ta = psa.get("topologyAssignment")
    return PodSetAssignment(
        psa.get("name", "main"),
        psa.get("flavors") or {},
        psa.get("resourceUsage") or EMPTY,
        int(psa.get("count", 0)),
        TopologyAssignment(tuple(ta.get("levels") or ()), topology_domains(ta)) if ta else None,
    )


def topology_domains(ta: Mapping[str, Any]) -> tuple[tuple[tuple[str, ...], int], ...]:
    """The domains of a ``topologyAssignment``, each ``(values per level, pod count)``, in either
    encoding (kubernetes-sigs/kueue v0.17.0 ``apis/kueue/v1beta1/workload_conversion.go`` converts
    between them):

    * v1beta1: ``domains: [{values: [...], count: n}]``;
    * v1beta2 (``apis/kueue/v1beta2/workload_types.go``): ``slices``, each of ``domainCount`` domains,
      ``valuesPerLevel`` per level either ``universal`` (one value for every domain of the slice) or
      ``individual`` (``prefix`` + each of ``roots`` + ``suffix``), and ``podCounts`` either
      ``universal`` or ``individual`` (one per domain); the union of the slices, in order."""
    if "domains" in ta:
        return tuple([(tuple(d["values"]), int(d["count"])) for d in ta.get("domains") or ()])
    out: list[tuple[tuple[str, ...], int]] = []
    for sl in ta.get("slices") or ():
        n = int(sl.get("domainCount") or 0)
        columns = [_level_values(lv, n) for lv in sl.get("valuesPerLevel") or ()]
        counts = sl.get("podCounts") or EMPTY
        per = counts.get("individual")
        pods = [int(c) for c in per] if per is not None else [int(counts.get("universal") or 0)] * n
        out += [(tuple(col[i] for col in columns), pods[i]) for i in range(n)]
    return tuple(out)


def _level_values(lv: Mapping[str, Any], n: int) -> list[str]:
    if lv.get("universal") is not None:
        return [str(lv["universal"])] * n
    ind = lv.get("individual") or EMPTY
    prefix, suffix = ind.get("prefix") or "", ind.get("suffix") or ""
    return [f"{prefix}{root}{suffix}" for root in ind.get("roots") or ()]
