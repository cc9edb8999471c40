"""Launch a moto server (all services, as ``moto_server`` does) with DescribeInstanceTopology.

    python -m topogov.local.moto_server --host 127.0.0.1 --port 5000 [--quiet]

Installs :mod:`topogov.local.ec2_topology`, serves moto in server mode plus the control routes
under ``/_topogov/ec2/`` (see :func:`topogov.local.ec2_topology.handle_control_request`),
prints ``ready <url>`` on one line to stdout and runs until SIGINT/SIGTERM (exit status 0).
``--port 0`` picks a free port; the ``ready`` line carries the real one.

In-process use (tests)::

    server, url = start_in_thread()
    ...
    server.stop()
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qsl

from topogov.local import ec2_topology

__all__ = ["ControlMiddleware", "RunningServer", "build_app", "main", "start_in_thread"]

StartResponse = Callable[..., Any]


class ControlMiddleware:
    """WSGI middleware: answers ``/_topogov/ec2/...`` itself, passes the rest to moto."""

    def __init__(self, app: Callable[[dict[str, Any], StartResponse], Iterable[bytes]]) -> None:
        self.app = app
        self._dynamodb = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if str(environ.get("HTTP_X_AMZ_TARGET", "")).startswith("DynamoDB_"):
            # DynamoDB applies each write (and each transaction) atomically; moto's backend does not
            # lock, so concurrent conditional updates could both pass their condition. Serialising
            # DynamoDB calls gives the guarantee the real service gives (and the quota tests need).
            with self._dynamodb:
                return list(self.app(environ, start_response))
        if not path.startswith(ec2_topology.CONTROL_PREFIX):
            return self.app(environ, start_response)
        method = environ.get("REQUEST_METHOD", "GET").upper()
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        body = environ["wsgi.input"].read(length) if length > 0 else b""
        query = dict(parse_qsl(environ.get("QUERY_STRING", "")))
        status, payload = ec2_topology.handle_control_request(method, path, query, body)
        data = json.dumps(payload).encode()
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}
        start_response(
            f"{status} {reason.get(status, 'Error')}",
            [("Content-Type", "application/json"), ("Content-Length", str(len(data)))],
        )
        return [data]


def build_app() -> ControlMiddleware:
    """moto's all-services WSGI app (with the emulation installed) behind the control routes."""
    ec2_topology.install()
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    app = DomainDispatcherApplication(create_backend_app)
    return ControlMiddleware(app)


class RunningServer:
    """A moto server serving from a background thread."""

    def __init__(self, server: Any, thread: threading.Thread, url: str) -> None:
        self.server = server
        self.thread = thread
        self.url = url
        self.host, self.port = server.server_address[:2]

    def stop(self) -> None:
        self.server.shutdown()
        self.thread.join(timeout=10)
        self.server.server_close()

    shutdown = stop


def _make_server(host: str, port: int) -> Any:
    from moto.moto_server.werkzeug_app import MotoRequestHandler
    from werkzeug.serving import make_server

    server = make_server(host, port, build_app(), threaded=True, request_handler=MotoRequestHandler)
    # moto builds some URLs (e.g. SQS queue URLs) from MOTO_PORT.
    os.environ.setdefault("MOTO_PORT", str(server.server_address[1]))
    return server


def _url(host: str, port: int) -> str:
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
    if ":" in shown:
        shown = f"[{shown}]"
    return f"http://{shown}:{port}"


def start_in_thread(host: str = "127.0.0.1", port: int = 0) -> tuple[RunningServer, str]:
    """Start the server in a daemon thread; returns ``(server, url)``. Stop with ``server.stop()``."""
    server = _make_server(host, port)
    thread = threading.Thread(target=server.serve_forever, name="topogov-moto", daemon=True)
    thread.start()
    url = _url(host, server.server_address[1])
    return RunningServer(server, thread, url), url


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m topogov.local.moto_server",
        description="moto server with EC2 DescribeInstanceTopology emulation",
    )
    parser.add_argument("-H", "--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument(
        "-p",
        "--port",
        type=int,
        default=int(os.environ.get("MOTO_PORT", 5000)),
        help="port (default 5000 or $MOTO_PORT; 0 picks a free one)",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="do not log each request to stderr")
    args = parser.parse_args(argv)

    if args.quiet:
        logging.getLogger("werkzeug").setLevel(logging.WARNING)

    server = _make_server(args.host, args.port)
    stop = threading.Event()

    def _on_signal(signum: int, frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)

    thread = threading.Thread(target=server.serve_forever, name="topogov-moto", daemon=True)
    thread.start()
    print(f"ready {_url(args.host, server.server_address[1])}", flush=True)
    while not stop.wait(0.5):
        if not thread.is_alive():
            return 1
    server.shutdown()
    thread.join(timeout=10)
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
