"""Suppressions of the template checks - cdk-nag (at synth), cfn-lint and checkov (tests/infra/
test_template_checks.py runs both on the synthesized template) - each on one resource, each with its
reason. None is stack-wide."""

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


def _template(construct: Any, tool: str, rule: str, reason: str) -> None:
    """Suppress cfn-lint's or checkov's ``rule`` on the one CloudFormation resource of ``construct``, in
    its ``Metadata`` (where each tool reads them: ``cfn-lint.config.ignore_checks``, ``checkov.skip``)."""
    resource = construct if isinstance(construct, CfnResource) else construct.node.default_child
    if tool == "checkov":
        entry = resource.get_metadata("checkov") or {"skip": []}
        entry["skip"].append({"id": rule, "comment": reason})
        resource.add_metadata("checkov", entry)
    elif tool == "cfn-lint":
        entry = resource.get_metadata("cfn-lint") or {"config": {"ignore_checks": []}, "reasons": {}}
        entry["config"]["ignore_checks"].append(rule)
        entry["reasons"][rule] = reason  # cfn-lint has no field for it; it ignores this one
        resource.add_metadata("cfn-lint", entry)
    else:
        raise ValueError(tool)


def suppress(stack: TopogovStack) -> None:
    suppress_nag(stack)
    suppress_template_checks(stack)


def suppress_template_checks(stack: TopogovStack) -> None:
    """cfn-lint's and checkov's findings that are not defects of this stack (the ones that were are
    fixed: CKV_AWS_115, the api function's concurrency, is bounded by topogov:apiReservedConcurrency
    unless it is 0)."""
    _function_template_checks(stack)
    _api_template_checks(stack)
    _storage_template_checks(stack)


def _function_template_checks(stack: TopogovStack) -> None:
    functions = (stack.reconciler.fn, stack.api.fn)
    for fn in functions:
        _template(
            fn.function,
            "cfn-lint",
            "W3005",
            "CDK makes a function depend on its role's construct: the role (redundant with the GetAtt of "
            "its ARN) and its default policy (not redundant: the function must not run before it)",
        )
        _template(
            fn.function,
            "checkov",
            "CKV_AWS_173",
            "the environment holds names only (cluster, tables, bucket, policy path: the settings "
            "models' to_env), no secret; Lambda encrypts it at rest with its AWS managed key",
        )
        if not fn.function.is_bound_to_vpc:
            _template(
                fn.function,
                "checkov",
                "CKV_AWS_117",
                "the functions call public AWS endpoints and the cluster's endpoint; for a cluster with a "
                "private endpoint, topogov:vpcId, subnetIds and securityGroupId put them in its VPC",
            )
        _template(
            fn.log_group,
            "checkov",
            "CKV_AWS_158",
            "CloudWatch Logs encrypts every log group at rest; the function logs decisions, caller ARNs "
            "and Kubernetes errors, never a credential, and is read by the account's operators only",
        )
    if stack.api.fn.function.is_bound_to_vpc:
        for fn in functions:
            _template(
                fn.role.node.find_child("DefaultPolicy"),
                "checkov",
                "CKV_AWS_111",
                "in VPC mode Lambda creates and deletes the function's network interfaces with this role: "
                "the actions of AWSLambdaVPCAccessExecutionRole on '*', as AWS grants them "
                "(DescribeNetworkInterfaces works on '*' only; interface ids are Lambda's to choose)",
            )
    _template(
        stack.reconciler.fn.function,
        "checkov",
        "CKV_AWS_115",
        "one pass at a time is a lease in the counters table (topogov/adapters/lease.py), not reserved "
        "concurrency: Lambda keeps 100 executions unreserved, so an account with a small limit could not "
        "deploy a reservation; a burst of events takes one short invocation each and defers to the pass",
    )
    if not stack.api.fn.function_reserved:
        _template(
            stack.api.fn.function,
            "checkov",
            "CKV_AWS_115",
            "topogov:apiReservedConcurrency=0 asked for no reservation (an account whose concurrency limit "
            "leaves none to reserve); stage and per-method throttling still bound the API's rate",
        )


