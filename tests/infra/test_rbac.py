"""deploy/rbac.yaml: what the two Lambda groups may do, and the Node admission policy.

Structural checks read every document of the manifest: kinds and field names (checked against the
kubernetes client's models), no wildcard, the exact permissions of each group (nothing more), and a
binding for every team namespace of teams.yaml.

The ValidatingAdmissionPolicy is executed: its matchConditions, variables and validations are
evaluated with a CEL interpreter (PyPI `common-expression-language`, module `cel`) on example
old/new Nodes, the way the API server does for an UPDATE (a PATCH is admitted as an UPDATE of the
whole object). The policy uses only standard CEL plus `<list<string>>.join(sep)` from cel-go's strings
extension, which Kubernetes enables for admission CEL; the interpreter's own `cel.stdlib` "strings"
library provides the same function, so nothing is implemented for the test alone.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import product
from pathlib import Path
from typing import Any

import cel
import kubernetes.client.models as k8s_models
import pytest
import yaml
from cel.stdlib import add_stdlib_to_context

from topogov.domain.kinds import KINDS as JOB_KINDS

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "deploy" / "rbac.yaml"
TEAMS = ROOT / "teams.yaml"

RBAC = "rbac.authorization.k8s.io/v1"
ADMISSION = "admissionregistration.k8s.io/v1"
KINDS = {
    ("v1", "Namespace"): "V1Namespace",
    (RBAC, "ClusterRole"): "V1ClusterRole",
    (RBAC, "ClusterRoleBinding"): "V1ClusterRoleBinding",
    (RBAC, "RoleBinding"): "V1RoleBinding",
    (ADMISSION, "ValidatingAdmissionPolicy"): "V1ValidatingAdmissionPolicy",
    (ADMISSION, "ValidatingAdmissionPolicyBinding"): "V1ValidatingAdmissionPolicyBinding",
}
RECONCILER = "topogov:reconciler"
RULES_NAMESPACE = "topogov-system"  # domain/team_pods.RULES_NAMESPACE
API = "topogov:api"
KUEUE = "kueue.x-k8s.io"
ALL_VERBS = ("get", "list", "watch", "create", "update", "patch", "delete")


# --- manifest -------------------------------------------------------------------------------------


def _docs() -> list[dict[str, Any]]:
    with MANIFEST.open(encoding="utf-8") as fh:
        return [doc for doc in yaml.safe_load_all(fh) if doc is not None]


DOCS = _docs()


def _of_kind(kind: str) -> list[dict[str, Any]]:
    return [doc for doc in DOCS if doc["kind"] == kind]


def _one(kind: str) -> dict[str, Any]:
    (doc,) = _of_kind(kind)
    return doc


def _team_namespaces() -> set[str]:
    with TEAMS.open(encoding="utf-8") as fh:
        teams = yaml.safe_load(fh)["teams"]
    # Same default as the policy loader: hyperpod-ns-<team>.
    return {(spec or {}).get("namespace") or f"hyperpod-ns-{name}" for name, spec in teams.items()}


def _scalars(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield f"{path}.{key}", key
            yield from _scalars(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _scalars(value, f"{path}[{i}]")
    else:
        yield path, node


def _check_schema(value: Any, type_name: str, path: str) -> None:
    """Every key is a field of the kubernetes client's model for that place (catches typos)."""
    if type_name.startswith("List["):
        assert isinstance(value, list), f"{path}: expected a list"
        for i, item in enumerate(value):
            _check_schema(item, type_name[5:-1], f"{path}[{i}]")
    elif type_name.startswith("Dict["):
        assert isinstance(value, dict), f"{path}: expected a map"
        inner = type_name[5:-1].split(", ", 1)[1]
        for key, item in value.items():
            _check_schema(item, inner, f"{path}.{key}")
    elif type_name in ("str", "datetime"):
        assert isinstance(value, str), f"{path}: expected a string"
    elif type_name == "int":
        assert isinstance(value, int) and not isinstance(value, bool), f"{path}: expected an integer"
    elif type_name == "bool":
        assert isinstance(value, bool), f"{path}: expected a boolean"
    elif type_name != "object":
        model = getattr(k8s_models, type_name)
        assert isinstance(value, dict), f"{path}: expected an object ({type_name})"
        fields = {json_name: attr for attr, json_name in model.attribute_map.items()}
        unknown = sorted(set(value) - set(fields))
        assert not unknown, f"{path}: unknown field(s) {unknown} for {type_name}"
        for key, item in value.items():
            _check_schema(item, model.openapi_types[fields[key]], f"{path}.{key}")


