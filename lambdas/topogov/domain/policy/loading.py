"""Reading a policy: YAML text or a file into a :class:`Policy`, with every problem reported (a key
given twice in one mapping is one: PyYAML would silently keep the last)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from topogov.domain.policy.model import Policy
from topogov.domain.policy.problems import find_problems, translate
from topogov.domain.policy.rules import PolicyError


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping (PyYAML would keep the last), and any
    alias (``*name``): a policy never needs one, and a few nested aliases expand into billions of
    nodes (the "billion laughs"), which the what-if's proposed policy would otherwise let a caller
    make the API build."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise yaml.composer.ComposerError(
                None,
                None,
                "aliases (*name) are not accepted in a policy: write the value out",
                event.start_mark,
            )
        return super().compose_node(parent, index)


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
    problems = find_problems(data)
    if problems:
        raise PolicyError(problems)
    try:
        return Policy.model_validate(data)
    except ValidationError as exc:  # pragma: no cover - _problems checks all that the models check
        raise PolicyError(translate(exc, ())) from None


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
