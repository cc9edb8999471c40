"""The CDK stack, synthesized offline (bundling skipped), asserted on what a platform team checks."""

from __future__ import annotations

import json
from pathlib import Path

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
            if actions == ["s3:ListBucket"]:  # the bucket itself (tells a missing key from a forbidden one)
                assert len(resources) == 1 and resources[0]["Fn::GetAtt"][1] == "Arn"
                continue
            assert set(actions) <= {"s3:GetObject", "s3:PutObject"}
            assert "topology/snapshot.json" in json.dumps(resources)
        if any(a.startswith("dynamodb:") for a in actions):
            assert not any(a in ("dynamodb:Scan", "dynamodb:DeleteTable") for a in actions)
            assert all("Fn::GetAtt" in json.dumps(r) for r in resources)
    assert "AdministratorAccess" not in text


def test_the_deployed_methods_are_the_applications_routes(template):
    """One source: the REST API's resources and methods are the resolver's routes, no more, no less."""
    from topogov.handlers.api import routes

    resources = template.find_resources("AWS::ApiGateway::Resource")
    doc = template.to_json()["Resources"]

    def path_of(ref):
        if "Fn::GetAtt" in ref:  # the root resource
            return ""
        res = resources[ref["Ref"]]["Properties"]
        return f"{path_of(res['ParentId'])}/{res['PathPart']}"

    deployed = {}
    for m in template.find_resources("AWS::ApiGateway::Method").values():
        props = m["Properties"]
        deployed.setdefault(path_of(props["ResourceId"]), []).append(props["HttpMethod"])
    assert {p: sorted(ms) for p, ms in deployed.items()} == routes()
    assert doc  # (the template itself)


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


def test_outputs_name_the_api_url_the_tables_and_the_bucket(template):
    """What ``topogov local`` (and an operator) reads from the deployed stack: each output is the
    name of the resource of its kind, not a copy of it."""
    outputs = template.find_outputs("*")
    assert "ApiUrl" in outputs
    kinds = {
        "LedgerTable": "AWS::DynamoDB::Table",
        "CountersTable": "AWS::DynamoDB::Table",
        "IdempotencyTable": "AWS::DynamoDB::Table",
        "SnapshotBucket": "AWS::S3::Bucket",
    }
    resources = template.to_json()["Resources"]
    named = {key: outputs[key]["Value"]["Ref"] for key in kinds}
    assert {key: resources[ref]["Type"] for key, ref in named.items()} == kinds
    assert len(set(named.values())) == len(kinds)  # three tables, each named once


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


# --- alarms that can notify, and who may call the API (issue 11, items 2 and 5) -----------------------

from .iam_eval import Request, Resolver, allows  # noqa: E402


def _resolver(template) -> Resolver:
    return Resolver(template.to_json(), CONTEXT["topogov:account"], CONTEXT["topogov:region"])


