"""Views of batch/v1 Jobs, Pods and pod specs (``k8s.io/api/batch/v1``, ``k8s.io/api/core/v1``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import field
from typing import Any

from topogov.domain.quantity import Resources, resources_from, total
from topogov.domain.views.common import EMPTY, Condition, conditions_of, empty, view

Quantities = Mapping[str, Any]  # a container's ``resources.requests``: resource name -> quantity


def container_requests(containers: Any) -> tuple[Quantities, ...]:
    """Each container's ``resources.requests`` (empty when it has none)."""
    if not containers:
        return ()
    return tuple([(c.get("resources") or EMPTY).get("requests") or EMPTY for c in containers])


def scheduler_requests(containers: Iterable[Quantities], init_containers: Iterable[Quantities]) -> Resources:
    """A pod's effective request of the governed resources, as the scheduler counts it: the larger
    of the containers' sum and the largest init container."""
    main = total(resources_from(r) for r in containers)
    inits = [resources_from(r) for r in init_containers]
    if not inits:
        return main
    return Resources(
        gpu=max(main.gpu, *(i.gpu for i in inits)),
        efa=max(main.efa, *(i.efa for i in inits)),
        cpu_m=max(main.cpu_m, *(i.cpu_m for i in inits)),
        memory=max(main.memory, *(i.memory for i in inits)),
    )


@view
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""


def _toleration(t: Mapping[str, Any]) -> Toleration:
    return Toleration(t.get("key", ""), t.get("operator", "Equal"), t.get("value", ""), t.get("effect", ""))


@view
class PodSpecView:
    """The parts of a pod spec (a pod's, or a template's) that quota and placement read."""

    container_requests: tuple[Quantities, ...] = ()
    init_container_requests: tuple[Quantities, ...] = ()
    overhead: Quantities = field(default_factory=empty)
    node_selector: Mapping[str, str] = field(default_factory=empty)
    tolerations: tuple[Toleration, ...] = ()

    @property
    def requests(self) -> Resources:
        return scheduler_requests(self.container_requests, self.init_container_requests)

    @classmethod
    def from_api(cls, spec: Mapping[str, Any]) -> PodSpecView:
        tolerations = spec.get("tolerations")
        return cls(
            container_requests(spec.get("containers")),
            container_requests(spec.get("initContainers")),
            spec.get("overhead") or EMPTY,
            spec.get("nodeSelector") or {},
            tuple([_toleration(t) for t in tolerations]) if tolerations else (),
        )


@view
class PodView:
    """A Pod as the API lists it: who it is, where it runs, what it requests."""

    name: str
    namespace: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    node_name: str | None  # spec.nodeName; None while unscheduled
    phase: str  # status.phase ('' when the status has none yet)
    container_requests: tuple[Quantities, ...] = ()
    init_container_requests: tuple[Quantities, ...] = ()

    @property
    def requests(self) -> Resources:
        return scheduler_requests(self.container_requests, self.init_container_requests)

    @classmethod
    def from_api(cls, body: Mapping[str, Any]) -> PodView:
        meta = body.get("metadata") or EMPTY
        spec = body.get("spec") or EMPTY
        return cls(
            str(meta.get("name", "")),
            str(meta.get("namespace", "")),
            meta.get("labels") or {},
            meta.get("annotations") or {},
            spec.get("nodeName") or None,
            (body.get("status") or EMPTY).get("phase") or "",
            container_requests(spec.get("containers")),
            container_requests(spec.get("initContainers")),
        )


@view
class JobView:
    """A governed job of any accepted kind (``domain/kinds.py``): a batch/v1 Job, a PyTorchJob, a
    JobSet, a HyperPodPyTorchJob, read into one shape. ``suspended``: its kind's suspension flag
    (Kueue starts it by clearing it; a HyperPodPyTorchJob, which has none, reads as suspended until
    its operator says it runs); ``templates``: each pod template's path in the object and its
    annotations (Kueue's topology request); ``ready``/``active``/``succeeded``/``failed``: pods, summed
    over the kind's replica statuses; ``start_time``/``completion_time``: when it started and ended.
    ``raw`` is the object as the API server returned it, kept whole for one reader: the answer to a
    submission (``ApiService.submit`` returns the created object)."""

    name: str
    namespace: str
    uid: str
    labels: Mapping[str, str]
    suspended: bool
    template_annotations: Mapping[str, str]  # the first pod template's (Kueue's topology annotations)
    active_deadline_s: int | None
    conditions: tuple[Condition, ...]
    ready: int | None  # status.ready (batch/v1, GA in Kubernetes 1.29); None when absent
    active: int
    succeeded: int
    failed: int
    start_time: str | None
    completion_time: str | None
    raw: Mapping[str, Any] = field(repr=False, compare=False)
    kind: str = "Job"
    templates: tuple[tuple[tuple[str | int, ...], Mapping[str, str]], ...] = ()

    @classmethod
    def from_api(cls, body: Mapping[str, Any]) -> JobView:
        reader = _READERS.get(str(body.get("kind") or "Job"), _job)
        return reader(cls, body)


def _annotations(template: Any) -> Mapping[str, str]:
    meta = (template or EMPTY).get("metadata") or EMPTY if isinstance(template, Mapping) else EMPTY
    return meta.get("annotations") or {}


