"""The dashboard's local web server: the page, and a proxy that signs the page's calls to the Topogov
API with the user's own credentials (like ``kubectl proxy``). Standard library HTTP server; the
signing is the CLI's (``topogov_cli.client.Api``: endpoint resolution, region, the credential chain,
``topogov_cli.sigv4``).

What it forwards, and to whom:

* only the API routes the page reads (``ROUTES``: four GET routes, and ``POST /v1/whatif`` for the
  what-if page), with only the query parameters the page sends; never another path or host;
* only to a request whose ``Host`` is this server's own address (``127.0.0.1:PORT`` or
  ``localhost:PORT``), so a web page on another name that resolves to 127.0.0.1 (DNS rebinding)
  gets 403; and, when the browser sends ``Origin`` (every POST, every cross-site fetch), only from
  this server's own origin, so another page open in the same browser cannot make it sign a call
  (CSRF) or read an answer;
* only with the session cookie a login link sets: the printed URL (``/?token=...``) holds a random
  token that is good once (and for :data:`LOGIN_S`), exchanged at its first use for an HttpOnly,
  SameSite=Strict session cookie named after the server's port (``topogov_dashboard_<port>``: a
  browser sends 127.0.0.1's cookies to every port, and another dashboard ignores this one), good for
  :data:`SESSION_S`. So another user of the same machine, who can reach 127.0.0.1 too, cannot use your
  credentials, and a link seen later (in a shell's history, a process list) opens nothing.

Answers are the API's, status and body, gzip-compressed when the browser accepts it; nothing is
cached or kept. The server asks the API for gzip (``Accept-Encoding: gzip``; API Gateway compresses
answers of at least the API's ``minimumCompressionSize``) and passes a gzipped answer on as it came,
or unpacks it for a browser that does not accept gzip; an answer that came uncompressed is gzipped
here when it is over 1 KiB.
"""

from __future__ import annotations

import gzip
import hmac
import json
import mimetypes
import re
import secrets
import sys
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

STATIC = Path(__file__).resolve().parent / "static"  # built by `make install` (npm run build:dashboard)
COOKIE = "topogov_dashboard"  # + "_<port>"
LOGIN_S = 600.0  # a login link is good this long, once
SESSION_S = 12 * 3600.0  # a session cookie is good this long
MAX_BODY = 1024 * 1024  # the API's own limit on a request body
_NAME = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"  # a team or Job name: a DNS label, as the API checks

# (method, path pattern, allowed query parameters and their pattern)
ROUTES: tuple[tuple[str, re.Pattern[str], dict[str, re.Pattern[str]]], ...] = (
    ("GET", re.compile(r"/v1/topology"), {"view": re.compile("capacity"), "nodes": re.compile("true")}),
    ("GET", re.compile(r"/v1/teams"), {}),
    (
        "GET",
        re.compile(r"/v1/jobs"),
        {
            "team": re.compile(_NAME),
            "limit": re.compile(r"[1-9][0-9]{0,2}"),
            "nextToken": re.compile(r"[-_A-Za-z0-9]{1,512}"),
        },
    ),
    ("GET", re.compile(rf"/v1/jobs/{_NAME}/{_NAME}"), {}),
    ("POST", re.compile(r"/v1/whatif"), {}),
)