def _api_template_checks(stack: TopogovStack) -> None:
    _template(
        stack.api.fn.function,
        "checkov",
        "CKV_AWS_116",
        "API Gateway invokes the api function synchronously and the caller gets the error; a dead-letter "
        "queue applies to asynchronous invocations only (the reconcile function, invoked so, has one)",
    )
    _template(
        stack.api.access_logs,
        "checkov",
        "CKV_AWS_158",
        "CloudWatch Logs encrypts every log group at rest; the access log holds caller ARNs, paths and "
        "statuses, never a body or a credential",
    )
    _template(
        stack.api.rest_api.deployment_stage,
        "checkov",
        "CKV_AWS_120",
        "every answer depends on the SigV4 caller (its team) and on the live ledger and cluster: a cache "
        "would serve one caller's answer to another, or a stale one",
    )


def _storage_template_checks(stack: TopogovStack) -> None:
    for table in (stack.storage.ledger, stack.storage.counters, stack.storage.idempotency):
        _template(
            table,
            "checkov",
            "CKV_AWS_119",
            "encrypted at rest with DynamoDB's AWS managed key (SSESpecification); only this stack's two "
            "roles read it, so a customer managed key would add a key policy to keep in step with them "
            "and KMS charges, and no control",
        )
    _template(
        stack.storage.snapshot_bucket,
        "checkov",
        "CKV_AWS_18",
        "the bucket holds one derived object (the topology snapshot, rewritten by the reconcile function "
        "only, versioned); access is auditable with CloudTrail data events without a second log bucket",
    )
    _template(
        stack.reconciler.dlq,
        "checkov",
        "CKV_AWS_27",
        "SqsManagedSseEnabled is true: SSE-SQS encrypts every message at rest (the check looks for a "
        "KmsMasterKeyId only)",
    )


def suppress_nag(stack: TopogovStack) -> None:
    _function_nag(stack)
    _api_nag(stack)
    _storage_nag(stack)


def _function_nag(stack: TopogovStack) -> None:
    reconciler_policy = stack.reconciler.fn.role.node.find_child("DefaultPolicy")
    api_policy = stack.api.fn.role.node.find_child("DefaultPolicy")
    vpc = (
        "; in VPC mode also the network-interface actions Lambda needs for the function's ENIs (those of "
        "AWSLambdaVPCAccessExecutionRole, on '*' as there: DescribeNetworkInterfaces works on '*' only)"
        if stack.api.fn.function.is_bound_to_vpc
        else ""
    )
    for policy, what in (
        (reconciler_policy, "ec2:DescribeInstanceTopology and the X-Ray actions"),
        (api_policy, "the X-Ray actions (xray:PutTraceSegments, xray:PutTelemetryRecords)"),
    ):
        _one(
            policy,
            "AwsSolutions-IAM5",
            f"{what} support no resource-level permissions: '*' is the only resource{vpc}",
            ["Resource::*"],
        )
        _one(
            policy,
            "AwsSolutions-IAM5",
            "log streams of the function's own log group (names are chosen by Lambda); nothing else",
            [LOG_STREAMS],
        )
    wildcard_roles = [r for r in stack.api.principal_roles if "*" in r or "?" in r]
    if wildcard_roles:
        _one(
            api_policy,
            "AwsSolutions-IAM5",
            "iam:GetRole on the roles teams.yaml's principal patterns name, with IAM's own wildcards: the "
            "api function reads a calling role's path (a session's ARN lacks it) to match the patterns "
            "as IAM does, and may read no role a pattern does not name",
            [f"Resource::{r}" for r in wildcard_roles],
        )
    for fn in (stack.reconciler.fn.function, stack.api.fn.function):
        _one(
            fn,
            "AwsSolutions-L1",
            "python3.12 on purpose: the dependencies layer is built for cp312 manylinux2014_x86_64 wheels "
            "(requirements/runtime.txt); moving the runtime means rebuilding and re-testing that layer",
        )


def _api_nag(stack: TopogovStack) -> None:
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


def _storage_nag(stack: TopogovStack) -> None:
    _one(
        stack.storage.snapshot_bucket,
        "AwsSolutions-S1",
        "the bucket holds one derived object (the topology snapshot, rewritten by the reconcile function "
        "only, versioned); access is auditable with CloudTrail data events without a second log bucket",
    )
