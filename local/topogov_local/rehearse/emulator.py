"""The rehearsal's AWS: the moto server with the project's extensions as a subprocess speaking real HTTP
(:class:`Emulator`): IAM enforcement switched on and off, the record of IAM decisions, the EKS cluster
registered with a real endpoint; and the names a rehearsal deploys under."""

from __future__ import annotations

import base64
import json
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from topogov_local.processes import (
    ManagedProcess,
    free_port,
    python_module,
    wait_until,
)

ROOT = Path(__file__).resolve().parents[3]  # local/topogov_local/rehearse/ -> the repository


ACCOUNT = "123456789012"  # moto's default account


REGION = "us-east-1"


STACK = "Topogov"


CDK = ROOT / "node_modules" / ".bin" / "cdk"


RBAC_MANIFEST = ROOT / "deploy" / "rbac.yaml"


TASK_ROOT = "/var/task"


class RehearsalError(RuntimeError):
    pass


# --- the emulator ----------------------------------------------------------------------------------
class Emulator:
    """The moto server of :mod:`topogov_local.aws.server`, IAM enforcement off until :meth:`enforce_iam`."""

    def __init__(self, directory: Path, *, port: int = 0, env: Mapping[str, str] | None = None) -> None:
        self.dir = Path(directory)
        self.port = port
        self.extra_env = dict(env or {})
        self.proc: ManagedProcess | None = None
        self._clients: dict[str, Any] = {}  # the default credentials' clients, by service

    def process(self) -> ManagedProcess:
        """The server's process, not started (:meth:`start` starts it)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        port = self.port or free_port()
        self.proc = ManagedProcess(
            "aws",
            python_module("topogov_local.aws.server", "--host", "127.0.0.1", "--port", str(port), "--quiet"),
            env={
                # moto scans its ~1,300 default AMIs on every RunInstances; nothing here needs one.
                "MOTO_EC2_LOAD_DEFAULT_AMIS": "false",
                "MOTO_PORT": str(port),
                **self.extra_env,
            },
            log_path=self.dir / "aws.log",
        )
        return self.proc

    def start(self) -> Emulator:
        self.process()
        assert self.proc is not None
        self.proc.start(timeout_s=120)
        return self

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()

    @property
    def url(self) -> str:
        assert self.proc is not None and self.proc.url
        return self.proc.url

    def control(self, method: str, path: str, body: Any = None, raw: bytes | None = None) -> Any:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=30) as resp:
            text = resp.read()
        try:
            return json.loads(text or b"null")
        except ValueError:
            return text.decode()

    def enforce_iam(self, on: bool) -> None:
        """moto evaluates identity policies once ``INITIAL_NO_AUTH_ACTION_COUNT`` requests were
        served: 0 is at once, infinity never."""
        self.control("POST", "/moto-api/reset-auth", raw=b"0" if on else b"inf")

    def enforce_sessions(self, on: bool) -> None:
        """Judge every request signed with temporary credentials (the functions' role sessions)
        against their policies, whatever :meth:`enforce_iam` says (:mod:`topogov_local.aws.iam`)."""
        self.control("POST", "/_topogov/iam/enforce-sessions", raw=b"on" if on else b"off")

    def decisions(self) -> list[dict[str, Any]]:
        return list(self.control("GET", "/_topogov/iam/decisions")["decisions"])

    def clear_decisions(self) -> None:
        self.control("DELETE", "/_topogov/iam/decisions")

    def register_cluster(self, name: str, endpoint: str, ca_pem: bytes) -> Any:
        return self.control(
            "POST",
            "/_topogov/eks/clusters",
            {"name": name, "endpoint": endpoint, "certificateAuthority": base64.b64encode(ca_pem).decode()},
        )

    def cloudformation_updates(self) -> dict[str, Any]:
        return dict(self.control("GET", "/_topogov/cloudformation/updates")["updates"])

    def session(self, credentials: Mapping[str, str] | None = None) -> Any:
        import boto3

        creds = credentials or {"AccessKeyId": "testing", "SecretAccessKey": "testing"}
        return boto3.session.Session(
            aws_access_key_id=creds["AccessKeyId"],
            aws_secret_access_key=creds["SecretAccessKey"],
            aws_session_token=creds.get("SessionToken"),
            region_name=REGION,
        )

    def client(self, service: str, credentials: Mapping[str, str] | None = None) -> Any:
        """A client of ``service`` (the default credentials' ones are made once)."""
        from botocore.config import Config

        if credentials is None and service in self._clients:
            return self._clients[service]
        cfg = Config(retries={"mode": "standard", "total_max_attempts": 2})
        client = self.session(credentials).client(service, endpoint_url=self.url, config=cfg)
        if credentials is None:
            self._clients[service] = client
        return client


def wait_for(predicate: Any, what: str, timeout_s: float = 60, every_s: float = 0.25) -> Any:
    return wait_until(predicate, what, timeout_s, every_s, error=RehearsalError)
