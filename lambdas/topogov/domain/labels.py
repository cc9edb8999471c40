"""Node topology labels: what a node should carry, and the minimal patch that gets it there.

Pure functions, no I/O. The values are the ones the cloud controller manager writes
(`topology.k8s.aws/network-node-layer-N` = EC2's ``NetworkNodes[N-1]``, top layer first, and
`topology.k8s.aws/zone-id`), so the two never fight.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

LABEL_PREFIX = "topology.k8s.aws/"
LAYER_LABEL_PREFIX = "topology.k8s.aws/network-node-"  # + "layer-N"
ZONE_ID_LABEL = "topology.k8s.aws/zone-id"
HOSTNAME_LABEL = "kubernetes.io/hostname"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
HYPERPOD_COMPUTE_TYPE_LABEL = "sagemaker.amazonaws.com/compute-type"
LIFECYCLE_TAINT_PREFIX = "node.kubernetes.io/"  # not-ready, unreachable, unschedulable, *-pressure, ...
# SageMaker HyperPod's node labels (SageMaker Developer Guide, "Resilience-related Kubernetes labels by
# SageMaker HyperPod", sagemaker-hyperpod-eks-resiliency-node-labels.html): the node's health, one of
# Schedulable / Unschedulable / UnschedulablePendingReplacement / UnschedulablePendingReboot; its
# cluster and instance group; and the UltraServer a node belongs to, which task governance labels
# beside the network layers ("Topology-aware scheduling", ...-governance-tasks-scheduling.html).
HYPERPOD_HEALTH_LABEL = "sagemaker.amazonaws.com/node-health-status"
HYPERPOD_SCHEDULABLE = "Schedulable"
# hyp's --deep-health-check-passed-nodes-only: a node HyperPod's deep health check passed (value "Passed")
DEEP_HEALTH_LABEL = "sagemaker.amazonaws.com/deep-health-check-status"
HYPERPOD_CLUSTER_NAME_LABEL = "sagemaker.amazonaws.com/cluster-name"
HYPERPOD_INSTANCE_GROUP_LABEL = "sagemaker.amazonaws.com/instance-group-name"
HYPERPOD_TAINT_PREFIX = "sagemaker.amazonaws.com/"  # node-health-status=Unschedulable:NoSchedule, ...
ULTRASERVER_LABEL = "topology.k8s.aws/ultraserver-id"
# The pods of a HyperPodPyTorchJob (`hyp create hyp-pytorch-job`) carry the job's name in this label
# (aws/sagemaker-hyperpod-cli, src/sagemaker/hyperpod/training/hyperpod_pytorch_job.py, ``list_pods``).
HPJOB_LABEL = "HPJob"

# The other label and annotation keys Topogov reads or writes, each spelled here only.
# Kueue's (kueue.x-k8s.io): the Job's queue and priority, the pod template's topology request, the
# label Kueue puts on a Workload naming its Job's uid, and on every pod of a pod set.
KUEUE_GROUP = "kueue.x-k8s.io"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
REQUIRED_ANNOTATION = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_ANNOTATION = "kueue.x-k8s.io/podset-preferred-topology"
# Two pod sets of one job placed as one (a leader and its workers): Kueue v0.17.0
# ``apis/kueue/v1beta2/topology_types.go`` (PodSetGroupName), ``pkg/controller/jobframework/tas.go``
GROUP_ANNOTATION = "kueue.x-k8s.io/podset-group-name"
# Pod-set slices: every SLICE_SIZE consecutive pods (by completion index) in one domain of the slice
# level, inside the pod set's own level. Kueue v0.17.0 ``apis/kueue/v1beta2/topology_types.go``
# (PodSetSliceRequiredTopologyAnnotation, PodSetSliceSizeAnnotation); read for every kind with no
# feature gate; never with a pod-set group (``pkg/controller/jobframework/tas_validation.go``).
SLICE_LEVEL_ANNOTATION = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE_ANNOTATION = "kueue.x-k8s.io/podset-slice-size"
WORKLOAD_JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
PODSET_LABEL = "kueue.x-k8s.io/podset"
# Kubernetes' own: the Job controller's labels on its pods, the namespace's name label, the
# recommended managed-by label, and the one spec.managedBy a governed Job may name.
JOB_UID_LABEL = "batch.kubernetes.io/controller-uid"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
INDEX_LABEL = "batch.kubernetes.io/job-completion-index"  # an Indexed Job's pods
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "topogov"  # MANAGED_BY_LABEL's value on everything Topogov creates
JOB_CONTROLLER = "kubernetes.io/job-controller"
# The training kinds' controllers' labels on their pods (domain/kinds.py), and JobSet's exclusive
# placement annotation (which the API refuses: Kueue places the pods).
JOBSET_UID_LABEL = "jobset.sigs.k8s.io/jobset-uid"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
PYTORCH_JOB_NAME_LABEL = "training.kubeflow.org/job-name"
EXCLUSIVE_PLACEMENT_ANNOTATION = "alpha.jobset.sigs.k8s.io/exclusive-topology"
# Topogov's (topogov.io): who submitted a Job, what topology and priority its pods asked for (on the
# pod template, so the reconcile pass reads them from the one list of pods it makes), the team of a
# Kueue object, and the hash of what the governor last wrote (tells hand edits apart).
SUBMITTED_BY_ANNOTATION = "topogov.io/submitted-by"
TOPOLOGY_MODE_LABEL = "topogov.io/topology-mode"  # required | preferred | auto | none, as asked
POD_PRIORITY_LABEL = "topogov.io/priority-class"
TEAM_LABEL = "topogov.io/team"
RENDERED_ANNOTATION = "topogov.io/rendered"
# SageMaker HyperPod task governance's (sagemaker.amazonaws.com): what its add-on puts on the team
# namespaces it makes (the two documented: SageMaker Developer Guide and aws/sagemaker-hyperpod-cli's
# constants; ``activate-quota`` as its admission policy binding selects them) and on its queues.
# Kueue's label and annotation keys all share this prefix (kueue ``pkg/constants``, the
# ``podset-*`` annotations of ``pkg/controller/tas``); a submitted object may carry only those of
# them Topogov decides itself (the queue, the priority class, the topology request).
KUEUE_KEY_PREFIX = "kueue.x-k8s.io/"
TOPOGOV_KEY_PREFIX = "topogov.io/"
# Pod Security admission's namespace labels (k8s.io/pod-security-admission ``api/constants.go``):
# the level per mode and the policy version each mode evaluates.
POD_SECURITY_PREFIX = "pod-security.kubernetes.io/"
POD_SECURITY_MODES = ("enforce", "audit", "warn")
# The per-container AppArmor annotation Pod Security still reads (``policy/check_appArmorProfile.go``).
APPARMOR_ANNOTATION_PREFIX = "container.apparmor.security.beta.kubernetes.io/"
# The taints that mark a node as not (or no longer) fit to run team work: the node lifecycle's
# (not-ready, unreachable, unschedulable, memory/disk/pid pressure, out-of-service), a control
# plane node's, a cloud provider's node not yet initialised, Karpenter's node being disrupted, and
# HyperPod's health taints (LIFECYCLE_TAINT_PREFIX and HYPERPOD_TAINT_PREFIX above).
NODE_ROLE_TAINT_PREFIX = "node-role.kubernetes.io/"
CLOUD_PROVIDER_TAINT_PREFIX = "node.cloudprovider.kubernetes.io/"
KARPENTER_TAINT_PREFIX = "karpenter.sh/"
SAGEMAKER_MANAGED_QUEUE_LABEL = "sagemaker.amazonaws.com/sagemaker-managed-queue"
QUOTA_ALLOCATION_LABEL = "sagemaker.amazonaws.com/quota-allocation-id"
ACTIVATE_QUOTA_LABEL = "sagemaker.amazonaws.com/activate-quota"

_LAYER_RE = re.compile(r"^topology\.k8s\.aws/network-node-layer-([1-9][0-9]*)$")

#: A label patch: key -> new value, or None to remove the key (JSON merge-patch semantics).
LabelPatch = dict[str, str | None]


def layer_label(layer: int) -> str:
    """The label key of network-node layer ``layer`` (1 = top)."""
    if layer < 1:
        raise ValueError(f"layer must be >= 1, got {layer}")
    return f"topology.k8s.aws/network-node-layer-{layer}"


def layer_of(label: str) -> int | None:
    """The layer number of a layer label key, or None for any other key."""
    m = _LAYER_RE.match(label)
    return int(m.group(1)) if m else None


@dataclass(frozen=True, slots=True)
class InstanceTopology:
    """One instance's answer: from DescribeInstanceTopology, or adopted from the labels EKS wrote.

    ``fetched_at`` is when EC2 last answered for it (0: never, the answer is EKS's labels only);
    ``adopted_at`` when the node's own labels were taken as the answer (0: not adopted, an EC2
    answer the labeler wrote). An adopted answer is label-backed: it is verified against EC2 every
    ``verify_after_s`` from the later of the two, not refreshed every ``refresh_after_s``.
    """

    instance_id: str
    network_nodes: tuple[str, ...]  # top layer first
    instance_type: str = ""
    availability_zone: str = ""
    zone_id: str = ""
    group_name: str = ""
    fetched_at: float = 0.0
    adopted_at: float = 0.0

    @property
    def adopted(self) -> bool:
        return self.adopted_at > 0

    @property
    def checked_at(self) -> float:
        """When this answer was last confirmed: by EC2, or by adopting the node's labels."""
        return max(self.fetched_at, self.adopted_at)


