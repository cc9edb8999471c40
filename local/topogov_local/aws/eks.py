"""EKS's side of the local stack that moto lacks: access entries and a cluster's endpoint.

* **Access entries** (``AWS::EKS::AccessEntry``, created by :mod:`topogov_local.aws.cloudformation`):
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
* **A cluster's authentication mode** (``accessConfig.authenticationMode``, which moto drops):
  ``CreateCluster``'s ``accessConfig`` is kept and ``DescribeCluster`` returns it; without one it is
  ``CONFIG_MAP`` ("If you create a cluster by using the EKS API, AWS SDKs, or AWS CloudFormation, the
  default is CONFIG_MAP", https://docs.aws.amazon.com/eks/latest/APIReference/
  API_CreateAccessConfigRequest.html). ``UpdateClusterConfig`` changes it one way only, CONFIG_MAP ->
  API_AND_CONFIG_MAP -> API ("Once the access entry method is enabled, it can't be disabled", EKS User
  Guide, setting-up-access-entries.html), and answers an ``update``, as EKS does. Access entries need
  the API: ``CreateAccessEntry`` (the API call and CloudFormation's ``AWS::EKS::AccessEntry``) on a
  ``CONFIG_MAP`` cluster is refused with EKS's ``InvalidRequestException`` (HTTP 400) "The cluster's
  authentication mode must be set to one of [API, API_AND_CONFIG_MAP] to perform this operation."
  (the access-entry operations of API_CreateAccessEntry.html, InvalidRequestException).
  ``CreateAccessEntry``, ``ListAccessEntries``, ``DescribeAccessEntry`` and ``DeleteAccessEntry`` are
  served (moto routes none of them).
* **Add-ons** (moto routes none): ``CreateAddon`` records ``addonName`` and ``addonVersion`` (the
  version given, else ``v0.0.0-eksbuild.1``: the emulator has no catalogue of versions, unlike
  ``DescribeAddonVersions``) on an existing cluster (``ResourceNotFoundException`` otherwise, one add-on
  of a name, ``ResourceInUseException``), ``ACTIVE`` at once; ``DescribeAddon`` answers it (EKS's
  ``ResourceNotFoundException`` "No addon: <name> found in cluster: <cluster>" when absent: the
  message text is the emulator's) and ``ListAddons`` names them
  (https://docs.aws.amazon.com/eks/latest/APIReference/API_DescribeAddon.html). The local stack's
  ``--hyperpod`` installs ``amazon-sagemaker-hyperpod-taskgovernance`` so.
* **Endpoint access** (``resourcesVpcConfig``): ``DescribeCluster`` answers ``endpointPublicAccess``,
  ``endpointPrivateAccess`` and ``publicAccessCidrs`` with EKS's defaults when CreateCluster did not
  set them (public on, private off, ``0.0.0.0/0``: API_VpcConfigRequest.html), and
  ``UpdateClusterConfig`` changes only the fields it names.
"""

from __future__ import annotations

import threading
from typing import Any

_lock = threading.Lock()
# (account, region) -> cluster name -> principal ARN -> entry
_ENTRIES: dict[tuple[str, str], dict[str, dict[str, dict[str, Any]]]] = {}
CONTROL_PREFIX = "/_topogov/eks/"
AUTHENTICATION_MODES = ("CONFIG_MAP", "API_AND_CONFIG_MAP", "API")  # the one way they may change
DEFAULT_AUTHENTICATION_MODE = (
    "CONFIG_MAP"  # API_CreateAccessConfigRequest.html: EKS API, SDKs, CloudFormation
)
ENTRY_MODES = ("API", "API_AND_CONFIG_MAP")
NEEDS_API = (
    "The cluster's authentication mode must be set to one of [API, API_AND_CONFIG_MAP] "
    "to perform this operation."
)
VPC_DEFAULTS: dict[str, Any] = {  # API_VpcConfigRequest.html
    "subnetIds": [],
    "securityGroupIds": [],
    "endpointPublicAccess": True,
    "endpointPrivateAccess": False,
    "publicAccessCidrs": ["0.0.0.0/0"],
}
_installed = False


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


def authentication_mode(cluster: Any) -> str:
    config = getattr(cluster, "access_config", None) or {}
    return str(config.get("authenticationMode") or DEFAULT_AUTHENTICATION_MODE)


def create_entry(account_id: str, region: str, props: dict[str, Any]) -> dict[str, Any]:
    name, principal = str(props["ClusterName"]), str(props["PrincipalArn"])
    cluster = _cluster(account_id, region, name)
    if authentication_mode(cluster) not in ENTRY_MODES:
        raise EksError("InvalidRequestException", NEEDS_API)
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


def vpc_config(given: Any, current: dict[str, Any] | None = None) -> dict[str, Any]:
    """``resourcesVpcConfig`` as EKS keeps it: ``given``'s fields over ``current`` (or the defaults)."""
    merged = dict(current if current is not None else VPC_DEFAULTS)
    merged.update({k: v for k, v in (given or {}).items() if v is not None})
    return merged


