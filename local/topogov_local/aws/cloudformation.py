"""What moto's CloudFormation lacks for ``cdk deploy`` / ``cdk destroy`` of this app (installed by
:func:`install`, from :mod:`topogov_local.aws.server`). Each rule follows the AWS behaviour cited.

One module of 1,200 lines on purpose: its parts patch the same few moto classes (the stack, the
change set, the resource map) and must be installed together and in order; split, a reader would
chase one update's path through several files. The sections below are its table of contents.

1. **Template URLs on the emulator's own endpoint.** With ``AWS_ENDPOINT_URL`` set, the CDK CLI
   uploads the template to the bootstrap bucket and passes ``TemplateURL=<that endpoint>/<bucket>/<key>``
   (its ``restUrlFromManifest``: the S3 client's endpoint origin, path style). moto takes the first
   label of any host that is not ``s3.*.amazonaws.com`` as the bucket (``127``) and answers "The
   specified bucket does not exist". S3 URLs are virtual-hosted (``<bucket>.s3.<region>.amazonaws.com/
   <key>``) or path-style (``s3.<region>.amazonaws.com/<bucket>/<key>``,
   https://docs.aws.amazon.com/AmazonS3/latest/userguide/VirtualHosting.html); the emulator's
   endpoint stands for S3's regional endpoint, so a URL on it is path-style.
2. **Properties moto's models drop.** ``AWS::DynamoDB::Table``: ``TimeToLiveSpecification``,
   ``PointInTimeRecoverySpecification``; ``AWS::S3::Bucket``: ``PublicAccessBlockConfiguration``,
   ``VersioningConfiguration``, ``LifecycleConfiguration``; ``AWS::ApiGateway::RestApi``:
   ``MinimumCompressionSize`` (the resource reference pages of each type list them as properties
   CloudFormation applies on create and update without interruption).
3. **Resource types moto does not create** (it skips them with a warning, so nothing exists behind
   them): ``AWS::S3::BucketPolicy``, ``AWS::SQS::QueuePolicy``, ``AWS::SNS::TopicPolicy``,
   ``AWS::EKS::AccessEntry`` (kept in :mod:`topogov_local.aws.eks`, read by the local EKS
   endpoint), ``AWS::CloudWatch::Alarm``, ``AWS::ApiGateway::Stage``,
   ``AWS::ApiGateway::RequestValidator``, ``AWS::ApiGateway::Account``,
   ``AWS::Lambda::EventInvokeConfig``, ``AWS::CDK::Metadata`` (no service object; CloudFormation
   accepts it), each created through moto's own service backend so the service's API shows it.
4. **Updates as CloudFormation makes them** (https://docs.aws.amazon.com/AWSCloudFormation/latest/
   UserGuide/using-cfn-updating-stacks-update-behaviors.html): a resource is *replaced* when a
   property marked "Update requires: Replacement" changes (:data:`REPLACEMENT_PROPERTIES`), or when
   such a property refers to a resource that is replaced; otherwise it is updated in place and keeps
   its physical id. The new resource is created first; the old one, and resources removed from the
   template, are deleted in the cleanup phase, except those whose ``UpdateReplacePolicy`` /
   ``DeletionPolicy`` is ``Retain``. moto's own update deletes and re-creates several types under
   a new name (an EventBridge rule, for one) and sets resources without an update method to nothing.
   Change sets carry ``Replacement`` (``True`` for a changed replacement property, ``Conditional``
   when it follows from a replaced dependency, ``False``), ``PhysicalResourceId`` and ``Scope``, as
   DescribeChangeSet does.
5. Stack outputs after a change set executes (moto kept those of the empty stack it began with).
6. ``UsePreviousValue`` of an ``AWS::SSM::Parameter::Value<...>`` parameter (the CDK's
   ``BootstrapVersion``) is the parameter's previous *value as given*, the SSM parameter's name,
   resolved again on the update (CloudFormation keeps it as ``ParameterValue`` beside
   ``ResolvedValue``, API_Parameter.html); moto passed the resolved value and then looked that up as
   an SSM name.
7. ``DeleteStack`` deletes an ``AWS::ApiGateway::RestApi`` (with it its resources, methods,
   deployments and stages); moto's model has no delete, so ``cdk destroy`` left the API behind.
8. **A resource the service refuses fails the operation, and the stack rolls back**
   (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/stack-failure-options.html: "by
   default, CloudFormation rolls back the stack to the last known stable state"; the statuses of
   https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/view-stack-events.html). The
   resource's event is ``CREATE_FAILED`` / ``UPDATE_FAILED`` with the service's refusal as a resource
   handler reports it — ``Resource handler returned message: "<message> (Service: Lambda, Status
   Code: 400, Request ID: ...)" (RequestToken: ..., HandlerErrorCode: InvalidRequest)`` — then a
   stack created by the change set deletes what it created (``ROLLBACK_IN_PROGRESS`` "The following
   resource(s) failed to create: [X]. Rollback requested by user." -> ``ROLLBACK_COMPLETE``) and an
   update goes back to the previous template (``UPDATE_ROLLBACK_IN_PROGRESS`` ->
   ``UPDATE_ROLLBACK_COMPLETE``). moto answered HTTP 500 and left the half-made stack as it was.

``LAST_UPDATES`` keeps, per stack name, what the last update did (created, replaced, updated in place,
removed, retained): ``GET /_topogov/cloudformation/updates``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlparse

log = logging.getLogger(__name__)

# "Update requires: Replacement" properties of the resource types this app deploys, from each type's
# page of the CloudFormation resource reference (https://docs.aws.amazon.com/AWSCloudFormation/latest/
# TemplateReference/aws-template-resource-type-ref.html). tests/rehearse/test_moto_extension.py checks
# this table against the CDK CLI's own copy of the resource specification (node_modules/aws-cdk/db.json.gz).
REPLACEMENT_PROPERTIES: dict[str, frozenset[str]] = {
    "AWS::ApiGateway::Account": frozenset(),
    "AWS::ApiGateway::Deployment": frozenset({"RestApiId", "DeploymentCanarySettings"}),
    "AWS::ApiGateway::Method": frozenset({"HttpMethod", "ResourceId", "RestApiId"}),
    "AWS::ApiGateway::RequestValidator": frozenset({"RestApiId", "Name"}),
    "AWS::ApiGateway::Resource": frozenset({"ParentId", "PathPart", "RestApiId"}),
    "AWS::ApiGateway::RestApi": frozenset(),
    "AWS::ApiGateway::Stage": frozenset({"StageName", "RestApiId"}),
    "AWS::CDK::Metadata": frozenset(),
    "AWS::CloudWatch::Alarm": frozenset({"AlarmName"}),
    "AWS::CloudWatch::Dashboard": frozenset({"DashboardName"}),
    "AWS::DynamoDB::Table": frozenset({"ImportSourceSpecification", "TableName", "KeySchema"}),
    "AWS::EKS::AccessEntry": frozenset({"ClusterName", "PrincipalArn", "Type"}),
    "AWS::Events::Rule": frozenset({"EventBusName", "Name"}),
    "AWS::IAM::Policy": frozenset(),
    "AWS::IAM::Role": frozenset({"Path", "RoleName"}),
    "AWS::KMS::Key": frozenset(),
    "AWS::Lambda::Alias": frozenset({"FunctionName", "Name"}),
    "AWS::Lambda::EventInvokeConfig": frozenset({"FunctionName", "Qualifier"}),
    "AWS::Lambda::Function": frozenset({"FunctionName", "PackageType", "TenancyConfig"}),
    "AWS::Lambda::LayerVersion": frozenset(
        {
            "CompatibleRuntimes",
            "LicenseInfo",
            "Description",
            "LayerName",
            "Content",
            "CompatibleArchitectures",
        }
    ),
    "AWS::Lambda::Permission": frozenset(
        {
            "FunctionName",
            "Action",
            "EventSourceToken",
            "FunctionUrlAuthType",
            "SourceArn",
            "SourceAccount",
            "PrincipalOrgID",
            "Principal",
            "InvokedViaFunctionUrl",
        }
    ),
    # A version is immutable: every property replaces it.
    "AWS::Lambda::Version": frozenset(
        {"FunctionName", "CodeSha256", "Description", "ProvisionedConcurrencyConfig", "RuntimePolicy"}
    ),
    "AWS::Logs::LogGroup": frozenset({"LogGroupName"}),
    "AWS::S3::Bucket": frozenset({"BucketName", "ObjectLockEnabled", "BucketNamespace", "BucketNamePrefix"}),
    "AWS::S3::BucketPolicy": frozenset({"Bucket"}),
    "AWS::SageMaker::ClusterSchedulerConfig": frozenset({"Name", "ClusterArn"}),
    "AWS::SageMaker::ComputeQuota": frozenset({"Name", "ClusterArn"}),
    "AWS::SNS::Subscription": frozenset({"Endpoint", "Protocol", "TopicArn"}),
    "AWS::SNS::Topic": frozenset({"FifoTopic", "TopicName"}),
    "AWS::SNS::TopicPolicy": frozenset(),
    "AWS::SQS::Queue": frozenset({"FifoQueue", "QueueName"}),
    "AWS::SQS::QueuePolicy": frozenset(),
}

# Properties inside a property that replace the resource when they change (the registry schema's
# ``createOnlyProperties`` below the top level; the CDK CLI's specification marks them
# ``causesReplacement`` on the property type): ComputeQuotaTarget.TeamName.
NESTED_REPLACEMENT_PROPERTIES: dict[str, tuple[tuple[str, str], ...]] = {
    "AWS::SageMaker::ComputeQuota": (("ComputeQuotaTarget", "TeamName"),),
}
# Types whose registry schema says ``replacementStrategy: delete_then_create``: the old resource is
# deleted before its replacement is created (its name must be free), not in the cleanup phase.
DELETE_THEN_CREATE = frozenset({"AWS::SageMaker::ComputeQuota"})

LAST_UPDATES: dict[str, dict[str, Any]] = {}
_installed = False


# --- 1. template URLs --------------------------------------------------------------------------
def bucket_and_key(template_url: str) -> tuple[str, str]:
    """``(bucket, key)`` of an S3 object URL, virtual-hosted or path-style (see the module doc)."""
    parts = urlparse(template_url)
    host = (parts.hostname or "").lower()
    path = parts.path.lstrip("/")
    if host.endswith(".amazonaws.com") or host.endswith(".amazonaws.com.cn"):
        labels = host.split(".")
        if labels[0] == "s3" or labels[0].startswith("s3-"):  # s3.<region>.amazonaws.com/<bucket>/<key>
            bucket, _, key = path.partition("/")
            return bucket, key
        bucket = host.split(".s3", 1)[0]  # <bucket>.s3[.-]<region>.amazonaws.com/<key>
        return bucket, path
    bucket, _, key = path.partition("/")  # the emulator's endpoint: path-style
    return bucket, key


def get_stack_from_s3_url(template_url: str, account_id: str, partition: str) -> str:
    from moto.s3.models import s3_backends

    bucket, key = bucket_and_key(template_url)
    obj = s3_backends[account_id][partition].get_object(bucket, key)
    return obj.value.decode("utf-8")  # type: ignore[union-attr]


# --- helpers -----------------------------------------------------------------------------------
def _references(value: Any) -> set[str]:
    """Logical ids a template value refers to (Ref, Fn::GetAtt, Fn::Sub ${Name} / ${Name.Attr})."""
    import re

    out: set[str] = set()
    if isinstance(value, dict):
        for k, v in value.items():
            if k == "Ref" and isinstance(v, str):
                out.add(v)
            elif k == "Fn::GetAtt":
                target = v[0] if isinstance(v, list) else str(v).split(".", 1)[0]
                out.add(target)
            elif k == "Fn::Sub":
                text = v[0] if isinstance(v, list) else v
                out |= {m.split(".", 1)[0] for m in re.findall(r"\$\{([^}!]+)\}", str(text))}
                if isinstance(v, list) and len(v) > 1:
                    out |= _references(v[1])
            else:
                out |= _references(v)
    elif isinstance(value, list):
        for v in value:
            out |= _references(v)
    return out


def _bool(value: Any) -> bool:
    return str(value).lower() == "true"


def _physical_id(resource: Any) -> str | None:
    return getattr(resource, "physical_resource_id", None) if resource is not None else None


# --- 4. the update plan --------------------------------------------------------------------------
def plan_update(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """What CloudFormation does to go from template resources ``old`` to ``new``: ``add``,
    ``remove``, ``modify`` (logical ids) and ``replace`` (logical id -> "True" | "Conditional", with the
    properties that cause it in ``causes``)."""
    add = [n for n in new if n not in old]
    remove = [n for n in old if n not in new]
    modify = {n for n in new if n in old and new[n] != old[n]}
    replace: dict[str, str] = {}
    causes: dict[str, list[str]] = {}
    for n in sorted(modify):
        if new[n]["Type"] != old[n]["Type"]:
            replace[n], causes[n] = "True", ["Type"]
            continue
        props = REPLACEMENT_PROPERTIES.get(new[n]["Type"], frozenset())
        o, p = old[n].get("Properties") or {}, new[n].get("Properties") or {}
        changed = sorted(k for k in props if o.get(k) != p.get(k))
        changed += [
            f"{outer}.{inner}"
            for outer, inner in NESTED_REPLACEMENT_PROPERTIES.get(new[n]["Type"], ())
            if (o.get(outer) or {}).get(inner) != (p.get(outer) or {}).get(inner)
        ]
        if changed:
            replace[n], causes[n] = "True", changed
    # A resource whose replacement property refers to a replaced resource is replaced too (its value
    # is the new physical id); one that refers to a replaced resource elsewhere is updated in place.
    grew = True
    while grew:
        grew = False
        for n, res in new.items():
            if n in add or n in replace:
                continue
            props = REPLACEMENT_PROPERTIES.get(res["Type"], frozenset())
            for key, value in (res.get("Properties") or {}).items():
                refs = _references(value) & set(replace)
                if not refs:
                    continue
                if key in props:
                    replace[n], causes[n] = "Conditional", [f"{key} -> {sorted(refs)[0]}"]
                    modify.add(n)
                    grew = True
                    break
                if n not in modify:
                    modify.add(n)
                    grew = True
    return {
        "add": add,
        "remove": remove,
        "modify": sorted(modify),
        "replace": replace,
        "causes": causes,
    }


def _changeset_changes(change_set: Any) -> list[Any]:
    from moto.cloudformation.models import Change

    stack = change_set.stack
    rmap = stack.resource_map
    old = dict(rmap._resource_json_map) if stack.template_dict else {}
    new = change_set.template_dict.get("Resources") or {}
    plan = plan_update(old, new)
    changes = []

    def change(action: str, name: str, kind: str, replacement: str | None, scope: list[str]) -> Any:
        c = Change(action=action, logical_resource_id=name, resource_type=kind)
        c.replacement = replacement  # type: ignore[attr-defined]
        c.scope = scope  # type: ignore[attr-defined]
        if action != "Add":
            c.physical_resource_id = _physical_id(rmap._parsed_resources.get(name))  # type: ignore[attr-defined]
        c.details = [  # type: ignore[attr-defined]
            {
                "Target": {
                    "Attribute": "Properties",
                    "Name": cause.split(" ")[0],
                    "RequiresRecreation": "Always",
                }
            }
            for cause in plan["causes"].get(name, [])
        ]
        return c

    for n in plan["add"]:
        changes.append(change("Add", n, new[n]["Type"], None, []))
    for n in plan["modify"]:
        changed = sorted(
            k
            for k in set(new[n].get("Properties") or {}) | set(old[n].get("Properties") or {})
            if (new[n].get("Properties") or {}).get(k) != (old[n].get("Properties") or {}).get(k)
        )
        scope = ["Properties"] if changed or n in plan["replace"] else ["Metadata"]
        changes.append(change("Modify", n, new[n]["Type"], plan["replace"].get(n, "False"), scope))
    for n in plan["remove"]:
        changes.append(change("Remove", n, old[n]["Type"], None, []))
    return changes


def _update_in_place(rmap: Any, name: str, old_json: dict[str, Any], new_json: dict[str, Any]) -> Any:
    """Update ``name`` keeping its physical resource (CloudFormation's "no interruption")."""
    from moto.cloudformation.parsing import clean_json, resource_class_from_type

    original = rmap._parsed_resources.get(name)
    kind = new_json["Type"]
    cls = resource_class_from_type(kind)
    if cls is None or original is None:
        return rmap[name]
    resolved = clean_json(json.loads(json.dumps(new_json)), rmap)
    resolved.setdefault("Properties", {})
    physical = _physical_id(original) or name
    if kind in _IN_PLACE:
        updated = _IN_PLACE[kind](original, resolved, rmap._account_id, rmap._region_name)
    elif not hasattr(cls.update_from_cloudformation_json, "__isabstractmethod__"):
        updated = cls.update_from_cloudformation_json(
            original_resource=original,
            new_resource_name=physical,
            cloudformation_json=resolved,
            account_id=rmap._account_id,
            region_name=rmap._region_name,
        )
    else:  # nothing moto can change on it: keep the resource as it is
        updated = original
    if updated is None:
        updated = original
    updated.cf_resource_type = kind
    updated.logical_resource_id = name
    return updated


def _resource_map_update(
    self: Any, template: dict[str, Any], parameters: dict[str, Any] | None = None
) -> None:
    old_json = dict(self._resource_json_map)
    new_json = template["Resources"]
    plan = plan_update(old_json, new_json)
    old_objects = {n: self._parsed_resources.get(n) for n in plan["replace"]}
    removed_objects = {n: self._parsed_resources.get(n) for n in plan["remove"]}
    before = {n: _physical_id(self._parsed_resources.get(n)) for n in old_json}

    self._template = template
    if parameters:
        self.input_parameters = parameters
    self.load_mapping()
    self.load_parameters()
    self.load_conditions()
    self._resource_json_map = new_json

    for n in plan["replace"]:
        self._parsed_resources.pop(n, None)
    for n in sorted(plan["replace"]):  # delete_then_create: the old one goes first
        if new_json[n]["Type"] in DELETE_THEN_CREATE and old_objects.get(n) is not None:
            self._delete_resource(old_objects.pop(n), old_json[n])
    for n in plan["remove"]:
        self._parsed_resources.pop(n, None)
    pending_create = [*plan["add"], *sorted(plan["replace"])]
    created: set[str] = set()
    in_place = [n for n in plan["modify"] if n not in plan["replace"]]
    pending = list(in_place)

    def create(n: str) -> None:
        # What it DependsOn or refers to first: a new resource sees what it refers to as updated
        # (CloudFormation works in dependency order: a new AWS::Lambda::Version of a function whose
        # layers change is published after the function's update, so with the new layers).
        if n in created:
            return
        created.add(n)
        depends = new_json[n].get("DependsOn") or []
        for d in sorted({*([depends] if isinstance(depends, str) else depends), *_references(new_json[n])}):
            if d in pending_create:
                create(d)
            elif d in pending:
                try:
                    self._parsed_resources[d] = _update_in_place(self, d, old_json[d], new_json[d])
                    pending.remove(d)
                except Exception as exc:  # retried below, in the order-free loop
                    log.warning("in-place update of %s before %s failed: %s", d, n, exc, exc_info=True)
        _ = self[n]

    for n in pending_create:
        create(n)
    last: tuple[str, Exception] | None = None
    for _attempt in range(5):  # dependency order is not known: retry what failed
        for n in list(pending):
            try:
                self._parsed_resources[n] = _update_in_place(self, n, old_json[n], new_json[n])
            except Exception as exc:
                last = (n, exc)
            else:
                pending.remove(n)
        if not pending:
            break
    if pending and last is not None:
        raise ResourceFailed(last[0], str(new_json[last[0]].get("Type")), last[1]) from last[1]

    retained: list[str] = []

    def cleanup(objects: dict[str, Any], policy_key: str) -> None:
        for n, obj in objects.items():
            if obj is None:
                continue
            if old_json[n].get(policy_key) == "Retain":
                retained.append(n)
                continue
            try:
                self._delete_resource(obj, old_json[n])
            except Exception as exc:
                log.warning("cleanup of %s failed: %s", n, exc)

    cleanup(old_objects, "UpdateReplacePolicy")
    cleanup(removed_objects, "DeletionPolicy")
    after = {n: _physical_id(self._parsed_resources.get(n)) for n in new_json}
    LAST_UPDATES[str(self["AWS::StackName"])] = {
        "added": plan["add"],
        "removed": plan["remove"],
        "replaced": {
            n: {
                "replacement": plan["replace"][n],
                "causes": plan["causes"].get(n, []),
                "type": new_json[n]["Type"],
                "old": before.get(n),
                "new": after.get(n),
            }
            for n in sorted(plan["replace"])
        },
        "updated_in_place": {n: new_json[n]["Type"] for n in in_place},
        "retained": retained,
    }


# --- 8. a refused resource fails the operation and rolls back -------------------------------------
class ResourceFailed(Exception):
    """A resource of the template the service refused (its logical id, type and the refusal)."""

    def __init__(self, logical_id: str, kind: str, cause: BaseException) -> None:
        super().__init__(f"{logical_id} ({kind}): {cause}")
        self.logical_id = logical_id
        self.kind = kind
        self.cause = cause


# The service names of an SDK's refusal (AWS SDK for Java v2 service ids, as resource handlers say them)
_SERVICE_OF = {"Lambda": "Lambda", "EKS": "Eks", "IAM": "Iam", "DynamoDB": "DynamoDb", "S3": "S3"}
_HANDLER_ERROR = {400: "InvalidRequest", 403: "AccessDenied", 404: "NotFound", 409: "AlreadyExists"}
_EKS_STATUS = {
    "InvalidRequestException": 400,
    "ResourceNotFoundException": 404,
    "ResourceInUseException": 409,
}


# A JSON-protocol service's error codes (moto's ServiceException: ``code`` is the code, not a status;
# the models give SageMaker's errors no status of their own, so 400, a client error) and the handler
# error code a resource handler reports for each (the CloudFormation CLI's HandlerErrorCode).
_HANDLER_ERROR_OF_CODE = {
    "ValidationException": "InvalidRequest",
    "SerializationException": "InvalidRequest",
    "ConflictException": "ResourceConflict",
    "ResourceLimitExceeded": "ServiceLimitExceeded",
    "ResourceNotFound": "NotFound",
}


def refusal_of(exc: BaseException) -> tuple[str, int]:
    """``(message, HTTP status)`` of a service's refusal raised inside moto."""
    from topogov_local.aws import eks as moto_eks

    if isinstance(exc, moto_eks.EksError):
        return str(exc), _EKS_STATUS.get(exc.code, 400)
    if isinstance(getattr(exc, "code", None), str) and getattr(exc, "code", "") in _HANDLER_ERROR_OF_CODE:
        return str(getattr(exc, "message", "") or exc), 400
    description = getattr(exc, "description", None)
    message = getattr(exc, "message", None)
    if not message and isinstance(description, str):
        try:
            message = json.loads(description).get("message")
        except (ValueError, AttributeError):
            message = description
    status = getattr(exc, "code", 500)
    return str(message or exc), status if isinstance(status, int) else 500


def handler_reason(kind: str, exc: BaseException) -> str:
    """The ``ResourceStatusReason`` CloudFormation gives a resource its service refused."""
    import uuid

    message, status = refusal_of(exc)
    service = _SERVICE_OF.get(kind.split("::")[1], kind.split("::")[1]) if kind.count("::") == 2 else kind
    code = _HANDLER_ERROR_OF_CODE.get(str(getattr(exc, "code", "")))
    return (
        f'Resource handler returned message: "{message} (Service: {service}, Status Code: {status}, '
        f'Request ID: {uuid.uuid4()})" (RequestToken: {uuid.uuid4()}, '
        f"HandlerErrorCode: {code or _HANDLER_ERROR.get(status, 'GeneralServiceException')})"
    )


def _patch_resource_failures() -> None:
    """Name the resource whose creation the service refused (:class:`ResourceFailed`)."""
    import moto.cloudformation.parsing as parsing

    original = parsing.parse_and_create_resource

    def parse_and_create_resource(
        logical_id: str, resource_json: dict[str, Any], *args: Any, **kw: Any
    ) -> Any:
        try:
            return original(logical_id, resource_json, *args, **kw)
        except ResourceFailed:
            raise
        except Exception as exc:
            raise ResourceFailed(logical_id, str(resource_json.get("Type")), exc) from exc

    parsing.parse_and_create_resource = parse_and_create_resource


def _resource_event(stack: Any, logical_id: str, kind: str, status: str, reason: str | None = None) -> None:
    from moto.cloudformation.models import Event

    parsed = stack.resource_map._parsed_resources.get(logical_id)
    stack.events.append(
        Event(
            stack_id=stack.stack_id,
            stack_name=stack.name,
            logical_resource_id=logical_id,
            physical_resource_id=_physical_id(parsed) or "",
            resource_type=kind,
            resource_status=status,
            resource_status_reason=reason,
            resource_properties=None,
        )
    )


def roll_back(
    stack: Any, kind: str, failure: ResourceFailed, previous_template: dict[str, Any] | None
) -> None:
    """Rule 8: the failed resource's event, then the stack back to where it was. A resource an update
    adds fails to *create* (CREATE_FAILED, "failed to create"), one it changes to update."""
    added = kind == "UPDATE" and failure.logical_id not in ((previous_template or {}).get("Resources") or {})
    verb = "create" if kind == "CREATE" or added else "update"
    _resource_event(
        stack,
        failure.logical_id,
        failure.kind,
        f"{verb.upper()}_FAILED",
        handler_reason(failure.kind, failure.cause),
    )
    prefix = "ROLLBACK" if kind == "CREATE" else "UPDATE_ROLLBACK"
    stack._add_stack_event(
        f"{prefix}_IN_PROGRESS",
        resource_status_reason=f"The following resource(s) failed to {verb}: [{failure.logical_id}]. "
        + ("Rollback requested by user." if kind == "CREATE" else ""),
    )
    stack.status = f"{prefix}_IN_PROGRESS"
    try:
        if kind == "CREATE":
            stack.resource_map.delete()
        elif previous_template is not None:
            _resource_map_update(stack.resource_map, previous_template)
    except Exception as exc:
        log.warning("rollback of %s failed: %s", stack.name, exc, exc_info=True)
        stack._add_stack_event(f"{prefix}_FAILED", resource_status_reason=str(exc))
        stack.status = f"{prefix}_FAILED"
        return
    stack._add_stack_event(f"{prefix}_COMPLETE")
    stack.status = f"{prefix}_COMPLETE"


# --- 2. properties moto drops --------------------------------------------------------------------
def _table_extras(table_name: str, props: dict[str, Any], account_id: str, region: str) -> None:
    from moto.dynamodb.models import dynamodb_backends

    backend = dynamodb_backends[account_id][region]
    ttl = props.get("TimeToLiveSpecification")
    if ttl:
        backend.update_time_to_live(
            table_name, {"AttributeName": ttl.get("AttributeName"), "Enabled": _bool(ttl.get("Enabled"))}
        )
    pitr = props.get("PointInTimeRecoverySpecification")
    if pitr is not None:
        backend.update_continuous_backups(
            table_name,
            {"PointInTimeRecoveryEnabled": _bool(pitr.get("PointInTimeRecoveryEnabled"))},
        )
    sse = props.get("SSESpecification")
    if sse is not None:  # CloudFormation's SSEEnabled is the API's Enabled (moto reads only the latter)
        table = backend.get_table(table_name)
        if _bool(sse.get("SSEEnabled")):
            table.sse_specification = {
                "Enabled": True,
                "SSEType": sse.get("SSEType") or "KMS",
                "KMSMasterKeyId": sse.get("KMSMasterKeyId")
                or table._get_default_encryption_key(account_id, region),
            }
        else:  # DynamoDB's own key (AWS owned): no SSEDescription
            table.sse_specification = None


def _lifecycle_rules(config: dict[str, Any]) -> list[dict[str, Any]]:
    """CloudFormation's LifecycleConfiguration.Rules -> S3's PutBucketLifecycleConfiguration rules."""
    rules = []
    for rule in config.get("Rules") or []:
        out: dict[str, Any] = {"ID": rule.get("Id"), "Status": rule.get("Status", "Enabled")}
        out["Filter"] = {"Prefix": rule.get("Prefix", "")}
        if "NoncurrentVersionExpiration" in rule:
            nve = rule["NoncurrentVersionExpiration"]
            out["NoncurrentVersionExpiration"] = {"NoncurrentDays": str(nve.get("NoncurrentDays"))}
        if "NoncurrentVersionExpirationInDays" in rule:
            days = rule["NoncurrentVersionExpirationInDays"]
            out["NoncurrentVersionExpiration"] = {"NoncurrentDays": str(days)}
        if "AbortIncompleteMultipartUpload" in rule:
            days = rule["AbortIncompleteMultipartUpload"].get("DaysAfterInitiation")
            out["AbortIncompleteMultipartUpload"] = {"DaysAfterInitiation": str(days)}
        if "ExpirationInDays" in rule:
            out["Expiration"] = {"Days": str(rule["ExpirationInDays"])}
        rules.append(out)
    return rules


def _bucket_extras(bucket: str, props: dict[str, Any], account_id: str, region: str) -> None:
    from moto.s3.models import s3_backends
    from moto.utilities.utils import get_partition

    backend = s3_backends[account_id][get_partition(region)]
    pab = props.get("PublicAccessBlockConfiguration")
    if pab is not None:
        backend.put_public_access_block(bucket, {k: str(_bool(v)).lower() for k, v in pab.items()})
    versioning = props.get("VersioningConfiguration")
    if versioning is not None:
        backend.put_bucket_versioning(bucket, versioning.get("Status", "Suspended"))
    lifecycle = props.get("LifecycleConfiguration")
    if lifecycle is not None:
        backend.put_bucket_lifecycle(bucket, _lifecycle_rules(lifecycle))


def _function_extras(resource: Any, props: dict[str, Any], account_id: str, region: str) -> None:
    """``AWS::Lambda::Function`` properties moto's model drops: Layers, TracingConfig, Architectures,
    DeadLetterConfig, LoggingConfig, SnapStart, EphemeralStorage."""
    if "Layers" in props:
        resource.layers = resource._get_layers_data(list(props["Layers"]))
    if "TracingConfig" in props:
        resource.tracing_config = {"Mode": props["TracingConfig"].get("Mode", "PassThrough")}
    if "Architectures" in props:
        resource.architectures = list(props["Architectures"])
    if "EphemeralStorage" in props:
        resource.ephemeral_storage = int(props["EphemeralStorage"].get("Size", 512))
    resource.topogov_extra_config = {
        key: props[key] for key in ("DeadLetterConfig", "LoggingConfig", "SnapStart") if key in props
    }


def _method_extras(resource: Any, props: dict[str, Any], account_id: str, region: str) -> None:
    """``AWS::ApiGateway::Method`` properties moto's model drops: RequestValidatorId, RequestParameters."""
    if "RequestValidatorId" in props:
        resource.request_validator_id = props["RequestValidatorId"]
    if "RequestParameters" in props:
        resource.request_parameters = {k: _bool(v) for k, v in props["RequestParameters"].items()}


def _rest_api_extras(resource: Any, props: dict[str, Any], account_id: str, region: str) -> None:
    """``AWS::ApiGateway::RestApi``'s ``MinimumCompressionSize``, as GetRestApi reports it (absent:
    compression off, AWS::ApiGateway::RestApi reference page)."""
    size = props.get("MinimumCompressionSize")
    resource.minimum_compression_size = None if size is None else int(size)


def _wrap_create(cls: Any, extras: Any, by_object: bool = False) -> None:
    """Apply ``extras`` after moto's create of ``cls``: with the physical name, or the resource object
    itself when ``by_object``."""
    original = cls.create_from_cloudformation_json.__func__

    def create(
        inner_cls: Any,
        resource_name: str,
        cloudformation_json: Any,
        account_id: str,
        region_name: str,
        **kw: Any,
    ) -> Any:
        resource = original(inner_cls, resource_name, cloudformation_json, account_id, region_name, **kw)
        target = resource if by_object else (_physical_id(resource) or resource_name)
        extras(target, cloudformation_json.get("Properties") or {}, account_id, region_name)
        return resource

    cls.create_from_cloudformation_json = classmethod(create)


def _table_in_place(original: Any, resolved: dict[str, Any], account_id: str, region: str) -> Any:
    _table_extras(original.name, resolved["Properties"], account_id, region)
    return original


def _bucket_in_place(original: Any, resolved: dict[str, Any], account_id: str, region: str) -> Any:
    from moto.s3.models import FakeBucket

    props = resolved["Properties"]
    props.setdefault("BucketName", original.name)
    updated = FakeBucket.update_from_cloudformation_json(
        original, original.name, resolved, account_id, region
    )
    _bucket_extras(original.name, props, account_id, region)
    return updated


def _log_group_in_place(original: Any, resolved: dict[str, Any], account_id: str, region: str) -> Any:
    from moto.logs.models import logs_backends

    days = resolved["Properties"].get("RetentionInDays")
    backend = logs_backends[account_id][region]
    if days is None:
        backend.delete_retention_policy(original.name)
    else:
        backend.put_retention_policy(original.name, int(days))  # type: ignore[arg-type]
    return original


def _rest_api_in_place(original: Any, resolved: dict[str, Any], account_id: str, region: str) -> Any:
    """A RestApi keeps its id; of its properties, what the local API Gateway reads is applied."""
    _rest_api_extras(original, resolved["Properties"], account_id, region)
    return original


def _rule_in_place(original: Any, resolved: dict[str, Any], account_id: str, region: str) -> Any:
    """An EventBridge rule keeps its name (physical id): moto deletes and re-creates it under it."""
    from moto.events.models import Rule

    return Rule.update_from_cloudformation_json(original, original.name, resolved, account_id, region)


_IN_PLACE: dict[str, Any] = {
    "AWS::DynamoDB::Table": _table_in_place,
    "AWS::S3::Bucket": _bucket_in_place,
    "AWS::Logs::LogGroup": _log_group_in_place,
    "AWS::Events::Rule": _rule_in_place,
    "AWS::ApiGateway::RestApi": _rest_api_in_place,
}


# --- 3. resource types -------------------------------------------------------------------------
class _Base:
    """A CloudFormation-created object of another service: its physical id and its JSON. (moto
    finds models as the *direct* subclasses of CloudFormationModel: each type below names both.)"""

    TYPE = ""

    def __init__(self, physical_id: str, props: dict[str, Any], account_id: str, region: str) -> None:
        self.physical_resource_id = physical_id
        self.props = props
        self.account_id = account_id
        self.region = region

    @staticmethod
    def cloudformation_name_type() -> str:
        return ""

    @classmethod
    def has_cfn_attr(cls, attr: str) -> bool:
        return True

    def is_created(self) -> bool:
        return True

    def get_cfn_attribute(self, attribute_name: str) -> Any:
        return self.physical_resource_id

    @classmethod
    def create_from_cloudformation_json(
        cls, resource_name: str, cloudformation_json: Any, account_id: str, region_name: str, **kw: Any
    ) -> Any:
        props = cloudformation_json.get("Properties") or {}
        obj = cls(cls.physical_id_for(resource_name, props), props, account_id, region_name)
        obj.apply()
        return obj

    @classmethod
    def update_from_cloudformation_json(
        cls,
        original_resource: Any,
        new_resource_name: str,
        cloudformation_json: Any,
        account_id: str,
        region_name: str,
    ) -> Any:
        props = cloudformation_json.get("Properties") or {}
        original_resource.unapply()
        original_resource.props = props
        original_resource.apply()
        return original_resource

    @classmethod
    def delete_from_cloudformation_json(
        cls, resource_name: str, cloudformation_json: Any, account_id: str, region_name: str
    ) -> None:
        cls(resource_name, cloudformation_json.get("Properties") or {}, account_id, region_name).unapply()

    def delete(self, account_id: str, region: str) -> None:
        self.unapply()

    @classmethod
    def physical_id_for(cls, resource_name: str, props: dict[str, Any]) -> str:
        return resource_name

    def apply(self) -> None:
        pass

    def unapply(self) -> None:
        pass


def _typed(name: str) -> Any:
    """A model's ``cloudformation_type``: the static method moto calls for the type's name."""

    def cloudformation_type() -> str:
        return name

    return staticmethod(cloudformation_type)


def _models() -> list[type]:
    """The resource types moto lacks, each a direct subclass of moto's CloudFormationModel (how moto
    finds them), on a common base; built on first use, as moto is imported only then."""
    from moto.core.common_models import CloudFormationModel

    return [
        *_policy_models(CloudFormationModel),
        *_eks_and_alarm_models(CloudFormationModel),
        *_api_gateway_models(CloudFormationModel),
        *_lambda_models(CloudFormationModel),
        *_sagemaker_models(CloudFormationModel),
    ]


def _policy_models(model: Any) -> list[type]:
    """The resource policies: a bucket's, a queue's, a topic's."""

    class BucketPolicy(_Base, model):
        """``PutBucketPolicy`` on ``Bucket`` (Ref: the bucket name)."""

        cloudformation_type = _typed("AWS::S3::BucketPolicy")

        def _backend(self) -> Any:
            from moto.s3.models import s3_backends
            from moto.utilities.utils import get_partition

            return s3_backends[self.account_id][get_partition(self.region)]

        def apply(self) -> None:
            document = self.props["PolicyDocument"]
            self._backend().put_bucket_policy(self.props["Bucket"], json.dumps(document).encode())

        def unapply(self) -> None:
            import contextlib

            with contextlib.suppress(Exception):  # the bucket (retained or not) may be gone
                self._backend().delete_bucket_policy(self.props["Bucket"])

    class QueuePolicy(_Base, model):
        """``SetQueueAttributes Policy`` on each of ``Queues`` (queue URLs)."""

        cloudformation_type = _typed("AWS::SQS::QueuePolicy")

        def _set(self, value: str) -> None:
            from moto.sqs.models import sqs_backends

            backend = sqs_backends[self.account_id][self.region]
            for url in self.props.get("Queues") or []:
                import contextlib

                with contextlib.suppress(Exception):
                    backend.set_queue_attributes(str(url).rstrip("/").rsplit("/", 1)[-1], {"Policy": value})

        def apply(self) -> None:
            self._set(json.dumps(self.props["PolicyDocument"]))

        def unapply(self) -> None:
            self._set("")

    class TopicPolicy(_Base, model):
        """``SetTopicAttributes Policy`` on each of ``Topics`` (topic ARNs)."""

        cloudformation_type = _typed("AWS::SNS::TopicPolicy")

        def _set(self, value: str | None) -> None:
            import contextlib

            from moto.sns.models import sns_backends

            backend = sns_backends[self.account_id][self.region]
            for arn in self.props.get("Topics") or []:
                with contextlib.suppress(Exception):
                    if value is None:
                        topic = backend.get_topic(arn)
                        topic._policy_json = topic._create_default_topic_policy(  # restores the default
                            self.region, self.account_id, topic.name
                        )
                    else:
                        backend.get_topic(arn).policy = value

        def apply(self) -> None:
            self._set(json.dumps(self.props["PolicyDocument"]))

        def unapply(self) -> None:
            self._set(None)

    return [BucketPolicy, QueuePolicy, TopicPolicy]


def _eks_and_alarm_models(model: Any) -> list[type]:
    """An EKS access entry and a CloudWatch alarm."""

    class AccessEntry(_Base, model):
        """An EKS access entry (``CreateAccessEntry``): the cluster must exist (EKS answers
        ResourceNotFoundException), one entry per principal. Ref: ``<cluster>|<principal ARN>``."""

        cloudformation_type = _typed("AWS::EKS::AccessEntry")

        @classmethod
        def physical_id_for(cls, resource_name: str, props: dict[str, Any]) -> str:
            return f"{props['ClusterName']}|{props['PrincipalArn']}"

        def get_cfn_attribute(self, attribute_name: str) -> Any:
            from topogov_local.aws import eks as moto_eks

            entry = moto_eks.get_entry(
                self.account_id, self.region, self.props["ClusterName"], self.props["PrincipalArn"]
            )
            return entry["accessEntryArn"] if entry else None

        def apply(self) -> None:
            from topogov_local.aws import eks as moto_eks

            moto_eks.create_entry(self.account_id, self.region, self.props)

        def unapply(self) -> None:
            from topogov_local.aws import eks as moto_eks

            moto_eks.delete_entry(
                self.account_id, self.region, self.props["ClusterName"], self.props["PrincipalArn"]
            )

    class Alarm(_Base, model):
        """``PutMetricAlarm`` (the name CloudFormation generates unless ``AlarmName`` is given)."""

        cloudformation_type = _typed("AWS::CloudWatch::Alarm")

        @classmethod
        def physical_id_for(cls, resource_name: str, props: dict[str, Any]) -> str:
            return str(props.get("AlarmName") or resource_name)

        def get_cfn_attribute(self, attribute_name: str) -> Any:
            return f"arn:aws:cloudwatch:{self.region}:{self.account_id}:alarm:{self.physical_resource_id}"

        def apply(self) -> None:
            from moto.cloudwatch.models import cloudwatch_backends

            p = self.props
            cloudwatch_backends[self.account_id][self.region].put_metric_alarm(
                name=self.physical_resource_id,
                namespace=p.get("Namespace"),  # type: ignore[arg-type]  # None: CloudWatch omits it
                metric_name=p.get("MetricName"),  # type: ignore[arg-type]  # None: CloudWatch omits it
                comparison_operator=p.get("ComparisonOperator"),  # type: ignore[arg-type]  # None: CloudWatch omits it
                evaluation_periods=int(p.get("EvaluationPeriods", 1)),
                period=int(p.get("Period", 300)),
                threshold=float(p.get("Threshold", 0)),
                statistic=p.get("Statistic"),  # type: ignore[arg-type]  # None: CloudWatch omits it
                description=p.get("AlarmDescription", ""),
                dimensions=[{"Name": d["Name"], "Value": d["Value"]} for d in p.get("Dimensions") or []],
                alarm_actions=list(p.get("AlarmActions") or []),
                extended_statistic=p.get("ExtendedStatistic"),
                ok_actions=list(p.get("OKActions") or []),
                insufficient_data_actions=list(p.get("InsufficientDataActions") or []),
                treat_missing_data=p.get("TreatMissingData"),
                actions_enabled=_bool(p.get("ActionsEnabled", True)),
            )

        def unapply(self) -> None:
            from moto.cloudwatch.models import cloudwatch_backends

            cloudwatch_backends[self.account_id][self.region].delete_alarms([self.physical_resource_id])

    return [AccessEntry, Alarm]


def _api_gateway_models(model: Any) -> list[type]:
    """API Gateway's stage, request validator and account settings."""
    return [_stage_model(model), *_api_gateway_settings_models(model)]


def _stage_model(model: Any) -> type:
    class Stage(_Base, model):
        """``CreateStage`` with the deployment, tracing, access-log settings and method settings
        (keys ``<resource path, / as ~1>/<method>``, ``*/*`` for all, as GetStage shows them)."""

        cloudformation_type = _typed("AWS::ApiGateway::Stage")

        @classmethod
        def physical_id_for(cls, resource_name: str, props: dict[str, Any]) -> str:
            return str(props.get("StageName") or resource_name)

        def _backend(self) -> Any:
            from moto.apigateway.models import apigateway_backends

            return apigateway_backends[self.account_id][self.region]

        def apply(self) -> None:
            p = self.props
            backend = self._backend()
            stage = backend.create_stage(
                p["RestApiId"],
                self.physical_resource_id,
                p.get("DeploymentId"),
                variables=p.get("Variables") or {},
                description=p.get("Description", ""),
                cacheClusterEnabled=_bool(p.get("CacheClusterEnabled", False)),
                tracing_enabled=_bool(p.get("TracingEnabled", False)),
            )
            settings = {}
            for m in p.get("MethodSettings") or []:
                path, method = m.get("ResourcePath", "/*"), m.get("HttpMethod", "*")
                # ResourcePath comes encoded ("/~1v1~1jobs"); the key drops its initial slash
                key = "*/*" if path in ("/*", "*") and method == "*" else f"{path[1:]}/{method}"
                settings[key] = {
                    "throttlingRateLimit": float(m["ThrottlingRateLimit"])
                    if "ThrottlingRateLimit" in m
                    else None,
                    "throttlingBurstLimit": int(m["ThrottlingBurstLimit"])
                    if "ThrottlingBurstLimit" in m
                    else None,
                    "loggingLevel": m.get("LoggingLevel", "OFF"),
                    "metricsEnabled": _bool(m.get("MetricsEnabled", False)),
                    "dataTraceEnabled": _bool(m.get("DataTraceEnabled", False)),
                }
            stage.method_settings = {
                k: {a: b for a, b in v.items() if b is not None} for k, v in settings.items()
            }
            access = p.get("AccessLogSetting")
            if access:
                stage.access_log_settings = {
                    "destinationArn": access.get("DestinationArn"),
                    "format": access.get("Format"),
                }

        def unapply(self) -> None:
            import contextlib

            with contextlib.suppress(Exception):
                self._backend().delete_stage(self.props["RestApiId"], self.physical_resource_id)

    return Stage


def _api_gateway_settings_models(model: Any) -> list[type]:
    class RequestValidator(_Base, model):
        """``CreateRequestValidator``; Ref: its id."""

        cloudformation_type = _typed("AWS::ApiGateway::RequestValidator")

        def apply(self) -> None:
            from moto.apigateway.models import apigateway_backends

            p = self.props
            validator = apigateway_backends[self.account_id][self.region].create_request_validator(
                p["RestApiId"],
                p.get("Name") or self.physical_resource_id,
                _bool(p.get("ValidateRequestBody", False)),
                _bool(p.get("ValidateRequestParameters", False)),
            )
            self.physical_resource_id = validator.id

        def unapply(self) -> None:
            import contextlib

            from moto.apigateway.models import apigateway_backends

            with contextlib.suppress(Exception):
                apigateway_backends[self.account_id][self.region].delete_request_validator(
                    self.props["RestApiId"], self.physical_resource_id
                )

    class ApiGatewayAccount(_Base, model):
        """``UpdateAccount /cloudwatchRoleArn`` (one per account and region)."""

        cloudformation_type = _typed("AWS::ApiGateway::Account")

        def apply(self) -> None:
            from moto.apigateway.models import apigateway_backends

            role = self.props.get("CloudWatchRoleArn")
            if role:
                apigateway_backends[self.account_id][self.region].update_account(
                    [{"op": "replace", "path": "/cloudwatchRoleArn", "value": role}]
                )

    return [RequestValidator, ApiGatewayAccount]


def _lambda_models(model: Any) -> list[type]:
    """A function's event-invoke configuration and alias, and the CDK's metadata."""

    class EventInvokeConfig(_Base, model):
        """``PutFunctionEventInvokeConfig`` (retries, maximum event age, destinations)."""

        cloudformation_type = _typed("AWS::Lambda::EventInvokeConfig")

        def _backend(self) -> Any:
            from moto.awslambda.models import lambda_backends

            return lambda_backends[self.account_id][self.region]

        def apply(self) -> None:
            p = self.props
            config: dict[str, Any] = {}
            if "MaximumRetryAttempts" in p:
                config["MaximumRetryAttempts"] = int(p["MaximumRetryAttempts"])
            if "MaximumEventAgeInSeconds" in p:
                config["MaximumEventAgeInSeconds"] = int(p["MaximumEventAgeInSeconds"])
            if p.get("DestinationConfig"):
                config["DestinationConfig"] = p["DestinationConfig"]
            self._backend().put_function_event_invoke_config(p["FunctionName"], config)

        def unapply(self) -> None:
            import contextlib

            with contextlib.suppress(Exception):
                self._backend().delete_function_event_invoke_config(self.props["FunctionName"])

    class LambdaAliasModel(_Base, model):
        """``CreateAlias`` (Ref and ``AliasArn``: the alias ARN, ``<function ARN>:<name>``)."""

        cloudformation_type = _typed("AWS::Lambda::Alias")

        def _backend(self) -> Any:
            from moto.awslambda.models import lambda_backends

            return lambda_backends[self.account_id][self.region]

        def _function(self) -> str:
            return str(self.props["FunctionName"]).rsplit(":function:", 1)[-1].split(":")[0]

        def apply(self) -> None:
            p = self.props
            alias = self._backend().create_alias(
                name=p["Name"],
                function_name=self._function(),
                function_version=str(p["FunctionVersion"]),
                description=p.get("Description", ""),
                routing_config=p.get("RoutingConfig"),
            )
            self.physical_resource_id = alias.arn

        def get_cfn_attribute(self, attribute_name: str) -> Any:
            return self.physical_resource_id

        def unapply(self) -> None:
            import contextlib

            with contextlib.suppress(Exception):
                self._backend().delete_alias(self.props["Name"], self._function())

        @classmethod
        def update_from_cloudformation_json(
            cls,
            original_resource: Any,
            new_resource_name: str,
            cloudformation_json: Any,
            account_id: str,
            region_name: str,
        ) -> Any:
            """UpdateAlias: the alias (its ARN) stays, pointing at the new version."""
            props = cloudformation_json.get("Properties") or {}
            original_resource.props = props
            alias = original_resource._backend().get_alias(props["Name"], original_resource._function())
            alias.update(props.get("Description"), str(props["FunctionVersion"]), props.get("RoutingConfig"))
            return original_resource

    class CdkMetadata(_Base, model):
        """The CDK's version report: CloudFormation stores it; no service object."""

        cloudformation_type = _typed("AWS::CDK::Metadata")

    return [EventInvokeConfig, LambdaAliasModel, CdkMetadata]


_MODELS: list[type] = []


def _sagemaker_models(model: Any) -> list[type]:
    """HyperPod task governance's policy: ``AWS::SageMaker::ComputeQuota`` and
    ``AWS::SageMaker::ClusterSchedulerConfig`` (registry schemas bundled with cfn-lint). Each is
    created, updated and deleted through the emulator's SageMaker API (:mod:`topogov_local.aws.sagemaker`),
    so the API's refusals fail the resource: the handler's create is Create<Type>; an update in
    place is Update<Type> with ``TargetVersion`` = the current version (the handler reads it first);
    Name, ClusterArn and ComputeQuotaTarget.TeamName replace (createOnlyProperties), a ComputeQuota's
    old one deleted first (``delete_then_create``). Ref is the ARN (the primaryIdentifier); GetAtt
    gives the id, version, status and times."""
    from topogov_local.aws import sagemaker

    class _Governance(_Base):
        KIND = ""
        FIELDS: tuple[str, ...] = ()

        @classmethod
        def create_from_cloudformation_json(
            cls, resource_name: str, cloudformation_json: Any, account_id: str, region_name: str, **kw: Any
        ) -> Any:
            props = cloudformation_json.get("Properties") or {}
            request = {k: props[k] for k in (*cls.FIELDS, "Tags") if k in props}
            made = sagemaker.create(account_id, region_name, cls.KIND, request)
            arn = next(v for k, v in made.items() if k.endswith("Arn"))
            return cls(arn, props, account_id, region_name)

        @classmethod
        def update_from_cloudformation_json(
            cls,
            original_resource: Any,
            new_resource_name: str,
            cloudformation_json: Any,
            account_id: str,
            region_name: str,
        ) -> Any:
            props = cloudformation_json.get("Properties") or {}
            current = original_resource.describe()
            prefix = sagemaker.PREFIX[cls.KIND]
            request = {k: props[k] for k in cls.FIELDS if k in props and k not in ("Name", "ClusterArn")}
            request |= {f"{prefix}Id": current[f"{prefix}Id"], "TargetVersion": current[f"{prefix}Version"]}
            sagemaker.update(account_id, region_name, cls.KIND, request)
            original_resource.props = props
            return original_resource

        @property
        def resource_id(self) -> str:
            return self.physical_resource_id.rsplit("/", 1)[-1]

        def describe(self) -> dict[str, Any]:
            key = f"{sagemaker.PREFIX[self.KIND]}Id"
            return sagemaker.describe(self.account_id, self.region, self.KIND, {key: self.resource_id})

        def get_cfn_attribute(self, attribute_name: str) -> Any:
            import datetime as dt

            value = self.describe().get(attribute_name)
            return value.isoformat() if isinstance(value, dt.datetime) else value

        def unapply(self) -> None:
            import contextlib

            key = f"{sagemaker.PREFIX[self.KIND]}Id"
            with contextlib.suppress(Exception):  # already gone (deleted by hand): nothing to do
                sagemaker.delete(self.account_id, self.region, self.KIND, {key: self.resource_id})

    class ComputeQuota(_Governance, model):
        cloudformation_type = _typed("AWS::SageMaker::ComputeQuota")
        KIND = sagemaker.QUOTA
        FIELDS = sagemaker.FIELDS[sagemaker.QUOTA]

    class ClusterSchedulerConfig(_Governance, model):
        cloudformation_type = _typed("AWS::SageMaker::ClusterSchedulerConfig")
        KIND = sagemaker.CONFIG
        FIELDS = sagemaker.FIELDS[sagemaker.CONFIG]

    return [ComputeQuota, ClusterSchedulerConfig]


def _patch_lambda_version() -> None:
    """``AWS::Lambda::Version``: Ref is the version's ARN, ``GetAtt Version`` its number; deleting
    the resource deletes the version (moto kept neither)."""
    from moto.awslambda.models import LambdaVersion, lambda_backends

    original = LambdaVersion.create_from_cloudformation_json.__func__  # type: ignore[attr-defined]

    def create(
        cls: Any, resource_name: str, cloudformation_json: Any, account_id: str, region_name: str, **kw: Any
    ) -> Any:
        version = original(cls, resource_name, cloudformation_json, account_id, region_name, **kw)
        function = str(cloudformation_json["Properties"]["FunctionName"])
        name = function.rsplit(":function:", 1)[-1].split(":")[0]
        fn = lambda_backends[account_id][region_name].get_function(name)
        version.function_name = name
        version.function_arn = fn.function_arn
        version.account_id, version.region = account_id, region_name
        return version

    def get_cfn_attribute(self: Any, attribute_name: str) -> Any:
        return self.version if attribute_name == "Version" else self.physical_resource_id

    def delete(self: Any, account_id: str, region: str) -> None:
        import contextlib

        with contextlib.suppress(Exception):
            lambda_backends[account_id][region].delete_function(self.function_name, str(self.version))

    LambdaVersion.create_from_cloudformation_json = classmethod(create)  # type: ignore[method-assign,assignment]
    LambdaVersion.physical_resource_id = property(  # type: ignore[attr-defined]
        lambda self: f"{getattr(self, 'function_arn', '')}:{self.version}"
    )
    LambdaVersion.get_cfn_attribute = get_cfn_attribute  # type: ignore[attr-defined]
    LambdaVersion.has_cfn_attr = classmethod(lambda cls, attr: attr in ("Version", "FunctionArn"))  # type: ignore[method-assign,assignment]
    LambdaVersion.delete = delete  # type: ignore[attr-defined]


def _clear_model_caches() -> None:
    from moto.cloudformation import parsing

    for fn in ("get_model_list", "get_model_map", "get_name_type_map"):
        getattr(parsing, fn).cache_clear()


def install() -> None:
    """Patch moto's CloudFormation (idempotent)."""
    global _installed
    if _installed:
        return
    _installed = True
    _install_templates_and_models()
    _install_function_updates()
    _install_physical_ids()
    _install_updates()
    _install_change_set_calls()
    _install_parameters()


def _install_templates_and_models() -> None:
    """Template URLs on the emulator, every service's models registered before the types moto lacks,
    and what the creates of a table, a bucket, a function and a method add."""
    import moto.cloudformation.models as models
    import moto.cloudformation.responses as responses
    import moto.cloudformation.utils as utils

    for module in (utils, responses, models):
        module.get_stack_from_s3_url = get_stack_from_s3_url  # type: ignore[attr-defined]

    # make sure every service's models are registered before our own are added
    from moto.backends import get_backend

    for service in (
        "s3",
        "dynamodb",
        "awslambda",
        "iam",
        "events",
        "logs",
        "sqs",
        "sns",
        "kms",
        "cloudwatch",
        "apigateway",
        "eks",
        "ssm",
    ):
        get_backend(service)  # type: ignore[call-overload]
    _MODELS.extend(_models())
    _clear_model_caches()

    from moto.dynamodb.models.table import Table
    from moto.s3.models import FakeBucket

    _wrap_create(Table, _table_extras)
    _wrap_create(FakeBucket, _bucket_extras)
    from moto.apigateway.models import Method, RestAPI
    from moto.awslambda.models import LambdaFunction

    _wrap_create(LambdaFunction, _function_extras, by_object=True)
    _wrap_create(Method, _method_extras, by_object=True)
    _wrap_create(RestAPI, _rest_api_extras, by_object=True)


def _install_function_updates() -> None:
    """A function's update as CloudFormation makes it, and its configuration as Lambda reports it."""
    from moto.awslambda.models import LambdaFunction

    original_update_fn = LambdaFunction.update_from_cloudformation_json.__func__  # type: ignore[attr-defined]

    def update_function(
        cls: Any,
        original_resource: Any,
        new_resource_name: str,
        cloudformation_json: Any,
        account_id: str,
        region_name: str,
    ) -> Any:
        updated = original_update_fn(
            cls, original_resource, new_resource_name, cloudformation_json, account_id, region_name
        )
        _function_extras(updated, cloudformation_json.get("Properties") or {}, account_id, region_name)
        return updated

    LambdaFunction.update_from_cloudformation_json = classmethod(update_function)  # type: ignore[method-assign,assignment]
    original_configuration = LambdaFunction.get_configuration

    def get_configuration(self: Any, on_create: bool = False) -> dict[str, Any]:
        config = original_configuration(self, on_create)
        extra = getattr(self, "topogov_extra_config", {})
        if "DeadLetterConfig" in extra:
            config["DeadLetterConfig"] = {"TargetArn": extra["DeadLetterConfig"].get("TargetArn")}
        if "LoggingConfig" in extra:
            config["LoggingConfig"] = dict(extra["LoggingConfig"])
        if "SnapStart" in extra:
            applied = extra["SnapStart"].get("ApplyOn", "None")
            config["SnapStart"] = {
                "ApplyOn": applied,
                "OptimizationStatus": "On" if applied == "PublishedVersions" else "Off",
            }
        return config

    LambdaFunction.get_configuration = get_configuration  # type: ignore[method-assign]


def _install_physical_ids() -> None:
    """The physical ids CloudFormation shows where moto's models have none, and DeleteStack of a RestApi."""
    # The physical ids CloudFormation shows (DescribeStackResources) where moto's models have none.
    from moto.apigateway.models import Deployment
    from moto.awslambda.models import LayerVersion

    LayerVersion.physical_resource_id = property(lambda self: self.arn)  # type: ignore[attr-defined]
    _patch_lambda_version()
    Deployment.physical_resource_id = property(lambda self: self.id)  # type: ignore[attr-defined]

    from moto.apigateway.models import RestAPI, apigateway_backends

    def delete_rest_api(self: Any, account_id: str, region: str) -> None:
        """Rule 7 of the module doc (a second delete, of an API already gone, is a no-op)."""
        backend = apigateway_backends[account_id][region]
        if self.id in backend.apis:
            backend.delete_rest_api(self.id)

    RestAPI.delete = delete_rest_api  # type: ignore[attr-defined]


def _install_updates() -> None:
    """Updates that replace only what CloudFormation replaces, in dependency order."""
    import moto.cloudformation.models as models
    from moto.cloudformation.parsing import ResourceMap

    ResourceMap.update = _resource_map_update  # type: ignore[method-assign]
    _patch_resource_failures()
    models.ChangeSet.diff = _changeset_changes  # type: ignore[method-assign,assignment]

    original_execute = models.CloudFormationBackend.execute_change_set

    def execute_change_set(self: Any, change_set_name: str, stack_name: str | None = None) -> None:
        change_set = self.change_sets.get(change_set_name) or next(
            (c for c in self.change_sets.values() if c.change_set_name == change_set_name), None
        )
        stack = self.stacks.get(change_set.stack_id) if change_set is not None else None
        previous = None
        if stack is not None and change_set is not None and change_set.change_set_type != "CREATE":
            previous = dict(stack.template_dict)
        try:
            original_execute(self, change_set_name, stack_name)
        except ResourceFailed as failure:
            assert change_set is not None and stack is not None
            roll_back(stack, change_set.change_set_type, failure, previous)
            stack.status_reason = handler_reason(failure.kind, failure.cause)
            change_set.execution_status = "EXECUTE_FAILED"
            return
        except Exception as exc:
            # CloudFormation fails the operation and says why (moto answered HTTP 500, which SDKs
            # retry against a half-applied stack).
            if change_set is None:
                raise
            stack = self.stacks[change_set.stack_id]
            kind = change_set.change_set_type
            reason = f"{type(exc).__name__}: {exc}"
            stack._add_stack_event(f"{kind}_FAILED", resource_status_reason=reason)
            stack.status = f"{kind}_FAILED"
            stack.status_reason = reason
            change_set.execution_status = "EXECUTE_FAILED"
            log.warning("change set %s failed: %s", change_set_name, reason, exc_info=True)
            return
        for stack in self.stacks.values():
            if stack_name in (None, stack.name, stack.stack_id) and stack.template:
                stack._parse_template()
                stack.output_map = stack._create_output_map()

    models.CloudFormationBackend.execute_change_set = execute_change_set  # type: ignore[method-assign]


def _install_change_set_calls() -> None:
    """DeleteChangeSet and DescribeChangeSet with CloudFormation's answers and errors."""
    import moto.cloudformation.models as models
    import moto.cloudformation.responses as responses
    from moto.cloudformation.exceptions import CloudFormationError

    class ChangeSetNotFound(CloudFormationError):
        code = "ChangeSetNotFound"

    def find(self: Any, change_set_name: str, stack_name: str | None = None) -> Any:
        if change_set_name in self.change_sets:  # an ARN
            return self.change_sets[change_set_name]
        for cs in reversed(list(self.change_sets.values())):  # a name: unique within its stack
            if cs.change_set_name == change_set_name and stack_name in (None, cs.stack_name, cs.stack_id):
                return cs
        return None

    def delete_change_set(self: Any, change_set_name: str, stack_name: str | None = None) -> None:
        """DeleteChangeSet: a name is looked up in its stack, and "the delete request is successful
        as long as the stack exists (even if the change set does not exist)" (what the CDK CLI relies
        on before each deploy; moto answered HTTP 500, an UnboundLocalError)."""
        change_set = find(self, change_set_name, stack_name)
        if change_set is None:
            if stack_name and not any(stack_name in (st.name, st.stack_id) for st in self.stacks.values()):
                raise ChangeSetNotFound(f"ChangeSet [{change_set_name}] does not exist")
            return
        del self.change_sets[change_set.change_set_id]

    models.CloudFormationBackend.delete_change_set = delete_change_set  # type: ignore[method-assign]

    def response_delete_change_set(self: Any) -> Any:
        self.cloudformation_backend.delete_change_set(
            self._get_param("ChangeSetName"), self._get_param("StackName")
        )
        return responses.EmptyResult()

    responses.CloudFormationResponse.delete_change_set = response_delete_change_set  # type: ignore[method-assign]

    def describe_change_set(self: Any, change_set_name: str, stack_name: str | None = None) -> Any:
        """DescribeChangeSet of a change set that is not there: ChangeSetNotFoundException (the CDK
        CLI asks before each deploy and takes that answer for "none"; moto answered ValidationError
        "Stack with id ... does not exist", which the CLI reports as a failed deploy)."""
        change_set = find(self, change_set_name, stack_name)
        if change_set is None:
            raise ChangeSetNotFound(f"ChangeSet [{change_set_name}] does not exist")
        return change_set

    models.CloudFormationBackend.describe_change_set = describe_change_set  # type: ignore[method-assign]

    def response_describe_change_set(self: Any) -> Any:
        change_set = self.cloudformation_backend.describe_change_set(
            self._get_param("ChangeSetName"), self._get_param("StackName")
        )
        return responses.ActionResult(change_set)

    responses.CloudFormationResponse.describe_change_set = response_describe_change_set  # type: ignore[method-assign]

    original_after_execute = models.CloudFormationBackend.execute_change_set

    def execute_and_clear(self: Any, change_set_name: str, stack_name: str | None = None) -> None:
        """ "When you execute a change set, CloudFormation deletes all other change sets associated
        with the stack because they aren't valid for the updated stack" (ExecuteChangeSet)."""
        executed = find(self, change_set_name, stack_name)
        original_after_execute(self, change_set_name, stack_name)
        if executed is not None:
            for cs_id, cs in list(self.change_sets.items()):
                if cs.stack_id == executed.stack_id and cs is not executed:
                    del self.change_sets[cs_id]

    models.CloudFormationBackend.execute_change_set = execute_and_clear  # type: ignore[method-assign]


def _install_parameters() -> None:
    """``UsePreviousValue`` of a stack's parameters."""
    import moto.cloudformation.models as models

    def stack_parameters(self: Any) -> dict[str, Any]:
        """The previous value of each parameter (rule 6 of the module doc)."""
        resource_map = self.resource_map
        out = dict(resource_map.resolved_parameters)
        for key, slot in (resource_map._template.get("Parameters") or {}).items():
            if str(slot.get("Type", "")).startswith("AWS::SSM::Parameter::"):
                out[key] = resource_map.input_parameters.get(key, slot.get("Default"))
        return out

    models.Stack.stack_parameters = property(stack_parameters)  # type: ignore[assignment,method-assign]


def updates_payload() -> dict[str, Any]:
    return {"updates": LAST_UPDATES}


def physical_ids(resources: Iterable[Any]) -> dict[str, str | None]:
    return {getattr(r, "logical_resource_id", "?"): _physical_id(r) for r in resources if r is not None}
