"""A submitted manifest, checked field by field and measured as Kubernetes and Kueue will count it
(pure, no I/O).

:func:`inspect_manifest` is the one way in: the object's metadata (``metadata.py``), its kind and
pod sets (``kinds.py``), every pod template through the same checks (``pods.py``: the team's Pod
Security level and the rules beyond it), and each pod set's charge (``domain/podrequests.py``, with
the namespace's LimitRange defaults and the RuntimeClasses' overhead as Kueue adds them). It raises
:class:`ManifestProblem` naming the field (a JSON path into the request body) at the first problem;
the checks run in the order of the fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from topogov.domain.labels import (
    INSTANCE_TYPE_LABEL,
    PREFERRED_ANNOTATION,
    PRIORITY_LABEL,
    REQUIRED_ANNOTATION,
)
from topogov.domain.manifests.kinds import ACCEPTED, kind_of, pod_templates
from topogov.domain.manifests.metadata import checked_object_metadata
from topogov.domain.manifests.pods import check_pod_template
from topogov.domain.manifests.shape import JobShape, ManifestProblem, Placement, PodSet, TemplateRef
from topogov.domain.podrequests import NamespaceDefaults, governed, kueue_pod_requests
from topogov.domain.policy.pods import PodRules

__all__ = [
    "JobShape",
    "ManifestProblem",
    "Placement",
    "PodSet",
    "TemplateRef",
    "inspect_manifest",
    "manifest_namespace",
]


def inspect_manifest(
    manifest: Any,
    *,
    team_namespace: str,
    team_queue: str,
    rules: PodRules | None = None,
    defaults: NamespaceDefaults | None = None,
) -> JobShape:
    """Check a submitted manifest for a team (its namespace, LocalQueue and pod rules) and measure it.
    ``defaults``: what Kueue adds to the namespace's pods' requests (LimitRange defaults, the
    RuntimeClasses' overhead); none when not given."""
    base = "manifest"
    if not isinstance(manifest, Mapping):
        raise ManifestProblem(base, "must be a Kubernetes object (apiVersion, kind, metadata, spec)")
    rules = rules or PodRules()
    if kind_of(manifest) not in ACCEPTED:
        accepted = ", ".join(f"{v} {k}" for v, k in ACCEPTED)
        raise ManifestProblem(f"{base}.kind", f"must be one of the accepted kinds: {accepted}")
    meta = manifest.get("metadata")
    name = checked_object_metadata(
        meta, f"{base}.metadata", team_namespace=team_namespace, team_queue=team_queue
    )
    templates = pod_templates(manifest, base)
    pod_sets = []
    for ref in templates:
        check_pod_template(ref.template, ref.field, rules)
        pod_sets.append(_pod_set(ref, defaults or NamespaceDefaults()))
    first = pod_sets[0]
    return JobShape(
        name=name,
        pods=sum(ps.count for ps in pod_sets),
        per_pod=first.per_pod,
        instance_type=first.instance_type,
        placement=first.placement,
        priority_class=((meta or {}).get("labels") or {}).get(PRIORITY_LABEL),
        pod_sets=tuple(pod_sets),
        kind="{} {}".format(*kind_of(manifest)),
    )


def _pod_set(ref: TemplateRef, defaults: NamespaceDefaults) -> PodSet:
    """One pod set as it is charged, with the instance type and topology its template asks for."""
    spec, meta = ref.template["spec"], ref.template.get("metadata") or {}
    selector = spec.get("nodeSelector") or {}
    return PodSet(
        name=ref.name,
        field=ref.field,
        count=ref.count,
        per_pod=governed(kueue_pod_requests(spec, defaults)),
        instance_type=selector.get(INSTANCE_TYPE_LABEL),
        placement=_placement_of(meta.get("annotations") or {}, f"{ref.field}.metadata.annotations"),
    )


def _placement_of(annotations: Mapping[str, Any], field: str) -> Placement | None:
    """The topology the manifest asks for with Kueue's annotations: one of required or preferred."""
    from topogov.domain.placement import UnknownLevel, resolve_level

    placement = None
    for mode, key in (("required", REQUIRED_ANNOTATION), ("preferred", PREFERRED_ANNOTATION)):
        if key in annotations:
            try:
                level = resolve_level(str(annotations[key]))
            except UnknownLevel as exc:
                raise ManifestProblem(f"{field}.{key}", str(exc)) from None
            if placement is not None:
                raise ManifestProblem(field, "set either the required or the preferred topology")
            placement = Placement(mode, level)
    return placement


def manifest_namespace(manifest: Any) -> str | None:
    """The namespace a submitted manifest names (before it is checked: None unless it is a string)."""
    meta = manifest.get("metadata") if isinstance(manifest, Mapping) else None
    ns = meta.get("namespace") if isinstance(meta, Mapping) else None
    return ns if isinstance(ns, str) else None
