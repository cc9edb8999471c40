"""The rules of the project's moto extension that need no server: where a template URL points, which
properties replace a resource, what an update plan replaces."""

from __future__ import annotations

import gzip
import json

import pytest

from tests.rehearse.conftest import ROOT
from topogov_local.aws.cloudformation import (
    NESTED_REPLACEMENT_PROPERTIES,
    REPLACEMENT_PROPERTIES,
    bucket_and_key,
    plan_update,
)
from topogov_local.aws.iam import dynamodb_checks, eks_resource

SPEC = ROOT / "node_modules" / "aws-cdk" / "db.json.gz"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        # the CDK CLI with AWS_ENDPOINT_URL: the endpoint's origin, path style
        ("http://127.0.0.1:5000/cdk-assets/abc.json", ("cdk-assets", "abc.json")),
        ("https://s3.us-east-1.amazonaws.com/cdk-assets/t/abc.json", ("cdk-assets", "t/abc.json")),
        ("https://s3-us-west-2.amazonaws.com/b/k", ("b", "k")),
        ("https://cdk-assets.s3.us-east-1.amazonaws.com/abc.json", ("cdk-assets", "abc.json")),
        ("https://my.bucket.s3.amazonaws.com/a/b.json", ("my.bucket", "a/b.json")),
    ],
)
def test_template_urls_name_their_bucket_and_key(url: str, expected: tuple[str, str]) -> None:
    assert bucket_and_key(url) == expected


def test_replacement_properties_are_the_resource_specifications() -> None:
    """Each type's "Update requires: Replacement" properties, as the CDK CLI's copy of the
    CloudFormation resource specification has them (``causesReplacement: yes``)."""
    if not SPEC.exists():
        pytest.skip("the CDK CLI is not installed (make install)")
    entities = json.loads(gzip.decompress(SPEC.read_bytes()))["schema"]["resource"]["entities"]
    spec = {e["cloudFormationType"]: e for e in entities}
    for kind, props in REPLACEMENT_PROPERTIES.items():
        if kind == "AWS::CDK::Metadata":
            continue  # the CDK's own type: not in CloudFormation's registry
        said = {k for k, v in spec[kind]["properties"].items() if v.get("causesReplacement") == "yes"}
        assert set(props) == said, kind


def test_nested_replacement_properties_are_the_resource_specifications() -> None:
    """A property inside a property type that replaces its resource (ComputeQuotaTarget.TeamName), as
    the CDK CLI's specification marks it on the property type, and no other of those types'."""
    if not SPEC.exists():
        pytest.skip("the CDK CLI is not installed (make install)")
    schema = json.loads(gzip.decompress(SPEC.read_bytes()))["schema"]
    by_id = {t["$id"]: t for t in schema["typeDefinition"]["entities"]}
    resources = {e["cloudFormationType"]: e for e in schema["resource"]["entities"]}
    for kind, nested in NESTED_REPLACEMENT_PROPERTIES.items():
        said = set()
        for name, prop in resources[kind]["properties"].items():
            ref = (prop["type"].get("reference") or {}).get("$ref")
            if ref is not None:
                inner = by_id[ref]["properties"]
                said |= {(name, k) for k, v in inner.items() if v.get("causesReplacement") == "yes"}
        assert set(nested) == said, kind


def test_a_nested_create_only_property_replaces_its_resource() -> None:
    def quota(team: str, weight: int) -> dict[str, object]:
        return _res(
            "AWS::SageMaker::ComputeQuota",
            Name="q",
            ComputeQuotaTarget={"TeamName": team, "FairShareWeight": weight},
        )

    assert plan_update({"Q": quota("a", 1)}, {"Q": quota("a", 2)})["replace"] == {}
    plan = plan_update({"Q": quota("a", 1)}, {"Q": quota("b", 1)})
    assert (plan["replace"], plan["causes"]) == ({"Q": "True"}, {"Q": ["ComputeQuotaTarget.TeamName"]})


def _res(kind: str, **props: object) -> dict[str, object]:
    return {"Type": kind, "Properties": props}


def test_an_update_replaces_what_a_replacement_property_changes_and_what_refers_to_it_there() -> None:
    old = {
        "Table": _res("AWS::DynamoDB::Table", TableName="a", BillingMode="PAY_PER_REQUEST"),
        "Queue": _res("AWS::SQS::Queue", QueueName="q"),
        "Policy": _res("AWS::SQS::QueuePolicy", Queues=[{"Ref": "Queue"}]),
        "Fn": _res("AWS::Lambda::Function", FunctionName="f", Timeout=3),
        "Perm": _res("AWS::Lambda::Permission", FunctionName={"Ref": "Fn"}, Action="lambda:InvokeFunction"),
        "Gone": _res("AWS::SNS::Topic"),
    }
    new = {
        "Table": _res("AWS::DynamoDB::Table", TableName="a", BillingMode="PROVISIONED"),  # in place
        "Queue": _res("AWS::SQS::Queue", QueueName="q2"),  # replaced
        "Policy": _res("AWS::SQS::QueuePolicy", Queues=[{"Ref": "Queue"}]),  # refers to it: in place
        "Fn": _res("AWS::Lambda::Function", FunctionName="f2", Timeout=3),  # replaced
        "Perm": _res("AWS::Lambda::Permission", FunctionName={"Ref": "Fn"}, Action="lambda:InvokeFunction"),
        "New": _res("AWS::SNS::Topic"),
    }
    plan = plan_update(old, new)
    assert plan["add"] == ["New"] and plan["remove"] == ["Gone"]
    assert plan["replace"] == {"Queue": "True", "Fn": "True", "Perm": "Conditional"}
    assert plan["causes"]["Perm"] == ["FunctionName -> Fn"]
    assert set(plan["modify"]) == {"Table", "Queue", "Policy", "Fn", "Perm"}


def test_a_transaction_is_authorised_item_by_item_on_each_items_table() -> None:
    params = {
        "TransactItems": [
            {"Update": {"TableName": "counters", "Key": {}}},
            {"Put": {"TableName": "ledger", "Item": {}}},
            {"ConditionCheck": {"TableName": "ledger", "Key": {}}},
        ]
    }
    arn = "arn:aws:dynamodb:us-east-1:123456789012:table/"
    assert dynamodb_checks("TransactWriteItems", params, "us-east-1", "123456789012") == [
        ("UpdateItem", arn + "counters"),
        ("PutItem", arn + "ledger"),
        ("ConditionCheckItem", arn + "ledger"),
    ]
    assert dynamodb_checks("Query", {"TableName": "t", "IndexName": "i"}, "us-east-1", "1") == [
        ("Query", "arn:aws:dynamodb:us-east-1:1:table/t/index/i")
    ]
    assert eks_resource("/clusters/c", "us-east-1", "1") == "arn:aws:eks:us-east-1:1:cluster/c"
