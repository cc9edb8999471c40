"""``topogov governor plan|apply``: the Kueue objects the policy renders, compared with a cluster.

``plan`` reads only (the cluster's Kueue objects and the topology snapshot) and prints what a
reconcile pass would create, correct, stop or delete; ``apply`` does it, as the scheduled pass does.
In HyperPod mode (the mode the last reconcile pass wrote into the snapshot, else
``TOPOGOV_HYPERPOD_CLUSTER_ARN``; docs/hyperpod.md) the task governance add-on owns the Kueue objects:
``plan`` prints their drift from what teams.yaml makes the add-on write, and ``apply`` refuses.
Against the local stack by default (``.topogov/local``); ``--kubeconfig``/``--cluster`` and
``--bucket`` point it at a real cluster and snapshot.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from topogov_cli.common import EXIT_OK, EXIT_UNREACHABLE, EXIT_USAGE, LOCAL_DIR


def add_parser(sub: Any) -> None:
    gov = sub.add_parser(
        "governor",
        help="Kueue objects from the team policy: plan (show the diff) or apply",
        description=(
            "Render the Kueue objects of the team policy (Topology, ResourceFlavors, Cohort, "
            "WorkloadPriorityClasses, a ClusterQueue and LocalQueue per team) for the fleet in the "
            "topology snapshot, and compare them with the cluster. 'plan' changes nothing; 'apply' "
            "creates what is missing, corrects drift on Topogov's objects, stops and drains the queue "
            "of a removed team that still has work, deletes what the policy no longer has, and never "
            "touches objects it does not own (labelled app.kubernetes.io/managed-by: topogov)."
        ),
        epilog="exit codes: 0 done (plan: whatever the diff), 1 apply failed for some object, "
        "2 usage or invalid policy, 3 cluster or snapshot unreachable",
    )
    gsub = gov.add_subparsers(dest="governor", required=True, metavar="ACTION")
    for action, text in (("plan", "print what would change, change nothing"), ("apply", "make the changes")):
        p = gsub.add_parser(action, help=text, description=text)
        p.add_argument("--policy", type=Path, default=None, help="team policy (default: teams.yaml)")
        target = p.add_mutually_exclusive_group()
        target.add_argument("--kubeconfig", default=None, help="kubeconfig (default: the local stack's)")
        target.add_argument("--cluster", default=None, help="EKS cluster name (endpoint and token from AWS)")
        p.add_argument("--bucket", default=None, help="S3 bucket of the topology snapshot")
        p.add_argument(
            "--kueue-api-version",
            choices=("v1beta1", "v1beta2"),
            default=None,
            help="(default: v1beta2 where the cluster serves it, else v1beta1)",
        )
        p.add_argument("--json", action="store_true", help="print the plan/result as JSON")
        p.set_defaults(func=run, governor=action)


def settings_env(args: argparse.Namespace) -> dict[str, str]:
    """TOPOGOV_* environment for the reconcile settings: the local stack's unless told otherwise."""
    env = dict(os.environ)
    endpoints = LOCAL_DIR / "endpoints.json"
    if not (args.kubeconfig or args.cluster) and endpoints.exists():
        local = json.loads(endpoints.read_text())
        env.update(
            AWS_ENDPOINT_URL=local["aws"],
            AWS_ACCESS_KEY_ID=env.get("AWS_ACCESS_KEY_ID", "testing"),
            AWS_SECRET_ACCESS_KEY=env.get("AWS_SECRET_ACCESS_KEY", "testing"),
            AWS_REGION=env.get("AWS_REGION", "us-east-1"),
            TOPOGOV_KUBECONFIG=str(LOCAL_DIR / "kubeconfig"),
        )
        bucket = (local.get("outputs") or {}).get("SnapshotBucket")  # the local stack's deployed bucket
        if bucket:
            env["TOPOGOV_SNAPSHOT_BUCKET"] = bucket
        os.environ.update({k: v for k, v in env.items() if k.startswith("AWS_")})
    if args.kubeconfig:
        env["TOPOGOV_KUBECONFIG"] = args.kubeconfig
    if args.cluster:
        env["TOPOGOV_CLUSTER_NAME"] = args.cluster
        env.pop("TOPOGOV_KUBECONFIG", None)
    if args.bucket:
        env["TOPOGOV_SNAPSHOT_BUCKET"] = args.bucket
    return env


