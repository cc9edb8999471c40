"""The team policy: loading, defaults, every validation rule, principal matching and the CLI."""

from __future__ import annotations

import argparse
import copy
import functools
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from topogov.domain.errors import ConfigError
from topogov.domain.policy import (
    Policy,
    PolicyError,
    format_quantity,
    load_policy,
    load_policy_file,
    parse_policy,
    principal_matches,
)
from topogov.domain.quantity import CPU, EFA, GPU, MEMORY, Resources
from topogov.logic.identity import Identities
from topogov_cli import policy as policy_cmd

SAMPLE = Path(__file__).resolve().parents[2] / "teams.yaml"
TiB = 2**40
# The local stack's fleet: 64 x p5.48xlarge + 4 x p6-b200.48xlarge (+ 2 x c5.2xlarge for CPU/memory).
LOCAL_FLEET = Resources(gpu=544, efa=64 * 32 + 4 * 8, cpu_m=68 * 191_450, memory=68 * 2002 * 2**30)


def document(**team_fields: Any) -> dict[str, Any]:
    """A minimal valid policy with one team, team-a, whose fields ``team_fields`` override."""
    team: dict[str, Any] = {
        "principals": ["arn:aws:iam::111122223333:role/TeamA*"],
        "quota": {GPU: 32, EFA: 128, CPU: 1536, MEMORY: "16Ti"},
    }
    team.update(team_fields)
    return {
        "priorityClasses": [
            {"name": "inference-priority", "value": 1000},
            {"name": "training-priority", "value": 500},
            {"name": "experimentation-priority", "value": 100},
        ],
        "teams": {"team-a": team},
    }


@functools.cache
def sample() -> Policy:
    return load_policy_file(SAMPLE)


def problems_of(data: Any) -> list[tuple[str, str]]:
    with pytest.raises(PolicyError) as caught:
        parse_policy(data)
    return caught.value.problems


def paths_of(data: Any) -> list[str]:
    return [path for path, _ in problems_of(data)]


# --- the sample ----------------------------------------------------------------------------------


def test_sample_policy_loads_with_the_documented_teams():
    # Given the sample policy shipped at the repository root
    # When it is loaded
    policy = load_policy_file(SAMPLE)

    # Then it has the three priority classes and the three teams
    assert [(pc.name, pc.value) for pc in policy.priority_classes] == [
        ("inference-priority", 1000),
        ("training-priority", 500),
        ("experimentation-priority", 100),
    ]
    assert policy.fair_share == "enabled"
    assert list(policy.teams) == ["team-a", "team-b", "team-c"]
    # And team-a is the one that may run AWS's example job with inference-priority
    a = policy.teams["team-a"]
    assert a.namespace == "hyperpod-ns-team-a"
    assert a.local_queue == "hyperpod-ns-team-a-localqueue"
    assert "inference-priority" in a.priority_class_names
    assert a.default_priority_class == "experimentation-priority"
    assert a.quota_resources == Resources(gpu=256, efa=1024, cpu_m=5_888_000, memory=60 * TiB)
    assert a.borrow_resources == Resources(gpu=64, efa=256, cpu_m=1_472_000, memory=15 * TiB)
    assert a.max_in_flight_resources.gpu == 2 * (256 + 64)
    # And team-b and team-c may not use inference-priority
    assert all("inference-priority" not in policy.teams[t].priority_class_names for t in ("team-b", "team-c"))
    # And the principals fit both a real account and the local stack's IAM users
    assert policy.teams_for_principal("arn:aws:iam::123456789012:user/topogov-team-a") == ["team-a"]
    assert policy.teams_for_principal("arn:aws:iam::111122223333:role/TeamARole") == ["team-a"]
    assert policy.is_admin("arn:aws:iam::123456789012:user/topogov-admin")
    assert policy.is_admin("arn:aws:iam::111122223333:role/PlatformAdmin")
    # And team-c's pods are held to Pod Security's restricted level, the others' to baseline
    assert {n: t.pods.security for n, t in policy.teams.items()} == {
        "team-a": "baseline",
        "team-b": "baseline",
        "team-c": "restricted",
    }
    assert policy.job_retention_days == 30


def test_sample_summary_rows_are_right():
    # Given the sample policy
    policy = load_policy_file(SAMPLE)

    # When it is summarised
    rows = {row["team"]: row for row in policy.summary()}

    # Then each row has the resolved values in human units
    assert rows["team-a"] == {
        "team": "team-a",
        "namespace": "hyperpod-ns-team-a",
        "localQueue": "hyperpod-ns-team-a-localqueue",
        "sharing": "LendAndBorrow",
        "preemptTeamTasks": "LowerPriority",
        "fairShareWeight": 10,
        "quota": {GPU: "256", EFA: "1024", CPU: "5888", MEMORY: "60Ti"},
        "borrow": {GPU: "64", EFA: "256", CPU: "1472", MEMORY: "15Ti"},
        "maxInFlight": {GPU: "640", EFA: "2560", CPU: "14720", MEMORY: "150Ti"},
        "priorityClasses": ["inference-priority", "training-priority", "experimentation-priority"],
        "defaultPriorityClass": "experimentation-priority",
        "principals": [
            "arn:aws:iam::111122223333:role/TeamA*",
            "arn:aws:iam::123456789012:user/topogov-team-a",
            "arn:aws:iam::123456789012:role/teams/team-a/*",
        ],
        "pods": {
            "security": "baseline",
            "serviceAccounts": ["default"],
            "runtimeClasses": [],
            "secrets": [],
            "maxGracePeriodSeconds": 300,
        },
    }
    # And team-b borrows 50 % of its quota, team-c (Lend) nothing but may queue 256 GPUs
    assert rows["team-b"]["namespace"] == "hyperpod-ns-team-b"
    assert rows["team-b"]["borrow"] == {GPU: "64", EFA: "256", CPU: "1472", MEMORY: "15Ti"}
    assert rows["team-b"]["maxInFlight"][GPU] == "384"
    assert rows["team-c"]["borrow"] == {GPU: "0", EFA: "0", CPU: "0", MEMORY: "0"}
    assert rows["team-c"]["maxInFlight"][GPU] == "256"
    assert rows["team-c"]["defaultPriorityClass"] == "experimentation-priority"


