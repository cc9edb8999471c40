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
    assert len(methods) == 9  # every route of docs/openapi.json
    for m in methods.values():
        assert m["Properties"]["AuthorizationType"] == "AWS_IAM"
        assert "RequestValidatorId" in m["Properties"]


def test_stage_throttling_access_logs_and_tracing(template):
    stage = next(iter(template.find_resources("AWS::ApiGateway::Stage").values()))["Properties"]
    assert stage["TracingEnabled"] is True and "AccessLogSetting" in stage
    settings = {s["ResourcePath"] + " " + s["HttpMethod"]: s for s in stage["MethodSettings"]}
    assert settings["/* *"]["ThrottlingRateLimit"] == 50
    assert settings["/~1v1~1jobs POST"]["ThrottlingRateLimit"] == 10


def _functions(template):
    fns = template.find_resources("AWS::Lambda::Function")
    return {v["Properties"]["Handler"].split(".")[2]: v["Properties"] for v in fns.values()}


def test_reconcile_function_reserves_nothing_and_has_a_dead_letter_queue(template):
    """One pass at a time is a lease (tests/integration/test_reconcile_lease.py), not reserved
    concurrency 1: Lambda keeps 100 executions unreserved, so an account whose limit is below 101
    (a new account's can be 10) was refused the stack."""
    props = _functions(template)["reconcile"]
    assert "ReservedConcurrentExecutions" not in props and props["Timeout"] == 900
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

from .iam_eval import Request, Resolver, allows, api_gateway_lets_in, denies  # noqa: E402


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


def test_same_account_callers_need_their_own_iam_grant_and_others_are_denied(template):
    """API Gateway with IAM auth lets a caller of the API's own account in when its IAM policy *or* the
    resource policy allows it (API Gateway Developer Guide, apigateway-authorization-flow.html): a
    resource policy that *allowed* the whole account let every principal of it in with no grant of its
    own. The policy now only denies what is outside the account (or the organisation, by context)."""
    resolve = _resolver(template)
    ((api_id, api),) = template.find_resources("AWS::ApiGateway::RestApi").items()
    policy = resolve(api["Properties"]["Policy"])
    method = f"arn:aws:execute-api:us-west-2:111122223333:{api_id}/prod/POST/v1/jobs"
    mine = Request("execute-api:Invoke", method, principal_arn="arn:aws:iam::111122223333:role/TeamA",
                   context={"aws:PrincipalAccount": "111122223333"})  # fmt: skip
    theirs = Request("execute-api:Invoke", method, principal_arn="arn:aws:iam::999988887777:role/TeamA",
                     context={"aws:PrincipalAccount": "999988887777"})  # fmt: skip
    # Given a principal of this account with no IAM grant of execute-api:Invoke: refused
    assert not api_gateway_lets_in(policy, False, mine, "111122223333")
    # with the grant: let in
    assert api_gateway_lets_in(policy, True, mine, "111122223333")
    # another account's principal, even with a grant of its own: refused by the explicit deny
    assert not api_gateway_lets_in(policy, True, theirs, "111122223333")
    assert denies(policy, theirs)

    _, org = synth({"topogov:apiOrganizationId": "o-abcdefghij"})
    ((_, org_api),) = org.find_resources("AWS::ApiGateway::RestApi").items()
    org_policy = _resolver(org)(org_api["Properties"]["Policy"])
    in_org = {"aws:PrincipalAccount": "999988887777", "aws:PrincipalOrgID": "o-abcdefghij"}
    member = Request("execute-api:Invoke", method, principal_arn=theirs.principal_arn, context=in_org)
    out = {"aws:PrincipalAccount": "999988887777", "aws:PrincipalOrgID": "o-zzzzzzzzzz"}
    stranger = Request("execute-api:Invoke", method, principal_arn=theirs.principal_arn, context=out)
    home = {"aws:PrincipalAccount": "111122223333", "aws:PrincipalOrgID": "o-abcdefghij"}
    local = Request("execute-api:Invoke", method, principal_arn=mine.principal_arn, context=home)
    # another account of the organisation: its own grant and the resource policy's allow
    assert api_gateway_lets_in(org_policy, True, member, "111122223333")
    assert not api_gateway_lets_in(org_policy, False, member, "111122223333")
    # outside the organisation: denied whatever it holds
    assert not api_gateway_lets_in(org_policy, True, stranger, "111122223333")
    # this account still needs its own grant in organisation mode
    assert not api_gateway_lets_in(org_policy, False, local, "111122223333")
    assert api_gateway_lets_in(org_policy, True, local, "111122223333")


