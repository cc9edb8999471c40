"""The handlers as the deployed functions, doing what the test suites do.

Each function runs in this process with the environment Lambda would give it (its deployed
``Environment.Variables``, the region, credentials of its own role: :func:`topogov_local.rehearse.
function_runtime`) and reaches the cluster as EKS lets it: ``eks:DescribeCluster`` -> the EKS
endpoint -> its access entry's group. The reconcile handler gets EventBridge's events; the API is
called over HTTP, SigV4-signed as the team principals of ``teams.yaml``, through the local API
Gateway serving the deployed RestApi's resources and methods.
"""

from __future__ import annotations

import contextlib
import secrets
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from botocore.credentials import Credentials

from topogov_local import events
from topogov_local.lambda_context import LocalContext
from topogov_local.processes import environ
from topogov_local.rehearse import ACCOUNT, REGION, FunctionRuntime, lambda_environ, wait_for

TEAMS = ("team-a", "team-b", "team-c")


def job(name: str, **kw: Any) -> dict[str, Any]:
    return {
        "job_name": name,
        "image": "pytorch:latest",
        "command": ["sleep", "1"],
        "accelerators": 8,
        "efa": 32,
        "replica_count": 1,
        **kw,
    }


@dataclass
class Callers:
    """The API's callers: one IAM user per team (``teams.yaml`` principals) and the admin."""

    keys: dict[str, tuple[str, str]] = field(default_factory=dict)  # profile -> (key id, secret)

    @classmethod
    def make(cls) -> Callers:
        out = cls()
        for profile in ("topogov-admin", *(f"topogov-{t}" for t in TEAMS)):
            out.keys[profile] = ("AKIA" + uuid.uuid4().hex[:16].upper(), secrets.token_urlsafe(30))
        return out

    def gateway_callers(self) -> dict[str, Any]:
        from topogov_local.apigw.auth import Caller

        return {
            key: Caller(access_key_id=key, secret_access_key=secret, arn=f"arn:aws:iam::{ACCOUNT}:user/{p}")
            for p, (key, secret) in self.keys.items()
        }

    def credentials(self, profile: str) -> Credentials:
        key, secret = self.keys[profile]
        return Credentials(key, secret)


