"""The team policy: teams, quotas, priority classes and who may act for a team (pure, no I/O except
:func:`load_policy_file`).

The policy is one YAML file (DESIGN.md, "Team policy"). :func:`load_policy` parses it, applies the
defaults and checks it, reporting **every** problem at once as a :class:`PolicyError` whose problems
name the offending path dotted from the root (``teams.team-a.quota.nvidia.com/gpu: must be ≥ 0``).
The models are frozen pydantic models; unknown keys are refused and numbers are never read from
strings, except resource quantities, which Kubernetes writes either way (``cpu: 1536``, ``"500m"``,
``memory: 16Ti``).

Beyond each field's type and range, the checks that relate fields: priority class names unique; a
team's classes declared and its default one of them; one team per namespace; ``borrowLimit`` xor
``borrowLimitPercent``, and either only with ``sharing: LendAndBorrow``; ``maxInFlight`` ≥ quota for
each resource it names. Also refused, to catch typing mistakes early: a principal pattern that does not
have the six ARN parts, a policy without priority classes, and a YAML key given twice in one mapping
(PyYAML would silently keep the last, e.g. a second ``team-a:``). A problem in one field does not hide
the others: each field is validated on its own and the cross-field checks run on the valid ones.

Defaults
    ``namespace`` ``hyperpod-ns-<team>``; ``localQueue`` ``<namespace>-localqueue``; ``sharing``
    ``LendAndBorrow``; ``preemptTeamTasks`` ``LowerPriority``; ``fairShareWeight`` 1; ``fairShare``
    ``enabled``; ``priorityClasses`` of a team: every declared class; ``defaultPriorityClass``: the
    lowest-value class of the team's; borrowing (``LendAndBorrow`` only) ``borrowLimitPercent: 50``;
    ``maxInFlight``: 2 × (quota + borrow) for every resource it does not name. These follow HyperPod
    task governance's defaults (strategy LendAndBorrow, BorrowLimit 50 %, PreemptTeamTasks
    LowerPriority) and Kueue's (fair-sharing weight 1).

Sharing and borrowing (HyperPod ``ResourceSharingConfig.Strategy``, rendered as Kueue limits)
    ``LendAndBorrow``  lends its idle nominal quota to the cohort and borrows idle quota of others up to
                       its borrow limit (Kueue ``borrowingLimit`` = :attr:`Team.borrow_resources`, no
                       ``lendingLimit``).
    ``Lend``           lends its idle quota, never borrows (``borrowingLimit: 0``).
    ``DontLend``       neither lends nor borrows: its quota is reserved for it (``lendingLimit: 0``,
                       ``borrowingLimit: 0``).
    Only a ``LendAndBorrow`` team may borrow, so ``borrowLimit``/``borrowLimitPercent`` on a ``Lend``
    or ``DontLend`` team is an error rather than a setting silently ignored. ``borrowLimit`` is
    absolute per resource and a resource it does not name is not borrowed (a warning points out a
    team that may borrow GPUs but no CPU or memory to run them with); ``borrowLimitPercent`` is a
    percentage of each quota, rounded down.

Principal matching
    A principal pattern is an ARN whose six colon-separated parts
    (``arn:PARTITION:SERVICE:REGION:ACCOUNT:RESOURCE``) are matched part by part, as IAM's
    ``ArnLike`` does, with ``*`` (any run of characters, ``/`` included) and ``?`` (exactly one
    character), case-sensitively and against the whole part, so a wildcard never spills from the
    account into the resource. The caller's ARN is taken literally, never as a pattern.

    An assumed-role session ``arn:P:sts::ACCOUNT:assumed-role/ROLE/SESSION`` is first normalised to
    its role ``arn:P:iam::ACCOUNT:role/ROLE``; the session name is dropped, so it never influences a
    match. STS does not report a role's path, so for such a caller a role pattern
    ``role/PATH/NAME`` is matched by its name alone: the path (everything between ``role/`` and the
    last ``/``) is ignored and ``NAME`` must match the role name. IAM role names are unique within an
    account whatever their path, so an exact name still identifies exactly one role; a wildcard name
    (``role/teams/TeamA*``) matches that name pattern on any path for session callers. A caller that
    presents a role ARN itself (``arn:P:iam::ACCOUNT:role/PATH/NAME``) is matched with its path, as
    IAM does. IAM users (``user/PATH/NAME``) and every other ARN are matched as they are.
"""

