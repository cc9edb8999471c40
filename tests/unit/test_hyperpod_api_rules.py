"""The task governance APIs' limits the domain writes down (topogov.domain.hyperpod.api) are the ones
botocore's service model of SageMaker has, and the CloudFormation registry schemas of
AWS::SageMaker::ComputeQuota / ClusterSchedulerConfig (bundled with cfn-lint) agree: a boto3 upgrade
that changes one fails here, not on a cluster."""

from __future__ import annotations

import functools
import gzip
import json
from pathlib import Path
from typing import Any

import botocore
import pytest

from topogov.domain.hyperpod import api

MODEL = Path(botocore.__file__).parent / "data" / "sagemaker" / "2017-07-24" / "service-2.json.gz"


@functools.cache
def shapes() -> dict[str, Any]:
    return dict(json.loads(gzip.decompress(MODEL.read_bytes()))["shapes"])


@functools.cache
def registry_schema(type_name: str) -> dict[str, Any]:
    cfnlint = pytest.importorskip("cfnlint")
    data = Path(cfnlint.__file__).parent / "data" / "schemas"
    digest = json.loads((data / "providers" / "us-east-1.json").read_text())[type_name]
    return dict(json.loads((data / "resources" / f"{digest}.json").read_text()))


def test_names_and_patterns_are_the_models() -> None:
    s = shapes()
    assert (s["EntityName"]["pattern"], s["EntityName"]["max"], s["EntityName"]["min"]) == (
        api.NAME_PATTERN,
        api.NAME_MAX,
        1,
    )
    assert s["ComputeQuotaTargetTeamName"]["pattern"] == api.TEAM_NAME_PATTERN
    assert s["ClusterSchedulerPriorityClassName"]["pattern"] == api.PRIORITY_CLASS_NAME_PATTERN
    assert (s["ClusterArn"]["pattern"], s["ClusterArn"]["max"]) == (
        api.CLUSTER_ARN_PATTERN,
        api.CLUSTER_ARN_MAX,
    )


def test_limits_and_ranges_are_the_models() -> None:
    s = shapes()
    assert s["ComputeQuotaResourceConfigList"]["max"] == api.MAX_QUOTA_RESOURCES
    assert s["AbsoluteBorrowLimitResourceList"]["max"] == api.MAX_QUOTA_RESOURCES
    assert s["PriorityClassList"]["max"] == api.MAX_PRIORITY_CLASSES
    assert (s["BorrowLimit"]["min"], s["BorrowLimit"]["max"]) == (api.BORROW_LIMIT_MIN, api.BORROW_LIMIT_MAX)
    for shape in ("FairShareWeight", "PriorityWeight"):
        assert (s[shape]["min"], s[shape]["max"]) == (api.WEIGHT_MIN, api.WEIGHT_MAX), shape
    for shape in ("InstanceCount", "AcceleratorsAmount", "VCpuAmount", "MemoryInGiBAmount"):
        assert (s[shape]["min"], s[shape]["max"]) == (0, api.AMOUNT_MAX), shape


def test_enums_are_the_models() -> None:
    s = shapes()
    assert tuple(s["ResourceSharingStrategy"]["enum"]) == api.STRATEGIES
    assert tuple(s["PreemptTeamTasks"]["enum"]) == api.PREEMPT_TEAM_TASKS
    for shape in ("FairShare", "IdleResourceSharing", "ActivationState"):
        assert tuple(s[shape]["enum"]) == api.SWITCH, shape
    assert tuple(s["ClusterInstanceType"]["enum"]) == api.INSTANCE_TYPES


def test_the_registry_schemas_carry_the_same_limits_anchored() -> None:
    quota = registry_schema("AWS::SageMaker::ComputeQuota")
    config = registry_schema("AWS::SageMaker::ClusterSchedulerConfig")
    defs = quota["definitions"]
    assert quota["properties"]["Name"]["pattern"] == f"^{api.NAME_PATTERN}$"
    assert quota["properties"]["ClusterArn"]["pattern"] == f"^{api.CLUSTER_ARN_PATTERN}$"
    assert defs["ComputeQuotaTarget"]["properties"]["TeamName"]["pattern"] == f"^{api.TEAM_NAME_PATTERN}$"
    assert (
        defs["ComputeQuotaConfig"]["properties"]["ComputeQuotaResources"]["maxItems"]
        == api.MAX_QUOTA_RESOURCES
    )
    assert defs["ResourceSharingConfig"]["properties"]["BorrowLimit"]["maximum"] == api.BORROW_LIMIT_MAX
    assert set(defs["ComputeQuotaResourceConfig"]["properties"]["InstanceType"]["enum"]) == set(
        api.INSTANCE_TYPES
    )
    assert config["definitions"]["PriorityClass"]["properties"]["Weight"]["maximum"] == api.WEIGHT_MAX
    assert config["definitions"]["SchedulerConfig"]["properties"]["PriorityClasses"]["maxItems"] == (
        api.MAX_PRIORITY_CLASSES
    )
    # what replaces a resource: the createOnly properties (infra and the emulator rely on these)
    assert quota["createOnlyProperties"] == [
        "/properties/Name",
        "/properties/ClusterArn",
        "/properties/ComputeQuotaTarget/TeamName",
    ]
    assert config["createOnlyProperties"] == ["/properties/Name", "/properties/ClusterArn"]


@pytest.mark.parametrize(
    ("arn", "ok"),
    [
        ("arn:aws:sagemaker:us-east-1:123456789012:cluster/a1b2c3d4e5f6", True),
        ("arn:aws-us-gov:sagemaker:us-gov-west-1:123456789012:cluster/a1b2c3d4e5f6", True),
        ("arn:aws:sagemaker:us-east-1:123456789012:cluster/my-hyperpod", False),  # a name, not the id
        ("arn:aws:sagemaker:us-east-1:12345678901:cluster/a1b2c3d4e5f6", False),
        ("arn:aws:eks:us-east-1:123456789012:cluster/a1b2c3d4e5f6", False),
        ("arn:aws:sagemaker:us-east-1:123456789012:cluster/a1b2c3d4e5f6/x", False),
    ],
)
def test_a_cluster_arn_is_checked_whole(arn: str, ok: bool) -> None:
    assert (api.cluster_arn_problem(arn) is None) == ok
