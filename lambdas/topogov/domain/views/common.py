"""What every view reads the same way: an object's conditions, and fields that may be absent or null.

A section absent or null reads as :data:`EMPTY` (``body.get("spec") or EMPTY``); labels,
annotations and node selectors as a dict of their own (``or {}``: they are written into JSON
answers and bodies). Written out where read, not through a helper: the views of Pods and
Workloads are made tens of thousands of times a pass, and a call per field costs as much as the
field."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

# Read-only, so that no caller can write into the one empty map every view shares.
EMPTY: Mapping[str, Any] = MappingProxyType({})


def empty() -> Mapping[str, Any]:
    """:data:`EMPTY`, as a dataclass field's default (``field(default_factory=empty)``)."""
    return EMPTY


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
    conditions = status.get("conditions")
    if not conditions:
        return ()
    return tuple(
        [
            Condition(
                c.get("type") or "",
                c.get("status") or "",
                c.get("reason") or "",
                c.get("message") or "",
                c.get("lastTransitionTime"),
            )
            for c in conditions
        ]
    )


def first_condition(conditions: tuple[Condition, ...], kind: str) -> Condition | None:
    """The first condition of type ``kind``, or None."""
    for c in conditions:
        if c.type == kind:
            return c
    return None