def test_sample_fits_the_local_fleet_without_warnings():
    # Given the sample policy and the local stack's fleet
    policy = load_policy_file(SAMPLE)

    # When warnings are computed with and without the cluster's capacity
    # Then there are none: the nominal quotas fit
    assert policy.warnings() == []
    assert policy.warnings(LOCAL_FLEET) == []


def test_normalised_json_is_itself_an_equivalent_policy():
    # Given the sample policy
    policy = load_policy_file(SAMPLE)

    # When its normalised JSON is loaded as a policy
    again = load_policy(json.dumps(policy.to_json()))

    # Then it means the same
    assert again.to_json() == policy.to_json()
    for name, team in policy.teams.items():
        other = again.teams[name]
        assert other.borrow_resources == team.borrow_resources
        assert other.max_in_flight_resources == team.max_in_flight_resources


# --- defaults ------------------------------------------------------------------------------------


def test_namespace_and_local_queue_default_from_the_team_name():
    # Given a team without namespace or localQueue
    # When the policy is parsed
    team = parse_policy(document()).teams["team-a"]

    # Then they default to hyperpod-ns-<team> and <namespace>-localqueue
    assert team.name == "team-a"
    assert team.namespace == "hyperpod-ns-team-a"
    assert team.local_queue == "hyperpod-ns-team-a-localqueue"


def test_local_queue_defaults_from_an_explicit_namespace():
    # Given a team with only a namespace
    team = parse_policy(document(namespace="ml-research")).teams["team-a"]

    # Then the local queue follows it
    assert team.local_queue == "ml-research-localqueue"


def test_borrow_defaults_to_half_the_quota_rounded_down():
    # Given a LendAndBorrow team (the default) with neither borrowLimit nor borrowLimitPercent
    data = document(quota={GPU: 5, EFA: 3, CPU: "1500m", MEMORY: 3})

    # When the policy is parsed
    team = parse_policy(data).teams["team-a"]

    # Then it may borrow 50 % of each quota, rounded down
    assert team.sharing == "LendAndBorrow"
    assert team.borrow_resources == Resources(gpu=2, efa=1, cpu_m=750, memory=1)


def test_borrow_limit_percent_is_a_percentage_of_each_quota():
    # Given a team that may borrow 25 % of its quota
    team = parse_policy(document(borrowLimitPercent=25)).teams["team-a"]

    # Then its borrow limit is a quarter of each quota
    assert team.borrow_resources == Resources(gpu=8, efa=32, cpu_m=384_000, memory=4 * TiB)


def test_absolute_borrow_limit_borrows_nothing_of_an_unnamed_resource():
    # Given an absolute borrow limit naming only GPUs
    team = parse_policy(document(borrowLimit={GPU: 16})).teams["team-a"]

    # Then only GPUs may be borrowed
    assert team.borrow_resources == Resources(gpu=16)


@pytest.mark.parametrize(("sharing", "lends"), [("Lend", True), ("DontLend", False)])
def test_only_lend_and_borrow_teams_borrow(sharing, lends):
    # Given a team that lends only, or neither lends nor borrows
    team = parse_policy(document(sharing=sharing)).teams["team-a"]

    # Then it borrows nothing, and its in-flight cap is twice its quota
    assert team.borrow_resources == Resources()
    assert team.max_in_flight_resources == team.quota_resources + team.quota_resources
    # And only a DontLend team keeps its quota from the cohort
    assert team.lends is lends
    assert team.lending_limit_resources == (None if lends else Resources())


def test_max_in_flight_defaults_to_twice_quota_plus_borrow_per_unnamed_resource():
    # Given a team that caps only GPUs in flight
    team = parse_policy(document(borrowLimitPercent=50, maxInFlight={GPU: 40})).teams["team-a"]

    # Then GPUs are capped as given and the rest at 2 x (quota + borrow)
    assert team.max_in_flight_resources == Resources(
        gpu=40, efa=2 * (128 + 64), cpu_m=2 * (1_536_000 + 768_000), memory=2 * 24 * TiB
    )


def test_priority_classes_default_to_all_declared_and_the_lowest_is_the_default():
    # Given a team that names no priority classes
    team = parse_policy(document()).teams["team-a"]

    # Then it may use every declared class and defaults to the lowest-value one
    assert team.priority_class_names == (
        "inference-priority",
        "training-priority",
        "experimentation-priority",
    )
    assert team.default_priority_class == "experimentation-priority"


def test_default_priority_class_defaults_to_the_lowest_of_the_teams_classes():
    # Given a team limited to inference and training
    team = parse_policy(document(priorityClasses=["inference-priority", "training-priority"])).teams["team-a"]

    # Then training (500) is its default
    assert team.default_priority_class == "training-priority"


def test_other_defaults_follow_hyperpod_and_kueue():
    # Given a minimal policy
    policy = parse_policy(document())
    team = policy.teams["team-a"]

    # Then fair sharing is on, the team preempts its own lower-priority tasks, weight 1, no admins
    assert policy.fair_share == "enabled"
    assert team.preempt_team_tasks == "LowerPriority"
    assert team.fair_share_weight == 1
    assert policy.admins == ()


