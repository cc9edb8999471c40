"""``topogov reconcile``: one full labeler pass, the same logic the reconcile Lambda runs."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from topogov_cli.common import EXIT_OK, EXIT_USAGE


def add_parser(sub: Any) -> None:
    """Add ``reconcile`` to the top-level ``subparsers``."""
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
    rec.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from topogov.bootstrap import build_labeler
    from topogov.domain.errors import ConfigError
    from topogov.logic.labeler import PassOptions
    from topogov.settings import ReconcileSettings
    from topogov_cli.governor import settings_env

    env = settings_env(args)  # the local stack's, unless --kubeconfig/--cluster/--bucket say otherwise
    env["TOPOGOV_EC2_RATE_PER_S"] = str(args.ec2_rate)
    try:
        settings = ReconcileSettings.from_env(env)
    except ConfigError as exc:
        print(f"topogov reconcile: {exc}", file=sys.stderr)
        return EXIT_USAGE
    summary = build_labeler(settings).run(
        PassOptions(refresh_after_s=settings.refresh_after_s, verify_after_s=settings.verify_after_s)
    )
    print(json.dumps(summary.to_json(), indent=2))
    return EXIT_OK
