"""``topogov bench reconcile``: labeler passes against a fresh local stack per node count.

Passes: ``first`` (every node needs labels), ``steady`` (nothing changed), ``drift`` (labels edited
by hand on 1 % of nodes), ``new`` (1 % new instances joined), ``placed`` (a steady pass with two
Running pods per node of the first fleet, in Jobs of 10 pods, Kueue's labels on them: the pass
lists them once for node capacity and computes the fleet's placement quality from the same pages).
``cpu_s`` is this process's CPU time for the pass (the emulators run in their own processes);
``wall_s`` its elapsed time.

Modes: ``--ec2-id-page N`` has the emulated EC2 page id queries at N (its documented default page is
20; whether 100 ids come back in one page is not documented), ``--labelled-by-eks`` starts the nodes
with EKS's own topology labels (the labeler adopts them: no EC2 call, no write).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from topogov_cli.common import EXIT_OK
from topogov_cli.render import table

PASSES = ("first", "steady", "drift", "new", "placed")
PODS_PER_JOB = 10


def _say(text: str, quiet: bool) -> None:
    if not quiet:
        print(text, flush=True)


def bench_nodes(
    n: int, ec2_rate: float, quiet: bool, *, ec2_id_page: int | None = None, labelled_by_eks: bool = False
) -> list[dict[str, Any]]:
    from topogov.bootstrap import build_labeler
    from topogov.domain.labels import layer_label
    from topogov.logic.labeler import PassOptions
    from topogov.settings import ReconcileSettings
    from topogov_local import fleet
    from topogov_local.stack import LocalStack, StackOptions

    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="topogov-bench-") as tmp:
        _say(f"# {n} nodes: starting a fresh local stack and launching {n} p5.48xlarge instances ...", quiet)
        t0 = time.perf_counter()
        opts = StackOptions(
            directory=Path(tmp),
            fleet=f"p5.48xlarge={n}",
            extra_nodes=False,
            simulated_nodes=False,  # labels only: KWOK's leases for 10,000 nodes would load 2 cores
            ec2_rate=ec2_rate,
            ec2_burst=1,
            api_port=None,
            labelled_by_eks=labelled_by_eks,
        )
        mode = mode_name(ec2_id_page, labelled_by_eks)
        with LocalStack(opts) as stack:
            _say(f"#   seeded in {time.perf_counter() - t0:.1f}s", quiet)
            if ec2_id_page is not None:
                configure_ec2(stack.aws_url, id_page_size=ec2_id_page)
            os.environ.update(stack.env())  # boto3 reads AWS_ENDPOINT_URL from the environment
            settings = ReconcileSettings.from_env()
            labeler = build_labeler(settings)
            kube = stack.kube()

            def run_pass(name: str, drifted: int, **extra: Any) -> None:
                kube.request("DELETE", "/_emulator/requests")
                cpu0, wall0 = time.process_time(), time.perf_counter()
                outcome = labeler.reconcile(
                    PassOptions(
                        refresh_after_s=settings.refresh_after_s, verify_after_s=settings.verify_after_s
                    )
                )
                s = outcome.summary
                cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
                served = kube.request("GET", "/_emulator/requests").body or {}
                results.append(
                    {
                        "nodes": s.nodes_seen,
                        "mode": mode,
                        "ec2_id_page": ec2_id_page or 100,
                        "labelled_by_eks": labelled_by_eks,
                        "pass": name,
                        "ec2_calls": s.ec2_calls,
                        "adopted": s.adopted,
                        "verified": s.verified,
                        "k8s_list_calls": s.k8s_reads,
                        "k8s_writes": s.k8s_writes,
                        "k8s_writes_seen_by_server": int(served.get("PATCH nodes", 0)),
                        "drifted": drifted,
                        "patched": s.patched,
                        "complete": s.complete,
                        "cpu_s": round(cpu, 3),
                        "wall_s": round(wall, 3),
                        "page_size": settings.page_size,
                        "placed_jobs": int((outcome.snapshot.placement or {}).get("jobs", 0)),
                        **extra,
                    }
                )
                _say("#   " + json.dumps(results[-1]), quiet)

            run_pass("first", n)
            run_pass("steady", 0)
            k = max(1, n // 100)
            names = sorted(fleet.node_name(i) for i in stack.instances)
            for name in names[:: max(1, len(names) // k)][:k]:
                kube.request(
                    "PATCH",
                    f"/api/v1/nodes/{name}",
                    body={"metadata": {"labels": {layer_label(3): "nn-edited-by-hand"}}},
                    content_type="application/merge-patch+json",
                )
            run_pass("drift", k)
            stack.add_instances([fleet.FleetGroup("p5.48xlarge", k)])
            run_pass("new", k)
            jobs = max(1, n // 5)
            _say(f"#   creating {jobs * PODS_PER_JOB} Running pods in {jobs} Jobs ...", quiet)
            t1 = time.perf_counter()
            running_pods(kube, names, jobs)
            _say(f"#   created in {time.perf_counter() - t1:.1f}s", quiet)
            run_pass("placed", 0, pods=jobs * PODS_PER_JOB, jobs=jobs)
    return results


def mode_name(ec2_id_page: int | None, labelled_by_eks: bool) -> str:
    parts = [f"ec2-id-page {ec2_id_page}"] if ec2_id_page is not None else []
    parts += ["labelled-by-eks"] if labelled_by_eks else []
    return ", ".join(parts) or "default"


def configure_ec2(aws_url: str, **config: Any) -> None:
    """The emulated DescribeInstanceTopology's configuration (its control route)."""
    import urllib.request

    req = urllib.request.Request(
        f"{aws_url}/_topogov/ec2/config", data=json.dumps(config).encode(), method="POST"
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        if resp.status != 200:
            raise RuntimeError(f"configure the emulated EC2 {config}: HTTP {resp.status}")


def running_pods(kube: Any, nodes: list[str], jobs: int) -> None:
    """``jobs`` Jobs of ``PODS_PER_JOB`` pods (4 GPUs each, two per node, in node order) as Kueue's
    pods look once Running: the Job's and Kueue's labels, bound to a node, phase Running (set on the
    status subresource, as a kubelet would)."""
    from concurrent.futures import ThreadPoolExecutor

    def one(i: int) -> None:
        j, k = divmod(i, PODS_PER_JOB)
        ns = f"hyperpod-ns-team-{'abc'[j % 3]}"
        name = f"bench-{j}-{k}"
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "labels": {
                    "batch.kubernetes.io/controller-uid": f"00000000-0000-0000-0000-{j:012d}",
                    "batch.kubernetes.io/job-name": f"bench-{j}",
                    "kueue.x-k8s.io/podset": "main",
                    "topogov.io/topology-mode": "required",
                },
            },
            "spec": {
                "nodeName": nodes[(i // 2) % len(nodes)],
                "restartPolicy": "Never",
                "containers": [
                    {"name": "main", "image": "x", "resources": {"requests": {"nvidia.com/gpu": "4"},
                                                                 "limits": {"nvidia.com/gpu": "4"}}}
                ],
            },
        }  # fmt: skip
        resp = kube.request("POST", f"/api/v1/namespaces/{ns}/pods", body=body)
        if resp.status not in (200, 201):
            raise RuntimeError(f"create pod {ns}/{name}: HTTP {resp.status} {resp.body}")
        resp = kube.request(
            "PATCH",
            f"/api/v1/namespaces/{ns}/pods/{name}/status",
            body={"status": {"phase": "Running"}},
            content_type="application/merge-patch+json",
        )
        if resp.status != 200:
            raise RuntimeError(f"pod {ns}/{name} status: HTTP {resp.status} {resp.body}")

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(one, range(jobs * PODS_PER_JOB)))


