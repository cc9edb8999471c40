"""Escape attempts (issues 7 and 38): requests that try to get on the cluster more than the team could be
granted, sent through the local stack's real API Gateway as a team member. Every one is refused with a
4xx whose error names the field, and nothing is created or charged: checked in the cluster and the
ledger, not in the answer alone. Then the cluster's own line: a privileged pod created directly with
kubectl is refused by the team namespace's Pod Security labels, and by the team pods' admission
policy what Pod Security does not cover.

The attacks: the pod spec field by field (host access and privilege, other identities, unfit nodes,
pins, other schedulers, devices uncharged, long grace periods), one case per Pod Security rule at
``baseline`` (team-a) and at ``restricted`` (team-c), upstream's own failing fixture for each; metadata
that changes Kueue or garbage collection; charges that are not what Kueue charges (sidecars, pod-level
requests); principal patterns (an assumed role off the pattern's path)."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path

import pytest

from topogov.domain.podsecurity import check_ids, violations
from topogov_local.aws_example import AWS_EXAMPLE

from .conftest import call
from .invariants import consistent, ledger_vs_cluster

NS = "hyperpod-ns-team-a"
TEAMS = ("team-a", "team-b", "team-c")
FIXTURES = json.loads(
    (Path(__file__).parents[1] / "unit" / "data" / "pod_security_fixtures.json").read_text()
)["fixtures"]


def manifest(name: str, namespace: str = NS, **changes) -> dict:
    """AWS's example Job renamed, its fields changed by ``a__b__c=value`` (a path of keys)."""
    m = copy.deepcopy(AWS_EXAMPLE)
    m["metadata"]["name"] = name
    m["metadata"]["namespace"] = namespace
    m["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": f"{namespace}-localqueue"}
    m["spec"]["template"]["metadata"]["labels"]["job-name"] = name  # the API server checks it is the Job's
    for path, value in changes.items():
        target = m
        keys = path.split("__")
        for k in keys[:-1]:
            target = target.setdefault(k, {})
        target[keys[-1]] = value
    return m


T = "spec__template__spec__"
S = "manifest.spec.template.spec"
C0 = "spec__template__spec__containers"


def with_container(name: str, **fields) -> dict:
    m = manifest(name)
    m["spec"]["template"]["spec"]["containers"][0].update(fields)
    return m


class Raw(str):
    """A JSON text sent as is (json.dumps cannot write 5,000 levels: it recurses)."""


def nested(depth: int) -> Raw:
    return Raw('{"a":' * depth + "{}" + "}" * depth)


SIDECAR = {
    "name": "sidecar",
    "image": "x",
    "restartPolicy": "Always",
    "resources": {"requests": {"nvidia.com/gpu": "4"}},
}

