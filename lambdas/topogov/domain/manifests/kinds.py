"""The kinds the API accepts: each one's pod sets as Kueue makes them (every pod template, the JSON
path it is found at, its name and how many pods it makes) and the checks of its own spec. Every
check, the charge, the cap, topology feasibility and the estimates read a job through
:func:`rules_for`, so a kind is known in one place (its API facts in ``domain/kinds.py``).

Pod sets, as Kueue v0.17.0 makes them (``pkg/controller/jobs/...``, ``PodSets``):

* ``batch/v1`` Job: one, ``main``, of min(parallelism, completions) pods (``job/job_controller.go``);
* ``kubeflow.org/v1`` PyTorchJob: ``master`` then ``worker`` (the replica types lower-cased, in
  ``OrderedReplicaTypes`` order; ``kubeflow/kubeflowjob/kubeflowjob_controller.go``), each of its
  ``replicas`` (default 1) pods, from ``spec.pytorchReplicaSpecs.<Type>.template``;
* ``jobset.x-k8s.io/v1alpha2`` JobSet: one per replicated job, in order, named by it, of replicas ×
  min(parallelism, completions) pods (``jobset/jobset_controller.go``, ``podsCount``);
* ``sagemaker.amazonaws.com/v1`` HyperPodPyTorchJob (on HyperPod): one per ``spec.replicaSpecs``
  entry, of its ``replicas`` pods (the operator is closed: docs/hyperpod.md's assumptions).

A Workload holds at most 8 pod sets (``apis/kueue/v1beta2/workload_types.go``, ``MaxItems=8``): a
job of more could never be admitted, so it is refused here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from topogov.domain.kinds import BATCH_JOB, HYPERPOD_PYTORCH_JOB, JOBSET, KINDS, PYTORCH_JOB, JobKind
from topogov.domain.labels import (
    EXCLUSIVE_PLACEMENT_ANNOTATION,
    JOB_CONTROLLER,
    PREFERRED_ANNOTATION,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    REQUIRED_ANNOTATION,
)
from topogov.domain.manifests.metadata import (
    DNS1123_LABEL,
    OBJECT_KUEUE_KEYS,
    TEMPLATE_KUEUE_KEYS,
    checked_template_metadata,
)
from topogov.domain.manifests.shape import ManifestProblem, TemplateRef

MAX_PODS = 10_000
MAX_POD_SETS = 8
PYTORCH_CONTAINER = "pytorch"
PYTORCH_OPERATOR = "kubeflow.org/training-operator"  # runPolicy.managedBy that the operator runs
JOBSET_CONTROLLER = "jobset.sigs.k8s.io/jobset-controller"  # spec.managedBy that the JobSet controller runs
TOPOLOGY_KEYS = frozenset({REQUIRED_ANNOTATION, PREFERRED_ANNOTATION})


@dataclass(frozen=True, slots=True)
class KindRules:
    """An accepted kind: its facts, its pod templates, and the keys of Kueue's a submission of it may
    carry on the object and on its templates (``hyp`` writes the queue and priority labels on a
    HyperPodPyTorchJob's templates and the topology annotation on the object too, and names its
    templates)."""

    kind: JobKind
    templates: Callable[[Mapping[str, Any], str], list[TemplateRef]]
    object_keys: frozenset[str] = OBJECT_KUEUE_KEYS
    template_keys: frozenset[str] = TEMPLATE_KUEUE_KEYS
    named_templates: bool = False
    groups: bool = True  # Kueue places a leader and its workers as one (a pod-set group)


def accepted(hyperpod: bool) -> list[JobKind]:
    """The kinds a submission may be, in the cluster's mode."""
    return [k for k in KINDS if hyperpod or not k.hyperpod_only]


def rules_for(manifest: Mapping[str, Any], base: str, *, hyperpod: bool = False) -> KindRules:
    """The rules of the manifest's kind; a kind not accepted is refused, listing those that are."""
    api_version, kind = manifest.get("apiVersion"), manifest.get("kind")
    for rules in RULES:
        if (rules.kind.api_version, rules.kind.kind) == (api_version, kind) and (
            hyperpod or not rules.kind.hyperpod_only
        ):
            return rules
    names = ", ".join(k.title for k in accepted(hyperpod))
    also = "" if hyperpod else f" ({HYPERPOD_PYTORCH_JOB.title} on SageMaker HyperPod)"
    raise ManifestProblem(f"{base}.kind", f"must be one of the accepted kinds: {names}{also}")


