"""``topogov topology``: the topology tree, from the API when an endpoint is found (``--endpoint``,
``TOPOGOV_ENDPOINT``, the config file, ``.topogov/local/endpoints.json``), else from a cluster's node
labels in one paginated list call (``--kubeconfig``/``--context`` choose this path explicitly)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from topogov_cli.common import (
    ENDPOINT_HELP,
    EXIT_CODES_HELP,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    LOCAL_DIR,
    add_api_options,
    api_for,
    guarded,
    report,
    usage,
    write_out,
)


def add_parser(sub: Any) -> None:
    """Add ``topology`` to the top-level ``subparsers``."""
    topo = sub.add_parser(
        "topology",
        help="print the cluster's network topology (Mermaid, JSON, an SVG picture or a text tree)",
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
        "--format",
        choices=("mermaid", "json", "svg", "tree"),
        default=None,
        help="mermaid (default), json, svg, or tree: one line per domain with its nodes and free GPUs",
    )
    topo.add_argument(
        "--depth", type=int, metavar="N", default=None, help="with --format tree: only layers 1..N"
    )
    topo.add_argument(
        "--capacity",
        action="store_true",
        help="free capacity per layer: domains wholly free, free GPUs, the largest job (whole nodes) "
        "that could start now in one domain (from the API)",
    )
    topo.add_argument("--out", metavar="FILE", default=None, help="write to FILE instead of stdout")
    kube = topo.add_argument_group("from a cluster's node labels")
    kube.add_argument(
        "--kubeconfig", default=None, help="read nodes (default: .topogov/local/kubeconfig, else $KUBECONFIG)"
    )
    kube.add_argument("--context", default=None, help="kubeconfig context")
    add_api_options(topo)
    topo.set_defaults(func=run, cli_prog="topogov topology")


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
    from topogov.domain.tree import NodeCapacity, build_tree

    nodes = KubeNodes(KubeHttp(kubeconfig_api_client(kubeconfig, context), max_attempts=3))
    views = nodes.list_nodes()
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
    from topogov_cli.client import CliError, find_endpoint

    from_cluster = args.kubeconfig is not None or args.context is not None
    try:
        if from_cluster and (args.endpoint or args.region or args.profile):
            raise CliError(
                EXIT_USAGE,
                "--kubeconfig/--context read a cluster, --endpoint/--region/--profile the API: not both",
            )
        fmt = topology_format(args)
        if args.capacity:
            return run_capacity(args)
        if not from_cluster and find_endpoint(args.endpoint) is not None:
            return run_topology_api(args)
    except CliError as exc:
        report(args, exc)
        return exc.exit_code
    return run_cluster(args, fmt)


def run_cluster(args: argparse.Namespace, fmt: str) -> int:
    """The tree from the node labels of a cluster (Mermaid, JSON or SVG)."""
    from topogov.domain.errors import KubernetesError
    from topogov.domain.tree import to_mermaid
    from topogov_cli.client import CliError
    from topogov_cli.graphviz import DOT_MISSING, dot_path, render_svg
    from topogov_cli.render import tree_text

    if fmt == "svg" and dot_path() is None:
        report(args, CliError(EXIT_USAGE, DOT_MISSING))
        return EXIT_USAGE
    kubeconfig = resolve_kubeconfig(args.kubeconfig)
    default = Path(os.path.expanduser("~/.kube/config"))
    if kubeconfig is None and not default.exists():
        print(
            "topogov topology: nothing to read the topology from: no API endpoint (--endpoint, "
            "$TOPOGOV_ENDPOINT, ~/.config/topogov/config.toml, ./.topogov/local/endpoints.json) and no "
            f"kubeconfig (--kubeconfig, $KUBECONFIG, {default}); run `topogov local` here, give "
            "--endpoint URL, or point --kubeconfig at a cluster",
            file=sys.stderr,
        )
        return EXIT_USAGE
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
        elif fmt == "tree":
            write_out(args, tree_text(tree.to_json(), args.depth))
        elif fmt == "svg":
            write_out(args, render_svg(tree.to_json()))
        else:
            write_out(args, to_mermaid(tree))
    except (CliError, RuntimeError) as exc:
        report(args, exc if isinstance(exc, CliError) else CliError(EXIT_USAGE, str(exc)))
        return EXIT_USAGE
    return EXIT_OK


def topology_format(args: argparse.Namespace) -> str:
    """``--format`` with ``--output json`` as another way to say ``--format json``."""
    fmt = args.format
    if getattr(args, "output", "text") == "json":
        if fmt not in (None, "json"):
            raise usage(f"--output json and --format {fmt} disagree: give one")
        return "json"
    return fmt or "mermaid"


@guarded
def run_topology_api(args: argparse.Namespace) -> int:
    """``topogov topology`` with an endpoint: ``GET /v1/topology`` (the snapshot the API decides on)."""
    from topogov_cli.graphviz import DOT_MISSING, dot_path, render_svg
    from topogov_cli.render import tree_text

    fmt = topology_format(args)
    if fmt == "svg" and dot_path() is None:
        raise usage(DOT_MISSING)
    api = api_for(args)
    if fmt == "mermaid":
        write_out(args, api.call("GET", "/v1/topology", query={"format": "mermaid"}, text=True))
    elif fmt == "json":
        write_out(args, json.dumps(api.call("GET", "/v1/topology"), indent=2))
    elif fmt == "tree":
        write_out(args, tree_text(api.call("GET", "/v1/topology"), args.depth))
    else:
        try:
            write_out(args, render_svg(api.call("GET", "/v1/topology")))
        except RuntimeError as exc:
            raise usage(str(exc)) from None
    return EXIT_OK


@guarded
def run_capacity(args: argparse.Namespace) -> int:
    """``topogov topology --capacity``: ``GET /v1/topology?view=capacity``."""
    from topogov_cli.common import print_json
    from topogov_cli.render import capacity_text

    answer = api_for(args).call("GET", "/v1/topology", query={"view": "capacity"})
    if getattr(args, "output", "text") == "json" or args.format == "json":
        print_json(answer)
    else:
        print(capacity_text(answer), end="")
    return EXIT_OK