ATTEMPTS = [
    # (id, body, expected status, field named in error.details.field (prefix))
    # --- the team's lane -------------------------------------------------------------------------------
    (
        "another-namespace",
        {"manifest": manifest("esc-ns", "hyperpod-ns-team-b")},
        403,
        "manifest.metadata.namespace",
    ),
    (
        "another-teams-queue",
        {
            "manifest": manifest(
                "esc-queue", metadata__labels={"kueue.x-k8s.io/queue-name": "hyperpod-ns-team-b-localqueue"}
            )
        },
        400,
        "manifest.metadata.labels.kueue.x-k8s.io/queue-name",
    ),
    (
        "suspend-false",
        {"manifest": manifest("esc-suspend", spec__suspend=False)},
        400,
        "manifest.spec.suspend",
    ),
    (
        "label-value-not-a-label-value",
        {"manifest": manifest("esc-label", metadata__labels={"team": "a b/c"})},
        400,
        "manifest.metadata.labels.team",
    ),
    (
        "label-value-too-long",
        {"manifest": manifest("esc-label-long", metadata__labels={"team": "x" * 64})},
        400,
        "manifest.metadata.labels.team",
    ),
    (
        "pod-label-value-invalid",
        {"manifest": manifest("esc-pod-label", spec__template__metadata__labels={"job-name": "-bad-"})},
        400,
        "manifest.spec.template.metadata.labels.job-name",
    ),
    (
        "managed-by-another-controller",
        {"manifest": manifest("esc-managed", spec__managedBy="example.com/x")},
        400,
        "manifest.spec.managedBy",
    ),
    (
        "manual-selector",
        {"manifest": manifest("esc-selector", spec__manualSelector=True)},
        400,
        "manifest.spec.manualSelector",
    ),
    # --- host access and privilege (Pod Security, baseline) ------------------------------------------------
    (
        "privileged",
        {"manifest": with_container("esc-priv", securityContext={"privileged": True})},
        400,
        f"{S}.containers[0].securityContext.privileged",
    ),
    ("host-pid", {"manifest": manifest("esc-hostpid", **{T + "hostPID": True})}, 400, f"{S}.hostPID"),
    (
        "host-network",
        {"manifest": manifest("esc-hostnet", **{T + "hostNetwork": True})},
        400,
        f"{S}.hostNetwork",
    ),
    ("host-ipc", {"manifest": manifest("esc-hostipc", **{T + "hostIPC": True})}, 400, f"{S}.hostIPC"),
    (
        "host-path-root",
        {
            "manifest": manifest(
                "esc-hostpath", **{T + "volumes": [{"name": "root", "hostPath": {"path": "/"}}]}
            )
        },
        400,
        f"{S}.volumes[0].hostPath",
    ),
    (
        "sys-admin",
        {"manifest": with_container("esc-cap", securityContext={"capabilities": {"add": ["SYS_ADMIN"]}})},
        400,
        f"{S}.containers[0].securityContext.capabilities.add",
    ),
    (
        "host-port",
        {"manifest": with_container("esc-hostport", ports=[{"containerPort": 22, "hostPort": 22}])},
        400,
        f"{S}.containers[0].ports[0].hostPort",
    ),
    (
        "seccomp-unconfined",
        {
            "manifest": manifest(
                "esc-seccomp", **{T + "securityContext": {"seccompProfile": {"type": "Unconfined"}}}
            )
        },
        400,
        f"{S}.securityContext.seccompProfile.type",
    ),
    (
        "unsafe-sysctl",
        {
            "manifest": manifest(
                "esc-sysctl",
                **{T + "securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "65536"}]}},
            )
        },
        400,
        f"{S}.securityContext.sysctls[0].name",
    ),
    # --- identities -------------------------------------------------------------------------------------
    (
        "another-service-account",
        {"manifest": manifest("esc-sa", **{T + "serviceAccountName": "admin"})},
        400,
        f"{S}.serviceAccountName",
    ),
    (
        "a-secret",
        {
            "manifest": manifest(
                "esc-secret", **{T + "volumes": [{"name": "s", "secret": {"secretName": "topogov-db"}}]}
            )
        },
        400,
        f"{S}.volumes[0].secret.secretName",
    ),
    (
        "a-runtime-class",
        {"manifest": manifest("esc-runtime", **{T + "runtimeClassName": "kata"})},
        400,
        f"{S}.runtimeClassName",
    ),
    # --- scheduling outside Kueue, unfit nodes --------------------------------------------------------------
    (
        "pinned-to-a-node",
        {"manifest": manifest("esc-nodename", **{T + "nodeName": "i-0123.ec2.internal"})},
        400,
        f"{S}.nodeName",
    ),
    (
        "hostname-selector",
        {"manifest": manifest("esc-hostsel", **{T + "nodeSelector": {"kubernetes.io/hostname": "n1"}})},
        400,
        f"{S}.nodeSelector.kubernetes.io/hostname",
    ),
    (
        "hostname-affinity",
        {
            "manifest": manifest(
                "esc-hostaff",
                **{
                    T + "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchExpressions": [
                                            {
                                                "key": "kubernetes.io/hostname",
                                                "operator": "In",
                                                "values": ["n1"],
                                            }
                                        ]
                                    }
                                ]
                            }
                        }
                    }
                },
            )
        },
        400,
        f"{S}.affinity.nodeAffinity",
    ),
    (
        "match-all-toleration",
        {"manifest": manifest("esc-tol", **{T + "tolerations": [{"operator": "Exists"}]})},
        400,
        f"{S}.tolerations[0]",
    ),
    (
        "unhealthy-node-toleration",
        {
            "manifest": manifest(
                "esc-tol-node",
                **{T + "tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]},
            )
        },
        400,
        f"{S}.tolerations[0].key",
    ),
    (
        "another-scheduler",
        {"manifest": manifest("esc-sched", **{T + "schedulerName": "mine"})},
        400,
        f"{S}.schedulerName",
    ),
    (
        "scheduler-priority-class",
        {"manifest": manifest("esc-pc", **{T + "priorityClassName": "system-cluster-critical"})},
        400,
        f"{S}.priorityClassName",
    ),
    (
        "year-long-grace",
        {"manifest": manifest("esc-grace", **{T + "terminationGracePeriodSeconds": 31536000})},
        400,
        f"{S}.terminationGracePeriodSeconds",
    ),
    # --- devices uncharged --------------------------------------------------------------------------------
    (
        "nvidia-visible-devices",
        {"manifest": with_container("esc-nvd", env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}])},
        400,
        f"{S}.containers[0].env[0].name",
    ),
    (
        "env-from-no-prefix",
        {"manifest": with_container("esc-envfrom", envFrom=[{"configMapRef": {"name": "c"}}])},
        400,
        f"{S}.containers[0].envFrom[0].prefix",
    ),
    (
        "high-level-environment",
        {
            "job_name": "esc-hl-env",
            "image": "x",
            "accelerators": 1,
            "environment": {"NVIDIA_VISIBLE_DEVICES": "all"},
        },
        400,
        "environment.NVIDIA_VISIBLE_DEVICES",
    ),
    (
        "mig-profile",
        {
            "manifest": with_container(
                "esc-mig", resources={"requests": {"cpu": "1", "nvidia.com/mig-1g.10gb": "7"}}
            )
        },
        400,
        f"{S}.containers[0].resources.requests.nvidia.com/mig-1g.10gb",
    ),
    (
        "resource-claim",
        {
            "manifest": manifest(
                "esc-claim", **{T + "resourceClaims": [{"name": "gpu", "resourceClaimName": "x"}]}
            )
        },
        400,
        f"{S}.resourceClaims",
    ),
    # --- metadata that changes Kueue or garbage collection --------------------------------------------------
    (
        "finalizers",
        {"manifest": manifest("esc-fin", metadata__finalizers=["example.com/keep"])},
        400,
        "manifest.metadata.finalizers",
    ),
    (
        "owner-references",
        {
            "manifest": manifest(
                "esc-owner",
                metadata__ownerReferences=[
                    {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "1"}
                ],
            )
        },
        400,
        "manifest.metadata.ownerReferences",
    ),
    (
        "prebuilt-workload",
        {
            "manifest": manifest(
                "esc-prebuilt", metadata__labels={"kueue.x-k8s.io/prebuilt-workload-name": "other"}
            )
        },
        400,
        "manifest.metadata.labels.kueue.x-k8s.io/prebuilt-workload-name",
    ),
    (
        "unconstrained-topology",
        {
            "manifest": manifest(
                "esc-unconstrained",
                spec__template__metadata__annotations={
                    "kueue.x-k8s.io/podset-unconstrained-topology": "true"
                },
            )
        },
        400,
        "manifest.spec.template.metadata.annotations.kueue.x-k8s.io/podset-unconstrained-topology",
    ),
    (
        "min-parallelism",
        {
            "manifest": manifest(
                "esc-minpar", metadata__annotations={"kueue.x-k8s.io/job-min-parallelism": "1"}
            )
        },
        400,
        "manifest.metadata.annotations.kueue.x-k8s.io/job-min-parallelism",
    ),
    (
        "another-managed-by",
        {
            "manifest": manifest(
                "esc-mb",
                metadata__labels={
                    "kueue.x-k8s.io/queue-name": f"{NS}-localqueue",
                    "app.kubernetes.io/managed-by": "helm",
                },
            )
        },
        400,
        "manifest.metadata.labels.app.kubernetes.io/managed-by",
    ),
    # --- the request itself --------------------------------------------------------------------------
    ("deeply-nested-json", Raw('{"manifest":' + nested(5000) + "}"), 400, None),
    (
        "deeply-nested-inside-a-job",
        Raw(
            json.dumps({"manifest": manifest("esc-deep", metadata__annotations={"x": "@"})}).replace(
                '"@"', nested(3000)
            )
        ),
        400,
        None,
    ),
    (
        "oversized-json",
        {"manifest": manifest("esc-big", metadata__annotations={"x": "y" * 1_100_000})},
        413,
        None,
    ),
]


