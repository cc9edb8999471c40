"""What every view reads the same way: an object's conditions, and fields that may be absent or null.

A section absent or null reads as :data:`EMPTY` (``body.get("spec") or EMPTY``); labels,
annotations and node selectors as a dict of their own (``or {}``: they are written into JSON
answers and bodies). Written out where read, not through a helper: the views of Pods and
Workloads are made tens of thousands of times a pass, and a call per field costs as much as the
field."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeVar, dataclass_transform, overload

# Read-only, so that no caller can write into the one empty map every view shares.
EMPTY: Mapping[str, Any] = MappingProxyType({})


T = TypeVar("T")


@overload
def view(cls: type[T], /) -> type[T]: ...
@overload
def view(*, kw_only: bool = False) -> Callable[[type[T]], type[T]]: ...
@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def view(cls: Any = None, /, *, kw_only: bool = False) -> Any:
    """Make a view class: a slotted dataclass that the type checker holds immutable.

    mypy (strict over the domain and the logic) takes a view for a frozen dataclass and refuses an
    assignment to its fields; at run time it is a plain slotted one (hashable as a frozen one is),
    because a frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``: 1.2 µs
    for five fields against 0.26, on every one of the tens of thousands of Pods, Workloads and Jobs
    a pass or an estimate reads."""

    def make(c: Any) -> Any:
        return dataclass(slots=True, kw_only=kw_only, unsafe_hash=True)(c)

    return make if cls is None else make(cls)


def empty() -> Mapping[str, Any]:
    """:data:`EMPTY`, as a dataclass field's default (``field(default_factory=empty)``)."""
    return EMPTY


@view
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
