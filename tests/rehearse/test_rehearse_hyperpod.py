"""The HyperPod variant, rehearsed (issue 25): ``cdk deploy`` with ``hyperpodClusterArn`` (a HyperPod
cluster created in the emulator) by the real CDK CLI, teams.yaml's task governance policy read back
through SageMaker's API; a policy change (a team's fair-share weight and GPU quota) applied by a second
``cdk deploy`` and seen through the API as the next version of the same quota; and a policy the API
refuses (a team whose quota name a quota made outside the stack already has) failing the deploy with
the service's message, the stack rolled back to the policy in force. Its own emulator, so the default
stack's lifecycle (test_rehearse.py) is not touched."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.rehearse import variants
from tests.rehearse.conftest import CLUSTER, ROOT
from topogov.domain import hyperpod
from topogov.domain.policy import load_policy, load_policy_file
from topogov_local.rehearse import (
    ACCOUNT,
    REGION,
    STACK,
    Cdk,
    Emulator,
    RehearsalError,
    keep_assets,
    seed_assets,
)

POLICY = ROOT / "teams.yaml"


def _policy_file(directory: Path, text: str, tag: str) -> Path:
    """A policy inside the repository, under the ignored .topogov/ (the function asset is hashed by
    its path in the repository)."""
    path = ROOT / ".topogov" / "rehearse" / f"teams-hyperpod-{tag}-{directory.name}-{os.getpid()}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _changed_policy() -> str:
    text = POLICY.read_text()
    assert text.count("fairShareWeight: 2\n") == 1 and text.count("quota: {nvidia.com/gpu: 64,") == 1
    return text.replace("fairShareWeight: 2\n", "fairShareWeight: 3\n").replace(
        "quota: {nvidia.com/gpu: 64,", "quota: {nvidia.com/gpu: 72,"
    )


def _policy_with_team_d(text: str) -> str:
    team_d = (
        "  team-d:\n"
        '    principals: ["arn:aws:iam::111122223333:role/TeamD*"]\n'
        "    quota: {nvidia.com/gpu: 8, cpu: 184, memory: 1Ti}\n"
        "    sharing: Lend\n"
        "\n# Only for a deployment on SageMaker HyperPod"
    )
    assert text.count("\n# Only for a deployment on SageMaker HyperPod") == 1
    return text.replace("\n# Only for a deployment on SageMaker HyperPod", "\n" + team_d)


def _quotas(sm: Any, cluster: str) -> dict[str, dict[str, Any]]:
    pages = sm.get_paginator("list_compute_quotas").paginate(ClusterArn=cluster)
    ids = [s["ComputeQuotaId"] for page in pages for s in page["ComputeQuotaSummaries"]]
    return {q["Name"]: q for q in (sm.describe_compute_quota(ComputeQuotaId=i) for i in ids)}


@pytest.fixture(scope="module")
def hyperpod_stack(tmp_path_factory: Any, rehearse_report: dict[str, Any]) -> Any:
    directory = tmp_path_factory.mktemp("rehearse-hyperpod")
    emulator = Emulator(directory / "aws").start()
    cdk = None
    files: list[Path] = []
    try:
        # both policies are valid teams.yaml before anything slow starts
        assert sorted(load_policy(_policy_with_team_d(_changed_policy())).teams)[-1] == "team-d"
        emulator.register_cluster(CLUSTER, "https://127.0.0.1:9", b"not used")  # the access entries' cluster
        policy = load_policy_file(POLICY)
        assert policy.hyperpod is not None
        sm = emulator.client("sagemaker")
        cluster = variants.hyperpod_cluster(sm, "rehearse-hyperpod", policy.hyperpod.instance_types)
        context = {
            "clusterName": CLUSTER,
            "account": ACCOUNT,
            "region": REGION,
            "hyperpodClusterArn": cluster,
        }
        cdk = Cdk(emulator.url, directory / "cdk.out", directory / "cdk.log")
        seed_assets(cdk.out)
        cdk.wait(cdk.synth(context))
        keep_assets(cdk.out)
        cdk.bootstrap()
        cdk.deploy_assembly()
        first = _quotas(sm, cluster)
        # a policy change, applied by cdk deploy
        changed = _policy_file(directory, _changed_policy(), "changed")
        files.append(changed)
        cdk.deploy({**context, "policyFile": str(changed)})
        second = _quotas(sm, cluster)
        # a policy the API refuses: team-d's quota name is taken by a quota made outside the stack
        outside = hyperpod.render(
            load_policy(_policy_with_team_d(_changed_policy())), cluster
        ).compute_quotas[-1]
        sm.create_compute_quota(**(outside | {"ComputeQuotaTarget": {"TeamName": "console-team"}}))
        refused = _policy_file(directory, _policy_with_team_d(_changed_policy()), "refused")
        files.append(refused)
        try:
            cdk.deploy({**context, "policyFile": str(refused)})
            refusal = None
        except RehearsalError as exc:
            refusal = str(exc)
        cf = emulator.client("cloudformation")
        rehearse_report["hyperpod"] = {
            "status": cf.describe_stacks(StackName=STACK)["Stacks"][0]["StackStatus"],
            "cdk_seconds": {f"{r.args[0]} #{i}": round(r.seconds, 1) for i, r in enumerate(cdk.runs, 1)},
        }
        yield {
            "emulator": emulator,
            "cluster": cluster,
            "first": first,
            "second": second,
            "third": _quotas(sm, cluster),
            "refusal": refusal,
            "changed": load_policy(_changed_policy()),
        }
    finally:  # nothing started here outlives the module, whatever failed
        for path in files:
            path.unlink(missing_ok=True)
        if cdk is not None:
            cdk.cancel()
        emulator.stop()


def test_the_deployed_policy_is_teams_yaml_as_sagemakers_api_reads_it(hyperpod_stack: Any) -> None:
    expected = hyperpod.render(load_policy_file(POLICY), hyperpod_stack["cluster"])
    first = hyperpod_stack["first"]
    assert sorted(first) == ["team-a", "team-b", "team-c"]
    for request in expected.compute_quotas:
        quota = first[request["Name"]]
        assert (quota["Status"], quota["ComputeQuotaVersion"]) == ("Created", 1)
        assert quota["ClusterArn"] == hyperpod_stack["cluster"]
        for field in ("ComputeQuotaConfig", "ComputeQuotaTarget", "ActivationState", "Description"):
            assert quota[field] == request[field], (request["Name"], field)
    sm = hyperpod_stack["emulator"].client("sagemaker")
    (summary,) = sm.list_cluster_scheduler_configs(ClusterArn=hyperpod_stack["cluster"])[
        "ClusterSchedulerConfigSummaries"
    ]
    config = sm.describe_cluster_scheduler_config(
        ClusterSchedulerConfigId=summary["ClusterSchedulerConfigId"]
    )
    assert config["SchedulerConfig"] == expected.scheduler_config["SchedulerConfig"]


def test_a_policy_change_is_the_next_version_of_the_same_quota(hyperpod_stack: Any) -> None:
    first, second = hyperpod_stack["first"], hyperpod_stack["second"]
    expected = hyperpod.render(hyperpod_stack["changed"], hyperpod_stack["cluster"]).compute_quotas
    team_c = second["team-c"]
    assert team_c["ComputeQuotaId"] == first["team-c"]["ComputeQuotaId"]
    assert (team_c["ComputeQuotaVersion"], team_c["Status"]) == (2, "Updated")
    assert team_c["ComputeQuotaTarget"]["FairShareWeight"] == 3
    assert (
        team_c["ComputeQuotaConfig"]
        == next(q for q in expected if q["Name"] == "team-c")["ComputeQuotaConfig"]
    )
    assert sum(r["Accelerators"] for r in team_c["ComputeQuotaConfig"]["ComputeQuotaResources"]) == 72
    for other in ("team-a", "team-b"):  # untouched: still their first version
        assert second[other]["ComputeQuotaVersion"] == 1


def test_a_policy_the_api_refuses_fails_the_deploy_with_its_message_and_rolls_back(
    hyperpod_stack: Any,
) -> None:
    refusal = hyperpod_stack["refusal"]
    assert refusal is not None, "the deploy with team-d succeeded"
    cluster = hyperpod_stack["cluster"]
    assert f"A compute quota named team-d already exists in cluster {cluster}." in refusal
    cf = hyperpod_stack["emulator"].client("cloudformation")
    assert cf.describe_stacks(StackName=STACK)["Stacks"][0]["StackStatus"] == "UPDATE_ROLLBACK_COMPLETE"
    events = cf.describe_stack_events(StackName=STACK)["StackEvents"]
    failed = [e for e in events if e["ResourceStatus"] == "CREATE_FAILED"]
    assert failed and "ComputeQuotateamd" in failed[0]["LogicalResourceId"]
    assert "HandlerErrorCode: ResourceConflict" in failed[0]["ResourceStatusReason"]
    # the policy in force is the one before: team-c's quota as the change left it, the outside quota as made
    third = hyperpod_stack["third"]
    assert third["team-c"]["ComputeQuotaVersion"] == 2
    assert third["team-c"]["ComputeQuotaTarget"]["FairShareWeight"] == 3
    assert third["team-d"]["ComputeQuotaTarget"]["TeamName"] == "console-team"
