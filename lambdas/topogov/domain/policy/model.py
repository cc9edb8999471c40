"""The policy's models (frozen pydantic; unknown keys refused) and what they mean: each team's quota,
borrow limit, lending, in-flight cap; who is a team's principal or an admin; warnings."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, StrictInt, StrictStr, model_validator

from topogov.domain.policy.arn import principal_matches, too_wide
from topogov.domain.policy.defaults import DEFAULT_BORROW_LIMIT_PERCENT, DEFAULT_RETENTION_DAYS, with_defaults
from topogov.domain.policy.fields import (
    ArnPattern,
    DnsLabel,
    DnsSubdomain,
    Model,
    ResourceQuantities,
    non_empty,
    percent,
    positive,
    priority_value,
    retention_days,
)
from topogov.domain.policy.pods import PodRules
from topogov.domain.policy.rules import PolicyError, cross_checks, dotted
from topogov.domain.quantity import (
    CPU,
    GOVERNED,
    GPU,
    MEMORY,
    Resources,
    amount_of,
    format_quantity,
    quantity_json,
    resources_of,
)

Sharing = Literal["Lend", "DontLend", "LendAndBorrow"]
NAME_IS_KEY = "a team's name is its key under teams"


class PriorityClass(Model):
    """A cluster-wide priority class (HyperPod ``ClusterSchedulerConfig`` / Kueue WorkloadPriorityClass).

    ``weight`` is HyperPod's ``PriorityClass.Weight`` (0–100, botocore's ``PriorityWeight``): used only
    when the policy is rendered for HyperPod task governance (:mod:`topogov.domain.hyperpod`), where
    the class's ``value`` stands in when it is itself 0–100."""

    name: DnsSubdomain
    value: Annotated[StrictInt, AfterValidator(priority_value)]
    weight: Annotated[StrictInt, AfterValidator(percent)] | None = None


class HyperPodSettings(Model):
    """What HyperPod task governance needs beyond the teams (``hyperpod:``; see
    :mod:`topogov.domain.hyperpod`): the cluster's instance types with how many instances of each
    (each team's quota is split over them by :func:`topogov.domain.kueue.split_resources`), and the
    cluster policy's ``IdleResourceSharing`` (left to the service when not given)."""

    instance_types: dict[StrictStr, Annotated[StrictInt, AfterValidator(positive)]] = Field(
        alias="instanceTypes"
    )
    idle_resource_sharing: Literal["Enabled", "Disabled"] | None = Field(
        default=None, alias="idleResourceSharing"
    )


