"""The view of a Node (``k8s.io/api/core/v1``): what the labeler, the snapshot and the capacity read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Any

from topogov.domain.labels import INSTANCE_TYPE_LABEL, LIFECYCLE_TAINT_PREFIX
from topogov.domain.nodes import ProviderRef, classify
from topogov.domain.quantity import Resources, resources_from
from topogov.domain.views.common import view


@view
class NodeView:
    """The parts of a Node object the labeler and the snapshot use."""

    name: str
    provider_id: str | None
    labels: Mapping[str, str]
    allocatable: Resources = field(default_factory=Resources)
    unschedulable: bool = False
    ready: bool = True
    lifecycle_taints: tuple[str, ...] = ()  # node.kubernetes.io/* taints with NoSchedule/NoExecute

    @property
    def available(self) -> bool:
        """Whether Kueue's TAS counts the node now (v0.17.0 ``pkg/cache/scheduler/tas_nodes_cache.go``
        keeps Ready, schedulable nodes; ``tas_flavor_snapshot.go`` ``fillInCounts`` skips a node with
        an untolerated NoSchedule/NoExecute taint: the node lifecycle's, which no job tolerates)."""
        return self.ready and not self.unschedulable and not self.lifecycle_taints

    @property
    def ref(self) -> ProviderRef:
        return classify(self.provider_id, self.labels)

    @property
    def instance_type(self) -> str:
        return self.labels.get(INSTANCE_TYPE_LABEL, "")

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
            lifecycle_taints=tuple(
                t["key"]
                for t in spec.get("taints") or []
                if str(t.get("key", "")).startswith(LIFECYCLE_TAINT_PREFIX)
                and t.get("effect") in ("NoSchedule", "NoExecute")
            ),
        )
