"""``teams.yaml`` as HyperPod task governance's policy: one ``CreateComputeQuota`` request per team and
one ``CreateClusterSchedulerConfig`` (:func:`render`), and everything the APIs would refuse in it, named
by the ``teams.yaml`` field that causes it (:func:`problems`). The request bodies are also the
CloudFormation properties of ``AWS::SageMaker::ComputeQuota`` / ``ClusterSchedulerConfig`` (the
registry schemas use the API's member names), so ``infra/`` renders exactly these.

The mapping (docs/hyperpod.md has it as a table, with what has no equivalent)
    team key                 ``Name`` and ``ComputeQuotaTarget.TeamName``; the add-on names the
                             namespace ``hyperpod-ns-<team>`` and the LocalQueue ``<namespace>-localqueue``,
                             so a ``namespace`` or ``localQueue`` other than those is refused
    ``quota``                ``ComputeQuotaResources``: per instance type of ``hyperpod.instanceTypes``,
                             ``Accelerators`` (GPUs), ``VCpu`` and ``MemoryInGiB``, split over the types
                             by :func:`topogov.domain.kueue.split_resources` (the governor's rule) with
                             the types' nominal capacity (:mod:`.instances`) × their counts as weights;
                             all three are always given, so nothing is filled in by ratio. EFA has no
                             equivalent (the add-on derives it: :func:`warnings`)
    ``sharing``              ``ResourceSharingConfig.Strategy``
    ``borrowLimitPercent``   ``BorrowLimit`` (the default, 50, written out)
    ``borrowLimit``          ``AbsoluteBorrowLimits`` split as the quota, with ``BorrowLimit: 0`` (a
                             resource or type it does not name is not borrowed, as in ``teams.yaml``);
                             all zero: ``BorrowLimit: 0`` alone
    ``preemptTeamTasks``     ``PreemptTeamTasks``
    ``fairShareWeight``      ``ComputeQuotaTarget.FairShareWeight`` (0–100 there)
    ``fairShare``            ``SchedulerConfig.FairShare`` (``Enabled`` / ``Disabled``)
    ``priorityClasses``      ``SchedulerConfig.PriorityClasses``: ``Name`` is the class's name without a
                             ``-priority`` suffix (the add-on appends one: its WorkloadPriorityClass is
                             then the ``teams.yaml`` name), ``Weight`` its ``weight`` (else its ``value``
                             when 0–100); weights must order the classes as their values do
    ``hyperpod.idleResourceSharing``  ``SchedulerConfig.IdleResourceSharing`` (omitted when not given)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from topogov.domain.hyperpod import api
from topogov.domain.hyperpod.checks import problems
from topogov.domain.hyperpod.mapping import class_weight, flavors, hyperpod_class_name, resource_configs
from topogov.domain.kueue import FlavorInput
from topogov.domain.policy import Policy, PolicyError, Team

SCHEDULER_CONFIG_NAME = "topogov"
DESCRIPTION = "Topogov teams.yaml: team {team}"


class TaskGovernance(NamedTuple):
    """The policy as the APIs take it: one CreateComputeQuota request per team, in team order, and
    the CreateClusterSchedulerConfig request."""

    compute_quotas: list[dict[str, Any]]
    scheduler_config: dict[str, Any]


# --- the requests -----------------------------------------------------------------------------------
def _sharing(team: Team, types: Sequence[FlavorInput]) -> dict[str, Any]:
    sharing: dict[str, Any] = {"Strategy": team.sharing}
    if not team.borrows:
        return sharing
    if team.borrow_limit is None:
        percent = team.borrow_limit_percent
        return sharing | {"BorrowLimit": api.DEFAULT_BORROW_LIMIT if percent is None else percent}
    absolute = resource_configs(team.borrow_resources, types)
    return sharing | {"BorrowLimit": 0} | ({"AbsoluteBorrowLimits": absolute} if absolute else {})


def compute_quota(
    name: str, team: Team, types: Sequence[FlavorInput], cluster_arn: str | None
) -> dict[str, Any]:
    """The CreateComputeQuota request of one team (without ClusterArn when ``cluster_arn`` is None)."""
    return {
        "Name": name,
        "Description": DESCRIPTION.format(team=name),
        **({"ClusterArn": cluster_arn} if cluster_arn is not None else {}),
        "ComputeQuotaConfig": {
            "ComputeQuotaResources": resource_configs(team.quota_resources, types),
            "ResourceSharingConfig": _sharing(team, types),
            "PreemptTeamTasks": team.preempt_team_tasks,
        },
        "ComputeQuotaTarget": {"TeamName": name, "FairShareWeight": team.fair_share_weight},
        "ActivationState": "Enabled",
    }


def scheduler_config(policy: Policy, cluster_arn: str | None) -> dict[str, Any]:
    """The CreateClusterSchedulerConfig request of the policy (without ClusterArn when None)."""
    config: dict[str, Any] = {
        "PriorityClasses": [
            {"Name": hyperpod_class_name(pc.name), "Weight": class_weight(pc)}
            for pc in policy.priority_classes
        ],
        "FairShare": "Enabled" if policy.fair_share == "enabled" else "Disabled",
    }
    if policy.hyperpod is not None and policy.hyperpod.idle_resource_sharing is not None:
        config["IdleResourceSharing"] = policy.hyperpod.idle_resource_sharing
    arn = {"ClusterArn": cluster_arn} if cluster_arn is not None else {}
    return {"Name": SCHEDULER_CONFIG_NAME, **arn, "SchedulerConfig": config}


def render(policy: Policy, cluster_arn: str | None) -> TaskGovernance:
    """The policy as the task governance APIs take it, for the cluster ``cluster_arn`` (None: the
    requests without their ClusterArn, e.g. ``topogov policy check --hyperpod``).

    Raises ``PolicyError`` with every problem (:func:`problems`) when the APIs would refuse any of
    it, or when ``cluster_arn`` is not a cluster ARN they take."""
    found = problems(policy)
    arn_problem = api.cluster_arn_problem(cluster_arn) if cluster_arn is not None else None
    if arn_problem:
        found.insert(0, ("hyperpodClusterArn", arn_problem))
    if found:
        raise PolicyError(found)
    types = flavors(policy)
    quotas = [compute_quota(name, policy.teams[name], types, cluster_arn) for name in sorted(policy.teams)]
    return TaskGovernance(quotas, scheduler_config(policy, cluster_arn))
