"""The trace simulator (``topogov.logic.whatif``): its inputs refuse what is wrong naming the line
and field, and its replays do what the API and Kueue would, on cases small enough to work out by
hand: a job waits exactly until the one holding its room ends; a required job is relaxed at the
first pass after its deadline; a placement across network nodes runs longer by the penalty; the
API's refusals come with the API's words; a policy change moves the waits it should."""

from __future__ import annotations

from dataclasses import replace

import pytest

from topogov.domain.policy import load_policy
from topogov.logic.whatif import (
    InputError,
    Penalty,
    change_fleet,
    compare,
    parse_fleet,
    parse_trace,
    simulate,
)
from topogov.logic.whatif.inputs import fleet_csv, synthetic_fleet
from topogov.logic.whatif.report import percentile, render_text

HEADER = (
    "submit_s,team,name,pods,gpus_per_pod,duration_s,topology_mode,topology_level,fallback_after_s,priority"
)

POLICY = """
priorityClasses:
  - {name: high, value: 1000}
  - {name: low, value: 100}
fairShare: disabled
teams:
  team-a:
    principals: ["arn:aws:iam::123456789012:user/a"]
    quota: {nvidia.com/gpu: 64, vpc.amazonaws.com/efa: 0, cpu: 0, memory: 0}
    sharing: LendAndBorrow
    borrowLimit: {nvidia.com/gpu: 64}
    priorityClasses: [high, low]
    defaultPriorityClass: low
  team-b:
    principals: ["arn:aws:iam::123456789012:user/b"]
    quota: {nvidia.com/gpu: 64, vpc.amazonaws.com/efa: 0, cpu: 0, memory: 0}
    sharing: LendAndBorrow
    borrowLimit: {nvidia.com/gpu: 64}
    priorityClasses: [low]
    maxInFlight: {nvidia.com/gpu: 64}
"""


def trace(*rows: str):
    return parse_trace("\n".join([HEADER, *rows]))


@pytest.fixture(scope="module")
def policy():
    return load_policy(POLICY)


@pytest.fixture(scope="module")
def fleet():
    # 16 p5.48xlarge (128 GPUs): 2 layer-2 nodes of 2 layer-3 nodes of 4 hosts
    return synthetic_fleet("p5.48xlarge", (1, 2, 2), 4)


def by_name(run):
    return {j.name: j for j in run.jobs}


# -- inputs ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("row", "line", "field", "words"),
    [
        ("x,team-a,j,1,8,60,,,,", 2, "submit_s", "must be a number"),
        ("0,team-a,j,0,8,60,,,,", 2, "pods", "at least 1"),
        ("0,team-a,j,1,8,60,required,,,", 2, "topology_level", "needs a level"),
        ("0,team-a,j,1,8,60,auto,layer-3,,", 2, "topology_level", "takes no level"),
        ("0,team-a,j,1,8,60,required,layer-9,,", 2, "topology_level", "unknown topology level"),
        ("0,team-a,j,1,8,60,sometimes,,,", 2, "topology_mode", "must be one of"),
        ("0,team-a,j,1,8,60,preferred,layer-3,60,", 2, "fallback_after_s", "required only"),
        ("0,team-a,Not_A_Name,1,8,60,,,,", 2, "name", ""),
        ("0,team-a,j,1,8,,,,,", 2, "duration_s", "is empty"),
    ],
)
def test_a_wrong_trace_row_is_refused_naming_its_line_and_field(row, line, field, words):
    with pytest.raises(InputError) as exc:
        trace(row)
    assert (exc.value.line, exc.value.field) == (line, field), str(exc.value)
    assert words in exc.value.message


def test_a_trace_refuses_unknown_columns_duplicate_jobs_and_emptiness():
    with pytest.raises(InputError, match="line 1, podz: unknown column"):
        parse_trace("submit_s,team,name,podz,gpus_per_pod,duration_s\n0,team-a,j,1,8,60")
    with pytest.raises(InputError, match="line 3, name: team-a/j is already on line 2"):
        trace("0,team-a,j,1,8,60,,,,", "5,team-a,j,1,8,60,,,,")
    with pytest.raises(InputError, match="no jobs"):
        parse_trace(HEADER + "\n")
    assert [j.name for j in trace("9,team-a,late,1,8,60,,,,", "1,team-a,early,1,8,60,,,,")] == [
        "early",
        "late",
    ]


