"""A high-level request rendered as a job whose pods can find each other (pure): the kind the cluster
runs, chosen by discovery or forced by ``render_as``, and its objects. The rendered job is then
checked and measured like any submitted manifest (``domain/manifests``).

* **HyperPodPyTorchJob** (on SageMaker HyperPod, where its CRD is served): the fields
  ``hyp create hyp-pytorch-job`` sets from the same flags (aws/sagemaker-hyperpod-cli,
  ``hyperpod-pytorch-job-template`` ``v1_1/model.py`` ``to_domain``): one replica spec ``pod`` of
  ``node_count`` pods, container ``pytorch-job-container``, ``nprocPerNode`` from ``tasks_per_node``,
  ``runPolicy.jobMaxRetryCount`` from ``max_retry``, the instance-type and deep-health-check node
  selectors; HyperPod's training operator sets the rendezvous.
* **PyTorchJob** (where Kubeflow's training operator is installed): a ``Master`` and ``node_count - 1``
  ``Worker``s, container ``pytorch`` with the operator's port ``pytorchjob-port`` 23456; the operator
  sets ``MASTER_ADDR``, ``RANK``, ``PET_*`` (training-operator v1.9.3
  ``pkg/controller.v1/pytorch/envvar.go``).
* **Indexed Job** (anywhere): ``parallelism = completions = node_count``, a headless Service of the
  job's name (``publishNotReadyAddresses``, so a pod's name resolves before it is Ready) and
  ``subdomain`` on its pods, so pod *i* is ``<job>-<i>.<job>`` (Kubernetes "Job with Pod-to-Pod
  Communication"; the Job controller sets each pod's hostname ``<job>-<index>``); and the
  environment ``torchrun`` reads (PyTorch's ``torch.distributed.run``: ``PET_`` + its flag) set as the
  Kubeflow operator sets it for a PyTorchJob: ``PET_MASTER_ADDR`` (pod 0's name), ``PET_MASTER_PORT``,
  ``PET_NNODES``, ``PET_NODE_RANK`` (the completion index), ``PET_NPROC_PER_NODE``, and the plain
  ``MASTER_ADDR``, ``MASTER_PORT``, ``WORLD_SIZE`` (nodes × processes per node, or nodes when that is
  not a number), ``RANK`` (the node's rank), ``PYTHONUNBUFFERED``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from topogov.domain.kinds import BATCH_JOB, BY_RENDER, HYPERPOD_PYTORCH_JOB, PYTORCH_JOB, JobKind
from topogov.domain.labels import DEEP_HEALTH_LABEL, INDEX_LABEL, INSTANCE_TYPE_LABEL, JOB_NAME_LABEL
from topogov.domain.quantity import CPU, EFA, GPU, MEMORY

RESTRICTED_CONTEXT = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}
RENDEZVOUS_PORT = 23456  # the Kubeflow training operator's default pytorchjob-port (pytorch_defaults.go)
PYTORCH_PORT_NAME = "pytorchjob-port"
RENDER_CHOICES = ("auto", "job", "pytorchjob", "hyperpodpytorchjob")


@dataclass(frozen=True, slots=True)
class HighLevel:
    """What a high-level request asks, ready to render: every field in the shape the objects take."""

    name: str
    namespace: str
    image: str
    pods: int
    per_pod_requests: Mapping[str, str]
    command: list[str] | None = None
    args: list[str] | None = None
    environment: Mapping[str, str] | None = None
    instance_type: str | None = None
    max_retry: int | None = None
    tasks_per_node: str | int | None = None
    restricted: bool = False
    pull_policy: str | None = None
    deep_health_check: bool = False


@dataclass(frozen=True, slots=True)
class Rendered:
    """The job, the objects made with it (created after it, owned by it), and what the answer says."""

    kind: JobKind
    manifest: dict[str, Any]
    companions: tuple[dict[str, Any], ...]
    why: str


class NotServed(ValueError):
    """``render_as`` names a kind the cluster does not serve."""


def choose_kind(render_as: str, served: frozenset[str], hyperpod: bool) -> tuple[JobKind, str]:
    """The kind to render and why: the one forced, or the first the cluster serves of
    HyperPodPyTorchJob (on HyperPod), PyTorchJob, Job."""
    if render_as != "auto":
        kind = BY_RENDER[render_as]
        if kind.kind not in served or (kind.hyperpod_only and not hyperpod):
            raise NotServed(
                f"the cluster does not serve {kind.title}"
                + (" (SageMaker HyperPod only)" if kind.hyperpod_only else " (its CRD is not installed)")
            )
        return kind, f"{kind.title}, as asked (render_as: {render_as})"
    if hyperpod and HYPERPOD_PYTORCH_JOB.kind in served:
        return HYPERPOD_PYTORCH_JOB, (
            f"{HYPERPOD_PYTORCH_JOB.title}: the cluster serves it (HyperPod's training operator sets the "
            "rendezvous)"
        )
    if PYTORCH_JOB.kind in served:
        return PYTORCH_JOB, (
            f"{PYTORCH_JOB.title}: the cluster serves it (Kubeflow's training operator sets the rendezvous)"
        )
    return BATCH_JOB, (
        f"{BATCH_JOB.title} (Indexed) with a headless Service: no training operator is installed, so the "
        "pods get the rendezvous environment torchrun reads"
    )


def render(hl: HighLevel, kind: JobKind, why: str) -> Rendered:
    if kind is HYPERPOD_PYTORCH_JOB:
        return Rendered(kind, render_hyperpod_job(hl), (), why)
    if kind is PYTORCH_JOB:
        return Rendered(kind, render_pytorchjob(hl), (), why)
    return Rendered(kind, render_job(hl), (headless_service(hl.name, hl.namespace),), why)


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


def _container(hl: HighLevel, name: str, env: list[dict[str, Any]]) -> dict[str, Any]:
    resources = {"requests": dict(hl.per_pod_requests), "limits": dict(hl.per_pod_requests)}
    container: dict[str, Any] = {"name": name, "image": hl.image, "resources": resources}
    if hl.pull_policy:
        container["imagePullPolicy"] = hl.pull_policy
    if hl.command:
        container["command"] = list(hl.command)
    if hl.args:
        container["args"] = list(hl.args)
    env = [*({"name": k, "value": v} for k, v in sorted((hl.environment or {}).items())), *env]
    if env:
        container["env"] = env
    if hl.restricted:
        container["securityContext"] = copy.deepcopy(RESTRICTED_CONTEXT)
    return container


def _node_selector(hl: HighLevel) -> dict[str, str]:
    selector = {}
    if hl.instance_type:
        selector[INSTANCE_TYPE_LABEL] = hl.instance_type
    if hl.deep_health_check:
        selector[DEEP_HEALTH_LABEL] = "Passed"
    return selector


def _nproc(hl: HighLevel) -> str:
    return str(hl.tasks_per_node) if hl.tasks_per_node is not None else "auto"


def rendezvous_env(name: str, namespace: str, pods: int, nproc: str) -> list[dict[str, Any]]:
    """The environment of an Indexed Job's pods for ``torchrun``, as the Kubeflow training operator
    sets it on a PyTorchJob's (training-operator v1.9.3 ``pkg/controller.v1/pytorch/envvar.go``,
    ``setPodEnv``): the master is pod 0 (``<job>-0.<job>``, its hostname and the headless Service's
    name); a pod's rank is its completion index (the Job controller's annotation on each pod)."""
    rank = {"fieldRef": {"fieldPath": f"metadata.annotations['{INDEX_LABEL}']"}}
    master = f"{name}-0.{name}"
    world = str(pods * int(nproc)) if nproc.isdigit() else str(pods)
    return [
        {"name": "PYTHONUNBUFFERED", "value": "1"},
        {"name": "MASTER_ADDR", "value": master},
        {"name": "MASTER_PORT", "value": str(RENDEZVOUS_PORT)},
        {"name": "WORLD_SIZE", "value": world},
        {"name": "RANK", "valueFrom": rank},
        {"name": "PET_MASTER_ADDR", "value": master},
        {"name": "PET_MASTER_PORT", "value": str(RENDEZVOUS_PORT)},
        {"name": "PET_NNODES", "value": str(pods)},
        {"name": "PET_NODE_RANK", "valueFrom": rank},
        {"name": "PET_NPROC_PER_NODE", "value": nproc},
    ]


def render_job(hl: HighLevel) -> dict[str, Any]:
    """An Indexed batch/v1 Job: parallelism = completions = pods; requests = limits for devices; its
    pods in the headless Service ``hl.name`` (``subdomain``) with the rendezvous environment.
    ``restricted``: the container's security context is what Pod Security's ``restricted`` level asks
    (https://kubernetes.io/docs/concepts/security/pod-security-standards/#restricted): no privilege
    escalation, every capability dropped, the runtime's default seccomp profile, not as root (the
    image must then name a non-root user, or its container fails to start)."""
    env = rendezvous_env(hl.name, hl.namespace, hl.pods, _nproc(hl))
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "subdomain": hl.name,
        "containers": [_container(hl, "main", env)],
    }
    selector = _node_selector(hl)
    if selector:
        pod_spec["nodeSelector"] = selector
    spec: dict[str, Any] = {
        "parallelism": hl.pods,
        "completions": hl.pods,
        "completionMode": "Indexed",
        "suspend": True,
        "template": {"metadata": {"labels": {"job-name": hl.name}}, "spec": pod_spec},
    }
    if hl.max_retry is not None:
        spec["backoffLimit"] = hl.max_retry
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": hl.name, "namespace": hl.namespace, "labels": {}, "annotations": {}},
        "spec": spec,
    }


def headless_service(name: str, namespace: str) -> dict[str, Any]:
    """The Service that names an Indexed Job's pods (``<job>-<i>.<job>``): headless, its pods'
    addresses published before they are Ready (torchrun's workers look the master up while it
    starts). Created after the Job, owned by it (deleted with it)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "labels": {}},
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {JOB_NAME_LABEL: name},
            "ports": [{"name": "rendezvous", "port": RENDEZVOUS_PORT, "protocol": "TCP"}],
        },
    }


