"""A deployed stack read back through the services' own APIs: its resources, outputs and template
(:func:`stack_state`), its API's routes and compression, whether a resource still exists, and a
deployed function's runtime as Lambda gives it (:class:`FunctionRuntime`: its environment, its role's
credentials, its code package unpacked as ``/var/task``)."""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from topogov_local.rehearse.emulator import ACCOUNT, REGION, STACK, TASK_ROOT, Emulator, RehearsalError


# --- the deployed stack -----------------------------------------------------------------------------
@dataclass
class StackState:
    status: str
    resources: dict[str, tuple[str, str | None]]  # logical id -> (type, physical id)
    outputs: dict[str, str]
    template: dict[str, Any]

    def of_type(self, kind: str) -> dict[str, str | None]:
        return {k: p for k, (t, p) in self.resources.items() if t == kind}

    def physical(self, kind: str) -> str:
        (only,) = self.of_type(kind).values()
        assert only is not None
        return only

    def logical(self, kind: str, prefix: str) -> str:
        (only,) = [k for k in self.of_type(kind) if k.startswith(prefix)]
        return only


def stack_state(cloudformation: Any, name: str = STACK) -> StackState:
    stack = cloudformation.describe_stacks(StackName=name)["Stacks"][0]
    resources = {
        r["LogicalResourceId"]: (r["ResourceType"], r.get("PhysicalResourceId"))
        for r in cloudformation.describe_stack_resources(StackName=name)["StackResources"]
    }
    body = cloudformation.get_template(StackName=name)["TemplateBody"]
    template = body if isinstance(body, dict) else json.loads(body)
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs") or []}
    return StackState(stack["StackStatus"], resources, outputs, template)


def deployed_compression(apigateway: Any, rest_api_id: str) -> int | None:
    """The deployed RestApi's ``minimumCompressionSize`` as GetRestApi reports it (None: off)."""
    size = apigateway.get_rest_api(restApiId=rest_api_id).get("minimumCompressionSize")
    return None if size is None else int(size)


def deployed_routes(apigateway: Any, rest_api_id: str) -> dict[str, list[str]]:
    """The deployed RestApi's resources and their methods: path -> sorted methods."""
    items = apigateway.get_resources(restApiId=rest_api_id, embed=["methods"], limit=500)["items"]
    return {i["path"]: sorted(i["resourceMethods"]) for i in items if i.get("resourceMethods")}


# --- a deployed function, run here -------------------------------------------------------------------
@dataclass
class FunctionRuntime:
    name: str  # the deployed function's name
    role_arn: str
    environment: dict[str, str]
    credentials: dict[str, str]
    task_root: Path

    @property
    def principal(self) -> str:
        """The ARN the function's calls carry: its role's session (``assumed-role/<role>/<function>``)."""
        role = self.role_arn.rsplit("/", 1)[-1]
        return f"arn:aws:sts::{ACCOUNT}:assumed-role/{role}/{self.name}"


class Clients(Protocol):
    """Where the boto3 clients of an emulator come from (:class:`Emulator`, the local stack)."""

    def client(self, service: str) -> Any: ...


def function_runtime(
    emulator: Clients, state: StackState, logical_id: str, directory: Path
) -> FunctionRuntime:
    """What Lambda would give the deployed function ``logical_id`` (see the module doc)."""
    lam, iam, s3, sts = (emulator.client(s) for s in ("lambda", "iam", "s3", "sts"))
    name = state.resources[logical_id][1]
    assert name
    config = lam.get_function(FunctionName=name)["Configuration"]
    role_arn = config["Role"]
    trust = iam.get_role(RoleName=role_arn.rsplit("/", 1)[-1])["Role"]["AssumeRolePolicyDocument"]
    services = [
        s
        for st in trust["Statement"]
        if st.get("Effect") == "Allow" and "sts:AssumeRole" in as_list(st.get("Action"))
        for s in as_list((st.get("Principal") or {}).get("Service"))
    ]
    if "lambda.amazonaws.com" not in services:
        raise RehearsalError(f"{role_arn}: its trust policy does not let Lambda assume it ({trust})")
    # The Lambda service assumes the role, the session named after the function.
    creds = sts.assume_role(RoleArn=role_arn, RoleSessionName=name, DurationSeconds=3600)["Credentials"]
    code = state.template["Resources"][logical_id]["Properties"]["Code"]
    bucket = _resolve(code["S3Bucket"], state)
    package = s3.get_object(Bucket=bucket, Key=code["S3Key"])["Body"].read()
    # One directory per code version (its asset key): a new version runs in new execution environments,
    # so a handler kept warm in this process builds itself again from the new code's policy and paths
    task_root = Path(directory) / name / Path(str(code["S3Key"])).stem / "var" / "task"
    task_root.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(io.BytesIO(package)) as zf:
        zf.extractall(task_root)
    env = {
        k: (str(task_root) + v[len(TASK_ROOT) :] if v.startswith(TASK_ROOT + "/") else v)
        for k, v in (config.get("Environment") or {}).get("Variables", {}).items()
    }
    return FunctionRuntime(
        name=name,
        role_arn=role_arn,
        environment=env,
        credentials={k: creds[k] for k in ("AccessKeyId", "SecretAccessKey", "SessionToken")},
        task_root=task_root,
    )