def test_a_fleet_file_gives_allocatable_from_the_instance_type_and_refuses_what_is_wrong():
    text = (
        "node,instance_type,layer-1,layer-2,layer-3,layer-4\n"
        "n1,p5.48xlarge,a,b,c,\n"
        "n2,p6-b200.48xlarge,a,b,c,d\n"
    )
    n1, n2 = parse_fleet(text)
    assert (n1.path, n1.allocatable.gpu, n1.allocatable.efa) == (("a", "b", "c"), 8, 32)
    assert (n2.path, n2.allocatable.efa) == (("a", "b", "c", "d"), 8)
    with pytest.raises(InputError, match=r"line 2, instance_type: unknown instance type 'p9\.huge'"):
        parse_fleet("node,instance_type,layer-1,layer-2,layer-3\nn1,p9.huge,a,b,c\n")
    with pytest.raises(InputError, match="line 2, layer-3: is empty"):
        parse_fleet("node,instance_type,layer-1,layer-2,layer-3\nn1,p5.48xlarge,a,b,\n")
    with pytest.raises(InputError, match="line 3, node: n1 is already on line 2"):
        parse_fleet(
            "node,instance_type,layer-1,layer-2,layer-3\nn1,p5.48xlarge,a,b,c\nn1,p5.48xlarge,a,b,c\n"
        )
    assert parse_fleet(fleet_csv([n1, n2])) == [n1, n2]


def test_a_fleet_change_adds_one_new_layer_3_domain_or_removes_the_last_nodes(fleet):
    grown = change_fleet(fleet, "+p5.48xlarge=32")
    added = grown[len(fleet) :]
    assert len(added) == 32 and len({n.path for n in added}) == 1
    assert not {n.path[0] for n in added} & {n.path[0] for n in fleet}
    shrunk = change_fleet(fleet, "-p5.48xlarge=4")
    assert len(shrunk) == 12 and {n.name for n in fleet} - {n.name for n in shrunk} == {
        f"n0001{i}" for i in "2345"
    }
    for bad in ("p5.48xlarge=3", "+p5.48xlarge=0", "+p9.huge=1", "-p5.48xlarge=17"):
        with pytest.raises(InputError):
            change_fleet(fleet, bad)


# -- replays -----------------------------------------------------------------------------------------
def test_a_job_starts_when_submitted_if_it_fits_and_runs_its_duration(fleet, policy):
    run = simulate(trace("100,team-a,one,4,8,600,auto,,,"), fleet, policy)
    (job,) = run.jobs
    assert (job.start_s, job.end_s, job.mode, job.level) == (
        100,
        700,
        "preferred",
        "topology.k8s.aws/network-node-layer-3",
    )
    assert job.spread == 0 and len(set(job.nodes)) == 4


def test_a_job_that_does_not_fit_waits_exactly_until_the_room_is_freed(fleet, policy):
    # team-a takes the whole fleet (64 quota + 64 borrowed); team-b's job must reclaim or wait. With
    # team-b at priority low and reclaimWithinCohort Any, Kueue preempts team-a's borrowed job.
    run = simulate(
        trace("0,team-a,all,16,8,1000,,,,", "10,team-a,next,4,8,100,,,,"),
        fleet,
        policy,
    )
    jobs = by_name(run)
    assert jobs["all"].start_s == 0 and jobs["all"].end_s == 1000
    # the first moment it fits, plus Kueue's requeue batch: a workload that found no room waits among
    # the inadmissible until a finish requeues them, 1 s later (requeueBatchPeriod)
    assert jobs["next"].start_s == 1001 and jobs["next"].end_s == 1101


def test_a_team_reclaims_its_lent_quota_by_preemption(fleet, policy):
    run = simulate(trace("0,team-a,all,16,8,1000,,,,", "10,team-b,mine,4,8,100,,,,"), fleet, policy)
    jobs = by_name(run)
    assert jobs["mine"].start_s == 10 and jobs["all"].preemptions == 1
    assert jobs["all"].end_s == 111 + 1000  # restarted after team-b's job (+ the 1 s requeue), from the start


@pytest.fixture(scope="module")
def fragmented(fleet):
    """The fleet with the last host of every layer-3 node out (not Ready): no layer-3 node has 4
    hosts to give, though each has 4 (so ``required`` layer-3 is feasible and accepted)."""
    return [replace(n, available=False) if int(n.name[1:]) % 4 == 3 else n for n in fleet]


