"""The local stack's AWS side as the platform team's ``cdk deploy`` makes it.

Every local stack (``topogov local``, the end-to-end and hardening suites, the benchmarks) deploys the
app to its own moto server with the real CDK CLI — ``cdk bootstrap``, then ``cdk deploy`` of a cloud
assembly synthesized once for each state of what the template is made of (:func:`assembly`) — and
then takes from the deployed stack, read back through the services' APIs, what it is wired with:

* the names of the tables and the bucket: the stack's outputs (``LedgerTable``, ``CountersTable``,
  ``IdempotencyTable``, ``SnapshotBucket``);
* each function's environment: its ``Environment.Variables`` as Lambda answers ``GetFunction``, its
  code package unpacked as ``/var/task`` (the team policy is read from there), credentials of its own
  role (:func:`topogov_local.rehearse.function_runtime`);
* the routes the local API Gateway serves: the RestApi's resources and methods — a route the
  infrastructure lacks is a 403 locally, as in AWS — and its ``minimumCompressionSize``.

Nothing of that is written down a second time here. What a local function gets that the deployed one
does not is :func:`local_environ`, each entry with its reason.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from topogov_local.cluster.build import locked
from topogov_local.rehearse import (
    ACCOUNT,
    REGION,
    ROOT,
    STACK,
    Cdk,
    Clients,
    FunctionRuntime,
    StackState,
    deployed_compression,
    deployed_routes,
    function_runtime,
    keep_assets,
    lambda_environ,
    seed_assets,
    stack_state,
)

CLUSTER = "topogov-local"  # the EKS cluster the local stack is deployed for (registered in moto's EKS)
CONTEXT = {"clusterName": CLUSTER, "account": ACCOUNT, "region": REGION}
ASSEMBLIES = ROOT / ".topogov" / "assembly"
ASSEMBLIES_ENV = "TOPOGOV_ASSEMBLY_DIR"  # another place for them (a test that needs a synth of its own)
ASSEMBLIES_KEPT = 3
# What the template is made of: the CDK app, the function code and policy it packages, the pins of
# the layer and of the CDK libraries and CLI.
INPUTS = ("app.py", "cdk.json", "teams.yaml", "package-lock.json", "requirements", "infra", "lambdas/topogov")
FUNCTIONS = {"reconcile": "Reconciler", "api": "Api"}  # key -> logical id prefix of the function
OUTPUT_OF = {  # TOPOGOV_* variable -> the stack output that names the resource
    "TOPOGOV_LEDGER_TABLE": "LedgerTable",
    "TOPOGOV_COUNTERS_TABLE": "CountersTable",
    "TOPOGOV_IDEMPOTENCY_TABLE": "IdempotencyTable",
    "TOPOGOV_SNAPSHOT_BUCKET": "SnapshotBucket",
}


class DeploymentError(RuntimeError):
    pass


def inputs_digest(context: Mapping[str, str] = CONTEXT, root: Path = ROOT) -> str:
    """A digest of every file the template is made of, and the context it is synthesized with."""
    h = hashlib.sha256(json.dumps(dict(context), sort_keys=True).encode())
    for name in INPUTS:
        path = root / name
        files = sorted(path.rglob("*")) if path.is_dir() else [path]
        for f in files:
            if not f.is_file() or "__pycache__" in f.parts or f.suffix == ".pyc":
                continue
            h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def assemblies() -> Path:
    """Where the assemblies are kept: ``.topogov/assembly``, or ``$TOPOGOV_ASSEMBLY_DIR``."""
    return Path(os.environ.get(ASSEMBLIES_ENV) or ASSEMBLIES)


def assembled(context: Mapping[str, str] = CONTEXT) -> bool:
    """Whether :func:`assembly` has the app synthesized already for the sources as they are."""
    return (assemblies() / inputs_digest(context) / "manifest.json").exists()


def assembly(
    context: Mapping[str, str] = CONTEXT, log: Path | None = None, cancel: Cancellation | None = None
) -> Path:
    """The cloud assembly of the app (``cdk synth``), made once per :func:`inputs_digest` and kept in
    ``.topogov/assembly/<digest>``; concurrent callers wait for the one that synthesizes. A ``cancel``
    ends the wait for another process's synth and stops this one's at once."""
    key = inputs_digest(context)
    root = assemblies()
    target = root / key
    if (target / "manifest.json").exists():
        return target
    with _locked(root / ".lock", cancel):
        if (target / "manifest.json").exists():
            return target
        tmp = root / f".{key}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        seed_assets(tmp)
        cdk = Cdk("http://127.0.0.1:9", tmp, log or root / f"{key}.log")  # synth calls no AWS API
        if cancel is not None:
            cancel.track(cdk)
        cdk.wait(cdk.synth(context))
        keep_assets(tmp)
        tmp.rename(target)
        kept = sorted(
            (p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")),
            key=lambda p: p.stat().st_mtime,
            reverse=True,
        )
        for old in kept[ASSEMBLIES_KEPT:]:
            shutil.rmtree(old, ignore_errors=True)
    return target


@contextlib.contextmanager
def _locked(path: Path, cancel: Cancellation | None) -> Iterator[None]:
    """The lock of :func:`topogov_local.cluster.build.locked`, taken without blocking and tried again
    every 0.1 s, so that a ``cancel`` ends the wait for another process's synth."""
    if cancel is None:
        with locked(path):
            yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                cancel.check()
                time.sleep(0.1)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@dataclass
