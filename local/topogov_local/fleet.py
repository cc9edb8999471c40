"""The simulated GPU fleet: EC2 instances in the local AWS and one Node per instance in the local
Kubernetes API, registered the way the AWS cloud provider and kubelet would register them."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from topogov.adapters.kube import KubeHttp
from topogov_local.cluster.manifests import KWOK_NODE_ANNOTATION

REGION = "us-east-1"
DEFAULT_AZ = "us-east-1a"
DEFAULT_FLEET = "p5.48xlarge=64,p6-b200.48xlarge=4,c5.2xlarge=2"
AMI = "ami-12345678"

# Allocatable per instance type, as the device plugins and kubelet report them on EKS.
SHAPES: dict[str, dict[str, str]] = {
    "p5.48xlarge": {
        "nvidia.com/gpu": "8",
        "vpc.amazonaws.com/efa": "32",
        "cpu": "191450m",
        "memory": "2002Gi",
    },
    "p5e.48xlarge": {
        "nvidia.com/gpu": "8",
        "vpc.amazonaws.com/efa": "32",
        "cpu": "191450m",
        "memory": "2002Gi",
    },
    "p5en.48xlarge": {
        "nvidia.com/gpu": "8",
        "vpc.amazonaws.com/efa": "16",
        "cpu": "191450m",
        "memory": "2002Gi",
    },
    "p4d.24xlarge": {
        "nvidia.com/gpu": "8",
        "vpc.amazonaws.com/efa": "4",
        "cpu": "95690m",
        "memory": "1100Gi",
    },
    "p6-b200.48xlarge": {
        "nvidia.com/gpu": "8",
        "vpc.amazonaws.com/efa": "8",
        "cpu": "191450m",
        "memory": "2002Gi",
    },
    "trn2.48xlarge": {
        "aws.amazon.com/neuron": "16",
        "vpc.amazonaws.com/efa": "16",
        "cpu": "191450m",
        "memory": "2002Gi",
    },
    "c5.2xlarge": {"cpu": "7910m", "memory": "14Gi"},
    "m5.xlarge": {"cpu": "3920m", "memory": "14Gi"},
}
_GROUP = re.compile(r"^\s*([a-z0-9-]+\.[a-z0-9]+)\s*=\s*(\d+)\s*(?:@\s*([a-z0-9-]+))?\s*$")


@dataclass(frozen=True, slots=True)
class FleetGroup:
    instance_type: str
    count: int
    availability_zone: str = DEFAULT_AZ


def parse_fleet(text: str) -> list[FleetGroup]:
    """``"p5.48xlarge=64,p6-b200.48xlarge=4@us-east-1b,c5.2xlarge=2"`` -> groups."""
    groups = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        m = _GROUP.match(part)
        if not m:
            raise ValueError(f"fleet: {part!r} is not TYPE=COUNT[@AZ]")
        itype, count, az = m.group(1), int(m.group(2)), m.group(3) or DEFAULT_AZ
        if itype not in SHAPES:
            raise ValueError(f"fleet: unknown instance type {itype!r} (known: {', '.join(sorted(SHAPES))})")
        groups.append(FleetGroup(itype, count, az))
    return groups


def launch(ec2: Any, groups: Iterable[FleetGroup], chunk: int = 500) -> list[dict[str, Any]]:
    """RunInstances for every group (in chunks), through the real EC2 API of the local stack."""
    instances: list[dict[str, Any]] = []
    for group in groups:
        left = group.count
        while left > 0:
            n = min(chunk, left)
            resp = ec2.run_instances(
                ImageId=AMI,
                MinCount=n,
                MaxCount=n,
                InstanceType=group.instance_type,
                Placement={"AvailabilityZone": group.availability_zone},
            )
            instances.extend(resp["Instances"])
            left -= n
    return instances


def node_name(instance: dict[str, Any]) -> str:
    # EKS resource-name hostnames: <instance-id>.<region>.compute.internal
    return f"{instance['InstanceId']}.ec2.internal"


def node_object(instance: dict[str, Any], *, simulated: bool = True) -> dict[str, Any]:
    """The Node kubelet registers for ``instance``; ``simulated``: KWOK keeps it Ready and runs its
    pods (without: a Node object only, for label benchmarks at sizes KWOK's heartbeats would load)."""
    itype = instance["InstanceType"]
    az = instance["Placement"]["AvailabilityZone"]
    name = node_name(instance)
    alloc = SHAPES.get(itype, {"cpu": "1", "memory": "1Gi"})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {KWOK_NODE_ANNOTATION: "fake"} if simulated else {},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "node.kubernetes.io/instance-type": itype,
                "topology.kubernetes.io/region": az[:-1],
                "topology.kubernetes.io/zone": az,
                "eks.amazonaws.com/nodegroup": itype.split(".")[0] + "-group",
            },
        },
        "spec": {"providerID": f"aws:///{az}/{instance['InstanceId']}"},
        "status": {
            "capacity": {**alloc, "pods": "110"},
            "allocatable": {**alloc, "pods": "110"},
            # As an EKS optimized AL2023 node reports them (KWOK keeps the values a Node gives).
            "nodeInfo": {
                "kubeletVersion": "v1.35.4-eks",
                "kubeProxyVersion": "v1.35.4-eks",
                "architecture": "amd64",
                "operatingSystem": "linux",
                "osImage": "Amazon Linux 2023.9.20251117",
                "kernelVersion": "6.12.46-66.121.amzn2023.x86_64",
                "containerRuntimeVersion": "containerd://2.1.4",
                # "ec2" first, as on EC2 (its machine ids and UUIDs start so), and never all digits:
                # KWOK's node stage renders the value into YAML unquoted, and an instance id of
                # decimal digits only (1 in ~3,000 ids) became a number Node status cannot hold
                "machineID": ("ec2" + instance["InstanceId"].removeprefix("i-")).ljust(32, "0"),
                "systemUUID": f"ec2{instance['InstanceId'][2:7]}-0000-0000-0000-000000000000",
            },
            "addresses": [
                {"type": "InternalIP", "address": instance.get("PrivateIpAddress") or "10.0.0.1"},
                {"type": "InternalDNS", "address": name},
                {"type": "Hostname", "address": name},
            ],
        },
    }


def register_nodes(
    kube: KubeHttp, instances: Sequence[dict[str, Any]], *, simulated: bool = True
) -> list[str]:
    """Create one Node per instance (what kubelet does when an instance joins), eight at a time."""
    from concurrent.futures import ThreadPoolExecutor

    def register(instance: dict[str, Any]) -> str:
        obj = node_object(instance, simulated=simulated)
        resp = kube.request("POST", "/api/v1/nodes", body=obj)
        if resp.status not in (200, 201):
            raise RuntimeError(f"register node {obj['metadata']['name']}: HTTP {resp.status} {resp.body}")
        return str(obj["metadata"]["name"])

    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(register, instances))


def extra_node(name: str, provider_id: str | None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A node that is not an EC2 instance of this account (Fargate, hybrid, HyperPod-managed)."""
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {KWOK_NODE_ANNOTATION: "fake"},
            "labels": {"kubernetes.io/hostname": name, **(labels or {})},
        },
        "spec": {},
        "status": {
            "capacity": {"cpu": "2", "memory": "4Gi", "pods": "110"},
            "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"},
            "nodeInfo": {"kubeletVersion": "v1.35.4-eks"},
        },
    }
    if provider_id:
        obj["spec"]["providerID"] = provider_id
    return obj
