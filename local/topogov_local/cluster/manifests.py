"""Kueue's, KWOK's, JobSet's and the Kubeflow training operator's own manifests, read from their Go
modules (the versions ``local/controlplane`` pins) and made fit for a cluster whose components run on
the host.

Kueue v0.17.0 ships its install as kustomize components (``config/components``); a release
manifest is ``config/default`` rendered: the ``kueue-`` name prefix, the ``kueue-system`` namespace,
the CRD conversion webhooks ``crd/kustomization.yaml`` patches in, the webhook namespace selectors
``webhook/kustomization.yaml`` patches in. Here the same, with two differences a host-run manager
needs, as envtest does: every webhook's ``clientConfig`` is a URL on 127.0.0.1 with our CA instead
of the in-cluster Service, and the RBAC is bound to the manager's client-certificate user instead of
its ServiceAccount.

KWOK v0.8.0 runs no stage unless its configuration lists them (``pkg/kwok/cmd/root.go``: "no stages
found"); the stages are the module's own ``kustomize/stage`` files: node initialise, node heartbeat
with leases, pod ready, pod delete, and pod complete with a delay (a Job's pod succeeds after its
run time: the ``topogov.io/local-run-time`` annotation, else the ``sleep N`` of its command, else
:data:`DEFAULT_RUN_TIME`; a PyTorchJob's pod the same; a HyperPodPyTorchJob's pod only when it has a run
time).

JobSet v0.11.1 and the training operator v1.9.3 (PyTorchJob) the same way as Kueue: their CRDs,
their manager's ClusterRole bound to its certificate user, their webhooks by URL on 127.0.0.1 with
the stack's CA (the release's names and the kustomizations' patches), and a configuration for a
manager on the host.
"""

from __future__ import annotations

import base64
import copy
import functools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

KUEUE_NAMESPACE = "kueue-system"
KUEUE_USER = "kueue-manager"
KWOK_USER = "kwok-controller"
JOBSET_USER = "jobset-manager"
TRAINING_OPERATOR_USER = "training-operator"
# Kueue's integrations (``integrations.frameworks``, pkg/controller/jobs/*): the batch/v1 Job always;
# with the training controllers, the kinds they run (kubeflowjob/pytorchjob, jobset).
BATCH_JOB = "batch/job"
PYTORCHJOB = "kubeflow.org/pytorchjob"
JOBSET = "jobset.x-k8s.io/jobset"
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"  # KWOK manages the nodes that carry it (value "fake")
RUN_TIME_ANNOTATION = "topogov.io/local-run-time"
DEFAULT_RUN_TIME = "30s"


# libyaml's parser where PyYAML was built with it (the wheels are): Kueue's CRDs are 1.6 MB of YAML,
# 1.2 CPU-seconds for the pure-Python parser at every cluster's start, 0.14 s for libyaml's.
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.lru_cache(maxsize=128)
def _parsed(path: Path, mtime_ns: int) -> str:
    """The documents of the module file ``path`` (as of ``mtime_ns``), as JSON: parsed once per
    process, however many clusters it starts."""
    return json.dumps([d for d in yaml.load_all(path.read_text(), Loader=_LOADER) if d])


def _docs(path: Path) -> list[dict[str, Any]]:
    """The documents of ``path``, a copy of their own for each caller (the callers edit them)."""
    docs: list[dict[str, Any]] = json.loads(_parsed(path, path.stat().st_mtime_ns))
    return docs


def _doc(path: Path) -> dict[str, Any]:
    (doc,) = _docs(path)
    return doc


# --- Kueue ---------------------------------------------------------------------------------------


def kueue_crds(kueue_dir: Path, webhook_url: str, ca_pem: bytes) -> list[dict[str, Any]]:
    """The CRDs of ``config/components/crd``, with the conversion webhook the kustomization patches
    in (by URL) on the CRDs it patches."""
    comp = kueue_dir / "config" / "components" / "crd"
    kustomization = _doc(comp / "kustomization.yaml")
    converted = set()
    for patch in kustomization.get("patches") or []:
        if "webhook_in_" in patch.get("path", ""):
            converted.add(_doc(comp / patch["path"])["metadata"]["name"])
    out = []
    for resource in kustomization["resources"]:
        for crd in _docs(comp / resource):
            if crd["metadata"]["name"] in converted:
                crd["spec"]["conversion"] = {
                    "strategy": "Webhook",
                    "webhook": {
                        "clientConfig": {
                            "url": f"{webhook_url}/convert",
                            "caBundle": base64.b64encode(ca_pem).decode(),
                        },
                        "conversionReviewVersions": ["v1"],
                    },
                }
            out.append(crd)
    return out


