"""Lambda's account rules that moto does not enforce (moto extension, installed by :func:`install` from
:mod:`topogov_local.aws.server`).

**Account concurrency.** An account has a concurrency limit per region (1,000 by default; a new
account may have as few as 10: "Lambda quotas", https://docs.aws.amazon.com/lambda/latest/dg/
gettingstarted-limits.html). A function's reserved concurrency is carved out of it, and Lambda keeps
a minimum unreserved for the functions that reserve nothing: "You can reserve up to the Unreserved
account concurrency value minus 100. The remaining 100 units of concurrency are for functions that
aren't using reserved concurrency" ("Configuring reserved concurrency for a function",
https://docs.aws.amazon.com/lambda/latest/dg/configuration-concurrency.html). In an account whose
limit is below 100 the minimum is the whole limit — the refusals of such accounts read "...below its
minimum value of [10]" or "[50]" — so there any reservation at all is refused. Here:

* ``POST /_topogov/lambda/account`` ``{"concurrent_executions": 10}`` sets the limit of every account
  and region of the emulator (an integer >= 0; moto's and AWS's default 1000 until set); ``GET``
  answers ``{"concurrent_executions": N, "unreserved_minimum": min(N, 100)}``.
* ``GetAccountSettings`` (``GET /2016-08-19/account-settings/``, which moto does not route) answers
  ``AccountLimit.ConcurrentExecutions`` (the limit) and ``UnreservedConcurrentExecutions`` (the limit
  minus every reservation of the account and region), as API_GetAccountSettings.html documents.
* ``PutFunctionConcurrency``, and CloudFormation's ``ReservedConcurrentExecutions`` of an
  ``AWS::Lambda::Function`` (which CloudFormation applies with PutFunctionConcurrency; moto's
  CloudFormation passes it to its CreateFunction, so the check is there too) on create and on an
  update that changes it, refuse a reservation that leaves less than the
  minimum unreserved with Lambda's ``InvalidParameterValueException`` (HTTP 400): "Specified
  ReservedConcurrentExecutions for function decreases account's UnreservedConcurrentExecution below
  its minimum value of [100]." (replacing moto's own check, which reads an environment variable and
  is off by default).

**A VPC function's role must be able to manage its network interfaces.** "Lambda uses your function's
permissions to create and manage network interfaces": the execution role needs
``ec2:CreateNetworkInterface``, ``ec2:DescribeNetworkInterfaces`` ("only works if it's allowed on all
resources") and ``ec2:DeleteNetworkInterface``, the actions of the managed policy
AWSLambdaVPCAccessExecutionRole ("Giving Lambda functions access to resources in an Amazon VPC",
execution role permissions, https://docs.aws.amazon.com/lambda/latest/dg/configuration-vpc.html).
``CreateFunction`` with a ``VpcConfig`` naming subnets, and ``UpdateFunctionConfiguration`` (or a
CloudFormation update) that sets a ``VpcConfig`` or the ``Role`` of a VPC function, judge the role's
policies (inline and attached, with :func:`topogov_local.aws.iam.resource_policy_decision`: an
explicit Deny wins, else an Allow) and refuse, as Lambda does, with ``InvalidParameterValueException``
(HTTP 400) "The provided execution role does not have permissions to call CreateNetworkInterface on
EC2" (the first action missing is named). Lambda checks when the function is configured, not when it
runs: CloudFormation creates a role's ``AWS::IAM::Policy`` as a resource of its own, and the CDK makes
the function ``DependsOn`` it, so the check sees it.

**Version numbers** increase and are never given again (:func:`_install_version_numbers`).
"""

from __future__ import annotations

import threading
from typing import Any

CONTROL_ACCOUNT = "/_topogov/lambda/account"
DEFAULT_CONCURRENT_EXECUTIONS = 1000  # "Lambda quotas": Concurrent executions, default 1,000
UNRESERVED_MINIMUM = 100  # configuration-concurrency.html: "minus 100"
# GetAccountSettings' other limits, as the Lambda quotas page gives them (bytes)
CODE_LIMITS = {"TotalCodeSize": 80530636800, "CodeSizeUnzipped": 262144000, "CodeSizeZipped": 52428800}

_lock = threading.Lock()
_limit = DEFAULT_CONCURRENT_EXECUTIONS
_installed = False


def account_limit() -> int:
    with _lock:
        return _limit


def set_account_limit(value: int) -> None:
    global _limit
    with _lock:
        _limit = value


def unreserved_minimum(limit: int) -> int:
    """The unreserved concurrency Lambda keeps: 100, or the whole limit of an account below 100."""
    return min(limit, UNRESERVED_MINIMUM)


def reserved_total(backend: Any, excluding: str | None = None) -> int:
    """The reservations of every function of the backend's account and region but ``excluding``."""
    total = 0
    for fn in backend.list_functions():
        if fn.function_name != excluding and fn.reserved_concurrency not in (None, ""):
            total += int(fn.reserved_concurrency)
    return total


