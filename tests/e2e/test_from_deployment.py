"""The local stack is the deployed stack (issue #17, item 2): ``cdk deploy`` of the app to the stack's
own AWS emulator, and everything the functions are wired with read back from it — the environment
of each deployed function, the names of the tables and the bucket from the stack's outputs, the
routes from the deployed RestApi. Each test asks the emulator's APIs itself (CloudFormation, Lambda,
API Gateway, STS), not the stack's code, what was deployed."""

from __future__ import annotations

from pathlib import Path

import pytest

from topogov.adapters.tables import COUNTERS, IDEMPOTENCY, LEDGER
from topogov_cli.sigv4 import credentials_for_profile, signed_request
from topogov_local.deployment import read_deployment
from topogov_local.processes import environ
from topogov_local.stack import LocalStack, StackOptions

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    options = StackOptions(
        directory=tmp_path_factory.mktemp("deployed"), fleet="p5.48xlarge=2", extra_nodes=False, api_port=0
    )
    with LocalStack(options) as s:
        yield s


def _resources(stack) -> dict[str, tuple[str, str]]:
    listed = stack.client("cloudformation").describe_stack_resources(StackName="Topogov")["StackResources"]
    return {r["LogicalResourceId"]: (r["ResourceType"], r.get("PhysicalResourceId")) for r in listed}


def _function(stack, prefix: str) -> dict:
    (name,) = [
        physical
        for logical, (kind, physical) in _resources(stack).items()
        if kind == "AWS::Lambda::Function" and logical.startswith(prefix)
    ]
    return stack.client("lambda").get_function(FunctionName=name)


def _outputs(stack) -> dict[str, str]:
    (described,) = stack.client("cloudformation").describe_stacks(StackName="Topogov")["Stacks"]
    return {o["OutputKey"]: o["OutputValue"] for o in described["Outputs"]}


@pytest.mark.parametrize(("prefix", "env_of"), [("Reconciler", "env"), ("Api", "api_env")])
def test_each_function_runs_with_the_environment_it_was_deployed_with(stack, prefix, env_of):
    deployed = _function(stack, prefix)
    variables = deployed["Configuration"]["Environment"]["Variables"]
    local = getattr(stack, env_of)()
    assert variables["TOPOGOV_CLUSTER_NAME"] == "topogov-local"
    # The same values, but for the two a local run must change: the cluster is reached by kubeconfig
    # (as the identity the function's access entry maps to), the policy is read from the unpacked code.
    same = {k: v for k, v in variables.items() if k not in ("TOPOGOV_CLUSTER_NAME", "TOPOGOV_POLICY_FILE")}
    assert {k: local.get(k) for k in same} == same
    assert "TOPOGOV_CLUSTER_NAME" not in local and Path(local["TOPOGOV_KUBECONFIG"]).is_file()
    assert variables["TOPOGOV_POLICY_FILE"] == "/var/task/policy/teams.yaml"
    assert local["TOPOGOV_POLICY_FILE"].endswith("/var/task/policy/teams.yaml")
    # ... and that file is the one in the code package Lambda was given (the repository's teams.yaml).
    code = stack.client("lambda").get_function(FunctionName=deployed["Configuration"]["FunctionName"])
    assert code["Configuration"]["Handler"].startswith("topogov.handlers.")
    assert Path(local["TOPOGOV_POLICY_FILE"]).read_bytes() == (ROOT / "teams.yaml").read_bytes()


@pytest.mark.parametrize(("prefix", "env_of"), [("Reconciler", "env"), ("Api", "api_env")])
def test_each_function_calls_aws_as_its_own_deployed_role(stack, prefix, env_of):
    import boto3

    config = _function(stack, prefix)["Configuration"]
    env = getattr(stack, env_of)()
    session = boto3.session.Session(
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        aws_session_token=env["AWS_SESSION_TOKEN"],
        region_name=env["AWS_REGION"],
    )
    who = session.client("sts", endpoint_url=stack.aws_url).get_caller_identity()["Arn"]
    role = config["Role"].rsplit("/", 1)[-1]
    assert who == f"arn:aws:sts::123456789012:assumed-role/{role}/{config['FunctionName']}"


def test_the_tables_and_the_bucket_are_the_deployed_ones_named_by_the_outputs(stack):
    outputs = _outputs(stack)
    names = {
        "TOPOGOV_LEDGER_TABLE": outputs["LedgerTable"],
        "TOPOGOV_COUNTERS_TABLE": outputs["CountersTable"],
        "TOPOGOV_IDEMPOTENCY_TABLE": outputs["IdempotencyTable"],
        "TOPOGOV_SNAPSHOT_BUCKET": outputs["SnapshotBucket"],
    }
    assert stack.names == names
    api, reconcile = stack.api_env(), stack.env()
    assert {k: api[k] for k in names} == names
    assert {k: reconcile[k] for k in names if k != "TOPOGOV_IDEMPOTENCY_TABLE"} == {
        k: v for k, v in names.items() if k != "TOPOGOV_IDEMPOTENCY_TABLE"
    }
    # No table or bucket but the stack's: nothing is created beside the deployment.
    ddb = stack.client("dynamodb")
    assert sorted(ddb.list_tables()["TableNames"]) == sorted(
        [outputs["LedgerTable"], outputs["CountersTable"], outputs["IdempotencyTable"]]
    )
    for output, keys in (
        ("LedgerTable", LEDGER),
        ("CountersTable", COUNTERS),
        ("IdempotencyTable", IDEMPOTENCY),
    ):
        schema = ddb.describe_table(TableName=outputs[output])["Table"]["KeySchema"]
        assert [k["AttributeName"] for k in schema] == [keys.partition, *([keys.sort] if keys.sort else [])]
    buckets = [b["Name"] for b in stack.client("s3").list_buckets()["Buckets"]]
    assert outputs["SnapshotBucket"] in buckets
    assert [b for b in buckets if not b.startswith("cdk-")] == [outputs["SnapshotBucket"]]  # + CDK's assets


