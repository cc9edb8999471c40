"""Composition root: builds the adapters the handlers use, once per warm container.

Typed end to end: what it returns is the logic's own classes and callables. The AWS session and the
Kubernetes client are named by their libraries' classes (boto3's ``Session``, kubernetes'
``ApiClient``); neither library ships type information, so to the type checker those two stay
opaque, and the adapters that call them are where their use is checked (by tests against real
servers)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from topogov.adapters.ec2 import Pacer, TopologyClient, ec2_client
from topogov.adapters.kube import KubeHttp, KubeNodes
from topogov.adapters.kube_auth import EksTokenSource, describe_cluster, eks_api_client, kubeconfig_api_client
from topogov.adapters.snapshot_store import S3SnapshotStore
from topogov.domain.quantity import Resources
from topogov.logic.labeler import Labeler
from topogov.settings import ApiSettings, ReconcileSettings

if TYPE_CHECKING:
    from boto3.session import Session
    from kubernetes.client import ApiClient

    from topogov.domain.kueue_version import KueueVersion
    from topogov.domain.policy import Policy
    from topogov.domain.snapshot import Snapshot
    from topogov.domain.views.batch import JobView, PodView
    from topogov.domain.views.objects import ClusterQueueView
    from topogov.domain.views.workload import WorkloadView
    from topogov.logic.api_service import ApiService, KubePort
    from topogov.logic.governor import GovernorSummary
    from topogov.logic.governor.addon import AddonReport
    from topogov.logic.ledger_sync import SyncSummary

API_K8S_TIMEOUT_S = 10.0

LedgerSync = Callable[[], "SyncSummary"]
GovernorStep = Callable[["Snapshot | None"], "GovernorSummary | AddonReport"]


@dataclass(frozen=True)
class Reconcile:
    """What one reconcile pass runs; ``ledger_sync`` and ``governor`` are None when not configured."""

    labeler: Labeler
    ledger_sync: LedgerSync | None
    governor: GovernorStep | None


def retrying(session: Session, service: str) -> Any:
    """A client with botocore's ``standard`` retry mode stated explicitly (3 attempts in all)."""
    from botocore.config import Config

    return session.client(service, config=Config(retries={"mode": "standard", "total_max_attempts": 3}))


def aws_session(region: str | None) -> Session:
    import boto3

    return boto3.session.Session(region_name=region)


def kube_api_client(settings: ReconcileSettings | ApiSettings, session: Session) -> ApiClient:
    if settings.kubeconfig:
        return kubeconfig_api_client(settings.kubeconfig)
    assert settings.cluster_name is not None  # enforced by the settings model
    endpoint = describe_cluster(session.client("eks"), settings.cluster_name)
    tokens = EksTokenSource(session.client("sts"), settings.cluster_name)
    return eks_api_client(endpoint, tokens)


def build_labeler(
    settings: ReconcileSettings,
    session: Session | None = None,
    api_client: ApiClient | None = None,
    policy: Policy | None = None,
) -> Labeler:
    """The labeler; with the team policy, the placement quality it computes is also per team."""
    session = session or aws_session(settings.region)
    api_client = api_client or kube_api_client(settings, session)
    nodes = KubeNodes(KubeHttp(api_client), page_size=settings.page_size)
    ec2 = TopologyClient(
        ec2_client(session, max_attempts=settings.ec2_max_attempts), Pacer(settings.ec2_rate_per_s)
    )
    store = S3SnapshotStore(retrying(session, "s3"), settings.snapshot_bucket, settings.snapshot_key)
    return Labeler(
        nodes,
        ec2,
        store,
        patch_concurrency=settings.patch_concurrency,
        hyperpod_cluster_arn=settings.hyperpod_cluster_arn,
        addon_namespaces=nodes.addon_namespaces,
        team_of={t.namespace: name for name, t in policy.teams.items()} if policy is not None else None,
    )


