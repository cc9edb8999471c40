"""Jobs and Kueue Workloads in the team namespaces (the API's Kubernetes adapter)."""

from __future__ import annotations

from typing import Any

from topogov.adapters.kube import KubeHttp
from topogov.adapters.listed_views import ListedViews
from topogov.domain.errors import Conflict, Unavailable, ValidationFailed
from topogov.domain.labels import (
    JOB_UID_LABEL,
    PODSET_LABEL,
    PREFERRED_ANNOTATION,
    REQUIRED_ANNOTATION,
    WORKLOAD_JOB_UID_LABEL,
)
from topogov.domain.quantity import Resources
from topogov.domain.views.batch import JobView, PodView
from topogov.domain.views.objects import ClusterQueueView, cluster_queue
from topogov.domain.views.workload import WorkloadView

KUEUE = "/apis/kueue.x-k8s.io/v1beta1"
JSON_PATCH = "application/json-patch+json"


class KubeJobs:
    """Every object it returns is a view (``domain/views``), made here from the API server's JSON."""

    def __init__(self, http: KubeHttp) -> None:
        self.http = http
        # kept while the container is warm: a start estimate lists every Job and Workload of the teams
        self._jobs = ListedViews(JobView.from_api)
        self._workloads = ListedViews(WorkloadView.from_api)

    def create(self, namespace: str, manifest: dict[str, Any]) -> JobView:
        resp = self.http.request(
            "POST", f"/apis/batch/v1/namespaces/{namespace}/jobs", body=manifest, retry=False
        )
        if resp.status in (200, 201):
            return JobView.from_api(resp.body)
        message = (resp.body or {}).get("message", "") if isinstance(resp.body, dict) else str(resp.body)
        if resp.status == 409:
            raise Conflict(f"a job named {manifest['metadata']['name']!r} exists in {namespace!r}")
        if resp.status == 422:
            raise ValidationFailed("manifest", f"Kubernetes refused the Job: {message}")
        raise Unavailable(f"creating the Job failed: HTTP {resp.status} {message}".strip())

    def get(self, namespace: str, name: str) -> JobView | None:
        resp = self.http.request("GET", f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}")
        if resp.status == 404:
            return None
        if resp.status != 200:
            raise Unavailable(f"reading the Job failed: HTTP {resp.status}")
        return JobView.from_api(resp.body)

    def delete(self, namespace: str, name: str) -> bool:
        resp = self.http.request(
            "DELETE",
            f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}",
            query={"propagationPolicy": "Background"},
        )
        if resp.status == 404:
            return False
        if resp.status not in (200, 202):
            raise Unavailable(f"deleting the Job failed: HTTP {resp.status}")
        return True

    def relax_topology(self, namespace: str, name: str, level: str) -> str:
        """Switch a pending job from requiring topology ``level`` to preferring it.

        Kueue schedules the Workload, not the Job, and builds the Workload from the Job once: it does
        not rebuild it when only the pod template's annotations change (kueue v0.17
        ``pkg/controller/jobframework/reconciler.go`` ``EquivalentToWorkload`` compares pod counts
        and pod specs, not annotations). So both are switched: first the suspended Job's pod-template
        annotation (one JSON patch whose ``test`` operations make it apply only while the Job is
        suspended and still requires ``level``), then the Workload's ``topologyRequest`` (one JSON
        patch that applies only while its pod set still requires ``level``; Kueue's webhook refuses
        any pod-set change once the Workload holds quota: ``pkg/webhooks/workload_webhook.go``
        ``ValidateWorkloadUpdate``). In that order a pass that stops in between leaves a Job that
        prefers ``level`` and a Workload that requires it, which the next pass switches; and a job
        Kueue admits in between ran as required, which is what it asked for. Without a Workload yet,
        the Job alone (Kueue builds the Workload from it). Returns ``switched``, ``already`` (both
        prefer ``level`` already), ``running`` (admitted meanwhile, or no longer suspended),
        ``gone``, or ``changed`` (someone else changed it)."""
        job = self.get(namespace, name)
        if job is None:
            return "gone"
        if not job.suspended:
            return "running"
        annotated = self._relax_job(namespace, name, level)
        if annotated not in ("switched", "already"):
            return annotated
        workload = self.workload_for(namespace, job.uid)
        if workload is None:
            return "switched"
        outcome = self._relax_workload(namespace, workload, level)
        return (
            "switched"
            if outcome == "switched" or (outcome, annotated) == ("already", "switched")
            else outcome
        )

    def _relax_workload(self, namespace: str, workload: WorkloadView, level: str) -> str:
        requests = [ps.topology_request for ps in workload.pod_sets]
        if any(r.preferred == level and r.required is None for r in requests) and not any(
            r.required == level for r in requests
        ):
            return "already"
        index = next((i for i, r in enumerate(requests) if r.required == level), None)
        if index is None:
            return "changed"
        base = f"/spec/podSets/{index}/topologyRequest"
        patch = [
            {"op": "test", "path": "/metadata/uid", "value": workload.uid},
            {"op": "test", "path": f"{base}/required", "value": level},
            {"op": "remove", "path": f"{base}/required"},
            {"op": "add", "path": f"{base}/preferred", "value": level},
        ]
        path = f"{KUEUE}/namespaces/{namespace}/workloads/{workload.name}"
        resp = self.http.request("PATCH", path, body=patch, content_type=JSON_PATCH)
        if 200 <= resp.status < 300:
            return "switched"
        if resp.status == 404:
            return "gone"
        if resp.status not in (400, 403, 409, 422):  # a failed test, or Kueue's webhook refusing
            raise Unavailable(f"patching the Workload failed: HTTP {resp.status}")
        fresh = self.http.request("GET", path)
        if fresh.status == 200:
            workload = WorkloadView.from_api(fresh.body)
        conditions = {c.type: c.status for c in workload.conditions}
        return "running" if conditions.get("QuotaReserved") == "True" else "changed"

    def _relax_job(self, namespace: str, name: str, level: str) -> str:
        path = f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}"
        ann = "/spec/template/metadata/annotations/"
        required = ann + REQUIRED_ANNOTATION.replace("/", "~1")
        preferred = ann + PREFERRED_ANNOTATION.replace("/", "~1")
        patch = [
            {"op": "test", "path": "/spec/suspend", "value": True},
            {"op": "test", "path": required, "value": level},
            {"op": "remove", "path": required},
            {"op": "add", "path": preferred, "value": level},
        ]
        resp = self.http.request("PATCH", path, body=patch, content_type=JSON_PATCH)
        if 200 <= resp.status < 300:
            return "switched"
        if resp.status == 404:
            return "gone"
        if resp.status != 422:
            raise Unavailable(f"patching the Job failed: HTTP {resp.status}")
        job = self.get(namespace, name)
        if job is None:
            return "gone"
        annotations = job.template_annotations
        if annotations.get(PREFERRED_ANNOTATION) == level and REQUIRED_ANNOTATION not in annotations:
            return "already"
        if not job.suspended:
            return "running"
        return "changed"

    def list_jobs(self, namespace: str) -> list[JobView]:
        items, resp = self.http.list_all(f"/apis/batch/v1/namespaces/{namespace}/jobs")
        if resp.status == 404:
            return []
        if resp.status != 200:
            raise Unavailable(f"listing Jobs in {namespace} failed: HTTP {resp.status}")
        return self._jobs.views(namespace, items)

    def admitted_usage(self, namespace: str) -> Resources:
        """What Kueue has admitted in ``namespace``: the requests of its admitted Workloads."""
        resp = self.http.request("GET", f"{KUEUE}/namespaces/{namespace}/workloads")
        if resp.status != 200:
            return Resources()
        total = Resources()
        for wl in map(WorkloadView.from_api, (resp.body or {}).get("items") or []):
            conditions = {c.type: c.status for c in wl.conditions}
            # A finished Workload keeps Admitted=True but Kueue has released its quota.
            if conditions.get("Admitted") != "True" or conditions.get("Finished") == "True":
                continue
            for pod_set in wl.pod_sets:
                total = total + pod_set.template.requests.times(pod_set.count)
        return total

    def pods_of(self, namespace: str, job_uid: str, limit: int = 1000) -> list[PodView]:
        """The Job's Pods (by the ``batch.kubernetes.io/controller-uid`` label the Job controller
        sets), at most ``limit``: one call."""
        resp = self.http.request(
            "GET",
            f"/api/v1/namespaces/{namespace}/pods",
            query={"labelSelector": f"{JOB_UID_LABEL}={job_uid}", "limit": limit},
        )
        if resp.status != 200:
            raise Unavailable(f"listing the Job's Pods failed: HTTP {resp.status}")
        return [PodView.from_api(i) for i in (resp.body or {}).get("items") or []]

    def kueue_pods(self, namespace: str) -> list[PodView]:
        """The pods Kueue admitted in ``namespace`` (Kueue labels an admitted pod set's pods
        ``kueue.x-k8s.io/podset``: pkg/controller/jobframework/reconciler.go), page by page."""
        path = f"/api/v1/namespaces/{namespace}/pods"
        items, resp = self.http.list_all(path, {"labelSelector": PODSET_LABEL})
        if resp.status != 200:
            raise Unavailable(f"listing Pods in {namespace} failed: HTTP {resp.status}")
        return [PodView.from_api(i) for i in items]

    def workloads(self, namespace: str) -> list[WorkloadView]:
        """Every Workload in ``namespace`` (one call; a team has few)."""
        resp = self.http.request("GET", f"{KUEUE}/namespaces/{namespace}/workloads")
        if resp.status == 404:
            return []
        if resp.status != 200:
            raise Unavailable(f"listing Workloads in {namespace} failed: HTTP {resp.status}")
        return self._workloads.views(namespace, (resp.body or {}).get("items") or [])

    def cluster_queue(self, name: str) -> ClusterQueueView | None:
        """A ClusterQueue by name (on HyperPod, the add-on's: the quotas in force), None when there is
        none. One GET: the API may read the teams' queues by name only (deploy/rbac-hyperpod.yaml)."""
        resp = self.http.request("GET", f"{KUEUE}/clusterqueues/{name}")
        if resp.status == 404:
            return None
        if resp.status != 200:
            message = (resp.body or {}).get("message", "") if isinstance(resp.body, dict) else ""
            raise Unavailable(f"reading ClusterQueue {name} failed: HTTP {resp.status} {message}".strip())
        return cluster_queue({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", **resp.body})

    def workload_for(self, namespace: str, job_uid: str) -> WorkloadView | None:
        resp = self.http.request(
            "GET",
            f"{KUEUE}/namespaces/{namespace}/workloads",
            query={"labelSelector": f"{WORKLOAD_JOB_UID_LABEL}={job_uid}"},
        )
        if resp.status != 200:
            return None
        items = (resp.body or {}).get("items") or []
        return WorkloadView.from_api(items[0]) if items else None
