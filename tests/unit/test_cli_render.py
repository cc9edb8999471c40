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


def test_domain_rows_are_a_small_tree_domains_nodes_pod_indexes():
    p = placement(("i-1", 2, ["a", "b", "c"]), ("i-2", 1, ["a", "b", "d"]), ("i-3", 1, ["a", "b", "d"]))
    for row, idx in zip(p["by_node"], ([0, 1], [2], [3]), strict=True):
        row["indexes"] = idx
    assert domain_rows(p) == [
        "  layer-1 a > layer-2 b",
        "    layer-3 c  1 node, 2 pods (0-1)",
        "      i-1  pods 0-1",
        "    layer-3 d  2 nodes, 2 pods (2-3)",
        "      i-2  pods 2",
        "      i-3  pods 3",
    ]


def test_domain_rows_stop_after_twelve_domains_and_list_nodes_of_small_jobs_only():
    many = placement(*((f"i-{i}", 1, ["a", f"b{i}", f"c{i}"]) for i in range(20)))
    rows = domain_rows(many)
    assert rows[-1] == "  ... 8 more domains (--output json lists every node)"
    assert not any(r.startswith("      i-") for r in rows)  # 20 nodes: no node lines


def test_a_placed_job_shows_where_it_landed_not_where_the_api_saw_room():
    view = {
        "name": "j", "team": "team-a", "namespace": "ns", "status": "Running", "state": "submitted",
        "decision": {"priority_class": "p", "priority_value": 1, "pods": 2,
                     "topology": {"mode": "required", "level": "layer-3", "domain_now": "nn-then"}},
        "placement": placement(("i-1", 2, ["a", "b", "c"])), "events": [],
    }  # fmt: skip
    text = job_text(view)
    assert "landed     2 of 2 pods on 1 node, one layer-3 domain (c)" in text
    assert "fit then" not in text and "where\n  layer-1 a > layer-2 b" in text
    pending = {**view, "status": "Pending", "placement": None, "why_pending": "Kueue says"}
    assert "fit then     nn-then" in job_text(pending) and "why pending  Kueue says" in job_text(pending)


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


def test_a_wide_jobs_table_leaves_out_charge_then_age_and_says_so(monkeypatch):
    from topogov_cli.render import fitted_table

    headers = ["NAME", "CHARGE", "TOPOLOGY", "AGE"]
    rows = [["a-very-long-job-name", "released", "required layer-2", "12m"]]
    full = fitted_table(headers, rows, None, optional=("CHARGE", "AGE"))
    assert full.splitlines()[0].split() == headers and "left out" not in full
    assert fitted_table(headers, rows, 100, optional=("CHARGE", "AGE")) == full  # fits: unchanged
    narrow = fitted_table(headers, rows, 45, optional=("CHARGE", "AGE")).splitlines()
    assert narrow[0].split() == ["NAME", "TOPOLOGY", "AGE"] and len(narrow[1]) <= 45
    assert narrow[-1] == "(CHARGE left out to fit 45 columns; --output json has every field)"
    tiny = fitted_table(headers, rows, 30, optional=("CHARGE", "AGE")).splitlines()
    assert tiny[0].split() == ["NAME", "TOPOLOGY"] and tiny[-1].startswith("(CHARGE, AGE left out")


def test_a_relaxed_job_reads_relaxed_in_the_list():
    from topogov_cli.jobs import asked_text

    asked = {"mode": "required", "level": "topology.k8s.aws/network-node-layer-2"}
    assert asked_text({"topology": asked}) == "required layer-2"
    assert asked_text({"topology": asked, "fallback_at": "2026-12-01T10:00:00Z"}) == "relaxed layer-2"


