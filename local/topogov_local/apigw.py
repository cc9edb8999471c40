"""A local Amazon API Gateway for the offline stack: a REST API (v1) whose every method uses ``AWS_IAM``
authorization and a Lambda proxy integration, served over HTTP on 127.0.0.1.

Each request is authenticated the way API Gateway's IAM authorization does it: the SigV4 signature in
the ``Authorization`` header is recomputed from the request as received (method, path, query string,
the signed headers, the SHA-256 of the body) with the secret of the access key it names, at the
request's own timestamp, and compared in constant time. A rejected request gets API Gateway's 403
answer (status, ``{"message": ...}`` body and ``x-amzn-ErrorType`` header); an accepted one is turned
into the REST proxy event (payload format 1.0) AWS builds - ``requestContext.identity.userArn`` is the
caller's ARN, which is what the handler authorises on - and the handler is invoked in-process. Its
proxy response is written back as the HTTP response.

The checks run in the order AWS's request authentication runs them (the same framework answers for
API Gateway, DynamoDB, ...), with AWS's messages; ``x-amzn-ErrorType`` in brackets:

* no ``Authorization`` header [MissingAuthenticationTokenException]: ``Missing Authentication Token``;
* an ``Authorization`` token that is not key=value [IncompleteSignatureException]:
  ``'<token>' not a valid key=value pair (missing equal-sign) in Authorization header: '<header>'.``;
* no Credential / Signature / SignedHeaders, or neither ``X-Amz-Date`` nor ``Date``
  [IncompleteSignatureException]: ``Authorization header requires 'Credential' parameter. ...
  Authorization=<header>``;
* an ``X-Amz-Date`` that is not ``yyyymmddThhmmssZ`` [IncompleteSignatureException]:
  ``Date must be in ISO-8601 'basic format'. Got '<value>'. See http://en.wikipedia.org/wiki/ISO_8601``;
* a timestamp more than 5 minutes old [InvalidSignatureException]:
  ``Signature expired: <t> is now earlier than <now - 5 min> (<now> - 5 min.)``, or ahead:
  ``Signature not yet current: <t> is still later than <now + 5 min> (<now> + 5 min.)``;
* ``host`` not signed [InvalidSignatureException]:
  ``'Host' must be a 'SignedHeader' in the AWS Authorization.``;
* an algorithm other than AWS4-HMAC-SHA256 [IncompleteSignatureException]:
  ``Unsupported AWS 'algorithm': '<algorithm>' (only AWS4-HMAC-SHA256 for now). ``;
* a Credential that is not keyid/date/region/service/term [IncompleteSignatureException]:
  ``Credential must have exactly 5 slash-delimited elements, e.g. keyid/date/region/service/term,
  got '<credential>'``;
* a scope with the wrong region, service, terminator or date [InvalidSignatureException], one
  sentence each, concatenated: ``Credential should be scoped to a valid region, not '<region>'. ``,
  ``Credential should be scoped to correct service: 'execute-api'. ``, ...;
* an unknown access key [UnrecognizedClientException]:
  ``The security token included in the request is invalid.``;
* a signature that does not match [InvalidSignatureException]: ``The request signature we calculated
  does not match the signature you provided. Check your AWS Secret Access Key and signing method.
  Consult the service documentation for details.``;
* a missing or wrong ``X-Amz-Security-Token`` for a caller with a session token (or one sent for a
  caller without) [UnrecognizedClientException]: ``The security token included in the request is
  invalid.``

All of them are 403. Bodies are compact JSON (``{"message":"..."}``); every response carries
``x-amzn-RequestId`` (the event's ``requestContext.requestId``) and ``x-amz-apigw-id`` (its
``extendedRequestId``). Other gateway answers: a body over 10 MB is refused before authentication with
413 ``{"message":"Request Too Long"}``; a handler that raises, or returns something that is not a
valid proxy response, gives 502 ``{"message": "Internal server error"}`` (the traceback goes to
stderr).

Deliberate differences from AWS: there is no IAM policy evaluation (any accepted key may invoke any
route - authorisation is the handler's job, as it is for Topogov); there is one greedy resource
(``/{proxy+}``, plus ``/`` for the root) and the local URL has no stage prefix (``/teams`` here is
``/v1/teams`` on AWS, which is what ``requestContext.path`` reports); presigned (query-string) SigV4 is
not accepted; there is no 29 s integration timeout.
"""