def check_reservation(backend: Any, function_name: str, reserved: Any) -> None:
    """Refuse ``reserved`` for ``function_name`` when it leaves less than the minimum unreserved."""
    if reserved in (None, ""):
        return
    from moto.awslambda.exceptions import InvalidParameterValueException

    limit = account_limit()
    minimum = unreserved_minimum(limit)
    if limit - reserved_total(backend, excluding=function_name) - int(reserved) < minimum:
        raise InvalidParameterValueException(
            "Specified ReservedConcurrentExecutions for function decreases account's "
            f"UnreservedConcurrentExecution below its minimum value of [{minimum}]."
        )


def account_settings(backend: Any) -> dict[str, Any]:
    """GetAccountSettings' answer for the backend's account and region."""
    limit = account_limit()
    functions = list(backend.list_functions())
    return {
        "AccountLimit": {
            **CODE_LIMITS,
            "ConcurrentExecutions": limit,
            "UnreservedConcurrentExecutions": limit - reserved_total(backend),
        },
        "AccountUsage": {
            "TotalCodeSize": sum(int(getattr(fn, "code_size", 0) or 0) for fn in functions),
            "FunctionCount": len(functions),
        },
    }


# --- a VPC function's role ---------------------------------------------------------------------------
def eni_checks(region: str, account: str) -> list[tuple[str, str]]:
    """``(action, resource)`` pairs the role must allow (configuration-vpc.html): the interface's ARN
    for create and delete, ``*`` for describe (which works on all resources only)."""
    interface = f"arn:aws:ec2:{region}:{account}:network-interface/*"
    return [
        ("ec2:CreateNetworkInterface", interface),
        ("ec2:DescribeNetworkInterfaces", "*"),
        ("ec2:DeleteNetworkInterface", interface),
    ]


def _document(raw: Any) -> dict[str, Any]:
    import json
    from urllib.parse import unquote

    if isinstance(raw, dict):
        return raw
    text = str(raw or "{}")
    return dict(json.loads(text if text.lstrip().startswith("{") else unquote(text)))


def role_documents(account_id: str, role_arn: str) -> list[dict[str, Any]]:
    """The identity policies of the role ``role_arn`` names: inline, then attached (their default
    version). A role that does not exist has none."""
    from moto.iam.models import iam_backends

    name = role_arn.rsplit("/", 1)[-1]
    partition = role_arn.split(":")[1] if role_arn.count(":") >= 5 else "aws"
    role = next(
        (r for r in iam_backends[account_id][partition].roles.values() if r.name == name),
        None,
    )
    if role is None:
        return []
    docs = [_document(doc) for doc in role.policies.values()]
    for policy in role.managed_policies.values():
        default = next((v for v in policy.versions if v.is_default), None)
        if default is not None:
            docs.append(_document(default.document))
    return docs


def role_allows(documents: list[dict[str, Any]], action: str, resource: str) -> bool:
    from topogov_local.aws.iam import resource_policy_decision

    decisions = {resource_policy_decision(doc, action, resource, {}) for doc in documents}
    return "PERMITTED" in decisions and "DENIED" not in decisions


def check_vpc_role(account_id: str, region: str, role_arn: str, vpc_config: Any) -> None:
    """Refuse a VPC configuration (one naming subnets) whose role cannot manage network interfaces."""
    if not isinstance(vpc_config, dict) or not vpc_config.get("SubnetIds"):
        return
    from moto.awslambda.exceptions import InvalidParameterValueException

    documents = role_documents(account_id, str(role_arn))
    for action, resource in eni_checks(region, account_id):
        if not role_allows(documents, action, resource):
            raise InvalidParameterValueException(
                f"The provided execution role does not have permissions to call {action.split(':')[1]} on EC2"
            )


def _install_vpc_role() -> None:
    from moto.awslambda.models import LambdaBackend, LambdaFunction

    original_create = LambdaBackend.create_function

    def create_function(self: Any, spec: dict[str, Any]) -> Any:
        check_vpc_role(self.account_id, self.region_name, str(spec.get("Role") or ""), spec.get("VpcConfig"))
        return original_create(self, spec)

    LambdaBackend.create_function = create_function  # type: ignore[method-assign]
    original_update = LambdaFunction.update_configuration

    def update_configuration(self: Any, config_updates: dict[str, Any]) -> dict[str, Any]:
        if "VpcConfig" in config_updates or "Role" in config_updates:
            vpc = config_updates.get("VpcConfig", getattr(self, "_vpc_config", None))
            check_vpc_role(self.account_id, self.region, str(config_updates.get("Role", self.role)), vpc)
        return dict(original_update(self, config_updates))

    LambdaFunction.update_configuration = update_configuration  # type: ignore[method-assign]


