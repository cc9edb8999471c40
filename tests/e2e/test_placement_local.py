"""Where jobs landed, how tight they are and what capacity is left, against the real Kueue (issue
16): a tight and a spread job get their verdicts in every view; the reconcile pass computes the
fleet's placement quality from the pods it already lists; the capacity view's "largest job that
could start now" is what the real Kueue admits, and one node more waits, with the closest domain
and what occupies it."""

from __future__ import annotations

import pytest

from tests.stacks import labelled_stack, wait_until
from topogov_cli.sigv4 import credentials_for_profile, signed_request
from topogov_local import events
from topogov_local.lambda_context import LocalContext

FLEET = "p5.48xlarge=32"  # one layer-1 domain: 2 layer-2 domains of 16 nodes, 8 layer-3 of 4


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with labelled_stack(tmp_path_factory.mktemp("placement"), FLEET, api_port=0, api_snapshot_ttl_s=0) as s:
        yield s


def call(stack, method, path, profile="topogov-team-a", body=None):
    creds = credentials_for_profile(profile, str(stack.credentials))
    return signed_request(method, stack.api.url + path, credentials=creds, region="us-east-1", json_body=body)


def gpu_job(name, pods, topology, run_s=600):
    return {"job_name": name, "image": "x", "accelerators": 8, "replica_count": pods, "topology": topology,
            "command": ["sleep", str(run_s)]}  # fmt: skip


def running(stack, team, name, profile):
    return wait_until(
        lambda: (
            (v := call(stack, "GET", f"/v1/jobs/{team}/{name}", profile).json())["status"] == "Running"
            and v["placement"]["placed"] == v["decision"]["pods"]
            and v
        ),
        f"{name} runs",
    )


