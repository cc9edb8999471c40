"""Views of batch/v1 Jobs, Pods and pod specs (``k8s.io/api/batch/v1``, ``k8s.io/api/core/v1``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
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
    """A batch/v1 Job. ``raw`` is the Job as the API server returned it, kept whole for one reader:
    the answer to a submission (``ApiService.submit`` returns the created Job)."""

    name: str
    namespace: str
    uid: str
    labels: Mapping[str, str]
    suspended: bool  # spec.suspend: Kueue unsuspends the Job it admits
    template_annotations: Mapping[str, str]  # the pod template's (Kueue's topology annotations)
    active_deadline_s: int | None
    conditions: tuple[Condition, ...]
    ready: int | None  # status.ready (batch/v1, GA in Kubernetes 1.29); None when absent
    active: int
    succeeded: int
    failed: int
    start_time: str | None
    completion_time: str | None
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_api(cls, body: Mapping[str, Any]) -> JobView:
        meta = body.get("metadata") or EMPTY
        spec = body.get("spec") or EMPTY
        status = body.get("status") or EMPTY
        template_meta = (spec.get("template") or EMPTY).get("metadata") or EMPTY
        return cls(
            str(meta.get("name", "")),
            str(meta.get("namespace", "")),
            str(meta.get("uid", "")),
            meta.get("labels") or {},
            bool(spec.get("suspend", False)),
            template_meta.get("annotations") or {},
            spec.get("activeDeadlineSeconds"),
            conditions_of(status),
            status.get("ready") if "ready" in status else None,
            status.get("active") or 0,
            status.get("succeeded") or 0,
            status.get("failed") or 0,
            status.get("startTime"),
            status.get("completionTime"),
            body,
        )
