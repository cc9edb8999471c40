"""Job manifests: render the high-level request as a batch/v1 Job, check and complete a raw one (pure).

Kueue reads (and only these are set): the ``kueue.x-k8s.io/queue-name`` and
``kueue.x-k8s.io/priority-class`` labels on the Job, and the
``kueue.x-k8s.io/podset-required-topology`` / ``...-preferred-topology`` annotation on the pod
template. Jobs are created suspended; Kueue unsuspends them on admission.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from topogov.domain.labels import (
    INSTANCE_TYPE_LABEL,
    JOB_CONTROLLER,
    MANAGED_BY_LABEL,
    POD_PRIORITY_LABEL,
    PREFERRED_ANNOTATION,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    REQUIRED_ANNOTATION,
    SUBMITTED_BY_ANNOTATION,
    TOPOLOGY_MODE_LABEL,
)
from topogov.domain.quantity import CPU, EFA, GPU, MEMORY, Resources, parse_quantity
from topogov.domain.views.batch import JobView, container_requests, scheduler_requests
from topogov.domain.views.workload import WorkloadView

GOVERNED = (GPU, EFA, CPU, MEMORY)

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


class ManifestProblem(ValueError):
    """A raw manifest that cannot be accepted; ``field`` is a JSON path into the request body."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True, slots=True)
class Placement:
    mode: str  # required | preferred | none
    level: str | None  # label key


@dataclass(frozen=True, slots=True)
class JobShape:
    """What governance needs to know about a job, whichever shape it came in."""

    name: str
    pods: int
    per_pod: Resources
    instance_type: str | None
    placement: Placement | None  # what the manifest itself asks (raw manifests), None if silent
    priority_class: str | None = None  # what the manifest's PRIORITY_LABEL asks (raw manifests)

    @property
    def total(self) -> Resources:
        p = self.per_pod
        return p.times(self.pods)


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
) -> dict[str, Any]:
    """An Indexed batch/v1 Job: parallelism = completions = pods; requests = limits for devices."""
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


def inspect_manifest(manifest: Any, *, team_namespace: str, team_queue: str) -> JobShape:
    """Check a raw batch/v1 Job; raises ManifestProblem naming the field (paths from the body).
    The checks run in the order of the fields, and the first that fails is the one reported."""
    base = "manifest"
    if not isinstance(manifest, Mapping):
        raise ManifestProblem(base, "must be a batch/v1 Job object")
    if manifest.get("apiVersion") != "batch/v1" or manifest.get("kind") != "Job":
        raise ManifestProblem(f"{base}.kind", "only batch/v1 Job is accepted")
    meta = manifest.get("metadata")
    if not isinstance(meta, Mapping):
        raise ManifestProblem(f"{base}.metadata", "is required")
    name = _checked_metadata(meta, f"{base}.metadata", team_namespace, team_queue)
    spec = manifest.get("spec")
    if not isinstance(spec, Mapping):
        raise ManifestProblem(f"{base}.spec", "is required")
    pods = _checked_counts(spec, f"{base}.spec")
    template = spec.get("template")
    if not isinstance(template, Mapping) or not isinstance(template.get("spec"), Mapping):
        raise ManifestProblem(f"{base}.spec.template.spec", "is required")
    _string_map(meta, "annotations", f"{base}.metadata.annotations")
    _checked_template_metadata(template.get("metadata"), f"{base}.spec.template.metadata")
    managed_by = spec.get("managedBy")
    if managed_by is not None and managed_by != JOB_CONTROLLER:
        raise ManifestProblem(
            f"{base}.spec.managedBy",
            f"must be absent or {JOB_CONTROLLER!r}: another controller would run the job outside Kueue",
        )
    pod_spec = template["spec"]
    _checked_pod_spec(pod_spec, f"{base}.spec.template.spec")
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    node_selector = pod_spec.get("nodeSelector") or {}
    return JobShape(
        name=name,
        pods=pods,
        per_pod=_effective_requests(pod_spec),
        instance_type=node_selector.get(INSTANCE_TYPE_LABEL),
        placement=_placement_of(annotations, f"{base}.spec.template.metadata.annotations"),
        priority_class=(meta.get("labels") or {}).get(PRIORITY_LABEL),
    )


