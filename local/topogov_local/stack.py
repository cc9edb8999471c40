"""The local stack: AWS (moto server + DescribeInstanceTopology emulation) and a real Kubernetes
control plane with the real Kueue (:mod:`topogov_local.cluster`), each a subprocess speaking real
HTTP, seeded with a GPU fleet of KWOK nodes, and the files docs/local-stack.md promises in
``.topogov/local/``: ``endpoints.json`` (written last: its presence means ready), ``kubeconfig``
(cluster admin, for kubectl), ``aws-credentials``.

The AWS side is the app itself, deployed to the emulator by the CDK CLI while the cluster starts
(:mod:`topogov_local.deployment`): the tables and the bucket are the deployed stack's, named by its
outputs; each function runs with the deployed function's environment and its role's credentials; the
local API Gateway serves the deployed RestApi's routes and no other.

The labeler and the governor run as ``topogov:reconciler`` and the API as ``topogov:api``, under the
RBAC and admission policy of ``deploy/rbac.yaml``, as on EKS (``reconciler_kubeconfig``,
``api_kubeconfig``)."""

from __future__ import annotations

import configparser
import json
import os
import secrets
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from topogov.adapters.kube import KubeHttp
from topogov.adapters.kube_auth import kubeconfig_api_client
from topogov.settings import ReconcileSettings
from topogov_local import fleet as fleetmod
from topogov_local.cluster.controlplane import ControlPlane
from topogov_local.deployment import CLUSTER, Deployer, Deployment, local_environ
from topogov_local.processes import ManagedProcess, environ, spent, stop_all
from topogov_local.rehearse import Emulator

REPO_POLICY = Path(__file__).resolve().parents[2] / "teams.yaml"  # local/topogov_local/ -> the repository
TEAMS = ("team-a", "team-b", "team-c")
LOCAL_ACCOUNT = "123456789012"  # moto's default account
# The functions pace DescribeInstanceTopology at EC2's bucket (1/s) unless told otherwise.
EC2_TOPOLOGY_RATE = ReconcileSettings.model_fields["ec2_rate_per_s"].default
# Kueue's integrations.externalFrameworks entry for the HyperPod training operator's jobs: the kind as
# the API server serves it (hyperpod/crd.py), not as AWS's install guide spells it (docs/hyperpod.md)
HYPERPOD_JOB_FRAMEWORK = "HyperPodPyTorchJob.v1.sagemaker.amazonaws.com"


@dataclass
class StackOptions:
    directory: Path = field(default_factory=lambda: Path(".topogov/local"))
    fleet: str = fleetmod.DEFAULT_FLEET
    extra_nodes: bool = True  # Fargate, hybrid, HyperPod-managed, no provider id, malformed provider id
    simulated_nodes: bool = True  # KWOK keeps the nodes Ready and runs their pods (off: Node objects only)
    ec2_rate: float = 1.0  # the emulated DescribeInstanceTopology bucket (EC2's is 1/s)
    ec2_burst: int = 1
    aws_port: int = 0
    kube_port: int = 0
    api_port: int | None = 8080  # None: no API (labeler-only stacks: benchmarks, labeler tests)
    policy_file: Path = REPO_POLICY
    region: str = fleetmod.REGION
    api_snapshot_ttl_s: float | None = None  # TOPOGOV_SNAPSHOT_TTL_S of the API (None: the default)
    labelled_by_eks: bool = False  # the nodes carry EKS's own topology labels, as EKS writes them
    # A SageMaker HyperPod cluster (topogov local --hyperpod): the cluster in the emulator's SageMaker,
    # the stack deployed with -c topogov:hyperpodClusterArn, HyperPod nodes (hyperpod/cluster.py) and
    # the task governance add-on emulated (hyperpod/addon.py), writing the Kueue objects
    hyperpod: bool = False
    unhealthy_nodes: int = 2  # with hyperpod: nodes HyperPod marks UnschedulablePendingReplacement
    audit_log: bool = False  # kube-apiserver writes every request to <dir>/audit.log (tests read it)
    # JobSet and the Kubeflow training operator (PyTorchJob) run in the cluster and Kueue manages both
    # kinds (ControlPlane(training_controllers=True)). Off unless asked for: `topogov local` asks
    # (--no-training-controllers leaves them out); a test's stack only when it submits those kinds.
    training_controllers: bool = False
    # False: the cluster's Kueue serves v1beta2 only (its CRDs' v1beta1 set served: false once it
    # runs, as Kueue v0.20 does: ControlPlane(kueue_v1beta1=False))
    kueue_v1beta1: bool = True


