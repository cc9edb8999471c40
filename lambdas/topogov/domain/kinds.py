"""The workload kinds Topogov governs, as facts about each (pure): its API, where Kueue reads its
suspension, how its pods are labelled, which conditions end it. What a submitted manifest of a kind
may hold, and its pod sets, is ``domain/manifests/kinds.py``'s; reading one from the API server is
``domain/views/batch.JobView``'s; both look the kind up here.

Sources (the versions Kueue v0.17.0 builds against, ``go.mod``):

* ``batch/v1`` Job: Kubernetes v1.35 (``k8s.io/api/batch/v1``); Kueue ``pkg/controller/jobs/job``.
* ``kubeflow.org/v1`` PyTorchJob: Kubeflow training-operator v1.9.3 (``pkg/apis/kubeflow.org/v1``;
  pods labelled ``training.kubeflow.org/job-name``, ``pkg/controller.v1/common/pod.go``; conditions
  ``Created``/``Running``/``Restarting``/``Succeeded``/``Failed``/``Suspended``, ``common_types.go``);
  Kueue ``pkg/controller/jobs/kubeflow`` (suspension ``spec.runPolicy.suspend``).
* ``jobset.x-k8s.io/v1alpha2`` JobSet: sigs.k8s.io/jobset v0.11.1 (``api/jobset/v1alpha2``; pods
  labelled ``jobset.sigs.k8s.io/jobset-uid``; conditions ``Completed``/``Failed``/``Suspended``);
  Kueue ``pkg/controller/jobs/jobset`` (suspension ``spec.suspend``).
* ``sagemaker.amazonaws.com/v1`` HyperPodPyTorchJob: SageMaker HyperPod's training operator, as
  ``hyp create hyp-pytorch-job`` writes it (aws/sagemaker-hyperpod-cli) and ``hyp list`` reads it
  (conditions ``Created``/``Running``/``Completed``/``Failed``; pods labelled ``HPJob``); the operator
  is closed: docs/hyperpod.md lists what is assumed. It has no suspension field: its operator creates
  the Workload and starts the pods once Kueue admits it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from topogov.domain.labels import (
    HPJOB_LABEL,
    JOB_NAME_LABEL,
    JOB_UID_LABEL,
    JOBSET_NAME_LABEL,
    JOBSET_UID_LABEL,
    PYTORCH_JOB_NAME_LABEL,
)


@dataclass(frozen=True, slots=True)
class JobKind:
    """One kind. ``suspend``: the path of the flag Kueue starts it by (None: its operator waits for
    Kueue itself); ``succeeded``/``failed``: the status conditions that end it; ``running``: the one
    that says its pods run (None: counted from its status); ``pod_label`` names the job on its pods,
    by the job's uid or name (``pod_label_value``); ``render_as``: the name a high-level request
    forces it by (``render_as``)."""

    api_version: str
    kind: str
    plural: str
    suspend: tuple[str, ...] | None
    succeeded: str
    failed: str
    running: str | None
    pod_label: str
    pod_label_value: str  # "uid" | "name"
    render_as: str
    hyperpod_only: bool = False

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]

    @property
    def title(self) -> str:
        """``kubeflow.org/v1 PyTorchJob``: how answers name it."""
        return f"{self.api_version} {self.kind}"

    def path(self, namespace: str, name: str | None = None) -> str:
        """The REST path of the kind's objects in ``namespace`` (of one, by ``name``)."""
        root = "/api" if not self.group else "/apis"
        base = f"{root}/{self.api_version}/namespaces/{namespace}/{self.plural}"
        return f"{base}/{name}" if name else base

    def pod_key(self, name: str, uid: str) -> str:
        """The value of :attr:`pod_label` on the job's pods."""
        return uid if self.pod_label_value == "uid" else name


BATCH_JOB = JobKind(
    "batch/v1", "Job", "jobs", ("spec", "suspend"), "Complete", "Failed", None, JOB_UID_LABEL, "uid", "job"
)
PYTORCH_JOB = JobKind(
    "kubeflow.org/v1",
    "PyTorchJob",
    "pytorchjobs",
    ("spec", "runPolicy", "suspend"),
    "Succeeded",
    "Failed",
    "Running",
    PYTORCH_JOB_NAME_LABEL,
    "name",
    "pytorchjob",
)
JOBSET = JobKind(
    "jobset.x-k8s.io/v1alpha2",
    "JobSet",
    "jobsets",
    ("spec", "suspend"),
    "Completed",
    "Failed",
    None,
    JOBSET_UID_LABEL,
    "uid",
    "jobset",
)
HYPERPOD_PYTORCH_JOB = JobKind(
    "sagemaker.amazonaws.com/v1",
    "HyperPodPyTorchJob",
    "hyperpodpytorchjobs",
    None,
    "Completed",
    "Failed",
    "Running",
    HPJOB_LABEL,
    "name",
    "hyperpodpytorchjob",
    hyperpod_only=True,
)
KINDS = (BATCH_JOB, PYTORCH_JOB, JOBSET, HYPERPOD_PYTORCH_JOB)
BY_KIND = {k.kind: k for k in KINDS}
BY_RENDER = {k.render_as: k for k in KINDS}


def kind_named(api_version: object, kind: object) -> JobKind | None:
    """The kind of that apiVersion and kind, None when Topogov governs no such kind."""
    found = BY_KIND.get(kind) if isinstance(kind, str) else None
    return found if found is not None and found.api_version == api_version else None


def pod_owner(labels: Mapping[str, str]) -> str | None:
    """The key (``<Kind>:<uid or name>``) of the job a pod belongs to, from its labels: a JobSet's
    pods carry their Job's uid too, so the JobSet's label is read first."""
    for k in (JOBSET, PYTORCH_JOB, HYPERPOD_PYTORCH_JOB, BATCH_JOB):
        value = labels.get(k.pod_label)
        if value:
            return f"{k.kind}:{value}"
    return None


NAME_LABELS = (
    (JOBSET_NAME_LABEL, "JobSet"),
    (PYTORCH_JOB_NAME_LABEL, "PyTorchJob"),
    (HPJOB_LABEL, "HyperPodPyTorchJob"),
    (JOB_NAME_LABEL, "Job"),
)


def pod_job_name(labels: Mapping[str, str]) -> str:
    """The name of the job a pod belongs to, from its controller's label (a JobSet's before its
    child Job's)."""
    for label, _ in NAME_LABELS:
        value = labels.get(label)
        if value:
            return str(value)
    return ""


def job_key(kind: str, name: str, uid: str) -> str:
    """The key :func:`pod_owner` gives the pods of the job ``kind``/``name``/``uid``."""
    k = BY_KIND.get(kind, BATCH_JOB)
    return f"{k.kind}:{k.pod_key(name, uid)}"
