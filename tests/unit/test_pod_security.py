"""The Pod Security Standards port (``topogov.domain.podsecurity``) against upstream's own fixtures
(k8s.io/pod-security-admission v0.35.4, vendored by ``data/pod_security_fixtures.py``), and by hand:
exact fields and messages, one violation per offending field."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from topogov.domain.podsecurity import (
    LEVELS,
    OVERRIDES,
    POLICY_VERSION,
    Violation,
    check_ids,
    violations,
)

DATA = json.loads((Path(__file__).parent / "data" / "pod_security_fixtures.json").read_text())
FIXTURES = DATA["fixtures"]
MISSING = object()
# The restricted checks that require a field to be set: a violation names the field to set.
REQUIRES_A_FIELD = {
    "allowPrivilegeEscalation",
    "runAsNonRoot",
    "seccompProfile_restricted",
    "capabilities_restricted",
}


def resolve(pod: dict[str, Any], path: str) -> Any:
    """The value a violation's field path names in a pod (MISSING when it names nothing)."""
    node: Any = pod
    if path.startswith("metadata.annotations."):
        annotations = pod.get("metadata", {}).get("annotations", {})
        return annotations.get(path.removeprefix("metadata.annotations."), MISSING)
    for name, index in re.findall(r"([A-Za-z]+)((?:\[\d+\])*)", path):
        if not isinstance(node, dict) or name not in node:
            return MISSING
        node = node[name]
        for i in re.findall(r"\d+", index):
            if not isinstance(node, list) or int(i) >= len(node):
                return MISSING
            node = node[int(i)]
    return node


def fixture_id(f: dict[str, Any]) -> str:
    return f"{f['level']}/{f['version']}/{f['file']}"


def test_the_vendored_fixtures_are_upstreams_newest_for_both_levels():
    """Every fixture of v1.35 (the version ``latest`` means in v0.35.4) of each level is vendored."""
    assert DATA["source"] == "k8s.io/pod-security-admission@v0.35.4 test/testdata"
    counts = {
        (level, expect): sum(1 for f in FIXTURES if f["level"] == level and f["expect"] == expect)
        for level in ("baseline", "restricted")
        for expect in ("pass", "fail")
    }
    assert counts == {
        ("baseline", "pass"): 15,
        ("baseline", "fail"): 34,
        ("restricted", "pass"): 23,
        ("restricted", "fail"): 76,
    }
    assert {f["version"] for f in FIXTURES} == {POLICY_VERSION}


@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
def test_upstream_fixture(fixture):
    """A pass fixture has no violation at its level; a fail fixture has one of its check (or of the
    restricted check that replaces it there); every field a violation names is present in the pod."""
    # Given upstream's fixture pod
    pod, level = fixture["pod"], fixture["level"]
    # When the port evaluates it at the fixture's level
    found = violations(level, pod.get("metadata"), pod["spec"])
    # Then it is refused exactly when upstream expects it
    if fixture["expect"] == "pass":
        assert found == []
    else:
        check = fixture["check"]
        expected = OVERRIDES.get(check, check) if level == "restricted" else check
        assert expected in {v.check for v in found}
    for v in found:
        assert v.level in ("baseline", "restricted") and v.check in check_ids(level)
        if v.check in REQUIRES_A_FIELD:  # names the field to set, which may be missing
            assert resolve(pod, v.field.rsplit(".securityContext", 1)[0]) not in (MISSING, None), v.field
        else:
            assert resolve(pod, v.field) not in (MISSING, None), v.field


def test_each_level_applies_upstreams_checks_in_upstreams_order():
    """Baseline IDs sorted, then restricted IDs sorted; restricted drops the four it overrides."""
    assert LEVELS == ("privileged", "baseline", "restricted")
    assert check_ids("privileged") == ()
    assert check_ids("baseline") == (
        "appArmorProfile",
        "capabilities_baseline",
        "hostNamespaces",
        "hostPathVolumes",
        "hostPorts",
        "hostProbesAndHostLifecycle",
        "privileged",
        "procMount",
        "seLinuxOptions",
        "seccompProfile_baseline",
        "sysctls",
        "windowsHostProcess",
    )
    assert check_ids("restricted") == (
        "appArmorProfile",
        "hostNamespaces",
        "hostPorts",
        "hostProbesAndHostLifecycle",
        "privileged",
        "seLinuxOptions",
        "sysctls",
        "windowsHostProcess",
        "allowPrivilegeEscalation",
        "capabilities_restricted",
        "procMount_restricted",
        "restrictedVolumes",
        "runAsNonRoot",
        "runAsUser",
        "seccompProfile_restricted",
    )
    with pytest.raises(ValueError, match="unknown Pod Security level"):
        violations("strict", None, {})