def manifest_namespace(manifest: Any) -> str | None:
    """The namespace a submitted manifest names (before it is checked: None unless it is a string)."""
    meta = manifest.get("metadata") if isinstance(manifest, Mapping) else None
    ns = meta.get("namespace") if isinstance(meta, Mapping) else None
    return ns if isinstance(ns, str) else None


def _checked_label_values(labels: Any, field: str) -> Mapping[str, Any]:
    if not isinstance(labels, Mapping):
        raise ManifestProblem(field, "must be an object")
    for key, value in labels.items():
        if not isinstance(value, str) or len(value) > 63 or not LABEL_VALUE.match(value):
            raise ManifestProblem(f"{field}.{key}", "is not a valid Kubernetes label value")
    return labels


def _checked_metadata(meta: Mapping[str, Any], field: str, team_namespace: str, team_queue: str) -> str:
    """The Job's name; its namespace and LocalQueue, when given, must be the team's."""
    name = meta.get("name")
    if not isinstance(name, str) or not DNS1123_LABEL.match(name) or len(name) > 63:
        raise ManifestProblem(f"{field}.name", "must be a DNS-1123 label (a-z, 0-9, '-', at most 63)")
    if "generateName" in meta:
        raise ManifestProblem(f"{field}.generateName", "is not supported: name the job")
    ns = meta.get("namespace")
    if ns is not None and ns != team_namespace:
        raise ManifestProblem(f"{field}.namespace", f"must be the team's namespace {team_namespace!r}")
    labels = _checked_label_values(meta.get("labels") or {}, f"{field}.labels")
    queue = labels.get(QUEUE_LABEL)
    if queue is not None and queue != team_queue:
        raise ManifestProblem(
            f"{field}.labels.{QUEUE_LABEL}", f"must be the team's LocalQueue {team_queue!r}"
        )
    return name


def _checked_counts(spec: Mapping[str, Any], field: str) -> int:
    """The Job's pod count (``parallelism``); it must start suspended, for Kueue to start it."""
    if spec.get("suspend") is False:
        raise ManifestProblem(f"{field}.suspend", "must be true or absent: Kueue starts the job on admission")
    parallelism = spec.get("parallelism", 1)
    completions = spec.get("completions", parallelism)
    for name, value in (("parallelism", parallelism), ("completions", completions)):
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 10_000:
            raise ManifestProblem(f"{field}.{name}", "must be an integer from 1 to 10000")
    return int(parallelism)


def _checked_template_metadata(template_meta: Any, field: str) -> None:
    if template_meta is not None and not isinstance(template_meta, Mapping):
        raise ManifestProblem(field, "must be an object")
    _string_map(template_meta or {}, "annotations", f"{field}.annotations")
    _checked_label_values((template_meta or {}).get("labels") or {}, f"{field}.labels")


def _checked_pod_spec(pod_spec: Mapping[str, Any], field: str) -> None:
    """What would run the pods outside Kueue is refused; every container must be well formed."""
    for key, why in (
        ("nodeName", "pins pods to a node, bypassing the scheduler and Kueue's topology placement"),
        (
            "priorityClassName",
            "a pod PriorityClass preempts outside Kueue: priority comes from the team's "
            "WorkloadPriorityClass (the job's `priority`)",
        ),
    ):
        if pod_spec.get(key) is not None:
            raise ManifestProblem(f"{field}.{key}", f"is not allowed: it {why}")
    _string_map(pod_spec, "nodeSelector", f"{field}.nodeSelector")
    containers = pod_spec.get("containers")
    if not isinstance(containers, list) or not containers:
        raise ManifestProblem(f"{field}.containers", "needs at least one container")
    init_containers = pod_spec.get("initContainers")
    if init_containers is not None and not isinstance(init_containers, list):
        raise ManifestProblem(f"{field}.initContainers", "must be a list")
    for key, items in (("containers", containers), ("initContainers", init_containers or [])):
        for i, c in enumerate(items):
            _check_container(c, f"{field}.{key}[{i}]", need_requests=key == "containers")