def test_placement_verdicts_fleet_quality_and_capacity_against_kueue(stack):
    from topogov.handlers.reconcile import handler

    l3 = {"mode": "required", "level": "layer-3"}
    # a tight job (4 pods required in one layer-3 domain) and a spread one (6 pods preferred at
    # layer-3: more than a layer-3 domain holds, so Kueue spreads it over two, inside one layer-2)
    assert call(stack, "POST", "/v1/jobs", body=gpu_job("tight", 4, l3)).status_code == 201
    spread = gpu_job("spread", 6, {"mode": "preferred", "level": "layer-2"})
    assert call(stack, "POST", "/v1/jobs", body=spread).status_code == 201
    tight = running(stack, "team-a", "tight", "topogov-team-a")
    wide = running(stack, "team-a", "spread", "topogov-team-a")
    assert tight["placement"]["verdict"] == "layer-3 ×1" and tight["placement"]["inside_asked"] is True
    assert wide["placement"]["verdict"] == "layer-2 ×1 (2 × L3)" and wide["placement"]["inside_asked"] is True
    assert sorted(i for r in wide["placement"]["by_node"] for i in r["indexes"]) == list(range(6))
    listed = {j["name"]: j for j in call(stack, "GET", "/v1/jobs?team=team-a").json()["jobs"]}
    assert (
        listed["tight"]["placement"] == "layer-3 ×1"
        and listed["spread"]["placement"] == "layer-2 ×1 (2 × L3)"
    )

    # the next pass computes the fleet's placement quality from the pods it lists anyway
    result = handler(events.scheduled_event(), LocalContext())
    quality = result["placement"]
    assert quality["jobs"] == 2 and quality["in_one_domain"] == {
        "layer-1": 1.0,
        "layer-2": 1.0,
        "layer-3": 0.5,
    }
    assert quality["modes"]["required"]["in_one_domain"]["layer-3"] == 1.0
    assert quality["modes"]["preferred"]["in_one_domain"]["layer-3"] == 0.0
    team = call(stack, "GET", "/v1/teams/team-a").json()["placement"]
    assert team["team"]["jobs"] == 2 and team["fleet"]["in_one_domain"]["layer-3"] == 0.5

    # capacity: 10 of 32 nodes are busy. Wherever Kueue put the two jobs, some layer-2 domain keeps
    # at least 10 whole nodes free; the model says how many (the snapshot of the pass just run)
    view = call(stack, "GET", "/v1/topology?view=capacity").json()
    (p5,) = view["instance_types"]
    assert p5["free_gpus"] == (32 - 10) * 8
    layer2 = level(p5, "layer-2")
    assert layer2["largest_empty_nodes"] == 16 and layer2["domains"] == 2
    size = layer2["largest_now_nodes"]
    assert size == max(d["free_nodes"] for d in layer2["free"]) and size >= 10, layer2
    # ... and the real Kueue agrees: a job of that many nodes required at layer-2 starts (team-b),
    # in the domain the decision named
    fits = gpu_job("fits", size, {"mode": "required", "level": "layer-2"})
    answer = call(stack, "POST", "/v1/jobs", profile="topogov-team-b", body=fits).json()
    told = answer["decision"]["topology"]
    assert told["reason"].startswith("required at layer-2: fits now in nn-"), told
    assert len(told["nodes_now"]) == size
    placed = running(stack, "team-b", "fits", "topogov-team-b")
    assert placed["placement"]["verdict"].startswith("layer-2 ×1")
    assert {r["path"][1] for r in placed["placement"]["by_node"]} == {told["domain_now"]}
    # node by node: the model's BestFit on the snapshot is the real Kueue's choice
    assert {r["node"] for r in placed["placement"]["by_node"]} == set(told["nodes_now"])
    handler(events.scheduled_event(), LocalContext())  # the snapshot sees it
    after = level(call(stack, "GET", "/v1/topology?view=capacity").json()["instance_types"][0], "layer-2")
    left = after["largest_now_nodes"]
    assert left == max(d["free_nodes"] for d in after["free"]) < 16
    # ... and a 16-node one waits: no layer-2 domain is whole. It is told which domain comes
    # closest, how much of it is free now and what occupies the rest
    more = gpu_job("one-more", 16, {"mode": "required", "level": "layer-2"})
    answer = call(stack, "POST", "/v1/jobs", profile="topogov-team-b", body=more).json()
    assert "fits once running work finishes" in answer["decision"]["topology"]["reason"]
    assert answer["decision"]["topology"]["nodes_now"] is None
    view = wait_until(
        lambda: (
            (v := call(stack, "GET", "/v1/jobs/team-b/one-more", "topogov-team-b").json())["why_pending"]
            and v
        ),
        "Kueue says why one-more waits",
    )
    waiting = view["waiting"]
    assert view["status"] == "Pending" and waiting["level"] == "layer-2" and waiting["pods"] == 16
    assert waiting["pods_now"] == left and waiting["nodes"] == 16
    # every node of the domain is free or held by one of the jobs running there (whole nodes each)
    occupants = waiting["occupants"]
    assert left + sum(o["nodes"] for o in occupants) == 16 and occupants
    sizes = {"tight": 32, "spread": 48, "fits": size * 8}
    for o in occupants:
        # another team's jobs are shown by team only; the caller's own by name
        assert (o["team"], o["job"] is None) in {("team-a", True), ("team-b", False)}, o
        assert o["gpus"] in ({sizes["fits"]} if o["job"] else {sizes["tight"], sizes["spread"]})
    # same priority everywhere: nothing is preemptible, the occupants must finish
    assert waiting["to_free"] and not any(o["lower_priority"] for o in waiting["to_free"])
    jobs = (("team-b", "one-more"), ("team-b", "fits"), ("team-a", "tight"), ("team-a", "spread"))
    for team_name, name in jobs:
        profile = f"topogov-{team_name}"
        assert call(stack, "DELETE", f"/v1/jobs/{team_name}/{name}", profile).status_code == 200


def level(instance_type, name):
    return next(lv for lv in instance_type["levels"] if lv["level"] == name)
