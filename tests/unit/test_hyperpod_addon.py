"""The Kueue objects HyperPod task governance's add-on writes for a set of ComputeQuotas
(topogov.domain.hyperpod.addon): the documented names, the rules docs/hyperpod.md lists as
assumptions, and every object valid against Kueue's own CRDs (both served versions)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest

from tests.unit.test_governor_render import CRDS, VERSIONS, _check_metadata, _validator
from topogov.domain import hyperpod
from topogov.domain.hyperpod.addon import COHORT, TOPOLOGY, item_amounts
from topogov.domain.hyperpod.instances import NOMINAL
from topogov.domain.labels import MANAGED_BY_LABEL
from topogov.domain.policy import load_policy_file
from topogov.domain.quantity import parse_quantity

SAMPLE = Path(__file__).resolve().parents[2] / "teams.yaml"
ARN = "arn:aws:sagemaker:us-east-1:123456789012:cluster/a1b2c3d4e5f6"
TYPES = {"ml.p5.48xlarge": 4, "ml.c5.2xlarge": 2}
GiB = 2**30


def quota(team: str, items: list[dict[str, Any]], **config: Any) -> dict[str, Any]:
    """A described ComputeQuota (DescribeComputeQuota's answer)."""
    target = {"TeamName": team, "FairShareWeight": config.pop("weight", 0)}
    return {
        "Name": team,
        "ComputeQuotaConfig": {"ComputeQuotaResources": items, **config},
        "ComputeQuotaTarget": target,
        "Status": config.pop("status", "Created"),
    }


def queue(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == name]
    return found


def amounts(cq: dict[str, Any], flavor: str, field: str = "nominalQuota") -> dict[str, int]:
    """A ClusterQueue's ``field`` per resource on ``flavor``, as numbers (millicores, bytes, devices)."""
    (entry,) = [f for g in cq["spec"]["resourceGroups"] for f in g["flavors"] if f["name"] == flavor]
    out = {}
    for r in entry["resources"]:
        if field in r:
            value = parse_quantity(r[field])
            out[r["name"]] = int(value * 1000) if r["name"] == "cpu" else int(value)
    return out


@functools.cache
def sample_objects(api_version: str) -> tuple[dict[str, Any], ...]:
    policy = load_policy_file(SAMPLE)
    return tuple(hyperpod.expected_objects(policy, ARN, api_version=api_version))


@pytest.mark.skipif(not CRDS.is_dir(), reason=f"Kueue CRDs not found at {CRDS}")
@pytest.mark.parametrize("api_version", VERSIONS)
def test_every_object_validates_against_kueues_crds_and_none_is_topogovs(api_version: str) -> None:
    for obj in sample_objects(api_version):
        _check_metadata(obj)
        assert MANAGED_BY_LABEL not in obj["metadata"]["labels"]
        assert obj["metadata"]["labels"]["sagemaker.amazonaws.com/sagemaker-managed-queue"] == "true"
        if obj["kind"] == "Namespace":
            continue
        errors = list(_validator(obj["kind"], api_version).iter_errors(obj))
        assert not errors, f"{obj['kind']} {obj['metadata']['name']}: {[e.message for e in errors]}"


def test_the_documented_names_of_the_sample():
    names = [
        (o["kind"], o["metadata"]["name"], o["metadata"].get("namespace")) for o in sample_objects("v1beta1")
    ]
    assert ("Namespace", "hyperpod-ns-team-a", None) in names
    assert ("ClusterQueue", "hyperpod-ns-team-b-clusterqueue", None) in names
    assert ("LocalQueue", "hyperpod-ns-team-c-localqueue", "hyperpod-ns-team-c") in names
    assert [n for k, n, _ in names if k == "ResourceFlavor"] == ["ml.p5.48xlarge", "ml.p6-b200.48xlarge"]
    classes = {
        o["metadata"]["name"]: o["value"]
        for o in sample_objects("v1beta1")
        if o["kind"] == "WorkloadPriorityClass"
    }
    assert classes == {"inference-priority": 100, "training-priority": 50, "experimentation-priority": 10}
    namespace = next(o for o in sample_objects("v1beta1") if o["metadata"]["name"] == "hyperpod-ns-team-a")
    assert namespace["metadata"]["labels"] == {
        "sagemaker.amazonaws.com/sagemaker-managed-queue": "true",
        "sagemaker.amazonaws.com/quota-allocation-id": "team-a",
        "sagemaker.amazonaws.com/activate-quota": "Enabled",
    }


def test_the_sample_queues_hold_what_teams_yaml_gives_each_team():
    policy = load_policy_file(SAMPLE)
    for name, team in policy.teams.items():
        cq = queue(list(sample_objects("v1beta1")), f"hyperpod-ns-{name}-clusterqueue")
        flavors = [amounts(cq, t) for t in ("ml.p5.48xlarge", "ml.p6-b200.48xlarge")]
        assert sum(f["nvidia.com/gpu"] for f in flavors) == team.quota_resources.gpu
        assert sum(f["cpu"] for f in flavors) == team.quota_resources.cpu_m
        assert sum(f["memory"] for f in flavors) == team.quota_resources.memory
        assert cq["spec"]["cohort"] == COHORT
        assert cq["spec"]["preemption"]["withinClusterQueue"] == team.preempt_team_tasks
        assert cq["spec"]["fairSharing"] == {"weight": team.fair_share_weight}


def test_a_count_is_whole_instances_of_nominal_figures_and_borrows_half_by_default():
    # Given 2 x p5 for team-x and nothing about sharing (the service's defaults: LendAndBorrow, 50 %)
    objects = hyperpod.addon_objects(
        [quota("x", [{"InstanceType": "ml.p5.48xlarge", "Count": 2}])], None, TYPES
    )
    cq = queue(objects, "hyperpod-ns-x-clusterqueue")
    assert amounts(cq, "ml.p5.48xlarge") == {
        "cpu": 384_000,
        "memory": 4096 * GiB,
        "nvidia.com/gpu": 16,
        "vpc.amazonaws.com/efa": 64,
    }
    assert amounts(cq, "ml.p5.48xlarge", "borrowingLimit") == {
        "cpu": 192_000,
        "memory": 2048 * GiB,
        "nvidia.com/gpu": 8,
        "vpc.amazonaws.com/efa": 32,
    }
    # and a type the quota does not name is in the queue at 0 (it may borrow there: 50 % of 0)
    assert amounts(cq, "ml.c5.2xlarge") == {
        "cpu": 0,
        "memory": 0,
        "nvidia.com/gpu": 0,
        "vpc.amazonaws.com/efa": 0,
    }


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        # accelerators alone: cpu, memory and EFA by their ratio (3/8 of an instance)
        (
            {"Accelerators": 3},
            {"cpu": 72_000, "memory": 768 * GiB, "nvidia.com/gpu": 3, "vpc.amazonaws.com/efa": 12},
        ),
        # vCPUs alone: memory by their ratio, no accelerators (and so no EFA)
        ({"VCpu": 48}, {"cpu": 48_000, "memory": 512 * GiB, "nvidia.com/gpu": 0, "vpc.amazonaws.com/efa": 0}),
        # all three given: as given
        (
            {"Accelerators": 1, "VCpu": 0.5, "MemoryInGiB": 1.5},
            {"cpu": 500, "memory": 3 * GiB // 2, "nvidia.com/gpu": 1, "vpc.amazonaws.com/efa": 4},
        ),
    ],
)
def test_fields_left_out_are_filled_by_the_instances_ratio(item, expected):
    assert item_amounts({"InstanceType": "ml.p5.48xlarge", **item}, NOMINAL["ml.p5.48xlarge"]) == expected


