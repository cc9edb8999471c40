"""cdk-nag suppressions: each on one resource, each with its reason. None is stack-wide."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnResource
from cdk_nag import NagPackSuppression, NagSuppressions, RegexAppliesTo

from infra.stack import TopogovStack

LOG_STREAMS = RegexAppliesTo(regex=r"/^Resource::<.*Logs[0-9A-F]*\.Arn>:\*$/g")


def _one(construct: Any, rule: str, reason: str, applies_to: list | None = None) -> None:
    """Suppress ``rule`` on the one CloudFormation resource of ``construct`` (not its children)."""
    resource = construct if isinstance(construct, CfnResource) else construct.node.default_child
    NagSuppressions.add_resource_suppressions(
        resource, [NagPackSuppression(id=rule, reason=reason, applies_to=applies_to)], apply_to_children=False
    )


def suppress(stack: TopogovStack) -> None:
    reconciler_policy = stack.reconciler.fn.role.node.find_child("DefaultPolicy")
    api_policy = stack.api.fn.role.node.find_child("DefaultPolicy")
    for policy, what in (
        (reconciler_policy, "ec2:DescribeInstanceTopology and the X-Ray actions"),
        (api_policy, "the X-Ray actions (xray:PutTraceSegments, xray:PutTelemetryRecords)"),
    ):
        _one(
            policy,
            "AwsSolutions-IAM5",
            f"{what} support no resource-level permissions: '*' is the only resource",
            ["Resource::*"],
        )
        _one(
            policy,
            "AwsSolutions-IAM5",
            "log streams of the function's own log group (names are chosen by Lambda); nothing else",
            [LOG_STREAMS],
        )
    for fn in (stack.reconciler.fn.function, stack.api.fn.function):
        _one(
            fn,
            "AwsSolutions-L1",
            "python3.12 on purpose: the dependencies layer is built for cp312 manylinux2014_x86_64 wheels "
            "(requirements/runtime.txt); moving the runtime means rebuilding and re-testing that layer",
        )
    rest_api = stack.api.rest_api
    role = rest_api.node.try_find_child("CloudWatchRole")
    if role is not None:  # only with topogov:apiGatewayCloudWatchRole=true
        _one(
            role,
            "AwsSolutions-IAM4",
            "API Gateway's account-level logging role needs AmazonAPIGatewayPushToCloudWatchLogs, the "
            "managed policy AWS provides for exactly this and nothing else",
            [
                "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonAPIGatewayPushToCloudWatchLogs"
            ],
        )
    _one(
        rest_api.deployment_stage,
        "AwsSolutions-APIG3",
        "every method requires SigV4 (IAM) authentication and the stage is throttled per method; a WAF web "
        "ACL is the operator's choice (its cost and rules depend on the account's network edge)",
    )
    for method in rest_api.methods:
        _one(
            method,
            "AwsSolutions-COG4",
            "callers are IAM principals (SigV4, AWS_IAM authorization), matched to teams by ARN; "
            "there are no Cognito users",
        )
    _one(
        stack.storage.snapshot_bucket,
        "AwsSolutions-S1",
        "the bucket holds one derived object (the topology snapshot, rewritten by the reconcile function "
        "only, versioned); access is auditable with CloudTrail data events without a second log bucket",
    )
