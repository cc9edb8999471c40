"""The DynamoDB tables' keys, defined once: the CDK stack creates the tables from these
(``infra/storage.py``), the local stack creates them in moto the same way, and the adapters read and
write by them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class TableKeys:
    partition: str
    sort: str | None = None
    ttl: str | None = None  # the attribute DynamoDB's time to live reads

    def key_schema(self) -> list[dict[str, str]]:
        keys = [{"AttributeName": self.partition, "KeyType": "HASH"}]
        if self.sort:
            keys.append({"AttributeName": self.sort, "KeyType": "RANGE"})
        return keys

    def attribute_definitions(self) -> list[dict[str, str]]:
        return [{"AttributeName": k["AttributeName"], "AttributeType": "S"} for k in self.key_schema()]


LEDGER = TableKeys("team", "name")  # one record per job: (team, job name)
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
        client.create_table(
            TableName=name,
            KeySchema=keys.key_schema(),
            AttributeDefinitions=keys.attribute_definitions(),
            BillingMode="PAY_PER_REQUEST",
        )
        if keys.ttl:
            client.update_time_to_live(
                TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": keys.ttl}
            )
