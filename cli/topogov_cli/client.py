"""The Topogov API as the command line sees it: where it is, who is calling, what an answer means.

**Endpoint**, first found wins: ``--endpoint`` > ``TOPOGOV_ENDPOINT`` > the config file
(``$TOPOGOV_CONFIG``, else ``~/.config/topogov/config.toml``; TOML with ``endpoint = "..."`` and an
optional ``region = "..."``) > the ``"api"`` URL of ``.topogov/local/endpoints.json`` in the working
directory (written by ``topogov local``).

**Region** (the SigV4 scope): ``--region`` > the region in an ``execute-api`` host name > the config
file's ``region`` > ``AWS_REGION`` > botocore's (``AWS_DEFAULT_REGION``, the profile's) >
``us-east-1`` (the local stack's).

**Credentials**: botocore's standard chain (``botocore.session.Session``): ``--profile`` or
``AWS_PROFILE``, ``AWS_SHARED_CREDENTIALS_FILE``/``AWS_CONFIG_FILE``, environment keys, SSO,
container and instance roles. Against the local stack of the working directory (the endpoint from
its ``endpoints.json``, no ``AWS_SHARED_CREDENTIALS_FILE`` set) its ``aws-credentials`` file: the
profile asked for, else ``topogov-admin`` (said on stderr). Every request is signed for
``execute-api`` with ``topogov_cli.sigv4``.

**Answers** become exit codes in one place (``check``): 2xx is 0; the API's own
``{"error": ...}`` refusals (4xx) are 1; API Gateway's 401/403 (``{"message": ...}``: unsigned,
bad signature, expired, unknown key) and the API's 401 are 3 "not authenticated"; no connection, a
5xx or the gateway's throttling are 3.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

from topogov_cli.base import EXIT_REFUSED, EXIT_UNREACHABLE, EXIT_USAGE, LOCAL_DIR, CliError

DEFAULT_REGION = "us-east-1"
LOCAL_CREDENTIALS = LOCAL_DIR / "aws-credentials"  # written by `topogov local`: a profile per team
LOCAL_ADMIN = "topogov-admin"
ENV_ENDPOINT = "TOPOGOV_ENDPOINT"
ENV_CONFIG = "TOPOGOV_CONFIG"
_EXECUTE_API_HOST = re.compile(r"^[a-z0-9]+\.execute-api\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?$")
_ERRNO = re.compile(r"\[Errno -?\d+\] ([^'\"\)\]]+)")


@dataclass(frozen=True)
class Endpoint:
    url: str  # no trailing slash; routes (/v1/...) are appended
    source: str  # where it came from, for messages
    region: str | None = None  # from the config file
    local: bool = False  # found in ./.topogov/local/endpoints.json: the local stack's


def default_config_path() -> Path:
    return Path(os.path.expanduser("~")) / ".config" / "topogov" / "config.toml"


def _checked_url(url: str, source: str) -> str:
    url = url.strip().rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise CliError(EXIT_USAGE, f"the endpoint {url!r} ({source}) is not an http(s) URL")
    return url


def _config_file() -> tuple[Path, dict[str, Any]] | None:
    explicit = os.environ.get(ENV_CONFIG)
    path = Path(explicit) if explicit else default_config_path()
    if not path.is_file():
        if explicit:
            raise CliError(EXIT_USAGE, f"{ENV_CONFIG}={explicit}: no such file")
        return None
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise CliError(EXIT_USAGE, f"cannot read the config file {path}: {exc}") from None
    for key in ("endpoint", "region"):
        if key in doc and not isinstance(doc[key], str):
            raise CliError(EXIT_USAGE, f"{path}: {key} must be a string")
    return path, doc


def _local_endpoints() -> str | None:
    path = LOCAL_DIR / "endpoints.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    api = doc.get("api") if isinstance(doc, dict) else None
    return api if isinstance(api, str) and api else None


def find_endpoint(explicit: str | None = None) -> Endpoint | None:
    """The API endpoint by the precedence above, or None when nothing names one."""
    if explicit:
        return Endpoint(_checked_url(explicit, "--endpoint"), "--endpoint")
    env = os.environ.get(ENV_ENDPOINT)
    if env:
        return Endpoint(_checked_url(env, ENV_ENDPOINT), ENV_ENDPOINT)
    config = _config_file()
    if config is not None and config[1].get("endpoint"):
        path, doc = config
        return Endpoint(_checked_url(doc["endpoint"], str(path)), str(path), doc.get("region"))
    local = _local_endpoints()
    if local:
        where = str(LOCAL_DIR / "endpoints.json")
        return Endpoint(_checked_url(local, where), where, local=True)
    return None


def resolve_endpoint(explicit: str | None = None) -> Endpoint:
    endpoint = find_endpoint(explicit)
    if endpoint is None:
        raise CliError(
            EXIT_USAGE,
            f'no API endpoint: give --endpoint URL, set {ENV_ENDPOINT}, put endpoint = "URL" in '
            f"{default_config_path()} (or ${ENV_CONFIG}), or run `topogov local` in this directory",
        )
    return endpoint


def config_region() -> str | None:
    """The config file's ``region``, whatever named the endpoint (it belongs to the deployment)."""
    config = _config_file()
    return config[1].get("region") if config is not None else None


