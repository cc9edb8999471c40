"""The names the add-on gives what a ComputeQuota makes, a priority class's HyperPod name and weight,
and the split of a team's quantities over the cluster's instance types (see :mod:`.policy`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from topogov.domain.hyperpod import api
from topogov.domain.hyperpod.instances import NOMINAL
from topogov.domain.kueue import FlavorInput, split_resources
from topogov.domain.policy import Policy, PriorityClass
from topogov.domain.quantity import Resources

NAMESPACE_PREFIX = "hyperpod-ns-"
LOCAL_QUEUE_SUFFIX = "-localqueue"
CLUSTER_QUEUE_SUFFIX = "-clusterqueue"
PRIORITY_SUFFIX = "-priority"
NAMESPACE_MAX = 63  # a namespace name is a DNS-1123 label
TEAM_MAX = NAMESPACE_MAX - len(NAMESPACE_PREFIX)  # 51


# --- names ------------------------------------------------------------------------------------------
def namespace(team: str) -> str:
    """The namespace the add-on makes for a team: ``hyperpod-ns-<team>``."""
    return f"{NAMESPACE_PREFIX}{team}"


def local_queue(team: str) -> str:
    return f"{namespace(team)}{LOCAL_QUEUE_SUFFIX}"


def cluster_queue(team: str) -> str:
    return f"{namespace(team)}{CLUSTER_QUEUE_SUFFIX}"


def hyperpod_class_name(name: str) -> str:
    """A ``teams.yaml`` priority class's name in the ClusterSchedulerConfig: without ``-priority``."""
    return name.removesuffix(PRIORITY_SUFFIX) or name


def workload_priority_class(name: str) -> str:
    """The WorkloadPriorityClass the add-on writes for a ``teams.yaml`` priority class (its
    ClusterSchedulerConfig name + ``-priority``): the ``teams.yaml`` name when it ends in ``-priority``."""
    return f"{hyperpod_class_name(name)}{PRIORITY_SUFFIX}"


def class_weight(pc: PriorityClass) -> int | None:
    """The HyperPod weight of a class: its ``weight``, else its ``value`` when that is 0–100."""
    if pc.weight is not None:
        return pc.weight
    return pc.value if api.WEIGHT_MIN <= pc.value <= api.WEIGHT_MAX else None


# --- the split --------------------------------------------------------------------------------------
def flavors(policy: Policy) -> list[FlavorInput]:
    """The cluster's instance types as flavors for the split (``hyperpod.instanceTypes``, by name):
    nominal capacity per instance, the count of instances; types Topogov does not know are left out
    (:func:`problems` refuses them)."""
    if policy.hyperpod is None:
        return []
    return [
        FlavorInput(name, NOMINAL[name].resources(), count)
        for name, count in sorted(policy.hyperpod.instance_types.items())
        if name in NOMINAL
    ]


def _number(value: int, scale: int) -> int | float:
    """``value / scale`` as JSON writes it: an integer when whole."""
    return value // scale if value % scale == 0 else value / scale


def resource_configs(amounts: Resources, types: Sequence[FlavorInput]) -> list[dict[str, Any]]:
    """``amounts`` split over the types as ComputeQuotaResourceConfig items (all-zero items left out)."""
    out = []
    for flavor, share in zip(types, split_resources(amounts, types), strict=True):
        if share.gpu or share.cpu_m or share.memory:
            out.append(
                {
                    "InstanceType": flavor.instance_type,
                    "Accelerators": share.gpu,
                    "VCpu": _number(share.cpu_m, 1000),
                    "MemoryInGiB": _number(share.memory, 2**30),
                }
            )
    return out
