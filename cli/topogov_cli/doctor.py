"""``topogov doctor``: is everything in place? The endpoint, the credentials, the API answering as
you, and — with a kubeconfig — the cluster, the topology labels and Kueue's objects. One line per
check, what is wrong and what to do; exit 0 when every check passes, 1 otherwise."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from topogov.domain.labels import layer_label
from topogov_cli.common import EXIT_OK, EXIT_REFUSED, add_api_options, command

Check = tuple[str, bool, str]  # (what, passed, detail or what to do)


def add_parser(sub: Any) -> None:
    doctor = command(
        sub,
        "doctor",
        "check the endpoint, credentials, API, cluster, labels and Kueue objects",
        "Check, in order, what the other commands need: an API endpoint and where it came from; AWS "
        "credentials and who they are; the API answering as you (your teams); and, with a kubeconfig "
        "(--kubeconfig, the local stack's, or $KUBECONFIG), the cluster: its GPU nodes, how many carry "
        "the topology labels, and the Kueue objects the governor keeps (Topologies, ResourceFlavors, "
        "ClusterQueues, priority classes). Each failing check says what to do.",
    )
    doctor.add_argument("--kubeconfig", default=None, help="the cluster to check (default: as `topology`)")
    add_api_options(doctor, output=False)
    doctor.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    checks: list[Check] = []
    _api_checks(args, checks.append)
    _cluster_checks(args, checks.append)
    return print_checks(checks)


def print_checks(checks: list[Check]) -> int:
    """``ok    what  detail`` / ``FAIL  what  what to do``, one line each, and the tally; exit 0 when
    every check passed, 1 otherwise (also `topogov preflight`'s)."""
    width = max(len(what) for what, _, _ in checks)
    for what, ok, detail in checks:
        print(f"{'ok  ' if ok else 'FAIL'}  {what.ljust(width)}  {detail}")
    failed = sum(1 for _, ok, _ in checks if not ok)
    print(
        f"\n{len(checks) - failed} of {len(checks)} checks passed" + (f"; {failed} failed" if failed else "")
    )
    return EXIT_OK if not failed else EXIT_REFUSED


def _api_checks(args: argparse.Namespace, add: Callable[[Check], None]) -> None:
    from topogov_cli.client import Api, CliError, find_endpoint

    try:
        endpoint = find_endpoint(args.endpoint)
    except CliError as exc:
        add(("endpoint", False, exc.message))
        return
    if endpoint is None:
        add(("endpoint", False, "none found: --endpoint URL, $TOPOGOV_ENDPOINT, the config file, or "
                                "`topogov local` in this directory"))  # fmt: skip
        return
    add(("endpoint", True, f"{endpoint.url} (from {endpoint.source})"))
    api = Api(endpoint, profile=args.profile, region_flag=args.region)
    try:
        creds = api.credentials()
        add(("credentials", True, f"access key {creds.access_key[:4]}… (region {api.region()})"))
    except CliError as exc:
        add(("credentials", False, exc.message))
        return
    try:
        teams = [t["team"] for t in api.call("GET", "/v1/teams").get("teams") or []]
        add(("API", True, f"answers as you; your teams: {', '.join(teams) or 'none'}"))
    except CliError as exc:
        add(("API", False, exc.message))


def _cluster_checks(args: argparse.Namespace, add: Callable[[Check], None]) -> None:
    from topogov_cli.topology import resolve_kubeconfig

    kubeconfig = resolve_kubeconfig(args.kubeconfig)
    if kubeconfig is None:
        add(("cluster", True, "skipped: no kubeconfig (--kubeconfig, the local stack's, $KUBECONFIG)"))
        return
    try:
        from topogov.adapters.kube import KubeHttp
        from topogov.adapters.kube_auth import kubeconfig_api_client

        http = KubeHttp(kubeconfig_api_client(kubeconfig), max_attempts=2)
        nodes = http.request("GET", "/api/v1/nodes").body.get("items") or []
    except Exception as exc:  # a bad kubeconfig, no connection, no permission: say which, go on
        add(("cluster", False, f"{kubeconfig}: {type(exc).__name__}: {str(exc)[:160]}"))
        return
    gpu = [n for n in nodes if "nvidia.com/gpu" in ((n.get("status") or {}).get("allocatable") or {})]
    labelled = [n for n in gpu if layer_label(1) in (n["metadata"].get("labels") or {})]
    add(("cluster", True, f"{len(nodes)} nodes, {len(gpu)} with GPUs ({kubeconfig})"))
    hyperpod = _hyperpod_check(http, nodes)
    if hyperpod is not None:
        add(hyperpod)
    who = (
        "SageMaker HyperPod task governance labels them (add-on v1.2.2-eksbuild.1 or later)"
        if hyperpod
        else "the reconcile function labels them on its next pass (`topogov reconcile` runs one)"
    )
    add((
        "topology labels", len(labelled) == len(gpu) and bool(gpu),
        f"{len(labelled)} of {len(gpu)} GPU nodes labelled"
        + ("" if len(labelled) == len(gpu) and gpu else f" — {who}"),
    ))  # fmt: skip
    kueue = _kueue_check(http)
    add(kueue[0])
    if kueue[1] is None:
        return
    for kind, path in (
        ("Topologies", "topologies"),
        ("ResourceFlavors", "resourceflavors"),
        ("ClusterQueues", "clusterqueues"),
        ("WorkloadPriorityClasses", "workloadpriorityclasses"),
    ):
        resp = http.request("GET", f"{kueue[1]}/{path}")
        items = (resp.body or {}).get("items") or [] if resp.status == 200 else []
        names = [i["metadata"]["name"] for i in items]
        add((
            f"Kueue {kind}", bool(names) and resp.status == 200,
            (", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else ""))
            if names else f"none (HTTP {resp.status}) — "
            + ("the task governance add-on writes them from the ComputeQuotas (topogov preflight checks it)"
               if hyperpod else "the governor creates them on its next pass"),
        ))  # fmt: skip


def _kueue_check(http: Any) -> tuple[Check, str | None]:
    """The Kueue the cluster runs: its release and where that was learnt, the API versions it serves,
    the one Topogov uses and the model profile that answers estimates (``adapters/kueue_api.py``);
    and that version's path (None: no Kueue, or a configured version not served)."""
    from topogov.adapters.kueue_api import KueueApi
    from topogov.domain.errors import ConfigError

    kueue = KueueApi(http)
    served = kueue.served()
    if not served.versions:
        return (("Kueue", False, f"not installed (no kueue.x-k8s.io API, HTTP {served.status}) — install "
                                  "Kueue (HyperPod task governance installs it)"), None)  # fmt: skip
    try:
        path = kueue.path()
    except ConfigError as exc:
        return (("Kueue", False, str(exc)), None)
    found = kueue.kueue_version()
    return (
        (
            "Kueue",
            True,
            f"{found.shown} (from {found.source}); serves {', '.join(served.versions)}, Topogov uses "
            f"{kueue.version()}; model profile {found.profile()}",
        ),
        path,
    )


def _hyperpod_check(http: Any, nodes: list[dict[str, Any]]) -> Check | None:
    """On a SageMaker HyperPod cluster (HyperPod nodes, or the task governance add-on's namespaces): what
    the reconcile pass decides its mode from, besides the deployment's ARN (``domain/hyperpod/mode.py``).
    None on a plain EKS cluster."""
    from topogov.domain.hyperpod.mode import ADDON_SELECTOR
    from topogov.domain.views.nodes import NodeView

    count = sum(1 for n in nodes if NodeView.from_api(n).hyperpod)
    resp = http.request("GET", "/api/v1/namespaces", query={"labelSelector": ADDON_SELECTOR})
    namespaces = (
        [i["metadata"]["name"] for i in (resp.body or {}).get("items") or []] if resp.status == 200 else []
    )
    if not count and not namespaces:
        return None
    seen = (
        f"the task governance add-on's namespaces: {', '.join(namespaces)} (HyperPod mode)"
        if namespaces
        else f"no namespace labelled {ADDON_SELECTOR}: the task governance add-on is not installed or no "
        "ComputeQuota is in force (HyperPod mode only if deployed with topogov:hyperpodClusterArn)"
    )
    return ("HyperPod", True, f"{count} HyperPod node(s); {seen}")