# --- version numbers ---------------------------------------------------------------------------------
def _install_version_numbers() -> None:
    """Lambda numbers a function's published versions in sequence and never gives a deleted version's
    number again ("Lambda creates a new version ... with a version number that increments",
    https://docs.aws.amazon.com/lambda/latest/dg/configuration-versions.html). moto numbered a new
    version len(versions) + 1, so after CloudFormation deleted an old version (the CDK's
    ``currentVersion`` after an update) the next one took the number of the newest, and the alias
    pointing at "2" pointed at two versions in turn."""
    import copy

    from moto.awslambda.models import LambdaStorage

    def publish_version(self: Any, name_or_arn: str, description: str = "") -> Any:
        function = self.get_function_by_name_or_arn_forbid_qualifier(name_or_arn)
        name = function.function_name
        entry = self._functions.get(name)
        if not entry or not entry["latest"]:
            return None
        versions = entry["versions"]
        if versions and not function.code_or_config_updated:
            return versions[-1]  # nothing changed since the last version: Lambda publishes none
        function.code_or_config_updated = False
        last = max([int(v.version) for v in versions] + [int(entry.get("topogov_last_version", 0))])
        entry["topogov_last_version"] = last + 1
        fn = copy.copy(entry["latest"])
        fn.set_version(last + 1)
        if description:
            fn.description = description
        versions.append(fn)
        self._arns[fn.function_arn] = fn
        return fn

    LambdaStorage.publish_version = publish_version  # type: ignore[method-assign]


# --- installation ----------------------------------------------------------------------------------
def _install_concurrency() -> None:
    import json

    from moto.awslambda import urls
    from moto.awslambda.models import LambdaBackend, LambdaFunction
    from moto.awslambda.responses import LambdaResponse

    original_create = LambdaBackend.create_function

    def create_function(self: Any, spec: dict[str, Any]) -> Any:
        name = str(spec.get("FunctionName") or "").rsplit(":", 1)[-1]
        check_reservation(self, name, spec.get("ReservedConcurrentExecutions"))
        return original_create(self, spec)

    LambdaBackend.create_function = create_function  # type: ignore[method-assign]

    def put_function_concurrency(self: Any, function_name: str, reserved_concurrency: str) -> str:
        fn = self.get_function(function_name)
        check_reservation(self, fn.function_name, reserved_concurrency)
        fn.reserved_concurrency = reserved_concurrency
        return str(fn.reserved_concurrency)

    LambdaBackend.put_function_concurrency = put_function_concurrency  # type: ignore[method-assign]

    original_update = LambdaFunction.update_from_cloudformation_json.__func__  # type: ignore[attr-defined]

    def update_function(
        cls: Any,
        original_resource: Any,
        new_resource_name: str,
        cloudformation_json: Any,
        account_id: str,
        region_name: str,
    ) -> Any:
        """CloudFormation applies a changed ``ReservedConcurrentExecutions`` with PutFunctionConcurrency
        (or DeleteFunctionConcurrency when the property is gone); moto's update ignored it."""
        from moto.awslambda.models import lambda_backends

        reserved = (cloudformation_json.get("Properties") or {}).get("ReservedConcurrentExecutions")
        backend = lambda_backends[account_id][region_name]
        check_reservation(backend, original_resource.function_name, reserved)
        updated = original_update(
            cls, original_resource, new_resource_name, cloudformation_json, account_id, region_name
        )
        updated.reserved_concurrency = reserved
        return updated

    LambdaFunction.update_from_cloudformation_json = classmethod(update_function)  # type: ignore[method-assign,assignment]

    def get_account_settings(self: Any) -> Any:
        return 200, {}, json.dumps(account_settings(self.backend))

    LambdaResponse.get_account_settings = get_account_settings  # type: ignore[attr-defined]
    urls.url_paths[r"{0}/(?P<api_version>[^/]+)/account-settings/?$"] = LambdaResponse.dispatch


def install() -> None:
    """Install the rules (once; before moto's server app is built, which reads the routes)."""
    global _installed
    if _installed:
        return
    _installed = True
    _install_concurrency()
    _install_vpc_role()
    _install_version_numbers()


def handle_control_request(method: str, path: str, body: Any) -> tuple[int, Any]:
    """``/_topogov/lambda/account``: ``GET`` the limit, ``POST {"concurrent_executions": N}`` to set it."""
    if path.rstrip("/") != CONTROL_ACCOUNT:
        return 404, {"message": f"no such control route: {method} {path}"}
    if method == "POST":
        value = body.get("concurrent_executions") if isinstance(body, dict) else None
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            return 400, {"message": f"concurrent_executions must be an integer >= 0, got {value!r}"}
        set_account_limit(value)
    elif method != "GET":
        return 405, {"message": "GET or POST"}
    limit = account_limit()
    return 200, {"concurrent_executions": limit, "unreserved_minimum": unreserved_minimum(limit)}
