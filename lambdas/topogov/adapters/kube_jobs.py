"""Jobs and Kueue Workloads in the team namespaces (the API's Kubernetes adapter)."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from typing import Any

from topogov.adapters.kube import KubeHttp
from topogov.adapters.kueue_api import KueueApi
from topogov.adapters.listed_views import ListedViews
from topogov.domain.errors import Conflict, Unavailable, ValidationFailed
from topogov.domain.kinds import BATCH_JOB, BY_KIND, KINDS, kind_named
from topogov.domain.kueue_version import KueueVersion
from topogov.domain.labels import (
    PODSET_LABEL,
    PREFERRED_ANNOTATION,
    REQUIRED_ANNOTATION,
    WORKLOAD_JOB_UID_LABEL,
)
from topogov.domain.quantity import Resources
from topogov.domain.views.batch import JobView, PodView
from topogov.domain.views.objects import ClusterQueueView, cluster_queue
from topogov.domain.views.workload import WorkloadView

SERVED_TTL_S = 300.0  # how long the kinds the cluster serves are kept (a CRD installed meanwhile waits)
JSON_PATCH = "application/json-patch+json"


class KubeJobs:
    """Every object it returns is a view (``domain/views``), made here from the API server's JSON.
    A job is of one of the kinds Topogov governs (``domain/kinds.py``); which of them the cluster
    serves is read by discovery (one GET per API group, kept :data:`SERVED_TTL_S`). Workloads and
    ClusterQueues are read at the Kueue API version :class:`KueueApi` chooses (v1beta2 where served)."""

    def __init__(
        self, http: KubeHttp, clock: Callable[[], float] = time.monotonic, kueue: KueueApi | None = None
    ) -> None:
        self.http = http
        self.clock = clock
        self.kueue = kueue or KueueApi(http, clock=clock)
        # kept while the container is warm: a start estimate lists every Job and Workload of the teams
        self._jobs = ListedViews(JobView.from_api)
        self._workloads = ListedViews(WorkloadView.from_api)
        self._served: tuple[float, frozenset[str]] | None = None

    def kueue_release(self) -> KueueVersion:
        """The Kueue release the cluster runs (its controller Deployment's image tag, else the setting:
        ``KueueApi.kueue_version``), kept like the API version."""
        return self.kueue.kueue_version()

    def served_kinds(self) -> frozenset[str]:
        """The kinds of ``domain/kinds.py`` whose API the cluster serves (a CRD installed, and for a
        training kind its controller's CRD: discovery of each group version)."""
        now = self.clock()
        if self._served is not None and now - self._served[0] < SERVED_TTL_S:
            return self._served[1]
        served = {BATCH_JOB.kind}
        for kind in KINDS:
            if kind is BATCH_JOB:
                continue
            resp = self.http.request("GET", f"/apis/{kind.api_version}")
            if resp.status == 200 and any(
                r.get("name") == kind.plural for r in (resp.body or {}).get("resources") or ()
            ):
                served.add(kind.kind)
            elif resp.status not in (200, 404, 503):
                raise Unavailable(f"discovering {kind.api_version} failed: HTTP {resp.status}")
        self._served = (now, frozenset(served))
        return self._served[1]

    def create(self, namespace: str, manifest: dict[str, Any]) -> JobView:
        kind = kind_named(manifest.get("apiVersion"), manifest.get("kind")) or BATCH_JOB
        resp = self.http.request("POST", kind.path(namespace), body=manifest, retry=False)
        if resp.status in (200, 201):
            return JobView.from_api(resp.body)
        message = (resp.body or {}).get("message", "") if isinstance(resp.body, dict) else str(resp.body)
        if resp.status == 409:
            raise Conflict(f"a {kind.kind} named {manifest['metadata']['name']!r} exists in {namespace!r}")
        if resp.status == 422 or (resp.status == 400 and message):
            raise ValidationFailed("manifest", f"Kubernetes refused the {kind.kind}: {message}")
        if resp.status == 404:
            raise ValidationFailed("manifest.kind", f"the cluster does not serve {kind.title}")
        raise Unavailable(f"creating the {kind.kind} failed: HTTP {resp.status} {message}".strip())

    def create_owned(self, namespace: str, manifest: dict[str, Any], owner: JobView) -> None:
        """Create an object made with a job (a rendered Indexed Job's headless Service), owned by it:
        deleted with it by the garbage collector."""
        kind = BY_KIND.get(owner.kind, BATCH_JOB)
        body = copy.deepcopy(manifest)
        body["metadata"]["ownerReferences"] = [
            {
                "apiVersion": kind.api_version,
                "kind": kind.kind,
                "name": owner.name,
                "uid": owner.uid,
                "controller": True,
            }
        ]
        plural = f"{str(manifest['kind']).lower()}s"
        resp = self.http.request("POST", f"/api/v1/namespaces/{namespace}/{plural}", body=body, retry=False)
        if resp.status in (200, 201):
            return
        message = (resp.body or {}).get("message", "") if isinstance(resp.body, dict) else str(resp.body)
        if resp.status in (409, 422):
            raise Conflict(
                f"the {manifest['kind']} {manifest['metadata']['name']!r} cannot be made: {message}"
            )
        raise Unavailable(f"creating the {manifest['kind']} failed: HTTP {resp.status} {message}".strip())

    def get(self, namespace: str, name: str, kind: str = "Job") -> JobView | None:
        k = BY_KIND.get(kind, BATCH_JOB)
        resp = self.http.request("GET", k.path(namespace, name))
        if resp.status == 404:
            return None
        if resp.status != 200:
            raise Unavailable(f"reading the {k.kind} failed: HTTP {resp.status}")
        return JobView.from_api(resp.body)

    def delete(self, namespace: str, name: str, kind: str = "Job") -> bool:
        """Delete a job and, by their owner references, what it made (pods, child Jobs, Services)."""
        k = BY_KIND.get(kind, BATCH_JOB)
        resp = self.http.request("DELETE", k.path(namespace, name), query={"propagationPolicy": "Background"})
        if resp.status == 404:
            return False
        if resp.status not in (200, 202):
            raise Unavailable(f"deleting the {k.kind} failed: HTTP {resp.status}")
        return True

    def relax_topology(self, namespace: str, name: str, level: str, kind: str = "Job") -> str:
        """Switch a pending job from requiring topology ``level`` to preferring it.

        Kueue schedules the Workload, not the job, and builds the Workload from the job once: it does
        not rebuild it when only the pod templates' annotations change (kueue v0.17
        ``pkg/controller/jobframework/reconciler.go`` ``EquivalentToWorkload`` compares pod counts
        and pod specs, not annotations). So both are switched: first the suspended job's pod-template
        annotations (one JSON patch whose ``test`` operations make it apply only while the job is
        suspended and its templates still require ``level``), then the Workload's
        ``topologyRequest``s (one JSON patch that applies only while its pod sets still require
        ``level``; Kueue's webhook refuses any pod-set change once the Workload holds quota:
        ``pkg/webhooks/workload_webhook.go`` ``ValidateWorkloadUpdate``). In that order a pass that
        stops in between leaves a job that prefers ``level`` and a Workload that requires it, which the
        next pass switches; and a job Kueue admits in between ran as required, which is what it asked
        for. Without a Workload yet, the job alone (Kueue builds the Workload from it). Returns
        ``switched``, ``already`` (both prefer ``level`` already), ``running`` (admitted meanwhile, or
        no longer suspended), ``gone``, or ``changed`` (someone else changed it)."""
        job = self.get(namespace, name, kind)
        if job is None:
            return "gone"
        if not job.suspended:
            return "running"
        annotated = self._relax_job(namespace, job, level)
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
        indexes = [i for i, r in enumerate(requests) if r.required == level]
        if not indexes:
            return "changed"
        patch: list[dict[str, Any]] = [{"op": "test", "path": "/metadata/uid", "value": workload.uid}]
        for index in indexes:
            base = f"/spec/podSets/{index}/topologyRequest"
            patch += [
                {"op": "test", "path": f"{base}/required", "value": level},
                {"op": "remove", "path": f"{base}/required"},
                {"op": "add", "path": f"{base}/preferred", "value": level},
            ]
        path = f"{self.kueue.path()}/namespaces/{namespace}/workloads/{workload.name}"
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

    def _relax_job(self, namespace: str, job: JobView, level: str) -> str:
        kind = BY_KIND.get(job.kind, BATCH_JOB)
        patch: list[dict[str, Any]] = []
        if kind.suspend is not None:
            patch.append({"op": "test", "path": _pointer(kind.suspend), "value": True})
        asked = [path for path, annotations in job.templates if annotations.get(REQUIRED_ANNOTATION) == level]
        if not asked:
            return self._relaxed_already(job, level)
        for path in asked:
            ann = _pointer((*path, "metadata", "annotations"))
            required = f"{ann}/{REQUIRED_ANNOTATION.replace('/', '~1')}"
            preferred = f"{ann}/{PREFERRED_ANNOTATION.replace('/', '~1')}"
            patch += [
                {"op": "test", "path": required, "value": level},
                {"op": "remove", "path": required},
                {"op": "add", "path": preferred, "value": level},
            ]
        resp = self.http.request("PATCH", kind.path(namespace, job.name), body=patch, content_type=JSON_PATCH)
        if 200 <= resp.status < 300:
            return "switched"
        if resp.status == 404:
            return "gone"
        if resp.status != 422:
            raise Unavailable(f"patching the {kind.kind} failed: HTTP {resp.status}")
        fresh = self.get(namespace, job.name, job.kind)
        if fresh is None:
            return "gone"
        return self._relaxed_already(fresh, level)

    @staticmethod
    def _relaxed_already(job: JobView, level: str) -> str:
        if all(
            a.get(PREFERRED_ANNOTATION) == level and REQUIRED_ANNOTATION not in a for _, a in job.templates
        ):
            return "already"
        if not job.suspended:
            return "running"
        return "changed"

    def list_jobs(self, namespace: str) -> list[JobView]:
        """Every job of the kinds the cluster serves in ``namespace``: one list per kind."""
        out: list[JobView] = []
        served = self.served_kinds()
        for kind in KINDS:
            if kind.kind not in served:
                continue
            items, resp = self.http.list_all(kind.path(namespace))
            if resp.status == 404:
                continue
            if resp.status != 200:
                raise Unavailable(f"listing {kind.plural} in {namespace} failed: HTTP {resp.status}")
            out.extend(self._jobs.views(f"{namespace}/{kind.kind}", items))
        return out

    def admitted_usage(self, namespace: str) -> Resources:
        """What Kueue has admitted in ``namespace``: the requests of its admitted Workloads."""
        resp = self.http.request("GET", f"{self.kueue.path()}/namespaces/{namespace}/workloads")
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

    def pods_of(self, namespace: str, job: JobView, limit: int = 1000) -> list[PodView]:
        """The job's Pods, by the label its kind's controller puts on them (a Job's
        ``batch.kubernetes.io/controller-uid``, a JobSet's ``jobset.sigs.k8s.io/jobset-uid``, ...:
        ``domain/kinds.py``), at most ``limit``: one call."""
        kind = BY_KIND.get(job.kind, BATCH_JOB)
        resp = self.http.request(
            "GET",
            f"/api/v1/namespaces/{namespace}/pods",
            query={"labelSelector": f"{kind.pod_label}={kind.pod_key(job.name, job.uid)}", "limit": limit},
        )
        if resp.status != 200:
            raise Unavailable(f"listing the {kind.kind}'s Pods failed: HTTP {resp.status}")
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
        resp = self.http.request("GET", f"{self.kueue.path()}/namespaces/{namespace}/workloads")
        if resp.status == 404:
            return []
        if resp.status != 200:
            raise Unavailable(f"listing Workloads in {namespace} failed: HTTP {resp.status}")
        return self._workloads.views(namespace, (resp.body or {}).get("items") or [])

    def cluster_queue(self, name: str) -> ClusterQueueView | None:
        """A ClusterQueue by name (on HyperPod, the add-on's: the quotas in force), None when there is
        none. One GET: the API may read the teams' queues by name only (deploy/rbac.yaml,
        ``topogov-api-quotas``)."""
        resp = self.http.request("GET", f"{self.kueue.path()}/clusterqueues/{name}")
        if resp.status == 404:
            return None
        if resp.status != 200:
            message = (resp.body or {}).get("message", "") if isinstance(resp.body, dict) else ""
            raise Unavailable(f"reading ClusterQueue {name} failed: HTTP {resp.status} {message}".strip())
        return cluster_queue({"apiVersion": self.kueue.group_version(), "kind": "ClusterQueue", **resp.body})

    def workload_for(self, namespace: str, job_uid: str) -> WorkloadView | None:
        """The job's Workload: by the ``kueue.x-k8s.io/job-uid`` label Kueue's job reconciler puts on
        it; else (an operator that makes its own, as HyperPod's does) the one the job owns."""
        resp = self.http.request(
            "GET",
            f"{self.kueue.path()}/namespaces/{namespace}/workloads",
            query={"labelSelector": f"{WORKLOAD_JOB_UID_LABEL}={job_uid}"},
        )
        if resp.status != 200:
            return None
        items = (resp.body or {}).get("items") or []
        if items:
            return WorkloadView.from_api(items[0])
        return next((w for w in self.workloads(namespace) if w.owner_uid == job_uid), None)


def _pointer(path: tuple[str | int, ...]) -> str:
    return "".join(f"/{str(step).replace('~', '~0').replace('/', '~1')}" for step in path)
