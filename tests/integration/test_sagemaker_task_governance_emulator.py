"""SageMaker's task governance APIs in the emulator (topogov_local.aws.sagemaker), through boto3 over
HTTP against the moto server: what they accept, each refusal with the error boto3 raises, versions
and statuses, and HyperPod clusters named by id. Client-side validation is off where a request must
reach the server to be refused there (botocore checks only required members, types and minimums)."""

from __future__ import annotations

import json
import re
import urllib.request
import uuid
from typing import Any

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.integration.conftest import REGION, aws_client

ROLE = "arn:aws:iam::123456789012:role/hyperpod"


@pytest.fixture(scope="module")
def sm(aws_url: str) -> Any:
    return aws_client(aws_url, "sagemaker", max_attempts=1)


@pytest.fixture(scope="module")
def raw(aws_url: str) -> Any:
    """A client that sends what it is given (botocore's parameter validation off)."""
    import boto3

    return boto3.client(
        "sagemaker",
        endpoint_url=aws_url,
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(parameter_validation=False, retries={"total_max_attempts": 1}),
    )


@pytest.fixture
def cluster(sm: Any) -> str:
    """A new HyperPod cluster (EKS-orchestrated) of p5 and p6-b200 instances; its ARN."""
    groups = [
        {
            "InstanceGroupName": name,
            "InstanceType": itype,
            "InstanceCount": 2,
            "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-lifecycle/", "OnCreate": "on_create.sh"},
            "ExecutionRole": ROLE,
        }
        for name, itype in (("p5", "ml.p5.48xlarge"), ("b200", "ml.p6-b200.48xlarge"))
    ]
    answer = sm.create_cluster(
        ClusterName=f"hp-{uuid.uuid4().hex[:8]}",
        InstanceGroups=groups,
        Orchestrator={"Eks": {"ClusterArn": "arn:aws:eks:us-east-1:123456789012:cluster/eks"}},
    )
    return str(answer["ClusterArn"])


def quota(cluster: str, team: str = "team-a", **over: Any) -> dict[str, Any]:
    request = {
        "Name": team,
        "ClusterArn": cluster,
        "ComputeQuotaConfig": {
            "ComputeQuotaResources": [
                {"InstanceType": "ml.p5.48xlarge", "Accelerators": 8, "VCpu": 96, "MemoryInGiB": 1024.5}
            ],
            "ResourceSharingConfig": {"Strategy": "LendAndBorrow", "BorrowLimit": 25},
        },
        "ComputeQuotaTarget": {"TeamName": team, "FairShareWeight": 10},
    }
    return request | over


def refusal(call: Any, **kw: Any) -> tuple[str, str, int]:
    with pytest.raises(ClientError) as caught:
        call(**kw)
    err = caught.value.response
    return err["Error"]["Code"], err["Error"]["Message"], err["ResponseMetadata"]["HTTPStatusCode"]


# --- clusters -----------------------------------------------------------------------------------------


def test_a_hyperpod_cluster_arn_ends_in_its_id_and_names_it_everywhere(sm: Any, cluster: str) -> None:
    assert cluster.rsplit("/", 1)[1].isalnum() and len(cluster.rsplit("/", 1)[1]) == 12
    described = sm.describe_cluster(ClusterName=cluster)
    assert described["ClusterArn"] == cluster
    assert described["Orchestrator"] == {
        "Eks": {"ClusterArn": "arn:aws:eks:us-east-1:123456789012:cluster/eks"}
    }
    assert {g["InstanceType"] for g in described["InstanceGroups"]} == {
        "ml.p5.48xlarge",
        "ml.p6-b200.48xlarge",
    }
    assert len(sm.list_cluster_nodes(ClusterName=cluster)["ClusterNodeSummaries"]) == 4


# --- ComputeQuota -------------------------------------------------------------------------------------


def test_a_quota_is_created_described_with_the_documented_defaults_and_listed(sm: Any, cluster: str) -> None:
    request = quota(cluster)
    del request["ComputeQuotaConfig"]["ResourceSharingConfig"]
    created = sm.create_compute_quota(**request)
    assert created["ComputeQuotaArn"].endswith(f":compute-quota/{created['ComputeQuotaId']}")
    described = sm.describe_compute_quota(ComputeQuotaId=created["ComputeQuotaId"])
    assert (described["Status"], described["ComputeQuotaVersion"]) == ("Created", 1)
    assert described["ActivationState"] == "Enabled"
    assert described["ComputeQuotaConfig"]["ResourceSharingConfig"] == {
        "Strategy": "LendAndBorrow",
        "BorrowLimit": 50,
    }
    assert described["ComputeQuotaConfig"]["PreemptTeamTasks"] == "LowerPriority"
    assert described["ComputeQuotaConfig"]["ComputeQuotaResources"][0]["MemoryInGiB"] == 1024.5
    (summary,) = sm.list_compute_quotas(ClusterArn=cluster)["ComputeQuotaSummaries"]
    assert (summary["ComputeQuotaId"], summary["Name"], summary["Status"]) == (
        created["ComputeQuotaId"],
        "team-a",
        "Created",
    )