def test_lend_borrows_nothing_and_dont_lend_lends_nothing():
    items = [{"InstanceType": "ml.p5.48xlarge", "Count": 1}]
    objects = hyperpod.addon_objects(
        [
            quota("lender", items, ResourceSharingConfig={"Strategy": "Lend"}),
            quota("keeper", items, ResourceSharingConfig={"Strategy": "DontLend"}),
        ],
        None,
        TYPES,
    )
    lender, keeper = (queue(objects, f"hyperpod-ns-{t}-clusterqueue") for t in ("lender", "keeper"))
    assert set(amounts(lender, "ml.p5.48xlarge", "borrowingLimit").values()) == {0}
    assert amounts(lender, "ml.p5.48xlarge", "lendingLimit") == {}
    assert set(amounts(keeper, "ml.p5.48xlarge", "lendingLimit").values()) == {0}


def test_absolute_borrow_limits_hold_on_the_types_they_name_and_the_percentage_elsewhere():
    sharing = {
        "Strategy": "LendAndBorrow",
        "BorrowLimit": 0,
        "AbsoluteBorrowLimits": [
            {"InstanceType": "ml.p5.48xlarge", "Accelerators": 4, "VCpu": 10, "MemoryInGiB": 20}
        ],
    }
    items = [{"InstanceType": "ml.p5.48xlarge", "Count": 1}, {"InstanceType": "ml.c5.2xlarge", "Count": 1}]
    cq = queue(
        hyperpod.addon_objects([quota("x", items, ResourceSharingConfig=sharing)], None, TYPES),
        "hyperpod-ns-x-clusterqueue",
    )
    assert amounts(cq, "ml.p5.48xlarge", "borrowingLimit") == {
        "cpu": 10_000,
        "memory": 20 * GiB,
        "nvidia.com/gpu": 4,
        "vpc.amazonaws.com/efa": 16,
    }
    assert set(amounts(cq, "ml.c5.2xlarge", "borrowingLimit").values()) == {0}