def kueue_rbac(kueue_dir: Path) -> list[dict[str, Any]]:
    """``config/components/rbac`` with the release's name prefix and namespace, bound to the manager's
    certificate user (no ServiceAccount: the manager runs on the host)."""
    comp = kueue_dir / "config" / "components" / "rbac"
    out: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": KUEUE_NAMESPACE}}
    ]
    for resource in _doc(comp / "kustomization.yaml")["resources"]:
        for doc in _docs(comp / resource):
            if doc["kind"] == "ServiceAccount":
                continue
            doc["metadata"]["name"] = "kueue-" + doc["metadata"]["name"]
            if doc["metadata"].get("namespace") == "system":
                doc["metadata"]["namespace"] = KUEUE_NAMESPACE
            if doc["kind"] in ("ClusterRoleBinding", "RoleBinding"):
                doc["roleRef"]["name"] = "kueue-" + doc["roleRef"]["name"]
                doc["subjects"] = [
                    {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": KUEUE_USER}
                ]
            out.append(doc)
    return out


def kueue_deployment_record(version: str) -> dict[str, Any]:
    """A Deployment that records the Kueue release the cluster runs, as Kueue's release manifests
    deploy the manager (config/default: ``kueue-controller-manager`` in ``kueue-system``, container
    ``manager``, image ``registry.k8s.io/kueue/kueue:<release>``), with no replica: the manager here
    runs on the host, built from that release's module. Topogov reads the release from its image tag
    (``adapters/kueue_api.py``), as on a cluster where Kueue runs in pods."""
    labels = {"app.kubernetes.io/name": "kueue", "control-plane": "controller-manager"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "kueue-controller-manager",
            "namespace": KUEUE_NAMESPACE,
            "labels": labels,
            "annotations": {"topogov.local/note": "a record: the manager runs on the host, not in pods"},
        },
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [{"name": "manager", "image": f"registry.k8s.io/kueue/kueue:{version}"}]
                },
            },
        },
    }


def kueue_webhooks(kueue_dir: Path, webhook_url: str, ca_pem: bytes) -> list[dict[str, Any]]:
    """``config/components/webhook/manifests.yaml``: each webhook by URL, with the namespace
    selectors of the kustomization's patches."""
    comp = kueue_dir / "config" / "components" / "webhook"
    selectors: dict[tuple[str, str], Any] = {}
    for patch in _doc(comp / "kustomization.yaml").get("patches") or []:
        doc = yaml.load(patch["patch"], Loader=_LOADER)
        for hook in doc.get("webhooks") or []:
            selectors[(doc["kind"], hook["name"])] = hook["namespaceSelector"]
    bundle = base64.b64encode(ca_pem).decode()
    out = []
    for doc in _docs(comp / "manifests.yaml"):
        if doc["kind"] not in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            continue
        doc["metadata"]["name"] = "kueue-" + doc["metadata"]["name"]
        for hook in doc["webhooks"]:
            hook["clientConfig"] = {
                "url": webhook_url + hook["clientConfig"]["service"]["path"],
                "caBundle": bundle,
            }
            if (doc["kind"], hook["name"]) in selectors:
                hook["namespaceSelector"] = selectors[(doc["kind"], hook["name"])]
        out.append(doc)
    return out


def kueue_configuration(
    *,
    webhook_port: int,
    health_port: int,
    metrics_port: int,
    cert_dir: Path,
    frameworks: tuple[str, ...] = (BATCH_JOB,),
    external_frameworks: Sequence[str] = (),
) -> dict[str, Any]:
    """Kueue's ``Configuration`` (config.kueue.x-k8s.io/v1beta2) for a host-run manager.

    Topology-aware scheduling is Beta and on by default in v0.17 (``pkg/features/kube_features.go``),
    as is ``TASProfileMixed`` (BestFit for required and preferred pod sets, LeastFreeCapacity for
    unconstrained ones); it is written out anyway. ``VisibilityOnDemand`` is off: with its own
    certificate management off, v0.17 reads the visibility server's certificate from a fixed
    ``/visibility`` (``pkg/visibility/server.go``), and nothing here needs that API.

    ``frameworks``: the built-in integrations Kueue manages (:data:`BATCH_JOB`, :data:`PYTORCHJOB`,
    :data:`JOBSET`); a kind's CRD must exist before Kueue starts, or Kueue sets that integration up
    only after a backoff of up to 2 minutes (kueue@v0.17.0 pkg/controller/jobframework/setup.go,
    ``waitForAPI``). ``external_frameworks``: ``Kind.version.group`` of kinds whose controller does Kueue's
    job-framework work itself (``integrations.externalFrameworks``; the ``--hyperpod`` stack's
    ``HyperPodPyTorchJob.v1.sagemaker.amazonaws.com``; none unless given)."""
    integrations: dict[str, Any] = {"frameworks": list(frameworks)}
    if external_frameworks:
        integrations["externalFrameworks"] = list(external_frameworks)
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": KUEUE_NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": f"127.0.0.1:{metrics_port}"},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "clientConnection": {"qps": 50, "burst": 100},
        "integrations": integrations,
        "featureGates": {
            "TopologyAwareScheduling": True,
            "TASProfileMixed": True,
            "VisibilityOnDemand": False,
        },
    }


