"""The job ledger and the per-team in-flight counters in DynamoDB.

A submission is charged and recorded in ONE transaction (the counter update is conditional on the
cap), before the Job is created; if creating the Job fails, a second transaction refunds the
charge and removes the record. So there is never a charge without a record, and never a Job
without a record. A release (cancel, finished, vanished) flips the record's state conditionally
and refunds in the same transaction, so a charge is released at most once.

The ledger stays bounded (``adapters/tables.py``): a live record carries ``live_team``, which the
sparse index ``live`` holds, so a reconcile pass and an estimate read the live records only
(:meth:`DynamoLedger.live`); a release removes it and sets ``expires_at``, the retention after which
DynamoDB's time to live deletes the record. The job list reads the team's records a page at a time
(:meth:`DynamoLedger.page`). ``items_read`` counts the items every read returned.
"""

from __future__ import annotations

import builtins
import random
import time
import uuid
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from topogov.adapters.tables import LEDGER, LIVE_INDEX
from topogov.domain.errors import Conflict, InFlightLimit, NotFound, Unavailable
from topogov.domain.quantity import Resources, over_cap, over_cap_message

ATTRS = ("gpu", "efa", "cpu_m", "memory")
RESERVING, SUBMITTED, RELEASED = "reserving", "submitted", "released"
DEFAULT_RETENTION_S = 30 * 86400


def _n(value: int) -> dict[str, str]:
    return {"N": str(int(value))}


def _res(item: Mapping[str, Any], prefix: str = "") -> Resources:
    def get(attr: str) -> int:
        raw = item.get(prefix + attr)
        return int(raw["N"]) if raw else 0

    return Resources(get("gpu"), get("efa"), get("cpu_m"), get("memory"))


def to_plain(value: Any) -> Any:
    """DynamoDB's typed JSON -> plain Python (for records read back)."""
    from boto3.dynamodb.types import TypeDeserializer

    out = TypeDeserializer().deserialize(value)

    def fix(v: Any) -> Any:
        if isinstance(v, Decimal):
            return int(v) if v == int(v) else float(v)
        if isinstance(v, dict):
            return {k: fix(x) for k, x in v.items()}
        if isinstance(v, list | set):
            return [fix(x) for x in v]
        return v

    return fix(out)


def to_typed(value: Any) -> dict[str, Any]:
    from boto3.dynamodb.types import TypeSerializer

    def fix(v: Any) -> Any:
        if isinstance(v, float):
            return Decimal(str(v))
        if isinstance(v, dict):
            return {k: fix(x) for k, x in v.items()}
        if isinstance(v, list):
            return [fix(x) for x in v]
        return v

    return TypeSerializer().serialize(fix(value))


