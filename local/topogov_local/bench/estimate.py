"""``topogov bench estimate``: what one pending job's start estimate costs the API.

The cluster is made by the Kueue model itself: Seren-shaped jobs (``local/topogov_local/traces.py``)
for three teams all submitted at once on ``--nodes`` p5.48xlarge, settled (admitted, preempted,
requeued until nothing changes), the first ``--pending`` of those left pending kept. Its Workloads
are served as the API server returns them (``kueue.x-k8s.io/v1beta1`` dicts, admitted ones with
their ``topologyAssignment``) by in-memory ports, with the Jobs and ledger records behind them (each
with ``expected_duration``), and :meth:`topogov.logic.api_service.ApiService.estimates` is timed (CPU
milliseconds of the process) for one pending job at a time — reading every Workload, the model's
cluster, running it forward until that job starts — the work ``GET /v1/jobs/{team}/{name}`` adds while
a job waits. Three kinds of request (:class:`~topogov.logic.whatif.forecast.Forecaster` says what the
service keeps): the first on the snapshot builds the model's cluster (*cold*); the next ones, a
second apart on the same Workloads, are answered by the last run, continued until the job starts
(the row's p50: the target, p50 <= 200 ms at 10,000 nodes and 1,000 pending); then each after the
last run aged out, a new run on the kept cluster; then the job list's ETA column (every pending job,
``GET /v1/jobs``'s call, its 5 s budget) on a new run. ``--grouped``: every pending job of several
pods is the Workload Kueue makes of a PyTorchJob that Topogov grouped (pod sets ``master`` of 1 pod
and ``worker``, one ``podSetGroupName``), so each estimate places pod-set groups
(``domain/kueue_model/groups.py``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import json
import statistics
import time
from dataclasses import dataclass, replace
from typing import Any, cast

from topogov_cli.common import EXIT_OK

NOW = dt.datetime(2026, 12, 1, 12, 0, 0, tzinfo=dt.UTC)


def _now(tick: list[float]) -> str:
    return _stamp(tick[0])


def _stamp(offset_s: float) -> str:
    return (NOW + dt.timedelta(seconds=offset_s)).strftime("%Y-%m-%dT%H:%M:%SZ")


def workload_json(
    wl: Any, namespace: str, queue: str, admitted: Any = None, *, grouped: bool = False
) -> dict[str, Any]:
    """A model Workload as Kueue v0.17.0 writes it (v1beta1), admitted or pending; ``grouped``: a
    pending one of several pods with a topology as a PyTorchJob's, a master and its workers grouped."""
    ps = wl.pod_sets[0]
    requests = {k: (f"{v}m" if k == "cpu" else str(v)) for k, v in ps.requests.items()}
    topology = {}
    if ps.topology is not None:
        topology = {
            k: v for k, v in (("required", ps.topology.required), ("preferred", ps.topology.preferred)) if v
        }
    template = {
        "spec": {
            "nodeSelector": dict(ps.node_selector),
            "containers": [{"name": "main", "resources": {"requests": requests}}],
        }
    }
    pod_sets: list[dict[str, Any]] = [
        {
            "name": "main",
            "count": ps.count,
            **({"topologyRequest": topology} if topology else {}),
            "template": template,
        }
    ]
    if grouped and admitted is None and topology and ps.count > 1:
        group = {**topology, "podSetGroupName": "job"}
        pod_sets = [
            {"name": "master", "count": 1, "topologyRequest": group, "template": template},
            {"name": "worker", "count": ps.count - 1, "topologyRequest": group, "template": template},
        ]
    obj: dict[str, Any] = {
        "metadata": {
            "name": f"job-{wl.name.split('/')[1]}",
            "namespace": namespace,
            "uid": f"wl-{wl.name}",
            "resourceVersion": "1",
            "creationTimestamp": _stamp(-100),
            "ownerReferences": [{"kind": "Job", "uid": f"job-{wl.name}"}],
        },
        "spec": {
            "queueName": queue,
            "priority": wl.priority,
            "podSets": pod_sets,
        },
        "status": {},
    }
    if admitted is not None:
        a = admitted.pod_sets[0]
        obj["status"] = {
            "conditions": [{"type": "QuotaReserved", "status": "True", "lastTransitionTime": _stamp(-60)}],
            "admission": {
                "clusterQueue": wl.cluster_queue,
                "podSetAssignments": [
                    {
                        "name": "main",
                        "flavors": dict(a.flavors),
                        "resourceUsage": {k: str(v) for k, v in a.usage.items()},
                        "count": a.count,
                        "topologyAssignment": {
                            "levels": list(a.topology.levels),
                            "domains": [{"values": list(v), "count": n} for v, n in a.topology.domains],
                        },
                    }
                ],
            },
        }
    else:
        obj["status"] = {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending"}]}
    return obj


@dataclass
class Ports:
    """In-memory ledger, jobs and snapshot ports serving the model's state as the API reads it."""

    workloads: dict[str, list[dict[str, Any]]]
    jobs_: dict[str, list[dict[str, Any]]]
    records: dict[str, list[dict[str, Any]]]
    snapshot: Any

    def load(self) -> Any:
        return self.snapshot

    def list(self, team: str) -> Any:  # the ledger's list of a team's records
        return self.records.get(team, [])

    def live(self, team: str) -> Any:  # its live records (the sparse index)
        return [r for r in self.records.get(team, []) if r.get("state") != "released"]

    def runs(self, team: str) -> dict[int, Any]:  # its recent run times by GPU count
        out: dict[int, Any] = {}
        for r in self.records.get(team, []):
            if r.get("ran_s") is not None:
                gpus = int((r.get("decision") or {}).get("pods") or 0) * int(
                    (r.get("shape") or {}).get("per_pod_gpu") or 0
                )
                out.setdefault(gpus, []).append(float(r["ran_s"]))
        return out

    def list_jobs(self, namespace: str) -> Any:
        return self.jobs_.get(namespace, [])

    def workloads_of(self, namespace: str) -> Any:
        return self.workloads.get(namespace, [])


class _Jobs:
    """The Jobs and Workloads as the adapter answers them (``KubeJobs``): each listing's views, made
    from its JSON for the objects whose resourceVersion is new to the warm container."""

    def __init__(self, ports: Ports) -> None:
        from topogov.adapters.listed_views import ListedViews
        from topogov.domain.views.batch import JobView
        from topogov.domain.views.workload import WorkloadView

        self.ports = ports
        self._jobs = ListedViews(JobView.from_api)
        self._workloads = ListedViews(WorkloadView.from_api)

    def list_jobs(self, namespace: str) -> list[Any]:
        return self._jobs.views(namespace, self.ports.list_jobs(namespace))

    def workloads(self, namespace: str) -> list[Any]:
        return self._workloads.views(namespace, self.ports.workloads_of(namespace))


def build(
    nodes_n: int, pending_n: int, jobs_n: int, grouped: bool = False
) -> tuple[Any, Ports, list[tuple[str, str]], dict[str, Any]]:
    from topogov.domain.snapshot import Snapshot
    from topogov.logic.whatif.engine import Simulation
    from topogov.logic.whatif.inputs import synthetic_fleet
    from topogov_local.bench.policies import ACME_SHARES, acme_policy
    from topogov_local.traces import acme_seren

    nodes = synthetic_fleet("p5.48xlarge", (max(1, nodes_n // 8 // 50), 5, 10), 8)
    gpus = sum(n.allocatable.gpu for n in nodes)
    policy = acme_policy(gpus)
    trace = [replace(j, submit_s=0.0) for j in acme_seren(jobs_n, list(ACME_SHARES), gpus, load=1.0)]
    sim = Simulation(nodes, policy)
    for job in trace:
        sim.submit(job)
    sim.cluster.settle(0.0)
    admitted, pending = sim.cluster.admitted(), list(sim.cluster.pending())[:pending_n]
    duration = {f"{j.team}/{j.name}": j.duration_s for j in trace}
    workloads: dict[str, list[dict[str, Any]]] = {}
    jobs: dict[str, list[dict[str, Any]]] = {}
    records: dict[str, list[dict[str, Any]]] = {}
    for key in [*admitted, *pending]:
        team_name, job_name = key.split("/")
        team = policy.teams[team_name]
        wl = sim.cluster.records[key].workload
        workloads.setdefault(team.namespace, []).append(
            workload_json(wl, team.namespace, team.local_queue, admitted.get(key), grouped=grouped)
        )
        jobs.setdefault(team.namespace, []).append(
            {
                "metadata": {
                    "name": job_name,
                    "namespace": team.namespace,
                    "uid": f"job-{key}",
                    "resourceVersion": "1",
                },
                "spec": {},
            }
        )
        records.setdefault(team_name, []).append(
            {
                "name": job_name,
                "namespace": team.namespace,
                "request": {"expected_duration": f"{int(duration[key])}s"},
            }
        )
    snap = Snapshot(nodes={n.name: n for n in nodes}, generated_at=NOW.timestamp() - 30)
    ports = Ports(workloads, jobs, records, snap)
    shape = {"nodes": len(nodes), "running": len(admitted), "pending": len(pending), "policy": policy}
    return policy, ports, [tuple(k.split("/")) for k in pending], shape  # type: ignore[misc]


def run(args: argparse.Namespace) -> int:
    from topogov.bootstrap import freeze_long_lived
    from topogov.logic.api_service import ApiService

    for nodes_n in args.nodes or [10000]:
        t0 = time.process_time()
        grouped = bool(getattr(args, "grouped", False))
        policy, ports, pending, shape = build(
            nodes_n, args.pending, args.jobs or nodes_n + nodes_n // 3, grouped
        )
        setup = time.process_time() - t0
        tick = [0.0]  # the clock, moved by each request
        api = ApiService(
            policy=policy,
            snapshots=ports,
            ledger=cast(Any, ports),
            jobs=cast(Any, _Jobs(ports)),
            clock=functools.partial(_now, tick),
            monotonic=time.process_time,  # the time budget in CPU seconds: the machine may be shared
            keep_long_lived=freeze_long_lived,  # as the deployed API's composition root wires it
        )
        row = _sample(api, pending, args.runs, tick)
        row = {"nodes": shape["nodes"], "running": shape["running"], "pending": shape["pending"], **row,
               "setup_cpu_s": round(setup, 1), "grouped": grouped}  # fmt: skip
        if args.json:
            print(json.dumps(row), flush=True)
            continue
        verdict = "met" if row["p50_ms"] <= 200 else "MISSED"
        print(
            f"# start estimate, {row['nodes']} nodes, {row['running']} running, {row['pending']} pending"
            + (" (each of several pods a master and workers, one pod-set group)" if grouped else "")
            + ": "
            f"p50 {row['p50_ms']} ms, max {row['max_ms']} ms over {row['samples']} jobs a second apart "
            f"({row['estimated']} with a start); a new run on the kept cluster p50 {row['new_run_p50_ms']} "
            f"ms; cold (the model's cluster built) {row['cold_ms']} ms; the job list's ETAs of all "
            f"{row['pending']} {row['list_ms']} ms ({row['list_reached']} reached within its 5 s); CPU ms; "
            f"target p50 <= 200 ms: {verdict}",
            flush=True,
        )
    return EXIT_OK


def _sample(api: Any, pending: list[tuple[str, str]], runs: int, tick: list[float]) -> dict[str, Any]:
    """One cold request (the first on the snapshot), then ``runs`` warm ones spread over the queue, a
    second apart (the service's last run answers them, continued as needed), then the same jobs
    each after the last run has aged out (a new run on the kept cluster); CPU milliseconds."""
    from topogov.domain.policy import Caller

    caller = Caller.of("arn:aws:iam::123456789012:user/team-a")
    step = max(1, len(pending) // runs)
    jobs = pending[::step][:runs]
    c0 = time.process_time()
    api.estimates(caller, [jobs[0]], alternatives=False)
    cold = (time.process_time() - c0) * 1000
    kept, starts = [], []
    for job in jobs:
        tick[0] += 1.0
        c0 = time.process_time()
        answer = api.estimates(caller, [job], alternatives=False)[job]
        kept.append((time.process_time() - c0) * 1000)
        starts.append(answer.get("start_in_s"))
    forecaster = api._forecaster()
    fresh = []
    for job in jobs:
        tick[0] += forecaster.fresh_s + 1.0
        c0 = time.process_time()
        api.estimates(caller, [job], alternatives=False)
        fresh.append((time.process_time() - c0) * 1000)
    tick[0] += forecaster.fresh_s + 1.0  # the job list's ETA column: every pending job, a new run
    c0 = time.process_time()
    etas = api.estimates(caller, pending, alternatives=False, budget_s=5.0, detail=False)
    listed = (time.process_time() - c0) * 1000
    return {
        "list_ms": round(listed), "list_reached": sum("error" not in e for e in etas.values()),
        "samples": len(kept), "p50_ms": round(statistics.median(kept)), "max_ms": round(max(kept)),
        "new_run_p50_ms": round(statistics.median(fresh)), "new_run_max_ms": round(max(fresh)),
        "cold_ms": round(cold), "builds": forecaster.builds, "runs": forecaster.runs,
        "estimated": sum(s is not None for s in starts),
    }  # fmt: skip
