"""``POST /v1/whatif``'s inputs read into the simulator's: the trace (given, or the ledger's history),
the proposed policy and the changed fleet, each refused with the field it came from
(:class:`~topogov.domain.errors.ValidationFailed`). Pure: the caller passes the records and nodes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from topogov.domain.errors import ValidationFailed
from topogov.domain.policy import Policy, PolicyError, load_policy
from topogov.domain.quantity import Resources
from topogov.domain.submission import MAX_WHATIF_JOBS, parse_window
from topogov.domain.tree import NodeCapacity
from topogov.logic.whatif.history import History, trace_from_records
from topogov.logic.whatif.inputs import InputError, TraceJob, change_fleet, parse_trace


def trace_of(text: str) -> list[TraceJob]:
    """The request's ``trace`` CSV; a refusal names its line and column."""
    try:
        return parse_trace(text, "trace")
    except InputError as exc:
        where = ", ".join(x for x in (f"line {exc.line}" if exc.line else "", exc.field or "") if x)
        raise ValidationFailed(
            "trace",
            f"{where}: {exc.message}" if where else exc.message,
            {"line": exc.line, "column": exc.field},
        ) from None


def history_of(records: Iterable[Mapping[str, Any]], window: str, now: float) -> History:
    """The ledger's jobs submitted in ``window`` as a trace, each with its observed run time
    (:mod:`.history`); a refusal when none has one."""
    history = trace_from_records(list(records), now=now, window_s=parse_window(window))
    if not history.jobs:
        left = ", ".join(f"{n} {why}" for why, n in history.left_out.items())
        raise ValidationFailed(
            "history",
            f"no job submitted in the last {window} has an observed run time"
            + (f" (left out: {left})" if left else " (no job was submitted in it)"),
        )
    return history


def check_size(trace: Sequence[TraceJob], from_history: bool) -> None:
    if len(trace) > MAX_WHATIF_JOBS:
        field, hint = ("history", "a shorter window") if from_history else ("trace", "topogov whatif offline")
        raise ValidationFailed(
            field, f"{len(trace)} jobs: at most {MAX_WHATIF_JOBS} per request (try {hint})"
        )


def policy_of(text: str) -> Policy:
    """The request's proposed ``policy`` (teams.yaml text)."""
    try:
        return load_policy(text)
    except PolicyError as exc:
        where, what = exc.problems[0]
        raise ValidationFailed("policy", f"{where}: {what}" if where else what) from None


GROWTH, MIN_ADDED = 4, 1000  # a what-if may add up to 4 × the fleet's nodes (or 1,000 to a small one)


def fleets_of(
    snapshot_nodes: Iterable[NodeCapacity], changes: Sequence[str]
) -> tuple[list[NodeCapacity], list[NodeCapacity]]:
    """The snapshot's nodes with a network topology, emptied of what runs on them (the trace is
    replayed from an empty fleet), and the same after the request's ``fleet_change``s."""
    nodes = sorted(
        (replace(n, requested=Resources()) for n in snapshot_nodes if len(n.path) >= 3), key=lambda n: n.name
    )
    if not nodes:
        raise ValidationFailed("fleet", "the snapshot has no node with a network topology")
    bound = max(MIN_ADDED, GROWTH * len(nodes))
    added = sum(
        int(c.partition("=")[2]) for c in changes if c.startswith("+") and c.partition("=")[2].isdigit()
    )
    if added > bound:
        raise ValidationFailed(
            "fleet_change",
            f"adds {added} nodes: at most {bound} ({GROWTH} × the fleet's {len(nodes)} nodes, or "
            f"{MIN_ADDED}) may be added in one what-if",
        )
    changed = nodes
    for change in changes:
        try:
            changed = change_fleet(changed, change)
        except InputError as exc:
            raise ValidationFailed("fleet_change", exc.message) from None
    return nodes, changed