def test_documents_have_known_kinds_and_valid_fields() -> None:
    assert DOCS, "deploy/rbac.yaml is empty"
    seen = set()
    for doc in DOCS:
        key = (doc.get("apiVersion"), doc.get("kind"))
        assert key in KINDS, f"unexpected document {key}"
        ident = (doc["kind"], doc["metadata"].get("namespace"), doc["metadata"]["name"])
        assert ident not in seen, f"duplicate document {ident}"
        seen.add(ident)
        _check_schema(doc, KINDS[key], f"{doc['kind']}/{doc['metadata']['name']}")
    assert {kind for _, kind in KINDS} == {doc["kind"] for doc in DOCS}


def test_no_wildcards_anywhere() -> None:
    for doc in DOCS:
        name = f"{doc['kind']}/{doc['metadata']['name']}"
        for path, value in _scalars(doc):
            assert value != "*", f"{name}{path} is a wildcard"
        rules = list(doc.get("rules") or [])
        if doc["kind"] == "ValidatingAdmissionPolicy":
            rules += doc["spec"]["matchConstraints"]["resourceRules"]
        for rule in rules:
            for key, values in rule.items():
                if isinstance(values, list):
                    assert not any("*" in str(v) for v in values), f"{name}: wildcard in {key}: {values}"
            assert "nonResourceURLs" not in rule, f"{name}: non-resource URLs granted"
            assert "resourceNames" not in rule or rule["resourceNames"], f"{name}: empty resourceNames"


# --- RBAC: effective permissions ------------------------------------------------------------------

Grant = tuple[str | None, str, str, str]  # (namespace or None = cluster-wide, apiGroup, resource, verb)


def _bindings_of(group: str) -> list[dict[str, Any]]:
    found = []
    for doc in DOCS:
        if doc["kind"] in ("ClusterRoleBinding", "RoleBinding"):
            for subject in doc.get("subjects") or []:
                if subject["kind"] == "Group" and subject["name"] == group:
                    assert subject.get("apiGroup") == "rbac.authorization.k8s.io"
                    found.append(doc)
    return found


def _grants(group: str) -> set[Grant]:
    roles = {doc["metadata"]["name"]: doc for doc in _of_kind("ClusterRole")}
    grants: set[Grant] = set()
    for binding in _bindings_of(group):
        ref = binding["roleRef"]
        assert ref["apiGroup"] == "rbac.authorization.k8s.io"
        assert ref["kind"] == "ClusterRole", "roles are ClusterRoles (bound per namespace by RoleBindings)"
        assert ref["name"] in roles, f"{binding['metadata']['name']} refers to unknown role {ref['name']}"
        namespace = binding["metadata"]["namespace"] if binding["kind"] == "RoleBinding" else None
        for rule in roles[ref["name"]]["rules"]:
            # a rule restricted to named objects grants "resource:name" (only the API's quota reads)
            names = rule.get("resourceNames")
            resources = [f"{r}:{n}" for r in rule["resources"] for n in names] if names else rule["resources"]
            for api_group, resource, verb in product(rule["apiGroups"], resources, rule["verbs"]):
                grants.add((namespace, api_group, resource, verb))
    return grants


def _can(group: str, verb: str, api_group: str, resource: str, namespace: str | None = None) -> bool:
    grants = _grants(group)
    return (None, api_group, resource, verb) in grants or (
        namespace is not None and (namespace, api_group, resource, verb) in grants
    )


