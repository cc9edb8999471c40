"""``topogov policy check FILE [--json]``: validate a team policy and show what it means.

Exit 0 when valid (summary, or the normalised policy as JSON, on stdout; warnings too, or on stderr
with ``--json``); 1 when invalid (every problem on stderr, one a line); 2 when the file cannot be read.
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
    warnings = policy.warnings()
    if getattr(args, "json", False):
        print(json.dumps(policy.to_json(), indent=2))
        for warning in warnings:
            print(f"{PROG}: warning: {warning}", file=sys.stderr)
    else:
        print(render(policy, warnings))
    return EXIT_OK


def render(policy: Policy, warnings: list[str]) -> str:
    """The human summary of a valid policy."""
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
            *(("principals" if i == 0 else "", p) for i, p in enumerate(row["principals"])),
        ]
        out += ["", f"Team {row['team']}"]
        out += [f"  {name:<18}{value}" for name, value in fields]
        resources = table(
            ["RESOURCE", "QUOTA", "BORROW", "MAX IN FLIGHT"],
            [(r, row["quota"][r], row["borrow"][r], row["maxInFlight"][r]) for r in GOVERNED],
        )
        out += ["  " + line for line in resources.splitlines()]
    out += ["", "Admins"]
    out += [f"  {a}" for a in policy.admins] or ["  (none)"]
    out += ["", "Warnings" if warnings else "Warnings: none"]
    out += [f"  - {w}" for w in warnings]
    return "\n".join(out)
