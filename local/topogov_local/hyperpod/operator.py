"""A stand-in for the HyperPod training operator, the controller of ``HyperPodPyTorchJob``s (the closed EKS
add-on ``amazon-sagemaker-hyperpod-training-operator``): enough of it that ``hyp create hyp-pytorch-job``
runs on the local stack as on a HyperPod cluster with task governance, Kueue admitting and placing it.

A process of its own (``python -m topogov_local.hyperpod.operator``), started by ``topogov local
--hyperpod`` (:mod:`topogov_local.stack`) like the cluster's other components: its own identity, the
client certificate of ``hyperpod-training-operator`` (:mod:`topogov_local.cluster.pki`), allowed what
:func:`rbac` grants and no more. For each job, every ``interval`` seconds (a level-triggered loop:
each pass reads the jobs, their Workloads and their pods, three lists, and writes what differs):

1. no Workload yet: create it (:func:`.training.workload_for`, the job's priority class resolved) and
   mark the job ``Suspended``;
2. Kueue admitted it: create its pods (:func:`.training.pods_for`; Kueue's TAS ungater then gives each
   its domain and lifts its gate), and follow them: ``Created``, ``Running``, ``Completed`` or
   ``Failed``; at the end the Workload is marked ``Finished``;
3. Kueue evicted it (preempted, deactivated): delete its pods, then give the quota back (the Workload's
   admission cleared, ``QuotaReserved`` False, ``Requeued``), as Kueue's job framework does
   (``jobframework/reconciler.go`` step 6); the job is ``Suspended`` again;
4. a Workload being deleted (its job was: ``hyp delete`` deletes the job, the garbage collector its
   Workload and pods through their owner references) loses its finalizer, so it goes.

It serves ``/healthz`` on 127.0.0.1 and prints its URL once its first pass is done (ready).
"""

from __future__ import annotations

import argparse
import datetime as dt
import http.server
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from topogov_local.hyperpod import training
from topogov_local.hyperpod.crd import API_VERSION, KIND, PLURAL

USER = "hyperpod-training-operator"  # the client certificate's common name (cluster/pki.py)
JOBS = f"/apis/{API_VERSION}"
KUEUE = f"/apis/{training.KUEUE_API}"
MERGE = "application/merge-patch+json"


def rbac() -> list[dict[str, Any]]:
    """What the operator may do, cluster-wide (it follows every namespace's jobs, as the add-on's
    operator does): its jobs and their status; Workloads, their status and finalizers; read the
    ResourceFlavors and WorkloadPriorityClasses (``jobframework``'s RBAC, minus the webhooks' needs);
    pods, created and deleted. And Kueue's manager may read the jobs (below)."""
    rules = [
        {"apiGroups": ["sagemaker.amazonaws.com"], "resources": [PLURAL], "verbs": ["get", "list", "watch"]},
        {
            "apiGroups": ["sagemaker.amazonaws.com"],
            "resources": [f"{PLURAL}/status"],
            "verbs": ["get", "update", "patch"],
        },
        {
            "apiGroups": ["sagemaker.amazonaws.com"],
            "resources": [f"{PLURAL}/finalizers"],
            "verbs": ["update"],
        },
        {
            "apiGroups": ["kueue.x-k8s.io"],
            "resources": ["workloads"],
            "verbs": ["get", "list", "watch", "create", "update", "patch"],
        },
        {
            "apiGroups": ["kueue.x-k8s.io"],
            "resources": ["workloads/status"],
            "verbs": ["get", "update", "patch"],
        },
        {
            "apiGroups": ["kueue.x-k8s.io"],
            "resources": ["resourceflavors", "workloadpriorityclasses"],
            "verbs": ["get", "list", "watch"],
        },
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "create", "delete"]},
    ]
    # Kueue reads the kind too, once it is an external framework: its webhooks and reconcilers walk a
    # Job's or pod's owners up through it (jobframework FindAncestorJobManagedByKueue: a cached Get,
    # so list and watch). Without this, its batch/v1 Job webhook timed out on a Job owned by a
    # HyperPodPyTorchJob here ("kueue-manager cannot list resource hyperpodpytorchjobs").
    reader = [
        {"apiGroups": ["sagemaker.amazonaws.com"], "resources": [PLURAL], "verbs": ["get", "list", "watch"]}
    ]
    from topogov_local.cluster.manifests import KUEUE_USER

    return [
        *_role_bound(USER, USER, rules),
        *_role_bound("kueue-hyperpodpytorchjob-reader", KUEUE_USER, reader),
    ]