def _set(namespace: str | None, api_group: str, resources: tuple[str, ...], verbs: tuple[str, ...]) -> set:
    return {(namespace, api_group, r, v) for r, v in product(resources, verbs)}


def test_team_namespaces_come_from_teams_yaml() -> None:
    assert _team_namespaces() == {"hyperpod-ns-team-a", "hyperpod-ns-team-b", "hyperpod-ns-team-c"}


# every kind the API submits (lambdas/topogov/domain/kinds.py), as (API group, resource)
TRAINING_KINDS = tuple((k.group, k.plural) for k in JOB_KINDS)


# Both read Kueue's controller Deployment by name, for the Kueue release (adapters/kueue_api.py)
KUEUE_NAMESPACE = "kueue-system"
KUEUE_RELEASE: set[Grant] = {(KUEUE_NAMESPACE, "apps", "deployments:kueue-controller-manager", "get")}


def test_reconciler_has_exactly_its_permissions() -> None:
    governor_verbs = ("get", "list", "create", "update", "delete")  # no watch: it polls
    team_namespaces = tuple(f"namespaces:{ns}" for ns in sorted(_team_namespaces()))
    expected = (
        _set(None, "", ("nodes",), ("get", "list", "patch"))
        | _set(None, "", ("pods",), ("list",))
        | _set(None, "", ("limitranges",), ("list",))  # what Kueue adds to requests, into the snapshot
        | _set(None, "node.k8s.io", ("runtimeclasses",), ("list",))
        | _set(None, "", ("namespaces",), ("list", "create"))  # never read by name or deleted
        | _set(None, "", team_namespaces, ("patch",))  # their Pod Security labels, by name
        | _set(RULES_NAMESPACE, "", ("configmaps",), ("list", "create", "patch", "delete"))  # pod rules
        | _set(None, KUEUE, ("clusterqueues",), ("patch",))  # stopPolicy of a removed team's queue
        | _set(
            None,
            KUEUE,
            (
                "clusterqueues",
                "localqueues",
                "resourceflavors",
                "workloadpriorityclasses",
                "topologies",
                "cohorts",
            ),
            governor_verbs,
        )
    )
    for ns in _team_namespaces():
        for group, plural in TRAINING_KINDS:
            expected |= _set(ns, group, (plural,), ("get", "list", "patch", "delete"))
        expected |= _set(ns, KUEUE, ("workloads",), ("get", "list", "patch"))
    expected |= KUEUE_RELEASE
    assert _grants(RECONCILER) == expected


def test_reconciler_patches_nodes_but_never_updates_creates_or_deletes_them() -> None:
    assert _can(RECONCILER, "patch", "", "nodes")
    for verb in ("update", "create", "delete", "deletecollection"):
        assert not _can(RECONCILER, verb, "", "nodes"), verb
    assert not _can(RECONCILER, "patch", "", "nodes/status")
    assert not _can(RECONCILER, "list", "batch", "jobs", "default")


def test_api_has_exactly_its_permissions_in_team_namespaces_only() -> None:
    expected: set[Grant] = set()
    for ns in _team_namespaces():
        for group, plural in TRAINING_KINDS:
            expected |= _set(ns, group, (plural,), ("create", "get", "list", "delete"))
        expected |= (
            _set(ns, "", ("services",), ("create",))  # a rendered Job's headless Service
            | _set(ns, "", ("pods",), ("list",))
            | _set(ns, KUEUE, ("workloads",), ("list",))
        )
    # HyperPod mode: the quotas in force, one GET of each team's ClusterQueue by name (never list)
    expected |= _set(None, KUEUE, tuple(f"clusterqueues:{q}" for q in _team_cluster_queues()), ("get",))
    expected |= KUEUE_RELEASE  # the one read outside the team namespaces, by name
    assert _grants(API) == expected
    assert not _can(API, "list", KUEUE, "clusterqueues") and not _can(API, "get", KUEUE, "clusterqueues")
    assert not _can(API, "create", "batch", "jobs", "default")
    assert not _can(API, "update", "batch", "jobs", "hyperpod-ns-team-a")