def restricted_container(name: str, **security: Any) -> dict[str, Any]:
    return {
        "name": name,
        "image": "busybox",
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, **security},
    }


def restricted_spec(**pod_security: Any) -> dict[str, Any]:
    """A spec the restricted level allows: upstream's minimal valid restricted pod."""
    return {
        "securityContext": {
            "runAsNonRoot": True,
            "seccompProfile": {"type": "RuntimeDefault"},
            **pod_security,
        },
        "initContainers": [restricted_container("init")],
        "containers": [restricted_container("main")],
    }


def test_the_privileged_level_allows_anything():
    """privileged applies no check."""
    spec = {"hostNetwork": True, "containers": [{"name": "a", "securityContext": {"privileged": True}}]}
    assert violations("privileged", None, spec) == []
    assert violations("restricted", None, restricted_spec()) == []


def test_a_privileged_init_container_is_named_by_its_own_field():
    """One violation, at the init container's securityContext.privileged."""
    spec = {
        "initContainers": [{"name": "setup"}, {"name": "init", "securityContext": {"privileged": True}}],
        "containers": [{"name": "main", "securityContext": {"privileged": False}}],
    }
    assert violations("baseline", None, spec) == [
        Violation(
            "privileged",
            "baseline",
            "spec.initContainers[1].securityContext.privileged",
            'privileged (container "init" must not set securityContext.privileged=true)',
        )
    ]


def test_a_host_path_volume_is_named_by_its_index_and_replaced_at_restricted():
    """baseline: hostPathVolumes; restricted: restrictedVolumes, at the same field."""
    spec = restricted_spec()
    spec["volumes"] = [
        {"name": "scratch"},  # no source: the API server defaults it to emptyDir
        {"name": "config", "configMap": {"name": "c"}},
        {"name": "host", "hostPath": {"path": "/var/run"}},
    ]
    assert violations("baseline", None, spec) == [
        Violation(
            "hostPathVolumes", "baseline", "spec.volumes[2].hostPath", 'hostPath volumes (volume "host")'
        )
    ]
    assert violations("restricted", None, spec) == [
        Violation(
            "restrictedVolumes",
            "restricted",
            "spec.volumes[2].hostPath",
            'restricted volume types (volume "host" uses restricted volume type "hostPath")',
        )
    ]


def test_a_host_port_in_an_ephemeral_container_counts():
    """Upstream visits ephemeral containers too."""
    spec = {
        "containers": [{"name": "main", "ports": [{"containerPort": 80}]}],
        "ephemeralContainers": [{"name": "debug", "ports": [{"containerPort": 80}, {"hostPort": 8081}]}],
    }
    assert violations("baseline", None, spec) == [
        Violation(
            "hostPorts",
            "baseline",
            "spec.ephemeralContainers[0].ports[1].hostPort",
            'hostPort (container "debug" uses hostPort 8081)',
        )
    ]


SECCOMP = "securityContext.seccompProfile.type"


def seccomp(level: str, spec: dict[str, Any]) -> list[tuple[str, str]]:
    return [(v.field, v.message) for v in violations(level, None, spec) if v.check.startswith("seccomp")]


def test_restricted_wants_a_seccomp_profile_on_the_pod_or_every_container():
    """Missing everywhere: each container, named by the field to set."""
    # Given a pod with no seccomp profile anywhere
    spec = restricted_spec()
    del spec["securityContext"]["seccompProfile"]
    spec["containers"].append({"name": "bare"})
    must = 'to "RuntimeDefault" or "Localhost")'
    # Then every container lacks one
    assert seccomp("restricted", spec) == [
        (
            f"spec.initContainers[0].{SECCOMP}",
            f'seccompProfile (pod or container "init" must set {SECCOMP} {must}',
        ),
        (
            f"spec.containers[0].{SECCOMP}",
            f'seccompProfile (pod or container "main" must set {SECCOMP} {must}',
        ),
        (
            f"spec.containers[1].{SECCOMP}",
            f'seccompProfile (pod or container "bare" must set {SECCOMP} {must}',
        ),
    ]
    assert seccomp("baseline", spec) == []
    # When the containers set one each, all is well
    for c in spec["initContainers"] + spec["containers"]:
        c.setdefault("securityContext", {})["seccompProfile"] = {"type": "Localhost", "localhostProfile": "p"}
    assert seccomp("restricted", spec) == []
    # When one sets Unconfined, upstream names it alone (both levels)
    spec["containers"][0]["securityContext"]["seccompProfile"] = {"type": "Unconfined"}
    unconfined = [
        (
            "spec.containers[0].securityContext.seccompProfile.type",
            f'seccompProfile (container "main" must not set {SECCOMP} to "Unconfined")',
        )
    ]
    assert seccomp("restricted", spec) == unconfined
    assert seccomp("baseline", spec) == unconfined


