"""The kinds the API accepts: each one's pod sets as Kueue makes them (every pod template, the JSON
path it is found at, its name and how many pods it makes) and the checks of its own spec. Every
check, the charge, the cap, topology feasibility and the estimates read a job through
:func:`pod_templates`, so a kind is known in one place."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from topogov.domain.labels import JOB_CONTROLLER
from topogov.domain.manifests.shape import ManifestProblem, TemplateRef

BATCH_JOB = ("batch/v1", "Job")
MAX_PODS = 10_000


def kind_of(manifest: Mapping[str, Any]) -> tuple[Any, Any]:
    return manifest.get("apiVersion"), manifest.get("kind")


def pod_templates(manifest: Mapping[str, Any], base: str) -> list[TemplateRef]:
    """The pod templates of an accepted kind, in Kueue's pod set order; ``base`` is the manifest's
    JSON path in the request (``manifest``)."""
    if kind_of(manifest) == BATCH_JOB:
        return [_job_template(manifest, base)]
    raise ManifestProblem(f"{base}.kind", f"must be one of: {', '.join('/'.join(k) for k in ACCEPTED)}")


ACCEPTED = (BATCH_JOB,)


def _job_template(manifest: Mapping[str, Any], base: str) -> TemplateRef:
    """A batch/v1 Job: one pod set, ``main``, of min(parallelism, completions) pods (kueue v0.17.0
    ``pkg/controller/jobs/job/job_controller.go``, ``PodSets`` and ``podsCount``); it must start
    suspended, for Kueue to start it."""
    spec = manifest.get("spec")
    if not isinstance(spec, Mapping):
        raise ManifestProblem(f"{base}.spec", "is required")
    if spec.get("suspend") is False:
        raise ManifestProblem(
            f"{base}.spec.suspend", "must be true or absent: Kueue starts the job on admission"
        )
    parallelism = spec.get("parallelism", 1)
    completions = spec.get("completions", parallelism)
    for name, value in (("parallelism", parallelism), ("completions", completions)):
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_PODS:
            raise ManifestProblem(f"{base}.spec.{name}", f"must be an integer from 1 to {MAX_PODS}")
    template = spec.get("template")
    if not isinstance(template, Mapping) or not isinstance(template.get("spec"), Mapping):
        raise ManifestProblem(f"{base}.spec.template.spec", "is required")
    _check_job_spec(spec, f"{base}.spec")
    return TemplateRef("main", f"{base}.spec.template", template, min(parallelism, completions))


def _check_job_spec(spec: Mapping[str, Any], at: str) -> None:
    """What would take a Job out of Kueue's hands or give it other pods."""
    managed_by = spec.get("managedBy")
    if managed_by is not None and managed_by != JOB_CONTROLLER:
        raise ManifestProblem(
            f"{at}.managedBy",
            f"must be absent or {JOB_CONTROLLER!r}: another controller would run the job outside Kueue",
        )
    if spec.get("manualSelector") is True:
        raise ManifestProblem(
            f"{at}.manualSelector",
            "is not allowed: a hand-written selector could adopt (and delete) other pods of the namespace",
        )
    if spec.get("selector") is not None:
        raise ManifestProblem(f"{at}.selector", "is set by the Job controller: leave it out")