def targets_met(rows: list[dict[str, Any]]) -> list[str]:
    """The issue's targets, checked against the measured rows (printed, never silently passed): the
    first pass at most 10 % above ceil(N/100) EC2 calls however EC2 pages id queries, none with EKS's
    labels; writes only where labels drifted (none for nodes EKS labelled)."""
    from topogov.domain.ec2_answer import id_calls

    problems = []
    for r in rows:
        n0 = r["nodes"] if r["pass"] != "new" else r["nodes"] - r["drifted"]
        eks, page, k = r.get("labelled_by_eks", False), r.get("ec2_id_page", 100), r["drifted"]
        want_ec2 = {
            "first": 0 if eks else math.ceil(1.1 * math.ceil(n0 / 100)),
            "steady": 0,
            "drift": id_calls(k, page) if eks else 0,  # adopted answers whose labels changed: EC2 settles
            "new": 0 if eks else id_calls(k, page),
            "placed": 0,
        }
        want_writes = {"first": 0 if eks else n0, "new": 0 if eks else k}.get(r["pass"], k)
        if r["ec2_calls"] > want_ec2[r["pass"]]:
            problems.append(f"{r['nodes']} {r['pass']}: ec2_calls {r['ec2_calls']} > {want_ec2[r['pass']]}")
        if r["k8s_writes"] != want_writes:
            problems.append(f"{r['nodes']} {r['pass']}: k8s_writes {r['k8s_writes']} != {want_writes}")
        if r["nodes"] >= 10_000 and r["cpu_s"] >= 2.0:
            problems.append(f"{r['nodes']} {r['pass']}: cpu_s {r['cpu_s']} >= 2.0")
    for r in rows:
        if r["pass"] != "placed":
            continue
        # issue 16: list calls <= ceil(pods / page size) + what the pass already does (the steady pass)
        steady = next(x for x in rows if x["nodes"] == r["nodes"] - _new(rows, r) and x["pass"] == "steady")
        allowed = math.ceil(r["pods"] / r["page_size"]) + steady["k8s_list_calls"]
        if r["k8s_list_calls"] > allowed:
            problems.append(f"{r['nodes']} placed: k8s_list_calls {r['k8s_list_calls']} > {allowed}")
        if r["placed_jobs"] != r["jobs"]:
            problems.append(f"{r['nodes']} placed: quality over {r['placed_jobs']} jobs, not {r['jobs']}")
    return problems


