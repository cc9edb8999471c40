"""``topogov whatif``: what a policy or fleet change would do, on the same job trace, side by side.

Offline (with ``--fleet``): ``--trace FILE --fleet FILE --policy FILE [--baseline-policy FILE]
[--fleet-change +p5.48xlarge=32 ...]``; ``--fleet snapshot`` reads the fleet from the topology
snapshot the reconcile pass writes to S3 (the local stack's unless ``--bucket``), its nodes as empty.
The baseline is the baseline policy (else ``--policy``) on the fleet as given; the proposal is
``--policy`` on the fleet with the changes. Both run on the Kueue model (:mod:`topogov.logic.whatif`),
each job through the API's own decision.

Against a deployment (no ``--fleet``; admins): ``--trace FILE`` or ``--history 7d`` (the jobs
submitted in that window, each with the run time the reconcile pass observed), ``[--policy FILE]
[--fleet-change ...]``: ``POST /v1/whatif`` replays it on the current snapshot's fleet under the
policy in force (``baseline``) and the proposal.

Exit 0 with the comparison; 2 when an input is unreadable or wrong (the file, line and field named);
3 when ``--fleet snapshot`` cannot read the snapshot or the API cannot be reached; the API's refusals
as in every command that calls it.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

from topogov_cli.common import add_api_options, guarded

PROG = "topogov whatif"
DESCRIPTION = (
    "Replay a job trace on a fleet under the baseline policy and under a proposed policy "
    "and/or changed fleet, on the Kueue model, and print both side by side: per team and "
    "for the fleet, waits (p50/p95/max), jobs started, GPU-hours used vs quota, borrowed, "
    "preemptions, multi-node jobs inside one network node per layer, utilization, free "
    "whole layer-3 nodes. Offline from files with --fleet; without it, an admin's "
    "POST /v1/whatif on the deployment's fleet and policy in force (--trace or --history)."
)
EPILOG = (
    "trace CSV columns: submit_s,team,name,pods,gpus_per_pod,instance_type,duration_s,\n"
    "  topology_mode,topology_level,fallback_after_s,priority (empty = the API's default)\n"
    "fleet CSV columns: node,instance_type,layer-1,layer-2,layer-3,layer-4\n\n"
    "exit codes:\n  0  done\n  2  usage: a missing or unreadable file, a wrong row or field (named)\n"
    "  3  --fleet snapshot: the snapshot unreachable (no credentials, no bucket)\n\n"
    "example:\n"
    "  topogov whatif --trace examples/whatif/trace.csv --fleet examples/whatif/fleet.csv \\\n"
    "    --baseline-policy teams.yaml --policy examples/whatif/teams-proposed.yaml\n"
    "  topogov whatif --history 7d --policy examples/whatif/teams-proposed.yaml  # a deployment"
)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "whatif",
        help="what a policy or fleet change would do to a job trace",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--trace", type=Path, metavar="FILE", help="the job trace (CSV)")
    p.add_argument(
        "--history",
        metavar="WINDOW",
        help="instead of --trace, against a deployment: the jobs submitted in the last WINDOW "
        "(7d, 36h, 90m) with their observed run times",
    )
    p.add_argument(
        "--fleet",
        metavar="FILE|snapshot",
        help="offline: the fleet (CSV), or the topology snapshot's (without it: the deployment's API)",
    )
    p.add_argument("--bucket", default=None, help="with --fleet snapshot: the snapshot's S3 bucket")
    p.add_argument(
        "--policy",
        type=Path,
        metavar="FILE",
        help="the proposed policy (YAML; offline required, against a deployment optional)",
    )
    p.add_argument(
        "--baseline-policy", type=Path, metavar="FILE", help="the policy in force (default: --policy)"
    )
    p.add_argument(
        "--fleet-change",
        action="append",
        default=[],
        metavar="CHANGE",
        help="+TYPE=N adds N nodes as a new layer-3 domain, -TYPE=N removes N (repeatable; proposal only)",
    )
    p.add_argument(
        "--regime",
        default="as-submitted",
        help="how jobs ask for topology: as-submitted (default), plain-kueue, preferred, required, topogov",
    )
    p.add_argument(
        "--release-lag",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="admission to pods running plus end to quota released, beyond each job's duration (0)",
    )
    p.add_argument("--output", choices=("text", "json"), default="text", help="text (default) or json")
    add_api_options(p, output=False)
    p.set_defaults(func=run, cli_prog=PROG)
    return p


def _read(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise _Usage(f"cannot read {what} {path}: {exc.strerror or exc}") from None


class _Usage(Exception):
    pass


class _Unreachable(Exception):
    pass


def scenarios(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """The trace and ``{name: (nodes, policy)}`` the arguments describe; :class:`_Usage` if wrong."""
    from topogov.domain.policy import PolicyError, load_policy
    from topogov.logic.whatif import REGIMES, InputError, change_fleet, parse_fleet, parse_trace

    if args.regime not in REGIMES:
        raise _Usage(f"--regime: must be one of {', '.join(REGIMES)}, got {args.regime!r}")

    def policy(path: Path, flag: str) -> Any:
        try:
            return load_policy(_read(path, "policy"))
        except PolicyError as exc:
            first = exc.problems[0]
            raise _Usage(
                f"{flag} {path} is invalid: {first[0]}: {first[1]}"
                if first[0]
                else f"{flag} {path}: {first[1]}"
            ) from None

    try:
        trace = parse_trace(_read(args.trace, "trace"), str(args.trace))
        if args.fleet == "snapshot":
            nodes = snapshot_fleet(args.bucket)
        else:
            nodes = parse_fleet(_read(Path(args.fleet), "fleet"), str(args.fleet))
        changed = nodes
        for change in args.fleet_change:
            changed = change_fleet(changed, change)
    except InputError as exc:
        raise _Usage(str(exc)) from None
    proposed = policy(args.policy, "--policy")
    baseline = policy(args.baseline_policy, "--baseline-policy") if args.baseline_policy else proposed
    out = {"baseline": (nodes, baseline)}
    if args.baseline_policy or args.fleet_change:
        out["proposed"] = (changed, proposed)
    return trace, out


def snapshot_fleet(bucket: str | None) -> list[Any]:
    """The snapshot's nodes that carry a topology, with nothing requested (the trace's jobs are all
    there is in a replay)."""
    from dataclasses import replace

    from topogov.adapters.snapshot_store import S3SnapshotStore
    from topogov.bootstrap import aws_session, retrying
    from topogov.domain.errors import ConfigError, SnapshotError
    from topogov.domain.quantity import Resources
    from topogov.settings import ReconcileSettings
    from topogov_cli.governor import settings_env

    env = settings_env(argparse.Namespace(kubeconfig=None, cluster=None, bucket=bucket))
    try:
        settings = ReconcileSettings.from_env(env)
        store = S3SnapshotStore(
            retrying(aws_session(settings.region), "s3"), settings.snapshot_bucket, settings.snapshot_key
        )
        snapshot = store.load()
    except ConfigError as exc:
        raise _Usage(f"--fleet snapshot: {exc}") from None
    except SnapshotError as exc:
        raise _Unreachable(f"--fleet snapshot: {exc}") from None
    if snapshot is None:
        raise _Usage("--fleet snapshot: no topology snapshot yet (the reconcile pass writes it)")
    nodes = [replace(n, requested=Resources()) for n in snapshot.nodes.values() if len(n.path) >= 3]
    if not nodes:
        raise _Usage("--fleet snapshot: the snapshot has no node with a network topology")
    return sorted(nodes, key=lambda n: n.name)


def _offline_usage(args: argparse.Namespace) -> str | None:
    """What is wrong with the arguments for the mode they name (offline: ``--fleet``), or None."""
    if args.fleet is not None:
        if args.history is not None:
            return "--history reads a deployment's ledger: leave out --fleet (and --bucket)"
        missing = [f for f, v in (("--trace", args.trace), ("--policy", args.policy)) if v is None]
        return f"offline (--fleet) needs {' and '.join(missing)}" if missing else None
    if (args.trace is None) == (args.history is None):
        return "give --trace FILE or --history WINDOW (with --fleet FILE: offline, from files)"
    if args.baseline_policy is not None or args.bucket is not None:
        flag = "--baseline-policy" if args.baseline_policy is not None else "--bucket"
        return f"{flag} is for offline runs (--fleet); against a deployment the baseline is in force"
    return None


@guarded
def run_online(args: argparse.Namespace) -> int:
    """``POST /v1/whatif``: the trace or the ledger's history on the deployment's snapshot fleet."""
    from topogov.logic.whatif import render_text
    from topogov_cli.common import EXIT_OK, api_for, print_json, usage

    body: dict[str, Any] = {"regime": args.regime, "release_lag_s": args.release_lag}
    if args.history is not None:
        body["history"] = args.history
    else:
        try:
            body["trace"] = _read(args.trace, "trace")
        except _Usage as exc:
            raise usage(str(exc)) from None
    if args.policy is not None:
        try:
            body["policy"] = _read(args.policy, "policy")
        except _Usage as exc:
            raise usage(str(exc)) from None
    if args.fleet_change:
        body["fleet_change"] = list(args.fleet_change)
    answer = api_for(args).call("POST", "/v1/whatif", body=body)
    if args.output == "json":
        print_json(answer)
        return EXIT_OK
    source = f"the ledger's last {args.history}" if args.history is not None else Path(args.trace).name
    print(f"{answer.get('jobs')} jobs from {source}, replayed on the Kueue model; regime {args.regime}")
    left = ((answer.get("history") or {}).get("left_out")) or {}
    if left:
        print("  left out, no run time observed: " + ", ".join(f"{n} {w}" for w, n in sorted(left.items())))
    nodes = answer.get("nodes") or {}
    for name in answer.get("scenarios") or {}:
        changes = f" ({' '.join(args.fleet_change)})" if name == "proposed" and args.fleet_change else ""
        policy = Path(args.policy).name if name == "proposed" and args.policy else "the policy in force"
        print(f"  {name}: {nodes.get(name)} nodes of the snapshot{changes}, {policy}")
    print(kueue_header(answer.get("kueue") or {}))
    print()
    print(render_text(answer["scenarios"]))
    return EXIT_OK


def kueue_line(kueue: dict[str, Any]) -> str:
    """The Kueue release the answer models (``ApiService.kueue_modelled``), and for a release the model
    has no profile for, what may differ."""
    profile = kueue.get("modelProfile", "v0.17.0")
    head = f"the cluster's Kueue {kueue.get('version', 'unknown')} (from {kueue.get('source', 'nowhere')})"
    differ = kueue.get("mayDiffer") or []
    if not differ:
        return f"{head}; model profile Kueue {profile}"
    return f"{head}; no model profile for it, Kueue {profile}'s answers; may differ: " + "; ".join(differ)


def kueue_header(kueue: dict[str, Any]) -> str:
    """:func:`kueue_line` as the header prints it: indented, wrapped inside 100 columns (the release's
    source names an image)."""
    return textwrap.fill(kueue_line(kueue), 100, initial_indent="  ", subsequent_indent="    ")


def run(args: argparse.Namespace) -> int:
    from topogov.logic.whatif import compare, render_text
    from topogov_cli.common import EXIT_OK, EXIT_UNREACHABLE, EXIT_USAGE

    wrong = _offline_usage(args)
    if wrong:
        print(f"{PROG}: error: {wrong} (see '{PROG} --help')", file=sys.stderr)
        return EXIT_USAGE
    if args.release_lag < 0:
        print(f"{PROG}: --release-lag: must be at least 0, got {args.release_lag:g}", file=sys.stderr)
        return EXIT_USAGE
    if args.fleet is None:
        return run_online(args)
    try:
        trace, named = scenarios(args)
    except _Usage as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except _Unreachable as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return EXIT_UNREACHABLE
    result = compare(trace, named, regime=args.regime, release_lag_s=args.release_lag)
    if args.output == "json":
        print(json.dumps(result, indent=2))
        return EXIT_OK
    # File names, not the paths as given: the header stays inside 100 columns wherever the files are.
    baseline, proposed = Path(args.baseline_policy or args.policy).name, Path(args.policy).name
    policies = {"baseline": baseline, "proposed": proposed}
    trace_name = Path(args.trace).name
    print(f"{len(trace)} jobs from {trace_name}, replayed on the Kueue model; regime {args.regime}")
    for name, (nodes, _) in named.items():
        changes = f" ({' '.join(args.fleet_change)})" if name == "proposed" and args.fleet_change else ""
        print(f"  {name}: {len(nodes)} nodes{changes}, policy {policies[name]}")
    print("  Kueue model profile v0.17.0 (offline: the cluster's Kueue release is not read)")
    print()
    print(render_text(result["scenarios"]))
    return EXIT_OK