def snapshot_of(stack) -> tuple:
    state = []
    for team in TEAMS:
        ns = f"hyperpod-ns-{team}"
        jobs = stack.kube().request("GET", f"/apis/batch/v1/namespaces/{ns}/jobs").body["items"]
        in_flight = call(stack, "GET", f"/v1/teams/{team}", "topogov-admin").json()["in_flight"]
        state.append((sorted(j["metadata"]["name"] for j in jobs), in_flight))
    return tuple(state)


def send(stack, profile: str, body: dict | Raw, query: str = ""):
    from topogov_cli.sigv4 import credentials_for_profile, signed_request

    return signed_request(
        "POST",
        stack.api.url + "/v1/jobs" + query,
        credentials=credentials_for_profile(profile, str(stack.credentials)),
        region="us-east-1",
        body=body if isinstance(body, Raw) else json.dumps(body),
        headers={"Content-Type": "application/json"},
    )


def check_refused(stack, report, resp, status, field, before, kind: str = "escape") -> dict:
    refused = 400 <= resp.status_code < 500
    report.add(kind, attempts=1, refused=int(refused), created=0, charged=0)
    assert refused, (resp.status_code, resp.text[:300])
    assert resp.status_code == status, resp.text[:300]
    error = resp.json()["error"]
    assert error["code"] and error["message"]
    if field is not None:
        assert (error.get("details") or {}).get("field", "").startswith(field), error
    after = snapshot_of(stack)
    if after != before:  # something was created or charged: counted, then failed
        report.add(kind, created=int(after[0][0] != before[0][0]), charged=1)
    assert after == before
    assert consistent(ledger_vs_cluster(stack))
    return error


