"""The in-flight cap under concurrency: 50 clients (as 50 Lambda environments would be) charge one
team's counter at once through DynamoDB's conditional transactions; then release twice each."""

from __future__ import annotations

import concurrent.futures as cf
import uuid

import pytest

from topogov.adapters.ledger import DynamoLedger
from topogov.adapters.tables import create_tables
from topogov.domain.errors import InFlightLimit
from topogov.domain.quantity import Resources

from .conftest import aws_client

CAP = Resources(gpu=96, efa=10**6, cpu_m=10**9, memory=10**15)
JOB = Resources(gpu=8, efa=0, cpu_m=1000, memory=2**30)


@pytest.fixture
def tables(aws_url):
    suffix = uuid.uuid4().hex[:8]
    names = (f"ledger-{suffix}", f"counters-{suffix}")
    create_tables(aws_client(aws_url, "dynamodb"), *names)
    return names


def ledger(aws_url, tables):
    return DynamoLedger(aws_client(aws_url, "dynamodb"), *tables)  # a client per "environment"


def test_fifty_concurrent_charges_never_pass_the_cap_and_release_exactly_once(aws_url, tables):
    def reserve(i):
        try:
            ledger(aws_url, tables).reserve("team-c", f"job-{i}", JOB, CAP, {"submitted_by": "x"})
            return i
        except InFlightLimit:
            return None

    with cf.ThreadPoolExecutor(max_workers=25) as pool:
        accepted = [i for i in pool.map(reserve, range(50)) if i is not None]
    one = ledger(aws_url, tables)
    assert len(accepted) == CAP.gpu // JOB.gpu
    assert one.usage("team-c").gpu == CAP.gpu
    for i in accepted:
        one.confirm("team-c", f"job-{i}")

    # every accepted job released twice, concurrently: each refund happens once
    with cf.ThreadPoolExecutor(max_workers=25) as pool:
        outcomes = list(pool.map(lambda i: ledger(aws_url, tables).release("team-c", f"job-{i}", "done"),
                                 accepted * 2))  # fmt: skip
    assert sum(outcomes) == len(accepted)
    assert one.usage("team-c") == Resources()
