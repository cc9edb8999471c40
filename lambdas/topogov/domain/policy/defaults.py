"""The policy's defaults, filled into a raw document before it is checked (see the package docstring,
"Defaults"): each default is derived only from a valid value, so one mistake is reported once."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from topogov.domain.policy.fields import is_dns_label

DEFAULT_BORROW_LIMIT_PERCENT = 50
DEFAULT_RETENTION_DAYS = 30  # how long a finished job's record is kept (DynamoDB's time to live)
NAMESPACE_PREFIX = "hyperpod-ns-"
LOCAL_QUEUE_SUFFIX = "-localqueue"


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


def with_defaults(data: Any) -> Any:
    if not isinstance(data, Mapping) or not isinstance(data.get("teams"), Mapping):
        return data
    declared = _declared(data.get("priorityClasses"))
    return {**data, "teams": {k: _team_defaults(k, v, declared) for k, v in data["teams"].items()}}
