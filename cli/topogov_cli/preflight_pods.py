"""``topogov preflight``: what the cluster and the account must do for the API to be the gatekeeper of
the team namespaces (docs/hardening.md, "The gatekeeper").

- The NVIDIA device plugin must not let a container's own ``NVIDIA_VISIBLE_DEVICES`` choose its GPUs:
  the API refuses the variable in what it submits, but CUDA images set it to ``all`` themselves. With
  the plugin's default ``envvar`` strategy the container runtime reads the variable, so an image
  alone exposes every GPU of the node unless the runtime refuses the variable from unprivileged
  containers (NVIDIA k8s-device-plugin README, "deviceListStrategy"; NVIDIA's "Preventing
  unprivileged access to GPUs in Kubernetes": ``volume-mounts`` with
  ``accept-nvidia-visible-devices-envvar-when-unprivileged = false``).
- The team namespaces must carry their teams' Pod Security labels (the governor writes them; on
  SageMaker HyperPod the namespaces are the task governance add-on's, so only this check sees them).
- Only the API Gateway may invoke the api function: an identity with ``lambda:InvokeFunction`` on it
  could hand it a made-up request context and act as anyone (docs/deploying.md says how to deny it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from topogov_cli.doctor import Check

DEVICE_PLUGIN_IMAGE = "k8s-device-plugin"  # nvcr.io/nvidia/k8s-device-plugin, and the GPU operator's
SAFE_STRATEGIES = ("volume-mounts", "cdi-annotations", "cdi-cri")
NOT_ALLOWED = "your identity may not {what} — give a cluster admin's --kubeconfig to check it"
MAX_PRINCIPALS = 500  # the identities of the account simulated at most (IAM's SimulatePrincipalPolicy)


def device_plugin_check(http: Any) -> Check:
    """How the cluster's NVIDIA device plugin hands GPUs to containers (its DaemonSets' strategy)."""
    resp = http.request("GET", "/apis/apps/v1/daemonsets")
    if resp.status in (401, 403):  # a deployer without Kubernetes rights: said, not failed
        return ("NVIDIA device plugin", True, f"not checked: {NOT_ALLOWED.format(what='list DaemonSets')}")
    if resp.status != 200:
        return (
            "NVIDIA device plugin",
            False,
            f"cannot list DaemonSets (HTTP {resp.status}) — give --kubeconfig",
        )
    found = []
    for ds in (resp.body or {}).get("items") or []:
        for c in (((ds.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers") or []:
            if DEVICE_PLUGIN_IMAGE in str(c.get("image", "")):
                name = f"{ds['metadata'].get('namespace')}/{ds['metadata'].get('name')}"
                found.append((name, _strategies(c)))
    if not found:
        return ("NVIDIA device plugin", True, "none found (no GPU in the cluster, or another device plugin)")
    unsafe = [name for name, strategies in found if not any(s in SAFE_STRATEGIES for s in strategies)]
    if unsafe:
        return (
            "NVIDIA device plugin",
            False,
            f"{', '.join(unsafe)} hands GPUs over with NVIDIA_VISIBLE_DEVICES (strategy envvar): an image "
            "that sets it to all (CUDA's do) sees every GPU of its node — set deviceListStrategy "
            "volume-mounts and the container toolkit's accept-nvidia-visible-devices-envvar-when-"
            "unprivileged = false",
        )
    return ("NVIDIA device plugin", True, f"{', '.join(n for n, _ in found)}: devices by mounts or CDI")


def _strategies(container: Mapping[str, Any]) -> list[str]:
    """The ``--device-list-strategy`` (or ``DEVICE_LIST_STRATEGY``) values of a plugin container."""
    out: list[str] = []
    args = [str(a) for a in [*(container.get("command") or []), *(container.get("args") or [])]]
    for i, arg in enumerate(args):
        if arg.startswith("--device-list-strategy="):
            out += arg.split("=", 1)[1].split(",")
        elif arg == "--device-list-strategy" and i + 1 < len(args):
            out += args[i + 1].split(",")
    for env in container.get("env") or []:
        if env.get("name") == "DEVICE_LIST_STRATEGY":
            out += str(env.get("value", "")).split(",")
    return out or ["envvar"]  # the plugin's default


def namespace_labels_check(http: Any, policy: Any) -> Check:
    """Each team namespace enforces its team's Pod Security level, pinned to the API's version."""
    from topogov.domain.team_pods import pod_security_labels

    wrong = []
    for name, team in sorted(policy.teams.items()):
        resp = http.request("GET", f"/api/v1/namespaces/{team.namespace}")
        if resp.status == 404:
            continue  # the governor creates it, labelled
        if resp.status in (401, 403):
            return ("Pod Security labels", True, f"not checked: {NOT_ALLOWED.format(what='read namespaces')}")
        if resp.status != 200:
            return (
                "Pod Security labels",
                False,
                f"cannot read namespace {team.namespace} (HTTP {resp.status})",
            )
        labels = ((resp.body or {}).get("metadata") or {}).get("labels") or {}
        missing = {k: v for k, v in pod_security_labels(team).items() if labels.get(k) != v}
        if missing:
            wrong.append(
                f"{team.namespace} ({name}: "
                + ", ".join(f"{k}={v}" for k, v in sorted(missing.items()))
                + ")"
            )
    if wrong:
        return (
            "Pod Security labels",
            False,
            f"not as the policy says on {'; '.join(wrong)} — the governor writes them on its namespaces; on "
            "HyperPod, label the add-on's: kubectl label namespace NS KEY=VALUE ...",
        )
    return ("Pod Security labels", True, "every team namespace enforces its team's level")


def direct_invoke_check(aws: Any, function_arn: str) -> Check:
    """Which identities of the account may call the api function without API Gateway (IAM's policy
    simulator over the account's roles and users, at most :data:`MAX_PRINCIPALS`)."""
    iam = aws("iam")
    principals = []
    for pager, key in (
        (iam.get_paginator("list_roles"), "Roles"),
        (iam.get_paginator("list_users"), "Users"),
    ):
        for page in pager.paginate():
            principals += [p["Arn"] for p in page.get(key) or [] if "/aws-service-role/" not in p["Arn"]]
    can = []
    for arn in principals[:MAX_PRINCIPALS]:
        result = iam.simulate_principal_policy(
            PolicySourceArn=arn, ActionNames=["lambda:InvokeFunction"], ResourceArns=[function_arn]
        )
        if any(r.get("EvalDecision") == "allowed" for r in result.get("EvaluationResults") or []):
            can.append(arn)
    more = f" ({len(principals) - MAX_PRINCIPALS} not checked)" if len(principals) > MAX_PRINCIPALS else ""
    if can:
        shown = ", ".join(can[:5]) + (f" and {len(can) - 5} more" if len(can) > 5 else "")
        # flagged, not failed: an account's administrators always may; the operator decides who else
        return (
            "direct invocation",
            True,
            f"flagged: {shown} may invoke the api function directly and act as any caller{more} — deny "
            "lambda:InvokeFunction on it to all but the deployers (docs/deploying.md, 'Forged invocations')",
        )
    return (
        "direct invocation",
        True,
        f"no identity of the account may invoke the api function directly{more}",
    )
