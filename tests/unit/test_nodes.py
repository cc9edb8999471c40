"""Which nodes the labeler asks EC2 about, by provider id."""

import pytest

from topogov.domain.nodes import NodeKind, classify
from topogov.domain.views.nodes import NodeView


@pytest.mark.parametrize(
    ("provider_id", "labels", "kind", "instance_id"),
    [
        ("aws:///us-east-1a/i-0123456789abcdef0", {}, NodeKind.EC2, "i-0123456789abcdef0"),
        ("aws:///us-west-2b/i-01234567", {}, NodeKind.EC2, "i-01234567"),
        (None, {}, NodeKind.NO_PROVIDER_ID, ""),
        ("", {}, NodeKind.NO_PROVIDER_ID, ""),
        ("aws:///us-east-1a/0a1b2c3d4e/fargate-ip-192-168-1-1.ec2.internal", {}, NodeKind.NOT_EC2, ""),
        ("eks-hybrid:///us-west-2/my-cluster/node-1", {}, NodeKind.NOT_EC2, ""),
        ("gce://project/us-central1-a/vm-1", {}, NodeKind.NOT_EC2, ""),
        ("aws:///usw2-az3/sagemaker/cluster/hyperpod-abc123-i-0123456789abcdef0", {}, NodeKind.HYPERPOD, ""),
        (
            "aws:///us-east-1a/i-0123456789abcdef0",
            {"sagemaker.amazonaws.com/compute-type": "hyperpod"},
            NodeKind.HYPERPOD,
            "",
        ),
        ("aws:///us-east-1a/not-an-instance", {}, NodeKind.MALFORMED, ""),
        ("aws://us-east-1a/i-0123456789abcdef0", {}, NodeKind.MALFORMED, ""),
        ("aws:///us-east-1a/i-0123456789ABCDEF0", {}, NodeKind.MALFORMED, ""),
    ],
)
def test_classify(provider_id, labels, kind, instance_id):
    ref = classify(provider_id, labels)
    assert ref.kind is kind
    assert ref.instance_id == instance_id


def test_node_view_reads_the_api_object():
    obj = {
        "metadata": {"name": "n1", "labels": {"node.kubernetes.io/instance-type": "p5.48xlarge"}},
        "spec": {"providerID": "aws:///us-east-1a/i-0123456789abcdef0"},
        "status": {"allocatable": {"nvidia.com/gpu": "8", "cpu": "191450m", "memory": "2063731252Ki"}},
    }
    view = NodeView.from_api(obj)
    assert view.instance_type == "p5.48xlarge"
    assert view.ref.instance_id == "i-0123456789abcdef0"
    assert view.allocatable.gpu == 8
    assert view.allocatable.cpu_m == 191450
    assert view.allocatable.memory == 2063731252 * 1024