def pod_templates(manifest: Mapping[str, Any], base: str, *, hyperpod: bool = False) -> list[TemplateRef]:
    """The pod templates of an accepted kind, in Kueue's pod set order; ``base`` is the manifest's
    JSON path in the request (``manifest``)."""
    rules = rules_for(manifest, base, hyperpod=hyperpod)
    refs = rules.templates(manifest, base)
    names = [r.name for r in refs]
    if len(refs) > MAX_POD_SETS:
        raise ManifestProblem(
            refs[MAX_POD_SETS].field.split("[")[0],
            f"has {len(refs)} pod sets: Kueue v0.17.0 admits a Workload of at most {MAX_POD_SETS} "
            "(apis/kueue/v1beta2/workload_types.go), so this job could never start",
        )
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise ManifestProblem(
            refs[names.index(dup, names.index(dup) + 1)].field, f"repeats the pod set {dup!r}"
        )
    if sum(r.count for r in refs) > MAX_PODS:
        raise ManifestProblem(f"{base}.spec", f"makes {sum(r.count for r in refs)} pods: at most {MAX_PODS}")
    return refs


# --- batch/v1 Job -------------------------------------------------------------------------------


def _spec(manifest: Mapping[str, Any], base: str) -> Mapping[str, Any]:
    spec = manifest.get("spec")
    if not isinstance(spec, Mapping):
        raise ManifestProblem(f"{base}.spec", "is required")
    return spec


def _suspend(holder: Mapping[str, Any], field: str) -> None:
    if holder.get("suspend") not in (None, True):
        raise ManifestProblem(field, "must be true or absent: Kueue starts the job on admission")


def _count(value: Any, field: str, default: int = 1) -> int:
    value = default if value is None else value
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_PODS:
        raise ManifestProblem(field, f"must be an integer from 1 to {MAX_PODS}")
    return value


def _pod_template(holder: Mapping[str, Any], field: str) -> Mapping[str, Any]:
    template = holder.get("template")
    if not isinstance(template, Mapping) or not isinstance(template.get("spec"), Mapping):
        raise ManifestProblem(f"{field}.spec", "is required")
    return template


def _job_pods(spec: Mapping[str, Any], at: str) -> int:
    """A Job spec's pods at once (min(parallelism, completions)), once its spec is one Kueue runs."""
    parallelism = _count(spec.get("parallelism"), f"{at}.parallelism")
    completions = _count(spec.get("completions", parallelism), f"{at}.completions")
    _check_job_spec(spec, at)
    return min(parallelism, completions)


def _job_templates(manifest: Mapping[str, Any], base: str) -> list[TemplateRef]:
    """A batch/v1 Job: one pod set, ``main``, of min(parallelism, completions) pods (kueue v0.17.0
    ``pkg/controller/jobs/job/job_controller.go``, ``PodSets`` and ``podsCount``); it must start
    suspended, for Kueue to start it."""
    spec = _spec(manifest, base)
    _suspend(spec, f"{base}.spec.suspend")
    pods = _job_pods(spec, f"{base}.spec")
    template = _pod_template(spec, f"{base}.spec.template")
    return [TemplateRef("main", f"{base}.spec.template", template, pods, ("spec", "template"))]


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


# --- kubeflow.org/v1 PyTorchJob ------------------------------------------------------------------

REPLICA_TYPES = ("Master", "Worker")  # Kueue's OrderedReplicaTypes (pytorchjob_controller.go)