def test_a_reconcile_pass_writes_the_snapshot_to_the_deployed_bucket(stack):
    from topogov.handlers.reconcile import handler
    from topogov_local import events
    from topogov_local.lambda_context import LocalContext

    with environ(stack.env()):
        result = handler(events.scheduled_event(), LocalContext())
    assert result["complete"] is True, result
    body = stack.client("s3").get_object(
        Bucket=_outputs(stack)["SnapshotBucket"], Key="topology/snapshot.json"
    )
    assert b"p5.48xlarge" in body["Body"].read()


def _call(stack, method: str, path: str):
    creds = credentials_for_profile("topogov-team-a", str(stack.credentials))
    return signed_request(method, stack.api.url + path, credentials=creds, region="us-east-1")


def _deployed_routes(stack) -> dict[str, list[str]]:
    (api_id,) = [p for k, (t, p) in _resources(stack).items() if t == "AWS::ApiGateway::RestApi"]
    items = stack.client("apigateway").get_resources(restApiId=api_id, embed=["methods"])["items"]
    return {i["path"]: sorted(i["resourceMethods"]) for i in items if i.get("resourceMethods")}


def test_the_gateway_serves_the_deployed_rest_apis_routes_and_no_other(stack):
    assert {p: sorted(m) for p, m in stack.api.routes.items()} == _deployed_routes(stack)
    assert _call(stack, "GET", "/v1/topology").status_code == 200
    # A method the handler has but the RestApi lacks is refused by the gateway, as API Gateway does.
    (api_id,) = [p for k, (t, p) in _resources(stack).items() if t == "AWS::ApiGateway::RestApi"]
    apigw = stack.client("apigateway")
    (topology,) = [i for i in apigw.get_resources(restApiId=api_id)["items"] if i["path"] == "/v1/topology"]
    apigw.delete_method(restApiId=api_id, resourceId=topology["id"], httpMethod="GET")
    stack.api.stop()
    stack.deployment = read_deployment(stack, stack.dir / "deployment")
    stack.start_api()
    assert "/v1/topology" not in stack.api.routes
    refused = _call(stack, "GET", "/v1/topology")
    assert refused.status_code == 403 and refused.json()["message"] == "Missing Authentication Token"
    assert _call(stack, "GET", "/v1/teams").status_code == 200  # the rest is served as before


def test_the_deployed_code_package_is_the_code_run_here(stack):
    """Lambda's task root here is the deployed function's code package, unpacked: the service package
    as it is in the repository, and the policy."""
    task_root = Path(stack.api_env()["LAMBDA_TASK_ROOT"])
    assert task_root.parts[-2:] == ("var", "task")
    shipped = sorted(str(p.relative_to(task_root)) for p in task_root.rglob("*") if p.is_file())
    tracked = sorted(
        str(p.relative_to(ROOT / "lambdas"))
        for p in (ROOT / "lambdas" / "topogov").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )
    assert shipped == sorted([*tracked, "policy/teams.yaml"])
    for rel in tracked:
        assert (task_root / rel).read_bytes() == (ROOT / "lambdas" / rel).read_bytes(), rel


def test_endpoints_json_carries_the_deployed_stacks_outputs(stack):
    """What the CLI finds the local stack by (``topogov governor`` takes the bucket from it)."""
    import json

    doc = json.loads(stack.endpoints_file.read_text())
    assert doc["outputs"] == _outputs(stack)
    assert doc["aws"] == stack.aws_url


def test_a_call_outside_a_functions_role_is_refused_and_recorded(stack):
    """The functions' sessions are judged against their roles (the suites' check that no call of
    theirs was refused relies on it): the API's role may not write the snapshot nor call EC2."""
    import boto3
    from botocore.exceptions import ClientError

    env = stack.api_env()
    session = boto3.session.Session(
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        aws_session_token=env["AWS_SESSION_TOKEN"],
        region_name="us-east-1",
    )
    with pytest.raises(ClientError) as put:
        session.client("s3", endpoint_url=stack.aws_url).put_object(
            Bucket=env["TOPOGOV_SNAPSHOT_BUCKET"], Key="topology/snapshot.json", Body=b"{}"
        )
    assert put.value.response["Error"]["Code"] == "AccessDenied"
    with pytest.raises(ClientError) as ec2:
        session.client("ec2", endpoint_url=stack.aws_url).describe_instance_topology()
    assert ec2.value.response["Error"]["Code"] in ("AccessDenied", "UnauthorizedOperation")
    refused = [(d["action"], d["allowed"]) for d in stack.emulator.decisions() if not d["allowed"]]
    assert refused == [("s3:PutObject", False), ("ec2:DescribeInstanceTopology", False)]
    # The same calls with the tests' own credentials pass: only the functions' sessions are judged.
    stack.client("ec2").describe_instance_topology()
    stack.emulator.clear_decisions()  # these refusals were the point, not a finding
