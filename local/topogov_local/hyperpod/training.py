"""What the stand-in HyperPod training operator writes for a ``HyperPodPyTorchJob``, as pure functions of
what it read: the job's Kueue Workload, its pods, its status conditions (:mod:`.operator` reads and
writes them).

The training operator is the closed EKS add-on ``amazon-sagemaker-hyperpod-training-operator``. AWS's
install guide has Kueue list its kind under ``integrations.externalFrameworks``
(``sagemaker-eks-operator-install``), which makes it a Kueue *external framework*: Kueue v0.17.0 creates
no Workload for such a kind (``pkg/controller/jobframework/setup.go``, ``integrationmanager.go``: the
kind is only a known owner), so the operator does Kueue's job-framework work itself. What follows
does that work as Kueue's own ``jobframework`` does it for a built-in kind, file by file of
kubernetes-sigs/kueue v0.17.0:

* the Workload (``jobframework/interface.go`` ``NewWorkload``, ``reconciler.go`` ``ConstructWorkload``,
  ``workload_names.go``): in the job's namespace, named ``hyperpodpytorchjob-<job>-<5 hex>``, a
  controller owner reference to the job, the finalizer ``kueue.x-k8s.io/resource-in-use``, the label
  ``kueue.x-k8s.io/job-uid``, ``queueName`` from the job's ``kueue.x-k8s.io/queue-name`` label, the
  WorkloadPriorityClass of its ``kueue.x-k8s.io/priority-class`` label, one pod set per replica spec
  with the topology request of its template's annotations (``jobframework/tas.go``);
* the pods once admitted (``reconciler.go`` ``getPodSetsInfoFromStatus``, ``podset/podset.go``
  ``FromAssignment``): the flavor's node labels and tolerations, the label ``kueue.x-k8s.io/podset``,
  the queue labels (``AssignQueueLabelsForPods``, on by default), and with a topology assignment the
  annotation ``kueue.x-k8s.io/workload`` and the scheduling gate ``kueue.x-k8s.io/topology``, which
  Kueue's TAS ungater removes once it has given each pod its domain;
* the end: the Workload's ``Finished`` condition (``workload.go`` ``SetFinishedCondition``).

What is HyperPod's and no public source settles is docs/hyperpod.md's table of assumptions (pod names
``<job>-<replica spec>-<i>``, the ``HPJob`` label, the pod set name, the status conditions).
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from topogov_local.hyperpod.crd import API_VERSION, GROUP, KIND

KUEUE_API = "kueue.x-k8s.io/v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
PODSET_LABEL = "kueue.x-k8s.io/podset"
LOCAL_QUEUE_LABEL = "kueue.x-k8s.io/local-queue-name"
CLUSTER_QUEUE_LABEL = "kueue.x-k8s.io/cluster-queue-name"
WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
TOPOLOGY_GATE = "kueue.x-k8s.io/topology"
FINALIZER = "kueue.x-k8s.io/resource-in-use"
HPJOB_LABEL = "HPJob"  # the pods of a job: `hyp list-pods` selects them by it
MAX_NAME = 63  # a pod set's name is a DNS label
MAX_WORKLOAD_NAME = 253 - 1 - 5  # Kueue v0.17.0 without ShortWorkloadNames (alpha, off)
CREATED_MESSAGE = "Created by HyperPod Training Operator controller"


# --- names ------------------------------------------------------------------------------------------


def workload_name(job_name: str, uid: str) -> str:
    """Kueue's name for the Workload of a job (``GetWorkloadNameForOwnerWithGVK``): the lower-case
    kind and the job's name, then the first 5 hex digits of sha1(kind, group, name, uid)."""
    digest = hashlib.sha1("\n".join((KIND, GROUP, job_name, uid)).encode()).hexdigest()
    return f"{(KIND.lower() + '-' + job_name)[:MAX_WORKLOAD_NAME]}-{digest[:5]}"


def podset_name(job_name: str, replica_spec: str) -> str:
    """``<job>-<replica spec>-podset`` (as a real cluster's Workload events name it), the job's part
    shortened so that the whole stays a DNS label."""
    suffix = f"-{replica_spec}-podset"
    return job_name[: MAX_NAME - len(suffix)].rstrip("-") + suffix


def pod_name(job_name: str, replica_spec: str, index: int) -> str:
    return f"{job_name}-{replica_spec}-{index}"


# --- reading a job ------------------------------------------------------------------------------------


