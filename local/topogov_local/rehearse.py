"""``cdk deploy`` rehearsed offline: the real CDK CLI against the local AWS emulator, the deployed
stack read back through the services' own APIs, and least privilege observed (``make rehearse``;
``tests/rehearse`` drives it).

* :class:`Emulator` — the moto server with the project's extensions (a subprocess, real HTTP): IAM
  enforcement switched on and off (``/moto-api/reset-auth``), the record of IAM decisions, the EKS
  cluster registered with a real endpoint.
* :class:`Cdk` — ``node_modules/.bin/cdk`` with ``AWS_ENDPOINT_URL`` set to the emulator, nothing else
  changed: ``synth``, ``bootstrap``, ``deploy``, ``destroy``.
* :func:`stack_state` — resources (type, physical id), outputs and template of a deployed stack.
* :class:`FunctionRuntime` — a deployed function's environment as Lambda gives it: its
  ``Environment.Variables``, the region, and credentials of its own role (``sts:AssumeRole``, as
  the Lambda service does; the role's trust policy is checked to name ``lambda.amazonaws.com``), its
  code package from the deployment's asset bucket unpacked as ``/var/task`` (paths under
  ``/var/task`` in the environment point there). Two things are not Lambda's: ``AWS_ENDPOINT_URL``
  (the emulator) and Powertools' tracing switched off (no X-Ray daemon here).
* :func:`least_privilege` — per role: each (action, resource) its policies grant, which of them the
  recorded decisions used, and every call denied.
* :func:`rbac_comparison` — per Kubernetes group of ``deploy/rbac.yaml``: each rule against the
  requests the API server's audit log recorded for that group (``impersonatedUser`` of the EKS
  endpoint's requests, :mod:`topogov_local.eks_endpoint`).
"""

from __future__ import annotations

import base64
import contextlib
import fnmatch
import io
import json
import os
import shutil
import signal
import subprocess
import threading
import time
import urllib.request
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from topogov_local.processes import (
    ManagedProcess,
    free_port,
    python_module,
    record_child,
    supervised,
    wait_until,
)

ROOT = Path(__file__).resolve().parents[2]
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


# --- the CDK CLI -------------------------------------------------------------------------------------
_CDK_STARTS = threading.Lock()  # a run's start and a cancel, one at a time


