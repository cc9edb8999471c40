"""The CDK stack, synthesized offline (bundling skipped), asserted on what a platform team checks."""

from __future__ import annotations

import json

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Annotations, Match, Template

import app as appmod
from infra.config import DeployConfig, DeployConfigError

CONTEXT = {
    "topogov:clusterName": "gpu-training",
    "topogov:account": "111122223333",
    "topogov:region": "us-west-2",
}


def synth(extra=None, suppress=True):
    app = cdk.App(context={**CONTEXT, **(extra or {}), "aws:cdk:bundling-stacks": []})
    if suppress:
        stack = appmod.build(app)
    else:  # the same stack without its suppressions: proves the nag checks run
        from cdk_nag import AwsSolutionsChecks

        from infra.stack import TopogovStack

        config = DeployConfig.from_context(app.node.try_get_context)
        stack = TopogovStack(app, "Topogov", config=config, teams=["team-a"])
        cdk.Aspects.of(app).add(AwsSolutionsChecks())
    return stack, Template.from_stack(stack)


@pytest.fixture(scope="module")
def synthesized():
    return synth()


@pytest.fixture(scope="module")
def template(synthesized):
    return synthesized[1]


def statements(template):
    for policy in template.find_resources("AWS::IAM::Policy").values():
        for st in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = st["Action"] if isinstance(st["Action"], list) else [st["Action"]]
            resources = st["Resource"] if isinstance(st["Resource"], list) else [st["Resource"]]
            yield actions, resources, st


def test_no_wildcard_actions_and_star_resources_only_where_aws_allows_nothing_else(template):
    allowed_star = {"ec2:DescribeInstanceTopology", "xray:PutTraceSegments", "xray:PutTelemetryRecords"}
    for actions, resources, _ in statements(template):
        assert all("*" not in a for a in actions), actions
        if "*" in resources:
            assert set(actions) <= allowed_star, actions


def test_eks_s3_and_dynamodb_permissions_are_scoped(template):
    text = json.dumps(template.to_json())
    for actions, resources, _ in statements(template):
        if "eks:DescribeCluster" in actions:
            assert "cluster/gpu-training" in json.dumps(resources)
        if any(a.startswith("s3:") for a in actions):
            assert set(actions) <= {"s3:GetObject", "s3:PutObject"}
            assert "topology/snapshot.json" in json.dumps(resources)
        if any(a.startswith("dynamodb:") for a in actions):
            assert not any(a in ("dynamodb:Scan", "dynamodb:DeleteTable") for a in actions)
            assert all("Fn::GetAtt" in json.dumps(r) for r in resources)
    assert "AdministratorAccess" not in text


def test_every_method_requires_aws_iam(template):
    methods = template.find_resources("AWS::ApiGateway::Method")
    assert len(methods) == 8
    for m in methods.values():
        assert m["Properties"]["AuthorizationType"] == "AWS_IAM"
        assert "RequestValidatorId" in m["Properties"]


def test_stage_throttling_access_logs_and_tracing(template):
    stage = next(iter(template.find_resources("AWS::ApiGateway::Stage").values()))["Properties"]
    assert stage["TracingEnabled"] is True and "AccessLogSetting" in stage
    settings = {s["ResourcePath"] + " " + s["HttpMethod"]: s for s in stage["MethodSettings"]}
    assert settings["/* *"]["ThrottlingRateLimit"] == 50
    assert settings["/~1v1~1jobs POST"]["ThrottlingRateLimit"] == 10


def test_reconcile_function_never_overlaps_and_has_a_dead_letter_queue(template):
    fns = template.find_resources(
        "AWS::Lambda::Function", {"Properties": {"Handler": "topogov.handlers.reconcile.handler"}}
    )
    (fn,) = fns.values()
    props = fn["Properties"]
    assert props["ReservedConcurrentExecutions"] == 1 and props["Timeout"] == 900
    assert props["Runtime"] == "python3.12" and props["Architectures"] == ["x86_64"]
    assert "DeadLetterConfig" in props and props["TracingConfig"]["Mode"] == "Active"
    template.has_resource_properties("AWS::Lambda::EventInvokeConfig", {"MaximumRetryAttempts": 2})