from __future__ import annotations

import base64
import binascii
import configparser
import contextlib
import datetime as dt
import decimal
import hashlib
import hmac
import json
import logging
import os
import re
import secrets
import socket
import sys
import threading
import traceback
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from email.message import Message
from email.utils import parsedate_to_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import quote, unquote, unquote_plus

from topogov_local.lambda_context import LocalContext

log = logging.getLogger(__name__)

LOCAL_ACCOUNT = "123456789012"
SERVICE = "execute-api"
ALGORITHM = "AWS4-HMAC-SHA256"
MAX_PAYLOAD_BYTES = 10 * 1024 * 1024  # API Gateway's REST API payload quota
_DRAIN_LIMIT = 64 * 1024 * 1024  # an oversized body up to this size is read and discarded (keep-alive)
_AMZ_DATE = "%Y%m%dT%H%M%SZ"
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade"}
)

MISSING_AUTHENTICATION_TOKEN = "Missing Authentication Token"
INVALID_SECURITY_TOKEN = "The security token included in the request is invalid."
SIGNATURE_MISMATCH = (
    "The request signature we calculated does not match the signature you provided. Check your AWS "
    "Secret Access Key and signing method. Consult the service documentation for details."
)
REQUEST_TOO_LONG = "Request Too Long"
INTERNAL_SERVER_ERROR = "Internal server error"


# -- callers ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Caller:
    """One access key the gateway accepts, and the identity it authenticates as."""

    access_key_id: str
    secret_access_key: str
    arn: str  # e.g. "arn:aws:iam::123456789012:user/topogov-team-a"
    account_id: str = LOCAL_ACCOUNT
    session_token: str | None = None

    @property
    def principal_id(self) -> str:
        """What API Gateway reports as ``identity.caller``/``identity.user``: the IAM unique ID
        (``AIDA...`` for a user; ``AROA...:<session>`` for an assumed role), derived here from the ARN."""
        digest = base64.b32encode(hashlib.sha256(self.arn.encode()).digest()).decode()[:17]
        if ":assumed-role/" in self.arn:
            return f"AROA{digest}:{self.arn.rsplit('/', 1)[-1]}"
        return f"AIDA{digest}"


def callers_from_credentials_file(
    path: str | os.PathLike[str], account_id: str = LOCAL_ACCOUNT
) -> dict[str, Caller]:
    """The callers of a shared-credentials file (the local stack's ``aws-credentials``), keyed by access
    key ID. Profile ``p`` is the IAM user ``arn:aws:iam::<account_id>:user/p`` (``topogov-team-a`` ->
    ``user/topogov-team-a``); an ``aws_session_token`` in the profile is required on its requests.
    Profiles without both keys are skipped."""
    parser = configparser.ConfigParser(interpolation=None)
    with open(path, encoding="utf-8") as fh:
        parser.read_file(fh)
    callers: dict[str, Caller] = {}
    for profile in parser.sections():
        section = parser[profile]
        key_id = section.get("aws_access_key_id", "").strip()
        secret = section.get("aws_secret_access_key", "").strip()
        if not key_id or not secret:
            continue
        token = section.get("aws_session_token", "").strip() or None
        callers[key_id] = Caller(
            access_key_id=key_id,
            secret_access_key=secret,
            arn=f"arn:aws:iam::{account_id}:user/{profile}",
            account_id=account_id,
            session_token=token,
        )
    return callers


