"""``topogov preflight``'s gatekeeper checks (cli/topogov_cli/preflight_pods.py) on the answers the
Kubernetes API and IAM give: how the NVIDIA device plugin hands GPUs over, the team namespaces' Pod
Security labels, and who may invoke the api function directly."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from topogov.domain.policy import load_policy_file
from topogov.domain.team_pods import pod_security_labels
from topogov_cli.preflight_pods import device_plugin_check, direct_invoke_check, namespace_labels_check

POLICY = load_policy_file("teams.yaml")


@dataclass
class Answer:
    status: int
    body: Any = None


class Http:
    def __init__(self, answers: dict[str, Answer]) -> None:
        self.answers = answers

    def request(self, method: str, path: str, **_: Any) -> Answer:
        return self.answers.get(path, Answer(404, {}))


def plugin(*, args=(), env=()) -> dict:
    container = {"image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.0", "args": list(args), "env": list(env)}
    return {"metadata": {"namespace": "kube-system", "name": "nvidia-device-plugin"},
            "spec": {"template": {"spec": {"containers": [container]}}}}  # fmt: skip


def daemonsets(*items: dict) -> Http:
    return Http({"/apis/apps/v1/daemonsets": Answer(200, {"items": list(items)})})


def test_the_default_envvar_strategy_fails_and_says_how_to_fix_it():
    _, ok, text = device_plugin_check(daemonsets(plugin()))
    assert not ok and "NVIDIA_VISIBLE_DEVICES" in text and "volume-mounts" in text


def test_mounts_or_cdi_pass_whether_given_as_a_flag_or_the_environment():
    for spec in (
        plugin(args=["--device-list-strategy=volume-mounts"]),
        plugin(args=["--device-list-strategy", "cdi-cri"]),
        plugin(env=[{"name": "DEVICE_LIST_STRATEGY", "value": "envvar,volume-mounts"}]),
    ):
        assert device_plugin_check(daemonsets(spec))[1], spec


def test_no_plugin_or_no_right_to_look_is_said_not_failed():
    assert device_plugin_check(daemonsets())[1]
    _, ok, text = device_plugin_check(Http({"/apis/apps/v1/daemonsets": Answer(403, {})}))
    assert ok and text.startswith("not checked")


def namespaces(labels_of) -> Http:
    return Http(
        {
            f"/api/v1/namespaces/{t.namespace}": Answer(200, {"metadata": {"labels": labels_of(t)}})
            for t in POLICY.teams.values()
        }
    )


def test_namespaces_must_enforce_their_teams_level():
    assert namespace_labels_check(namespaces(pod_security_labels), POLICY)[1]
    _, ok, text = namespace_labels_check(namespaces(lambda t: {}), POLICY)
    assert not ok and "hyperpod-ns-team-c" in text and "enforce=restricted" in text


class Iam:
    """IAM's answers: the account's roles and users, and a simulated decision per principal."""

    def __init__(self, allowed: set[str], principals: list[str]) -> None:
        self.allowed, self.principals, self.asked = allowed, principals, []

    def get_paginator(self, name: str) -> Any:
        key = "Roles" if name == "list_roles" else "Users"
        kind = "role" if key == "Roles" else "user"
        arns = [p for p in self.principals if f":{kind}/" in p]

        class Pager:
            def paginate(self) -> list[dict]:
                return [{key: [{"Arn": a} for a in arns]}]

        return Pager()

    def simulate_principal_policy(self, PolicySourceArn: str, **_: Any) -> dict:
        self.asked.append(PolicySourceArn)
        decision = "allowed" if PolicySourceArn in self.allowed else "implicitDeny"
        return {"EvaluationResults": [{"EvalDecision": decision}]}


def test_identities_that_may_invoke_the_function_directly_are_flagged():
    admin = "arn:aws:iam::111122223333:role/Admin"
    principals = [admin, "arn:aws:iam::111122223333:role/aws-service-role/x/AWSServiceRoleForX",
                  "arn:aws:iam::111122223333:user/alice"]  # fmt: skip
    iam = Iam({admin}, principals)
    _, ok, text = direct_invoke_check(lambda service: iam, "arn:aws:lambda:us-west-2:111122223333:function:f")
    assert ok and text.startswith("flagged: arn:aws:iam::111122223333:role/Admin")
    assert "aws-service-role" not in " ".join(iam.asked)  # service-linked roles: AWS's own
