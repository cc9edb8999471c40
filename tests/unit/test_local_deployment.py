"""What the local stack keeps of a deployment (topogov_local.deployment): when the app is synthesized
again, and what a local function's environment changes from the deployed one."""

from __future__ import annotations

from pathlib import Path

from topogov_local.deployment import CONTEXT, INPUTS, inputs_digest, local_environ
from topogov_local.rehearse import FunctionRuntime


def _tree(root: Path) -> Path:
    for name in INPUTS:
        if "." in Path(name).name:
            (root / name).write_text(f"{name}\n")
        else:
            (root / name).mkdir(parents=True)
            (root / name / "a.py").write_text("x = 1\n")
    return root


def test_the_assembly_is_made_again_when_a_source_or_the_context_changes_and_only_then(tmp_path):
    root = _tree(tmp_path)
    first = inputs_digest(CONTEXT, root)
    assert inputs_digest(CONTEXT, root) == first
    (root / "infra" / "__pycache__").mkdir()
    (root / "infra" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    assert inputs_digest(CONTEXT, root) == first  # bytecode is not a source
    (root / "README.md").write_text("docs\n")
    assert inputs_digest(CONTEXT, root) == first  # nor is what the template is not made of
    assert inputs_digest({**CONTEXT, "clusterName": "other"}, root) != first
    (root / "lambdas" / "topogov" / "a.py").write_text("x = 2\n")
    changed = inputs_digest(CONTEXT, root)
    assert changed != first
    (root / "lambdas" / "topogov" / "b.py").write_text("")
    assert inputs_digest(CONTEXT, root) != changed  # a new file counts, even empty
    (root / "teams.yaml").write_text("teams: {}\n")
    assert inputs_digest(CONTEXT, root) not in (first, changed)


def test_a_local_function_keeps_its_deployed_environment_but_for_the_cluster_and_tracing(tmp_path):
    fn = FunctionRuntime(
        name="Topogov-ApiFunction-X",
        role_arn="arn:aws:iam::123456789012:role/Topogov-ApiRole-Y",
        environment={
            "TOPOGOV_CLUSTER_NAME": "topogov-local",
            "TOPOGOV_LEDGER_TABLE": "Topogov-StorageLedger-Z",
            "TOPOGOV_POLICY_FILE": str(tmp_path / "var/task/policy/teams.yaml"),
            "POWERTOOLS_LOG_LEVEL": "INFO",
        },
        credentials={"AccessKeyId": "ASIAX", "SecretAccessKey": "s", "SessionToken": "t"},
        task_root=tmp_path / "var" / "task",
    )
    env = local_environ(fn, "http://127.0.0.1:5000", tmp_path / "api.kubeconfig")
    assert "TOPOGOV_CLUSTER_NAME" not in env and env["TOPOGOV_KUBECONFIG"] == str(tmp_path / "api.kubeconfig")
    assert env["TOPOGOV_LEDGER_TABLE"] == "Topogov-StorageLedger-Z"
    assert env["TOPOGOV_POLICY_FILE"] == fn.environment["TOPOGOV_POLICY_FILE"]
    assert env["POWERTOOLS_LOG_LEVEL"] == "INFO"  # the deployed level, not a local one
    assert (env["AWS_ACCESS_KEY_ID"], env["AWS_SESSION_TOKEN"]) == ("ASIAX", "t")  # its role's
    assert env["AWS_LAMBDA_FUNCTION_NAME"] == fn.name and env["LAMBDA_TASK_ROOT"] == str(fn.task_root)
    assert env["AWS_ENDPOINT_URL"] == "http://127.0.0.1:5000"
    assert env["POWERTOOLS_TRACE_DISABLED"] == env["POWERTOOLS_METRICS_DISABLED"] == "true"


def test_a_cdk_run_keeps_the_callers_choice_of_the_cdks_validation_and_no_other_cdk_or_aws_setting(
    tmp_path, monkeypatch
):
    from topogov_local.rehearse import Cdk

    monkeypatch.setenv("CDK_DEFAULT_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_PROFILE", "someone")
    for choice in ("false", "true"):
        monkeypatch.setenv("CDK_VALIDATION", choice)
        env = Cdk("http://127.0.0.1:9", tmp_path / "out", tmp_path / "cdk.log").env()
        assert env["CDK_VALIDATION"] == choice
        assert "CDK_DEFAULT_REGION" not in env and "AWS_PROFILE" not in env
        assert env["AWS_ENDPOINT_URL"] == "http://127.0.0.1:9"
    monkeypatch.delenv("CDK_VALIDATION")
    assert "CDK_VALIDATION" not in Cdk("http://127.0.0.1:9", tmp_path / "out", tmp_path / "cdk.log").env()