class Team(Model):
    """One team with its defaults applied (by :class:`Policy`; ``name`` is its key under ``teams``)."""

    name: DnsLabel
    namespace: DnsLabel
    local_queue: DnsLabel = Field(alias="localQueue")
    principals: Annotated[
        tuple[ArnPattern, ...], AfterValidator(non_empty("must list at least one principal ARN pattern"))
    ]
    quota: ResourceQuantities
    borrow_limit: ResourceQuantities | None = Field(default=None, alias="borrowLimit")
    borrow_limit_percent: Annotated[StrictInt, AfterValidator(percent)] | None = Field(
        default=None, alias="borrowLimitPercent"
    )
    sharing: Sharing = "LendAndBorrow"
    preempt_team_tasks: Literal["Never", "LowerPriority"] = Field(
        default="LowerPriority", alias="preemptTeamTasks"
    )
    fair_share_weight: Annotated[StrictInt, AfterValidator(positive)] = Field(
        default=1, alias="fairShareWeight"
    )
    priority_classes: Annotated[
        tuple[DnsSubdomain, ...], AfterValidator(non_empty("must list at least one priority class"))
    ] = Field(alias="priorityClasses")
    default_priority_class: DnsSubdomain = Field(alias="defaultPriorityClass")
    max_in_flight: ResourceQuantities | None = Field(default=None, alias="maxInFlight")
    pods: PodRules = PodRules()

    @property
    def quota_resources(self) -> Resources:
        """Nominal quota; a resource the quota does not name is 0."""
        return self.quota.resources()

    @property
    def borrows(self) -> bool:
        return self.sharing == "LendAndBorrow"

    @property
    def lends(self) -> bool:
        return self.sharing != "DontLend"

    @property
    def borrow_resources(self) -> Resources:
        """How much idle quota of other teams this team may borrow (Kueue ``borrowingLimit``)."""
        if not self.borrows:
            return Resources()
        if self.borrow_limit is not None:
            return self.borrow_limit.resources()
        percent = (
            DEFAULT_BORROW_LIMIT_PERCENT if self.borrow_limit_percent is None else self.borrow_limit_percent
        )
        quota = self.quota_resources
        return resources_of({r: amount_of(quota, r) * percent // 100 for r in GOVERNED})

    @property
    def lending_limit_resources(self) -> Resources | None:
        """Kueue ``lendingLimit``: ``None`` when all idle quota may be lent, zero for ``DontLend``."""
        return None if self.lends else Resources()

    @property
    def max_in_flight_resources(self) -> Resources:
        """Cap on queued + running requests: ``maxInFlight``, else 2 × (quota + borrow) per resource."""
        ceiling = self.quota_resources + self.borrow_resources
        default = ceiling + ceiling
        return default if self.max_in_flight is None else self.max_in_flight.resources(default)

    @property
    def priority_class_names(self) -> tuple[str, ...]:
        return self.priority_classes

    def to_json(self) -> dict[str, Any]:
        """The team normalised: defaults applied, every quantity resolved for all four resources."""
        out: dict[str, Any] = {
            "namespace": self.namespace,
            "localQueue": self.local_queue,
            "principals": list(self.principals),
            "quota": _resources_json(self.quota_resources),
            "sharing": self.sharing,
        }
        if self.borrows:
            out["borrowLimit"] = _resources_json(self.borrow_resources)
        out |= {
            "preemptTeamTasks": self.preempt_team_tasks,
            "fairShareWeight": self.fair_share_weight,
            "priorityClasses": list(self.priority_classes),
            "defaultPriorityClass": self.default_priority_class,
            "maxInFlight": _resources_json(self.max_in_flight_resources),
            "pods": self.pods.model_dump(by_alias=True, exclude_none=True, mode="json"),
        }
        return out


def _resources_json(resources: Resources) -> dict[str, int | str]:
    return {r: quantity_json(r, amount_of(resources, r)) for r in GOVERNED}


def _class_json(pc: PriorityClass) -> dict[str, Any]:
    return {"name": pc.name, "value": pc.value} | ({"weight": pc.weight} if pc.weight is not None else {})


def _human(resources: Resources) -> dict[str, str]:
    return {r: format_quantity(r, amount_of(resources, r)) for r in GOVERNED}


class Policy(Model):
    """The whole policy. Build it with :func:`load_policy` / :func:`parse_policy` to get every problem."""

    priority_classes: Annotated[
        tuple[PriorityClass, ...], AfterValidator(non_empty("must declare at least one priority class"))
    ] = Field(alias="priorityClasses")
    fair_share: Literal["enabled", "disabled"] = Field(default="enabled", alias="fairShare")
    teams: Annotated[dict[str, Team], AfterValidator(non_empty("must define at least one team"))]
    admins: tuple[ArnPattern, ...] = ()
    hyperpod: HyperPodSettings | None = None
    job_retention_days: Annotated[StrictInt, AfterValidator(retention_days)] = Field(
        default=DEFAULT_RETENTION_DAYS, alias="jobRetentionDays"
    )

    @model_validator(mode="before")
    @classmethod
    def _apply_defaults(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and isinstance(data.get("teams"), Mapping):
            named = [
                (dotted("teams", k, "name"), f"unknown key: {NAME_IS_KEY}")
                for k, t in data["teams"].items()
                if isinstance(t, Mapping) and "name" in t
            ]
            if named:
                raise PolicyError(named)
        return with_defaults(data)

    @model_validator(mode="after")
    def _consistent(self) -> Policy:
        problems = cross_checks(
            [pc.name for pc in self.priority_classes], {k: dict(t) for k, t in self.teams.items()}
        )
        if problems:
            raise PolicyError(problems)
        return self

    def priority_value(self, name: str) -> int:
        """The value of priority class ``name``; ``KeyError`` if it is not declared."""
        for pc in self.priority_classes:
            if pc.name == name:
                return pc.value
        raise KeyError(name)

    def teams_for_principal(self, principal: str) -> list[str]:
        """The teams (sorted) one of whose principal patterns matches the principal ARN (``arn.py``:
        an assumed-role session's is its role's, with the role's path)."""
        return sorted(
            name
            for name, team in self.teams.items()
            if any(principal_matches(p, principal) for p in team.principals)
        )

    def is_admin(self, principal: str) -> bool:
        return any(principal_matches(p, principal) for p in self.admins)

    @property
    def principal_patterns(self) -> tuple[str, ...]:
        """Every principal pattern of the policy: the teams' and the admins'."""
        return tuple(p for team in self.teams.values() for p in team.principals) + self.admins

    def team_for_namespace(self, namespace: str) -> str | None:
        return next((name for name, team in self.teams.items() if team.namespace == namespace), None)

    def to_json(self) -> dict[str, Any]:
        """The normalised policy; itself a valid policy document with the same meaning."""
        return {
            "priorityClasses": [_class_json(pc) for pc in self.priority_classes],
            "fairShare": self.fair_share,
            "teams": {name: team.to_json() for name, team in self.teams.items()},
            "admins": list(self.admins),
            "jobRetentionDays": self.job_retention_days,
        } | (
            {"hyperpod": self.hyperpod.model_dump(by_alias=True, exclude_none=True)} if self.hyperpod else {}
        )

    def summary(self) -> list[dict[str, Any]]:
        """One row per team, quantities in Kubernetes' human units, for ``topogov policy check``."""
        return [
            {
                "team": name,
                "namespace": team.namespace,
                "localQueue": team.local_queue,
                "sharing": team.sharing,
                "preemptTeamTasks": team.preempt_team_tasks,
                "fairShareWeight": team.fair_share_weight,
                "quota": _human(team.quota_resources),
                "borrow": _human(team.borrow_resources),
                "maxInFlight": _human(team.max_in_flight_resources),
                "priorityClasses": list(team.priority_classes),
                "defaultPriorityClass": team.default_priority_class,
                "principals": list(team.principals),
                "pods": team.pods.model_dump(by_alias=True, exclude_none=True, mode="json"),
            }
            for name, team in self.teams.items()
        ]

    def warnings(self, cluster_capacity: Resources | None = None) -> list[str]:
        """Things that are valid but probably not meant, as sentences for a platform engineer."""
        out: list[str] = [w for w in (too_wide(p) for p in self.principal_patterns) if w]
        if cluster_capacity is not None:
            nominal = Resources()
            for team in self.teams.values():
                nominal = nominal + team.quota_resources
            for r in GOVERNED:
                total, have = amount_of(nominal, r), amount_of(cluster_capacity, r)
                if total > have:
                    if r == CPU:  # both in cores: "10304 vs 3446.1", not "10304 vs 3446100m"
                        said = f"{total / 1000:g} cores, the cluster has {have / 1000:g}"
                    else:
                        said = f"{format_quantity(r, total)}, the cluster has {format_quantity(r, have)}"
                    out.append(f"nominal {r} quotas add up to {said}")
        lenders = {name for name, team in self.teams.items() if team.lends}
        for name, team in self.teams.items():
            borrow = team.borrow_resources
            if borrow.gpu > 0 and (borrow.cpu_m == 0 or borrow.memory == 0):
                missing = " or ".join(r for r in (CPU, MEMORY) if amount_of(borrow, r) == 0)
                out.append(
                    f"{name} may borrow {GPU} but no {missing}: a job on borrowed GPUs must fit "
                    f"its {missing} in the team's nominal quota"
                )
            if borrow != Resources() and not lenders - {name}:
                out.append(f"{name} may borrow but no other team lends (sharing: DontLend everywhere else)")
            ceiling = team.quota_resources + borrow
            for r in GOVERNED:
                cap = team.max_in_flight.get(r) if team.max_in_flight else None
                if cap is not None and cap < amount_of(ceiling, r):
                    out.append(
                        f"{name}: maxInFlight {r} {format_quantity(r, cap)} is below quota + borrow "
                        f"({format_quantity(r, amount_of(ceiling, r))}): "
                        "the team can never use all it may borrow"
                    )
            if self.fair_share == "disabled" and "fair_share_weight" in team.model_fields_set:
                out.append(f"{name}: fairShareWeight has no effect while fairShare is disabled")
        return out