def test_api_groups_one_cluster_wide_binding_reads_the_teams_queues_by_name_only() -> None:
    bindings = _bindings_of(API)
    assert bindings
    cluster_wide = [b for b in bindings if b["kind"] == "ClusterRoleBinding"]
    assert [b["roleRef"]["name"] for b in cluster_wide] == ["topogov-api-quotas"]
    (role,) = [r for r in _of_kind("ClusterRole") if r["metadata"]["name"] == "topogov-api-quotas"]
    assert role["rules"] == [
        {
            "apiGroups": [KUEUE],
            "resources": ["clusterqueues"],
            "resourceNames": sorted(_team_cluster_queues()),
            "verbs": ["get"],
        }
    ]


def _team_cluster_queues() -> set[str]:
    """The ClusterQueue the HyperPod task governance add-on keeps for each team of teams.yaml."""
    from topogov.domain.hyperpod.mapping import cluster_queue
    from topogov.domain.policy import load_policy_file

    return {cluster_queue(team) for team in load_policy_file(TEAMS).teams}


@pytest.mark.parametrize("group", [API, RECONCILER])
def test_every_team_namespace_has_its_binding_and_no_other_namespace_does(group: str) -> None:
    namespaces = [
        b["metadata"]["namespace"]
        for b in _bindings_of(group)
        if b["kind"] == "RoleBinding" and b["metadata"]["namespace"] not in (RULES_NAMESPACE, KUEUE_NAMESPACE)
    ]
    assert sorted(namespaces) == sorted(_team_namespaces())  # one binding per team namespace, no extra


def test_namespaced_roles_are_never_bound_cluster_wide() -> None:
    cluster_bound = {doc["roleRef"]["name"] for doc in _of_kind("ClusterRoleBinding")}
    namespace_bound = {doc["roleRef"]["name"] for doc in _of_kind("RoleBinding")}
    assert cluster_bound == {"topogov-reconciler", "topogov-api-quotas"}
    assert namespace_bound == {
        "topogov-api",
        "topogov-reconciler-team",
        "topogov-reconciler-pod-rules",
        "topogov-kueue-release",
    }


def test_bindings_name_only_the_two_groups() -> None:
    for doc in _of_kind("ClusterRoleBinding") + _of_kind("RoleBinding"):
        assert [(s["kind"], s["name"]) for s in doc["subjects"]] in (
            [("Group", RECONCILER)],
            [("Group", API)],
        ), doc["metadata"]


def test_bound_namespaces_are_declared_so_one_apply_works_on_a_fresh_cluster() -> None:
    declared = {doc["metadata"]["name"] for doc in _of_kind("Namespace")}
    assert declared == _team_namespaces() | {RULES_NAMESPACE}
    for i, doc in enumerate(DOCS):  # kubectl applies the documents in file order
        if doc["kind"] == "RoleBinding":
            earlier = {d["metadata"]["name"] for d in DOCS[:i] if d["kind"] == "Namespace"}
            # Kueue's own namespace exists before Topogov is installed (Kueue is a prerequisite)
            assert doc["metadata"]["namespace"] in earlier | {KUEUE_NAMESPACE}, doc["metadata"]


# --- admission policy: structure ------------------------------------------------------------------


def _named(kind: str, name: str) -> dict[str, Any]:
    (doc,) = [d for d in _of_kind(kind) if d["metadata"]["name"] == name]
    return doc


POLICY = _named("ValidatingAdmissionPolicy", "topogov-reconciler-node-topology-labels-only")
SPEC = POLICY["spec"]