class Deployment:
    """The deployed stack as the local stack uses it."""

    state: StackState
    functions: dict[str, FunctionRuntime]  # "reconcile", "api"
    routes: dict[str, list[str]]  # path -> methods, of the deployed RestApi
    min_compression_size: int | None = None  # the deployed RestApi's minimumCompressionSize

    def output(self, key: str) -> str:
        try:
            return self.state.outputs[key]
        except KeyError:
            raise DeploymentError(f"the deployed stack has no output {key!r}") from None

    @property
    def names(self) -> dict[str, str]:
        """The tables and the bucket, by the ``TOPOGOV_*`` variable that names each."""
        return {var: self.output(key) for var, key in OUTPUT_OF.items()}


class Cancellation:
    """A deployment's cancel: set once, it stops the CDK runs it tracks (the one under way at once,
    any later one refused) and :meth:`check` raises from then on."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: list[Cdk] = []
        self.cancelled = False

    def track(self, cdk: Cdk) -> Cdk:
        with self._lock:
            self._runs.append(cdk)
            if self.cancelled:
                cdk.cancel()
        return cdk

    def check(self) -> None:
        if self.cancelled:
            raise DeploymentError("cancelled")

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            runs = list(self._runs)
        for cdk in runs:
            cdk.cancel()


class Deployer:
    """The deployment of one local stack, in two steps a worker thread runs while the stack starts:
    :meth:`prepare` (the assembly, ``cdk bootstrap``) and :meth:`deploy` (``cdk deploy``, once the
    EKS cluster :data:`CLUSTER` is registered: the access entries name it)."""

    def __init__(self, clients: Clients, directory: Path) -> None:
        self.clients = clients
        self.dir = Path(directory)
        self.cdk: Cdk | None = None
        self._cancel = Cancellation()
        self.context: dict[str, str] = dict(CONTEXT)  # -c topogov:... of the synth (and its digest)

    def prepare(self, aws_url: str) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        built = assembly(self.context, log=self.dir / "synth.log", cancel=self._cancel)
        self._cancel.check()
        self.cdk = self._cancel.track(Cdk(aws_url, built, self.dir / "cdk.log"))
        self.cdk.bootstrap()

    def deploy(self) -> Deployment:
        if self.cdk is None:
            raise DeploymentError("not prepared")
        self._cancel.check()
        self.cdk.deploy_assembly()
        return read_deployment(self.clients, self.dir)

    def redeploy(self, aws_url: str, policy_text: str) -> Deployment:
        """``cdk deploy`` again with ``policy_text`` as teams.yaml (``-c topogov:policyFile``), as a
        policy change is shipped: synthesized in a directory of its own (the kept assembly stays the
        deployed sources'); the policy file lives under the repository's ignored .topogov/ while the
        deploy runs (the function asset is hashed by its path in the repository)."""
        path = ROOT / ".topogov" / "policies" / f"teams-{self.dir.parent.name}-{os.getpid()}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(policy_text, encoding="utf-8")
        out = self.dir / "redeploy.out"
        shutil.rmtree(out, ignore_errors=True)
        seed_assets(out)
        cdk = self._cancel.track(Cdk(aws_url, out, self.dir / "cdk-redeploy.log"))
        try:
            cdk.deploy({**self.context, "policyFile": str(path.relative_to(ROOT))})
        finally:
            path.unlink(missing_ok=True)
        return read_deployment(self.clients, self.dir)

    def wait(self, event: threading.Event, what: str, timeout_s: float = 300.0) -> None:
        """Until ``event`` is set; a :meth:`cancel` or the timeout ends the wait with an error."""
        deadline = time.monotonic() + timeout_s
        while not event.wait(0.1):
            self._cancel.check()
            if time.monotonic() > deadline:
                raise DeploymentError(f"{what} not after {timeout_s:.0f} s")

    def cancel(self) -> None:
        """Stop the deployment wherever it is: the synth, ``cdk bootstrap`` or ``cdk deploy`` under
        way is killed with its whole process tree (each CDK run is supervised), a wait ends."""
        self._cancel.cancel()


def read_deployment(clients: Clients, directory: Path) -> Deployment:
    """The deployed stack :data:`STACK`: its state, what each function runs with, its routes."""
    state = stack_state(clients.client("cloudformation"), STACK)
    if state.status not in ("CREATE_COMPLETE", "UPDATE_COMPLETE"):
        log = directory / "cdk.log"
        raise DeploymentError(f"stack {STACK} is {state.status} after cdk deploy (see {log})")
    functions = {
        key: function_runtime(
            clients, state, state.logical("AWS::Lambda::Function", prefix), directory / "functions"
        )
        for key, prefix in FUNCTIONS.items()
    }
    apigateway, rest_api = clients.client("apigateway"), state.physical("AWS::ApiGateway::RestApi")
    routes = deployed_routes(apigateway, rest_api)
    deployment = Deployment(state, functions, routes, deployed_compression(apigateway, rest_api))
    for fn in functions.values():  # the outputs and the functions name the same resources
        for var, name in deployment.names.items():
            if var in fn.environment and fn.environment[var] != name:
                got = fn.environment[var]
                raise DeploymentError(f"{fn.name}: {var}={got}, the stack's output says {name}")
    return deployment


def template_compression(assembled_at: Path, stack: str = STACK) -> int | None:
    """The RestApi's ``MinimumCompressionSize`` in the synthesized template of ``assembled_at`` (an
    :func:`assembly`): what a deployment's API Gateway compresses from, for a gateway without one."""
    template = json.loads((assembled_at / f"{stack}.template.json").read_text())
    (api,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::ApiGateway::RestApi"]
    size = api.get("Properties", {}).get("MinimumCompressionSize")
    return None if size is None else int(size)


def local_environ(fn: FunctionRuntime, aws_url: str, kubeconfig: Path) -> dict[str, str]:
    """The environment the deployed function ``fn`` runs with in the local stack: its own, and what
    Lambda adds (region, its role's credentials, function name, task root), except for these:

    * ``AWS_ENDPOINT_URL``: the emulator;
    * ``TOPOGOV_KUBECONFIG`` instead of ``TOPOGOV_CLUSTER_NAME``: the local cluster, as the identity
      the function's access entry maps it to (``topogov:reconciler``, ``topogov:api``) by a token of
      that identity. The EKS path (``eks:DescribeCluster``, a presigned STS token, the access entries)
      is the rehearsal's (``make rehearse``);
    * Powertools' tracing and metrics off: no X-Ray daemon and no CloudWatch here.

    The log level stays the deployed one (``topogov local`` writes the functions' logs to a file, as
    CloudWatch Logs would keep them).
    """
    env = {
        **lambda_environ(fn, aws_url),
        "TOPOGOV_KUBECONFIG": str(kubeconfig),
        "POWERTOOLS_METRICS_DISABLED": "true",
    }
    if "POWERTOOLS_LOG_LEVEL" in fn.environment:
        env["POWERTOOLS_LOG_LEVEL"] = fn.environment["POWERTOOLS_LOG_LEVEL"]
    env.pop("TOPOGOV_CLUSTER_NAME", None)
    return env