def test_quantities_accept_kubernetes_strings_and_numbers():
    # Given quantities written the ways Kubernetes writes them
    team = parse_policy(document(quota={GPU: "8", EFA: 1e1, CPU: "500m", MEMORY: "512Gi"})).teams["team-a"]

    # Then they are whole devices, millicores and bytes
    assert team.quota_resources == Resources(gpu=8, efa=10, cpu_m=500, memory=512 * 2**30)


def test_a_quota_may_leave_resources_out():
    # Given a CPU-only team
    team = parse_policy(document(quota={CPU: 64, MEMORY: "256Gi"})).teams["team-a"]

    # Then the resources it does not name are zero
    assert team.quota_resources == Resources(cpu_m=64_000, memory=256 * 2**30)


# --- validation: every rule names its path -------------------------------------------------------


def test_a_quota_key_outside_the_governed_resources_is_named():
    assert problems_of(document(quota={"nvidia.com/gpus": 8})) == [
        (
            "teams.team-a.quota.nvidia.com/gpus",
            "not a governed resource (one of nvidia.com/gpu, vpc.amazonaws.com/efa, cpu, memory)",
        )
    ]


def test_a_negative_quota_is_refused():
    assert problems_of(document(quota={GPU: -1})) == [("teams.team-a.quota.nvidia.com/gpu", "must be ≥ 0")]


@pytest.mark.parametrize(
    ("quota", "path", "message"),
    [
        ({MEMORY: "16TB"}, "teams.team-a.quota.memory", "not a Kubernetes quantity: '16TB'"),
        ({CPU: True}, "teams.team-a.quota.cpu", "must be a Kubernetes quantity"),
        ({GPU: 1.5}, "teams.team-a.quota.nvidia.com/gpu", "must be a whole number of devices"),
        ({CPU: "0.0001"}, "teams.team-a.quota.cpu", "must be a whole number of millicores"),
        ({MEMORY: "1e30"}, "teams.team-a.quota.memory", "is too large"),
    ],
)
def test_an_unusable_quantity_is_refused(quota, path, message):
    [(where, what)] = problems_of(document(quota=quota))
    assert where == path
    assert what.startswith(message)


def test_the_quota_is_required():
    data = document()
    del data["teams"]["team-a"]["quota"]
    assert problems_of(data) == [("teams.team-a.quota", "required")]


@pytest.mark.parametrize("name", ["Team-A", "team_a", "-team", "team-", "a" * 64])
def test_a_team_name_must_be_a_dns_label(name):
    data = document()
    data["teams"] = {name: data["teams"]["team-a"] | {"namespace": "ns", "localQueue": "q"}}
    [(path, message)] = problems_of(data)
    assert path == f"teams.{name}"
    assert "is not a DNS-1123 label" in message


def test_a_63_character_team_name_is_a_label_but_its_default_namespace_is_too_long():
    # Given a team whose name is a 63-character label and no namespace
    name = "a" * 63
    data = document()
    data["teams"] = {name: data["teams"]["team-a"]}

    # Then only the defaulted namespace is reported, marked as the default
    (path, message), *_ = problems_of(data)
    assert path == f"teams.{name}.namespace"
    assert message.endswith("(the default)")


@pytest.mark.parametrize(("key", "value"), [("namespace", "Team_NS"), ("localQueue", "q" * 64)])
def test_namespace_and_local_queue_must_be_dns_labels(key, value):
    [(path, message)] = problems_of(document(**{key: value}))
    assert path == f"teams.team-a.{key}"
    assert "is not a DNS-1123 label" in message


def test_priority_class_names_must_be_dns_subdomains():
    data = document()
    data["priorityClasses"][1]["name"] = "Training_Priority"
    data["teams"]["team-a"]["priorityClasses"] = ["inference-priority"]
    [(path, message)] = problems_of(data)
    assert path == "priorityClasses.1.name"
    assert "is not a DNS-1123 subdomain" in message


def test_priority_class_names_may_be_dotted_subdomains():
    data = document()
    data["priorityClasses"][0]["name"] = "inference.example.com"
    assert parse_policy(data).priority_value("inference.example.com") == 1000


@pytest.mark.parametrize("value", [-2_147_483_648, 0, 1_000_000_000])
def test_priority_values_within_kueues_range_are_accepted(value):
    data = document()
    data["priorityClasses"][0]["value"] = value
    assert parse_policy(data).priority_value("inference-priority") == value


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (1_000_000_001, "must be an integer from -2147483648 to 1000000000 (Kueue's range)"),
        (-2_147_483_649, "must be an integer from -2147483648 to 1000000000 (Kueue's range)"),
        ("1000", "must be an integer"),
        (1000.0, "must be an integer"),
        (True, "must be an integer"),
    ],
)
def test_priority_values_are_integers_in_kueues_range_never_read_from_strings(value, message):
    data = document()
    data["priorityClasses"][0]["value"] = value
    assert problems_of(data) == [("priorityClasses.0.value", message)]


def test_priority_class_names_are_unique():
    data = document()
    data["priorityClasses"].append({"name": "training-priority", "value": 1})
    assert problems_of(data) == [
        ("priorityClasses.3.name", "duplicate priority class training-priority (also priorityClasses.1)")
    ]


def test_at_least_one_priority_class_is_declared():
    data = document()
    data["priorityClasses"] = []
    assert ("priorityClasses", "must declare at least one priority class") in problems_of(data)


def test_a_teams_priority_class_must_be_declared():
    problems = problems_of(document(priorityClasses=["training-priority", "urgent-priority"]))
    assert problems == [
        (
            "teams.team-a.priorityClasses.1",
            "urgent-priority is not declared in priorityClasses "
            "(inference-priority, training-priority, experimentation-priority)",
        )
    ]


