"""Every problem of a raw policy document at once. Each field is validated on its own (so one bad
field does not hide the others) and the cross-field rules run on the valid ones; pydantic's errors
are put in this package's words, with dotted paths, in the document's order."""

from __future__ import annotations

import difflib
import functools
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from topogov.domain.policy.defaults import with_defaults
from topogov.domain.policy.fields import ResourceQuantities, is_dns_label
from topogov.domain.policy.model import NAME_IS_KEY, Policy, PriorityClass, Team
from topogov.domain.policy.rules import PolicyError, Problem, cross_checks, dotted
from topogov.domain.quantity import GOVERNED

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


def translate(exc: ValidationError, prefix: Sequence[Any]) -> list[Problem]:
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
        problems.append((dotted(*loc), message))
    return problems


@functools.cache
def _adapter(model: type[BaseModel], field: str) -> TypeAdapter[Any]:
    info = model.model_fields[field]
    annotation: Any = info.annotation
    return TypeAdapter(Annotated[annotation, *info.metadata] if info.metadata else annotation)


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
            problems.append((dotted(*path, key), f"unknown key: {hidden[key]}"))
        elif key not in aliases:
            near = difflib.get_close_matches(str(key), list(aliases), n=1)
            problems.append(
                (dotted(*path, key), "unknown key" + (f"; did you mean {near[0]}?" if near else ""))
            )
    for alias, name in aliases.items():
        if alias in by_caller:
            continue
        info = model.model_fields[name]
        if alias not in raw:
            if not info.is_required():
                values[name] = info.get_default(call_default_factory=True)
            elif alias not in _DEFAULTED:  # a default that could not be worked out has its cause reported
                problems.append((dotted(*path, alias), "required"))
            continue
        try:
            values[name] = _adapter(model, name).validate_python(raw[alias])
        except ValidationError as exc:
            note = " (the default)" if alias in defaulted else ""
            problems += [(p, m + note) for p, m in translate(exc, (*path, alias))]
    return values, problems


def find_problems(data: Any) -> list[Problem]:
    """Every problem of a raw policy document (empty when it is valid)."""
    if data is None:
        return [("", "the policy is empty")]
    if not isinstance(data, Mapping):
        return [("", "the policy must be a mapping with priorityClasses, fairShare, teams and admins")]
    source, data = data, with_defaults(data)
    _, problems = _fields(Policy, data, (), by_caller=frozenset({"priorityClasses", "teams"}))
    class_names = _class_problems(data, problems)
    teams = _team_problems(data, source, problems)
    problems += cross_checks(class_names, teams)
    return _in_document_order(problems, source)


def _class_problems(data: Mapping[str, Any], problems: list[Problem]) -> list[str | None]:
    """The priority classes' problems (appended); their names, None where one has no valid name."""
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
                problems.append((dotted("priorityClasses", i), "must be a mapping with name and value"))
                class_names.append(None)
                continue
            _, found = _fields(PriorityClass, item, ("priorityClasses", i))
            problems += found
            class_names.append(item.get("name") if isinstance(item.get("name"), str) else None)
    return class_names


def _team_problems(
    data: Mapping[str, Any], source: Mapping[Any, Any], problems: list[Problem]
) -> dict[str, dict[str, Any]]:
    """The teams' problems (appended); each team's valid fields, for the cross-checks."""
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
            values = _one_team(key, team, source["teams"][key], problems)
            if values is not None:
                teams[str(key)] = values
    return teams


def _one_team(key: Any, team: Any, as_written: Any, problems: list[Problem]) -> dict[str, Any] | None:
    """One team's problems (appended) and its valid fields; ``as_written``: before the defaults."""
    path = ("teams", key)
    if not isinstance(key, str) or not is_dns_label(key):
        problems.append(
            (
                dotted(*path),
                f"team name {key!r} is not a DNS-1123 label (at most 63 characters: "
                "lower-case letters, digits and '-', starting and ending with a letter or digit)",
            )
        )
    if not isinstance(team, Mapping):
        problems.append((dotted(*path), "must be a mapping"))
        return None
    given = frozenset(as_written)
    written = {k: v for k, v in team.items() if k in given or k != "name"}  # name is the key
    values, found = _fields(Team, written, path, hidden={"name": NAME_IS_KEY}, defaulted=_DEFAULTED - given)
    problems += found
    for alias, name in _RESOURCE_MAPS.items():  # keep the valid resources of a map with a bad one
        if name not in values and isinstance(team.get(alias), Mapping):
            valid, _ = _fields(ResourceQuantities, team[alias], ())
            values[name] = ResourceQuantities.model_construct(**valid)
    return values


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
