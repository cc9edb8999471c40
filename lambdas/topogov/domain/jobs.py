"""Jobs: complete a checked one with what governance decided, and read its status (pure). Checking a
submitted manifest is ``domain/manifests``'; rendering a high-level request, ``domain/render.py``'s.

Kueue reads (and only these are set): the ``kueue.x-k8s.io/queue-name`` and
``kueue.x-k8s.io/priority-class`` labels on the job, and the
``kueue.x-k8s.io/podset-required-topology`` / ``...-preferred-topology`` annotation (and, for a
leader and its workers, ``kueue.x-k8s.io/podset-group-name``; for pod-set slices,
``kueue.x-k8s.io/podset-slice-required-topology`` and ``...-slice-size``) on each pod
template. Jobs are created suspended; Kueue unsuspends them on admission.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from topogov.domain.kinds import BATCH_JOB, BY_KIND, HYPERPOD_PYTORCH_JOB, kind_named
from topogov.domain.labels import (
    GROUP_ANNOTATION,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    POD_PRIORITY_LABEL,
    PREFERRED_ANNOTATION,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    REQUIRED_ANNOTATION,
    SLICE_LEVEL_ANNOTATION,
    SLICE_SIZE_ANNOTATION,
    SUBMITTED_BY_ANNOTATION,
    TOPOLOGY_MODE_LABEL,
)
from topogov.domain.manifests.shape import JobShape, Placement
from topogov.domain.views.batch import JobView
from topogov.domain.views.workload import WorkloadView


def complete_manifest(
    manifest: Mapping[str, Any],
    *,
    namespace: str,
    queue: str,
    priority_class: str,
    placement: Placement | None,
    submitted_by: str,
    asked_mode: str | None = None,
    hyperpod: bool = False,
    shape: JobShape | None = None,
) -> dict[str, Any]:
    """Add what governance decided — namespace, queue, priority, topology, suspension — and nothing
    else (but the two pod labels that say what was asked: ``TOPOLOGY_MODE_LABEL``,
    ``POD_PRIORITY_LABEL``), on the object and on every pod template Kueue reads (``shape``'s pod
    sets; a Job's one template without it). A job whose two pod sets Kueue places as one
    (``shape.grouped``) gets the same ``GROUP_ANNOTATION`` on both, with the topology.

    ``hyperpod``: as SageMaker HyperPod task governance expects a job (SageMaker Developer Guide,
    topology-aware scheduling; aws/sagemaker-hyperpod-cli puts them on a job and its pod template
    alike), the queue and priority labels go on the pod templates too."""
    job = copy.deepcopy(dict(manifest))
    kind = kind_named(job.get("apiVersion"), job.get("kind")) or BATCH_JOB
    meta = job["metadata"] = job.get("metadata") or {}
    meta["namespace"] = namespace
    labels = meta["labels"] = meta.get("labels") or {}  # an explicit null is no labels
    labels[QUEUE_LABEL] = queue
    labels[PRIORITY_LABEL] = priority_class
    labels[MANAGED_BY_LABEL] = MANAGED_BY  # Topogov's, always: the orphan sweep finds its jobs by it
    annotations = meta["annotations"] = meta.get("annotations") or {}
    annotations[SUBMITTED_BY_ANNOTATION] = submitted_by
    if kind.suspend is not None:
        _set_in(job, kind.suspend, True)
    topology = _topology_annotation(placement)
    if kind is HYPERPOD_PYTORCH_JOB:  # hyp writes the topology on the object too (not slices: templates)
        annotations.pop(REQUIRED_ANNOTATION, None)
        annotations.pop(PREFERRED_ANNOTATION, None)
        annotations.update({k: v for k, v in topology.items() if k in TOPOLOGY_KEYS})
    paths = [ps.path for ps in shape.pod_sets] if shape and shape.pod_sets else [("spec", "template")]
    # a pod-set group never has slices (Kueue's webhook refuses the pair; logic/admission.py refuses a
    # slice on a grouped job before this)
    grouped = bool(shape and shape.grouped and topology and not (placement and placement.slice_level))
    for path in paths:
        template = _get_in(job, path)
        _complete_template(template, queue, priority_class, topology, asked_mode, hyperpod, grouped)
    return job


TOPOLOGY_KEYS = (REQUIRED_ANNOTATION, PREFERRED_ANNOTATION)
GROUP_NAME = "job"  # a pod-set group's name: any name but a number (kueue v0.17.0 tas_validation.go)


def _topology_annotation(placement: Placement | None) -> dict[str, str]:
    if placement is None or placement.mode == "none" or not placement.level:
        return {}
    key = REQUIRED_ANNOTATION if placement.mode == "required" else PREFERRED_ANNOTATION
    out = {key: placement.level}
    if placement.slice_level and placement.slice_size:
        out[SLICE_LEVEL_ANNOTATION] = placement.slice_level
        out[SLICE_SIZE_ANNOTATION] = str(placement.slice_size)
    return out


def _complete_template(
    template: dict[str, Any],
    queue: str,
    priority_class: str,
    topology: Mapping[str, str],
    asked_mode: str | None,
    hyperpod: bool,
    grouped: bool,
) -> None:
    tmeta = template["metadata"] = template.get("metadata") or {}
    pod_labels = tmeta["labels"] = tmeta.get("labels") or {}
    pod_labels[POD_PRIORITY_LABEL] = priority_class
    if asked_mode:
        pod_labels[TOPOLOGY_MODE_LABEL] = asked_mode
    if hyperpod:
        pod_labels[QUEUE_LABEL] = queue
        pod_labels[PRIORITY_LABEL] = priority_class
    annotations = tmeta["annotations"] = tmeta.get("annotations") or {}
    for key in (*TOPOLOGY_KEYS, GROUP_ANNOTATION, SLICE_LEVEL_ANNOTATION, SLICE_SIZE_ANNOTATION):
        annotations.pop(key, None)
    annotations.update(topology)
    if topology and grouped:
        annotations[GROUP_ANNOTATION] = GROUP_NAME
    if not annotations:
        tmeta.pop("annotations")


def _get_in(obj: Any, path: tuple[str | int, ...]) -> Any:
    for step in path:
        obj = obj[step]
    return obj


def _set_in(obj: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for step in path[:-1]:
        inner = obj.get(step)
        if not isinstance(inner, dict):
            inner = obj[step] = {}
        obj = inner
    obj[path[-1]] = value


def job_status(job: JobView | None, workload: WorkloadView | None) -> tuple[str, str | None]:
    """(status, why pending) from the job and its Kueue Workload, as `topogov job` shows them.

    Pure: the job's conditions that end it (a Job's ``Complete``/``Failed``; each kind's in
    ``domain/kinds.py``), its suspension (Kueue clears it on admission), and the Workload's
    ``Admitted``/``QuotaReserved`` conditions (kueue ``apis/kueue/v1beta2/workload_types.go``)."""
    if job is None:
        return "Vanished", "the job is no longer in the cluster"
    kind = BY_KIND.get(job.kind, BATCH_JOB)
    for cond in job.conditions:
        if cond.true and cond.type == kind.succeeded:
            return "Succeeded", None
        if cond.true and cond.type == kind.failed:
            return "Failed", None
    if not job.suspended:
        # Admitted until a pod is ready: Kueue unsuspends the job, its controller creates Pods
        # (gated by Kueue's topology scheduling gate until their nodes are assigned), the scheduler
        # binds them, the kubelet starts them. ``ready`` is the Job's count of Ready pods (batch/v1,
        # GA in Kubernetes 1.29); a status without it counts active pods instead.
        running = job.ready if job.ready is not None else job.active
        if kind.running is not None:
            running = running or any(c.true and c.type == kind.running for c in job.conditions)
        # Pods that ended while the job has no end condition yet: a Job controller writes it once
        # every pod has terminated (SuccessCriteriaMet or FailureTarget first, Kubernetes >= 1.31,
        # "Job termination and cleanup"). It ran: still Running, not Admitted again.
        ended = job.succeeded or job.failed
        return ("Running" if running or ended else "Admitted"), None
    if workload is None:
        return "Pending", f"waiting for Kueue to create a Workload for the {kind.kind}"
    conditions = {c.type: c for c in workload.conditions}
    return _admitted_or_pending(conditions)


def _admitted_or_pending(conditions: Mapping[str, Any]) -> tuple[str, str | None]:
    """A Workload's ``Admitted``/``QuotaReserved`` conditions as (status, why pending)."""
    admitted = conditions.get("Admitted")
    if admitted and admitted.true:
        return "Admitted", None
    reserved = conditions.get("QuotaReserved")
    if reserved and reserved.status == "False":
        return "Pending", reserved.message or reserved.reason or "waiting for quota"
    return "Pending", "queued in the team's LocalQueue, waiting for admission"


# Jobs Topogov shows but did not submit and never changes, by the kind that owns their Workload: the
# command that made them, and how to stop them.
HYPERPOD_JOB_KIND = "HyperPodPyTorchJob"  # sagemaker.amazonaws.com/v1, `hyp create hyp-pytorch-job`
READ_ONLY_KINDS = {
    HYPERPOD_JOB_KIND: (
        "hyp create hyp-pytorch-job",
        "hyp delete hyp-pytorch-job --job-name {name} --namespace {ns}",
    ),
}


def workload_status(workload: WorkloadView) -> tuple[str, str | None]:
    """(status, why pending) of a job known by its Kueue Workload only (a HyperPodPyTorchJob), in the
    vocabulary of :func:`job_status`: Kueue's ``Finished`` (reason ``Succeeded`` or ``Failed``,
    kubernetes-sigs/kueue v0.17.0 ``apis/kueue/v1beta1/workload_types.go``), ``Admitted``,
    ``QuotaReserved``."""
    conditions = {c.type: c for c in workload.conditions}
    finished = conditions.get("Finished")
    if finished and finished.true:
        return ("Failed" if finished.reason == "Failed" else "Succeeded"), None
    return _admitted_or_pending(conditions)
