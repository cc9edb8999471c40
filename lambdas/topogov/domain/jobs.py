"""Job manifests: render the high-level request as a batch/v1 Job, complete a checked one with what
governance decided, and read a Job's status (pure). Checking a submitted manifest is
``domain/manifests``'.

Kueue reads (and only these are set): the ``kueue.x-k8s.io/queue-name`` and
``kueue.x-k8s.io/priority-class`` labels on the Job, and the
``kueue.x-k8s.io/podset-required-topology`` / ``...-preferred-topology`` annotation on the pod
template. Jobs are created suspended; Kueue unsuspends them on admission.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from topogov.domain.labels import (
    INSTANCE_TYPE_LABEL,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    POD_PRIORITY_LABEL,
    PREFERRED_ANNOTATION,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    REQUIRED_ANNOTATION,
    SUBMITTED_BY_ANNOTATION,
    TOPOLOGY_MODE_LABEL,
)
from topogov.domain.manifests.shape import Placement
from topogov.domain.quantity import CPU, EFA, GPU, MEMORY
from topogov.domain.views.batch import JobView
from topogov.domain.views.workload import WorkloadView

RESTRICTED_CONTEXT = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}


def render_job(
    *,
    name: str,
    namespace: str,
    image: str,
    pods: int,
    per_pod_requests: Mapping[str, str],
    command: list[str] | None = None,
    args: list[str] | None = None,
    environment: Mapping[str, str] | None = None,
    instance_type: str | None = None,
    max_retry: int | None = None,
    tasks_per_node: str | int | None = None,
    restricted: bool = False,
) -> dict[str, Any]:
    """An Indexed batch/v1 Job: parallelism = completions = pods; requests = limits for devices.
    ``restricted``: the container's security context is what Pod Security's ``restricted`` level asks
    (https://kubernetes.io/docs/concepts/security/pod-security-standards/#restricted): no privilege
    escalation, every capability dropped, the runtime's default seccomp profile, not as root (the
    image must then name a non-root user, or its container fails to start)."""
    resources = {"requests": dict(per_pod_requests), "limits": dict(per_pod_requests)}
    env = [{"name": k, "value": v} for k, v in sorted((environment or {}).items())]
    if tasks_per_node is not None:
        env.append({"name": "TOPOGOV_TASKS_PER_NODE", "value": str(tasks_per_node)})
    container: dict[str, Any] = {"name": "main", "image": image, "resources": resources}
    if command:
        container["command"] = list(command)
    if args:
        container["args"] = list(args)
    if env:
        container["env"] = env
    if restricted:
        container["securityContext"] = copy.deepcopy(RESTRICTED_CONTEXT)
    pod_spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [container]}
    if instance_type:
        pod_spec["nodeSelector"] = {INSTANCE_TYPE_LABEL: instance_type}
    spec: dict[str, Any] = {
        "parallelism": pods,
        "completions": pods,
        "completionMode": "Indexed",
        "suspend": True,
        "template": {"metadata": {"labels": {"job-name": name}}, "spec": pod_spec},
    }
    if max_retry is not None:
        spec["backoffLimit"] = max_retry
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {}, "annotations": {}},
        "spec": spec,
    }


def requests_from(accelerators: int, vcpu: float, memory_gib: float, efa: int) -> dict[str, str]:
    out: dict[str, str] = {}
    if accelerators:
        out[GPU] = str(accelerators)
    if efa:
        out[EFA] = str(efa)
    if vcpu:
        out[CPU] = f"{round(vcpu * 1000)}m"
    if memory_gib:
        out[MEMORY] = f"{round(memory_gib * 1024)}Mi"
    return out


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
) -> dict[str, Any]:
    """Add what governance decided — namespace, queue, priority, topology, suspend — and nothing else
    (but the two pod labels that say what was asked: ``TOPOLOGY_MODE_LABEL``, ``POD_PRIORITY_LABEL``).

    ``hyperpod``: as SageMaker HyperPod task governance expects a Job (SageMaker Developer Guide,
    topology-aware scheduling; aws/sagemaker-hyperpod-cli puts them on a job and its pod template
    alike), the queue and priority labels go on the pod template too, and a topology annotation is
    never beside an instance-type nodeSelector ("not both"): the admission refuses a request with
    both before this; here a template's instance-type selector goes when a topology is set."""
    job = copy.deepcopy(dict(manifest))
    meta = job["metadata"] = job.get("metadata") or {}
    meta["namespace"] = namespace
    labels = meta["labels"] = meta.get("labels") or {}  # an explicit null is no labels
    labels[QUEUE_LABEL] = queue
    labels[PRIORITY_LABEL] = priority_class
    labels[MANAGED_BY_LABEL] = MANAGED_BY  # Topogov's, always: the orphan sweep finds its jobs by it
    meta["annotations"] = meta.get("annotations") or {}
    meta["annotations"][SUBMITTED_BY_ANNOTATION] = submitted_by
    spec = job.setdefault("spec", {})
    spec["suspend"] = True
    template = spec.setdefault("template", {})
    tmeta = template["metadata"] = template.get("metadata") or {}
    pod_labels = tmeta["labels"] = tmeta.get("labels") or {}
    pod_labels[POD_PRIORITY_LABEL] = priority_class
    if asked_mode:
        pod_labels[TOPOLOGY_MODE_LABEL] = asked_mode
    if hyperpod:
        pod_labels[QUEUE_LABEL] = queue
        pod_labels[PRIORITY_LABEL] = priority_class
    annotations = tmeta["annotations"] = tmeta.get("annotations") or {}
    annotations.pop(REQUIRED_ANNOTATION, None)
    annotations.pop(PREFERRED_ANNOTATION, None)
    if placement is not None and placement.mode != "none" and placement.level:
        key = REQUIRED_ANNOTATION if placement.mode == "required" else PREFERRED_ANNOTATION
        annotations[key] = placement.level
        selector = (template.get("spec") or {}).get("nodeSelector")
        if hyperpod and isinstance(selector, dict):
            selector.pop(INSTANCE_TYPE_LABEL, None)
            if not selector:
                template["spec"].pop("nodeSelector")
    if not annotations:
        tmeta.pop("annotations")
    return job


