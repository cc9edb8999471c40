"""The developer commands ``topogov local`` and ``topogov bench``, added to ``topogov`` by the
``topogov.commands`` entry point of this distribution (see local/pyproject.toml)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from topogov_cli.common import LOCAL_DIR


def _local(args: argparse.Namespace) -> int:
    from topogov_local.processes import collect_rarely
    from topogov_local.walkthrough import run

    collect_rarely()  # a stack's clients, the snapshot and the libraries live as long as the process

    code = run(args)
    _exit_now_if_the_command_is_the_process(code)
    return code


def _exit_now_if_the_command_is_the_process(code: int) -> None:
    """Once ``topogov local`` has stopped its stack, end the process with ``os._exit``: the
    interpreter's finalization of what a stack leaves in memory (clients, the snapshot, the
    libraries' modules) took 2.8 to 5 s after a Ctrl-C on a loaded machine, past the 3 s a stop may
    take. Only when the command is the process (``topogov``, ``python -m topogov_cli.main``), never
    in a caller's interpreter."""
    import logging
    import os
    import sys

    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if Path(sys.argv[0]).name != "topogov" and getattr(spec, "name", None) != "topogov_cli.main":
        return
    logging.shutdown()  # the functions' log file, flushed and closed
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _bench(args: argparse.Namespace) -> int:
    from topogov_local.bench.reconcile import run

    return run(args)


def _bench_governor(args: argparse.Namespace) -> int:
    from topogov_local.bench.reconcile import run_governor

    return run_governor(args)


def _bench_api(args: argparse.Namespace) -> int:
    from topogov_local.bench.reconcile import run_api

    return run_api(args)


def _bench_admission(args: argparse.Namespace) -> int:
    from topogov_local.bench.admission import run_admission

    return run_admission(args)


def _bench_kueue_perf(args: argparse.Namespace) -> int:
    from topogov_local.bench.kueue_perf import run

    return run(args)


def _bench_policies(args: argparse.Namespace) -> int:
    from topogov_local.bench.policies import run

    return run(args)


def _bench_simulate(args: argparse.Namespace) -> int:
    from topogov_local.bench.policies import run_speed

    return run_speed(args)


def _bench_estimate(args: argparse.Namespace) -> int:
    from topogov_local.bench.estimate import run

    return run(args)


def _bench_placement(args: argparse.Namespace) -> int:
    from topogov_local.bench.placement import run

    return run(args)


def _bench_dashboard(args: argparse.Namespace) -> int:
    from topogov_local.bench.dashboard import run

    return run(args)


def _bench_coldstart(args: argparse.Namespace) -> int:
    from topogov_local.bench.coldstart import run

    return run(args)


