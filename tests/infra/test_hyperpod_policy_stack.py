"""The stack with ``-c topogov:hyperpodClusterArn``: teams.yaml rendered as one AWS::SageMaker::ComputeQuota
per team and the ClusterSchedulerConfig, with exactly the domain's request bodies as properties; without
it, none; and synth refusing a bad cluster ARN, a cluster of another Region or account, and a policy the
APIs would refuse, each with the field named."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk.assertions import Annotations, Match, Template

import app as appmod
from infra.config import DeployConfigError
from topogov.domain import hyperpod
from topogov.domain.policy import load_policy_file

ROOT = Path(__file__).resolve().parents[2]
ARN = "arn:aws:sagemaker:us-west-2:111122223333:cluster/a1b2c3d4e5f6"
CONTEXT = {
    "topogov:clusterName": "gpu-training",
    "topogov:account": "111122223333",
    "topogov:region": "us-west-2",
    "topogov:hyperpodClusterArn": ARN,
}


def synth(context: dict[str, Any]) -> tuple[Any, Template]:
    app = cdk.App(context={**context, "aws:cdk:bundling-stacks": []})
    stack = appmod.build(app)
    return stack, Template.from_stack(stack)


@pytest.fixture(scope="module")
def synthesized() -> tuple[Any, Template]:
    return synth(CONTEXT)


def test_one_compute_quota_per_team_with_the_domains_properties(synthesized: tuple[Any, Template]) -> None:
    _, template = synthesized
    expected = hyperpod.render(load_policy_file(ROOT / "teams.yaml"), ARN)
    quotas = template.find_resources("AWS::SageMaker::ComputeQuota")
    assert sorted(q["Properties"]["Name"] for q in quotas.values()) == ["team-a", "team-b", "team-c"]
    by_name = {q["Properties"]["Name"]: q["Properties"] for q in quotas.values()}
    for request in expected.compute_quotas:
        assert by_name[request["Name"]] == request
    team_c = by_name["team-c"]
    assert team_c["ComputeQuotaConfig"]["ResourceSharingConfig"] == {"Strategy": "Lend"}
    assert team_c["ComputeQuotaConfig"]["PreemptTeamTasks"] == "Never"
    assert team_c["ComputeQuotaTarget"] == {"TeamName": "team-c", "FairShareWeight": 2}


def test_one_cluster_scheduler_config_with_the_weighted_classes(synthesized: tuple[Any, Template]) -> None:
    _, template = synthesized
    template.resource_count_is("AWS::SageMaker::ClusterSchedulerConfig", 1)
    template.has_resource_properties(
        "AWS::SageMaker::ClusterSchedulerConfig",
        {
            "Name": "topogov",
            "ClusterArn": ARN,
            "SchedulerConfig": {
                "PriorityClasses": [
                    {"Name": "inference", "Weight": 100},
                    {"Name": "training", "Weight": 50},
                    {"Name": "experimentation", "Weight": 10},
                ],
                "FairShare": "Enabled",
                "IdleResourceSharing": Match.absent(),
            },
        },
    )


def test_the_hyperpod_stack_has_no_cdk_nag_error(synthesized: tuple[Any, Template]) -> None:
    stack, _ = synthesized
    errors = Annotations.from_stack(stack).find_error("*", Match.string_like_regexp("AwsSolutions-.*"))
    assert errors == []


def test_without_the_cluster_there_is_no_task_governance_resource() -> None:
    context = {k: v for k, v in CONTEXT.items() if k != "topogov:hyperpodClusterArn"}
    _, template = synth(context)
    template.resource_count_is("AWS::SageMaker::ComputeQuota", 0)
    template.resource_count_is("AWS::SageMaker::ClusterSchedulerConfig", 0)


@pytest.mark.parametrize(
    ("context", "message"),
    [
        (
            {"topogov:hyperpodClusterArn": "arn:aws:sagemaker:us-west-2:111122223333:cluster/my-cluster"},
            "topogov:hyperpodClusterArn: 'arn:aws:sagemaker:us-west-2:111122223333:cluster/my-cluster' "
            "is not a SageMaker HyperPod cluster ARN",
        ),
        (
            {"topogov:hyperpodClusterArn": ARN.replace("us-west-2", "us-east-1")},
            "the HyperPod cluster is in us-east-1 but the stack deploys to us-west-2",
        ),
        (
            {"topogov:hyperpodClusterArn": ARN.replace("111122223333", "444455556666")},
            "the HyperPod cluster belongs to account 444455556666 but the stack deploys to 111122223333",
        ),
        (
            {
                "topogov:region": "ca-central-1",
                "topogov:hyperpodClusterArn": ARN.replace("us-west-2", "ca-central-1"),
            },
            "AWS::SageMaker::ComputeQuota is not available in ca-central-1",
        ),
    ],
)
def test_synth_refuses_a_cluster_it_cannot_put_the_policy_on(context: dict[str, str], message: str) -> None:
    with pytest.raises(DeployConfigError) as caught:
        synth({**CONTEXT, **context})
    assert message in str(caught.value)


def test_synth_refuses_a_policy_the_apis_would_refuse_with_every_field_named(tmp_path: Path) -> None:
    # Given teams.yaml with a weight HyperPod does not take, a namespace the add-on would not make and
    # an instance type HyperPod has not
    doc = yaml.safe_load((ROOT / "teams.yaml").read_text())
    bad = copy.deepcopy(doc)
    bad["teams"]["team-c"]["fairShareWeight"] = 200
    bad["teams"]["team-b"]["namespace"] = "ml-team-b"
    bad["hyperpod"]["instanceTypes"]["p5.48xlarge"] = 1
    path = tmp_path / "teams.yaml"
    path.write_text(yaml.safe_dump(bad, sort_keys=False))
    # When the stack is synthesized for a HyperPod cluster
    with pytest.raises(DeployConfigError) as caught:
        synth({**CONTEXT, "topogov:policyFile": str(path)})
    # Then every problem is named by its field
    text = str(caught.value)
    assert "HyperPod task governance would refuse it" in text
    assert "  hyperpod.instanceTypes.p5.48xlarge: not an instance type HyperPod takes" in text
    assert "  teams.team-b.namespace: the add-on names it hyperpod-ns-team-b" in text
    assert "  teams.team-c.fairShareWeight: HyperPod's FairShareWeight is 0–100, 200 given" in text
    # And the same file is a valid policy for a plain EKS cluster (only HyperPod refuses it)
    assert load_policy_file(path).teams["team-c"].fair_share_weight == 200


def test_both_functions_run_in_hyperpod_mode_with_the_clusters_arn(synthesized: tuple[Any, Template]) -> None:
    """HyperPod mode is on from the deployment (domain/hyperpod/mode.py): the reconcile function (labeler,
    governor) and the API both read the cluster's ARN from their settings; without the context neither
    has it."""
    stack, template = synthesized
    functions = template.find_resources("AWS::Lambda::Function")
    envs = {
        props["Properties"]["Handler"]: props["Properties"]["Environment"]["Variables"]
        for props in functions.values()
        if props["Properties"].get("Handler", "").startswith("topogov.handlers.")
    }
    assert sorted(envs) == ["topogov.handlers.api.handler", "topogov.handlers.reconcile.handler"]
    assert all(env["TOPOGOV_HYPERPOD_CLUSTER_ARN"] == ARN for env in envs.values())
    assert stack.reconciler.settings.hyperpod_cluster_arn == ARN
    assert stack.api.settings.hyperpod_cluster_arn == ARN
    plain = {k: v for k, v in CONTEXT.items() if k != "topogov:hyperpodClusterArn"}
    other, _ = synth(plain)
    assert other.reconciler.settings.hyperpod_cluster_arn is None
    assert "TOPOGOV_HYPERPOD_CLUSTER_ARN" not in other.api.settings.to_env()
