"""The simulated GPU fleet: EC2 instances in the local AWS and one Node per instance in the local
Kubernetes API, registered the way the AWS cloud provider and kubelet would register them."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from topogov.adapters.kube import KubeHttp
from topogov.domain.instance_types import ALLOCATABLE
from topogov_local.cluster.manifests import KWOK_NODE_ANNOTATION

REGION = "us-east-1"
DEFAULT_AZ = "us-east-1a"
DEFAULT_FLEET = "p5.48xlarge=64,p6-b200.48xlarge=4,c5.2xlarge=2"
AMI = "ami-12345678"

SHAPES = ALLOCATABLE  # the catalog lives with the domain: the simulator reads it too
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


def launch(ec2: Any, groups: Iterable[FleetGroup], chunk: int = 200) -> list[dict[str, Any]]:
    """RunInstances for every group (in chunks), through the real EC2 API of the local stack. Chunks
    of 200: on a loaded machine moto took more than botocore's 60 s read timeout for 500, and the
    retry launched them again (RunInstances is idempotent only by ClientToken, which moto ignores)."""
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


def node_object(
    instance: dict[str, Any], *, simulated: bool = True, labels: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The Node kubelet registers for ``instance``; ``simulated``: KWOK keeps it Ready and runs its
    pods (without: a Node object only, for label benchmarks at sizes KWOK's heartbeats would load);
    ``labels``: more labels it carries (EKS's topology labels, :func:`eks_topology_labels`)."""
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
                **(labels or {}),
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


def eks_topology_labels(aws_url: str, region: str, account_id: str) -> dict[str, dict[str, str]]:
    """Per instance id, the labels EKS writes on its node (EKS User Guide, "Place distributed AI/ML
    workloads with network topology labels": ``topology.k8s.aws/network-node-layer-1..N`` from EC2's
    DescribeInstanceTopology, and ``topology.k8s.aws/zone-id``), with the values the emulated
    DescribeInstanceTopology answers (its control route, outside the request bucket)."""
    import json
    import urllib.parse
    import urllib.request

    from topogov.domain.labels import ZONE_ID_LABEL, layer_label

    query = urllib.parse.urlencode({"region": region, "account_id": account_id})
    with urllib.request.urlopen(f"{aws_url}/_topogov/ec2/topology?{query}", timeout=60) as resp:
        answers = json.load(resp)["instances"]
    return {
        iid: {
            **{layer_label(k): n for k, n in enumerate(a["network_nodes"], start=1)},
            **({ZONE_ID_LABEL: a["zone_id"]} if a.get("zone_id") else {}),
        }
        for iid, a in answers.items()
    }


def register_nodes(
    kube: KubeHttp,
    instances: Sequence[dict[str, Any]],
    *,
    simulated: bool = True,
    labels: Mapping[str, Mapping[str, str]] | None = None,
) -> list[str]:
    """Create one Node per instance (what kubelet does when an instance joins), eight at a time;
    ``labels``: per instance id, more labels its node carries."""
    from concurrent.futures import ThreadPoolExecutor

    def register(instance: dict[str, Any]) -> str:
        obj = node_object(instance, simulated=simulated, labels=(labels or {}).get(instance["InstanceId"]))
        resp = kube.request("POST", "/api/v1/nodes", body=obj)
        # 409: a retry of a POST whose answer was lost (a loaded machine) finds the node it made
        if resp.status not in (200, 201, 409):
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