def test_policy_binding_references_the_policy_and_denies() -> None:
    binding = _named("ValidatingAdmissionPolicyBinding", POLICY["metadata"]["name"])
    assert binding["spec"]["policyName"] == POLICY["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    assert "paramRef" not in binding["spec"] and "paramKind" not in SPEC


def test_policy_matches_node_updates_by_the_reconciler_and_fails_closed() -> None:
    assert SPEC["failurePolicy"] == "Fail"
    assert SPEC["matchConstraints"]["resourceRules"] == [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["nodes"]}
    ]
    assert any(RECONCILER in c["expression"] for c in SPEC["matchConditions"])
    for validation in SPEC["validations"]:
        assert validation["reason"] == "Forbidden"
        assert "\n" not in validation["message"]  # the API server rejects multi-line messages


def test_policy_compares_every_metadata_field_but_the_bookkeeping_ones() -> None:
    """A new ObjectMeta field in the kubernetes client shows up here, so the policy is revisited."""
    compared = {var["name"]: var["expression"] for var in SPEC["variables"]}["changedMetadata"]
    checked = set(re.findall(r"'metadata\.(\w+)'", compared))
    every = set(k8s_models.V1ObjectMeta.attribute_map.values())
    assert checked == every - {"labels", "annotations", "resourceVersion", "generation", "managedFields"}
    for name in checked:
        assert f"object.metadata.{name} == oldObject.metadata.{name}" in compared, name


@pytest.mark.parametrize("policy", [p["metadata"]["name"] for p in _of_kind("ValidatingAdmissionPolicy")])
def test_every_cel_expression_parses(policy: str) -> None:
    spec = _named("ValidatingAdmissionPolicy", policy)["spec"]
    expressions = [c["expression"] for c in spec.get("matchConditions") or []]
    expressions += [v["expression"] for v in spec.get("variables") or []]
    for v in spec["validations"]:
        expressions += [v["expression"], *([v["messageExpression"]] if "messageExpression" in v else [])]
        assert "\n" not in v["message"]  # the API server rejects multi-line messages
    for expression in expressions:
        cel.compile(expression)


def test_each_policy_has_one_deny_binding_the_team_pods_one_per_team() -> None:
    bindings = _of_kind("ValidatingAdmissionPolicyBinding")
    for policy in _of_kind("ValidatingAdmissionPolicy"):
        name = policy["metadata"]["name"]
        assert policy["spec"]["failurePolicy"] == "Fail"
        mine = [b for b in bindings if b["spec"]["policyName"] == name]
        assert mine and all(b["spec"]["validationActions"] == ["Deny"] for b in mine), name
    team_pods = [b for b in bindings if b["spec"]["policyName"] == "topogov-team-pods"]
    from topogov.domain.policy import load_policy_file
    from topogov.domain.team_pods import rules_name

    policy = load_policy_file(TEAMS)
    want = {(t.namespace, rules_name(name)) for name, t in policy.teams.items()}
    have = {
        (
            b["spec"]["matchResources"]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
            b["spec"]["paramRef"]["name"],
        )
        for b in team_pods
    }
    assert have == want
    for b in team_pods:
        assert b["spec"]["paramRef"]["namespace"] == RULES_NAMESPACE
        assert b["spec"]["paramRef"]["parameterNotFoundAction"] == "Deny"  # no rules yet: refused


def test_the_team_namespaces_carry_their_teams_pod_security_labels() -> None:
    from topogov.domain.policy import load_policy_file
    from topogov.domain.team_pods import pod_security_labels

    policy = load_policy_file(TEAMS)
    declared = {d["metadata"]["name"]: d["metadata"]["labels"] for d in _of_kind("Namespace")}
    for team in policy.teams.values():
        labels = declared[team.namespace]
        assert {k: v for k, v in labels.items() if k.startswith("pod-security.")} == pod_security_labels(team)


def test_the_reconciler_may_create_and_label_only_the_team_namespaces() -> None:
    spec = _named("ValidatingAdmissionPolicy", "topogov-reconciler-team-namespaces")["spec"]
    names = {v["name"]: v["expression"] for v in spec["variables"]}["teamNamespaces"]
    assert sorted(re.findall(r"'([^']+)'", names)) == sorted(_team_namespaces())


# --- admission policy: executed -------------------------------------------------------------------


