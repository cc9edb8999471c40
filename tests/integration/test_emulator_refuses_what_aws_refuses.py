"""The deploy paths AWS refused (issue 22), deployed to the emulator as the CDK CLI deploys them (a
change set, executed): each pre-fix template shape fails with AWS's message on the resource's event
and the stack rolls back; its fixed shape deploys. boto3 against the moto server, over HTTP."""

from __future__ import annotations

import io
import json
import zipfile

import pytest

from topogov_local.rehearse import Emulator

CODE_BUCKET = "assets"
ENI_ACTIONS = ["ec2:CreateNetworkInterface", "ec2:DescribeNetworkInterfaces", "ec2:DeleteNetworkInterface"]


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    em = Emulator(tmp_path_factory.mktemp("refusals")).start()
    try:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            z.writestr("index.py", "def handler(event, context):\n    return event\n")
        em.client("s3").create_bucket(Bucket=CODE_BUCKET)
        em.client("s3").put_object(Bucket=CODE_BUCKET, Key="fn.zip", Body=buf.getvalue())
        yield em
    finally:
        em.stop()


@pytest.fixture
def account(emulator):
    yield emulator
    emulator.control("POST", "/_topogov/lambda/account", {"concurrent_executions": 1000})


def _role(actions: list[str]) -> dict:
    """A function's role and its inline policy as the CDK writes them: the policy a resource of its
    own, which the function DependsOn."""
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}
        ],
    }
    return {
        "Role": {"Type": "AWS::IAM::Role", "Properties": {"AssumeRolePolicyDocument": trust}},
        "RoleDefaultPolicy": {
            "Type": "AWS::IAM::Policy",
            "Properties": {
                "PolicyName": "RoleDefaultPolicy",
                "Roles": [{"Ref": "Role"}],
                "PolicyDocument": {
                    "Version": "2012-10-17",
                    "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}],
                },
            },
        },
    }


def _function(name: str, **props) -> dict:
    return {
        "Type": "AWS::Lambda::Function",
        "DependsOn": ["RoleDefaultPolicy", "Role"],
        "Properties": {
            "FunctionName": name,
            "Runtime": "python3.12",
            "Handler": "index.handler",
            "Role": {"Fn::GetAtt": ["Role", "Arn"]},
            "Code": {"S3Bucket": CODE_BUCKET, "S3Key": "fn.zip"},  # as the CDK's assets
            **props,
        },
    }


def _deploy(em: Emulator, stack: str, resources: dict, kind: str = "CREATE") -> dict:
    """``cdk deploy``'s calls: a change set, executed; then the stack as DescribeStacks shows it."""
    cfn = em.client("cloudformation")
    body = json.dumps({"Resources": resources})
    cfn.create_change_set(
        StackName=stack, ChangeSetName=f"cs-{kind}-{len(body)}", TemplateBody=body,
        ChangeSetType=kind, Capabilities=["CAPABILITY_IAM"],
    )  # fmt: skip
    cfn.execute_change_set(ChangeSetName=f"cs-{kind}-{len(body)}", StackName=stack)
    return cfn.describe_stacks(StackName=stack)["Stacks"][0]


def _events(em: Emulator, stack: str) -> list[tuple[str, str, str]]:
    events = em.client("cloudformation").describe_stack_events(StackName=stack)["StackEvents"]
    return [(e["LogicalResourceId"], e["ResourceStatus"], e.get("ResourceStatusReason", "")) for e in events]