def build_api_service(settings: ApiSettings | None = None, session: Session | None = None) -> ApiService:
    """The API's service: policy (validated at cold start), snapshot, ledger, jobs."""
    from topogov.adapters.kube_jobs import KubeJobs
    from topogov.adapters.kueue_api import KueueApi
    from topogov.adapters.ledger import DynamoLedger
    from topogov.domain.policy import load_policy_file
    from topogov.logic.api_service import ApiService

    settings = settings or ApiSettings.from_env()
    session = session or aws_session(settings.region)
    policy = load_policy_file(settings.policy_file)
    store = S3SnapshotStore(retrying(session, "s3"), settings.snapshot_bucket, settings.snapshot_key)
    ledger = DynamoLedger(
        retrying(session, "dynamodb"),
        settings.ledger_table,
        settings.counters_table,
        retention_s=policy.job_retention_days * 86400,
    )

    # 10 s per Kubernetes call: the API must answer within API Gateway's 29 s, whatever the cluster does.
    def connect() -> KubeJobs:
        http = KubeHttp(kube_api_client(settings, session), max_attempts=3, timeout_s=API_K8S_TIMEOUT_S)
        return KubeJobs(http, kueue=KueueApi(http, kueue_version=settings.kueue_version))

    jobs = LazyJobs(connect)
    idempotency = None
    if settings.idempotency_table:
        from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

        from topogov.adapters.tables import IDEMPOTENCY

        idempotency = DynamoDBPersistenceLayer(
            table_name=settings.idempotency_table,
            key_attr=IDEMPOTENCY.partition,
            expiry_attr=IDEMPOTENCY.ttl or "expiration",
            boto3_client=session.client("dynamodb"),
        )
    from topogov.adapters.iam import IamRolePaths

    return ApiService(
        policy=policy,
        snapshots=store,
        ledger=ledger,
        jobs=jobs,
        roles=IamRolePaths(lambda: retrying(session, "iam")),
        idempotency_store=idempotency,
        snapshot_ttl_s=settings.snapshot_ttl_s,
        queues=jobs,
        kueue=jobs,
        hyperpod_cluster_arn=settings.hyperpod_cluster_arn,
        keep_long_lived=freeze_long_lived,
    )


def freeze_long_lived() -> None:
    """Leave what a warm API container keeps out of the cyclic garbage collector's full passes.

    Called once the Kueue model's cluster of a snapshot is built: that cluster, the listed Workloads'
    and Jobs' views and the modules are then most of the process's objects (about 730,000 at 10,000
    nodes and 11,000 running jobs), and each full pass over them cost about 300 ms, which fell on
    every second start estimate (``topogov bench estimate``, docs/benchmarks.md). ``gc.freeze``
    moves every tracked object to a permanent generation that collections ignore; the objects of the
    cluster built before are unfrozen and collected first, so a snapshot's replacement frees them
    (Python's ``gc`` documentation: ``freeze``, ``unfreeze``)."""
    import gc

    gc.unfreeze()
    gc.collect()
    gc.freeze()


def build_ledger_sync(
    settings: ReconcileSettings,
    session: Session | None = None,
    api_client: ApiClient | None = None,
    policy: Policy | None = None,
) -> LedgerSync | None:
    """The reconcile pass's second step, when the ledger is configured: a callable -> SyncSummary."""
    if not (settings.policy_file and settings.ledger_table and settings.counters_table):
        return None
    from topogov.adapters.kube_jobs import KubeJobs
    from topogov.adapters.ledger import DynamoLedger
    from topogov.domain.policy import load_policy_file
    from topogov.logic.ledger_sync import sync_ledger

    session = session or aws_session(settings.region)
    loaded = policy or load_policy_file(settings.policy_file)
    ledger = DynamoLedger(
        retrying(session, "dynamodb"),
        settings.ledger_table,
        settings.counters_table,
        retention_s=loaded.job_retention_days * 86400,
    )
    jobs = KubeJobs(KubeHttp(api_client or kube_api_client(settings, session), max_attempts=3))
    return lambda: sync_ledger(loaded, ledger, jobs, stale_after_s=settings.stale_reservation_s)