def desired_labels(topology: InstanceTopology) -> dict[str, str]:
    """The owned labels a node backed by this instance must carry."""
    labels = {layer_label(i): node for i, node in enumerate(topology.network_nodes, start=1)}
    if topology.zone_id:
        labels[ZONE_ID_LABEL] = topology.zone_id
    return labels


def label_patch(current: Mapping[str, str], topology: InstanceTopology) -> LabelPatch:
    """The smallest patch that makes ``current`` carry the desired labels.

    Sets every desired label whose value differs, removes layer labels deeper than EC2's answer,
    and leaves every label the labeler does not own untouched. Empty when nothing drifted.
    """
    desired = desired_labels(topology)
    patch: LabelPatch = {k: v for k, v in desired.items() if current.get(k) != v}
    for key in current:
        if key not in desired and layer_of(key) is not None:
            patch[key] = None
    return patch


# "Place distributed AI/ML workloads with network topology labels" (EKS User Guide,
# https://docs.aws.amazon.com/eks/latest/userguide/ml-workload-topology.html): EKS labels a node of a
# supported type with ``network-node-layer-1`` (top), ``-2``, ``-3`` (the bottom layer for most types)
# and ``-4`` "present only on instance types whose topology has four layers", the values of EC2's
# DescribeInstanceTopology. The four-layer types are the EC2 User Guide's ("How Amazon EC2 instance
# topology works"): p6-b200.48xlarge, p6-b300.48xlarge.
FOUR_LAYER_TYPES = frozenset({"p6-b200.48xlarge", "p6-b300.48xlarge"})