def _failed(events: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    return [e for e in events if e[1].endswith("_FAILED")]


def _vpc(em: Emulator) -> dict:
    ec2 = em.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.8.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.8.1.0/24")["Subnet"]["SubnetId"]
    group = ec2.create_security_group(GroupName=f"g-{subnet}", Description="fn", VpcId=vpc)["GroupId"]
    return {"SubnetIds": [subnet], "SecurityGroupIds": [group]}


def test_a_vpc_function_whose_role_cannot_create_interfaces_fails_and_rolls_back(account):
    # Given the pre-fix private-cluster template: the role may write its logs, nothing of EC2's
    vpc = _vpc(account)
    before = {
        **_role(["logs:CreateLogStream", "logs:PutLogEvents"]),
        "Fn": _function("vpc-fn", VpcConfig=vpc),
    }
    # When it is deployed
    stack = _deploy(account, "vpc-before", before)
    # Then Lambda's refusal is the function's event, and the stack rolled back
    assert stack["StackStatus"] == "ROLLBACK_COMPLETE"
    [(logical, status, reason)] = _failed(_events(account, "vpc-before"))
    assert (logical, status) == ("Fn", "CREATE_FAILED")
    assert reason.startswith(
        'Resource handler returned message: "The provided execution role does not have permissions to call '
        "CreateNetworkInterface on EC2 (Service: Lambda, Status Code: 400,"
    )
    assert reason.endswith("HandlerErrorCode: InvalidRequest)")
    assert not [r for r in account.client("iam").list_roles()["Roles"] if "vpc-before" in r["RoleName"]]
    # And with the ENI actions granted (the fix) the same template deploys
    after = {**_role(["logs:PutLogEvents", *ENI_ACTIONS]), "Fn": _function("vpc-fn", VpcConfig=vpc)}
    assert _deploy(account, "vpc-after", after)["StackStatus"] == "CREATE_COMPLETE"


def test_reservations_of_1_and_25_fail_in_a_10_execution_account_and_none_deploys(account):
    # Given a new account's limit and the pre-fix reservations
    account.control("POST", "/_topogov/lambda/account", {"concurrent_executions": 10})
    before = {
        **_role(["logs:PutLogEvents"]),
        "Reconcile": _function("reconcile-fn", ReservedConcurrentExecutions=1),
        "Api": _function("api-fn", ReservedConcurrentExecutions=25),
    }
    # When they are deployed
    stack = _deploy(account, "reserved-before", before)
    # Then the first reservation is refused with Lambda's message, and nothing is left
    assert stack["StackStatus"] == "ROLLBACK_COMPLETE"
    [(logical, status, reason)] = _failed(_events(account, "reserved-before"))
    assert status == "CREATE_FAILED" and logical in ("Reconcile", "Api")
    assert (
        "Specified ReservedConcurrentExecutions for function decreases account's "
        "UnreservedConcurrentExecution below its minimum value of [10]. (Service: Lambda, Status Code: 400"
    ) in reason
    names = {f["FunctionName"] for f in account.client("lambda").list_functions()["Functions"]}
    assert not names & {"reconcile-fn", "api-fn"}
    # And without reservations (apiReservedConcurrency=0, the reconcile lease) the stack deploys
    after = {
        **_role(["logs:PutLogEvents"]),
        "Reconcile": _function("reconcile-fn"),
        "Api": _function("api-fn"),
    }
    assert _deploy(account, "reserved-after", after)["StackStatus"] == "CREATE_COMPLETE"
    limit = account.client("lambda").get_account_settings()["AccountLimit"]
    assert limit["UnreservedConcurrentExecutions"] == 10


def test_an_update_that_reserves_too_much_fails_and_the_stack_rolls_back_to_what_it_was(account):
    # Given a deployed stack without reservations in an account of 126
    account.control("POST", "/_topogov/lambda/account", {"concurrent_executions": 126})
    base = {**_role(["logs:PutLogEvents"]), "Api": _function("api-upd", Timeout=3)}
    assert _deploy(account, "reserved-update", base)["StackStatus"] == "CREATE_COMPLETE"
    # When an update reserves 27 (126 - 27 = 99 < 100) and changes the timeout
    bigger = {**base, "Api": _function("api-upd", Timeout=9, ReservedConcurrentExecutions=27)}
    stack = _deploy(account, "reserved-update", bigger, kind="UPDATE")
    # Then the update fails on the function with Lambda's message and rolls back
    assert stack["StackStatus"] == "UPDATE_ROLLBACK_COMPLETE"
    [(logical, status, reason)] = _failed(_events(account, "reserved-update"))
    assert (logical, status) == ("Api", "UPDATE_FAILED")
    assert "below its minimum value of [100]." in reason
    fns = account.client("lambda")
    assert fns.get_function_concurrency(FunctionName="api-upd").get("ReservedConcurrentExecutions") is None
    # And 26 (exactly 100 left) is applied
    fits = {**base, "Api": _function("api-upd", Timeout=9, ReservedConcurrentExecutions=26)}
    assert _deploy(account, "reserved-update", fits, kind="UPDATE")["StackStatus"] == "UPDATE_COMPLETE"
    assert fns.get_function_concurrency(FunctionName="api-upd")["ReservedConcurrentExecutions"] == 26


def _cluster(em: Emulator, name: str, mode: str | None) -> None:
    extra = {"accessConfig": {"authenticationMode": mode}} if mode else {}
    em.client("eks").create_cluster(
        name=name, roleArn="arn:aws:iam::123456789012:role/eks", resourcesVpcConfig={"subnetIds": []}, **extra
    )


def _access_entry(cluster: str) -> dict:
    return {
        **_role(["logs:PutLogEvents"]),
        "Entry": {
            "Type": "AWS::EKS::AccessEntry",
            "Properties": {
                "ClusterName": cluster,
                "PrincipalArn": {"Fn::GetAtt": ["Role", "Arn"]},
                "KubernetesGroups": ["topogov:reconciler"],
                "Type": "STANDARD",
            },
        },
    }


def test_an_access_entry_on_a_config_map_cluster_fails_with_eks_message_and_rolls_back(account):
    # Given a cluster created by the EKS API without an accessConfig: CONFIG_MAP, EKS's default
    _cluster(account, "legacy", None)
    assert account.client("eks").describe_cluster(name="legacy")["cluster"]["accessConfig"] == {
        "authenticationMode": "CONFIG_MAP"
    }
    # When the stack's access entry is deployed
    stack = _deploy(account, "entry-before", _access_entry("legacy"))
    # Then EKS's refusal is the entry's event, and the stack rolled back (its role is gone)
    assert stack["StackStatus"] == "ROLLBACK_COMPLETE"
    [(logical, status, reason)] = _failed(_events(account, "entry-before"))
    assert (logical, status) == ("Entry", "CREATE_FAILED")
    assert reason.startswith(
        "Resource handler returned message: \"The cluster's authentication mode must be set to one of "
        "[API, API_AND_CONFIG_MAP] to perform this operation. (Service: Eks, Status Code: 400,"
    )
    assert account.client("eks").list_access_entries(clusterName="legacy")["accessEntries"] == []
    # And once the cluster allows the API, the same template deploys
    account.client("eks").update_cluster_config(
        name="legacy", accessConfig={"authenticationMode": "API_AND_CONFIG_MAP"}
    )
    assert _deploy(account, "entry-after", _access_entry("legacy"))["StackStatus"] == "CREATE_COMPLETE"
    assert len(account.client("eks").list_access_entries(clusterName="legacy")["accessEntries"]) == 1
