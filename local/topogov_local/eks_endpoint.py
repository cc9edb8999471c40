"""An EKS cluster endpoint in front of the local kube-apiserver: IAM authentication as EKS does it.

EKS authenticates a bearer token ``k8s-aws-v1.<base64url of a presigned sts:GetCallerIdentity URL>``
by sending that URL to STS with the ``x-k8s-aws-id: <cluster name>`` header (which the signature
must cover), taking the caller's ARN from the answer, and mapping it to a Kubernetes user and
groups through the cluster's access entries: an assumed-role ARN
``arn:aws:sts::<account>:assumed-role/<role>/<session>`` is matched by its role
``arn:aws:iam::<account>:role/<role>``; the user is the entry's username with ``{{SessionName}}``
filled in, the groups are the entry's Kubernetes groups plus ``system:authenticated``; a principal
with no entry is answered 401 (aws-iam-authenticator, pkg/token/token.go; EKS User Guide,
access-entries.html and grant-k8s-access.html).

Here STS is the moto server (``POST /_topogov/sts/presigned-caller-identity``, which recomputes the
signature) and the access entries are those the stack created (``GET /_topogov/eks/clusters/<name>/
access-entries``). The request then goes to the real API server as that user and those groups, by
Kubernetes impersonation (``Impersonate-User`` / ``Impersonate-Group``, as an administrator), so
RBAC judges the mapped identity and the audit log records it (``impersonatedUser``). One deviation:
EKS accepts only URLs on STS's own hosts; this endpoint accepts the emulator's.

Threads: a ``ThreadingHTTPServer`` over TLS with a certificate the cluster CA signed (the CA the
cluster's ``DescribeCluster`` returns), started by :meth:`EksEndpoint.start`.
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

TOKEN_PREFIX = "k8s-aws-v1."
CACHE_S = 60.0  # aws-iam-authenticator caches a verified token for a minute
_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "upgrade", "host", "authorization", "te"})


class EksEndpoint:
    def __init__(
        self,
        cluster_name: str,
        *,
        aws_url: str,
        apiserver_url: str,
        ca: Path,
        cert: Path,
        key: Path,
        admin_token: str,
        port: int = 0,
    ) -> None:
        self.cluster_name = cluster_name
        self.aws_url = aws_url.rstrip("/")
        self.apiserver = urlsplit(apiserver_url)
        self.admin_token = admin_token
        self._upstream_ctx = ssl.create_default_context(cafile=str(ca))
        self._ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._ctx.load_cert_chain(str(cert), str(key))
        self._cache: dict[str, tuple[float, dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []  # (user, groups, method, path, status) per request
        self._server = ThreadingHTTPServer(("127.0.0.1", port), _handler(self))
        self._server.daemon_threads = True
        self._server.socket = self._ctx.wrap_socket(self._server.socket, server_side=True)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> EksEndpoint:
        self._thread = threading.Thread(target=self._server.serve_forever, name="eks-endpoint", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> EksEndpoint:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- authentication ------------------------------------------------------------------------
    def _post(self, path: str, payload: Any) -> tuple[int, Any]:
        req = urllib.request.Request(
            self.aws_url + path,
            data=json.dumps(payload).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read() or b"{}")

    def _get(self, path: str) -> Any:
        with urllib.request.urlopen(self.aws_url + path, timeout=10) as resp:
            return json.loads(resp.read())

    def authenticate(self, authorization: str | None) -> dict[str, Any] | None:
        """``{"username", "groups", "arn"}`` of a bearer token, or None (EKS answers 401)."""
        if not authorization or not authorization.startswith("Bearer " + TOKEN_PREFIX):
            return None
        token = authorization[len("Bearer ") :]
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(token)
            if hit and now - hit[0] < CACHE_S:
                return hit[1]
        encoded = token[len(TOKEN_PREFIX) :]
        try:
            url = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
        except (ValueError, UnicodeDecodeError):
            return None
        status, answer = self._post(
            "/_topogov/sts/presigned-caller-identity",
            {"url": url, "headers": {"x-k8s-aws-id": self.cluster_name, "host": urlsplit(url).netloc}},
        )
        if status != 200 or "x-k8s-aws-id" not in answer.get("SignedHeaders", []):
            return None
        arn = str(answer["Arn"])
        principal, session = arn, ""
        if ":assumed-role/" in arn:  # arn:aws:sts::<account>:assumed-role/<role>/<session>
            parts = arn.split(":", 5)
            _, role, session = parts[5].split("/", 2)
            principal = f"arn:{parts[1]}:iam::{parts[4]}:role/{role}"
        entries = self._get(f"/_topogov/eks/clusters/{self.cluster_name}/access-entries")["accessEntries"]
        entry = next((e for e in entries if e["principalArn"] == principal), None)
        if entry is None:
            return None
        identity = {
            "arn": arn,
            "username": str(entry["username"]).replace("{{SessionName}}", session),
            "groups": [*entry["kubernetesGroups"], "system:authenticated"],
        }
        with self._lock:
            self._cache[token] = (now, identity)
        return identity

    # -- forwarding ----------------------------------------------------------------------------
    def forward(
        self, method: str, path: str, headers: Any, body: bytes, identity: dict[str, Any]
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        conn = http.client.HTTPSConnection(
            self.apiserver.hostname or "127.0.0.1",
            self.apiserver.port,
            context=self._upstream_ctx,
            timeout=30,
        )
        try:
            conn.putrequest(method, path, skip_accept_encoding=True)
            for k, v in headers.items():
                if k.lower() not in _HOP and not k.lower().startswith("impersonate-"):
                    conn.putheader(k, v)
            conn.putheader("Authorization", f"Bearer {self.admin_token}")
            conn.putheader("Impersonate-User", identity["username"])
            for group in identity["groups"]:
                conn.putheader("Impersonate-Group", group)
            conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body)
            resp = conn.getresponse()
            data = resp.read()
            out = [
                (k, v)
                for k, v in resp.getheaders()
                if k.lower() not in _HOP and k.lower() != "content-length"
            ]
            return resp.status, out, data
        finally:
            conn.close()


def _handler(endpoint: EksEndpoint) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        disable_nagle_algorithm = True  # as EKS's endpoint; see topogov_local.cluster.faultproxy

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            identity = endpoint.authenticate(self.headers.get("Authorization"))
            if identity is None:
                status, headers, data = 401, [("Content-Type", "application/json")], json.dumps(
                    {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "Unauthorized",
                     "reason": "Unauthorized", "code": 401}
                ).encode()  # fmt: skip
            else:
                status, headers, data = endpoint.forward(
                    self.command, self.path, self.headers, body, identity
                )
            endpoint.requests.append(
                {
                    "user": identity["username"] if identity else None,
                    "groups": identity["groups"] if identity else [],
                    "method": self.command,
                    "path": self.path,
                    "status": status,
                }
            )
            self.send_response(status)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

    return Handler