@dataclass
class Harness:
    reconcile: FunctionRuntime
    api: FunctionRuntime
    aws_url: str
    routes: dict[str, list[str]]
    kube: Any  # admin KubeHttp, for set-up and checks
    callers: Callers = field(default_factory=Callers.make)
    gateway: Any = None
    log: list[dict[str, Any]] = field(default_factory=list)

    # -- the functions --------------------------------------------------------------------------
    @contextlib.contextmanager
    def as_function(self, fn: FunctionRuntime) -> Iterator[None]:
        with environ(lambda_environ(fn, self.aws_url)):
            yield

    def invoke_reconcile(self, event: dict[str, Any], what: str) -> dict[str, Any]:
        from topogov.handlers.reconcile import handler

        with self.as_function(self.reconcile):
            result = handler(event, LocalContext(function_name=self.reconcile.name, timeout_s=900))
        self.log.append({"function": "reconcile", "what": what, "result": _brief(result)})
        return result

    def start_api(self) -> None:
        from topogov.handlers import api
        from topogov_local.apigw import LocalApiGateway

        api.set_service(None)  # built on first use, from this function's environment
        self.gateway = LocalApiGateway(
            api.handler,
            self.callers.gateway_callers(),
            port=0,
            region=REGION,
            stage="prod",
            context_factory=lambda: LocalContext(function_name=self.api.name, timeout_s=29),
            routes=self.routes,
        ).start()

    def stop_api(self) -> None:
        from topogov.handlers import api

        if self.gateway is not None:
            self.gateway.stop()
        api.set_service(None)

    def call(
        self, method: str, path: str, profile: str = "topogov-team-a", body: Any = None, headers: Any = None
    ) -> Any:
        from topogov_cli.sigv4 import signed_request

        assert self.gateway is not None
        with self.as_function(self.api):  # the handler runs in the gateway's thread, in this process
            resp = signed_request(
                method,
                self.gateway.url + path,
                credentials=self.callers.credentials(profile),
                region=REGION,
                json_body=body,
                headers=headers,
            )
        self.log.append(
            {"function": "api", "what": f"{method} {path} as {profile}", "status": resp.status_code}
        )
        return resp

    # -- set-up as an administrator --------------------------------------------------------------
    def cordon_gpu_nodes(self, unschedulable: bool = True) -> list[str]:
        """Cordon (or uncordon) every GPU node: Kueue's topology-aware scheduling counts only nodes
        that are Ready and not ``spec.unschedulable`` (kueue v0.17 ``tas_nodes_cache.go``), so a job
        that requires a topology level stays pending while the API, which decides on the snapshot,
        still takes it. (A queue stopped by hand would not do: the governor sets it going again.)"""
        nodes = self.kube.request("GET", "/api/v1/nodes").body["items"]
        names = [
            n["metadata"]["name"]
            for n in nodes
            if (n["metadata"].get("labels") or {})
            .get("node.kubernetes.io/instance-type", "")
            .startswith(("p5", "p6"))
        ]
        for name in names:
            resp = self.kube.request(
                "PATCH",
                f"/api/v1/nodes/{name}",
                body={"spec": {"unschedulable": unschedulable}},
                content_type="application/merge-patch+json",
            )
            assert resp.status == 200, resp.body
        return names

    STRAYS: ClassVar[tuple[tuple[str, str, str | None, dict[str, Any]], ...]] = (
        # (plural, kind, namespace, spec): owned by Topogov (its label), rendered by no policy
        ("localqueues", "LocalQueue", "hyperpod-ns-team-a", {"spec": {"clusterQueue": "topogov-stray"}}),
        ("clusterqueues", "ClusterQueue", None, {"spec": {"namespaceSelector": {}}}),
        ("cohorts", "Cohort", None, {"spec": {}}),
        ("resourceflavors", "ResourceFlavor", None, {"spec": {}}),
        ("topologies", "Topology", None, {"spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]}}),
        ("workloadpriorityclasses", "WorkloadPriorityClass", None, {"value": 1}),
    )
    # A removed team's queue whose namespace still has an unfinished Job: stopped, not deleted.
    BUSY_STRAY: ClassVar[dict[str, Any]] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "topogov-stray-busy", "labels": {"app.kubernetes.io/managed-by": "topogov"}},
        "spec": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "hyperpod-ns-team-b"}}},
    }

    def _kueue_path(self, plural: str, namespace: str | None, name: str | None = None) -> str:
        ns = f"/namespaces/{namespace}" if namespace else ""
        return f"/apis/kueue.x-k8s.io/v1beta2{ns}/{plural}" + (f"/{name}" if name else "")

    def leave_strays(self) -> None:
        """Objects of every Kueue kind the governor manages, labelled as Topogov's but in no policy
        (what a team or flavor removed from teams.yaml leaves): the next full pass deletes them."""
        labels = {"app.kubernetes.io/managed-by": "topogov"}
        for plural, kind, namespace, body in self.STRAYS:
            meta: dict[str, Any] = {"name": "topogov-stray", "labels": labels}
            if namespace:
                meta["namespace"] = namespace
            obj = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": kind, "metadata": meta, **body}
            resp = self.kube.request("POST", self._kueue_path(plural, namespace), body=obj)
            assert resp.status == 201, (kind, resp.body)
        resp = self.kube.request("POST", self._kueue_path("clusterqueues", None), body=self.BUSY_STRAY)
        assert resp.status == 201, resp.body

    def busy_stray_policy(self) -> str | None:
        resp = self.kube.request("GET", self._kueue_path("clusterqueues", None, "topogov-stray-busy"))
        return (resp.body.get("spec") or {}).get("stopPolicy") if resp.status == 200 else None

    def strays_left(self) -> list[str]:
        """The strays still there and not being deleted."""
        left = []
        for plural, kind, namespace, _ in self.STRAYS:
            resp = self.kube.request("GET", self._kueue_path(plural, namespace, "topogov-stray"))
            if resp.status == 200 and not resp.body["metadata"].get("deletionTimestamp"):
                left.append(kind)
        return left

    def edit_by_hand(self) -> list[str]:
        """Drift the governor corrects with a PUT: a ClusterQueue's and a LocalQueue's team label, a
        WorkloadPriorityClass's value."""
        edited = []
        for plural in ("clusterqueues", "localqueues", "workloadpriorityclasses"):
            items = self.kube.request(
                "GET",
                self._kueue_path(plural, None),
                query={"labelSelector": "app.kubernetes.io/managed-by=topogov"},
            ).body["items"]
            obj = next(o for o in items if o["metadata"]["name"] != "topogov-stray")
            meta = obj["metadata"]
            patch: dict[str, Any] = (
                {"value": int(obj["value"]) + 1}
                if plural == "workloadpriorityclasses"
                else {"metadata": {"labels": {"topogov.io/team": "edited-by-hand"}}}
            )
            resp = self.kube.request(
                "PATCH",
                self._kueue_path(plural, meta.get("namespace"), meta["name"]),
                body=patch,
                content_type="application/merge-patch+json",
            )
            assert resp.status == 200, (plural, resp.body)
            edited.append(f"{obj['kind']} {meta['name']}")
        return edited

    def create_job(self, team: str, name: str, labels: dict[str, str] | None = None) -> None:
        body = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": f"hyperpod-ns-{team}", "labels": labels or {}},
            "spec": {
                "suspend": True,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "main", "image": "busybox", "command": ["sleep", "1"]}],
                    }
                },
            },
        }
        resp = self.kube.request("POST", f"/apis/batch/v1/namespaces/hyperpod-ns-{team}/jobs", body=body)
        assert resp.status == 201, resp.body

    def job_exists(self, team: str, name: str) -> bool:
        return (
            self.kube.request("GET", f"/apis/batch/v1/namespaces/hyperpod-ns-{team}/jobs/{name}").status
            == 200
        )

    def job_finished(self, team: str, name: str) -> bool:
        resp = self.kube.request("GET", f"/apis/batch/v1/namespaces/hyperpod-ns-{team}/jobs/{name}")
        conditions = (resp.body.get("status") or {}).get("conditions") or [] if resp.status == 200 else []
        return any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in conditions)