def render_pytorchjob(hl: HighLevel) -> dict[str, Any]:
    """A PyTorchJob: one ``Master`` and ``pods - 1`` ``Worker``s (a Master alone for one pod), each a
    container ``pytorch`` exposing ``pytorchjob-port``; the operator sets the rendezvous."""
    port = {"name": PYTORCH_PORT_NAME, "containerPort": RENDEZVOUS_PORT, "protocol": "TCP"}

    def replica(count: int) -> dict[str, Any]:
        container = _container(hl, "pytorch", [])
        container["ports"] = [dict(port)]
        pod_spec: dict[str, Any] = {"containers": [container]}
        selector = _node_selector(hl)
        if selector:
            pod_spec["nodeSelector"] = selector
        return {"replicas": count, "restartPolicy": "OnFailure", "template": {"spec": pod_spec}}

    replicas = {"Master": replica(1)}
    if hl.pods > 1:
        replicas["Worker"] = replica(hl.pods - 1)
    run_policy: dict[str, Any] = {"suspend": True}
    if hl.max_retry is not None:
        run_policy["backoffLimit"] = hl.max_retry
    spec: dict[str, Any] = {"pytorchReplicaSpecs": replicas, "runPolicy": run_policy}
    if hl.tasks_per_node is not None:
        spec["nprocPerNode"] = str(hl.tasks_per_node)
    return {
        "apiVersion": PYTORCH_JOB.api_version,
        "kind": PYTORCH_JOB.kind,
        "metadata": {"name": hl.name, "namespace": hl.namespace, "labels": {}, "annotations": {}},
        "spec": spec,
    }


def render_hyperpod_job(hl: HighLevel) -> dict[str, Any]:
    """A HyperPodPyTorchJob as ``hyp create hyp-pytorch-job`` writes it from the same flags (the
    module docstring)."""
    pod_spec: dict[str, Any] = {"containers": [_container(hl, "pytorch-job-container", [])]}
    selector = _node_selector(hl)
    if selector:
        pod_spec["nodeSelector"] = selector
    spec: dict[str, Any] = {
        "replicaSpecs": [
            {
                "name": "pod",
                "replicas": hl.pods,
                "spares": 0,
                "template": {"metadata": {"name": hl.name}, "spec": pod_spec},
            }
        ],
    }
    if hl.tasks_per_node is not None:
        spec["nprocPerNode"] = str(hl.tasks_per_node)
    if hl.max_retry is not None:
        spec["runPolicy"] = {"cleanPodPolicy": "None", "jobMaxRetryCount": hl.max_retry}
    return {
        "apiVersion": HYPERPOD_PYTORCH_JOB.api_version,
        "kind": HYPERPOD_PYTORCH_JOB.kind,
        "metadata": {"name": hl.name, "namespace": hl.namespace, "labels": {}, "annotations": {}},
        "spec": spec,
    }