# --- KWOK ------------------------------------------------------------------------------------------

_STAGES = (
    "node/fast/node-initialize.yaml",
    "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "pod/fast/pod-ready.yaml",
    "pod/fast/pod-complete.yaml",
    "pod/fast/pod-delete.yaml",
)
# The run time of a pod (gojq, as KWOK evaluates ``expressionFrom``): the annotation, else the
# number of seconds (or minutes, hours) of a ``sleep`` in its first container's command and args.
_RUN_TIME = (
    f'.metadata.annotations["{RUN_TIME_ANNOTATION}"] // '
    '(([.spec.containers[0].command[]?, .spec.containers[0].args[]?] | join(" ") '
    '| capture("sleep +(?<n>[0-9]+)(?<u>[smh]?)")) | .n + (if .u == "" then "s" else .u end))'
)


NODE_LEASE_S = 3600  # a fake node's lease (kwok_configuration)


def kwok_configuration(kwok_dir: Path, *, port: int) -> list[dict[str, Any]]:
    """KWOK's configuration: manage the nodes annotated ``kwok.x-k8s.io/node: fake``, serve its fake
    kubelet on 127.0.0.1, and play the stages listed above."""
    config: dict[str, Any] = {
        "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
        "kind": "KwokConfiguration",
        "options": {
            "manageAllNodes": False,
            "manageNodesWithAnnotationSelector": f"{KWOK_NODE_ANNOTATION}=fake",
            "cidr": "10.244.0.0/16",
            "nodeIP": "127.0.0.1",
            "nodePort": port,
            "serverAddress": f"127.0.0.1:{port}",
            # A lease renewed every quarter of its duration (kwok v0.8.0 controllers/controller.go,
            # as the kubelet): at 40 s, 70 nodes made 7 writes a second, most of an idle stack's CPU
            # (6.4 % of a core). Nothing here watches a node's health over time, so an hour, renewed
            # every 15 min, with the controller manager's grace period above it (controlplane.py).
            "nodeLeaseDurationSeconds": NODE_LEASE_S,
            "nodeLeaseParallelism": 4,
            "podPlayStageParallelism": 4,
            "nodePlayStageParallelism": 4,
            "enablePodsOnNodeSyncStreamWatch": True,
        },
    }
    stages = []
    for rel in _STAGES:
        for stage in _docs(kwok_dir / "kustomize" / "stage" / rel):
            stage = copy.deepcopy(stage)
            if stage["metadata"]["name"] == "pod-complete":
                stage["spec"]["delay"] = {
                    "durationMilliseconds": _millis(DEFAULT_RUN_TIME),
                    "durationFrom": {"expressionFrom": _RUN_TIME},
                }
                # a PyTorchJob's pods end as a Job's do (the training operator owns them itself)
                for e in stage["spec"]["selector"]["matchExpressions"]:
                    if e["key"] == ".metadata.ownerReferences.[].kind":
                        e["values"] = [*e["values"], "PyTorchJob"]
            stages.append(stage)
            if stage["metadata"]["name"] == "pod-complete":
                stages.append(_run_time_stage(stage, HYPERPOD_JOB_KIND))
    return [config, *stages]


HYPERPOD_JOB_KIND = "HyperPodPyTorchJob"  # the --hyperpod stack's jobs (hyperpod/operator.py: their pods)


def _run_time_stage(pod_complete: dict[str, Any], owner_kind: str) -> dict[str, Any]:
    """``pod-complete`` for the pods of an ``owner_kind``, only those given a run time (the
    annotation, or a ``sleep`` in the command): a training pod with neither runs until deleted, as
    a real one runs until its script ends, instead of a Job's default run time."""
    stage = copy.deepcopy(pod_complete)
    stage["metadata"]["name"] = f"{owner_kind.lower()}-pod-complete"
    expressions = []
    for e in stage["spec"]["selector"]["matchExpressions"]:
        if e["key"] == ".metadata.ownerReferences.[].kind":
            e = {**e, "values": [owner_kind]}
        expressions.append(e)
    expressions.append({"key": _RUN_TIME, "operator": "Exists"})
    stage["spec"]["selector"]["matchExpressions"] = expressions
    return stage