def _new(rows: list[dict[str, Any]], placed: dict[str, Any]) -> int:
    """The instances the ``new`` pass added before ``placed`` (the steady pass saw that many fewer)."""
    new = [x for x in rows if x["pass"] == "new" and x["nodes"] == placed["nodes"]]
    return int(new[0]["drifted"]) if new else 0


def run_api(args: argparse.Namespace) -> int:
    rows = bench_api(args.nodes or [64, 10_000], args.runs, quiet=args.json)
    handler_s = import_seconds(IMPORT_HANDLER)
    naive_s = import_seconds(IMPORT_NAIVE)
    if args.json:
        for r in rows:
            print(json.dumps(r))
        print(json.dumps({"what": "import", "handler_s": handler_s, "naive_s": naive_s}))
        return EXIT_OK
    print()
    cols = ["nodes", "what", "p50_ms", "p99_ms"]
    print(table(cols, ([r["nodes"], r["what"], f"{r['p50_ms']:.2f}", f"{r['p99_ms']:.2f}"] for r in rows)))
    print()
    print("Cold start, median of 5 fresh interpreters:")
    print(f"  import topogov.handlers.api                      {handler_s:.3f} s")
    print(f"  naive: import boto3 + kubernetes + Powertools    {naive_s:.3f} s")
    decision_10k = [r for r in rows if r["what"].startswith("decision") and r["nodes"] >= 10_000]
    problems = []
    if handler_s > 0.35:
        problems.append(f"handler import {handler_s:.3f} s > 0.35 s")
    if decision_10k and decision_10k[0]["p50_ms"] > 5:
        problems.append(f"decision p50 at 10,000 nodes {decision_10k[0]['p50_ms']:.2f} ms > 5 ms")
    print("targets: all met" if not problems else "targets MISSED:\n  " + "\n  ".join(problems))
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    rows: list[dict[str, Any]] = []
    page, eks = getattr(args, "ec2_id_page", None), getattr(args, "labelled_by_eks", False)
    for n in args.nodes:
        rows.extend(bench_nodes(n, args.ec2_rate, quiet=args.json, ec2_id_page=page, labelled_by_eks=eks))
    if args.json:
        for r in rows:
            print(json.dumps(r))
        problems = targets_met(rows)
        print(json.dumps({"targets_met": not problems, "missed": problems}))
        return EXIT_OK
    print()
    print(f"Mode: {mode_name(page, eks)}.")
    print(
        f"Emulated DescribeInstanceTopology bucket raised to {args.ec2_rate:g} req/s for the benchmark "
        "(EC2's is 1 req/s); the labeler paced itself to the same rate."
    )
    cols = ["nodes", "pass", "ec2_calls", "k8s_list_calls", "k8s_writes", "drifted", "cpu_s", "wall_s"]
    print(table([*cols, "pods"], ([*(r[c] for c in cols), r.get("pods", "-")] for r in rows)))
    print()
    print(
        "Baseline, the cloud controller manager's way (one DescribeInstanceTopology call per node, 1 req/s):"
    )
    base = sorted({r["nodes"] for r in rows if r["pass"] == "first"})
    print(table(["nodes", "ec2_calls", "seconds of the API's bucket"], ([n, n, n] for n in base)))
    print()
    problems = targets_met(rows)
    print("targets: all met" if not problems else "targets MISSED:\n  " + "\n  ".join(problems))
    return EXIT_OK


