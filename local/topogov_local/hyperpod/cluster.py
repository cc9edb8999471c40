"""The local stack as a SageMaker HyperPod cluster (``topogov local --hyperpod``): the cluster in the AWS
emulator's SageMaker, and its nodes registered as HyperPod registers them.

A HyperPod node (reference: SageMaker Developer Guide, "Resilience-related Kubernetes labels by SageMaker
HyperPod" and "Topology-aware scheduling"; aws/amazon-vpc-cni-k8s ``test/integration/ipamd/
hyperpod_common.go`` for the providerID):

* named ``hyperpod-<instance id>``, providerID ``aws:///<az-id>/sagemaker/cluster/hyperpod-<clusterId>-
  <instanceId>``;
* ``node.kubernetes.io/instance-type: ml.<EC2 type>``, ``sagemaker.amazonaws.com/cluster-name``,
  ``sagemaker.amazonaws.com/instance-group-name`` and ``sagemaker.amazonaws.com/compute-type: hyperpod``
  (the last seen in samples only);
* ``sagemaker.amazonaws.com/node-health-status: Schedulable``, or for the few nodes made unhealthy here
  ``UnschedulablePendingReplacement`` with the ``NoSchedule`` taint
  ``sagemaker.amazonaws.com/node-health-status=Unschedulable`` (as during deep health checks);
* the topology labels ``topology.k8s.aws/network-node-layer-1..3`` that task governance sets: here the
  emulated DescribeInstanceTopology's answer for an instance launched in the emulator to stand for the
  HyperPod instance (HyperPod's instances live in SageMaker's account; the emulator's instances only
  give them a place in a network tree).

The instance types of ``teams.yaml``'s ``hyperpod.instanceTypes`` become HyperPod nodes; any other type of
the fleet stays a plain EC2 node of the same cluster (HyperPod mode reads it and never labels it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from topogov.domain.labels import (
    HYPERPOD_CLUSTER_NAME_LABEL,
    HYPERPOD_COMPUTE_TYPE_LABEL,
    HYPERPOD_HEALTH_LABEL,
    HYPERPOD_INSTANCE_GROUP_LABEL,
    HYPERPOD_SCHEDULABLE,
    INSTANCE_TYPE_LABEL,
    ZONE_ID_LABEL,
)
from topogov.domain.nodes import hyperpod_instance_type, normalized_instance_type

UNHEALTHY = "UnschedulablePendingReplacement"
UNHEALTHY_TAINT = {"key": HYPERPOD_HEALTH_LABEL, "value": "Unschedulable", "effect": "NoSchedule"}
EXECUTION_ROLE = "arn:aws:iam::123456789012:role/hyperpod-nodes"


def group_name(instance_type: str) -> str:
    """The instance group of a type: ``ml.p5.48xlarge`` -> ``p5-48xlarge``."""
    return normalized_instance_type(instance_type).replace(".", "-")


def create_cluster(sagemaker: Any, name: str, instance_types: Mapping[str, int]) -> str:
    """A HyperPod cluster (EKS-orchestrated) with one instance group per type; its ARN (by id)."""
    groups = [
        {
            "InstanceGroupName": group_name(itype),
            "InstanceType": hyperpod_instance_type(itype),
            "InstanceCount": count,
            "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-lifecycle/", "OnCreate": "on_create.sh"},
            "ExecutionRole": EXECUTION_ROLE,
        }
        for itype, count in sorted(instance_types.items())
    ]
    return str(sagemaker.create_cluster(ClusterName=name, InstanceGroups=groups)["ClusterArn"])


def cluster_id(cluster_arn: str) -> str:
    return cluster_arn.rsplit("/", 1)[-1]


def as_hyperpod_node(
    node: dict[str, Any], instance_id: str, cluster_arn: str, cluster_name: str, *, healthy: bool = True
) -> dict[str, Any]:
    """``node`` (a Node as kubelet registers an EC2 instance, :func:`topogov_local.fleet.node_object`)
    as HyperPod registers its instance (see the module docstring)."""
    labels = dict(node["metadata"]["labels"])
    itype = labels[INSTANCE_TYPE_LABEL]
    az_id = labels.get(ZONE_ID_LABEL) or labels.get("topology.kubernetes.io/zone", "")
    name = f"hyperpod-{instance_id}"
    for key in ("eks.amazonaws.com/nodegroup", ZONE_ID_LABEL):
        labels.pop(key, None)
    labels.update(
        {
            "kubernetes.io/hostname": name,
            INSTANCE_TYPE_LABEL: hyperpod_instance_type(itype),
            HYPERPOD_COMPUTE_TYPE_LABEL: "hyperpod",
            HYPERPOD_CLUSTER_NAME_LABEL: cluster_name,
            HYPERPOD_INSTANCE_GROUP_LABEL: group_name(itype),
            HYPERPOD_HEALTH_LABEL: HYPERPOD_SCHEDULABLE if healthy else UNHEALTHY,
        }
    )
    spec: dict[str, Any] = {
        "providerID": f"aws:///{az_id}/sagemaker/cluster/hyperpod-{cluster_id(cluster_arn)}-{instance_id}"
    }
    if not healthy:
        spec["taints"] = [dict(UNHEALTHY_TAINT)]
    status = dict(node["status"])
    status["addresses"] = [
        {**a, "address": name} if a["type"] in ("Hostname", "InternalDNS") else a for a in status["addresses"]
    ]
    return {
        **node,
        "metadata": {**node["metadata"], "name": name, "labels": labels},
        "spec": spec,
        "status": status,
    }


def unhealthy_ids(instances: Sequence[dict[str, Any]], count: int) -> set[str]:
    """Which instances' nodes are made unhealthy: the last ``count`` of the first HyperPod type."""
    if not instances or count <= 0:
        return set()
    first = instances[0]["InstanceType"]
    of_type = [i["InstanceId"] for i in instances if i["InstanceType"] == first]
    return set(of_type[-count:])
