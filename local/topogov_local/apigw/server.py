"""The gateway itself: an HTTP server in a thread, routing to the deployed resources, authenticating,
invoking the handler one request at a time."""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import hashlib
import json
import socket
import sys
import threading
import traceback
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, unquote_plus

from topogov_local.apigw.auth import (
    DRAIN_LIMIT,
    HOP_BY_HOP,
    INTERNAL_SERVER_ERROR,
    LOCAL_ACCOUNT,
    MAX_PAYLOAD_BYTES,
    MISSING_AUTHENTICATION_TOKEN,
    REQUEST_TOO_LONG,
    Caller,
    GatewayError,
    authenticate,
)
from topogov_local.apigw.compression import compressed
from topogov_local.apigw.proxy import (
    header_maps,
    json_message,
    marshal,
    new_extended_request_id,
    new_trace_id,
    proxy_response,
    request_time,
)
from topogov_local.lambda_context import LocalContext


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
        minimum_compression_size: int | None = None,
    ) -> None:
        self.handler = handler
        # the RestApi's minimumCompressionSize: None, compression off (see .compression)
        self.minimum_compression_size = minimum_compression_size
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

    def trust(self, caller: Caller) -> None:
        """Accept ``caller``'s keys from now on: keys the emulator's STS issued (an assumed role's
        session), which API Gateway's IAM authorization would know as it knows every key of the
        account. The caller's ARN is what STS reported for the session."""
        self.callers[caller.access_key_id] = caller

    def distrust(self, access_key_id: str) -> None:
        self.callers.pop(access_key_id, None)

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

    def json_post_event(
        self, caller: Caller, path: str, body: Any, query: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        """The event this gateway would hand the handler for ``caller``'s signed ``POST path`` of a
        JSON ``body`` (the benchmarks invoke the handler with it directly, without HTTP)."""
        import uuid
        from urllib.parse import urlencode

        return self.build_event(
            method="POST",
            raw_path=path,
            raw_query=urlencode(query or {}),
            header_pairs=[("Content-Type", "application/json"), ("Host", "127.0.0.1")],
            body=json.dumps(body).encode(),
            caller=caller,
            source_ip="127.0.0.1",
            received=dt.datetime.now(dt.UTC),
            request_id=str(uuid.uuid4()),
            extended_request_id=uuid.uuid4().hex[:16],
            trace_id="Root=1-00000000-000000000000000000000000",
        )

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

        pairs = [(n, v) for n, v in header_pairs if n.lower() not in HOP_BY_HOP]
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
        headers, multi_headers = header_maps([(spelling[n.lower()], v) for n, v in pairs])
        query = [
            (unquote_plus(n), unquote_plus(v))
            for n, _, v in (p.partition("=") for p in raw_query.split("&") if p)
        ]
        query_single, query_multi = header_maps(query)

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
                "requestTime": request_time(received),
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
            if length > DRAIN_LIMIT:
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
            if total > DRAIN_LIMIT:
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
        self._send(error.status, headers, json_message(error.message), close=close)

    def _dispatch(self) -> None:
        gateway = self.server.gateway
        received = dt.datetime.now(dt.UTC)
        request_id = str(uuid.uuid4())
        extended_request_id = new_extended_request_id()
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

        trace_id = new_trace_id(received)
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
        self._invoke(event, ids, trace_id)

    def _invoke(self, event: dict[str, Any], ids: list[tuple[str, str]], trace_id: str) -> None:
        """The handler's answer to ``event``, compressed as the API's settings and the request's
        ``Accept-Encoding`` say; 502 when the handler raises or answers what is not a proxy response."""
        gateway = self.server.gateway
        try:
            with gateway.environment_lock:
                result = gateway.handler(event, gateway.context_factory())
            status, headers, payload = proxy_response(marshal(result))
        except Exception:
            what = f"{event['httpMethod']} {event['path']} (request {event['requestContext']['requestId']})"
            print(f"topogov local API gateway: {what} failed:", file=sys.stderr)
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
        accept = self.headers.get_all("Accept-Encoding")
        headers, payload = compressed(
            gateway.minimum_compression_size, ", ".join(accept) if accept else None, headers, payload
        )
        headers += [*ids, ("X-Amzn-Trace-Id", trace_id)]
        self._send(status, headers, payload)
