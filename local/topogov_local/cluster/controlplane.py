"""A real Kubernetes control plane and the real Kueue on this machine, as envtest plus the
controllers run them (upstream binaries built by :mod:`.build`, every listener on 127.0.0.1).

Started in order, each when the one before is ready:

1. **etcd** (fresh data each start: the local cluster lives as long as its stack), its space quota
   EKS's 8 GiB;
2. **kube-apiserver**: RBAC authorisation (``Node,RBAC``), x509 client certificates for the
   components and a bearer token per identity (:mod:`.pki`), the admission plugins of a managed
   cluster including ``ValidatingAdmissionPolicy``;
3. **kube-controller-manager** with the controllers a Job needs (job, garbage collector, namespace,
   service accounts, TTL, pod GC, node lifecycle and taint eviction, ClusterRole aggregation, the
   root CA publisher; 1.35's names end in ``-controller``) and the EndpointSlice controller (a
   headless Service's slices list its pods' addresses and hostnames, as JobSet's and the training
   operator's Services have them on EKS), and **kube-scheduler**;
4. **KWOK**, keeping the Nodes annotated ``kwok.x-k8s.io/node: fake`` alive (leases, heartbeats)
   and playing their Pods (Running once bound, Succeeded after their run time);
5. with ``training_controllers=True``, **JobSet** v0.11.1 and the **Kubeflow training operator** v1.9.3
   (PyTorchJob): their CRDs, RBAC and webhook configurations from their modules, then the two
   managers, their webhooks served on 127.0.0.1 with our CA; before Kueue, which manages both kinds
   then (a kind whose CRD is missing when Kueue starts is set up only after a backoff of up to two
   minutes);
6. **Kueue**: its CRDs (conversion webhooks by URL), RBAC and webhook configurations from its
   module (:mod:`.manifests`), then the manager, its webhooks served on 127.0.0.1 with our CA;
7. ``deploy/rbac.yaml``: Topogov's RBAC and admission policy, as a platform team applies it;
8. the **fault proxy** (:mod:`.faultproxy`), through which Topogov's identities and people reach the
   API server: it counts requests and injects faults for the tests.

What is not upstream code: KWOK's fake kubelet stands in for the nodes (that is its purpose), the
fault proxy, and the training operator's ``main`` (upstream's, without the certificate rotator that
cannot be turned off there: ``local/controlplane/training-operator/main.go``).
``kubeconfig(identity)`` gives each identity a kubeconfig to the proxy; ``direct_kubeconfig``
reaches the API server itself as admin.

Kueue v0.17.0 with its own certificate management off always reads a metrics certificate from
``/etc/kueue/metrics/certs`` (``cmd/kueue/main.go``); the cluster writes one there when none is
(it serves Kueue's metrics on 127.0.0.1 only).
"""

from __future__ import annotations

import json
import os
import shutil
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml

from topogov_local.cluster import build, manifests
from topogov_local.cluster.pki import IDENTITIES, Pki, make_pki
from topogov_local.processes import ManagedProcess, free_port, python_module, spent, stop_all

REPO = Path(__file__).resolve().parents[3]
RBAC_MANIFEST = REPO / "deploy" / "rbac.yaml"
KUEUE_METRICS_CERTS = Path("/etc/kueue/metrics/certs")
CONTROLLERS = (
    "job-controller",
    "garbage-collector-controller",
    "namespace-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "ttl-after-finished-controller",
    "pod-garbage-collector-controller",
    "node-lifecycle-controller",
    "taint-eviction-controller",
    "clusterrole-aggregation-controller",
    "root-ca-certificate-publisher-controller",
    "endpointslice-controller",
)
# The API server as EKS runs it: privileged containers allowed (EKS's kube-apiserver runs with
# --allow-privileged=true: an EKS node runs the privileged aws-node and kube-proxy pods), Pod Security
# admission on (a default plugin since Kubernetes 1.25), and EKS's admission plugins, among them
# ExtendedResourceToleration (enabled since EKS 1.19: aws/containers-roadmap#739), which adds a
# toleration of a requested extended resource's taint (nvidia.com/gpu) to the pods that request it.
ALLOW_PRIVILEGED = "--allow-privileged=true"
ADMISSION = (
    "NamespaceLifecycle,LimitRanger,ServiceAccount,DefaultStorageClass,DefaultTolerationSeconds,"
    "NodeRestriction,MutatingAdmissionWebhook,ValidatingAdmissionWebhook,ValidatingAdmissionPolicy,"
    "ResourceQuota,Priority,ExtendedResourceToleration,RuntimeClass,PodSecurity"
)