def test_every_alarm_action_reaches_a_topic_cloudwatch_may_publish_to_through_its_key(template):
    """CloudWatch publishes an alarm to SNS as the service principal ``cloudwatch.amazonaws.com``: the
    topic policy must allow it ``sns:Publish`` and, for an encrypted topic, the key policy
    ``kms:GenerateDataKey*`` and ``kms:Decrypt`` (CloudWatch User Guide, AlarmThatSendsEmail.html,
    "Amazon SNS topics with SSE"); the AWS-managed ``alias/aws/sns`` key cannot be given that. Each
    alarm action is followed to its topic, the topic to its key, and both policies are evaluated for
    a publish by one of this account's alarms (and refused for another account's)."""
    doc = template.to_json()
    resolve = _resolver(template)
    resources = doc["Resources"]
    alarms = {k: v for k, v in resources.items() if v["Type"] == "AWS::CloudWatch::Alarm"}
    assert alarms
    policies = [v for v in resources.values() if v["Type"] == "AWS::SNS::TopicPolicy"]
    for alarm_id, alarm in alarms.items():
        actions = alarm["Properties"]["AlarmActions"]
        assert actions, alarm_id
        for action in actions:
            topic_id = action["Ref"]
            topic = resources[topic_id]
            assert topic["Type"] == "AWS::SNS::Topic"
            topic_arn = resolve(action)
            alarm_arn = resolve.arn(alarm_id)
            ctx = {
                "aws:SourceAccount": resolve.account,
                "aws:SourceArn": alarm_arn,
                "aws:SecureTransport": "true",
            }
            cloudwatch = "cloudwatch.amazonaws.com"
            (policy,) = [p for p in policies if {"Ref": topic_id} in p["Properties"]["Topics"]]
            topic_doc = resolve(policy["Properties"]["PolicyDocument"])
            assert allows(topic_doc, Request("sns:Publish", topic_arn, cloudwatch, context=ctx)), alarm_id
            other = {
                **ctx,
                "aws:SourceAccount": "999988887777",
                "aws:SourceArn": alarm_arn.replace(resolve.account, "999988887777"),
            }
            assert not allows(topic_doc, Request("sns:Publish", topic_arn, cloudwatch, context=other))
            key_ref = topic["Properties"]["KmsMasterKeyId"]
            assert "alias/aws/sns" not in json.dumps(key_ref), "CloudWatch cannot use the AWS-managed key"
            key_id = key_ref["Fn::GetAtt"][0]
            key = resources[key_id]["Properties"]
            assert key["EnableKeyRotation"] is True
            key_doc = resolve(key["KeyPolicy"])
            key_arn = resolve.arn(key_id)
            for kms_action in ("kms:GenerateDataKey", "kms:Decrypt"):
                assert allows(key_doc, Request(kms_action, key_arn, cloudwatch, context=ctx)), kms_action
                assert not allows(key_doc, Request(kms_action, key_arn, cloudwatch, context=other))
            # and nothing but those two for CloudWatch
            assert not allows(key_doc, Request("kms:Encrypt", key_arn, cloudwatch, context=ctx))


def test_the_api_takes_callers_of_this_account_only_or_of_the_organisation(template):
    """API Gateway evaluates the resource policy with IAM auth: a principal of another account is let
    through only when the resource policy allows it (API Gateway Developer Guide,
    apigateway-authorization-flow.html). The policy names this account; by context, an organisation."""
    resolve = _resolver(template)
    ((api_id, api),) = template.find_resources("AWS::ApiGateway::RestApi").items()
    policy = resolve(api["Properties"]["Policy"])
    method = f"arn:aws:execute-api:us-west-2:111122223333:{api_id}/prod/POST/v1/jobs"
    mine = "arn:aws:iam::111122223333:role/TeamA"
    theirs = "arn:aws:iam::999988887777:role/TeamA"
    assert allows(
        policy,
        Request(
            "execute-api:Invoke", method, principal_arn=mine, context={"aws:PrincipalAccount": "111122223333"}
        ),
    )
    assert not allows(
        policy,
        Request(
            "execute-api:Invoke",
            method,
            principal_arn=theirs,
            context={"aws:PrincipalAccount": "999988887777"},
        ),
    )
    _, org = synth({"topogov:apiOrganizationId": "o-abcdefghij"})
    ((_, org_api),) = org.find_resources("AWS::ApiGateway::RestApi").items()
    org_policy = _resolver(org)(org_api["Properties"]["Policy"])
    in_org = {"aws:PrincipalAccount": "999988887777", "aws:PrincipalOrgID": "o-abcdefghij"}
    assert allows(org_policy, Request("execute-api:Invoke", method, principal_arn=theirs, context=in_org))
    out = {"aws:PrincipalAccount": "999988887777", "aws:PrincipalOrgID": "o-zzzzzzzzzz"}
    assert not allows(org_policy, Request("execute-api:Invoke", method, principal_arn=theirs, context=out))