from __future__ import annotations

import difflib
import functools
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    StrictInt,
    StrictStr,
    TypeAdapter,
    ValidationError,
    model_validator,
)

from topogov.domain.errors import ConfigError
from topogov.domain.quantity import CPU, EFA, GPU, MEMORY, Resources, parse_quantity

GOVERNED: tuple[str, ...] = (GPU, EFA, CPU, MEMORY)
PRIORITY_MIN, PRIORITY_MAX = -2_147_483_648, 1_000_000_000  # Kubernetes/Kueue: int32, ≤ 1e9 for users
DEFAULT_BORROW_LIMIT_PERCENT = 50
NAMESPACE_PREFIX = "hyperpod-ns-"
LOCAL_QUEUE_SUFFIX = "-localqueue"
_MAX_QUANTITY = 2**63 - 1

Sharing = Literal["Lend", "DontLend", "LendAndBorrow"]
Problem = tuple[str, str]


class PolicyError(ConfigError, ValueError):
    """The policy is invalid. ``problems`` lists ``(path, message)``; ``str()`` is one problem a line."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems: list[Problem] = list(problems)
        super().__init__("\n".join(_line(path, message) for path, message in self.problems))


def _line(path: str, message: str) -> str:
    return f"{path}: {message}" if path else message


def _dotted(*parts: Any) -> str:
    return ".".join(str(p) for p in parts)


# --- field types -------------------------------------------------------------------------------------

_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def is_dns_label(value: str) -> bool:
    return len(value) <= 63 and _LABEL.fullmatch(value) is not None


def _dns_label(value: str) -> str:
    if not is_dns_label(value):
        raise ValueError(
            f"{value!r} is not a DNS-1123 label (at most 63 characters: lower-case letters, digits "
            "and '-', starting and ending with a letter or digit)"
        )
    return value


def _dns_subdomain(value: str) -> str:
    if len(value) > 253 or _SUBDOMAIN.fullmatch(value) is None:
        raise ValueError(
            f"{value!r} is not a DNS-1123 subdomain (at most 253 characters: dot-separated lower-case "
            "labels of letters, digits and '-')"
        )
    return value


def _arn_pattern(value: str) -> str:
    if not value.startswith("arn:"):
        raise ValueError(f"{value!r} is not an ARN pattern: it must start with 'arn:'")
    if len(value.split(":", 5)) < 6:
        raise ValueError(
            f"{value!r} is not an ARN pattern: it must read arn:PARTITION:SERVICE:REGION:ACCOUNT:RESOURCE"
        )
    return value


def _priority_value(value: int) -> int:
    if not PRIORITY_MIN <= value <= PRIORITY_MAX:
        raise ValueError(f"must be an integer from {PRIORITY_MIN} to {PRIORITY_MAX} (Kueue's range)")
    return value


def _percent(value: int) -> int:
    if not 0 <= value <= 100:
        raise ValueError("must be from 0 to 100")
    return value


def _positive(value: int) -> int:
    if value <= 0:
        raise ValueError("must be > 0")
    return value


def _non_empty(message: str) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    def check(value: tuple[Any, ...]) -> tuple[Any, ...]:
        if not value:
            raise ValueError(message)
        return value

    return check


def _quantity(scale: int, unit: str) -> Callable[[Any], int]:
    """A Kubernetes quantity (number or string) as a whole number of ``unit`` (``scale`` per unit)."""

    def validate(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise ValueError("must be a Kubernetes quantity: a number or a string such as 500m or 16Ti")
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"not a Kubernetes quantity: {value!r}")
        try:
            amount = parse_quantity(value)
        except ValueError:
            raise ValueError(f"not a Kubernetes quantity: {value!r}") from None
        if amount < 0:
            raise ValueError("must be ≥ 0")
        scaled = amount * scale
        if scaled > _MAX_QUANTITY:
            raise ValueError("is too large")
        if scaled != scaled.to_integral_value():
            raise ValueError(f"must be a whole number of {unit}")
        return int(scaled)

    return validate


DnsLabel = Annotated[StrictStr, AfterValidator(_dns_label)]
DnsSubdomain = Annotated[StrictStr, AfterValidator(_dns_subdomain)]
ArnPattern = Annotated[StrictStr, AfterValidator(_arn_pattern)]
Devices = Annotated[int, PlainValidator(_quantity(1, "devices"))]
Millicores = Annotated[int, PlainValidator(_quantity(1000, "millicores"))]
Bytes = Annotated[int, PlainValidator(_quantity(1, "bytes"))]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --- quantities ----------------------------------------------------------------------------------


def amount_of(resources: Resources, resource: str) -> int:
    """One governed resource of ``resources`` by its Kubernetes name (CPU in millicores)."""
    return {GPU: resources.gpu, EFA: resources.efa, CPU: resources.cpu_m, MEMORY: resources.memory}[resource]


def _resources(amounts: Mapping[str, int]) -> Resources:
    return Resources(gpu=amounts[GPU], efa=amounts[EFA], cpu_m=amounts[CPU], memory=amounts[MEMORY])


_BINARY = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))
_DECIMAL = (("E", 10**18), ("P", 10**15), ("T", 10**12), ("G", 10**9), ("M", 10**6), ("k", 10**3))


def format_quantity(resource: str, amount: int) -> str:
    """``amount`` of ``resource`` as Kubernetes writes it: ``256``, ``1536`` or ``500m`` CPUs, ``16Ti``."""
    if resource == CPU:
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    if resource == MEMORY and amount:
        for suffix, factor in (*_BINARY, *_DECIMAL):
            if amount % factor == 0:
                return f"{amount // factor}{suffix}"
    return str(amount)


def _quantity_json(resource: str, amount: int) -> int | str:
    text = format_quantity(resource, amount)
    return int(text) if text.isdigit() else text


class ResourceQuantities(_Model):
    """A map of governed resources to quantities; a resource the map does not name is ``None``."""

    gpu: Devices | None = Field(default=None, alias=GPU)
    efa: Devices | None = Field(default=None, alias=EFA)
    cpu_m: Millicores | None = Field(default=None, alias=CPU)
    memory: Bytes | None = Field(default=None, alias=MEMORY)

    def get(self, resource: str) -> int | None:
        """The amount named for ``resource`` (a Kubernetes resource name), else ``None``."""
        return {GPU: self.gpu, EFA: self.efa, CPU: self.cpu_m, MEMORY: self.memory}[resource]

    def resources(self, fallback: Resources | None = None) -> Resources:
        """The named amounts; each resource not named comes from ``fallback`` (else 0)."""
        base = fallback or Resources()
        named = {r: self.get(r) for r in GOVERNED}
        return _resources({r: amount_of(base, r) if n is None else n for r, n in named.items()})


# --- models ------------------------------------------------------------------------------------------


class PriorityClass(_Model):
    """A cluster-wide priority class (HyperPod ``ClusterSchedulerConfig`` / Kueue WorkloadPriorityClass)."""

    name: DnsSubdomain
    value: Annotated[StrictInt, AfterValidator(_priority_value)]


class Team(_Model):
    """One team with its defaults applied (by :class:`Policy`; ``name`` is its key under ``teams``)."""

    name: DnsLabel
    namespace: DnsLabel
    local_queue: DnsLabel = Field(alias="localQueue")
    principals: Annotated[
        tuple[ArnPattern, ...], AfterValidator(_non_empty("must list at least one principal ARN pattern"))
    ]
    quota: ResourceQuantities
    borrow_limit: ResourceQuantities | None = Field(default=None, alias="borrowLimit")
    borrow_limit_percent: Annotated[StrictInt, AfterValidator(_percent)] | None = Field(
        default=None, alias="borrowLimitPercent"
    )
    sharing: Sharing = "LendAndBorrow"
    preempt_team_tasks: Literal["Never", "LowerPriority"] = Field(
        default="LowerPriority", alias="preemptTeamTasks"
    )
    fair_share_weight: Annotated[StrictInt, AfterValidator(_positive)] = Field(
        default=1, alias="fairShareWeight"
    )
    priority_classes: Annotated[
        tuple[DnsSubdomain, ...], AfterValidator(_non_empty("must list at least one priority class"))
    ] = Field(alias="priorityClasses")
    default_priority_class: DnsSubdomain = Field(alias="defaultPriorityClass")
    max_in_flight: ResourceQuantities | None = Field(default=None, alias="maxInFlight")

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
        return _resources({r: amount_of(quota, r) * percent // 100 for r in GOVERNED})

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
        }
        return out


def _resources_json(resources: Resources) -> dict[str, int | str]:
    return {r: _quantity_json(r, amount_of(resources, r)) for r in GOVERNED}


def _human(resources: Resources) -> dict[str, str]:
    return {r: format_quantity(r, amount_of(resources, r)) for r in GOVERNED}


class Policy(_Model):
    """The whole policy. Build it with :func:`load_policy` / :func:`parse_policy` to get every problem."""

    priority_classes: Annotated[
        tuple[PriorityClass, ...], AfterValidator(_non_empty("must declare at least one priority class"))
    ] = Field(alias="priorityClasses")
    fair_share: Literal["enabled", "disabled"] = Field(default="enabled", alias="fairShare")
    teams: Annotated[dict[str, Team], AfterValidator(_non_empty("must define at least one team"))]
    admins: tuple[ArnPattern, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _apply_defaults(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and isinstance(data.get("teams"), Mapping):
            named = [
                (_dotted("teams", k, "name"), f"unknown key: {_NAME_IS_KEY}")
                for k, t in data["teams"].items()
                if isinstance(t, Mapping) and "name" in t
            ]
            if named:
                raise PolicyError(named)
        return _with_defaults(data)

    @model_validator(mode="after")
    def _consistent(self) -> Policy:
        problems = _cross_checks(
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

    def teams_for_principal(self, arn: str) -> list[str]:
        """The teams (sorted) one of whose principal patterns matches the caller ``arn``."""
        return sorted(
            name
            for name, team in self.teams.items()
            if any(principal_matches(p, arn) for p in team.principals)
        )

    def is_admin(self, arn: str) -> bool:
        return any(principal_matches(p, arn) for p in self.admins)

    def team_for_namespace(self, namespace: str) -> str | None:
        return next((name for name, team in self.teams.items() if team.namespace == namespace), None)

    def to_json(self) -> dict[str, Any]:
        """The normalised policy; itself a valid policy document with the same meaning."""
        return {
            "priorityClasses": [{"name": pc.name, "value": pc.value} for pc in self.priority_classes],
            "fairShare": self.fair_share,
            "teams": {name: team.to_json() for name, team in self.teams.items()},
            "admins": list(self.admins),
        }

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
            }
            for name, team in self.teams.items()
        ]

    def warnings(self, cluster_capacity: Resources | None = None) -> list[str]:
        """Things that are valid but probably not meant, as sentences for a platform engineer."""
        out: list[str] = []
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


# --- defaults ----------------------------------------------------------------------------------------


def _declared(raw_classes: Any) -> list[tuple[str, int]]:
    """``(name, value)`` of the well-formed entries of a raw ``priorityClasses`` list."""
    if not isinstance(raw_classes, list):
        return []
    return [
        (item["name"], item["value"])
        for item in raw_classes
        if isinstance(item, Mapping)
        and isinstance(item.get("name"), str)
        and isinstance(item.get("value"), int)
        and not isinstance(item.get("value"), bool)
    ]


def _team_defaults(name: Any, raw: Any, declared: list[tuple[str, int]]) -> Any:
    if not isinstance(raw, Mapping) or not isinstance(name, str):
        return raw
    team = {"name": name, **raw}
    # A default is derived only from a valid name, so that one mistake is reported once.
    if is_dns_label(name):
        team.setdefault("namespace", f"{NAMESPACE_PREFIX}{name}")
    if isinstance(team.get("namespace"), str) and is_dns_label(team["namespace"]):
        team.setdefault("localQueue", f"{team['namespace']}{LOCAL_QUEUE_SUFFIX}")
    if declared:
        team.setdefault("priorityClasses", list(dict.fromkeys(n for n, _ in declared)))
    classes = team.get("priorityClasses")
    if isinstance(classes, list):
        values = dict(reversed(declared))  # the first declaration of a name wins
        candidates = [c for c in classes if isinstance(c, str) and c in values]
        if candidates:
            team.setdefault("defaultPriorityClass", min(candidates, key=lambda c: values[c]))
    return team


def _with_defaults(data: Any) -> Any:
    if not isinstance(data, Mapping) or not isinstance(data.get("teams"), Mapping):
        return data
    declared = _declared(data.get("priorityClasses"))
    return {**data, "teams": {k: _team_defaults(k, v, declared) for k, v in data["teams"].items()}}


# --- checks ------------------------------------------------------------------------------------------


def _cross_checks(class_names: Sequence[str | None], teams: Mapping[str, Mapping[str, Any]]) -> list[Problem]:
    """Rules that relate fields to each other, on the fields that are valid on their own.

    ``class_names`` are the declared priority class names by position (``None`` where unreadable);
    ``teams`` maps a team to its valid field values by field name.
    """
    problems: list[Problem] = []
    first: dict[str, int] = {}
    for i, name in enumerate(class_names):
        if name is None:
            continue
        if name in first:
            problems.append(
                (
                    _dotted("priorityClasses", i, "name"),
                    f"duplicate priority class {name} (also priorityClasses.{first[name]})",
                )
            )
        else:
            first[name] = i
    owners: dict[str, str] = {}
    for team, v in teams.items():
        problems += _team_checks(team, v, first)
        namespace = v.get("namespace")
        if namespace is None:
            continue
        if namespace in owners:
            problems.append(
                (
                    _dotted("teams", team, "namespace"),
                    f"{namespace} is already the namespace of team {owners[namespace]}",
                )
            )
        else:
            owners[namespace] = team
    return problems


def _team_checks(team: str, v: Mapping[str, Any], declared: Mapping[str, int]) -> list[Problem]:
    problems: list[Problem] = []
    sharing = v.get("sharing")
    borrow_limit, percent = v.get("borrow_limit"), v.get("borrow_limit_percent")
    if borrow_limit is not None and percent is not None:
        problems.append(
            (
                _dotted("teams", team, "borrowLimitPercent"),
                "borrowLimit and borrowLimitPercent are mutually exclusive: give one",
            )
        )
    if sharing in ("Lend", "DontLend"):
        for key, value in (("borrowLimit", borrow_limit), ("borrowLimitPercent", percent)):
            if value is not None:
                problems.append(
                    (
                        _dotted("teams", team, key),
                        f"a team with sharing {sharing} never borrows: "
                        f"remove {key} or set sharing: LendAndBorrow",
                    )
                )
    quota, cap = v.get("quota"), v.get("max_in_flight")
    if quota is not None and cap is not None:
        for r in GOVERNED:
            limit, nominal = cap.get(r), quota.get(r) or 0
            if limit is not None and limit < nominal:
                problems.append(
                    (
                        _dotted("teams", team, "maxInFlight", r),
                        f"must be ≥ the quota ({format_quantity(r, nominal)}): "
                        "submissions could never fill the quota",
                    )
                )
    classes = v.get("priority_classes")
    if classes is not None:
        seen: set[str] = set()
        for i, name in enumerate(classes):
            if name in seen:
                problems.append((_dotted("teams", team, "priorityClasses", i), f"{name} is listed twice"))
            elif name not in declared:
                problems.append(
                    (
                        _dotted("teams", team, "priorityClasses", i),
                        f"{name} is not declared in priorityClasses ({', '.join(declared) or 'none'})",
                    )
                )
            seen.add(name)
        default = v.get("default_priority_class")
        if default is not None and default not in classes:
            problems.append(
                (
                    _dotted("teams", team, "defaultPriorityClass"),
                    f"{default} is not one of the team's priority classes ({', '.join(classes)})",
                )
            )
    return problems


_NAME_IS_KEY = "a team's name is its key under teams"
_RESOURCE_MAPS = {"quota": "quota", "borrowLimit": "borrow_limit", "maxInFlight": "max_in_flight"}
_DEFAULTED = frozenset({"namespace", "localQueue", "priorityClasses", "defaultPriorityClass"})
_MESSAGES = {
    "missing": "required",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "string_type": "must be a string",
    "dict_type": "must be a mapping",
    "model_type": "must be a mapping",
    "model_attributes_type": "must be a mapping",
    "list_type": "must be a list",
    "tuple_type": "must be a list",
}


def _translate(exc: ValidationError, prefix: Sequence[Any]) -> list[Problem]:
    """pydantic's errors as ``(dotted path, message)`` in this module's words."""
    problems: list[Problem] = []
    for err in exc.errors():
        loc = [*prefix, *(p for p in err["loc"] if p != "[key]")]
        ctx = err.get("ctx") or {}
        kind = err["type"]
        if isinstance(ctx.get("error"), PolicyError):
            problems += ctx["error"].problems
            continue
        if kind == "value_error":
            message = str(ctx["error"])
        elif kind == "extra_forbidden":
            message = (
                f"not a governed resource (one of {', '.join(GOVERNED)})"
                if len(loc) >= 2 and loc[-2] in _RESOURCE_MAPS
                else "unknown key"
            )
        elif kind == "literal_error":
            message = f"must be {ctx['expected']}"
        else:
            message = _MESSAGES.get(kind, err["msg"])
        problems.append((_dotted(*loc), message))
    return problems


@functools.cache
def _adapter(model: type[BaseModel], field: str) -> TypeAdapter[Any]:
    info = model.model_fields[field]
    return TypeAdapter(Annotated[info.annotation, *info.metadata] if info.metadata else info.annotation)


def _fields(
    model: type[BaseModel],
    raw: Mapping[Any, Any],
    path: tuple[Any, ...],
    *,
    by_caller: frozenset[str] = frozenset(),
    hidden: Mapping[str, str] | None = None,
    defaulted: frozenset[str] = frozenset(),
) -> tuple[dict[str, Any], list[Problem]]:
    """Validate each field of ``model`` in ``raw`` on its own: the valid values by field name, and
    the problems of the others. ``by_caller`` keys are known but checked by the caller; ``hidden``
    fields are not the user's to write (field -> why); ``defaulted`` keys hold a default this module
    filled in."""
    hidden = hidden or {}
    aliases = {(info.alias or name): name for name, info in model.model_fields.items() if name not in hidden}
    values: dict[str, Any] = {}
    problems: list[Problem] = []
    for key in raw:
        if key in hidden:
            problems.append((_dotted(*path, key), f"unknown key: {hidden[key]}"))
        elif key not in aliases:
            near = difflib.get_close_matches(str(key), list(aliases), n=1)
            problems.append(
                (_dotted(*path, key), "unknown key" + (f"; did you mean {near[0]}?" if near else ""))
            )
    for alias, name in aliases.items():
        if alias in by_caller:
            continue
        info = model.model_fields[name]
        if alias not in raw:
            if not info.is_required():
                values[name] = info.get_default(call_default_factory=True)
            elif alias not in _DEFAULTED:  # a default that could not be worked out has its cause reported
                problems.append((_dotted(*path, alias), "required"))
            continue
        try:
            values[name] = _adapter(model, name).validate_python(raw[alias])
        except ValidationError as exc:
            note = " (the default)" if alias in defaulted else ""
            problems += [(p, m + note) for p, m in _translate(exc, (*path, alias))]
    return values, problems


def _problems(data: Any) -> list[Problem]:
    """Every problem of a raw policy document (empty when it is valid)."""
    if data is None:
        return [("", "the policy is empty")]
    if not isinstance(data, Mapping):
        return [("", "the policy must be a mapping with priorityClasses, fairShare, teams and admins")]
    source, data = data, _with_defaults(data)
    _, problems = _fields(Policy, data, (), by_caller=frozenset({"priorityClasses", "teams"}))

    class_names: list[str | None] = []
    raw_classes = data.get("priorityClasses")
    if "priorityClasses" not in data:
        problems.append(("priorityClasses", "required"))
    elif not isinstance(raw_classes, list):
        problems.append(("priorityClasses", "must be a list of {name, value}"))
    elif not raw_classes:
        problems.append(("priorityClasses", "must declare at least one priority class"))
    else:
        for i, item in enumerate(raw_classes):
            if not isinstance(item, Mapping):
                problems.append((_dotted("priorityClasses", i), "must be a mapping with name and value"))
                class_names.append(None)
                continue
            _, found = _fields(PriorityClass, item, ("priorityClasses", i))
            problems += found
            class_names.append(item.get("name") if isinstance(item.get("name"), str) else None)

    teams: dict[str, dict[str, Any]] = {}
    raw_teams = data.get("teams")
    if "teams" not in data:
        problems.append(("teams", "required"))
    elif not isinstance(raw_teams, Mapping):
        problems.append(("teams", "must be a mapping of team name to team"))
    elif not raw_teams:
        problems.append(("teams", "must define at least one team"))
    else:
        for key, team in raw_teams.items():
            path = ("teams", key)
            if not isinstance(key, str) or not is_dns_label(key):
                problems.append(
                    (
                        _dotted(*path),
                        f"team name {key!r} is not a DNS-1123 label (at most 63 characters: "
                        "lower-case letters, digits and '-', starting and ending with a letter or digit)",
                    )
                )
            if not isinstance(team, Mapping):
                problems.append((_dotted(*path), "must be a mapping"))
                continue
            given = frozenset(source["teams"][key])
            written = {k: v for k, v in team.items() if k in given or k != "name"}  # name is the key
            values, found = _fields(
                Team, written, path, hidden={"name": _NAME_IS_KEY}, defaulted=_DEFAULTED - given
            )
            problems += found
            for alias, name in _RESOURCE_MAPS.items():  # keep the valid resources of a map with a bad one
                if name not in values and isinstance(team.get(alias), Mapping):
                    valid, _ = _fields(ResourceQuantities, team[alias], ())
                    values[name] = ResourceQuantities.model_construct(**valid)
            teams[str(key)] = values
    problems += _cross_checks(class_names, teams)
    return _in_document_order(problems, source)


def _in_document_order(problems: list[Problem], data: Mapping[Any, Any]) -> list[Problem]:
    """Problems grouped by top-level key and team, in the order the document has them (stable)."""
    sections = {str(k): i for i, k in enumerate(data)}
    teams = data.get("teams")
    team_order = {str(k): i for i, k in enumerate(teams)} if isinstance(teams, Mapping) else {}

    def key(problem: Problem) -> tuple[int, int]:
        head, _, rest = problem[0].partition(".")
        team = next((t for t in team_order if rest == t or rest.startswith(t + ".")), None)
        return sections.get(head, len(sections)), team_order.get(team, -1) if head == "teams" and team else -1

    return sorted(problems, key=key)


# --- principals --------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1024)
def _glob(pattern: str) -> re.Pattern[str]:
    return re.compile(
        "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern), re.DOTALL
    )


def _caller(arn: str) -> tuple[list[str], bool] | None:
    """The caller's ARN in parts, an assumed-role session normalised to its role; and whether it was one."""
    parts = arn.split(":", 5)
    if len(parts) != 6 or parts[0] != "arn":
        return None
    _, partition, service, _, account, resource = parts
    if service == "sts" and resource.startswith("assumed-role/"):
        segments = resource.split("/")
        if len(segments) < 3 or not segments[1]:
            return None
        return ["arn", partition, "iam", "", account, f"role/{segments[1]}"], True
    return parts, False


