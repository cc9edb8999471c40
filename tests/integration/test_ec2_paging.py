"""The first pass's EC2 calls against the emulated DescribeInstanceTopology paging id queries at 20
(its documented default page; whether 100 ids come back in one page is not documented), over HTTP
with boto3: about ceil(N/100) calls either way, measured beside asking by ids only."""

from __future__ import annotations

import json
import math
import time
import urllib.request

import pytest

from topogov.adapters.ec2 import Pacer, TopologyClient

from .conftest import aws_client, launch, start_aws

N = 1000


def configure(url: str, **kw) -> None:
    req = urllib.request.Request(f"{url}/_topogov/ec2/config", data=json.dumps(kw).encode(), method="POST")
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 200


@pytest.fixture(scope="module")
def account(tmp_path_factory):
    """An account of its own (a fresh emulator): N p5.48xlarge of the cluster and two c5 (no
    topology), EC2 paging id queries at 20."""
    proc = start_aws(tmp_path_factory, rate=1000, burst=1000)
    try:
        ec2 = aws_client(proc.url, "ec2")
        gpu = [i for _ in range(N // 500) for i in launch(ec2, "p5.48xlarge", 500)]
        cpu = launch(ec2, "c5.2xlarge", 2)
        configure(proc.url, id_page_size=20)
        fleet = {**dict.fromkeys(gpu, "p5.48xlarge"), **dict.fromkeys(cpu, "c5.2xlarge")}
        yield proc.url, fleet
    finally:
        proc.stop()


def test_a_first_pass_costs_about_ceil_n_over_100_calls_when_ec2_pages_ids_at_20(account):
    url, fleet = account
    client = TopologyClient(aws_client(url, "ec2"), Pacer(1000))
    # When every instance of the cluster is asked about, with the cluster's instance types
    result = client.describe(list(fleet), time.monotonic() + 120, fleet)
    # Then at most 10 % above ceil(N/100) calls, every GPU instance answered, the CPU ones absent
    assert result.error is None and not result.unasked
    assert len(result.answers) == N and set(result.asked) == set(fleet)
    assert result.calls <= math.ceil(1.1 * math.ceil(len(fleet) / 100)), result.calls
    assert result.listed >= N // 100  # it listed by instance type, 100 a page
    assert client.id_page == 20


def test_asking_by_ids_only_costs_five_times_as_many(account):
    url, fleet = account
    client = TopologyClient(aws_client(url, "ec2"), Pacer(1000), listing=False)
    result = client.describe(list(fleet), time.monotonic() + 120, fleet)
    assert len(result.answers) == N and result.calls == (N // 100) * 5 + 1  # + the batch of two c5


def test_a_few_new_instances_are_asked_by_ids_not_by_a_listing(account):
    url, fleet = account
    client = TopologyClient(aws_client(url, "ec2"), Pacer(1000))
    client.describe(list(fleet), time.monotonic() + 120, fleet)  # the first pass (learns the paging)
    new = list(fleet)[:30]
    result = client.describe(new, time.monotonic() + 60, fleet)
    assert result.listed == 0 and result.calls == 2 and len(result.answers) == 30


def test_the_topology_control_route_answers_as_describe_instance_topology_outside_the_bucket(account):
    """What ``topogov local --labelled-by-eks`` labels the nodes with: EC2's own answers."""
    url, fleet = account
    before = json.load(urllib.request.urlopen(f"{url}/_topogov/ec2/config", timeout=10))["calls"]
    with urllib.request.urlopen(f"{url}/_topogov/ec2/topology?region=us-east-1", timeout=30) as resp:
        routed = json.load(resp)["instances"]
    after = json.load(urllib.request.urlopen(f"{url}/_topogov/ec2/config", timeout=10))["calls"]
    assert after == before  # not a DescribeInstanceTopology request: no call counted, no token taken
    gpu = [i for i, t in fleet.items() if t == "p5.48xlarge"]
    assert set(routed) == set(gpu)  # the c5 have no topology
    ec2 = aws_client(url, "ec2")
    (item,) = ec2.describe_instance_topology(InstanceIds=[gpu[7]])["Instances"]
    assert routed[gpu[7]] == {
        "network_nodes": item["NetworkNodes"],
        "zone_id": item["ZoneId"],
        "instance_type": "p5.48xlarge",
    }
