"""``topogov preflight`` on a SageMaker HyperPod cluster (``-c topogov:hyperpodClusterArn``): the checks
the runtime half needs (docs/hyperpod.md, "HyperPod mode"), and what the task governance add-on actually
wrote, printed so that it can be compared with docs/hyperpod.md's table of assumptions.

* **the HyperPod cluster** — SageMaker ``DescribeCluster`` of the ARN: it exists, its status, its
  instance groups;
* **the task governance add-on** — EKS ``DescribeAddon`` of ``amazon-sagemaker-hyperpod-taskgovernance``
  (the add-on's name in the SageMaker Developer Guide, "Upgrade the task governance add-on"): installed,
  ``ACTIVE``, its version (v1.6.0-eksbuild.1 packages Kueue v0.19.2, the same page). The Kueue version
  and the API versions it serves are the plain checks' (``Kueue``, ``Kueue version``: without a Kueue
  Deployment to read, the release the add-on's version packages, ``domain/kueue_version.py``);
* **node topology labels** — the nodes HyperPod registered (providerID ``.../sagemaker/cluster/...``)
  carry ``topology.k8s.aws/network-node-layer-1..3`` (set by task governance, "Topology-aware
  scheduling"), and how many are not ``Schedulable``;
* **what the add-on wrote** — its ClusterQueues (cohort, preemption, nominal GPUs and borrowing limit
  per flavor), its Topology objects with their levels: information lines, always passing.

* **SageMaker permissions** — CloudFormation's handlers of ``AWS::SageMaker::ComputeQuota`` and
  ``AWS::SageMaker::ClusterSchedulerConfig`` call, with the deploy's identity, the actions their registry
  schemas list (create, update and delete ``handlers.*.permissions``: :data:`HANDLER_ACTIONS`). That
  identity is CDK's CloudFormation execution role when the account is bootstrapped
  (``cdk-hnb659fds-cfn-exec-role-<account>-<region>``, CDK's bootstrapping guide), else the caller: IAM
  ``SimulatePrincipalPolicy`` of it on those actions (identity policies; ``*`` resources, the quotas'
  ARNs not existing yet).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from topogov_cli.doctor import Check

ADDON = "amazon-sagemaker-hyperpod-taskgovernance"
# The CloudFormation registry schemas' handler permissions (create, update, delete) of the two resource
# types (as bundled with cfn-lint 1.58), deduplicated
HANDLER_ACTIONS = (
    "sagemaker:CreateComputeQuota", "sagemaker:UpdateComputeQuota", "sagemaker:DeleteComputeQuota",
    "sagemaker:DescribeComputeQuota", "sagemaker:CreateClusterSchedulerConfig",
    "sagemaker:UpdateClusterSchedulerConfig", "sagemaker:DeleteClusterSchedulerConfig",
    "sagemaker:DescribeClusterSchedulerConfig", "sagemaker:DescribeCluster", "sagemaker:AddTags",
    "sagemaker:DeleteTags", "sagemaker:ListTags", "eks:DescribeCluster", "eks:AssociateAccessPolicy",
    "eks:DisassociateAccessPolicy", "eks:DescribeAccessEntry", "eks:ListAssociatedAccessPolicies",
)  # fmt: skip
EXEC_ROLE = "cdk-hnb659fds-cfn-exec-role-{account}-{region}"


def hyperpod_checks(aws: Any, cluster_arn: str, eks_cluster: str, http: Any) -> list[Check]:
    """The HyperPod checks, then the add-on's objects (see the module docstring)."""
    return [
        _guarded("HyperPod cluster", cluster_check, aws, cluster_arn),
        _guarded("SageMaker permissions", permissions_check, aws),
        _guarded("task governance add-on", addon_check, aws, eks_cluster),
        node_labels_check(http),
        *addon_objects(http),
    ]


def _guarded(what: str, check: Any, *args: Any) -> Check:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        result: Check = check(*args)
        return result
    except ClientError as exc:
        err = exc.response.get("Error") or {}
        return (what, False, f"{exc.operation_name}: {err.get('Code')}: {err.get('Message')}")
    except BotoCoreError as exc:
        return (what, False, f"{type(exc).__name__}: {exc}")


