"""What a Kubernetes node is, from the labeler's point of view (pure, no I/O)."""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from topogov.domain.labels import HYPERPOD_COMPUTE_TYPE_LABEL, INSTANCE_TYPE_LABEL, LIFECYCLE_TAINT_PREFIX
from topogov.domain.quantity import Resources, resources_from

# aws:///<availability-zone>/<instance-id>: the provider id the AWS cloud provider sets on EC2 nodes.
_EC2_PROVIDER_ID = re.compile(
    r"^aws:///(?P<az>[a-z]{2}(?:-[a-z]+)+-\d[a-z])/(?P<id>i-(?:[0-9a-f]{8}|[0-9a-f]{17}))$"
)


class NodeKind(enum.StrEnum):
    """Why a node is (or is not) one the labeler asks EC2 about."""

    EC2 = "ec2"
    NO_PROVIDER_ID = "no_provider_id"
    NOT_EC2 = "not_ec2"  # Fargate, EKS hybrid nodes, other clouds
    HYPERPOD = "hyperpod_managed"  # SageMaker HyperPod labels its own nodes
    MALFORMED = "malformed_provider_id"


@dataclass(frozen=True, slots=True)
class ProviderRef:
    kind: NodeKind
    availability_zone: str = ""
    instance_id: str = ""


def classify(provider_id: str | None, labels: Mapping[str, str] | None = None) -> ProviderRef:
    """Classify a node by its ``spec.providerID`` (and the HyperPod compute-type label)."""
    labels = labels or {}
    if labels.get(HYPERPOD_COMPUTE_TYPE_LABEL) == "hyperpod":
        return ProviderRef(NodeKind.HYPERPOD)
    if not provider_id:
        return ProviderRef(NodeKind.NO_PROVIDER_ID)
    if not provider_id.startswith("aws://"):
        return ProviderRef(NodeKind.NOT_EC2)
    if "/sagemaker/cluster/" in provider_id:
        return ProviderRef(NodeKind.HYPERPOD)
    if "/fargate-" in provider_id:
        return ProviderRef(NodeKind.NOT_EC2)
    m = _EC2_PROVIDER_ID.match(provider_id)
    if m is None:
        return ProviderRef(NodeKind.MALFORMED)
    return ProviderRef(NodeKind.EC2, m.group("az"), m.group("id"))


@dataclass(frozen=True, slots=True)
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