# Every call of a local function its deployed role refused, over the stacks of this process (the
# test suites check it stays empty).
IAM_DENIED: list[dict[str, Any]] = []


@dataclass
class IamRecord:
    """The functions' AWS calls as IAM judged them: calls per (principal, action), the refusals."""

    calls: dict[str, dict[str, int]]  # principal -> action -> allowed calls
    denied: list[dict[str, Any]]

    @classmethod
    def of(cls, decisions: list[dict[str, Any]], principals: set[str]) -> IamRecord:
        calls: dict[str, dict[str, int]] = {}
        denied = []
        for d in decisions:
            if d["principal"] not in principals:
                continue
            if d["allowed"]:
                per = calls.setdefault(d["principal"], {})
                per[d["action"]] = per.get(d["action"], 0) + 1
            else:
                denied.append(d)
        return cls(calls, denied)

    @property
    def allowed(self) -> int:
        return sum(n for per in self.calls.values() for n in per.values())

    def to_json(self) -> dict[str, Any]:
        return {"allowed": self.allowed, "calls": self.calls, "denied": self.denied}


DEPLOY_JOIN_S = 0.5  # how long a stop gives the deploying thread to end (it is a daemon)


def _background(fn: Callable[[], Any], name: str) -> tuple[Future[Any], threading.Thread]:
    """``fn`` in a daemon thread (not started), its outcome in the Future: a stop never waits for a
    thread blocked in an AWS call, not even at the interpreter's exit, as it would for an executor's."""
    future: Future[Any] = Future()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(fn())
        except BaseException as exc:  # handed to the thread waiting for the result
            future.set_exception(exc)

    return future, threading.Thread(target=run, name=name, daemon=True)