def test_the_account_wide_api_gateway_logging_role_is_opt_in(template):
    """``AWS::ApiGateway::Account`` is one per account and region: creating it replaces the logging
    role the account already has. Off unless ``topogov:apiGatewayCloudWatchRole`` is true."""
    template.resource_count_is("AWS::ApiGateway::Account", 0)
    _, with_role = synth({"topogov:apiGatewayCloudWatchRole": "true"})
    with_role.resource_count_is("AWS::ApiGateway::Account", 1)


def test_synth_without_a_cluster_name_fails_naming_the_key():
    def get(key):
        return {k: v for k, v in CONTEXT.items() if k != "topogov:clusterName"}.get(key)

    with pytest.raises(DeployConfigError, match="topogov:clusterName: Field required"):
        DeployConfig.from_context(get)
    assert (
        "topogov:clusterName"
        not in json.loads((Path(appmod.__file__).parent / "cdk.json").read_text())["context"]
    )


def test_alarms_are_on_what_matters_not_on_reconcile_throttles(template):
    """Reserved concurrency 1 throttles a burst of "running" events by design (Lambda retries them); an
    alarm there fires on normal days. The alarms are: an event dropped to the dead-letter queue, and
    no full pass completing within three schedule intervals (missing data counts)."""
    alarms = template.find_resources("AWS::CloudWatch::Alarm")
    by_metric = {}
    for a in alarms.values():
        props = a["Properties"]
        by_metric.setdefault(props.get("MetricName"), []).append(props)
    throttles = by_metric.get("Throttles", [])
    assert len(throttles) == 1  # the API's only
    assert "api" in throttles[0]["AlarmDescription"]
    (completed,) = by_metric["Completed"]
    assert completed["ComparisonOperator"] == "LessThanThreshold" and completed["Threshold"] == 1
    assert completed["TreatMissingData"] == "breaching" and completed["Period"] == 900
    assert by_metric["ApproximateNumberOfMessagesVisible"]


def test_both_roles_may_tell_a_missing_snapshot_from_a_forbidden_one(template):
    """S3 answers GetObject of a missing key with 404 NoSuchKey only to a caller with s3:ListBucket on
    the bucket, else 403 AccessDenied (S3 API Reference, GetObject, "Permissions"); both functions
    read the snapshot before the first pass has written it."""
    resolve = _resolver(template)
    buckets = template.find_resources("AWS::S3::Bucket")
    (bucket_id,) = buckets
    for role_hint in ("Reconcile", "Api"):
        docs = [
            resolve(p["Properties"]["PolicyDocument"])
            for k, p in template.find_resources("AWS::IAM::Policy").items()
            if k.startswith(role_hint)
        ]
        assert docs, role_hint
        grants = [
            st
            for d in docs
            for st in d["Statement"]
            if "s3:ListBucket" in (st["Action"] if isinstance(st["Action"], list) else [st["Action"]])
        ]
        assert len(grants) == 1 and "Condition" not in grants[0], role_hint
        assert grants[0]["Resource"] == resolve.arn(bucket_id), role_hint


def test_each_functions_environment_is_its_settings_model_written_out(synthesized):
    """One source for the environment: the stack writes it with the settings model the function
    parses at cold start (``to_env``), and it parses back to the same settings."""
    from topogov.settings import ApiSettings, ReconcileSettings

    stack, template = synthesized
    for construct, model in ((stack.api, ApiSettings), (stack.reconciler, ReconcileSettings)):
        env = construct.settings.to_env()
        assert model.from_env(env) == construct.settings
        (fn,) = [
            f for f in template.find_resources("AWS::Lambda::Function").values()
            if f["Properties"]["Handler"] == construct.fn.function.node.default_child.handler
        ]  # fmt: skip
        variables = fn["Properties"]["Environment"]["Variables"]
        assert {k for k in variables if k.startswith("TOPOGOV_")} == set(env)
