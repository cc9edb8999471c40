"""EC2 DescribeInstanceTopology adapter: batched, paced, budget-aware.

The action has its own request bucket (1 token, refilled at 1 per second, per account and
region). We pace calls client-side to ``rate_per_s`` instead of leaning on throttling, and let
botocore's ``standard`` retry mode (set explicitly on the client) absorb the odd
``RequestLimitExceeded`` caused by other callers in the account.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from topogov.domain.ec2_answer import batches, listing_pays, listing_still_pays, parse_instances
from topogov.domain.errors import TopologySourceError
from topogov.domain.labels import InstanceTopology

MAX_IDS_PER_CALL = 100


def ec2_client(session: Any, *, endpoint_url: str | None = None, max_attempts: int = 5) -> Any:
    """An EC2 client with botocore's ``standard`` retry mode stated explicitly."""
    from botocore.config import Config

    config = Config(
        # total_max_attempts counts the first call too (botocore reads "max_attempts" as retries)
        retries={"mode": "standard", "total_max_attempts": max_attempts},
        connect_timeout=5,
        read_timeout=20,
    )
    return session.client("ec2", endpoint_url=endpoint_url, config=config)


class Pacer:
    """Client-side pacing: a call starts at least ``1 / rate_per_s`` after the previous one *ended*.

    Spacing from the end of a call (not its start) means the server sees arrivals at least one
    interval apart whatever the network jitter, so our own calls never drain EC2's bucket.
    """

    def __init__(
        self,
        rate_per_s: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if rate_per_s <= 0:
            raise ValueError("rate_per_s must be > 0")
        self.interval = 1.0 / rate_per_s
        self._clock = clock
        self._sleep = sleep
        self._next_at = 0.0

    def wait_time(self) -> float:
        return max(0.0, self._next_at - self._clock())

    def acquire(self) -> None:
        delay = self.wait_time()
        if delay > 0:
            self._sleep(delay)

    def release(self) -> None:
        self._next_at = self._clock() + self.interval


@dataclass(slots=True)
class DescribeResult:
    answers: dict[str, InstanceTopology] = field(default_factory=dict)
    asked: list[str] = field(default_factory=list)  # ids whose answer (or absence) is settled
    unasked: list[str] = field(default_factory=list)  # ids left for the next pass (budget or error)
    calls: int = 0
    retries: int = 0  # throttled or failed attempts botocore retried
    error: str | None = None
    listed: int = 0  # calls that listed by instance type (the rest asked by ids)
    stopped: bool = False  # the budget or an error ended the asking


class TopologyClient:
    """Asks EC2 about instances: by ids, 100 a call, following NextToken; or, once EC2 is seen paging
    id queries (at 20, its documented default page), by listing the instance types asked about with
    ``MaxResults=100`` when that costs fewer calls (``domain.ec2_answer.listing_pays``: the rule, and
    why). ``listing=False`` keeps to ids (to measure the two against each other)."""

    def __init__(
        self,
        client: Any,
        pacer: Pacer,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        listing: bool = True,
    ) -> None:
        self._client = client
        self._pacer = pacer
        self._clock = clock
        self._wall = wall
        self._listing = listing
        # EC2's page for id queries as seen (None: not yet; 100: one page per 100 ids). A warm
        # container keeps it, so only its first pass spends a call finding out.
        self.id_page: int | None = None

    def describe(
        self, instance_ids: Sequence[str], deadline: float, fleet: Mapping[str, str] | None = None
    ) -> DescribeResult:
        """Ask about ``instance_ids`` until done or until the next call would pass ``deadline``.

        ``fleet`` is the cluster's instance types by instance id (the labeler's nodes): what a listing
        by type may cost is judged on it. ``deadline`` is on the ``clock`` (monotonic) scale. Never
        raises for throttling: a call that still fails after botocore's retries ends the asking; what
        was learned is kept.
        """
        result = DescribeResult()
        pending = list(dict.fromkeys(instance_ids))
        if self._listing and fleet:
            if self.id_page is None:  # ask by ids until EC2 shows how it pages them
                pending = self._ask_ids(pending, deadline, result, until_paged=True)
            if pending and not result.stopped and self._listing_pays(pending, fleet):
                pending = self._ask_listing(pending, fleet, deadline, result)
        if not result.stopped:
            pending = self._ask_ids(pending, deadline, result)
        result.unasked.extend(pending)
        return result

    def _listing_pays(self, pending: Sequence[str], fleet: Mapping[str, str]) -> bool:
        typed = [i for i in pending if fleet.get(i)]
        types = {fleet[i] for i in typed}
        of_types = sum(1 for t in fleet.values() if t in types)
        return listing_pays(len(typed), of_types, self.id_page or MAX_IDS_PER_CALL)

    def _ask_ids(
        self, pending: list[str], deadline: float, result: DescribeResult, *, until_paged: bool = False
    ) -> list[str]:
        """Ask by ids, 100 a call; returns the ids not settled (cut off, or, ``until_paged``, left
        once a page showed EC2 paging id queries)."""
        todo = batches(pending, MAX_IDS_PER_CALL)
        for index, batch in enumerate(todo):
            rest = [i for b in todo[index + 1 :] for i in b]
            try:
                left = self._describe_batch(batch, deadline, result, until_paged=until_paged)
            except _OutOfTime:
                result.stopped = True
                return batch + rest
            except TopologySourceError as exc:
                result.error, result.stopped = str(exc), True
                return batch + rest
            if left:
                return left + rest
        return []

    def _describe_batch(
        self, batch: list[str], deadline: float, result: DescribeResult, *, until_paged: bool
    ) -> list[str]:
        """One batch of ids, page after page; returns [] once read, or (``until_paged``) the ids a
        first page that carried a NextToken left unanswered."""
        token: str | None = None
        answers: dict[str, InstanceTopology] = {}
        first = True
        while True:
            kwargs: dict[str, Any] = {"InstanceIds": batch}
            if token:
                kwargs["NextToken"] = token
            page = self._call(kwargs, deadline, result)
            items = page.get("Instances", [])
            answers.update(parse_instances(items, self._wall()))
            token = page.get("NextToken")
            if first and token and items:
                self.id_page = len(items)
                if until_paged:
                    result.answers.update(answers)
                    result.asked.extend(answers)
                    return [i for i in batch if i not in answers]
            elif first and not token and len(batch) == MAX_IDS_PER_CALL and self.id_page is None:
                self.id_page = MAX_IDS_PER_CALL  # 100 ids, one page: no need to look again
            first = False
            if not token:
                break
        # A batch counts only once fully read, so a cut-off batch is asked again next pass.
        result.answers.update(answers)
        result.asked.extend(batch)
        return []

    def _ask_listing(
        self, pending: list[str], fleet: Mapping[str, str], deadline: float, result: DescribeResult
    ) -> list[str]:
        """List the instance types of ``pending`` 100 a page while that pays; returns what is left to
        ask by ids (ids without a type, those the listing did not reach)."""
        want = {i for i in pending if fleet.get(i)}
        kwargs: dict[str, Any] = {
            "Filters": [{"Name": "instance-type", "Values": sorted({fleet[i] for i in want})}],
            "MaxResults": MAX_IDS_PER_CALL,
        }
        found: dict[str, InstanceTopology] = {}
        listed, complete = 0, False
        while True:
            try:
                page = self._call(kwargs, deadline, result)
            except _OutOfTime:
                result.stopped = True
                break
            except TopologySourceError as exc:
                result.error, result.stopped = str(exc), True
                break
            result.listed += 1
            items = page.get("Instances", [])
            listed += len(items)
            found.update(parse_instances((x for x in items if x.get("InstanceId") in want), self._wall()))
            kwargs["NextToken"] = page.get("NextToken")
            if not kwargs["NextToken"]:
                complete = True  # every running instance of those types was listed
                break
            if len(found) == len(want) or not listing_still_pays(listed, len(found), self.id_page or 100):
                break
        result.answers.update(found)
        settled = want if complete else set(found)  # a complete listing settles the absent ones too
        result.asked.extend(i for i in pending if i in settled)
        return [i for i in pending if i not in settled]

    def _call(self, kwargs: dict[str, Any], deadline: float, result: DescribeResult) -> dict[str, Any]:
        """One paced DescribeInstanceTopology request; ``_OutOfTime`` if it would start too late."""
        from botocore.exceptions import BotoCoreError, ClientError

        if self._clock() + self._pacer.wait_time() > deadline:
            raise _OutOfTime
        self._pacer.acquire()
        result.calls += 1
        try:
            page: dict[str, Any] = self._client.describe_instance_topology(**kwargs)
        except ClientError as exc:
            self._pacer.release()
            err = exc.response.get("Error", {})
            result.retries += exc.response.get("ResponseMetadata", {}).get("RetryAttempts", 0)
            raise TopologySourceError(err.get("Code", "ClientError"), err.get("Message", "")) from exc
        except BotoCoreError as exc:
            self._pacer.release()
            raise TopologySourceError(type(exc).__name__, str(exc)) from exc
        self._pacer.release()
        result.retries += page.get("ResponseMetadata", {}).get("RetryAttempts", 0)
        return page


class _OutOfTime(Exception):
    pass
