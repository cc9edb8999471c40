"""What SageMaker's task governance APIs accept, as botocore's service model says it (pure constants
and checks; the domain imports no botocore, so the values are written here and
``tests/unit/test_hyperpod_api_rules.py`` compares each with the model installed with boto3).

Source: botocore ``data/sagemaker/2017-07-24/service-2.json`` (boto3 1.44.x), the shapes named beside
each constant; the CloudFormation registry schemas of ``AWS::SageMaker::ComputeQuota`` and
``AWS::SageMaker::ClusterSchedulerConfig`` (bundled with cfn-lint 1.58) carry the same limits, anchored
(``^...$``), as SageMaker's own refusals print them ("Member must satisfy regular expression pattern:
^[a-zA-Z0-9](-*[a-zA-Z0-9])*", e.g. data-dot-all/dataall#177).
"""

from __future__ import annotations

import re

# EntityName: the name of a ComputeQuota or a ClusterSchedulerConfig, unique within the cluster.
NAME_MAX = 63
NAME_PATTERN = r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}"
# ComputeQuotaTargetTeamName and ClusterSchedulerPriorityClassName (same pattern, no length bound).
TEAM_NAME_PATTERN = r"[a-z0-9]([-a-z0-9]*[a-z0-9]){0,39}?"
PRIORITY_CLASS_NAME_PATTERN = TEAM_NAME_PATTERN
# ClusterArn (max 256): the cluster's id, not its name, ends the ARN.
CLUSTER_ARN_PATTERN = r"arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:cluster/[a-z0-9]{12}"
CLUSTER_ARN_MAX = 256
MAX_QUOTA_RESOURCES = 15  # ComputeQuotaResourceConfigList, AbsoluteBorrowLimitResourceList: max 15
MAX_PRIORITY_CLASSES = 10  # PriorityClassList: max 10
BORROW_LIMIT_MIN, BORROW_LIMIT_MAX = 0, 10_000  # BorrowLimit (percent; its documentation says 1-500)
WEIGHT_MIN, WEIGHT_MAX = 0, 100  # FairShareWeight, PriorityWeight
AMOUNT_MAX = 10_000_000  # InstanceCount, AcceleratorsAmount, VCpuAmount, MemoryInGiBAmount
STRATEGIES = ("Lend", "DontLend", "LendAndBorrow")  # ResourceSharingStrategy
PREEMPT_TEAM_TASKS = ("Never", "LowerPriority")  # PreemptTeamTasks
SWITCH = ("Enabled", "Disabled")  # FairShare, IdleResourceSharing, ActivationState
# ResourceSharingConfig's documented defaults (BorrowLimit 50, Strategy LendAndBorrow), PreemptTeamTasks'
# (LowerPriority), SchedulerConfig.FairShare's (Enabled) and FairShareWeight's (0).
DEFAULT_BORROW_LIMIT = 50
DEFAULT_STRATEGY = "LendAndBorrow"
DEFAULT_PREEMPT_TEAM_TASKS = "LowerPriority"
DEFAULT_FAIR_SHARE_WEIGHT = 0

# ClusterInstanceType (209 values), by family: the sizes of each.
_SIZES = {
    "p4d": "24xlarge",
    "p4de": "24xlarge",
    "p5": "48xlarge 4xlarge",
    "p6e-gb200": "36xlarge",
    "trn1": "32xlarge",
    "trn1n": "32xlarge",
    "g5": "xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 48xlarge",
    "c5": "large xlarge 2xlarge 4xlarge 9xlarge 12xlarge 18xlarge 24xlarge",
    "c5n": "large 2xlarge 4xlarge 9xlarge 18xlarge",
    "m5": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge",
    "t3": "medium large xlarge 2xlarge",
    "g6": "xlarge 2xlarge 4xlarge 8xlarge 16xlarge 12xlarge 24xlarge 48xlarge",
    "gr6": "4xlarge 8xlarge",
    "g6e": "xlarge 2xlarge 4xlarge 8xlarge 16xlarge 12xlarge 24xlarge 48xlarge",
    "p5e": "48xlarge",
    "p5en": "48xlarge",
    "p6-b200": "48xlarge",
    "trn2": "3xlarge 48xlarge",
    "c6i": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge",
    "m6i": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge",
    "r6i": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge",
    "i3en": "large xlarge 2xlarge 3xlarge 6xlarge 12xlarge 24xlarge",
    "m7i": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 48xlarge",
    "r7i": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 48xlarge",
    "r5d": "16xlarge",
    "g7e": "2xlarge 4xlarge 8xlarge 12xlarge 24xlarge 48xlarge",
    "p6-b300": "48xlarge",
    "g4dn": "xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge",
    "c6g": "medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge",
    "c7g": "medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge",
    "c8g": "medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 48xlarge",
    "c6a": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge 48xlarge",
    "m6a": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge 48xlarge",
    "m6g": "medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge",
    "m7g": "medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge",
    "m8g": "medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 48xlarge",
    "g7": "2xlarge 4xlarge 8xlarge 12xlarge 24xlarge 48xlarge",
    "c8a": "16xlarge",
    "m8a": "16xlarge",
}
INSTANCE_TYPES: tuple[str, ...] = tuple(f"ml.{f}.{s}" for f, sizes in _SIZES.items() for s in sizes.split())


def matches(pattern: str, value: str) -> bool:
    """Whether ``value`` satisfies a pattern of the model, matched whole, as the service does."""
    return re.fullmatch(pattern, value) is not None


def cluster_arn_problem(arn: str) -> str | None:
    """Why ``arn`` is not a HyperPod cluster ARN the APIs take (``ClusterArn``), or None."""
    if len(arn) > CLUSTER_ARN_MAX or not matches(CLUSTER_ARN_PATTERN, arn):
        return (
            f"{arn!r} is not a SageMaker HyperPod cluster ARN: it reads "
            "arn:aws:sagemaker:REGION:ACCOUNT:cluster/ID, ID being the cluster's 12-character id "
            "(lower-case letters and digits; DescribeCluster's ClusterArn), not its name"
        )
    return None


def cluster_region(arn: str) -> str:
    """The Region of a cluster ARN (the fourth part)."""
    return arn.split(":")[3]


def cluster_account(arn: str) -> str:
    """The account of a cluster ARN (the fifth part)."""
    return arn.split(":")[4]
