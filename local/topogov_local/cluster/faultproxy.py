"""A counting, fault-injecting HTTPS proxy in front of the real API server (the local cluster's one
part that is not upstream code besides KWOK).

Topogov's identities, kubectl and the tests reach the API server through it. It passes every request
through as it came (method, path, query, headers but the hop-by-hop ones, body; a bearer token
authenticates the caller upstream), streams the answer back (watches included), and on the way:

* counts requests by ``"<METHOD> <resource>[/<subresource>]"`` (watches as ``WATCH``, anything that is
  not a resource as ``discovery``): ``GET|DELETE /_emulator/requests``;
* injects faults: ``POST /_emulator/faults`` with ``{"method", "path" (a regex searched in the URL
  path), "query" (one searched in its query string: ``continue=`` for a list's later pages),
  "status" (an error answered instead of passing the request on, in the API server's ``Status``
  shape), "times" (default 1; -1 or null: forever), "probability" (of applying to a matching
  request; seeded), "delay_s" (before passing on or answering), "after" (pass the request on first,
  then answer the error: an answer lost after the write), "delete_before" (delete the named object,
  as admin, before passing the request on: a concurrent deletion), "message", "retry_after"}``;
  ``GET`` lists the rules with their ``hits``; ``DELETE`` clears them.

``python -m topogov_local.cluster.faultproxy --port P --upstream URL --ca CA --cert C --key K``
prints its URL when ready.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import re
import signal
import ssl
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "host"}
)
_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    409: "Conflict",
    410: "Expired",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def counter_key(method: str, path: str, query: str) -> str:
    """``"<METHOD> <resource>[/<subresource>]"`` of a request, as the tests count them."""
    parts = [p for p in path.split("/") if p]
    watch = method == "GET" and re.search(r"(^|&)watch=(1|true)(&|$)", query) is not None
    verb = "WATCH" if watch else method
    if parts[:2] == ["api", "v1"]:
        rest = parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        rest = parts[3:]
    else:
        return f"{verb} discovery"
    if not rest:
        return f"{verb} discovery"
    if rest[0] == "namespaces" and len(rest) >= 3:
        rest = rest[2:]
    resource = rest[0]
    return f"{verb} {resource}/{rest[2]}" if len(rest) >= 3 else f"{verb} {resource}"


@dataclass
class Fault:
    id: int
    method: str | None
    path: re.Pattern[str]
    status: int | None
    times: int | None
    probability: float
    delay_s: float
    after: bool
    delete_before: bool
    message: str | None
    retry_after: int | None
    query: re.Pattern[str] | None = None
    hits: int = 0

    def describe(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "method": self.method,
            "path": self.path.pattern,
            "query": self.query.pattern if self.query else None,
            "status": self.status,
            "times": self.times,
            "probability": self.probability,
            "delay_s": self.delay_s,
            "after": self.after,
            "delete_before": self.delete_before,
            "message": self.message,
            "hits": self.hits,
        }


class State:
    def __init__(self, seed: int = 7) -> None:
        self.lock = threading.Lock()
        self.counts: dict[str, int] = {}
        self.faults: list[Fault] = []
        self.next_id = 0
        self.rng = random.Random(seed)

    def count(self, key: str) -> None:
        with self.lock:
            self.counts[key] = self.counts.get(key, 0) + 1

    def add(self, spec: Any) -> Fault:
        if not isinstance(spec, dict):
            raise ValueError("a fault rule must be a JSON object")
        status = spec.get("status")
        if status is not None and not (isinstance(status, int) and 400 <= status <= 599):
            raise ValueError("status must be an HTTP error code (400-599)")
        delay = float(spec.get("delay_s") or 0)
        if status is None and not delay and not spec.get("delete_before"):
            raise ValueError("a fault rule needs a status, delete_before or delay_s")
        times = spec.get("times", 1)
        probability = float(spec.get("probability", 1.0))
        if not 0.0 < probability <= 1.0:
            raise ValueError("probability must be in (0, 1]")
        method = spec.get("method")
        with self.lock:
            self.next_id += 1
            fault = Fault(
                self.next_id,
                str(method).upper() if method and method != "*" else None,
                re.compile(str(spec.get("path") or ".*")),
                status,
                None if times is None or int(times) < 0 else int(times),
                probability,
                delay,
                bool(spec.get("after")),
                bool(spec.get("delete_before")),
                spec.get("message"),
                int(spec["retry_after"]) if spec.get("retry_after") else None,
                re.compile(str(spec["query"])) if spec.get("query") else None,
            )
            self.faults.append(fault)
        return fault

    def take(self, method: str, path: str, query: str = "") -> Fault | None:
        with self.lock:
            for f in self.faults:
                if (
                    (f.method is None or f.method == method)
                    and f.path.search(path)
                    and (f.query is None or f.query.search(query))
                    and (f.times is None or f.times > 0)
                    and (f.probability >= 1.0 or self.rng.random() < f.probability)
                ):
                    f.hits += 1
                    if f.times is not None:
                        f.times -= 1
                    return f
        return None


class Proxy(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(
        self, port: int, upstream: str, ca: str, cert: str, key: str, admin_token: str | None
    ) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        served = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        served.load_cert_chain(cert, key)
        served.set_alpn_protocols(["http/1.1"])
        # the TLS handshake happens in the handler's thread, not in the accepting one
        self.socket = served.wrap_socket(self.socket, server_side=True, do_handshake_on_connect=False)
        target = urlsplit(upstream)
        self.upstream_host, self.upstream_port = target.hostname or "127.0.0.1", target.port or 443
        self.upstream_tls = ssl.create_default_context(cafile=ca)
        self.state = State()
        self.admin_token = admin_token

    def connect(self) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(
            self.upstream_host, self.upstream_port, context=self.upstream_tls, timeout=600
        )


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Proxy
    _upstream: http.client.HTTPSConnection | None = None

    # TCP_NODELAY, as the API server it fronts has it (Go's net package sets it on every TCP
    # connection). With Nagle on, the last chunk of a response, a second small write, waited for the
    # client's delayed ACK: ~47 ms per request on loopback (a 1,000-node first pass: 47 of its 49 s).
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._handle()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = do_GET

    # -- plumbing ------------------------------------------------------------------------------
    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _json(self, status: int, doc: Any) -> None:
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _status(self, fault: Fault, path: str) -> None:
        assert fault.status is not None
        reason = _REASONS.get(fault.status, "InternalError")
        doc: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": fault.message or "injected fault",
            "reason": reason,
            "code": fault.status,
        }
        data = json.dumps(doc).encode()
        self.send_response(fault.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if fault.status == 429 or fault.retry_after:
            self.send_header("Retry-After", str(fault.retry_after or 1))
        self.end_headers()
        self.wfile.write(data)

    def _control(self, method: str, path: str, body: bytes) -> None:
        state = self.server.state
        if path == "/_emulator/requests":
            if method == "DELETE":
                with state.lock:
                    state.counts.clear()
            with state.lock:
                self._json(200, dict(sorted(state.counts.items())))
            return
        if path == "/_emulator/faults":
            if method == "POST":
                try:
                    spec = json.loads(body or b"null")
                    specs = spec if isinstance(spec, list) else [spec]
                    added = [state.add(s).describe() for s in specs]
                except ValueError as exc:
                    self._json(400, {"message": str(exc)})
                    return
                self._json(201, added[0] if not isinstance(spec, list) else {"rules": added})
                return
            if method == "DELETE":
                with state.lock:
                    state.faults.clear()
            with state.lock:
                self._json(200, {"rules": [f.describe() for f in state.faults]})
            return
        self._json(404, {"message": f"no control endpoint {path}"})

    def _send_upstream(
        self, method: str, target: str, headers: dict[str, str], body: bytes
    ) -> http.client.HTTPResponse:
        for attempt in (1, 2):  # a kept-alive upstream connection may have been closed meanwhile
            if self._upstream is None:
                self._upstream = self.server.connect()
            try:
                self._upstream.request(method, target, body=body or None, headers=headers)
                return self._upstream.getresponse()
            except (
                http.client.RemoteDisconnected,
                BrokenPipeError,
                ConnectionResetError,
                http.client.CannotSendRequest,
            ):
                self._upstream.close()
                self._upstream = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _delete_named(self, path: str) -> None:
        if not self.server.admin_token:
            return
        conn = self.server.connect()
        try:
            conn.request("DELETE", path, headers={"Authorization": f"Bearer {self.server.admin_token}"})
            conn.getresponse().read()
        finally:
            conn.close()

    def _handle(self) -> None:
        method = self.command.upper()
        path, _, query = self.path.partition("?")
        body = self._body()
        if path.startswith("/_emulator/"):
            self._control(method, path.rstrip("/"), body)
            return
        state = self.server.state
        state.count(counter_key(method, path, query))
        fault = state.take(method, path, query)
        if fault is not None:
            if fault.delay_s:
                time.sleep(fault.delay_s)
            if fault.delete_before:
                self._delete_named(path)
            if fault.status and not fault.after:
                self._status(fault, path)
                return
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
        if body:
            headers["Content-Length"] = str(len(body))
        try:
            resp = self._send_upstream(method, self.path, headers, body)
        except OSError as exc:
            self._json(502, {"kind": "Status", "status": "Failure", "code": 502, "message": f"proxy: {exc}"})
            return
        if fault is not None and fault.status and fault.after:
            resp.read()  # the write happened; the answer is lost
            self._status(fault, path)
            return
        self.send_response(resp.status, resp.reason)
        chunked = resp.getheader("Content-Length") is None
        for name, value in resp.getheaders():
            if name.lower() not in _HOP_BY_HOP and name.lower() != "content-length":
                self.send_header(name, value)
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", resp.getheader("Content-Length") or "0")
        self.end_headers()
        try:
            if not chunked:
                self.wfile.write(resp.read())
                return
            while True:
                data = resp.read1(65536)
                if not data:
                    break
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            self.close_connection = True
            if self._upstream is not None:
                self._upstream.close()
                self._upstream = None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m topogov_local.cluster.faultproxy")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--ca", required=True)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    args = parser.parse_args(argv)
    server = Proxy(
        args.port, args.upstream, args.ca, args.cert, args.key, os.environ.get("TOPOGOV_PROXY_ADMIN_TOKEN")
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
    print(f"https://127.0.0.1:{server.server_address[1]}", flush=True)
    stop.wait()
    server.shutdown()
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