@dataclass
class Admission:
    matched: bool
    refusals: list[str] = field(default_factory=list)  # messages of the failed validations

    @property
    def allowed(self) -> bool:
        return not self.refusals


def _evaluate(expression: str, variables: dict[str, Any]) -> Any:
    context = cel.Context()
    add_stdlib_to_context(context, ["strings"])  # `join`, as in Kubernetes' cel-go strings extension
    for name, value in variables.items():
        context.add_variable(name, value)
    try:
        return cel.evaluate(expression, context)
    except Exception as exc:  # an error would deny (failurePolicy: Fail) and hide a broken expression
        raise AssertionError(f"CEL error {exc!r} in: {expression}") from exc


def _request(old: dict[str, Any], groups: list[str] | None) -> dict[str, Any]:
    user: dict[str, Any] = {"username": "arn:aws:sts::111122223333:assumed-role/topogov-reconcile/x"}
    if groups is not None:
        user["groups"] = groups
    return {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": "", "version": "v1", "kind": "Node"},
        "resource": {"group": "", "version": "v1", "resource": "nodes"},
        "requestKind": {"group": "", "version": "v1", "kind": "Node"},
        "requestResource": {"group": "", "version": "v1", "resource": "nodes"},
        "name": old["metadata"]["name"],
        "operation": "UPDATE",  # a PATCH is admitted as an UPDATE with both whole objects
        "userInfo": user,
        "dryRun": False,
        "options": {"kind": "PatchOptions", "apiVersion": "meta.k8s.io/v1"},
    }


def admit(old: dict[str, Any], new: dict[str, Any], groups: list[str] | None) -> Admission:
    """What the API server decides for this policy (Deny binding) on an UPDATE of a Node."""
    request = _request(old, groups)
    rule = SPEC["matchConstraints"]["resourceRules"][0]
    assert request["operation"] in rule["operations"] and "nodes" in rule["resources"]
    env: dict[str, Any] = {
        "object": new,
        "oldObject": old,
        "request": request,
        "params": None,
        "namespaceObject": None,  # Nodes are cluster-scoped
    }
    for condition in SPEC["matchConditions"]:
        result = _evaluate(condition["expression"], env)
        assert isinstance(result, bool), condition["name"]
        if not result:
            return Admission(matched=False)
    variables: dict[str, Any] = {}
    for variable in SPEC["variables"]:  # in order: a variable may use earlier ones
        variables[variable["name"]] = _evaluate(variable["expression"], {**env, "variables": variables})
    env["variables"] = variables
    admission = Admission(matched=True)
    for validation in SPEC["validations"]:
        result = _evaluate(validation["expression"], env)
        assert isinstance(result, bool), validation["expression"]
        if not result:
            message = _evaluate(validation["messageExpression"], env)
            assert isinstance(message, str) and "\n" not in message  # else the static message is used
            admission.refusals.append(message)
    return admission