def test_a_team_lists_a_priority_class_once_and_at_least_one():
    assert problems_of(document(priorityClasses=["training-priority", "training-priority"])) == [
        ("teams.team-a.priorityClasses.1", "training-priority is listed twice")
    ]
    assert ("teams.team-a.priorityClasses", "must list at least one priority class") in problems_of(
        document(priorityClasses=[])
    )


def test_the_default_priority_class_must_be_one_of_the_teams():
    problems = problems_of(
        document(priorityClasses=["training-priority"], defaultPriorityClass="inference-priority")
    )
    assert problems == [
        (
            "teams.team-a.defaultPriorityClass",
            "inference-priority is not one of the team's priority classes (training-priority)",
        )
    ]


def test_two_teams_cannot_claim_one_namespace():
    # Given team-b naming the namespace team-a gets by default
    data = document()
    data["teams"]["team-b"] = copy.deepcopy(data["teams"]["team-a"]) | {"namespace": "hyperpod-ns-team-a"}

    # Then the later team is refused, naming the first
    assert problems_of(data) == [
        ("teams.team-b.namespace", "hyperpod-ns-team-a is already the namespace of team team-a")
    ]


def test_borrow_limit_and_borrow_limit_percent_are_mutually_exclusive():
    assert problems_of(document(borrowLimit={GPU: 16}, borrowLimitPercent=50)) == [
        (
            "teams.team-a.borrowLimitPercent",
            "borrowLimit and borrowLimitPercent are mutually exclusive: give one",
        )
    ]


@pytest.mark.parametrize(
    ("percent", "message"), [(101, "must be from 0 to 100"), (-1, "must be from 0 to 100")]
)
def test_borrow_limit_percent_is_0_to_100(percent, message):
    assert problems_of(document(borrowLimitPercent=percent)) == [("teams.team-a.borrowLimitPercent", message)]


@pytest.mark.parametrize("percent", [0, 100])
def test_borrow_limit_percent_bounds_are_accepted(percent):
    team = parse_policy(document(borrowLimitPercent=percent)).teams["team-a"]
    assert team.borrow_resources.gpu == 32 * percent // 100


def test_borrow_limit_quantities_are_checked_like_quotas():
    assert problems_of(document(borrowLimit={GPU: -2, "cpus": 1})) == [
        ("teams.team-a.borrowLimit.nvidia.com/gpu", "must be ≥ 0"),
        (
            "teams.team-a.borrowLimit.cpus",
            "not a governed resource (one of nvidia.com/gpu, vpc.amazonaws.com/efa, cpu, memory)",
        ),
    ]


@pytest.mark.parametrize("sharing", ["Lend", "DontLend"])
def test_a_team_that_does_not_borrow_cannot_have_a_borrow_limit(sharing):
    assert problems_of(document(sharing=sharing, borrowLimit={GPU: 4})) == [
        (
            "teams.team-a.borrowLimit",
            f"a team with sharing {sharing} never borrows: remove borrowLimit or set sharing: LendAndBorrow",
        )
    ]


def test_max_in_flight_must_be_at_least_the_quota():
    assert problems_of(document(maxInFlight={GPU: 31})) == [
        (
            "teams.team-a.maxInFlight.nvidia.com/gpu",
            "must be ≥ the quota (32): submissions could never fill the quota",
        )
    ]
    # And equal to the quota is enough
    assert parse_policy(document(maxInFlight={GPU: 32})).teams["team-a"].max_in_flight_resources.gpu == 32


def test_a_team_needs_at_least_one_principal_and_each_is_an_arn_pattern():
    assert problems_of(document(principals=[])) == [
        ("teams.team-a.principals", "must list at least one principal ARN pattern")
    ]
    assert problems_of(document(principals=["role/TeamA*", "arn:aws:iam:111122223333:role/TeamA"])) == [
        ("teams.team-a.principals.0", "'role/TeamA*' is not an ARN pattern: it must start with 'arn:'"),
        (
            "teams.team-a.principals.1",
            "'arn:aws:iam:111122223333:role/TeamA' is not an ARN pattern: "
            "it must read arn:PARTITION:SERVICE:REGION:ACCOUNT:RESOURCE",
        ),
    ]


@pytest.mark.parametrize(
    ("weight", "message"), [(0, "must be > 0"), (-3, "must be > 0"), ("10", "must be an integer")]
)
def test_fair_share_weight_is_a_positive_integer(weight, message):
    assert problems_of(document(fairShareWeight=weight)) == [("teams.team-a.fairShareWeight", message)]


def test_teams_must_not_be_empty_nor_missing():
    data = document()
    data["teams"] = {}
    assert problems_of(data) == [("teams", "must define at least one team")]
    del data["teams"]
    assert problems_of(data) == [("teams", "required")]


def test_admins_may_be_empty_but_must_be_arn_patterns():
    data = document()
    data["admins"] = []
    assert parse_policy(data).admins == ()
    data["admins"] = ["PlatformAdmin"]
    assert problems_of(data) == [
        ("admins.0", "'PlatformAdmin' is not an ARN pattern: it must start with 'arn:'")
    ]


@pytest.mark.parametrize(
    ("key", "value", "path", "message"),
    [
        ("sharing", "Borrow", "teams.team-a.sharing", "must be 'Lend', 'DontLend' or 'LendAndBorrow'"),
        ("preemptTeamTasks", "Always", "teams.team-a.preemptTeamTasks", "must be 'Never' or 'LowerPriority'"),
    ],
)
def test_enumerations_are_checked(key, value, path, message):
    assert problems_of(document(**{key: value})) == [(path, message)]


