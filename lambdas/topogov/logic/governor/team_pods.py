"""The governor's part of what the cluster enforces on team pods (``domain/team_pods.py``): each team
namespace's Pod Security labels, and each team's ``pod-rules-<team>`` ConfigMap, the parameters of
the ``topogov-team-pods`` admission policy.

Both are written with server-side apply under the field manager :data:`FIELD_MANAGER` (the
Kubernetes way: the API server records which fields the manager owns, so only those are written and
nothing else on a namespace is touched), and only on drift: a pass reads the namespaces (the
governor's list) and the ConfigMaps of ``topogov-system`` (one list) and writes what differs. A
ConfigMap of a team no longer in the policy is deleted. On SageMaker HyperPod the namespaces are the
task governance add-on's: their labels are not written (``topogov preflight`` reports them), the
ConfigMaps are (they are Topogov's own).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from topogov.domain.labels import POD_SECURITY_PREFIX
from topogov.domain.policy import Policy
from topogov.domain.team_pods import RULES_NAMESPACE, pod_rules_configmap, pod_security_labels
from topogov.domain.views.objects import ConfigMapView, ObjectView, object_view
from topogov.logic.governor.drift import owned, shown
from topogov.logic.governor.plan import Action, Change

FIELD_MANAGER = "topogov-governor"


class AppliedObjects(Protocol):
    """What this step reads and writes: a namespace's objects of a kind, and server-side apply."""

    def list_in(self, api_version: str, kind: str, namespace: str) -> list[ObjectView]: ...
    def apply(self, obj: Mapping[str, Any], field_manager: str) -> ObjectView: ...
    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> bool: ...


def plan_team_pods(
    policy: Policy, namespaces: Mapping[str, ObjectView] | None, configmaps: list[ObjectView]
) -> list[Change]:
    """The writes that make the cluster enforce the policy's pod rules: ``namespaces`` (name -> the
    live Namespace; None on HyperPod, where they are not Topogov's) and the live ConfigMaps of
    ``topogov-system``."""
    changes: list[Change] = []
    for name in sorted(policy.teams):
        team = policy.teams[name]
        live = namespaces.get(team.namespace) if namespaces is not None else None
        if live is not None:
            changes += _labels_change(team.namespace, live, pod_security_labels(team))
    have = {c.name: c for c in configmaps if owned(c)}
    for name in sorted(policy.teams):
        desired = object_view(pod_rules_configmap(policy.teams[name]))
        current = have.pop(desired.name, None)
        if current is None:
            changes.append(_change(Action.CREATE, desired, [], "the team's pod rules"))
            continue
        diff = _data_diff(desired, current)
        if diff:
            changes.append(_change(Action.UPDATE, desired, diff, "the team's pod rules changed"))
    for stale in sorted(have.values(), key=lambda c: c.name):
        changes.append(_change(Action.DELETE, stale, [], "no such team in the policy"))
    return changes


def _labels_change(namespace: str, live: ObjectView, want: dict[str, str]) -> list[Change]:
    """The Pod Security labels a live namespace lacks or has other values of (one change, or none)."""
    diff = [
        f"metadata.labels.{k}: {shown(live.labels.get(k))} -> {shown(v)}"
        for k, v in want.items()
        if live.labels.get(k) != v
    ]
    if not diff:
        return []
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": want}}
    return [_change(Action.UPDATE, object_view(body), diff, "the team's Pod Security level")]


def _data_diff(desired: ObjectView, current: ObjectView) -> list[str]:
    want = desired.data if isinstance(desired, ConfigMapView) else {}
    have = current.data if isinstance(current, ConfigMapView) else {}
    out = [f"data.{k}: {shown(have.get(k))} -> {shown(v)}" for k, v in want.items() if have.get(k) != v]
    out += [f"data.{k}: {shown(have[k])} -> (absent)" for k in sorted(set(have) - set(want))]
    out += [
        f"metadata.labels.{k}: {shown(current.labels.get(k))} -> {shown(v)}"
        for k, v in desired.labels.items()
        if current.labels.get(k) != v
    ]
    return out


def _change(action: Action, obj: ObjectView, diff: list[str], reason: str) -> Change:
    return Change(action, obj.kind, obj.name, obj.namespace, obj.api_version, diff, reason, desired=obj)


def read_configmaps(objects: AppliedObjects) -> list[ObjectView]:
    return objects.list_in("v1", "ConfigMap", RULES_NAMESPACE)


def apply_team_pods(objects: AppliedObjects, change: Change) -> None:
    """One write of :func:`plan_team_pods`: server-side apply (create or correct), or delete."""
    assert change.desired is not None
    if change.action == Action.DELETE:
        objects.delete("v1", change.kind, change.name, change.namespace)
    else:
        objects.apply(change.desired.raw, FIELD_MANAGER)  # the rendered body, written whole


def is_team_pods(change: Change) -> bool:
    """A change of this step (applied by :func:`apply_team_pods`, not the Kueue objects' writes)."""
    return change.kind == "ConfigMap" or (
        change.kind == "Namespace"
        and change.action == Action.UPDATE
        and all(d.startswith(f"metadata.labels.{POD_SECURITY_PREFIX}") for d in change.diff)
    )
