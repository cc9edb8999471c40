"""AWS::SageMaker::ComputeQuota and AWS::SageMaker::ClusterSchedulerConfig in the emulator's
CloudFormation, deployed as the CDK CLI deploys (a change set, executed), read back through SageMaker's
API with boto3 over HTTP: created, updated in place (a new version of the same quota), replaced when
a create-only property changes, deleted with the stack; and each refusal of the service failing the
resource with its message and rolling the stack back."""

from __future__ import annotations

import copy
import json
import uuid
from typing import Any

import pytest

from topogov_local.rehearse import Emulator

ROLE = "arn:aws:iam::123456789012:role/hyperpod"


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: Any) -> Any:
    em = Emulator(tmp_path_factory.mktemp("sagemaker-cfn")).start()
    try:
        yield em
    finally:
        em.stop()


@pytest.fixture
def cluster(emulator: Emulator) -> str:
    group = {
        "InstanceGroupName": "p5",
        "InstanceType": "ml.p5.48xlarge",
        "InstanceCount": 2,
        "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-lifecycle/", "OnCreate": "on_create.sh"},
        "ExecutionRole": ROLE,
    }
    name = f"hp-{uuid.uuid4().hex[:8]}"
    return str(
        emulator.client("sagemaker").create_cluster(ClusterName=name, InstanceGroups=[group])["ClusterArn"]
    )


def quota(cluster: str, team: str = "team-a", weight: int = 10, gpus: int = 8) -> dict[str, Any]:
    return {
        "Type": "AWS::SageMaker::ComputeQuota",
        "Properties": {
            "Name": team,
            "ClusterArn": cluster,
            "ComputeQuotaConfig": {
                "ComputeQuotaResources": [
                    {"InstanceType": "ml.p5.48xlarge", "Accelerators": gpus, "VCpu": 96, "MemoryInGiB": 1024}
                ],
                "ResourceSharingConfig": {"Strategy": "LendAndBorrow", "BorrowLimit": 50},
                "PreemptTeamTasks": "LowerPriority",
            },
            "ComputeQuotaTarget": {"TeamName": team, "FairShareWeight": weight},
            "ActivationState": "Enabled",
        },
    }


def scheduler(cluster: str, weight: int = 50) -> dict[str, Any]:
    return {
        "Type": "AWS::SageMaker::ClusterSchedulerConfig",
        "Properties": {
            "Name": "topogov",
            "ClusterArn": cluster,
            "SchedulerConfig": {
                "PriorityClasses": [{"Name": "training", "Weight": weight}],
                "FairShare": "Enabled",
            },
        },
    }


def template(resources: dict[str, Any]) -> dict[str, Any]:
    return {
        "Resources": resources,
        "Outputs": {
            name: {
                "Value": {
                    "Fn::GetAtt": [
                        name,
                        "ComputeQuotaId" if "Quota" in res["Type"] else "ClusterSchedulerConfigId",
                    ]
                }
            }
            for name, res in resources.items()
        },
    }


def deploy(em: Emulator, stack: str, resources: dict[str, Any], kind: str = "CREATE") -> dict[str, Any]:
    cfn = em.client("cloudformation")
    body = json.dumps(template(resources))
    name = f"cs-{uuid.uuid4().hex[:8]}"
    cfn.create_change_set(StackName=stack, ChangeSetName=name, TemplateBody=body, ChangeSetType=kind)
    cfn.execute_change_set(ChangeSetName=name, StackName=stack)
    return dict(cfn.describe_stacks(StackName=stack)["Stacks"][0])


