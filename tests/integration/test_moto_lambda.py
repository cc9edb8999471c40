"""Lambda's account rules in the emulator (topogov_local.aws.lambdas): the account's concurrency limit,
what a reservation may leave unreserved, and that a VPC function's role can create network
interfaces. boto3 against the moto server, over HTTP."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from botocore.exceptions import ClientError

from topogov_local.rehearse import Emulator

LAMBDA_TRUST = {
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}
    ],
}
BELOW_MINIMUM = (
    "Specified ReservedConcurrentExecutions for function decreases account's "
    "UnreservedConcurrentExecution below its minimum value of [{}]."
)


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    em = Emulator(tmp_path_factory.mktemp("moto-lambda")).start()
    try:
        yield em
    finally:
        em.stop()


@pytest.fixture
def account(emulator):
    """The emulator's Lambda account limit, put back to moto's default (and no function left) after."""
    yield emulator
    fns = emulator.client("lambda")
    for fn in fns.list_functions()["Functions"]:
        fns.delete_function(FunctionName=fn["FunctionName"])
    emulator.control("POST", "/_topogov/lambda/account", {"concurrent_executions": 1000})


def _zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("index.py", "def handler(event, context):\n    return event\n")
    return buf.getvalue()


def _role(em: Emulator, name: str, actions: list[str] | None = None) -> str:
    iam = em.client("iam")
    arn = str(
        iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(LAMBDA_TRUST))["Role"]["Arn"]
    )
    if actions:
        doc = {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}],
        }
        iam.put_role_policy(RoleName=name, PolicyName="inline", PolicyDocument=json.dumps(doc))
    return arn


def _create(em: Emulator, name: str, role: str, **extra) -> dict:
    return em.client("lambda").create_function(
        FunctionName=name,
        Runtime="python3.12",
        Role=role,
        Handler="index.handler",
        Code={"ZipFile": _zip()},
        **extra,
    )


def _refusal(excinfo: pytest.ExceptionInfo[ClientError]) -> tuple[str, str, int]:
    err = excinfo.value.response
    return err["Error"]["Code"], err["Error"]["Message"], err["ResponseMetadata"]["HTTPStatusCode"]


def test_the_account_limit_is_moto_s_default_until_set_and_get_account_settings_answers_it(account):
    # Given a fresh emulator
    assert account.control("GET", "/_topogov/lambda/account") == {
        "concurrent_executions": 1000,
        "unreserved_minimum": 100,
    }
    fns = account.client("lambda")
    assert fns.get_account_settings()["AccountLimit"]["ConcurrentExecutions"] == 1000
    # When the limit is that of a new account and a function reserves nothing
    assert account.control("POST", "/_topogov/lambda/account", {"concurrent_executions": 10}) == {
        "concurrent_executions": 10,
        "unreserved_minimum": 10,
    }
    _create(account, "plain", _role(account, "plain-role"))
    # Then GetAccountSettings says so, all of it unreserved
    limit = fns.get_account_settings()["AccountLimit"]
    assert (limit["ConcurrentExecutions"], limit["UnreservedConcurrentExecutions"]) == (10, 10)
    assert fns.get_account_settings()["AccountUsage"]["FunctionCount"] == 1


def test_a_bad_limit_is_refused_naming_the_field(account):
    with pytest.raises(Exception) as refused:
        account.control("POST", "/_topogov/lambda/account", {"concurrent_executions": -1})
    assert refused.value.code == 400  # type: ignore[attr-defined]
    assert b"concurrent_executions must be an integer >= 0" in refused.value.read()  # type: ignore[attr-defined]


def test_the_pre_fix_reservations_of_1_and_25_are_refused_in_a_10_execution_account(account):
    # Given a new account's limit of 10
    account.control("POST", "/_topogov/lambda/account", {"concurrent_executions": 10})
    role = _role(account, "fn-role")
    # When the reconcile function reserves 1
    _create(account, "reconcile", role)
    with pytest.raises(ClientError) as refused:
        account.client("lambda").put_function_concurrency(
            FunctionName="reconcile", ReservedConcurrentExecutions=1
        )
    # Then Lambda's refusal, with the minimum of an account below 100: all of it
    assert _refusal(refused) == ("InvalidParameterValueException", BELOW_MINIMUM.format(10), 400)
    # And PutFunctionConcurrency of the api function's 25 is refused the same way
    _create(account, "api", role)
    with pytest.raises(ClientError) as refused:
        account.client("lambda").put_function_concurrency(FunctionName="api", ReservedConcurrentExecutions=25)
    assert _refusal(refused) == ("InvalidParameterValueException", BELOW_MINIMUM.format(10), 400)
    # While functions that reserve nothing deploy
    assert account.client("lambda").get_function(FunctionName="api")["Configuration"]["FunctionName"] == "api"


def test_reservations_may_leave_exactly_100_unreserved(account):
    # Given an account of 126: 1 + 25 leave exactly the 100 Lambda keeps
    account.control("POST", "/_topogov/lambda/account", {"concurrent_executions": 126})
    role = _role(account, "fn-role-126")
    fns = account.client("lambda")
    _create(account, "reconcile", role)
    fns.put_function_concurrency(FunctionName="reconcile", ReservedConcurrentExecutions=1)
    _create(account, "api", role)
    assert (
        fns.put_function_concurrency(FunctionName="api", ReservedConcurrentExecutions=25)[
            "ReservedConcurrentExecutions"
        ]
        == 25
    )
    assert fns.get_account_settings()["AccountLimit"]["UnreservedConcurrentExecutions"] == 100
    # A function's own reservation is not counted twice when it changes
    fns.put_function_concurrency(FunctionName="api", ReservedConcurrentExecutions=24)
    # When one more is reserved
    with pytest.raises(ClientError) as refused:
        fns.put_function_concurrency(FunctionName="api", ReservedConcurrentExecutions=26)
    # Then it is refused: 126 - 1 - 26 = 99 < 100
    assert _refusal(refused) == ("InvalidParameterValueException", BELOW_MINIMUM.format(100), 400)
    assert fns.get_function_concurrency(FunctionName="api")["ReservedConcurrentExecutions"] == 24


ENI_ACTIONS = ["ec2:CreateNetworkInterface", "ec2:DescribeNetworkInterfaces", "ec2:DeleteNetworkInterface"]
NO_ENI = "The provided execution role does not have permissions to call {} on EC2"


def _vpc(em: Emulator) -> dict:
    ec2 = em.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.9.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.9.1.0/24")["Subnet"]["SubnetId"]
    group = ec2.create_security_group(GroupName=f"fn-{subnet}", Description="fn", VpcId=vpc)["GroupId"]
    return {"SubnetIds": [subnet], "SecurityGroupIds": [group]}


@pytest.mark.parametrize(
    ("actions", "missing"),
    [
        (["logs:CreateLogStream", "logs:PutLogEvents"], "CreateNetworkInterface"),  # the pre-fix roles
        (["ec2:CreateNetworkInterface"], "DescribeNetworkInterfaces"),
        (["ec2:CreateNetworkInterface", "ec2:DescribeNetworkInterfaces"], "DeleteNetworkInterface"),
    ],
)
def test_a_vpc_function_whose_role_cannot_manage_network_interfaces_is_refused(account, actions, missing):
    # Given a role without all three of AWSLambdaVPCAccessExecutionRole's interface actions
    role = _role(account, f"no-eni-{missing}", actions)
    # When a function is created in a VPC with it
    with pytest.raises(ClientError) as refused:
        _create(account, f"vpc-fn-{missing}", role, VpcConfig=_vpc(account))
    # Then Lambda's refusal names the first action the role lacks
    assert _refusal(refused) == ("InvalidParameterValueException", NO_ENI.format(missing), 400)
    # And the same role is fine for a function outside a VPC
    _create(account, f"plain-fn-{missing}", role)


def test_describe_network_interfaces_must_be_allowed_on_all_resources_and_a_deny_wins(account):
    iam = account.client("iam")
    scoped = _role(account, "scoped-describe")
    doc = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": ["ec2:CreateNetworkInterface", "ec2:DeleteNetworkInterface"],
             "Resource": "arn:aws:ec2:*:*:network-interface/*"},
            {"Effect": "Allow", "Action": "ec2:DescribeNetworkInterfaces",
             "Resource": "arn:aws:ec2:*:*:network-interface/*"},
        ],
    }  # fmt: skip
    iam.put_role_policy(RoleName="scoped-describe", PolicyName="p", PolicyDocument=json.dumps(doc))
    with pytest.raises(ClientError) as refused:
        _create(account, "scoped", scoped, VpcConfig=_vpc(account))
    assert _refusal(refused)[1] == NO_ENI.format("DescribeNetworkInterfaces")
    denied = _role(account, "denied-create", ENI_ACTIONS)
    deny = {"Version": "2012-10-17", "Statement": [
        {"Effect": "Deny", "Action": "ec2:CreateNetworkInterface", "Resource": "*"}]}  # fmt: skip
    iam.put_role_policy(RoleName="denied-create", PolicyName="deny", PolicyDocument=json.dumps(deny))
    with pytest.raises(ClientError) as refused:
        _create(account, "denied", denied, VpcConfig=_vpc(account))
    assert _refusal(refused)[1] == NO_ENI.format("CreateNetworkInterface")


def test_a_role_with_the_interface_actions_deploys_in_a_vpc_inline_or_attached(account):
    # Given the three actions inline, and in an attached customer managed policy
    inline = _role(account, "eni-inline", ENI_ACTIONS)
    attached = _role(account, "eni-attached")
    doc = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": ENI_ACTIONS, "Resource": "*"}],
    }
    iam = account.client("iam")
    arn = iam.create_policy(PolicyName="eni", PolicyDocument=json.dumps(doc))["Policy"]["Arn"]
    iam.attach_role_policy(RoleName="eni-attached", PolicyArn=arn)
    vpc = _vpc(account)
    # Then both functions are created in the VPC
    assert _create(account, "vpc-inline", inline, VpcConfig=vpc)["VpcConfig"]["SubnetIds"] == vpc["SubnetIds"]
    assert _create(account, "vpc-attached", attached, VpcConfig=vpc)["FunctionName"] == "vpc-attached"


def test_moving_a_function_into_a_vpc_or_giving_a_vpc_function_a_weaker_role_is_refused(account):
    fns = account.client("lambda")
    weak = _role(account, "weak", ["logs:PutLogEvents"])
    strong = _role(account, "strong", ENI_ACTIONS)
    _create(account, "mover", weak)
    vpc = _vpc(account)
    # When UpdateFunctionConfiguration sets a VpcConfig with a role that cannot create interfaces
    with pytest.raises(ClientError) as refused:
        fns.update_function_configuration(FunctionName="mover", VpcConfig=vpc)
    assert _refusal(refused) == (
        "InvalidParameterValueException",
        NO_ENI.format("CreateNetworkInterface"),
        400,
    )
    # Then with a role that can it is applied, and swapping back to the weak role is refused
    fns.update_function_configuration(FunctionName="mover", VpcConfig=vpc, Role=strong)
    with pytest.raises(ClientError) as refused:
        fns.update_function_configuration(FunctionName="mover", Role=weak)
    assert _refusal(refused)[1] == NO_ENI.format("CreateNetworkInterface")