def _pytorchjob_templates(manifest: Mapping[str, Any], base: str) -> list[TemplateRef]:
    """A PyTorchJob (training-operator v1.9.3): ``Master`` (exactly one pod, the operator's webhook
    ``pkg/webhooks/pytorch``) and/or ``Worker``, each with a container named ``pytorch`` (the
    operator sets the rendezvous environment on it and reads its ``pytorchjob-port``), suspended by
    ``runPolicy.suspend``, run by the training operator."""
    spec = _spec(manifest, base)
    _pytorch_run_policy(spec, f"{base}.spec")
    if spec.get("elasticPolicy") is not None:
        raise ManifestProblem(
            f"{base}.spec.elasticPolicy",
            "is not accepted: an elastic PyTorchJob changes its number of workers after Kueue admitted "
            "it, uncharged (Kueue v0.17.0 admits a PyTorchJob's pods as counted at submission)",
        )
    at = f"{base}.spec.pytorchReplicaSpecs"
    replicas = spec.get("pytorchReplicaSpecs")
    if not isinstance(replicas, Mapping) or not replicas:
        raise ManifestProblem(at, "is required: Master and/or Worker")
    for key in replicas:
        if key not in REPLICA_TYPES:
            raise ManifestProblem(
                f"{at}.{key}",
                "is not a replica type Kueue reads: Master or Worker (as written, capitalised)",
            )
    refs = []
    for rtype in REPLICA_TYPES:
        if rtype not in replicas:
            continue
        rs, field = replicas[rtype], f"{at}.{rtype}"
        if not isinstance(rs, Mapping):
            raise ManifestProblem(field, "must be an object")
        count = _count(rs.get("replicas"), f"{field}.replicas")
        if rtype == "Master" and count != 1:
            raise ManifestProblem(f"{field}.replicas", "must be 1: a PyTorchJob has one master")
        template = _pod_template(rs, f"{field}.template")
        containers = template["spec"].get("containers")
        if not isinstance(containers, list) or not any(
            isinstance(c, Mapping) and c.get("name") == PYTORCH_CONTAINER for c in containers
        ):
            raise ManifestProblem(
                f"{field}.template.spec.containers",
                f"needs a container named {PYTORCH_CONTAINER!r}: the training operator sets the "
                "rendezvous environment (MASTER_ADDR, RANK, ...) on it",
            )
        refs.append(
            TemplateRef(
                rtype.lower(),
                f"{field}.template",
                template,
                count,
                ("spec", "pytorchReplicaSpecs", rtype, "template"),
            )
        )
    return refs


def _pytorch_run_policy(spec: Mapping[str, Any], at: str) -> None:
    policy = spec.get("runPolicy")
    if policy is None:
        return
    if not isinstance(policy, Mapping):
        raise ManifestProblem(f"{at}.runPolicy", "must be an object")
    _suspend(policy, f"{at}.runPolicy.suspend")
    managed_by = policy.get("managedBy")
    if managed_by is not None and managed_by != PYTORCH_OPERATOR:
        raise ManifestProblem(
            f"{at}.runPolicy.managedBy",
            f"must be absent or {PYTORCH_OPERATOR!r}: another controller would run the job outside Kueue",
        )
    if policy.get("schedulingPolicy") is not None:
        raise ManifestProblem(
            f"{at}.runPolicy.schedulingPolicy",
            "is not accepted: gang scheduling and priority are Kueue's here (its queue and the team's "
            "priority class)",
        )


# --- jobset.x-k8s.io/v1alpha2 JobSet --------------------------------------------------------------


def _jobset_templates(manifest: Mapping[str, Any], base: str) -> list[TemplateRef]:
    """A JobSet (v0.11.1): a pod set per replicated job, of replicas × min(parallelism, completions)
    pods, each replicated job's Job spec held to a Job's rules; suspended by ``spec.suspend``."""
    spec = _spec(manifest, base)
    _suspend(spec, f"{base}.spec.suspend")
    managed_by = spec.get("managedBy")
    if managed_by is not None and managed_by != JOBSET_CONTROLLER:
        raise ManifestProblem(
            f"{base}.spec.managedBy",
            f"must be absent or {JOBSET_CONTROLLER!r}: another controller would run the job outside Kueue",
        )
    _no_exclusive_placement(manifest.get("metadata"), f"{base}.metadata")
    jobs = spec.get("replicatedJobs")
    if not isinstance(jobs, list) or not jobs:
        raise ManifestProblem(f"{base}.spec.replicatedJobs", "needs at least one replicated job")
    refs = []
    for i, rj in enumerate(jobs):
        at = f"{base}.spec.replicatedJobs[{i}]"
        if not isinstance(rj, Mapping):
            raise ManifestProblem(at, "must be an object")
        name = rj.get("name")
        if not isinstance(name, str) or not DNS1123_LABEL.match(name) or len(name) > 63:
            raise ManifestProblem(f"{at}.name", "must be a DNS-1123 label (a-z, 0-9, '-', at most 63)")
        replicas = _count(rj.get("replicas"), f"{at}.replicas")
        job_template = rj.get("template")
        if not isinstance(job_template, Mapping) or not isinstance(job_template.get("spec"), Mapping):
            raise ManifestProblem(f"{at}.template.spec", "is required")
        checked_template_metadata(job_template.get("metadata"), f"{at}.template.metadata", ())
        _no_exclusive_placement(job_template.get("metadata"), f"{at}.template.metadata")
        job_spec = job_template["spec"]
        pods = _job_pods(job_spec, f"{at}.template.spec")
        template = _pod_template(job_spec, f"{at}.template.spec.template")
        refs.append(
            TemplateRef(
                name,
                f"{at}.template.spec.template",
                template,
                replicas * pods,
                ("spec", "replicatedJobs", i, "template", "spec", "template"),
            )
        )
    return refs


