"""IAM enforcement against the real resource, and a record of every decision (moto extension,
installed by :func:`install` from :mod:`topogov_local.aws.server`).

moto evaluates identity policies when ``INITIAL_NO_AUTH_ACTION_COUNT`` is reached (``POST
/moto-api/reset-auth``), but against the resource ``*`` unless a service's responses name the
resource, so a statement scoped to a table or a cluster never matches and ``Resource: *`` hides any
excess. This module names the resource of each request the project makes, as the Service
Authorization Reference defines it (https://docs.aws.amazon.com/service-authorization/latest/
reference/reference_policies_actions-resources-contextkeys.html):

* **DynamoDB** — ``arn:aws:dynamodb:<region>:<account>:table/<TableName>`` (``.../index/<IndexName>``
  for a Query or Scan of an index). ``TransactWriteItems`` is authorised item by item as
  ``dynamodb:PutItem`` / ``UpdateItem`` / ``DeleteItem`` / ``ConditionCheckItem`` on each item's
  table, ``TransactGetItems`` as ``dynamodb:GetItem`` ("Using IAM with DynamoDB transactions",
  https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis-iam.html);
  ``BatchGetItem`` / ``BatchWriteItem`` on each table named.
* **S3** — moto already names ``arn:aws:s3:::<bucket>`` and ``.../<key>``. Added: a ``GetObject`` of a
  key that does not exist is also evaluated as ``s3:ListBucket`` on the bucket, and answered 403
  AccessDenied instead of 404 NoSuchKey when that is not allowed ("If you don't have the
  s3:ListBucket permission, Amazon S3 returns an HTTP status code 403 Access Denied error",
  https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html, Permissions).
* **EKS** — ``arn:aws:eks:<region>:<account>:cluster/<name>`` for the cluster operations.
* **EC2** ``DescribeInstanceTopology`` and **STS** ``GetCallerIdentity`` have no resource-level
  permissions: ``*`` (and ``GetCallerIdentity`` needs none: "No permissions are required to perform
  this operation", https://docs.aws.amazon.com/STS/latest/APIReference/API_GetCallerIdentity.html).

Every evaluation is recorded — principal (the assumed-role ARN), action, resource, allowed or not —
in :data:`DECISIONS`: ``GET /_topogov/iam/decisions`` lists them, ``DELETE`` clears them.

Besides moto's switch for every request, enforcement can be on for **temporary credentials only**
(``POST /_topogov/iam/enforce-sessions`` ``on``/``off``): a request signed with an ``ASIA…`` key — the
prefix AWS gives temporary security credentials, here the sessions of ``sts:AssumeRole`` — is judged
and recorded, any other passes as before. The local stack's functions run with sessions of their
deployed roles (``topogov_local.deployment``), so every AWS call they make in every suite is judged
against those roles, while the tests' own set-up and checks keep moto's default account.

EKS's authenticator sends the presigned ``sts:GetCallerIdentity`` URL of a ``k8s-aws-v1.`` token to
STS; ``POST /_topogov/sts/presigned-caller-identity`` ``{"url", "headers"}`` is that call: the SigV4
query signature recomputed with the key's secret, ``X-Amz-Expires`` honoured, the session token
checked, then the caller's identity (see :func:`presigned_caller_identity`).
"""

from __future__ import annotations

import datetime as dt
import json
import threading
from typing import Any
from urllib.parse import parse_qsl, urlsplit

CONTROL_DECISIONS = "/_topogov/iam/decisions"
CONTROL_SESSIONS = "/_topogov/iam/enforce-sessions"
TEMPORARY_KEY_PREFIX = "ASIA"  # IAM User Guide, reference_identifiers.html#identifiers-unique-ids
CONTROL_PRESIGNED = "/_topogov/sts/presigned-caller-identity"

DECISIONS: list[dict[str, Any]] = []
_lock = threading.Lock()
_installed = False
_enforce_sessions = False

_TRANSACT_WRITE = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
}
_TABLE_ACTIONS = frozenset(
    {
        "GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan", "DescribeTable", "UpdateTable",
        "DeleteTable", "CreateTable", "DescribeTimeToLive", "UpdateTimeToLive", "DescribeContinuousBackups",
        "UpdateContinuousBackups", "TagResource", "UntagResource", "ListTagsOfResource",
    }
)  # fmt: skip