def test_a_required_job_falls_back_to_preferred_at_the_first_pass_after_its_deadline(fragmented, policy):
    run = simulate(
        trace("1,team-a,wide,4,8,100,required,layer-3,600,"), fragmented, policy, pass_interval_s=300
    )
    (wide,) = run.jobs
    assert wide.fallback_s == 900  # deadline 601 s; the passes run at 300, 600, 900...
    assert wide.start_s == 900 and wide.mode == "preferred" and wide.spread == 1  # across layer-3 nodes


def test_the_required_job_with_no_deadline_waits_for_its_domain(fragmented, policy):
    run = simulate(trace("1,team-a,wide,4,8,100,required,layer-3,,"), fragmented, policy)
    (wide,) = run.jobs
    assert (wide.fallback_s, wide.start_s, wide.refused) == (None, None, None)
    assert (
        compare(trace("1,team-a,wide,4,8,100,required,layer-3,,"), {"s": (fragmented, policy)})["scenarios"][
            "s"
        ]["fleet"]["never_started"]
        == 1
    )


def test_a_placement_across_network_nodes_runs_longer_by_the_penalty(fleet, policy):
    # 8 pods in a fleet of 4-host layer-3 nodes: they span two layer-3 nodes of one layer-2 node
    run = simulate(trace("0,team-a,eight,8,8,1000,auto,,,"), fleet, policy, penalty=Penalty())
    (job,) = run.jobs
    assert job.spread == 1 and job.end_s == pytest.approx(1000 * 631 / 412)
    flat = simulate(trace("0,team-a,eight,8,8,1000,auto,,,"), fleet, policy)
    assert flat.jobs[0].end_s == 1000
    assert Penalty().scaled(0.5).adjacent == pytest.approx(1 + 0.5 * (631 / 412 - 1))


def test_the_apis_refusals_come_with_the_apis_words(fleet, policy):
    run = simulate(
        trace(
            "0,team-b,proud,1,8,60,,,,high",
            "0,team-a,huge,17,8,60,,,,",
            "0,team-b,fill,8,8,600,,,,",
            "1,team-b,over,1,8,600,,,,",
            "0,team-z,nobody,1,8,60,,,,",
        ),
        fleet,
        policy,
    )
    jobs = by_name(run)
    assert jobs["proud"].refused == "priority class 'high' is not allowed for team 'team-b'"
    assert "can never be admitted more than 128 (quota 64 + borrow 64)" in jobs["huge"].refused
    assert (
        jobs["over"].refused
        == "team 'team-b' has 64 nvidia.com/gpu in flight; 8 more would pass its cap of 64"
    )
    assert "no team 'team-z'" in jobs["nobody"].refused
    assert jobs["fill"].refused is None and jobs["fill"].start_s == 0


def test_a_policy_change_moves_the_waits_it_should(fleet):
    # No borrowing: team-b's second job waits for its first. Proposed: team-b gets 96 GPUs of
    # nominal quota (team-a 32), so both of team-b's start at once and team-a's second waits.
    baseline = load_policy(
        POLICY.replace("borrowLimit: {nvidia.com/gpu: 64}", "borrowLimit: {nvidia.com/gpu: 0}")
    )
    text = baseline_text = POLICY.replace(
        "borrowLimit: {nvidia.com/gpu: 64}", "borrowLimit: {nvidia.com/gpu: 0}"
    )
    text = text.replace("quota: {nvidia.com/gpu: 64", "quota: {nvidia.com/gpu: 32", 1)
    text = text.replace("quota: {nvidia.com/gpu: 64", "quota: {nvidia.com/gpu: 96", 1).replace(
        "maxInFlight: {nvidia.com/gpu: 64}", ""
    )
    assert text != baseline_text
    rows = trace(
        "0,team-a,a1,4,8,1000,,,,",
        "0,team-a,a2,4,8,1000,,,,",
        "0,team-b,b1,8,8,1000,,,,",
        "0,team-b,b2,4,8,1000,,,,",
    )
    out = compare(rows, {"baseline": (fleet, baseline), "proposed": (fleet, load_policy(text))})["scenarios"]
    base = {j["name"]: j for j in out["baseline"]["jobs"]}
    new = {j["name"]: j for j in out["proposed"]["jobs"]}
    assert base["b2"]["refused"] is not None  # team-b's in-flight cap of 64 in the baseline
    assert (base["a1"]["start_s"], base["a2"]["start_s"], base["b1"]["start_s"]) == (0, 0, 0)
    assert (new["b1"]["start_s"], new["b2"]["start_s"], new["a1"]["start_s"]) == (0, 0, 0)
    assert new["a2"]["start_s"] == new["a1"]["end_s"] + 1  # Kueue's 1 s requeue batch after a1 ends
    assert out["proposed"]["teams"]["team-a"]["wait_max_s"] == 1001


