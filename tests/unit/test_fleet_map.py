"""The fleet node by node (domain/fleet_map.py): the running jobs as the snapshot keeps them, one row
per GPU node with the jobs on it, and what a member sees of other teams' jobs; the capacity view's
domain for the largest job that could start now."""

from __future__ import annotations

import gzip
import json

from topogov.domain.capacity import capacity_view
from topogov.domain.fleet_map import NODE_COLUMNS, node_rows, running_jobs, visible_jobs
from topogov.domain.placement_quality import JobPod
from topogov.domain.quantity import Resources
from topogov.domain.snapshot import Snapshot
from topogov.domain.tree import NodeCapacity

P5 = Resources(8, 32, 191450, 2002 * 2**30)
CPU_ONLY = Resources(0, 0, 8000, 16 * 2**30)


def node(name, path, used=0, available=True, alloc=P5):
    return NodeCapacity(name, path, "p5.48xlarge", "", alloc, Resources(used, 0, 0, 0), available)


NODES = {
    n.name: n
    for n in [
        node("b1", ("L1", "L2a", "L3b"), used=8),
        node("a2", ("L1", "L2a", "L3a"), used=4),
        node("a1", ("L1", "L2a", "L3a"), used=8),
        node("down", ("L1", "L2a", "L3b"), available=False),
        NodeCapacity("cpu", ("L1", "L2a", "L3a"), "c5.2xlarge", "", CPU_ONLY),
    ]
}
PODS = [
    JobPod("ns-a", "train", "uid-1", "a1", "required", "high", 4),
    JobPod("ns-a", "train", "uid-1", "a1", "required", "high", 4),
    JobPod("ns-a", "train", "uid-1", "a2", "required", "high", 4),
    JobPod("ns-b", "secret", "uid-2", "b1", "preferred", None, 8),
]


def test_running_jobs_group_pods_by_job_with_gpus_per_node():
    assert running_jobs(PODS) == [
        {"namespace": "ns-a", "job": "train", "job_uid": "uid-1", "priority_class": "high",
         "mode": "required", "nodes": {"a1": 8, "a2": 4}},
        {"namespace": "ns-b", "job": "secret", "job_uid": "uid-2", "priority_class": None,
         "mode": "preferred", "nodes": {"b1": 8}},
    ]  # fmt: skip


def test_one_row_per_gpu_node_in_network_order_with_its_jobs():
    rows, jobs = node_rows(NODES, running_jobs(PODS))
    by = [dict(zip(NODE_COLUMNS, r, strict=True)) for r in rows]
    assert [r["name"] for r in by] == ["a1", "a2", "b1", "down"]  # the CPU node is no GPU cell
    assert [r["free_gpus"] for r in by] == [0, 4, 0, 0]  # a node Kueue leaves out has nothing free
    assert by[3]["available"] is False and by[0]["path"] == ["L1", "L2a", "L3a"]
    assert [r["jobs"] for r in by] == [[0], [0], [1], []]
    assert jobs[0] == {"namespace": "ns-a", "job": "train", "priority_class": "high", "mode": "required",
                       "gpus": 12, "nodes": 2}  # fmt: skip


def test_a_member_sees_other_teams_jobs_by_team_only():
    _, jobs = node_rows(NODES, running_jobs(PODS))
    team_of = {"ns-a": "team-a", "ns-b": "team-b"}
    member = visible_jobs(jobs, team_of=team_of, shows=lambda team: team == "team-a")
    assert [(j["team"], j["job"]) for j in member] == [("team-a", "train"), ("team-b", None)]
    admin = visible_jobs(jobs, team_of=team_of, shows=lambda team: True)
    assert [j["job"] for j in admin] == ["train", "secret"]
    # a namespace no team owns is shown by its name, and its jobs are no member's
    other = visible_jobs(jobs, team_of={}, shows=lambda team: team == "team-a")
    assert [(j["team"], j["job"]) for j in other] == [("ns-a", None), ("ns-b", None)]


def test_the_snapshot_keeps_the_running_jobs():
    snap = Snapshot(nodes=dict(NODES), running=running_jobs(PODS))
    again = Snapshot.from_json(json.loads(json.dumps(snap.to_json())))
    assert again.running == snap.running


def test_the_largest_job_now_names_the_domain_kueue_would_pick():
    nodes = {}
    for i in range(16):  # 2 layer-2 x 2 layer-3 x 4 nodes: b0 has 3 busy nodes, b1 2; c3 none
        used = 8 if i in (0, 5, 6, 9, 10) else 0
        nodes[f"n{i}"] = node(f"n{i}", ("a", f"b{i // 8}", f"c{i // 4}"), used=used)
    (p5,) = capacity_view(nodes)["instance_types"]
    by = {lv["level"]: lv for lv in p5["levels"]}
    assert (by["layer-3"]["largest_now_nodes"], by["layer-3"]["largest_now_domain"]) == (4, "c3")
    assert (by["layer-2"]["largest_now_nodes"], by["layer-2"]["largest_now_domain"]) == (6, "b1")
    full = capacity_view({k: node(k, n.path, used=8) for k, n in nodes.items()})["instance_types"][0]
    assert all(lv["largest_now_domain"] is None for lv in full["levels"])


def test_ten_thousand_nodes_fit_the_payload_budget():
    """The issue's budget: at most 2 MB compressed per refresh at 10,000 nodes and 2,000 jobs."""
    nodes = {}
    pods = []
    for i in range(10_000):
        name = f"i-{i:017x}.ec2.internal"
        path = (f"nn-{i // 1024:017x}", f"nn-{i // 256:017x}1", f"nn-{i // 4:017x}2")
        nodes[name] = node(name, path, used=8)
        j = i // 5
        pods += [JobPod(f"ns-{j % 3}", f"bench-{j}", f"uid-{j}", name, "required", None, 4)] * 2
    rows, jobs = node_rows(nodes, running_jobs(pods))
    assert len(rows) == 10_000 and len(jobs) == 2_000
    doc = {"node_columns": list(NODE_COLUMNS), "nodes": rows, "jobs": jobs}
    body = json.dumps(doc, separators=(",", ":")).encode()
    assert len(gzip.compress(body, 6)) < 2_000_000