def replica_specs(job: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list((job.get("spec") or {}).get("replicaSpecs") or [])


def pod_count(replica_spec: Mapping[str, Any]) -> int:
    """Pods of a replica spec: ``replicas`` and its ``spares`` ("If a job is configured with 4
    replicas and 2 spares, job requests resources required to run 6 pods", the CLI's model)."""
    return int(replica_spec.get("replicas") or 1) + int(replica_spec.get("spares") or 0)


def owner_reference(job: Mapping[str, Any]) -> dict[str, Any]:
    meta = job["metadata"]
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def topology_request(annotations: Mapping[str, str]) -> dict[str, Any] | None:
    """The pod set's topology request from its template's annotations (``jobframework/tas.go``
    ``Build``: required, else preferred, else unconstrained; none without them)."""
    if REQUIRED in annotations:
        return {"required": annotations[REQUIRED]}
    if PREFERRED in annotations:
        return {"preferred": annotations[PREFERRED]}
    if UNCONSTRAINED in annotations:
        return {"unconstrained": annotations[UNCONSTRAINED].lower() == "true"}
    return None


# --- the Workload ---------------------------------------------------------------------------------------


def workload_for(job: Mapping[str, Any], priority: tuple[str, int] | None) -> dict[str, Any]:
    """The Workload of ``job`` (``priority``: its WorkloadPriorityClass's name and value, if any)."""
    meta = job["metadata"]
    name = meta["name"]
    pod_sets = []
    for rs in replica_specs(job):
        template = rs.get("template") or {}
        tmeta = template.get("metadata") or {}
        annotations = dict(tmeta.get("annotations") or {})
        pod_set: dict[str, Any] = {
            "name": podset_name(name, rs["name"]),
            "count": pod_count(rs),
            "template": {
                "metadata": {"labels": dict(tmeta.get("labels") or {}), "annotations": annotations},
                "spec": copy.deepcopy(template.get("spec") or {}),
            },
        }
        request = topology_request(annotations)
        if request:
            pod_set["topologyRequest"] = request
        pod_sets.append(pod_set)
    spec: dict[str, Any] = {"queueName": (meta.get("labels") or {}).get(QUEUE_LABEL, ""), "podSets": pod_sets}
    if priority is not None:
        spec["priorityClassRef"] = {
            "group": "kueue.x-k8s.io",
            "kind": "WorkloadPriorityClass",
            "name": priority[0],
        }
        spec["priority"] = priority[1]
    return {
        "apiVersion": KUEUE_API,
        "kind": "Workload",
        "metadata": {
            "name": workload_name(name, meta["uid"]),
            "namespace": meta["namespace"],
            "labels": {JOB_UID_LABEL: meta["uid"]},
            "finalizers": [FINALIZER],
            "ownerReferences": [owner_reference(job)],
        },
        "spec": spec,
    }


def condition(obj: Mapping[str, Any], kind: str) -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return None


def is_true(obj: Mapping[str, Any], kind: str) -> bool:
    c = condition(obj, kind)
    return bool(c and c.get("status") == "True")


def admitted(workload: Mapping[str, Any]) -> bool:
    return is_true(workload, "Admitted") and bool((workload.get("status") or {}).get("admission"))


# --- the pods ---------------------------------------------------------------------------------------------


def pods_for(
    job: Mapping[str, Any], workload: Mapping[str, Any], flavors: Mapping[str, Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Every pod of an admitted ``job``: each replica spec's template, named and labelled as HyperPod's
    are, with what Kueue's admission assigned (``flavors``: the ResourceFlavors' specs by name)."""
    admission = workload["status"]["admission"]
    assignments = {a["name"]: a for a in admission.get("podSetAssignments") or []}
    name = job["metadata"]["name"]
    out = []
    for rs in replica_specs(job):
        ps = podset_name(name, rs["name"])
        assignment = assignments.get(ps) or {}
        template = rs.get("template") or {}
        tmeta = template.get("metadata") or {}
        labels = {
            **(tmeta.get("labels") or {}),
            HPJOB_LABEL: name,
            PODSET_LABEL: ps,
            LOCAL_QUEUE_LABEL: workload["spec"].get("queueName", ""),
            CLUSTER_QUEUE_LABEL: admission["clusterQueue"],
        }
        annotations = dict(tmeta.get("annotations") or {})
        spec = copy.deepcopy(template.get("spec") or {})
        spec.setdefault("restartPolicy", "Never")
        node_selector = dict(spec.get("nodeSelector") or {})
        tolerations = list(spec.get("tolerations") or [])
        for flavor in dict.fromkeys((assignment.get("flavors") or {}).values()):
            fspec = flavors.get(flavor) or {}
            node_selector.update(fspec.get("nodeLabels") or {})
            tolerations += [t for t in fspec.get("tolerations") or [] if t not in tolerations]
        if node_selector:
            spec["nodeSelector"] = node_selector
        if tolerations:
            spec["tolerations"] = tolerations
        if assignment.get("topologyAssignment"):
            annotations[WORKLOAD_ANNOTATION] = workload["metadata"]["name"]
            if topology_request(annotations) is None:
                annotations[UNCONSTRAINED] = "true"  # implicit TAS (podset.go)
            gates = list(spec.get("schedulingGates") or [])
            spec["schedulingGates"] = [*gates, {"name": TOPOLOGY_GATE}]
        for i in range(int(assignment.get("count") or pod_count(rs))):
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": pod_name(name, rs["name"], i),
                        "namespace": job["metadata"]["namespace"],
                        "labels": dict(labels),
                        "annotations": dict(annotations),
                        "ownerReferences": [owner_reference(job)],
                    },
                    "spec": copy.deepcopy(spec),
                }
            )
    return out


def phase(pods: Sequence[Mapping[str, Any]], expected: int) -> str:
    """Where the job's pods are: ``Failed`` (one failed), ``Completed`` (all succeeded), ``Running``
    (all running or done), else ``Created``."""
    phases = [(p.get("status") or {}).get("phase") for p in pods]
    if "Failed" in phases:
        return "Failed"
    if len(pods) >= expected and all(ph == "Succeeded" for ph in phases):
        return "Completed"
    if len(pods) >= expected and all(ph in ("Running", "Succeeded") for ph in phases):
        return "Running"
    return "Created"


# --- the job's status ---------------------------------------------------------------------------------------


def set_condition(
    conditions: list[dict[str, Any]], kind: str, status: bool, reason: str, message: str, now: str
) -> bool:
    """Set condition ``kind`` in place (appended when new, its time kept while its status holds);
    whether anything changed. ``hyp list`` shows the *last* True condition of the list."""
    value = "True" if status else "False"
    for c in conditions:
        if c["type"] == kind:
            if (c["status"], c.get("reason"), c.get("message")) == (value, reason, message):
                return False
            if c["status"] != value:
                c["lastTransitionTime"] = now
            c.update(status=value, reason=reason, message=message)
            return True
    if not status:
        return False  # a condition never set is not written as False
    conditions.append(
        {"type": kind, "status": value, "reason": reason, "message": message, "lastTransitionTime": now}
    )
    return True


def status_for(current: Mapping[str, Any], state: str, now: str, why: str = "") -> dict[str, Any]:
    """The job's status for ``state``: ``Suspended`` (queued, ``why`` = ``JobInitiallySuspended``; or
    evicted, ``why`` = the eviction's reason: the conditions start over, as AWS's walkthrough shows a
    preempted job with no age), ``Created``, ``Running``, ``Completed``, ``Failed`` (``why``: which pod)."""
    status = copy.deepcopy(dict(current))
    conditions: list[dict[str, Any]] = status.setdefault("conditions", [])
    if state == "Suspended":
        if not any(c["type"] == "Suspended" and c["status"] == "True" for c in conditions):
            conditions.clear()
        why = why or "JobInitiallySuspended"
        text = (
            "The job is suspended until Kueue admits its Workload"
            if why == "JobInitiallySuspended"
            else f"The job was suspended: its Workload was evicted ({why})"
        )
        set_condition(conditions, "Suspended", True, why, text, now)
        for key in ("startTime", "completionTime"):
            status.pop(key, None)
        return status
    set_condition(conditions, "Suspended", False, "Admitted", "Admitted by Kueue", now)
    set_condition(conditions, "Created", True, "Created", CREATED_MESSAGE, now)
    status.setdefault("startTime", now)
    if state == "Running":
        set_condition(conditions, "Running", True, "Running", "All pods are running", now)
    elif state in ("Completed", "Failed"):
        set_condition(conditions, "Running", False, state, "The job's pods have ended", now)
    if state == "Completed":
        set_condition(conditions, "Completed", True, "Completed", "All pods succeeded", now)
        status.setdefault("completionTime", now)
    if state == "Failed":
        set_condition(conditions, "Failed", True, "Failed", why or "A pod failed", now)
        status.setdefault("completionTime", now)
    return status