def test_the_api_is_named_per_stack_and_its_alarms_count_it_alone(template):
    """API Gateway's metrics are dimensioned by ApiName: an API named "RestApi" (CDK's default, the
    construct id) shares its alarms and dashboard with every other API of that name in the account."""
    ((_, api),) = template.find_resources("AWS::ApiGateway::RestApi").items()
    assert api["Properties"]["Name"] == "Topogov-api"
    api_alarms = [
        a["Properties"]
        for a in template.find_resources("AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("Namespace") == "AWS/ApiGateway"
    ]
    assert api_alarms
    for alarm in api_alarms:
        assert {"Name": "ApiName", "Value": "Topogov-api"} in alarm["Dimensions"], alarm


def test_the_api_compresses_answers_of_a_kilobyte_or_more(template):
    """MinimumCompressionSize set: API Gateway gzips an answer of at least 1,024 bytes for a client
    that sends Accept-Encoding (the fleet map at 10,000 nodes: 1.9 MB of JSON); unset, nothing is."""
    from infra.api import MIN_COMPRESSION_BYTES

    ((_, api),) = template.find_resources("AWS::ApiGateway::RestApi").items()
    assert api["Properties"]["MinimumCompressionSize"] == MIN_COMPRESSION_BYTES == 1024


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


def test_reservations_are_optional_and_a_small_account_needs_none():
    """``topogov:apiReservedConcurrency=0`` reserves nothing: with the reconcile function's lease,
    the stack then reserves no concurrency at all (Lambda Developer Guide, "Configuring reserved
    concurrency": at least 100 executions stay unreserved)."""
    _, default = synth()
    assert _functions(default)["api"]["ReservedConcurrentExecutions"] == 25
    _, none = synth({"topogov:apiReservedConcurrency": "0"})
    assert all("ReservedConcurrentExecutions" not in f for f in _functions(none).values())
    with pytest.raises(DeployConfigError, match="topogov:apiReservedConcurrency"):
        DeployConfig.from_context({**CONTEXT, "topogov:apiReservedConcurrency": "-1"}.get)


VPC = {
    "topogov:vpcId": "vpc-0123456789abcdef0",
    "topogov:subnetIds": "subnet-0123456789abcdef0,subnet-0123456789abcdef1",
    "topogov:securityGroupId": "sg-0123456789abcdef0",
}
ENI_ACTIONS = {
    "ec2:CreateNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSubnets",
    "ec2:DeleteNetworkInterface",
    "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
}


def _role_actions(template, handler_module):
    """Every action the role of the function whose handler is in ``handler_module`` is granted."""
    (props,) = [p for h, p in _functions(template).items() if h == handler_module]
    role = props["Role"]["Fn::GetAtt"][0]
    granted = set()
    for policy in template.find_resources("AWS::IAM::Policy").values():
        if {"Ref": role} in policy["Properties"]["Roles"]:
            for st in policy["Properties"]["PolicyDocument"]["Statement"]:
                granted |= set(st["Action"] if isinstance(st["Action"], list) else [st["Action"]])
    return granted


def test_in_a_vpc_both_roles_may_create_the_functions_network_interfaces():
    """Lambda refuses a VPC function whose execution role cannot manage its ENIs ("The provided
    execution role does not have permissions to call CreateNetworkInterface on EC2"; Lambda Developer
    Guide, VPC execution role permissions). CDK adds AWSLambdaVPCAccessExecutionRole only to roles it
    creates, and the stack passes its own."""
    _, plain = synth()
    _, vpc = synth(VPC)
    for handler in ("api", "reconcile"):
        assert not ENI_ACTIONS & _role_actions(plain, handler)
        assert _role_actions(vpc, handler) >= ENI_ACTIONS, handler
        (props,) = [p for h, p in _functions(vpc).items() if h == handler]
        assert len(props["VpcConfig"]["SubnetIds"]) == 2
    # the functions wait for the policy that grants it: Lambda checks the role when it creates them
    fns = vpc.find_resources("AWS::Lambda::Function")
    policies = set(vpc.find_resources("AWS::IAM::Policy"))
    assert all(set(f.get("DependsOn", [])) & policies for f in fns.values())


def test_a_change_of_the_layer_alone_publishes_a_new_api_version():
    """With ``@aws-cdk/aws-lambda:recognizeLayerVersion`` off (CDK's default when cdk.json does not
    set it), a function's version hash ignores its layers: a dependency-only update (a security bump in
    requirements/runtime.txt) changed the layer but published no version, and the alias ``live``
    kept serving the old dependencies. The stack sets the flag itself, so every synth (the CDK CLI,
    the tests, the local stack) hashes the layer too."""
    from aws_cdk import aws_lambda as lambda_

    from infra.stack import TopogovStack

    def version_id(layer_dir):
        app = cdk.App(context={**CONTEXT, "aws:cdk:bundling-stacks": []})
        config = DeployConfig.from_context(app.node.try_get_context)
        stack = TopogovStack(app, "Topogov", config=config, teams=["team-a"],
                             layer_code=lambda_.Code.from_asset(str(layer_dir)))  # fmt: skip
        (vid,) = Template.from_stack(stack).find_resources("AWS::Lambda::Version")
        return vid

    root = Path(__file__).resolve().parents[2]
    first = version_id(root / "requirements")
    second = version_id(root / "deploy")  # other content: another layer asset
    assert first != second
    assert version_id(root / "requirements") == first  # and the same layer, the same version


@pytest.mark.parametrize(
    ("region", "lacks"),
    [
        ("ap-east-2", "Lambda SnapStart"),
        ("ca-west-1", "DescribeInstanceTopology"),
        ("eu-south-1", "Describe"),
    ],
)
def test_a_region_without_instance_topology_or_snapstart_is_refused_at_synth(region, lacks):
    """CloudFormation would create most of the stack there, and the labeler (no DescribeInstanceTopology)
    or the API's published version (no SnapStart) would fail only once deployed."""
    with pytest.raises(DeployConfigError) as refused:
        DeployConfig.from_context({**CONTEXT, "topogov:region": region}.get)
    message = str(refused.value)
    assert "topogov:region: " in message and "Value error" not in message
    assert lacks in message and region in message
    assert "us-west-2" in message  # and where it can run instead
    assert DeployConfig.from_context({**CONTEXT, "topogov:region": "eu-west-1"}.get).region == "eu-west-1"


def test_without_a_region_in_context_the_profiles_region_is_checked(monkeypatch):
    """The CDK CLI gives an environment-agnostic app the profile's Region as CDK_DEFAULT_REGION."""
    context = {k: v for k, v in CONTEXT.items() if k not in ("topogov:region", "topogov:account")}
    monkeypatch.setenv("CDK_DEFAULT_REGION", "ap-east-2")
    app = cdk.App(context={**context, "aws:cdk:bundling-stacks": []})
    with pytest.raises(DeployConfigError, match=r"the deploy Region .*'ap-east-2'.*SnapStart"):
        appmod.build(app)


def test_how_often_adopted_labels_are_verified_is_a_deploy_setting():
    """``topogov:labelVerifyAfter`` (seconds, default a day) reaches the reconcile function as
    ``TOPOGOV_VERIFY_AFTER_S``: how often an answer adopted from EKS's own labels is asked of EC2."""
    env = _functions(synth()[1])["reconcile"]["Environment"]["Variables"]
    assert env["TOPOGOV_VERIFY_AFTER_S"] in ("86400", "86400.0")
    env = _functions(synth({"topogov:labelVerifyAfter": "3600"})[1])["reconcile"]["Environment"]["Variables"]
    assert env["TOPOGOV_VERIFY_AFTER_S"] in ("3600", "3600.0")
    with pytest.raises(DeployConfigError, match="topogov:labelVerifyAfter"):
        DeployConfig.from_context({**CONTEXT, "topogov:labelVerifyAfter": "10"}.get)
