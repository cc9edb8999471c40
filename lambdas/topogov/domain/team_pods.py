"""What the cluster itself enforces on a team's pods, rendered from ``teams.<team>.pods`` (pure).

The API refuses a pod template a team may not run (``domain/manifests``); the cluster must refuse
the same pods when they are created any other way (``kubectl``, ``hyp``, a controller):

- **Pod Security admission** on the team's namespace: ``pod-security.kubernetes.io/enforce`` (and
  ``audit``, ``warn``) at the team's level, each pinned to the policy version the API checks
  (``*-version``: :data:`topogov.domain.podsecurity.POLICY_VERSION`), so the API and the API server
  apply the same rules whatever Kubernetes version the cluster is upgraded to
  (https://kubernetes.io/docs/concepts/security/pod-security-admission/, "Pod Security Admission
  labels for namespaces"). Only the governor's namespaces get them: on HyperPod the add-on's
  namespaces are not Topogov's (``topogov preflight`` says whether they carry them).
- **The rules beyond Pod Security** (ServiceAccounts, Secrets, RuntimeClasses, the grace period, and
  the fixed ones: device-visibility variables, tolerations of unfit nodes, hostname pins, other
  schedulers): the ValidatingAdmissionPolicy ``topogov-team-pods`` of ``deploy/rbac.yaml``, bound per
  team namespace, reads the team's parameters from a ConfigMap, ``pod-rules-<team>`` in
  :data:`RULES_NAMESPACE` (where team members have no rights), which the governor keeps equal to
  ``teams.yaml`` (:func:`pod_rules_configmap`). A list is written comma-separated (CEL splits it).
"""

from __future__ import annotations

from typing import Any

from topogov.domain.labels import (
    MANAGED_BY,
    MANAGED_BY_LABEL,
    POD_SECURITY_MODES,
    POD_SECURITY_PREFIX,
    TEAM_LABEL,
)
from topogov.domain.podsecurity import POLICY_VERSION
from topogov.domain.policy import Team

RULES_NAMESPACE = "topogov-system"
RULES_PREFIX = "pod-rules-"


def pod_security_labels(team: Team) -> dict[str, str]:
    """The namespace labels that hold the team's pods to its Pod Security level, in every mode."""
    labels: dict[str, str] = {}
    for mode in POD_SECURITY_MODES:
        labels[f"{POD_SECURITY_PREFIX}{mode}"] = team.pods.security
        labels[f"{POD_SECURITY_PREFIX}{mode}-version"] = POLICY_VERSION
    return labels


def rules_name(team: str) -> str:
    return f"{RULES_PREFIX}{team}"


def pod_rules_configmap(team: Team) -> dict[str, Any]:
    """The team's parameters of the ``topogov-team-pods`` admission policy."""
    rules = team.pods
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": rules_name(team.name),
            "namespace": RULES_NAMESPACE,
            "labels": {MANAGED_BY_LABEL: MANAGED_BY, TEAM_LABEL: team.name},
        },
        "data": {
            "serviceAccounts": ",".join(rules.service_accounts),
            "secrets": ",".join(rules.secrets),
            "runtimeClasses": ",".join(rules.runtime_classes),
            "maxGracePeriodSeconds": str(rules.max_grace_period_s),
            "podSecurity": rules.security,
        },
    }