def _short_reason(exc: Exception) -> str:
    import requests

    if isinstance(exc, requests.exceptions.Timeout):
        return "timed out"
    found = _ERRNO.findall(str(exc))
    if found:
        return found[-1].strip().rstrip(",").lower()
    if isinstance(exc, requests.exceptions.SSLError):
        return "TLS error"
    return type(exc).__name__


@dataclass
class Api:
    """Signed calls to one endpoint. Credentials are resolved on the first call."""

    endpoint: Endpoint
    profile: str | None = None
    region_flag: str | None = None
    timeout: float = 30.0
    _session: Any = None
    _credentials: Any = None
    _region: str | None = None
    _http: Any = field(default=None, repr=False)
    signing_profile: str | None = None  # the profile the credentials came from, once resolved

    def _botocore(self) -> Any:
        if self._session is None:
            import botocore.session

            local = self._local_profile()
            if local is not None:
                self._session = botocore.session.Session(profile=local)
                self._session.set_config_variable("credentials_file", str(LOCAL_CREDENTIALS))
            else:
                # profile=None: botocore reads AWS_PROFILE itself, like every AWS tool.
                self._session = botocore.session.Session(profile=self.profile)
            self.signing_profile = local or self.profile or os.environ.get("AWS_PROFILE")
        return self._session

    def _local_profile(self) -> str | None:
        """Against the local stack found in this directory, its own credentials file just works:
        the profile asked for (--profile, AWS_PROFILE) when the file has it, else the admin, said
        once on stderr. None elsewhere, or when AWS_SHARED_CREDENTIALS_FILE names a file."""
        import configparser
        import sys

        if not self.endpoint.local or os.environ.get("AWS_SHARED_CREDENTIALS_FILE"):
            return None
        if not LOCAL_CREDENTIALS.exists():
            return None
        parser = configparser.ConfigParser()
        parser.read(LOCAL_CREDENTIALS)
        profiles = parser.sections()
        asked = self.profile or os.environ.get("AWS_PROFILE")
        if asked:
            return asked if asked in profiles else None
        chosen = LOCAL_ADMIN if LOCAL_ADMIN in profiles else (profiles[0] if len(profiles) == 1 else None)
        if chosen is not None:
            print(
                f"topogov: local stack: signing as {chosen} from {LOCAL_CREDENTIALS} "
                f"(--profile topogov-team-a to act as a team)",
                file=sys.stderr,
            )
        return chosen

    def credentials(self) -> Any:
        from botocore.exceptions import BotoCoreError

        if self._credentials is None:
            try:
                creds = self._botocore().get_credentials()
            except BotoCoreError as exc:  # unknown profile, expired SSO token, bad config file, ...
                raise CliError(EXIT_UNREACHABLE, f"not authenticated: {exc}") from None
            if creds is None:
                raise CliError(
                    EXIT_UNREACHABLE,
                    "not authenticated: no AWS credentials found (set AWS_PROFILE, e.g. with "
                    "AWS_SHARED_CREDENTIALS_FILE=.topogov/local/aws-credentials for the local stack, "
                    "or sign in with `aws sso login`)",
                )
            self._credentials = creds
        return self._credentials

    def region(self) -> str:
        if self._region is None:
            self._region = self._pick_region()
        return self._region

    def _pick_region(self) -> str:
        from botocore.exceptions import BotoCoreError

        if self.region_flag:
            return self.region_flag
        host = _EXECUTE_API_HOST.match(urlsplit(self.endpoint.url).hostname or "")
        if host:
            return host.group(1)
        configured = self.endpoint.region or config_region()
        if configured:
            return configured
        if os.environ.get("AWS_REGION"):
            return os.environ["AWS_REGION"]
        try:
            return self._botocore().get_config_variable("region") or DEFAULT_REGION
        except BotoCoreError as exc:
            raise CliError(EXIT_UNREACHABLE, f"not authenticated: {exc}") from None

    def url(self, path: str, query: dict[str, Any] | None = None) -> str:
        query = {k: v for k, v in (query or {}).items() if v is not None}
        return self.endpoint.url + path + ("?" + urlencode(query) if query else "")

    def all_jobs(self, team: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """Every job ``GET /v1/jobs`` lists (of ``team``, else of the caller's teams), page after page
        (its ``nextToken``), or the first ``limit``."""
        jobs: list[dict[str, Any]] = []
        token = None
        while limit is None or len(jobs) < limit:
            page = min(500, limit - len(jobs)) if limit is not None else 500
            answer = self.call("GET", "/v1/jobs", query={"team": team, "limit": page, "nextToken": token})
            jobs.extend(answer.get("jobs") or [])
            token = answer.get("nextToken")
            if not token:
                break
        return jobs if limit is None else jobs[:limit]

    def call(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        headers: dict[str, str] | None = None,
        text: bool = False,
    ) -> Any:
        """Sign and send one request; return the JSON answer (or the text with ``text=True``).
        Raises ``CliError`` with the exit code the answer means."""
        import requests
        from botocore.exceptions import BotoCoreError

        from topogov_cli.sigv4 import signed_request

        if self._http is None:
            self._http = requests.Session()
        url = self.url(path, query)
        try:
            resp = signed_request(
                method,
                url,
                credentials=self.credentials(),
                region=self.region(),
                json_body=body,
                headers=headers,
                timeout=self.timeout,
                session=self._http,
            )
        except BotoCoreError as exc:  # refreshing credentials (SSO, assumed role) failed while signing
            raise CliError(EXIT_UNREACHABLE, f"not authenticated: {exc}") from None
        except (requests.exceptions.InvalidURL, requests.exceptions.MissingSchema) as exc:
            raise CliError(EXIT_USAGE, f"bad endpoint URL {self.endpoint.url!r}: {exc}") from None
        except requests.exceptions.RequestException as exc:
            raise CliError(
                EXIT_UNREACHABLE,
                f"cannot reach the Topogov API at {self.endpoint.url} ({_short_reason(exc)}; "
                f"endpoint from {self.endpoint.source})",
            ) from None
        return check(resp, text=text)


def _json(resp: Any) -> Any:
    try:
        return resp.json()
    except ValueError:
        return None


def check(resp: Any, *, text: bool = False) -> Any:
    """The answer of a 2xx response; otherwise the ``CliError`` it means (see the module doc)."""
    status = resp.status_code
    if status < 300:
        if text:
            return resp.text
        body = _json(resp)
        if body is None:
            raise CliError(EXIT_UNREACHABLE, f"the API answered {status} with a body that is not JSON")
        return body
    body = _json(resp)
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict):  # the API's own answer
        code = str(err.get("code") or "ERROR")
        message = str(err.get("message") or "")
        details = err.get("details") if isinstance(err.get("details"), dict) else {}
        if status == 401:
            raise CliError(EXIT_UNREACHABLE, f"not authenticated: {message}", details, body, code)
        if status >= 500:
            raise CliError(
                EXIT_UNREACHABLE, f"the API failed ({status} {code}): {message}", details, body, code
            )
        raise CliError(EXIT_REFUSED, f"refused ({status} {code}): {message}", details, body, code)
    # API Gateway's own answer: {"message": ...} and an x-amzn-ErrorType header
    said = body.get("message") if isinstance(body, dict) else None
    message = str(said or resp.text.strip()[:200] or resp.reason or "no message").strip()
    kind = (resp.headers.get("x-amzn-ErrorType") or "").split(":")[0]
    if status in (401, 403):
        hint = ""
        if message == "Missing Authentication Token":
            hint = " (the request was not signed, or the endpoint URL has no such route)"
        elif "scoped to a valid region" in message:
            hint = ' (give --region, or region = "..." in the config file)'
        suffix = f" [{kind}]" if kind else ""
        raise CliError(EXIT_UNREACHABLE, f"not authenticated: {message}{hint}{suffix}", body=body)
    if status == 429 or status >= 500:
        raise CliError(EXIT_UNREACHABLE, f"the API gateway answered {status}: {message}", body=body)
    raise CliError(EXIT_REFUSED, f"refused ({status}): {message}", body=body)


__all__ = [
    "Api",
    "CliError",
    "Endpoint",
    "check",
    "config_region",
    "find_endpoint",
    "resolve_endpoint",
]