def _stop_tree(proc: subprocess.Popen[str]) -> None:
    """SIGTERM to a run's supervisor: it SIGKILLs the CLI's tree and exits."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)


@dataclass
class CdkRun:
    args: list[str]
    seconds: float
    output: str


class Cdk:
    """The pinned CDK CLI (package.json) with ``AWS_ENDPOINT_URL`` pointing at the emulator at
    ``aws_url`` (``synth`` alone calls no AWS API)."""

    def __init__(self, aws_url: str, out: Path, log: Path) -> None:
        if not CDK.exists():
            raise RehearsalError("the CDK CLI is missing: run `make install` (npm ci)")
        self.aws_url = aws_url
        self.out = Path(out)
        self.log = Path(log)
        self.runs: list[CdkRun] = []
        self.current: subprocess.Popen[str] | None = None  # the run under way, if any
        self.cancelled = False

    def cancel(self) -> None:
        """Stop the run under way and refuse any later one (its caller's :meth:`wait` then raises).
        Each run is the CLI under the supervisor of :func:`topogov_local.processes.supervised`, so a
        SIGTERM to it takes the CLI's whole tree at once (node, the app's python, jsii's node): the
        pipe closes and :meth:`wait` returns within milliseconds, not when a synth would have ended."""
        with _CDK_STARTS:
            self.cancelled = True
            proc = self.current
        if proc is not None:
            _stop_tree(proc)

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CDK_"))}
        env.update(
            {
                "AWS_ENDPOINT_URL": self.aws_url,
                "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_REGION": REGION,
                "AWS_DEFAULT_REGION": REGION,
                "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1",
                "CDK_DISABLE_VERSION_CHECK": "1",
                "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ.get('PATH', '')}",
            }
        )
        return env

    @staticmethod
    def context_args(context: Mapping[str, str]) -> list[str]:
        out: list[str] = []
        for key, value in context.items():
            out += ["-c", f"topogov:{key}={value}"]
        return out

    def start(self, *args: str) -> subprocess.Popen[str]:
        """Start ``cdk <args>`` (for a run that overlaps other work); finish it with :meth:`wait`."""
        self.log.parent.mkdir(parents=True, exist_ok=True)
        argv = supervised([str(CDK), *args])
        with _CDK_STARTS:  # a cancel() either sees this run or refuses it
            if self.cancelled:
                raise RehearsalError(f"cdk {' '.join(args)}: cancelled")
            proc = subprocess.Popen(
                argv,
                cwd=ROOT,
                env=self.env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                text=True,
                start_new_session=True,  # a terminal's Ctrl-C is the stack's to handle, not the CLI's
            )
            record_child(proc.pid, argv)
            proc.topogov_started = time.monotonic()  # type: ignore[attr-defined]
            proc.topogov_args = list(args)  # type: ignore[attr-defined]
            self.current = proc
        return proc

    def wait(self, proc: subprocess.Popen[str], timeout_s: float = 900) -> CdkRun:
        try:
            output, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _stop_tree(proc)
            output, _ = proc.communicate()
        except BaseException:  # a stop signal raised in this thread: the CLI's tree goes too
            _stop_tree(proc)
            raise
        finally:
            if self.current is proc:
                self.current = None
        args = proc.topogov_args  # type: ignore[attr-defined]
        run = CdkRun(args, time.monotonic() - proc.topogov_started, output)  # type: ignore[attr-defined]
        self.runs.append(run)
        with open(self.log, "a", encoding="utf-8") as fh:
            fh.write(f"$ cdk {' '.join(args)}   ({run.seconds:.1f} s, exit {proc.returncode})\n{output}\n")
        if proc.returncode != 0:
            raise RehearsalError(f"cdk {' '.join(args)} failed (exit {proc.returncode}):\n{output[-4000:]}")
        return run

    def run(self, *args: str, timeout_s: float = 900) -> CdkRun:
        return self.wait(self.start(*args), timeout_s)

    def synth(self, context: Mapping[str, str]) -> subprocess.Popen[str]:
        return self.start("synth", "--quiet", "--output", str(self.out), *self.context_args(context))

    def bootstrap(self) -> CdkRun:
        return self.run("bootstrap", f"aws://{ACCOUNT}/{REGION}", "--app", str(self.out))

    def deploy_assembly(self) -> CdkRun:
        return self.run("deploy", STACK, "--app", str(self.out), "--require-approval", "never")

    def deploy(self, context: Mapping[str, str]) -> CdkRun:
        """``cdk deploy`` of the app (synthesized again with ``context``)."""
        return self.run(
            "deploy",
            STACK,
            "--output",
            str(self.out),
            "--require-approval",
            "never",
            *self.context_args(context),
        )

    def diff(self) -> CdkRun:
        return self.run("diff", STACK, "--app", str(self.out))

    def destroy(self) -> CdkRun:
        return self.run("destroy", STACK, "--app", str(self.out), "--force")


# Assets CDK bundled, kept between synths: CDK reuses a staged asset whose directory exists in the
# output (the layer's pip install is the slowest part of a synth). Shared by every synth here.
ASSET_CACHE = ROOT / ".topogov" / "cdk-assets"
ASSETS_KEPT = 8  # the newest asset directories kept (a layer, function packages of a few policies)


def seed_assets(out: Path) -> None:
    """Hard-link the assets bundled by earlier synths into ``out`` (before ``cdk synth``)."""
    if not ASSET_CACHE.is_dir():
        return
    out.mkdir(parents=True, exist_ok=True)
    for asset in ASSET_CACHE.glob("asset.*"):
        target = out / asset.name
        if not target.exists():
            try:
                shutil.copytree(asset, target, copy_function=os.link)
            except OSError:  # pruned meanwhile by another synth: CDK bundles it again
                shutil.rmtree(target, ignore_errors=True)


def keep_assets(out: Path) -> None:
    """Keep the bundled assets of ``out``'s manifest for the next synth; of the cache, only the
    :data:`ASSETS_KEPT` most recently kept stay."""
    manifest = out / f"{STACK}.assets.json"
    if not manifest.exists():
        return
    wanted = {
        f["source"]["path"]
        for f in json.loads(manifest.read_text())["files"].values()
        if f["source"].get("packaging") == "zip"
    }
    ASSET_CACHE.mkdir(parents=True, exist_ok=True)
    for name in wanted:
        src, dest = out / name, ASSET_CACHE / name
        if dest.exists():
            os.utime(dest)
        elif src.is_dir():
            tmp = ASSET_CACHE / f".{name}.tmp-{os.getpid()}"
            try:
                shutil.copytree(src, tmp, copy_function=os.link)
                tmp.rename(dest)
            except OSError:
                shutil.rmtree(tmp, ignore_errors=True)
    cached = sorted(ASSET_CACHE.glob("asset.*"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in cached[ASSETS_KEPT:]:
        shutil.rmtree(old, ignore_errors=True)


# --- the deployed stack -----------------------------------------------------------------------------
@dataclass
class StackState:
    status: str
    resources: dict[str, tuple[str, str | None]]  # logical id -> (type, physical id)
    outputs: dict[str, str]
    template: dict[str, Any]

    def of_type(self, kind: str) -> dict[str, str | None]:
        return {k: p for k, (t, p) in self.resources.items() if t == kind}

    def physical(self, kind: str) -> str:
        (only,) = self.of_type(kind).values()
        assert only is not None
        return only

    def logical(self, kind: str, prefix: str) -> str:
        (only,) = [k for k in self.of_type(kind) if k.startswith(prefix)]
        return only


def stack_state(cloudformation: Any, name: str = STACK) -> StackState:
    stack = cloudformation.describe_stacks(StackName=name)["Stacks"][0]
    resources = {
        r["LogicalResourceId"]: (r["ResourceType"], r.get("PhysicalResourceId"))
        for r in cloudformation.describe_stack_resources(StackName=name)["StackResources"]
    }
    body = cloudformation.get_template(StackName=name)["TemplateBody"]
    template = body if isinstance(body, dict) else json.loads(body)
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs") or []}
    return StackState(stack["StackStatus"], resources, outputs, template)


def deployed_routes(apigateway: Any, rest_api_id: str) -> dict[str, list[str]]:
    """The deployed RestApi's resources and their methods: path -> sorted methods."""
    items = apigateway.get_resources(restApiId=rest_api_id, embed=["methods"], limit=500)["items"]
    return {i["path"]: sorted(i["resourceMethods"]) for i in items if i.get("resourceMethods")}


# --- a deployed function, run here -------------------------------------------------------------------
@dataclass
class FunctionRuntime:
    name: str  # the deployed function's name
    role_arn: str
    environment: dict[str, str]
    credentials: dict[str, str]
    task_root: Path

    @property
    def principal(self) -> str:
        """The ARN the function's calls carry: its role's session (``assumed-role/<role>/<function>``)."""
        role = self.role_arn.rsplit("/", 1)[-1]
        return f"arn:aws:sts::{ACCOUNT}:assumed-role/{role}/{self.name}"


class Clients(Protocol):
    """Where the boto3 clients of an emulator come from (:class:`Emulator`, the local stack)."""

    def client(self, service: str) -> Any: ...


def function_runtime(
    emulator: Clients, state: StackState, logical_id: str, directory: Path
) -> FunctionRuntime:
    """What Lambda would give the deployed function ``logical_id`` (see the module doc)."""
    lam, iam, s3, sts = (emulator.client(s) for s in ("lambda", "iam", "s3", "sts"))
    name = state.resources[logical_id][1]
    assert name
    config = lam.get_function(FunctionName=name)["Configuration"]
    role_arn = config["Role"]
    trust = iam.get_role(RoleName=role_arn.rsplit("/", 1)[-1])["Role"]["AssumeRolePolicyDocument"]
    services = [
        s
        for st in trust["Statement"]
        if st.get("Effect") == "Allow" and "sts:AssumeRole" in _as_list(st.get("Action"))
        for s in _as_list((st.get("Principal") or {}).get("Service"))
    ]
    if "lambda.amazonaws.com" not in services:
        raise RehearsalError(f"{role_arn}: its trust policy does not let Lambda assume it ({trust})")
    # The Lambda service assumes the role, the session named after the function.
    creds = sts.assume_role(RoleArn=role_arn, RoleSessionName=name, DurationSeconds=3600)["Credentials"]
    code = state.template["Resources"][logical_id]["Properties"]["Code"]
    bucket = _resolve(code["S3Bucket"], state)
    package = s3.get_object(Bucket=bucket, Key=code["S3Key"])["Body"].read()
    task_root = Path(directory) / name / "var" / "task"
    task_root.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(io.BytesIO(package)) as zf:
        zf.extractall(task_root)
    env = {
        k: (str(task_root) + v[len(TASK_ROOT) :] if v.startswith(TASK_ROOT + "/") else v)
        for k, v in (config.get("Environment") or {}).get("Variables", {}).items()
    }
    return FunctionRuntime(
        name=name,
        role_arn=role_arn,
        environment=env,
        credentials={k: creds[k] for k in ("AccessKeyId", "SecretAccessKey", "SessionToken")},
        task_root=task_root,
    )


def lambda_environ(fn: FunctionRuntime, aws_url: str) -> dict[str, str]:
    """The process environment the function runs with here (see the module doc)."""
    return {
        **fn.environment,
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ACCESS_KEY_ID": fn.credentials["AccessKeyId"],
        "AWS_SECRET_ACCESS_KEY": fn.credentials["SecretAccessKey"],
        "AWS_SESSION_TOKEN": fn.credentials["SessionToken"],
        "AWS_LAMBDA_FUNCTION_NAME": fn.name,
        "LAMBDA_TASK_ROOT": str(fn.task_root),
        "AWS_ENDPOINT_URL": aws_url,
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_LOG_LEVEL": "WARNING",
    }


def _resolve(value: Any, state: StackState) -> str:
    """``Fn::Sub`` of the bootstrap's asset bucket name (the only intrinsic a Code property has)."""
    if isinstance(value, str):
        return value
    if "Fn::Sub" in value:
        text = value["Fn::Sub"]
        return str(text).replace("${AWS::AccountId}", ACCOUNT).replace("${AWS::Region}", REGION)
    raise RehearsalError(f"cannot resolve {value}")


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


# --- least privilege -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Grant:
    policy: str
    sid: str
    action: str
    resource: str


def role_grants(iam: Any, role_name: str) -> list[Grant]:
    """Every (action, resource) an Allow statement of the role's policies names."""
    docs: list[tuple[str, dict[str, Any]]] = []
    for policy in iam.list_role_policies(RoleName=role_name)["PolicyNames"]:
        doc = iam.get_role_policy(RoleName=role_name, PolicyName=policy)["PolicyDocument"]
        docs.append((policy, doc if isinstance(doc, dict) else json.loads(doc)))
    for attached in iam.list_attached_role_policies(RoleName=role_name)["AttachedPolicies"]:
        version = iam.get_policy(PolicyArn=attached["PolicyArn"])["Policy"]["DefaultVersionId"]
        doc = iam.get_policy_version(PolicyArn=attached["PolicyArn"], VersionId=version)["PolicyVersion"]
        docs.append((attached["PolicyName"], doc["Document"]))
    grants = []
    for policy, doc in docs:
        for i, st in enumerate(_as_list(doc.get("Statement"))):
            if st.get("Effect") != "Allow":
                continue
            for action in _as_list(st.get("Action")):
                for resource in _as_list(st.get("Resource")):
                    grants.append(Grant(policy, str(st.get("Sid") or f"#{i}"), str(action), str(resource)))
    return grants


def _matches(pattern: str, value: str) -> bool:
    return (
        fnmatch.fnmatchcase(value.lower(), pattern.lower())
        if "*" in pattern or "?" in pattern
        else (pattern.lower() == value.lower())
    )


@dataclass
class RoleReport:
    role: str
    principal: str
    granted: list[Grant]
    used: dict[Grant, int] = field(default_factory=dict)  # grant -> calls it allowed
    unused: list[Grant] = field(default_factory=list)
    denied: list[dict[str, Any]] = field(default_factory=list)
    calls: dict[tuple[str, str], int] = field(default_factory=dict)  # (action, resource) -> count

    def to_json(self) -> dict[str, Any]:
        def g(x: Grant) -> dict[str, str]:
            return {"sid": x.sid, "action": x.action, "resource": x.resource}

        return {
            "role": self.role,
            "principal": self.principal,
            "granted": len(self.granted),
            "used": [{**g(k), "calls": v} for k, v in sorted(self.used.items(), key=lambda kv: kv[0].sid)],
            "unused": [g(x) for x in self.unused],
            "denied": self.denied,
            "calls": [{"action": a, "resource": r, "count": n} for (a, r), n in sorted(self.calls.items())],
        }


def least_privilege(
    grants: Sequence[Grant], decisions: Iterable[Mapping[str, Any]], principal: str, role: str
) -> RoleReport:
    """The decisions of ``principal`` against what its role grants."""
    report = RoleReport(role=role, principal=principal, granted=list(grants))
    for d in decisions:
        if d["principal"] != principal:
            continue
        key = (str(d["action"]), str(d["resource"]))
        report.calls[key] = report.calls.get(key, 0) + 1
        if not d["allowed"]:
            report.denied.append(dict(d))
            continue
        for grant in grants:
            if _matches(grant.action, key[0]) and _matches(grant.resource, key[1]):
                report.used[grant] = report.used.get(grant, 0) + 1
    report.unused = [g for g in grants if g not in report.used]
    return report


# --- Kubernetes RBAC against the audit log ----------------------------------------------------------
@dataclass(frozen=True)
class RbacRule:
    role: str  # the ClusterRole
    scope: str  # "cluster" or "namespaces: a, b"
    api_group: str
    resource: str
    verb: str


def rbac_rules(group: str, manifest: Path = RBAC_MANIFEST) -> list[RbacRule]:
    """The (api group, resource, verb) rules ``group`` gets from the manifest's bindings."""
    docs = [d for d in yaml.safe_load_all(manifest.read_text()) if d]
    roles = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ClusterRole"}
    scopes: dict[str, set[str]] = {}
    for d in docs:
        if d["kind"] not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        if not any(s.get("kind") == "Group" and s.get("name") == group for s in d.get("subjects") or []):
            continue
        where = "cluster" if d["kind"] == "ClusterRoleBinding" else d["metadata"]["namespace"]
        scopes.setdefault(d["roleRef"]["name"], set()).add(where)
    rules = []
    for role, where in sorted(scopes.items()):
        scope = "cluster" if "cluster" in where else "namespaces: " + ", ".join(sorted(where))
        for rule in roles[role].get("rules") or []:
            for api_group in rule.get("apiGroups") or [""]:
                for resource in rule.get("resources") or []:
                    for verb in rule.get("verbs") or []:
                        rules.append(RbacRule(role, scope, api_group, resource, verb))
    return rules


def audit_events(path: Path, group: str) -> list[dict[str, Any]]:
    """The audit log's events of requests made as ``group`` (the impersonated identity)."""
    out: list[dict[str, Any]] = []
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        who = event.get("impersonatedUser") or event.get("user") or {}
        if group in (who.get("groups") or []):
            out.append(event)
    return out


def rbac_comparison(
    group: str, events: Sequence[Mapping[str, Any]], manifest: Path = RBAC_MANIFEST
) -> dict[str, Any]:
    """Each rule of ``group`` with the requests it allowed; the requests no rule covers; refusals."""
    rules = rbac_rules(group, manifest)
    used: dict[RbacRule, int] = {}
    uncovered: dict[str, int] = {}
    forbidden: list[dict[str, Any]] = []
    requests: dict[str, int] = {}
    for e in events:
        ref = e.get("objectRef") or {}
        verb = str(e.get("verb"))
        code = (e.get("responseStatus") or {}).get("code")
        resource = str(ref.get("resource") or "")
        if ref.get("subresource"):
            resource += "/" + str(ref["subresource"])
        api_group = str(ref.get("apiGroup") or "")
        namespace = ref.get("namespace")
        label = f"{verb} {api_group + '/' if api_group else ''}{resource or e.get('requestURI')}"
        label += f" ({'ns ' + namespace if namespace else 'cluster'})"
        requests[label] = requests.get(label, 0) + 1
        if code == 403:
            forbidden.append({"request": label, "uri": e.get("requestURI"), "code": code})
            continue
        if not resource:
            continue  # non-resource URLs (discovery): granted to every authenticated user
        matched = False
        for rule in rules:
            in_scope = rule.scope == "cluster" or (namespace is not None and namespace in rule.scope)
            if rule.api_group == api_group and rule.resource == resource and rule.verb == verb and in_scope:
                used[rule] = used.get(rule, 0) + 1
                matched = True
        if not matched:
            uncovered[label] = uncovered.get(label, 0) + 1

    def r(x: RbacRule) -> str:
        return f"{x.role} [{x.scope}]: {x.verb} {x.api_group + '/' if x.api_group else ''}{x.resource}"

    return {
        "group": group,
        "rules": len(rules),
        "used": {r(k): v for k, v in sorted(used.items(), key=lambda kv: r(kv[0]))},
        "unused": sorted(r(x) for x in rules if x not in used),
        "requests": dict(sorted(requests.items())),
        "uncovered": uncovered,
        "forbidden": forbidden,
    }


def wait_for(predicate: Any, what: str, timeout_s: float = 60, every_s: float = 0.25) -> Any:
    return wait_until(predicate, what, timeout_s, every_s, error=RehearsalError)


# --- after cdk destroy -----------------------------------------------------------------------------------
_PARENT = {  # a resource that lives inside another: it is gone when that one is
    "AWS::SQS::QueuePolicy": "Queues",
    "AWS::SNS::TopicPolicy": "Topics",
    "AWS::IAM::Policy": "Roles",
    "AWS::Lambda::Permission": "FunctionName",
    "AWS::Lambda::EventInvokeConfig": "FunctionName",
    "AWS::ApiGateway::Resource": "RestApiId",
    "AWS::ApiGateway::Method": "RestApiId",
    "AWS::ApiGateway::Deployment": "RestApiId",
    "AWS::ApiGateway::Stage": "RestApiId",
    "AWS::ApiGateway::RequestValidator": "RestApiId",
}


def _referenced(value: Any) -> str | None:
    value = value[0] if isinstance(value, list) else value
    if isinstance(value, dict):
        if "Ref" in value:
            return str(value["Ref"])
        if "Fn::GetAtt" in value:
            return str(value["Fn::GetAtt"][0])
    return None


def resource_exists(emulator: Emulator, state: StackState, logical: str) -> bool | None:
    """Whether the deployed resource ``logical`` still exists, asked of its service's API (None: a
    type with no service object)."""
    from botocore.exceptions import ClientError

    kind, physical = state.resources[logical]
    props = state.template["Resources"][logical].get("Properties") or {}
    if kind in _PARENT:
        parent = _referenced(props.get(_PARENT[kind]))
        return resource_exists(emulator, state, parent) if parent in state.resources else None
    c = emulator.client
    try:
        if kind == "AWS::DynamoDB::Table":
            c("dynamodb").describe_table(TableName=physical)
        elif kind == "AWS::S3::Bucket":
            c("s3").head_bucket(Bucket=physical)
        elif kind == "AWS::S3::BucketPolicy":
            bucket = state.resources[_referenced(props["Bucket"]) or ""][1]
            c("s3").get_bucket_policy(Bucket=bucket)
        elif kind == "AWS::SQS::Queue":
            c("sqs").get_queue_attributes(QueueUrl=str(physical))
        elif kind == "AWS::Logs::LogGroup":
            groups = c("logs").describe_log_groups(logGroupNamePrefix=str(physical))["logGroups"]
            return any(g["logGroupName"] == physical for g in groups)
        elif kind == "AWS::IAM::Role":
            c("iam").get_role(RoleName=str(physical))
        elif kind == "AWS::Lambda::Function":
            c("lambda").get_function(FunctionName=str(physical))
        elif kind == "AWS::Lambda::LayerVersion":
            c("lambda").get_layer_version_by_arn(Arn=str(physical))
        elif kind == "AWS::Lambda::Version":
            c("lambda").get_function(FunctionName=str(physical))
        elif kind == "AWS::Lambda::Alias":  # physical id: the alias ARN, <function ARN>:<alias>
            function, alias = str(physical).rsplit(":", 1)
            c("lambda").get_alias(FunctionName=function, Name=alias)
        elif kind == "AWS::Events::Rule":
            c("events").describe_rule(Name=str(physical))
        elif kind == "AWS::ApiGateway::RestApi":
            c("apigateway").get_rest_api(restApiId=str(physical))
        elif kind == "AWS::EKS::AccessEntry":
            cluster, principal = str(physical).split("|", 1)
            entries = emulator.control("GET", f"/_topogov/eks/clusters/{cluster}/access-entries")[
                "accessEntries"
            ]
            return any(e["principalArn"] == principal for e in entries)
        elif kind == "AWS::KMS::Key":
            key = c("kms").describe_key(KeyId=str(physical))["KeyMetadata"]
            return key["KeyState"] not in ("PendingDeletion", "PendingReplicaDeletion")
        elif kind == "AWS::SNS::Topic":
            c("sns").get_topic_attributes(TopicArn=str(physical))
        elif kind == "AWS::CloudWatch::Alarm":
            return bool(c("cloudwatch").describe_alarms(AlarmNames=[str(physical)])["MetricAlarms"])
        elif kind == "AWS::CloudWatch::Dashboard":
            c("cloudwatch").get_dashboard(DashboardName=str(physical))
        else:
            return None
    except ClientError:
        return False
    return True
