"""EC2 DescribeInstanceTopology adapter: batched, paced, budget-aware.

The action has its own request bucket (1 token, refilled at 1 per second, per account and
region). We pace calls client-side to ``rate_per_s`` instead of leaning on throttling, and let
botocore's ``standard`` retry mode (set explicitly on the client) absorb the odd
``RequestLimitExceeded`` caused by other callers in the account.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from topogov.domain.ec2_answer import batches, parse_instances
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
    asked: list[str] = field(default_factory=list)  # ids whose batch was answered
    unasked: list[str] = field(default_factory=list)  # ids left for the next pass (budget or error)
    calls: int = 0
    retries: int = 0  # throttled or failed attempts botocore retried
    error: str | None = None


class TopologyClient:
    """Asks EC2 about specific instance ids, at most 100 per call, following NextToken."""

    def __init__(
        self,
        client: Any,
        pacer: Pacer,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._client = client
        self._pacer = pacer
        self._clock = clock
        self._wall = wall

    def describe(self, instance_ids: Sequence[str], deadline: float) -> DescribeResult:
        """Ask about ``instance_ids`` until done or until the next call would pass ``deadline``.

        ``deadline`` is on the ``clock`` (monotonic) scale. Never raises for throttling: a batch
        that still fails after botocore's retries ends the asking; what was learned is kept.
        """
        result = DescribeResult()
        pending = batches(instance_ids, MAX_IDS_PER_CALL)
        for index, batch in enumerate(pending):
            try:
                self._describe_batch(batch, deadline, result)
            except _OutOfTime:
                result.unasked.extend(i for b in pending[index:] for i in b)
                break
            except TopologySourceError as exc:
                result.error = str(exc)
                result.unasked.extend(i for b in pending[index:] for i in b)
                break
            result.asked.extend(batch)
        return result

    def _describe_batch(self, batch: list[str], deadline: float, result: DescribeResult) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        token: str | None = None
        answers: dict[str, InstanceTopology] = {}
        while True:
            if self._clock() + self._pacer.wait_time() > deadline:
                raise _OutOfTime
            self._pacer.acquire()
            kwargs: dict[str, Any] = {"InstanceIds": batch}
            if token:
                kwargs["NextToken"] = token
            result.calls += 1
            try:
                page = self._client.describe_instance_topology(**kwargs)
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
            answers.update(parse_instances(page.get("Instances", []), self._wall()))
            token = page.get("NextToken")
            if not token:
                break
        # A batch counts only once fully read, so a cut-off batch is asked again next pass.
        result.answers.update(answers)


class _OutOfTime(Exception):
    pass
