"""teams.yaml as HyperPod task governance's policy (topogov.domain.hyperpod): the ComputeQuota and
ClusterSchedulerConfig requests it renders, every refusal named by its teams.yaml field, and every
rendered request accepted by the rules of botocore's model (the emulator's judge)."""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topogov.domain import hyperpod
from topogov.domain.hyperpod import api
from topogov.domain.hyperpod.instances import NOMINAL
from topogov.domain.policy import Policy, PolicyError, load_policy_file, parse_policy
from topogov.domain.quantity import CPU, EFA, GPU, MEMORY
from topogov_local.aws.model_rules import request_errors

SAMPLE = Path(__file__).resolve().parents[2] / "teams.yaml"
ARN = "arn:aws:sagemaker:us-east-1:123456789012:cluster/a1b2c3d4e5f6"
GiB = 2**30


def document(teams: dict[str, dict[str, Any]] | None = None, **top: Any) -> dict[str, Any]:
    """A valid HyperPod policy: two p5 and one p6-b200 instance types' worth, team-a by default."""
    doc: dict[str, Any] = {
        "priorityClasses": [
            {"name": "inference-priority", "value": 1000, "weight": 100},
            {"name": "training-priority", "value": 500, "weight": 50},
        ],
        "teams": teams
        or {
            "team-a": {
                "principals": ["arn:aws:iam::111122223333:role/TeamA*"],
                "quota": {GPU: 24, EFA: 96, CPU: 576, MEMORY: "6Ti"},
            }
        },
        "hyperpod": {"instanceTypes": {"ml.p5.48xlarge": 2, "ml.p6-b200.48xlarge": 1}},
    }
    doc.update(top)
    return doc


def team(**fields: Any) -> dict[str, Any]:
    return {"principals": ["arn:aws:iam::111122223333:role/T*"], "quota": {GPU: 8}} | fields


def problems(doc: dict[str, Any]) -> list[tuple[str, str]]:
    return hyperpod.problems(parse_policy(doc))


@functools.cache
def sample() -> Policy:
    return load_policy_file(SAMPLE)


# --- the requests -----------------------------------------------------------------------------------


def test_each_team_is_one_compute_quota_split_over_the_instance_types_in_proportion():
    # Given team-a with 24 GPUs on 2 x p5 (16 GPUs) + 1 x p6-b200 (8 GPUs)
    # When the policy is rendered for a cluster
    (quota,) = hyperpod.render(parse_policy(document()), ARN).compute_quotas
    # Then the quota is split 2:1 by capacity, as the governor splits a quota over flavors
    assert quota["Name"] == quota["ComputeQuotaTarget"]["TeamName"] == "team-a"
    assert quota["ClusterArn"] == ARN
    assert quota["ComputeQuotaConfig"]["ComputeQuotaResources"] == [
        {"InstanceType": "ml.p5.48xlarge", "Accelerators": 16, "VCpu": 384, "MemoryInGiB": 4096},
        {"InstanceType": "ml.p6-b200.48xlarge", "Accelerators": 8, "VCpu": 192, "MemoryInGiB": 2048},
    ]
    # And the defaults of teams.yaml are written out: LendAndBorrow with 50 %, LowerPriority, weight 1
    assert quota["ComputeQuotaConfig"]["ResourceSharingConfig"] == {
        "Strategy": "LendAndBorrow",
        "BorrowLimit": 50,
    }
    assert quota["ComputeQuotaConfig"]["PreemptTeamTasks"] == "LowerPriority"
    assert quota["ComputeQuotaTarget"]["FairShareWeight"] == 1
    assert quota["ActivationState"] == "Enabled"


def test_the_sample_split_adds_up_to_each_teams_quota_exactly():
    governance = hyperpod.render(sample(), ARN)
    for quota in governance.compute_quotas:
        wanted = sample().teams[quota["Name"]].quota_resources
        items = quota["ComputeQuotaConfig"]["ComputeQuotaResources"]
        assert sum(i["Accelerators"] for i in items) == wanted.gpu
        assert sum(i["VCpu"] for i in items) * 1000 == wanted.cpu_m
        assert sum(i["MemoryInGiB"] for i in items) * GiB == wanted.memory


