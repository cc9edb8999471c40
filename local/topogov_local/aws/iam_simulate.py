"""IAM ``SimulatePrincipalPolicy`` for the AWS emulator (moto routes none), for ``topogov preflight``'s
permission checks.

What it evaluates, as the IAM policy simulator does for a principal's identity-based policies
(https://docs.aws.amazon.com/IAM/latest/APIReference/API_SimulatePrincipalPolicy.html): for a user, its
inline and attached policies and those of its groups; for a role, its inline and attached policies;
each action against each resource (``*`` when none is given) with moto's own statement evaluation
(explicit deny wins, then an allow, else ``implicitDeny``). Not evaluated (as the API documents
optional inputs): resource policies, permissions boundaries, session policies and condition keys; a
principal that is not a user or role of the account is IAM's ``NoSuchEntity``.
"""

from __future__ import annotations

import json
from typing import Any


def _policies(backend: Any, arn: str) -> list[Any]:
    kind, _, name = arn.split(":", 5)[-1].partition("/")
    name = name.rsplit("/", 1)[-1]
    out: list[Any] = []
    if kind == "user":
        backend.get_user(name)  # NoSuchEntity when absent
        out += [backend.get_user_policy(name, p) for p in backend.list_user_policies(name)]
        out += backend.list_attached_user_policies(name)[0]
        for group in backend.get_groups_for_user(name):
            out += [backend.get_group_policy(group.name, p) for p in backend.list_group_policies(group.name)]
            out += backend.list_attached_group_policies(group.name)[0]
    elif kind == "role":
        role = backend.get_role_by_arn(arn)
        out += [backend.get_role_policy(role.name, p)[1] for p in backend.list_role_policies(role.name)]
        out += backend.list_attached_role_policies(role.name)[0]
    else:
        from moto.iam.exceptions import NotFoundException

        raise NotFoundException(f"PolicySourceArn {arn} is not a user or role of this account")
    return out


def _document(policy: Any) -> Any:
    """A policy as moto's evaluator takes it: a CloudFormation-made inline policy is kept as the
    document itself (a dict), which the evaluator would read as ``{"policy_document": ...}``."""
    if isinstance(policy, dict) and "policy_document" not in policy:
        return json.dumps(policy)
    return policy


def decision(policies: list[Any], action: str, resource: str) -> str:
    from moto.iam.access_control import IAMPolicy, PermissionResult

    allowed = False
    for policy in policies:
        result = IAMPolicy(_document(policy)).is_action_permitted(action, resource)
        if result == PermissionResult.DENIED:
            return "explicitDeny"
        allowed = allowed or result == PermissionResult.PERMITTED
    return "allowed" if allowed else "implicitDeny"


def install() -> None:
    from moto.core.responses import ActionResult
    from moto.iam.responses import IamResponse

    def simulate_principal_policy(self: Any) -> Any:
        arn = str(self._get_param("PolicySourceArn"))
        actions = list(self._get_param("ActionNames", []) or [])
        resources = list(self._get_param("ResourceArns", []) or []) or ["*"]
        policies = _policies(self.backend, arn)
        results = [
            {
                "EvalActionName": action,
                "EvalResourceName": resource,
                "EvalDecision": decision(policies, action, resource),
                "MatchedStatements": [],
                "MissingContextValues": [],
            }
            for action in actions
            for resource in resources
        ]
        return ActionResult({"EvaluationResults": results, "IsTruncated": False})

    IamResponse.simulate_principal_policy = simulate_principal_policy  # type: ignore[attr-defined]
