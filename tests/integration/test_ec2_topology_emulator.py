"""DescribeInstanceTopology emulation served by a moto server started as a subprocess.

Each test starts from a clean moto (``/moto-api/reset``) and a clean emulation
(``/_topogov/ec2/reset``) with a high request rate, unless it is about throttling.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, ParamValidationError

from topogov_local.processes import record_child

REPO = Path(__file__).resolve().parents[2]
NN_RE = re.compile(r"^nn-[0-9a-f]{17}$")
EC2_NS = "{http://ec2.amazonaws.com/doc/2016-11-15/}"
# botocore reads retries["max_attempts"] as *retries* (args.py: total_max_attempts = max_attempts + 1),
# so {"mode": "standard", "max_attempts": 1} would still retry a throttled call once after a random
# backoff, which can outlast the 1 s refill. One attempt in total, no retry:
NO_RETRY = Config(retries={"mode": "standard", "total_max_attempts": 1})


# --- fixtures and helpers ----------------------------------------------------------------------


@contextlib.contextmanager
def _server(extra_env: dict[str, str] | None = None) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """A moto server subprocess for a block: killed on the way out if the block has not stopped it,
    so a failing test leaves no server behind."""
    proc, url, log = _start_server(extra_env)
    try:
        yield proc, url
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        log.close()


def _start_server(extra_env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "lambdas") + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("TOPOGOV_EC2_TOPOLOGY_RATE", None)
    env.pop("TOPOGOV_EC2_TOPOLOGY_BURST", None)
    env.update(extra_env or {})
    log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - closed by the caller
    proc = subprocess.Popen(
        [sys.executable, "-m", "topogov_local.aws.server", "--host", "127.0.0.1", "--port", "0", "--quiet"],
        stdout=subprocess.PIPE,
        stderr=log,
        env=env,
        text=True,
    )
    record_child(proc.pid, proc.args)  # type: ignore[arg-type]
    box: list[str] = []
    reader = threading.Thread(target=lambda: box.append(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(timeout=30)
    line = box[0].strip() if box else ""
    if not line.startswith("ready "):
        proc.kill()
        log.seek(0)
        raise RuntimeError(f"moto server did not get ready: {line!r}\n{log.read()[-4000:]}")
    return proc, line.split(" ", 1)[1], log


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with _server() as (proc, url):
        yield url
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0


def _http(url: str, method: str = "GET", body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        raw = resp.read()
    return json.loads(raw) if raw else None


def _config(url: str, **settings: Any) -> dict[str, Any]:
    return _http(f"{url}/_topogov/ec2/config", "POST", settings)


@pytest.fixture
def url(server: str) -> str:
    _http(f"{server}/moto-api/reset", "POST")
    _http(f"{server}/_topogov/ec2/reset", "POST")
    _config(server, rate=100000, burst=100000)
    return server


def _ec2(url: str, region: str = "us-east-1", config: Config = NO_RETRY) -> Any:
    return boto3.client(
        "ec2",
        endpoint_url=url,
        region_name=region,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=config,
    )


def _launch(
    ec2: Any, count: int, instance_type: str = "p5.48xlarge", az: str = "us-east-1a", **extra: Any
) -> list[str]:
    placement = {"AvailabilityZone": az, **extra.pop("placement", {})}
    resp = ec2.run_instances(
        ImageId="ami-12c6146b",
        MinCount=count,
        MaxCount=count,
        InstanceType=instance_type,
        Placement=placement,
        **extra,
    )
    return [i["InstanceId"] for i in resp["Instances"]]


def _topology(ec2: Any, **kwargs: Any) -> dict[str, dict[str, Any]]:
    """All pages of DescribeInstanceTopology, keyed by instance id (each id must come once)."""
    out: dict[str, dict[str, Any]] = {}
    token = None
    while True:
        call = dict(kwargs)
        if token:
            call["NextToken"] = token
        page = ec2.describe_instance_topology(**call)
        for item in page["Instances"]:
            assert item["InstanceId"] not in out
            out[item["InstanceId"]] = item
        token = page.get("NextToken")
        if not token:
            return out


def _error(exc: pytest.ExceptionInfo[ClientError]) -> tuple[str, str, int]:
    resp = exc.value.response
    return resp["Error"]["Code"], resp["Error"]["Message"], resp["ResponseMetadata"]["HTTPStatusCode"]


# --- answer shape ------------------------------------------------------------------------------


def test_botocore_parses_every_field_of_the_answer(url: str) -> None:
    # Given a p5 instance in a placement group in us-east-1b
    ec2 = _ec2(url)
    zone_ids = {z["ZoneName"]: z["ZoneId"] for z in ec2.describe_availability_zones()["AvailabilityZones"]}
    (iid,) = _launch(ec2, 1, az="us-east-1b", placement={"GroupName": "train-cpg"})
    raw: list[bytes] = []
    ec2.meta.events.register(
        "after-call.ec2.DescribeInstanceTopology",
        lambda http_response, **_: raw.append(http_response.content),
    )

    # When its topology is described
    page = ec2.describe_instance_topology(InstanceIds=[iid])

    # Then botocore parses every field EC2 sends
    (item,) = page["Instances"]
    assert item["InstanceId"] == iid
    assert item["InstanceType"] == "p5.48xlarge"
    assert item["GroupName"] == "train-cpg"
    assert item["AvailabilityZone"] == "us-east-1b"
    assert item["ZoneId"] == zone_ids["us-east-1b"]
    assert len(item["NetworkNodes"]) == 3
    assert all(NN_RE.match(n) for n in item["NetworkNodes"])
    assert "CapacityBlockId" not in item
    assert "NextToken" not in page
    assert re.match(r"^[0-9a-f-]{36}$", page["ResponseMetadata"]["RequestId"])
    # And the XML uses EC2's namespace and element names (botocore model locationNames)
    root = ET.fromstring(raw[0])
    assert root.tag == f"{EC2_NS}DescribeInstanceTopologyResponse"
    assert [c.tag for c in root] == [f"{EC2_NS}requestId", f"{EC2_NS}instanceSet"]
    xml_item = root.find(f"{EC2_NS}instanceSet/{EC2_NS}item")
    assert xml_item is not None
    assert [c.tag.removeprefix(EC2_NS) for c in xml_item] == [
        "instanceId", "instanceType", "groupName", "networkNodeSet", "availabilityZone", "zoneId",
    ]  # fmt: skip
    nodes = xml_item.findall(f"{EC2_NS}networkNodeSet/{EC2_NS}item")
    assert [n.text for n in nodes] == item["NetworkNodes"]


def test_instance_outside_a_placement_group_has_no_group_name(url: str) -> None:
    # Given a p5 instance launched without a placement group
    ec2 = _ec2(url)
    (iid,) = _launch(ec2, 1)
    # When described
    (item,) = ec2.describe_instance_topology(InstanceIds=[iid])["Instances"]
    # Then GroupName is left out, as EC2 does
    assert "GroupName" not in item


def test_run_instances_accepts_the_types_the_labeler_needs(url: str) -> None:
    # Given moto's RunInstances
    ec2 = _ec2(url)
    wanted = ["p5.48xlarge", "p6-b200.48xlarge", "p5en.48xlarge", "c5.large"]
    # When each type is launched
    ids = {t: _launch(ec2, 1, instance_type=t)[0] for t in wanted}
    # Then the instances exist with those types
    described = ec2.describe_instances(InstanceIds=list(ids.values()))
    types = {i["InstanceId"]: i["InstanceType"] for r in described["Reservations"] for i in r["Instances"]}
    assert {t: types[i] for t, i in ids.items()} == {t: t for t in wanted}


# --- request rules -----------------------------------------------------------------------------


def test_more_than_100_instance_ids_is_refused(url: str) -> None:
    # Given 101 instance ids
    ids = [f"i-{n:017x}" for n in range(101)]
    # When they are asked for in one request
    with pytest.raises(ClientError) as exc:
        _ec2(url).describe_instance_topology(InstanceIds=ids)
    # Then EC2's error comes back
    assert _error(exc) == ("InvalidParameterValue", "instance-ids cannot contain over 100 values.", 400)


def test_100_instance_ids_are_accepted(url: str) -> None:
    # Given 100 (unknown) instance ids
    ids = [f"i-{n:017x}" for n in range(100)]
    # When asked for
    page = _ec2(url).describe_instance_topology(InstanceIds=ids)
    # Then the request is valid and unknown ids are simply absent
    assert page["Instances"] == []


def test_max_results_with_instance_ids_is_an_invalid_combination(url: str) -> None:
    # Given a running p5 instance
    ec2 = _ec2(url)
    ids = _launch(ec2, 1)
    # When MaxResults and InstanceIds are both given
    with pytest.raises(ClientError) as exc:
        ec2.describe_instance_topology(InstanceIds=ids, MaxResults=5)
    # Then the request is refused
    code, _, status = _error(exc)
    assert (code, status) == ("InvalidParameterCombination", 400)


@pytest.mark.parametrize("max_results", [0, 101, 1000])
def test_max_results_outside_1_to_100_is_refused(url: str, max_results: int) -> None:
    # Given a client that does not validate parameters itself
    ec2 = _ec2(url, config=NO_RETRY.merge(Config(parameter_validation=False)))
    # When MaxResults is out of the documented range
    with pytest.raises(ClientError) as exc:
        ec2.describe_instance_topology(MaxResults=max_results)
    # Then EC2 refuses it
    code, message, status = _error(exc)
    assert (code, status) == ("InvalidParameterValue", 400)
    assert "maxResults" in message


def test_botocore_itself_refuses_max_results_below_1(url: str) -> None:
    # Given a normal client (the model sets min 1; botocore checks only the minimum)
    with pytest.raises(ParamValidationError):
        # When MaxResults=0 is passed / Then it never leaves the client
        _ec2(url).describe_instance_topology(MaxResults=0)


@pytest.mark.parametrize("max_results", [1, 100])
def test_max_results_at_the_bounds_is_accepted(url: str, max_results: int) -> None:
    # Given two running p5 instances
    ec2 = _ec2(url)
    _launch(ec2, 2)
    # When MaxResults is at a bound
    page = ec2.describe_instance_topology(MaxResults=max_results)
    # Then the page holds at most that many
    assert len(page["Instances"]) == min(2, max_results)


def test_unknown_filter_name_is_refused(url: str) -> None:
    with pytest.raises(ClientError) as exc:
        _ec2(url).describe_instance_topology(Filters=[{"Name": "instance-state-name", "Values": ["running"]}])
    assert _error(exc) == ("InvalidParameterValue", "The filter 'instance-state-name' is invalid", 400)


def test_bad_next_token_is_refused(url: str) -> None:
    with pytest.raises(ClientError) as exc:
        _ec2(url).describe_instance_topology(NextToken="not-a-token")
    assert _error(exc) == ("InvalidParameterValue", "The NextToken is invalid", 400)


def test_dry_run_answers_dry_run_operation(url: str) -> None:
    with pytest.raises(ClientError) as exc:
        _ec2(url).describe_instance_topology(DryRun=True)
    code, _, status = _error(exc)
    assert (code, status) == ("DryRunOperation", 412)


def test_region_outside_the_documented_list_is_unsupported(url: str) -> None:
    # Given eu-south-1 (Milan), not in the documented Regions
    # When the action is called there
    with pytest.raises(ClientError) as exc:
        _ec2(url, region="eu-south-1").describe_instance_topology()
    # Then EC2 says the operation is unsupported
    code, _, status = _error(exc)
    assert (code, status) == ("UnsupportedOperation", 400)


# --- pagination --------------------------------------------------------------------------------


def test_pagination_over_130_instances_returns_each_once(url: str) -> None:
    # Given 130 running p5 instances
    ec2 = _ec2(url)
    ids = _launch(ec2, 70) + _launch(ec2, 60, az="us-east-1b")

    # When paging with MaxResults=50
    sizes, seen, token = [], [], None
    while True:
        page = ec2.describe_instance_topology(MaxResults=50, **({"NextToken": token} if token else {}))
        sizes.append(len(page["Instances"]))
        seen += [i["InstanceId"] for i in page["Instances"]]
        token = page.get("NextToken")
        if not token:
            break

    # Then pages are full until the last, and every instance comes exactly once, in launch order
    assert sizes == [50, 50, 30]
    assert seen == ids
    # And without MaxResults the documented default page size (20) applies
    first = ec2.describe_instance_topology()
    assert len(first["Instances"]) == 20 and first["NextToken"]
    # And boto3's paginator walks the same set
    paged = [
        i["InstanceId"]
        for p in ec2.get_paginator("describe_instance_topology").paginate(PaginationConfig={"PageSize": 40})
        for i in p["Instances"]
    ]
    assert paged == ids


def test_instance_id_requests_are_answered_in_one_page_unless_configured(url: str) -> None:
    # Given 100 running p5 instances
    ec2 = _ec2(url)
    ids = _launch(ec2, 100)
    # When all 100 ids are asked for (MaxResults may not be given with ids)
    first = ec2.describe_instance_topology(InstanceIds=ids)
    # Then one page answers them all
    assert len(first["Instances"]) == 100 and "NextToken" not in first
    # And with id requests paged at 20, NextToken (with the same ids) gets the rest
    _config(url, id_page_size=20)
    first = ec2.describe_instance_topology(InstanceIds=ids[:45])
    assert len(first["Instances"]) == 20 and first["NextToken"]
    assert list(_topology(ec2, InstanceIds=ids[:45])) == ids[:45]


# --- what appears ------------------------------------------------------------------------------


def test_filters_availability_zone_instance_type_and_zone_id(url: str) -> None:
    # Given p5 in us-east-1a, p5en and p5e in us-east-1b, p6-b200 in us-east-1c
    ec2 = _ec2(url)
    zone_ids = {z["ZoneName"]: z["ZoneId"] for z in ec2.describe_availability_zones()["AvailabilityZones"]}
    p5 = _launch(ec2, 2, "p5.48xlarge", "us-east-1a")
    p5en = _launch(ec2, 2, "p5en.48xlarge", "us-east-1b")
    p5e = _launch(ec2, 1, "p5e.48xlarge", "us-east-1b")
    b200 = _launch(ec2, 1, "p6-b200.48xlarge", "us-east-1c")

    def ids(*filters: tuple[str, list[str]]) -> set[str]:
        return set(_topology(ec2, Filters=[{"Name": n, "Values": v} for n, v in filters]))

    # Then availability-zone selects by AZ name (values OR-ed)
    assert ids(("availability-zone", ["us-east-1b"])) == set(p5en + p5e)
    assert ids(("availability-zone", ["us-east-1a", "us-east-1c"])) == set(p5 + b200)
    # And instance-type takes exact types and wildcards (* zero or more, ? zero or one)
    assert ids(("instance-type", ["p5en.48xlarge"])) == set(p5en)
    assert ids(("instance-type", ["p5*"])) == set(p5 + p5en + p5e)
    assert ids(("instance-type", ["p5?.48xlarge"])) == set(p5 + p5e)
    assert ids(("instance-type", ["p6-*"])) == set(b200)
    # And zone-id selects by zone id
    assert ids(("zone-id", [zone_ids["us-east-1b"]])) == set(p5en + p5e)
    # And different filters are AND-ed
    assert ids(("availability-zone", ["us-east-1b"]), ("instance-type", ["p5e.*"])) == set(p5e)


def test_group_names_select_placement_groups(url: str) -> None:
    # Given instances in two placement groups and one outside any
    ec2 = _ec2(url)
    a = _launch(ec2, 2, placement={"GroupName": "cpg-a"})
    b = _launch(ec2, 1, placement={"GroupName": "cpg-b"})
    _launch(ec2, 1)
    # When asked by group name / Then only members of those groups come back
    assert set(_topology(ec2, GroupNames=["cpg-a"])) == set(a)
    assert set(_topology(ec2, GroupNames=["cpg-a", "cpg-b"])) == set(a + b)


def test_unsupported_instance_type_is_absent(url: str) -> None:
    # Given a c5.large next to a p5
    ec2 = _ec2(url)
    (c5,) = _launch(ec2, 1, "c5.large")
    (p5,) = _launch(ec2, 1)
    # When both are asked for, and when everything is listed
    by_id = ec2.describe_instance_topology(InstanceIds=[c5, p5])["Instances"]
    listed = _topology(ec2)
    # Then the c5.large is simply absent
    assert [i["InstanceId"] for i in by_id] == [p5]
    assert list(listed) == [p5]


def test_stopped_and_unknown_instances_are_absent(url: str) -> None:
    # Given two running p5 instances, one then stopped
    ec2 = _ec2(url)
    running, stopped = _launch(ec2, 2)
    ec2.stop_instances(InstanceIds=[stopped])
    # When both (and an id that does not exist) are asked for
    page = ec2.describe_instance_topology(InstanceIds=[running, stopped, "i-0123456789abcdef0"])
    # Then only the running one is answered
    assert [i["InstanceId"] for i in page["Instances"]] == [running]
    assert list(_topology(ec2)) == [running]


def test_terminated_instance_is_absent(url: str) -> None:
    ec2 = _ec2(url)
    keep, gone = _launch(ec2, 2)
    ec2.terminate_instances(InstanceIds=[gone])
    assert list(_topology(ec2, InstanceIds=[keep, gone])) == [keep]


# --- placement model ---------------------------------------------------------------------------


def test_four_layers_for_p6_b200_and_three_for_p5(url: str) -> None:
    # Given a p6-b200 and a p5 in the same AZ
    ec2 = _ec2(url)
    (b200,) = _launch(ec2, 1, "p6-b200.48xlarge")
    (p5,) = _launch(ec2, 1)
    # When described
    topo = _topology(ec2, InstanceIds=[b200, p5])
    # Then p6-b200 has four network nodes, p5 three, all real-looking ids
    assert len(topo[b200]["NetworkNodes"]) == 4
    assert len(topo[p5]["NetworkNodes"]) == 3
    assert all(NN_RE.match(n) for t in topo.values() for n in t["NetworkNodes"])
    # And the four-layer type sits on its own branch
    assert topo[b200]["NetworkNodes"][0] != topo[p5]["NetworkNodes"][0]


def test_network_nodes_are_stable_across_calls(url: str) -> None:
    # Given 10 running p5 instances
    ec2 = _ec2(url)
    ids = _launch(ec2, 10)
    # When described several times and in different ways
    first = _topology(ec2, InstanceIds=ids)
    again = _topology(ec2, InstanceIds=list(reversed(ids)))
    listed = _topology(ec2)
    one = ec2.describe_instance_topology(InstanceIds=[ids[7]])["Instances"][0]
    # Then every instance keeps the same nodes
    assert {k: v["NetworkNodes"] for k, v in first.items()} == {
        k: v["NetworkNodes"] for k, v in again.items()
    }
    assert {k: v["NetworkNodes"] for k, v in first.items()} == {
        k: v["NetworkNodes"] for k, v in listed.items()
    }
    assert one["NetworkNodes"] == first[ids[7]]["NetworkNodes"]


def test_default_layout_packs_64_p5_into_2x2x4_with_4_per_leaf(url: str) -> None:
    # Given 64 p5 instances launched in one AZ
    ec2 = _ec2(url)
    ids = _launch(ec2, 64)
    # When described
    topo = _topology(ec2, MaxResults=100)
    nodes = [topo[i]["NetworkNodes"] for i in ids]

    # Then they span 2 layer-1, 4 layer-2 and 16 layer-3 nodes
    layer1 = {n[0] for n in nodes}
    layer2 = {n[1] for n in nodes}
    leaves = Counter(n[2] for n in nodes)
    assert (len(layer1), len(layer2), len(leaves)) == (2, 4, 16)
    # And every leaf holds exactly 4 instances, packed in launch order
    assert set(leaves.values()) == {4}
    assert all(len({tuple(nodes[k]) for k in range(s, s + 4)}) == 1 for s in range(0, 64, 4))
    # And the tree is consistent: each layer-2 node has one parent and 4 leaves,
    # each layer-1 node has 2 layer-2 children
    parent_of2: dict[str, set[str]] = defaultdict(set)
    leaves_of2: dict[str, set[str]] = defaultdict(set)
    children_of1: dict[str, set[str]] = defaultdict(set)
    for n1, n2, n3 in nodes:
        parent_of2[n2].add(n1)
        leaves_of2[n2].add(n3)
        children_of1[n1].add(n2)
    assert all(len(p) == 1 for p in parent_of2.values())
    assert all(len(v) == 4 for v in leaves_of2.values())
    assert all(len(v) == 2 for v in children_of1.values())
    # And node ids are unique per layer
    assert not (layer1 & layer2) and not (layer2 & set(leaves))

    # When a 65th instance arrives, the full tree opens another layer-1 branch
    (extra,) = _launch(ec2, 1)
    (item,) = ec2.describe_instance_topology(InstanceIds=[extra])["Instances"]
    assert item["NetworkNodes"][0] not in layer1
    # And the 64 first ones did not move
    assert [_topology(ec2, MaxResults=100)[i]["NetworkNodes"] for i in ids] == nodes


def test_layout_is_configurable_per_availability_zone(url: str) -> None:
    # Given us-east-1b set to fan-out [1, 1, 2] with 1 instance per leaf
    _config(url, layouts=[{"availability_zone": "us-east-1b", "fanout": [1, 1, 2], "per_leaf": 1}])
    ec2 = _ec2(url)
    ids = _launch(ec2, 3, az="us-east-1b")
    # When described
    topo = _topology(ec2, InstanceIds=ids)
    n = [topo[i]["NetworkNodes"] for i in ids]
    # Then the first two share layers 1-2 on separate leaves, the third opens a new branch
    assert n[0][:2] == n[1][:2] and n[0][2] != n[1][2]
    assert n[2][0] != n[0][0]
    # And other AZs keep the default layout (4 per leaf)
    other = _launch(ec2, 2, az="us-east-1a")
    topo_a = _topology(ec2, InstanceIds=other)
    assert topo_a[other[0]]["NetworkNodes"] == topo_a[other[1]]["NetworkNodes"]


def test_explicit_placement_via_the_control_route(url: str) -> None:
    # Given two p5 instances, one pinned to explicit nodes through the control route
    ec2 = _ec2(url)
    pinned, auto = _launch(ec2, 2)
    wanted = ["nn-aaaaaaaaaaaaaaaaa", "nn-bbbbbbbbbbbbbbbbb", "nn-ccccccccccccccccc"]
    reply = _http(
        f"{url}/_topogov/ec2/placement", "POST", {"region": "us-east-1", "placement": {pinned: wanted}}
    )
    assert reply == {"ok": True, "pinned": 1}

    # When described
    topo = _topology(ec2, InstanceIds=[pinned, auto])

    # Then the pinned one gets exactly those nodes, the other keeps automatic packing
    assert topo[pinned]["NetworkNodes"] == wanted
    assert NN_RE.match(topo[auto]["NetworkNodes"][0])
    listing = _http(f"{url}/_topogov/ec2/placement?region=us-east-1")
    assert listing["explicit"] == {pinned: wanted}

    # When the pin is removed, the instance is packed automatically again
    _http(f"{url}/_topogov/ec2/placement", "POST", {"region": "us-east-1", "placement": {pinned: None}})
    (item,) = ec2.describe_instance_topology(InstanceIds=[pinned])["Instances"]
    assert item["NetworkNodes"] != wanted and len(item["NetworkNodes"]) == 3


def test_bad_control_requests_are_refused(url: str) -> None:
    for path, body in [
        ("/_topogov/ec2/placement", {"region": "us-east-1", "placement": {"i-1": ["nn-a", "nn-b"]}}),
        ("/_topogov/ec2/placement", {"placement": {}}),
        ("/_topogov/ec2/config", {"rate": 0}),
        ("/_topogov/ec2/config", {"layouts": [{"fanout": [2, 2], "per_leaf": 1}]}),
        ("/_topogov/ec2/config", {"no_such_key": 1}),
    ]:
        with pytest.raises(urllib.error.HTTPError) as exc:
            _http(f"{url}{path}", "POST", body)
        assert exc.value.code == 400


def test_stop_start_moves_an_instance(url: str) -> None:
    # Given 4 p5 instances sharing one leaf
    ec2 = _ec2(url)
    ids = _launch(ec2, 4)
    before = _topology(ec2, InstanceIds=ids)
    assert len({tuple(v["NetworkNodes"]) for v in before.values()}) == 1

    # When the first one is stopped and started again
    ec2.stop_instances(InstanceIds=[ids[0]])
    ec2.start_instances(InstanceIds=[ids[0]])
    after = _topology(ec2, InstanceIds=ids)

    # Then it moved to the next free slot (a new leaf); the others did not move
    assert after[ids[0]]["NetworkNodes"][2] != before[ids[0]]["NetworkNodes"][2]
    assert all(after[i]["NetworkNodes"] == before[i]["NetworkNodes"] for i in ids[1:])
    # And it stays there on later calls
    assert _topology(ec2, InstanceIds=[ids[0]])[ids[0]]["NetworkNodes"] == after[ids[0]]["NetworkNodes"]


# --- request bucket ----------------------------------------------------------------------------


def test_the_bucket_throttles_the_second_immediate_call_and_refusals_take_no_token(url: str) -> None:
    # Given EC2's bucket shape (1 token) refilled at 1 per 5 s, not EC2's 1 per second: "immediate"
    # must hold on a loaded machine too, where two calls were once more than a second apart
    _config(url, rate=0.2, burst=1)
    ec2 = _ec2(url)
    # When two calls are made back to back
    ec2.describe_instance_topology()
    with pytest.raises(ClientError) as exc:
        ec2.describe_instance_topology()
    # Then the second is throttled exactly as EC2 throttles (HTTP 503)
    assert _error(exc) == ("RequestLimitExceeded", "Request limit exceeded.", 503)
    assert exc.value.response["ResponseMetadata"]["RetryAttempts"] == 0
    # And refused calls take no token: one refill later a call succeeds despite more refusals (were
    # each refusal a debt of a token, the bucket would still be below zero)
    for _ in range(3):
        with pytest.raises(ClientError):
            ec2.describe_instance_topology()
    time.sleep(5.5)
    assert ec2.describe_instance_topology()["Instances"] == []


def test_each_account_and_region_has_its_own_bucket(url: str) -> None:
    _config(url, rate=0.05, burst=1)  # a token per 20 s: no refill between these calls, loaded or not
    east, west = _ec2(url), _ec2(url, region="us-west-2")
    east.describe_instance_topology()
    west.describe_instance_topology()  # another region: its own token
    with pytest.raises(ClientError):
        east.describe_instance_topology()


def test_raised_rate_lets_20_quick_calls_pass(url: str) -> None:
    # Given a raised rate of 1000 tokens per second (burst 1)
    cfg = _config(url, rate=1000, burst=1)
    assert (cfg["rate"], cfg["burst"]) == (1000, 1)
    ec2 = _ec2(url)
    # When 20 calls are made as fast as possible / Then none is throttled
    for _ in range(20):
        ec2.describe_instance_topology()


def test_rate_and_burst_come_from_the_environment() -> None:
    # Given a server started with TOPOGOV_EC2_TOPOLOGY_RATE/BURST
    with _server({"TOPOGOV_EC2_TOPOLOGY_RATE": "0.5", "TOPOGOV_EC2_TOPOLOGY_BURST": "3"}) as (proc, url):
        # Then its configuration reflects them
        cfg = _http(f"{url}/_topogov/ec2/config")
        assert (cfg["rate"], cfg["burst"]) == (0.5, 3)
        # And three quick calls pass, the fourth is throttled
        ec2 = _ec2(url)
        for _ in range(3):
            ec2.describe_instance_topology()
        with pytest.raises(ClientError) as exc:
            ec2.describe_instance_topology()
        assert _error(exc)[0] == "RequestLimitExceeded"
        # And SIGINT stops the launcher with exit status 0
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=15) == 0


def test_unknown_ids_can_be_made_errors(url: str) -> None:
    # Given the optional strict mode (the documented default answers unknown ids by absence)
    _config(url, unknown_ids="error")
    ec2 = _ec2(url)
    (iid,) = _launch(ec2, 1)
    # When a malformed or a nonexistent id is asked for / Then EC2's usual id errors come back
    with pytest.raises(ClientError) as exc:
        ec2.describe_instance_topology(InstanceIds=[iid, "node-1"])
    assert _error(exc) == ("InvalidInstanceID.Malformed", 'Invalid id: "node-1"', 400)
    with pytest.raises(ClientError) as exc:
        ec2.describe_instance_topology(InstanceIds=[iid, "i-0123456789abcdef0"])
    assert _error(exc)[0] == "InvalidInstanceID.NotFound"


def test_default_configuration_is_served(url: str) -> None:
    _http(f"{url}/_topogov/ec2/reset", "POST")
    cfg = _http(f"{url}/_topogov/ec2/config")
    assert (cfg["rate"], cfg["burst"], cfg["default_max_results"]) == (1, 1, 20)
    assert cfg["enforce_regions"] is True and cfg["unknown_ids"] == "omit"
    assert cfg["layouts"] == [
        {"availability_zone": None, "fanout": [2, 2, 4], "per_leaf": 4},
        {"availability_zone": None, "fanout": [1, 1, 1, 2], "per_leaf": 2},
    ]
    with pytest.raises(urllib.error.HTTPError) as exc:
        _http(f"{url}/_topogov/ec2/nothing-here")
    assert exc.value.code == 404


# --- launcher in-process -----------------------------------------------------------------------


def test_start_in_thread_serves_the_action() -> None:
    from topogov_local.aws.server import start_in_thread

    server, base = start_in_thread()
    try:
        assert base.startswith("http://127.0.0.1:")
        _config(base, rate=1000, burst=10)
        ec2 = _ec2(base, region="us-east-2")
        (iid,) = _launch(ec2, 1, "trn1.32xlarge", "us-east-2a")
        (item,) = ec2.describe_instance_topology(InstanceIds=[iid])["Instances"]
        assert item["InstanceType"] == "trn1.32xlarge" and len(item["NetworkNodes"]) == 3
    finally:
        server.stop()


def test_install_is_lazy_and_idempotent() -> None:
    # Given a fresh interpreter that imports the emulation
    code = (
        "from moto.ec2.responses import EC2Response\n"
        "from moto.ec2.models.instances import Instance\n"
        "from topogov_local import ec2_topology as t\n"
        "assert not hasattr(EC2Response, 'describe_instance_topology')\n"
        "t.install(); run, start = EC2Response.run_instances, Instance.start\n"
        "t.install()\n"
        "assert EC2Response.run_instances is run and Instance.start is start\n"
        "assert EC2Response.describe_instance_topology is not None and t.is_installed()\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO / "lambdas"))
    # When it installs twice / Then nothing happened at import and the second install is a no-op
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=60)