def cluster_check(aws: Any, cluster_arn: str) -> Check:
    cluster = aws("sagemaker").describe_cluster(ClusterName=cluster_arn)
    groups = ", ".join(
        f"{g.get('InstanceGroupName')} {g.get('InstanceType')} x{g.get('CurrentCount', '?')}"
        for g in cluster.get("InstanceGroups") or []
    )
    status = cluster.get("ClusterStatus") or "?"
    ok = status == "InService"
    fix = "" if ok else " — wait for InService (aws sagemaker describe-cluster)"
    return (
        "HyperPod cluster",
        ok,
        f"{cluster.get('ClusterName')} {status}; instance groups: {groups or 'none'}{fix}",
    )


def deploy_identity(aws: Any) -> str | None:
    """The IAM principal CloudFormation deploys with: CDK's execution role, else the caller (an
    assumed role's session as its role); None for the account's root user (allowed everything)."""
    who = aws("sts").get_caller_identity()
    iam = aws("iam")
    try:
        return str(
            iam.get_role(RoleName=EXEC_ROLE.format(account=who["Account"], region=aws.region))["Role"]["Arn"]
        )
    except Exception as exc:
        if str((getattr(exc, "response", None) or {}).get("Error", {}).get("Code", "")) != "NoSuchEntity":
            raise
    arn = str(who["Arn"])
    if arn.endswith(":root"):
        return None
    if ":assumed-role/" in arn:
        role = arn.split(":assumed-role/", 1)[1].split("/", 1)[0]
        return str(iam.get_role(RoleName=role)["Role"]["Arn"])
    return arn


def permissions_check(aws: Any) -> Check:
    principal = deploy_identity(aws)
    if principal is None:
        return ("SageMaker permissions", True, "the account's root user: every action allowed")
    answer = aws("iam").simulate_principal_policy(
        PolicySourceArn=principal, ActionNames=list(HANDLER_ACTIONS)
    )
    denied = sorted(
        {r["EvalActionName"] for r in answer["EvaluationResults"] if r["EvalDecision"] != "allowed"}
    )
    if denied:
        return (
            "SageMaker permissions",
            False,
            f"{principal} may not {', '.join(denied)} — CloudFormation's handlers of the ComputeQuotas "
            "and the cluster policy call them with it: allow them (or deploy with CDK's bootstrap roles)",
        )
    return (
        "SageMaker permissions",
        True,
        f"{principal} may call the {len(HANDLER_ACTIONS)} actions the deploy needs",
    )


def addon_version(aws: Any, eks_cluster: str) -> str | None:
    """The task governance add-on's ``addonVersion`` (EKS ``DescribeAddon``), None when it is not
    installed or cannot be read (the add-on check says why)."""
    try:
        addon = aws("eks").describe_addon(clusterName=eks_cluster, addonName=ADDON)["addon"]
    except Exception:
        return None
    version = addon.get("addonVersion")
    return str(version) if version else None


def addon_check(aws: Any, eks_cluster: str) -> Check:
    try:
        addon = aws("eks").describe_addon(clusterName=eks_cluster, addonName=ADDON)["addon"]
    except Exception as exc:
        if (
            str((getattr(exc, "response", None) or {}).get("Error", {}).get("Code", ""))
            == "ResourceNotFoundException"
        ):
            return (
                "task governance add-on",
                False,
                f"{ADDON} is not installed on {eks_cluster} — install it (aws eks create-addon "
                f"--cluster-name {eks_cluster} --addon-name {ADDON}); without it nothing turns the "
                "ComputeQuotas into queues",
            )
        raise
    status, version = addon.get("status") or "?", addon.get("addonVersion") or "?"
    ok = status == "ACTIVE"
    fix = "" if ok else " — wait for ACTIVE (aws eks describe-addon)"
    return ("task governance add-on", ok, f"{ADDON} {version} {status}{fix}")