def lambda_environ(fn: FunctionRuntime, aws_url: str) -> dict[str, str]:
    """The process environment the function runs with here (see the module doc)."""
    return {
        **fn.environment,
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ACCESS_KEY_ID": fn.credentials["AccessKeyId"],
        "AWS_SECRET_ACCESS_KEY": fn.credentials["SecretAccessKey"],
        "AWS_SESSION_TOKEN": fn.credentials["SessionToken"],
        "AWS_LAMBDA_FUNCTION_NAME": fn.name,
        "LAMBDA_TASK_ROOT": str(fn.task_root),
        "AWS_ENDPOINT_URL": aws_url,
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_LOG_LEVEL": "WARNING",
    }


def _resolve(value: Any, state: StackState) -> str:
    """``Fn::Sub`` of the bootstrap's asset bucket name (the only intrinsic a Code property has)."""
    if isinstance(value, str):
        return value
    if "Fn::Sub" in value:
        text = value["Fn::Sub"]
        return str(text).replace("${AWS::AccountId}", ACCOUNT).replace("${AWS::Region}", REGION)
    raise RehearsalError(f"cannot resolve {value}")


def as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


# --- after cdk destroy -----------------------------------------------------------------------------------
_PARENT = {  # a resource that lives inside another: it is gone when that one is
    "AWS::SQS::QueuePolicy": "Queues",
    "AWS::SNS::TopicPolicy": "Topics",
    "AWS::IAM::Policy": "Roles",
    "AWS::Lambda::Permission": "FunctionName",
    "AWS::Lambda::EventInvokeConfig": "FunctionName",
    "AWS::ApiGateway::Resource": "RestApiId",
    "AWS::ApiGateway::Method": "RestApiId",
    "AWS::ApiGateway::Deployment": "RestApiId",
    "AWS::ApiGateway::Stage": "RestApiId",
    "AWS::ApiGateway::RequestValidator": "RestApiId",
}


def _referenced(value: Any) -> str | None:
    value = value[0] if isinstance(value, list) else value
    if isinstance(value, dict):
        if "Ref" in value:
            return str(value["Ref"])
        if "Fn::GetAtt" in value:
            return str(value["Fn::GetAtt"][0])
    return None


def resource_exists(emulator: Emulator, state: StackState, logical: str) -> bool | None:
    """Whether the deployed resource ``logical`` still exists, asked of its service's API (None: a
    type with no service object)."""
    from botocore.exceptions import ClientError

    kind, physical = state.resources[logical]
    props = state.template["Resources"][logical].get("Properties") or {}
    if kind in _PARENT:
        parent = _referenced(props.get(_PARENT[kind]))
        return resource_exists(emulator, state, parent) if parent in state.resources else None
    c = emulator.client
    try:
        if kind == "AWS::DynamoDB::Table":
            c("dynamodb").describe_table(TableName=physical)
        elif kind == "AWS::S3::Bucket":
            c("s3").head_bucket(Bucket=physical)
        elif kind == "AWS::S3::BucketPolicy":
            bucket = state.resources[_referenced(props["Bucket"]) or ""][1]
            c("s3").get_bucket_policy(Bucket=bucket)
        elif kind == "AWS::SQS::Queue":
            c("sqs").get_queue_attributes(QueueUrl=str(physical))
        elif kind == "AWS::Logs::LogGroup":
            groups = c("logs").describe_log_groups(logGroupNamePrefix=str(physical))["logGroups"]
            return any(g["logGroupName"] == physical for g in groups)
        elif kind == "AWS::IAM::Role":
            c("iam").get_role(RoleName=str(physical))
        elif kind == "AWS::Lambda::Function":
            c("lambda").get_function(FunctionName=str(physical))
        elif kind == "AWS::Lambda::LayerVersion":
            c("lambda").get_layer_version_by_arn(Arn=str(physical))
        elif kind == "AWS::Lambda::Version":
            c("lambda").get_function(FunctionName=str(physical))
        elif kind == "AWS::Lambda::Alias":  # physical id: the alias ARN, <function ARN>:<alias>
            function, alias = str(physical).rsplit(":", 1)
            c("lambda").get_alias(FunctionName=function, Name=alias)
        elif kind == "AWS::Events::Rule":
            c("events").describe_rule(Name=str(physical))
        elif kind == "AWS::ApiGateway::RestApi":
            c("apigateway").get_rest_api(restApiId=str(physical))
        elif kind == "AWS::EKS::AccessEntry":
            cluster, principal = str(physical).split("|", 1)
            entries = emulator.control("GET", f"/_topogov/eks/clusters/{cluster}/access-entries")[
                "accessEntries"
            ]
            return any(e["principalArn"] == principal for e in entries)
        elif kind == "AWS::KMS::Key":
            key = c("kms").describe_key(KeyId=str(physical))["KeyMetadata"]
            return key["KeyState"] not in ("PendingDeletion", "PendingReplicaDeletion")
        elif kind == "AWS::SNS::Topic":
            c("sns").get_topic_attributes(TopicArn=str(physical))
        elif kind == "AWS::CloudWatch::Alarm":
            return bool(c("cloudwatch").describe_alarms(AlarmNames=[str(physical)])["MetricAlarms"])
        elif kind == "AWS::CloudWatch::Dashboard":
            c("cloudwatch").get_dashboard(DashboardName=str(physical))
        else:
            return None
    except ClientError:
        return False
    return True
