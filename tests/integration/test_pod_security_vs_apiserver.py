"""The Pod Security port (``topogov.domain.podsecurity``) against the real evaluator: kube-apiserver
v1.35.4's PodSecurity admission, which evaluates a PodTemplate in a namespace labelled
``pod-security.kubernetes.io/warn`` and answers with a ``Warning`` header
(``would violate PodSecurity "<level>:v1.35": <reason> (<detail>), ...``, k8s.io/pod-security-admission
``admission/admission.go``, ``EvaluatePod``).

Every fixture upstream ships for v1.35 (vendored in ``tests/unit/data``) is created as a PodTemplate with
``dryRun=All`` (nothing is stored); the API server must warn exactly when the port finds violations,
naming the same checks. Where the port finds one field of a check, its message must be the very
``reason (detail)`` the API server writes for that check.
"""

from __future__ import annotations

import json
import re
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from topogov.domain.podsecurity import POLICY_VERSION, REASONS, check_ids, violations

FIXTURES = json.loads(
    (Path(__file__).parents[1] / "unit" / "data" / "pod_security_fixtures.json").read_text()
)["fixtures"]
# Upstream's fixtures that API validation refuses, so PodSecurity never sees them: the v1.35
# baseline procMount failures (an Unmasked procMount with hostUsers: true), which upstream marks
# ``failRequiresError: true`` in test/fixtures_procMount.go; restricted inherits that generator.
REFUSED = {
    ("baseline", "fail/procmount0.yaml"),
    ("baseline", "fail/procmount1.yaml"),
    ("restricted", "fail/procmount0.yaml"),
    ("restricted", "fail/procmount1.yaml"),
}
WARNING = re.compile(r'^\d{3} \S+ "(.*)"$')
VIOLATES = re.compile(r'^would violate PodSecurity "([a-z]+):(v1\.\d+|latest)": (.*)$')


class Api:
    """Raw HTTPS to the API server as admin, answering (status, Warning texts)."""

    def __init__(self, kubeconfig: Path) -> None:
        cfg = yaml.safe_load(kubeconfig.read_text())
        self.url = cfg["clusters"][0]["cluster"]["server"]
        self.token = cfg["users"][0]["user"]["token"]
        self.ctx = ssl.create_default_context(cafile=cfg["clusters"][0]["cluster"]["certificate-authority"])

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, list[str]]:
        req = urllib.request.Request(
            self.url + path,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
            method=method,
        )
        try:
            with urllib.request.urlopen(req, context=self.ctx, timeout=30) as resp:
                resp.read()
                status, headers = resp.status, resp.headers
        except urllib.error.HTTPError as err:
            err.read()
            status, headers = err.code, err.headers
        texts = []
        for header in headers.get_all("Warning") or []:
            m = WARNING.match(header)
            texts.append(re.sub(r"\\(.)", r"\1", m.group(1)) if m else header)
        return status, texts


def segments(detail: str) -> list[str]:
    """``a (x, y), b, c (z)`` -> ``["a (x, y)", "b", "c (z)"]``: the checks' parts, split at the
    commas outside parentheses (``AggregateCheckResult.ForbiddenDetail``, policy/checks.go)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(detail):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and detail.startswith(", ", i):
            parts.append(detail[start:i])
            start = i + 2
    return [*parts, detail[start:]]


def display_names(level: str) -> dict[str, str]:
    """upstream's ForbiddenReason -> check ID, for the checks a level applies (a reason two checks
    share, ``seccompProfile`` or ``procMount``, is one check's at any one level)."""
    names = {REASONS[c]: c for c in check_ids(level)}
    assert len(names) == len(check_ids(level))
    names["forbidden AppArmor profiles"] = "appArmorProfile"  # the plural of check_appArmorProfile.go
    return names


def api_verdict(api: Api, namespace: str, level: str, name: str, pod: dict[str, Any]) -> Any:
    """None when API validation refuses the template, else {check ID: "reason (detail)"} of the warning."""
    metadata = {k: v for k, v in (pod.get("metadata") or {}).items() if k != "name"}
    template = {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": name},
        "template": {"metadata": metadata, "spec": pod["spec"]},
    }
    status, texts = api.call("POST", f"/api/v1/namespaces/{namespace}/podtemplates?dryRun=All", template)
    if status in (400, 422):
        return None
    assert status == 201, (name, status, texts)
    found: dict[str, str] = {}
    names = display_names(level)
    for text in texts:
        m = VIOLATES.match(text)
        if m is None:
            continue
        assert m.group(1, 2) == (level, POLICY_VERSION), text
        for part in segments(m.group(3)):
            found[names[part.split(" (", 1)[0]]] = part
    return found


