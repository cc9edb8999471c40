"""What a governor pass would change (actions, changes, the plan, the summary of a pass), the kinds
it manages in dependency order, and the plan as ``topogov governor plan`` prints it."""

from __future__ import annotations

import builtins
import enum
import logging
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from topogov.domain.labels import MANAGED_BY, MANAGED_BY_LABEL
from topogov.domain.views.objects import ObjectView

OWNED_SELECTOR = f"{MANAGED_BY_LABEL}={MANAGED_BY}"
# Creation order: what an object refers to exists before it. Deletion runs the other way.
KINDS = (
    "Namespace",
    "Topology",
    "ResourceFlavor",
    "Cohort",
    "WorkloadPriorityClass",
    "ClusterQueue",
    "LocalQueue",
)
KUEUE_KINDS = KINDS[1:]
# Quantities: compared as quantities. `weight` is one too: Kueue keeps it as a resource.Quantity, so a
# weight written as 10 reads back as "10" once the conversion webhook has had it (v1beta2 storage).
QUANTITY_FIELDS = frozenset({"nominalQuota", "borrowingLimit", "lendingLimit", "weight"})
EXACT_UNDER = "resourceGroups"  # inside it, fields Topogov does not render count as drift
DRAIN = "HoldAndDrain"
LOG = logging.getLogger("topogov.governor")
LOG.addHandler(logging.NullHandler())  # a library's logger: silent unless the caller configures one


class ObjectsPort(Protocol):
    """The governed objects: read as views (``domain/views/objects.py``), written as bodies."""

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> ObjectView | None: ...
    def list(self, api_version: str, kind: str) -> builtins.list[ObjectView]: ...
    def create(self, obj: Mapping[str, Any]) -> ObjectView: ...
    def replace(self, obj: Mapping[str, Any]) -> ObjectView | None: ...
    def merge_patch(
        self, api_version: str, kind: str, name: str, namespace: str | None, patch: Mapping[str, Any]
    ) -> ObjectView: ...
    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> bool: ...
    def unfinished_jobs(self, namespace: str) -> builtins.list[str] | None: ...
    def list_in(self, api_version: str, kind: str, namespace: str) -> builtins.list[ObjectView]: ...
    def apply(self, obj: Mapping[str, Any], field_manager: str) -> ObjectView: ...


class Action(enum.StrEnum):
    CREATE = "create"
    UPDATE = "update"  # drift corrected
    DELETE = "delete"
    HOLD = "hold"  # a removed team's queue still has work: stopPolicy HoldAndDrain
    KEEP = "keep"  # not in the policy any more, kept while a held queue drains
    UNOWNED = "unowned"  # same name, not Topogov's: left alone, reported
    RECREATE = "recreate"  # an immutable field must change: out of the queues, deleted, created again
    WAIT = "wait"  # being deleted (Kueue holds it while it is in use): nothing written
    BLOCKED = "blocked"  # must be re-created, but a ClusterQueue Topogov does not own lists it


SYMBOL = {
    Action.CREATE: "+",
    Action.UPDATE: "~",
    Action.DELETE: "-",
    Action.HOLD: "!",
    Action.KEEP: "=",
    Action.UNOWNED: "?",
    Action.RECREATE: "±",
    Action.WAIT: "…",
    Action.BLOCKED: "×",
}
WRITES = (Action.CREATE, Action.RECREATE, Action.UPDATE, Action.DELETE, Action.HOLD)


@dataclass
class Change:
    action: Action
    kind: str
    name: str
    namespace: str | None
    api_version: str
    diff: list[str] = field(default_factory=list)
    reason: str = ""
    desired: ObjectView | None = field(default=None, repr=False)
    current: ObjectView | None = field(default=None, repr=False)

    @property
    def object(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}" if self.namespace else f"{self.kind} {self.name}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"action": str(self.action), "kind": self.kind, "name": self.name}
        if self.namespace:
            out["namespace"] = self.namespace
        if self.diff:
            out["diff"] = list(self.diff)
        if self.reason:
            out["reason"] = self.reason
        return out


@dataclass
class Plan:
    api_version: str
    flavors: list[str] = field(default_factory=list)
    topologies: dict[str, str] = field(default_factory=dict)  # flavor -> the Topology it is in
    changes: list[Change] = field(default_factory=list)
    unchanged: int = 0
    warnings: list[str] = field(default_factory=list)
    skipped: str | None = None  # why nothing was rendered (nothing is changed or deleted then)

    def count(self, action: Action) -> int:
        return sum(1 for c in self.changes if c.action == action)

    @property
    def writes(self) -> list[Change]:
        return [c for c in self.changes if c.action in WRITES]

    def to_json(self) -> dict[str, Any]:
        return {
            "api_version": self.api_version,
            "flavors": list(self.flavors),
            "topologies": dict(self.topologies),
            "changes": [c.to_json() for c in self.changes],
            "counts": {str(a): self.count(a) for a in Action} | {"unchanged": self.unchanged},
            "warnings": list(self.warnings),
            "skipped": self.skipped,
        }


@dataclass
class GovernorSummary:
    plan: Plan
    applied: int = 0
    failures: list[dict[str, Any]] = field(default_factory=list)
    k8s_reads: int = 0
    k8s_writes: int = 0
    duration_s: float = 0.0

    @property
    def complete(self) -> bool:
        return not self.failures

    def to_json(self) -> dict[str, Any]:
        return self.plan.to_json() | {
            "applied": self.applied,
            "failures": list(self.failures),
            "complete": self.complete,
            "k8s_reads": self.k8s_reads,
            "k8s_writes": self.k8s_writes,
            "duration_s": self.duration_s,
        }


def format_plan(plan: Plan) -> str:
    """The plan as ``topogov governor plan`` prints it."""
    lines: list[str] = []
    if plan.skipped:
        lines.append(f"Nothing to plan: {plan.skipped}")
        lines += [f"  {SYMBOL[c.action]} {c.action:<8} {c.object}" for c in plan.changes]
        return "\n".join(lines) + "\n"
    shown = ", ".join(f"{f} in {plan.topologies[f]}" if f in plan.topologies else f for f in plan.flavors)
    head = f"Kueue objects ({plan.api_version}) for {len(plan.flavors)} GPU flavor(s): {shown}"
    lines.append(textwrap.fill(head, 100, subsequent_indent="    ", break_on_hyphens=False))
    for change in plan.changes:
        lines.append(f"  {SYMBOL[change.action]} {change.action:<8} {change.object}")
        for d in change.diff:
            lines.append(f"        {d}")
        if change.reason and change.action != Action.CREATE:
            lines.append(f"        ({change.reason})")
    if not plan.changes:
        lines.append("  (no changes)")
    counts = ", ".join(f"{plan.count(a)} to {a}" for a in WRITES if plan.count(a))
    extras = [f"{plan.unchanged} unchanged"]
    if plan.count(Action.KEEP):
        extras.append(f"{plan.count(Action.KEEP)} kept while draining")
    if plan.count(Action.UNOWNED):
        extras.append(f"{plan.count(Action.UNOWNED)} not Topogov's (left alone)")
    if plan.count(Action.WAIT):
        extras.append(f"{plan.count(Action.WAIT)} being deleted")
    if plan.count(Action.BLOCKED):
        extras.append(f"{plan.count(Action.BLOCKED)} blocked")
    lines.append(f"Plan: {counts or 'no changes'}; " + ", ".join(extras) + ".")
    for w in plan.warnings:
        lines.append(f"warning: {w}")
    return "\n".join(lines) + "\n"
