"""The metadata of a submitted object and of its pod templates: what may be there, and what only
Topogov or Kueue may write.

A submitted object carries a name, its team's namespace, labels and annotations, and nothing else:
``ownerReferences`` would hand it to another object's garbage collection (deleting it with an object
the member does not own, or keeping it alive past its cancel), ``finalizers`` would keep it (and its
pods' GPUs) after a cancel, and the server-set fields (``uid``, ``resourceVersion``,
``managedFields``, ...) are not a submitter's. Of Kueue's keys (``kueue.x-k8s.io/``) only those
Topogov decides itself are accepted, each validated (the queue, the priority class, the topology
request, its pod-set slices): the others change how Kueue admits the job
(``prebuilt-workload-name`` adopts another Workload, ``job-min-parallelism`` makes it partially
admissible, ``elastic-job``...). Topogov's own keys (``topogov.io/``) and its managed-by label are its
own to write.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from topogov.domain.labels import (
    KUEUE_KEY_PREFIX,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    PREFERRED_ANNOTATION,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    REQUIRED_ANNOTATION,
    SLICE_LEVEL_ANNOTATION,
    SLICE_SIZE_ANNOTATION,
    TOPOGOV_KEY_PREFIX,
)
from topogov.domain.manifests.shape import ManifestProblem

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

# The Kueue keys a submission may carry, where: the queue and priority labels on the object, the
# topology request (and its pod-set slices) on a pod template. Topogov validates each and writes the
# decided value itself.
OBJECT_KUEUE_KEYS = frozenset({QUEUE_LABEL, PRIORITY_LABEL})
TEMPLATE_KUEUE_KEYS = frozenset(
    {REQUIRED_ANNOTATION, PREFERRED_ANNOTATION, SLICE_LEVEL_ANNOTATION, SLICE_SIZE_ANNOTATION}
)
OBJECT_METADATA = frozenset({"name", "namespace", "labels", "annotations"})
TEMPLATE_METADATA = frozenset({"labels", "annotations"})


def checked_object_metadata(
    meta: Any,
    field: str,
    *,
    team_namespace: str,
    team_queue: str,
    kueue_keys: Iterable[str] = OBJECT_KUEUE_KEYS,
) -> str:
    """The object's name, once its metadata is one a team member may submit (see the module
    docstring); its namespace and LocalQueue, when given, must be the team's."""
    if not isinstance(meta, Mapping):
        raise ManifestProblem(field, "is required")
    name = meta.get("name")
    if not isinstance(name, str) or not DNS1123_LABEL.match(name) or len(name) > 63:
        raise ManifestProblem(f"{field}.name", "must be a DNS-1123 label (a-z, 0-9, '-', at most 63)")
    if "generateName" in meta:
        raise ManifestProblem(f"{field}.generateName", "is not supported: name the job")
    _only(meta, OBJECT_METADATA, field)
    ns = meta.get("namespace")
    if ns is not None and ns != team_namespace:
        raise ManifestProblem(f"{field}.namespace", f"must be the team's namespace {team_namespace!r}")
    labels = checked_labels(meta.get("labels") or {}, f"{field}.labels")
    queue = labels.get(QUEUE_LABEL)
    if queue is not None and queue != team_queue:
        raise ManifestProblem(
            f"{field}.labels.{QUEUE_LABEL}", f"must be the team's LocalQueue {team_queue!r}"
        )
    managed_by = labels.get(MANAGED_BY_LABEL)
    if managed_by is not None and managed_by != MANAGED_BY:
        raise ManifestProblem(
            f"{field}.labels.{MANAGED_BY_LABEL}",
            f"is Topogov's ({MANAGED_BY!r}): it finds the jobs it created, and cleans them up, by it",
        )
    annotations = string_map(meta, "annotations", f"{field}.annotations")
    allowed = frozenset(kueue_keys)
    reserved_keys(labels, f"{field}.labels", allowed)
    reserved_keys(annotations, f"{field}.annotations", allowed)
    return name


_WHY_NOT = {
    "ownerReferences": "would hand the job to another object's garbage collection",
    "finalizers": "would keep the job, and its pods' GPUs, after it is cancelled or finished",
}


def checked_template_metadata(
    meta: Any, field: str, kueue_keys: Iterable[str] = TEMPLATE_KUEUE_KEYS, *, named: bool = False
) -> None:
    """A pod template's metadata: labels and annotations only (and a name, when ``named``), well
    formed, no reserved key."""
    if meta is None:
        return
    if not isinstance(meta, Mapping):
        raise ManifestProblem(field, "must be an object")
    _only(meta, TEMPLATE_METADATA | {"name"} if named else TEMPLATE_METADATA, field)
    if named and meta.get("name") is not None and not isinstance(meta.get("name"), str):
        raise ManifestProblem(f"{field}.name", "must be a string")
    annotations = string_map(meta, "annotations", f"{field}.annotations")
    labels = checked_labels(meta.get("labels") or {}, f"{field}.labels")
    allowed = frozenset(kueue_keys)
    reserved_keys(labels, f"{field}.labels", allowed)
    reserved_keys(annotations, f"{field}.annotations", allowed)
    managed_by = labels.get(MANAGED_BY_LABEL)
    if managed_by is not None and managed_by != MANAGED_BY:
        raise ManifestProblem(f"{field}.labels.{MANAGED_BY_LABEL}", f"is Topogov's ({MANAGED_BY!r})")


def _only(meta: Mapping[str, Any], allowed: frozenset[str], field: str) -> None:
    for key in meta:
        if key not in allowed:
            why = _WHY_NOT.get(str(key), "it is the API server's to set, not a submitter's")
            raise ManifestProblem(f"{field}.{key}", f"is not accepted: {why}")


def reserved_keys(keys: Mapping[str, Any], field: str, allowed: frozenset[str]) -> None:
    """Refuse a key of Kueue's that Topogov does not decide, and any of Topogov's own."""
    for key in keys:
        if key in allowed:
            continue
        if _kueue_key(key):
            raise ManifestProblem(
                f"{field}.{key}",
                "is Kueue's and not one Topogov decides (it would change how Kueue admits or places the "
                f"job): accepted are {', '.join(sorted(allowed)) or 'none here'}",
            )
        if key.startswith(TOPOGOV_KEY_PREFIX):
            raise ManifestProblem(f"{field}.{key}", "is Topogov's own: it writes it")


def _kueue_key(key: str) -> bool:
    prefix, _, _ = key.rpartition("/")
    return bool(prefix) and (prefix == KUEUE_KEY_PREFIX[:-1] or prefix.endswith("." + KUEUE_KEY_PREFIX[:-1]))


def checked_labels(labels: Any, field: str) -> Mapping[str, Any]:
    if not isinstance(labels, Mapping):
        raise ManifestProblem(field, "must be an object")
    for key, value in labels.items():
        if not isinstance(value, str) or len(value) > 63 or not LABEL_VALUE.match(value):
            raise ManifestProblem(f"{field}.{key}", "is not a valid Kubernetes label value")
    return labels


def string_map(obj: Mapping[str, Any], key: str, field: str) -> Mapping[str, str]:
    """``obj[key]``, when present, must be a map of strings (labels, annotations, nodeSelector)."""
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ManifestProblem(field, "must be an object")
    for name, item in value.items():
        if not isinstance(item, str):
            raise ManifestProblem(f"{field}.{name}", "must be a string")
    return value