@pytest.fixture(scope="module")
def api(server):
    """The API server as admin, on a reset cluster, with a namespace per level warning at v1.35."""
    cluster, _ = server
    cluster.reset()
    client = Api(cluster.direct_kubeconfig)
    for level in ("baseline", "restricted"):
        labels = {
            "pod-security.kubernetes.io/warn": level,
            "pod-security.kubernetes.io/warn-version": POLICY_VERSION,
        }
        namespace = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": f"psa-{level}", "labels": labels},
        }
        assert client.call("POST", "/api/v1/namespaces", namespace)[0] == 201
    yield client
    for level in ("baseline", "restricted"):
        client.call("DELETE", f"/api/v1/namespaces/psa-{level}")


def compare(
    api: Api, level: str, cases: list[tuple[str, dict[str, Any]]]
) -> tuple[int, int, set[str], list[str]]:
    """(cases compared, messages compared, cases refused by validation, disagreements) of the port and
    the API server on ``cases``."""
    compared, messages_compared, refused, disagreements = 0, 0, set(), []
    for label, pod in cases:
        name = re.sub(r"[^a-z0-9-]", "-", label.lower()).strip("-")[:63]
        verdict = api_verdict(api, f"psa-{level}", level, name, pod)
        if verdict is None:
            refused.add(label)
            continue
        compared += 1
        port = violations(level, pod.get("metadata"), pod["spec"])
        by_check: dict[str, list[str]] = {}
        for v in port:
            by_check.setdefault(v.check, []).append(v.message)
        if set(by_check) != set(verdict):
            disagreements.append(f"{label}: port {sorted(by_check)} != apiserver {sorted(verdict)}")
        for check, messages in by_check.items():
            if len(messages) == 1 and check in verdict:
                messages_compared += 1
                if messages[0] != verdict[check]:
                    disagreements.append(f"{label}: port {messages[0]!r} != apiserver {verdict[check]!r}")
    return compared, messages_compared, refused, disagreements


@pytest.mark.parametrize("level", ["baseline", "restricted"])
def test_the_port_agrees_with_the_api_server_on_every_upstream_fixture(api, level):
    """Warned exactly when the port finds violations, for the same checks, with the same messages."""
    cases = [(f["file"], f["pod"]) for f in FIXTURES if f["level"] == level]
    compared, messages, refused, disagreements = compare(api, level, cases)
    print(f"\n{level}: {compared} fixtures and {messages} messages compared, refused: {sorted(refused)}")
    assert disagreements == []
    assert refused == {file for lvl, file in REFUSED if lvl == level}
    assert compared == len(cases) - len(refused) > 0


def container(name: str, **security: Any) -> dict[str, Any]:
    return {"name": name, "image": "busybox", "securityContext": security}


RESTRICTED = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
EXTRA: list[tuple[str, dict[str, Any]]] = [
    (
        "several-containers-several-checks",
        {
            "metadata": {"annotations": {"container.apparmor.security.beta.kubernetes.io/a": "unconfined"}},
            "spec": {
                "hostPID": True,
                "securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}], "runAsUser": 0},
                "initContainers": [container("i", privileged=True, capabilities={"add": ["SYS_ADMIN"]})],
                "containers": [
                    container("a", privileged=True, appArmorProfile={"type": "Unconfined"}),
                    {"name": "b", "image": "busybox", "ports": [{"containerPort": 80, "hostPort": 8080}]},
                ],
                "volumes": [
                    {"name": "v0"},
                    {"name": "v1", "hostPath": {"path": "/"}},
                    {"name": "v2", "nfs": {"server": "s", "path": "/"}},
                ],
            },
        },
    ),
    (
        "restricted-one-of-each",
        {
            "spec": {
                "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                "containers": [
                    container("a", **RESTRICTED, runAsUser=0),
                    container(
                        "b",
                        allowPrivilegeEscalation=True,
                        capabilities={"add": ["NET_BIND_SERVICE", "CHOWN"], "drop": ["ALL"]},
                    ),
                    container("c", **RESTRICTED, seccompProfile={"type": "Unconfined"}, runAsNonRoot=False),
                ],
                "volumes": [
                    {"name": "v0", "emptyDir": {}},
                    {"name": "v1", "image": {"reference": "busybox"}},
                ],
            }
        },
    ),
    (
        "user-namespace-relaxations",
        {
            "spec": {
                "hostUsers": False,
                "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}, "runAsUser": 0},
                "containers": [container("a", **RESTRICTED, procMount="Unmasked", runAsNonRoot=False)],
            }
        },
    ),
    (
        "windows-exemptions",
        {
            "spec": {
                "os": {"name": "windows"},
                "securityContext": {"runAsNonRoot": True},
                "containers": [{"name": "a", "image": "busybox"}],
            }
        },
    ),
]


@pytest.mark.parametrize("level", ["baseline", "restricted"])
def test_the_port_agrees_with_the_api_server_on_hand_made_pods(api, level):
    """Beyond the fixtures: many checks at once, several fields of one check, a volume with no source
    (defaulted to emptyDir), the user-namespace and Windows exemptions."""
    compared, messages, refused, disagreements = compare(api, level, EXTRA)
    print(f"\n{level}: {compared} hand-made pods and {messages} messages compared")
    assert (compared, refused, disagreements) == (len(EXTRA), set(), [])
