"""``topogov bench reconcile``: labeler passes against a fresh local stack per node count.

Passes: ``first`` (every node needs labels), ``steady`` (nothing changed), ``drift`` (labels edited
by hand on 1 % of nodes), ``new`` (1 % new instances joined). ``cpu_s`` is this process's CPU
time for the pass (the emulators run in their own processes); ``wall_s`` its elapsed time.
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

from topogov.cli.main import EXIT_OK
from topogov.cli.render import table

PASSES = ("first", "steady", "drift", "new")


def _say(text: str, quiet: bool) -> None:
    if not quiet:
        print(text, flush=True)


def bench_nodes(n: int, ec2_rate: float, quiet: bool) -> list[dict[str, Any]]:
    from topogov.bootstrap import build_labeler
    from topogov.config import ReconcileSettings
    from topogov.domain.labels import layer_label
    from topogov.local import fleet
    from topogov.local.stack import LocalStack, StackOptions
    from topogov.logic.labeler import PassOptions

    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="topogov-bench-") as tmp:
        _say(f"# {n} nodes: starting a fresh local stack and launching {n} p5.48xlarge instances ...", quiet)
        t0 = time.perf_counter()
        opts = StackOptions(
            directory=Path(tmp),
            fleet=f"p5.48xlarge={n}",
            extra_nodes=False,
            ec2_rate=ec2_rate,
            ec2_burst=1,
            api_port=None,
        )
        with LocalStack(opts) as stack:
            _say(f"#   seeded in {time.perf_counter() - t0:.1f}s", quiet)
            os.environ.update(stack.env())  # boto3 reads AWS_ENDPOINT_URL from the environment
            settings = ReconcileSettings.from_env()
            labeler = build_labeler(settings)
            kube = stack.kube()

            def run_pass(name: str, drifted: int) -> None:
                kube.request("DELETE", "/_emulator/requests")
                cpu0, wall0 = time.process_time(), time.perf_counter()
                s = labeler.run(PassOptions(refresh_after_s=settings.refresh_after_s))
                cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
                served = kube.request("GET", "/_emulator/requests").body or {}
                results.append(
                    {
                        "nodes": s.nodes_seen,
                        "pass": name,
                        "ec2_calls": s.ec2_calls,
                        "k8s_list_calls": s.k8s_reads,
                        "k8s_writes": s.k8s_writes,
                        "k8s_writes_seen_by_server": int(served.get("PATCH nodes", 0)),
                        "drifted": drifted,
                        "patched": s.patched,
                        "complete": s.complete,
                        "cpu_s": round(cpu, 3),
                        "wall_s": round(wall, 3),
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
    return results


def targets_met(rows: list[dict[str, Any]]) -> list[str]:
    """The issue's targets, checked against the measured rows (printed, never silently passed)."""
    problems = []
    for r in rows:
        n0 = r["nodes"] if r["pass"] != "new" else r["nodes"] - r["drifted"]
        want_ec2 = {
            "first": math.ceil(n0 / 100),
            "steady": 0,
            "drift": 0,
            "new": math.ceil(r["drifted"] / 100),
        }
        if r["ec2_calls"] != want_ec2[r["pass"]]:
            problems.append(f"{r['nodes']} {r['pass']}: ec2_calls {r['ec2_calls']} != {want_ec2[r['pass']]}")
        if r["k8s_writes"] != r["drifted"]:
            problems.append(
                f"{r['nodes']} {r['pass']}: k8s_writes {r['k8s_writes']} != drifted {r['drifted']}"
            )
        if r["nodes"] >= 10_000 and r["cpu_s"] >= 2.0:
            problems.append(f"{r['nodes']} {r['pass']}: cpu_s {r['cpu_s']} >= 2.0")
    return problems


def run(args: argparse.Namespace) -> int:
    rows: list[dict[str, Any]] = []
    for n in args.nodes:
        rows.extend(bench_nodes(n, args.ec2_rate, quiet=args.json))
    if args.json:
        for r in rows:
            print(json.dumps(r))
        return EXIT_OK
    print()
    print(
        f"Emulated DescribeInstanceTopology bucket raised to {args.ec2_rate:g} req/s for the benchmark "
        "(EC2's is 1 req/s); the labeler paced itself to the same rate."
    )
    cols = ["nodes", "pass", "ec2_calls", "k8s_list_calls", "k8s_writes", "drifted", "cpu_s", "wall_s"]
    print(table(cols, ([r[c] for c in cols] for r in rows)))
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
