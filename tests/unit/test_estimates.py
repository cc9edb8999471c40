"""Start estimates through the API's use case (``ApiService.estimates``): a cluster made by the Kueue
model, served as the API server would serve its Workloads (v1beta1 dicts), gives each pending job
the same start as the model run directly on the model's own objects — so nothing is lost reading
live Workloads — and the answer carries what it rests on."""

from __future__ import annotations

from typing import Any, cast

import pytest

from topogov.domain.policy import Caller
from topogov.logic.api_service import ApiService
from topogov.logic.whatif.forecast import Expected, Model, Queued, Running, forecast
from topogov_local.bench.estimate import _Jobs, _stamp, build


@pytest.fixture(scope="module")
def cluster():
    # 400 p5.48xlarge (3,200 GPUs, the bench's smallest tree), 700 Seren-shaped jobs at once: some
    # run, the rest wait (40 of them kept)
    return build(400, 40, 700)


def test_the_api_gives_each_pending_job_the_models_own_start(cluster):
    policy, ports, pending, _ = cluster
    assert len(pending) >= 10
    api = service(policy, ports)
    answers = api.estimates(Caller.of("arn:aws:iam::123456789012:user/team-a"), pending, alternatives=False)
    # the same state straight from the model's objects (no JSON): the reference
    model = Model(list(ports.snapshot.nodes.values()), policy)
    from topogov.domain.kueue_model.convert import admission_of, workload_of
    from topogov.domain.views.workload import WorkloadView

    running, queued = [], []
    for namespace, objs in ports.workloads.items():
        for obj in objs:
            view = WorkloadView.from_api(obj)
            wl = workload_of(view, model.local_queues)
            team, job = wl.name.split("/")[0], obj["metadata"]["ownerReferences"][0]["uid"].split("/", 1)[1]
            record = next(r for r in ports.records[policy_team(policy, namespace)] if r["name"] == job)
            seconds = float(record["request"]["expected_duration"].removesuffix("s"))
            wl = type(wl)(**{**{f: getattr(wl, f) for f in wl.__slots__}, "created": wl.created - _epoch0()})
            if obj["status"].get("admission"):
                running.append(Running(wl, admission_of(view), -60.0, Expected(seconds, "expected_duration")))
            else:
                queued.append(Queued(wl, Expected(seconds, "expected_duration")))
    reference = forecast(model, running, queued)
    started = 0
    for team, job in pending:
        answer = answers[(team, job)]
        key = next(k for k in reference if k.endswith(f"/job-{job}"))
        want = reference[key].start_s
        assert answer["start_in_s"] == (None if want is None else round(want)), (job, answer)
        started += want is not None
        assert answer["expected_duration"]["basis"] == "expected_duration"
        assert "no new submissions" in answer["assumes"] and answer["nodes_as_of_s"] == 30
    assert started >= 5  # most waiting jobs get a start


def service(policy, ports):
    ledger, jobs = cast(Any, ports), cast(Any, _Jobs(ports))
    return ApiService(policy=policy, snapshots=ports, ledger=ledger, jobs=jobs, clock=lambda: _stamp(0))


def policy_team(policy, namespace):
    return next(name for name, t in policy.teams.items() if t.namespace == namespace)


def _epoch0():
    import datetime as dt

    return dt.datetime.fromisoformat(_stamp(0).replace("Z", "+00:00")).timestamp()


def test_a_job_kueue_has_no_workload_for_says_so(cluster):
    policy, ports, _, _ = cluster
    api = service(policy, ports)
    answer = api.estimates(Caller.of("arn:aws:iam::123456789012:user/team-a"), [("team-a", "not-there")])
    assert answer[("team-a", "not-there")] == {
        "start_in_s": None, "start_at": None, "error": "Kueue has no Workload for this Job yet"
    }  # fmt: skip


class _Counted(_Jobs):
    """The bench's Jobs port, counting the listings of Workloads."""

    def __init__(self, ports: Any) -> None:
        super().__init__(ports)
        self.listings = 0

    def workloads(self, namespace: str) -> list[Any]:
        self.listings += 1
        return super().workloads(namespace)