def _millis(duration: str) -> int:
    units = {"s": 1000, "m": 60_000, "h": 3_600_000}
    return int(duration[:-1]) * units[duration[-1]]


def kwok_rbac(kwok_dir: Path) -> list[dict[str, Any]]:
    """KWOK's ClusterRole (``kustomize/rbac/role.yaml``) bound to its certificate user."""
    role = _docs(kwok_dir / "kustomize" / "rbac" / "role.yaml")[0]
    name = role["metadata"]["name"]
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": KWOK_USER}],
    }
    return [role, binding]


# --- shared by JobSet and the training operator -----------------------------------------------------


def _json_patch(doc: dict[str, Any], ops: list[dict[str, Any]]) -> None:
    """RFC 6902 ``add``/``replace`` operations on ``doc`` in place: what the kustomizations'
    patches of these modules use."""
    for op in ops:
        *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        target: Any = doc
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        if op["op"] not in ("add", "replace"):
            raise ValueError(f"patch operation {op['op']!r} is not supported: {op}")
        if isinstance(target, list):
            index = len(target) if last == "-" else int(last)
            if op["op"] == "add":
                target.insert(index, op["value"])
            else:
                target[index] = op["value"]
        else:
            target[last] = op["value"]


def _ops(path: Path) -> list[dict[str, Any]]:
    """The operations of the JSON-patch file ``path`` (one YAML document, a list)."""
    ops: list[dict[str, Any]] = json.loads(_parsed(path, path.stat().st_mtime_ns))[0]
    return ops


def _by_url(doc: dict[str, Any], webhook_url: str, ca_pem: bytes) -> dict[str, Any]:
    """A webhook configuration whose webhooks call ``webhook_url`` + their path, trusting ``ca_pem``."""
    bundle = base64.b64encode(ca_pem).decode()
    for hook in doc["webhooks"]:
        hook["clientConfig"] = {
            "url": webhook_url + hook["clientConfig"]["service"]["path"],
            "caBundle": bundle,
        }
    return doc


def _bound(role: dict[str, Any], name: str, user: str) -> list[dict[str, Any]]:
    """The ClusterRole ``role`` named ``name`` and a ClusterRoleBinding of it to the certificate user
    ``user`` (the manager runs on the host: no ServiceAccount)."""
    role = {**role, "metadata": {**role["metadata"], "name": name}}
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }
    return [role, binding]


# --- JobSet ------------------------------------------------------------------------------------------


def jobset_crds(jobset_dir: Path) -> list[dict[str, Any]]:
    """The CRDs of ``config/components/crd`` (JobSet alone). Its kustomization also patches in a
    conversion webhook and cert-manager's CA injection; the CRD has one version (v1alpha2, served
    and stored), so the API server never converts and the patches are left out."""
    comp = jobset_dir / "config" / "components" / "crd"
    return [
        crd for resource in _doc(comp / "kustomization.yaml")["resources"] for crd in _docs(comp / resource)
    ]


def jobset_rbac(jobset_dir: Path) -> list[dict[str, Any]]:
    """The manager's ClusterRole (``config/components/rbac/role.yaml``, ``manager-role`` with the
    release's ``jobset-`` prefix) bound to its certificate user. The kustomization's other roles are
    for what the stack turns off: leader election, certificate rotation's Secret, the metrics proxy."""
    role = _doc(jobset_dir / "config" / "components" / "rbac" / "role.yaml")
    return _bound(role, "jobset-" + role["metadata"]["name"], JOBSET_USER)


def jobset_webhooks(jobset_dir: Path, webhook_url: str, ca_pem: bytes) -> list[dict[str, Any]]:
    """``config/components/webhook/manifests.yaml`` with the kustomization's patches (the Pod
    webhooks limited to JobSet's pods by an ``objectSelector``), the release's ``jobset-`` prefix,
    each webhook by URL: the JobSet defaulter ``mjobset.kb.io`` and validator ``vjobset.kb.io``, and
    the Pod webhooks of exclusive placement.

    The defaulter is not optional: the controller reads ``spec.successPolicy``, ``startupPolicy``
    and ``network.enableDNSHostnames`` without nil checks (jobset@v0.11.1
    pkg/controllers/jobset_controller.go, success_policy.go), and it makes each replicated Job
    ``Indexed``, whose completion index Kueue's TAS places pods by."""
    comp = jobset_dir / "config" / "components" / "webhook"
    patches: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for patch in _doc(comp / "kustomization.yaml").get("patches") or []:
        target = patch["target"]
        patches.setdefault((target["kind"], target["name"]), []).extend(_ops(comp / patch["path"]))
    out = []
    for doc in _docs(comp / "manifests.yaml"):
        if doc["kind"] not in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            continue
        _json_patch(doc, patches.get((doc["kind"], doc["metadata"]["name"]), []))
        doc["metadata"]["name"] = "jobset-" + doc["metadata"]["name"]
        out.append(_by_url(doc, webhook_url, ca_pem))
    return out