def test_an_update_needs_the_current_version_and_makes_the_next(sm: Any, cluster: str) -> None:
    qid = sm.create_compute_quota(**quota(cluster))["ComputeQuotaId"]
    target = {"TeamName": "team-a", "FairShareWeight": 30}
    assert refusal(
        sm.update_compute_quota, ComputeQuotaId=qid, TargetVersion=2, ComputeQuotaTarget=target
    ) == (
        "ConflictException",
        f"TargetVersion 2 is not the current version 1 of {qid}.",
        400,
    )
    assert (
        sm.update_compute_quota(ComputeQuotaId=qid, TargetVersion=1, ComputeQuotaTarget=target)[
            "ComputeQuotaVersion"
        ]
        == 2
    )
    now = sm.describe_compute_quota(ComputeQuotaId=qid)
    assert (now["Status"], now["ComputeQuotaVersion"], now["ComputeQuotaTarget"]["FairShareWeight"]) == (
        "Updated",
        2,
        30,
    )
    before = sm.describe_compute_quota(ComputeQuotaId=qid, ComputeQuotaVersion=1)
    assert (before["ComputeQuotaVersion"], before["ComputeQuotaTarget"]["FairShareWeight"]) == (1, 10)
    # a stale writer (version 1 again) is refused; the team itself cannot change
    assert refusal(sm.update_compute_quota, ComputeQuotaId=qid, TargetVersion=1, ActivationState="Disabled")[
        0
    ] == ("ConflictException")
    assert refusal(
        sm.update_compute_quota,
        ComputeQuotaId=qid,
        TargetVersion=2,
        ComputeQuotaTarget={"TeamName": "team-z"},
    ) == ("ValidationException", "ComputeQuotaTarget.TeamName cannot be updated (it is team-a).", 400)


def test_names_and_teams_are_unique_within_a_cluster(sm: Any, cluster: str) -> None:
    sm.create_compute_quota(**quota(cluster))
    assert refusal(sm.create_compute_quota, **quota(cluster)) == (
        "ConflictException",
        f"A compute quota named team-a already exists in cluster {cluster}.",
        400,
    )
    other = quota(cluster, Name="team-a-again")
    assert refusal(sm.create_compute_quota, **other) == (
        "ConflictException",
        f"Team team-a already has a compute quota in cluster {cluster}: team-a.",
        400,
    )