def _probe(url: str, ca: Path | None = None) -> bool:
    ctx = ssl.create_default_context(cafile=str(ca)) if ca else ssl._create_unverified_context()
    try:
        with urllib.request.urlopen(url, context=ctx if url.startswith("https") else None, timeout=2) as resp:
            return resp.status == 200
    except (OSError, urllib.error.URLError):
        return False


def write_kubeconfig(
    path: Path, server: str, ca: Path, *, token: str | None = None, cert: str | None = None
) -> Path:
    user: dict[str, Any] = (
        {"token": token} if token else {"client-certificate": f"{cert}.crt", "client-key": f"{cert}.key"}
    )
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "topogov-local", "cluster": {"server": server, "certificate-authority": str(ca)}}
        ],
        "users": [{"name": "user", "user": user}],
        "contexts": [{"name": "topogov-local", "context": {"cluster": "topogov-local", "user": "user"}}],
        "current-context": "topogov-local",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    path.chmod(0o600)
    return path


class ControlPlane:
    def __init__(
        self,
        directory: Path,
        *,
        kueue: bool = True,
        nodes: bool = True,
        rbac: Path | None = RBAC_MANIFEST,
        audit_log: Path | None = None,
        external_frameworks: Sequence[str] = (),
        training_controllers: bool = False,
        kueue_v1beta1: bool = True,
    ) -> None:
        self.dir = Path(directory).resolve()
        # False: every kueue.x-k8s.io CRD's v1beta1 is set ``served: false`` once Kueue runs, as on a
        # Kueue that no longer serves it (v0.20, kubernetes-sigs/kueue #14558)
        self.kueue_v1beta1 = kueue_v1beta1
        # Kueue's integrations.externalFrameworks (manifests.kueue_configuration)
        self.external_frameworks = tuple(external_frameworks)
        self.with_kueue = kueue
        self.with_nodes = nodes
        # JobSet and the training operator (PyTorchJob) run, and Kueue manages both kinds: off by
        # default (two more managers, two CRDs of 1.4 MB; the stacks that submit only Jobs need neither)
        self.with_training = training_controllers
        self.rbac = rbac
        # Off by default. When given, kube-apiserver writes one JSON line per request (level Metadata:
        # user, impersonated user, verb, resource, namespace, name, response code) there.
        self.audit_log = Path(audit_log).resolve() if audit_log else None
        self.procs: list[ManagedProcess] = []
        self.pki: Pki | None = None
        self.ports: dict[str, int] = {}
        self.timings: dict[str, float] = {}
        self._admin: Any = None
        self._namespaced: list[str] | None = None  # namespaced resources, for a reset (discovery)
        # Set once the URL and the CA are known (ports chosen, PKI made), before any server starts:
        # what an EKS DescribeCluster answers, so a deployment that names the cluster can begin.
        self.addressed = threading.Event()

    # -- paths ------------------------------------------------------------------------------------
    @property
    def apiserver_url(self) -> str:
        return f"https://127.0.0.1:{self.ports['apiserver']}"

    @property
    def url(self) -> str:
        """Where Topogov's identities reach the API server: the fault proxy."""
        return f"https://127.0.0.1:{self.ports['proxy']}"

    def kubeconfig(self, identity: str = "admin") -> Path:
        return self.dir / "kubeconfig" / f"{identity}.kubeconfig"

    @property
    def direct_kubeconfig(self) -> Path:
        return self.dir / "kubeconfig" / "admin-direct.kubeconfig"

    def log(self, name: str) -> Path:
        return self.dir / "logs" / f"{name}.log"

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self, stop_on_error: bool = True) -> ControlPlane:
        """Start every server in order. On an error or a stop signal the servers started so far are
        stopped, unless ``stop_on_error`` is False: the caller stops them with its own (a local
        stack stops the cluster and its AWS emulator in one grace period)."""
        try:
            self._start()
        except BaseException:
            if stop_on_error:
                self.stop()
            raise
        return self

    def _start(self) -> None:
        """etcd, kube-apiserver, the controller manager and the scheduler, KWOK, Kueue, the RBAC
        manifest and the fault proxy, each started once the one before it answers its probe."""
        started = time.monotonic()
        bins = build.ensure_built()
        self.timings["build"] = time.monotonic() - started
        (self.dir / "logs").mkdir(parents=True, exist_ok=True)
        shutil.rmtree(self.dir / "etcd", ignore_errors=True)
        self.pki = make_pki(self.dir / "pki")
        names: tuple[str, ...] = (
            "etcd",
            "etcd-peer",
            "apiserver",
            "controller-manager",
            "scheduler",
            "kwok",
            "webhook",
            "kueue-health",
            "kueue-metrics",
            "proxy",
        )
        if self.with_training:
            names += (
                "jobset-webhook",
                "jobset-health",
                "training-operator-webhook",
                "training-operator-health",
            )
        self.ports = {name: free_port() for name in names}
        self.addressed.set()
        self._start_etcd(bins)
        self._start_apiserver(bins)
        self._write_kubeconfigs()
        self._start_controllers(bins)
        admin = self.admin()
        if self.with_nodes:
            self._start_kwok(bins)
        if self.with_training:
            self._start_training(bins)
        if self.with_kueue:
            self._start_kueue(bins)
        if self.rbac is not None:
            self.apply([d for d in yaml.safe_load_all(self.rbac.read_text()) if d])
        self._start_proxy()
        del admin
        self.timings["total"] = time.monotonic() - started
        spent("cluster start", self.timings["total"])

    def _start_etcd(self, bins: Path) -> None:
        p = self.ports
        self._run(
            "etcd",
            [
                str(bins / "etcd"),
                "--name",
                "topogov-local",
                "--data-dir",
                str(self.dir / "etcd"),
                "--listen-client-urls",
                f"http://127.0.0.1:{p['etcd']}",
                "--advertise-client-urls",
                f"http://127.0.0.1:{p['etcd']}",
                "--listen-peer-urls",
                f"http://127.0.0.1:{p['etcd-peer']}",
                "--initial-advertise-peer-urls",
                f"http://127.0.0.1:{p['etcd-peer']}",
                "--initial-cluster",
                f"topogov-local=http://127.0.0.1:{p['etcd-peer']}",
                "--listen-metrics-urls",
                "",
                # EKS limits etcd to 8 GiB ("etcd storage is limited to 8 GiB as per upstream
                # guidance", EKS User Guide, clusters.html); etcd's own default is 2 GiB. A flood of
                # 1 MB Jobs grows the database by ~3.4 MiB a submit-and-cancel cycle between the API
                # server's compactions (1.47 GB after 675 cycles here).
                "--quota-backend-bytes",
                str(8 * 2**30),
                "--unsafe-no-fsync",
                "--log-level",
                "warn",
            ],
            lambda: _probe(f"http://127.0.0.1:{p['etcd']}/health"),
        )

    def _start_apiserver(self, bins: Path) -> None:
        assert self.pki is not None
        p, pki = self.ports, self.pki
        d = pki.directory
        self._run(
            "kube-apiserver",
            [
                str(bins / "kube-apiserver"),
                f"--etcd-servers=http://127.0.0.1:{p['etcd']}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={p['apiserver']}",
                "--endpoint-reconciler-type=none",
                f"--tls-cert-file={d / 'apiserver.crt'}",
                f"--tls-private-key-file={d / 'apiserver.key'}",
                f"--client-ca-file={d / 'ca.crt'}",
                f"--token-auth-file={d / 'tokens.csv'}",
                f"--kubelet-client-certificate={d / 'apiserver-kubelet-client.crt'}",
                f"--kubelet-client-key={d / 'apiserver-kubelet-client.key'}",
                "--authorization-mode=Node,RBAC",
                ALLOW_PRIVILEGED,
                f"--enable-admission-plugins={ADMISSION}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={d / 'sa.pub'}",
                f"--service-account-signing-key-file={d / 'sa.key'}",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--profiling=false",
                *self._audit_flags(),
                "--v=1",
            ],
            lambda: _probe(f"{self.apiserver_url}/readyz", pki.ca),
            timeout_s=90,
        )

    def _start_controllers(self, bins: Path) -> None:
        """The controller manager (the Job and node lifecycle controllers among them) and the scheduler."""
        assert self.pki is not None
        p, d = self.ports, self.pki.directory
        self._run(
            "kube-controller-manager",
            [
                str(bins / "kube-controller-manager"),
                *self._component_auth("controller-manager"),
                f"--secure-port={p['controller-manager']}",
                "--leader-elect=false",
                "--use-service-account-credentials=true",
                f"--controllers={','.join(CONTROLLERS)}",
                f"--service-account-private-key-file={d / 'sa.key'}",
                f"--root-ca-file={d / 'ca.crt'}",
                "--cluster-name=topogov-local",
                # client-side rate limit (default 20 QPS): the node lifecycle controller lifts the
                # not-ready taint of each new node with its own calls, so a 75-node stack waited ~9 s
                "--kube-api-qps=200",
                "--kube-api-burst=400",
                # a node is unhealthy once its lease is this old (default 50 s): above the fake
                # kubelets' lease (manifests.NODE_LEASE_S, renewed every quarter of it)
                f"--node-monitor-grace-period={2 * manifests.NODE_LEASE_S}s",
                "--v=1",
            ],
            lambda: _probe(f"https://127.0.0.1:{p['controller-manager']}/healthz"),
        )
        self._run(
            "kube-scheduler",
            [
                str(bins / "kube-scheduler"),
                *self._component_auth("scheduler"),
                f"--secure-port={p['scheduler']}",
                "--leader-elect=false",
                "--v=1",
            ],
            lambda: _probe(f"https://127.0.0.1:{p['scheduler']}/readyz"),
        )

    def _start_kwok(self, bins: Path) -> None:
        p = self.ports
        kwok_dir = build.module_dir("sigs.k8s.io/kwok", build.KWOK_VERSION, "kwok")
        self.apply(manifests.kwok_rbac(kwok_dir))
        config = self.dir / "kwok.yaml"
        config.write_text(yaml.safe_dump_all(manifests.kwok_configuration(kwok_dir, port=p["kwok"])))
        self._run(
            "kwok",
            [
                str(bins / "kwok"),
                f"--kubeconfig={self._component_kubeconfig('kwok')}",
                f"--config={config}",
            ],
            lambda: _probe(f"http://127.0.0.1:{p['kwok']}/healthz"),
        )

    def _start_proxy(self) -> None:
        """The fault proxy in front of the API server (the tests' faults; the functions' endpoint)."""
        assert self.pki is not None
        p, pki, d = self.ports, self.pki, self.pki.directory
        self._run(
            "proxy",
            python_module(
                "topogov_local.cluster.faultproxy",
                "--port",
                str(p["proxy"]),
                "--upstream",
                self.apiserver_url,
                "--ca",
                str(pki.ca),
                "--cert",
                str(d / "proxy.crt"),
                "--key",
                str(d / "proxy.key"),
            ),
            env={"TOPOGOV_PROXY_ADMIN_TOKEN": pki.token("admin")},
        )

    def _start_kueue(self, bins: Path) -> None:
        assert self.pki is not None
        p, d = self.ports, self.pki.directory
        kueue_dir = build.module_dir("sigs.k8s.io/kueue", build.KUEUE_VERSION, "kueue")
        hook_url = f"https://127.0.0.1:{p['webhook']}"
        ca_pem = self.pki.webhook_ca.read_bytes()
        self.apply(manifests.kueue_crds(kueue_dir, hook_url, ca_pem))
        self.apply(manifests.kueue_rbac(kueue_dir))
        self.apply([manifests.kueue_deployment_record(build.KUEUE_VERSION)])
        self.apply(manifests.kueue_webhooks(kueue_dir, hook_url, ca_pem))
        self._wait_established()
        certs = self._serving_certs("kueue-certs")
        _ensure_metrics_certs(d / "metrics.crt", d / "metrics.key")
        frameworks: tuple[str, ...] = (manifests.BATCH_JOB,)
        if self.with_training:
            frameworks += (manifests.PYTORCHJOB, manifests.JOBSET)
        config = self.dir / "kueue-config.yaml"
        config.write_text(
            yaml.safe_dump(
                manifests.kueue_configuration(
                    webhook_port=p["webhook"],
                    health_port=p["kueue-health"],
                    metrics_port=p["kueue-metrics"],
                    cert_dir=certs,
                    external_frameworks=self.external_frameworks,
                    frameworks=frameworks,
                )
            )
        )
        self._run(
            "kueue",
            [
                str(bins / "kueue"),
                f"--config={config}",
                f"--kubeconfig={self._component_kubeconfig('kueue')}",
                "--zap-log-level=info",
            ],
            lambda: _probe(f"http://127.0.0.1:{p['kueue-health']}/readyz"),
        )
        if not self.kueue_v1beta1:
            self.unserve_kueue_version("v1beta1")

    def unserve_kueue_version(self, version: str, timeout_s: float = 30) -> None:
        """Set ``served: false`` on ``version`` of every ``kueue.x-k8s.io`` CRD (a JSON patch each,
        tested against the index), then wait until discovery no longer lists it."""
        admin = self.admin()
        crds = admin.request("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions").body
        for crd in crds["items"]:
            if crd["spec"]["group"] != "kueue.x-k8s.io":
                continue
            for i, v in enumerate(crd["spec"]["versions"]):
                if v["name"] != version:
                    continue
                patch = [
                    {"op": "test", "path": f"/spec/versions/{i}/name", "value": version},
                    {"op": "replace", "path": f"/spec/versions/{i}/served", "value": False},
                ]
                name = crd["metadata"]["name"]
                resp = admin.request(
                    "PATCH",
                    f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}",
                    body=patch,
                    content_type="application/json-patch+json",
                )
                if resp.status != 200:
                    raise RuntimeError(f"unserving {name} {version}: HTTP {resp.status} {resp.body}")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            group = admin.request("GET", "/apis/kueue.x-k8s.io").body or {}
            if version not in {v.get("version") for v in group.get("versions") or ()}:
                return
            time.sleep(0.2)
        raise RuntimeError(f"kueue.x-k8s.io still serves {version} after {timeout_s:.0f}s")

    def _start_training(self, bins: Path) -> None:
        """JobSet and the training operator: their CRDs, RBAC and webhook configurations
        (:mod:`.manifests`), then each manager, ready once its webhook server listens."""
        assert self.pki is not None
        p = self.ports
        jobset_dir = build.module_dir("sigs.k8s.io/jobset", build.JOBSET_VERSION, "jobset")
        operator_dir = build.module_dir(
            "github.com/kubeflow/training-operator", build.TRAINING_OPERATOR_VERSION, "training-operator"
        )
        ca_pem = self.pki.webhook_ca.read_bytes()
        self.apply([*manifests.jobset_crds(jobset_dir), *manifests.pytorchjob_crds(operator_dir)])
        self.apply([*manifests.jobset_rbac(jobset_dir), *manifests.training_operator_rbac(operator_dir)])
        self.apply(manifests.jobset_webhooks(jobset_dir, f"https://127.0.0.1:{p['jobset-webhook']}", ca_pem))
        self.apply(
            manifests.training_operator_webhooks(
                operator_dir, f"https://127.0.0.1:{p['training-operator-webhook']}", ca_pem
            )
        )
        self._wait_established()
        config = self.dir / "jobset-config.yaml"
        config.write_text(
            yaml.safe_dump(
                manifests.jobset_configuration(
                    webhook_port=p["jobset-webhook"],
                    health_port=p["jobset-health"],
                    cert_dir=self._serving_certs("jobset-certs"),
                )
            )
        )
        self._run(
            "jobset",
            [
                str(bins / "jobset"),
                f"--config={config}",
                f"--kubeconfig={self._component_kubeconfig('jobset')}",
                "--zap-log-level=info",
            ],
            lambda: _probe(f"http://127.0.0.1:{p['jobset-health']}/readyz"),
        )
        template = self.dir / "pytorch-init-container.yaml"
        template.write_text(manifests.PYTORCH_INIT_CONTAINER_TEMPLATE)
        self._run(
            "training-operator",
            [
                str(bins / "training-operator"),
                f"--kubeconfig={self._component_kubeconfig('training-operator')}",
                "--enable-scheme=pytorchjob",
                "--metrics-bind-address=0",
                f"--health-probe-bind-address=127.0.0.1:{p['training-operator-health']}",
                "--webhook-server-host=127.0.0.1",
                f"--webhook-server-port={p['training-operator-webhook']}",
                f"--webhook-cert-dir={self._serving_certs('training-operator-certs')}",
                f"--pytorch-init-container-template-file={template}",
                "--kube-api-qps=50",
                "--kube-api-burst=100",
                "--zap-log-level=info",
            ],
            lambda: _probe(f"http://127.0.0.1:{p['training-operator-health']}/readyz"),
        )

    def _serving_certs(self, name: str) -> Path:
        """A folder of this cluster's with the webhook serving certificate (127.0.0.1, signed by the
        webhook CA) as a controller-runtime webhook server reads it: ``tls.crt``, ``tls.key``."""
        assert self.pki is not None
        certs = self.dir / name
        certs.mkdir(exist_ok=True)
        shutil.copy(self.pki.path("webhook.crt"), certs / "tls.crt")
        shutil.copy(self.pki.path("webhook.key"), certs / "tls.key")
        return certs

    def stop(self) -> None:
        stop_all(reversed(self.procs))  # together: each would otherwise take its grace in turn
        self.procs.clear()

    def pause(self) -> None:
        """Every server stopped where it stands until :meth:`resume` (a cluster kept for later
        uses no processor meanwhile; ``ManagedProcess.pause``)."""
        for proc in self.procs:
            proc.pause()

    def resume(self) -> None:
        for proc in self.procs:
            proc.resume()

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- helpers ----------------------------------------------------------------------------------
    def _run(
        self,
        name: str,
        argv: list[str],
        ready: Any = None,
        timeout_s: float = 60,
        env: dict[str, str] | None = None,
    ) -> None:
        t0 = time.monotonic()
        proc = ManagedProcess(name, argv, log_path=self.log(name), ready=ready, env=env)
        self.procs.append(proc)
        proc.start(timeout_s=timeout_s)
        self.timings[name] = time.monotonic() - t0

    def _audit_flags(self) -> list[str]:
        """``--audit-log-path`` / ``--audit-policy-file`` when an audit log was asked for: every
        request at level Metadata, logged once (at ResponseComplete; the RequestReceived stage is
        omitted)."""
        if self.audit_log is None:
            return []
        policy = self.dir / "audit-policy.yaml"
        policy.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "audit.k8s.io/v1",
                    "kind": "Policy",
                    "omitStages": ["RequestReceived"],
                    "rules": [{"level": "Metadata"}],
                }
            )
        )
        self.audit_log.parent.mkdir(parents=True, exist_ok=True)
        self.audit_log.unlink(missing_ok=True)
        return [f"--audit-log-path={self.audit_log}", f"--audit-policy-file={policy}"]

    def _component_kubeconfig(self, component: str) -> Path:
        assert self.pki is not None
        return write_kubeconfig(
            self.dir / "kubeconfig" / f"{component}.kubeconfig",
            self.apiserver_url,
            self.pki.ca,
            cert=str(self.pki.directory / component),
        )

    def _component_auth(self, component: str) -> list[str]:
        path = self._component_kubeconfig(component)
        return [
            f"--kubeconfig={path}",
            f"--authentication-kubeconfig={path}",
            f"--authorization-kubeconfig={path}",
        ]

    def _write_kubeconfigs(self) -> None:
        assert self.pki is not None
        for identity in IDENTITIES:
            write_kubeconfig(self.kubeconfig(identity), self.url, self.pki.ca, token=self.pki.token(identity))
        write_kubeconfig(
            self.direct_kubeconfig, self.apiserver_url, self.pki.ca, token=self.pki.token("admin")
        )

    def admin(self) -> Any:
        """A KubeHttp to the API server itself, as admin (set-up, not counted by the proxy)."""
        if self._admin is None:
            from topogov.adapters.kube import KubeHttp
            from topogov.adapters.kube_auth import kubeconfig_api_client

            self._admin = KubeHttp(kubeconfig_api_client(str(self.direct_kubeconfig)), backoff_base_s=0.05)
        return self._admin

    def apply(self, objects: Iterable[dict[str, Any]]) -> None:
        """Create each object (server-side apply, as ``kubectl apply --server-side --force-conflicts``)."""
        for obj in objects:
            path = object_path(obj)
            resp = self.admin().request(
                "PATCH",
                path,
                query={"fieldManager": "topogov-local", "force": "true"},
                body=json.dumps(obj),
                content_type="application/apply-patch+yaml",
            )
            if resp.status not in (200, 201):
                raise RuntimeError(
                    f"apply {obj['kind']} {obj['metadata']['name']}: HTTP {resp.status} {resp.body}"
                )

    SYSTEM_NAMESPACES = frozenset(
        {"default", "kube-system", "kube-public", "kube-node-lease", "kueue-system"}
    )
    _KUEUE_CLUSTER = ("clusterqueues", "resourceflavors", "topologies", "cohorts", "workloadpriorityclasses")

    def reset(self, timeout_s: float = 60) -> None:
        """Back to an empty cluster, for tests that each want one: every Node, Job (PyTorchJob and
        JobSet too, with ``training_controllers``), Pod, Kueue object and non-system Namespace deleted (waited
        for, finalizers and all), as a test fixture of Kueue's own integration suite tears down.
        Topogov's RBAC (``deploy/rbac.yaml``) is applied again, team namespaces included."""
        started = time.monotonic()
        admin = self.admin()
        kueue = "/apis/kueue.x-k8s.io/v1beta2"
        namespaces = [n["metadata"]["name"] for n in admin.request("GET", "/api/v1/namespaces").body["items"]]
        # PyTorchJobs and JobSets before their Jobs and Pods, which they would make again
        training = (
            "kubeflow.org/v1/namespaces/{ns}/pytorchjobs",
            "jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets",
        )
        for ns in namespaces:
            for path in (
                *(f"/apis/{t.format(ns=ns)}" for t in (training if self.with_training else ())),
                f"{kueue}/namespaces/{ns}/localqueues",
                f"/apis/batch/v1/namespaces/{ns}/jobs",
                f"{kueue}/namespaces/{ns}/workloads",
                f"/api/v1/namespaces/{ns}/pods",
            ):
                if ns not in ("kube-system", "kueue-system"):
                    admin.request(
                        "DELETE", path, query={"propagationPolicy": "Background", "gracePeriodSeconds": 0}
                    )
        # Topologies last, once no ResourceFlavor is left: Kueue v0.17.0's Topology controller drops
        # its finalizer only if no flavor in its TAS cache names the Topology, and a flavor's delete
        # event can reach that check before the flavor controller has removed the flavor from the
        # cache (pkg/controller/tas/topology_controller.go, Reconcile: "topology is still in use",
        # no requeue). Then nothing reconciles it again and it stays Terminating: a CI run saw it.
        for plural in self._KUEUE_CLUSTER:
            if plural != "topologies":
                admin.request("DELETE", f"{kueue}/{plural}")
        admin.request("DELETE", "/api/v1/nodes")
        for ns in namespaces:
            if ns not in self.SYSTEM_NAMESPACES:
                admin.request("DELETE", f"/api/v1/namespaces/{ns}")
        deadline = time.monotonic() + timeout_s
        flavors_gone, nudged = False, time.monotonic()
        while time.monotonic() < deadline:
            left = [
                n["metadata"]["name"]
                for n in admin.request("GET", "/api/v1/namespaces").body["items"]
                if n["metadata"]["name"] not in self.SYSTEM_NAMESPACES
            ]
            for ns in left:
                self._finish_namespace(admin, ns)
            left += [p for p in self._KUEUE_CLUSTER if admin.request("GET", f"{kueue}/{p}").body.get("items")]
            if not flavors_gone and "resourceflavors" not in left:
                flavors_gone = True
                admin.request("DELETE", f"{kueue}/topologies")
                continue
            if flavors_gone and left == ["topologies"] and time.monotonic() - nudged > 5:
                # The same race, met anyway: an update is an event, and the controller checks again.
                nudged = time.monotonic()
                for t in admin.request("GET", f"{kueue}/topologies").body.get("items") or []:
                    admin.request(
                        "PATCH",
                        f"{kueue}/topologies/{t['metadata']['name']}",
                        body=json.dumps({"metadata": {"annotations": {"topogov.local/reset": str(nudged)}}}),
                        content_type="application/merge-patch+json",
                    )
            if not left:
                break
            time.sleep(0.1)
        else:
            raise RuntimeError(f"reset: still there after {timeout_s:.0f}s: {left}")
        if self.rbac is not None:
            self.apply([d for d in yaml.safe_load_all(self.rbac.read_text()) if d])
        spent("cluster reset", time.monotonic() - started)

    def _namespaced_resources(self, admin: Any) -> list[str]:
        """The list paths (``{ns}`` to fill) of every namespaced resource that can be listed and
        deleted as a collection, from discovery (the CRDs are installed at the start)."""
        if self._namespaced is None:
            versions = ["/api/v1"]
            for group in admin.request("GET", "/apis").body.get("groups") or []:
                versions.append(f"/apis/{group['preferredVersion']['groupVersion']}")
            paths = []
            for base in versions:
                for r in admin.request("GET", base).body.get("resources") or []:
                    verbs = set(r.get("verbs") or ())
                    if r.get("namespaced") and "/" not in r["name"] and {"list", "deletecollection"} <= verbs:
                        paths.append(f"{base}/namespaces/{{ns}}/{r['name']}")
            self._namespaced = paths
        return self._namespaced

    def _finish_namespace(self, admin: Any, ns: str) -> None:
        """The namespace controller's work on a deleted namespace, done now: every namespaced
        resource's objects deleted, and once none is left the ``kubernetes`` finalizer removed through
        the ``finalize`` subresource (kubernetes v1.35.4, pkg/controller/namespace/deletion/
        namespaced_resources_deleter.go, Delete). The controller starts that only 5 s after the delete
        (namespace_controller.go, namespaceDeletionGracePeriod: for HA API servers and etcd members to
        see it; this cluster has one of each): every reset that deleted a namespace waited that long."""
        left = 0
        for template in self._namespaced_resources(admin):
            path = template.format(ns=ns)
            items = admin.request("GET", path, query={"limit": 1}).body.get("items")
            if items:
                left += 1
                admin.request(
                    "DELETE", path, query={"propagationPolicy": "Background", "gracePeriodSeconds": 0}
                )
        if left:
            return
        resp = admin.request("GET", f"/api/v1/namespaces/{ns}")
        if resp.status == 200 and (resp.body.get("metadata") or {}).get("deletionTimestamp"):
            body = {**resp.body, "spec": {"finalizers": []}}
            admin.request("PUT", f"/api/v1/namespaces/{ns}/finalize", body=body)

    def _wait_established(self, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            items = (
                self.admin().request("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions").body
            )
            pending = [c["metadata"]["name"] for c in items["items"] if not _established(c)]
            if not pending:
                return
            time.sleep(0.1)
        raise RuntimeError(f"CRDs not established in {timeout_s:.0f}s: {pending}")


def _established(crd: dict[str, Any]) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


_CORE = {
    "Namespace": "namespaces",
    "Node": "nodes",
    "ServiceAccount": "serviceaccounts",
    "ConfigMap": "configmaps",
}


def object_path(obj: dict[str, Any]) -> str:
    """The REST path of an object (the kinds the cluster set-up applies)."""
    api_version, kind = obj["apiVersion"], obj["kind"]
    name = obj["metadata"]["name"]
    ns = obj["metadata"].get("namespace")
    plural = _CORE.get(kind) or _PLURALS.get(kind) or kind.lower() + "s"
    prefix = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    scope = f"/namespaces/{ns}" if ns else ""
    return f"{prefix}{scope}/{plural}/{name}"


_PLURALS = {
    "CustomResourceDefinition": "customresourcedefinitions",
    "ClusterRole": "clusterroles",
    "ClusterRoleBinding": "clusterrolebindings",
    "Role": "roles",
    "RoleBinding": "rolebindings",
    "MutatingWebhookConfiguration": "mutatingwebhookconfigurations",
    "ValidatingWebhookConfiguration": "validatingwebhookconfigurations",
    "ValidatingAdmissionPolicy": "validatingadmissionpolicies",
    "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings",
    "Topology": "topologies",
    "WorkloadPriorityClass": "workloadpriorityclasses",
    "Deployment": "deployments",
}


def _ensure_metrics_certs(cert: Path, key: Path) -> None:
    """Kueue's fixed metrics certificate path (see the module docstring): written once, atomically."""
    if (KUEUE_METRICS_CERTS / "tls.crt").is_file() and (KUEUE_METRICS_CERTS / "tls.key").is_file():
        return
    try:
        KUEUE_METRICS_CERTS.mkdir(parents=True, exist_ok=True)
        for src, name in ((cert, "tls.crt"), (key, "tls.key")):
            tmp = KUEUE_METRICS_CERTS / f".{name}.{os.getpid()}"
            shutil.copy(src, tmp)
            tmp.replace(KUEUE_METRICS_CERTS / name)
    except OSError as exc:
        raise RuntimeError(
            f"Kueue v0.17.0 reads its metrics certificate from {KUEUE_METRICS_CERTS} when its own "
            f"certificate management is off (cmd/kueue/main.go), and that directory cannot be written "
            f"here ({exc}): create it once as root with a tls.crt and tls.key, e.g. `sudo mkdir -p "
            f"{KUEUE_METRICS_CERTS} && sudo cp {cert} {KUEUE_METRICS_CERTS}/tls.crt && sudo cp {key} "
            f"{KUEUE_METRICS_CERTS}/tls.key`"
        ) from exc
