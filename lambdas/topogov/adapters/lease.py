"""One reconcile pass at a time, without reserved concurrency: a lease in the counters table.

The reconcile function used to rely on reserved concurrency 1, which an account with a small
concurrency limit cannot grant (Lambda keeps 100 executions unreserved; a new account may have 10
in all). The lease is one item of the counters table, under a key no team can have (team names are
DNS labels: no ``#``):

- **acquire**: a conditional ``UpdateItem`` that sets ``holder`` and ``expires`` when no holder is
  set or the last one's lease has expired (a pass that crashed or timed out frees it by its own
  deadline), and takes the instance ids other invocations deferred (``pending``) in the same write;
- **defer**: an invocation that finds the lease held adds the instance ids of its event to
  ``pending`` (an unconditional ``ADD`` to a string set) and returns: the holder runs them before it
  lets go, or the next pass takes them when it acquires;
- **release**: a conditional ``UpdateItem`` that clears the holder only if it is still this one and
  nothing is pending; if something was deferred meanwhile the holder is told so and takes it.

Every write is an ``UpdateItem`` of one item (DynamoDB Developer Guide, "Condition expressions":
a conditional write is atomic), the only action the reconcile role needs on the counters table
besides ``GetItem``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from topogov.adapters.tables import COUNTERS

LEASE_KEY = "#reconcile-lease"


@dataclass(frozen=True)
class Held:
    """The lease is this holder's until ``expires`` (epoch seconds); ``pending`` was deferred to it."""

    holder: str
    expires: float
    pending: frozenset[str]


class DynamoLease:
    def __init__(self, client: Any, table: str, key: str = LEASE_KEY) -> None:
        self._ddb = client
        self.table = table
        self._key = {COUNTERS.partition: {"S": key}}

    def acquire(self, holder: str, now: float, ttl_s: float) -> Held | None:
        """The lease for ``ttl_s`` seconds, or None when another holder's has not expired."""
        old = self._write(
            "SET holder = :me, expires = :until REMOVE pending",
            "attribute_not_exists(holder) OR expires < :now",
            {":me": {"S": holder}, ":until": {"N": _n(now + ttl_s)}, ":now": {"N": _n(now)}},
            returns="ALL_OLD",
        )
        return None if old is None else Held(holder, now + ttl_s, _pending(old))

    def defer(self, instance_ids: Iterable[str]) -> None:
        """Leave these instances to whoever holds the lease (or takes it next)."""
        ids = sorted(set(instance_ids))
        if ids:
            self._write("ADD pending :ids", None, {":ids": {"SS": ids}})

    def release(self, held: Held) -> frozenset[str]:
        """Let go, unless something was deferred meanwhile: then take it (still holding) and return
        it, for the holder to run before it tries again. A lease lost to expiry is left alone."""
        mine = {":me": {"S": held.holder}}
        if (
            self._write("REMOVE holder, expires", "holder = :me AND attribute_not_exists(pending)", mine)
            is not None
        ):
            return frozenset()
        taken = self._write("REMOVE pending", "holder = :me", mine, returns="UPDATED_OLD")
        return frozenset() if taken is None else _pending(taken)  # None: expired and taken by another

    def force_release(self, held: Held) -> None:
        """Let go whatever is pending (out of time: the next pass takes it)."""
        self._write("REMOVE holder, expires", "holder = :me", {":me": {"S": held.holder}})

    def _write(
        self, update: str, condition: str | None, values: dict[str, Any], returns: str = "NONE"
    ) -> dict[str, Any] | None:
        """One UpdateItem of the lease item: the attributes ``returns`` asks for, or None when the
        condition failed."""
        request: dict[str, Any] = {
            "TableName": self.table,
            "Key": self._key,
            "UpdateExpression": update,
            "ExpressionAttributeValues": values,
            "ReturnValues": returns,
        }
        if condition:
            request["ConditionExpression"] = condition
        try:
            answer = self._ddb.update_item(**request)
        except self._ddb.exceptions.ConditionalCheckFailedException:
            return None
        return dict(answer.get("Attributes") or {})


def _pending(attributes: dict[str, Any]) -> frozenset[str]:
    return frozenset(attributes.get("pending", {}).get("SS", ()))


def _n(value: float) -> str:
    return f"{value:.3f}"
