"""What a team's pods may do (``teams.<team>.pods``): the Pod Security level they are held to, and
the few things beyond Pod Security that only the platform team may widen.

Topogov's API creates pods with its own Kubernetes rights, so a team member, who needs nothing but
``execute-api:Invoke``, gets on the cluster whatever the API lets through. These rules are what a
team's pods may ask for; everything else that would reach past the team's lane is refused by the API
(``domain/manifests/pods.py``) and, for pods made any other way, by the ValidatingAdmissionPolicy of
``deploy/rbac.yaml`` on the team namespaces.

``security``
    The Pod Security Standards level (Kubernetes' ``baseline``, ``restricted`` or ``privileged``,
    https://kubernetes.io/docs/concepts/security/pod-security-standards/), checked by the API on
    every pod template and written on the team's namespace as ``pod-security.kubernetes.io/enforce``
    (with ``warn`` and ``audit``, each pinned to the version the API checks). ``privileged`` lifts
    every Pod Security check: it needs ``privilegedReason``, written by an admin, shown by ``topogov
    policy check``.
``serviceAccounts``
    The ServiceAccounts of the team's namespace its pods may run as (each one's IAM role through
    IRSA or EKS Pod Identity comes with it). Default: ``[default]``.
``runtimeClasses``
    The RuntimeClasses its pods may name. Default: none (the node's default runtime).
``secrets``
    The Secrets of the namespace its pods may read (volumes, ``env``, ``envFrom``). A member who
    cannot read a Secret with ``kubectl`` must not read it through a pod. Default: none.
``maxGracePeriodSeconds``
    The longest ``terminationGracePeriodSeconds`` a pod may ask: a preempted or cancelled pod keeps
    its GPUs that long after Kueue has given the quota to another job. Default 300.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, StrictInt, StrictStr

from topogov.domain.policy.fields import DnsSubdomain, Model

PodSecurityLevel = Literal["privileged", "baseline", "restricted"]
DEFAULT_GRACE_PERIOD_S = 300
MAX_GRACE_PERIOD_S = 86_400  # a day: more is a typing mistake, not a policy


def _grace_period(value: int) -> int:
    if not 0 <= value <= MAX_GRACE_PERIOD_S:
        raise ValueError(f"must be from 0 to {MAX_GRACE_PERIOD_S} seconds")
    return value


def _a_reason(value: str) -> str:
    if len(value.strip()) < 10:
        raise ValueError("must say why, in a sentence (at least 10 characters)")
    return value


class PodRules(Model):
    """A team's ``pods`` section with its defaults (see the module docstring)."""

    security: PodSecurityLevel = "baseline"
    privileged_reason: Annotated[StrictStr, AfterValidator(_a_reason)] | None = Field(
        default=None, alias="privilegedReason"
    )
    service_accounts: tuple[DnsSubdomain, ...] = Field(default=("default",), alias="serviceAccounts")
    runtime_classes: tuple[DnsSubdomain, ...] = Field(default=(), alias="runtimeClasses")
    secrets: tuple[DnsSubdomain, ...] = ()
    max_grace_period_s: Annotated[StrictInt, AfterValidator(_grace_period)] = Field(
        default=DEFAULT_GRACE_PERIOD_S, alias="maxGracePeriodSeconds"
    )


def pod_rule_problems(team: str, rules: PodRules | None) -> list[tuple[str, str]]:
    """The rules that relate the fields of a team's ``pods`` (a privileged level needs its reason)."""
    if rules is None:
        return []
    path = f"teams.{team}.pods"
    if rules.security == "privileged" and rules.privileged_reason is None:
        return [
            (
                f"{path}.privilegedReason",
                "required with security: privileged (an admin says why this team's pods may run "
                "privileged, with host namespaces and host paths)",
            )
        ]
    if rules.security != "privileged" and rules.privileged_reason is not None:
        return [
            (f"{path}.privilegedReason", f"only with security: privileged (this team's is {rules.security})")
        ]
    return []