def job_status(job: JobView | None, workload: WorkloadView | None) -> tuple[str, str | None]:
    """(status, why pending) from the Job and its Kueue Workload, as `topogov job` shows them.

    Pure: the Job's conditions (``Complete``/``Failed``), ``spec.suspend`` (Kueue unsuspends a Job it
    admits), and the Workload's ``Admitted``/``QuotaReserved`` conditions (kueue
    ``apis/kueue/v1beta2/workload_types.go``)."""
    if job is None:
        return "Vanished", "the Job is no longer in the cluster"
    for cond in job.conditions:
        if cond.true and cond.type == "Complete":
            return "Succeeded", None
        if cond.true and cond.type == "Failed":
            return "Failed", None
    if not job.suspended:
        # Admitted until a pod is ready: Kueue unsuspends the Job, the Job controller creates Pods
        # (gated by Kueue's topology scheduling gate until their nodes are assigned), the scheduler
        # binds them, the kubelet starts them. ``ready`` is the Job's count of Ready pods (batch/v1,
        # GA in Kubernetes 1.29); a Job status without it counts active pods instead.
        running = job.ready if job.ready is not None else job.active
        # Pods that ended while the Job has no Complete/Failed condition yet: the Job controller
        # writes it once every pod has terminated (SuccessCriteriaMet or FailureTarget first,
        # Kubernetes >= 1.31, "Job termination and cleanup"). It ran: still Running, not Admitted again.
        ended = job.succeeded or job.failed
        return ("Running" if running or ended else "Admitted"), None
    if workload is None:
        return "Pending", "waiting for Kueue to create a Workload for the Job"
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
