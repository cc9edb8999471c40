"""``topogov policy check FILE [--json] [--hyperpod [--cluster-arn ARN]]``: validate a team policy and
show what it means.

Exit 0 when valid (summary, or the normalised policy as JSON, on stdout; warnings too, or on stderr
with ``--json``); 1 when invalid (every problem on stderr, one a line); 2 when the file cannot be read.
``--hyperpod`` also checks it as SageMaker HyperPod task governance's policy (docs/hyperpod.md): what
the ComputeQuota and ClusterSchedulerConfig APIs would refuse is a problem, named by its field, and the
summary shows each team's ComputeQuota (``--json``: the request bodies ``cdk deploy`` will send).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from topogov.domain.policy import Policy

PROG = "topogov policy check"


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``policy`` (with its ``check`` subcommand) to the top-level ``subparsers``."""
    policy = subparsers.add_parser(
        "policy",
        help="check a team policy file",
        description="Work with the team policy (teams, quotas, priority classes, principals).",
    )
    actions = policy.add_subparsers(dest="policy_command", required=True, metavar="ACTION")
    check = actions.add_parser(
        "check",
        help="validate a policy file and summarise it",
        description=(
            "Validate FILE and print its priority classes, each team's namespace, local queue, quota, "
            "borrow limit, in-flight cap, priority classes and principals, then any warnings. "
            "Exit 0 valid, 1 invalid (every problem listed), 2 unreadable."
        ),
    )
    check.add_argument("file", metavar="FILE", type=Path, help="the policy YAML, e.g. teams.yaml")
    check.add_argument("--json", action="store_true", help="print the normalised policy as JSON")
    check.add_argument(
        "--hyperpod",
        action="store_true",
        help="also check it as SageMaker HyperPod task governance's policy (ComputeQuotas, cluster policy)",
    )
    check.add_argument(
        "--cluster-arn",
        metavar="ARN",
        help="with --hyperpod: the HyperPod cluster (as -c topogov:hyperpodClusterArn), checked and shown",
    )
    check.set_defaults(func=run)
    return policy


