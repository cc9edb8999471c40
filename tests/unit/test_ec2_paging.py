"""How the EC2 adapter pays for a first pass: by ids, or listing by instance type once EC2 is seen
paging id queries (pure: the rule in domain/ec2_answer.py, and the adapter against an in-memory
client that pages as DescribeInstanceTopology is documented to: at most 100 ids, ``MaxResults``
refused beside them, 20 a page by default)."""

import math

import pytest

from topogov.adapters.ec2 import Pacer, TopologyClient
from topogov.domain.ec2_answer import id_calls, listing_pays, listing_still_pays


def iid(n):
    return f"i-{n:017x}"


class FakeEc2Client:
    """``describe_instance_topology`` over ``instances`` (id -> type, in launch order); id queries
    answered ``id_page`` a page, listings ``MaxResults`` (default 20) a page."""

    def __init__(self, instances, id_page=100):
        self.instances = dict(instances)
        self.id_page = id_page
        self.requests = []

    def describe_instance_topology(self, InstanceIds=None, MaxResults=None, Filters=None, NextToken=None):
        self.requests.append({"ids": len(InstanceIds or ()), "max": MaxResults, "filters": Filters})
        if InstanceIds and MaxResults is not None:
            raise AssertionError("InvalidParameterCombination: MaxResults with InstanceIds")
        assert len(InstanceIds or ()) <= 100
        if InstanceIds:
            matching, page = [i for i in InstanceIds if i in self.instances], self.id_page
        else:
            types = {v for f in Filters or () if f["Name"] == "instance-type" for v in f["Values"]}
            matching = [i for i, t in self.instances.items() if not types or t in types]
            page = MaxResults or 20
        start = int(NextToken or 0)
        chunk = matching[start : start + page]
        out = {
            "Instances": [
                {"InstanceId": i, "InstanceType": self.instances[i], "NetworkNodes": ["a", "b", i]}
                for i in chunk
            ]
        }
        if start + page < len(matching):
            out["NextToken"] = str(start + page)
        return out


def client(fake, **kw):
    return TopologyClient(fake, Pacer(1e9), **kw)


def test_the_rule_lists_only_when_ec2_pages_ids_and_the_cluster_is_most_of_what_it_would_list():
    assert id_calls(10_000, 100) == 100 and id_calls(10_000, 20) == 500 and id_calls(130, 20) == 7
    assert not listing_pays(10_000, 10_000, 100)  # ids in one page: never worse than a listing
    assert listing_pays(10_000, 10_000, 20)  # 100 listing calls against 500
    assert not listing_pays(100, 10_100, 20)  # 100 new nodes: 5 calls by ids, >= 101 listing
    assert listing_still_pays(100, 90, 20) and not listing_still_pays(200, 30, 20)


@pytest.mark.parametrize("id_page", [100, 20])
def test_a_first_pass_of_1000_costs_about_ceil_n_over_100_calls_either_way(id_page):
    fleet = {iid(i): "p5.48xlarge" for i in range(1000)}
    fake = FakeEc2Client(fleet, id_page=id_page)
    out = client(fake).describe(list(fleet), float("inf"), fleet)
    assert len(out.answers) == 1000 and sorted(out.asked) == sorted(fleet) and not out.unasked
    assert out.calls <= math.ceil(1.1 * 10)  # 10 at 100 a page; 1 call to see paging + 10 listing
    assert all(r["max"] is None for r in fake.requests if r["ids"])  # MaxResults never beside ids


def test_ids_only_at_20_a_page_costs_five_times_as_many_calls():
    fleet = {iid(i): "p5.48xlarge" for i in range(1000)}
    out = client(FakeEc2Client(fleet, id_page=20), listing=False).describe(list(fleet), float("inf"), fleet)
    assert out.calls == 50 and len(out.answers) == 1000


def test_a_complete_listing_settles_the_ids_it_did_not_find_as_absent():
    fleet = {iid(i): "p5.48xlarge" for i in range(300)}
    running = {k: v for k, v in fleet.items() if k != iid(7)}  # stopped: not in any answer
    out = client(FakeEc2Client(running, id_page=20)).describe(list(fleet), float("inf"), fleet)
    assert iid(7) in out.asked and iid(7) not in out.answers and not out.unasked


def test_a_listing_that_finds_mostly_other_instances_stops_and_the_rest_go_by_ids():
    # Given the account runs 2,000 p5 of another cluster first, then the 300 of this one
    others = {iid(10_000 + i): "p5.48xlarge" for i in range(2000)}
    fleet = {iid(i): "p5.48xlarge" for i in range(300)}
    fake = FakeEc2Client({**others, **fleet}, id_page=20)
    out = client(fake).describe(list(fleet), float("inf"), fleet)
    # Then: one id call shows paging, one listing page finds none of ours, the rest by ids
    assert len(out.answers) == 300 and not out.unasked
    listings = [r for r in fake.requests if not r["ids"]]
    assert len(listings) == 1 and listings[0]["max"] == 100
    assert out.calls == 1 + 1 + id_calls(300 - 20, 20)


def test_a_warm_client_remembers_the_id_page_and_a_small_ask_goes_by_ids():
    fleet = {iid(i): "p5.48xlarge" for i in range(1000)}
    fake = FakeEc2Client(fleet, id_page=20)
    tc = client(fake)
    tc.describe(list(fleet), float("inf"), fleet)
    assert tc.id_page == 20
    fake.requests.clear()
    out = tc.describe([iid(3), iid(4)], float("inf"), fleet)
    assert out.calls == 1 and fake.requests[0]["ids"] == 2


def test_nodes_without_an_instance_type_are_asked_by_ids():
    fleet = {iid(i): "p5.48xlarge" for i in range(500)}
    fleet[iid(999)] = ""
    fake = FakeEc2Client({**fleet, iid(999): "p5.48xlarge"}, id_page=20)
    out = client(fake).describe(list(fleet), float("inf"), fleet)
    assert iid(999) in out.answers and len(out.answers) == 501