def test_the_report_counts_and_integrates_what_happened(fleet, policy):
    out = compare(trace("0,team-a,a,16,8,3600,,,,", "3600,team-b,b,8,8,3600,,,,"), {"only": (fleet, policy)})
    fleet_figures = out["scenarios"]["only"]["fleet"]
    assert fleet_figures["span_s"] == 7200
    assert fleet_figures["gpu_hours"] == pytest.approx(128 + 64)
    assert fleet_figures["utilization"] == pytest.approx(192 / (128 * 2))
    team_a = out["scenarios"]["only"]["teams"]["team-a"]
    assert team_a["borrowed_gpu_hours"] == pytest.approx(64)  # 128 held against a quota of 64, one hour
    assert fleet_figures["free_whole_domains_min"] == 0
    assert fleet_figures["free_whole_domains_mean"] == pytest.approx(
        (0 + 2) / 2
    )  # 0 for an hour, then 2 of 4
    text = render_text(out["scenarios"])
    assert max(len(line) for line in text.splitlines()) <= 100
    assert "team-a" in text and "wait p95" in text


def test_percentile_is_nearest_rank():
    assert percentile([], 50) is None
    assert percentile([5.0], 95) == 5.0
    assert percentile([float(i) for i in range(1, 101)], 95) == 95.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0


def test_the_example_files_replay(policy):
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    jobs = parse_trace((root / "examples/whatif/trace.csv").read_text())
    nodes = parse_fleet((root / "examples/whatif/fleet.csv").read_text())
    teams = load_policy((root / "teams.yaml").read_text())
    run = simulate(jobs, nodes, teams)
    assert len(run.jobs) == len(jobs) and sum(1 for j in run.jobs if j.end_s is not None) > len(jobs) // 2


def test_while_jobs_arrive_a_penalised_placement_holds_gpus_but_does_less_work(fleet, policy):
    rows = trace("0,team-a,eight,8,8,1000,auto,,,", "1000,team-b,late,1,8,10,auto,,,")
    out = compare(rows, {"flat": (fleet, policy)})["scenarios"]["flat"]["fleet"]
    assert out["window_s"] == 1000
    assert (out["window_utilization"], out["window_goodput"]) == (pytest.approx(0.5), pytest.approx(0.5))
    slow = compare(rows, {"p": (fleet, policy)}, penalty=Penalty())["scenarios"]["p"]["fleet"]
    assert slow["window_utilization"] == pytest.approx(0.5)  # 64 of 128 GPUs held all the window
    assert slow["window_goodput"] == pytest.approx(0.5 * 412 / 631)  # at 412/631 of full speed


def test_a_trace_row_may_be_a_pytorchjob_whose_master_and_workers_kueue_places_as_one(fleet):
    """``kind`` pytorchjob: the row is rendered as the API renders ``render_as: pytorchjob`` (a master
    and its workers, one pod-set group), and the model places the group inside one domain."""
    from topogov.logic.whatif.engine import Simulation

    jobs = parse_trace(
        "submit_s,team,name,pods,gpus_per_pod,duration_s,topology_mode,topology_level,kind\n"
        "0,team-a,pt,4,8,600,required,layer-3,pytorchjob\n"
        "0,team-a,plain,4,8,600,required,layer-3,\n"
    )
    assert [j.kind for j in jobs] == ["pytorchjob", "job"]
    sim = Simulation(fleet, load_policy(POLICY))
    for job in jobs:
        sim.submit(job)
    sim.cluster.settle(0.0)
    pt = sim.workloads["team-a/pt"]
    assert [(ps.name, ps.count, ps.topology.group) for ps in pt.pod_sets] == [
        ("master", 1, "job"),
        ("worker", 3, "job"),
    ]
    assert [(ps.name, ps.count) for ps in sim.workloads["team-a/plain"].pod_sets] == [("main", 4)]
    placed = sim.cluster.admitted()["team-a/pt"]
    hosts = {values[-1] for ps in placed.pod_sets for values, n in ps.topology.domains if n}
    assert len(hosts) == 4 and len({sim.paths[h][2] for h in hosts}) == 1
    with pytest.raises(InputError, match="kind: must be one of job, pytorchjob"):
        parse_trace("submit_s,team,name,pods,gpus_per_pod,duration_s,kind\n0,team-a,j,1,8,60,jobset\n")