def test_schedule_and_state_change_rules_target_reconcile(template):
    template.has_resource_properties("AWS::Events::Rule", {"ScheduleExpression": "rate(5 minutes)"})
    template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "EventPattern": {
                "source": ["aws.ec2"],
                "detail-type": ["EC2 Instance State-change Notification"],
                "detail": {"state": ["running"]},
            }
        },
    )


def test_alarms_cover_errors_throttles_failures_drift_and_the_api(template):
    alarms = template.find_resources("AWS::CloudWatch::Alarm")
    names = {m["Properties"].get("MetricName") for m in alarms.values()}
    assert {"Errors", "Throttles", "Failed", "Patched", "5XXError", "Latency", "Incomplete"} <= names
    assert all(a["Properties"]["AlarmActions"] for a in alarms.values())
    template.resource_count_is("AWS::CloudWatch::Dashboard", 1)


def test_tables_have_pitr_and_encryption_and_the_bucket_is_locked(template):
    tables = template.find_resources("AWS::DynamoDB::Table")
    assert len(tables) == 3
    for t in tables.values():
        p = t["Properties"]
        assert p["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
        assert p["SSESpecification"]["SSEEnabled"] is True
    template.has_resource_properties(
        "AWS::DynamoDB::Table", {"TimeToLiveSpecification": {"AttributeName": "expiration", "Enabled": True}}
    )
    template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "PublicAccessBlockConfiguration": {
                "BlockPublicAcls": True,
                "BlockPublicPolicy": True,
                "IgnorePublicAcls": True,
                "RestrictPublicBuckets": True,
            },
            "LifecycleConfiguration": Match.any_value(),
        },
    )
    policy = json.dumps(template.find_resources("AWS::S3::BucketPolicy"))
    assert '"aws:SecureTransport": "false"' in policy


def test_access_entries_map_each_role_to_its_group(template):
    entries = template.find_resources("AWS::EKS::AccessEntry")
    groups = sorted(e["Properties"]["KubernetesGroups"][0] for e in entries.values())
    assert groups == ["topogov:api", "topogov:reconciler"]


def test_outputs_include_the_api_url(template):
    assert "ApiUrl" in template.find_outputs("*")


def test_nag_is_clean_with_every_suppression_on_one_resource_with_a_reason(synthesized):
    stack, template = synthesized
    ann = Annotations.from_stack(stack)
    assert ann.find_error("*", Match.string_like_regexp("AwsSolutions-.*")) == []
    assert ann.find_warning("*", Match.string_like_regexp("AwsSolutions-.*")) == []
    for res in template.to_json()["Resources"].values():
        for s in res.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress") or []:
            assert len(s["reason"]) >= 20, s
    unsuppressed, _ = synth(suppress=False)
    found = Annotations.from_stack(unsuppressed).find_error("*", Match.string_like_regexp("AwsSolutions-.*"))
    assert {f.entry.data.split(":")[0].split("[")[0] for f in found} >= {
        "AwsSolutions-IAM5",
        "AwsSolutions-L1",
    }


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"topogov:clusterName": "bad name!"}, "topogov:clusterName"),
        ({"topogov:reconcileSchedule": "every 5 minutes"}, "topogov:reconcileSchedule"),
        ({"topogov:vpcId": "vpc-0123456789abcdef0"}, "vpcId, subnetIds and securityGroupId go together"),
        ({"topogov:logRetentionDays": "31"}, "topogov:logRetentionDays"),
        ({"topogov:unknown": "x", "topogov:alarmEmail": "not-an-email"}, "topogov:alarmEmail"),
    ],
)
def test_bad_context_is_a_clear_error(context, message):
    def get(key):
        return {**CONTEXT, **context}.get(key)

    with pytest.raises(DeployConfigError, match=message):
        DeployConfig.from_context(get)


def test_a_private_cluster_puts_the_functions_in_its_vpc():
    _, template = synth(
        {
            "topogov:vpcId": "vpc-0123456789abcdef0",
            "topogov:subnetIds": "subnet-0123456789abcdef0",
            "topogov:securityGroupId": "sg-0123456789abcdef0",
        }
    )
    for fn in template.find_resources("AWS::Lambda::Function").values():
        assert fn["Properties"]["VpcConfig"]["SubnetIds"] == ["subnet-0123456789abcdef0"]
