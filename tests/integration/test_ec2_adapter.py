"""The EC2 adapter against the emulated DescribeInstanceTopology, over HTTP with boto3."""

from __future__ import annotations

import time

import pytest

from topogov.adapters.ec2 import Pacer, TopologyClient

from .conftest import aws_client, launch, set_topology_rate


@pytest.fixture(scope="module")
def fleet(aws_url):
    ec2 = aws_client(aws_url, "ec2")
    gpu = launch(ec2, "p5.48xlarge", 250)
    cpu = launch(ec2, "c5.2xlarge", 3)
    return gpu, cpu


def test_asks_in_batches_of_100_and_reports_missing_instances(aws_url, fleet):
    gpu, cpu = fleet
    set_topology_rate(aws_url, 1000, 1000)
    client = TopologyClient(aws_client(aws_url, "ec2"), Pacer(1000))
    # When 253 instances are asked about
    result = client.describe(gpu + cpu, deadline=time.monotonic() + 60)
    # Then three batches cover them, GPU instances answer with three layers, CPU ones are absent
    assert result.calls == 3 and result.error is None
    assert set(result.answers) == set(gpu)
    assert all(len(t.network_nodes) == 3 and t.zone_id for t in result.answers.values())
    assert set(result.asked) == set(gpu + cpu) and result.unasked == []


def test_pacing_at_the_bucket_rate_never_gets_throttled(aws_url, fleet):
    gpu, _ = fleet
    set_topology_rate(aws_url, 2, 1)  # a 2/s bucket; the client paces itself to it
    time.sleep(0.6)
    client = TopologyClient(aws_client(aws_url, "ec2", max_attempts=1), Pacer(2))
    result = client.describe(gpu, deadline=time.monotonic() + 60)
    assert (result.calls, result.retries, result.error) == (3, 0, None)
    assert len(result.answers) == 250


def test_throttling_is_retried_by_botocore_standard_mode(aws_url, fleet):
    gpu, _ = fleet
    set_topology_rate(aws_url, 0.5, 1)  # one call per 2 s: an immediate second call is always refused
    # A client that does not pace itself: the bucket refuses, standard-mode retries absorb it.
    client = TopologyClient(aws_client(aws_url, "ec2", max_attempts=10), Pacer(1000))
    result = client.describe(gpu[:200], deadline=time.monotonic() + 60)
    assert result.error is None and len(result.answers) == 200
    assert result.retries >= 1


def test_throttling_beyond_retries_is_reported_and_keeps_what_was_learned(aws_url, fleet):
    gpu, _ = fleet
    set_topology_rate(aws_url, 0.2, 1)
    time.sleep(0.1)
    client = TopologyClient(aws_client(aws_url, "ec2", max_attempts=1), Pacer(1000))
    result = client.describe(gpu, deadline=time.monotonic() + 60)
    set_topology_rate(aws_url, 1000, 1000)
    assert result.error is not None and "RequestLimitExceeded" in result.error
    assert len(result.unasked) >= 150
    assert set(result.answers) == set(result.asked)


def test_a_pass_stops_at_its_deadline_and_leaves_the_rest(aws_url, fleet):
    gpu, _ = fleet
    set_topology_rate(aws_url, 1000, 1000)
    client = TopologyClient(aws_client(aws_url, "ec2"), Pacer(1.0))
    # Given one call per second and 1.5 s left: two calls fit, the third would not
    result = client.describe(gpu, deadline=time.monotonic() + 1.5)
    assert result.calls == 2
    assert len(result.asked) == 200 and len(result.unasked) == 50


def test_pages_of_an_id_request_are_followed_with_next_token(aws_url, fleet):
    gpu, _ = fleet
    set_topology_rate(aws_url, 1000, 1000)
    import json
    import urllib.request

    def configure(**kw):
        req = urllib.request.Request(
            f"{aws_url}/_topogov/ec2/config", data=json.dumps(kw).encode(), method="POST"
        )
        urllib.request.urlopen(req, timeout=10).close()

    configure(id_page_size=20)  # if EC2 paged id requests at its documented default of 20
    try:
        result = TopologyClient(aws_client(aws_url, "ec2"), Pacer(1000)).describe(
            gpu[:100], time.monotonic() + 60
        )
    finally:
        configure(id_page_size=100)
    assert result.calls == 5 and len(result.answers) == 100