def _brief(result: Any) -> Any:
    if not isinstance(result, dict):
        return result
    keep = ("nodes_seen", "patched", "unchanged", "ec2_calls", "complete", "mode", "ignored", "governor")
    out = {k: result[k] for k in keep if k in result}
    if "ledger" in result:
        out["ledger"] = {k: v for k, v in result["ledger"].items() if v and k != "in_flight_gpu"}
    return out


def run(h: Harness, instance_id: str, rounds: int = 1) -> dict[str, Any]:
    """The scenario; returns what each step answered (the test asserts on it)."""
    seen: dict[str, Any] = {}
    h.start_api()
    try:
        # Before the first pass: no snapshot (S3 answers 404 NoSuchKey only with s3:ListBucket).
        seen["topology_before"] = h.call("GET", "/v1/topology").status_code
        seen["first_pass"] = h.invoke_reconcile(events.scheduled_event(), "first full pass")
        seen["steady_pass"] = h.invoke_reconcile(events.scheduled_event(), "steady pass")
        seen["targeted_pass"] = h.invoke_reconcile(events.state_change_event(instance_id), "running event")
        # What the deployed RestApi lacks is not served: API Gateway's 403, before any handler.
        seen["undeployed_method"] = h.call("PUT", "/v1/jobs").status_code
        seen["undeployed_path"] = h.call("GET", "/v1/nothing-here").status_code
        for _ in range(rounds):
            seen["teams"] = h.call("GET", "/v1/teams").status_code
            seen["team"] = h.call("GET", "/v1/teams/team-a").status_code
            seen["topology"] = h.call("GET", "/v1/topology").status_code
            seen["openapi"] = h.call("GET", "/v1/openapi.json").status_code
            seen["dry_run"] = h.call(
                "POST", "/v1/jobs?dryRun=true", body=job("dry", topology={"mode": "auto"})
            ).status_code
        key = {"Idempotency-Key": f"quick-{uuid.uuid4().hex[:8]}"}
        seen["submit"] = h.call("POST", "/v1/jobs", body=job("quick"), headers=key).status_code
        seen["submit_replayed"] = h.call("POST", "/v1/jobs", body=job("quick"), headers=key).status_code
        wait_for(
            lambda: h.job_finished("team-a", "quick"), "job quick finishes (Kueue admits, KWOK runs it)", 90
        )
        seen["cordoned"] = len(h.cordon_gpu_nodes())
        waits = job("waits", topology={"mode": "required", "level": "layer-3", "fallbackAfter": "1s"})
        seen["submit_held"] = h.call("POST", "/v1/jobs", profile="topogov-team-b", body=waits).status_code
        seen["submit_to_cancel"] = h.call("POST", "/v1/jobs", body=job("cancel-me")).status_code
        seen["cancel"] = h.call("DELETE", "/v1/jobs/team-a/cancel-me").status_code
        h.create_job("team-a", "taken")  # a Job of that name exists: the create fails, the charge is refunded
        # ... and the idempotency record of the refused submission is deleted, so the key may be retried
        retry = {"Idempotency-Key": f"taken-{uuid.uuid4().hex[:8]}"}
        seen["submit_conflict"] = h.call("POST", "/v1/jobs", body=job("taken"), headers=retry).status_code
        seen["submit_conflict_again"] = h.call(
            "POST", "/v1/jobs", body=job("taken"), headers=retry
        ).status_code
        h.create_job("team-a", "orphan", {"app.kubernetes.io/managed-by": "topogov"})  # the API's, no record
        seen["jobs"] = h.call("GET", "/v1/jobs?team=team-a").status_code
        seen["job"] = h.call("GET", "/v1/jobs/team-a/quick").status_code
        h.leave_strays()
        seen["edited"] = h.edit_by_hand()
        time.sleep(1.1)  # past waits' fallbackAfter
        seen["sync_pass"] = h.invoke_reconcile(
            events.scheduled_event(), "full pass: release, fall back, orphan"
        )
        seen["orphan_left"] = h.job_exists("team-a", "orphan")
        seen["strays_left"] = h.strays_left()
        seen["busy_stray"] = h.busy_stray_policy()  # team-b's "waits" is unfinished: held, not deleted
        seen["waits"] = h.call("GET", "/v1/jobs/team-b/waits", profile="topogov-team-b").json()
        seen["fallback"] = seen["waits"].get("fallback")
        seen["in_flight_a"] = h.call("GET", "/v1/teams/team-a").json()["in_flight"]["nvidia.com/gpu"]
        h.cordon_gpu_nodes(False)
    finally:
        h.stop_api()
    return seen
