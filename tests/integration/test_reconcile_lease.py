"""One reconcile pass at a time without reserved concurrency: the lease (topogov/adapters/lease.py)
in a counters table of the moto server, over HTTP, with clients as separate Lambda environments
would have them."""

from __future__ import annotations

import concurrent.futures as cf
import time
import uuid

import pytest

from topogov.adapters.lease import DynamoLease
from topogov.adapters.tables import create_tables

from .conftest import aws_client


@pytest.fixture
def counters(aws_url):
    suffix = uuid.uuid4().hex[:8]
    create_tables(aws_client(aws_url, "dynamodb"), f"ledger-{suffix}", f"counters-{suffix}")
    return f"counters-{suffix}"


def lease(aws_url, table):
    return DynamoLease(aws_client(aws_url, "dynamodb"), table)  # a client per "environment"


def test_of_twenty_invocations_at_once_exactly_one_holds_the_lease(aws_url, counters):
    # Given twenty invocations starting together (a burst of "running" events)
    now = time.time()

    def acquire(i):
        return lease(aws_url, counters).acquire(f"invocation-{i}", now, 900)

    # When each tries to take the lease
    with cf.ThreadPoolExecutor(max_workers=20) as pool:
        held = [h for h in pool.map(acquire, range(20)) if h is not None]
    # Then exactly one holds it
    assert len(held) == 1
    # and nobody else gets it while it lasts
    assert lease(aws_url, counters).acquire("late", now + 1, 900) is None


def test_a_lease_whose_holder_died_is_free_once_it_expires(aws_url, counters):
    # Given a pass that took the lease and never let go (it timed out or crashed)
    now = time.time()
    assert lease(aws_url, counters).acquire("dead", now, 60) is not None
    # When another pass comes before the lease expires, it is refused; after, it gets it
    assert lease(aws_url, counters).acquire("next", now + 59, 900) is None
    assert lease(aws_url, counters).acquire("next", now + 61, 900) is not None


def test_instances_deferred_to_the_holder_are_handed_to_it_before_it_lets_go(aws_url, counters):
    # Given a holder, and two invocations that found it holding and deferred their instances
    now = time.time()
    mine = lease(aws_url, counters)
    held = mine.acquire("holder", now, 900)
    assert held is not None and held.pending == frozenset()
    lease(aws_url, counters).defer(["i-0aaa"])
    lease(aws_url, counters).defer(["i-0bbb", "i-0aaa"])
    # When the holder tries to let go, it is handed the deferred instances and still holds the lease
    assert mine.release(held) == {"i-0aaa", "i-0bbb"}
    assert lease(aws_url, counters).acquire("other", now + 1, 900) is None
    # Then, with nothing pending any more, it lets go, and the lease is free
    assert mine.release(held) == frozenset()
    assert lease(aws_url, counters).acquire("other", now + 2, 900) is not None


def test_what_is_pending_when_a_holder_runs_out_of_time_goes_to_the_next_pass(aws_url, counters):
    # Given a holder out of time with an instance deferred to it
    now = time.time()
    mine = lease(aws_url, counters)
    held = mine.acquire("holder", now, 900)
    lease(aws_url, counters).defer(["i-0ccc"])
    # When it lets go regardless
    mine.force_release(held)
    # Then the next pass takes the lease with the deferred instance
    nxt = lease(aws_url, counters).acquire("next", now + 1, 900)
    assert nxt is not None and nxt.pending == {"i-0ccc"}
    # and a holder whose lease expired and was taken cannot free the new holder's
    mine.force_release(held)
    assert mine.release(held) == frozenset()
    assert lease(aws_url, counters).acquire("third", now + 2, 900) is None
