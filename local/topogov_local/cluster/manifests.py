"""Kueue's and KWOK's own manifests, read from their Go modules (the versions ``local/controlplane``
pins) and made fit for a cluster whose components run on the host.

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
:data:`DEFAULT_RUN_TIME`; a HyperPodPyTorchJob's pod only when it has a run time).
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
    external_frameworks: Sequence[str] = (),
) -> dict[str, Any]:
    """Kueue's ``Configuration`` (config.kueue.x-k8s.io/v1beta2) for a host-run manager.

    Topology-aware scheduling is Beta and on by default in v0.17 (``pkg/features/kube_features.go``),
    as is ``TASProfileMixed`` (BestFit for required and preferred pod sets, LeastFreeCapacity for
    unconstrained ones); it is written out anyway. ``VisibilityOnDemand`` is off: with its own
    certificate management off, v0.17 reads the visibility server's certificate from a fixed
    ``/visibility`` (``pkg/visibility/server.go``), and nothing here needs that API.

    ``external_frameworks``: kinds whose controller does Kueue's job-framework work itself, as
    ``Kind.version.group`` (``integrations.externalFrameworks``; the ``--hyperpod`` stack's
    ``HyperPodPyTorchJob.v1.sagemaker.amazonaws.com``)."""
    integrations: dict[str, Any] = {"frameworks": ["batch/job"]}
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
