"""The task governance add-on, emulated (topogov_local.hyperpod): ComputeQuotas and the cluster policy
made through SageMaker's API in the AWS emulator (boto3 over HTTP) become Kueue objects in the real
API server with Kueue running, under the documented names; a hand edit is overwritten, a quota change
is followed, a deleted quota's objects go; none carries Topogov's managed-by label; the thread stops."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.integration.conftest import aws_client
from topogov.adapters.kube import MERGE_PATCH
from topogov.domain.labels import MANAGED_BY_LABEL, SAGEMAKER_MANAGED_QUEUE_LABEL
from topogov.domain.quantity import parse_quantity
from topogov_local.hyperpod import AddonEmulator
from topogov_local.processes import wait_until

KUEUE = "/apis/kueue.x-k8s.io/v1beta1"


@pytest.fixture
def cluster(aws_url: str) -> str:
    """A HyperPod cluster of 2 x p5.48xlarge in the AWS emulator (its ARN)."""
    sm = aws_client(aws_url, "sagemaker")
    group = {
        "InstanceGroupName": "p5",
        "InstanceType": "ml.p5.48xlarge",
        "InstanceCount": 2,
        "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-lifecycle/", "OnCreate": "on_create.sh"},
        "ExecutionRole": "arn:aws:iam::123456789012:role/hyperpod",
    }
    name = f"hp-{uuid.uuid4().hex[:8]}"
    return str(sm.create_cluster(ClusterName=name, InstanceGroups=[group])["ClusterArn"])


def quota(sm: Any, cluster: str, team: str, gpus: int, weight: int) -> str:
    return str(
        sm.create_compute_quota(
            Name=team,
            ClusterArn=cluster,
            ComputeQuotaConfig={
                "ComputeQuotaResources": [
                    {
                        "InstanceType": "ml.p5.48xlarge",
                        "Accelerators": gpus,
                        "VCpu": 24 * gpus,
                        "MemoryInGiB": 256 * gpus,
                    }
                ],
                "ResourceSharingConfig": {"Strategy": "LendAndBorrow", "BorrowLimit": 50},
            },
            ComputeQuotaTarget={"TeamName": team, "FairShareWeight": weight},
        )["ComputeQuotaId"]
    )


def get(kube: Any, path: str) -> Any:
    resp = kube.request("GET", path)
    return resp.body if resp.status == 200 else None


def weight(cq: dict[str, Any]) -> int:
    """The fair-sharing weight (Kueue keeps it as a quantity: 10 comes back "10")."""
    return int(parse_quantity(cq["spec"]["fairSharing"]["weight"]))


def gpus(cq: dict[str, Any]) -> int:
    (flavor,) = cq["spec"]["resourceGroups"][0]["flavors"]
    return int(next(r["nominalQuota"] for r in flavor["resources"] if r["name"] == "nvidia.com/gpu"))


def test_the_addon_writes_follows_and_overwrites_its_kueue_objects(
    aws_url: str, cluster: str, kube: Any
) -> None:
    sm = aws_client(aws_url, "sagemaker")
    team_a = quota(sm, cluster, "team-a", gpus=8, weight=10)
    quota(sm, cluster, "team-b", gpus=4, weight=5)
    sm.create_cluster_scheduler_config(
        Name="topogov",
        ClusterArn=cluster,
        SchedulerConfig={"PriorityClasses": [{"Name": "training", "Weight": 50}]},
    )
    # A Topogov object beside them, which the add-on must leave alone
    mine = {"metadata": {"name": "topogov-own", "labels": {MANAGED_BY_LABEL: "topogov"}}}
    assert kube.request("POST", "/api/v1/namespaces", body=mine).status == 201
    addon = AddonEmulator(aws_url, cluster, kube)

    # When the add-on makes its pass
    first = addon.sync()
    # Then the documented objects exist, accepted by the API server and Kueue's webhooks
    assert "Namespace/hyperpod-ns-team-a" in first.created
    assert "LocalQueue/hyperpod-ns-team-b/hyperpod-ns-team-b-localqueue" in first.created
    cq = get(kube, f"{KUEUE}/clusterqueues/hyperpod-ns-team-a-clusterqueue")
    assert gpus(cq) == 8 and weight(cq) == 10
    assert get(kube, f"{KUEUE}/resourceflavors/ml.p5.48xlarge")["spec"]["nodeLabels"] == {
        "node.kubernetes.io/instance-type": "ml.p5.48xlarge"
    }
    assert get(kube, f"{KUEUE}/workloadpriorityclasses/training-priority")["value"] == 50
    ns = get(kube, "/api/v1/namespaces/hyperpod-ns-team-a")
    assert ns["metadata"]["labels"]["sagemaker.amazonaws.com/quota-allocation-id"] == "team-a"
    for obj in addon.owned():
        assert MANAGED_BY_LABEL not in obj["metadata"]["labels"], obj["metadata"]["name"]
    # Kueue takes the queue into use (its flavors exist)
    wait_until(
        lambda: any(
            c["type"] == "Active" and c["status"] == "True"
            for c in (
                get(kube, f"{KUEUE}/clusterqueues/hyperpod-ns-team-a-clusterqueue").get("status") or {}
            ).get("conditions", [])
        ),
        "team-a's ClusterQueue active",
        timeout_s=60,
    )
    # And a second pass with nothing changed writes nothing
    assert not addon.sync().changed

    # When someone edits the add-on's queue by hand and deletes a LocalQueue
    edit = {"spec": {"fairSharing": {"weight": 99}}}
    resp = kube.request(
        "PATCH", f"{KUEUE}/clusterqueues/hyperpod-ns-team-a-clusterqueue", body=edit, content_type=MERGE_PATCH
    )
    assert resp.status == 200
    path = f"{KUEUE}/namespaces/hyperpod-ns-team-b/localqueues/hyperpod-ns-team-b-localqueue"
    assert kube.request("DELETE", path).status == 200
    again = addon.sync()
    # Then the add-on puts them back as the quotas say
    assert again.updated == ["ClusterQueue/hyperpod-ns-team-a-clusterqueue"]
    assert again.created == ["LocalQueue/hyperpod-ns-team-b/hyperpod-ns-team-b-localqueue"]
    assert weight(get(kube, f"{KUEUE}/clusterqueues/hyperpod-ns-team-a-clusterqueue")) == 10

    # When team-a's quota is updated through SageMaker's API and team-b's deleted
    sm.update_compute_quota(
        ComputeQuotaId=team_a,
        TargetVersion=1,
        ComputeQuotaTarget={"TeamName": "team-a", "FairShareWeight": 3},
    )
    (team_b,) = [
        s["ComputeQuotaId"]
        for s in sm.list_compute_quotas(ClusterArn=cluster)["ComputeQuotaSummaries"]
        if s["Name"] == "team-b"
    ]
    sm.delete_compute_quota(ComputeQuotaId=team_b)
    third = addon.sync()
    # Then the queue follows and team-b's objects are gone; Topogov's namespace is untouched
    assert weight(get(kube, f"{KUEUE}/clusterqueues/hyperpod-ns-team-a-clusterqueue")) == 3
    assert set(third.deleted) == {
        "LocalQueue/hyperpod-ns-team-b/hyperpod-ns-team-b-localqueue",
        "ClusterQueue/hyperpod-ns-team-b-clusterqueue",
        "Namespace/hyperpod-ns-team-b",
    }
    # (Kueue's finalizer lets the queue go once nothing uses it)
    wait_until(
        lambda: get(kube, f"{KUEUE}/clusterqueues/hyperpod-ns-team-b-clusterqueue") is None,
        "team-b's ClusterQueue gone",
        timeout_s=60,
    )
    own = get(kube, "/api/v1/namespaces/topogov-own")["metadata"]["labels"]
    assert own[MANAGED_BY_LABEL] == "topogov" and SAGEMAKER_MANAGED_QUEUE_LABEL not in own


def test_as_a_thread_it_follows_a_change_and_stops(aws_url: str, cluster: str, kube: Any) -> None:
    sm = aws_client(aws_url, "sagemaker")
    qid = quota(sm, cluster, "team-c", gpus=8, weight=1)
    path = f"{KUEUE}/clusterqueues/hyperpod-ns-team-c-clusterqueue"
    addon = AddonEmulator(aws_url, cluster, kube, interval_s=0.2)
    try:
        addon.start()
        wait_until(lambda: get(kube, path), "team-c's ClusterQueue", timeout_s=60)
        sm.update_compute_quota(
            ComputeQuotaId=qid,
            TargetVersion=1,
            ComputeQuotaConfig={
                "ComputeQuotaResources": [
                    {"InstanceType": "ml.p5.48xlarge", "Accelerators": 16, "VCpu": 384, "MemoryInGiB": 4096}
                ]
            },
        )
        wait_until(lambda: gpus(get(kube, path)) == 16, "team-c's ClusterQueue at 16 GPUs", timeout_s=60)
        assert addon.last_error is None
    finally:
        addon.stop()
    assert not addon.running
    passes = addon.passes
    labels = get(kube, "/api/v1/namespaces/hyperpod-ns-team-c")["metadata"]["labels"]
    assert labels[SAGEMAKER_MANAGED_QUEUE_LABEL] == "true"
    # stopped: a change made now is not followed
    sm.delete_compute_quota(ComputeQuotaId=qid)
    assert addon.passes == passes and get(kube, path) is not None


def test_a_cluster_name_instead_of_its_arn_is_refused(aws_url: str, kube: Any) -> None:
    with pytest.raises(ValueError, match="12-character id"):
        AddonEmulator(aws_url, "arn:aws:sagemaker:us-east-1:123456789012:cluster/my-hyperpod", kube)