# -- SigV4 verification -----------------------------------------------------------------------------------
class GatewayError(Exception):
    """An answer API Gateway gives instead of invoking the integration."""

    def __init__(self, status: int, message: str, error_type: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.error_type = error_type


def _incomplete(message: str) -> GatewayError:
    return GatewayError(403, message, "IncompleteSignatureException")


def _invalid(message: str) -> GatewayError:
    return GatewayError(403, message, "InvalidSignatureException")


def _unrecognized() -> GatewayError:
    return GatewayError(403, INVALID_SECURITY_TOKEN, "UnrecognizedClientException")


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 5.2.4, plus the SigV4 rule that empty segments (``//``) collapse."""
    segments: list[str] = []
    for segment in path.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if segments:
                segments.pop()
        else:
            segments.append(segment)
    trailing = "/" if path.endswith("/") and segments else ""
    return "/" + "/".join(segments) + trailing


def canonical_uri(raw_path: str) -> str:
    """The SigV4 canonical URI of a path as received: normalised, then URI-encoded once more (every
    service but S3 double-encodes: the wire form is encoded once already)."""
    return quote(_remove_dot_segments(raw_path or "/"), safe="/~")


def canonical_query(raw_query: str) -> str:
    """The SigV4 canonical query string of a query as received: each name and value decoded (``+`` is
    a space, as API Gateway decodes queries), re-encoded leaving only ``A-Za-z0-9-_.~`` bare, sorted."""
    pairs = []
    for part in raw_query.split("&"):
        if not part:
            continue
        name, _, value = part.partition("=")
        pairs.append((quote(unquote_plus(name), safe="-_.~"), quote(unquote_plus(value), safe="-_.~")))
    return "&".join(f"{name}={value}" for name, value in sorted(pairs))


def _hmac(key: bytes, msg: str) -> bytes:
    return hmac.new(key, msg.encode("utf-8"), hashlib.sha256).digest()


def _stamp(when: dt.datetime) -> str:
    return when.strftime(_AMZ_DATE)


def _parse_authorization(header: str) -> tuple[str, dict[str, str]]:
    """``AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=...`` -> (algorithm, params).
    Like AWS, tokens are separated by commas and/or whitespace and every one must be key=value."""
    algorithm, _, rest = header.strip().partition(" ")
    params: dict[str, str] = {}
    for token in re.split(r"[\s,]+", rest.strip()):
        if not token:
            continue
        if "=" not in token:
            raise _incomplete(
                f"'{token}' not a valid key=value pair (missing equal-sign) in Authorization header: "
                f"'{header}'."
            )
        name, _, value = token.partition("=")
        params.setdefault(name, value)
    return algorithm, params


def _parse_date(headers: Message) -> tuple[str, dt.datetime]:
    amz_date = headers.get("X-Amz-Date")
    if amz_date is not None:
        try:
            when = dt.datetime.strptime(amz_date.strip(), _AMZ_DATE).replace(tzinfo=dt.UTC)
        except ValueError:
            raise _incomplete(
                f"Date must be in ISO-8601 'basic format'. Got '{amz_date}'. "
                "See http://en.wikipedia.org/wiki/ISO_8601"
            ) from None
        return amz_date.strip(), when
    date = headers.get("Date", "")
    try:
        when = parsedate_to_datetime(date)
    except (TypeError, ValueError, IndexError):
        raise _incomplete(
            f"Date must be in ISO-8601 'basic format'. Got '{date}'. See http://en.wikipedia.org/wiki/ISO_8601"
        ) from None
    when = when.replace(tzinfo=dt.UTC) if when.tzinfo is None else when.astimezone(dt.UTC)
    return _stamp(when), when


def _skew_text(seconds: int) -> str:
    return f"{seconds // 60} min." if seconds % 60 == 0 else f"{seconds} sec."


def authenticate(
    *,
    method: str,
    raw_path: str,
    raw_query: str,
    headers: Message,
    body: bytes,
    callers: Mapping[str, Caller],
    region: str,
    now: dt.datetime,
    max_skew_s: int = 300,
) -> Caller:
    """The caller whose valid SigV4 signature (service ``execute-api``, ``region``) this request
    carries, or a ``GatewayError`` with API Gateway's answer. ``headers`` is the request's header
    block (case-insensitive, repeats kept); ``raw_path``/``raw_query`` are as received (still
    percent-encoded)."""
    authorization = headers.get("Authorization")
    if authorization is None or not authorization.strip():
        raise GatewayError(403, MISSING_AUTHENTICATION_TOKEN, "MissingAuthenticationTokenException")

    algorithm, params = _parse_authorization(authorization)
    missing = "".join(
        f"Authorization header requires '{name}' parameter. "
        for name in ("Credential", "Signature", "SignedHeaders")
        if not params.get(name)
    )
    if headers.get("X-Amz-Date") is None and headers.get("Date") is None:
        missing += "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header. "
    if missing:
        raise _incomplete(f"{missing}Authorization={authorization}")

    amz_date, signed_at = _parse_date(headers)
    now = now.astimezone(dt.UTC).replace(microsecond=0)
    skew = dt.timedelta(seconds=max_skew_s)
    if signed_at < now - skew:
        raise _invalid(
            f"Signature expired: {amz_date} is now earlier than {_stamp(now - skew)} "
            f"({_stamp(now)} - {_skew_text(max_skew_s)})"
        )
    if signed_at > now + skew:
        raise _invalid(
            f"Signature not yet current: {amz_date} is still later than {_stamp(now + skew)} "
            f"({_stamp(now)} + {_skew_text(max_skew_s)})"
        )

    signed_headers = params["SignedHeaders"]
    header_names = signed_headers.split(";")
    if "host" not in (name.lower() for name in header_names):
        raise _invalid("'Host' must be a 'SignedHeader' in the AWS Authorization.")
    if algorithm != ALGORITHM:
        raise _incomplete(f"Unsupported AWS 'algorithm': '{algorithm}' (only {ALGORITHM} for now). ")

    credential = params["Credential"]
    scope = credential.rstrip("/").split("/")
    if len(scope) != 5:
        raise _incomplete(
            "Credential must have exactly 5 slash-delimited elements, e.g. keyid/date/region/service/term,"
            f" got '{credential}'"
        )
    key_id, scope_date, scope_region, scope_service, terminator = scope
    problems = ""
    if scope_region != region:
        problems += f"Credential should be scoped to a valid region, not '{scope_region}'. "
    if scope_service != SERVICE:
        problems += f"Credential should be scoped to correct service: '{SERVICE}'. "
    if terminator != "aws4_request":
        problems += (
            f"Credential should be scoped with a valid terminator: 'aws4_request', not '{terminator}'. "
        )
    if scope_date != amz_date[:8]:
        problems += (
            "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: "
            f"'{scope_date}' != '{amz_date[:8]}', from '{amz_date}'."
        )
    if problems:
        raise _invalid(problems)

    caller = callers.get(key_id)
    if caller is None:
        raise _unrecognized()

    # The payload hash is the body's own. A client that sent X-Amz-Content-Sha256 signed with that
    # value: it is honoured when it is the real hash (or UNSIGNED-PAYLOAD); any other value does not
    # describe this body, so the signature cannot match.
    payload_hash = hashlib.sha256(body).hexdigest()
    declared = headers.get("X-Amz-Content-Sha256")
    if declared is not None and declared.strip() == "UNSIGNED-PAYLOAD":
        payload_hash = "UNSIGNED-PAYLOAD"
    canonical_headers = "".join(
        f"{name.lower()}:{','.join(' '.join(v.split()) for v in headers.get_all(name) or [])}\n"
        for name in header_names
    )
    canonical_request = "\n".join(
        (
            method,
            canonical_uri(raw_path),
            canonical_query(raw_query),
            canonical_headers,
            signed_headers,
            payload_hash,
        )
    )
    credential_scope = f"{scope_date}/{scope_region}/{scope_service}/{terminator}"
    string_to_sign = "\n".join(
        (ALGORITHM, amz_date, credential_scope, hashlib.sha256(canonical_request.encode("utf-8")).hexdigest())
    )
    key = _hmac(f"AWS4{caller.secret_access_key}".encode(), scope_date)
    for part in (scope_region, scope_service, terminator):
        key = _hmac(key, part)
    expected = hmac.new(key, string_to_sign.encode("utf-8"), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected.encode(), params["Signature"].encode()):
        log.debug(
            "signature mismatch for %s\ncanonical request:\n%s\nstring to sign:\n%s",
            key_id,
            canonical_request,
            string_to_sign,
        )
        raise _invalid(SIGNATURE_MISMATCH)

    token = headers.get("X-Amz-Security-Token")
    if caller.session_token is not None:
        if token is None or not hmac.compare_digest(token.encode(), caller.session_token.encode()):
            raise _unrecognized()
    elif token:
        raise _unrecognized()
    return caller


# -- the proxy event and response -------------------------------------------------------------------------
def _request_time(when: dt.datetime) -> str:
    """CLF time as API Gateway writes it, e.g. ``30/Nov/2026:01:23:45 +0000`` (locale-independent)."""
    return f"{when.day:02d}/{_MONTHS[when.month - 1]}/{when.year}:{when:%H:%M:%S} +0000"


def _extended_request_id() -> str:
    return base64.b64encode(secrets.token_bytes(10)).decode()  # 16 chars, like "Kx9bXFjvIAMEY0A="


def _trace_id(when: dt.datetime) -> str:
    return f"Root=1-{int(when.timestamp()):08x}-{secrets.token_hex(12)}"


def _multi(pairs: list[tuple[str, str]]) -> tuple[dict[str, str] | None, dict[str, list[str]] | None]:
    """(single-value map with the last value winning, multi-value map); ``None``s when empty."""
    if not pairs:
        return None, None
    multi: dict[str, list[str]] = {}
    for name, value in pairs:
        multi.setdefault(name, []).append(value)
    return {name: values[-1] for name, values in multi.items()}, multi


def _marshal(result: Any) -> Any:
    """The handler's return value as the Lambda runtime hands it back: JSON-serialised (Decimals as
    numbers), so a value Lambda could not return fails here too."""

    def default(value: Any) -> Any:
        if isinstance(value, decimal.Decimal):
            return int(value) if value == value.to_integral_value() else float(value)
        raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")

    return json.loads(json.dumps(result, default=default))


def _proxy_response(result: Any) -> tuple[int, list[tuple[str, str]], bytes]:
    """A Lambda proxy response -> (status, headers, body); ``ValueError`` when it is malformed (API
    Gateway answers 502 then)."""
    if not isinstance(result, dict):
        raise ValueError(f"malformed Lambda proxy response: {type(result).__name__}, not an object")
    try:
        status = int(result.get("statusCode"))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(
            f"malformed Lambda proxy response: statusCode {result.get('statusCode')!r}"
        ) from None
    if not 100 <= status <= 599:
        raise ValueError(f"malformed Lambda proxy response: statusCode {status}")
    single = result.get("headers") or {}
    multi = result.get("multiValueHeaders") or {}
    if not isinstance(single, dict) or not isinstance(multi, dict):
        raise ValueError("malformed Lambda proxy response: headers must be objects")
    merged: dict[str, list[str]] = {}
    lowered: dict[str, str] = {}
    for name, values in multi.items():
        if not isinstance(values, list):
            raise ValueError(f"malformed Lambda proxy response: multiValueHeaders[{name!r}] is not a list")
        merged[name] = [_header_text(v) for v in values]
        lowered.setdefault(name.lower(), name)
    for name, value in single.items():
        text = _header_text(value)
        existing = lowered.get(name.lower())
        if existing is None:
            merged[name] = [text]
            lowered[name.lower()] = name
        elif text not in merged[existing]:
            merged[existing].append(text)
    headers = [
        (n, v) for n, vs in merged.items() if n.lower() not in _HOP_BY_HOP | {"content-length"} for v in vs
    ]
    raw = result.get("body")
    if raw is None:
        body = b""
    elif not isinstance(raw, str):
        raise ValueError("malformed Lambda proxy response: body must be a string")
    elif result.get("isBase64Encoded"):
        try:
            body = base64.b64decode(raw, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("malformed Lambda proxy response: body is not valid base64") from None
    else:
        body = raw.encode("utf-8")
    return status, headers, body


def _header_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def _json_message(message: str) -> bytes:
    return json.dumps({"message": message}, separators=(",", ":")).encode()


# -- the server -------------------------------------------------------------------------------------------
def match_route(routes: Mapping[str, Collection[str]], path: str) -> tuple[str, dict[str, str]] | None:
    """The resource of ``routes`` (API Gateway paths such as ``/v1/jobs/{team}/{name}``) that ``path``
    reaches, with its path parameters; a literal segment wins over a parameter, as API Gateway
    chooses the most specific resource. ``None``: no resource (API Gateway answers 403)."""
    segments = [s for s in path.split("/") if s] if path != "/" else []
    best: tuple[int, str, dict[str, str]] | None = None
    for template in routes:
        parts = [s for s in template.split("/") if s]
        if len(parts) != len(segments):
            continue
        params: dict[str, str] = {}
        for part, seg in zip(parts, segments, strict=True):
            if part.startswith("{") and part.endswith("}"):
                params[part[1:-1]] = seg
            elif part != seg:
                break
        else:
            if best is None or len(params) < best[0]:
                best = (len(params), template, params)
    return None if best is None else (best[1], best[2])


class LocalApiGateway:
    """A local API Gateway REST API (``AWS_IAM`` everywhere, Lambda proxy integration) in front of an
    in-process handler, served from a daemon thread. ``port=0`` picks a free port; ``url`` has it.

    ``routes`` are the REST API's resources and their methods, as deployed (``{resource path:
    [methods]}``): a request to a path no resource has, or with a method its resource lacks, is
    answered as API Gateway answers it — 403 ``Missing Authentication Token`` — without reaching the
    handler, and the event carries the matched ``resource`` and ``pathParameters``. Without
    ``routes`` the API has one greedy ``/{proxy+}`` resource (ANY), which reaches everything."""

    def __init__(
        self,
        handler: Callable[[dict[str, Any], Any], dict[str, Any]],
        callers: Mapping[str, Caller],
        *,
        host: str = "127.0.0.1",
        port: int = 8080,
        region: str = "us-east-1",
        stage: str = "v1",
        api_id: str = "topogovlocal",
        max_skew_s: int = 300,
        context_factory: Callable[[], Any] = LocalContext,
        account_id: str = LOCAL_ACCOUNT,
        routes: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self.handler = handler
        self.routes = None if routes is None else {p: {m.upper() for m in ms} for p, ms in routes.items()}
        # One Lambda execution environment serves one request at a time, and the handler module's
        # state (Powertools' resolver keeps the current event on the app object) relies on it: the
        # gateway authenticates concurrently but invokes the handler one request at a time.
        self.environment_lock = threading.Lock()
        self.callers: dict[str, Caller] = dict(callers)
        self.host = host
        self.port = port
        self.region = region
        self.stage = stage
        self.api_id = api_id
        self.max_skew_s = max_skew_s
        self.context_factory = context_factory
        self.account_id = account_id
        seed = hashlib.sha256(f"{account_id}/{api_id}/{stage}".encode()).hexdigest()
        self.resource_id = seed[:6]
        self.deployment_id = seed[6:12]
        self._httpd: _Httpd | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    # -- lifecycle ----------------------------------------------------------------------------------------
    def start(self) -> LocalApiGateway:
        if self._httpd is not None:
            return self
        self._httpd = _Httpd((self.host, self.port), self)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.1},
            name="topogov-local-apigw",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        with httpd.sockets_lock:
            open_sockets = list(httpd.open_sockets)
        for sock in open_sockets:  # idle keep-alive connections would otherwise outlive the server
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> LocalApiGateway:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- one request --------------------------------------------------------------------------------------
    def resource_of(self, path: str) -> tuple[str, dict[str, str] | None] | None:
        """(resource, path parameters) of a decoded path; ``None`` when no resource has it."""
        if self.routes is None:
            return ("/", None) if path == "/" else ("/{proxy+}", {"proxy": path[1:]})
        found = match_route(self.routes, path)
        if found is None:
            return None
        return found[0], (found[1] or None)

    def routed(self, method: str, path: str) -> bool:
        """Whether the API has a method ``method`` on the resource ``path`` reaches."""
        if self.routes is None:
            return True
        found = match_route(self.routes, path)
        return found is not None and method in self.routes[found[0]]

    def build_event(
        self,
        *,
        method: str,
        raw_path: str,
        raw_query: str,
        header_pairs: list[tuple[str, str]],
        body: bytes,
        caller: Caller,
        source_ip: str,
        received: dt.datetime,
        request_id: str,
        extended_request_id: str,
        trace_id: str,
    ) -> dict[str, Any]:
        """The REST API proxy event (payload format 1.0) for an authenticated request."""
        path = unquote(raw_path) or "/"
        resource, path_parameters = self.resource_of(path) or ("/", None)

        pairs = [(n, v) for n, v in header_pairs if n.lower() not in _HOP_BY_HOP]
        forwarded_for = next((v for n, v in pairs if n.lower() == "x-forwarded-for"), None)
        pairs = [(n, v) for n, v in pairs if n.lower() not in ("x-forwarded-for", "x-amzn-trace-id")]
        pairs += [
            ("X-Amzn-Trace-Id", trace_id),
            ("X-Forwarded-For", f"{forwarded_for}, {source_ip}" if forwarded_for else source_ip),
            ("X-Forwarded-Port", str(self.port)),
            ("X-Forwarded-Proto", "http"),
        ]
        # One key per header name, spelt as it first arrived (HTTP names are case-insensitive).
        spelling: dict[str, str] = {}
        for name, _ in pairs:
            spelling.setdefault(name.lower(), name)
        headers, multi_headers = _multi([(spelling[n.lower()], v) for n, v in pairs])
        query = [
            (unquote_plus(n), unquote_plus(v))
            for n, _, v in (p.partition("=") for p in raw_query.split("&") if p)
        ]
        query_single, query_multi = _multi(query)

        if not body:
            event_body, is_base64 = None, False
        else:
            try:
                event_body, is_base64 = body.decode("utf-8"), False
            except UnicodeDecodeError:
                event_body, is_base64 = base64.b64encode(body).decode("ascii"), True

        host = (headers or {}).get(spelling.get("host", "Host"), f"{self.host}:{self.port}")
        user_agent = next((v for n, v in pairs if n.lower() == "user-agent"), None)
        return {
            "resource": resource,
            "path": path,
            "httpMethod": method,
            "headers": headers or {},
            "multiValueHeaders": multi_headers or {},
            "queryStringParameters": query_single,
            "multiValueQueryStringParameters": query_multi,
            "pathParameters": path_parameters,
            "stageVariables": None,
            "requestContext": {
                "resourceId": self.resource_id,
                "resourcePath": resource,
                "httpMethod": method,
                "extendedRequestId": extended_request_id,
                "requestTime": _request_time(received),
                "path": f"/{self.stage}{raw_path}",
                "accountId": self.account_id,
                "protocol": "HTTP/1.1",
                "stage": self.stage,
                "domainPrefix": host.split(".")[0].split(":")[0],
                "requestTimeEpoch": int(received.timestamp() * 1000),
                "requestId": request_id,
                "identity": {
                    "cognitoIdentityPoolId": None,
                    "accountId": caller.account_id,
                    "cognitoIdentityId": None,
                    "caller": caller.principal_id,
                    "sourceIp": source_ip,
                    "principalOrgId": None,
                    "accessKey": caller.access_key_id,
                    "cognitoAuthenticationType": None,
                    "cognitoAuthenticationProvider": None,
                    "userArn": caller.arn,
                    "userAgent": user_agent,
                    "user": caller.principal_id,
                },
                "domainName": host,
                "deploymentId": self.deployment_id,
                "apiId": self.api_id,
            },
            "body": event_body,
            "isBase64Encoded": is_base64,
        }


class _BodyTooLarge(Exception):
    def __init__(self, drained: bool) -> None:
        super().__init__("request body over the payload limit")
        self.drained = drained


class _Httpd(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, addr: tuple[str, int], gateway: LocalApiGateway) -> None:
        self.gateway = gateway
        self.open_sockets: set[socket.socket] = set()
        self.sockets_lock = threading.Lock()
        super().__init__(addr, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.sockets_lock:
            self.open_sockets.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.sockets_lock:
            self.open_sockets.discard(request)
        super().shutdown_request(request)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    timeout = 120  # an idle keep-alive connection is closed after this
    server: _Httpd

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def send_response(self, code: int, message: str | None = None) -> None:
        # BaseHTTPRequestHandler would add a "Server: BaseHTTP/..." header; API Gateway sends none.
        self.send_response_only(code, message)
        self.send_header("Date", self.date_time_string())

    def do_GET(self) -> None:
        self._dispatch()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = do_GET

    # -- plumbing -----------------------------------------------------------------------------------------
    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return self._read_chunked()
        length_header = self.headers.get("Content-Length")
        if length_header is None:
            return b""
        try:
            length = int(length_header)
            if length < 0:
                raise ValueError
        except ValueError:
            raise GatewayError(400, "Bad Request") from None
        if length > MAX_PAYLOAD_BYTES:
            if length > _DRAIN_LIMIT:
                raise _BodyTooLarge(drained=False)
            remaining = length
            while remaining:
                chunk = self.rfile.read(min(remaining, 1 << 20))
                if not chunk:
                    raise _BodyTooLarge(drained=False)
                remaining -= len(chunk)
            raise _BodyTooLarge(drained=True)
        body = self.rfile.read(length)
        if len(body) != length:
            raise GatewayError(400, "Bad Request")
        return body

    def _read_chunked(self) -> bytes:
        parts: list[bytes] = []
        total = 0
        while True:
            size_line = self.rfile.readline(1024)
            try:
                size = int(size_line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise GatewayError(400, "Bad Request") from None
            if size == 0:
                while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                break
            total += size
            if total > _DRAIN_LIMIT:
                raise _BodyTooLarge(drained=False)
            data = self.rfile.read(size)
            self.rfile.readline(8)  # CRLF after the chunk
            if total <= MAX_PAYLOAD_BYTES:
                parts.append(data)
        if total > MAX_PAYLOAD_BYTES:
            raise _BodyTooLarge(drained=True)
        return b"".join(parts)

    def _send(self, status: int, headers: list[tuple[str, str]], body: bytes, *, close: bool = False) -> None:
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        if close:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)
        self.wfile.flush()

    def _send_error(self, error: GatewayError, ids: list[tuple[str, str]], *, close: bool = False) -> None:
        headers = [("Content-Type", "application/json"), *ids]
        if error.error_type:
            headers.append(("x-amzn-ErrorType", error.error_type))
        self._send(error.status, headers, _json_message(error.message), close=close)

    def _dispatch(self) -> None:
        gateway = self.server.gateway
        received = dt.datetime.now(dt.UTC)
        request_id = str(uuid.uuid4())
        extended_request_id = _extended_request_id()
        ids = [("x-amzn-RequestId", request_id), ("x-amz-apigw-id", extended_request_id)]
        try:
            body = self._read_body()
        except _BodyTooLarge as exc:
            self._send_error(GatewayError(413, REQUEST_TOO_LONG), ids, close=not exc.drained)
            return
        except GatewayError as exc:
            self._send_error(exc, ids, close=True)
            return

        raw_path, _, raw_query = self.path.partition("?")
        if not raw_path.startswith("/"):  # absolute-form request target
            raw_path = "/" + raw_path.split("://", 1)[-1].partition("/")[2]
        method = self.command.upper()
        if not gateway.routed(method, unquote(raw_path) or "/"):
            # No such resource or method: API Gateway answers before it authenticates anything.
            self._send_error(
                GatewayError(403, MISSING_AUTHENTICATION_TOKEN, "MissingAuthenticationTokenException"), ids
            )
            return
        try:
            caller = authenticate(
                method=method,
                raw_path=raw_path,
                raw_query=raw_query,
                headers=self.headers,
                body=body,
                callers=gateway.callers,
                region=gateway.region,
                now=received,
                max_skew_s=gateway.max_skew_s,
            )
        except GatewayError as exc:
            self._send_error(exc, ids)
            return

        trace_id = _trace_id(received)
        event = gateway.build_event(
            method=method,
            raw_path=raw_path,
            raw_query=raw_query,
            header_pairs=list(self.headers.items()),
            body=body,
            caller=caller,
            source_ip=self.client_address[0],
            received=received,
            request_id=request_id,
            extended_request_id=extended_request_id,
            trace_id=trace_id,
        )
        try:
            with gateway.environment_lock:
                result = gateway.handler(event, gateway.context_factory())
            status, headers, payload = _proxy_response(_marshal(result))
        except Exception:
            print(
                f"topogov local API gateway: {method} {raw_path} (request {request_id}) failed:",
                file=sys.stderr,
            )
            traceback.print_exc(file=sys.stderr)
            sys.stderr.flush()
            # API Gateway's 502 body is {"message": "Internal server error"}, spaced, unlike its 403s.
            self._send(
                502,
                [
                    ("Content-Type", "application/json"),
                    *ids,
                    ("x-amzn-ErrorType", "InternalServerErrorException"),
                ],
                json.dumps({"message": INTERNAL_SERVER_ERROR}).encode(),
            )
            return

        if not any(name.lower() == "content-type" for name, _ in headers):
            headers.append(("Content-Type", "application/json"))
        headers += [*ids, ("X-Amzn-Trace-Id", trace_id)]
        self._send(status, headers, payload)


__all__ = [
    "INTERNAL_SERVER_ERROR",
    "INVALID_SECURITY_TOKEN",
    "MAX_PAYLOAD_BYTES",
    "MISSING_AUTHENTICATION_TOKEN",
    "REQUEST_TOO_LONG",
    "SIGNATURE_MISMATCH",
    "Caller",
    "GatewayError",
    "LocalApiGateway",
    "authenticate",
    "callers_from_credentials_file",
]
