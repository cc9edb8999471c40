"""``topogov topology``: the topology tree, from the API when an endpoint is found (``--endpoint``,
``TOPOGOV_ENDPOINT``, the config file, ``.topogov/local/endpoints.json``), else from a cluster's node
labels in one paginated list call (``--kubeconfig``/``--context`` choose this path explicitly)."""

from __future__ import annotations

import argparse
import json
import os
import sys

from topogov.cli.main import EXIT_OK, EXIT_UNREACHABLE, EXIT_USAGE, LOCAL_DIR


def resolve_kubeconfig(explicit: str | None) -> str | None:
    """--kubeconfig, else the local stack's, else the kubernetes client's default ($KUBECONFIG, ~/.kube)."""
    if explicit:
        return explicit
    local = LOCAL_DIR / "kubeconfig"
    if local.exists() and (LOCAL_DIR / "endpoints.json").exists():
        return str(local)
    return os.environ.get("KUBECONFIG") or None


def tree_from_cluster(kubeconfig: str | None, context: str | None = None):
    from topogov.adapters.kube import KubeHttp, KubeNodes
    from topogov.adapters.kube_auth import kubeconfig_api_client
    from topogov.domain.nodes import NodeView
    from topogov.domain.tree import NodeCapacity, build_tree

    nodes = KubeNodes(KubeHttp(kubeconfig_api_client(kubeconfig, context), max_attempts=3))
    views = [NodeView.from_api(o) for o in nodes.list_nodes()]
    return build_tree(
        NodeCapacity.from_labels(
            v.name,
            v.labels,
            instance_type=v.instance_type,
            instance_id=v.ref.instance_id,
            allocatable=v.allocatable,
        )
        for v in views
    )


def run(args: argparse.Namespace) -> int:
    from topogov.cli.client import CliError, find_endpoint
    from topogov.cli.jobs_cmd import report, run_topology_api, topology_format

    from_cluster = args.kubeconfig is not None or args.context is not None
    try:
        if from_cluster and (args.endpoint or args.region or args.profile):
            raise CliError(
                EXIT_USAGE,
                "--kubeconfig/--context read a cluster, --endpoint/--region/--profile the API: not both",
            )
        fmt = topology_format(args)
        if not from_cluster and find_endpoint(args.endpoint) is not None:
            return run_topology_api(args)
    except CliError as exc:
        report(args, exc)
        return exc.exit_code
    return run_cluster(args, fmt)


def run_cluster(args: argparse.Namespace, fmt: str) -> int:
    """The tree from the node labels of a cluster (Mermaid, JSON or SVG)."""
    from topogov.cli.client import CliError
    from topogov.cli.graphviz import DOT_MISSING, dot_path, render_svg
    from topogov.cli.jobs_cmd import report, write_out
    from topogov.domain.tree import to_mermaid
    from topogov.exceptions import KubernetesError

    if fmt == "svg" and dot_path() is None:
        report(args, CliError(EXIT_USAGE, DOT_MISSING))
        return EXIT_USAGE
    kubeconfig = resolve_kubeconfig(args.kubeconfig)
    try:
        tree = tree_from_cluster(kubeconfig, args.context)
    except (KubernetesError, OSError, ValueError) as exc:
        where = kubeconfig or "the default kubeconfig"
        print(f"topogov topology: cannot read nodes via {where}: {exc}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except Exception as exc:  # kubernetes.config raises its own ConfigException for a bad kubeconfig
        if type(exc).__name__ == "ConfigException":
            print(f"topogov topology: {exc}", file=sys.stderr)
            return EXIT_UNREACHABLE
        raise
    try:
        if fmt == "json":
            write_out(args, json.dumps(tree.to_json(), indent=2))
        elif fmt == "svg":
            write_out(args, render_svg(tree.to_json()))
        else:
            write_out(args, to_mermaid(tree))
    except (CliError, RuntimeError) as exc:
        report(args, exc if isinstance(exc, CliError) else CliError(EXIT_USAGE, str(exc)))
        return EXIT_USAGE
    return EXIT_OK