def test_fair_share_is_enabled_or_disabled():
    data = document()
    data["fairShare"] = True  # what YAML makes of `fairShare: yes`
    assert problems_of(data) == [("fairShare", "must be 'enabled' or 'disabled'")]


def test_unknown_keys_are_refused_with_a_suggestion():
    data = document(borowLimit={GPU: 1})
    data["team"] = {}
    assert problems_of(data) == [
        ("teams.team-a.borowLimit", "unknown key; did you mean borrowLimit?"),
        ("team", "unknown key; did you mean teams?"),
    ]


def test_a_team_cannot_name_itself_its_key_is_its_name():
    assert problems_of(document(name="team-b")) == [
        ("teams.team-a.name", "unknown key: a team's name is its key under teams")
    ]


@pytest.mark.parametrize(
    ("data", "message"), [(None, "the policy is empty"), ([1, 2], "the policy must be a mapping")]
)
def test_a_document_that_is_not_a_mapping_is_refused(data, message):
    [(path, what)] = problems_of(data)
    assert path == ""
    assert what.startswith(message)


def test_a_yaml_syntax_error_names_its_line_and_column():
    # Given YAML with a broken flow mapping on line 3
    text = "fairShare: enabled\nteams:\n  team-a: {quota: [}\n"

    # When it is loaded
    with pytest.raises(PolicyError) as caught:
        load_policy(text)

    # Then the single problem names the line and column
    [(path, message)] = caught.value.problems
    assert path == ""
    assert re.match(r"YAML error at line 3, column \d+: ", message)


def test_a_key_given_twice_is_a_yaml_error_rather_than_a_silent_override():
    text = "teams:\n  team-a: {}\n  team-a: {}\n"
    with pytest.raises(PolicyError) as caught:
        load_policy(text)
    assert caught.value.problems == [
        ("", "YAML error at line 3, column 3: duplicate key 'team-a' (first at line 2)")
    ]


def test_all_problems_are_collected_at_once():
    # Given a policy with problems in every part, several in one team
    data = document(
        quota={GPU: -1, "gpu": 2, EFA: 8},
        priorityClasses=["training-priority", "urgent"],
        fairShareWeight=0,
        principals=["TeamA"],
        maxInFlight={EFA: 1},
    )
    data["priorityClasses"][2]["value"] = "100"
    data["fairShare"] = "on"
    data["admins"] = ["admin"]
    data["teams"]["team-b"] = {
        "namespace": "hyperpod-ns-team-a",
        "principals": ["arn:aws:iam::1:user/b"],
        "quota": {},
        "sharing": "Lend",
        "borrowLimitPercent": 10,
    }

    # When it is parsed
    with pytest.raises(PolicyError) as caught:
        parse_policy(data)

    # Then every problem is reported, field-level and cross-field alike, in document order
    assert [path for path, _ in caught.value.problems] == [
        "priorityClasses.2.value",
        "teams.team-a.principals.0",
        "teams.team-a.quota.nvidia.com/gpu",
        "teams.team-a.quota.gpu",
        "teams.team-a.fairShareWeight",
        "teams.team-a.maxInFlight.vpc.amazonaws.com/efa",
        "teams.team-a.priorityClasses.1",
        "teams.team-b.borrowLimitPercent",
        "teams.team-b.namespace",
        "fairShare",
        "admins.0",
    ]
    # And the message has one problem a line, path first
    lines = str(caught.value).splitlines()
    assert len(lines) == len(caught.value.problems)
    assert "teams.team-a.quota.nvidia.com/gpu: must be ≥ 0" in lines
    # And the error is a configuration error and a ValueError
    assert isinstance(caught.value, ConfigError)
    assert isinstance(caught.value, ValueError)


def test_building_a_policy_directly_still_enforces_the_cross_field_rules():
    # Given a document whose team uses an undeclared class
    data = document(priorityClasses=["training-priority", "urgent"])

    # When the model is validated directly rather than through parse_policy
    # Then pydantic refuses it with the same problem
    with pytest.raises(ValidationError, match="urgent is not declared in priorityClasses"):
        Policy.model_validate(data)


def test_the_model_applies_the_same_defaults_as_parse_policy():
    assert Policy.model_validate(document()).to_json() == parse_policy(document()).to_json()


def test_parse_policy_does_not_modify_its_input():
    data = document()
    before = copy.deepcopy(data)
    parse_policy(data)
    assert data == before


# --- lookups -------------------------------------------------------------------------------------


def test_priority_value_and_namespace_lookups():
    policy = load_policy_file(SAMPLE)
    assert policy.priority_value("training-priority") == 500
    with pytest.raises(KeyError):
        policy.priority_value("nope")
    assert policy.team_for_namespace("hyperpod-ns-team-b") == "team-b"
    assert policy.team_for_namespace("default") is None


# --- principals ----------------------------------------------------------------------------------
# Patterns are matched against the principal ARN, as IAM's aws:PrincipalArn (domain/policy/arn.py):
# an assumed-role session's is its role's with the role's path, looked up by logic/identity.py.

ROLE = "arn:aws:iam::111122223333:role/TeamA*"