def _role_bound(name: str, user: str, rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    meta = {"name": name, "labels": {"app.kubernetes.io/part-of": USER}}
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": meta,
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        },
    ]


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    return obj["metadata"]["namespace"], obj["metadata"]["name"]


def _owner(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    """(namespace, name) of the job that controls ``obj``, if one does."""
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("kind") == KIND and ref.get("apiVersion") == API_VERSION and ref.get("controller"):
            return obj["metadata"]["namespace"], ref["name"]
    return None


class Operator:
    """One pass at a time over every job (:meth:`sync`), through ``kube`` (a KubeHttp)."""

    def __init__(self, kube: Any, log: Any = print) -> None:
        self.kube = kube
        self.log = log
        self.passes = 0

    # --- one pass --------------------------------------------------------------------------------------
    def sync(self) -> None:
        jobs = self._list(f"{JOBS}/{PLURAL}")
        workloads = self._list(f"{KUEUE}/workloads")
        pods: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        for pod in self._list("/api/v1/pods", {"labelSelector": training.HPJOB_LABEL}):
            owner = _owner(pod)
            if owner:
                pods[owner].append(pod)
        by_job: dict[tuple[str, str], dict[str, Any]] = {}
        for wl in workloads:
            owner = _owner(wl)
            if owner is None:
                continue
            if wl["metadata"].get("deletionTimestamp"):
                self._drop_finalizer(wl)  # its job is gone or going (jobframework step 1.1)
            else:
                by_job[owner] = wl
        for job in jobs:
            if job["metadata"].get("deletionTimestamp"):
                continue
            try:
                self.reconcile(job, by_job.get(_key(job)), pods.get(_key(job), []))
            except RuntimeError as exc:  # the next pass tries again
                self.log(f"job {'/'.join(_key(job))}: {exc}")
        self.passes += 1

    def reconcile(self, job: dict[str, Any], wl: dict[str, Any] | None, pods: list[dict[str, Any]]) -> None:
        if wl is None:
            created = self._create_workload(job)
            self._set_status(job, training.status_for(job.get("status") or {}, "Suspended", _now()))
            self.log(f"job {'/'.join(_key(job))}: created Workload {created}")
            return
        if training.is_true(wl, "Finished"):
            self._drop_finalizer(wl)
            return
        evicted = training.condition(wl, "Evicted")
        if evicted and evicted["status"] == "True":
            self._evict(job, wl, pods, evicted)
            return
        if not training.admitted(wl):
            self._set_status(job, training.status_for(job.get("status") or {}, "Suspended", _now()))
            return
        self._run(job, wl, pods)

    # --- the steps ---------------------------------------------------------------------------------------
    def _create_workload(self, job: dict[str, Any]) -> str:
        priority = None
        name = (job["metadata"].get("labels") or {}).get(training.PRIORITY_LABEL)
        if name:
            resp = self.kube.request("GET", f"{KUEUE}/workloadpriorityclasses/{name}")
            if resp.status != 200:
                raise RuntimeError(f"WorkloadPriorityClass {name}: HTTP {resp.status}")
            priority = (name, int(resp.body.get("value") or 0))
        wl = training.workload_for(job, priority)
        ns = job["metadata"]["namespace"]
        resp = self.kube.request("POST", f"{KUEUE}/namespaces/{ns}/workloads", body=wl)
        if resp.status not in (201, 409):
            raise RuntimeError(f"creating its Workload: HTTP {resp.status} {_message(resp.body)}")
        return str(wl["metadata"]["name"])

    def _run(self, job: dict[str, Any], wl: dict[str, Any], pods: list[dict[str, Any]]) -> None:
        """An admitted job: its missing pods created, its status and its Workload's from its pods."""
        wanted = training.pods_for(job, wl, self._flavors(wl))
        have = {p["metadata"]["name"] for p in pods}
        for pod in wanted:
            if pod["metadata"]["name"] not in have:
                ns = pod["metadata"]["namespace"]
                resp = self.kube.request("POST", f"/api/v1/namespaces/{ns}/pods", body=pod)
                if resp.status not in (201, 409):
                    raise RuntimeError(
                        f"creating pod {pod['metadata']['name']}: HTTP {resp.status} {_message(resp.body)}"
                    )
        state = training.phase([p for p in pods if p["metadata"]["name"] in have], len(wanted))
        failed = [p["metadata"]["name"] for p in pods if (p.get("status") or {}).get("phase") == "Failed"]
        why = f"pod {failed[0]} failed" if failed else ""
        self._set_status(job, training.status_for(job.get("status") or {}, state, _now(), why))
        if state in ("Completed", "Failed"):
            reason = "Succeeded" if state == "Completed" else "Failed"
            message = "Job finished successfully" if state == "Completed" else why
            self._finish(wl, reason, message)

    def _evict(
        self, job: dict[str, Any], wl: dict[str, Any], pods: list[dict[str, Any]], evicted: dict[str, Any]
    ) -> None:
        """Kueue evicted the Workload: the pods go; once none is left the admission is cleared
        (``UnsetQuotaReservationWithCondition``, ``SetRequeuedCondition``: Requeued True after a
        preemption or node failures), so Kueue can admit it again."""
        for pod in pods:
            if not pod["metadata"].get("deletionTimestamp"):
                ns, name = _key(pod)
                self.kube.request("DELETE", f"/api/v1/namespaces/{ns}/pods/{name}")
        self._set_status(
            job, training.status_for(job.get("status") or {}, "Suspended", _now(), evicted.get("reason", ""))
        )
        if pods or not training.condition(wl, "QuotaReserved"):
            return
        now = _now()
        conditions = [dict(c) for c in (wl.get("status") or {}).get("conditions") or []]
        requeue = evicted.get("reason") in ("Preempted", "NodeFailures")
        for c in conditions:
            if c["type"] in ("QuotaReserved", "Admitted") and c["status"] == "True":
                c.update(
                    status="False",
                    reason="Pending" if c["type"] == "QuotaReserved" else "NoReservation",
                    message=evicted.get("message", ""),
                    lastTransitionTime=now,
                )
        conditions = [c for c in conditions if c["type"] != "Requeued"]
        conditions.append(
            {
                "type": "Requeued",
                "status": "True" if requeue else "False",
                "reason": evicted.get("reason", ""),
                "message": evicted.get("message", ""),
                "lastTransitionTime": now,
            }
        )
        self._patch_workload_status(wl, {"admission": None, "conditions": conditions})

    def _finish(self, wl: dict[str, Any], reason: str, message: str) -> None:
        conditions = [dict(c) for c in (wl.get("status") or {}).get("conditions") or []]
        conditions.append(
            {
                "type": "Finished",
                "status": "True",
                "reason": reason,
                "message": message,
                "lastTransitionTime": _now(),
            }
        )
        self._patch_workload_status(wl, {"conditions": conditions})

    # --- reading and writing -------------------------------------------------------------------------------
    def _list(self, path: str, query: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        items, resp = self.kube.list_all(path, query)
        if resp.status != 200:
            raise RuntimeError(f"list {path}: HTTP {resp.status} {_message(resp.body)}")
        return items

    def _flavors(self, wl: dict[str, Any]) -> dict[str, dict[str, Any]]:
        names = {
            f
            for a in wl["status"]["admission"].get("podSetAssignments") or []
            for f in (a.get("flavors") or {}).values()
        }
        out = {}
        for name in sorted(names):
            resp = self.kube.request("GET", f"{KUEUE}/resourceflavors/{name}")
            if resp.status != 200:
                raise RuntimeError(f"ResourceFlavor {name}: HTTP {resp.status}")
            out[name] = resp.body.get("spec") or {}
        return out

    def _set_status(self, job: dict[str, Any], status: dict[str, Any]) -> None:
        old = job.get("status") or {}
        if status == old:
            return
        ns, name = _key(job)
        patch = {**status, **{k: None for k in old if k not in status}}  # a merge patch removes with null
        body = {"metadata": {"resourceVersion": job["metadata"]["resourceVersion"]}, "status": patch}
        resp = self.kube.request(
            "PATCH", f"{JOBS}/namespaces/{ns}/{PLURAL}/{name}/status", body=body, content_type=MERGE
        )
        if resp.status == 200:
            job["status"], job["metadata"]["resourceVersion"] = (
                status,
                resp.body["metadata"]["resourceVersion"],
            )
            last = [c["type"] for c in status.get("conditions") or [] if c["status"] == "True"]
            self.log(f"job {ns}/{name}: {last[-1] if last else 'Unknown'}")
        elif resp.status not in (404, 409):  # gone, or changed since read: the next pass
            raise RuntimeError(f"status: HTTP {resp.status} {_message(resp.body)}")

    def _patch_workload_status(self, wl: dict[str, Any], status: dict[str, Any]) -> None:
        ns, name = _key(wl)
        body = {"metadata": {"resourceVersion": wl["metadata"]["resourceVersion"]}, "status": status}
        resp = self.kube.request(
            "PATCH", f"{KUEUE}/namespaces/{ns}/workloads/{name}/status", body=body, content_type=MERGE
        )
        if resp.status not in (200, 404, 409):
            raise RuntimeError(f"Workload {name} status: HTTP {resp.status} {_message(resp.body)}")

    def _drop_finalizer(self, wl: dict[str, Any]) -> None:
        finalizers = wl["metadata"].get("finalizers") or []
        if training.FINALIZER not in finalizers:
            return
        ns, name = _key(wl)
        body = {
            "metadata": {
                "resourceVersion": wl["metadata"]["resourceVersion"],
                "finalizers": [f for f in finalizers if f != training.FINALIZER],
            }
        }
        self.kube.request("PATCH", f"{KUEUE}/namespaces/{ns}/workloads/{name}", body=body, content_type=MERGE)


def start(cluster: Any, interval_s: float = 1.0) -> Any:
    """The CRD and the operator's RBAC applied to ``cluster`` (a started ControlPlane), then the
    operator as a process of its own with its client certificate; the ManagedProcess, ready."""
    from topogov_local.cluster.controlplane import write_kubeconfig
    from topogov_local.hyperpod.crd import crd
    from topogov_local.processes import ManagedProcess, python_module

    cluster.apply([crd(), *rbac()])
    pki = cluster.pki
    kubeconfig = write_kubeconfig(
        cluster.dir / "kubeconfig" / "hyperpod-operator.kubeconfig",
        cluster.apiserver_url,
        pki.ca,
        cert=str(pki.directory / "hyperpod-operator"),
    )
    proc = ManagedProcess(
        "hyperpod-operator",
        python_module(__name__, "--kubeconfig", str(kubeconfig), "--interval", str(interval_s)),
        log_path=cluster.log("hyperpod-operator"),
    )
    proc.start(timeout_s=60)
    return proc


def _message(body: Any) -> str:
    return str(body.get("message", "")) if isinstance(body, dict) else str(body)[:200]


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        ok = self.path == "/healthz"
        self.send_response(200 if ok else 404)
        self.end_headers()
        self.wfile.write(b"ok" if ok else b"")

    def log_message(self, *_args: Any) -> None:
        return


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m topogov_local.hyperpod.operator")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between passes")
    args = parser.parse_args(argv)
    from topogov.adapters.kube import KubeHttp
    from topogov.adapters.kube_auth import kubeconfig_api_client

    def log(line: str) -> None:
        print(f"{_now()} {line}", flush=True)

    operator = Operator(KubeHttp(kubeconfig_api_client(args.kubeconfig), backoff_base_s=0.05), log)
    while True:  # the first pass, once the CRD is served (established just after it is applied)
        try:
            operator.sync()
            break
        except RuntimeError as exc:
            log(f"waiting: {exc}")
            time.sleep(0.2)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    threading.Thread(target=server.serve_forever, name="health", daemon=True).start()
    log(
        f"HyperPod training operator (stand-in) ready, health on http://127.0.0.1:{server.server_port}/healthz"
    )
    while True:
        time.sleep(args.interval)
        try:
            operator.sync()
        except RuntimeError as exc:
            log(f"pass failed: {exc}")


if __name__ == "__main__":
    sys.exit(main())