# -- topogov bench api --------------------------------------------------------------------------

IMPORT_HANDLER = "import topogov.handlers.api"
IMPORT_NAIVE = (
    "import boto3, kubernetes.client, aws_lambda_powertools.event_handler, "
    "aws_lambda_powertools.logging, aws_lambda_powertools.metrics, aws_lambda_powertools.tracing"
)


def import_seconds(statement: str, runs: int = 5) -> float:
    """Median wall time of ``statement`` in a fresh interpreter (what a Lambda cold start pays)."""
    import statistics
    import subprocess
    import sys

    code = f"import time; t=time.perf_counter(); {statement}; print(time.perf_counter()-t)"
    env = {**os.environ, "POWERTOOLS_SERVICE_NAME": "topogov", "AWS_LAMBDA_FUNCTION_NAME": "topogov-api"}
    times = [
        float(
            subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
            ).stdout
        )
        for _ in range(runs)
    ]
    return statistics.median(times)


def synthetic_snapshot(nodes: int) -> Any:
    """A snapshot of ``nodes`` p5.48xlarge over 4 per layer-3, 16 per layer-2, 64 per layer-1 domain."""
    from topogov.domain.quantity import Resources
    from topogov.domain.snapshot import Snapshot
    from topogov.domain.tree import NodeCapacity

    alloc = Resources(gpu=8, efa=32, cpu_m=191_450, memory=2002 * 2**30)
    snap = Snapshot(generated_at=time.time())
    for i in range(nodes):
        used = Resources(gpu=8 * (i % 3 == 0), efa=0, cpu_m=0, memory=0)  # a third of the nodes busy
        path = (f"nn-{i // 64:017x}", f"nn-{1 << 40 | i // 16:017x}", f"nn-{1 << 50 | i // 4:017x}")
        snap.nodes[f"i-{i:017x}.ec2.internal"] = NodeCapacity(
            f"i-{i:017x}.ec2.internal", path, "p5.48xlarge", f"i-{i:017x}", alloc, used
        )
    return snap


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return ordered[len(ordered) // 2], ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def _api_event(
    stack: Any, caller: Any, body: dict[str, Any], query: dict[str, str] | None = None
) -> dict[str, Any]:
    """The very event the local API Gateway builds for a signed POST /v1/jobs."""
    return dict(stack.api.json_post_event(caller, "/v1/jobs", body, query))