def test_a_pod_level_seccomp_profile_covers_the_containers():
    """The pod's RuntimeDefault suffices; the pod's Unconfined is named at the pod."""
    spec = restricted_spec()
    assert seccomp("restricted", spec) == []
    spec["securityContext"]["seccompProfile"] = {"type": "Unconfined"}
    assert seccomp("restricted", spec) == [
        (
            "spec.securityContext.seccompProfile.type",
            f'seccompProfile (pod must not set {SECCOMP} to "Unconfined")',
        )
    ]


def test_only_the_unsafe_sysctls_are_named():
    """The safe set of v1.32+ (tcp_rmem among them) passes; each other sysctl is one violation."""
    spec = {
        "securityContext": {
            "sysctls": [
                {"name": "kernel.shm_rmid_forced", "value": "1"},
                {"name": "kernel.msgmax", "value": "65536"},
                {"name": "net.ipv4.tcp_rmem", "value": "4096 87380 16777216"},
                {"name": "net.core.somaxconn", "value": "1024"},
            ]
        },
        "containers": [{"name": "main"}],
    }
    assert violations("baseline", None, spec) == [
        Violation(
            "sysctls", "baseline", "spec.securityContext.sysctls[1].name", "forbidden sysctls (kernel.msgmax)"
        ),
        Violation(
            "sysctls",
            "baseline",
            "spec.securityContext.sysctls[3].name",
            "forbidden sysctls (net.core.somaxconn)",
        ),
    ]


def test_an_unmasked_proc_mount_is_allowed_by_baseline_only_in_a_user_namespace():
    """procMount (1.35) relaxes for hostUsers: false; procMount_restricted does not."""
    spec = restricted_spec()
    spec["containers"][0]["securityContext"]["procMount"] = "Unmasked"
    field = "spec.containers[0].securityContext.procMount"
    message = 'procMount (container "main" must not set securityContext.procMount to "Unmasked")'
    assert violations("baseline", None, spec) == [Violation("procMount", "baseline", field, message)]
    assert violations("restricted", None, spec) == [
        Violation("procMount_restricted", "restricted", field, message)
    ]
    spec["hostUsers"] = False
    assert violations("baseline", None, spec) == []
    assert violations("restricted", None, spec) == [
        Violation("procMount_restricted", "restricted", field, message)
    ]