@pytest.mark.parametrize(
    ("pattern", "principal", "matches"),
    [
        # an IAM user, exactly
        (
            "arn:aws:iam::123456789012:user/topogov-team-a",
            "arn:aws:iam::123456789012:user/topogov-team-a",
            True,
        ),
        (
            "arn:aws:iam::123456789012:user/topogov-team-a",
            "arn:aws:iam::123456789012:user/topogov-team-ab",
            False,
        ),
        # case-sensitive
        (
            "arn:aws:iam::123456789012:user/topogov-team-a",
            "arn:aws:iam::123456789012:user/Topogov-team-a",
            False,
        ),
        # a role wildcard
        (ROLE, "arn:aws:iam::111122223333:role/TeamARole", True),
        (ROLE, "arn:aws:iam::111122223333:role/TeamBRole", False),
        (ROLE, "arn:aws:iam::999999999999:role/TeamARole", False),
        # IAM's wildcard spans '/': a pathless name pattern's * reaches into a path, as in IAM
        (ROLE, "arn:aws:iam::111122223333:role/TeamA/x/Role", True),
        (ROLE, "arn:aws:iam::111122223333:role/teams/TeamARole", False),
        # a session ARN is not its role's ARN: only a pattern written for sessions matches it
        (ROLE, "arn:aws:sts::111122223333:assumed-role/TeamARole/alice", False),
        (
            "arn:aws:sts::111122223333:assumed-role/TeamARole/*",
            "arn:aws:sts::111122223333:assumed-role/TeamARole/alice",
            True,
        ),
        # `?` is exactly one character
        (
            "arn:aws:iam::123456789012:user/topogov-team-?",
            "arn:aws:iam::123456789012:user/topogov-team-b",
            True,
        ),
        (
            "arn:aws:iam::123456789012:user/topogov-team-?",
            "arn:aws:iam::123456789012:user/topogov-team-",
            False,
        ),
        (
            "arn:aws:iam::123456789012:user/topogov-team-?",
            "arn:aws:iam::123456789012:user/topogov-team-bc",
            False,
        ),
        # partitions
        (
            "arn:aws-us-gov:iam::111122223333:role/TeamA*",
            "arn:aws-us-gov:iam::111122223333:role/TeamAOps",
            True,
        ),
        ("arn:aws-us-gov:iam::111122223333:role/TeamA*", "arn:aws:iam::111122223333:role/TeamAOps", False),
        ("arn:aws-cn:iam::111122223333:role/TeamA*", "arn:aws-cn:iam::111122223333:role/TeamAOps", True),
        (ROLE, "arn:aws-cn:iam::111122223333:role/TeamAOps", False),
        ("arn:*:iam::111122223333:role/TeamA*", "arn:aws-us-gov:iam::111122223333:role/TeamAOps", True),
        # each ARN part is matched on its own: a wildcard in the account does not reach the resource
        ("arn:aws:iam::*:user/bob", "arn:aws:iam::123456789012:user/bob", True),
        ("arn:aws:iam::1234*:user/bob", "arn:aws:iam::1234:user/evil:user/bob", False),
        # callers that are not ARNs match nothing
        (ROLE, "TeamARole", False),
        (ROLE, "arn:aws:sts::111122223333:assumed-role/", False),
    ],
)
def test_principal_matching(pattern, principal, matches):
    assert principal_matches(pattern, principal) is matches


class RolePathsOf:
    """Role paths as IAM would answer GetRole (None: no such role, or not readable); counts calls."""

    def __init__(self, paths):
        self.paths = paths
        self.calls = []

    def role_path(self, role):
        self.calls.append((role.account, role.name))
        return self.paths.get((role.account, role.name))


def identities(principals, paths, admins=()):
    data = document()
    data["teams"] = {"team-a": {"principals": list(principals), "quota": {}}}
    data["admins"] = list(admins)
    roles = RolePathsOf(paths)
    return Identities(parse_policy(data), roles), roles


def session(role, name="alice", account="111122223333"):
    return f"arn:aws:sts::{account}:assumed-role/{role}/{name}"


@pytest.mark.parametrize(
    ("path", "member"),
    [
        ("/teams/team-a/", True),  # the path the pattern names
        ("/teams/team-a/sub/", True),  # IAM's * spans '/'
        ("/", False),  # the same name at the root: another role
        ("/teams/team-b/", False),
        (None, False),  # the role cannot be read: no role principal
    ],
)
def test_a_role_pattern_with_a_path_matches_only_sessions_of_roles_on_that_path(path, member):
    # Given team-a's principals are the roles under /teams/team-a/ (the issue: such a pattern once
    # matched every assumed role of the account, since a session's ARN carries no path)
    ids, roles = identities(
        ["arn:aws:iam::111122223333:role/teams/team-a/*"], {("111122223333", "Anyone"): path}
    )
    # When a session of role Anyone calls
    caller = ids.caller(session("Anyone"))
    # Then it is team-a's only when IAM would say the role is under that path
    assert (ids.policy.teams_for_principal(caller.principal) == ["team-a"]) is member
    assert caller.arn == session("Anyone")  # the session, for submitted_by
    assert roles.calls == [("111122223333", "Anyone")]


def test_an_identity_center_pattern_matches_its_roles_only():
    sso = "arn:aws:iam::111122223333:role/aws-reserved/sso.amazonaws.com/AWSReservedSSO_*"
    ids, _ = identities(
        ["arn:aws:iam::111122223333:role/TeamA*"],
        {
            ("111122223333", "AWSReservedSSO_Admin_1a2b"): "/aws-reserved/sso.amazonaws.com/",
            ("111122223333", "AWSReservedSSO_Fake"): "/",
        },
        admins=[sso],
    )
    admin = ids.caller(session("AWSReservedSSO_Admin_1a2b", "ann@example.com"))
    assert ids.policy.is_admin(admin.principal)
    assert not ids.policy.is_admin(ids.caller(session("AWSReservedSSO_Fake")).principal)
    assert not ids.policy.is_admin(ids.caller(session("TeamARole")).principal)