@pytest.mark.parametrize(("body", "status", "field"), [a[1:] for a in ATTEMPTS], ids=[a[0] for a in ATTEMPTS])
def test_an_escape_attempt_is_refused_naming_the_field_and_leaves_nothing(stack, report, body, status, field):
    before = snapshot_of(stack)
    check_refused(stack, report, send(stack, "topogov-team-a", body), status, field, before)


# --- Pod Security: one case per rule, at both levels, from upstream's own failing fixtures ------------------


def fixture_cases() -> list[tuple[str, str, dict]]:
    """(level, check, pod) for the first failing fixture of every check of each level (v1.35)."""
    seen: dict[tuple[str, str], dict] = {}
    for f in FIXTURES:
        key = (f["level"], f["check"])
        if f["expect"] == "fail" and f["check"] and key not in seen:
            seen[key] = f["pod"]
    return [(level, check, pod) for (level, check), pod in sorted(seen.items())]


def job_of(name: str, namespace: str, pod: dict) -> dict:
    """A fixture pod as the template of a Job (requests added: a job is charged on them)."""
    spec = copy.deepcopy(pod["spec"])
    spec["restartPolicy"] = "Never"
    for c in spec["containers"]:
        c.setdefault("resources", {"requests": {"cpu": "100m"}})
    template_meta = {"labels": {"job-name": name}}
    if (pod.get("metadata") or {}).get("annotations"):
        template_meta["annotations"] = pod["metadata"]["annotations"]
    m = manifest(name, namespace)
    m["spec"]["template"] = {"metadata": template_meta, "spec": spec}
    return m


CASES = fixture_cases()
LEVEL_TEAM = {"baseline": ("team-a", "topogov-team-a"), "restricted": ("team-c", "topogov-team-c")}


def test_the_cases_cover_every_check_of_both_levels():
    for level in LEVEL_TEAM:  # (restricted's fixtures also fail the baseline checks it replaces)
        assert set(check_ids(level)) <= {c for lvl, c, _ in CASES if lvl == level}, level


@pytest.mark.parametrize(("level", "check", "pod"), CASES, ids=[f"{lvl}-{c}" for lvl, c, _ in CASES])
def test_each_pod_security_rule_is_refused_at_the_teams_level_naming_the_field(
    stack, report, level, check, pod
):
    team, profile = LEVEL_TEAM[level]
    name = f"pss-{level[0]}-{check.lower().replace('_', '-')}"[:63]
    body = {"manifest": job_of(name, f"hyperpod-ns-{team}", pod)}
    expected = violations(
        level,
        body["manifest"]["spec"]["template"].get("metadata"),
        body["manifest"]["spec"]["template"]["spec"],
    )
    assert (
        check in {v.check for v in expected} or level == "restricted"
    )  # restricted replaces 4 baseline checks
    before = snapshot_of(stack)
    error = check_refused(
        stack,
        report,
        send(stack, profile, body),
        400,
        f"manifest.spec.template.{expected[0].field}",
        before,
        "pod security",
    )
    assert f"Pod Security {expected[0].level}" in error["message"]
    fields = {
        p["field"] for p in (error["details"].get("problems") or [{"field": error["details"]["field"]}])
    }
    assert {f"manifest.spec.template.{v.field}" for v in expected} <= fields


