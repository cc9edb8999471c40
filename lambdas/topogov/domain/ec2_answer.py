"""Parse DescribeInstanceTopology answers (pure, no I/O)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from topogov.domain.labels import InstanceTopology

MIN_LAYERS = 1


def parse_instances(instances: Iterable[Mapping[str, Any]], fetched_at: float) -> dict[str, InstanceTopology]:
    """Map ``Instances`` entries of DescribeInstanceTopology pages to instance id -> topology.

    EC2 returns ``NetworkNodes`` top layer first: three layers for most types, four for
    p6-b200/p6-b300. Entries without an id or without network nodes are dropped (EC2 never sends
    them; a defensive parse keeps one odd entry from failing a pass).
    """
    result: dict[str, InstanceTopology] = {}
    for item in instances:
        instance_id = item.get("InstanceId")
        nodes = tuple(str(n) for n in item.get("NetworkNodes") or ())
        if not instance_id or len(nodes) < MIN_LAYERS:
            continue
        result[instance_id] = InstanceTopology(
            instance_id=instance_id,
            network_nodes=nodes,
            instance_type=item.get("InstanceType", ""),
            availability_zone=item.get("AvailabilityZone", ""),
            zone_id=item.get("ZoneId", ""),
            group_name=item.get("GroupName", ""),
            fetched_at=fetched_at,
        )
    return result


def batches(ids: Iterable[str], size: int = 100) -> list[list[str]]:
    """Split instance ids into request batches (DescribeInstanceTopology takes at most 100)."""
    if not 1 <= size <= 100:
        raise ValueError("batch size must be 1..100")
    seq = list(ids)
    return [seq[i : i + size] for i in range(0, len(seq), size)]


# --- asking by ids or listing by type ----------------------------------------------------------
#
# DescribeInstanceTopology (EC2 API reference,
# https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeInstanceTopology.html) takes at
# most 100 ``InstanceIds``; ``MaxResults`` (1..100) "can't" be given with them, and its "Default: 20"
# is the page size when it is not given. Whether an id query
# of 100 comes back in one page is not documented. So the cost of asking about N instances by ids
# is ceil(N/100) calls when EC2 answers ids in one page, and ceil(N/100) * ceil(100/p) when it pages
# them at p (500 calls for 10,000 ids at p = 20). A listing filtered by ``instance-type`` with
# ``MaxResults=100`` costs one call per 100 instances of those types in the account, the cluster's
# or not. The rule (``listing_pays``): ask by ids (never worse while ids come back 100 a page), and
# list by type only once EC2 has been seen paging ids, and only while the listing is the cheaper of
# the two: before it, judged on the cluster's own instances of those types (a lower bound of the
# account's); during it, on the share of its pages that are instances asked about
# (``listing_still_pays``).


def id_calls(wanted: int, id_page: int) -> int:
    """Calls to ask about ``wanted`` instances by ids, 100 a request, EC2 paging answers at ``id_page``."""
    full, rest = divmod(wanted, 100)
    per_full = math.ceil(100 / id_page)
    return full * per_full + math.ceil(rest / id_page)


def listing_pays(wanted: int, cluster_of_types: int, id_page: int) -> bool:
    """Whether listing by instance type with ``MaxResults=100`` is expected to cost fewer calls than
    asking about ``wanted`` instances by ids at EC2's id page ``id_page``. The listing reads at least
    ``max(wanted, cluster_of_types)`` instances (the cluster's own of those types are all in it)."""
    if id_page >= 100 or wanted == 0:
        return False  # by ids it costs ceil(wanted/100): no listing can cost less
    return math.ceil(max(wanted, cluster_of_types) / 100) < id_calls(wanted, id_page)


def listing_still_pays(listed: int, hits: int, id_page: int) -> bool:
    """During a listing: a page of 100 finds ``100 * share`` asked-about instances for one call, ids
    find ``id_page`` per call; listing goes on while its share so far beats ``id_page / 100``."""
    return listed == 0 or hits * 100 > id_page * listed