def _gpu_job(name: str, gpus: int, pods: int, level: str) -> dict[str, Any]:
    return {
        "job_name": name,
        "image": "x",
        "accelerators": gpus,
        "replica_count": pods,
        "required_topology": level,
    }


def bench_api(sizes: list[int], runs: int, quiet: bool) -> list[dict[str, Any]]:
    from topogov.adapters.snapshot_store import S3SnapshotStore
    from topogov.domain.policy import Caller
    from topogov.domain.submission import JobRequest
    from topogov.handlers import api
    from topogov.logic.admission import decide
    from topogov_local.lambda_context import LocalContext
    from topogov_local.stack import LocalStack, StackOptions

    rows: list[dict[str, Any]] = []
    arn = "arn:aws:iam::123456789012:user/topogov-team-a"
    with tempfile.TemporaryDirectory(prefix="topogov-bench-api-") as tmp:
        opts = StackOptions(directory=Path(tmp), fleet="p5.48xlarge=8", extra_nodes=False, api_port=0)
        with LocalStack(opts) as stack:
            os.environ.update(stack.env())
            svc = api.service()
            store = S3SnapshotStore(stack.client("s3"), stack.output("SnapshotBucket"))
            team_a = next(c for c in stack.api.callers.values() if c.arn == arn)
            for n in sizes:
                store.save(synthetic_snapshot(n))
                svc.refresh_snapshot()  # a warm container with the index of the current snapshot
                request = JobRequest.model_validate(_gpu_job("bench", 8, 16, "layer-2"))
                samples = []
                for _ in range(runs):
                    t0 = time.perf_counter()
                    decide(request, caller=Caller.of(arn), policy=svc.policy, index=svc.index())
                    samples.append(time.perf_counter() - t0)
                p50, p99 = percentiles(samples)
                rows.append(
                    {"nodes": n, "what": "decision (in process)", "p50_ms": p50 * 1e3, "p99_ms": p99 * 1e3}
                )
                passes = (
                    ("dry run via the handler", {"dryRun": "true"}, runs),
                    ("submission via the handler", None, 60),
                )
                for label, query, count in passes:
                    samples = []
                    for i in range(count):
                        ev = _api_event(stack, team_a, _gpu_job(f"b-{n}-{i}", 1, 1, "layer-3"), query)
                        t0 = time.perf_counter()
                        out = api.handler(ev, LocalContext(function_name="topogov-api"))
                        samples.append(time.perf_counter() - t0)
                        if out["statusCode"] not in (200, 201):
                            raise RuntimeError(f"{label}: {out['statusCode']} {out['body'][:300]}")
                    p50, p99 = percentiles(samples)
                    rows.append({"nodes": n, "what": label, "p50_ms": p50 * 1e3, "p99_ms": p99 * 1e3})
                for r in rows[-3:]:
                    _say("#   " + json.dumps(r), quiet)
            cold = _api_event(stack, team_a, _gpu_job("cold", 8, 4, "layer-3"), {"dryRun": "true"})
            rows.append(cold_first_request(stack, cold, sizes[-1]))
    return rows


COLD = """
import json, sys, time
t0 = time.perf_counter()
from topogov.handlers.api import handler
t1 = time.perf_counter()
from topogov_local.lambda_context import LocalContext
out = handler(json.load(sys.stdin), LocalContext(function_name="topogov-api"))
t2 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "first_request_s": t2 - t1, "status": out["statusCode"]}))
"""