def test_app_armor_fields_come_before_the_beta_annotations():
    """A profile type other than RuntimeDefault/Localhost (pod, then containers), then annotations
    other than runtime/default and localhost/* (sorted), each at its own field."""
    metadata = {
        "annotations": {
            "container.apparmor.security.beta.kubernetes.io/side": "localhost/custom",
            "container.apparmor.security.beta.kubernetes.io/main": "unconfined",
            "container.apparmor.security.beta.kubernetes.io/init": "runtime/default",
            "other.example.com/main": "unconfined",
        }
    }
    spec = {
        "securityContext": {"appArmorProfile": {"type": "Localhost", "localhostProfile": "p"}},
        "initContainers": [
            {"name": "init", "securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}}}
        ],
        "containers": [{"name": "main", "securityContext": {"appArmorProfile": {"type": "Unconfined"}}}],
    }
    key = "container.apparmor.security.beta.kubernetes.io/main"
    forbidden = "forbidden AppArmor profile"
    assert [(v.field, v.message) for v in violations("baseline", metadata, spec)] == [
        (
            "spec.containers[0].securityContext.appArmorProfile.type",
            f'{forbidden} (container "main" must not set AppArmor profile type to "Unconfined")',
        ),
        (
            f"metadata.annotations.{key}",
            f'{forbidden} (annotation must not set AppArmor profile type to "{key}="unconfined"")',
        ),
    ]


def capabilities(level: str, spec: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(v.check, v.field, v.message) for v in violations(level, None, spec) if "capabilities" in v.check]


def test_restricted_wants_drop_all_and_adds_only_net_bind_service():
    """baseline: adds beyond the default set; restricted: no drop ALL, and any add but NET_BIND_SERVICE."""
    spec = restricted_spec()
    spec["containers"][0]["securityContext"]["capabilities"] = {
        "add": ["NET_BIND_SERVICE", "CHOWN", "SYS_ADMIN"],
        "drop": ["NET_RAW"],
    }
    base = "spec.containers[0].securityContext.capabilities"
    add = "in securityContext.capabilities.add)"
    assert capabilities("baseline", spec) == [
        (
            "capabilities_baseline",
            f"{base}.add[2]",
            f'non-default capabilities (container "main" must not include "SYS_ADMIN" {add}',
        ),
    ]
    assert capabilities("restricted", spec) == [
        (
            "capabilities_restricted",
            f"{base}.drop",
            'unrestricted capabilities (container "main" must set securityContext.capabilities.drop=["ALL"])',
        ),
        (
            "capabilities_restricted",
            f"{base}.add[1]",
            f'unrestricted capabilities (container "main" must not include "CHOWN" {add}',
        ),
        (
            "capabilities_restricted",
            f"{base}.add[2]",
            f'unrestricted capabilities (container "main" must not include "SYS_ADMIN" {add}',
        ),
    ]
    spec["containers"][0]["securityContext"]["capabilities"] = {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]}
    assert capabilities("restricted", spec) == []
    spec["os"] = {"name": "windows"}  # a Windows pod is exempt (1.25+)
    spec["containers"][0]["securityContext"]["capabilities"] = {"add": ["SYS_ADMIN"]}
    assert capabilities("restricted", spec) == []


def test_run_as_user_zero_is_restricted_unless_in_a_user_namespace():
    """runAsUser=0 on the pod and a container: two violations; hostUsers: false exempts (1.35)."""
    spec = restricted_spec(runAsUser=0)
    spec["initContainers"][0]["securityContext"]["runAsUser"] = 1000
    spec["containers"][0]["securityContext"]["runAsUser"] = 0
    assert violations("restricted", None, spec) == [
        Violation(
            "runAsUser",
            "restricted",
            "spec.securityContext.runAsUser",
            "runAsUser=0 (pod must not set runAsUser=0)",
        ),
        Violation(
            "runAsUser",
            "restricted",
            "spec.containers[0].securityContext.runAsUser",
            'runAsUser=0 (container "main" must not set runAsUser=0)',
        ),
    ]
    assert violations("baseline", None, spec) == []
    spec["hostUsers"] = False
    assert violations("restricted", None, spec) == []


def test_malformed_input_never_raises():
    """Wrong JSON types read as absent: no exception, whatever the shape."""
    malformed: list[Any] = [
        {"containers": "x"},
        {"containers": ["x", 3, None, {"name": 5, "securityContext": "x"}]},
        {"containers": [{"securityContext": {"capabilities": {"add": "SYS_ADMIN", "drop": "ALL"}}}]},
        {"containers": [{"ports": "x"}, {"ports": [3, {"hostPort": "80"}, {"hostPort": True}]}]},
        {"containers": [{"livenessProbe": "x", "lifecycle": {"postStart": 3}}]},
        {"volumes": {"a": 1}},
        {"volumes": ["x", {"name": 3, "hostPath": "x"}]},
        {"securityContext": {"sysctls": [1, "x", {"name": 5}, {}], "seccompProfile": "x"}},
        {"securityContext": {"seLinuxOptions": {"type": 3, "user": []}, "appArmorProfile": {}}},
        {"hostNetwork": "true", "hostUsers": "false", "os": "windows"},
    ]
    metadata: list[Any] = [
        None,
        {"annotations": ["x"]},
        {"annotations": {"container.apparmor.security.beta.kubernetes.io/a": 3}},
    ]
    for level in LEVELS:
        for spec in malformed:
            for meta in metadata:
                for v in violations(level, meta, copy.deepcopy(spec)):
                    assert isinstance(v, Violation)
        assert violations(level, None, "x") == []  # type: ignore[arg-type]
