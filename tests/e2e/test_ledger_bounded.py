"""The ledger stays bounded (issue 38): what a reconcile pass and a start estimate read grows with the
jobs queued or running, never with the ledger's history, and the job list pages through every record
the ledger keeps. Measured on the local stack's deployed tables (moto, over HTTP) with 20,000 finished
records seeded straight into the ledger table beside a few live jobs."""

from __future__ import annotations

import json
import time

import pytest

from tests.stacks import shared_stack
from topogov.adapters.kube import KubeHttp
from topogov.adapters.kube_auth import kubeconfig_api_client
from topogov.adapters.kube_jobs import KubeJobs
from topogov.adapters.ledger import DynamoLedger, to_typed
from topogov.adapters.tables import LEDGER
from topogov.domain.policy import load_policy_file
from topogov.logic.estimates import read_state
from topogov.logic.ledger_sync import sync_ledger
from topogov.logic.whatif.forecast import Model

from .test_api_local import call

FINISHED = 20_000
LIVE = 3
TEAM = "team-b"


@pytest.fixture(scope="module")
def stack(shared_stacks):
    with shared_stack(shared_stacks, "api") as s:
        yield s


@pytest.fixture(scope="module")
def seeded(stack):
    """20,000 released records of team-b, as the ledger keeps them (no live_team, an expiry), written
    with BatchWriteItem; then three live jobs submitted through the API."""
    ddb = stack.client("dynamodb")
    table = stack.output("LedgerTable")
    expires = int(time.time()) + 30 * 86400
    for start in range(0, FINISHED, 25):
        items = []
        for i in range(start, min(start + 25, FINISHED)):
            record = {
                "team": TEAM, "name": f"old-{i:05d}", "state": "released", "release_reason": "succeeded",
                "namespace": "hyperpod-ns-team-b", "submitted_at": "2026-11-01T00:00:00Z", "ran_s": 600,
                "decision": {"pods": 1, "priority_class": "experimentation-priority"},
                "shape": {"per_pod_gpu": 1}, LEDGER.ttl: expires,
            }  # fmt: skip
            items.append({"PutRequest": {"Item": {k: to_typed(v) for k, v in record.items()}}})
        left = {table: items}
        while left:
            left = ddb.batch_write_item(RequestItems=left).get("UnprocessedItems") or {}
    for i in range(LIVE):
        body = {"job_name": f"live-{i}", "image": "x", "accelerators": 1, "team": TEAM}
        resp = call(stack, "POST", "/v1/jobs", "topogov-team-b", body)
        assert resp.status_code == 201, resp.text
    return stack


def ledger_of(stack) -> DynamoLedger:
    return DynamoLedger(stack.client("dynamodb"), stack.output("LedgerTable"), stack.output("CountersTable"))


def test_a_pass_reads_the_live_records_only(seeded):
    # Given 20,000 finished records and three live ones
    policy = load_policy_file(str(seeded.options.policy_file))
    ledger = ledger_of(seeded)
    jobs = KubeJobs(KubeHttp(kubeconfig_api_client(str(seeded.kubeconfig))))
    # When the reconcile pass's ledger step runs
    summary = sync_ledger(policy, ledger, jobs)
    # Then it read the live records of every team, not one finished record
    assert summary.checked == LIVE
    assert ledger.items_read == LIVE


def test_an_estimate_reads_the_live_records_only(seeded):
    policy = load_policy_file(str(seeded.options.policy_file))
    ledger = ledger_of(seeded)
    jobs = KubeJobs(KubeHttp(kubeconfig_api_client(str(seeded.kubeconfig))))
    from topogov.adapters.snapshot_store import S3SnapshotStore

    snap = S3SnapshotStore(seeded.client("s3"), seeded.output("SnapshotBucket")).load()
    read_state(policy, Model(list(snap.nodes.values()), policy), ledger, jobs)
    assert ledger.items_read == LIVE  # the team's run times come with its counters, not its records


def test_the_job_list_pages_through_every_record_under_lambdas_limit(seeded):
    # When an admin lists team-b's jobs a page at a time
    seen, token, pages, largest = [], None, 0, 0
    while True:
        query = "?team=team-b&limit=500" + (f"&nextToken={token}" if token else "")
        resp = call(seeded, "GET", "/v1/jobs" + query, "topogov-admin")
        assert resp.status_code == 200, resp.text
        largest = max(largest, len(resp.content))
        body = resp.json()
        seen += [j["name"] for j in body["jobs"]]
        pages += 1
        token = body["nextToken"]
        if token is None:
            break
    # Then every record is listed once, each page well under Lambda's 6 MB answer
    assert len(seen) == len(set(seen)) == FINISHED + LIVE
    assert pages == -(-(FINISHED + LIVE) // 500)
    assert largest < 6 * 2**20 / 4
    # And a token that is not the list's is refused, naming it
    bad = call(seeded, "GET", "/v1/jobs?nextToken=bm90LWEtdG9rZW4", "topogov-admin")
    assert bad.status_code == 400 and bad.json()["error"]["details"]["field"] == "nextToken"


def test_a_released_record_expires_and_leaves_the_live_index(seeded):
    # When a live job is cancelled
    resp = call(seeded, "DELETE", "/v1/jobs/team-b/live-0", "topogov-team-b")
    assert resp.status_code == 200, resp.text
    # Then its record carries the expiry DynamoDB's time to live reads, and is no longer live
    item = seeded.client("dynamodb").get_item(
        TableName=seeded.output("LedgerTable"), Key={"team": {"S": TEAM}, "name": {"S": "live-0"}}
    )["Item"]
    retention = load_policy_file(str(seeded.options.policy_file)).job_retention_days * 86400
    assert abs(int(item[LEDGER.ttl]["N"]) - (time.time() + retention)) < 600
    assert LEDGER.index is not None and LEDGER.index.partition not in item
    assert {r["name"] for r in ledger_of(seeded).live(TEAM)} == {"live-1", "live-2"}
    # And the table's time to live is on that attribute
    ttl = seeded.client("dynamodb").describe_time_to_live(TableName=seeded.output("LedgerTable"))
    assert ttl["TimeToLiveDescription"]["AttributeName"] == LEDGER.ttl
    json.dumps(item)  # a plain item
