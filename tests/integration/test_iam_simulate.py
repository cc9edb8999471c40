"""IAM SimulatePrincipalPolicy in the emulator (topogov_local.aws.iam_simulate), as `topogov preflight`
calls it: boto3 against the moto server, over HTTP."""

from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError

from topogov_local.rehearse import Emulator

ACCOUNT = "123456789012"


@pytest.fixture(scope="module")
def iam(tmp_path_factory):
    em = Emulator(tmp_path_factory.mktemp("iam-simulate")).start()
    try:
        yield em.client("iam")
    finally:
        em.stop()


def test_a_users_policies_allow_deny_explicitly_or_say_nothing(iam):
    iam.create_user(UserName="deployer")
    statements = [
        {"Effect": "Allow", "Action": ["sagemaker:*ComputeQuota"], "Resource": "*"},
        {"Effect": "Deny", "Action": "sagemaker:DeleteComputeQuota", "Resource": "*"},
    ]
    document = json.dumps({"Version": "2012-10-17", "Statement": statements})
    iam.put_user_policy(UserName="deployer", PolicyName="p", PolicyDocument=document)
    answer = iam.simulate_principal_policy(
        PolicySourceArn=f"arn:aws:iam::{ACCOUNT}:user/deployer",
        ActionNames=["sagemaker:CreateComputeQuota", "sagemaker:DeleteComputeQuota", "eks:DescribeCluster"],
    )
    assert [
        (r["EvalActionName"], r["EvalResourceName"], r["EvalDecision"]) for r in answer["EvaluationResults"]
    ] == [
        ("sagemaker:CreateComputeQuota", "*", "allowed"),
        ("sagemaker:DeleteComputeQuota", "*", "explicitDeny"),
        ("eks:DescribeCluster", "*", "implicitDeny"),
    ]


def test_a_roles_inline_policy_counts_and_an_unknown_principal_is_no_such_entity(iam):
    service = {"Service": "cloudformation.amazonaws.com"}
    trust = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": service, "Action": "sts:AssumeRole"}],
    }
    arn = iam.create_role(RoleName="exec", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    allow = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "eks:*", "Resource": "*"}]}
    iam.put_role_policy(RoleName="exec", PolicyName="eks", PolicyDocument=json.dumps(allow))
    answer = iam.simulate_principal_policy(PolicySourceArn=arn, ActionNames=["eks:AssociateAccessPolicy"])
    assert answer["EvaluationResults"][0]["EvalDecision"] == "allowed"
    with pytest.raises(ClientError) as unknown:
        iam.simulate_principal_policy(
            PolicySourceArn=f"arn:aws:iam::{ACCOUNT}:user/nobody", ActionNames=["s3:GetObject"]
        )
    assert unknown.value.response["Error"]["Code"] == "NoSuchEntity"