def record(principal: str, action: str, resource: str, allowed: bool) -> None:
    with _lock:
        DECISIONS.append(
            {
                "principal": principal,
                "action": action,
                "resource": resource,
                "allowed": allowed,
                "at": dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds"),
            }
        )


def decisions_payload() -> dict[str, Any]:
    with _lock:
        return {"decisions": list(DECISIONS)}


def clear_decisions() -> None:
    with _lock:
        DECISIONS.clear()


# --- the resources of a request --------------------------------------------------------------
def dynamodb_checks(action: str, params: dict[str, Any], region: str, account: str) -> list[tuple[str, str]]:
    """``[(IAM action without the prefix, resource ARN)]`` a DynamoDB request is authorised by."""

    def table(name: str, index: str | None = None) -> str:
        arn = f"arn:aws:dynamodb:{region}:{account}:table/{name}"
        return f"{arn}/index/{index}" if index else arn

    if action == "TransactWriteItems":
        out = []
        for item in params.get("TransactItems") or []:
            for kind, sub in item.items():
                out.append((_TRANSACT_WRITE.get(kind, kind), table(sub.get("TableName", "*"))))
        return out or [(action, "*")]
    if action == "TransactGetItems":
        return [("GetItem", table(i["Get"].get("TableName", "*"))) for i in params.get("TransactItems") or []]
    if action in ("BatchGetItem", "BatchWriteItem"):
        names = params.get("RequestItems") or {}
        return [(action, table(n)) for n in names] or [(action, "*")]
    if action in _TABLE_ACTIONS and params.get("TableName"):
        return [(action, table(params["TableName"], params.get("IndexName")))]
    if action in _TABLE_ACTIONS and params.get("ResourceArn"):
        return [(action, str(params["ResourceArn"]))]
    return [(action, "*")]


def eks_resource(path: str, region: str, account: str) -> str:
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "clusters":
        if len(parts) >= 4 and parts[2] == "node-groups":
            return f"arn:aws:eks:{region}:{account}:nodegroup/{parts[1]}/{parts[3]}/*"
        return f"arn:aws:eks:{region}:{account}:cluster/{parts[1]}"
    return "*"


# --- resource policies ----------------------------------------------------------------------------
# The emulator's endpoint stands for the service's HTTPS endpoint (every SDK, the CDK CLI and Lambda
# reach AWS over TLS), so a request to it carries aws:SecureTransport = true.
REQUEST_CONTEXT = {"aws:securetransport": "true"}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _wildcard(pattern: str, value: str) -> bool:
    import fnmatch

    return fnmatch.fnmatchcase(value, pattern.replace("[", "[[]"))


def condition_holds(op: str, key: str, values: list[Any], context: dict[str, str]) -> bool:
    """One condition (IAM User Guide, reference_policies_elements_condition_operators.html): a key
    the request does not carry makes it false, except for ``...IfExists`` and the negated operators."""
    have = context.get(key.lower())
    base = op.removesuffix("IfExists")
    if have is None:
        return op.endswith("IfExists") or base.startswith(("StringNot", "ArnNot"))
    wanted = [str(v) for v in values]
    if base == "Bool":
        return have.lower() in [v.lower() for v in wanted]
    if base in ("StringEquals", "ArnEquals"):
        return have in wanted
    if base in ("StringNotEquals", "ArnNotEquals"):
        return have not in wanted
    if base in ("StringLike", "ArnLike"):
        return any(_wildcard(v, have) for v in wanted)
    if base in ("StringNotLike", "ArnNotLike"):
        return not any(_wildcard(v, have) for v in wanted)
    return False  # an operator not modelled never grants, and never denies


def resource_policy_decision(
    document: dict[str, Any], action: str, resource: str, context: dict[str, str]
) -> str:
    """``"DENIED"``, ``"PERMITTED"`` or ``"NEUTRAL"``: an explicit Deny that applies wins, else an Allow
    (IAM User Guide, reference_policies_evaluation-logic.html). A statement applies when its action,
    resource and every condition match."""
    result = "NEUTRAL"
    for st in _as_list(document.get("Statement") or []):
        actions = _as_list(st.get("Action", []))
        if "NotAction" in st and any(_wildcard(a, action) for a in _as_list(st["NotAction"])):
            continue
        if "Action" in st and not any(_wildcard(a, action) for a in actions):
            continue
        resources = _as_list(st.get("Resource", "*"))
        if not any(_wildcard(r, resource) for r in resources):
            continue
        if not all(
            condition_holds(op, key, _as_list(values), context)
            for op, keys in (st.get("Condition") or {}).items()
            for key, values in keys.items()
        ):
            continue
        if st.get("Effect") == "Deny":
            return "DENIED"
        result = "PERMITTED"
    return result


