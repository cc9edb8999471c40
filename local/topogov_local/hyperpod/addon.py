"""HyperPod task governance's EKS add-on, emulated: it reads the cluster's ComputeQuotas and its cluster
policy (ClusterSchedulerConfig) and the cluster's instance groups from the AWS emulator (boto3 over
HTTP, as the add-on reads SageMaker's API), and keeps the Kueue objects the add-on writes in the real
API server — the objects of :func:`topogov.domain.hyperpod.addon_objects`: per team the namespace
``hyperpod-ns-<team>``, its ClusterQueue and LocalQueue, a ResourceFlavor per instance type, the
WorkloadPriorityClasses ``<name>-priority``, the Topology and the cohort.

Like the add-on ("any changes made to a SageMaker AI-managed resource may be updated and overwritten by
the service", aws-samples/awsome-distributed-training, task-governance README), each pass
(:meth:`AddonEmulator.sync`) creates what is missing, overwrites what was changed (every field it
writes, a PUT at the read ``resourceVersion``; what the API server or Kueue add, defaults and status,
are left), and deletes the objects it made that no quota asks for any more (a deleted ComputeQuota
takes its namespace and queues with it). Its objects are the ones labelled
``sagemaker.amazonaws.com/sagemaker-managed-queue: "true"``; none carries Topogov's
``app.kubernetes.io/managed-by`` label, and it touches nothing else.

Run it as a thread (:meth:`AddonEmulator.start` / :meth:`AddonEmulator.stop`, or ``with``), which
syncs every ``interval_s``, or call :meth:`AddonEmulator.sync` once (tests).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from topogov.adapters.kube import KubeHttp
from topogov.adapters.kube_objects import KubeObjects, ref
from topogov.domain.hyperpod import ApiVersion, addon_objects, api
from topogov.domain.labels import SAGEMAKER_MANAGED_QUEUE_LABEL
from topogov.domain.quantity import parse_quantity
from topogov.logic.governor.plan import KINDS  # creation order: what an object refers to exists first

log = logging.getLogger(__name__)
LIVE = frozenset({"Created", "Updated", "Creating", "Updating", "UpdateFailed", "UpdateRollbackFailed"})


@dataclass
class SyncResult:
    """What one pass did, by ``kind/name`` (``namespace/name`` for a LocalQueue)."""

    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.created or self.updated or self.deleted)


def _key(obj: Mapping[str, Any]) -> str:
    kind, name, namespace = ref(obj)
    return f"{kind}/{namespace}/{name}" if namespace else f"{kind}/{name}"


def _same_quantity(live: Any, wanted: Any) -> bool:
    """Two Kubernetes quantities of the same amount: Kueue keeps ``fairSharing.weight`` and quotas as
    int-or-string quantities, so ``10`` comes back ``"10"`` (and ``64Gi`` may be written ``65536Mi``)."""
    try:
        return parse_quantity(live) == parse_quantity(wanted)
    except (ValueError, TypeError):
        return False


def holds(live: Any, wanted: Any) -> bool:
    """Whether ``live`` has every field of ``wanted`` with its value (lists element by element, of the
    same length; quantities by amount); what ``live`` has besides (defaults, status) does not count."""
    if isinstance(wanted, Mapping):
        return isinstance(live, Mapping) and all(k in live and holds(live[k], v) for k, v in wanted.items())
    if isinstance(wanted, list):
        return isinstance(live, list) and len(live) == len(wanted) and all(map(holds, live, wanted))
    return bool(live == wanted) or (
        isinstance(live, int | str) and isinstance(wanted, int | str) and _same_quantity(live, wanted)
    )


def _overwritten(live: Mapping[str, Any], wanted: Mapping[str, Any]) -> dict[str, Any]:
    """``live`` with the add-on's fields as ``wanted`` has them (its labels over the live ones; the
    rest of the metadata, the resourceVersion with it, kept)."""
    out = dict(live) | {k: v for k, v in wanted.items() if k != "metadata"}
    metadata = dict(live["metadata"])
    metadata["labels"] = {**(metadata.get("labels") or {}), **wanted["metadata"]["labels"]}
    out["metadata"] = metadata
    return out


class AddonEmulator:
    """The add-on for the HyperPod cluster ``cluster_arn`` of the AWS emulator at ``aws_url``, writing
    to the API server ``kube`` reaches (an identity allowed to write those kinds)."""

    def __init__(
        self,
        aws_url: str,
        cluster_arn: str,
        kube: KubeHttp,
        *,
        api_version: ApiVersion = "v1beta1",
        interval_s: float = 5.0,
        credentials: Mapping[str, str] | None = None,
    ) -> None:
        problem = api.cluster_arn_problem(cluster_arn)
        if problem:
            raise ValueError(problem)
        self.aws_url, self.cluster_arn, self.api_version = aws_url, cluster_arn, api_version
        self.objects = KubeObjects(kube)
        self.interval_s = interval_s
        self.credentials = dict(credentials or {"AccessKeyId": "testing", "SecretAccessKey": "testing"})
        self.passes = 0
        self.last_error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._sagemaker: Any = None

    # --- SageMaker's side ---------------------------------------------------------------------------
    def client(self) -> Any:
        if self._sagemaker is None:
            import boto3
            from botocore.config import Config

            self._sagemaker = boto3.client(
                "sagemaker",
                endpoint_url=self.aws_url,
                region_name=api.cluster_region(self.cluster_arn),
                aws_access_key_id=self.credentials["AccessKeyId"],
                aws_secret_access_key=self.credentials["SecretAccessKey"],
                aws_session_token=self.credentials.get("SessionToken"),
                config=Config(retries={"mode": "standard", "total_max_attempts": 3}),
            )
        return self._sagemaker

    def policy(self) -> tuple[list[dict[str, Any]], dict[str, Any] | None, dict[str, int]]:
        """The cluster's ComputeQuotas (as DescribeComputeQuota answers them), its cluster policy's
        SchedulerConfig (None: none) and its instance types with their counts."""
        sm = self.client()
        pages = sm.get_paginator("list_compute_quotas").paginate(ClusterArn=self.cluster_arn)
        ids = [
            s["ComputeQuotaId"]
            for page in pages
            for s in page["ComputeQuotaSummaries"]
            if s["Status"] in LIVE
        ]
        quotas = [sm.describe_compute_quota(ComputeQuotaId=i) for i in ids]
        pages = sm.get_paginator("list_cluster_scheduler_configs").paginate(ClusterArn=self.cluster_arn)
        configs = [
            s for page in pages for s in page["ClusterSchedulerConfigSummaries"] if s["Status"] in LIVE
        ]
        scheduler = None
        if configs:
            config_id = configs[0]["ClusterSchedulerConfigId"]
            scheduler = sm.describe_cluster_scheduler_config(ClusterSchedulerConfigId=config_id)[
                "SchedulerConfig"
            ]
        types: dict[str, int] = {}
        for group in sm.describe_cluster(ClusterName=self.cluster_arn).get("InstanceGroups") or []:
            types[group["InstanceType"]] = types.get(group["InstanceType"], 0) + int(
                group.get("CurrentCount") or 0
            )
        return quotas, scheduler, types

    # --- the cluster's side -------------------------------------------------------------------------
    def _api_version_of(self, kind: str) -> str:
        return "v1" if kind == "Namespace" else f"kueue.x-k8s.io/{self.api_version}"

    def owned(self) -> list[dict[str, Any]]:
        """Every object of the add-on's kinds that carries its label and is not being deleted (a
        ClusterQueue waits for Kueue's finalizer, a namespace for its contents)."""
        out = []
        for kind in KINDS:
            for view in self.objects.list(self._api_version_of(kind), kind):
                if view.labels.get(SAGEMAKER_MANAGED_QUEUE_LABEL) == "true" and not view.deleting:
                    out.append(dict(view.raw))
        return out

    def _apply(self, wanted: dict[str, Any], result: SyncResult) -> None:
        kind, name, namespace = ref(wanted)
        for _attempt in range(3):  # a 409: someone wrote in between; read again
            view = self.objects.get(wanted["apiVersion"], kind, name, namespace)
            if view is None:
                self.objects.create(wanted)
                result.created.append(_key(wanted))
                return
            live, labels = view.raw, view.labels
            body = {k: v for k, v in wanted.items() if k not in ("metadata", "apiVersion", "kind")}
            if holds(labels, wanted["metadata"]["labels"]) and holds(live, body):
                return
            if self.objects.replace(_overwritten(live, wanted)) is not None:
                result.updated.append(_key(wanted))
                return
        raise RuntimeError(f"{_key(wanted)} kept changing under the add-on's writes")

    def sync(self) -> SyncResult:
        """One pass: read the policy from SageMaker's API, write what differs, delete what is left over."""
        quotas, scheduler, types = self.policy()
        wanted = addon_objects(quotas, scheduler, types, api_version=self.api_version)
        result = SyncResult()
        for obj in wanted:
            self._apply(obj, result)
        keep = {_key(o) for o in wanted}
        for obj in reversed(self.owned()):  # queues before what they name, namespaces last
            if _key(obj) not in keep:
                kind, name, namespace = ref(obj)
                if self.objects.delete(obj["apiVersion"], kind, name, namespace):
                    result.deleted.append(_key(obj))
        self.passes += 1
        if result.changed:
            log.info(
                "add-on pass: created %s, updated %s, deleted %s",
                result.created,
                result.updated,
                result.deleted,
            )
        return result

    # --- as a thread --------------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.sync()
                self.last_error = None
            except Exception as exc:  # the add-on retries on its next pass; the error is kept for a look
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.warning("add-on pass failed: %s", self.last_error)
            self._stop.wait(self.interval_s)

    def start(self) -> AddonEmulator:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="topogov-hyperpod-addon", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout_s: float = 30) -> None:
        """Stop after the pass under way (if any); returns once the thread has ended."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout_s)
            if self._thread.is_alive():
                raise RuntimeError("the add-on's thread did not stop")
            self._thread = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def __enter__(self) -> AddonEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