def test_a_restricted_team_gets_high_level_pods_that_pass_its_level(stack, report):
    # Given team-c's restricted level, a high-level job renders a restricted-compliant pod
    resp = call(
        stack,
        "POST",
        "/v1/jobs?dryRun=true",
        "topogov-team-c",
        body={"job_name": "hl-restricted", "image": "x", "accelerators": 1},
    )
    assert resp.status_code == 200, resp.text
    template = resp.json()["job"]["spec"]["template"]
    assert violations("restricted", template.get("metadata"), template["spec"]) == []
    # while AWS's example (as root, no security context) is refused for that team
    before = snapshot_of(stack)
    check_refused(
        stack,
        report,
        send(stack, "topogov-team-c", {"manifest": manifest("aws-c", "hyperpod-ns-team-c")}),
        400,
        S,
        before,
        "pod security",
    )


# --- charges as Kueue counts them ---------------------------------------------------------------------------


def test_sidecars_are_charged_and_a_job_kueue_could_never_admit_is_refused(stack, report):
    # Given team-c (quota 64 GPUs, never borrows) and a 6-pod job of one 4-GPU container with two 4-GPU
    # sidecars: 24 GPUs if the sidecars are missed, 72 as Kubernetes and Kueue count it
    m = manifest("esc-sidecars", "hyperpod-ns-team-c")
    del m["spec"]["template"]["metadata"]["annotations"]  # no topology: the charge is the subject
    spec = m["spec"]
    spec["parallelism"] = spec["completions"] = 6
    restricted = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    spec["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"nvidia.com/gpu": "4"},
        "limits": {"nvidia.com/gpu": "4"},
    }
    spec["template"]["spec"]["initContainers"] = [dict(SIDECAR, name=f"side-{i}") for i in range(2)]
    for c in spec["template"]["spec"]["containers"] + spec["template"]["spec"]["initContainers"]:
        c["securityContext"] = restricted
    before = snapshot_of(stack)
    error = check_refused(
        stack, report, send(stack, "topogov-team-c", {"manifest": m}), 422, None, before, "charges"
    )
    assert error["code"] == "NEVER_ADMISSIBLE"
    assert error["details"]["resources"][0]["asked"] == 72  # 6 pods x (4 + 2 x 4)
    # And three such pods are charged 36, not 12
    spec["parallelism"] = spec["completions"] = 3
    dry = send(stack, "topogov-team-c", {"manifest": m}, "?dryRun=true")
    assert dry.status_code == 200, dry.text
    gpu = next(q for q in dry.json()["decision"]["quota"] if q["resource"] == "nvidia.com/gpu")
    assert gpu["asked"] == 36


def test_pod_level_requests_are_charged(stack):
    m = manifest("esc-podlevel")
    del m["spec"]["template"]["metadata"]["annotations"]  # no topology: the charge is the subject
    m["spec"]["template"]["spec"]["resources"] = {"requests": {"cpu": "64"}}
    dry = send(stack, "topogov-team-a", {"manifest": m}, "?dryRun=true")
    assert dry.status_code == 200, dry.text
    cpu = next(q for q in dry.json()["decision"]["quota"] if q["resource"] == "cpu")
    assert cpu["asked"] == 10 * 64 * 1000  # 10 pods x 64 cores (the pod's, over its container's 1)


# --- principals -------------------------------------------------------------------------------------------


@pytest.fixture
def sessions(stack):
    """Sessions of roles made in the emulator's IAM, which the gateway accepts as API Gateway would."""
    from topogov_local.apigw import Caller

    iam, sts = stack.client("iam"), stack.client("sts")
    trust = json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}],
        }
    )
    made: list[tuple[str, str]] = []

    def session(path: str, name: str) -> str:
        iam.create_role(RoleName=name, Path=path, AssumeRolePolicyDocument=trust)
        made.append((name, ""))
        creds = sts.assume_role(
            RoleArn=f"arn:aws:iam::123456789012:role{path}{name}", RoleSessionName="alice"
        )
        c = creds["Credentials"]
        caller = Caller(
            c["AccessKeyId"],
            c["SecretAccessKey"],
            creds["AssumedRoleUser"]["Arn"],
            session_token=c["SessionToken"],
        )
        stack.api.trust(caller)
        made[-1] = (name, c["AccessKeyId"])
        return caller

    yield session
    for name, key in made:
        stack.api.distrust(key)
        iam.delete_role(RoleName=name)


def session_call(stack, caller, method: str, path: str, body=None):
    from botocore.credentials import Credentials

    from topogov_cli.sigv4 import signed_request

    creds = Credentials(caller.access_key_id, caller.secret_access_key, caller.session_token)
    return signed_request(method, stack.api.url + path, credentials=creds, region="us-east-1", json_body=body)


