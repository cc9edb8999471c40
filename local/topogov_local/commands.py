"""The developer commands ``topogov local`` and ``topogov bench``, added to ``topogov`` by the
``topogov.commands`` entry point of this distribution (see local/pyproject.toml)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from topogov_cli.common import LOCAL_DIR


def _local(args: argparse.Namespace) -> int:
    from topogov_local.walkthrough import run

    return run(args)


def _bench(args: argparse.Namespace) -> int:
    from topogov_local.bench import run

    return run(args)


def _bench_governor(args: argparse.Namespace) -> int:
    from topogov_local.bench import run_governor

    return run_governor(args)


def _bench_api(args: argparse.Namespace) -> int:
    from topogov_local.bench import run_api

    return run_api(args)


def _bench_admission(args: argparse.Namespace) -> int:
    from topogov_local.bench_admission import run_admission

    return run_admission(args)


def _bench_placement(args: argparse.Namespace) -> int:
    from topogov_local.bench_placement import run

    return run(args)


def _bench_coldstart(args: argparse.Namespace) -> int:
    from topogov_local.bench_coldstart import run

    return run(args)


def add_parsers(sub: Any) -> None:
    local = sub.add_parser(
        "local",
        help="run the local stack (AWS on moto, Kubernetes, Kueue, the functions) with a walkthrough",
        description=(
            "Start the local stack (EC2, S3 and DynamoDB on moto; etcd, Kubernetes, Kueue and KWOK "
            "built from their Go modules; the two functions and the REST API), run the walkthrough, "
            "then reconcile on a schedule until Ctrl-C."
        ),
    )
    local.add_argument("--once", action="store_true", help="run the walkthrough and exit 0")
    local.add_argument(
        "--no-walkthrough", action="store_true", help="start the stack, run one pass, then reconcile"
    )
    local.add_argument("--interval", type=float, default=30.0, help="seconds between reconcile passes (30)")
    local.add_argument("--fleet", default=None, help="TYPE=COUNT[@AZ],... (default: 64 p5, 4 p6-b200, 2 c5)")
    local.add_argument("--no-extra-nodes", action="store_true", help="omit the Fargate/hybrid/HyperPod nodes")
    local.add_argument("--dir", type=Path, default=LOCAL_DIR, help="where the stack writes its files")
    local.add_argument(
        "--ec2-rate", type=float, default=1.0, help="emulated DescribeInstanceTopology rate/s (1)"
    )
    local.add_argument(
        "--api-port", type=int, default=8080, help="port of the local REST API (8080; 0 = any)"
    )
    local.set_defaults(func=_local)

    bench = sub.add_parser("bench", help="benchmarks", description="Benchmarks against the local stack.")
    bsub = bench.add_subparsers(dest="bench", required=True, metavar="BENCH")
    brec = bsub.add_parser(
        "reconcile",
        help="reconcile passes (first, steady, drift, new) at N nodes",
        description="Runs first/steady/drift/new passes against a fresh local stack per node count.",
    )
    brec.add_argument("--nodes", type=int, action="append", required=True, help="node count (repeatable)")
    brec.add_argument("--json", action="store_true", help="one JSON object per pass")
    brec.add_argument("--ec2-rate", type=float, default=200.0, help="raised emulated EC2 rate (200/s)")
    brec.set_defaults(func=_bench)
    bapi = bsub.add_parser(
        "api",
        help="API latency (decision, dry run, submission) and cold-start import time",
        description="In-process latency p50/p99 at 64 and 10,000 nodes in the snapshot; handler import time.",
    )
    bapi.add_argument("--nodes", type=int, action="append", help="snapshot sizes (default 64 and 10000)")
    bapi.add_argument("--runs", type=int, default=200, help="samples per measurement (200)")
    bapi.add_argument("--json", action="store_true", help="one JSON object per measurement")
    bapi.set_defaults(func=_bench_api)
    bgov = bsub.add_parser(
        "governor",
        help="governor passes (first, steady, drift): Kubernetes calls and CPU at N GPU nodes",
        description="Governor passes for a policy on N GPU nodes, against the local Kubernetes API.",
    )
    bgov.add_argument("--nodes", type=int, action="append", help="GPU nodes (default 100, 1000, 10000)")
    bgov.add_argument("--policy", type=Path, default=Path("teams.yaml"), help="team policy (teams.yaml)")
    bgov.add_argument("--json", action="store_true", help="one JSON object per pass")
    bgov.set_defaults(func=_bench_governor)
    badm = bsub.add_parser(
        "admission",
        help="the Kueue model: one placement and one admission cycle at N nodes; the real Kueue's latency",
        description=(
            "Model placement and admission-cycle latency p50/p99 at N nodes and P pending workloads, "
            "Kueue's TAS performance-test shape on the model, and submission-to-Running in the local cluster."
        ),
    )
    badm.add_argument(
        "--nodes", type=int, action="append", help="node count (repeatable; default 1000 and 10000)"
    )
    badm.add_argument(
        "--pending", type=int, action="append", help="pending workloads (repeatable; default 100 and 1000)"
    )
    badm.add_argument("--json", action="store_true", help="one JSON object per measurement")
    badm.set_defaults(func=_bench_admission)
    bpla = bsub.add_parser(
        "placement",
        help="placement quality, capacity view and a waiting job's closest domain: CPU at N nodes",
        description=(
            "What placement costs a reconcile pass (parsing the pods it lists anyway, the quality) and "
            "the API (the capacity view, a waiting job's closest domain), p50/p99 in process."
        ),
    )
    bpla.add_argument("--nodes", type=int, action="append", help="p5 hosts (repeatable; default 10000)")
    bpla.add_argument("--jobs", type=int, default=None, help="running Jobs (default nodes / 4)")
    bpla.add_argument("--pods-per-job", type=int, default=8, help="pods per Job (8; two per node)")
    bpla.add_argument("--runs", type=int, default=20, help="samples per measurement (20)")
    bpla.add_argument("--json", action="store_true", help="one JSON object per measurement")
    bpla.set_defaults(func=_bench_placement)
    bcold = bsub.add_parser(
        "coldstart",
        help="cold start before/after: layer size, handler imports, import + first dry run, SnapStart",
        description=(
            "Builds the layer before and after pruning, then times, in fresh interpreters of the Lambda "
            "runtime's Python, each handler's import and the api handler's import + first dry run, "
            "without and with SnapStart's hooks (median of --runs)."
        ),
    )
    bcold.add_argument("--runs", type=int, default=5, help="fresh interpreters per figure (5)")
    bcold.add_argument("--python", default=None, help="the interpreter (default: python3.12 if found)")
    bcold.add_argument("--json", action="store_true", help="one JSON object")
    bcold.set_defaults(func=_bench_coldstart)
