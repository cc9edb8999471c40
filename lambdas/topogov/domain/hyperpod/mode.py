"""Which cluster Topogov runs on: a plain EKS cluster whose Kueue objects Topogov keeps, or a SageMaker
HyperPod cluster whose task governance add-on keeps them (pure: the reconcile pass gives it what it
read, and writes the answer into the snapshot, where the API reads it).

The evidence, each piece with what it decides:

* **the deployment** — ``-c topogov:hyperpodClusterArn=...`` (the functions'
  ``TOPOGOV_HYPERPOD_CLUSTER_ARN``):
  the stack made ``teams.yaml`` the cluster's ComputeQuotas, so the add-on writes the queues;
* **the add-on's namespaces** — a namespace labelled ``sagemaker.amazonaws.com/sagemaker-managed-queue:
  "true"`` is the add-on's (SageMaker Developer Guide; aws/sagemaker-hyperpod-cli): where there is one,
  the add-on writes Kueue's queues and "may update and overwrite" any change to them
  (aws-samples/awsome-distributed-training, task-governance README);
* **the nodes** — a HyperPod node (providerID ``aws:///<az-id>/sagemaker/cluster/hyperpod-...``) is never
  labelled or asked of EC2 in either mode (:mod:`topogov.domain.nodes`); the count is reported, but
  HyperPod nodes alone (no add-on namespace: task governance is not installed) do not say who owns Kueue.

**Either the deployment or the add-on's namespaces make it HyperPod mode**, and the summary says which:
configured and seen, configured only (a warning: no namespace of the add-on yet — it is not installed,
or no ComputeQuota is in force), or seen only (a warning: the stack was deployed without the cluster,
so ``teams.yaml`` is not what the add-on enforces). When they disagree, HyperPod mode wins: in it
Topogov writes no Kueue object and no node label, which can never fight the add-on, whereas the plain
mode's governor would rewrite the add-on's queues every pass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from topogov.domain.labels import SAGEMAKER_MANAGED_QUEUE_LABEL

HYPERPOD = "hyperpod"
EKS = "eks"
ADDON_SELECTOR = f"{SAGEMAKER_MANAGED_QUEUE_LABEL}=true"


@dataclass(frozen=True, slots=True)
class Mode:
    """The mode of a pass (``name``: ``hyperpod`` or ``eks``), why, and what it was decided from."""

    name: str
    why: str
    cluster_arn: str | None = None  # configured
    hyperpod_nodes: int = 0
    addon_namespaces: tuple[str, ...] = ()
    warnings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def hyperpod(self) -> bool:
        return self.name == HYPERPOD

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "why": self.why,
            "cluster_arn": self.cluster_arn,
            "hyperpod_nodes": self.hyperpod_nodes,
            "addon_namespaces": list(self.addon_namespaces),
            "warnings": list(self.warnings),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Mode:
        return cls(
            name=HYPERPOD if data.get("name") == HYPERPOD else EKS,
            why=str(data.get("why") or ""),
            cluster_arn=data.get("cluster_arn") or None,
            hyperpod_nodes=int(data.get("hyperpod_nodes") or 0),
            addon_namespaces=tuple(data.get("addon_namespaces") or ()),
            warnings=tuple(data.get("warnings") or ()),
        )


def configured(cluster_arn: str | None) -> Mode:
    """The mode the deployment alone says (the API before any pass has written one)."""
    if cluster_arn:
        return Mode(HYPERPOD, f"configured: topogov:hyperpodClusterArn {cluster_arn}", cluster_arn)
    return Mode(EKS, "not configured for HyperPod, and no pass has looked at the cluster yet")


def mode_in_force(recorded: Mapping[str, Any] | None, cluster_arn: str | None) -> Mode:
    """The mode every reader acts on: the one the last full reconcile pass detected and recorded in the
    node snapshot (``recorded``), else the deployment's (:func:`configured`). The governor, the API,
    the labeler's targeted passes and the CLI all ask this, so they cannot disagree."""
    return Mode.from_json(recorded) if recorded else configured(cluster_arn)


def _shown(names: Sequence[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def detect(cluster_arn: str | None, hyperpod_nodes: int, addon_namespaces: Sequence[str]) -> Mode:
    """The mode from the deployment's cluster ARN (None: not given), the number of HyperPod nodes and
    the add-on's namespaces (see the module docstring for the rule)."""
    namespaces = tuple(sorted(addon_namespaces))
    seen = f"{hyperpod_nodes} HyperPod node(s)" + (
        f", the add-on's namespace(s) {_shown(namespaces)} ({ADDON_SELECTOR})" if namespaces else ""
    )
    base = Mode(EKS, "", cluster_arn, hyperpod_nodes, namespaces)
    if cluster_arn and namespaces:
        why = f"configured (topogov:hyperpodClusterArn {cluster_arn}) and seen: {seen}"
        return replace(base, name=HYPERPOD, why=why)
    if cluster_arn:
        warning = (
            f"configured for HyperPod cluster {cluster_arn}, but no namespace is labelled {ADDON_SELECTOR}: "
            "the task governance add-on is not installed, or no ComputeQuota is in force yet "
            "(`topogov preflight` checks the add-on)"
        )
        why = f"configured: topogov:hyperpodClusterArn {cluster_arn}"
        return replace(base, name=HYPERPOD, why=why, warnings=(warning,))
    if namespaces:
        warning = (
            "the task governance add-on manages this cluster's queues but the stack was deployed without "
            "-c topogov:hyperpodClusterArn: teams.yaml is not what the add-on enforces (deploy with the "
            "cluster's ARN to make it so); Topogov writes no Kueue object here"
        )
        return replace(base, name=HYPERPOD, why=f"seen: {seen}", warnings=(warning,))
    why = "not configured for HyperPod, and no namespace is labelled " + ADDON_SELECTOR
    if hyperpod_nodes:
        why += (
            f" ({hyperpod_nodes} HyperPod node(s) without the task governance add-on: read, never labelled)"
        )
    return replace(base, why=why)