def test_a_role_pattern_with_a_path_admits_only_roles_on_that_path(stack, report, sessions):
    # Given team-a's principal role/teams/team-a/* (teams.yaml): a session's ARN carries no path, and
    # this pattern once matched every assumed role of the account
    member = sessions("/teams/team-a/", "Alice")
    outsider = sessions("/other/", "Mallory")
    rooted = sessions("/", "Eve")
    # Then the role on the path is team-a's, the others are no team's
    assert session_call(stack, member, "GET", "/v1/teams/team-a").status_code == 200

    for caller in (outsider, rooted):
        before = snapshot_of(stack)
        resp = session_call(
            stack, caller, "POST", "/v1/jobs", {"manifest": manifest(f"esc-{caller.arn[-5:].lower()}")}
        )
        report.add("principals", attempts=1, refused=int(resp.status_code == 403))
        assert resp.status_code == 403, resp.text
        assert snapshot_of(stack) == before
        assert session_call(stack, caller, "GET", "/v1/topology").status_code == 403  # the fleet's view too
    # And the api function could not even read those roles: GetRole is granted on the patterns' roles
    # only (taken off the record here: these refusals are what least privilege means for them)
    from topogov_local.stack import IAM_DENIED
    from topogov_local.stack_reset import take_iam_decisions

    expected = {
        ("iam:GetRole", "arn:aws:iam::123456789012:role/other/Mallory"),
        ("iam:GetRole", "arn:aws:iam::123456789012:role/Eve"),
    }
    denied = take_iam_decisions(stack)
    assert expected <= {(d["action"], d["resource"]) for d in denied}
    IAM_DENIED.extend(d for d in denied if (d["action"], d["resource"]) not in expected)  # any other fails


# --- the cluster's own line ---------------------------------------------------------------------------------


def kubectl(stack, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["kubectl", "--kubeconfig", str(stack.kubeconfig), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def pod(name: str, **spec) -> str:
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
            "spec": {"containers": [{"name": "c", "image": "alpine"}], **spec}}  # fmt: skip
    return json.dumps(body)


@pytest.mark.kubectl
def test_the_namespaces_refuse_a_privileged_pod_created_with_kubectl(stack, report):
    # Given the governor's team namespace, labelled at the team's level (baseline)
    labels = stack.kube().request("GET", f"/api/v1/namespaces/{NS}").body["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "baseline"
    # When a privileged pod is created directly (as the cluster admin: RBAC is not what stops it)
    c = {"name": "c", "image": "alpine", "securityContext": {"privileged": True}}
    result = kubectl(stack, "apply", "-f", "-", stdin=pod("direct-priv", containers=[c]))
    # Then Pod Security admission refuses it
    assert result.returncode != 0 and "violates PodSecurity" in result.stderr, result.stderr
    # And the team pods' policy refuses what Pod Security does not cover: another ServiceAccount
    assert kubectl(stack, "create", "serviceaccount", "admin", "-n", NS).returncode == 0
    result = kubectl(stack, "apply", "-f", "-", stdin=pod("direct-sa", serviceAccountName="admin"))
    assert result.returncode != 0 and "topogov-team-pods" in result.stderr, result.stderr
    report.add("cluster", attempts=2, refused=2)
    assert kubectl(stack, "get", "pods", "-n", NS, "-o", "name").stdout.count("direct-") == 0


def test_a_priority_the_team_may_not_use_is_refused(stack, report):
    before = snapshot_of(stack)
    m = manifest("esc-prio", "hyperpod-ns-team-b")
    m["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "inference-priority"  # not team-b's
    resp = send(stack, "topogov-team-b", {"manifest": m})
    check_refused(stack, report, resp, 422, None, before)
    assert resp.json()["error"]["code"] == "PRIORITY_NOT_ALLOWED"


def test_a_manifest_without_the_queue_label_is_put_in_the_teams_queue(stack, report):
    m = manifest("esc-no-queue")
    del m["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    resp = call(stack, "POST", "/v1/jobs", body={"manifest": m})
    assert resp.status_code == 201, resp.text
    job = stack.kube().request("GET", f"/apis/batch/v1/namespaces/{NS}/jobs/esc-no-queue").body
    labels = job["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "hyperpod-ns-team-a-localqueue"
    assert labels["app.kubernetes.io/managed-by"] == "topogov"
    assert resp.json()["job"]["spec"]["suspend"] is True  # created suspended (Kueue unsuspends it)
