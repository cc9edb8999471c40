"""The Kueue objects the governor renders, checked against Kueue's own CRD schemas (issue 4, items 1-2).

Schema handling. The CRDs (``../shared/kueue-crds/``, both served versions) carry OpenAPI v3
structural schemas; they are validated here with ``jsonschema.Draft7Validator`` after two changes:

* every object schema that lists ``properties`` and neither ``additionalProperties`` nor
  ``x-kubernetes-preserve-unknown-fields`` gets ``additionalProperties: false``. The API server would
  silently *prune* an unknown field; refusing it instead is what catches a guessed field name (say
  ``cohort`` sent to ``v1beta2``, which calls it ``cohortName``);
* ``x-kubernetes-*`` keys are left in place: a JSON-schema validator ignores unknown keywords. The
  ``x-kubernetes-int-or-string`` quantities already carry ``anyOf: [integer, string]`` plus a
  quantity ``pattern`` (which JSON Schema applies to strings only), so they need nothing more.
  ``format`` (``int32``, ``date-time``) is not asserted, as Kubernetes does for these.

What JSON Schema cannot check: ``metadata`` is only ``type: object`` in a CRD, so names, namespaces
and labels are checked against the Kubernetes patterns here; and the CEL rules
(``x-kubernetes-validations``) that bear on what is rendered are re-stated as plain assertions in
:func:`test_cel_rules_that_apply_hold` (the test also fails if the CRDs grow a CEL rule on a field
we render that it does not know about).
"""

from __future__ import annotations

import copy
import functools
import os
import re
from fractions import Fraction
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from topogov.domain.kueue import (
    FlavorInput,
    cluster_queue_name,
    flavor_amounts,
    flavors_from_snapshot,
    render,
    split,
    split_resources,
)
from topogov.domain.labels import (
    HOSTNAME_LABEL,
    PREFERRED_ANNOTATION,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    REQUIRED_ANNOTATION,
    layer_label,
    layer_of,
)
from topogov.domain.policy import GOVERNED, amount_of, load_policy, load_policy_file
from topogov.domain.quantity import Resources, parse_quantity
from topogov.domain.snapshot import Snapshot
from topogov.domain.tree import NodeCapacity

REPO = Path(__file__).resolve().parents[2]


def _crds() -> Path:
    """``../shared/kueue-crds`` beside the checkout (as CI lays it out), or ``$TOPOGOV_SHARED_DIR``."""
    candidates = [Path(os.environ["TOPOGOV_SHARED_DIR"])] if os.environ.get("TOPOGOV_SHARED_DIR") else []
    candidates += [REPO.parent / "shared", Path("/work/shared")]
    for shared in candidates:
        if (shared / "kueue-crds").is_dir():
            return shared / "kueue-crds"
    return candidates[0] / "kueue-crds"


CRDS = _crds()
VERSIONS = ("v1beta1", "v1beta2")
GI = 2**30
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

pytestmark = pytest.mark.skipif(not CRDS.is_dir(), reason=f"Kueue CRDs not found at {CRDS}")


# --- fixtures ----------------------------------------------------------------------------------------


def _node(
    name: str, instance_type: str, gpu: int, efa: int, cpu_m: int, memory: int, path: tuple[str, ...] = ()
) -> NodeCapacity:
    return NodeCapacity(name, path, instance_type, f"i-{name}", Resources(gpu, efa, cpu_m, memory))


def _p5_path(i: int) -> tuple[str, ...]:
    return (f"nn-l1-{i // 32}", f"nn-l2-{i // 16}", f"nn-l3-{i // 4}")


def sample_snapshot() -> Snapshot:
    """64 p5.48xlarge (8 GPU, 32 EFA; 3 network layers) + 4 p6-b200.48xlarge (8 GPU, 8 EFA; 4 layers) +
    2 c5.2xlarge, as the local stack seeds them."""
    nodes = [_node(f"p5-{i}", "p5.48xlarge", 8, 32, 191_450, 2002 * GI, _p5_path(i)) for i in range(64)]
    b200 = ("nn-l1-b", "nn-l2-b", "nn-l3-b", "nn-l4-b")
    nodes += [_node(f"b200-{i}", "p6-b200.48xlarge", 8, 8, 191_450, 2002 * GI, b200) for i in range(4)]
    nodes += [
        _node(f"c5-{i}", "c5.2xlarge", 0, 0, 7_910, 14 * GI, ("nn-l1-c", "nn-l2-c", "nn-l3-c"))
        for i in range(2)
    ]
    return Snapshot(nodes={n.name: n for n in nodes})


