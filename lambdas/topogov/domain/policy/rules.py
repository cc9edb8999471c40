"""Rules that relate fields of the policy to each other, and the error that lists every problem."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from topogov.domain.errors import ConfigError
from topogov.domain.quantity import GOVERNED, format_quantity

Problem = tuple[str, str]


class PolicyError(ConfigError, ValueError):
    """The policy is invalid. ``problems`` lists ``(path, message)``; ``str()`` is one problem a line."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems: list[Problem] = list(problems)
        super().__init__("\n".join(_line(path, message) for path, message in self.problems))


def _line(path: str, message: str) -> str:
    return f"{path}: {message}" if path else message


def dotted(*parts: Any) -> str:
    return ".".join(str(p) for p in parts)


def cross_checks(class_names: Sequence[str | None], teams: Mapping[str, Mapping[str, Any]]) -> list[Problem]:
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
                    dotted("priorityClasses", i, "name"),
                    f"duplicate priority class {name} (also priorityClasses.{first[name]})",
                )
            )
        else:
            first[name] = i
    owners: dict[str, str] = {}
    for team, v in teams.items():
        problems += team_checks(team, v, first)
        namespace = v.get("namespace")
        if namespace is None:
            continue
        if namespace in owners:
            problems.append(
                (
                    dotted("teams", team, "namespace"),
                    f"{namespace} is already the namespace of team {owners[namespace]}",
                )
            )
        else:
            owners[namespace] = team
    return problems


def team_checks(team: str, v: Mapping[str, Any], declared: Mapping[str, int]) -> list[Problem]:
    from topogov.domain.policy.pods import pod_rule_problems

    problems: list[Problem] = pod_rule_problems(team, v.get("pods"))
    sharing = v.get("sharing")
    borrow_limit, percent = v.get("borrow_limit"), v.get("borrow_limit_percent")
    if borrow_limit is not None and percent is not None:
        problems.append(
            (
                dotted("teams", team, "borrowLimitPercent"),
                "borrowLimit and borrowLimitPercent are mutually exclusive: give one",
            )
        )
    if sharing in ("Lend", "DontLend"):
        for key, value in (("borrowLimit", borrow_limit), ("borrowLimitPercent", percent)):
            if value is not None:
                problems.append(
                    (
                        dotted("teams", team, key),
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
                        dotted("teams", team, "maxInFlight", r),
                        f"must be ≥ the quota ({format_quantity(r, nominal)}): "
                        "submissions could never fill the quota",
                    )
                )
    classes = v.get("priority_classes")
    if classes is not None:
        seen: set[str] = set()
        for i, name in enumerate(classes):
            if name in seen:
                problems.append((dotted("teams", team, "priorityClasses", i), f"{name} is listed twice"))
            elif name not in declared:
                problems.append(
                    (
                        dotted("teams", team, "priorityClasses", i),
                        f"{name} is not declared in priorityClasses ({', '.join(declared) or 'none'})",
                    )
                )
            seen.add(name)
        default = v.get("default_priority_class")
        if default is not None and default not in classes:
            problems.append(
                (
                    dotted("teams", team, "defaultPriorityClass"),
                    f"{default} is not one of the team's priority classes ({', '.join(classes)})",
                )
            )
    return problems