def run(args: argparse.Namespace) -> int:
    from topogov.adapters.kube import KubeHttp
    from topogov.adapters.kube_objects import KubeObjects
    from topogov.adapters.kueue_api import KueueApi
    from topogov.adapters.snapshot_store import S3SnapshotStore
    from topogov.bootstrap import aws_session, kube_api_client, retrying
    from topogov.domain.errors import ConfigError, KubernetesError, SnapshotError
    from topogov.domain.kueue_version import check_writes
    from topogov.domain.policy import PolicyError, load_policy_file
    from topogov.logic.governor import Governor, format_plan
    from topogov.settings import ReconcileSettings

    prog = f"topogov governor {args.governor}"
    env = settings_env(args)
    if args.kueue_api_version:
        env["TOPOGOV_KUEUE_API_VERSION"] = args.kueue_api_version
    policy_path = args.policy or Path(env.get("TOPOGOV_POLICY_FILE") or "teams.yaml")
    try:
        settings = ReconcileSettings.from_env(env)
        policy = load_policy_file(str(policy_path))
    except (ConfigError, PolicyError, OSError) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        session = aws_session(settings.region)
        http = KubeHttp(kube_api_client(settings, session), max_attempts=3)
        store = S3SnapshotStore(retrying(session, "s3"), settings.snapshot_bucket, settings.snapshot_key)
        snapshot = store.load()
        mode = cluster_mode(settings.hyperpod_cluster_arn, snapshot)
        if mode.hyperpod:
            return run_hyperpod(args, prog, settings, policy, mode, KubeObjects(http))
        kueue = KueueApi(http, configured=settings.kueue_api_version, kueue_version=settings.kueue_version)
        version = kueue.version()
        if args.governor == "apply":
            check_writes(kueue.kueue_version(), version)
        governor = Governor(KubeObjects(http), api_version=version, cohort=settings.cohort)
        if args.governor == "plan":
            plan = governor.plan(policy, snapshot)
            print(
                json.dumps(plan.to_json(), indent=2) if args.json else format_plan(plan),
                end="\n" if args.json else "",
            )
            return EXIT_OK
        summary = governor.run(policy, snapshot, http.counters)
    except (KubernetesError, SnapshotError) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except ConfigError as exc:  # the configured Kueue API version not served, or the release too old
        print(f"{prog}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(json.dumps(summary.to_json(), indent=2))
    else:
        print(format_plan(summary.plan), end="")
        print(f"applied {summary.applied} change(s); {len(summary.failures)} failed")
        for f in summary.failures:
            print(f"  failed: {f['object']}: {f['error']}")
    return EXIT_OK if summary.complete else 1


def cluster_mode(cluster_arn: str | None, snapshot: Any) -> Any:
    """The mode the last reconcile pass found (in the snapshot), else the deployment's."""
    from topogov.domain.hyperpod.mode import mode_in_force

    return mode_in_force(snapshot.mode if snapshot is not None else None, cluster_arn)


def run_hyperpod(
    args: argparse.Namespace, prog: str, settings: Any, policy: Any, mode: Any, objects: Any
) -> int:
    """HyperPod mode: ``plan`` reports the add-on's objects against teams.yaml; ``apply`` writes nothing."""
    from topogov.logic.governor.addon import AddonWatch, format_report

    if args.governor == "apply":
        print(
            f"{prog}: HyperPod mode ({mode.why}): the task governance add-on owns the Kueue objects and "
            "Topogov writes none; change the policy with `cdk deploy` (teams.yaml becomes ComputeQuotas), "
            "and see the drift with `topogov governor plan`",
            file=sys.stderr,
        )
        return EXIT_USAGE
    from topogov.adapters.kueue_api import KueueApi

    kueue = KueueApi(objects.http, configured=settings.kueue_api_version)
    watch = AddonWatch(objects, api_version=kueue.version(), cluster_arn=settings.hyperpod_cluster_arn)
    report = watch.run(policy, mode)
    if report.failures:
        print(f"{prog}: {report.skipped}", file=sys.stderr)
        return EXIT_UNREACHABLE
    print(
        json.dumps(report.to_json(), indent=2) if args.json else format_report(report),
        end="\n" if args.json else "",
    )
    return EXIT_OK
