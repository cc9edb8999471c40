"""``topogov bench placement``: what placement and capacity cost a reconcile pass and the API.

The reconcile pass lists the unfinished pods once anyway (for each node's requested resources); the
placement quality reads the same pages, so it adds no call, only CPU. Measured here in process, on
a synthetic fleet of ``--nodes`` p5.48xlarge hosts (4 per layer-3 domain, 16 per layer-2, 64 per
layer-1) with ``--jobs`` Jobs of ``--pods-per-job`` pods Running (two pods per node, half of the
jobs inside one layer-3 domain, the rest spread over two), as the API server returns them (dicts):

* ``scan``: what :meth:`topogov.adapters.kube.KubeNodes.scan_pods` does per page on top of summing
  requests (:func:`~topogov.domain.placement_quality.job_pod` for every pod's view);
* ``quality``: :func:`~topogov.domain.placement_quality.quality` over the admitted pods;
* ``capacity view``: :func:`~topogov.domain.capacity.capacity_view` on the snapshot's nodes (what
  ``GET /v1/topology?view=capacity`` computes; the largest job now is the Kueue model's placement,
  binary-searched per layer);
* ``closest domain``: :func:`~topogov.domain.capacity.closest_domain` for a pending 16-node job
  required at layer-2 (what ``GET /v1/jobs/{team}/{name}`` adds while a job waits).

p50 / p99 over ``--runs`` runs, in ms.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

from topogov_cli.common import EXIT_OK
from topogov_cli.render import table

GPU = "nvidia.com/gpu"


def _nodes(n: int) -> dict[str, Any]:
    from topogov.domain.quantity import Resources
    from topogov.domain.tree import NodeCapacity

    out = {}
    for i in range(n):
        path = (f"nn-l1-{i // 64}", f"nn-l2-{i // 16}", f"nn-l3-{i // 4}")
        name = f"ip-10-{i // 65536}-{i // 256 % 256}-{i % 256}.ec2.internal"
        out[name] = NodeCapacity(
            name,
            path,
            "p5.48xlarge",
            f"i-{i:017x}",
            Resources(gpu=8, efa=32, cpu_m=191_450, memory=2002 * 2**30),
        )
    return out


def _pods(nodes: dict[str, Any], jobs: int, per_job: int) -> list[dict[str, Any]]:
    """``jobs`` x ``per_job`` Running pods of 4 GPUs, two per node, filling the fleet in order; every
    other job starts two nodes into a layer-3 domain, so it spreads over two."""
    names = list(nodes)
    pods, slot = [], 0
    for j in range(jobs):
        if j % 2:
            slot += 4  # two nodes on: this job straddles a layer-3 boundary
        for k in range(per_job):
            node = names[(slot // 2) % len(names)]
            slot += 1
            pods.append(
                {
                    "metadata": {
                        "name": f"job-{j}-{k}",
                        "namespace": f"hyperpod-ns-team-{'abc'[j % 3]}",
                        "labels": {
                            "batch.kubernetes.io/controller-uid": f"uid-{j}",
                            "batch.kubernetes.io/job-name": f"job-{j}",
                            "kueue.x-k8s.io/podset": "main",
                            "topogov.io/topology-mode": ("required", "preferred", "auto")[j % 3],
                            "topogov.io/priority-class": "training-priority",
                        },
                    },
                    "spec": {
                        "nodeName": node,
                        "containers": [{"name": "main", "resources": {"requests": {GPU: "4", "cpu": "8"}}}],
                    },
                    "status": {"phase": "Running"},
                }
            )
    return pods


def _time(fn: Callable[[], Any], runs: int) -> tuple[float, float, Any]:
    samples, result = [], None
    for _ in range(runs):
        t = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - t)
    ordered = sorted(samples)
    return (
        ordered[len(ordered) // 2] * 1e3,
        ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1e3,
        result,
    )


def bench(nodes_n: int, jobs: int, per_job: int, runs: int) -> list[dict[str, Any]]:
    from dataclasses import replace

    from topogov.domain.capacity import capacity_view, closest_domain
    from topogov.domain.placement_quality import job_pod, quality
    from topogov.domain.quantity import Resources
    from topogov.domain.views.batch import PodView

    nodes = _nodes(nodes_n)
    pods = _pods(nodes, jobs, per_job)
    requested: dict[str, Resources] = {}
    for p in pods:
        asked = PodView.from_api(p).requests
        requested[p["spec"]["nodeName"]] = requested.get(p["spec"]["nodeName"], Resources()) + asked
    nodes = {k: replace(v, requested=requested.get(k, Resources())) for k, v in nodes.items()}
    team_of = {f"hyperpod-ns-team-{t}": f"team-{t}" for t in "abc"}
    rows = []

    def row(what: str, p50: float, p99: float) -> None:
        rows.append(
            {"nodes": nodes_n, "pods": len(pods), "jobs": jobs, "what": what, "p50_ms": p50, "p99_ms": p99}
        )

    views = [PodView.from_api(p) for p in pods]  # made once per pod by the scan, for the sums too
    p50, p99, placed = _time(lambda: [job_pod(v, 4) for v in views], runs)
    row("scan: job_pod per listed pod", p50, p99)
    placed = [p for p in placed if p is not None]
    p50, p99, q = _time(lambda: quality(placed, nodes, team_of), runs)
    assert q["jobs"] == jobs, q["jobs"]
    row(f"quality ({q['in_one_domain']['layer-3']:.0%} in one layer-3)", p50, p99)
    p50, p99, _ = _time(lambda: capacity_view(nodes), max(3, runs // 10))
    row("capacity view (largest job now per layer)", p50, p99)
    p50, p99, _ = _time(
        lambda: closest_domain(
            nodes, placed, level="layer-2", pods=16, gpus_per_pod=8, instance_type="p5.48xlarge",
            priority_of={"training-priority": 1000}, priority=1000,
        ),
        runs,
    )  # fmt: skip
    row("closest domain for a waiting 16-node job", p50, p99)
    return rows


def run(args: argparse.Namespace) -> int:
    rows = []
    for n in args.nodes or [10_000]:
        jobs = args.jobs or n // 4
        for r in bench(n, jobs, args.pods_per_job, args.runs):
            rows.append(r)
            if args.json:
                print(json.dumps(r), flush=True)
    if not args.json:
        cols = ["nodes", "pods", "jobs", "what", "p50_ms", "p99_ms"]
        print(
            table(
                cols, ([*(r[c] for c in cols[:4]), f"{r['p50_ms']:.2f}", f"{r['p99_ms']:.2f}"] for r in rows)
            )
        )
        print("(the pass lists the pods once anyway, for node capacity: the placement quality adds no call)")
    return EXIT_OK