def test_requests_within_a_run_s_freshness_reuse_its_inputs_and_answer_as_a_fresh_service(cluster):
    policy, ports, pending, _ = cluster
    caller = Caller.of("arn:aws:iam::123456789012:user/team-a")
    jobs, tick = _Counted(ports), [0.0]
    api = ApiService(
        policy=policy, snapshots=ports, ledger=cast(Any, ports), jobs=cast(Any, jobs),
        clock=lambda: _stamp(tick[0]),
    )  # fmt: skip
    api.estimates(caller, [pending[0]], alternatives=False)
    listed = jobs.listings
    assert listed > 0
    tick[0] = 3.0  # within the run's freshness: the same inputs, the same run, continued
    later = api.estimates(caller, [pending[-1]], alternatives=False)[pending[-1]]
    assert jobs.listings == listed and later["forecast_age_s"] == 3
    want = service(policy, ports).estimates(caller, [pending[-1]], alternatives=False)[pending[-1]]
    if want["start_in_s"] is None:
        assert later["start_in_s"] is None
    else:  # as of 3 s later (each rounded on its own)
        assert abs(later["start_in_s"] - max(0, want["start_in_s"] - 3)) <= 1
    api.estimates(caller, [("team-a", "not-there")], alternatives=False)  # not in what was read
    assert jobs.listings == 2 * listed
    tick[0] = 3.0 + api._forecaster().fresh_s + 1  # older than a run is kept: read again
    api.estimates(caller, [pending[0]], alternatives=False)
    assert jobs.listings == 3 * listed


def test_the_list_s_eta_is_the_detailed_answer_s_start(cluster):
    policy, ports, pending, _ = cluster
    caller = Caller.of("arn:aws:iam::123456789012:user/team-a")
    full = service(policy, ports).estimates(caller, pending, alternatives=False)
    brief = service(policy, ports).estimates(caller, pending, alternatives=False, detail=False)
    assert sum(full[job]["start_in_s"] is not None for job in pending) >= 5
    for job in pending:
        assert brief[job] == {k: full[job][k] for k in ("error", "start_in_s", "start_at") if k in full[job]}
    assert "waits_for" in full[pending[0]]


def test_a_teams_part_is_read_again_only_when_its_views_or_records_changed(cluster):
    import copy

    from topogov.logic.estimates import WorkloadCache, read_state

    policy, ports, _, _ = cluster
    model = Model(list(ports.snapshot.nodes.values()), policy)
    jobs, cache = _Jobs(ports), WorkloadCache()
    first = read_state(policy, model, ports, jobs, cache)
    again = read_state(policy, model, ports, jobs, cache)
    assert again == first and all(a is b for a, b in zip(again.running, first.running, strict=True))
    # a record's expected_duration changed (the ledger returns new dicts): that team read again
    team = next(iter(ports.records))
    record = ports.records[team][0]
    changed = copy.deepcopy(ports.records)
    changed[team][0] = {**record, "request": {"expected_duration": "12345s"}}
    edited = type(ports)(ports.workloads, ports.jobs_, changed, ports.snapshot)
    after = read_state(policy, model, edited, jobs, cache)
    owner = next(o for o in after.owners.values() if o.team == team and o.job == record["name"])
    assert owner.expected == Expected(12345.0, "expected_duration")
    assert read_state(policy, model, ports, jobs, cache) == first  # and back
    # a fresh cache reads the same state: what is kept is what reading gives
    assert read_state(policy, model, ports, _Jobs(ports), WorkloadCache()) == first


def test_an_answer_names_the_overdue_jobs_on_its_way_and_counts_the_others():
    from topogov.logic.estimates import Owner, State, describe
    from topogov.logic.whatif.forecast import Estimate

    late = [f"team-b/old-{i}" for i in range(500)]
    owners = {k: Owner("team-b", k.split("/")[1], Expected(60.0, "expected_duration")) for k in late}
    owners["team-a/mine"] = Owner("team-a", "mine", Expected(30.0, "expected_duration"))
    est = Estimate(
        "team-a/mine",
        start_s=0.0,
        waits_for=("team-b/old-7",),
        preempts=("team-b/old-9",),
        overdue=tuple(sorted(late)),
    )
    state = State(running=[], queued=[], owners=owners, stopped=set())

    def shown(owner: Owner) -> dict[str, Any]:
        return {"team": owner.team, "job": owner.job}

    answer = describe(est, state, nodes={}, shown=shown, now_s=0.0, as_of_s=None)
    assert answer["overdue_count"] == 500
    assert answer["overdue"] == [{"team": "team-b", "job": "old-7"}, {"team": "team-b", "job": "old-9"}]
    assert [b["job"] for b in answer["bases"]] == ["old-7", "old-9"]  # the jobs it rests on, not all 500

    from topogov_cli.jobs import estimate_lines

    text = "\n".join(estimate_lines(answer))
    assert "500 running jobs ran past their expected end: taken to end now" in text
    assert "old-7" in text and "old-9" in text and "old-8" not in text