def _id_page(text: str) -> int:
    """``--ec2-id-page``: DescribeInstanceTopology answers at most 100 instances a page."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 100:
        raise argparse.ArgumentTypeError(f"{text!r} is not a page size: an integer 1..100")
    return value


def add_parsers(sub: Any) -> None:
    """``topogov local`` and ``topogov bench`` (with one parser per benchmark), added to the CLI."""
    _local_parser(sub)
    bench = sub.add_parser("bench", help="benchmarks", description="Benchmarks against the local stack.")
    bsub = bench.add_subparsers(dest="bench", required=True, metavar="BENCH")
    _bench_reconcile_parser(bsub)
    _bench_api_parser(bsub)
    _bench_governor_parser(bsub)
    _bench_admission_parser(bsub)
    _bench_kueue_perf_parser(bsub)
    _bench_policies_parser(bsub)
    _bench_simulate_parser(bsub)
    _bench_estimate_parser(bsub)
    _bench_placement_parser(bsub)
    _bench_coldstart_parser(bsub)
    _bench_dashboard_parser(bsub)


def _local_parser(sub: Any) -> None:
    local = sub.add_parser(
        "local",
        help="run the local stack (AWS on moto, Kubernetes, Kueue, the functions) with a walkthrough",
        description=(
            "Start the local stack (EC2, S3 and DynamoDB on moto; etcd, Kubernetes, Kueue, KWOK, JobSet "
            "and the Kubeflow training operator built from their Go modules; the two functions and the "
            "REST API), run the walkthrough, then reconcile on a schedule until Ctrl-C."
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
    local.add_argument(
        "--dashboard-port",
        type=int,
        default=0,
        help="port of the dashboard on 127.0.0.1, signed as topogov-admin (0 = a free one)",
    )
    local.add_argument(
        "--hyperpod",
        action="store_true",
        help="the cluster is a SageMaker HyperPod cluster: HyperPod nodes, the stack deployed with "
        "-c topogov:hyperpodClusterArn, the task governance add-on emulated (docs/hyperpod.md)",
    )
    local.add_argument(
        "--no-training-controllers",
        action="store_true",
        help="leave out JobSet and the training operator (PyTorchJob): Kueue then manages batch/v1 Jobs only",
    )
    local.add_argument(
        "--labelled-by-eks",
        action="store_true",
        help="the nodes start with EKS's own topology labels (EC2's answers); the labeler adopts them",
    )
    local.set_defaults(func=_local)


def _bench_reconcile_parser(bsub: Any) -> None:
    brec = bsub.add_parser(
        "reconcile",
        help="reconcile passes (first, steady, drift, new) at N nodes",
        description="Runs first/steady/drift/new passes against a fresh local stack per node count.",
    )
    brec.add_argument("--nodes", type=int, action="append", required=True, help="node count (repeatable)")
    brec.add_argument("--json", action="store_true", help="one JSON object per pass")
    brec.add_argument("--ec2-rate", type=float, default=200.0, help="raised emulated EC2 rate (200/s)")
    brec.add_argument(
        "--ec2-id-page",
        type=_id_page,
        default=None,
        metavar="N",
        help="the emulated EC2 pages id queries at N (EC2's documented default page is 20; default 100)",
    )
    brec.add_argument(
        "--labelled-by-eks", action="store_true", help="the nodes start with EKS's own topology labels"
    )
    brec.set_defaults(func=_bench)


def _bench_api_parser(bsub: Any) -> None:
    bapi = bsub.add_parser(
        "api",
        help="API latency (decision, dry run, submission) and cold-start import time",
        description="In-process latency p50/p99 at 64 and 10,000 nodes in the snapshot; handler import time.",
    )
    bapi.add_argument("--nodes", type=int, action="append", help="snapshot sizes (default 64 and 10000)")
    bapi.add_argument("--runs", type=int, default=200, help="samples per measurement (200)")
    bapi.add_argument("--json", action="store_true", help="one JSON object per measurement")
    bapi.set_defaults(func=_bench_api)


def _bench_governor_parser(bsub: Any) -> None:
    bgov = bsub.add_parser(
        "governor",
        help="governor passes (first, steady, drift): Kubernetes calls and CPU at N GPU nodes",
        description="Governor passes for a policy on N GPU nodes, against the local Kubernetes API.",
    )
    bgov.add_argument("--nodes", type=int, action="append", help="GPU nodes (default 100, 1000, 10000)")
    bgov.add_argument("--policy", type=Path, default=Path("teams.yaml"), help="team policy (teams.yaml)")
    bgov.add_argument("--json", action="store_true", help="one JSON object per pass")
    bgov.set_defaults(func=_bench_governor)


def _bench_admission_parser(bsub: Any) -> None:
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


def _bench_kueue_perf_parser(bsub: Any) -> None:
    bkp = bsub.add_parser(
        "kueue-perf",
        help="Kueue's own TAS performance test run here, beside the model's timed replay of it",
        description=(
            "Builds upstream's performance runner and minimalkueue (Kueue v0.17.0), runs the TAS scenario "
            "(640 nodes, 15,000 workloads; about 7 minutes) on the local cluster's etcd and API server, and "
            "prints each class's mean time to admission beside upstream's and the model's timed replay."
        ),
    )
    where = bkp.add_mutually_exclusive_group()
    where.add_argument("--keep", type=Path, default=None, help="a new directory for the artifacts")
    where.add_argument(
        "--from",
        dest="artifacts",
        type=Path,
        default=None,
        help="read the artifacts an earlier run kept (--keep DIR) instead of running Kueue again",
    )
    bkp.add_argument("--untimed", action="store_true", help="also the zero-time replay (about 100 s of CPU)")
    bkp.add_argument("--json", action="store_true", help="one JSON object")
    bkp.set_defaults(func=_bench_kueue_perf)


def _bench_policies_parser(bsub: Any) -> None:
    bpol = bsub.add_parser(
        "policies",
        help="Topogov's topology decisions against plain Kueue, on the same trace and fleet (the model)",
        description=(
            "The same job trace on the same fleet under four regimes (plain-kueue, preferred, required, "
            "topogov), on the Kueue model, with a run-time penalty for pods spread across network nodes "
            "(412/631/905 ms per step, scaled by each --penalty-scale): wait p50/p95, utilization, "
            "effective throughput, multi-node jobs inside one layer-3 node; then a Markdown table."
        ),
    )
    bpol.add_argument("--trace", action="append", help="walkthrough, acme-seren (repeatable; default both)")
    bpol.add_argument("--jobs", type=int, default=3000, help="jobs of the acme-seren trace (3000)")
    bpol.add_argument("--load", type=float, default=1.5, help="acme-seren's offered load x its GPUs (1.5)")
    bpol.add_argument(
        "--penalty-scale", type=float, action="append", help="penalty scales (repeatable; 0, 0.5, 1, 2)"
    )
    bpol.add_argument("--json", action="store_true", help="one JSON object per simulation")
    bpol.set_defaults(func=_bench_policies)


def _bench_simulate_parser(bsub: Any) -> None:
    bsim = bsub.add_parser(
        "simulate",
        help="the trace simulator's speed: a week of Seren-shaped jobs on N nodes, CPU seconds",
        description="CPU seconds of topogov whatif's replay for a week of jobs (default 5,000 and 20,000).",
    )
    bsim.add_argument("--nodes", type=int, default=2000, help="p5.48xlarge nodes (2000)")
    bsim.add_argument("--jobs", type=int, action="append", help="jobs (repeatable; default 5000, 20000)")
    bsim.add_argument("--json", action="store_true", help="one JSON object per run")
    bsim.set_defaults(func=_bench_simulate)


def _bench_estimate_parser(bsub: Any) -> None:
    best = bsub.add_parser(
        "estimate",
        help="a pending job's start estimate in the API at N nodes: ms per estimate",
        description="Milliseconds of GET /v1/jobs/{team}/{name}'s start estimate (target p50 200 ms).",
    )
    best.add_argument("--nodes", type=int, action="append", help="p5 hosts (repeatable; default 10000)")
    best.add_argument("--pending", type=int, default=1000, help="pending jobs kept (1000)")
    best.add_argument("--jobs", type=int, default=None, help="jobs submitted (default nodes x 4/3)")
    best.add_argument("--runs", type=int, default=5, help="pending jobs estimated, spread over the queue (5)")
    best.add_argument(
        "--grouped",
        action="store_true",
        help="every pending job of several pods as a PyTorchJob's Workload: a master and its workers, one "
        "pod-set group (kueue.x-k8s.io/podset-group-name)",
    )
    best.add_argument("--json", action="store_true", help="one JSON object per fleet size")
    best.set_defaults(func=_bench_estimate)


def _bench_placement_parser(bsub: Any) -> None:
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


def _bench_coldstart_parser(bsub: Any) -> None:
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


def _bench_dashboard_parser(bsub: Any) -> None:
    b = bsub.add_parser(
        "dashboard",
        help="the dashboard's fleet page in headless chromium: first paint, bytes and calls per refresh",
        description="The reconcile bench's placed fleet (N nodes, N/5 Jobs of 10 Running pods) behind "
        "topogov dashboard; chromium measures the fleet page's first paint, the bytes per refresh "
        "(compressed) and the API calls per refresh. Targets: 1.5 s, 2 MB, 1.",
    )
    b.add_argument("--nodes", type=int, action="append", required=True, help="node count (repeatable)")
    b.add_argument("--loads", type=int, default=3, help="reloads after the first load (3)")
    b.add_argument("--watch-s", type=float, default=10.0, help="seconds of refreshes counted (10)")
    b.add_argument("--json", action="store_true", help="one JSON object per fleet size")
    b.add_argument(
        "--without-stack",
        action="store_true",
        help="the same fleet's snapshot in memory behind the API's handler and the local gateway "
        "(no Kubernetes, no moto): the page's figures in a minute",
    )
    b.set_defaults(func=_bench_dashboard)