def build_governor(
    settings: ReconcileSettings,
    session: Session | None = None,
    api_client: ApiClient | None = None,
    policy: Policy | None = None,
) -> GovernorStep | None:
    """The reconcile pass's Kueue step: a callable(snapshot) -> GovernorSummary, or in HyperPod mode (the
    mode the labeler wrote into the snapshot) -> AddonReport: the add-on's objects against the policy,
    nothing written. None when off."""
    if not (settings.governor and settings.policy_file):
        return None
    from topogov.adapters.kube_objects import KubeObjects
    from topogov.adapters.kueue_api import KueueApi
    from topogov.domain.hyperpod.mode import mode_in_force
    from topogov.domain.kueue_version import check_writes
    from topogov.domain.policy import load_policy_file
    from topogov.logic.governor import Governor
    from topogov.logic.governor.addon import AddonWatch
    from topogov.observability import logger

    loaded = policy or load_policy_file(settings.policy_file)
    http = KubeHttp(
        api_client or kube_api_client(settings, session or aws_session(settings.region)), max_attempts=3
    )
    kueue = KueueApi(http, configured=settings.kueue_api_version, kueue_version=settings.kueue_version)
    governor = Governor(KubeObjects(http), cohort=settings.cohort, log=logger)
    watch = AddonWatch(KubeObjects(http), cluster_arn=settings.hyperpod_cluster_arn)

    def step(snapshot: Snapshot | None) -> GovernorSummary | AddonReport:
        mode = mode_in_force(snapshot.mode if snapshot is not None else None, settings.hyperpod_cluster_arn)
        # the version discovery chooses (kept 5 min), or the setting if served: ConfigError if not
        governor.api_version = watch.api_version = kueue.version()
        if mode.hyperpod:
            return watch.run(loaded, mode, http.counters)
        check_writes(kueue.kueue_version(), governor.api_version)  # v1beta2 needs Kueue v0.15
        return governor.run(loaded, snapshot, http.counters)

    return step


def build_reconcile(settings: ReconcileSettings, session: Session | None = None) -> Reconcile:
    """Everything one reconcile pass runs, sharing one AWS session and one Kubernetes client."""
    session = session or aws_session(settings.region)
    api_client = kube_api_client(settings, session)
    policy = None
    if settings.policy_file:
        from topogov.domain.policy import load_policy_file

        policy = load_policy_file(settings.policy_file)  # once, for the ledger sync and the governor
    return Reconcile(
        labeler=build_labeler(settings, session, api_client, policy),
        ledger_sync=build_ledger_sync(settings, session, api_client, policy),
        governor=build_governor(settings, session, api_client, policy),
    )


class LazyJobs:
    """The Kubernetes side of the API (:class:`~topogov.logic.api_service.KubePort`), connected on
    first use: a dry run, a team view or a refusal never pays the kubernetes client's import
    (~0.6 s) or the EKS token."""

    def __init__(self, factory: Callable[[], KubePort]) -> None:
        self._factory = factory
        self._jobs: KubePort | None = None

    @property
    def connected(self) -> KubePort:
        if self._jobs is None:
            self._jobs = self._factory()
        return self._jobs

    def create(self, namespace: str, manifest: dict[str, Any]) -> JobView:
        return self.connected.create(namespace, manifest)

    def get(self, namespace: str, name: str, kind: str = "Job") -> JobView | None:
        return self.connected.get(namespace, name, kind)

    def delete(self, namespace: str, name: str, kind: str = "Job") -> bool:
        return self.connected.delete(namespace, name, kind)

    def served_kinds(self) -> frozenset[str]:
        return self.connected.served_kinds()

    def kueue_release(self) -> KueueVersion:
        return self.connected.kueue_release()

    def create_owned(self, namespace: str, manifest: dict[str, Any], owner: JobView) -> None:
        self.connected.create_owned(namespace, manifest, owner)

    def workload_for(self, namespace: str, job_uid: str) -> WorkloadView | None:
        return self.connected.workload_for(namespace, job_uid)

    def workloads(self, namespace: str) -> list[WorkloadView]:
        return self.connected.workloads(namespace)

    def list_jobs(self, namespace: str) -> list[JobView]:
        return self.connected.list_jobs(namespace)

    def pods_of(self, namespace: str, job: JobView) -> list[PodView]:
        return self.connected.pods_of(namespace, job)

    def kueue_pods(self, namespace: str) -> list[PodView]:
        return self.connected.kueue_pods(namespace)

    def admitted_usage(self, namespace: str) -> Resources:
        return self.connected.admitted_usage(namespace)

    def cluster_queue(self, name: str) -> ClusterQueueView | None:
        return self.connected.cluster_queue(name)