def test_capacity_text_names_when_and_the_largest_job_now_per_layer():
    from topogov_cli.render import capacity_text

    free = [{"domain": "nn-a", "free_gpus": 32}, {"domain": "nn-b", "free_gpus": 8}]
    level = {"level": "layer-3", "domains": 2, "wholly_free": 1, "largest_now_nodes": 4,
             "largest_empty_nodes": 4, "free": free}  # fmt: skip
    p5 = {"instance_type": "p5.48xlarge", "nodes": 8, "gpus_per_node": 8, "free_gpus": 40, "levels": [level]}
    view = {"generated_at": 1796125891.5, "instance_types": [p5]}
    lines = capacity_text(view).splitlines()
    assert lines[0] == "as of 2026-12-01T11:51:31Z (the snapshot of the reconcile pass)"
    assert lines[1] == "p5.48xlarge: 8 nodes, 40 of 64 GPUs free"
    assert lines[2].split() == ["LAYER", "DOMAINS", "WHOLLY", "FREE", "LARGEST", "JOB", "NOW", "IF", "EMPTY"]
    assert lines[3].split() == ["layer-3", "2", "1", "4", "nodes", "4", "nodes"]
    assert lines[4] == "  most free GPUs at layer-3: nn-a 32, nn-b 8"
    assert capacity_text({"instance_types": []}) == "no GPU nodes with topology labels\n"


def test_placement_line_gives_shares_overall_and_per_mode():
    from topogov_cli.render import placement_line

    quality = {"jobs": 4, "in_one_domain": {"layer-1": 1.0, "layer-2": 0.75, "layer-3": 0.25},
               "modes": {"required": {"jobs": 3, "in_one_domain": {"layer-3": 1 / 3}}}}  # fmt: skip
    assert placement_line(quality) == (
        "placement: 4 running multi-pod jobs, in one domain: layer-1 100%, layer-2 75%, layer-3 25%\n"
        "  required (3): layer-3 33%"
    )
    assert placement_line({"jobs": 0}) == "placement: no running multi-pod job"


def test_a_waiting_job_names_its_own_teams_jobs_and_only_the_team_of_others():
    from topogov_cli.jobs import waiting_lines

    w = {"level": "layer-2", "domain": "nn-x", "nodes": 16, "pods": 16, "pods_now": 12,
         "occupants": [{"team": "team-a", "job": None, "gpus": 32, "priority_class": "training-priority"}],
         "to_free": [{"team": "team-a", "job": None, "gpus": 32, "priority_class": "training-priority",
                      "lower_priority": True}]}  # fmt: skip
    lines = waiting_lines(w)
    assert lines[1] == "  closest    layer-2 domain nn-x (16 nodes): holds 12 of 16 pods now"
    assert lines[2] == "  occupied   a team-a job (32 GPUs, training-priority)"
    assert "a team-a job (32 GPUs, training-priority) - lower priority, preemptible" in lines[3]
    w["occupants"][0]["job"] = "mine"
    assert waiting_lines(w)[2] == "  occupied   team-a's mine (32 GPUs, training-priority)"


def test_a_teams_placement_is_two_lines_the_team_then_the_fleet():
    from topogov_cli.teams import placement_text

    shares = {"layer-1": 1.0, "layer-2": 2 / 3, "layer-3": 1 / 3}
    placement = {"team": {"jobs": 3, "in_one_domain": shares}, "fleet": {"jobs": 4, "in_one_domain": shares}}
    assert placement_text(placement) == (
        "in one domain, of 3 running multi-pod jobs: layer-1 100%, layer-2 67%, layer-3 33%\n"
        "              the fleet, of 4 running multi-pod jobs: layer-1 100%, layer-2 67%, layer-3 33%"
    )
    assert placement_text({"team": {"jobs": 0}, "fleet": {}}).splitlines()[0] == (
        "in one domain: no running multi-pod job"
    )
    assert placement_text(None) is None


def test_a_hyperpodpytorchjob_is_marked_read_only_in_the_list():
    from topogov_cli.jobs import name_text, read_only_notes

    ours = {"name": "train"}
    theirs = {"name": "llama", "read_only": True, "kind": "HyperPodPyTorchJob",
              "submitted_with": "hyp create hyp-pytorch-job"}  # fmt: skip
    assert (name_text(ours), name_text(theirs)) == ("train", "llama *")
    assert read_only_notes([ours, theirs, {**theirs, "name": "other"}]) == [
        "* a HyperPodPyTorchJob (submitted with `hyp create hyp-pytorch-job`): shown read-only; Topogov "
        "never charges, changes or cancels it"
    ]
    assert read_only_notes([ours]) == []