class Refused(Exception):
    """A request the proxy does not forward: its status and the reason, named."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def allowed(method: str, path: str, query: str) -> list[tuple[str, str]]:
    """The query of an API call the page may make, as pairs; ``Refused`` (404 or 400) otherwise."""
    for verb, pattern, params in ROUTES:
        if pattern.fullmatch(path) is None:
            continue
        if verb != method:
            raise Refused(405, "METHOD_NOT_ALLOWED", f"{method} {path}: the dashboard forwards only {verb}")
        pairs = parse_qsl(query, keep_blank_values=True)
        for name, value in pairs:
            if name not in params:
                raise Refused(400, "VALIDATION_ERROR", f"query parameter {name!r}: not forwarded for {path}")
            if params[name].fullmatch(value) is None:
                raise Refused(400, "VALIDATION_ERROR", f"query parameter {name!r}: {value!r} is not allowed")
        return pairs
    raise Refused(404, "NOT_FOUND", f"{path}: not an API route the dashboard forwards")


@dataclass
class Upstream:
    """The signed calls: ``forward(method, path, query pairs, body) -> (status, JSON body, its
    Content-Encoding)``: the body as it came over the wire, ``None`` when it was not compressed."""

    forward: Callable[[str, str, list[tuple[str, str]], bytes | None], tuple[int, bytes, str | None]]
    describe: dict[str, Any] = field(default_factory=dict)  # what the page says of it (signed as, endpoint)


def api_upstream(api: Any, profile_shown: str | None) -> Upstream:
    """Calls through ``api`` (a ``topogov_cli.client.Api``): signed by ``topogov_cli.sigv4`` with its
    credentials and region, one ``requests`` session per server thread."""
    import requests
    import urllib3

    from topogov_cli.base import CliError
    from topogov_cli.sigv4 import signed_request

    local = threading.local()
    url = api.endpoint.url

    def forward(
        method: str, path: str, query: list[tuple[str, str]], body: bytes | None
    ) -> tuple[int, bytes, str | None]:
        if not hasattr(local, "http"):
            local.http = requests.Session()
            local.http.headers["Accept-Encoding"] = "gzip"  # sent, not signed: a proxy may rewrite it
        try:
            resp = signed_request(
                method, api.url(path, dict(query)), credentials=api.credentials(), region=api.region(),
                body=body, headers={"Content-Type": "application/json"} if body is not None else None,
                timeout=api.timeout, session=local.http, stream=True,
            )  # fmt: skip
            try:  # the bytes as they came: a gzipped answer is passed on without unpacking it
                raw = resp.raw.read(decode_content=False)
            finally:
                resp.close()
        except CliError as exc:  # no credentials, an unknown profile, an expired SSO token
            return 401, _error("NOT_AUTHENTICATED", exc.message), None
        except requests.exceptions.RequestException as exc:
            return 502, _error("UNREACHABLE", f"cannot reach the Topogov API at {url}: {exc}"), None
        except (urllib3.exceptions.HTTPError, OSError) as exc:  # lost while reading the answer
            return 502, _error("UNREACHABLE", f"the Topogov API at {url} broke off: {exc}"), None
        return resp.status_code, raw, resp.headers.get("Content-Encoding")

    return Upstream(forward, {"endpoint": api.endpoint.url, "signed_as": profile_shown})


def _error(code: str, message: str) -> bytes:
    return json.dumps({"error": {"code": code, "message": message, "details": {}}}).encode()


class DashboardServer(ThreadingHTTPServer):
    """Bound to 127.0.0.1 only; ``port`` 0 picks a free one. ``url`` carries the session token."""

    daemon_threads = True
    allow_reuse_address = False

    def __init__(self, upstream: Upstream, port: int = 0, *, refresh_s: float = 10.0, static: Path = STATIC):
        self.upstream = upstream
        self.refresh_s = refresh_s
        self.static = static
        self._logins: dict[str, float] = {}  # unused login tokens -> when they stop being good
        self._sessions: dict[str, float] = {}  # session cookies -> when they stop being good
        self._lock = threading.Lock()
        super().__init__(("127.0.0.1", port), Handler)
        self.url = self.login_url()  # the first login link (the one topogov dashboard prints)

    @property
    def cookie(self) -> str:
        return f"{COOKIE}_{self.port}"

    def login_url(self) -> str:
        """A new login link: good once, for :data:`LOGIN_S`."""
        token = secrets.token_urlsafe(24)
        with self._lock:
            self._logins[token] = time.monotonic() + LOGIN_S
        return f"{self.origin}/?token={token}"

    def log_in(self, token: str) -> str | None:
        """The session a login token opens (the token is spent), or None when it is not a good one."""
        now = time.monotonic()
        with self._lock:
            until = next((u for t, u in self._logins.items() if hmac.compare_digest(t, token)), None)
            self._logins = {
                t: u for t, u in self._logins.items() if u > now and not hmac.compare_digest(t, token)
            }
            if until is None or until <= now:
                return None
            session = secrets.token_urlsafe(32)
            self._sessions[session] = now + SESSION_S
            return session

    def in_session(self, cookie: str) -> bool:
        now = time.monotonic()
        with self._lock:
            return any(hmac.compare_digest(s, cookie) and u > now for s, u in self._sessions.items())

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def hosts(self) -> set[str]:
        return {f"127.0.0.1:{self.port}", f"localhost:{self.port}"}

    def start(self) -> threading.Thread:
        thread = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.1}, name="topogov-dashboard", daemon=True
        )
        thread.start()
        return thread

    def stop(self) -> None:
        self.shutdown()
        self.server_close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A browser that went away before its answer was sent (a reload, a closed tab) is no error."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


class Handler(BaseHTTPRequestHandler):
    server: DashboardServer
    protocol_version = "HTTP/1.1"
    server_version = "topogov-dashboard"

    def log_message(self, format: str, *args: Any) -> None:
        return  # the page polls: a line per request would bury the URL

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _serve(self, method: str) -> None:
        try:
            self._check_host_and_origin(method)
            parts = urlsplit(self.path)
            if parts.path.startswith("/api/"):
                self._check_session()
                self._proxy(method, parts.path[len("/api") :], parts.query)
            elif method != "GET":
                raise Refused(405, "METHOD_NOT_ALLOWED", f"{method} {parts.path}: the page is read with GET")
            elif parts.path == "/_dashboard/info":
                self._check_session()
                self._send(200, json.dumps(self._info()).encode(), "application/json")
            else:
                self._page(parts.path, parts.query)
        except Refused as exc:
            self.close_connection = True  # a body it did not read must not be taken for a request
            self._send(exc.status, _error(exc.code, exc.message), "application/json")

    def _check_host_and_origin(self, method: str) -> None:
        host = self.headers.get("Host", "")
        if host not in self.server.hosts():
            raise Refused(403, "FORBIDDEN", f"Host {host!r} is not this dashboard's (DNS rebinding?)")
        origin = self.headers.get("Origin")
        own = {f"http://{h}" for h in self.server.hosts()}
        if origin is not None and origin not in own:
            raise Refused(403, "FORBIDDEN", f"Origin {origin!r} is not this dashboard's")
        if method != "GET" and origin is None:
            raise Refused(403, "FORBIDDEN", f"{method} without an Origin header: only the page may send it")

    def _check_session(self) -> None:
        cookies = dict(
            part.strip().split("=", 1) for part in self.headers.get("Cookie", "").split(";") if "=" in part
        )
        if not self.server.in_session(cookies.get(self.server.cookie, "")):
            raise Refused(
                401, "NOT_AUTHENTICATED", "no dashboard session: open the URL topogov dashboard printed"
            )

    def _info(self) -> dict[str, Any]:
        return {**self.server.upstream.describe, "refresh_s": self.server.refresh_s}

    def _proxy(self, method: str, path: str, query: str) -> None:
        pairs = allowed(method, path, query)
        body = None
        if method == "POST":
            if "application/json" not in (self.headers.get("Content-Type") or ""):
                raise Refused(
                    415, "UNSUPPORTED_MEDIA_TYPE", "Content-Type: the body must be application/json"
                )
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                raise Refused(413, "PAYLOAD_TOO_LARGE", f"body: {length} bytes, at most {MAX_BODY}")
            body = self.rfile.read(length)
        status, answer, encoding = self.server.upstream.forward(method, path, pairs, body)
        if encoding not in (None, "identity", "gzip", "deflate"):
            said = f"the API answered in Content-Encoding {encoding!r}; the dashboard asked for gzip"
            raise Refused(502, "BAD_GATEWAY", said)
        self._send(status, answer, "application/json", encoding)

    def _page(self, path: str, query: str) -> None:
        token = dict(parse_qsl(query)).get("token")
        if path == "/" and token is not None:
            session = self.server.log_in(token)
            if session is None:
                raise Refused(
                    401,
                    "NOT_AUTHENTICATED",
                    "token: not a login link of this dashboard, or one already used (each opens one "
                    "browser, once): start topogov dashboard again for a new one",
                )
            self.send_response(303)
            self.send_header("Location", "/")
            cookie = (
                f"{self.server.cookie}={session}; HttpOnly; SameSite=Strict; Path=/; Max-Age={int(SESSION_S)}"
            )
            self.send_header("Set-Cookie", cookie)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        name = "index.html" if path in ("/", "/index.html") else path.lstrip("/")
        if not re.fullmatch(r"[a-z0-9][a-z0-9._-]*", name) or name.startswith("."):
            raise Refused(404, "NOT_FOUND", f"{path}: no such file")
        file = self.server.static / name
        if not file.is_file():
            if not (self.server.static / "index.html").is_file():
                raise Refused(503, "NOT_BUILT", NOT_BUILT)
            raise Refused(404, "NOT_FOUND", f"{path}: no such file")
        kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
        self._send(200, file.read_bytes(), kind + ("; charset=utf-8" if kind.startswith("text/") else ""))

    def _send(self, status: int, body: bytes, content_type: str, encoding: str | None = None) -> None:
        """``body`` (in ``encoding`` when the API sent it compressed) as the browser accepts it:
        gzip passed on as it came, gzipped here when over 1 KiB, else as it is."""
        accepts = "gzip" in (self.headers.get("Accept-Encoding") or "")
        if encoding == "deflate" or (encoding == "gzip" and not accepts):
            body, encoding = _decoded(body, encoding), None
        gzipped = encoding == "gzip" or (accepts and len(body) > 1024)
        if gzipped and encoding != "gzip":
            body = gzip.compress(body, compresslevel=6)
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if gzipped:
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Content-Security-Policy", CSP)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)


def _decoded(body: bytes, encoding: str) -> bytes:
    """``body`` unpacked from ``encoding`` (gzip or deflate); ``Refused`` (502) when it is not."""
    try:
        return gzip.decompress(body) if encoding == "gzip" else zlib.decompress(body)
    except (OSError, EOFError, zlib.error) as exc:
        raise Refused(502, "BAD_GATEWAY", f"the API's answer is not valid {encoding}: {exc}") from None


NOT_BUILT = (
    "the dashboard's page is not built in this installation: run `make install` (or `npm ci && npm run "
    "build:dashboard`) in the repository, then start topogov dashboard again"
)
