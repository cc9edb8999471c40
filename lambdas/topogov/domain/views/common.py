"""What every view reads the same way: an object's conditions, and fields that may be absent or null."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

# A field absent or null reads as empty (``x.get(k) or {}``, once, here); read-only, so that no
# caller can write into the one empty map every view shares.
EMPTY: Mapping[str, Any] = MappingProxyType({})


def empty() -> Mapping[str, Any]:
    """:data:`EMPTY`, as a dataclass field's default (``field(default_factory=empty)``)."""
    return EMPTY


def section(body: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """``body[key]`` as an object: empty when absent or null."""
    return body.get(key) or EMPTY


def string_map(value: Any) -> Mapping[str, str]:
    """Labels, annotations, a node selector: empty when absent or null (a dict of its own: these
    are written into JSON answers and bodies)."""
    return value or {}


@dataclass(frozen=True, slots=True)
class Condition:
    """One of an object's ``status.conditions`` (metav1.Condition, and batch/v1's JobCondition)."""

    type: str
    status: str  # "True", "False", "Unknown"
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = None

    @property
    def true(self) -> bool:
        return self.status == "True"


def conditions_of(status: Mapping[str, Any]) -> tuple[Condition, ...]:
    return tuple(
        Condition(
            c.get("type") or "",
            c.get("status") or "",
            c.get("reason") or "",
            c.get("message") or "",
            c.get("lastTransitionTime"),
        )
        for c in status.get("conditions") or ()
    )


def first_condition(conditions: tuple[Condition, ...], kind: str) -> Condition | None:
    """The first condition of type ``kind``, or None."""
    for c in conditions:
        if c.type == kind:
            return c
    return None
