"""Client-side SigV4 for the Topogov API: API Gateway with ``AWS_IAM`` authorization on every method.

``sign`` returns the headers that authenticate one request (``Authorization``, ``X-Amz-Date`` and,
for temporary credentials, ``X-Amz-Security-Token``); ``signed_request`` signs and sends it with
``requests``. The signing itself is botocore's ``SigV4Auth``; this module only pins down what it
signs, so the request that goes on the wire is exactly the request that was signed:

* the URL is first prepared the way ``requests`` will send it (``requests`` re-quotes paths);
* the query string is handed to botocore as decoded ``(name, value)`` pairs, so botocore does the
  SigV4 canonical encoding itself (names and values percent-encoded, sorted). A ``+`` in the query is
  a space, as API Gateway decodes it;
* ``timestamp`` signs as of a given instant instead of now (tests make honestly expired signatures
  with it, without patching a clock).

The local API gateway (``topogov_local.apigw``) verifies these signatures with its own canonical
request code, so the two sides check each other.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote_plus, urlsplit

import botocore.session
import requests
from botocore.auth import SIGV4_TIMESTAMP, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials, ReadOnlyCredentials
from botocore.exceptions import NoCredentialsError

SERVICE = "execute-api"

__all__ = [
    "SERVICE",
    "credentials_for_profile",
    "query_pairs",
    "sign",
    "signed_request",
    "wire_url",
]


class _SigV4AtTime(SigV4Auth):
    """botocore's SigV4 signer, signing as of a fixed instant rather than the current time."""

    def __init__(self, credentials: Any, service_name: str, region_name: str, when: dt.datetime) -> None:
        super().__init__(credentials, service_name, region_name)
        self._when = when

    def add_auth(self, request: AWSRequest) -> None:
        if self.credentials is None:
            raise NoCredentialsError()
        request.context["timestamp"] = self._when.strftime(SIGV4_TIMESTAMP)
        self._modify_request_before_signing(request)
        canonical_request = self.canonical_request(request)
        string_to_sign = self.string_to_sign(request, canonical_request)
        self._inject_signature_to_request(request, self.signature(string_to_sign, request))


def wire_url(url: str) -> str:
    """``url`` exactly as ``requests`` will put it on the wire (quoting normalised, ``/`` for an
    empty path). Signing this form, and sending it, keeps the signed path and the sent path equal."""
    prepared = requests.models.PreparedRequest()
    prepared.prepare_url(url, None)
    assert prepared.url is not None
    return prepared.url


def query_pairs(raw_query: str) -> list[tuple[str, str]]:
    """A wire query string as decoded ``(name, value)`` pairs, in order; ``+`` decodes to a space,
    a name without ``=`` has the value ``""``, empty segments (``a=1&&b=2``) are dropped."""
    pairs: list[tuple[str, str]] = []
    for part in raw_query.split("&"):
        if not part:
            continue
        name, _, value = part.partition("=")
        pairs.append((unquote_plus(name), unquote_plus(value)))
    return pairs


def _body_bytes(body: bytes | str | None) -> bytes:
    if body is None:
        return b""
    if isinstance(body, str):
        return body.encode("utf-8")
    return bytes(body)


def _frozen(credentials: Credentials | ReadOnlyCredentials) -> Any:
    """One consistent (key, secret, token) snapshot: refreshable credentials can rotate mid-sign."""
    get_frozen = getattr(credentials, "get_frozen_credentials", None)
    return get_frozen() if callable(get_frozen) else credentials


def _utc(timestamp: dt.datetime | None) -> dt.datetime:
    if timestamp is None:
        return dt.datetime.now(dt.UTC)
    if timestamp.tzinfo is None:
        return timestamp.replace(tzinfo=dt.UTC)
    return timestamp.astimezone(dt.UTC)


