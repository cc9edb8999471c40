"""Least privilege observed: per role, what its policies grant against the calls the emulator's IAM
recorded (:func:`least_privilege`), and per Kubernetes group of ``deploy/rbac.yaml``, each rule
against the requests the API server's audit log recorded (:func:`rbac_comparison`)."""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from topogov_local.rehearse.emulator import RBAC_MANIFEST
from topogov_local.rehearse.state import as_list


# --- least privilege -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Grant:
    policy: str
    sid: str
    action: str
    resource: str


def role_grants(iam: Any, role_name: str) -> list[Grant]:
    """Every (action, resource) an Allow statement of the role's policies names."""
    docs: list[tuple[str, dict[str, Any]]] = []
    for policy in iam.list_role_policies(RoleName=role_name)["PolicyNames"]:
        doc = iam.get_role_policy(RoleName=role_name, PolicyName=policy)["PolicyDocument"]
        docs.append((policy, doc if isinstance(doc, dict) else json.loads(doc)))
    for attached in iam.list_attached_role_policies(RoleName=role_name)["AttachedPolicies"]:
        version = iam.get_policy(PolicyArn=attached["PolicyArn"])["Policy"]["DefaultVersionId"]
        doc = iam.get_policy_version(PolicyArn=attached["PolicyArn"], VersionId=version)["PolicyVersion"]
        docs.append((attached["PolicyName"], doc["Document"]))
    grants = []
    for policy, doc in docs:
        for i, st in enumerate(as_list(doc.get("Statement"))):
            if st.get("Effect") != "Allow":
                continue
            for action in as_list(st.get("Action")):
                for resource in as_list(st.get("Resource")):
                    grants.append(Grant(policy, str(st.get("Sid") or f"#{i}"), str(action), str(resource)))
    return grants


def _matches(pattern: str, value: str) -> bool:
    return (
        fnmatch.fnmatchcase(value.lower(), pattern.lower())
        if "*" in pattern or "?" in pattern
        else (pattern.lower() == value.lower())
    )


@dataclass
class RoleReport:
    role: str
    principal: str
    granted: list[Grant]
    used: dict[Grant, int] = field(default_factory=dict)  # grant -> calls it allowed
    unused: list[Grant] = field(default_factory=list)
    denied: list[dict[str, Any]] = field(default_factory=list)
    calls: dict[tuple[str, str], int] = field(default_factory=dict)  # (action, resource) -> count

    def to_json(self) -> dict[str, Any]:
        def g(x: Grant) -> dict[str, str]:
            return {"sid": x.sid, "action": x.action, "resource": x.resource}

        return {
            "role": self.role,
            "principal": self.principal,
            "granted": len(self.granted),
            "used": [{**g(k), "calls": v} for k, v in sorted(self.used.items(), key=lambda kv: kv[0].sid)],
            "unused": [g(x) for x in self.unused],
            "denied": self.denied,
            "calls": [{"action": a, "resource": r, "count": n} for (a, r), n in sorted(self.calls.items())],
        }


def least_privilege(
    grants: Sequence[Grant], decisions: Iterable[Mapping[str, Any]], principal: str, role: str
) -> RoleReport:
    """The decisions of ``principal`` against what its role grants."""
    report = RoleReport(role=role, principal=principal, granted=list(grants))
    for d in decisions:
        if d["principal"] != principal:
            continue
        key = (str(d["action"]), str(d["resource"]))
        report.calls[key] = report.calls.get(key, 0) + 1
        if not d["allowed"]:
            report.denied.append(dict(d))
            continue
        for grant in grants:
            if _matches(grant.action, key[0]) and _matches(grant.resource, key[1]):
                report.used[grant] = report.used.get(grant, 0) + 1
    report.unused = [g for g in grants if g not in report.used]
    return report


# --- Kubernetes RBAC against the audit log ----------------------------------------------------------
@dataclass(frozen=True)
class RbacRule:
    role: str  # the ClusterRole
    scope: str  # "cluster" or "namespaces: a, b"
    api_group: str
    resource: str
    verb: str


def rbac_rules(group: str, manifest: Path = RBAC_MANIFEST) -> list[RbacRule]:
    """The (api group, resource, verb) rules ``group`` gets from the manifest's bindings."""
    docs = [d for d in yaml.safe_load_all(manifest.read_text()) if d]
    roles = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ClusterRole"}
    scopes: dict[str, set[str]] = {}
    for d in docs:
        if d["kind"] not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        if not any(s.get("kind") == "Group" and s.get("name") == group for s in d.get("subjects") or []):
            continue
        where = "cluster" if d["kind"] == "ClusterRoleBinding" else d["metadata"]["namespace"]
        scopes.setdefault(d["roleRef"]["name"], set()).add(where)
    rules = []
    for role, where in sorted(scopes.items()):
        scope = "cluster" if "cluster" in where else "namespaces: " + ", ".join(sorted(where))
        for rule in roles[role].get("rules") or []:
            for api_group in rule.get("apiGroups") or [""]:
                for resource in rule.get("resources") or []:
                    for verb in rule.get("verbs") or []:
                        rules.append(RbacRule(role, scope, api_group, resource, verb))
    return rules


def audit_events(path: Path, group: str) -> list[dict[str, Any]]:
    """The audit log's events of requests made as ``group`` (the impersonated identity)."""
    out: list[dict[str, Any]] = []
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        who = event.get("impersonatedUser") or event.get("user") or {}
        if group in (who.get("groups") or []):
            out.append(event)
    return out


def rbac_comparison(
    group: str, events: Sequence[Mapping[str, Any]], manifest: Path = RBAC_MANIFEST
) -> dict[str, Any]:
    """Each rule of ``group`` with the requests it allowed; the requests no rule covers; refusals."""
    rules = rbac_rules(group, manifest)
    used: dict[RbacRule, int] = {}
    uncovered: dict[str, int] = {}
    forbidden: list[dict[str, Any]] = []
    requests: dict[str, int] = {}
    for e in events:
        ref = e.get("objectRef") or {}
        verb = str(e.get("verb"))
        code = (e.get("responseStatus") or {}).get("code")
        resource = str(ref.get("resource") or "")
        if ref.get("subresource"):
            resource += "/" + str(ref["subresource"])
        api_group = str(ref.get("apiGroup") or "")
        namespace = ref.get("namespace")
        label = f"{verb} {api_group + '/' if api_group else ''}{resource or e.get('requestURI')}"
        label += f" ({'ns ' + namespace if namespace else 'cluster'})"
        requests[label] = requests.get(label, 0) + 1
        if code == 403:
            forbidden.append({"request": label, "uri": e.get("requestURI"), "code": code})
            continue
        if not resource:
            continue  # non-resource URLs (discovery): granted to every authenticated user
        matched = False
        for rule in rules:
            in_scope = rule.scope == "cluster" or (namespace is not None and namespace in rule.scope)
            if rule.api_group == api_group and rule.resource == resource and rule.verb == verb and in_scope:
                used[rule] = used.get(rule, 0) + 1
                matched = True
        if not matched:
            uncovered[label] = uncovered.get(label, 0) + 1

    def r(x: RbacRule) -> str:
        return f"{x.role} [{x.scope}]: {x.verb} {x.api_group + '/' if x.api_group else ''}{x.resource}"

    return {
        "group": group,
        "rules": len(rules),
        "used": {r(k): v for k, v in sorted(used.items(), key=lambda kv: r(kv[0]))},
        "unused": sorted(r(x) for x in rules if x not in used),
        "requests": dict(sorted(requests.items())),
        "uncovered": uncovered,
        "forbidden": forbidden,
    }
