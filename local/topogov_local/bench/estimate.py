"""``topogov bench estimate``: what one pending job's start estimate costs the API.

The cluster is made by the Kueue model itself: Seren-shaped jobs (``local/topogov_local/traces.py``)
for three teams all submitted at once on ``--nodes`` p5.48xlarge, settled (admitted, preempted,
requeued until nothing changes), the first ``--pending`` of those left pending kept. Its Workloads
are served as the API server returns them (``kueue.x-k8s.io/v1beta1`` dicts, admitted ones with
their ``topologyAssignment``) by in-memory ports, with the Jobs and ledger records behind them (each
with ``expected_duration``), and :meth:`topogov.logic.api_service.ApiService.estimates` is timed for
one pending job at a time — parsing every Workload, building the model, running it forward until that
job starts — the work ``GET /v1/jobs/{team}/{name}`` adds while a job waits. No cache is kept between
samples. Target: p50 <= 200 ms at 10,000 nodes and 1,000 pending.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import time
from dataclasses import dataclass, replace
from typing import Any, cast

from topogov_cli.common import EXIT_OK

NOW = dt.datetime(2026, 12, 1, 12, 0, 0, tzinfo=dt.UTC)


def _stamp(offset_s: float) -> str:
    return (NOW + dt.timedelta(seconds=offset_s)).strftime("%Y-%m-%dT%H:%M:%SZ")


def workload_json(wl: Any, namespace: str, queue: str, admitted: Any = None) -> dict[str, Any]:
    """A model Workload as Kueue v0.17.0 writes it (v1beta1), admitted or pending."""
    ps = wl.pod_sets[0]
    requests = {k: (f"{v}m" if k == "cpu" else str(v)) for k, v in ps.requests.items()}
    topology = {}
    if ps.topology is not None:
        topology = {
            k: v for k, v in (("required", ps.topology.required), ("preferred", ps.topology.preferred)) if v
        }
    obj: dict[str, Any] = {
        "metadata": {
            "name": f"job-{wl.name.split('/')[1]}",
            "namespace": namespace,
            "uid": f"wl-{wl.name}",
            "creationTimestamp": _stamp(-100),
            "ownerReferences": [{"kind": "Job", "uid": f"job-{wl.name}"}],
        },
        "spec": {
            "queueName": queue,
            "priority": wl.priority,
            "podSets": [
                {
                    "name": "main",
                    "count": ps.count,
                    **({"topologyRequest": topology} if topology else {}),
                    "template": {
                        "spec": {
                            "nodeSelector": dict(ps.node_selector),
                            "containers": [{"name": "main", "resources": {"requests": requests}}],
                        }
                    },
                }
            ],
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

    def list_jobs(self, namespace: str) -> Any:
        return self.jobs_.get(namespace, [])

    def workloads_of(self, namespace: str) -> Any:
        return self.workloads.get(namespace, [])


class _Jobs:
    """The Jobs and Workloads as the adapter answers them: views made from the JSON on each call."""

    def __init__(self, ports: Ports) -> None:
        self.ports = ports

    def list_jobs(self, namespace: str) -> list[Any]:
        from topogov.domain.views.batch import JobView

        return [JobView.from_api(j) for j in self.ports.list_jobs(namespace)]

    def workloads(self, namespace: str) -> list[Any]:
        from topogov.domain.views.workload import WorkloadView

        return [WorkloadView.from_api(w) for w in self.ports.workloads_of(namespace)]


def build(
    nodes_n: int, pending_n: int, jobs_n: int
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
            workload_json(wl, team.namespace, team.local_queue, admitted.get(key))
        )
        jobs.setdefault(team.namespace, []).append(
            {"metadata": {"name": job_name, "namespace": team.namespace, "uid": f"job-{key}"}, "spec": {}}
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
    from topogov.logic.api_service import ApiService

    for nodes_n in args.nodes or [10000]:
        t0 = time.process_time()
        policy, ports, pending, shape = build(nodes_n, args.pending, args.jobs or nodes_n + nodes_n // 3)
        setup = time.process_time() - t0
        api = ApiService(
            policy=policy,
            snapshots=ports,
            ledger=cast(Any, ports),
            jobs=cast(Any, _Jobs(ports)),
            clock=lambda: _stamp(0),
        )
        caller = "arn:aws:iam::123456789012:user/team-a"
        step = max(1, len(pending) // args.runs)
        samples, starts = [], []
        for job in pending[::step][: args.runs]:
            api._model = None  # no cache between samples: each is a request on a fresh snapshot
            c0 = time.perf_counter()
            answer = api.estimates(caller, [job], alternatives=False)[job]
            samples.append((time.perf_counter() - c0) * 1000)
            starts.append(answer.get("start_in_s"))
        row = {
            "nodes": shape["nodes"], "running": shape["running"], "pending": shape["pending"],
            "samples": len(samples), "p50_ms": round(statistics.median(samples)),
            "max_ms": round(max(samples)), "estimated": sum(s is not None for s in starts),
            "setup_cpu_s": round(setup, 1),
        }  # fmt: skip
        if args.json:
            print(json.dumps(row), flush=True)
            continue
        verdict = "met" if row["p50_ms"] <= 200 else "MISSED"
        print(
            f"# start estimate, {row['nodes']} nodes, {row['running']} running, {row['pending']} pending: "
            f"p50 {row['p50_ms']} ms, max {row['max_ms']} ms over {row['samples']} jobs "
            f"({row['estimated']} with a start); target p50 <= 200 ms: {verdict}",
            flush=True,
        )
    return EXIT_OK