def layers_expected(instance_type: str) -> int:
    """How many layer labels a node of ``instance_type`` carries when EKS labelled it fully."""
    return 4 if instance_type in FOUR_LAYER_TYPES else 3


def adopted_topology(
    instance_id: str,
    labels: Mapping[str, str],
    *,
    instance_type: str,
    availability_zone: str = "",
    at: float,
) -> InstanceTopology | None:
    """The answer a node's own complete layer labels give (EKS wrote them from EC2), or None when
    they are absent or partial: a gap, fewer or more layers than the type has, an empty value. A
    None answer is asked of EC2 as before."""
    layers = sorted(n for n in (layer_of(k) for k in labels) if n is not None)
    expected = layers_expected(instance_type)
    if layers != list(range(1, expected + 1)):
        return None
    path = network_path(labels)
    if len(path) != expected or not all(path):
        return None
    return InstanceTopology(
        instance_id=instance_id,
        network_nodes=path,
        instance_type=instance_type,
        availability_zone=availability_zone,
        zone_id=labels.get(ZONE_ID_LABEL, ""),
        adopted_at=at,
    )


def stale_layer_patch(current: Mapping[str, str]) -> LabelPatch:
    """For a node EC2 reports no topology for: remove its network-node layer labels (the zone id
    label stays: on EKS the cloud controller manager sets it on every node)."""
    return {key: None for key in current if layer_of(key) is not None}


def apply_patch(current: Mapping[str, str], patch: Mapping[str, str | None]) -> dict[str, str]:
    """What a JSON merge patch of ``metadata.labels`` does on the server."""
    result = dict(current)
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = value
    return result


def network_path(labels: Mapping[str, str]) -> tuple[str, ...]:
    """The network-node path a node's labels describe (layer 1 first), stopping at the first gap."""
    path: list[str] = []
    layer = 1
    while (value := labels.get(layer_label(layer))) is not None:
        path.append(value)
        layer += 1
    return tuple(path)