def run(args: argparse.Namespace) -> int:
    from topogov.domain.policy import PolicyError, load_policy_file
    from topogov_cli.common import EXIT_OK, EXIT_REFUSED, EXIT_USAGE

    path = Path(args.file)
    try:
        policy = load_policy_file(path)
    except PolicyError as exc:
        lines = [f"{PROG}: {path} is invalid:"]
        lines += [f"  {path_}: {message}" if path_ else f"  {message}" for path_, message in exc.problems]
        print("\n".join(lines), file=sys.stderr)
        return EXIT_REFUSED
    except OSError as exc:
        print(f"{PROG}: cannot read {path}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    if getattr(args, "hyperpod", False):
        return run_hyperpod(args, path, policy)
    warnings = policy.warnings()
    if getattr(args, "json", False):
        print(json.dumps(policy.to_json(), indent=2))
        for warning in warnings:
            print(f"{PROG}: warning: {warning}", file=sys.stderr)
    else:
        print(render(policy, warnings))
    return EXIT_OK


def run_hyperpod(args: argparse.Namespace, path: Path, policy: Policy) -> int:
    """``--hyperpod``: the refusals of the task governance APIs, else the policy as they take it."""
    from topogov.domain import hyperpod
    from topogov.domain.policy import PolicyError
    from topogov_cli.common import EXIT_OK, EXIT_REFUSED

    try:
        governance = hyperpod.render(policy, getattr(args, "cluster_arn", None))
    except PolicyError as exc:
        lines = [f"{PROG}: {path} is not a policy HyperPod task governance takes:"]
        lines += [f"  {path_}: {message}" for path_, message in exc.problems]
        print("\n".join(lines), file=sys.stderr)
        return EXIT_REFUSED
    warnings = policy.warnings() + hyperpod.warnings(policy)
    if getattr(args, "json", False):
        body = {
            "computeQuotas": governance.compute_quotas,
            "clusterSchedulerConfig": governance.scheduler_config,
        }
        print(json.dumps(body, indent=2))
        for warning in warnings:
            print(f"{PROG}: warning: {warning}", file=sys.stderr)
    else:
        print(render(policy, []) + "\n\n" + render_hyperpod(governance, warnings))
    return EXIT_OK


def render_hyperpod(governance: Any, warnings: list[str]) -> str:
    """The ComputeQuotas and the cluster policy, for a platform engineer."""
    from topogov.domain import hyperpod
    from topogov_cli.render import table

    config = governance.scheduler_config["SchedulerConfig"]
    classes = ", ".join(f"{pc['Name']} (weight {pc['Weight']})" for pc in config["PriorityClasses"])
    out = ["HyperPod task governance", f"  cluster policy {governance.scheduler_config['Name']}: "]
    out[-1] += f"fair share {config['FairShare']}; priority classes {classes}"
    if "IdleResourceSharing" in config:
        out[-1] += f"; idle resource sharing {config['IdleResourceSharing']}"
    for quota in governance.compute_quotas:
        qc, target = quota["ComputeQuotaConfig"], quota["ComputeQuotaTarget"]
        sharing = ", ".join(
            f"{k} {v}" for k, v in qc["ResourceSharingConfig"].items() if k != "AbsoluteBorrowLimits"
        )
        team = target["TeamName"]
        out += [
            "",
            f"  ComputeQuota {quota['Name']} (team {team}, namespace {hyperpod.namespace(team)})",
            f"    {sharing}; PreemptTeamTasks {qc['PreemptTeamTasks']}; "
            f"FairShareWeight {target['FairShareWeight']}",
        ]
        borrow = {b["InstanceType"]: b for b in qc["ResourceSharingConfig"].get("AbsoluteBorrowLimits", [])}
        rows = [
            (
                r["InstanceType"], r["Accelerators"], r["VCpu"], r["MemoryInGiB"],
                *((borrow[r["InstanceType"]][k] for k in ("Accelerators", "VCpu", "MemoryInGiB"))
                  if r["InstanceType"] in borrow else ("", "", "")),
            )
            for r in qc["ComputeQuotaResources"]
        ]  # fmt: skip
        head = [
            "INSTANCE TYPE",
            "ACCELERATORS",
            "VCPU",
            "MEMORY GIB",
            "BORROW ACC.",
            "BORROW VCPU",
            "BORROW GIB",
        ]
        out += ["    " + line for line in table(head, rows).splitlines()] if rows else ["    (no quota)"]
    out += ["", "HyperPod warnings" if warnings else "HyperPod warnings: none"]
    out += [f"  - {w}" for w in warnings]
    return "\n".join(out)


def _pods(pods: dict[str, Any]) -> str:
    level = pods["security"] + (f" ({pods['privilegedReason']})" if pods.get("privilegedReason") else "")
    lists = " · ".join(
        f"{label} {', '.join(pods[key]) or 'none'}"
        for key, label in (
            ("serviceAccounts", "service accounts"),
            ("secrets", "secrets"),
            ("runtimeClasses", "runtime classes"),
        )
    )
    return f"Pod Security {level} · {lists} · grace ≤ {pods['maxGracePeriodSeconds']} s"


def render(policy: Policy, warnings: list[str]) -> str:
    """The human summary of a valid policy."""
    from topogov.domain.policy.arn import describe
    from topogov.domain.quantity import GOVERNED
    from topogov_cli.render import table

    out = [f"Priority classes (fair share {policy.fair_share})"]
    out += [
        "  " + line
        for line in table(
            ["NAME", "VALUE"], [(pc.name, pc.value) for pc in policy.priority_classes]
        ).splitlines()
    ]
    for row in policy.summary():
        classes = ", ".join(
            f"{c} (default)" if c == row["defaultPriorityClass"] else c for c in row["priorityClasses"]
        )
        fields = [
            ("namespace", row["namespace"]),
            ("local queue", row["localQueue"]),
            (
                "sharing",
                f"{row['sharing']} · preempt team tasks: {row['preemptTeamTasks']}"
                f" · fair-share weight {row['fairShareWeight']}",
            ),
            ("priority classes", classes),
            ("pods", _pods(row["pods"])),
            *(
                ("principals" if i == 0 else "", f"{p}\n{'':<20}  = {describe(p)}")
                for i, p in enumerate(row["principals"])
            ),
        ]
        out += ["", f"Team {row['team']}"]
        out += [f"  {name:<18}{value}" for name, value in fields]
        resources = table(
            ["RESOURCE", "QUOTA", "BORROW", "MAX IN FLIGHT"],
            [(r, row["quota"][r], row["borrow"][r], row["maxInFlight"][r]) for r in GOVERNED],
        )
        out += ["  " + line for line in resources.splitlines()]
    out += ["", "Admins"]
    out += [f"  {a}\n    = {describe(a)}" for a in policy.admins] or ["  (none)"]
    out += ["", "Warnings" if warnings else "Warnings: none"]
    out += [f"  - {w}" for w in warnings]
    return "\n".join(out)