def update_access(cluster: Any, given: Any) -> None:
    """UpdateClusterConfig's ``accessConfig``: the authentication mode, forward only."""
    from moto.eks.exceptions import InvalidParameterException

    wanted = str((given or {}).get("authenticationMode") or "")
    if not wanted:
        return
    now = authentication_mode(cluster)
    if wanted not in AUTHENTICATION_MODES or AUTHENTICATION_MODES.index(wanted) < AUTHENTICATION_MODES.index(
        now
    ):
        raise InvalidParameterException(
            message=f"accessConfig.authenticationMode: {now} cannot change to {wanted} "
            f"(the order is {' -> '.join(AUTHENTICATION_MODES)}, one way)"
        )
    cluster.access_config = {**(getattr(cluster, "access_config", None) or {}), "authenticationMode": wanted}


def _update_answer(kind: str, params: list[dict[str, str]]) -> dict[str, Any]:
    import datetime as dt
    import uuid

    return {
        "update": {
            "id": str(uuid.uuid4()),
            "status": "Successful",
            "type": kind,
            "params": params,
            "createdAt": dt.datetime.now(dt.UTC).timestamp(),
            "errors": [],
        }
    }


def _entry_view(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k != "accessPolicies"}


def _install_responses() -> None:
    _install_cluster_config()
    _install_access_entries()
    _install_addons()


_ADDONS: dict[tuple[str, str], dict[str, dict[str, dict[str, Any]]]] = {}
UNVERSIONED = "v0.0.0-eksbuild.1"


def create_addon(
    account_id: str, region: str, cluster: str, name: str, version: str | None
) -> dict[str, Any]:
    found = _cluster(account_id, region, cluster)
    with _lock:
        addons = _ADDONS.setdefault((account_id, region), {}).setdefault(cluster, {})
        if name in addons:
            raise EksError("ResourceInUseException", f"Addon already exists: {name}")
        addons[name] = {
            "addonName": name,
            "clusterName": cluster,
            "status": "ACTIVE",
            "addonVersion": version or UNVERSIONED,
            "health": {"issues": []},
            "addonArn": f"{found.arn.replace(':cluster/', ':addon/')}/{name}/local",
            "tags": {},
        }
        return dict(addons[name])


def describe_addon(account_id: str, region: str, cluster: str, name: str) -> dict[str, Any]:
    _cluster(account_id, region, cluster)
    with _lock:
        addon = _ADDONS.get((account_id, region), {}).get(cluster, {}).get(name)
    if addon is None:
        raise EksError("ResourceNotFoundException", f"No addon: {name} found in cluster: {cluster}")
    return dict(addon)


def _install_addons() -> None:
    """CreateAddon, DescribeAddon and ListAddons (see the module doc), and their routes."""
    import json

    from moto.eks import urls
    from moto.eks.exceptions import ResourceInUseException, ResourceNotFoundException
    from moto.eks.responses import EKSResponse

    errors = {
        "ResourceInUseException": ResourceInUseException,
        "ResourceNotFoundException": ResourceNotFoundException,
    }

    def call(self: Any, fn: Any) -> Any:
        try:
            return 200, {}, json.dumps(fn(self.current_account, self.region, self._get_param("name")))
        except EksError as exc:
            raise errors[exc.code](message=str(exc)) from None

    def addon_name(self: Any) -> str:
        return str(self._get_param("addonName") or self.path.split("/addons/", 1)[1].split("?", 1)[0])

    def create_addon_call(self: Any) -> Any:
        name, version = self._get_param("addonName"), self._get_param("addonVersion")
        return call(self, lambda a, r, n: {"addon": create_addon(a, r, n, name, version)})

    def describe_addon_call(self: Any) -> Any:
        return call(self, lambda a, r, n: {"addon": describe_addon(a, r, n, addon_name(self))})

    def list_addons_call(self: Any) -> Any:
        def listed(a: str, r: str, n: str) -> dict[str, Any]:
            _cluster(a, r, n)
            with _lock:
                return {"addons": sorted(_ADDONS.get((a, r), {}).get(n, {}))}

        return call(self, listed)

    EKSResponse.create_addon = create_addon_call  # type: ignore[attr-defined]
    EKSResponse.describe_addon = describe_addon_call  # type: ignore[attr-defined]
    EKSResponse.list_addons = list_addons_call  # type: ignore[attr-defined]
    urls.url_paths["{0}/clusters/(?P<name>[^/]+)/addons$"] = urls.response.dispatch
    urls.url_paths["{0}/clusters/(?P<name>[^/]+)/addons/(?P<addonName>[^/]+)$"] = urls.response.dispatch


