"""What a Kubernetes node is, from the labeler's point of view (pure, no I/O): which provider runs
it, by its ``spec.providerID``. The Node itself is read through
:class:`topogov.domain.views.nodes.NodeView`."""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass

from topogov.domain.labels import HYPERPOD_COMPUTE_TYPE_LABEL

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


HYPERPOD_TYPE_PREFIX = "ml."  # SageMaker's instance type names: ml.p5.48xlarge is EC2's p5.48xlarge


def normalized_instance_type(instance_type: str) -> str:
    """EC2's name of an instance type: HyperPod's ``ml.p5.48xlarge`` is ``p5.48xlarge``."""
    return instance_type.removeprefix(HYPERPOD_TYPE_PREFIX)


def hyperpod_instance_type(instance_type: str) -> str:
    """HyperPod's name of an instance type (what its nodes' ``node.kubernetes.io/instance-type`` label
    and the task governance add-on's flavors say): ``p5.48xlarge`` is ``ml.p5.48xlarge``."""
    if instance_type.startswith(HYPERPOD_TYPE_PREFIX):
        return instance_type
    return HYPERPOD_TYPE_PREFIX + instance_type


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