# --- presigned GetCallerIdentity -------------------------------------------------------------
def _secret_for(access_key: str, token: str | None) -> tuple[str, str] | None:
    """``(secret, account)`` of an access key moto issued (an assumed role's or an IAM user's)."""
    from moto.iam.models import iam_backends
    from moto.sts.models import sts_backends

    for account, per_partition in list(sts_backends.items()):
        for backend in per_partition.values():
            for role in backend.assumed_roles:
                if role.access_key_id == access_key:
                    if token != role.session_token:
                        return None
                    return role.secret_access_key, account
    for account, iam_per_partition in list(iam_backends.items()):
        for iam_backend in iam_per_partition.values():
            for user in iam_backend.users.values():
                for key in user.access_keys:
                    if key.access_key_id == access_key and not token:
                        return key.secret_access_key, account
    return None


def presigned_caller_identity(url: str, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    """STS's answer to a presigned ``GetCallerIdentity`` URL sent with ``headers``."""
    from botocore.auth import SigV4QueryAuth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    if query.get("Action") != "GetCallerIdentity" or query.get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256":
        return 400, {"code": "InvalidAction", "message": "a presigned sts:GetCallerIdentity URL is expected"}
    try:
        access_key, _date, region, service, _term = query["X-Amz-Credential"].split("/")
        signed_at = dt.datetime.strptime(query["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.UTC)
        expires = int(query["X-Amz-Expires"])
        given = query.pop("X-Amz-Signature")
        signed = query["X-Amz-SignedHeaders"].split(";")
    except (KeyError, ValueError):
        return 403, {
            "code": "IncompleteSignature",
            "message": "the presigned URL lacks SigV4 query parameters",
        }
    if service != "sts":
        return 403, {
            "code": "SignatureDoesNotMatch",
            "message": f"credential scope is for {service}, not sts",
        }
    if dt.datetime.now(dt.UTC) > signed_at + dt.timedelta(seconds=expires):
        return 403, {"code": "ExpiredToken", "message": "Signature expired"}
    found = _secret_for(access_key, query.get("X-Amz-Security-Token"))
    if found is None:
        return 403, {
            "code": "InvalidClientTokenId",
            "message": "The security token included in the request is invalid.",
        }
    secret, account = found
    lower = {k.lower(): v for k, v in headers.items()}
    if "host" not in lower:
        lower["host"] = parts.netloc
    kept = "&".join(p for p in parts.query.split("&") if not p.startswith("X-Amz-Signature="))
    request = AWSRequest(
        method="GET",
        url=f"{parts.scheme}://{parts.netloc}{parts.path or '/'}?{kept}",
        headers={k: lower[k] for k in signed if k in lower},
    )
    request.context["timestamp"] = query["X-Amz-Date"]
    auth = SigV4QueryAuth(
        Credentials(access_key, secret, query.get("X-Amz-Security-Token")), "sts", region, expires
    )
    canonical = auth.canonical_request(request)
    expected = auth.signature(auth.string_to_sign(request, canonical), request)
    if expected != given:
        return 403, {
            "code": "SignatureDoesNotMatch",
            "message": "The request signature we calculated does not match",
        }
    from moto.sts.models import sts_backends

    user_id, arn, acct = sts_backends[account]["aws"].get_caller_identity(access_key, region)
    record(arn, "sts:GetCallerIdentity", "*", True)
    return 200, {"UserId": user_id, "Account": acct, "Arn": arn, "SignedHeaders": signed}


# --- installation ------------------------------------------------------------------------------
def json_access_denied(principal: str, action: str, resource: str, status: int) -> Exception:
    """The refusal as a JSON-protocol service answers it: ``AccessDeniedException`` with the
    resource named (DynamoDB: HTTP 400; EKS: 403). moto answered S3's XML ``AccessDenied``, which an
    SDK of a JSON service reads as the error code "403"."""
    from moto.core.exceptions import JsonRESTError

    error = JsonRESTError(
        "AccessDeniedException",
        f"User: {principal} is not authorized to perform: {action} on resource: {resource} "
        f"because no identity-based policy allows the {action} action",
    )
    error.code = status
    return error


def signing_key(headers: Any) -> str:
    """The access key id a SigV4 ``Authorization`` header names (``""`` without one)."""
    auth = str(headers.get("Authorization") or "")
    start = auth.find("Credential=")
    return auth[start + len("Credential=") :].split("/", 1)[0] if start >= 0 else ""


def enforced(self: Any) -> bool:
    """Whether this request is judged: moto's switch (``INITIAL_NO_AUTH_ACTION_COUNT`` reached), or
    session enforcement on and the request signed with temporary credentials."""
    from moto import settings
    from moto.core.authorization import ActionAuthenticatorMixin

    if ActionAuthenticatorMixin.request_count >= settings.INITIAL_NO_AUTH_ACTION_COUNT:
        return True
    return _enforce_sessions and signing_key(self.headers).startswith(TEMPORARY_KEY_PREFIX)


def _pass(self: Any) -> bool:
    """True (and counted, as moto counts) when the request is not judged."""
    from moto.core.authorization import ActionAuthenticatorMixin

    if enforced(self):
        return False
    ActionAuthenticatorMixin.request_count += 1
    return True


def _iam_request(self: Any, cls: type, action: str) -> Any:
    """moto's IAM request for this response's request, judged as ``action``."""
    path = self.raw_path
    query = urlsplit(self.uri).query
    if query:
        path += "?" + query
    return cls(
        account_id=self.current_account,
        method=self.method,
        path=path,
        data=self.data,
        body=self.raw_body,
        headers=self.headers,
        action=action,
    )


def _authorize_all(self: Any, checks: list[tuple[str, str]], denied_status: int = 400) -> None:
    """moto's ``_authenticate_and_authorize_action`` for several (action, resource) pairs; a refusal
    as :func:`json_access_denied`."""
    from moto.core.exceptions import AccessDeniedError
    from moto.iam.access_control import IAMRequest

    if _pass(self):
        return
    for i, (action, resource) in enumerate(checks):
        request = _iam_request(self, IAMRequest, action)
        if i == 0:
            request.check_signature()
        try:
            request.check_action_permitted(resource)
        except AccessDeniedError:
            principal = getattr(getattr(request, "_access_key", None), "arn", "?")
            raise json_access_denied(principal, request._action, resource, denied_status) from None


def install() -> None:
    global _installed
    if _installed:
        return
    _installed = True
    _install_judging()
    _install_service_checks()
    _install_bucket_policies()
    from topogov_local.aws import iam_simulate  # SimulatePrincipalPolicy, for topogov preflight

    iam_simulate.install()


def _install_judging() -> None:
    """Every request judged by :func:`enforced`, each decision recorded, signatures over the body
    as signed."""
    from moto.core.authorization import ActionAuthenticatorMixin
    from moto.iam.access_control import IAMRequestBase

    def authorize_action(self: Any, iam_request_cls: type, resource: str = "*") -> None:
        """moto's own, with :func:`enforced` deciding whether the request is judged."""
        if _pass(self):
            return
        if self.headers.get("X-Amz-Target") in ActionAuthenticatorMixin.PUBLIC_OPERATIONS:
            return
        request = _iam_request(self, iam_request_cls, self._get_action())
        request.check_signature()
        request.check_action_permitted(resource)

    ActionAuthenticatorMixin._authenticate_and_authorize_action = authorize_action  # type: ignore[method-assign]

    original_check = IAMRequestBase.check_action_permitted

    def check_action_permitted(self: Any, resource: str) -> None:
        principal = getattr(getattr(self, "_access_key", None), "arn", "?")
        try:
            original_check(self, resource)
        except Exception:
            record(principal, self._action, resource, False)
            raise
        record(principal, self._action, resource, True)

    IAMRequestBase.check_action_permitted = check_action_permitted  # type: ignore[method-assign]

    from botocore.awsrequest import AWSRequest

    def create_aws_request(self: Any) -> Any:
        """The request as signed: its raw body (moto signed a GET of a REST-JSON service such as
        EKS with its *headers* as a form body, when it has no query string, so no signature matched)."""
        signed = self._get_string_between("SignedHeaders=", ",", self._headers["Authorization"]).split(";")
        headers = self._create_headers_for_aws_request(signed, self._headers)
        if self._body:
            body: Any = self._body
        elif "x-www-form-urlencoded" in str(self._headers.get("Content-Type", "")):
            body = self._data  # werkzeug parsed the form: what moto signs, as before
        else:
            body = b""
        request = AWSRequest(method=self._method, url=self._path, data=body, headers=headers)
        request.context["timestamp"] = headers["X-Amz-Date"]
        return request

    IAMRequestBase._create_aws_request = create_aws_request  # type: ignore[method-assign]


def _install_service_checks() -> None:
    """DynamoDB per table and per transaction item, EKS per cluster, S3 GetObject of a missing key
    as AWS answers it: each request judged against its real resource."""
    from moto.core.authorization import ActionAuthenticatorMixin
    from moto.dynamodb.responses import DynamoHandler
    from moto.eks.responses import EKSResponse
    from moto.s3.responses import S3Response

    def dynamodb_authorize(self: Any, resource: str = "*") -> None:
        action = self._get_action()
        params = getattr(self, "params", None)
        if not isinstance(params, dict):
            try:
                params = json.loads(self.raw_body or b"{}")
            except ValueError:
                params = {}
        _authorize_all(self, dynamodb_checks(action, params, self.region, self.current_account))

    DynamoHandler._authenticate_and_authorize_normal_action = dynamodb_authorize  # type: ignore[method-assign]

    def eks_authorize(self: Any, resource: str = "*") -> None:
        _authorize_all(
            self, [(self._get_action(), eks_resource(self.path, self.region, self.current_account))], 403
        )

    EKSResponse._authenticate_and_authorize_normal_action = eks_authorize  # type: ignore[method-assign]

    original_s3 = ActionAuthenticatorMixin._authenticate_and_authorize_s3_action

    def s3_authorize(self: Any, bucket_name: str | None = None, key_name: str | None = None) -> None:
        judged = enforced(self)
        original_s3(self, bucket_name=bucket_name, key_name=key_name)
        if key_name and bucket_name and self.data.get("Action") == "GetObject" and judged:
            try:
                missing = self.backend.get_object(bucket_name, key_name) is None
            except Exception:
                missing = False
            if missing:
                from moto.iam.access_control import S3IAMRequest

                req = _iam_request(self, S3IAMRequest, "ListBucket")
                req.check_action_permitted(f"arn:aws:s3:::{bucket_name}")

    S3Response._authenticate_and_authorize_s3_action = s3_authorize  # type: ignore[method-assign]


def _install_bucket_policies() -> None:
    from moto.iam.access_control import PermissionResult
    from moto.s3.models import FakeBucket

    def get_permission(self: Any, action: str, resource: str) -> Any:
        """The bucket policy's decision with its conditions evaluated (moto ignores them, so the
        ``aws:SecureTransport = false`` Deny every SSL-only bucket carries denied every request)."""
        if self.policy is None:
            return PermissionResult.NEUTRAL
        policy = json.loads(self.policy.decode() if isinstance(self.policy, bytes) else self.policy)
        return PermissionResult[resource_policy_decision(policy, action, resource, REQUEST_CONTEXT)]

    FakeBucket.get_permission = get_permission  # type: ignore[method-assign]


def handle_control_request(method: str, path: str, body: bytes) -> tuple[int, Any]:
    global _enforce_sessions
    if path == CONTROL_SESSIONS:
        if method == "POST" and body.strip() in (b"on", b"off"):
            _enforce_sessions = body.strip() == b"on"
        elif method != "GET":
            return 400, {"message": "POST on or off"}
        return 200, {"enforceSessions": _enforce_sessions}
    if path == CONTROL_DECISIONS:
        if method == "GET":
            return 200, decisions_payload()
        if method == "DELETE":
            clear_decisions()
            return 200, {"decisions": []}
        return 405, {"message": "GET or DELETE"}
    if path == CONTROL_PRESIGNED and method == "POST":
        try:
            spec = json.loads(body or b"{}")
            return presigned_caller_identity(str(spec["url"]), dict(spec.get("headers") or {}))
        except (ValueError, KeyError, TypeError) as exc:
            return 400, {"message": f"expected {{url, headers}}: {exc}"}
    return 404, {"message": f"no such control route: {method} {path}"}
