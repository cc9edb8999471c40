"""``topogov topology``: the cluster's topology tree from node labels, in one paginated list call."""

from __future__ import annotations

import argparse
import json
import os
import sys

from topogov.cli.main import EXIT_OK, EXIT_UNREACHABLE, LOCAL_DIR


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
    from topogov.domain.tree import to_mermaid
    from topogov.exceptions import KubernetesError

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
    if args.format == "json":
        print(json.dumps(tree.to_json(), indent=2))
    else:
        sys.stdout.write(to_mermaid(tree))
    return EXIT_OK
