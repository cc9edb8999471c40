"""``teams.yaml`` as SageMaker HyperPod task governance's policy, and the Kueue objects the
task governance add-on makes of it (pure, no I/O).

* :mod:`.api` — what the APIs accept (botocore's service model, transcribed and checked against it);
* :mod:`.instances` — the instance types as HyperPod counts them (nominal vCPUs, memory, accelerators);
* :mod:`.mapping` — the names the add-on derives from a team, a priority class's HyperPod name and
  weight, a team's quantities split over the cluster's instance types;
* :mod:`.policy` — :func:`render`: one ComputeQuota per team and the ClusterSchedulerConfig, the
  request bodies that are also the CloudFormation properties;
* :mod:`.checks` — :func:`problems` (what the APIs would refuse, by ``teams.yaml`` field) and
  :func:`warnings` (what has no equivalent and will differ);
* :mod:`.addon` — :func:`addon_objects`: the Kueue objects the add-on writes for a set of
  ComputeQuotas and the cluster policy; :func:`expected_objects` of ``teams.yaml``.

docs/hyperpod.md describes the mapping, the refusals, the fields with no equivalent and, in one
table, every assumption about the add-on's rendering.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from topogov.domain.hyperpod.addon import ApiVersion, described
from topogov.domain.hyperpod.addon import objects as addon_objects
from topogov.domain.hyperpod.checks import problems, warnings
from topogov.domain.hyperpod.mapping import (
    cluster_queue,
    flavors,
    hyperpod_class_name,
    local_queue,
    namespace,
    workload_priority_class,
)
from topogov.domain.hyperpod.policy import SCHEDULER_CONFIG_NAME, TaskGovernance, render
from topogov.domain.policy import Policy


def expected_objects(
    policy: Policy, cluster_arn: str | None, *, api_version: ApiVersion = "v1beta1"
) -> list[dict[str, Any]]:
    """The Kueue objects the add-on writes once the stack has put ``policy`` into force on the cluster
    ``cluster_arn`` (None: whichever; the objects do not name it) (raises ``PolicyError`` as
    :func:`render` does)."""
    governance = render(policy, cluster_arn)
    assert policy.hyperpod is not None  # render refuses a policy without it
    scheduler: Mapping[str, Any] = governance.scheduler_config["SchedulerConfig"]
    quotas = [described(q) for q in governance.compute_quotas]
    return addon_objects(quotas, scheduler, policy.hyperpod.instance_types, api_version=api_version)


__all__ = [
    "SCHEDULER_CONFIG_NAME",
    "ApiVersion",
    "TaskGovernance",
    "addon_objects",
    "cluster_queue",
    "described",
    "expected_objects",
    "flavors",
    "hyperpod_class_name",
    "local_queue",
    "namespace",
    "problems",
    "render",
    "warnings",
    "workload_priority_class",
]