def node_labels_check(http: Any) -> Check:
    from topogov.domain.labels import layer_label
    from topogov.domain.views.nodes import NodeView

    resp = http.request("GET", "/api/v1/nodes", query={"limit": "500"})
    if resp.status != 200:
        return ("node topology labels", False, f"listing nodes: HTTP {resp.status}")
    views = [NodeView.from_api(n) for n in (resp.body or {}).get("items") or []]
    hyperpod = [v for v in views if v.hyperpod]
    labelled = [v for v in hyperpod if all(layer_label(k) in v.labels for k in (1, 2, 3))]
    unhealthy = [v for v in hyperpod if not v.available]
    more = " (of the first 500 nodes)" if (resp.body or {}).get("metadata", {}).get("continue") else ""
    if not hyperpod:
        return (
            "node topology labels",
            False,
            f"no HyperPod node{more} — is this the HyperPod cluster's EKS cluster?",
        )
    missing = len(hyperpod) - len(labelled)
    detail = (
        f"{len(labelled)} of {len(hyperpod)} HyperPod nodes{more} carry {layer_label(1)}..3; "
        f"{len(unhealthy)} not available (health label, taint or cordon)"
    )
    if missing:
        return (
            "node topology labels",
            False,
            f"{detail} — {missing} without: task governance labels them (add-on v1.2.2-eksbuild.1 or later)",
        )
    return ("node topology labels", True, detail)


def _nominal(resources: list[Mapping[str, Any]], name: str, key: str) -> str | None:
    found = [str(r[key]) for r in resources if r.get("name") == name and key in r]
    return found[0] if found else None


def addon_objects(http: Any) -> list[Check]:
    """What the add-on wrote, as information lines (compare with docs/hyperpod.md's assumptions)."""
    from topogov.adapters.kueue_api import KueueApi
    from topogov.domain.labels import SAGEMAKER_MANAGED_QUEUE_LABEL

    kueue = KueueApi(http).path()  # v1beta2 where served, else v1beta1
    selector = {"labelSelector": f"{SAGEMAKER_MANAGED_QUEUE_LABEL}=true"}
    queues = http.request("GET", f"{kueue}/clusterqueues", query=selector)
    if queues.status != 200:
        return [("the add-on's ClusterQueues", False, f"listing ClusterQueues: HTTP {queues.status}")]
    out: list[Check] = []
    for cq in (queues.body or {}).get("items") or []:
        spec = cq.get("spec") or {}
        flavors = []
        for group in spec.get("resourceGroups") or []:
            for flavor in group.get("flavors") or []:
                res = flavor.get("resources") or []
                nominal = _nominal(res, "nvidia.com/gpu", "nominalQuota")
                borrow = _nominal(res, "nvidia.com/gpu", "borrowingLimit")
                lend = _nominal(res, "nvidia.com/gpu", "lendingLimit")
                limits = "".join(
                    f" {k} {v}" for k, v in (("borrowing", borrow), ("lending", lend)) if v is not None
                )
                flavors.append(f"{flavor.get('name')}: {nominal or 0} GPUs{limits}")
        preemption = spec.get("preemption") or {}
        text = (
            f"cohort {spec.get('cohort') or spec.get('cohortName') or 'none'}; preemption "
            + ", ".join(
                f"{k} {v.get('policy') if isinstance(v, dict) else v}" for k, v in sorted(preemption.items())
            )
            + "; "
            + "; ".join(flavors)
        )
        out.append((f"ClusterQueue {cq['metadata']['name']}", True, text))
    topologies = http.request("GET", f"{kueue}/topologies")
    for topo in (topologies.body or {}).get("items") or [] if topologies.status == 200 else []:
        levels = [lv.get("nodeLabel") for lv in (topo.get("spec") or {}).get("levels") or []]
        out.append((f"Topology {topo['metadata']['name']}", True, "levels " + ", ".join(map(str, levels))))
    return out or [
        (
            "the add-on's ClusterQueues",
            False,
            "none: no ComputeQuota is in force, or the add-on is not installed",
        )
    ]