class LocalStack:
    def __init__(self, options: StackOptions | None = None) -> None:
        self.options = options or StackOptions()
        self.dir = Path(self.options.directory).resolve()
        self.aws: ManagedProcess | None = None
        self.emulator: Emulator | None = None
        self.deployment: Deployment | None = None
        self.iam: IamRecord | None = None  # what the functions' calls were judged, once stopped
        self.cluster: ControlPlane | None = None
        self.instances: list[dict[str, Any]] = []
        self._kube_http: KubeHttp | None = None
        self.api: Any = None  # the LocalApiGateway, when serving
        self.hyperpod_arn: str | None = None  # with options.hyperpod: the emulated HyperPod cluster
        self.addon: Any = None  # with options.hyperpod: the task governance add-on's emulation
        self.operator: ManagedProcess | None = None  # with options.hyperpod: the training operator's stand-in
        self.deployer: Deployer | None = None
        self._lock: Any = None  # the StackLock of self.dir while started

    # -- paths --------------------------------------------------------------------------------
    @property
    def kubeconfig(self) -> Path:
        """Cluster admin (kubectl, tests), through the fault proxy."""
        return self.dir / "kubeconfig"

    @property
    def reconciler_kubeconfig(self) -> Path:
        assert self.cluster is not None
        return self.cluster.kubeconfig("reconciler")

    @property
    def api_kubeconfig(self) -> Path:
        assert self.cluster is not None
        return self.cluster.kubeconfig("api")

    @property
    def credentials(self) -> Path:
        return self.dir / "aws-credentials"

    @property
    def endpoints_file(self) -> Path:
        return self.dir / "endpoints.json"

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self, seed: bool = True) -> LocalStack:
        """Start everything, or raise ``StackError`` (one line: another stack holds this directory,
        the API port is taken) before anything is touched."""
        from topogov_local.guard import StackLock, check_port_free

        started = time.monotonic()
        self.dir.mkdir(parents=True, exist_ok=True)
        lock = StackLock(self.dir)
        lock.acquire(api_port=self.options.api_port)
        try:
            if self.options.api_port:
                check_port_free(self.options.api_port, "--api-port")
        except BaseException:
            lock.release()
            raise
        self._lock = lock
        self.endpoints_file.unlink(missing_ok=True)
        emulator = Emulator(
            self.dir,
            port=self.options.aws_port,
            env={
                "TOPOGOV_EC2_TOPOLOGY_RATE": str(self.options.ec2_rate),
                "TOPOGOV_EC2_TOPOLOGY_BURST": str(self.options.ec2_burst),
            },
        )
        self.aws = emulator.process()
        self.emulator = emulator
        audit = self.dir / "audit.log" if self.options.audit_log else None
        self.cluster = ControlPlane(
            self.dir / "cluster",
            audit_log=audit,
            # the training operator's kind, as AWS's install guide adds it to Kueue's configuration
            external_frameworks=(HYPERPOD_JOB_FRAMEWORK,) if self.options.hyperpod else (),
            training_controllers=self.options.training_controllers,
            kueue_v1beta1=self.options.kueue_v1beta1,
        )
        cluster = self.cluster
        deployer = Deployer(self, self.dir / "deployment")
        self.deployer = deployer

        def deploy() -> Deployment:
            """The assembly (synthesized once per change of the app) and `cdk bootstrap`; then,
            once the cluster has its address (the access entries name it, registered as EKS would
            describe it), `cdk deploy`: all while the cluster starts and the fleet is seeded."""
            deployer.prepare(self.aws_url)
            deployer.wait(cluster.addressed, "the cluster's address")
            assert cluster.pki is not None
            emulator.register_cluster(CLUSTER, cluster.url, cluster.pki.ca.read_bytes())
            return deployer.deploy()

        deployed, worker = _background(deploy, "cdk-deploy")
        try:
            self.aws.start()
            if self.options.hyperpod:
                deployer.context = {**deployer.context, "hyperpodClusterArn": self._create_hyperpod_cluster()}
            worker.start()
            self.cluster.start(stop_on_error=False)  # on an error or a stop signal: all at once, below
            self.kubeconfig.write_text(self.cluster.kubeconfig("admin").read_text())
            self.kubeconfig.chmod(0o600)
            if self.options.hyperpod:
                self._start_operator()
            self._write_credentials()
            if seed:
                self.seed()
            waited = time.monotonic()
            self.deployment = deployed.result()
            spent("stack: wait for cdk deploy", time.monotonic() - waited)
            # From here on every call signed by a function's role session is judged against the role.
            emulator.enforce_sessions(True)
            if self.options.hyperpod:
                self._start_addon()
            if self.options.api_port is not None:
                self.start_api()
            self._write_endpoints()
            lock.update(api_url=self.api.url if self.api else None, aws_url=self.aws.url)
            spent("stack start", time.monotonic() - started)
        except BaseException:
            # A failure or a stop signal (SIGINT/SIGTERM/SIGHUP raise in this thread) in any phase:
            # the CDK run under way is killed with its whole tree (the deploying thread then ends
            # at once: it is given a moment, while the emulator still answers, not waited for), and
            # the servers get one grace period together.
            deployer.cancel()
            worker.join(timeout=DEPLOY_JOIN_S)
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self._lock is None:
            return  # never started (or refused to: another stack's files are not ours to remove)
        self.resume()  # a paused emulator would not answer the IAM record's request below
        self.endpoints_file.unlink(missing_ok=True)
        if self.api is not None:
            self.api.stop()
            self.api = None
        if self.addon is not None:
            self.addon.stop()
            self.addon = None
        self._keep_iam_record()
        stop_all(self._servers())  # together, in one grace period
        if self.cluster is not None:
            self.cluster.procs.clear()
        self.operator = None
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def pause(self) -> None:
        """The AWS emulator and the cluster's servers stopped where they stand (SIGSTOP), for a
        stack kept for later (tests/stacks.py keeps one per kind between the modules that use it):
        no processor used meanwhile, nothing of their state lost. The API (a thread of this process)
        answers nothing useful until :meth:`resume`. :meth:`stop` ends a paused stack too."""
        for server in self._servers():
            server.pause()

    def resume(self) -> None:
        for server in self._servers():
            server.resume()

    def _servers(self) -> list[ManagedProcess]:
        """The cluster's servers, the last started first, then the AWS emulator."""
        return [
            *([self.operator] if self.operator else []),
            *(reversed(self.cluster.procs) if self.cluster else ()),
            *([self.aws] if self.aws else []),
        ]

    def iam_record(self) -> IamRecord:
        """The functions' AWS calls so far, as IAM judged them against their deployed roles."""
        assert self.emulator is not None and self.deployment is not None
        principals = {fn.principal for fn in self.deployment.functions.values()}
        return IamRecord.of(self.emulator.decisions(), principals)

    def _keep_iam_record(self) -> None:
        """The IAM decisions on the functions' calls, kept (``self.iam``, ``iam.json``) and added
        to :data:`IAM_DENIED` before the emulator goes."""
        proc = self.aws.proc if self.aws is not None else None
        if self.emulator is None or self.deployment is None or proc is None or proc.poll() is not None:
            return
        try:
            self.iam = self.iam_record()
        except OSError:
            return
        IAM_DENIED.extend(self.iam.denied)
        (self.dir / "iam.json").write_text(json.dumps(self.iam.to_json(), indent=2) + "\n", encoding="utf-8")

    def __enter__(self) -> LocalStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- clients ------------------------------------------------------------------------------
    @property
    def aws_url(self) -> str:
        assert self.aws is not None and self.aws.url
        return self.aws.url

    @property
    def kube_url(self) -> str:
        assert self.cluster is not None
        return self.cluster.url

    def output(self, key: str) -> str:
        """An output of the deployed stack (``LedgerTable``, ``SnapshotBucket``, ``ApiUrl``, ...)."""
        assert self.deployment is not None
        return self.deployment.output(key)

    @property
    def names(self) -> dict[str, str]:
        """The deployed tables and bucket, by the ``TOPOGOV_*`` variable that names each."""
        assert self.deployment is not None
        return self.deployment.names

    def env(self) -> dict[str, str]:
        """Environment of the reconcile function here (and of any boto3 client against this stack):
        the deployed function's (:func:`topogov_local.deployment.local_environ`) and the options'."""
        assert self.deployment is not None and self.cluster is not None
        env = local_environ(self.deployment.functions["reconcile"], self.aws_url, self.reconciler_kubeconfig)
        return {**env, **self._option_env()}

    def api_env(self) -> dict[str, str]:
        """Environment of the api function here: the deployed one's, as ``topogov:api``."""
        assert self.deployment is not None and self.cluster is not None
        env = local_environ(self.deployment.functions["api"], self.aws_url, self.api_kubeconfig)
        env.update(self._option_env())
        if self.options.api_snapshot_ttl_s is not None:
            env["TOPOGOV_SNAPSHOT_TTL_S"] = str(self.options.api_snapshot_ttl_s)
        return env

    def _option_env(self) -> dict[str, str]:
        """What the options change from the deployed environment: the rate of the emulated
        DescribeInstanceTopology bucket when it is not EC2's, a policy file other than the one the
        functions were deployed with."""
        env: dict[str, str] = {}
        if self.options.ec2_rate != EC2_TOPOLOGY_RATE:
            env["TOPOGOV_EC2_RATE_PER_S"] = str(self.options.ec2_rate)
        if Path(self.options.policy_file).resolve() != REPO_POLICY:
            env["TOPOGOV_POLICY_FILE"] = str(self.options.policy_file)
        return env

    def session(self) -> Any:
        import boto3

        return boto3.session.Session(
            aws_access_key_id="testing", aws_secret_access_key="testing", region_name=self.options.region
        )

    def client(self, service: str) -> Any:
        from botocore.config import Config

        cfg = Config(retries={"mode": "standard", "total_max_attempts": 3})
        return self.session().client(service, endpoint_url=self.aws_url, config=cfg)

    def kube(self) -> KubeHttp:
        if self._kube_http is None:
            self._kube_http = KubeHttp(kubeconfig_api_client(str(self.kubeconfig)))
        return self._kube_http

    # -- seeding ------------------------------------------------------------------------------
    def seed(self) -> None:
        """The fleet: EC2 instances and their nodes (the tables and the bucket are the deployment's)."""
        self.add_instances(fleetmod.parse_fleet(self.options.fleet), settle=False)
        if self.options.extra_nodes:
            kube = self.kube()
            az = fleetmod.DEFAULT_AZ
            for obj in (
                fleetmod.extra_node(
                    "fargate-ip-10-0-9-9.ec2.internal", f"aws:///{az}/0a1b2c3d4e/fargate-ip-10-0-9-9"
                ),
                fleetmod.extra_node("hybrid-node-1", "eks-hybrid:///us-east-1/topogov/hybrid-node-1"),
                *(
                    ()
                    if self.options.hyperpod  # its nodes are this cluster's (_register_hyperpod_nodes)
                    else (
                        fleetmod.extra_node(
                            "hyperpod-i-0f00000000000000a",
                            "aws:///use1-az1/sagemaker/cluster/hyperpod-abc123xyz-i-0f00000000000000a",
                            {"sagemaker.amazonaws.com/compute-type": "hyperpod"},
                        ),
                    )
                ),
                fleetmod.extra_node("bare-metal-1", None),
                fleetmod.extra_node("odd-provider-id", f"aws:///{az}/not-an-instance-id"),
            ):
                kube.request("POST", "/api/v1/nodes", body=obj)
        if self.options.simulated_nodes:
            self.wait_nodes_settled()

    def start_api(self) -> None:
        """The REST API behind a local API Gateway that checks SigV4 like IAM auth does."""
        from topogov.handlers import api
        from topogov_local.apigw import LocalApiGateway, callers_from_credentials_file
        from topogov_local.lambda_context import LocalContext

        assert self.deployment is not None
        self.build_api_service()
        callers = callers_from_credentials_file(str(self.credentials), account_id=LOCAL_ACCOUNT)
        self.api = LocalApiGateway(
            api.handler,
            callers,
            port=self.options.api_port or 0,
            region=self.options.region,
            stage="prod",
            context_factory=lambda: LocalContext(function_name="topogov-api", timeout_s=29),
            routes=self.deployment.routes,  # the deployed RestApi's resources and methods, only those
            minimum_compression_size=self.deployment.min_compression_size,
        ).start()

    def build_api_service(self) -> None:
        """The api function's service, built as a cold start builds it (nothing cached of an earlier
        snapshot): at the API's start, and again when a test suite resets a stack it shares."""
        from topogov.bootstrap import build_api_service
        from topogov.handlers import api
        from topogov.settings import ApiSettings

        env = self.api_env()
        with environ(env):  # boto3 reads AWS_ENDPOINT_URL from the environment
            api.set_service(build_api_service(ApiSettings.from_env(env)))

    def add_instances(
        self, groups: list[fleetmod.FleetGroup], register: bool = True, settle: bool = True
    ) -> list[dict[str, Any]]:
        """Launch instances and (unless ``register`` is False) register their nodes; with simulated
        nodes and ``settle``, return once they are Ready and untainted."""
        launched = fleetmod.launch(self.client("ec2"), groups)
        self.instances.extend(launched)
        if register:
            labels = None
            if self.options.labelled_by_eks:  # EKS labels its nodes from EC2's answers itself
                labels = fleetmod.eks_topology_labels(self.aws_url, self.options.region, LOCAL_ACCOUNT)
            if self.options.hyperpod:
                names = self._register_hyperpod_nodes(launched)
            else:
                names = fleetmod.register_nodes(
                    self.kube(), launched, simulated=self.options.simulated_nodes, labels=labels
                )
            if self.options.simulated_nodes and settle:
                self.wait_nodes_settled(names)
        return launched

    # -- SageMaker HyperPod (options.hyperpod) ------------------------------------------------------
    def hyperpod_types(self) -> dict[str, int]:
        """The policy's ``hyperpod.instanceTypes`` (``ml.`` names, with their counts)."""
        from topogov.domain.policy import load_policy_file
        from topogov_local.guard import StackError

        policy = load_policy_file(str(self.options.policy_file))
        if policy.hyperpod is None:
            raise StackError(
                f"{self.options.policy_file} has no hyperpod: section (instanceTypes) for --hyperpod"
            )
        return dict(policy.hyperpod.instance_types)

    def _create_hyperpod_cluster(self) -> str:
        """The HyperPod cluster in the emulator's SageMaker, before the stack is synthesized with it."""
        from topogov_local.hyperpod.cluster import create_cluster

        self.hyperpod_arn = create_cluster(self.client("sagemaker"), CLUSTER, self.hyperpod_types())
        return self.hyperpod_arn

    def _register_hyperpod_nodes(self, launched: list[dict[str, Any]]) -> list[str]:
        """The nodes of ``launched``: HyperPod's for the policy's HyperPod types (labelled as HyperPod
        labels them, a few unhealthy), plain EC2 nodes for the others."""
        from concurrent.futures import ThreadPoolExecutor

        from topogov.domain.nodes import normalized_instance_type
        from topogov_local.hyperpod.cluster import as_hyperpod_node, unhealthy_ids

        assert self.hyperpod_arn is not None
        types = {normalized_instance_type(t) for t in self.hyperpod_types()}
        ours = [i for i in launched if i["InstanceType"] in types]
        plain = [i for i in launched if i["InstanceType"] not in types]
        topology = fleetmod.eks_topology_labels(self.aws_url, self.options.region, LOCAL_ACCOUNT)
        sick = unhealthy_ids(ours, self.options.unhealthy_nodes)
        kube, simulated = self.kube(), self.options.simulated_nodes

        def register(instance: dict[str, Any]) -> str:
            iid = instance["InstanceId"]
            node = fleetmod.node_object(instance, simulated=simulated, labels=topology.get(iid))
            obj = as_hyperpod_node(node, iid, self.hyperpod_arn or "", CLUSTER, healthy=iid not in sick)
            resp = kube.request("POST", "/api/v1/nodes", body=obj)
            if resp.status not in (200, 201, 409):
                raise RuntimeError(f"register node {obj['metadata']['name']}: HTTP {resp.status} {resp.body}")
            return str(obj["metadata"]["name"])

        with ThreadPoolExecutor(max_workers=8) as pool:
            names = list(pool.map(register, ours))
        return names + fleetmod.register_nodes(kube, plain, simulated=simulated)

    def redeploy(self, policy_text: str) -> None:
        """A policy change shipped as it is on AWS: ``cdk deploy`` with ``policy_text`` as teams.yaml;
        the functions here run the new deployment from then on (``env()``, ``api_env()``). With
        ``--hyperpod`` the add-on then writes the new quotas into the Kueue objects."""
        assert self.deployer is not None and self.emulator is not None
        # As during the first deploy, role sessions are not judged while the CDK CLI works through
        # its bootstrap roles (their session policies are CDK's, not the functions' being proven)
        self.emulator.enforce_sessions(False)
        try:
            self.deployment = self.deployer.redeploy(self.aws_url, policy_text)
        finally:
            self.emulator.enforce_sessions(True)

    def _start_operator(self) -> None:
        """The HyperPod training operator's stand-in (hyperpod/operator.py): the
        ``HyperPodPyTorchJob`` CRD, its RBAC, the operator as a process of its own; and a kubeconfig
        per team for AWS's ``hyp`` CLI (hyperpod/hyp.py)."""
        from topogov_local.hyperpod import hyp
        from topogov_local.hyperpod.operator import start

        assert self.cluster is not None
        self.operator = start(self.cluster)
        for team in TEAMS:  # `hyp`'s kubeconfig per team: <dir>/hyp/hyperpod-ns-<team>.kubeconfig
            hyp.write_kubeconfig(self, f"hyperpod-ns-{team}")

    def _start_addon(self) -> None:
        """The task governance add-on, emulated: one sync now (the queues exist before any job), then
        one every few seconds, as the add-on follows SageMaker's API."""
        from topogov_cli.preflight_hyperpod import ADDON
        from topogov_local.hyperpod import AddonEmulator

        assert self.hyperpod_arn is not None
        # installed as an EKS add-on (what `topogov preflight` looks for), no version of the catalogue
        self.client("eks").create_addon(clusterName=CLUSTER, addonName=ADDON)
        self.addon = AddonEmulator(self.aws_url, self.hyperpod_arn, self.kube(), interval_s=2.0)
        self.addon.sync()
        self.addon.start()

    def wait_nodes_settled(self, names: list[str] | None = None, timeout_s: float = 60.0) -> None:
        """Until the nodes (all, or ``names``) are Ready and the node lifecycle controller has lifted
        its ``node.kubernetes.io/not-ready`` taint, as on a cluster whose nodes have been up a while:
        Kueue leaves a tainted node out, and so does the snapshot (``NodeView.available``). (A HyperPod
        node made unhealthy keeps its own taint: it is settled once the lifecycle's are gone.)"""
        from topogov.domain.labels import LIFECYCLE_TAINT_PREFIX
        from topogov.domain.views.nodes import NodeView

        def settled(v: NodeView) -> bool:
            return v.ready and not any(t.startswith(LIFECYCLE_TAINT_PREFIX) for t in v.taints)

        started = time.monotonic()
        deadline = started + timeout_s
        while True:
            items = self.kube().request("GET", "/api/v1/nodes").body.get("items") or []
            views = [NodeView.from_api(n) for n in items]
            waiting = [v.name for v in views if (names is None or v.name in names) and not settled(v)]
            if not waiting:
                spent("wait: nodes settled", time.monotonic() - started)
                return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"nodes not Ready and untainted after {timeout_s:.0f}s: {', '.join(waiting[:5])}"
                )
            time.sleep(0.5)

    # -- files --------------------------------------------------------------------------------
    def _write_credentials(self) -> None:
        cfg = configparser.ConfigParser()
        for profile in ("topogov-admin", *(f"topogov-{t}" for t in TEAMS)):
            cfg[profile] = {
                "aws_access_key_id": "AKIA" + uuid.uuid4().hex[:16].upper(),
                "aws_secret_access_key": secrets.token_urlsafe(30),
                "region": self.options.region,
            }
        with open(self.credentials, "w", encoding="utf-8") as fh:
            fh.write("# Local stack only: keys the local API accepts, one profile per team. Not AWS keys.\n")
            cfg.write(fh)
        os.chmod(self.credentials, 0o600)

    def _write_endpoints(self) -> None:
        doc = {
            "api": self.api.url if self.api else None,
            "aws": self.aws_url,
            "kubernetes": self.kube_url,
            "outputs": self.deployment.state.outputs if self.deployment else {},  # the deployed stack's
        }
        tmp = self.endpoints_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        tmp.replace(self.endpoints_file)
