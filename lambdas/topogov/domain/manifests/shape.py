"""What governance needs to know of a submitted job, whatever its kind: its pod sets (each pod
template, how many pods it makes and what one pod is charged), its name, and what its manifest asks
for itself (a topology, a priority class)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from topogov.domain.quantity import Resources


class ManifestProblem(ValueError):
    """A manifest that cannot be accepted. ``field`` is a JSON path into the request body; ``problems``
    lists every ``(field, message)`` found where a check reports several at once (Pod Security)."""

    def __init__(self, field: str, message: str, problems: Sequence[tuple[str, str]] | None = None) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.problems = list(problems or [(field, message)])


@dataclass(frozen=True, slots=True)
class Placement:
    mode: str  # required | preferred | none
    level: str | None  # label key
    slice_level: str | None = None  # label key: every slice_size consecutive pods in one such domain
    slice_size: int | None = None


@dataclass(frozen=True, slots=True)
class TemplateRef:
    """One pod template of a manifest, as Kueue makes a pod set of it: its name (Kueue's pod set
    name), the JSON path of the template in the request, the template, and how many pods it makes."""

    name: str
    field: str
    template: Mapping[str, Any]
    count: int
    path: tuple[str | int, ...] = ("spec", "template")  # where the template is in the manifest


@dataclass(frozen=True, slots=True)
class PodSet:
    """A pod set as it is charged: how many pods, what one pod counts (``domain/podrequests.py``, as
    Kubernetes and Kueue count it), the instance type its nodeSelector names, the topology its
    template's annotations ask for."""

    name: str
    field: str
    count: int
    per_pod: Resources
    instance_type: str | None = None
    placement: Placement | None = None
    path: tuple[str | int, ...] = ("spec", "template")  # where its template is in the manifest

    @property
    def total(self) -> Resources:
        return self.per_pod.times(self.count)


@dataclass(frozen=True, slots=True)
class JobShape:
    """What governance needs to know about a job, whichever shape it came in. ``pods``, ``per_pod``,
    ``instance_type`` and ``placement`` are those of its pod sets taken together where they agree
    (a batch/v1 Job has one pod set)."""

    name: str
    pods: int
    per_pod: Resources
    instance_type: str | None
    placement: Placement | None  # what the manifest itself asks (raw manifests), None if silent
    priority_class: str | None = None  # what the manifest's PRIORITY_LABEL asks (raw manifests)
    pod_sets: tuple[PodSet, ...] = ()
    kind: str = "batch/v1 Job"  # the object's apiVersion and kind
    # Its two pod sets are placed as one, a leader and its workers (Kueue's pod-set group: exactly two
    # pod sets, one of a single pod; kueue v0.17.0 pkg/controller/jobframework/tas_validation.go)
    grouped: bool = False

    @property
    def units(self) -> list[list[PodSet]]:
        """How Kueue places the job: the pod sets of a group together, each other pod set alone."""
        if self.grouped:
            return [list(self.pod_sets)]
        return [[ps] for ps in self.pod_sets] if self.pod_sets else []

    @property
    def uniform(self) -> bool:
        """Every pod of the job asks the same (one pod set, or pod sets whose pods are alike)."""
        return len({(ps.per_pod, ps.instance_type) for ps in self.pod_sets}) <= 1

    @property
    def total(self) -> Resources:
        """The whole job's charge: every pod set's pods, each as Kueue counts it."""
        if not self.pod_sets:
            return self.per_pod.times(self.pods)
        total = Resources()
        for ps in self.pod_sets:
            total = total + ps.total
        return total
