"""Composition root: builds the adapters the handlers use, once per warm container."""

from __future__ import annotations

from typing import Any

from topogov.adapters.ec2 import Pacer, TopologyClient, ec2_client
from topogov.adapters.kube import KubeHttp, KubeNodes
from topogov.adapters.kube_auth import EksTokenSource, describe_cluster, eks_api_client, kubeconfig_api_client
from topogov.adapters.snapshot_store import S3SnapshotStore
from topogov.config import ApiSettings, ReconcileSettings
from topogov.logic.labeler import Labeler


def retrying(session: Any, service: str) -> Any:
    """A client with botocore's ``standard`` retry mode stated explicitly (3 attempts in all)."""
    from botocore.config import Config

    return session.client(service, config=Config(retries={"mode": "standard", "total_max_attempts": 3}))


def aws_session(region: str | None) -> Any:
    import boto3

    return boto3.session.Session(region_name=region)


def kube_api_client(settings: ReconcileSettings | ApiSettings, session: Any) -> Any:
    if settings.kubeconfig:
        return kubeconfig_api_client(settings.kubeconfig)
    assert settings.cluster_name is not None  # enforced by the settings model
    endpoint = describe_cluster(session.client("eks"), settings.cluster_name)
    tokens = EksTokenSource(session.client("sts"), settings.cluster_name)
    return eks_api_client(endpoint, tokens)


def build_labeler(settings: ReconcileSettings, session: Any | None = None) -> Labeler:
    session = session or aws_session(settings.region)
    nodes = KubeNodes(KubeHttp(kube_api_client(settings, session)), page_size=settings.page_size)
    ec2 = TopologyClient(
        ec2_client(session, max_attempts=settings.ec2_max_attempts), Pacer(settings.ec2_rate_per_s)
    )
    store = S3SnapshotStore(retrying(session, "s3"), settings.snapshot_bucket, settings.snapshot_key)
    return Labeler(nodes, ec2, store)


def build_governance(settings: ApiSettings | None = None, session: Any | None = None) -> Any:
    """The API's service: policy (validated at cold start), snapshot, ledger, jobs."""
    from topogov.adapters.kube_jobs import KubeJobs
    from topogov.adapters.ledger import DynamoLedger
    from topogov.domain.policy import load_policy_file
    from topogov.logic.service import Governance

    settings = settings or ApiSettings.from_env()
    session = session or aws_session(settings.region)
    policy = load_policy_file(settings.policy_file)
    store = S3SnapshotStore(retrying(session, "s3"), settings.snapshot_bucket, settings.snapshot_key)
    ledger = DynamoLedger(retrying(session, "dynamodb"), settings.ledger_table, settings.counters_table)
    jobs = LazyJobs(lambda: KubeJobs(KubeHttp(kube_api_client(settings, session), max_attempts=3)))
    idempotency = None
    if settings.idempotency_table:
        from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

        idempotency = DynamoDBPersistenceLayer(
            table_name=settings.idempotency_table, boto3_client=session.client("dynamodb")
        )
    return Governance(policy=policy, snapshots=store, ledger=ledger, jobs=jobs, idempotency_store=idempotency)


def build_ledger_sync(settings: ReconcileSettings, session: Any | None = None) -> Any | None:
    """The reconcile pass's second step, when the ledger is configured: a callable -> SyncSummary."""
    if not (settings.policy_file and settings.ledger_table and settings.counters_table):
        return None
    from topogov.adapters.kube_jobs import KubeJobs
    from topogov.adapters.ledger import DynamoLedger
    from topogov.domain.policy import load_policy_file
    from topogov.logic.ledger_sync import sync_ledger

    session = session or aws_session(settings.region)
    policy = load_policy_file(settings.policy_file)
    ledger = DynamoLedger(retrying(session, "dynamodb"), settings.ledger_table, settings.counters_table)
    jobs = KubeJobs(KubeHttp(kube_api_client(settings, session), max_attempts=3))
    return lambda: sync_ledger(policy, ledger, jobs)


class LazyJobs:
    """The Kubernetes side of the API, connected on first use: a dry run, a team view or a refusal
    never pays the kubernetes client's import (~0.6 s) or the EKS token."""

    def __init__(self, factory: Any) -> None:
        self._factory = factory
        self._jobs: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._jobs is None:
            self._jobs = self._factory()
        return getattr(self._jobs, name)