@functools.cache
def sample_policy():
    return load_policy_file(REPO / "teams.yaml")


@functools.cache
def rendered(api_version: str) -> tuple[dict[str, Any], ...]:
    flavors = flavors_from_snapshot(sample_snapshot())
    return tuple(render(sample_policy(), flavors, api_version=api_version))


def _of(objects: Any, kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


# --- CRD schemas -------------------------------------------------------------------------------------


@functools.cache
def _crds() -> dict[str, dict[str, Any]]:
    out = {}
    for path in sorted(CRDS.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        out[crd["spec"]["names"]["kind"]] = crd
    return out


@functools.cache
def _crd_text() -> str:
    return "\n".join(p.read_text() for p in sorted(CRDS.glob("*.yaml")))


def _strict(schema: Any) -> Any:
    """A copy of ``schema`` in which every object with ``properties`` refuses unknown fields."""
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strict(v) for k, v in schema.items()}
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


@functools.cache
def _validator(kind: str, version: str) -> jsonschema.Draft7Validator:
    crd = _crds()[kind]
    (entry,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    schema = _strict(copy.deepcopy(entry["schema"]["openAPIV3Schema"]))
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


def _check_metadata(obj: dict[str, Any]) -> None:
    meta = obj["metadata"]
    assert set(meta) <= {"name", "namespace", "labels", "annotations"}
    name = meta["name"]
    assert DNS_SUBDOMAIN.match(name) and len(name) <= 253, name
    if obj["kind"] in ("Namespace", "LocalQueue"):
        assert DNS_LABEL.match(name) and len(name) <= 63, name
    crd = _crds().get(obj["kind"])
    namespaced = crd is not None and crd["spec"]["scope"] == "Namespaced"
    assert ("namespace" in meta) == namespaced, obj["kind"]
    for key, value in meta["labels"].items():
        assert LABEL_KEY.match(key) and len(key.rpartition("/")[2]) <= 63, key
        assert LABEL_VALUE.match(value) and len(value) <= 63, value


# --- schema fidelity ---------------------------------------------------------------------------------


def test_the_crds_serve_both_versions() -> None:
    for kind in (
        "Topology",
        "ResourceFlavor",
        "Cohort",
        "ClusterQueue",
        "LocalQueue",
        "WorkloadPriorityClass",
    ):
        names = {v["name"] for v in _crds()[kind]["spec"]["versions"] if v["served"]}
        assert set(VERSIONS) <= names, kind


@pytest.mark.parametrize("api_version", VERSIONS)
def test_every_rendered_object_validates_against_the_upstream_crd(api_version: str) -> None:
    objects = rendered(api_version)
    kinds = {o["kind"] for o in objects}
    assert kinds == {
        "Namespace",
        "Topology",
        "ResourceFlavor",
        "Cohort",
        "WorkloadPriorityClass",
        "ClusterQueue",
        "LocalQueue",
    }
    for obj in objects:
        _check_metadata(obj)
        assert obj["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "topogov"
        if obj["kind"] == "Namespace":
            assert obj["apiVersion"] == "v1"
            continue
        assert obj["apiVersion"] == f"kueue.x-k8s.io/{api_version}"
        errors = sorted(_validator(obj["kind"], api_version).iter_errors(obj), key=str)
        assert not errors, f"{obj['kind']} {obj['metadata']['name']}: " + "; ".join(
            f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors
        )


def test_strict_validation_catches_a_field_of_the_other_version() -> None:
    (cq,) = _of(rendered("v1beta2"), "ClusterQueue")[:1]
    wrong = copy.deepcopy(cq)
    wrong["spec"]["cohort"] = wrong["spec"].pop("cohortName")
    assert list(_validator("ClusterQueue", "v1beta2").iter_errors(wrong))
    (cq1,) = _of(rendered("v1beta1"), "ClusterQueue")[:1]
    assert cq1["spec"]["cohort"] == "topogov" and "cohortName" not in cq1["spec"]


@pytest.mark.parametrize("api_version", VERSIONS)
def test_cel_rules_that_apply_hold(api_version: str) -> None:
    objects = rendered(api_version)
    for cq in _of(objects, "ClusterQueue"):
        spec = cq["spec"]
        # borrowingLimit must be nil when cohort is empty
        assert spec.get("cohort" if api_version == "v1beta1" else "cohortName")
        for group in spec["resourceGroups"]:
            # flavors must have the same number of resources as the coveredResources (and, as Kueue's
            # webhook also requires, in the same order)
            for flavor in group["flavors"]:
                assert [r["name"] for r in flavor["resources"]] == group["coveredResources"]
        # reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never
        preemption = spec["preemption"]
        assert not (
            preemption["reclaimWithinCohort"] == "Never"
            and preemption["borrowWithinCohort"]["policy"] != "Never"
        )
        assert "flavorFungibility" not in spec
    for topology in _of(objects, "Topology"):
        levels = [level["nodeLabel"] for level in topology["spec"]["levels"]]
        assert len(set(levels)) == len(levels)  # must be unique
        assert HOSTNAME_LABEL not in levels[:-1]  # hostname only at the lowest level
    for flavor in _of(objects, "ResourceFlavor"):
        assert len(flavor["spec"]["nodeLabels"]) >= 1  # at least one nodeLabel when topology is set
        assert "nodeTaints" not in flavor["spec"] and "tolerations" not in flavor["spec"]


def test_the_cel_rules_on_rendered_fields_are_the_ones_known_here() -> None:
    known = {
        "flavors must have the same number of resources as the coveredResources",
        "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
        "borrowingLimit must be nil when cohort is empty",
        "preference can only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor",
        "must be unique",
        "the kubernetes.io/hostname label can only be used at the lowest level of topology",
        "field is immutable",
        "levels are mutable only when kubernetes.io/hostname is the lowest level both before and after "
        "the change",
        "at least one nodeLabel is required when topology is set",
        "topologyName is immutable when topologyName is set",
    }
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for rule in node.get("x-kubernetes-validations", []):
                found.add(rule.get("message", rule["rule"]))
            for key, value in node.items():
                if key not in ("status", "nodeTaints", "tolerations", "admissionChecksStrategy"):
                    walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for kind in (
        "Topology",
        "ResourceFlavor",
        "Cohort",
        "ClusterQueue",
        "LocalQueue",
        "WorkloadPriorityClass",
    ):
        for version in _crds()[kind]["spec"]["versions"]:
            walk(version["schema"]["openAPIV3Schema"].get("properties", {}).get("spec", {}))
    assert found <= known, found - known


# --- what is rendered --------------------------------------------------------------------------------


@pytest.mark.parametrize("api_version", VERSIONS)
def test_render_is_deterministic_and_in_dependency_order(api_version: str) -> None:
    flavors = flavors_from_snapshot(sample_snapshot())
    again = render(sample_policy(), list(reversed(flavors)), api_version=api_version)
    assert again == list(rendered(api_version))
    order = [o["kind"] for o in again]
    firsts = [
        "Namespace",
        "Topology",
        "ResourceFlavor",
        "Cohort",
        "WorkloadPriorityClass",
        "ClusterQueue",
        "LocalQueue",
    ]
    assert sorted(order, key=firsts.index) == order


def test_flavors_from_snapshot_keeps_gpu_types_only() -> None:
    flavors = flavors_from_snapshot(sample_snapshot())
    assert [(f.instance_type, f.nodes) for f in flavors] == [("p5.48xlarge", 64), ("p6-b200.48xlarge", 4)]
    assert flavors[0].allocatable == Resources(8, 32, 191_450, 2002 * GI)
    assert flavors[1].capacity.gpu == 32


def test_resource_flavors_and_topologies_one_per_depth() -> None:
    """The mixed local fleet (p5: 3 layers, p6-b200: 4) gets two Topologies, each flavor its own."""
    objects = rendered("v1beta1")
    topologies = {
        t["metadata"]["name"]: [lv["nodeLabel"] for lv in t["spec"]["levels"]]
        for t in _of(objects, "Topology")
    }
    assert topologies == {
        "topogov-3-layers": [layer_label(1), layer_label(2), layer_label(3), HOSTNAME_LABEL],
        "topogov-4-layers": [layer_label(1), layer_label(2), layer_label(3), layer_label(4), HOSTNAME_LABEL],
    }
    flavors = _of(objects, "ResourceFlavor")
    assert [(f["metadata"]["name"], f["spec"]) for f in flavors] == [
        (
            "p5.48xlarge",
            {
                "nodeLabels": {"node.kubernetes.io/instance-type": "p5.48xlarge"},
                "topologyName": "topogov-3-layers",
            },
        ),
        (
            "p6-b200.48xlarge",
            {
                "nodeLabels": {"node.kubernetes.io/instance-type": "p6-b200.48xlarge"},
                "topologyName": "topogov-4-layers",
            },
        ),
    ]
    only_p5 = [f for f in flavors_from_snapshot(sample_snapshot()) if f.instance_type == "p5.48xlarge"]
    assert [t["metadata"]["name"] for t in _of(render(sample_policy(), only_p5), "Topology")] == [
        "topogov-3-layers"
    ]


def test_a_gpu_type_without_labelled_nodes_is_in_the_hostname_topology() -> None:
    """No node of the type labelled (EC2 reports no topology for it): hosts only, so the queues stay
    TAS-only and a job without a topology annotation may still use every flavor (Kueue's
    ``isTASImplied``, pkg/scheduler/flavorassigner/tas_flavorassigner.go)."""
    nodes = [_node(f"g-{i}", "g6.48xlarge", 8, 0, 191_450, 700 * GI) for i in range(3)]
    (flavor,) = flavors_from_snapshot(Snapshot(nodes={n.name: n for n in nodes}))
    assert flavor.depth == 0 and flavor.topology == "topogov-hostname" and flavor.levels == [HOSTNAME_LABEL]
    objects = render(sample_policy(), [flavor])
    assert [t["spec"]["levels"] for t in _of(objects, "Topology")] == [[{"nodeLabel": HOSTNAME_LABEL}]]


def test_every_topology_level_is_a_label_the_labeler_writes() -> None:
    for api_version in VERSIONS:
        for topology in _of(rendered(api_version), "Topology"):
            for level in topology["spec"]["levels"]:
                label = level["nodeLabel"]
                layer = layer_of(label)
                assert label == HOSTNAME_LABEL or (layer is not None and layer_label(layer) == label), label


def _node_labels(node: NodeCapacity) -> dict[str, str]:
    """The labels a node carries on EKS once the labeler ran: kubelet's hostname and instance type,
    the labeler's layer labels."""
    labels = {HOSTNAME_LABEL: node.name, "node.kubernetes.io/instance-type": node.instance_type}
    labels.update({layer_label(i): v for i, v in enumerate(node.path, start=1)})
    return labels


def kueue_node_matches_flavor(labels: dict[str, str], node_labels: dict[str, str], levels: list[str]) -> bool:
    """Kueue v0.17.0 ``pkg/util/tas/node.go`` ``NodeMatchesFlavor``: the node carries every nodeLabel of
    the flavor with its value, and a label for every level of the flavor's Topology."""
    return all(labels.get(k) == v for k, v in node_labels.items()) and all(lv in labels for lv in levels)


_TYPES = st.sampled_from(
    ["p5.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge", "p6-b300.48xlarge", "c5.2xlarge"]
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_TYPES, st.integers(0, 5), st.integers(0, 2)), min_size=1, max_size=40))
def test_property_every_labelled_node_of_a_flavor_is_in_its_topology(
    fleet: list[tuple[str, int, int]],
) -> None:
    """For any fleet — types with 3 or 4 layers, nodes not labelled yet, odd depths — every node of a
    flavor that carries any network layer carries every level of that flavor's Topology, so Kueue's
    ``NodeMatchesFlavor`` keeps it in the flavor's tree (kubernetes-sigs/kueue v0.17.0
    pkg/cache/scheduler/tas_nodes_cache.go). This fails on one shared 4-layer Topology."""
    nodes = []
    for i, (itype, depth, domain) in enumerate(fleet):
        gpu = 0 if itype.startswith("c5") else 8
        path = tuple(f"nn-{layer}-{domain}" for layer in range(1, depth + 1))
        nodes.append(_node(f"n{i}", itype, gpu, 8, 1000, GI, path))
    flavors = flavors_from_snapshot(Snapshot(nodes={n.name: n for n in nodes}))
    if not flavors:
        return
    objects = render(sample_policy(), flavors)
    topologies = {
        t["metadata"]["name"]: [lv["nodeLabel"] for lv in t["spec"]["levels"]]
        for t in _of(objects, "Topology")
    }
    for rf in _of(objects, "ResourceFlavor"):
        levels = topologies[rf["spec"]["topologyName"]]
        members = [
            n
            for n in nodes
            if _node_labels(n).get("node.kubernetes.io/instance-type") == rf["metadata"]["name"]
        ]
        for node in members:
            if node.path:
                assert kueue_node_matches_flavor(_node_labels(node), rf["spec"]["nodeLabels"], levels), (
                    node,
                    levels,
                )
        # and the Topology is no shallower than it must be: its deepest layer is on some node
        depths = [len(n.path) for n in members if n.path]
        assert len(levels) - 1 == (min(depths) if depths else 0)


@pytest.mark.parametrize("api_version", VERSIONS)
def test_every_local_queue_points_at_its_team_cluster_queue(api_version: str) -> None:
    objects = rendered(api_version)
    policy = sample_policy()
    queues = {cq["metadata"]["name"]: cq for cq in _of(objects, "ClusterQueue")}
    namespaces = {ns["metadata"]["name"] for ns in _of(objects, "Namespace")}
    local_queues = _of(objects, "LocalQueue")
    assert len(local_queues) == len(policy.teams) == len(queues)
    for team in policy.teams.values():
        (lq,) = [q for q in local_queues if q["metadata"]["namespace"] == team.namespace]
        assert lq["metadata"]["name"] == team.local_queue
        assert team.namespace in namespaces
        cq = queues[lq["spec"]["clusterQueue"]]
        assert cq["metadata"]["name"] == cluster_queue_name(team)
        assert cq["spec"]["namespaceSelector"] == {
            "matchLabels": {"kubernetes.io/metadata.name": team.namespace}
        }
        cohort = cq["spec"]["cohort" if api_version == "v1beta1" else "cohortName"]
        assert [c["metadata"]["name"] for c in _of(objects, "Cohort")] == [cohort]
        flavor_names = {f["metadata"]["name"] for f in _of(objects, "ResourceFlavor")}
        assert {f["name"] for g in cq["spec"]["resourceGroups"] for f in g["flavors"]} == flavor_names


def test_cluster_queues_follow_the_policy() -> None:
    policy = sample_policy()
    queues = {
        cq["metadata"]["labels"]["topogov.io/team"]: cq for cq in _of(rendered("v1beta1"), "ClusterQueue")
    }
    for name, team in policy.teams.items():
        spec = queues[name]["spec"]
        assert spec["preemption"] == {
            "reclaimWithinCohort": "Any",
            "withinClusterQueue": team.preempt_team_tasks,
            "borrowWithinCohort": {"policy": "Never"},
        }
        assert spec["fairSharing"] == {"weight": team.fair_share_weight}
        nominal, borrow = flavor_amounts(queues[name]), flavor_amounts(queues[name], "borrowingLimit")
        lend = flavor_amounts(queues[name], "lendingLimit")
        for resource in GOVERNED:
            scale = 1000 if resource == "cpu" else 1
            total = sum(int(parse_quantity(q) * scale) for q in nominal[resource])
            assert total == amount_of(team.quota_resources, resource), (name, resource)
            borrowed = sum(int(parse_quantity(q) * scale) for q in borrow[resource])
            assert borrowed == amount_of(team.borrow_resources, resource)
        if team.sharing == "DontLend":
            assert all(v == 0 for values in lend.values() for v in values)
        else:
            assert lend == {}
        if team.sharing != "LendAndBorrow":
            assert all(v == 0 for values in borrow.values() for v in values)
    # team-c lends and never borrows
    assert policy.teams["team-c"].sharing == "Lend"
    assert queues["team-c"]["spec"]["preemption"]["withinClusterQueue"] == "Never"
    # 256 GPUs of team-a over 512 p5 GPUs and 32 p6-b200 GPUs: 241 + 15
    assert flavor_amounts(queues["team-a"])["nvidia.com/gpu"] == [241, 15]


def test_sharing_modes_and_fair_share_disabled() -> None:
    text = (REPO / "teams.yaml").read_text()
    text = text.replace("fairShare: enabled", "fairShare: disabled").replace(
        "sharing: Lend ", "sharing: DontLend "
    )
    policy = load_policy(text)
    objects = render(policy, flavors_from_snapshot(sample_snapshot()))
    queues = {cq["metadata"]["labels"]["topogov.io/team"]: cq for cq in _of(objects, "ClusterQueue")}
    assert all("fairSharing" not in cq["spec"] for cq in queues.values())
    lend = flavor_amounts(queues["team-c"], "lendingLimit")
    assert set(lend) == set(GOVERNED) and all(v == 0 for vs in lend.values() for v in vs)
    for version in VERSIONS:
        for obj in render(policy, flavors_from_snapshot(sample_snapshot()), api_version=version):
            if obj["kind"] != "Namespace":
                assert not list(_validator(obj["kind"], version).iter_errors(obj))


def test_priority_classes() -> None:
    policy = sample_policy()
    classes = _of(rendered("v1beta2"), "WorkloadPriorityClass")
    assert [(c["metadata"]["name"], c["value"]) for c in classes] == [
        (pc.name, pc.value) for pc in policy.priority_classes
    ]
    assert all(c["description"] for c in classes)


def test_render_refuses_what_it_cannot_express() -> None:
    with pytest.raises(ValueError, match="no GPU flavors"):
        render(sample_policy(), [])
    with pytest.raises(ValueError, match="api_version"):
        render(sample_policy(), flavors_from_snapshot(sample_snapshot()), api_version="v1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="depth"):
        render(sample_policy(), [FlavorInput("p5.48xlarge", Resources(8, 32, 1000, GI), 1, 16)])


# --- the quota split ---------------------------------------------------------------------------------


def test_split_examples() -> None:
    assert split(256, [512, 32]) == [241, 15]
    assert split(10, [1, 1, 1]) == [4, 3, 3]
    assert split(5, [0, 0]) == [3, 2]
    assert split(0, [3, 4]) == [0, 0]
    assert split(3000, [1, 2], unit=1000) == [1000, 2000]
    assert split(3500, [1, 1], unit=1000) == [1750, 1750]  # not a whole number of units: split in 1s


@settings(max_examples=300, deadline=None)
@given(
    amount=st.integers(min_value=0, max_value=2**62),
    weights=st.lists(st.integers(min_value=0, max_value=10**12), min_size=1, max_size=8),
    unit=st.sampled_from([1, 1000, 2**20, 2**30]),
)
def test_split_preserves_the_total(amount: int, weights: list[int], unit: int) -> None:
    parts = split(amount, weights, unit)
    assert sum(parts) == amount and len(parts) == len(weights) and min(parts) >= 0
    if sum(weights):
        total = sum(weights)
        step = unit if amount % unit == 0 else 1
        for part, weight in zip(parts, weights, strict=True):
            share = Fraction(amount * weight, total)  # exact: floats lose units at 2**62
            assert abs(part - share) <= step  # never more than one unit off its share
            if weight == 0:
                assert part == 0


_resources = st.builds(
    Resources,
    gpu=st.integers(0, 4096),
    efa=st.integers(0, 16384),
    cpu_m=st.integers(0, 10**8),
    memory=st.integers(0, 2**50),
)
_flavor_caps = st.builds(
    Resources,
    gpu=st.integers(1, 16),
    efa=st.integers(0, 32),
    cpu_m=st.integers(0, 400_000),
    memory=st.integers(0, 4 * 2**40),
)


@settings(max_examples=200, deadline=None)
@given(
    quota=_resources,
    caps=st.lists(st.tuples(_flavor_caps, st.integers(1, 512)), min_size=1, max_size=5),
)
def test_per_flavor_quotas_of_a_team_sum_to_its_policy_quota(quota: Resources, caps: list[Any]) -> None:
    flavors = [FlavorInput(f"type-{i}", per_node, n) for i, (per_node, n) in enumerate(caps)]
    parts = split_resources(quota, flavors)
    assert len(parts) == len(flavors)
    for resource in GOVERNED:
        values = [amount_of(p, resource) for p in parts]
        assert sum(values) == amount_of(quota, resource) and min(values) >= 0


@settings(max_examples=50, deadline=None)
@given(
    gpu=st.integers(0, 2000),
    efa=st.integers(0, 8000),
    cores=st.integers(0, 20000),
    gib=st.integers(0, 200000),
)
def test_rendered_quantities_sum_to_the_policy_quota(gpu: int, efa: int, cores: int, gib: int) -> None:
    text = (
        (REPO / "teams.yaml")
        .read_text()
        .replace(
            "quota:\n      nvidia.com/gpu: 256\n      vpc.amazonaws.com/efa: 1024\n"
            "      cpu: 5888\n      memory: 60Ti",
            f"quota:\n      nvidia.com/gpu: {gpu}\n      vpc.amazonaws.com/efa: {efa}\n      cpu: {cores}\n"
            f"      memory: {gib}Gi",
        )
        .replace(
            "    borrowLimit:\n      nvidia.com/gpu: 64\n      vpc.amazonaws.com/efa: 256\n"
            "      cpu: 1472\n      memory: 15Ti\n",
            "",
        )
    )
    policy = load_policy(text)
    team = policy.teams["team-a"]
    assert team.quota_resources == Resources(gpu, efa, cores * 1000, gib * GI)
    (cq,) = [
        o
        for o in render(policy, flavors_from_snapshot(sample_snapshot()))
        if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == cluster_queue_name(team)
    ]
    for field, expected in (
        ("nominalQuota", team.quota_resources),
        ("borrowingLimit", team.borrow_resources),
    ):
        amounts = flavor_amounts(cq, field)
        for resource in GOVERNED:
            scale = 1000 if resource == "cpu" else 1
            assert sum(int(parse_quantity(v) * scale) for v in amounts[resource]) == amount_of(
                expected, resource
            )
    assert not list(_validator("ClusterQueue", "v1beta1").iter_errors(cq))


# --- labels and annotations on jobs ------------------------------------------------------------------

# Kueue's job integration reads these two labels (kubernetes-sigs/kueue pkg/controller/constants:
# QueueLabel, WorkloadPriorityClassLabel). The CRDs do not spell the label keys out; they show the
# fields the labels fill: Workload ``spec.queueName`` (the LocalQueue) and ``spec.priorityClassSource``
# ``kueue.x-k8s.io/workloadpriorityclass``.
KUEUE_JOB_LABELS = {
    "kueue.x-k8s.io/queue-name": "queueName is the name of the LocalQueue",
    "kueue.x-k8s.io/priority-class": "kueue.x-k8s.io/workloadpriorityclass",
}


def test_topology_annotations_are_the_ones_kueue_reads() -> None:
    text = _crd_text()
    for annotation in (REQUIRED_ANNOTATION, PREFERRED_ANNOTATION):
        assert f"`{annotation}` PodSet" in text, annotation
    assert REQUIRED_ANNOTATION == "kueue.x-k8s.io/podset-required-topology"
    assert PREFERRED_ANNOTATION == "kueue.x-k8s.io/podset-preferred-topology"


def test_job_labels_are_the_ones_kueue_reads() -> None:
    assert {QUEUE_LABEL, PRIORITY_LABEL} == set(KUEUE_JOB_LABELS)
    text = _crd_text()
    for evidence in KUEUE_JOB_LABELS.values():
        assert evidence in text, evidence
