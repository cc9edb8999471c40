"""``topogov reconcile``: one full labeler pass, the same logic the reconcile Lambda runs."""

from __future__ import annotations

import argparse
import json
import os
import sys

from topogov.cli.main import EXIT_OK, EXIT_USAGE, LOCAL_DIR


def run(args: argparse.Namespace) -> int:
    from topogov.bootstrap import build_labeler
    from topogov.config import ReconcileSettings
    from topogov.exceptions import ConfigError
    from topogov.logic.labeler import PassOptions

    env = dict(os.environ)
    endpoints = LOCAL_DIR / "endpoints.json"
    if not (args.kubeconfig or args.cluster) and endpoints.exists():
        # Against the running local stack.
        local = json.loads(endpoints.read_text())
        env.update(
            AWS_ENDPOINT_URL=local["aws"],
            AWS_ACCESS_KEY_ID=env.get("AWS_ACCESS_KEY_ID", "testing"),
            AWS_SECRET_ACCESS_KEY=env.get("AWS_SECRET_ACCESS_KEY", "testing"),
            AWS_REGION=env.get("AWS_REGION", "us-east-1"),
            TOPOGOV_KUBECONFIG=str(LOCAL_DIR / "kubeconfig"),
            TOPOGOV_SNAPSHOT_BUCKET="topogov-local-snapshot",
        )
        os.environ.update({k: v for k, v in env.items() if k.startswith("AWS_")})
    if args.kubeconfig:
        env["TOPOGOV_KUBECONFIG"] = args.kubeconfig
    if args.cluster:
        env["TOPOGOV_CLUSTER_NAME"] = args.cluster
        env.pop("TOPOGOV_KUBECONFIG", None)
    if args.bucket:
        env["TOPOGOV_SNAPSHOT_BUCKET"] = args.bucket
    env["TOPOGOV_EC2_RATE_PER_S"] = str(args.ec2_rate)
    try:
        settings = ReconcileSettings.from_env(env)
    except ConfigError as exc:
        print(f"topogov reconcile: {exc}", file=sys.stderr)
        return EXIT_USAGE
    summary = build_labeler(settings).run(PassOptions(refresh_after_s=settings.refresh_after_s))
    print(json.dumps(summary.to_json(), indent=2))
    return EXIT_OK
