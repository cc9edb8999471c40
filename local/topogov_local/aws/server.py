"""Launch a moto server (all services, as ``moto_server`` does) with DescribeInstanceTopology.

    python -m topogov_local.aws.server --host 127.0.0.1 --port 5000 [--quiet]

Installs the project's extensions of moto — :mod:`topogov_local.ec2_topology`
(DescribeInstanceTopology), :mod:`topogov_local.aws.cloudformation` (what ``cdk deploy``/``cdk
destroy`` need: template URLs, the resource types and properties moto skips, updates that replace
only what CloudFormation replaces), :mod:`topogov_local.aws.iam` (IAM enforcement against each
request's real resource ARN, with a record of every decision), :mod:`topogov_local.aws.eks`
(access entries, a cluster's real endpoint), :mod:`topogov_local.aws.lambdas` (the account's
concurrency limit and what a reservation may leave unreserved) and :mod:`topogov_local.aws.sagemaker`
(HyperPod task governance's ComputeQuota and ClusterSchedulerConfig APIs) — and serves moto in
server mode plus the control routes: ``/_topogov/ec2/`` (see
:func:`topogov_local.ec2_topology.handle_control_request`),
DynamoDB fault injection under ``/_topogov/dynamodb/faults`` (see :class:`DynamoFaults`),
``/_topogov/iam/decisions``, ``/_topogov/sts/presigned-caller-identity``, ``/_topogov/eks/...``,
``/_topogov/lambda/account`` (see :mod:`topogov_local.aws.lambdas`), ``/_topogov/sagemaker/limits``
(see :mod:`topogov_local.aws.sagemaker`) and
``/_topogov/cloudformation/updates``. Prints ``ready <url>`` on one line to stdout and runs until
SIGINT/SIGTERM (exit status 0). ``--port 0`` picks a free port; the ``ready`` line carries the real one.

In-process use (tests)::

    server, url = start_in_thread()
    ...
    server.stop()
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import logging
import os
import random
import signal
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qsl

from topogov_local import ec2_topology
from topogov_local.aws import cloudformation as moto_cloudformation
from topogov_local.aws import eks as moto_eks
from topogov_local.aws import iam as moto_iam
from topogov_local.aws import lambdas as moto_lambda
from topogov_local.aws import sagemaker as moto_sagemaker
from topogov_local.processes import collect_rarely

__all__ = ["ControlMiddleware", "RunningServer", "build_app", "main", "start_in_thread"]

StartResponse = Callable[..., Any]


DYNAMO_FAULTS = "/_topogov/dynamodb/faults"
CLOUDFORMATION_UPDATES = "/_topogov/cloudformation/updates"
EXTENSION_PREFIXES = (
    "/_topogov/iam/",
    "/_topogov/sts/",
    moto_eks.CONTROL_PREFIX,
    CLOUDFORMATION_UPDATES,
    moto_lambda.CONTROL_ACCOUNT,
    moto_sagemaker.CONTROL_LIMITS,
)
DEFAULT_ACCOUNT = "123456789012"  # moto's default account
DEFAULT_REGION = "us-east-1"
DYNAMO_CODES = {
    # code -> HTTP status, as DynamoDB answers them (botocore's standard mode retries all but the last)
    "ProvisionedThroughputExceededException": 400,
    "ThrottlingException": 400,
    "RequestLimitExceeded": 400,
    "InternalServerError": 500,
    "TransactionConflict": 400,  # TransactWriteItems cancelled: TransactionConflict on its first item
}


class DynamoFaults:
    """Injected DynamoDB errors, by action and probability (a seeded RNG: runs are reproducible).

    ``POST /_topogov/dynamodb/faults`` ``{"action": "TransactWriteItems" | "*", "code": one of
    DYNAMO_CODES, "probability": 0..1 (1), "times": N (-1 = forever, default), "after": false}``;
    ``after: true`` applies the call and then answers the error (a lost response: the client retries
    something that already happened). ``GET`` lists the rules with their ``hits``; ``DELETE`` clears.
    """

    def __init__(self) -> None:
        self.rules: list[dict[str, Any]] = []
        self._rng = random.Random(11)

    def add(self, rule: Any) -> tuple[int, Any]:
        if not isinstance(rule, dict) or rule.get("code") not in DYNAMO_CODES:
            return 400, {"message": f"a rule needs code, one of {sorted(DYNAMO_CODES)}"}
        probability = float(rule.get("probability", 1.0))
        if not 0.0 < probability <= 1.0:
            return 400, {"message": "probability must be in (0, 1]"}
        times = int(rule.get("times", -1))
        entry = {
            "action": str(rule.get("action") or "*"),
            "code": rule["code"],
            "probability": probability,
            "times": times,
            "after": bool(rule.get("after", False)),
            "hits": 0,
        }
        self.rules.append(entry)
        return 200, entry

    def take(self, action: str) -> dict[str, Any] | None:
        for rule in self.rules:
            if rule["action"] in ("*", action) and rule["times"] != 0:
                if rule["probability"] < 1.0 and self._rng.random() >= rule["probability"]:
                    continue
                rule["hits"] += 1
                if rule["times"] > 0:
                    rule["times"] -= 1
                return rule
        return None

    @staticmethod
    def answer(rule: dict[str, Any], body: bytes, start_response: StartResponse) -> list[bytes]:
        code = rule["code"]
        if code == "TransactionConflict":
            try:
                items = len(json.loads(body or b"{}").get("TransactItems") or [None])
            except ValueError:
                items = 1
            reasons = [{"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"}]
            reasons += [{"Code": "None"}] * (items - 1)
            payload = {
                "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
                "message": "Transaction cancelled, please refer cancellation reasons for specific reasons "
                f"[{', '.join(r['Code'] for r in reasons)}]",
                "CancellationReasons": reasons,
            }
            status = 400
        else:
            payload = {"__type": f"com.amazonaws.dynamodb.v20120810#{code}", "message": f"injected {code}"}
            status = DYNAMO_CODES[code]
        data = json.dumps(payload).encode()
        start_response(
            f"{status} {'Bad Request' if status == 400 else 'Internal Server Error'}",
            [("Content-Type", "application/x-amz-json-1.0"), ("Content-Length", str(len(data)))],
        )
        return [data]


class ControlMiddleware:
    """WSGI middleware: answers ``/_topogov/...`` itself, passes the rest to moto."""

    def __init__(self, app: Callable[[dict[str, Any], StartResponse], Iterable[bytes]]) -> None:
        self.app = app
        self._dynamodb = threading.Lock()
        self.dynamo_faults = DynamoFaults()

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        target = str(environ.get("HTTP_X_AMZ_TARGET", ""))
        if target.startswith("DynamoDB_"):
            # DynamoDB applies each write (and each transaction) atomically; moto's backend does not
            # lock, so concurrent conditional updates could both pass their condition. Serialising
            # DynamoDB calls gives the guarantee the real service gives (and the quota tests need).
            with self._dynamodb:
                rule = self.dynamo_faults.take(target.split(".", 1)[-1])
                if rule is None:
                    return list(self.app(environ, start_response))
                length = int(environ.get("CONTENT_LENGTH") or 0)
                body = environ["wsgi.input"].read(length) if length > 0 else b""
                if rule["after"]:
                    environ["wsgi.input"] = io.BytesIO(body)
                    list(self.app(environ, lambda *a, **k: None))  # applied; the answer is lost
                return self.dynamo_faults.answer(rule, body, start_response)
        if path == DYNAMO_FAULTS:
            return self._dynamo_control(environ, start_response)
        if path.startswith(EXTENSION_PREFIXES):
            return self._extension_control(path, environ, start_response)
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

    def _extension_control(
        self, path: str, environ: dict[str, Any], start_response: StartResponse
    ) -> list[bytes]:
        method = environ.get("REQUEST_METHOD", "GET").upper()
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length > 0 else b""
        status: int
        payload: Any
        if path.startswith(moto_eks.CONTROL_PREFIX):
            try:
                spec = json.loads(body or b"null")
            except ValueError:
                spec = None
            query = dict(parse_qsl(environ.get("QUERY_STRING", "")))
            status, payload = moto_eks.handle_control_request(
                method,
                path,
                spec,
                account_id=query.get("account", DEFAULT_ACCOUNT),
                region=query.get("region", DEFAULT_REGION),
            )
        elif path == CLOUDFORMATION_UPDATES and method == "GET":
            status, payload = 200, moto_cloudformation.updates_payload()
        elif path.startswith(moto_lambda.CONTROL_ACCOUNT):
            try:
                spec = json.loads(body or b"null")
            except ValueError:
                spec = None
            status, payload = moto_lambda.handle_control_request(method, path, spec)
        elif path.startswith(moto_sagemaker.CONTROL_LIMITS):
            try:
                spec = json.loads(body or b"null")
            except ValueError:
                spec = None
            status, payload = moto_sagemaker.handle_control_request(method, path, spec)
        else:
            status, payload = moto_iam.handle_control_request(method, path, body)
        data = json.dumps(payload, default=str).encode()
        start_response(
            f"{status} {'OK' if status == 200 else 'Error'}",
            [("Content-Type", "application/json"), ("Content-Length", str(len(data)))],
        )
        return [data]

    def _dynamo_control(self, environ: dict[str, Any], start_response: StartResponse) -> list[bytes]:
        method = environ.get("REQUEST_METHOD", "GET").upper()
        payload: dict[str, Any]
        with self._dynamodb:
            if method == "GET":
                status, payload = 200, {"rules": self.dynamo_faults.rules}
            elif method == "DELETE":
                self.dynamo_faults.rules.clear()
                status, payload = 200, {"rules": []}
            elif method == "POST":
                length = int(environ.get("CONTENT_LENGTH") or 0)
                try:
                    rule = json.loads(environ["wsgi.input"].read(length) or b"null")
                except ValueError:
                    rule = None
                status, payload = self.dynamo_faults.add(rule)
            else:
                status, payload = 405, {"message": "GET, POST or DELETE"}
        data = json.dumps(payload).encode()
        start_response(
            f"{status} {'OK' if status == 200 else 'Error'}",
            [("Content-Type", "application/json"), ("Content-Length", str(len(data)))],
        )
        return [data]


def build_app() -> ControlMiddleware:
    """moto's all-services WSGI app (with the emulation installed) behind the control routes."""
    ec2_topology.install()
    moto_cloudformation.install()
    moto_iam.install()
    moto_lambda.install()
    moto_eks.install()
    moto_sagemaker.install()
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
        prog="python -m topogov_local.aws.server",
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

    gc.disable()  # moto's modules and botocore's models: built with the collector off, then kept
    server = _make_server(args.host, args.port)
    collect_rarely()
    stop = threading.Event()

    def _on_signal(signum: int, frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)

    # polled every 0.05 s, not socketserver's 0.5 s: a stop is answered at once (a stack's stop
    # gives its servers one short grace period before SIGKILL)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="topogov-moto", daemon=True
    )
    thread.start()
    print(f"ready {_url(args.host, server.server_address[1])}", flush=True)
    while not stop.wait(0.05):
        if not thread.is_alive():
            return 1
    server.shutdown()
    thread.join(timeout=10)
    server.server_close()
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Nothing is left to tear down once the server is closed, and the interpreter's own finalization
    # (moto's backends, botocore's models) took 1.3 s: long past a stack's stop grace.
    os._exit(code)
