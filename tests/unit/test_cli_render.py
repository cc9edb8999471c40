"""The CLI's text: where a job landed, ages, the topology tree, pass summaries; long text wraps only
for a terminal (or $COLUMNS), never for a pipe."""

from __future__ import annotations

import datetime as dt

import pytest

from topogov_cli.common import fields
from topogov_cli.jobs import age, domain_rows, job_text, landed_text
from topogov_cli.render import joined, tree_text


@pytest.fixture(autouse=True)
def _a_pipe(monkeypatch):
    """Output to a pipe (pytest's workers set COLUMNS, which would wrap as on a terminal)."""
    monkeypatch.delenv("COLUMNS", raising=False)


def placement(*nodes: tuple[str, int, list[str] | None], phases=None, unknown=()):
    by_node = [{"node": n, "pods": p, "instance_type": "p5.48xlarge", "path": path} for n, p, path in nodes]
    placed = sum(p for _, p, _ in nodes)
    paths = [tuple(path) for _, _, path in nodes if path]
    depth = min((len(p) for p in paths), default=0)
    domains = [{"level": f"layer-{i}", "domains": len({p[:i] for p in paths})} for i in range(1, depth + 1)]
    tight = [d for d in domains if d["domains"] == 1]
    return {
        "pods": placed,
        "placed": placed,
        "nodes": len(nodes),
        "phases": phases or {"Running": placed},
        "domains": domains,
        "tightest": {"level": tight[-1]["level"], "domain": paths[0][len(tight) - 1]} if tight else None,
        "by_node": by_node,
        "unknown_nodes": list(unknown),
    }


def test_landed_names_the_tightest_domain_or_the_spread():
    one = placement(("i-1", 2, ["a", "b", "c"]), ("i-2", 2, ["a", "b", "c"]))
    assert landed_text(one) == "4 of 4 pods on 2 nodes, one layer-3 domain (c)  [4 Running]"
    spread = placement(("i-1", 1, ["a", "b", "c"]), ("i-2", 1, ["a", "x", "y"]))
    assert landed_text(spread) == "2 of 2 pods on 2 nodes, one layer-1 domain (a)  [2 Running]"
    apart = placement(("i-1", 1, ["a", "b", "c"]), ("i-2", 1, ["z", "x", "y"]))
    assert landed_text(apart) == (
        "2 of 2 pods on 2 nodes, spread over 2 layer-1 domains, 2 layer-2 domains, 2 layer-3 domains"
        "  [2 Running]"
    )
    assert landed_text(None) is None and landed_text({"pods": 0}) is None


def test_domain_rows_name_the_shared_layers_once_and_group_by_the_deepest():
    rows = domain_rows(
        placement(("i-1", 2, ["a", "b", "c"]), ("i-2", 1, ["a", "b", "d"]), ("i-3", 1, ["a", "b", "d"]))
    )
    assert rows[0] == "  all under layer-1 a, layer-2 b"
    assert rows[1].split() == ["LAYER-3", "NODES", "PODS"]
    assert [r.split() for r in rows[2:4]] == [["c", "1", "2"], ["d", "2", "2"]]
    assert rows[4] == "  nodes: i-1, i-2, i-3"


def test_domain_rows_stop_after_twelve_domains():
    many = placement(*((f"i-{i}", 1, ["a", f"b{i}", f"c{i}"]) for i in range(20)))
    rows = domain_rows(many)
    assert rows[-1] == "  ... 8 more domains (--output json lists every node)"
    assert not any(r.startswith("  nodes:") for r in rows)


def test_a_placed_job_shows_where_it_landed_not_where_the_api_saw_room():
    view = {
        "name": "j", "team": "team-a", "namespace": "ns", "status": "Running", "state": "submitted",
        "decision": {"priority_class": "p", "priority_value": 1, "pods": 2,
                     "topology": {"mode": "required", "level": "layer-3", "domain_now": "nn-then"}},
        "placement": placement(("i-1", 2, ["a", "b", "c"])), "events": [],
    }  # fmt: skip
    text = job_text(view)
    assert "landed     2 of 2 pods on 1 node, one layer-3 domain (c)" in text
    assert "domain then" not in text and "where\n  all under layer-1 a, layer-2 b" in text
    pending = {**view, "status": "Pending", "placement": None, "why_pending": "Kueue says"}
    assert "domain then  nn-then" in job_text(pending) and "why pending  Kueue says" in job_text(pending)


def test_a_relaxed_job_says_so_on_its_topology_line():
    view = {
        "name": "j", "team": "t", "status": "Running", "events": [],
        "decision": {"priority_class": "p", "priority_value": 1, "pods": 1,
                     "topology": {"mode": "required", "level": "topology.k8s.aws/network-node-layer-2"}},
        "fallback": {"at": "2026-12-01T10:00:00Z", "level": "topology.k8s.aws/network-node-layer-2",
                     "reason": "r"},
    }  # fmt: skip
    assert "topology   required layer-2, relaxed to preferred layer-2 at 2026-12-01T10:00:00Z" in job_text(
        view
    )


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(5, "5s"), (59, "59s"), (60, "1m"), (7199, "119m"), (7200, "2h"), (3 * 86400, "3d")],
)
def test_ages_read_like_kubectl(seconds, shown):
    stamp = (dt.datetime.now(dt.UTC) - dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert age(stamp) == shown
    assert age(None) == "-" and age("not a time") == "not a time"


def test_long_values_wrap_under_themselves_only_for_a_terminal(monkeypatch):
    long = "word " * 40
    monkeypatch.delenv("COLUMNS", raising=False)
    assert fields([("why", long.strip())]).count("\n") == 0  # a pipe: one line
    monkeypatch.setenv("COLUMNS", "60")
    wrapped = fields([("key", "v"), ("why", long.strip())]).splitlines()
    assert max(len(line) for line in wrapped) <= 60 and all(line.startswith("     ") for line in wrapped[2:])


def test_joined_breaks_between_parts_and_wraps_a_part_longer_than_a_line():
    text = joined(["alpha " * 5, "beta " * 5, "x" * 30 + " " + "y" * 90, "end"], width=40)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 40
    assert lines[-1].strip() == "end" and "" not in lines


def test_the_tree_has_one_line_per_domain_with_free_gpus():
    def dom(layer, id_, n, alloc, req, children=()):
        return {"layer": layer, "id": id_, "node_count": n, "allocatable": {"gpu": alloc},
                "requested": {"gpu": req}, "children": list(children)}  # fmt: skip

    tree = {
        "domains": [dom(1, "nn-a", 8, 64, 16, [dom(2, "nn-b", 4, 32, 16), dom(2, "nn-c", 4, 32, 0)])],
        "unplaced": ["x", "y", "z"],
    }
    lines = tree_text(tree).splitlines()
    assert lines[0].split() == ["nn-a", "layer-1", "8", "nodes", "48/64", "GPUs", "free"]
    assert lines[1].startswith("  nn-b") and "16/32 GPUs free" in lines[1]
    assert lines[-1] == "no topology labels: 3 nodes (x, y and 1 more)"
    assert len(tree_text(tree, depth=1).splitlines()) == 2
