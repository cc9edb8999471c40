"""IAM enforcement for temporary credentials only (topogov_local.aws.iam, ``enforce-sessions``): what
lets every suite judge the local functions' calls against their deployed roles while the tests' own
set-up keeps moto's default account. Against the moto server, over HTTP."""

from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError

from topogov_local.rehearse import Emulator


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    em = Emulator(tmp_path_factory.mktemp("iam-sessions")).start()
    try:
        yield em
    finally:
        em.stop()


def _session_of_a_role_that_may_list_buckets_only(em: Emulator) -> dict[str, str]:
    iam = em.client("iam")
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}
        ],
    }
    role = iam.create_role(RoleName="lister", AssumeRolePolicyDocument=json.dumps(trust))["Role"]
    policy = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "s3:ListAllMyBuckets", "Resource": "*"}],
    }
    iam.put_role_policy(RoleName="lister", PolicyName="list", PolicyDocument=json.dumps(policy))
    creds = em.client("sts").assume_role(RoleArn=role["Arn"], RoleSessionName="fn")["Credentials"]
    assert creds["AccessKeyId"].startswith("ASIA")  # AWS's prefix of temporary credentials
    return creds


def test_only_calls_signed_by_a_session_are_judged_and_recorded(emulator):
    creds = _session_of_a_role_that_may_list_buckets_only(emulator)
    session_s3 = emulator.client("s3", credentials=creds)
    emulator.clear_decisions()
    emulator.enforce_sessions(True)
    try:
        session_s3.list_buckets()  # granted
        with pytest.raises(ClientError) as refused:
            session_s3.create_bucket(Bucket="not-granted")
        assert refused.value.response["Error"]["Code"] == "AccessDenied"
        emulator.client("s3").create_bucket(Bucket="set-up")  # moto's default account: not judged
        decisions = [(d["principal"].split("/")[-1], d["action"], d["allowed"]) for d in emulator.decisions()]
        assert decisions == [("fn", "s3:ListAllMyBuckets", True), ("fn", "s3:CreateBucket", False)]
    finally:
        emulator.enforce_sessions(False)
    session_s3.create_bucket(Bucket="not-judged-now")  # off: as moto is by default
    assert len(emulator.decisions()) == 2
    emulator.clear_decisions()