def test_the_path_is_looked_up_once_per_role_and_never_for_callers_no_pattern_could_match():
    # Given a pattern without a wildcard (a wildcard could match any name on some path: IAM's * spans
    # '/', so role/TeamA* matches role/TeamAx/Intern, and every role of the account is looked up)
    ids, roles = identities(
        ["arn:aws:iam::111122223333:role/teams/TeamARole"], {("111122223333", "TeamARole"): "/teams/"}
    )
    for name in ("alice", "bob", "carol"):
        assert ids.policy.teams_for_principal(ids.caller(session("TeamARole", name)).principal) == ["team-a"]
    ids.caller(session("Intern"))  # no pattern could match a role named Intern
    ids.caller(session("TeamARole", account="999999999999"))  # nor one of another account
    ids.caller("arn:aws:iam::111122223333:user/TeamAUser")  # a user: its ARN has its path
    assert roles.calls == [("111122223333", "TeamARole")]


def test_a_looked_up_path_is_read_again_after_its_time():
    ids, roles = identities(["arn:aws:iam::111122223333:role/TeamA*"], {("111122223333", "TeamARole"): "/"})
    now = [0.0]
    ids.monotonic = lambda: now[0]
    ids.caller(session("TeamARole"))
    now[0] = ids.ttl_s - 1
    ids.caller(session("TeamARole"))
    now[0] = ids.ttl_s + 1
    ids.caller(session("TeamARole"))
    assert len(roles.calls) == 2


@settings(max_examples=200)
@given(name=st.text(alphabet="abcXYZ019+=,.@-*?/:", min_size=1, max_size=40))
def test_the_session_name_never_changes_the_match(name):
    # Given the sample policy and sessions of a team-a role, an unknown role and the admin role
    policy = sample()
    paths = {("111122223333", r): "/" for r in ("TeamARole", "Intern", "PlatformAdmin")}
    ids = Identities(policy, RolePathsOf(paths))
    for role in ("TeamARole", "Intern", "PlatformAdmin"):
        base = f"arn:aws:sts::111122223333:assumed-role/{role}/"
        one, other = ids.caller(base + name), ids.caller(base + "s")
        # Then whatever the session name, the answer is the role's
        assert policy.teams_for_principal(one.principal) == policy.teams_for_principal(other.principal)
        assert policy.is_admin(one.principal) == policy.is_admin(other.principal)


def test_teams_for_principal_is_sorted_and_may_name_several_teams():
    # Given two teams (declared b first) that both admit the data-science role
    data = document()
    data["teams"] = {
        "team-b": {"principals": ["arn:aws:iam::111122223333:role/DataScience"], "quota": {}},
        "team-a": {"principals": ["arn:aws:iam::111122223333:role/Data*"], "quota": {}},
    }
    policy = parse_policy(data)

    # Then the role is in both, sorted
    assert policy.teams_for_principal("arn:aws:iam::111122223333:role/DataScience") == ["team-a", "team-b"]
    assert policy.teams_for_principal("arn:aws:iam::111122223333:role/DataOps") == ["team-a"]
    assert policy.teams_for_principal("arn:aws:iam::111122223333:user/DataScience") == []


def test_admins_are_matched_like_principals():
    data = document()
    data["admins"] = ["arn:aws:iam::111122223333:role/PlatformAdmin"]
    policy = parse_policy(data)
    assert policy.is_admin("arn:aws:iam::111122223333:role/PlatformAdmin")
    assert not policy.is_admin("arn:aws:iam::111122223333:role/PlatformAdmins")
    assert not policy.is_admin("arn:aws:sts::111122223333:assumed-role/TeamARole/PlatformAdmin")
    # And an admin is not thereby a member of a team
    assert policy.teams_for_principal("arn:aws:iam::111122223333:role/PlatformAdmin") == []


# --- quota arithmetic (property) -----------------------------------------------------------------

amounts = st.integers(min_value=0, max_value=10**6)


@settings(max_examples=200, deadline=None)
@given(
    quota=st.tuples(amounts, amounts, amounts, amounts),
    borrow=st.one_of(
        st.tuples(amounts, amounts, amounts, amounts), st.integers(min_value=0, max_value=100), st.none()
    ),
    sharing=st.sampled_from(["Lend", "DontLend", "LendAndBorrow"]),
)
def test_default_max_in_flight_covers_quota_plus_borrow(quota, borrow, sharing):
    # Given random quotas and borrow limits (absolute, percent or default)
    fields: dict[str, Any] = {
        "quota": {GPU: quota[0], EFA: quota[1], CPU: f"{quota[2]}m", MEMORY: quota[3]},
        "sharing": sharing,
    }
    if sharing == "LendAndBorrow" and isinstance(borrow, tuple):
        fields["borrowLimit"] = {GPU: borrow[0], EFA: borrow[1], CPU: f"{borrow[2]}m", MEMORY: borrow[3]}
    elif sharing == "LendAndBorrow" and isinstance(borrow, int):
        fields["borrowLimitPercent"] = borrow

    # When the policy is parsed without maxInFlight
    team = parse_policy(document(**fields)).teams["team-a"]

    # Then the cap is 2 x (quota + borrow), so at least quota + borrow, for every resource
    ceiling = team.quota_resources + team.borrow_resources
    cap = team.max_in_flight_resources
    assert cap == ceiling + ceiling
    for field in ("gpu", "efa", "cpu_m", "memory"):
        assert getattr(cap, field) >= getattr(ceiling, field) >= getattr(team.quota_resources, field)
        assert getattr(team.borrow_resources, field) >= 0
    if sharing != "LendAndBorrow":
        assert team.borrow_resources == Resources()


