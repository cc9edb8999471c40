"""``topogov reconcile``: one full labeler pass, the same logic the reconcile Lambda runs."""

from __future__ import annotations

import argparse
import json
import sys

from topogov.cli.main import EXIT_OK, EXIT_USAGE


def run(args: argparse.Namespace) -> int:
    from topogov.bootstrap import build_labeler
    from topogov.cli.governor_cmd import settings_env
    from topogov.config import ReconcileSettings
    from topogov.exceptions import ConfigError
    from topogov.logic.labeler import PassOptions

    env = settings_env(args)  # the local stack's, unless --kubeconfig/--cluster/--bucket say otherwise
    env["TOPOGOV_EC2_RATE_PER_S"] = str(args.ec2_rate)
    try:
        settings = ReconcileSettings.from_env(env)
    except ConfigError as exc:
        print(f"topogov reconcile: {exc}", file=sys.stderr)
        return EXIT_USAGE
    summary = build_labeler(settings).run(PassOptions(refresh_after_s=settings.refresh_after_s))
    print(json.dumps(summary.to_json(), indent=2))
    return EXIT_OK