def _install_cluster_config() -> None:
    """A cluster's ``accessConfig`` (EKS's default mode, validated at create, changed by
    UpdateClusterConfig) and its endpoint access with EKS's defaults."""
    import json

    from moto.eks.exceptions import InvalidRequestException
    from moto.eks.models import Cluster
    from moto.eks.responses import EKSResponse

    original_init = Cluster.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        self.access_config = {"authenticationMode": DEFAULT_AUTHENTICATION_MODE}
        self.resources_vpc_config = vpc_config(self.resources_vpc_config)

    Cluster.__init__ = init  # type: ignore[method-assign]
    original_create = EKSResponse.create_cluster

    def create_cluster(self: Any) -> Any:
        given = self._get_param("accessConfig") or {}
        mode = str(given.get("authenticationMode") or DEFAULT_AUTHENTICATION_MODE)
        if mode not in AUTHENTICATION_MODES:
            raise InvalidRequestException(
                message=f"accessConfig.authenticationMode must be one of {list(AUTHENTICATION_MODES)}"
            )
        answer = original_create(self)
        cluster = self.eks_backend.clusters[self._get_param("name")]
        cluster.access_config = {"authenticationMode": mode}
        return answer

    EKSResponse.create_cluster = create_cluster  # type: ignore[method-assign]

    def update_cluster_config(self: Any) -> Any:
        cluster = self.eks_backend.describe_cluster(name=self._get_param("name"))
        access, vpc = self._get_param("accessConfig"), self._get_param("resourcesVpcConfig")
        if access:
            update_access(cluster, access)
        if vpc:
            cluster.resources_vpc_config = vpc_config(vpc, cluster.resources_vpc_config)
        if self._get_param("logging"):
            cluster.logging = self._get_param("logging")
        kind = "AccessConfigUpdate" if access else "EndpointAccessUpdate" if vpc else "LoggingUpdate"
        params = (
            [{"type": "AuthenticationMode", "value": str(access.get("authenticationMode"))}] if access else []
        )
        return 200, {}, json.dumps(_update_answer(kind, params))

    EKSResponse.update_cluster_config = update_cluster_config  # type: ignore[method-assign]


def _install_access_entries() -> None:
    """CreateAccessEntry, DescribeAccessEntry, ListAccessEntries and DeleteAccessEntry, with EKS's
    errors, and their routes."""
    import json
    from urllib.parse import unquote

    from moto.eks import urls
    from moto.eks.exceptions import InvalidRequestException, ResourceInUseException, ResourceNotFoundException
    from moto.eks.responses import EKSResponse

    errors = {
        "InvalidRequestException": InvalidRequestException,
        "ResourceInUseException": ResourceInUseException,
        "ResourceNotFoundException": ResourceNotFoundException,
    }

    def entry_call(self: Any, call: Any) -> Any:
        try:
            return 200, {}, json.dumps(call(self.current_account, self.region, self._get_param("name")))
        except EksError as exc:
            raise errors[exc.code](message=str(exc)) from None

    def create_access_entry(self: Any) -> Any:
        props = {
            "ClusterName": self._get_param("name"),
            "PrincipalArn": self._get_param("principalArn"),
            "KubernetesGroups": self._get_param("kubernetesGroups") or [],
            "Username": self._get_param("username"),
            "Type": self._get_param("type"),
        }
        return entry_call(self, lambda a, r, n: {"accessEntry": _entry_view(create_entry(a, r, props))})

    def principal(self: Any) -> str:
        return unquote(self.path.split("/access-entries/", 1)[1].split("?", 1)[0])

    def describe_access_entry(self: Any) -> Any:
        def call(a: str, r: str, n: str) -> dict[str, Any]:
            _cluster(a, r, n)
            entry = get_entry(a, r, n, principal(self))
            if entry is None:
                raise EksError(
                    "ResourceNotFoundException",
                    f"The specified principalArn could not be found: {principal(self)}",
                )
            return {"accessEntry": _entry_view(entry)}

        return entry_call(self, call)

    def list_access_entries(self: Any) -> Any:
        def call(a: str, r: str, n: str) -> dict[str, Any]:
            _cluster(a, r, n)
            return {"accessEntries": [e["principalArn"] for e in entries(a, r, n)]}

        return entry_call(self, call)

    def delete_access_entry(self: Any) -> Any:
        def call(a: str, r: str, n: str) -> dict[str, Any]:
            if get_entry(a, r, n, principal(self)) is None:
                raise EksError(
                    "ResourceNotFoundException",
                    f"The specified principalArn could not be found: {principal(self)}",
                )
            delete_entry(a, r, n, principal(self))
            return {}

        return entry_call(self, call)

    for fn in (create_access_entry, describe_access_entry, list_access_entries, delete_access_entry):
        setattr(EKSResponse, fn.__name__, fn)
    urls.url_paths["{0}/clusters/(?P<name>[^/]+)/access-entries$"] = urls.response.dispatch
    urls.url_paths["{0}/clusters/(?P<name>[^/]+)/access-entries/(?P<principalArn>.+)$"] = (
        urls.response.dispatch
    )


def install() -> None:
    """Install what moto's EKS lacks (once; before moto's server app is built, which reads the routes)."""
    global _installed
    if _installed:
        return
    _installed = True
    _install_responses()


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