def _placement_of(annotations: Mapping[str, Any], field: str) -> Placement | None:
    """The topology the manifest asks for with Kueue's annotations: one of required or preferred."""
    placement = None
    for mode, key in (("required", REQUIRED_ANNOTATION), ("preferred", PREFERRED_ANNOTATION)):
        if key in annotations:
            from topogov.domain.placement import UnknownLevel, resolve_level

            try:
                level = resolve_level(str(annotations[key]))
            except UnknownLevel as exc:
                raise ManifestProblem(f"{field}.{key}", str(exc)) from None
            if placement is not None:
                raise ManifestProblem(field, "set either the required or the preferred topology")
            placement = Placement(mode, level)
    return placement


# Kubernetes quantities are int64 counts of their smallest unit: anything larger is not a quantity
# (and would not survive the arithmetic and JSON that follow).
MAX_QUANTITY = Decimal(2**63 - 1)


def _string_map(obj: Mapping[str, Any], key: str, field: str) -> None:
    """``obj[key]``, when present, must be a map of strings (labels, annotations, nodeSelector)."""
    value = obj.get(key)
    if value is None:
        return
    if not isinstance(value, Mapping):
        raise ManifestProblem(field, "must be an object")
    for name, item in value.items():
        if not isinstance(item, str):
            raise ManifestProblem(f"{field}.{name}", "must be a string")


def _is_quantity(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return False
    try:
        q = parse_quantity(value)
    except (ValueError, ArithmeticError):
        return False
    return q.is_finite() and 0 <= q <= MAX_QUANTITY


def _check_container(c: Any, field: str, *, need_requests: bool) -> None:
    if not isinstance(c, Mapping):
        raise ManifestProblem(field, "must be an object")
    resources = c.get("resources")
    if resources is not None and not isinstance(resources, Mapping):
        raise ManifestProblem(f"{field}.resources", "must be an object")
    tables = {}
    for kind in ("requests", "limits"):
        table = (resources or {}).get(kind)
        if table is not None and not isinstance(table, Mapping):
            raise ManifestProblem(f"{field}.resources.{kind}", "must be an object")
        tables[kind] = table or {}
    if need_requests and not tables["requests"] and not tables["limits"]:
        raise ManifestProblem(
            f"{field}.resources.requests",
            "are required: quota is charged on requests (cpu, memory, nvidia.com/gpu, vpc.amazonaws.com/efa)",
        )
    for res in GOVERNED:
        for kind, table in tables.items():
            if res in table and not _is_quantity(table[res]):
                raise ManifestProblem(f"{field}.resources.{kind}.{res}", "is not a quantity")


def _effective_requests(pod_spec: Mapping[str, Any]) -> Resources:
    """A pod's requests as the scheduler counts them, each container's defaulted to its limits where
    only limits are set, as Kubernetes defaults them."""
    spec = copy.deepcopy(dict(pod_spec))
    for key in ("containers", "initContainers"):
        for c in spec.get(key) or []:
            res = c["resources"] = c.get("resources") or {}
            req = res["requests"] = res.get("requests") or {}
            for name, value in (res.get("limits") or {}).items():
                req.setdefault(name, value)
    return scheduler_requests(
        container_requests(spec.get("containers")), container_requests(spec.get("initContainers"))
    )


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
    labels.setdefault(MANAGED_BY_LABEL, "topogov")
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