def _node() -> dict[str, Any]:
    """A p5.48xlarge node as the API server stores it (trimmed), with its topology labels."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "ip-10-1-2-3.us-east-2.compute.internal",
            "uid": "1f0e1a4c-9f2e-4b1e-8e5a-4f8c2d9b7a10",
            "resourceVersion": "918273",
            "creationTimestamp": "2025-01-15T10:02:03Z",
            "labels": {
                "kubernetes.io/hostname": "ip-10-1-2-3.us-east-2.compute.internal",
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": "p5.48xlarge",
                "topology.kubernetes.io/zone": "us-east-2a",
                "topology.k8s.aws/zone-id": "use2-az1",
                "topology.k8s.aws/network-node-layer-1": "nn-1111111111111111",
                "topology.k8s.aws/network-node-layer-2": "nn-2222222222222222",
                "topology.k8s.aws/network-node-layer-3": "nn-3333333333333333",
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
            "managedFields": [
                {
                    "manager": "kubelet",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": "2025-01-15T10:02:03Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {"f:labels": {".": {}}}},
                }
            ],
        },
        "spec": {
            "providerID": "aws:///us-east-2a/i-0123456789abcdef0",
            "podCIDR": "10.1.2.0/24",
            "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
        },
        "status": {
            "capacity": {"cpu": "192", "memory": "2097152Mi", "nvidia.com/gpu": "8", "pods": "100"},
            "allocatable": {"cpu": "191450m", "memory": "2050000Mi", "nvidia.com/gpu": "8", "pods": "100"},
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "lastHeartbeatTime": "2025-01-15T11:00:00Z",
                    "lastTransitionTime": "2025-01-15T10:03:00Z",
                }
            ],
            "addresses": [{"type": "InternalIP", "address": "10.1.2.3"}],
            "nodeInfo": {"kubeletVersion": "v1.33.1-eks-1234567", "architecture": "amd64"},
        },
    }


Change = Callable[[dict[str, Any], dict[str, Any]], None]  # edits (old, new) in place
LABEL3 = "topology.k8s.aws/network-node-layer-3"


def _labels(node: dict[str, Any]) -> dict[str, str]:
    return node["metadata"].setdefault("labels", {})


def _topology_only(node: dict[str, Any]) -> None:
    node["metadata"]["labels"] = {k: v for k, v in _labels(node).items() if k.startswith("topology.k8s.aws/")}


def _bookkeeping(old: dict[str, Any], new: dict[str, Any]) -> None:
    _labels(new)[LABEL3] = "nn-3333333333333334"
    new["metadata"]["resourceVersion"] = "918274"
    new["metadata"]["generation"] = 2
    new["metadata"]["managedFields"] = [
        *old["metadata"]["managedFields"],
        {"manager": "topogov", "operation": "Update", "apiVersion": "v1", "time": "2025-01-15T11:00:00Z"},
    ]


def _set_labels_absent(old: dict[str, Any], new: dict[str, Any], which: str) -> None:
    _topology_only(old)
    _topology_only(new)
    if which == "old":
        del old["metadata"]["labels"]
    else:
        del new["metadata"]["labels"]


def _mutate(change: Change) -> tuple[dict[str, Any], dict[str, Any]]:
    old = _node()
    new = copy.deepcopy(old)
    change(old, new)
    return old, new


ALLOWED: dict[str, Change] = {
    "no change": lambda old, new: None,
    "add layer-3 label": lambda old, new: _labels(old).pop(LABEL3),
    "change layer-3 label": lambda old, new: _labels(new).update({LABEL3: "nn-3333333333333334"}),
    "remove layer-3 label": lambda old, new: _labels(new).pop(LABEL3),
    "add layer-4 label": lambda old, new: _labels(new).update(
        {"topology.k8s.aws/network-node-layer-4": "nn-4444444444444444"}
    ),
    "change zone-id label": lambda old, new: _labels(new).update({"topology.k8s.aws/zone-id": "use2-az2"}),
    "topology label plus resourceVersion, generation, managedFields": _bookkeeping,
    "old node has no labels map": lambda old, new: _set_labels_absent(old, new, "old"),
    "new node has no labels map": lambda old, new: _set_labels_absent(old, new, "new"),
    "no annotations map on either side": lambda old, new: [
        n["metadata"].pop("annotations") for n in (old, new)
    ],
}

# Each refused change -> what each refusal message must contain, one entry per failed validation: a
# string, or several strings when the message lists several keys (map iteration order is unspecified).
REFUSED: dict[str, tuple[Change, tuple[str | tuple[str, ...], ...]]] = {
    "add a taint": (
        lambda old, new: new["spec"]["taints"].append({"key": "topogov", "effect": "NoExecute"}),
        ("its spec",),
    ),
    "remove the taints": (lambda old, new: new["spec"].pop("taints"), ("its spec",)),
    "cordon (spec.unschedulable)": (
        lambda old, new: new["spec"].update({"unschedulable": True}),
        ("its spec",),
    ),
    "add label team=x": (lambda old, new: _labels(new).update({"team": "x"}), ("label(s) team",)),
    "change label team": (
        lambda old, new: (_labels(old).update({"team": "y"}), _labels(new).update({"team": "x"})),
        ("label(s) team",),
    ),
    "remove another label": (
        lambda old, new: _labels(new).pop("node.kubernetes.io/instance-type"),
        ("label(s) node.kubernetes.io/instance-type",),
    ),
    "change the cloud's topology.kubernetes.io/zone": (
        lambda old, new: _labels(new).update({"topology.kubernetes.io/zone": "us-east-2b"}),
        ("label(s) topology.kubernetes.io/zone",),
    ),
    "look-alike prefix without the slash": (
        lambda old, new: _labels(new).update({"topology.k8s.aws.evil/network-node-layer-1": "x"}),
        ("label(s) topology.k8s.aws.evil/network-node-layer-1",),
    ),
    "topology label together with another label": (
        lambda old, new: _labels(new).update({LABEL3: "nn-3333333333333334", "team": "x"}),
        ("label(s) team",),
    ),
    "drop the labels map": (
        lambda old, new: new["metadata"].pop("labels"),
        (("label(s) ", "kubernetes.io/hostname", "node.kubernetes.io/instance-type"),),
    ),
    "change an annotation": (
        lambda old, new: new["metadata"]["annotations"].update({"node.alpha.kubernetes.io/ttl": "30"}),
        ("annotation(s) node.alpha.kubernetes.io/ttl",),
    ),
    "add an annotation where there were none": (
        lambda old, new: (
            old["metadata"].pop("annotations"),
            new["metadata"].update({"annotations": {"a": "b"}}),
        ),
        ("annotation(s) a",),
    ),
    "change status": (
        lambda old, new: new["status"]["allocatable"].update({"nvidia.com/gpu": "16"}),
        ("its status",),
    ),
    "add a finalizer": (
        lambda old, new: new["metadata"].update({"finalizers": ["topogov/keep"]}),
        ("metadata.finalizers",),
    ),
    "add an owner reference": (
        lambda old, new: new["metadata"].update(
            {"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "u"}]}
        ),
        ("metadata.ownerReferences",),
    ),
    "label, taint and annotation at once": (
        lambda old, new: (
            _labels(new).update({"team": "x"}),
            new["spec"]["taints"].clear(),
            new["metadata"]["annotations"].update({"node.alpha.kubernetes.io/ttl": "30"}),
        ),
        ("label(s) team", "annotation(s) node.alpha.kubernetes.io/ttl", "its spec"),
    ),
}

RECONCILER_GROUPS = [RECONCILER, "system:authenticated"]


@pytest.mark.parametrize("name", list(ALLOWED))
def test_policy_allows_topology_label_changes(name: str) -> None:
    old, new = _mutate(ALLOWED[name])
    admission = admit(old, new, RECONCILER_GROUPS)
    assert admission.matched
    assert admission.allowed, admission.refusals


@pytest.mark.parametrize("name", list(REFUSED))
def test_policy_refuses_any_other_change(name: str) -> None:
    change, fragments = REFUSED[name]
    old, new = _mutate(change)
    admission = admit(old, new, RECONCILER_GROUPS)
    assert admission.matched
    assert len(admission.refusals) == len(fragments), admission.refusals
    prefix = (
        f"topogov:reconciler may change only the topology.k8s.aws/ labels of Node {old['metadata']['name']}"
    )
    for message, fragment in zip(admission.refusals, fragments, strict=True):
        assert message.startswith(prefix), message
        for part in (fragment,) if isinstance(fragment, str) else fragment:
            assert part in message, message


@pytest.mark.parametrize(
    "groups",
    [["system:nodes", "system:authenticated"], [API, "system:authenticated"], ["system:masters"], [], None],
    ids=["kubelet", "api-function", "admin", "no-groups", "groups-absent"],
)
@pytest.mark.parametrize("name", ["add a taint", "add label team=x", "change status"])
def test_policy_does_not_apply_to_other_callers(name: str, groups: list[str] | None) -> None:
    old, new = _mutate(REFUSED[name][0])
    assert admit(old, new, groups) == Admission(matched=False)