@given(amount=st.integers(min_value=0, max_value=2**62))
def test_formatted_quantities_read_back_the_same(amount):
    for resource in (GPU, CPU, MEMORY):
        team = parse_policy(document(quota={resource: format_quantity(resource, amount)})).teams["team-a"]
        field = {GPU: "gpu", CPU: "cpu_m", MEMORY: "memory"}[resource]
        assert getattr(team.quota_resources, field) == amount


# --- warnings ------------------------------------------------------------------------------------


def test_warns_when_nominal_quotas_exceed_the_cluster():
    # Given the sample (448 nominal GPUs) and a cluster of 400 GPUs and 100Ti
    policy = load_policy_file(SAMPLE)
    capacity = Resources(gpu=400, efa=LOCAL_FLEET.efa, cpu_m=LOCAL_FLEET.cpu_m, memory=100 * TiB)

    # Then the warnings say by how much
    assert policy.warnings(capacity) == [
        "nominal nvidia.com/gpu quotas add up to 448, the cluster has 400",
        "nominal memory quotas add up to 105Ti, the cluster has 100Ti",
    ]


def test_warns_about_borrowed_gpus_without_cpu_or_memory_to_run_them():
    assert parse_policy(document(borrowLimit={GPU: 16})).warnings() == [
        "team-a may borrow nvidia.com/gpu but no cpu or memory: a job on borrowed GPUs must fit "
        "its cpu or memory in the team's nominal quota",
        "team-a may borrow but no other team lends (sharing: DontLend everywhere else)",
    ]


def test_warns_when_max_in_flight_is_below_what_the_team_may_borrow():
    warnings = parse_policy(document(borrowLimitPercent=50, maxInFlight={GPU: 40})).warnings()
    assert (
        "team-a: maxInFlight nvidia.com/gpu 40 is below quota + borrow (48): "
        "the team can never use all it may borrow"
    ) in warnings


def test_warns_about_fair_share_weights_while_fair_share_is_disabled():
    data = document(fairShareWeight=3, sharing="Lend")
    data["fairShare"] = "disabled"
    assert parse_policy(data).warnings() == [
        "team-a: fairShareWeight has no effect while fairShare is disabled"
    ]


# --- the command line ----------------------------------------------------------------------------


def check(file: Path, *, as_json: bool = False) -> int:
    return policy_cmd.run(argparse.Namespace(file=file, json=as_json))


def test_check_prints_the_summary_of_a_valid_policy(capsys):
    # Given the sample policy
    # When it is checked
    code = check(SAMPLE)
    out, err = capsys.readouterr()

    # Then it exits 0 with the priority classes, one table per team and the warnings
    assert code == 0
    assert err == ""
    assert re.search(r"inference-priority\s+1000", out)
    assert "Team team-a" in out
    assert re.search(r"namespace\s+hyperpod-ns-team-a\n", out)
    assert re.search(r"local queue\s+hyperpod-ns-team-a-localqueue\n", out)
    assert re.search(r"RESOURCE\s+QUOTA\s+BORROW\s+MAX IN FLIGHT", out)
    assert re.search(r"nvidia\.com/gpu\s+256\s+64\s+640\n", out)
    assert re.search(r"memory\s+60Ti\s+15Ti\s+150Ti\n", out)
    assert "inference-priority, training-priority, experimentation-priority (default)" in out
    assert "arn:aws:iam::123456789012:user/topogov-team-a" in out
    assert out.index("Team team-a") < out.index("Team team-b") < out.index("Team team-c")
    assert "Warnings: none" in out


def test_check_json_prints_the_normalised_policy(capsys):
    code = check(SAMPLE, as_json=True)
    out, err = capsys.readouterr()
    assert code == 0
    assert err == ""  # the sample has no warnings; they would go to stderr to keep stdout JSON
    assert json.loads(out) == load_policy_file(SAMPLE).to_json()
    assert json.loads(out)["teams"]["team-b"]["namespace"] == "hyperpod-ns-team-b"


def test_check_lists_every_problem_on_stderr_and_exits_1(tmp_path, capsys):
    # Given a policy with two problems
    path = tmp_path / "teams.yaml"
    data = document(quota={GPU: -1}, priorityClasses=["urgent"])
    path.write_text(json.dumps(data))

    # When it is checked
    code = check(path)
    out, err = capsys.readouterr()

    # Then it exits 1 and stderr has the heading and one line per problem
    assert code == 1
    assert out == ""
    assert err.splitlines() == [
        f"topogov policy check: {path} is invalid:",
        "  teams.team-a.quota.nvidia.com/gpu: must be ≥ 0",
        "  teams.team-a.priorityClasses.0: urgent is not declared in priorityClasses "
        "(inference-priority, training-priority, experimentation-priority)",
    ]


def test_check_reports_a_yaml_error_as_invalid(tmp_path, capsys):
    path = tmp_path / "teams.yaml"
    path.write_text("teams: [\n")
    assert check(path) == 1
    assert capsys.readouterr().err.splitlines()[1].startswith("  YAML error at line 2, column 1:")


def test_check_exits_2_for_a_missing_file(tmp_path, capsys):
    path = tmp_path / "absent.yaml"
    code = check(path)
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert err.splitlines() == [f"topogov policy check: cannot read {path}: No such file or directory"]


def test_add_parser_wires_policy_check():
    # Given a top-level parser like topogov's
    parser = argparse.ArgumentParser(prog="topogov")
    policy_cmd.add_parser(parser.add_subparsers(dest="command", required=True))

    # When `policy check FILE --json` is parsed
    args = parser.parse_args(["policy", "check", "teams.yaml", "--json"])

    # Then it calls run with the file and the flag
    assert args.func is policy_cmd.run
    assert args.file == Path("teams.yaml")
    assert args.json is True
    assert parser.parse_args(["policy", "check", "x.yaml"]).json is False