def cold_first_request(stack: Any, event: dict[str, Any], nodes: int, runs: int = 5) -> dict[str, Any]:
    """A fresh interpreter: import the handler, then answer one dry run (the real cold start)."""
    import statistics
    import subprocess
    import sys

    env = {**os.environ, **stack.env(), "AWS_LAMBDA_FUNCTION_NAME": "topogov-api"}
    got = []
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", COLD],
            input=json.dumps(event),
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        got.append(json.loads(out.stdout.strip().splitlines()[-1]))
    if any(g["status"] != 200 for g in got):
        raise RuntimeError(f"cold dry run failed: {got}")
    return {
        "nodes": nodes,
        "what": "cold start: import + first dry run (median)",
        "p50_ms": statistics.median(g["import_s"] + g["first_request_s"] for g in got) * 1e3,
        "p99_ms": max(g["import_s"] + g["first_request_s"] for g in got) * 1e3,
    }


def run_governor(args: argparse.Namespace) -> int:
    """``topogov bench governor``: governor passes (first: every object created; steady: nothing to
    do; drift: one ClusterQueue edited by hand) for the sample policy on fleets of N GPU nodes
    (90 % p5.48xlarge, 10 % p6-b200.48xlarge), against a real API server with Kueue (its CRDs,
    webhooks and conversion judge every write). Reads and writes are the client's calls; cpu_ms this
    process's CPU for the pass (render, compare, HTTP)."""
    from topogov.adapters.kube import KubeHttp
    from topogov.adapters.kube_auth import kubeconfig_api_client
    from topogov.adapters.kube_objects import KubeObjects, object_path
    from topogov.domain.policy import load_policy_file
    from topogov.domain.quantity import Resources
    from topogov.domain.snapshot import Snapshot
    from topogov.domain.tree import NodeCapacity
    from topogov.logic.governor import Governor
    from topogov_local.cluster.controlplane import ControlPlane

    policy = load_policy_file(str(args.policy))
    rows: list[dict[str, Any]] = []
    server = ControlPlane(Path(tempfile.mkdtemp()), rbac=None).start()
    try:
        cfg = server.kubeconfig("admin")
        for n in args.nodes or [100, 1000, 10000]:
            http = KubeHttp(kubeconfig_api_client(str(cfg)))
            server.reset()
            alloc = {"p5.48xlarge": Resources(8, 32, 191_450, 2002 * 2**30)}
            alloc["p6-b200.48xlarge"] = Resources(8, 8, 191_450, 2002 * 2**30)
            nodes = [
                NodeCapacity(f"n{i}", (), t, allocatable=alloc[t])
                for i, t in enumerate(["p5.48xlarge"] * (n - n // 10) + ["p6-b200.48xlarge"] * (n // 10))
            ]
            snapshot = Snapshot(nodes={x.name: x for x in nodes})
            governor = Governor(KubeObjects(http))
            for label in ("first", "steady", "drift"):
                if label == "drift":
                    path = object_path(
                        "kueue.x-k8s.io/v1beta1", "ClusterQueue", "hyperpod-ns-team-a-clusterqueue"
                    )
                    cq = http.request("GET", path).body
                    cq["spec"]["stopPolicy"] = "Hold"
                    http.request("PUT", path, body=cq)
                cpu, wall = time.process_time(), time.perf_counter()
                s = governor.run(policy, snapshot, http.counters)
                rows.append(
                    {
                        "nodes": n,
                        "pass": label,
                        "k8s_reads": s.k8s_reads,
                        "k8s_writes": s.k8s_writes,
                        "changes": s.applied,
                        "cpu_ms": round((time.process_time() - cpu) * 1000, 1),
                        "wall_ms": round((time.perf_counter() - wall) * 1000, 1),
                    }
                )
                if args.json:
                    print(json.dumps(rows[-1]), flush=True)
    finally:
        server.stop()
    if not args.json and rows:
        print(table(list(rows[0]), [list(r.values()) for r in rows]))
    return EXIT_OK