@pytest.mark.parametrize(
    ("fields", "sharing"),
    [
        ({"borrowLimitPercent": 25}, {"Strategy": "LendAndBorrow", "BorrowLimit": 25}),
        ({"sharing": "Lend"}, {"Strategy": "Lend"}),
        ({"sharing": "DontLend"}, {"Strategy": "DontLend"}),
        ({"borrowLimit": {GPU: 0}}, {"Strategy": "LendAndBorrow", "BorrowLimit": 0}),
        (
            {"borrowLimit": {GPU: 6, CPU: 12, MEMORY: "3Gi"}},
            {
                "Strategy": "LendAndBorrow",
                "BorrowLimit": 0,
                "AbsoluteBorrowLimits": [
                    {"InstanceType": "ml.p5.48xlarge", "Accelerators": 4, "VCpu": 8, "MemoryInGiB": 2},
                    {"InstanceType": "ml.p6-b200.48xlarge", "Accelerators": 2, "VCpu": 4, "MemoryInGiB": 1},
                ],
            },
        ),
    ],
)
def test_sharing_and_borrowing_become_the_resource_sharing_config(fields, sharing):
    doc = document({"team-a": team(**fields)})
    (quota,) = hyperpod.render(parse_policy(doc), ARN).compute_quotas
    assert quota["ComputeQuotaConfig"]["ResourceSharingConfig"] == sharing


def test_the_scheduler_config_carries_the_classes_without_their_suffix_and_fair_share():
    doc = document(fairShare="disabled")
    doc["hyperpod"]["idleResourceSharing"] = "Enabled"
    config = hyperpod.render(parse_policy(doc), ARN).scheduler_config
    assert config == {
        "Name": "topogov",
        "ClusterArn": ARN,
        "SchedulerConfig": {
            "PriorityClasses": [{"Name": "inference", "Weight": 100}, {"Name": "training", "Weight": 50}],
            "FairShare": "Disabled",
            "IdleResourceSharing": "Enabled",
        },
    }
    # and the add-on's WorkloadPriorityClass (<name>-priority) is then teams.yaml's own name
    assert [hyperpod.workload_priority_class(pc.name) for pc in parse_policy(doc).priority_classes] == [
        "inference-priority",
        "training-priority",
    ]


def test_a_value_from_0_to_100_is_the_weight_when_none_is_given():
    doc = document()
    doc["priorityClasses"] = [{"name": "high", "value": 90}, {"name": "low", "value": 10}]
    config = hyperpod.render(parse_policy(doc), ARN).scheduler_config["SchedulerConfig"]
    assert config["PriorityClasses"] == [{"Name": "high", "Weight": 90}, {"Name": "low", "Weight": 10}]
    assert hyperpod.workload_priority_class("high") == "high-priority"


# --- refusals ---------------------------------------------------------------------------------------


def test_the_sample_is_valid_for_hyperpod_and_without_its_section_it_is_not():
    assert hyperpod.problems(sample()) == []
    doc = document()
    del doc["hyperpod"]
    assert [p for p, _ in problems(doc)] == ["hyperpod"]


def test_instance_types_the_api_does_not_take_or_topogov_does_not_know_are_refused():
    doc = document()
    doc["hyperpod"]["instanceTypes"] = {"p5.48xlarge": 1, "ml.g6.xlarge": 1, "ml.p5.48xlarge": 1}
    (unknown, unsplittable) = problems(doc)
    assert unknown == (
        "hyperpod.instanceTypes.p5.48xlarge",
        "not an instance type HyperPod takes (ClusterInstanceType, e.g. ml.p5.48xlarge)",
    )
    assert unsplittable[0] == "hyperpod.instanceTypes.ml.g6.xlarge"
    assert unsplittable[1].startswith("Topogov does not know its vCPUs, memory and accelerators")


def test_more_than_15_instance_types_are_refused():
    doc = document()
    many = [t for t in sorted(api.INSTANCE_TYPES) if t.startswith("ml.c")][:16]
    doc["hyperpod"]["instanceTypes"] = dict.fromkeys(many, 1)
    found = problems(doc)
    assert found[0] == (
        "hyperpod.instanceTypes",
        "at most 15 instance types: a ComputeQuota lists at most 15 (ComputeQuotaResources), 16 given",
    )


