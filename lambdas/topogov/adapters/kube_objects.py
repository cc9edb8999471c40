"""The governor's Kubernetes adapter: the objects it renders (Namespaces and Kueue objects), by kind.

Writes are plain REST: ``POST`` to create, ``PUT`` with the object's ``resourceVersion`` to correct
drift (optimistic concurrency: a 409 means someone wrote in between, and the caller re-reads and
tries again), JSON merge patch for the stop policy of a removed team's ClusterQueue, ``DELETE`` for
what the policy no longer has; server-side apply (``PATCH`` ``application/apply-patch+yaml`` with a
field manager) for the team pods' objects (``logic/governor/team_pods.py``).
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from typing import Any

from topogov.adapters.kube import APPLY_PATCH, MERGE_PATCH, KubeHttp, Response
from topogov.domain.errors import KubernetesError
from topogov.domain.jobs import job_status
from topogov.domain.kinds import KINDS
from topogov.domain.views.batch import JobView
from topogov.domain.views.objects import ObjectView, object_view

KUEUE_GROUP = "kueue.x-k8s.io"
PLURALS = {
    "Namespace": "namespaces",
    "Topology": "topologies",
    "ResourceFlavor": "resourceflavors",
    "Cohort": "cohorts",
    "WorkloadPriorityClass": "workloadpriorityclasses",
    "ClusterQueue": "clusterqueues",
    "LocalQueue": "localqueues",
    "ConfigMap": "configmaps",
}
NAMESPACED = frozenset({"LocalQueue", "ConfigMap"})


def object_path(api_version: str, kind: str, name: str | None = None, namespace: str | None = None) -> str:
    """REST path of a kind's collection (``name`` None) or one object; ``namespace`` None for a
    namespaced kind = the collection across all namespaces."""
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    ns = f"/namespaces/{namespace}" if kind in NAMESPACED and namespace else ""
    path = f"{base}{ns}/{PLURALS[kind]}"
    return f"{path}/{name}" if name else path


def ref(obj: Mapping[str, Any]) -> tuple[str, str, str | None]:
    """(kind, name, namespace) of an object."""
    meta = obj["metadata"]
    return obj["kind"], meta["name"], meta.get("namespace")


def _fail(resp: Response, what: str) -> KubernetesError:
    message = resp.body.get("message", "") if isinstance(resp.body, Mapping) else str(resp.body)
    return KubernetesError(resp.status, what, str(message)[:500])


FIELD_MANAGER = "topogov-governor"


class KubeObjects:
    """get / list / create / replace / patch / delete of the governor's kinds. Reads answer views
    (``domain/views/objects.py``); writes take the body to write."""

    def __init__(self, http: KubeHttp, field_manager: str = FIELD_MANAGER) -> None:
        self.http = http
        # named on every create, replace and merge patch: the object's managedFields say Topogov wrote
        # those fields (not the client library's default manager, its user agent)
        self.field_manager = field_manager

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> ObjectView | None:
        resp = self.http.request("GET", object_path(api_version, kind, name, namespace))
        if resp.status == 404:
            return None
        if resp.status != 200:
            raise _fail(resp, f"get {kind} {name}")
        return object_view(resp.body)

    def list(self, api_version: str, kind: str) -> builtins.list[ObjectView]:
        """Every object of ``kind`` (all namespaces), paginated. The API server leaves ``kind`` and
        ``apiVersion`` out of a list's items (they are the list's); each item gets them back here."""
        items, resp = self.http.list_all(object_path(api_version, kind))
        if resp.status == 404:  # the CRD is not installed (or this version is not served)
            raise _fail(resp, f"list {kind} ({api_version}): is Kueue installed and serving it?")
        if resp.status != 200:
            raise _fail(resp, f"list {kind}")
        return [object_view({"apiVersion": api_version, "kind": kind, **i}) for i in items]

    def list_in(self, api_version: str, kind: str, namespace: str) -> builtins.list[ObjectView]:
        """Every object of a namespaced ``kind`` in ``namespace`` (none when it does not exist)."""
        items, resp = self.http.list_all(object_path(api_version, kind, None, namespace))
        if resp.status == 404:
            return []
        if resp.status != 200:
            raise _fail(resp, f"list {kind} in {namespace}")
        return [object_view({"apiVersion": api_version, "kind": kind, **i}) for i in items]

    def apply(self, obj: Mapping[str, Any], field_manager: str) -> ObjectView:
        """Server-side apply of ``obj`` (created when missing): the fields it names become
        ``field_manager``'s, taken from another manager if need be (``force``: these fields are
        Topogov's by the policy)."""
        kind, name, ns = ref(obj)
        resp = self.http.request(
            "PATCH",
            object_path(obj["apiVersion"], kind, name, ns),
            query={"fieldManager": field_manager, "force": "true"},
            body=dict(obj),
            content_type=APPLY_PATCH,
        )
        if resp.status not in (200, 201):
            raise _fail(resp, f"apply {kind} {name}")
        return object_view(resp.body)

    def create(self, obj: Mapping[str, Any]) -> ObjectView:
        kind, name, ns = ref(obj)
        resp = self.http.request(
            "POST",
            object_path(obj["apiVersion"], kind, None, ns),
            query={"fieldManager": self.field_manager},
            body=obj,
            retry=False,
        )
        if resp.status not in (200, 201):
            raise _fail(resp, f"create {kind} {name}")
        return object_view(resp.body)

    def replace(self, obj: Mapping[str, Any]) -> ObjectView | None:
        """PUT ``obj`` (carrying the resourceVersion it was read at). None on 409: re-read and retry."""
        kind, name, ns = ref(obj)
        resp = self.http.request(
            "PUT",
            object_path(obj["apiVersion"], kind, name, ns),
            query={"fieldManager": self.field_manager},
            body=obj,
            retry=False,
        )
        if resp.status == 409:
            return None
        if resp.status != 200:
            raise _fail(resp, f"update {kind} {name}")
        return object_view(resp.body)

    def merge_patch(
        self, api_version: str, kind: str, name: str, namespace: str | None, patch: Mapping[str, Any]
    ) -> ObjectView:
        resp = self.http.request(
            "PATCH",
            object_path(api_version, kind, name, namespace),
            query={"fieldManager": self.field_manager},
            body=dict(patch),
            content_type=MERGE_PATCH,
        )
        if resp.status != 200:
            raise _fail(resp, f"patch {kind} {name}")
        return object_view(resp.body)

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> bool:
        resp = self.http.request(
            "DELETE",
            object_path(api_version, kind, name, namespace),
            query={"propagationPolicy": "Background"},
        )
        if resp.status == 404:
            return False
        if resp.status not in (200, 202):
            raise _fail(resp, f"delete {kind} {name}")
        return True

    def unfinished_jobs(self, namespace: str) -> builtins.list[str] | None:
        """Names of the jobs (of every kind Topogov governs the cluster serves: ``domain/kinds.py``)
        in ``namespace`` that have not finished; None when they cannot be read (no permission any
        more: the caller must assume there are some)."""
        names = []
        for kind in KINDS:
            resp = self.http.request("GET", kind.path(namespace), query={"limit": 500})
            if resp.status == 404:  # the kind is not served (no CRD), or the namespace is gone
                continue
            if resp.status != 200:
                return None
            jobs = map(JobView.from_api, resp.body.get("items") or [])
            names += [
                j.name if kind.kind == "Job" else f"{kind.kind}/{j.name}"
                for j in jobs
                if job_status(j, None)[0] not in ("Succeeded", "Failed")
            ]
        return sorted(names)