def test_a_cluster_arn_must_name_an_existing_cluster(sm: Any, raw: Any, cluster: str) -> None:
    missing = cluster[:-12] + "zzzzzzzzzzzz"
    assert refusal(sm.create_compute_quota, **quota(missing)) == (
        "ValidationException",
        f"Could not find cluster '{missing}'.",
        400,
    )
    by_name = cluster.rsplit("/", 1)[0] + "/my-hyperpod-cluster"
    code, message, _ = refusal(raw.create_compute_quota, **quota(by_name))
    assert code == "ValidationException"
    assert message == (
        f"1 validation error detected: Value '{by_name}' at 'clusterArn' failed to satisfy constraint: "
        "Member must satisfy regular expression pattern: "
        "^arn:aws[a-z\\-]*:sagemaker:[a-z0-9\\-]*:[0-9]{12}:cluster/[a-z0-9]{12}"
    )


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (
            {"Name": "team_a"},
            "Value 'team_a' at 'name' failed to satisfy constraint: Member must satisfy regular expression "
            "pattern: ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}",
        ),
        (
            {"Name": "a" * 64},
            f"Value '{'a' * 64}' at 'name' failed to satisfy constraint: Member must have length less than "
            "or equal to 63",
        ),
        (
            {"ComputeQuotaTarget": {"TeamName": "Team-A"}},
            "Value 'Team-A' at 'computeQuotaTarget.teamName' failed to satisfy constraint: Member must "
            "satisfy regular expression pattern: ^[a-z0-9]([-a-z0-9]*[a-z0-9]){0,39}?",
        ),
        (
            {"ComputeQuotaTarget": {"TeamName": "team-a", "FairShareWeight": 101}},
            "Value '101' at 'computeQuotaTarget.fairShareWeight' failed to satisfy constraint: Member must "
            "have value less than or equal to 100",
        ),
        (
            {
                "ComputeQuotaConfig": {
                    "ResourceSharingConfig": {"Strategy": "LendAndBorrow", "BorrowLimit": 10001}
                }
            },
            "Value '10001' at 'computeQuotaConfig.resourceSharingConfig.borrowLimit' failed to satisfy "
            "constraint: Member must have value less than or equal to 10000",
        ),
        (
            {"ComputeQuotaConfig": {"ResourceSharingConfig": {"Strategy": "Borrow"}}},
            "Value 'Borrow' at 'computeQuotaConfig.resourceSharingConfig.strategy' failed to satisfy "
            "constraint: Member must satisfy enum value set: [Lend, DontLend, LendAndBorrow]",
        ),
        (
            {"ComputeQuotaConfig": {"PreemptTeamTasks": "Always"}},
            "Value 'Always' at 'computeQuotaConfig.preemptTeamTasks' failed to satisfy constraint: Member "
            "must satisfy enum value set: [Never, LowerPriority]",
        ),
        (
            {"ComputeQuotaConfig": {"ComputeQuotaResources": [{"InstanceType": "ml.p5.48xlarge"}] * 16}},
            "at 'computeQuotaConfig.computeQuotaResources' failed to satisfy constraint: Member must have "
            "length less than or equal to 15",
        ),
        (
            {"ComputeQuotaConfig": {"ComputeQuotaResources": [{"InstanceType": "p5.48xlarge"}]}},
            "Value 'p5.48xlarge' at 'computeQuotaConfig.computeQuotaResources.1.member.instanceType' "
            "failed to satisfy constraint: Member must satisfy enum value set: [ml.p4d.24xlarge,",
        ),
        (
            {
                "ComputeQuotaConfig": {
                    "ComputeQuotaResources": [{"InstanceType": "ml.p5.48xlarge", "VCpu": 1e8}]
                }
            },
            "Value '100000000.0' at 'computeQuotaConfig.computeQuotaResources.1.member.vCpu' failed to "
            "satisfy constraint: Member must have value less than or equal to 10000000",
        ),
        (
            {"ComputeQuotaTarget": {"FairShareWeight": 1}},
            "Value null at 'computeQuotaTarget.teamName' failed to satisfy constraint: "
            "Member must not be null",
        ),
        (
            {"ActivationState": "On"},
            "Value 'On' at 'activationState' failed to satisfy constraint: Member must satisfy enum value "
            "set: [Enabled, Disabled]",
        ),
    ],
)
def test_each_rule_of_the_model_is_refused_with_the_services_message(
    raw: Any, cluster: str, change: dict[str, Any], error: str
) -> None:
    code, message, status = refusal(raw.create_compute_quota, **quota(cluster, **change))
    assert (code, status) == ("ValidationException", 400)
    assert re.match(r"\d validation errors? detected: ", message)
    assert error in message
    assert not raw.list_compute_quotas(ClusterArn=cluster)["ComputeQuotaSummaries"]  # nothing was made


def test_several_errors_are_counted_in_one_message(raw: Any, cluster: str) -> None:
    bad = quota(cluster, Name="a_b", ComputeQuotaTarget={"TeamName": "t", "FairShareWeight": -1})
    code, message, _ = refusal(raw.create_compute_quota, **bad)
    assert code == "ValidationException"
    assert message.startswith("2 validation errors detected: Value 'a_b' at 'name'")
    assert "; Value '-1' at 'computeQuotaTarget.fairShareWeight'" in message


def test_a_member_of_the_wrong_type_is_a_serialization_error(raw: Any, cluster: str) -> None:
    code, _, status = refusal(raw.create_compute_quota, **quota(cluster, ComputeQuotaTarget={"TeamName": 7}))
    assert (code, status) == ("SerializationException", 400)


def test_unknown_ids_and_versions_are_not_found(sm: Any, cluster: str) -> None:
    assert refusal(sm.describe_compute_quota, ComputeQuotaId="zzzzzzzzzzzz")[:2] == (
        "ResourceNotFound",
        "Compute quota zzzzzzzzzzzz does not exist.",
    )
    assert refusal(sm.delete_compute_quota, ComputeQuotaId="zzzzzzzzzzzz")[0] == "ResourceNotFound"
    assert (
        refusal(sm.update_compute_quota, ComputeQuotaId="zzzzzzzzzzzz", TargetVersion=1)[0]
        == "ResourceNotFound"
    )
    qid = sm.create_compute_quota(**quota(cluster))["ComputeQuotaId"]
    assert (
        refusal(sm.describe_compute_quota, ComputeQuotaId=qid, ComputeQuotaVersion=2)[0] == "ResourceNotFound"
    )
    sm.delete_compute_quota(ComputeQuotaId=qid)
    assert refusal(sm.describe_compute_quota, ComputeQuotaId=qid)[0] == "ResourceNotFound"