def test_more_than_10_priority_classes_are_refused():
    doc = document()
    doc["priorityClasses"] = [{"name": f"c{i}", "value": i} for i in range(11)]
    assert problems(doc) == [
        ("priorityClasses", "at most 10 for HyperPod (SchedulerConfig.PriorityClasses), 11 declared")
    ]


def test_class_names_hyperpod_cannot_spell_or_that_collide_are_refused():
    doc = document()
    doc["priorityClasses"] = [
        {"name": "batch.low", "value": 1},
        {"name": "training", "value": 2},
        {"name": "training-priority", "value": 3},
    ]
    assert [p for p, _ in problems(doc)] == ["priorityClasses.0.name", "priorityClasses.2.name"]
    assert "no '.'" in problems(doc)[0][1]
    assert problems(doc)[1][1] == (
        "training-priority and training are the same HyperPod priority class "
        "(training: the add-on appends -priority)"
    )


def test_a_class_whose_value_is_no_weight_needs_one_and_weights_keep_the_values_order():
    doc = document()
    doc["priorityClasses"] = [
        {"name": "inference", "value": 1000},
        {"name": "training", "value": 500, "weight": 50},
        {"name": "batch", "value": 100, "weight": 60},
    ]
    assert problems(doc) == [
        (
            "priorityClasses.0.weight",
            "required for HyperPod: its value 1000 is not a HyperPod weight (0–100)",
        ),
        (
            "priorityClasses.2.weight",
            "60 does not order batch against training as their values do "
            "(100 against 500; weights 60 against 50)",
        ),
    ]


def test_team_names_too_long_for_the_namespace_are_refused():
    # Given a 52-character team with a namespace and queue of its own (teams.yaml's defaults would be
    # refused by the policy itself)
    name = "t" * 52
    doc = document({name: team(namespace="ns-t", localQueue="q-t")})
    # Then HyperPod's namespace for it is too long, besides not being the one given
    found = problems(doc)
    assert found[0] == (
        f"teams.{name}",
        f"HyperPod makes the namespace hyperpod-ns-{name}, a DNS-1123 label of at most 63 characters: "
        "a team name of at most 51",
    )
    assert [p for p, _ in found[1:]] == [f"teams.{name}.namespace", f"teams.{name}.localQueue"]


def test_a_namespace_or_local_queue_the_add_on_would_not_make_is_refused():
    doc = document({"team-a": team(namespace="ml-team-a", localQueue="q")})
    assert problems(doc) == [
        (
            "teams.team-a.namespace",
            "the add-on names it hyperpod-ns-team-a (CreateComputeQuota takes no namespace): "
            "remove namespace or set it to hyperpod-ns-team-a",
        ),
        (
            "teams.team-a.localQueue",
            "the add-on names it hyperpod-ns-team-a-localqueue (CreateComputeQuota takes no localQueue): "
            "remove localQueue or set it to hyperpod-ns-team-a-localqueue",
        ),
    ]


def test_a_fair_share_weight_above_100_is_refused():
    assert problems(document({"team-a": team(fairShareWeight=101)})) == [
        ("teams.team-a.fairShareWeight", "HyperPod's FairShareWeight is 0–100, 101 given")
    ]


def test_a_quota_beyond_the_apis_amounts_is_refused():
    doc = document({"team-a": team(quota={GPU: 30_000_000})})
    doc["hyperpod"]["instanceTypes"] = {"ml.p5.48xlarge": 1}
    assert problems(doc) == [
        (
            "teams.team-a.quota.nvidia.com/gpu",
            "30000000 puts 30000000 accelerators on ml.p5.48xlarge: "
            "HyperPod takes at most 10000000 (Accelerators)",
        )
    ]


def test_render_refuses_with_every_problem_and_a_bad_cluster_arn_first():
    doc = document({"team-a": team(fairShareWeight=101)})
    with pytest.raises(PolicyError) as caught:
        hyperpod.render(parse_policy(doc), "arn:aws:sagemaker:us-east-1:123456789012:cluster/my-cluster")
    assert [p for p, _ in caught.value.problems] == ["hyperpodClusterArn", "teams.team-a.fairShareWeight"]
    assert "12-character id" in caught.value.problems[0][1]