def principal_matches(pattern: str, arn: str) -> bool:
    """Whether the caller ``arn`` matches the principal ``pattern`` (see the module docstring)."""
    caller = _caller(arn)
    wanted = pattern.split(":", 5)
    if caller is None or len(wanted) != 6:
        return False
    parts, session = caller
    if not all(_glob(w).fullmatch(p) for w, p in zip(wanted[:5], parts[:5], strict=True)):
        return False
    resource = wanted[5]
    if session and resource.startswith("role/"):
        resource = "role/" + resource.rsplit("/", 1)[1]
    return _glob(resource).fullmatch(parts[5]) is not None


# --- loading -----------------------------------------------------------------------------------------


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping (PyYAML would keep the last)."""


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first at line {seen[key] + 1})", key_node.start_mark
            )
        seen[key] = key_node.start_mark.line
    loader.flatten_mapping(node)
    return loader.construct_mapping(node, deep=True)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def parse_policy(data: Any) -> Policy:
    """A policy from its parsed document (YAML/JSON data); ``PolicyError`` lists every problem."""
    problems = _problems(data)
    if problems:
        raise PolicyError(problems)
    try:
        return Policy.model_validate(data)
    except ValidationError as exc:  # pragma: no cover - _problems checks all that the models check
        raise PolicyError(_translate(exc, ())) from None


def load_policy(text: str) -> Policy:
    """A policy from YAML text; a YAML error is a ``PolicyError`` naming its line and column."""
    try:
        data = yaml.load(text, Loader=_Loader)  # _Loader is a SafeLoader
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        what = exc.problem or exc.context or "invalid YAML"
        raise PolicyError([("", f"YAML error{where}: {what}")]) from None
    except yaml.YAMLError as exc:
        raise PolicyError([("", f"YAML error: {exc}")]) from None
    return parse_policy(data)


def load_policy_file(path: str | Path) -> Policy:
    """:func:`load_policy` of a file; ``OSError`` (e.g. ``FileNotFoundError``) when it cannot be read."""
    raw = Path(path).read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PolicyError([("", f"not UTF-8 text: {exc}")]) from None
    return load_policy(text)


__all__ = [
    "GOVERNED",
    "Policy",
    "PolicyError",
    "PriorityClass",
    "ResourceQuantities",
    "Team",
    "amount_of",
    "format_quantity",
    "load_policy",
    "load_policy_file",
    "parse_policy",
    "principal_matches",
]
