"""The DynamoDB tables' keys, defined once: the CDK stack creates the tables from these
(``infra/storage.py``), the local stack creates them in moto the same way, and the adapters read and
write by them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Index:
    """A global secondary index (projection ALL). Sparse when its partition attribute is written on
    some items only: DynamoDB indexes an item only while it has the index's key attributes."""

    name: str
    partition: str
    sort: str

    def key_schema(self) -> list[dict[str, str]]:
        return [
            {"AttributeName": self.partition, "KeyType": "HASH"},
            {"AttributeName": self.sort, "KeyType": "RANGE"},
        ]


@dataclass(frozen=True, slots=True)
class TableKeys:
    partition: str
    sort: str | None = None
    ttl: str | None = None  # the attribute DynamoDB's time to live reads
    index: Index | None = None

    def key_schema(self) -> list[dict[str, str]]:
        keys = [{"AttributeName": self.partition, "KeyType": "HASH"}]
        if self.sort:
            keys.append({"AttributeName": self.sort, "KeyType": "RANGE"})
        return keys

    def attribute_definitions(self) -> list[dict[str, str]]:
        keys = [k["AttributeName"] for k in self.key_schema()]
        if self.index is not None:
            keys += [k["AttributeName"] for k in self.index.key_schema() if k["AttributeName"] not in keys]
        return [{"AttributeName": k, "AttributeType": "S"} for k in keys]


# One record per job: (team, job name). A record is live (its job queued or running, its charge held)
# while it carries ``live_team`` (its team): the sparse index ``live`` holds the live records only,
# so what reads them (a reconcile pass, an estimate) costs what is live, not the ledger's history.
# A released record loses ``live_team`` and gets ``expires_at`` (epoch seconds, the policy's
# jobRetentionDays after its release), which DynamoDB's time to live deletes.
LIVE_INDEX = Index("live", "live_team", "name")
LEDGER = TableKeys("team", "name", ttl="expires_at", index=LIVE_INDEX)
COUNTERS = TableKeys("team")  # one in-flight counter per team
# Powertools' DynamoDBPersistenceLayer: key attribute "id", expiry attribute "expiration" (its defaults)
IDEMPOTENCY = TableKeys("id", ttl="expiration")


def create_tables(
    client: Any, ledger_table: str, counters_table: str, idempotency_table: str | None = None
) -> None:
    """The tables as the CDK stack defines them (the local stack and tests use this)."""
    tables = [(ledger_table, LEDGER), (counters_table, COUNTERS)]
    if idempotency_table:
        tables.append((idempotency_table, IDEMPOTENCY))
    for name, keys in tables:
        extra: dict[str, Any] = {}
        if keys.index is not None:
            extra["GlobalSecondaryIndexes"] = [
                {
                    "IndexName": keys.index.name,
                    "KeySchema": keys.index.key_schema(),
                    "Projection": {"ProjectionType": "ALL"},
                }
            ]
        client.create_table(
            TableName=name,
            KeySchema=keys.key_schema(),
            AttributeDefinitions=keys.attribute_definitions(),
            BillingMode="PAY_PER_REQUEST",
            **extra,
        )
        if keys.ttl:
            client.update_time_to_live(
                TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": keys.ttl}
            )