def test_efa_has_no_equivalent_and_a_difference_is_a_warning():
    doc = document({"team-a": team(quota={GPU: 8, EFA: 40})})
    doc["hyperpod"]["instanceTypes"] = {"ml.p5.48xlarge": 1}
    assert hyperpod.warnings(parse_policy(doc)) == [
        "teams.team-a.quota.vpc.amazonaws.com/efa: HyperPod has no EFA quota; the add-on derives 32 from the "
        "accelerators (40 in teams.yaml)"
    ]
    doc["teams"]["team-a"]["quota"][EFA] = 32
    assert hyperpod.warnings(parse_policy(doc)) == []


# --- every rendered request is one the API takes --------------------------------------------------

_types = st.dictionaries(st.sampled_from(sorted(NOMINAL)), st.integers(1, 200), min_size=1, max_size=6)
_team = st.fixed_dictionaries(
    {
        "quota": st.fixed_dictionaries(
            {
                GPU: st.integers(0, 5000),
                CPU: st.integers(0, 90_000),
                MEMORY: st.integers(0, 900).map(lambda g: f"{g}Ti"),
            }
        ),
        "sharing": st.sampled_from(["Lend", "DontLend", "LendAndBorrow"]),
        "fairShareWeight": st.integers(1, 100),
        "preemptTeamTasks": st.sampled_from(["Never", "LowerPriority"]),
    }
)


@settings(max_examples=60, deadline=None)
@given(types=_types, teams=st.lists(_team, min_size=1, max_size=4), absolute=st.booleans())
def test_every_request_rendered_from_a_valid_policy_passes_the_apis_rules(types, teams, absolute):
    borrow = {"borrowLimit": {GPU: 3, CPU: 7}}
    doc = document(
        {
            f"team-{i}": team(**t) | (borrow if absolute and t["sharing"] == "LendAndBorrow" else {})
            for i, t in enumerate(teams)
        }
    )
    doc["hyperpod"]["instanceTypes"] = types
    governance = hyperpod.render(parse_policy(doc), ARN)
    for quota in governance.compute_quotas:
        assert request_errors("sagemaker", "CreateComputeQuota", copy.deepcopy(quota)) == []
    assert request_errors("sagemaker", "CreateClusterSchedulerConfig", governance.scheduler_config) == []


# --- topogov policy check --hyperpod ----------------------------------------------------------------


def check(path: Path, *extra: str) -> int:
    import argparse

    from topogov_cli import policy as policy_cmd

    parser = argparse.ArgumentParser()
    policy_cmd.add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["policy", "check", str(path), "--hyperpod", *extra])
    return int(args.func(args))


def test_policy_check_hyperpod_shows_each_teams_compute_quota_and_what_differs(capsys):
    assert check(SAMPLE) == 0
    out = capsys.readouterr().out
    assert "cluster policy topogov: fair share Enabled; priority classes inference (weight 100)" in out
    assert "ComputeQuota team-c (team team-c, namespace hyperpod-ns-team-c)" in out
    assert "Strategy Lend; PreemptTeamTasks Never; FairShareWeight 2" in out
    assert "ml.p5.48xlarge       241           5542  57826" in out
    assert "- teams.team-a.quota.vpc.amazonaws.com/efa: HyperPod has no EFA quota" in out


def test_policy_check_hyperpod_json_is_what_cdk_deploy_sends(capsys):
    import json

    assert check(SAMPLE, "--json", "--cluster-arn", ARN) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["computeQuotas"] == hyperpod.render(sample(), ARN).compute_quotas
    assert body["clusterSchedulerConfig"]["ClusterArn"] == ARN


def test_policy_check_hyperpod_lists_every_refusal_and_exits_1(tmp_path, capsys):
    import yaml

    doc = document({"team-a": team(fairShareWeight=101, namespace="x")})
    path = tmp_path / "teams.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert check(path) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"topogov policy check: {path} is not a policy HyperPod task governance takes:"
    assert [line.split(":")[0].strip() for line in err[1:]] == [
        "teams.team-a.namespace",
        "teams.team-a.localQueue",  # its default follows the namespace given
        "teams.team-a.fairShareWeight",
    ]
