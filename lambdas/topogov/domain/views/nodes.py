"""The view of a Node (``k8s.io/api/core/v1``): what the labeler, the snapshot and the capacity read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Any

from topogov.domain.labels import (
    HYPERPOD_HEALTH_LABEL,
    HYPERPOD_SCHEDULABLE,
    HYPERPOD_TAINT_PREFIX,
    INSTANCE_TYPE_LABEL,
    LIFECYCLE_TAINT_PREFIX,
)
from topogov.domain.nodes import NodeKind, ProviderRef, classify, normalized_instance_type
from topogov.domain.quantity import Resources, resources_from
from topogov.domain.views.common import view

# Taints no job tolerates, so Kueue leaves a node that has one out: the node lifecycle's
# (node.kubernetes.io/not-ready, unreachable, unschedulable, *-pressure) and SageMaker HyperPod's
# (sagemaker.amazonaws.com/node-health-status=Unschedulable while deep health checks run, and the
# like for a node pending replacement or reboot).
UNTOLERATED_TAINT_PREFIXES = (LIFECYCLE_TAINT_PREFIX, HYPERPOD_TAINT_PREFIX)


@view
class NodeView:
    """The parts of a Node object the labeler and the snapshot use."""

    name: str
    provider_id: str | None
    labels: Mapping[str, str]
    allocatable: Resources = field(default_factory=Resources)
    unschedulable: bool = False
    ready: bool = True
    # NoSchedule/NoExecute taints of UNTOLERATED_TAINT_PREFIXES, by key
    taints: tuple[str, ...] = ()

    @property
    def health(self) -> str | None:
        """SageMaker HyperPod's ``node-health-status`` label (None on a node without it)."""
        return self.labels.get(HYPERPOD_HEALTH_LABEL)

    @property
    def available(self) -> bool:
        """Whether Kueue's TAS counts the node now (v0.17.0 ``pkg/cache/scheduler/tas_nodes_cache.go``
        keeps Ready, schedulable nodes; ``tas_flavor_snapshot.go`` ``fillInCounts`` skips a node with
        an untolerated NoSchedule/NoExecute taint: the node lifecycle's and HyperPod's, which no job
        tolerates). A HyperPod node whose health label is not ``Schedulable`` counts as unavailable
        too: HyperPod marks it so while it runs deep health checks or waits for a replacement or a
        reboot, "not available for running workloads" (SageMaker Developer Guide, resiliency node
        labels), and taints or cordons it for the scheduler."""
        healthy = self.health in (None, HYPERPOD_SCHEDULABLE)
        return self.ready and not self.unschedulable and not self.taints and healthy

    @property
    def ref(self) -> ProviderRef:
        return classify(self.provider_id, self.labels)

    @property
    def hyperpod(self) -> bool:
        """A SageMaker HyperPod node (its providerID, or HyperPod's compute-type label)."""
        return self.ref.kind is NodeKind.HYPERPOD

    @property
    def instance_label(self) -> str:
        """``node.kubernetes.io/instance-type`` as the node carries it (``ml.p5.48xlarge`` on HyperPod):
        what a Kueue flavor's nodeLabels and a Job's nodeSelector must name."""
        return self.labels.get(INSTANCE_TYPE_LABEL, "")

    @property
    def instance_type(self) -> str:
        """The EC2 instance type (``p5.48xlarge``): HyperPod's ``ml.`` names normalised, so the
        snapshot, the fleet and the capacity views speak of one type whichever service runs it."""
        return normalized_instance_type(self.instance_label)

    @classmethod
    def from_api(cls, obj: Mapping[str, Any]) -> NodeView:
        """Build from a Node as the API returns it (a JSON dict)."""
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        return cls(
            name=meta["name"],
            provider_id=spec.get("providerID"),
            labels=meta.get("labels") or {},
            allocatable=resources_from(status.get("allocatable") or {}),
            unschedulable=bool(spec.get("unschedulable", False)),
            ready=any(
                c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
            ),
            taints=tuple(
                t["key"]
                for t in spec.get("taints") or []
                if str(t.get("key", "")).startswith(UNTOLERATED_TAINT_PREFIXES)
                and t.get("effect") in ("NoSchedule", "NoExecute")
            ),
        )