def _job(cls: type[JobView], body: Mapping[str, Any]) -> JobView:
    """A batch/v1 Job (``k8s.io/api/batch/v1``)."""
    meta = body.get("metadata") or EMPTY
    spec = body.get("spec") or EMPTY
    status = body.get("status") or EMPTY
    annotations = _annotations(spec.get("template"))
    return cls(
        str(meta.get("name", "")),
        str(meta.get("namespace", "")),
        str(meta.get("uid", "")),
        meta.get("labels") or {},
        bool(spec.get("suspend", False)),
        annotations,
        spec.get("activeDeadlineSeconds"),
        conditions_of(status),
        status.get("ready") if "ready" in status else None,
        status.get("active") or 0,
        status.get("succeeded") or 0,
        status.get("failed") or 0,
        status.get("startTime"),
        status.get("completionTime"),
        body,
        "Job",
        ((("spec", "template"), annotations),),
    )


def _common(
    cls: type[JobView],
    body: Mapping[str, Any],
    kind: str,
    suspended: bool,
    templates: Sequence[tuple[tuple[str | int, ...], Mapping[str, str]]],
    counts: tuple[int | None, int, int, int],
    times: tuple[str | None, str | None],
) -> JobView:
    meta = body.get("metadata") or EMPTY
    status = body.get("status") or EMPTY
    ready, active, succeeded, failed = counts
    return cls(
        str(meta.get("name", "")),
        str(meta.get("namespace", "")),
        str(meta.get("uid", "")),
        meta.get("labels") or {},
        suspended,
        templates[0][1] if templates else {},
        None,
        conditions_of(status),
        ready,
        active,
        succeeded,
        failed,
        times[0],
        times[1],
        body,
        kind,
        tuple(templates),
    )


def _true_since(status: Mapping[str, Any], kind: str, value: str = "True") -> str | None:
    for c in status.get("conditions") or ():
        if c.get("type") == kind and c.get("status") == value:
            return c.get("lastTransitionTime")  # type: ignore[no-any-return]
    return None


def _pytorchjob(cls: type[JobView], body: Mapping[str, Any]) -> JobView:
    """A PyTorchJob (training-operator v1.9.3 ``pkg/apis/kubeflow.org/v1``): suspended by
    ``spec.runPolicy.suspend``; pods counted from ``status.replicaStatuses`` (active, succeeded,
    failed per replica type); ``status.startTime``/``completionTime``."""
    spec = body.get("spec") or EMPTY
    status = body.get("status") or EMPTY
    replicas = spec.get("pytorchReplicaSpecs") or EMPTY
    templates = [
        (
            ("spec", "pytorchReplicaSpecs", rt, "template"),
            _annotations((replicas.get(rt) or EMPTY).get("template")),
        )
        for rt in ("Master", "Worker")
        if rt in replicas
    ]
    counts = [0, 0, 0]
    for rs in (status.get("replicaStatuses") or EMPTY).values():
        for i, key in enumerate(("active", "succeeded", "failed")):
            counts[i] += int((rs or EMPTY).get(key) or 0)
    suspended = bool((spec.get("runPolicy") or EMPTY).get("suspend", False))
    times = (status.get("startTime"), status.get("completionTime"))
    return _common(cls, body, "PyTorchJob", suspended, templates, (None, *counts), times)  # type: ignore[arg-type]


def _jobset(cls: type[JobView], body: Mapping[str, Any]) -> JobView:
    """A JobSet (sigs.k8s.io/jobset v0.11.1 ``api/jobset/v1alpha2``): suspended by ``spec.suspend``;
    pods counted from ``status.replicatedJobsStatus`` (ready, active, succeeded, failed Jobs: one
    pod each for the usual one-pod Jobs); started when its ``Suspended`` condition turned False,
    ended when ``Completed`` or ``Failed`` turned True."""
    spec = body.get("spec") or EMPTY
    status = body.get("status") or EMPTY
    templates = [
        (("spec", "replicatedJobs", i, "template", "spec", "template"),
         _annotations((((rj or EMPTY).get("template") or EMPTY).get("spec") or EMPTY).get("template")))
        for i, rj in enumerate(spec.get("replicatedJobs") or ())
    ]  # fmt: skip
    counts = [0, 0, 0, 0]
    for rjs in status.get("replicatedJobsStatus") or ():
        for i, key in enumerate(("ready", "active", "succeeded", "failed")):
            counts[i] += int((rjs or EMPTY).get(key) or 0)
    ended = _true_since(status, "Completed") or _true_since(status, "Failed")
    times = (_true_since(status, "Suspended", "False"), ended)
    return _common(cls, body, "JobSet", bool(spec.get("suspend", False)), templates, tuple(counts), times)  # type: ignore[arg-type]


def _hyperpod(cls: type[JobView], body: Mapping[str, Any]) -> JobView:
    """A HyperPodPyTorchJob (``hyp create hyp-pytorch-job``): no suspension field (it reads as
    suspended until its ``Running`` condition, or an end, is True); started when ``Running`` turned
    True, ended when ``Completed`` or ``Failed`` did (the conditions ``hyp list`` reads)."""
    spec = body.get("spec") or EMPTY
    status = body.get("status") or EMPTY
    templates = [
        (("spec", "replicaSpecs", i, "template"), _annotations((rs or EMPTY).get("template")))
        for i, rs in enumerate(spec.get("replicaSpecs") or ())
    ]
    running = _true_since(status, "Running")
    ended = _true_since(status, "Completed") or _true_since(status, "Failed")
    suspended = running is None and ended is None
    return _common(cls, body, "HyperPodPyTorchJob", suspended, templates, (None, 0, 0, 0), (running, ended))


_READERS = {"Job": _job, "PyTorchJob": _pytorchjob, "JobSet": _jobset, "HyperPodPyTorchJob": _hyperpod}
