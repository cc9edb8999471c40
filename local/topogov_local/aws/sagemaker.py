"""SageMaker's task governance APIs in the emulator (moto 5.2 has none), and HyperPod clusters as those
APIs see them. Installed by :func:`install` from :mod:`topogov_local.aws.server`.

**ComputeQuota** (Create, Describe, Update, List, Delete) and **ClusterSchedulerConfig** (the same
five), served on moto's SageMaker endpoint (JSON protocol, ``X-Amz-Target: SageMaker.<Operation>``):

* every request is judged by botocore's service model first (:mod:`topogov_local.aws.model_rules`:
  required members, lengths, ranges, enum values, patterns) and refused with
  ``ValidationException`` and the service's message form; a member of the wrong JSON type with
  ``SerializationException``;
* ``ClusterArn`` must name a HyperPod cluster of the caller's account and Region (moto's
  ``CreateCluster``): ``ValidationException`` "Could not find cluster '<arn>'." (moto's DescribeCluster
  wording: the service's is not published);
* a name is "unique within the SageMaker AI HyperPod cluster specified by ClusterArn" (the Name
  member's documentation): a second one is ``ConflictException``;
* ``UpdateComputeQuota`` / ``UpdateClusterSchedulerConfig`` need ``TargetVersion``: when it is not the
  current version the update is refused with ``ConflictException`` (optimistic concurrency, as the
  CloudFormation schema describes ``ComputeQuotaVersion``: "used for optimistic concurrency
  control"); a successful update makes the next version, status ``Updated``; Describe with
  ``ComputeQuotaVersion`` / ``ClusterSchedulerConfigVersion`` answers an earlier version, and a
  version or id that never existed is ``ResourceNotFound``;
* Describe answers the documented defaults of what the request left out (the model's documentation:
  ``ActivationState`` Enabled, ``PreemptTeamTasks`` LowerPriority, ``Strategy`` LendAndBorrow with
  ``BorrowLimit`` 50, ``FairShareWeight`` 0, ``FairShare`` Enabled), status ``Created`` after a create;
* ``ResourceLimitExceeded`` (in the model's errors of both creates and updates; AWS documents no
  number): ``POST /_topogov/sagemaker/limits`` ``{"compute_quotas_per_cluster": N}`` sets a limit the
  next create beyond it is refused with; none by default. Lists page by ``MaxResults`` (default 10)
  and ``NextToken``; Delete removes at once (``Deleted`` is never seen).

Assumptions, as AWS publishes no rule for them: one ClusterSchedulerConfig per cluster (the console
shows one "cluster policy"; a second create is ``ConflictException``); one ComputeQuota per team and
cluster (the add-on makes one namespace per team; a second is ``ConflictException``);
``ComputeQuotaTarget.TeamName`` is not changed by an update (CloudFormation's schema makes it
create-only; ``ValidationException``); quantities left out are not filled "by ratio" in Describe
(CloudFormation's schema says the service may; Topogov always gives all three). Each refusal's message
text is the emulator's own, the error code and status are the model's.

**HyperPod clusters** (moto's): a cluster's ARN ends in a 12-character id, as botocore's
``ClusterArn`` pattern has it (moto used the name, which no task governance API would take), and
DescribeCluster, DeleteCluster, DescribeClusterNode and ListClusterNodes take that ARN; the instance
types a cluster may have are botocore's ``ClusterInstanceType`` values (moto's list lacks
p6-b200 and others); ``ThreadsPerCore`` is optional as in the model; ``Orchestrator`` (the EKS
cluster) is kept and answered.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import secrets
import string
import threading
from typing import Any

from topogov_local.aws.model_rules import WrongType, request_errors, validation_message

CONTROL_LIMITS = "/_topogov/sagemaker/limits"
DEFAULT_MAX_RESULTS = 10
_ID_ALPHABET = string.ascii_lowercase + string.digits
_lock = threading.Lock()
# (account, region) -> kind ("compute-quota" | "cluster-scheduler-config") -> id -> record
_STORE: dict[tuple[str, str], dict[str, dict[str, dict[str, Any]]]] = {}
_LIMITS: dict[str, int] = {}
_installed = False

QUOTA, CONFIG = "compute-quota", "cluster-scheduler-config"
FIELDS = {  # what Describe answers from the request, per kind
    QUOTA: (
        "Name",
        "Description",
        "ClusterArn",
        "ComputeQuotaConfig",
        "ComputeQuotaTarget",
        "ActivationState",
    ),
    CONFIG: ("Name", "Description", "ClusterArn", "SchedulerConfig"),
}
PREFIX = {QUOTA: "ComputeQuota", CONFIG: "ClusterSchedulerConfig"}


# --- errors ------------------------------------------------------------------------------------------
def _errors() -> dict[str, type]:
    from moto.sagemaker.exceptions import ConflictException, ResourceNotFound, SagemakerClientError

    class ValidationException(SagemakerClientError):
        code = "ValidationException"

    class SerializationException(SagemakerClientError):
        code = "SerializationException"

    class ResourceLimitExceeded(SagemakerClientError):
        code = "ResourceLimitExceeded"

    return {
        "ValidationException": ValidationException,
        "SerializationException": SerializationException,
        "ResourceLimitExceeded": ResourceLimitExceeded,
        "ConflictException": ConflictException,
        "ResourceNotFound": ResourceNotFound,
    }


_ERRORS: dict[str, type] = {}


def refuse(code: str, message: str) -> Exception:
    """The moto exception that answers ``code`` with ``message`` (HTTP 400, the JSON protocol's)."""
    if not _ERRORS:
        _ERRORS.update(_errors())
    return _ERRORS[code](message)


def check_request(operation: str, params: dict[str, Any]) -> None:
    """Refuse what botocore's model of the operation refuses (see the module doc)."""
    try:
        errors = request_errors("sagemaker", operation, params)
    except WrongType as exc:
        raise refuse("SerializationException", str(exc)) from None
    if errors:
        raise refuse("ValidationException", validation_message(errors))


# --- clusters ----------------------------------------------------------------------------------------
def _backend(account: str, region: str) -> Any:
    from moto.sagemaker.models import sagemaker_backends

    return sagemaker_backends[account][region]


def cluster_by_arn(account: str, region: str, arn: str) -> Any:
    """The HyperPod cluster ``arn`` names in this account and Region, else ``ValidationException``."""
    for cluster in _backend(account, region).clusters.values():
        if cluster.arn == arn:
            return cluster
    raise refuse("ValidationException", f"Could not find cluster '{arn}'.")


def _new_id() -> str:
    return "".join(secrets.choice(_ID_ALPHABET) for _ in range(12))


def _install_clusters() -> None:
    """Cluster ARNs by id, the model's instance types, ThreadsPerCore optional, Orchestrator kept."""
    from moto.sagemaker import models
    from moto.sagemaker.exceptions import ValidationError
    from moto.sagemaker.responses import SageMakerResponse

    from topogov_local.aws.model_rules import service_model

    original_init = models.Cluster.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        for group in kwargs.get("instance_groups") or []:
            group.setdefault("ThreadsPerCore", None)
        original_init(self, *args, **kwargs)
        self.cluster_id = _new_id()
        self.arn = f"arn:aws:sagemaker:{self.region_name}:{self.account_id}:cluster/{self.cluster_id}"

    models.Cluster.__init__ = init  # type: ignore[method-assign]
    allowed = service_model("sagemaker").shape_for("ClusterInstanceType").enum

    def valid_types(self: Any, instance_type: str) -> None:
        if instance_type not in allowed:
            raise ValidationError(
                message=f"Value '{instance_type}' at 'InstanceType' failed to satisfy constraint: "
                f"Member must satisfy enum value set: [{', '.join(allowed)}]"
            )

    models.Cluster.valid_cluster_node_instance_types = valid_types  # type: ignore[method-assign]
    for method in ("describe_cluster", "delete_cluster", "describe_cluster_node", "list_cluster_nodes"):
        _by_arn(models.SageMakerModelBackend, method)
    _keep_orchestrator(models, SageMakerResponse)


def _by_arn(backend_class: Any, method: str) -> None:
    """``method(cluster_name=...)`` also takes the cluster's ARN (by id)."""
    original = getattr(backend_class, method)

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        name = kwargs.get("cluster_name", args[0] if args else None)
        if isinstance(name, str) and name.startswith("arn:"):
            found = next((c.cluster_name for c in self.clusters.values() if c.arn == name), None)
            if found is None:
                from moto.sagemaker.exceptions import ValidationError

                raise ValidationError(message=f"Could not find cluster '{name}'.")
            if "cluster_name" in kwargs:
                kwargs["cluster_name"] = found
            else:
                args = (found, *args[1:])
        return original(self, *args, **kwargs)

    setattr(backend_class, method, call)


def _keep_orchestrator(models: Any, response_class: Any) -> None:
    original_create = response_class.create_cluster

    def create_cluster(self: Any) -> Any:
        answer = original_create(self)
        cluster = self.sagemaker_backend.clusters[self._get_param("ClusterName")]
        cluster.orchestrator = self._get_param("Orchestrator")
        return answer

    response_class.create_cluster = create_cluster
    original_describe = models.Cluster.describe

    def describe(self: Any) -> dict[str, Any]:
        out = dict(original_describe(self))
        if getattr(self, "orchestrator", None):
            out["Orchestrator"] = self.orchestrator
        return out

    models.Cluster.describe = describe


# --- the store ---------------------------------------------------------------------------------------
def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _records(account: str, region: str, kind: str) -> dict[str, dict[str, Any]]:
    return _STORE.setdefault((account, region), {}).setdefault(kind, {})


def _with_defaults(kind: str, fields: dict[str, Any]) -> dict[str, Any]:
    """The documented defaults of what the request left out (see the module doc)."""
    out = copy.deepcopy(fields)
    if kind == QUOTA:
        out.setdefault("ActivationState", "Enabled")
        config = out.setdefault("ComputeQuotaConfig", {})
        config.setdefault("PreemptTeamTasks", "LowerPriority")
        sharing = config.setdefault("ResourceSharingConfig", {"Strategy": "LendAndBorrow"})
        if sharing.get("Strategy") == "LendAndBorrow":
            sharing.setdefault("BorrowLimit", 50)
        out.setdefault("ComputeQuotaTarget", {}).setdefault("FairShareWeight", 0)
    else:
        out.setdefault("SchedulerConfig", {}).setdefault("FairShare", "Enabled")
    return out


def _conflicts(kind: str, record: dict[str, Any], records: dict[str, dict[str, Any]]) -> str | None:
    """Why ``record`` (new, or updated) cannot sit beside the others of its cluster, or None."""
    cluster, current = record["ClusterArn"], record
    noun = "compute quota" if kind == QUOTA else "cluster policy"
    for other in records.values():
        if other["id"] == record.get("id") or other["ClusterArn"] != cluster:
            continue
        if other["Name"] == current["Name"]:
            return f"A {noun} named {current['Name']} already exists in cluster {cluster}."
        if kind == CONFIG:
            return f"Cluster {cluster} already has a cluster policy: {other['Name']} ({other['id']})."
        team = current["ComputeQuotaTarget"]["TeamName"]
        if other["ComputeQuotaTarget"]["TeamName"] == team:
            return f"Team {team} already has a compute quota in cluster {cluster}: {other['Name']}."
    return None


def create(account: str, region: str, kind: str, params: dict[str, Any]) -> dict[str, Any]:
    """CreateComputeQuota / CreateClusterSchedulerConfig: the new id and ARN."""
    check_request(f"Create{PREFIX[kind]}", params)
    cluster_by_arn(account, region, params["ClusterArn"])
    fields = _with_defaults(kind, {k: params[k] for k in FIELDS[kind] if k in params})
    with _lock:
        records = _records(account, region, kind)
        conflict = _conflicts(kind, fields, records)
        if conflict:
            raise refuse("ConflictException", conflict)
        limit = _LIMITS.get(f"{kind.replace('-', '_')}s_per_cluster")
        if (
            limit is not None
            and sum(r["ClusterArn"] == params["ClusterArn"] for r in records.values()) >= limit
        ):
            raise refuse(
                "ResourceLimitExceeded",
                f"The account-level limit of {limit} {kind}s per cluster was reached.",
            )
        new_id = _new_id()
        record = fields | {
            "id": new_id,
            "arn": f"arn:aws:sagemaker:{region}:{account}:{kind}/{new_id}",
            "version": 1,
            "Status": "Created",
            "CreationTime": _now(),
            "LastModifiedTime": _now(),
            "Tags": list(params.get("Tags") or []),
        }
        record["versions"] = {1: {k: copy.deepcopy(record[k]) for k in FIELDS[kind] if k in record}}
        records[new_id] = record
    return {f"{PREFIX[kind]}Arn": record["arn"], f"{PREFIX[kind]}Id": new_id}


def _get(account: str, region: str, kind: str, record_id: str) -> dict[str, Any]:
    record = _records(account, region, kind).get(record_id)
    if record is None:
        noun = "Compute quota" if kind == QUOTA else "Cluster policy"
        raise refuse("ResourceNotFound", f"{noun} {record_id} does not exist.")
    return record


def describe(account: str, region: str, kind: str, params: dict[str, Any]) -> dict[str, Any]:
    check_request(f"Describe{PREFIX[kind]}", params)
    prefix = PREFIX[kind]
    with _lock:
        record = _get(account, region, kind, params[f"{prefix}Id"])
        version = params.get(f"{prefix}Version") or record["version"]
        if version not in record["versions"]:
            raise refuse("ResourceNotFound", f"Version {version} of {record['id']} does not exist.")
        out = copy.deepcopy(record["versions"][version])
        out |= {
            f"{prefix}Arn": record["arn"],
            f"{prefix}Id": record["id"],
            f"{prefix}Version": version,
            "Status": record["Status"],
            "CreationTime": record["CreationTime"],
            "LastModifiedTime": record["LastModifiedTime"],
        }
    return out


def update(account: str, region: str, kind: str, params: dict[str, Any]) -> dict[str, Any]:
    """UpdateComputeQuota / UpdateClusterSchedulerConfig: refused unless ``TargetVersion`` is current."""
    prefix = PREFIX[kind]
    check_request(f"Update{prefix}", params)
    with _lock:
        record = _get(account, region, kind, params[f"{prefix}Id"])
        if params["TargetVersion"] != record["version"]:
            raise refuse(
                "ConflictException",
                f"TargetVersion {params['TargetVersion']} is not the current version {record['version']} "
                f"of {record['id']}.",
            )
        changed = {k: params[k] for k in FIELDS[kind] if k in params}
        team = (changed.get("ComputeQuotaTarget") or {}).get("TeamName")
        was = record.get("ComputeQuotaTarget", {}).get("TeamName")
        if kind == QUOTA and team is not None and team != was:
            raise refuse(
                "ValidationException", f"ComputeQuotaTarget.TeamName cannot be updated (it is {was})."
            )
        merged = _with_defaults(kind, {k: record[k] for k in FIELDS[kind] if k in record} | changed)
        record.update(merged)
        record["version"] += 1
        record["versions"][record["version"]] = {
            k: copy.deepcopy(record[k]) for k in FIELDS[kind] if k in record
        }
        record["Status"], record["LastModifiedTime"] = "Updated", _now()
    return {f"{prefix}Arn": record["arn"], f"{prefix}Version": record["version"]}


def delete(account: str, region: str, kind: str, params: dict[str, Any]) -> dict[str, Any]:
    check_request(f"Delete{PREFIX[kind]}", params)
    with _lock:
        _get(account, region, kind, params[f"{PREFIX[kind]}Id"])
        del _records(account, region, kind)[params[f"{PREFIX[kind]}Id"]]
    return {}


def _summary(kind: str, record: dict[str, Any]) -> dict[str, Any]:
    prefix = PREFIX[kind]
    out = {
        f"{prefix}Arn": record["arn"],
        f"{prefix}Id": record["id"],
        f"{prefix}Version": record["version"],
        "Name": record["Name"],
        "Status": record["Status"],
        "ClusterArn": record["ClusterArn"],
        "CreationTime": record["CreationTime"],
        "LastModifiedTime": record["LastModifiedTime"],
    }
    if kind == QUOTA:
        out |= {
            k: copy.deepcopy(record[k])
            for k in ("ComputeQuotaConfig", "ComputeQuotaTarget", "ActivationState")
        }
    return out


def list_records(account: str, region: str, kind: str, params: dict[str, Any]) -> dict[str, Any]:
    """ListComputeQuotas / ListClusterSchedulerConfigs: filtered, sorted (CreationTime, Descending by
    default), paged."""
    check_request(f"List{PREFIX[kind]}s", params)
    with _lock:
        found = [r for r in _records(account, region, kind).values() if _listed(r, params)]
    key = {"Name": "Name", "Status": "Status", "ClusterArn": "ClusterArn"}.get(
        params.get("SortBy", ""), "CreationTime"
    )
    found.sort(key=lambda r: (r[key], r["id"]), reverse=params.get("SortOrder", "Descending") == "Descending")
    start = int(params.get("NextToken") or 0)
    size = int(params.get("MaxResults") or DEFAULT_MAX_RESULTS)
    page = found[start : start + size]
    out: dict[str, Any] = {f"{PREFIX[kind]}Summaries": [_summary(kind, r) for r in page]}
    if start + size < len(found):
        out["NextToken"] = str(start + size)
    return out


def _listed(record: dict[str, Any], params: dict[str, Any]) -> bool:
    def when(value: Any) -> dt.datetime:
        return value if isinstance(value, dt.datetime) else dt.datetime.fromtimestamp(float(value), dt.UTC)

    return (
        (not params.get("ClusterArn") or record["ClusterArn"] == params["ClusterArn"])
        and (not params.get("NameContains") or params["NameContains"] in record["Name"])
        and (not params.get("Status") or record["Status"] == params["Status"])
        and (not params.get("CreatedAfter") or record["CreationTime"] > when(params["CreatedAfter"]))
        and (not params.get("CreatedBefore") or record["CreationTime"] < when(params["CreatedBefore"]))
    )


# --- the routes --------------------------------------------------------------------------------------
def _install_operations() -> None:
    from moto.core.responses import ActionResult
    from moto.sagemaker.responses import SageMakerResponse

    def operation(action: Any, kind: str) -> Any:
        def handler(self: Any) -> Any:
            try:
                params = json.loads(self.body or "{}")
            except ValueError:
                raise refuse("SerializationException", "The request body is not JSON.") from None
            if not isinstance(params, dict):
                raise refuse("SerializationException", "The request body is not a JSON object.")
            return ActionResult(action(self.current_account, self.region, kind, params))

        return handler

    for verb, action in (
        ("create", create),
        ("describe", describe),
        ("update", update),
        ("delete", delete),
        ("list", list_records),
    ):
        for kind, noun in ((QUOTA, "compute_quota"), (CONFIG, "cluster_scheduler_config")):
            name = f"{verb}_{noun}s" if verb == "list" else f"{verb}_{noun}"
            setattr(SageMakerResponse, name, operation(action, kind))


def install() -> None:
    """Install the APIs and the cluster fixes (once; before moto's server app is built)."""
    global _installed
    if _installed:
        return
    _installed = True
    _install_clusters()
    _install_operations()


def handle_control_request(method: str, path: str, body: Any) -> tuple[int, Any]:
    """``/_topogov/sagemaker/limits``: ``GET`` the limits, ``POST`` ``{"compute_quotas_per_cluster": N,
    "cluster_scheduler_configs_per_cluster": N}`` (null removes one), ``DELETE`` all."""
    if path.rstrip("/") != CONTROL_LIMITS:
        return 404, {"message": f"no such control route: {method} {path}"}
    keys = ("compute_quotas_per_cluster", "cluster_scheduler_configs_per_cluster")
    with _lock:
        if method == "POST":
            if not isinstance(body, dict) or not set(body) <= set(keys):
                return 400, {"message": f"give some of {list(keys)}"}
            for key, value in body.items():
                if value is None:
                    _LIMITS.pop(key, None)
                elif isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    return 400, {"message": f"{key} must be an integer >= 0 or null"}
                else:
                    _LIMITS[key] = value
        elif method == "DELETE":
            _LIMITS.clear()
        elif method != "GET":
            return 405, {"message": "GET, POST or DELETE"}
        return 200, dict(_LIMITS)
