"""CloudFormation's dependency order in the emulator's updates (topogov_local.aws.cloudformation): a
new ``AWS::Lambda::Version`` is published after the function it refers to is updated, so a change of the
layer alone reaches the version the alias then points at. boto3 against the moto server, over HTTP."""

from __future__ import annotations

import io
import json
import zipfile

import pytest

from topogov_local.rehearse import Emulator

BUCKET = "assets"
TRUST = {
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}
    ],
}


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    em = Emulator(tmp_path_factory.mktemp("cfn-order")).start()
    try:
        s3 = em.client("s3")
        s3.create_bucket(Bucket=BUCKET)
        for key, text in (
            ("fn2.zip", "def handler(e, c):\n    return 2\n"),
            ("fn.zip", "def handler(e, c):\n    return e\n"),
            ("l1.zip", "v = 1\n"),
            ("l2.zip", "v = 2\n"),
        ):
            buf = io.BytesIO()
            with zipfile.ZipFile(buf, "w") as z:
                z.writestr("python/mod.py" if key.startswith("l") else "index.py", text)
            s3.put_object(Bucket=BUCKET, Key=key, Body=buf.getvalue())
        yield em
    finally:
        em.stop()


def _template(layer_key: str, version_id: str, code: str = "fn.zip", function: str = "layered") -> str:
    """The CDK's shape: a layer, the function using it, ``currentVersion`` (its logical id a hash of the
    function's configuration, the layer included with recognizeLayerVersion) and the ``live`` alias."""
    return json.dumps(
        {
            "Resources": {
                "Role": {"Type": "AWS::IAM::Role", "Properties": {"AssumeRolePolicyDocument": TRUST}},
                "Layer": {
                    "Type": "AWS::Lambda::LayerVersion",
                    "Properties": {
                        "Content": {"S3Bucket": BUCKET, "S3Key": layer_key},
                        "CompatibleRuntimes": ["python3.12"],
                    },
                },
                "Fn": {
                    "Type": "AWS::Lambda::Function",
                    "Properties": {
                        "FunctionName": function,
                        "Runtime": "python3.12",
                        "Handler": "index.handler",
                        "Role": {"Fn::GetAtt": ["Role", "Arn"]},
                        "Code": {"S3Bucket": BUCKET, "S3Key": code},
                        "Layers": [{"Ref": "Layer"}],
                    },
                },
                version_id: {"Type": "AWS::Lambda::Version", "Properties": {"FunctionName": {"Ref": "Fn"}}},
                "Live": {
                    "Type": "AWS::Lambda::Alias",
                    "Properties": {
                        "FunctionName": {"Ref": "Fn"},
                        "FunctionVersion": {"Fn::GetAtt": [version_id, "Version"]},
                        "Name": "live",
                    },
                },
            }
        }
    )


def _deploy(em: Emulator, body: str, kind: str, name: str, stack: str = "layered") -> str:
    cfn = em.client("cloudformation")
    cfn.create_change_set(
        StackName=stack,
        ChangeSetName=name,
        TemplateBody=body,
        ChangeSetType=kind,
        Capabilities=["CAPABILITY_IAM"],
    )
    cfn.execute_change_set(ChangeSetName=name, StackName=stack)
    return str(cfn.describe_stacks(StackName=stack)["Stacks"][0]["StackStatus"])


def _live(em: Emulator, function: str = "layered") -> tuple[str, list[str]]:
    fns = em.client("lambda")
    version = fns.get_alias(FunctionName=function, Name="live")["FunctionVersion"]
    config = fns.get_function_configuration(FunctionName=function, Qualifier=version)
    return version, [x["Arn"] for x in config.get("Layers", [])]


def test_a_new_version_of_a_function_whose_layer_changed_carries_the_new_layer(emulator):
    # Given the stack deployed with layer 1
    assert _deploy(emulator, _template("l1.zip", "VersionA"), "CREATE", "one") == "CREATE_COMPLETE"
    version_before, layers_before = _live(emulator)
    # When only the layer changes (its content: replaced; the version's logical id follows it)
    assert _deploy(emulator, _template("l2.zip", "VersionB"), "UPDATE", "two") == "UPDATE_COMPLETE"
    # Then live points at a new version, published after the function's update: with the new layer
    version_after, layers_after = _live(emulator)
    function_layers = [
        x["Arn"]
        for x in emulator.client("lambda").get_function_configuration(FunctionName="layered")["Layers"]
    ]
    assert version_after != version_before
    assert layers_after == function_layers != layers_before


def test_after_a_code_upgrade_a_layer_only_upgrade_gets_a_version_number_of_its_own(emulator):
    """Version numbers are never given again: after the code upgrade's cleanup deleted version 1, the
    layer-only upgrade's version is 3 (moto counted the versions left and published a second "2")."""
    fn, stack = "twice", "twice"
    assert (
        _deploy(emulator, _template("l1.zip", "V1", function=fn), "CREATE", "t1", stack) == "CREATE_COMPLETE"
    )
    body = _template("l1.zip", "V2", code="fn2.zip", function=fn)
    assert _deploy(emulator, body, "UPDATE", "t2", stack) == "UPDATE_COMPLETE"
    assert _live(emulator, fn)[0] == "2"
    body = _template("l2.zip", "V3", code="fn2.zip", function=fn)
    assert _deploy(emulator, body, "UPDATE", "t3", stack) == "UPDATE_COMPLETE"
    version, layers = _live(emulator, fn)
    latest = emulator.client("lambda").get_function_configuration(FunctionName=fn)["Layers"]
    assert (version, layers) == ("3", [x["Arn"] for x in latest])
    versions = emulator.client("lambda").list_versions_by_function(FunctionName=fn)["Versions"]
    assert [v["Version"] for v in versions] == ["$LATEST", "3"]  # the older ones deleted with their resources