def test_fair_share_off_writes_no_weight_and_priority_classes_are_name_priority():
    scheduler = {"FairShare": "Disabled", "PriorityClasses": [{"Name": "training", "Weight": 40}]}
    objects = hyperpod.addon_objects([quota("x", [], weight=7)], scheduler, TYPES)
    assert "fairSharing" not in queue(objects, "hyperpod-ns-x-clusterqueue")["spec"]
    (wpc,) = [o for o in objects if o["kind"] == "WorkloadPriorityClass"]
    assert (wpc["metadata"]["name"], wpc["value"]) == ("training-priority", 40)
    topology = next(o for o in objects if o["kind"] == "Topology")
    assert topology["metadata"]["name"] == TOPOLOGY
    assert [level["nodeLabel"] for level in topology["spec"]["levels"]] == [
        "topology.k8s.aws/network-node-layer-1",
        "topology.k8s.aws/network-node-layer-2",
        "topology.k8s.aws/network-node-layer-3",
        "kubernetes.io/hostname",
    ]


def test_idle_resource_sharing_adds_one_queue_per_flavor_with_what_no_team_was_given():
    items = [{"InstanceType": "ml.p5.48xlarge", "Count": 1}]
    objects = hyperpod.addon_objects([quota("x", items)], {"IdleResourceSharing": "Enabled"}, TYPES)
    c5, p5 = (queue(objects, f"hyperpod-ns-idle-resource-sharing-cq-{i}") for i in (1, 2))
    assert amounts(p5, "ml.p5.48xlarge") == {
        "cpu": 3 * 192_000,
        "memory": 3 * 2048 * GiB,
        "nvidia.com/gpu": 24,
        "vpc.amazonaws.com/efa": 96,
    }
    assert amounts(c5, "ml.c5.2xlarge") == {"cpu": 16_000, "memory": 32 * GiB}
    assert set(amounts(p5, "ml.p5.48xlarge", "borrowingLimit").values()) == {0}


def test_quotas_being_deleted_or_that_failed_to_create_make_nothing():
    quotas = [
        quota("gone", [], status="Deleting"),
        quota("failed", [], status="CreateFailed"),
        quota("x", []),
    ]
    objects = hyperpod.addon_objects(quotas, None, TYPES)
    assert [o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"] == ["hyperpod-ns-x"]