class DynamoLedger:
    def __init__(
        self,
        client: Any,
        ledger_table: str,
        counters_table: str,
        *,
        retention_s: int = DEFAULT_RETENTION_S,
        clock: Any = time.time,
    ) -> None:
        self._ddb = _Guarded(client)
        self.ledger_table = ledger_table
        self.counters_table = counters_table
        self.retention_s = retention_s  # how long a released record is kept (the policy's jobRetentionDays)
        self._clock = clock
        self.items_read = 0

    # -- in flight ------------------------------------------------------------------------------
    def usage(self, team: str) -> Resources:
        item = self._ddb.get_item(
            TableName=self.counters_table, Key={"team": {"S": team}}, ConsistentRead=True
        )
        return _res(item.get("Item") or {})

    def runs(self, team: str) -> dict[int, builtins.list[float]]:
        """The team's recent finished run times (seconds), by the job's GPU count: the start
        estimates' expected lengths, kept beside the team's counters (:meth:`keep_runs`) so an
        estimate reads no released record."""
        item = self._ddb.get_item(
            TableName=self.counters_table, Key={"team": {"S": team}}, ProjectionExpression="runs"
        ).get("Item")
        kept = to_plain((item or {}).get("runs") or {"M": {}})
        return {int(gpus): [float(r) for r in runs] for gpus, runs in kept.items()}

    def keep_runs(self, team: str, gpus: int, runs: builtins.list[float]) -> None:
        """Replace the team's recent run times of ``gpus``-GPU jobs (the reconcile pass, which holds
        the pass's lease, is their only writer)."""
        self._ddb.update_item(
            TableName=self.counters_table,
            Key={"team": {"S": team}},
            UpdateExpression="SET #runs = if_not_exists(#runs, :none)",
            ExpressionAttributeNames={"#runs": "runs"},
            ExpressionAttributeValues={":none": {"M": {}}},
        )
        self._ddb.update_item(
            TableName=self.counters_table,
            Key={"team": {"S": team}},
            UpdateExpression="SET #runs.#g = :runs",
            ExpressionAttributeNames={"#runs": "runs", "#g": str(gpus)},
            ExpressionAttributeValues={":runs": to_typed([round(r) for r in runs])},
        )

    def reserve(
        self, team: str, name: str, charge: Resources, cap: Resources, record: Mapping[str, Any]
    ) -> None:
        """Charge ``charge`` against ``cap`` and write the record, atomically; or raise.

        Safe to retry: the transaction carries a ClientRequestToken (DynamoDB's idempotency for
        TransactWriteItems), and a cancellation whose record turns out to be this very submission
        (a retry of a transaction that was applied, e.g. after a lost response) counts as done.
        """
        submission = str(uuid.uuid4())
        for attr in ATTRS:
            if getattr(charge, attr) > getattr(cap, attr):
                self._refuse(team, charge, cap)
        conditions, values, adds = [], {}, []
        for attr in ATTRS:
            amount = getattr(charge, attr)
            values[f":{attr}"] = _n(amount)
            adds.append(f"{attr} :{attr}")
            if amount:
                values[f":max_{attr}"] = _n(getattr(cap, attr) - amount)
                conditions.append(f"(attribute_not_exists({attr}) OR {attr} <= :max_{attr})")
        update: dict[str, Any] = {
            "TableName": self.counters_table,
            "Key": {"team": {"S": team}},
            "UpdateExpression": "ADD " + ", ".join(adds),
            "ExpressionAttributeValues": values,
        }
        if conditions:
            update["ConditionExpression"] = " AND ".join(conditions)
        item = {k: to_typed(v) for k, v in record.items()}
        keys = {
            "team": team,
            "name": name,
            "state": RESERVING,
            "submission": submission,
            LIVE_INDEX.partition: team,
        }
        item.update({k: {"S": v} for k, v in keys.items()})
        item.update({f"charge_{a}": _n(getattr(charge, a)) for a in ATTRS})
        put = {
            "TableName": self.ledger_table,
            "Item": item,
            "ConditionExpression": "attribute_not_exists(#n) OR #s = :released",
            "ExpressionAttributeNames": {"#n": "name", "#s": "state"},
            "ExpressionAttributeValues": {":released": {"S": RELEASED}},
        }
        try:
            self._transact([{"Update": update}, {"Put": put}], token=submission)
        except self._ddb.exceptions.TransactionCanceledException as exc:
            mine = self.get_raw(team, name)
            if mine is not None and mine.get("submission", {}).get("S") == submission:
                return  # an earlier attempt of this very call was applied
            reasons = [r.get("Code") for r in exc.response.get("CancellationReasons", [])]
            if reasons and reasons[0] == "ConditionalCheckFailed":
                self._refuse(team, charge, cap)
            if len(reasons) > 1 and reasons[1] == "ConditionalCheckFailed":
                raise Conflict(
                    f"job {name!r} already exists in team {team!r}", {"team": team, "name": name}
                ) from None
            raise Unavailable(f"ledger write cancelled: {reasons}") from exc

    def _transact(self, items: list[dict[str, Any]], attempts: int = 5, token: str | None = None) -> None:
        """TransactWriteItems, retried when DynamoDB cancels it for a conflicting concurrent
        transaction on the same item (a burst on one team's counter), never on a failed condition."""
        for attempt in range(1, attempts + 1):
            try:
                if token:
                    self._ddb.transact_write_items(TransactItems=items, ClientRequestToken=token)
                else:
                    self._ddb.transact_write_items(TransactItems=items)
                return
            except self._ddb.exceptions.TransactionCanceledException as exc:
                reasons = [r.get("Code") for r in exc.response.get("CancellationReasons", [])]
                if "TransactionConflict" not in reasons or attempt == attempts:
                    raise
                time.sleep(random.uniform(0, 0.05 * 2**attempt))

    def _refuse(self, team: str, charge: Resources, cap: Resources) -> None:
        over = over_cap(self.usage(team), charge, cap)
        raise InFlightLimit(over_cap_message(team, over), {"team": team, "resources": over})

    def _refund(self, team: str, charge: Resources) -> dict[str, Any]:
        return {
            "TableName": self.counters_table,
            "Key": {"team": {"S": team}},
            "UpdateExpression": "ADD " + ", ".join(f"{a} :{a}" for a in ATTRS),
            "ExpressionAttributeValues": {f":{a}": _n(-getattr(charge, a)) for a in ATTRS},
        }

    def confirm(self, team: str, name: str, fields: Mapping[str, Any] | None = None) -> bool:
        """Mark a reservation submitted (its Job exists). False when it is no longer ``reserving``:
        cancelled while its Job was being created."""
        names = {"#s": "state"}
        values = {":s": {"S": SUBMITTED}, ":r": {"S": RESERVING}}
        sets = ["#s = :s"]
        for i, (k, v) in enumerate((fields or {}).items()):
            names[f"#f{i}"] = k
            values[f":f{i}"] = to_typed(v)
            sets.append(f"#f{i} = :f{i}")
        try:
            self._ddb.update_item(
                TableName=self.ledger_table,
                Key={"team": {"S": team}, "name": {"S": name}},
                UpdateExpression="SET " + ", ".join(sets),
                ConditionExpression="#s = :r",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except self._ddb.exceptions.ConditionalCheckFailedException:
            return False
        return True

    def abort(self, team: str, name: str, charge: Resources) -> None:
        """Undo a reservation whose Job could not be created: refund and forget, atomically."""
        self._transact(
            [
                {"Update": self._refund(team, charge)},
                {
                    "Delete": {
                        "TableName": self.ledger_table,
                        "Key": {"team": {"S": team}, "name": {"S": name}},
                        "ConditionExpression": "#s = :r",
                        "ExpressionAttributeNames": {"#s": "state"},
                        "ExpressionAttributeValues": {":r": {"S": RESERVING}},
                    }
                },
            ]
        )

    def release(self, team: str, name: str, reason: str, ran_s: float | None = None) -> bool:
        """Refund a job's charge once (cancelled, finished or vanished). False if already released.
        ``ran_s``: how long a finished job ran (start to completion), kept for start estimates."""
        record = self.get_raw(team, name)
        if record is None:
            raise NotFound(f"no job {name!r} in team {team!r}", {"team": team, "name": name})
        if record["state"]["S"] == RELEASED:
            return False
        charge = _res(record, "charge_")
        try:
            self._transact(
                [
                    {"Update": self._refund(team, charge)},
                    {
                        "Update": {
                            "TableName": self.ledger_table,
                            "Key": {"team": {"S": team}, "name": {"S": name}},
                            "UpdateExpression": "SET #s = :rel, released_at = :t, release_reason = :why, "
                            + f"{LEDGER.ttl} = :expires"
                            + ("" if ran_s is None else ", ran_s = :ran")
                            + f" REMOVE {LIVE_INDEX.partition}",
                            "ConditionExpression": "#s = :cur",
                            "ExpressionAttributeNames": {"#s": "state"},
                            "ExpressionAttributeValues": {
                                ":rel": {"S": RELEASED},
                                ":cur": record["state"],
                                ":t": {"S": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
                                ":why": {"S": reason},
                                ":expires": _n(int(self._clock()) + self.retention_s),
                                **({} if ran_s is None else {":ran": _n(round(ran_s))}),
                            },
                        }
                    },
                ]
            )
        except self._ddb.exceptions.TransactionCanceledException:
            return False  # someone else released (or changed) it first: never twice
        return True

    def record_fallback(self, team: str, name: str, fallback: Mapping[str, Any]) -> bool:
        """Record a topology fallback once: ``fallback`` on the record and an event appended.
        False when the record is not an active submission or already has a fallback."""
        event = {
            "at": fallback["at"],
            "what": "topology-fallback",
            "to": "preferred",
            "level": fallback["level"],
        }
        try:
            self._ddb.update_item(
                TableName=self.ledger_table,
                Key={"team": {"S": team}, "name": {"S": name}},
                UpdateExpression="SET fallback = :f, events = list_append(if_not_exists(events, :none), :ev)",
                ConditionExpression="#s = :sub AND attribute_not_exists(fallback)",
                ExpressionAttributeNames={"#s": "state"},
                ExpressionAttributeValues={
                    ":f": to_typed(dict(fallback)),
                    ":ev": to_typed([event]),
                    ":none": {"L": []},
                    ":sub": {"S": SUBMITTED},
                },
            )
        except self._ddb.exceptions.ConditionalCheckFailedException:
            return False
        return True

    # -- records --------------------------------------------------------------------------------
    def get_raw(self, team: str, name: str) -> dict[str, Any] | None:
        item = self._ddb.get_item(
            TableName=self.ledger_table, Key={"team": {"S": team}, "name": {"S": name}}, ConsistentRead=True
        )
        self.items_read += "Item" in item
        return item.get("Item")

    def get(self, team: str, name: str) -> dict[str, Any] | None:
        raw = self.get_raw(team, name)
        return None if raw is None else {k: to_plain(v) for k, v in raw.items()}

    def list(self, team: str) -> list[dict[str, Any]]:
        """Every record of the team that has not expired: the live ones and those released within the
        retention (the what-if history reads them)."""
        return self._query(
            {"KeyConditionExpression": "team = :t", "ExpressionAttributeValues": {":t": {"S": team}}}
        )

    def live(self, team: str) -> builtins.list[dict[str, Any]]:
        """The team's live records (reserving or submitted), from the sparse index: what a reconcile
        pass and an estimate read, as many as the team has jobs queued or running, whatever the
        ledger's history. The index is eventually consistent: a record written a moment ago may be
        missing, one released a moment ago still there (every write on a record is conditional)."""
        return self._query(
            {
                "IndexName": LIVE_INDEX.name,
                "KeyConditionExpression": f"{LIVE_INDEX.partition} = :t",
                "ExpressionAttributeValues": {":t": {"S": team}},
            }
        )

    def page(
        self, team: str, limit: int, after: str | None = None
    ) -> tuple[builtins.list[dict[str, Any]], str | None]:
        """At most ``limit`` of the team's records in name order, after the job named ``after``; and
        the name to continue after, None when there are no more."""
        kwargs: dict[str, Any] = {
            "TableName": self.ledger_table,
            "KeyConditionExpression": "team = :t",
            "ExpressionAttributeValues": {":t": {"S": team}},
            "Limit": limit,
        }
        if after is not None:
            kwargs["ExclusiveStartKey"] = {"team": {"S": team}, "name": {"S": after}}
        page = self._ddb.query(**kwargs)
        items = page.get("Items", [])
        self.items_read += len(items)
        last = page.get("LastEvaluatedKey")
        return [{k: to_plain(v) for k, v in item.items()} for item in items], (
            last["name"]["S"] if last else None
        )

    def _query(self, query: dict[str, Any]) -> builtins.list[dict[str, Any]]:
        out: builtins.list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"TableName": self.ledger_table, **query}
        while True:
            page = self._ddb.query(**kwargs)
            items = page.get("Items", [])
            self.items_read += len(items)
            out.extend({k: to_plain(v) for k, v in item.items()} for item in items)
            if "LastEvaluatedKey" not in page:
                return out
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


class _Guarded:
    """The DynamoDB client, with every failure that is not an answer (throttling or a server error
    after botocore's retries, a connection error) raised as ``Unavailable`` (503: try again) rather
    than escaping as an internal error. Failed conditions stay what they are: callers decide."""

    ANSWERS = frozenset({"TransactionCanceledException", "ConditionalCheckFailedException"})

    def __init__(self, client: Any) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        self._client = client
        self._errors = (ClientError, BotoCoreError)
        self.exceptions = client.exceptions

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._client, name)
        client_error, botocore_error = self._errors

        def call(**kwargs: Any) -> Any:
            try:
                return method(**kwargs)
            except client_error as exc:
                code = exc.response.get("Error", {}).get("Code", "")
                if code in self.ANSWERS:
                    raise
                raise Unavailable(f"the job ledger is unavailable ({code}); try again") from exc
            except botocore_error as exc:
                raise Unavailable(f"the job ledger is unreachable ({type(exc).__name__}); try again") from exc

        return call