def jobset_configuration(*, webhook_port: int, health_port: int, cert_dir: Path) -> dict[str, Any]:
    """JobSet's ``Configuration`` (config.jobset.x-k8s.io/v1alpha1) for a manager on the host: the
    webhook server on 127.0.0.1 with the stack's certificate (``cert_dir``: ``tls.crt``,
    ``tls.key``), no certificate rotation (``internalCertManagement``: on by default, it would need
    a Secret in ``jobset-system`` and write to a fixed ``/tmp`` folder, jobset@v0.11.1
    pkg/util/cert/cert.go), no leader election (on by default), no metrics server."""
    return {
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(cert_dir)},
        "metrics": {"bindAddress": "0", "certDir": str(cert_dir)},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "clientConnection": {"qps": 50, "burst": 100},
    }


# --- the Kubeflow training operator (PyTorchJob) -------------------------------------------------------


def pytorchjob_crds(operator_dir: Path) -> list[dict[str, Any]]:
    """``manifests/base/crds/kubeflow.org_pytorchjobs.yaml``: of the kinds the operator ships, the one
    it runs here (one version, v1: no conversion)."""
    return _docs(operator_dir / "manifests" / "base" / "crds" / "kubeflow.org_pytorchjobs.yaml")


def training_operator_rbac(operator_dir: Path) -> list[dict[str, Any]]:
    """The operator's ClusterRole (``manifests/base/rbac/role.yaml``) bound to its certificate user."""
    role = _doc(operator_dir / "manifests" / "base" / "rbac" / "role.yaml")
    return _bound(role, role["metadata"]["name"], TRAINING_OPERATOR_USER)


def training_operator_webhooks(operator_dir: Path, webhook_url: str, ca_pem: bytes) -> list[dict[str, Any]]:
    """``manifests/base/webhook/manifests.yaml`` with its ``patch.yaml`` (the release's name,
    ``validator.training-operator.kubeflow.org``), by URL, and of its webhooks the PyTorchJob
    validator alone: the operator serves only the kinds it runs."""
    comp = operator_dir / "manifests" / "base" / "webhook"
    (doc,) = [d for d in _docs(comp / "manifests.yaml") if d["kind"] == "ValidatingWebhookConfiguration"]
    _json_patch(doc, _ops(comp / "patch.yaml"))
    doc["webhooks"] = [h for h in doc["webhooks"] if h["rules"][0]["resources"] == ["pytorchjobs"]]
    return [_by_url(doc, webhook_url, ca_pem)]


# The operator adds an init container to each Worker of a PyTorchJob that has a Master: it waits for
# the Master's DNS name (training-operator@v1.9.3 pkg/controller.v1/pytorch/initcontainer.go, whose
# template this is, rendered by html/template with the image, the tries and the Master's name). The
# template is upstream's with a securityContext added, so that the Workers pass Pod Security
# ``restricted`` (upstream's lacks allowPrivilegeEscalation: false and dropping every capability, and
# its alpine runs as root): how a platform team with ``restricted`` namespaces configures the operator
# (``--pytorch-init-container-template-file``). Under KWOK no container runs, so the lookup never
# happens (and the stack has no cluster DNS to answer it); the pods have the shape they have on EKS.
PYTORCH_INIT_CONTAINER_TEMPLATE = """\
- name: init-pytorch
  image: {{.InitContainerImage}}
  imagePullPolicy: IfNotPresent
  resources:
    limits:
      cpu: 100m
      memory: 20Mi
    requests:
      cpu: 50m
      memory: 10Mi
  command: ['sh', '-c', 'err=1;for i in $(seq {{.MaxTries}}); do if nslookup {{.MasterAddr}};
    then err=0 && break; fi;echo waiting for master; sleep 2; done; exit $err']
  securityContext:
    allowPrivilegeEscalation: false
    capabilities:
      drop: [ALL]
    runAsNonRoot: true
    runAsUser: 65534
    seccompProfile:
      type: RuntimeDefault
"""