def _no_exclusive_placement(meta: Any, field: str) -> None:
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    if isinstance(annotations, Mapping) and EXCLUSIVE_PLACEMENT_ANNOTATION in annotations:
        raise ManifestProblem(
            f"{field}.annotations.{EXCLUSIVE_PLACEMENT_ANNOTATION}",
            "is not accepted: Kueue places the job's pods by its topology request; JobSet's exclusive "
            "placement would pin them by pod affinity instead",
        )


# --- sagemaker.amazonaws.com/v1 HyperPodPyTorchJob -------------------------------------------------


def _hyperpod_templates(manifest: Mapping[str, Any], base: str) -> list[TemplateRef]:
    """A HyperPodPyTorchJob as ``hyp create hyp-pytorch-job`` writes it (aws/sagemaker-hyperpod-cli,
    ``hyperpod-pytorch-job-template`` v1.x): ``spec.replicaSpecs`` of named templates with
    ``replicas``; ``spares`` are not accepted (how the operator admits spare pods is not public,
    so Topogov could not charge them)."""
    spec = _spec(manifest, base)
    at = f"{base}.spec.replicaSpecs"
    specs = spec.get("replicaSpecs")
    if not isinstance(specs, list) or not specs:
        raise ManifestProblem(at, "needs at least one replica spec")
    nproc = spec.get("nprocPerNode")
    if nproc is not None and not isinstance(nproc, (str, int)):
        raise ManifestProblem(f"{base}.spec.nprocPerNode", "must be a string or an integer")
    refs = []
    for i, rs in enumerate(specs):
        field = f"{at}[{i}]"
        if not isinstance(rs, Mapping):
            raise ManifestProblem(field, "must be an object")
        name = rs.get("name")
        if not isinstance(name, str) or not DNS1123_LABEL.match(name) or len(name) > 63:
            raise ManifestProblem(f"{field}.name", "must be a DNS-1123 label (a-z, 0-9, '-', at most 63)")
        if rs.get("spares") not in (None, 0):
            raise ManifestProblem(
                f"{field}.spares",
                "must be 0 or absent: how HyperPod's operator admits spare pods is not public, so "
                "Topogov could not charge them",
            )
        count = _count(rs.get("replicas"), f"{field}.replicas")
        template = _pod_template(rs, f"{field}.template")
        refs.append(
            TemplateRef(name, f"{field}.template", template, count, ("spec", "replicaSpecs", i, "template"))
        )
    return refs


HYPERPOD_KEYS = TEMPLATE_KUEUE_KEYS | {QUEUE_LABEL, PRIORITY_LABEL}
RULES = (
    KindRules(BATCH_JOB, _job_templates),
    KindRules(PYTORCH_JOB, _pytorchjob_templates),
    KindRules(JOBSET, _jobset_templates),
    KindRules(
        HYPERPOD_PYTORCH_JOB,
        _hyperpod_templates,
        object_keys=OBJECT_KUEUE_KEYS | TOPOLOGY_KEYS,
        template_keys=HYPERPOD_KEYS,
        named_templates=True,
        groups=False,
    ),
)