def outputs(stack: dict[str, Any]) -> dict[str, str]:
    return {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs") or []}


def failed(em: Emulator, stack: str) -> list[tuple[str, str, str]]:
    events = em.client("cloudformation").describe_stack_events(StackName=stack)["StackEvents"]
    return [
        (e["LogicalResourceId"], e["ResourceStatus"], e.get("ResourceStatusReason", ""))
        for e in events
        if e["ResourceStatus"].endswith("_FAILED")
    ]


def test_the_policy_resources_are_created_and_read_back_through_sagemaker(
    emulator: Emulator, cluster: str
) -> None:
    stack = deploy(emulator, "policy-create", {"TeamA": quota(cluster), "Scheduler": scheduler(cluster)})
    assert stack["StackStatus"] == "CREATE_COMPLETE"
    sm = emulator.client("sagemaker")
    described = sm.describe_compute_quota(ComputeQuotaId=outputs(stack)["TeamA"])
    assert (described["Name"], described["ClusterArn"], described["Status"]) == ("team-a", cluster, "Created")
    assert described["ComputeQuotaTarget"] == {"TeamName": "team-a", "FairShareWeight": 10}
    config = sm.describe_cluster_scheduler_config(ClusterSchedulerConfigId=outputs(stack)["Scheduler"])
    assert config["SchedulerConfig"]["PriorityClasses"] == [{"Name": "training", "Weight": 50}]
    resources = emulator.client("cloudformation").describe_stack_resources(StackName="policy-create")
    physical = {r["LogicalResourceId"]: r["PhysicalResourceId"] for r in resources["StackResources"]}
    assert physical["TeamA"] == described["ComputeQuotaArn"]  # Ref is the ARN (the primary identifier)


def test_a_weight_or_quota_change_updates_the_same_quota_in_place_to_its_next_version(
    emulator: Emulator, cluster: str
) -> None:
    first = deploy(emulator, "policy-update", {"TeamA": quota(cluster), "Scheduler": scheduler(cluster)})
    qid, cid = outputs(first)["TeamA"], outputs(first)["Scheduler"]
    stack = deploy(
        emulator,
        "policy-update",
        {"TeamA": quota(cluster, weight=3, gpus=16), "Scheduler": scheduler(cluster, weight=70)},
        kind="UPDATE",
    )
    assert stack["StackStatus"] == "UPDATE_COMPLETE"
    assert outputs(stack) == {"TeamA": qid, "Scheduler": cid}
    sm = emulator.client("sagemaker")
    described = sm.describe_compute_quota(ComputeQuotaId=qid)
    assert (described["ComputeQuotaVersion"], described["Status"]) == (2, "Updated")
    assert described["ComputeQuotaTarget"]["FairShareWeight"] == 3
    assert described["ComputeQuotaConfig"]["ComputeQuotaResources"][0]["Accelerators"] == 16
    config = sm.describe_cluster_scheduler_config(ClusterSchedulerConfigId=cid)
    assert (
        config["ClusterSchedulerConfigVersion"],
        config["SchedulerConfig"]["PriorityClasses"][0]["Weight"],
    ) == (2, 70)
    updates = emulator.cloudformation_updates()["policy-update"]
    assert set(updates["updated_in_place"]) == {"TeamA", "Scheduler"} and not updates["replaced"]


def test_a_new_team_name_replaces_the_quota_deleting_the_old_one_first(
    emulator: Emulator, cluster: str
) -> None:
    first = deploy(emulator, "policy-replace", {"Team": quota(cluster, "team-a")})
    old = outputs(first)["Team"]
    # the same Name with another TeamName: the old quota must go before the new one can take its name
    renamed = quota(cluster, "team-a")
    renamed["Properties"]["ComputeQuotaTarget"]["TeamName"] = "team-b"
    stack = deploy(emulator, "policy-replace", {"Team": renamed}, kind="UPDATE")
    assert stack["StackStatus"] == "UPDATE_COMPLETE"
    new = outputs(stack)["Team"]
    sm = emulator.client("sagemaker")
    assert new != old
    assert sm.describe_compute_quota(ComputeQuotaId=new)["ComputeQuotaTarget"]["TeamName"] == "team-b"
    with pytest.raises(sm.exceptions.ResourceNotFound):
        sm.describe_compute_quota(ComputeQuotaId=old)
    replaced = emulator.cloudformation_updates()["policy-replace"]["replaced"]["Team"]
    assert (replaced["replacement"], replaced["causes"]) == ("True", ["ComputeQuotaTarget.TeamName"])


def test_a_cluster_that_does_not_exist_fails_the_create_and_the_stack_rolls_back(
    emulator: Emulator, cluster: str
) -> None:
    missing = cluster[:-12] + "zzzzzzzzzzzz"
    stack = deploy(emulator, "policy-no-cluster", {"Scheduler": scheduler(cluster), "TeamA": quota(missing)})
    assert stack["StackStatus"] == "ROLLBACK_COMPLETE"
    [(logical, status, reason)] = failed(emulator, "policy-no-cluster")
    assert (logical, status) == ("TeamA", "CREATE_FAILED")
    assert reason.startswith(
        f"Resource handler returned message: \"Could not find cluster '{missing}'. (Service: SageMaker, "
        "Status Code: 400,"
    )
    assert reason.endswith("HandlerErrorCode: InvalidRequest)")
    # nothing is left behind: the scheduler config created before it was deleted again
    sm = emulator.client("sagemaker")
    assert sm.list_cluster_scheduler_configs(ClusterArn=cluster)["ClusterSchedulerConfigSummaries"] == []


def test_a_quota_the_service_refuses_fails_the_update_and_the_stack_keeps_what_it_had(
    emulator: Emulator, cluster: str
) -> None:
    first = deploy(emulator, "policy-refused", {"TeamA": quota(cluster)})
    qid = outputs(first)["TeamA"]
    # a second quota for the same team (under another name): ConflictException
    twice = quota(cluster)
    twice["Properties"]["Name"] = "team-a-2"
    stack = deploy(
        emulator, "policy-refused", {"TeamA": quota(cluster, weight=4), "Again": twice}, kind="UPDATE"
    )
    assert stack["StackStatus"] == "UPDATE_ROLLBACK_COMPLETE"
    [(logical, status, reason)] = failed(emulator, "policy-refused")
    assert (logical, status) == ("Again", "CREATE_FAILED")
    assert (
        f"Team team-a already has a compute quota in cluster {cluster}: team-a. (Service: SageMaker" in reason
    )
    assert reason.endswith("HandlerErrorCode: ResourceConflict)")
    sm = emulator.client("sagemaker")
    summaries = sm.list_compute_quotas(ClusterArn=cluster)["ComputeQuotaSummaries"]
    assert [s["ComputeQuotaId"] for s in summaries] == [qid]
    assert sm.describe_compute_quota(ComputeQuotaId=qid)["ComputeQuotaTarget"]["FairShareWeight"] == 10


def test_a_value_out_of_the_models_range_fails_the_update_with_the_validation_message(
    emulator: Emulator, cluster: str
) -> None:
    first = deploy(emulator, "policy-range", {"TeamA": quota(cluster)})
    bad = copy.deepcopy(quota(cluster))
    bad["Properties"]["ComputeQuotaTarget"]["FairShareWeight"] = 101
    stack = deploy(emulator, "policy-range", {"TeamA": bad}, kind="UPDATE")
    assert stack["StackStatus"] == "UPDATE_ROLLBACK_COMPLETE"
    [(logical, status, reason)] = failed(emulator, "policy-range")
    assert (logical, status) == ("TeamA", "UPDATE_FAILED")
    assert (
        "1 validation error detected: Value '101' at 'computeQuotaTarget.fairShareWeight' failed to satisfy "
        "constraint: Member must have value less than or equal to 100 (Service: SageMaker, Status Code: 400"
    ) in reason
    described = emulator.client("sagemaker").describe_compute_quota(ComputeQuotaId=outputs(first)["TeamA"])
    assert described["ComputeQuotaTarget"]["FairShareWeight"] == 10


def test_deleting_the_stack_deletes_the_policy(emulator: Emulator, cluster: str) -> None:
    deploy(emulator, "policy-delete", {"TeamA": quota(cluster), "Scheduler": scheduler(cluster)})
    emulator.client("cloudformation").delete_stack(StackName="policy-delete")
    sm = emulator.client("sagemaker")
    assert sm.list_compute_quotas(ClusterArn=cluster)["ComputeQuotaSummaries"] == []
    assert sm.list_cluster_scheduler_configs(ClusterArn=cluster)["ClusterSchedulerConfigSummaries"] == []
