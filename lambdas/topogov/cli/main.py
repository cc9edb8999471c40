"""``topogov`` — the command line. Subcommands import what they need only when they run."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3
LOCAL_DIR = Path(".topogov/local")

EXIT_CODES_HELP = """exit codes:
  0  done
  1  refused: the API answered with an error (400 invalid, 403 not your team, 404, 409,
     422 never admissible / topology infeasible / priority not allowed, 429 in-flight cap)
  2  usage: bad flags or arguments, no endpoint found, Graphviz missing for --format svg
  3  unreachable or not authenticated: no connection, no or unknown credentials, a request
     API Gateway refuses (403: unsigned, bad signature, expired, unknown key), the API's 401,
     or the service failing (5xx, throttled)"""

ENDPOINT_HELP = """endpoint (first found): --endpoint, $TOPOGOV_ENDPOINT, endpoint = "URL" in
  ~/.config/topogov/config.toml (or the file $TOPOGOV_CONFIG names; optional region = "..."),
  "api" of ./.topogov/local/endpoints.json (written by `topogov local`).
credentials: the AWS chain (--profile or AWS_PROFILE, AWS_SHARED_CREDENTIALS_FILE, environment
  variables, SSO, roles); every request is SigV4-signed for execute-api."""


class Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors: ``topogov submit: error: ... (see 'topogov submit --help')``."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def _local(args: argparse.Namespace) -> int:
    from topogov.cli.local_cmd import run

    return run(args)


def _topology(args: argparse.Namespace) -> int:
    from topogov.cli.topology_cmd import run

    return run(args)


def _reconcile(args: argparse.Namespace) -> int:
    from topogov.cli.reconcile_cmd import run

    return run(args)


def _bench(args: argparse.Namespace) -> int:
    from topogov.cli.bench_cmd import run

    return run(args)


def _bench_governor(args: argparse.Namespace) -> int:
    from topogov.cli.bench_cmd import run_governor

    return run_governor(args)


def _bench_api(args: argparse.Namespace) -> int:
    from topogov.cli.bench_cmd import run_api

    return run_api(args)


def parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="topogov",
        description="Topology-aware task governance for GPU clusters on Amazon EKS.",
        epilog=f"{EXIT_CODES_HELP}\n\n{ENDPOINT_HELP}\n\n'topogov COMMAND --help' for a command's flags.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    local = sub.add_parser(
        "local",
        help="run the local stack (EC2, S3, Kubernetes emulation and the reconciler) with a walkthrough",
        description="Start the local stack, run the walkthrough, then reconcile on a schedule until Ctrl-C.",
    )
    local.add_argument("--once", action="store_true", help="run the walkthrough and exit 0")
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

    from topogov.cli.jobs_cmd import add_api_options, add_parsers

    add_parsers(sub)  # submit, jobs, job, cancel, teams

    topo = sub.add_parser(
        "topology",
        help="print the cluster's network topology (Mermaid, JSON or an SVG picture)",
        description=(
            "Print the topology tree. With an API endpoint (see 'endpoint' below), from the API "
            "(GET /v1/topology: the snapshot the API decides on); with --kubeconfig or --context, or "
            "when no endpoint is found, from the node labels of a cluster (one paginated list). "
            "--format svg draws it with Graphviz's `dot`, which must be installed."
        ),
        epilog=f"{EXIT_CODES_HELP}\n\n{ENDPOINT_HELP}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    topo.add_argument(
        "--format", choices=("mermaid", "json", "svg"), default=None, help="mermaid (default), json or svg"
    )
    topo.add_argument("--out", metavar="FILE", default=None, help="write to FILE instead of stdout")
    kube = topo.add_argument_group("from a cluster's node labels")
    kube.add_argument(
        "--kubeconfig", default=None, help="read nodes (default: .topogov/local/kubeconfig, else $KUBECONFIG)"
    )
    kube.add_argument("--context", default=None, help="kubeconfig context")
    add_api_options(topo)
    topo.set_defaults(func=_topology, cli_prog="topogov topology")

    rec = sub.add_parser(
        "reconcile",
        help="run one labeler pass against a cluster",
        description="One full pass of the reconcile handler's logic; prints its summary as JSON.",
    )
    target = rec.add_mutually_exclusive_group()
    target.add_argument("--kubeconfig", default=None, help="kubeconfig of the cluster (default: local stack)")
    target.add_argument("--cluster", default=None, help="EKS cluster name (endpoint and token from AWS)")
    rec.add_argument("--bucket", default=None, help="S3 bucket of the topology snapshot")
    rec.add_argument("--ec2-rate", type=float, default=1.0, help="DescribeInstanceTopology calls per second")
    rec.set_defaults(func=_reconcile)

    from topogov.cli.policy_cmd import add_parser as add_policy_parser

    add_policy_parser(sub)

    from topogov.cli.governor_cmd import add_parser as add_governor_parser

    add_governor_parser(sub)

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
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit code (see ``EXIT_CODES_HELP``)."""
    args = parser().parse_args(argv)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`topogov jobs | head`): the command's work is done; stop quietly,
        # with stdout on /dev/null so the interpreter's final flush cannot fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
