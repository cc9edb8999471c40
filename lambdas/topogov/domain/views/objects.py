"""Views of the objects the governor manages: Namespace and Kueue's Topology, ResourceFlavor, Cohort,
WorkloadPriorityClass, ClusterQueue and LocalQueue (kubernetes-sigs/kueue v0.17.0 ``apis/kueue``;
the v1beta1 and v1beta2 fields the governor reads are named alike but a ClusterQueue's cohort,
``spec.cohort`` in v1beta1 and ``spec.cohortName`` in v1beta2).

The governor compares what it renders with what is live field by field and writes whole objects
back, so these views keep the body (``raw``) for that (``logic/governor/drift.py``); every other
read goes through the fields. The rendered objects (``domain/kueue.py``) are read through the same
views (:func:`object_view`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Any

from topogov.domain.labels import NAMESPACE_NAME_LABEL
from topogov.domain.views.common import EMPTY, empty, view

WORKLOAD_COUNTS = ("pendingWorkloads", "reservingWorkloads", "admittedWorkloads")  # a ClusterQueue's status


@view(kw_only=True)
class ObjectView:
    """What every managed object has: its kind, name, namespace, labels, annotations, whether it is
    being deleted, and the body (``raw``: only to compare it whole and write it back)."""

    api_version: str
    kind: str
    name: str
    namespace: str | None  # None for a cluster-scoped object
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    deleting: bool  # metadata.deletionTimestamp is set
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @property
    def ref(self) -> tuple[str, str, str | None]:
        """(kind, name, namespace)."""
        return self.kind, self.name, self.namespace

    def metadata_with(
        self, *, labels: Mapping[str, str] | None = None, annotations: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        """A copy of the object's metadata (resourceVersion included: a PUT needs it) with these
        labels and annotations, and without ``managedFields`` (the server's, never written back)."""
        meta = dict(self.raw.get("metadata") or EMPTY)
        if labels is not None:
            meta["labels"] = dict(labels)
        if annotations is not None:
            meta["annotations"] = dict(annotations)
        meta.pop("managedFields", None)
        return meta

    @staticmethod
    def fields(body: Mapping[str, Any]) -> dict[str, Any]:
        """The common fields of ``body`` as :class:`ObjectView`'s keyword arguments."""
        meta = body.get("metadata") or EMPTY
        return {
            "api_version": str(body.get("apiVersion", "")),
            "kind": str(body.get("kind", "")),
            "name": str(meta.get("name", "")),
            "namespace": meta.get("namespace"),
            "labels": meta.get("labels") or {},
            "annotations": meta.get("annotations") or {},
            "deleting": bool(meta.get("deletionTimestamp")),
            "raw": body,
        }


@view(kw_only=True)
class NamespaceView(ObjectView):
    pass


@view(kw_only=True)
class CohortView(ObjectView):
    pass


@view(kw_only=True)
class WorkloadPriorityClassView(ObjectView):
    value: int = 0


@view(kw_only=True)
class TopologyView(ObjectView):
    levels: tuple[str, ...] = ()  # each level's node label, coarsest first


@view(kw_only=True)
class ResourceFlavorView(ObjectView):
    node_labels: Mapping[str, str] = field(default_factory=empty)
    topology_name: str | None = None

    def in_topology(self, name: str) -> ResourceFlavorView:
        """This flavor in Topology ``name`` (the rest of it as it is)."""
        spec = {**(self.raw.get("spec") or EMPTY), "topologyName": name}
        return resource_flavor({**self.raw, "spec": spec})


@view
class ResourceQuota:
    name: str
    nominal_quota: Any  # a quantity, as written
    borrowing_limit: Any = None
    lending_limit: Any = None


@view
class FlavorQuotas:
    name: str
    resources: tuple[ResourceQuota, ...]


@view
class ResourceGroup:
    covered_resources: tuple[str, ...]
    flavors: tuple[FlavorQuotas, ...]


@view(kw_only=True)
class ClusterQueueView(ObjectView):
    cohort: str | None = None  # spec.cohort (v1beta1) or spec.cohortName (v1beta2)
    team_namespace: str | None = None  # the namespace its namespaceSelector matches by name
    resource_groups: tuple[ResourceGroup, ...] = ()
    within_cluster_queue: str = "Never"  # spec.preemption
    reclaim_within_cohort: str = "Never"
    borrow_within_cohort: str = "Never"  # spec.preemption.borrowWithinCohort.policy
    fair_weight: Any = 1  # spec.fairSharing.weight, a quantity
    stop_policy: str | None = "None"
    workload_counts: Mapping[str, int] = field(default_factory=empty)  # WORKLOAD_COUNTS, from the status

    @property
    def flavor_names(self) -> set[str]:
        return {f.name for g in self.resource_groups for f in g.flavors}

    def without_flavors(self, flavors: set[str]) -> ClusterQueueView:
        """This queue with ``flavors`` taken out of its resource groups (a group left with none goes
        too: Kueue requires at least one flavor per group)."""
        spec = dict(self.raw.get("spec") or EMPTY)
        groups = []
        for group in spec.get("resourceGroups") or ():
            kept = [f for f in group.get("flavors") or () if f.get("name") not in flavors]
            if kept:
                groups.append({**group, "flavors": kept})
        spec["resourceGroups"] = groups
        return cluster_queue({**self.raw, "spec": spec})


@view(kw_only=True)
class LocalQueueView(ObjectView):
    cluster_queue: str | None = None


def topology(body: Mapping[str, Any]) -> TopologyView:
    levels = (body.get("spec") or EMPTY).get("levels") or ()
    return TopologyView(**ObjectView.fields(body), levels=tuple(lv.get("nodeLabel") for lv in levels))


def resource_flavor(body: Mapping[str, Any]) -> ResourceFlavorView:
    spec = body.get("spec") or EMPTY
    return ResourceFlavorView(
        **ObjectView.fields(body),
        node_labels=spec.get("nodeLabels") or {},
        topology_name=spec.get("topologyName"),
    )


def _quota(item: Mapping[str, Any]) -> ResourceQuota:
    return ResourceQuota(
        item.get("name", ""), item.get("nominalQuota"), item.get("borrowingLimit"), item.get("lendingLimit")
    )


def _group(group: Mapping[str, Any]) -> ResourceGroup:
    flavors = tuple(
        FlavorQuotas(f.get("name", ""), tuple(_quota(i) for i in f.get("resources") or ()))
        for f in group.get("flavors") or ()
    )
    return ResourceGroup(tuple(group.get("coveredResources") or ()), flavors)


def cluster_queue(body: Mapping[str, Any]) -> ClusterQueueView:
    spec = body.get("spec") or EMPTY
    status = body.get("status") or EMPTY
    preemption = spec.get("preemption") or EMPTY
    selector = (spec.get("namespaceSelector") or EMPTY).get("matchLabels") or EMPTY
    return ClusterQueueView(
        **ObjectView.fields(body),
        cohort=spec.get("cohort") or spec.get("cohortName") or None,
        team_namespace=selector.get(NAMESPACE_NAME_LABEL),
        resource_groups=tuple(_group(g) for g in spec.get("resourceGroups") or ()),
        within_cluster_queue=preemption.get("withinClusterQueue", "Never"),
        reclaim_within_cohort=preemption.get("reclaimWithinCohort", "Never"),
        borrow_within_cohort=(preemption.get("borrowWithinCohort") or EMPTY).get("policy", "Never"),
        fair_weight=(spec.get("fairSharing") or EMPTY).get("weight", 1),
        stop_policy=spec.get("stopPolicy", "None"),
        workload_counts={k: int(status.get(k) or 0) for k in WORKLOAD_COUNTS},
    )


def _local_queue(body: Mapping[str, Any]) -> LocalQueueView:
    return LocalQueueView(
        **ObjectView.fields(body), cluster_queue=(body.get("spec") or EMPTY).get("clusterQueue")
    )


def _priority_class(body: Mapping[str, Any]) -> WorkloadPriorityClassView:
    return WorkloadPriorityClassView(**ObjectView.fields(body), value=int(body.get("value") or 0))


@view(kw_only=True)
class ConfigMapView(ObjectView):
    """A ConfigMap: its ``data`` (string values)."""

    data: Mapping[str, str] = field(default_factory=empty)


def _config_map(body: Mapping[str, Any]) -> ConfigMapView:
    return ConfigMapView(**ObjectView.fields(body), data=body.get("data") or {})


def _plain(body: Mapping[str, Any]) -> ObjectView:
    kind = NamespaceView if body.get("kind") == "Namespace" else CohortView
    return kind(**ObjectView.fields(body))


VIEWS = {
    "Namespace": _plain,
    "Topology": topology,
    "ResourceFlavor": resource_flavor,
    "Cohort": _plain,
    "WorkloadPriorityClass": _priority_class,
    "ClusterQueue": cluster_queue,
    "LocalQueue": _local_queue,
    "ConfigMap": _config_map,
}


def object_view(body: Mapping[str, Any]) -> ObjectView:
    """The view of a managed object of any of the kinds above (by its ``kind``), live or rendered."""
    make = VIEWS.get(str(body.get("kind", "")))
    return make(body) if make is not None else ObjectView(**ObjectView.fields(body))
