"""EKS's side of the local stack that moto lacks: access entries and a cluster's endpoint.

* **Access entries** (``AWS::EKS::AccessEntry``, created by :mod:`topogov_local.moto_cloudformation`):
  what ``CreateAccessEntry`` keeps — cluster, principal ARN, Kubernetes groups, username, type — with
  its rules (https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateAccessEntry.html): the
  cluster must exist (``ResourceNotFoundException``), one entry per principal
  (``ResourceInUseException``); the username of a ``STANDARD`` entry for an IAM role defaults to
  ``arn:aws:sts::<account>:assumed-role/<role name>/{{SessionName}}`` (EKS User Guide,
  creating-access-entries.html).
* **A cluster's endpoint and CA.** moto's ``CreateCluster`` invents an endpoint and a random
  "certificate"; ``POST /_topogov/eks/clusters`` ``{"name", "endpoint", "certificateAuthority"
  (base64 PEM), "authenticationMode"}`` creates the cluster if needed and points it at a real
  API server front door (:mod:`topogov_local.eks_endpoint`), so ``eks:DescribeCluster`` answers what
  the functions need to reach it.
* ``GET /_topogov/eks/clusters/<name>/access-entries``: the entries, for that front door (EKS's
  authenticator reads them inside the service; no IAM call).
"""

from __future__ import annotations

import threading
from typing import Any

_lock = threading.Lock()
# (account, region) -> cluster name -> principal ARN -> entry
_ENTRIES: dict[tuple[str, str], dict[str, dict[str, dict[str, Any]]]] = {}
CONTROL_PREFIX = "/_topogov/eks/"


class EksError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _cluster(account_id: str, region: str, name: str) -> Any:
    from moto.eks.models import eks_backends

    backend = eks_backends[account_id][region]
    cluster = backend.clusters.get(name)
    if cluster is None:
        raise EksError("ResourceNotFoundException", f"No cluster found for name: {name}.")
    return cluster


def create_entry(account_id: str, region: str, props: dict[str, Any]) -> dict[str, Any]:
    name, principal = str(props["ClusterName"]), str(props["PrincipalArn"])
    cluster = _cluster(account_id, region, name)
    kind = str(props.get("Type") or "STANDARD")
    username = props.get("Username")
    if not username and ":role/" in principal:
        role_name = principal.rsplit("/", 1)[-1]
        username = f"arn:aws:sts::{principal.split(':')[4]}:assumed-role/{role_name}/{{{{SessionName}}}}"
    entry = {
        "clusterName": name,
        "principalArn": principal,
        "kubernetesGroups": sorted(str(g) for g in props.get("KubernetesGroups") or []),
        "username": username or principal,
        "type": kind,
        "accessEntryArn": cluster.arn.replace(":cluster/", ":access-entry/", 1)
        + "/"
        + principal.rsplit("/", 1)[-1],
        "accessPolicies": list(props.get("AccessPolicies") or []),
    }
    with _lock:
        per_cluster = _ENTRIES.setdefault((account_id, region), {}).setdefault(name, {})
        if principal in per_cluster:
            raise EksError(
                "ResourceInUseException",
                "The specified access entry resource is already in use on this cluster.",
            )
        per_cluster[principal] = entry
    return entry


def delete_entry(account_id: str, region: str, cluster: str, principal: str) -> None:
    with _lock:
        _ENTRIES.get((account_id, region), {}).get(cluster, {}).pop(principal, None)


def get_entry(account_id: str, region: str, cluster: str, principal: str) -> dict[str, Any] | None:
    with _lock:
        return _ENTRIES.get((account_id, region), {}).get(cluster, {}).get(principal)


def entries(account_id: str, region: str, cluster: str) -> list[dict[str, Any]]:
    with _lock:
        return list(_ENTRIES.get((account_id, region), {}).get(cluster, {}).values())


def register_cluster(account_id: str, region: str, spec: dict[str, Any]) -> dict[str, Any]:
    from moto.eks.models import eks_backends

    backend = eks_backends[account_id][region]
    name = str(spec["name"])
    if name not in backend.clusters:
        backend.create_cluster(
            name=name,
            role_arn=f"arn:aws:iam::{account_id}:role/eks-cluster-role",
            resources_vpc_config={},
            version=spec.get("version"),
        )
    cluster = backend.clusters[name]
    if spec.get("endpoint"):
        cluster.endpoint = str(spec["endpoint"])
    if spec.get("certificateAuthority"):
        cluster.certificate_authority = {"data": str(spec["certificateAuthority"])}
    cluster.access_config = {  # type: ignore[attr-defined]
        "authenticationMode": str(spec.get("authenticationMode") or "API_AND_CONFIG_MAP")
    }
    return {"name": name, "arn": cluster.arn, "endpoint": cluster.endpoint}


def handle_control_request(
    method: str, path: str, body: Any, account_id: str, region: str
) -> tuple[int, Any]:
    rest = path[len(CONTROL_PREFIX) :].strip("/").split("/")
    try:
        if method == "POST" and rest == ["clusters"]:
            if not isinstance(body, dict) or not body.get("name"):
                return 400, {"message": "a cluster needs a name"}
            return 200, register_cluster(account_id, region, body)
        if method == "GET" and len(rest) == 3 and rest[0] == "clusters" and rest[2] == "access-entries":
            return 200, {"accessEntries": entries(account_id, region, rest[1])}
    except EksError as exc:
        return 404, {"code": exc.code, "message": str(exc)}
    return 404, {"message": f"no such control route: {method} {path}"}