def sign(
    method: str,
    url: str,
    *,
    credentials: Credentials | ReadOnlyCredentials,
    region: str,
    body: bytes | str | None = None,
    headers: Mapping[str, str] | None = None,
    service: str = SERVICE,
    timestamp: dt.datetime | None = None,
) -> dict[str, str]:
    """SigV4-sign one request and return the headers to send with it: ``headers`` (all of them
    signed) plus ``X-Amz-Date`` (or an updated ``Date`` when ``headers`` has one),
    ``X-Amz-Security-Token`` when the credentials carry a session token, and ``Authorization``.

    ``Host`` is signed but not returned (the HTTP client sends it). Send the request to
    ``wire_url(url)`` with exactly ``body``; ``signed_request`` does both.
    """
    target = wire_url(url)
    request = AWSRequest(
        method=method.upper(),
        url=target,
        data=_body_bytes(body),
        headers=dict(headers or {}),
        params=query_pairs(urlsplit(target).query),
    )
    _SigV4AtTime(_frozen(credentials), service, region, _utc(timestamp)).add_auth(request)
    return dict(request.headers.items())


def signed_request(
    method: str,
    url: str,
    *,
    credentials: Credentials | ReadOnlyCredentials,
    region: str,
    json_body: Any = None,
    body: bytes | str | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float = 30,
    session: requests.Session | None = None,
    stream: bool = False,
) -> requests.Response:
    """Sign a request for ``execute-api`` in ``region`` and send it. ``json_body`` is serialised and
    sent as ``application/json`` (unless ``headers`` sets a Content-Type); pass either it or
    ``body``. Non-2xx answers are returned, not raised. ``stream``: the body is left unread
    (``response.raw``), as ``requests`` leaves it with ``stream=True``."""
    if json_body is not None and body is not None:
        raise ValueError("pass json_body or body, not both")
    send_headers = dict(headers or {})
    if json_body is not None:
        body = json.dumps(json_body).encode("utf-8")
        if not any(name.lower() == "content-type" for name in send_headers):
            send_headers["Content-Type"] = "application/json"
    data = _body_bytes(body)
    target = wire_url(url)
    signed = sign(method, target, credentials=credentials, region=region, body=data, headers=send_headers)
    http = session if session is not None else requests
    return http.request(method.upper(), target, data=data, headers=signed, timeout=timeout, stream=stream)


def credentials_for_profile(
    profile: str, credentials_file: str | os.PathLike[str] | None = None
) -> Credentials:
    """The credentials of ``profile`` in a shared-credentials file (``~/.aws/credentials`` unless
    ``credentials_file`` is given, e.g. ``.topogov/local/aws-credentials``), resolved by botocore.
    An explicit profile makes botocore ignore ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``.
    Raises ``botocore.exceptions.ProfileNotFound`` for an unknown profile.

    Keys read from a given file are kept for the file as it is (its path, size and modification
    time): a caller that signs many requests (the walkthrough polling a job, a test) paid a botocore
    session, 12 ms of processor time, for each. Credentials from anywhere else (a process, SSO, a
    role to assume) are resolved at every call."""
    key = _file_key(profile, credentials_file)
    if key is not None and key in _FROM_FILE:
        return _FROM_FILE[key]
    session = botocore.session.Session(profile=profile)
    if credentials_file is not None:
        session.set_config_variable("credentials_file", os.fspath(credentials_file))
    credentials = session.get_credentials()
    if credentials is None:
        raise NoCredentialsError()
    if key is not None and getattr(credentials, "method", None) == "shared-credentials-file":
        _FROM_FILE[key] = credentials
    return credentials


_FileKey = tuple[str, str, int, int]  # profile, the file's absolute path, its mtime (ns) and size
_FROM_FILE: dict[_FileKey, Credentials] = {}


def _file_key(profile: str, credentials_file: str | os.PathLike[str] | None) -> _FileKey | None:
    if credentials_file is None:
        return None
    try:
        st = os.stat(credentials_file)
    except OSError:
        return None
    return (profile, os.path.abspath(credentials_file), st.st_mtime_ns, st.st_size)