def test_a_limit_set_on_the_emulator_is_refused_with_resource_limit_exceeded(
    aws_url: str, sm: Any, cluster: str
) -> None:
    def limits(method: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"{aws_url}/_topogov/sagemaker/limits", data=data, method=method)
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    assert limits("GET") == {}  # AWS documents no number: none by default
    limits("POST", {"compute_quotas_per_cluster": 1})
    try:
        sm.create_compute_quota(**quota(cluster))
        code, message, status = refusal(sm.create_compute_quota, **quota(cluster, "team-b"))
        assert (code, status) == ("ResourceLimitExceeded", 400)
        assert "limit of 1" in message
    finally:
        limits("DELETE")


def test_lists_page_and_filter_by_cluster(sm: Any, cluster: str) -> None:
    ids = {sm.create_compute_quota(**quota(cluster, f"team-{i}"))["ComputeQuotaId"] for i in range(12)}
    first = sm.list_compute_quotas(ClusterArn=cluster, SortBy="Name", SortOrder="Ascending")
    assert len(first["ComputeQuotaSummaries"]) == 10 and "NextToken" in first
    pages = sm.get_paginator("list_compute_quotas").paginate(ClusterArn=cluster)
    assert {s["ComputeQuotaId"] for page in pages for s in page["ComputeQuotaSummaries"]} == ids


# --- ClusterSchedulerConfig ---------------------------------------------------------------------------


def scheduler(cluster: str, **config: Any) -> dict[str, Any]:
    return {
        "Name": "topogov",
        "ClusterArn": cluster,
        "SchedulerConfig": {"PriorityClasses": [{"Name": "training", "Weight": 50}], **config},
    }


def test_a_cluster_policy_is_versioned_like_a_quota_and_one_per_cluster(sm: Any, cluster: str) -> None:
    cid = sm.create_cluster_scheduler_config(**scheduler(cluster))["ClusterSchedulerConfigId"]
    described = sm.describe_cluster_scheduler_config(ClusterSchedulerConfigId=cid)
    assert (described["Status"], described["ClusterSchedulerConfigVersion"]) == ("Created", 1)
    assert described["SchedulerConfig"]["FairShare"] == "Enabled"
    config = {"PriorityClasses": [{"Name": "training", "Weight": 60}], "FairShare": "Disabled"}
    assert refusal(
        sm.update_cluster_scheduler_config,
        ClusterSchedulerConfigId=cid,
        TargetVersion=3,
        SchedulerConfig=config,
    )[0] == ("ConflictException")
    sm.update_cluster_scheduler_config(ClusterSchedulerConfigId=cid, TargetVersion=1, SchedulerConfig=config)
    assert sm.describe_cluster_scheduler_config(ClusterSchedulerConfigId=cid)["SchedulerConfig"] == config
    assert refusal(sm.create_cluster_scheduler_config, **scheduler(cluster) | {"Name": "second"})[:2] == (
        "ConflictException",
        f"Cluster {cluster} already has a cluster policy: topogov ({cid}).",
    )


@pytest.mark.parametrize(
    ("config", "error"),
    [
        (
            {"PriorityClasses": [{"Name": f"c{i}", "Weight": i} for i in range(11)]},
            "at 'schedulerConfig.priorityClasses' failed to satisfy constraint: Member must have length less "
            "than or equal to 10",
        ),
        (
            {"PriorityClasses": [{"Name": "training", "Weight": 101}]},
            "Value '101' at 'schedulerConfig.priorityClasses.1.member.weight' failed to satisfy constraint: "
            "Member must have value less than or equal to 100",
        ),
        (
            {"PriorityClasses": [{"Name": "train.ing", "Weight": 1}]},
            "Value 'train.ing' at 'schedulerConfig.priorityClasses.1.member.name' failed to satisfy "
            "constraint",
        ),
        (
            {"FairShare": "Yes"},
            "Value 'Yes' at 'schedulerConfig.fairShare' failed to satisfy constraint: Member must satisfy "
            "enum value set: [Enabled, Disabled]",
        ),
    ],
)
def test_each_rule_of_the_cluster_policy_is_refused(
    raw: Any, cluster: str, config: dict[str, Any], error: str
) -> None:
    request = scheduler(cluster)
    request["SchedulerConfig"] = config
    code, message, _ = refusal(raw.create_cluster_scheduler_config, **request)
    assert code == "ValidationException" and error in message
