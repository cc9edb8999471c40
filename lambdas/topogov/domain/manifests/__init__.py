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
    QUEUE_LABEL,
    REQUIRED_ANNOTATION,
    SLICE_LEVEL_ANNOTATION,
    SLICE_SIZE_ANNOTATION,
)
from topogov.domain.manifests.kinds import pod_templates, rules_for
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
    hyperpod: bool = False,
) -> JobShape:
    """Check a submitted manifest for a team (its namespace, LocalQueue and pod rules) and measure it.
    ``defaults``: what Kueue adds to the namespace's pods' requests (LimitRange defaults, the
    RuntimeClasses' overhead); none when not given. ``hyperpod``: the cluster is SageMaker HyperPod's
    (a HyperPodPyTorchJob is accepted)."""
    base = "manifest"
    if not isinstance(manifest, Mapping):
        raise ManifestProblem(base, "must be a Kubernetes object (apiVersion, kind, metadata, spec)")
    rules = rules or PodRules()
    kind = rules_for(manifest, base, hyperpod=hyperpod)
    meta = manifest.get("metadata")
    name = checked_object_metadata(
        meta, f"{base}.metadata", team_namespace=team_namespace, team_queue=team_queue,
        kueue_keys=kind.object_keys,
    )  # fmt: skip
    templates = pod_templates(manifest, base, hyperpod=hyperpod)
    pod_sets = []
    for ref in templates:
        check_pod_template(ref.template, ref.field, rules, kind.template_keys, kind.named_templates)
        _template_queue(ref, team_queue)
        pod_sets.append(_pod_set(ref, defaults or NamespaceDefaults()))
    first = pod_sets[0]
    asked = _one_placement(pod_sets, (meta or {}).get("annotations") or {}, f"{base}.metadata.annotations")
    grouped = kind.groups and len(pod_sets) == 2 and min(ps.count for ps in pod_sets) == 1
    return JobShape(
        name=name,
        pods=sum(ps.count for ps in pod_sets),
        per_pod=first.per_pod,
        instance_type=first.instance_type,
        placement=asked,
        priority_class=((meta or {}).get("labels") or {}).get(PRIORITY_LABEL),
        pod_sets=tuple(pod_sets),
        kind=kind.kind.title,
        grouped=grouped,
    )


def _template_queue(ref: TemplateRef, team_queue: str) -> None:
    """A template that names a LocalQueue (a HyperPodPyTorchJob's, as ``hyp`` writes it) names the team's."""
    labels = (ref.template.get("metadata") or {}).get("labels") or {}
    queue = labels.get(QUEUE_LABEL)
    if queue is not None and queue != team_queue:
        raise ManifestProblem(
            f"{ref.field}.metadata.labels.{QUEUE_LABEL}", f"must be the team's LocalQueue {team_queue!r}"
        )


def _one_placement(pod_sets: list[PodSet], annotations: Mapping[str, Any], field: str) -> Placement | None:
    """The topology the job asks for: Topogov decides one for the whole job, so every template that
    asks one (and the object, for a kind whose object carries it: its level, never slices) asks the
    same."""
    asked = [(ps.field, ps.placement) for ps in pod_sets if ps.placement is not None]
    on_object = _placement_of(annotations, field)
    if on_object is not None:
        level_only = [(where, Placement(p.mode, p.level)) for where, p in asked]
        for where, placement in level_only:
            if placement != on_object:
                raise ManifestProblem(
                    f"{where}.metadata.annotations",
                    f"asks another topology than {field}: Topogov decides one topology for the whole job",
                )
    for where, placement in asked[1:]:
        if placement != asked[0][1]:
            raise ManifestProblem(
                f"{where}.metadata.annotations",
                f"asks another topology than {asked[0][0]}: Topogov decides one topology for the whole job",
            )
    return asked[0][1] if asked else on_object


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
        path=ref.path,
    )


def _placement_of(annotations: Mapping[str, Any], field: str) -> Placement | None:
    """The topology the manifest asks for with Kueue's annotations: one of required or preferred, and
    optionally slices inside it (:func:`_slice_of`)."""
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
    sliced = _slice_of(annotations, field)
    if sliced is None:
        return placement
    if placement is None:
        raise ManifestProblem(
            f"{field}.{SLICE_LEVEL_ANNOTATION}",
            f"needs {REQUIRED_ANNOTATION} or {PREFERRED_ANNOTATION} beside it: Topogov places a sliced job "
            "inside one domain of a level (or ask topology {mode: auto, slice} beside the manifest)",
        )
    return Placement(placement.mode, placement.level, *sliced)


def _slice_of(annotations: Mapping[str, Any], field: str) -> tuple[str, int] | None:
    """Kueue's pod-set slice annotations, checked as its job webhook checks them (kueue v0.17.0
    ``pkg/controller/jobframework/tas_validation.go``): both or neither, the size an integer of at
    least 1, the level one Topogov knows."""
    from topogov.domain.placement import UnknownLevel, resolve_level

    level, size = annotations.get(SLICE_LEVEL_ANNOTATION), annotations.get(SLICE_SIZE_ANNOTATION)
    if level is None and size is None:
        return None
    if level is None:
        raise ManifestProblem(
            f"{field}.{SLICE_SIZE_ANNOTATION}", f"may not be set when {SLICE_LEVEL_ANNOTATION} is not"
        )
    if size is None:
        raise ManifestProblem(
            f"{field}.{SLICE_SIZE_ANNOTATION}", f"must be set with {SLICE_LEVEL_ANNOTATION}"
        )
    try:
        label = resolve_level(str(level))
    except UnknownLevel as exc:
        raise ManifestProblem(f"{field}.{SLICE_LEVEL_ANNOTATION}", str(exc)) from None
    text = str(size).strip()
    if not text.isdigit() or int(text) < 1:
        raise ManifestProblem(
            f"{field}.{SLICE_SIZE_ANNOTATION}", f"must be a whole number of at least 1, got {size!r}"
        )
    return label, int(text)


def manifest_namespace(manifest: Any) -> str | None:
    """The namespace a submitted manifest names (before it is checked: None unless it is a string)."""
    meta = manifest.get("metadata") if isinstance(manifest, Mapping) else None
    ns = meta.get("namespace") if isinstance(meta, Mapping) else None
    return ns if isinstance(ns, str) else None
