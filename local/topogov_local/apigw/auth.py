"""API Gateway's IAM authorisation: the callers (from a shared-credentials file) and SigV4 verified
from the request as received, with API Gateway's own 403 answers (see the package docstring)."""

from __future__ import annotations

import base64
import configparser
import datetime as dt
import hashlib
import hmac
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from email.message import Message
from email.utils import parsedate_to_datetime
from urllib.parse import quote, unquote_plus

log = logging.getLogger(__name__)

LOCAL_ACCOUNT = "123456789012"
SERVICE = "execute-api"
ALGORITHM = "AWS4-HMAC-SHA256"
MAX_PAYLOAD_BYTES = 10 * 1024 * 1024  # API Gateway's REST API payload quota
DRAIN_LIMIT = 64 * 1024 * 1024  # an oversized body up to this size is read and discarded (keep-alive)
_AMZ_DATE = "%Y%m%dT%H%M%SZ"
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
HOP_BY_HOP = frozenset(
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
    _require_parts(params, headers, authorization)
    amz_date = _check_date(headers, now, max_skew_s)
    signed_headers = params["SignedHeaders"]
    header_names = signed_headers.split(";")
    if "host" not in (name.lower() for name in header_names):
        raise _invalid("'Host' must be a 'SignedHeader' in the AWS Authorization.")
    if algorithm != ALGORITHM:
        raise _incomplete(f"Unsupported AWS 'algorithm': '{algorithm}' (only {ALGORITHM} for now). ")

    key_id, scope_date, scope_region, scope_service, terminator = _scope(
        params["Credential"], region, amz_date
    )
    caller = callers.get(key_id)
    if caller is None:
        raise _unrecognized()

    _check_signature(
        method, raw_path, raw_query, headers, body, params, caller, amz_date,
        (scope_date, scope_region, scope_service, terminator),
    )  # fmt: skip

    token = headers.get("X-Amz-Security-Token")
    if caller.session_token is not None:
        if token is None or not hmac.compare_digest(token.encode(), caller.session_token.encode()):
            raise _unrecognized()
    elif token:
        raise _unrecognized()
    return caller


def _require_parts(params: Mapping[str, str], headers: Message, authorization: str) -> None:
    """Credential, Signature and SignedHeaders, and a date header: API Gateway names each missing one."""
    missing = "".join(
        f"Authorization header requires '{name}' parameter. "
        for name in ("Credential", "Signature", "SignedHeaders")
        if not params.get(name)
    )
    if headers.get("X-Amz-Date") is None and headers.get("Date") is None:
        missing += "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header. "
    if missing:
        raise _incomplete(f"{missing}Authorization={authorization}")


def _check_date(headers: Message, now: dt.datetime, max_skew_s: int) -> str:
    """The request's date (``X-Amz-Date`` form), within ``max_skew_s`` of ``now`` either way."""
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
    return amz_date


def _scope(credential: str, region: str, amz_date: str) -> tuple[str, str, str, str, str]:
    """The credential's key id and scope (date, region, service, terminator), each checked, every
    problem named in one answer as API Gateway does."""
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
    return key_id, scope_date, scope_region, scope_service, terminator


def _check_signature(
    method: str,
    raw_path: str,
    raw_query: str,
    headers: Message,
    body: bytes,
    params: Mapping[str, str],
    caller: Caller,
    amz_date: str,
    scope: tuple[str, str, str, str],
) -> None:
    """The signature SigV4 gives this request under the caller's secret, against the one it carries."""
    scope_date, scope_region, scope_service, terminator = scope
    signed_headers = params["SignedHeaders"]
    header_names = signed_headers.split(";")
    key_id = params["Credential"].split("/", 1)[0]
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
