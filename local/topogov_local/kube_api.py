"""A local Kubernetes API server emulator: real HTTP, real wire formats, in-memory storage.

It answers the calls Topogov's code, the ``kubernetes`` Python client and ``kubectl`` (v1.32) make,
the way kube-apiserver answers them, so offline tests exercise the real clients end to end.

Run it::

    python -m topogov_local.kube_api --host 127.0.0.1 --port 6443 --token T --kubeconfig ./kubeconfig

or in-process::

    server = KubeApiServer(token="T").start()
    write_kubeconfig(path, server.url, "T")
    ...
    server.stop()

http and https on one port
--------------------------
``url`` is ``http://host:port`` and plain-HTTP clients (the ``kubernetes`` client, urllib, curl) may
send the bearer token over it. kubectl cannot: client-go attaches credentials only when the
transport is TLS, so against an ``http://`` server with a token every kubectl call is a 401. The same
port therefore also speaks TLS (the first byte of a connection tells a handshake from a request),
with a certificate for localhost/127.0.0.1/::1 issued by a local CA that is created once per user
under the temp dir (with the ``cryptography`` package, else the ``openssl`` binary).
``write_kubeconfig`` writes ``https://host:port`` plus that CA whenever a token is given, so kubectl
and ``load_kube_config`` both work from the same file. ``KubeApiServer(tls=False)`` turns TLS off.

Emulated
--------
* Resources (``RESOURCES``, one line each): core/v1 nodes, namespaces, pods, events, configmaps,
  serviceaccounts; batch/v1 jobs; coordination.k8s.io/v1 leases; kueue.x-k8s.io v1beta1 *and*
  v1beta2 (one storage; objects read through either version carry that ``apiVersion``, no schema
  conversion) clusterqueues, resourceflavors, workloadpriorityclasses, topologies, cohorts,
  localqueues, workloads; rbac.authorization.k8s.io/v1 roles, rolebindings, clusterroles,
  clusterrolebindings; admissionregistration.k8s.io/v1 validatingadmissionpolicies and bindings.
* Discovery: ``/version``, ``/api``, ``/api/v1``, ``/apis``, ``/apis/{g}``, ``/apis/{g}/{v}`` in the
  legacy (unaggregated) format. kubectl asks for aggregated discovery (``as=APIGroupDiscoveryList``);
  it looks at the response Content-Type, sees ``application/json`` and falls back to the legacy
  documents, so that is all we serve.
* OpenAPI: ``/openapi/v3`` (+ one document per group-version) is a *minimal* document: for each kind
  a PATCH operation tagged with ``x-kubernetes-group-version-kind`` that accepts the
  ``fieldValidation`` query parameter. That is exactly what kubectl's field-validation verifier looks
  for: it then trusts the server to validate and ``kubectl apply -f`` works **without**
  ``--validate=false``. No schemas are served, so kubectl computes client-side-apply patches from its
  compiled-in Go types (built-ins) or as JSON merge patches (Kueue). ``/openapi/v2`` answers 404;
  ``kubectl explain`` therefore does not work.
* Verbs: get, list, watch, create, update (PUT), patch, delete, deletecollection; ``/status``
  (get/put/patch) for the resources listing it in ``subresources``. On the main endpoint status
  changes are ignored and on ``/status`` everything but ``status`` is, as kube does. Creating a pod,
  job, namespace or a Kueue object resets its status as kube does (pods: ``phase: Pending``); a
  node keeps the status it is created with. ``POST /_emulator/objects`` stores objects verbatim
  (status included) for seeding.
* Object metadata: uid, creationTimestamp (RFC 3339, UTC), resourceVersion (one global counter),
  generation (bumped when anything outside metadata/status changes), generateName, managedFields
  (simplified: maps recursed, lists atomic), finalizers (delete sets deletionTimestamp and answers
  202 until the last finalizer is removed), ownerReferences garbage collection.
* Validation (422 Invalid, kube's messages): object names (DNS subdomain; namespaces DNS label; RBAC
  path segments), label keys and values, annotation keys. Nothing else is validated; the
  ``fieldValidation`` parameter is accepted and ignored.
* Defaulting (minimal): namespaces (phase Active, ``kubernetes.io/metadata.name`` label, ``kubernetes``
  finalizer), pods (restartPolicy, schedulerName, dnsPolicy, terminationGracePeriodSeconds, status
  Pending + qosClass), jobs (parallelism, completions, backoffLimit, completionMode, suspend,
  podReplacementPolicy, generated selector and controller-uid / job-name labels).
* list: ``labelSelector`` (``=``, ``==``, ``!=``, ``in``, ``notin``, exists, ``!``, ``>``, ``<``),
  ``fieldSelector`` on any dotted path (``=``, ``==``, ``!=``, with ``\\`` escapes; missing fields read
  as ""), ``limit``/``continue`` (items ordered by the etcd key ``namespace/name``; opaque base64
  continue token; ``remainingItemCount`` when no selector is used), cross-namespace lists.
  Continue tokens never expire, and a later page reflects the *current* state, not a snapshot at
  the first page's resourceVersion (the list resourceVersion reported is the first page's).
* Server-side printing: ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io`` gets a Table with
  kube's columns for nodes, pods, jobs and namespaces (NAME/AGE for the rest), honouring
  ``includeObject`` (None / Object / PartialObjectMetadata). ``as=PartialObjectMetadata(List)`` too.
* Concurrency: a PUT, or a patch whose result carries ``metadata.resourceVersion``, with a stale
  resourceVersion gets 409 Conflict; PUT of a Kueue object without resourceVersion gets 422, as for
  any custom resource. An update that changes nothing is not written (resourceVersion unchanged).
* PATCH: ``merge-patch+json`` (RFC 7386), ``strategic-merge-patch+json`` (built-in kinds only;
  Kueue objects answer 415 like any custom resource), ``json-patch+json`` (RFC 6902; a failed
  operation answers 422 with kube's generic message, the detail in ``details.causes``) and
  ``apply-patch+yaml`` (server-side apply, simplified: see ``_apply_merge``). Anything else: 415.
  Strategic merge: lists of objects merge by the well-known keys in ``_MERGE_KEYS`` (``name`` for
  containers/env/volumes..., ``type`` for conditions/addresses, ``uid`` for ownerReferences...),
  ``finalizers`` merge as a set, every other list is replaced; ``$patch: replace|delete``,
  ``$retainKeys``, ``$deleteFromPrimitiveList/<f>`` and ``$setElementOrder/<f>`` are honoured.
  Server-side apply: creates when missing, merges the applied configuration in (same list rules,
  Kueue lists included) and removes the fields this manager applied before and no longer applies
  unless another manager also set them; no field-ownership conflicts are ever reported, ``force``
  is accepted and ignored.
* DELETE answers the object for pods (and for anything kept by finalizers, with 202), otherwise a
  ``Status`` ``Success`` with details {name, group, kind, uid}; ``propagationPolicy`` Background and
  Foreground delete dependents (ownerReferences by uid) synchronously, Orphan strips the reference.
  The default is Orphan for batch/v1 jobs (with kube's warning header) and Background otherwise.
  Deleting a namespace deletes everything in it at once; default and kube-system cannot be deleted.
  ``dryRun=All`` is honoured for create, update, patch and delete.
* Watch (``?watch=true`` on a collection; ``kubectl get -w`` and ``kubectl wait`` work): chunked JSON
  events ADDED/MODIFIED/DELETED/BOOKMARK/ERROR, ``resourceVersion`` (410 Expired once older than the
  last 50,000 events), label/field selectors with kube's transition semantics, ``timeoutSeconds``,
  ``sendInitialEvents``, Table output. A watch on a single-object path answers 405.
* Request bodies: JSON, YAML, and kube's protobuf for the kinds kubectl 1.32's typed clients POST
  from ``kubectl create namespace|configmap|serviceaccount|role|clusterrole|(cluster)rolebinding``
  (``_PB_SPEC``); a protobuf body of any other kind answers 415. Responses are always JSON, which
  every client accepts.
* Errors are kube ``Status`` objects with kube's messages; malformed bodies 400; unknown paths 404.
* Auth: with a token, every request but /healthz, /livez, /readyz and /_emulator/* needs
  ``Authorization: Bearer <token>`` (else 401 Unauthorized Status). No authorization (RBAC objects
  are stored, not enforced), no admission webhooks, no ValidatingAdmissionPolicy evaluation.
* Test hooks (no auth): ``POST /_emulator/faults`` (``{"method", "path" (regex on the URL path),
  "status", "times", "delay_s", "delete_before", "message", "probability"}``: ``probability`` makes
  it apply to that fraction of the matching requests (seeded RNG); ``GET`` lists each rule's
  ``hits``), ``GET|DELETE /_emulator/faults``,
  ``GET|DELETE /_emulator/requests`` (counters ``"<METHOD> <resource>[/<subresource>]"``, watches
  as ``WATCH``; discovery and OpenAPI as ``GET discovery``), ``POST /_emulator/reset`` (everything
  but the default, kube-system and kube-node-lease namespaces) and ``POST /_emulator/objects``
  (store a ``List`` or a single object verbatim: no status reset, no defaulting).

Not emulated
------------
Controllers (nothing schedules pods, runs jobs, admits Kueue workloads, renews leases or marks
nodes NotReady; a Job's STATUS column reads Running until someone writes its conditions), graceful
pod termination (deletion is immediate), authorization, admission (no Kueue webhook suspends jobs),
CRD schemas/validation/conversion, field-ownership conflicts, protobuf responses, CBOR, aggregated
discovery, OpenAPI schemas (``kubectl explain``), resourceVersion semantics on reads
(``resourceVersion``/``resourceVersionMatch`` are ignored; reads are always the latest state),
subresources other than ``status`` (eviction, binding, scale, log, exec...), the apps, networking,
storage... API groups.
"""

from __future__ import annotations

import argparse
import base64
import bisect
import collections
import contextlib
import hashlib
import hmac
import json
import os
import random
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

__all__ = ["RESOURCES", "KubeApiServer", "ResourceType", "main", "write_kubeconfig"]

KUBE_VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0",
    "gitCommit": "70d3cc986aa8221cd1dfb1121852688902d3bf53",
    "gitTreeState": "clean",
    "buildDate": "2024-12-11T17:58:28Z",
    "goVersion": "go1.23.3",
    "compiler": "gc",
    "platform": "linux/amd64",
}
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-node-lease")
IMMORTAL_NAMESPACES = frozenset({"default", "kube-system", "kube-public"})
WATCH_LOG_SIZE = 50_000

# --------------------------------------------------------------------------------------------------
# Resource registry
# --------------------------------------------------------------------------------------------------

VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
NAMESPACE_VERBS = ("create", "delete", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class ResourceType:
    group: str
    versions: tuple[str, ...]  # served versions; the first is the preferred and storage version
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    crd: bool = False  # a custom resource: no strategic merge patch, PUT needs a resourceVersion
    categories: tuple[str, ...] = ()
    printer: str = "default"
    name_rule: str = "subdomain"  # subdomain | label | path
    verbs: tuple[str, ...] = VERBS
    create_status: str = "reset"  # keep | reset (to the kind's initial status)

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    @property
    def group_resource(self) -> str:  # "nodes", "jobs.batch": how kube names it in messages
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def group_kind(self) -> str:  # "Node", "Job.batch"
        return f"{self.kind}.{self.group}" if self.group else self.kind

    @property
    def storage_version(self) -> str:
        return self.versions[0]

    def api_version(self, version: str | None = None) -> str:
        v = version or self.storage_version
        return f"{self.group}/{v}" if self.group else v

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources


def _r(gv: str, plural: str, kind: str, scope: str, *short: str, **kw: Any) -> ResourceType:
    group, _, versions = gv.rpartition("/")
    return ResourceType(group, tuple(versions.split(",")), plural, kind, scope == "ns", tuple(short), **kw)


_ST = ("status",)
_KUEUE = "kueue.x-k8s.io/v1beta1,v1beta2"
_RBAC = "rbac.authorization.k8s.io/v1"
_ADM = "admissionregistration.k8s.io/v1"

RESOURCES: tuple[ResourceType, ...] = (
    _r("v1", "nodes", "Node", "cluster", "no", subresources=_ST, printer="node", create_status="keep"),
    _r("v1", "namespaces", "Namespace", "cluster", "ns", subresources=_ST, printer="namespace",
       name_rule="label", verbs=NAMESPACE_VERBS),
    _r("v1", "pods", "Pod", "ns", "po", subresources=_ST, printer="pod", categories=("all",)),
    _r("v1", "events", "Event", "ns", "ev"),
    _r("v1", "configmaps", "ConfigMap", "ns", "cm"),
    _r("v1", "serviceaccounts", "ServiceAccount", "ns", "sa"),
    _r("batch/v1", "jobs", "Job", "ns", subresources=_ST, printer="job", categories=("all",)),
    _r("coordination.k8s.io/v1", "leases", "Lease", "ns"),
    _r(_KUEUE, "clusterqueues", "ClusterQueue", "cluster", "cq", subresources=_ST, crd=True),
    _r(_KUEUE, "resourceflavors", "ResourceFlavor", "cluster", "flavor", "flavors", "rf", crd=True),
    _r(_KUEUE, "workloadpriorityclasses", "WorkloadPriorityClass", "cluster", crd=True),
    _r(_KUEUE, "topologies", "Topology", "cluster", crd=True),
    _r(_KUEUE, "cohorts", "Cohort", "cluster", subresources=_ST, crd=True),
    _r(_KUEUE, "localqueues", "LocalQueue", "ns", "queue", "queues", "lq", subresources=_ST, crd=True),
    _r(_KUEUE, "workloads", "Workload", "ns", "wl", subresources=_ST, crd=True),
    _r(_RBAC, "roles", "Role", "ns", name_rule="path"),
    _r(_RBAC, "rolebindings", "RoleBinding", "ns", name_rule="path"),
    _r(_RBAC, "clusterroles", "ClusterRole", "cluster", name_rule="path"),
    _r(_RBAC, "clusterrolebindings", "ClusterRoleBinding", "cluster", name_rule="path"),
    _r(_ADM, "validatingadmissionpolicies", "ValidatingAdmissionPolicy", "cluster", subresources=_ST),
    _r(_ADM, "validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding", "cluster"),
)  # fmt: skip


class _Registry:
    def __init__(self, resources: Iterable[ResourceType]) -> None:
        self.resources = tuple(resources)
        self.by_gvr: dict[tuple[str, str, str], ResourceType] = {}
        self.by_gk: dict[tuple[str, str], ResourceType] = {}
        self.groups: dict[str, list[str]] = {}  # group -> versions (preferred first)
        self.by_gv: dict[tuple[str, str], list[ResourceType]] = {}
        for rt in self.resources:
            self.by_gk[(rt.group, rt.kind)] = rt
            versions = self.groups.setdefault(rt.group, [])
            for v in rt.versions:
                self.by_gvr[(rt.group, v, rt.plural)] = rt
                self.by_gv.setdefault((rt.group, v), []).append(rt)
                if v not in versions:
                    versions.append(v)

    def resolve(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self.by_gvr.get((group, version, plural))


REGISTRY = _Registry(RESOURCES)
NAMESPACES = REGISTRY.resolve("", "v1", "namespaces")
assert NAMESPACES is not None

# --------------------------------------------------------------------------------------------------
# Errors: kube Status objects
# --------------------------------------------------------------------------------------------------


class Refusal(Exception):
    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = {k: v for k, v in (details or {}).items() if v not in (None, "", [])}
        self.headers = dict(headers or {})

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure"}
        body["message"] = self.message
        body["reason"] = self.reason
        body["details"] = self.details
        body["code"] = self.code
        return body


_NS_MISMATCH = "the namespace of the provided object does not match the namespace sent on the request"


def _name_mismatch(body_name: Any, url_name: str) -> str:
    return f"the name of the object ({body_name}) does not match the name on the URL ({url_name})"


def _gr_details(rt: ResourceType, name: str) -> dict[str, Any]:
    return {"name": name, "group": rt.group, "kind": rt.plural}


def not_found(rt: ResourceType, name: str) -> Refusal:
    return Refusal(404, "NotFound", f'{rt.group_resource} "{name}" not found', _gr_details(rt, name))


def already_exists(rt: ResourceType, name: str) -> Refusal:
    return Refusal(
        409, "AlreadyExists", f'{rt.group_resource} "{name}" already exists', _gr_details(rt, name)
    )


def conflict(rt: ResourceType, name: str, why: str | None = None) -> Refusal:
    why = why or "the object has been modified; please apply your changes to the latest version and try again"
    return Refusal(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {rt.group_resource} "{name}": {why}',
        _gr_details(rt, name),
    )


def bad_request(message: str) -> Refusal:
    return Refusal(400, "BadRequest", message)


def generic_not_found() -> Refusal:
    return Refusal(404, "NotFound", "the server could not find the requested resource")


def method_not_allowed() -> Refusal:
    return Refusal(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")


@dataclass(frozen=True)
class FieldError:
    field: str
    kind: str  # Invalid | Required | Forbidden | TooLong
    detail: str
    value: Any = None

    def body(self) -> str:
        if self.kind == "Invalid":
            return f"Invalid value: {_go_quote(self.value)}: {self.detail}"
        if self.kind == "Required":
            return f"Required value: {self.detail}"
        if self.kind == "Forbidden":
            return f"Forbidden: {self.detail}"
        return f"{self.kind}: {self.detail}"

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"


def _go_quote(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if value is None:
        return "null"
    return json.dumps(value) if isinstance(value, (bool, int, float)) else str(value)


def invalid(group_kind: tuple[str, str], name: str, errors: list[FieldError]) -> Refusal:
    group, kind = group_kind
    qualified = f"{kind}.{group}" if group else kind
    agg = str(errors[0]) if len(errors) == 1 else "[" + ", ".join(str(e) for e in errors) + "]"
    causes = [{"reason": f"FieldValue{e.kind}", "message": e.body(), "field": e.field} for e in errors]
    return Refusal(
        422,
        "Invalid",
        f'{qualified} "{name}" is invalid: {agg}',
        {"name": name, "group": group, "kind": kind, "causes": causes},
    )


def _invalid_rt(rt: ResourceType, name: str, errors: list[FieldError]) -> Refusal:
    return invalid((rt.group, rt.kind), name, errors)


_FAULT_REASONS = {
    400: ("BadRequest", "the server rejected our request for an unknown reason"),
    401: ("Unauthorized", "Unauthorized"),
    403: ("Forbidden", "forbidden (injected fault)"),
    404: ("NotFound", "the server could not find the requested resource"),
    405: ("MethodNotAllowed", "the server does not allow this method on the requested resource"),
    409: ("Conflict", "the server reported a conflict"),
    410: ("Expired", "The provided continue parameter is too old to display a consistent list result."),
    422: ("Invalid", "the server rejected our request due to an error in our request"),
    429: ("TooManyRequests", "Too many requests, please try again later."),
    500: ("InternalError", "Internal error occurred: injected fault"),
    502: (
        "InternalError",
        'an error on the server ("bad gateway") has prevented the request from succeeding',
    ),
    503: ("ServiceUnavailable", "the server is currently unable to handle the request"),
    504: ("Timeout", "Timeout: request did not complete within the allowed duration"),
}

# --------------------------------------------------------------------------------------------------
# Validation (kube's messages)
# --------------------------------------------------------------------------------------------------

_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")

_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
    "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
_QNAME_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used "
    "for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


def _qualified_name_errors(key: str) -> list[str]:
    parts = key.split("/")
    if len(parts) == 1:
        name, prefix = parts[0], None
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            return ["prefix part must be non-empty"]
    else:
        return [
            "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and "
            "end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
            "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix "
            "and '/' (e.g. 'example.com/MyName')"
        ]
    errs = []
    if prefix is not None:
        if len(prefix) > 253:
            errs.append("prefix part must be no more than 253 characters")
        elif not _DNS1123_SUBDOMAIN.fullmatch(prefix):
            errs.append("prefix part " + _SUBDOMAIN_MSG)
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part must be no more than 63 characters")
    elif not _QUALIFIED_NAME.fullmatch(name):
        errs.append(_QNAME_MSG)
    return errs


def _validate_name(rt: ResourceType, name: str) -> list[FieldError]:
    if rt.name_rule == "path":
        for bad in ("/", "%"):
            if bad in name:
                return [FieldError("metadata.name", "Invalid", f"may not contain '{bad}'", name)]
        if name in (".", ".."):
            return [FieldError("metadata.name", "Invalid", f"may not be '{name}'", name)]
        return []
    if rt.name_rule == "label":
        if len(name) > 63:
            return [FieldError("metadata.name", "Invalid", "must be no more than 63 characters", name)]
        if not _DNS1123_LABEL.fullmatch(name):
            return [FieldError("metadata.name", "Invalid", _LABEL_MSG, name)]
        return []
    if len(name) > 253:
        return [FieldError("metadata.name", "Invalid", "must be no more than 253 characters", name)]
    if not _DNS1123_SUBDOMAIN.fullmatch(name):
        return [FieldError("metadata.name", "Invalid", _SUBDOMAIN_MSG, name)]
    return []


def _validate_meta(meta: Mapping[str, Any]) -> list[FieldError]:
    errs: list[FieldError] = []
    labels = meta.get("labels")
    if labels is not None and not isinstance(labels, dict):
        return [FieldError("metadata.labels", "Invalid", "must be a map of strings", labels)]
    for k, v in (labels or {}).items():
        for msg in _qualified_name_errors(k):
            errs.append(FieldError("metadata.labels", "Invalid", msg, k))
        if not isinstance(v, str):
            errs.append(FieldError(f"metadata.labels[{k}]", "Invalid", "must be a string", v))
        elif len(v) > 63:
            errs.append(FieldError("metadata.labels", "Invalid", "must be no more than 63 characters", v))
        elif not _LABEL_VALUE.fullmatch(v):
            errs.append(FieldError("metadata.labels", "Invalid", _LABEL_VALUE_MSG, v))
    annotations = meta.get("annotations")
    if annotations is not None and not isinstance(annotations, dict):
        return [*errs, FieldError("metadata.annotations", "Invalid", "must be a map of strings", annotations)]
    for k, v in (annotations or {}).items():
        for msg in _qualified_name_errors(k.lower()):
            errs.append(FieldError("metadata.annotations", "Invalid", msg, k))
        if not isinstance(v, str):
            errs.append(FieldError(f"metadata.annotations[{k}]", "Invalid", "must be a string", v))
    return errs


# --------------------------------------------------------------------------------------------------
# Selectors
# --------------------------------------------------------------------------------------------------

_SEL_TOKEN = re.compile(r"\s*(!=|==|=|!|\(|\)|,|>|<|[^\s!=(),<>]+)")


def parse_label_selector(text: str) -> list[tuple[str, str, tuple[str, ...]]]:
    """Parse kube's label selector syntax into (key, op, values) requirements (ANDed)."""
    tokens: list[str] = []
    pos = 0
    text = text or ""
    while pos < len(text):
        m = _SEL_TOKEN.match(text, pos)
        if not m:
            if text[pos:].strip() == "":
                break
            raise bad_request(f"unable to parse requirement: unexpected character at {pos} in {text!r}")
        tokens.append(m.group(1))
        pos = m.end()
    reqs: list[tuple[str, str, tuple[str, ...]]] = []
    i = 0

    def err(msg: str) -> Refusal:
        return bad_request(f"unable to parse requirement: {msg}")

    while i < len(tokens):
        negate = False
        if tokens[i] == "!":
            negate = True
            i += 1
        if i >= len(tokens) or tokens[i] in ("!=", "==", "=", "!", "(", ")", ",", ">", "<"):
            raise err(f"found '{tokens[i] if i < len(tokens) else 'EOS'}', expected: identifier")
        key = tokens[i]
        for msg in _qualified_name_errors(key):
            raise err(f'key: Invalid value: "{key}": {msg}')
        i += 1
        if negate:
            reqs.append((key, "!", ()))
        elif i >= len(tokens) or tokens[i] == ",":
            reqs.append((key, "exists", ()))
        else:
            op = tokens[i]
            i += 1
            if op in ("=", "==", "!=", ">", "<"):
                value = ""
                if i < len(tokens) and tokens[i] not in (",", "(", ")", "!", "=", "==", "!="):
                    value = tokens[i]
                    i += 1
                if op in (">", "<") and not re.fullmatch(r"-?\d+", value):
                    raise err(f"for 'Gt', 'Lt' operators, the value must be an integer: {value!r}")
                reqs.append((key, "=" if op == "==" else op, (value,)))
            elif op in ("in", "notin"):
                if i >= len(tokens) or tokens[i] != "(":
                    raise err(f"found '{tokens[i] if i < len(tokens) else 'EOS'}', expected: '('")
                i += 1
                values: list[str] = []
                expect_value = True
                while i < len(tokens) and tokens[i] != ")":
                    t = tokens[i]
                    if t == ",":
                        if expect_value:
                            values.append("")
                        expect_value = True
                    else:
                        values.append(t)
                        expect_value = False
                    i += 1
                if i >= len(tokens):
                    raise err("found 'EOS', expected: ')'")
                i += 1  # ')'
                if not values:
                    raise err("for 'in', 'notin' operators, values set can't be empty")
                reqs.append((key, op, tuple(values)))
            else:
                raise err(f"found '{op}', expected: in, notin, =, ==, !=, gt, lt")
        if i < len(tokens):
            if tokens[i] != ",":
                raise err(f"found '{tokens[i]}', expected: ',' or 'end of string'")
            i += 1
    return reqs


def match_labels(reqs: list[tuple[str, str, tuple[str, ...]]], labels: Mapping[str, str] | None) -> bool:
    labels = labels or {}
    for key, op, values in reqs:
        present = key in labels
        value = labels.get(key)
        if op == "exists":
            ok = present
        elif op == "!":
            ok = not present
        elif op == "=":
            ok = present and value == values[0]
        elif op == "!=":
            ok = not present or value != values[0]
        elif op == "in":
            ok = present and value in values
        elif op == "notin":
            ok = not present or value not in values
        else:  # > <
            try:
                n = int(value) if present else None
            except (TypeError, ValueError):
                n = None
            ok = n is not None and (n > int(values[0]) if op == ">" else n < int(values[0]))
        if not ok:
            return False
    return True


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts, cur, i = [], [], 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            cur.append(text[i : i + 2])
            i += 2
            continue
        if c == sep:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    parts.append("".join(cur))
    return parts


def _unescape_field_value(v: str) -> str:
    out, i = [], 0
    while i < len(v):
        if v[i] == "\\" and i + 1 < len(v) and v[i + 1] in "\\,=":
            out.append(v[i + 1])
            i += 2
        else:
            out.append(v[i])
            i += 1
    return "".join(out)


def parse_field_selector(text: str) -> list[tuple[tuple[str, ...], str, str]]:
    reqs = []
    if not text:
        return reqs
    for term in _split_unescaped(text, ","):
        if term == "":
            continue
        for i in range(len(term)):
            rest = term[i:]
            op = next((o for o in ("!=", "==", "=") if rest.startswith(o)), None)
            if op:
                lhs, rhs = term[:i], term[i + len(op) :]
                break
        else:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{term}'")
        reqs.append((tuple(lhs.strip().split(".")), "!=" if op == "!=" else "=", _unescape_field_value(rhs)))
    return reqs


def _field_value(obj: Mapping[str, Any], path: tuple[str, ...]) -> str:
    cur: Any = obj
    for p in path:
        if not isinstance(cur, Mapping):
            return ""
        cur = cur.get(p)
        if cur is None:
            return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    if isinstance(cur, (dict, list)):
        return json.dumps(cur, separators=(",", ":"))
    return str(cur)


def match_fields(reqs: list[tuple[tuple[str, ...], str, str]], obj: Mapping[str, Any]) -> bool:
    for path, op, value in reqs:
        actual = _field_value(obj, path)
        if (actual == value) != (op == "="):
            return False
    return True


# --------------------------------------------------------------------------------------------------
# Patches
# --------------------------------------------------------------------------------------------------


def _deep(obj: Any) -> Any:
    return json.loads(json.dumps(obj))


def _canon(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (null deletes)."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        else:
            result[k] = merge_patch(result.get(k), v)
    return result


# Strategic-merge keys of the built-in types, by field name (kube's patchMergeKey tags).
_MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "imagePullSecrets": "name",
    "resourceClaims": "name",
    "schedulingGates": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "conditions": "type",
    "addresses": "type",
    "ownerReferences": "uid",
    "hostAliases": "ip",
    "podIPs": "ip",
    "hostIPs": "ip",
    "topologySpreadConstraints": "topologyKey",
    "containerStatuses": "name",
    "initContainerStatuses": "name",
    "ephemeralContainerStatuses": "name",
}
_SET_LISTS = frozenset({"finalizers"})
_DELETE = object()


def _list_merge_key(field_name: str, items: list[Any]) -> str | None:
    if field_name == "ports":
        if any(isinstance(i, dict) and "containerPort" in i for i in items):
            return "containerPort"
        return "port"
    return _MERGE_KEYS.get(field_name)


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Strategic merge patch, simplified: see the module docstring."""
    result = _smp_map(target if isinstance(target, dict) else {}, patch)
    return {} if result is _DELETE else result


def _smp_map(target: dict[str, Any], patch: dict[str, Any]) -> Any:
    directive = patch.get("$patch")
    if directive == "delete":
        return _DELETE
    if directive == "replace":
        return _smp_map({}, {k: v for k, v in patch.items() if k != "$patch"})
    if directive not in (None, "merge"):
        raise bad_request(f"Unknown patch type: {directive!r}")
    result = dict(target)
    orders: dict[str, list[Any]] = {}
    for k, v in patch.items():
        if k in ("$patch", "$retainKeys"):
            continue
        if k.startswith("$setElementOrder/"):
            orders[k.split("/", 1)[1]] = v if isinstance(v, list) else []
            continue
        if k.startswith("$deleteFromPrimitiveList/"):
            f = k.split("/", 1)[1]
            if isinstance(result.get(f), list) and isinstance(v, list):
                result[f] = [x for x in result[f] if x not in v]
            continue
        if v is None:
            result.pop(k, None)
        elif isinstance(v, dict):
            cur = result.get(k)
            merged = _smp_map(cur if isinstance(cur, dict) else {}, v)
            if merged is _DELETE:
                result.pop(k, None)
            else:
                result[k] = merged
        elif isinstance(v, list):
            result[k] = _smp_list(k, result.get(k), v)
        else:
            result[k] = v
    for f, order in orders.items():
        if isinstance(result.get(f), list):
            result[f] = _apply_order(f, result[f], order)
    retain = patch.get("$retainKeys")
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _strip_directives(value: Any) -> Any:
    if isinstance(value, dict):
        merged = _smp_map({}, value)
        return {} if merged is _DELETE else merged
    if isinstance(value, list):
        return [
            _strip_directives(v) for v in value if not (isinstance(v, dict) and v.get("$patch") == "replace")
        ]
    return value


def _smp_list(field_name: str, current: Any, patch: list[Any]) -> list[Any]:
    if any(isinstance(i, dict) and i.get("$patch") == "replace" for i in patch):
        return [
            _strip_directives(i) for i in patch if not (isinstance(i, dict) and i.get("$patch") == "replace")
        ]
    current = current if isinstance(current, list) else []
    if field_name in _SET_LISTS:
        out = list(current)
        for item in patch:
            if item not in out:
                out.append(item)
        return out
    key = _list_merge_key(field_name, patch + current)
    if not key or not all(isinstance(i, dict) for i in patch):
        return [_strip_directives(i) for i in patch]
    out = list(current)
    for item in patch:
        kv = item.get(key)
        idx = next((n for n, c in enumerate(out) if isinstance(c, dict) and c.get(key) == kv), None)
        if item.get("$patch") == "delete":
            if idx is not None:
                del out[idx]
            continue
        if idx is None:
            out.append(_strip_directives(item))
        else:
            merged = _smp_map(out[idx], item)
            if merged is _DELETE:
                del out[idx]
            else:
                out[idx] = merged
    return out


def _apply_order(field_name: str, items: list[Any], order: list[Any]) -> list[Any]:
    key = _list_merge_key(field_name, items)

    def ident(x: Any) -> Any:
        return _canon(x.get(key)) if key and isinstance(x, dict) else _canon(x)

    wanted = [ident(o) for o in order]
    pos = {w: n for n, w in enumerate(wanted)}
    first = sorted((i for i in items if ident(i) in pos), key=lambda i: pos[ident(i)])
    return first + [i for i in items if ident(i) not in pos]


class JsonPatchError(Exception):
    pass


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise JsonPatchError(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _json_equal(a: Any, b: Any) -> bool:
    return _canon(a) == _canon(b)


def json_patch(doc: Any, ops: list[Any]) -> Any:
    """RFC 6902 JSON patch (add, remove, replace, move, copy, test)."""
    for op in ops:
        if not isinstance(op, dict) or "op" not in op:
            raise bad_request("json patch operations must be objects with an 'op'")
        name = op["op"]
        if name in ("add", "replace", "test") and "value" not in op:
            raise JsonPatchError(f"missing value for {name} operation")
        path = _pointer(op.get("path", ""))
        if name == "add":
            doc = _jp_add(doc, path, _deep(op["value"]))
        elif name == "remove":
            doc, _ = _jp_remove(doc, path)
        elif name == "replace":
            doc, _ = _jp_remove(doc, path, replacing=True)
            doc = _jp_add(doc, path, _deep(op["value"]), replacing=True)
        elif name == "move":
            src = _pointer(op.get("from", ""))
            doc, value = _jp_remove(doc, src)
            doc = _jp_add(doc, path, value)
        elif name == "copy":
            doc = _jp_add(doc, path, _deep(_jp_get(doc, _pointer(op.get("from", "")))))
        elif name == "test":
            if not _json_equal(_jp_get(doc, path), op["value"]):
                raise JsonPatchError(f"testing value {op.get('path')} failed: test failed")
        else:
            raise bad_request(f"Unexpected kind: {name}")
    return doc


def _jp_get(doc: Any, path: list[str]) -> Any:
    cur = doc
    for p in path:
        if isinstance(cur, dict):
            if p not in cur:
                raise JsonPatchError(f"doc is missing path: /{'/'.join(path)}")
            cur = cur[p]
        elif isinstance(cur, list):
            try:
                cur = cur[_jp_index(p, len(cur) - 1)]
            except IndexError as exc:
                raise JsonPatchError(str(exc)) from None
        else:
            raise JsonPatchError(f"doc is missing path: /{'/'.join(path)}")
    return cur


def _jp_index(p: str, maximum: int) -> int:
    if not re.fullmatch(r"0|[1-9][0-9]*", p):
        raise IndexError(f"invalid array index {p!r}")
    i = int(p)
    if i > maximum:
        raise IndexError(f"array index out of bounds: {i}")
    return i


def _jp_add(doc: Any, path: list[str], value: Any, replacing: bool = False) -> Any:
    if not path:
        return value
    parent = _jp_get(doc, path[:-1])
    last = path[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        else:
            try:
                parent.insert(_jp_index(last, len(parent)), value)
            except IndexError as exc:
                raise JsonPatchError(f"add operation does not apply: {exc}") from None
    else:
        raise JsonPatchError(f"add operation does not apply: doc is missing path: /{'/'.join(path)}")
    return doc


def _jp_remove(doc: Any, path: list[str], replacing: bool = False) -> tuple[Any, Any]:
    what = "replace" if replacing else "remove"
    if not path:
        return None, doc
    parent = _jp_get(doc, path[:-1])
    last = path[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise JsonPatchError(f"{what} operation does not apply: doc is missing key: /{'/'.join(path)}")
        return doc, parent.pop(last)
    if isinstance(parent, list):
        try:
            return doc, parent.pop(_jp_index(last, len(parent) - 1))
        except IndexError as exc:
            raise JsonPatchError(f"{what} operation does not apply: {exc}") from None
    raise JsonPatchError(f"{what} operation does not apply: doc is missing path: /{'/'.join(path)}")


def _apply_merge(current: Any, applied: Any) -> Any:
    """Server-side apply merge (simplified): maps recurse, keyed lists merge, other lists replace."""
    if not isinstance(applied, dict):
        return _deep(applied)
    result = dict(current) if isinstance(current, dict) else {}
    for k, v in applied.items():
        if v is None:
            result.pop(k, None)
        elif isinstance(v, dict):
            result[k] = _apply_merge(result.get(k), v)
        elif isinstance(v, list):
            key = _list_merge_key(k, v)
            cur = result.get(k)
            if key and isinstance(cur, list) and all(isinstance(i, dict) and key in i for i in v):
                out = list(cur)
                for item in v:
                    idx = next(
                        (n for n, c in enumerate(out) if isinstance(c, dict) and c.get(key) == item[key]),
                        None,
                    )
                    if idx is None:
                        out.append(_deep(item))
                    else:
                        out[idx] = _apply_merge(out[idx], item)
                result[k] = out
            elif k in _SET_LISTS and isinstance(cur, list):
                result[k] = cur + [i for i in v if i not in cur]
            else:
                result[k] = _deep(v)
        else:
            result[k] = v
    return result


# managedFields (simplified FieldsV1: maps recursed, everything else a leaf)

_UNMANAGED_META = frozenset(
    {"name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp", "managedFields",
     "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"}
)  # fmt: skip


def _fieldset(obj: Any, top: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if not isinstance(obj, dict):
        return out
    for k, v in obj.items():
        if top and k in ("apiVersion", "kind"):
            continue
        if top and k == "metadata" and isinstance(v, dict):
            sub = _fieldset({mk: mv for mk, mv in v.items() if mk not in _UNMANAGED_META}, top=False)
            if sub:
                out["f:metadata"] = sub
            continue
        if isinstance(v, dict) and v:
            out[f"f:{k}"] = _fieldset(v, top=False)
        else:
            out[f"f:{k}"] = {}
    return out


def _fieldset_from_pointers(ops: list[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for op in ops:
        if not isinstance(op, dict) or op.get("op") == "test":
            continue
        try:
            path = _pointer(str(op.get("path", "")))
        except JsonPatchError:
            continue
        cur = out
        for p in path:
            if p.isdigit() or p == "-":
                break
            cur = cur.setdefault(f"f:{p}", {})
    return out


def _fs_union(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for k, v in b.items():
        out[k] = (
            _fs_union(out[k], v)
            if k in out and out[k] and v
            else (v if k not in out or not out[k] else out[k])
        )
    return out


def _fs_leaves(fs: dict[str, Any], prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    out: set[tuple[str, ...]] = set()
    for k, v in fs.items():
        p = (*prefix, k[2:] if k.startswith("f:") else k)
        if v:
            out |= _fs_leaves(v, p)
        else:
            out.add(p)
    return out


def _delete_path(obj: dict[str, Any], path: tuple[str, ...]) -> None:
    cur: Any = obj
    for p in path[:-1]:
        if not isinstance(cur, dict) or p not in cur:
            return
        cur = cur[p]
    if isinstance(cur, dict):
        cur.pop(path[-1], None)


# --------------------------------------------------------------------------------------------------
# Server-side printing (Tables)
# --------------------------------------------------------------------------------------------------


def _now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_time(ts: Any) -> float | None:
    if not isinstance(ts, str) or not ts:
        return None
    try:
        return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def human_duration(seconds: float) -> str:
    """k8s.io/apimachinery/pkg/util/duration.HumanDuration."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        sec = s % 60
        return f"{minutes}m" if sec == 0 else f"{minutes}m{sec}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        m = minutes % 60
        return f"{hours}h" if m == 0 else f"{hours}h{m}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        h = hours % 24
        return f"{hours // 24}d" if h == 0 else f"{hours // 24}d{h}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        dy = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if dy == 0 else f"{hours // 24 // 365}y{dy}d"
    return f"{hours // 24 // 365}y"


def _age(obj: Mapping[str, Any], now: float) -> str:
    t = _parse_time((obj.get("metadata") or {}).get("creationTimestamp"))
    return "<unknown>" if t is None else human_duration(now - t)


def _col(
    name: str, description: str, priority: int = 0, fmt: str = "", typ: str = "string"
) -> dict[str, Any]:
    return {"name": name, "type": typ, "format": fmt, "description": description, "priority": priority}


_NAME_COL = _col("Name", "Name must be unique within a namespace.", fmt="name")
_AGE_COL = _col(
    "Age", "CreationTimestamp is a timestamp representing the server time when this object was created."
)


def _cond(obj: Mapping[str, Any], ctype: str) -> str | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == ctype:
            return c.get("status")
    return None


def _node_cells(o: Mapping[str, Any], now: float) -> list[Any]:
    meta, spec, status = o.get("metadata") or {}, o.get("spec") or {}, o.get("status") or {}
    ready = _cond(o, "Ready")
    states = ["Unknown"] if ready is None else (["Ready"] if ready == "True" else ["NotReady"])
    if spec.get("unschedulable"):
        states.append("SchedulingDisabled")
    roles = set()
    for k, v in (meta.get("labels") or {}).items():
        if k.startswith("node-role.kubernetes.io/") and k[len("node-role.kubernetes.io/") :]:
            roles.add(k[len("node-role.kubernetes.io/") :])
        elif k == "kubernetes.io/role" and v:
            roles.add(v)
    info = status.get("nodeInfo") or {}

    def addr(kind: str) -> str:
        for a in status.get("addresses") or []:
            if isinstance(a, dict) and a.get("type") == kind:
                return a.get("address", "")
        return "<none>"

    return [
        meta.get("name", ""),
        ",".join(states),
        ",".join(sorted(roles)) or "<none>",
        _age(o, now),
        info.get("kubeletVersion", ""),
        addr("InternalIP"),
        addr("ExternalIP"),
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


def _pod_cells(o: Mapping[str, Any], now: float) -> list[Any]:
    meta, spec, status = o.get("metadata") or {}, o.get("spec") or {}, o.get("status") or {}
    total = len(spec.get("containers") or [])
    statuses = [c for c in status.get("containerStatuses") or [] if isinstance(c, dict)]
    ready = sum(1 for c in statuses if c.get("ready"))
    restarts = sum(int(c.get("restartCount") or 0) for c in statuses)
    reason = status.get("reason") or status.get("phase") or ""
    running = False
    for c in reversed(statuses):
        st = c.get("state") or {}
        if (st.get("waiting") or {}).get("reason"):
            reason = st["waiting"]["reason"]
        elif (st.get("terminated") or {}).get("reason"):
            reason = st["terminated"]["reason"]
        elif st.get("terminated"):
            t = st["terminated"]
            reason = f"Signal:{t['signal']}" if t.get("signal") else f"ExitCode:{t.get('exitCode', 0)}"
        elif st.get("running") and c.get("ready"):
            running = True
    if reason == "Completed" and running:
        reason = "Running"
    if meta.get("deletionTimestamp"):
        reason = "Unknown" if status.get("reason") == "NodeLost" else "Terminating"
    ips = status.get("podIP") or "<none>"
    gates = spec.get("readinessGates") or []
    return [
        meta.get("name", ""),
        f"{ready}/{total}",
        reason,
        str(restarts),
        _age(o, now),
        ips,
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        f"{len(gates)}/{len(gates)}" if gates else "<none>",
    ]


def _containers(template_spec: Mapping[str, Any]) -> tuple[str, str]:
    cs = [c for c in template_spec.get("containers") or [] if isinstance(c, dict)]
    return ",".join(c.get("name", "") for c in cs), ",".join(c.get("image", "") for c in cs)


def _selector_string(sel: Any) -> str:
    if not isinstance(sel, dict) or not sel:
        return "<none>"
    parts = [f"{k}={v}" for k, v in sorted((sel.get("matchLabels") or {}).items())]
    for e in sel.get("matchExpressions") or []:
        op, key, vals = e.get("operator"), e.get("key"), e.get("values") or []
        if op == "In":
            parts.append(f"{key} in ({','.join(sorted(vals))})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(sorted(vals))})")
        elif op == "Exists":
            parts.append(key)
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts) or "<none>"


def _job_cells(o: Mapping[str, Any], now: float) -> list[Any]:
    meta, spec, status = o.get("metadata") or {}, o.get("spec") or {}, o.get("status") or {}
    state = "Running"
    for cond, label in (("Complete", "Complete"), ("Failed", "Failed")):
        if _cond(o, cond) == "True":
            state = label
            break
    else:
        if meta.get("deletionTimestamp"):
            state = "Terminating"
        elif _cond(o, "Suspended") == "True":
            state = "Suspended"
        elif _cond(o, "FailureTarget") == "True":
            state = "FailureTarget"
        elif _cond(o, "SuccessCriteriaMet") == "True":
            state = "SuccessCriteriaMet"
    succeeded = int(status.get("succeeded") or 0)
    if spec.get("completions") is not None:
        completions = f"{succeeded}/{spec['completions']}"
    elif int(spec.get("parallelism") or 0) > 1:
        completions = f"{succeeded}/1 of {spec['parallelism']}"
    else:
        completions = f"{succeeded}/1"
    start, end = _parse_time(status.get("startTime")), _parse_time(status.get("completionTime"))
    duration = "" if start is None else human_duration((end if end is not None else now) - start)
    names, images = _containers(((spec.get("template") or {}).get("spec")) or {})
    return [
        meta.get("name", ""),
        state,
        completions,
        duration,
        _age(o, now),
        names,
        images,
        _selector_string(spec.get("selector")),
    ]


def _namespace_cells(o: Mapping[str, Any], now: float) -> list[Any]:
    return [(o.get("metadata") or {}).get("name", ""), (o.get("status") or {}).get("phase", ""), _age(o, now)]


def _default_cells(o: Mapping[str, Any], now: float) -> list[Any]:
    return [(o.get("metadata") or {}).get("name", ""), _age(o, now)]


PRINTERS: dict[str, tuple[list[dict[str, Any]], Callable[[Mapping[str, Any], float], list[Any]]]] = {
    "node": (
        [
            _NAME_COL,
            _col("Status", "The status of the node"),
            _col("Roles", "The roles of the node"),
            _AGE_COL,
            _col("Version", "Kubelet Version reported by the node."),
            _col("Internal-IP", "List of internal IPs in the node.", 1),
            _col("External-IP", "List of external IPs in the node.", 1),
            _col("OS-Image", "OS Image reported by the node from /etc/os-release.", 1),
            _col("Kernel-Version", "Kernel Version reported by the node from 'uname -r'.", 1),
            _col("Container-Runtime", "Container Runtime Version reported by the node.", 1),
        ],
        _node_cells,
    ),
    "pod": (
        [
            _NAME_COL,
            _col("Ready", "The aggregate readiness state of this pod for accepting traffic."),
            _col("Status", "The aggregate status of the containers in this pod."),
            _col("Restarts", "The number of times the containers in this pod have been restarted."),
            _AGE_COL,
            _col("IP", "IP address allocated to the pod.", 1),
            _col("Node", "NodeName is a request to schedule this pod onto a specific node.", 1),
            _col(
                "Nominated Node", "nominatedNodeName is set when this pod preempts other pods on the node.", 1
            ),
            _col("Readiness Gates", "All readiness gates are evaluated for pod readiness.", 1),
        ],
        _pod_cells,
    ),
    "job": (
        [
            _NAME_COL,
            _col("Status", "Status of the job."),
            _col("Completions", "The completion status of the job."),
            _col("Duration", "Time required to complete the job."),
            _AGE_COL,
            _col("Containers", "Names of each container in the template.", 1),
            _col("Images", "Images referenced by each container in the template.", 1),
            _col("Selector", "A label query over pods that should match the pod count.", 1),
        ],
        _job_cells,
    ),
    "namespace": (
        [_NAME_COL, _col("Status", "The status of the namespace"), _AGE_COL],
        _namespace_cells,
    ),
    "default": ([_NAME_COL, _AGE_COL], _default_cells),
}


def _table_row(rt: ResourceType, obj: Mapping[str, Any], include: str, now: float) -> dict[str, Any]:
    row: dict[str, Any] = {"cells": PRINTERS[rt.printer][1](obj, now)}
    if include == "Object":
        row["object"] = obj
    elif include != "None":
        row["object"] = {
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": obj.get("metadata") or {},
        }
    return row


def build_table(
    rt: ResourceType,
    objs: Iterable[Mapping[str, Any]],
    include: str,
    list_meta: dict[str, Any],
    api_version: str = "meta.k8s.io/v1",
    headers: bool = True,
) -> dict[str, Any]:
    now = time.time()
    table: dict[str, Any] = {"kind": "Table", "apiVersion": api_version, "metadata": list_meta}
    if headers:
        table["columnDefinitions"] = PRINTERS[rt.printer][0]
    table["rows"] = [_table_row(rt, o, include, now) for o in objs]
    return table


# --------------------------------------------------------------------------------------------------
# Storage
# --------------------------------------------------------------------------------------------------


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


class _Entry:
    """One stored object; ``obj`` is never mutated once stored. ``body`` caches its JSON sans TypeMeta."""

    __slots__ = ("body", "obj")

    def __init__(self, obj: dict[str, Any]) -> None:
        self.obj = obj
        self.body = _dumps({k: v for k, v in obj.items() if k not in ("apiVersion", "kind")})

    def render(self, rt: ResourceType, version: str) -> str:
        head = f'{{"apiVersion":{json.dumps(rt.api_version(version))},"kind":{json.dumps(rt.kind)}'
        return head + ("}" if self.body == "{}" else "," + self.body[1:])

    def as_version(self, rt: ResourceType, version: str) -> dict[str, Any]:
        if version == rt.storage_version:
            return self.obj
        out = dict(self.obj)
        out["apiVersion"] = rt.api_version(version)
        return out


class _Bucket:
    __slots__ = ("keys", "objs", "rt")

    def __init__(self, rt: ResourceType) -> None:
        self.rt = rt
        self.objs: dict[str, _Entry] = {}
        self.keys: list[str] = []  # sorted etcd-style keys: "namespace/name" or "name"


@dataclass
class _Event:
    rv: int
    bucket: tuple[str, str]
    namespace: str
    type: str
    obj: dict[str, Any]
    prev: dict[str, Any] | None


@dataclass
class _Fault:
    id: int
    method: str | None
    path: re.Pattern[str]
    status: int | None
    times: int | None  # None: forever
    delay_s: float
    delete_before: bool
    message: str | None
    retry_after: int | None
    probability: float = 1.0  # of applying to a matching request (fraction-of-calls faults)
    hits: int = 0  # how many requests it applied to

    def describe(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "method": self.method,
            "path": self.path.pattern,
            "status": self.status,
            "times": self.times,
            "delay_s": self.delay_s,
            "delete_before": self.delete_before,
            "message": self.message,
            "probability": self.probability,
            "hits": self.hits,
        }


def _obj_key(rt: ResourceType, namespace: str | None, name: str) -> str:
    return f"{namespace}/{name}" if rt.namespaced else name


def _owner_uids(obj: Mapping[str, Any]) -> set[str]:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return {r.get("uid") for r in refs if isinstance(r, dict) and r.get("uid")}


def _gen_suffix() -> str:
    return "".join(random.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))


def _random_uid() -> str:
    return str(uuid.uuid4())


@dataclass
class _Request:
    """What an operation needs to know about the HTTP request."""

    query: dict[str, str]
    user_agent: str

    @property
    def dry_run(self) -> bool:
        return self.query.get("dryRun", "") == "All"

    def manager(self) -> str:
        m = self.query.get("fieldManager")
        if m:
            if len(m) > 128:
                raise invalid(
                    ("meta.k8s.io", "UpdateOptions"),
                    "",
                    [FieldError("fieldManager", "Invalid", "must be no more than 128 characters", m)],
                )
            return m
        prefix = self.user_agent.split("/")[0]
        return "".join(ch for ch in prefix if ch.isprintable())[:128]


class Store:
    """All objects, the resourceVersion counter, the watch log. Every public method takes the lock."""

    def __init__(self, registry: _Registry = REGISTRY) -> None:
        self.registry = registry
        self.cond = threading.Condition(threading.RLock())
        self.rv = 0
        self.buckets: dict[tuple[str, str], _Bucket] = {
            (rt.group, rt.plural): _Bucket(rt) for rt in registry.resources
        }
        self.uids: dict[str, tuple[tuple[str, str], str]] = {}
        self.owners: dict[str, set[tuple[tuple[str, str], str]]] = {}
        self.log: collections.deque[_Event] = collections.deque(maxlen=WATCH_LOG_SIZE)
        self.log_dropped_upto = 0
        self.closed = False
        for ns in DEFAULT_NAMESPACES:
            self.create(NAMESPACES, "v1", None, {"metadata": {"name": ns}}, _Request({}, "kube-apiserver"))

    # -- low level (lock held) -------------------------------------------------------------------
    def bucket(self, rt: ResourceType) -> _Bucket:
        return self.buckets[(rt.group, rt.plural)]

    def _record(self, etype: str, b: _Bucket, obj: dict[str, Any], prev: dict[str, Any] | None) -> None:
        if len(self.log) == self.log.maxlen:
            self.log_dropped_upto = self.log[0].rv
        ns = (obj.get("metadata") or {}).get("namespace") or ""
        self.log.append(_Event(self.rv, (b.rt.group, b.rt.plural), ns, etype, obj, prev))
        self.cond.notify_all()

    def _index(
        self, b: _Bucket, key: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None
    ) -> None:
        ref = ((b.rt.group, b.rt.plural), key)
        if old is not None:
            self.uids.pop(old["metadata"].get("uid"), None)
            for u in _owner_uids(old):
                s = self.owners.get(u)
                if s:
                    s.discard(ref)
                    if not s:
                        del self.owners[u]
        if new is not None:
            self.uids[new["metadata"]["uid"]] = ref
            for u in _owner_uids(new):
                self.owners.setdefault(u, set()).add(ref)

    def _put(self, b: _Bucket, key: str, obj: dict[str, Any]) -> dict[str, Any]:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        obj["metadata"] = _order_meta(obj["metadata"])
        old = b.objs.get(key)
        if old is None:
            bisect.insort(b.keys, key)
        b.objs[key] = _Entry(obj)
        self._index(b, key, old.obj if old else None, obj)
        self._record("MODIFIED" if old else "ADDED", b, obj, old.obj if old else None)
        return obj

    def _remove(self, b: _Bucket, key: str) -> dict[str, Any]:
        entry = b.objs.pop(key)
        i = bisect.bisect_left(b.keys, key)
        del b.keys[i]
        self.rv += 1
        gone = dict(entry.obj)
        gone["metadata"] = dict(gone["metadata"], resourceVersion=str(self.rv))
        self._index(b, key, entry.obj, None)
        self._record("DELETED", b, gone, entry.obj)
        return gone

    def _get_entry(self, rt: ResourceType, namespace: str | None, name: str) -> tuple[_Bucket, str, _Entry]:
        b = self.bucket(rt)
        key = _obj_key(rt, namespace, name)
        entry = b.objs.get(key)
        if entry is None:
            raise not_found(rt, name)
        return b, key, entry

    def _check_type(self, rt: ResourceType, body: dict[str, Any], version: str) -> None:
        api_version, kind = body.get("apiVersion"), body.get("kind")
        if api_version:
            group, _, v = str(api_version).rpartition("/")
            if group != rt.group or v not in rt.versions:
                raise bad_request(
                    f"the API version in the data ({api_version}) does not match the expected API version "
                    f"({rt.api_version(version)})"
                )
        if kind and kind != rt.kind:
            raise bad_request(f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})")
        meta = body.get("metadata")
        if meta is not None and not isinstance(meta, dict):
            raise bad_request("metadata must be an object")

    @staticmethod
    def _managed(
        obj: dict[str, Any],
        manager: str,
        operation: str,
        api_version: str,
        fields: dict[str, Any],
        subresource: str | None,
        replace: bool,
    ) -> None:
        if not manager:
            return
        meta = obj["metadata"]
        entries = [dict(e) for e in meta.get("managedFields") or [] if isinstance(e, dict)]
        now = _now_rfc3339()
        for e in entries:
            if (e.get("manager"), e.get("operation"), e.get("subresource")) == (
                manager,
                operation,
                subresource,
            ) and (operation == "Apply" or e.get("apiVersion") == api_version):
                e["fieldsV1"] = fields if replace else _fs_union(e.get("fieldsV1") or {}, fields)
                e["time"] = now
                e["apiVersion"] = api_version
                break
        else:
            new = {
                "manager": manager,
                "operation": operation,
                "apiVersion": api_version,
                "time": now,
                "fieldsType": "FieldsV1",
                "fieldsV1": fields,
            }
            if subresource:
                new["subresource"] = subresource
            entries.append(new)
        meta["managedFields"] = entries

    # -- defaulting --------------------------------------------------------------------------------
    @staticmethod
    def _defaults(rt: ResourceType, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        if rt.plural == "namespaces" and not rt.group:
            obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
            obj["status"] = {"phase": "Active"}
        elif rt.plural == "pods" and not rt.group:
            spec = obj.setdefault("spec", {})
            spec.setdefault("restartPolicy", "Always")
            spec.setdefault("dnsPolicy", "ClusterFirst")
            spec.setdefault("schedulerName", "default-scheduler")
            spec.setdefault("terminationGracePeriodSeconds", 30)
            spec.setdefault("securityContext", {})
            obj["status"] = {"phase": "Pending", "qosClass": _qos_class(spec)}
        elif rt.plural == "jobs" and rt.group == "batch":
            spec = obj.setdefault("spec", {})
            if spec.get("completions") is None and spec.get("parallelism") is None:
                spec["completions"] = 1
            spec.setdefault("parallelism", 1)
            spec.setdefault("backoffLimit", 6)
            spec.setdefault("completionMode", "NonIndexed")
            spec.setdefault("suspend", False)
            spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
            template = spec.setdefault("template", {})
            if not spec.get("manualSelector"):
                uid, name = meta["uid"], meta["name"]
                generated = {
                    "batch.kubernetes.io/controller-uid": uid,
                    "batch.kubernetes.io/job-name": name,
                    "controller-uid": uid,
                    "job-name": name,
                }
                tmeta = template.setdefault("metadata", {})
                tmeta["labels"] = {**(tmeta.get("labels") or {}), **generated}
                spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
            if not meta.get("labels"):
                labels = ((template.get("metadata") or {}).get("labels")) or {}
                if labels:
                    meta["labels"] = dict(labels)
            obj["status"] = {}
        elif rt.has_status:
            obj.pop("status", None)

    # -- operations (public, take the lock) ----------------------------------------------------------
    def get(self, rt: ResourceType, namespace: str | None, name: str) -> _Entry:
        with self.cond:
            return self._get_entry(rt, namespace, name)[2]

    def list(
        self, rt: ResourceType, namespace: str | None, query: Mapping[str, str]
    ) -> tuple[list[_Entry], dict[str, Any]]:
        labels = parse_label_selector(query.get("labelSelector", ""))
        fields = parse_field_selector(query.get("fieldSelector", ""))
        try:
            limit = int(query.get("limit") or 0)
        except ValueError:
            raise bad_request(f"invalid limit: {query.get('limit')!r}") from None
        token = query.get("continue") or ""
        with self.cond:
            b = self.bucket(rt)
            keys = b.keys
            if namespace:
                lo = bisect.bisect_left(keys, namespace + "/")
                hi = bisect.bisect_left(keys, namespace + "0")  # '0' sorts right after '/'
            else:
                lo, hi = 0, len(keys)
            list_rv = self.rv
            if token:
                start, list_rv = _decode_continue(token)
                lo = max(lo, bisect.bisect_left(keys, start))
            out: list[_Entry] = []
            i = lo
            objs = b.objs
            while i < hi:
                e = objs[keys[i]]
                i += 1
                o = e.obj
                if labels and not match_labels(labels, o["metadata"].get("labels")):
                    continue
                if fields and not match_fields(fields, o):
                    continue
                out.append(e)
                if limit > 0 and len(out) >= limit:
                    break
            meta: dict[str, Any] = {"resourceVersion": str(list_rv)}
            if limit > 0 and len(out) >= limit and i < hi:
                meta["continue"] = _encode_continue(keys[i - 1] + "\x00", list_rv)
                if not labels and not fields:
                    meta["remainingItemCount"] = hi - i
            return out, meta

    def create(
        self,
        rt: ResourceType,
        version: str,
        namespace: str | None,
        body: Any,
        req: _Request,
        *,
        raw: bool = False,
        operation: str = "Update",
        fields: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise bad_request("the request body must be a JSON object")
        self._check_type(rt, body, version)
        if fields is None and not raw:
            fields = _fieldset({k: v for k, v in body.items() if not (k == "status" and rt.has_status)})
        obj = body
        meta = obj.setdefault("metadata", {})
        with self.cond:
            if rt.namespaced:
                ns = meta.get("namespace")
                if raw and not namespace:
                    namespace = ns or "default"
                elif ns and ns != namespace:
                    raise bad_request(_NS_MISMATCH)
                meta["namespace"] = namespace
                if namespace not in self.bucket(NAMESPACES).objs:
                    raise not_found(NAMESPACES, str(namespace))
            else:
                meta.pop("namespace", None)
            b = self.bucket(rt)
            name = meta.get("name")
            if not name:
                gen = meta.get("generateName")
                if not gen:
                    raise _invalid_rt(
                        rt, "", [FieldError("metadata.name", "Required", "name or generateName is required")]
                    )
                for _ in range(10):
                    name = f"{gen}{_gen_suffix()}"
                    if _obj_key(rt, namespace, name) not in b.objs:
                        break
                meta["name"] = name
            if not isinstance(name, str):
                raise bad_request("metadata.name must be a string")
            errs = _validate_name(rt, name) + _validate_meta(meta)
            if errs:
                raise _invalid_rt(rt, name, errs)
            key = _obj_key(rt, namespace, name)
            if key in b.objs:
                raise already_exists(rt, name)
            for f in ("deletionTimestamp", "deletionGracePeriodSeconds", "selfLink", "resourceVersion"):
                meta.pop(f, None)
            meta["uid"] = (
                meta["uid"] if raw and isinstance(meta.get("uid"), str) and meta["uid"] else _random_uid()
            )
            meta["creationTimestamp"] = (
                meta.get("creationTimestamp") if raw and meta.get("creationTimestamp") else _now_rfc3339()
            )
            meta["generation"] = 1
            meta["resourceVersion"] = ""
            obj["apiVersion"] = rt.api_version()
            obj["kind"] = rt.kind
            if not raw:
                if rt.plural == "namespaces" and not rt.group:
                    meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = name
                if rt.create_status != "keep":
                    self._defaults(rt, obj)
                meta.pop("managedFields", None)
                self._managed(
                    obj, req.manager(), operation, rt.api_version(version), fields or {}, None, False
                )
            # Key order as kube serialises it.
            ordered = {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": _order_meta(meta)}
            ordered.update((k, v) for k, v in obj.items() if k not in ordered)
            if req.dry_run:
                ordered["metadata"].pop("resourceVersion", None)
                return ordered
            return self._put(b, key, ordered)

    def update(
        self,
        rt: ResourceType,
        version: str,
        namespace: str | None,
        name: str,
        body: Any,
        subresource: str | None,
        req: _Request,
    ) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise bad_request("the request body must be a JSON object")
        self._check_type(rt, body, version)
        meta = body.get("metadata") or {}
        with self.cond:
            b, key, entry = self._get_entry(rt, namespace, name)
            self._check_identity(rt, namespace, name, meta, entry.obj)
            rv = meta.get("resourceVersion")
            if rv:
                if str(rv) != entry.obj["metadata"]["resourceVersion"]:
                    raise conflict(rt, name)
            elif rt.crd:
                raise _invalid_rt(
                    rt,
                    name,
                    [
                        FieldError(
                            "metadata.resourceVersion", "Invalid", "must be specified for an update", "0x0"
                        )
                    ],
                )
            if subresource == "status":
                new = _deep(entry.obj)
                _set_status(new, body)
                fields = _fieldset({"status": body.get("status")}) if "status" in body else {}
            else:
                new = body
                if rt.has_status:
                    _set_status(new, entry.obj)
                fields = _fieldset({k: v for k, v in body.items() if not (k == "status" and rt.has_status)})
            return self._commit(b, key, entry.obj, new, version, req, "Update", fields, subresource, False)

    def patch(
        self,
        rt: ResourceType,
        version: str,
        namespace: str | None,
        name: str,
        raw_body: bytes,
        content_type: str,
        subresource: str | None,
        req: _Request,
    ) -> tuple[int, dict[str, Any]]:
        ctype = content_type.split(";")[0].strip().lower()
        allowed = ["application/json-patch+json", "application/merge-patch+json"]
        if not rt.crd:
            allowed.append("application/strategic-merge-patch+json")
        allowed.append("application/apply-patch+yaml")
        if ctype not in allowed:
            raise Refusal(
                415,
                "UnsupportedMediaType",
                "the body of the request was in an unknown format - accepted media types include: "
                + ", ".join(allowed),
            )
        is_apply = ctype == "application/apply-patch+yaml"
        if "force" in req.query and not is_apply:
            raise invalid(
                ("meta.k8s.io", "PatchOptions"),
                "",
                [FieldError("force", "Forbidden", "may not be specified for non-apply patch")],
            )
        if is_apply:
            if not req.query.get("fieldManager"):
                raise invalid(
                    ("meta.k8s.io", "PatchOptions"),
                    "",
                    [FieldError("fieldManager", "Required", "is required for apply requests")],
                )
            try:
                import yaml  # PyYAML: only server-side apply needs it

                applied = yaml.safe_load(raw_body.decode("utf-8")) if raw_body.strip() else None
            except Exception as exc:
                raise bad_request(f"error decoding YAML: {exc}") from None
            if not isinstance(applied, dict):
                raise bad_request("error decoding YAML: the applied configuration must be an object")
            return self._apply(rt, version, namespace, name, applied, subresource, req)
        patch = _parse_json(raw_body)
        with self.cond:
            b, key, entry = self._get_entry(rt, namespace, name)
            current = _deep(entry.as_version(rt, version))
            try:
                if ctype == "application/json-patch+json":
                    if not isinstance(patch, list):
                        raise bad_request(
                            "json: cannot unmarshal object into Go value of type jsonpatch.Patch"
                        )
                    patched = json_patch(current, patch)
                elif not isinstance(patch, dict):
                    raise bad_request("the patch must be a JSON object")
                elif ctype == "application/merge-patch+json":
                    patched = merge_patch(current, patch)
                else:
                    patched = strategic_merge_patch(current, patch)
            except JsonPatchError as exc:
                raise Refusal(
                    422,
                    "Invalid",
                    "the server rejected our request due to an error in our request",
                    {"causes": [{"message": str(exc)}]},
                ) from None
            if not isinstance(patched, dict):
                raise bad_request("the patched object must be a JSON object")
            pmeta = patched.get("metadata")
            if not isinstance(pmeta, dict):
                raise bad_request("metadata must be an object")
            self._check_type(rt, patched, version)
            self._check_identity(rt, namespace, name, pmeta, entry.obj)
            if (
                str(pmeta.get("resourceVersion") or entry.obj["metadata"]["resourceVersion"])
                != entry.obj["metadata"]["resourceVersion"]
            ):
                raise conflict(rt, name)
            fields = _fieldset(patch) if isinstance(patch, dict) else _fieldset_from_pointers(patch)
            if subresource == "status":
                new = _deep(entry.obj)
                _set_status(new, patched)
                fields = {k: v for k, v in fields.items() if k == "f:status"}
            else:
                new = patched
                if rt.has_status:
                    _set_status(new, entry.obj)
                    fields.pop("f:status", None)
            return 200, self._commit(
                b, key, entry.obj, new, version, req, "Update", fields, subresource, False
            )

    def _apply(
        self,
        rt: ResourceType,
        version: str,
        namespace: str | None,
        name: str,
        applied: dict[str, Any],
        subresource: str | None,
        req: _Request,
    ) -> tuple[int, dict[str, Any]]:
        for f in ("apiVersion", "kind"):
            if not applied.get(f):
                raise bad_request(
                    f"Object '{'Kind' if f == 'kind' else f}' is missing in '{_dumps(applied)}'"
                )
        self._check_type(rt, applied, version)
        ameta = applied.get("metadata") or {}
        if not isinstance(ameta, dict):
            raise bad_request("metadata must be an object")
        manager = req.query["fieldManager"]
        fields = _fieldset(applied)
        with self.cond:
            b = self.bucket(rt)
            key = _obj_key(rt, namespace, name)
            entry = b.objs.get(key)
            if entry is None:
                if subresource:
                    raise not_found(rt, name)
                if ameta.get("name") != name:
                    raise bad_request(_name_mismatch(ameta.get("name", ""), name))
                body = _strip_nulls(_deep(applied))
                if rt.has_status:
                    fields.pop("f:status", None)
                return 201, self.create(rt, version, namespace, body, req, operation="Apply", fields=fields)
            self._check_identity(rt, namespace, name, ameta, entry.obj)
            rv = ameta.get("resourceVersion")
            if rv and str(rv) != entry.obj["metadata"]["resourceVersion"]:
                raise conflict(rt, name)
            current = _deep(entry.as_version(rt, version))
            prev: dict[str, Any] = {}
            others: set[tuple[str, ...]] = set()
            for mf in current["metadata"].get("managedFields") or []:
                if mf.get("subresource") != subresource:
                    continue
                if mf.get("manager") == manager and mf.get("operation") == "Apply":
                    prev = mf.get("fieldsV1") or {}
                else:
                    others |= _fs_leaves(mf.get("fieldsV1") or {})
            merged = _apply_merge(
                current, {k: v for k, v in applied.items() if k not in ("apiVersion", "kind")}
            )
            for path in sorted(_fs_leaves(prev) - _fs_leaves(fields) - others):
                if not any(path[:n] in others for n in range(1, len(path))):
                    _delete_path(merged, path)
            if subresource == "status":
                new = _deep(entry.obj)
                _set_status(new, merged)
                fields = {k: v for k, v in fields.items() if k == "f:status"}
            else:
                new = merged
                if rt.has_status:
                    _set_status(new, entry.obj)
                    fields.pop("f:status", None)
            return 200, self._commit(
                b, key, entry.obj, new, version, req, "Apply", fields, subresource, True, manager=manager
            )

    def _check_identity(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        meta: Mapping[str, Any],
        old: Mapping[str, Any],
    ) -> None:
        if meta.get("name", name) != name:
            raise bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})"
            )
        if rt.namespaced and meta.get("namespace") and meta.get("namespace") != namespace:
            raise bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        uid = meta.get("uid")
        if uid and uid != old["metadata"]["uid"]:
            raise conflict(
                rt,
                name,
                f"Precondition failed: UID in precondition: {uid}, UID in object meta: "
                f"{old['metadata']['uid']}",
            )

    def _commit(
        self,
        b: _Bucket,
        key: str,
        old: dict[str, Any],
        new: dict[str, Any],
        version: str,
        req: _Request,
        operation: str,
        fields: dict[str, Any],
        subresource: str | None,
        replace_fields: bool,
        manager: str | None = None,
    ) -> dict[str, Any]:
        rt = b.rt
        meta = new.get("metadata")
        if not isinstance(meta, dict):
            meta = new["metadata"] = {}
        ometa = old["metadata"]
        for f in (
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "managedFields",
        ):
            if f in ometa:
                meta[f] = _deep(ometa[f]) if f == "managedFields" else ometa[f]
            else:
                meta.pop(f, None)
        meta.pop("selfLink", None)
        meta["resourceVersion"] = ometa["resourceVersion"]
        if rt.plural == "namespaces" and not rt.group:
            meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta["name"]
        new["apiVersion"] = rt.api_version()
        new["kind"] = rt.kind
        errs = _validate_meta(meta)
        if errs:
            raise _invalid_rt(rt, meta["name"], errs)
        if ometa.get("deletionTimestamp"):
            added = set(meta.get("finalizers") or []) - set(ometa.get("finalizers") or [])
            if added:
                raise _invalid_rt(
                    rt,
                    meta["name"],
                    [
                        FieldError(
                            "metadata.finalizers",
                            "Forbidden",
                            "no new finalizers can be added if the object is being deleted, "
                            f"found new finalizers {sorted(added)}",
                        )
                    ],
                )

        def spec_part(o: Mapping[str, Any]) -> str:
            return _canon(
                {k: v for k, v in o.items() if k not in ("metadata", "status", "apiVersion", "kind")}
            )

        meta["generation"] = int(ometa.get("generation") or 1) + (
            1 if spec_part(new) != spec_part(old) else 0
        )

        def comparable(o: Mapping[str, Any]) -> str:
            m = {
                k: v
                for k, v in (o.get("metadata") or {}).items()
                if k not in ("managedFields", "resourceVersion")
            }
            return _canon({**o, "metadata": m})

        ordered = {"apiVersion": new["apiVersion"], "kind": new["kind"], "metadata": _order_meta(meta)}
        ordered.update((k, v) for k, v in new.items() if k not in ordered)
        if comparable(ordered) == comparable(old):
            return old  # no-op: nothing written, resourceVersion unchanged
        self._managed(
            ordered,
            manager or req.manager(),
            operation,
            rt.api_version(version),
            fields,
            subresource,
            replace_fields,
        )
        if req.dry_run:
            return ordered
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._remove(b, key)
            self._gc(ometa["uid"], "Background")
            return ordered
        return self._put(b, key, ordered)

    def delete(
        self,
        rt: ResourceType,
        version: str,
        namespace: str | None,
        name: str,
        options: Mapping[str, Any],
        req: _Request,
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        headers: dict[str, str] = {}
        with self.cond:
            b, key, entry = self._get_entry(rt, namespace, name)
            obj = entry.obj
            pre = options.get("preconditions") or {}
            if pre.get("uid") and pre["uid"] != obj["metadata"]["uid"]:
                raise conflict(
                    rt,
                    name,
                    f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: "
                    f"{obj['metadata']['uid']}",
                )
            if pre.get("resourceVersion") and pre["resourceVersion"] != obj["metadata"]["resourceVersion"]:
                raise conflict(
                    rt,
                    name,
                    "Precondition failed: ResourceVersion in precondition: "
                    f"{pre['resourceVersion']}, ResourceVersion in object meta: "
                    f"{obj['metadata']['resourceVersion']}",
                )
            policy = req.query.get("propagationPolicy") or options.get("propagationPolicy")
            orphan = req.query.get("orphanDependents") or options.get("orphanDependents")
            if not policy and orphan is not None:
                policy = "Orphan" if str(orphan).lower() == "true" else "Background"
            if policy and policy not in ("Orphan", "Background", "Foreground"):
                raise invalid(
                    ("meta.k8s.io", "DeleteOptions"),
                    "",
                    [
                        FieldError(
                            "propagationPolicy",
                            "Invalid",
                            "propagationPolicy must be one of Orphan, Foreground or Background",
                            policy,
                        )
                    ],
                )
            if not policy:
                if rt.group == "batch" and rt.plural == "jobs" and version == "v1":
                    policy = "Orphan"
                    headers["Warning"] = (
                        '299 - "child pods are preserved by default when jobs are deleted; set '
                        "propagationPolicy=Background to remove them or set propagationPolicy=Orphan to "
                        'suppress this warning"'
                    )
                else:
                    policy = "Background"
            if rt is NAMESPACES and name in IMMORTAL_NAMESPACES:
                raise Refusal(
                    403,
                    "Forbidden",
                    f'namespaces "{name}" is forbidden: this namespace may not be deleted',
                    _gr_details(rt, name),
                )
            if req.dry_run:
                return 200, self._delete_status(rt, obj), headers
            if obj["metadata"].get("finalizers") and rt is not NAMESPACES:
                if obj["metadata"].get("deletionTimestamp"):
                    return 202, entry.as_version(rt, version), headers
                new = _deep(obj)
                new["metadata"]["deletionTimestamp"] = _now_rfc3339()
                new["metadata"]["deletionGracePeriodSeconds"] = 0
                return 202, self._put(b, key, new), headers
            gone = self._remove(b, key)
            if rt is NAMESPACES:
                self._purge_namespace(name)
            self._gc(obj["metadata"]["uid"], policy)
            if rt.plural == "pods" and not rt.group:
                return 200, gone, headers
            return 200, self._delete_status(rt, obj), headers

    @staticmethod
    def _delete_status(rt: ResourceType, obj: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {
                k: v
                for k, v in (
                    ("name", obj["metadata"]["name"]),
                    ("group", rt.group),
                    ("kind", rt.plural),
                    ("uid", obj["metadata"]["uid"]),
                )
                if v
            },
        }

    def delete_collection(
        self, rt: ResourceType, version: str, namespace: str | None, options: Mapping[str, Any], req: _Request
    ) -> list[dict[str, Any]]:
        with self.cond:
            entries, _ = self.list(
                rt, namespace, {k: v for k, v in req.query.items() if k in ("labelSelector", "fieldSelector")}
            )
            out = []
            for e in entries:
                m = e.obj["metadata"]
                try:
                    _, result, _ = self.delete(rt, version, m.get("namespace"), m["name"], options, req)
                except Refusal:
                    continue
                out.append(e.as_version(rt, version) if result.get("kind") == "Status" else result)
            return out

    def _purge_namespace(self, namespace: str) -> None:
        for b in self.buckets.values():
            if not b.rt.namespaced:
                continue
            lo = bisect.bisect_left(b.keys, namespace + "/")
            hi = bisect.bisect_left(b.keys, namespace + "0")
            for key in list(b.keys[lo:hi]):
                self._remove(b, key)

    def _gc(self, uid: str, policy: str) -> None:
        """Garbage-collect the dependents of a deleted owner, synchronously."""
        for bkey, key in sorted(self.owners.get(uid, ())):
            b = self.buckets[bkey]
            entry = b.objs.get(key)
            if entry is None:
                continue
            refs = entry.obj["metadata"].get("ownerReferences") or []
            alive = [r for r in refs if r.get("uid") != uid and r.get("uid") in self.uids]
            if policy == "Orphan" or alive:
                new = _deep(entry.obj)
                new["metadata"]["ownerReferences"] = [r for r in refs if r.get("uid") != uid]
                if not new["metadata"]["ownerReferences"]:
                    del new["metadata"]["ownerReferences"]
                self._put(b, key, new)
                continue
            if entry.obj["metadata"].get("finalizers"):
                if not entry.obj["metadata"].get("deletionTimestamp"):
                    new = _deep(entry.obj)
                    new["metadata"]["deletionTimestamp"] = _now_rfc3339()
                    new["metadata"]["deletionGracePeriodSeconds"] = 0
                    self._put(b, key, new)
                continue
            dep_uid = entry.obj["metadata"]["uid"]
            self._remove(b, key)
            self._gc(dep_uid, "Background")

    def delete_before(self, rt: ResourceType, namespace: str | None, name: str) -> None:
        with self.cond:
            b = self.bucket(rt)
            key = _obj_key(rt, namespace, name)
            if key in b.objs:
                uid = b.objs[key].obj["metadata"]["uid"]
                self._remove(b, key)
                if rt is NAMESPACES:
                    self._purge_namespace(name)
                self._gc(uid, "Background")

    def reset(self) -> None:
        with self.cond:
            for b in self.buckets.values():
                keep = {k: e for k, e in b.objs.items() if b.rt is NAMESPACES and k in DEFAULT_NAMESPACES}
                for k, e in b.objs.items():
                    if k in keep:
                        continue
                    self.rv += 1
                    gone = dict(e.obj, metadata=dict(e.obj["metadata"], resourceVersion=str(self.rv)))
                    self._record("DELETED", b, gone, e.obj)
                b.objs = keep
                b.keys = sorted(keep)
            self.uids = {}
            self.owners = {}
            for b in self.buckets.values():
                for k, e in b.objs.items():
                    self._index(b, k, None, e.obj)

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()


def _set_status(target: dict[str, Any], source: Mapping[str, Any]) -> None:
    if "status" in source:
        target["status"] = _deep(source["status"])
    else:
        target.pop("status", None)


def _strip_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_strip_nulls(v) for v in value]
    return value


_META_ORDER = (
    "name",
    "generateName",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
)


_OMIT_EMPTY_META = frozenset(
    {"labels", "annotations", "ownerReferences", "finalizers", "managedFields", "generateName"}
)


def _order_meta(meta: Mapping[str, Any]) -> dict[str, Any]:
    """ObjectMeta as kube serialises it: its field order, empty maps and lists omitted."""
    out = {k: meta[k] for k in _META_ORDER if k in meta}
    out.update((k, v) for k, v in meta.items() if k not in out)
    return {k: v for k, v in out.items() if not (k in _OMIT_EMPTY_META and v in ({}, [], "", None))}


def _qos_class(spec: Mapping[str, Any]) -> str:
    containers = [
        c for c in (spec.get("containers") or []) + (spec.get("initContainers") or []) if isinstance(c, dict)
    ]
    requests_any = False
    guaranteed = bool(containers)
    for c in containers:
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        if req or lim:
            requests_any = True
        for r in ("cpu", "memory"):
            if r not in lim or (r in req and str(req[r]) != str(lim[r])):
                guaranteed = False
    if not requests_any:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _encode_continue(start: str, rv: int) -> str:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": start}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_continue(token: str) -> tuple[str, int]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        data = json.loads(raw)
        if data.get("v") != "meta.k8s.io/v1":
            raise ValueError("unsupported version")
        return str(data["start"]), int(data["rv"])
    except Exception as exc:
        raise bad_request(f"continue key is not valid: {exc}") from None


def _parse_json(raw: bytes) -> Any:
    try:
        return json.loads(raw.decode("utf-8")) if raw.strip() else None
    except (UnicodeDecodeError, ValueError) as exc:
        raise bad_request(f"json parse error: {exc}") from None


# --------------------------------------------------------------------------------------------------
# Protobuf request bodies (kubectl 1.32's typed clients POST protobuf, e.g. `kubectl create namespace`)
# --------------------------------------------------------------------------------------------------

PROTOBUF = "application/vnd.kubernetes.protobuf"

# One message per line: "number name type", comma-separated; a type ending in [] is repeated. Types:
# s(tring) b(ytes) i(nt) ?(bool) T(ime) m (map<string,string>) mb (map<string,bytes>) or a message name.
# Only what kubectl's `create` generators send is described; any other kind answers 415.
_PB_SPEC = """
Unknown: 1 typeMeta TypeMeta, 2 raw b, 3 contentEncoding s, 4 contentType s
TypeMeta: 1 apiVersion s, 2 kind s
ObjectMeta: 1 name s, 2 generateName s, 3 namespace s, 4 selfLink s, 5 uid s, 6 resourceVersion s,
  7 generation i, 8 creationTimestamp T, 9 deletionTimestamp T, 10 deletionGracePeriodSeconds i,
  11 labels m, 12 annotations m, 13 ownerReferences OwnerReference[], 14 finalizers s[]
OwnerReference: 1 kind s, 3 name s, 4 uid s, 5 apiVersion s, 6 controller ?, 7 blockOwnerDeletion ?
Namespace: 1 metadata ObjectMeta, 2 spec NamespaceSpec, 3 status NamespaceStatus
NamespaceSpec: 1 finalizers s[]
NamespaceStatus: 1 phase s
ConfigMap: 1 metadata ObjectMeta, 2 data m, 3 binaryData mb, 4 immutable ?
ServiceAccount: 1 metadata ObjectMeta, 2 secrets ObjectReference[], 3 imagePullSecrets LocalObjectReference[],
  4 automountServiceAccountToken ?
ObjectReference: 1 kind s, 2 namespace s, 3 name s, 4 uid s, 5 apiVersion s, 6 resourceVersion s,
  7 fieldPath s
LocalObjectReference: 1 name s
PolicyRule: 1 verbs s[], 2 apiGroups s[], 3 resources s[], 4 resourceNames s[], 5 nonResourceURLs s[]
Role: 1 metadata ObjectMeta, 2 rules PolicyRule[]
ClusterRole: 1 metadata ObjectMeta, 2 rules PolicyRule[], 3 aggregationRule AggregationRule
AggregationRule: 1 clusterRoleSelectors LabelSelector[]
LabelSelector: 1 matchLabels m, 2 matchExpressions LabelSelectorRequirement[]
LabelSelectorRequirement: 1 key s, 2 operator s, 3 values s[]
Subject: 1 kind s, 2 apiGroup s, 3 name s, 4 namespace s
RoleRef: 1 apiGroup s, 2 kind s, 3 name s
RoleBinding: 1 metadata ObjectMeta, 2 subjects Subject[], 3 roleRef RoleRef
ClusterRoleBinding: 1 metadata ObjectMeta, 2 subjects Subject[], 3 roleRef RoleRef
"""


def _parse_pb_spec(text: str) -> dict[str, dict[int, tuple[str, str, bool]]]:
    out: dict[str, dict[int, tuple[str, str, bool]]] = {}
    for message, fields in re.findall(r"^(\w+): (.*?)(?=^\w+: |\Z)", text, re.M | re.S):
        table = out.setdefault(message, {})
        for item in fields.replace("\n", " ").split(","):
            num, name, typ = item.split()
            table[int(num)] = (name, typ.removesuffix("[]"), typ.endswith("[]"))
    return out


# message -> {field number: (json name, type, repeated)}
_PB = _parse_pb_spec(_PB_SPEC)

_PB_TOP_LEVEL = tuple(k for k, fields in _PB.items() if fields.get(1, ("",))[0] == "metadata")


def _pb_varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _pb_fields(data: bytes) -> Iterable[tuple[int, int, Any]]:
    pos = 0
    while pos < len(data):
        tag, pos = _pb_varint(data, pos)
        num, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = _pb_varint(data, pos)
        elif wire == 2:
            n, pos = _pb_varint(data, pos)
            value, pos = data[pos : pos + n], pos + n
        elif wire == 1:
            value, pos = data[pos : pos + 8], pos + 8
        elif wire == 5:
            value, pos = data[pos : pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        yield num, wire, value


def _pb_decode(data: bytes, message: str) -> dict[str, Any]:
    schema = _PB[message]
    out: dict[str, Any] = {}
    for num, _wire, value in _pb_fields(data):
        if num not in schema:
            continue
        name, typ, repeated = schema[num]
        if typ == "s":
            v: Any = value.decode("utf-8")
        elif typ == "b":
            v = bytes(value)
        elif typ == "i":
            v = value - (1 << 64) if value >= 1 << 63 else value
        elif typ == "?":
            v = bool(value)
        elif typ == "T":
            t = _pb_decode_time(value)
            if t is None:
                continue
            v = t
        elif typ in ("m", "mb"):
            entry = {n: val for n, _w, val in _pb_fields(value)}
            key = entry.get(1, b"").decode("utf-8")
            raw = entry.get(2, b"")
            out.setdefault(name, {})[key] = (
                raw.decode("utf-8") if typ == "m" else base64.b64encode(raw).decode()
            )
            continue
        else:
            v = _pb_decode(value, typ)
        if repeated:
            out.setdefault(name, []).append(v)
        elif v not in ("", 0) or typ in ("?",):
            out[name] = v
    return out


def _pb_decode_time(data: bytes) -> str | None:
    fields = {n: v for n, _w, v in _pb_fields(data)}
    seconds = fields.get(1, 0)
    if not seconds:
        return None
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def decode_protobuf(raw: bytes) -> dict[str, Any]:
    """Decode kube's protobuf envelope (``k8s\\x00`` + runtime.Unknown) for the kinds in ``_PB``."""
    if not raw.startswith(b"k8s\x00"):
        raise bad_request("the protobuf body does not start with the kubernetes envelope")
    try:
        unknown = _pb_decode(raw[4:], "Unknown")
        type_meta = unknown.get("typeMeta") or {}
        kind = type_meta.get("kind", "")
        if kind not in _PB_TOP_LEVEL:
            raise Refusal(
                415,
                "UnsupportedMediaType",
                f"this emulator decodes protobuf bodies only for {', '.join(_PB_TOP_LEVEL)}; "
                f"send {kind or 'this object'} as application/json",
            )
        obj = {"apiVersion": type_meta.get("apiVersion", ""), "kind": kind}
        obj.update(_pb_decode(unknown.get("raw", b""), kind))
        obj.setdefault("metadata", {})
        return obj
    except (ValueError, IndexError, UnicodeDecodeError) as exc:
        raise bad_request(f"protobuf decode error: {exc}") from None


# --------------------------------------------------------------------------------------------------
# Discovery and OpenAPI documents
# --------------------------------------------------------------------------------------------------


def _storage_hash(rt: ResourceType) -> str:
    return base64.b64encode(hashlib.sha256(f"{rt.group}/{rt.kind}".encode()).digest()[:8]).decode()


def _resource_list(group: str, version: str) -> dict[str, Any]:
    resources = []
    for rt in REGISTRY.by_gv[(group, version)]:
        res: dict[str, Any] = {
            "name": rt.plural,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": list(rt.verbs),
        }
        if rt.short_names:
            res["shortNames"] = list(rt.short_names)
        if rt.categories:
            res["categories"] = list(rt.categories)
        res["storageVersionHash"] = _storage_hash(rt)
        resources.append(res)
        for sub in rt.subresources:
            resources.append(
                {
                    "name": f"{rt.plural}/{sub}",
                    "singularName": "",
                    "namespaced": rt.namespaced,
                    "kind": rt.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
    doc: dict[str, Any] = {"kind": "APIResourceList"}
    if group:
        doc["apiVersion"] = "v1"
    doc["groupVersion"] = f"{group}/{version}" if group else version
    doc["resources"] = resources
    return doc


def _api_group(group: str) -> dict[str, Any]:
    versions = [{"groupVersion": f"{group}/{v}", "version": v} for v in REGISTRY.groups[group]]
    return {"name": group, "versions": versions, "preferredVersion": versions[0]}


def _openapi_gv_doc(group: str, version: str) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    prefix = f"/apis/{group}/{version}" if group else f"/api/{version}"
    for rt in REGISTRY.by_gv[(group, version)]:
        item = (
            f"{prefix}/namespaces/{{namespace}}/{rt.plural}/{{name}}"
            if rt.namespaced
            else f"{prefix}/{rt.plural}/{{name}}"
        )
        op = {
            "operationId": f"patch{rt.kind}",
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": {"group": group, "version": version, "kind": rt.kind},
            "parameters": [
                {"name": n, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
                for n in ("dryRun", "fieldManager", "fieldValidation")
            ]
            + [{"name": "force", "in": "query", "schema": {"type": "boolean", "uniqueItems": True}}],
            "responses": {"200": {"description": "OK"}},
        }
        paths[item] = {"patch": op}
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": KUBE_VERSION["gitVersion"]},
        "paths": paths,
        "components": {"schemas": {}},
    }


def _openapi_root() -> dict[str, Any]:
    paths = {}
    for group, version in REGISTRY.by_gv:
        rel = f"apis/{group}/{version}" if group else f"api/{version}"
        digest = hashlib.sha256(_dumps(_openapi_gv_doc(group, version)).encode()).hexdigest()[:32].upper()
        paths[rel] = {"serverRelativeURL": f"/openapi/v3/{rel}?hash={digest}"}
    return {"paths": paths}


# --------------------------------------------------------------------------------------------------
# TLS (kubectl only sends credentials over https)
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TlsMaterial:
    ca_pem: str  # the CA certificate (PEM) a client must trust
    cert_chain_path: str  # server certificate + CA, PEM
    key_path: str


_TLS_LOCK = threading.Lock()
_TLS_CACHE: list[TlsMaterial | None] = []


def tls_material() -> TlsMaterial | None:
    """This user's local CA and server certificate (localhost, 127.0.0.1, ::1), created once and shared
    by every process through a private directory under the temp dir; None if neither the
    ``cryptography`` package nor the ``openssl`` binary is available to create them."""
    with _TLS_LOCK:
        if not _TLS_CACHE:
            try:
                _TLS_CACHE.append(_load_or_create_tls())
            except Exception:
                _TLS_CACHE.append(None)
        return _TLS_CACHE[0]


def _load_or_create_tls() -> TlsMaterial:
    uid = os.getuid() if hasattr(os, "getuid") else 0
    base = os.path.join(tempfile.gettempdir(), f"topogov-kube-api-emulator-tls-{uid}")
    names = ("ca.pem", "server.pem", "server-key.pem")
    if not all(os.path.isfile(os.path.join(base, n)) for n in names):
        tmp = tempfile.mkdtemp(prefix=os.path.basename(base) + ".", dir=os.path.dirname(base))
        try:
            _create_tls(tmp)
            try:
                os.rename(tmp, base)  # atomic; fails if another process won the race
            except OSError:
                shutil.rmtree(tmp, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    with open(os.path.join(base, "ca.pem"), encoding="ascii") as fh:
        ca_pem = fh.read()
    return TlsMaterial(ca_pem, os.path.join(base, "server.pem"), os.path.join(base, "server-key.pem"))


def _create_tls(directory: str) -> None:
    try:
        _create_tls_cryptography(directory)
    except ImportError:
        _create_tls_openssl(directory)
    os.chmod(os.path.join(directory, "server-key.pem"), 0o600)


def _create_tls_cryptography(directory: str) -> None:
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    start = datetime.now(UTC) - timedelta(days=1)
    end = start + timedelta(days=3650)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "topogov-local-kube-api-ca")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    san = [
        x509.DNSName("localhost"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address("::1")),
    ]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, True, False, False, False, False, False, False), critical=True
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(san), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    ca_text = ca.public_bytes(pem).decode()
    with open(os.path.join(directory, "ca.pem"), "w", encoding="ascii") as fh:
        fh.write(ca_text)
    with open(os.path.join(directory, "server.pem"), "w", encoding="ascii") as fh:
        fh.write(cert.public_bytes(pem).decode() + ca_text)
    key_bytes = key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    fd = os.open(os.path.join(directory, "server-key.pem"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(key_bytes)


def _create_tls_openssl(directory: str) -> None:
    exe = shutil.which("openssl")
    if not exe:
        raise RuntimeError("neither the cryptography package nor openssl is available")

    def run(*args: str) -> None:
        subprocess.run([exe, *args], cwd=directory, check=True, capture_output=True, timeout=60)

    ec_key = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    run(
        "req",
        "-x509",
        *ec_key,
        "-keyout",
        "ca-key.pem",
        "-out",
        "ca.pem",
        "-days",
        "3650",
        "-subj",
        "/CN=topogov-local-kube-api-ca",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,digitalSignature,keyCertSign,cRLSign",
    )
    run("req", *ec_key, "-keyout", "server-key.pem", "-out", "server.csr", "-subj", "/CN=kube-apiserver")
    with open(os.path.join(directory, "ext.cnf"), "w", encoding="ascii") as fh:
        fh.write(
            "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
            "extendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1\n"
            "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n"
        )
    run(
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca-key.pem",
        "-CAcreateserial",
        "-out",
        "server-only.pem",
        "-days",
        "3650",
        "-extfile",
        "ext.cnf",
    )
    with (
        open(os.path.join(directory, "server-only.pem"), encoding="ascii") as a,
        open(os.path.join(directory, "ca.pem"), encoding="ascii") as b,
        open(os.path.join(directory, "server.pem"), "w", encoding="ascii") as out,
    ):
        out.write(a.read() + b.read())
    for n in ("ca-key.pem", "server.csr", "server-only.pem", "ext.cnf", "ca.srl"):
        with contextlib.suppress(OSError):
            os.remove(os.path.join(directory, n))


# --------------------------------------------------------------------------------------------------
# HTTP
# --------------------------------------------------------------------------------------------------


@dataclass
class _Route:
    rt: ResourceType
    version: str
    namespace: str | None
    name: str | None
    subresource: str | None


def _route(path: str) -> _Route | None:
    parts = [unquote(p) for p in path.strip("/").split("/")]
    if len(parts) >= 2 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    if (group, version) not in REGISTRY.by_gv or not rest:
        return None
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        rt = REGISTRY.resolve(group, version, rest[2])
        if rt is not None and rt.namespaced:
            namespace, rest = rest[1], rest[2:]
    rt = REGISTRY.resolve(group, version, rest[0])
    if rt is None or (rt.namespaced and namespace is None and len(rest) > 1) or len(rest) > 3:
        return None
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    if sub is not None and sub not in rt.subresources:
        return None
    if name == "":
        return None
    return _Route(rt, version, namespace, name, sub)


def _accepts(accept: str, as_kind: str) -> str | None:
    """The meta.k8s.io version the client accepts ``as_kind`` in (``as=Table``...), or None."""
    for part in accept.split(","):
        params = {}
        for p in part.split(";")[1:]:
            if "=" in p:
                k, v = p.split("=", 1)
                params[k.strip()] = v.strip()
        if params.get("as") == as_kind and params.get("g") == "meta.k8s.io":
            return params.get("v", "v1")
    return None


class _Httpd(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, addr: tuple[str, int], app: KubeApiServer, ssl_context: ssl.SSLContext | None) -> None:
        self.app = app
        self.ssl_context = ssl_context
        self.open_sockets: set[socket.socket] = set()
        self.sockets_lock = threading.Lock()
        super().__init__(addr, _Handler)

    def finish_request(self, request: Any, client_address: Any) -> None:
        """Serve https and http on one port: a TLS connection starts with a handshake record (0x16)."""
        conn = request
        if self.ssl_context is not None:
            try:
                request.settimeout(30)
                first = request.recv(1, socket.MSG_PEEK)
                if first == b"\x16":
                    conn = self.ssl_context.wrap_socket(request, server_side=True)
                    with self.sockets_lock:
                        self.open_sockets.add(conn)
                conn.settimeout(None)
            except (OSError, ssl.SSLError):
                return
        try:
            self.RequestHandlerClass(conn, client_address, self)
        finally:
            if conn is not request:
                with self.sockets_lock:
                    self.open_sockets.discard(conn)
                with contextlib.suppress(OSError):
                    conn.close()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.sockets_lock:
            self.open_sockets.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.sockets_lock:
            self.open_sockets.discard(request)
        super().shutdown_request(request)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "kube-apiserver-emulator"
    disable_nagle_algorithm = True
    server: _Httpd

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def do_HEAD(self) -> None:
        self._dispatch("HEAD")

    def do_OPTIONS(self) -> None:
        self._dispatch("OPTIONS")

    # -- responses ------------------------------------------------------------------------------------
    def _send(
        self,
        code: int,
        body: bytes,
        content_type: str = "application/json",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        try:
            phrase = HTTPStatus(code).phrase
        except ValueError:
            phrase = ""
        lines = [
            f"HTTP/1.1 {code} {phrase}",
            f"Content-Type: {content_type}",
            f"Content-Length: {len(body)}",
            "Cache-Control: no-cache, private",
            f"Date: {self.date_time_string()}",
            f"Audit-Id: {uuid.uuid4()}",
        ]
        for k, v in (headers or {}).items():
            lines.append(f"{k}: {v}")
        if self.close_connection:
            lines.append("Connection: close")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        self.wfile.write(head if self.command == "HEAD" else head + body)

    def _send_json(self, code: int, obj: Any, headers: Mapping[str, str] | None = None) -> None:
        self._send(code, (_dumps(obj) + "\n").encode("utf-8"), headers=headers)

    def _send_raw_json(self, code: int, text: str, headers: Mapping[str, str] | None = None) -> None:
        self._send(code, (text + "\n").encode("utf-8"), headers=headers)

    def _send_error(self, err: Refusal) -> None:
        self._send_json(err.code, err.status(), err.headers)

    # -- dispatch -------------------------------------------------------------------------------------
    def _dispatch(self, method: str) -> None:
        app = self.server.app
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            body = self._read_chunked()
        else:
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = 0
            body = self.rfile.read(length) if length > 0 else b""
        url = urlsplit(self.path)
        path = url.path or "/"
        query = dict(parse_qsl(url.query, keep_blank_values=True))
        try:
            if path in ("/healthz", "/livez", "/readyz") or path.startswith(
                ("/healthz/", "/livez/", "/readyz/")
            ):
                self._send(200, b"ok", "text/plain; charset=utf-8")
                return
            if path.startswith("/_emulator/") or path == "/_emulator":
                self._emulator(method, path, body)
                return
            if app.token is not None:
                auth = self.headers.get("Authorization") or ""
                if not (
                    auth.startswith("Bearer ")
                    and hmac.compare_digest(auth[7:].strip().encode(), app.token.encode())
                ):
                    raise Refusal(401, "Unauthorized", "Unauthorized")
            route = _route(path)
            is_watch = method == "GET" and query.get("watch", "").lower() in ("1", "true")
            counter = (
                "discovery"
                if route is None
                else route.rt.plural + (f"/{route.subresource}" if route.subresource else "")
            )
            app.count(f"{'WATCH' if is_watch else method} {counter}")
            fault = app.take_fault(method, path)
            if fault is not None:
                if fault.delay_s:
                    time.sleep(fault.delay_s)
                if fault.delete_before and route is not None and route.name:
                    app.store.delete_before(route.rt, route.namespace, route.name)
                if fault.status:
                    reason, message = _FAULT_REASONS.get(fault.status, ("InternalError", "injected fault"))
                    headers = {}
                    details: dict[str, Any] = {}
                    if fault.status == 429 or fault.retry_after:
                        headers["Retry-After"] = str(fault.retry_after or 1)
                        details["retryAfterSeconds"] = fault.retry_after or 1
                    if route is not None and route.name:
                        details.update(_gr_details(route.rt, route.name))
                    raise Refusal(fault.status, reason, fault.message or message, details, headers)
            if route is None:
                self._non_resource(method, path, query)
                return
            self._resource(method, route, query, body, is_watch)
        except Refusal as err:
            self._send_error(err)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLEOFError):  # the client went away
            self.close_connection = True
        except Exception as exc:
            traceback.print_exc()
            self._send_error(
                Refusal(
                    500,
                    "InternalError",
                    f"Internal error occurred: {exc!r}",
                    {"causes": [{"message": str(exc)}]},
                )
            )

    def _read_chunked(self) -> bytes:
        parts = []
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(parts)
            parts.append(self.rfile.read(size))
            self.rfile.readline()

    def _non_resource(self, method: str, path: str, query: Mapping[str, str]) -> None:
        if method not in ("GET", "HEAD"):
            raise (
                method_not_allowed()
                if path.rstrip("/") in ("/api", "/apis", "/version")
                else generic_not_found()
            )
        p = path.rstrip("/") or "/"
        parts = p.strip("/").split("/")
        app = self.server.app
        if p == "/version":
            self._send_json(200, KUBE_VERSION)
        elif p == "/api":
            host = self.headers.get("Host") or app.address
            self._send_json(
                200,
                {
                    "kind": "APIVersions",
                    "versions": ["v1"],
                    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}],
                },
            )
        elif p == "/apis":
            groups = [_api_group(g) for g in REGISTRY.groups if g]
            self._send_json(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
        elif len(parts) == 2 and parts[0] == "api" and ("", parts[1]) in REGISTRY.by_gv:
            self._send_json(200, _resource_list("", parts[1]))
        elif len(parts) == 2 and parts[0] == "apis" and parts[1] in REGISTRY.groups and parts[1]:
            self._send_json(200, {"kind": "APIGroup", "apiVersion": "v1", **_api_group(parts[1])})
        elif len(parts) == 3 and parts[0] == "apis" and (parts[1], parts[2]) in REGISTRY.by_gv:
            self._send_json(200, _resource_list(parts[1], parts[2]))
        elif p == "/openapi/v3":
            self._send_json(200, _openapi_root())
        elif parts[:2] == ["openapi", "v3"] and len(parts) >= 4:
            rel = parts[2:]
            gv = (
                ("", rel[1])
                if rel[0] == "api" and len(rel) == 2
                else (rel[1], rel[2])
                if len(rel) == 3
                else None
            )
            if gv is None or gv not in REGISTRY.by_gv:
                raise generic_not_found()
            self._send_json(200, _openapi_gv_doc(*gv))
        elif p == "/":
            paths = ["/api", "/api/v1", "/apis", "/healthz", "/livez", "/openapi/v3", "/readyz", "/version"]
            paths += sorted(
                {f"/apis/{g}" for g in REGISTRY.groups if g}
                | {f"/apis/{g}/{v}" for g, v in REGISTRY.by_gv if g}
            )
            self._send_json(200, {"paths": paths})
        else:
            raise generic_not_found()

    def _resource(
        self, method: str, route: _Route, query: dict[str, str], body: bytes, is_watch: bool
    ) -> None:
        app = self.server.app
        store = app.store
        rt, version, ns, name, sub = route.rt, route.version, route.namespace, route.name, route.subresource
        req = _Request(query, self.headers.get("User-Agent") or "")
        accept = self.headers.get("Accept") or ""
        if name is None:
            if method in ("GET", "HEAD"):
                if is_watch:
                    _Watch(self, store, rt, version, ns, query, accept).run()
                    return
                entries, meta = store.list(rt, ns, query)
                self._send_list(rt, version, entries, meta, accept, query)
            elif method == "POST":
                if not rt.namespaced or ns is not None:
                    obj = store.create(rt, version, ns, self._body(body), req)
                    self._send_obj(201, rt, version, obj, accept, query)
                else:
                    raise method_not_allowed()
            elif method == "DELETE" and "deletecollection" in rt.verbs:
                opts = self._body(body, allow_empty=True) or {}
                items = store.delete_collection(rt, version, ns, opts, req)
                self._send_json(
                    200,
                    {
                        "kind": rt.list_kind,
                        "apiVersion": rt.api_version(version),
                        "metadata": {"resourceVersion": str(store.rv)},
                        "items": items,
                    },
                )
            else:
                raise method_not_allowed()
            return
        if method in ("GET", "HEAD"):
            if is_watch:
                raise method_not_allowed()
            entry = store.get(rt, ns, name)
            if (
                sub is None
                and not _accepts(accept, "Table")
                and not _accepts(accept, "PartialObjectMetadata")
            ):
                self._send_raw_json(200, entry.render(rt, version))
            else:
                self._send_obj(200, rt, version, entry.as_version(rt, version), accept, query)
        elif method == "PUT":
            obj = store.update(rt, version, ns, name, self._body(body), sub, req)
            self._send_obj(200, rt, version, obj, accept, query)
        elif method == "PATCH":
            code, obj = store.patch(
                rt, version, ns, name, body, self.headers.get("Content-Type") or "", sub, req
            )
            self._send_obj(code, rt, version, obj, accept, query)
        elif method == "DELETE" and sub is None:
            opts = self._body(body, allow_empty=True) or {}
            if not isinstance(opts, dict):
                raise bad_request("DeleteOptions must be an object")
            code, result, headers = store.delete(rt, version, ns, name, opts, req)
            if result.get("kind") == "Status":
                self._send_json(code, result, headers)
            else:
                self._send_obj(code, rt, version, result, accept, query, headers)
        else:
            raise method_not_allowed()

    def _body(self, raw: bytes, allow_empty: bool = False) -> Any:
        if not raw.strip():
            if allow_empty:
                return None
            raise bad_request("the request body is empty")
        ctype = (self.headers.get("Content-Type") or "application/json").split(";")[0].strip().lower()
        if ctype in ("application/yaml", "application/x-yaml", "text/yaml"):
            try:
                import yaml

                return yaml.safe_load(raw.decode("utf-8"))
            except Exception as exc:
                raise bad_request(f"error decoding YAML: {exc}") from None
        if ctype == PROTOBUF:
            return decode_protobuf(raw)
        if ctype not in ("application/json", "*/*", ""):
            raise Refusal(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format - accepted media types include: "
                f"application/json, application/yaml, {PROTOBUF}",
            )
        return _parse_json(raw)

    def _versioned(self, rt: ResourceType, version: str, obj: dict[str, Any]) -> dict[str, Any]:
        if rt.group and obj.get("apiVersion") != rt.api_version(version):
            obj = dict(obj, apiVersion=rt.api_version(version))
        return obj

    def _send_obj(
        self,
        code: int,
        rt: ResourceType,
        version: str,
        obj: dict[str, Any],
        accept: str,
        query: Mapping[str, str],
        headers: Mapping[str, str] | None = None,
    ) -> None:
        obj = self._versioned(rt, version, obj)
        tv = _accepts(accept, "Table")
        if tv:
            meta = {"resourceVersion": obj["metadata"].get("resourceVersion", "")}
            table = build_table(
                rt, [obj], query.get("includeObject", "PartialObjectMetadata"), meta, f"meta.k8s.io/{tv}"
            )
            self._send_json(code, table, headers)
            return
        pv = _accepts(accept, "PartialObjectMetadata")
        if pv:
            self._send_json(
                code,
                {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": f"meta.k8s.io/{pv}",
                    "metadata": obj.get("metadata") or {},
                },
                headers,
            )
            return
        self._send_json(code, obj, headers)

    def _send_list(
        self,
        rt: ResourceType,
        version: str,
        entries: list[_Entry],
        meta: dict[str, Any],
        accept: str,
        query: Mapping[str, str],
    ) -> None:
        tv = _accepts(accept, "Table")
        if tv:
            objs = [e.as_version(rt, version) for e in entries]
            table = build_table(
                rt, objs, query.get("includeObject", "PartialObjectMetadata"), meta, f"meta.k8s.io/{tv}"
            )
            self._send_json(200, table)
            return
        pv = _accepts(accept, "PartialObjectMetadataList") or _accepts(accept, "PartialObjectMetadata")
        if pv:
            items = [
                {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": f"meta.k8s.io/{pv}",
                    "metadata": e.obj["metadata"],
                }
                for e in entries
            ]
            self._send_json(
                200,
                {
                    "kind": "PartialObjectMetadataList",
                    "apiVersion": f"meta.k8s.io/{pv}",
                    "metadata": meta,
                    "items": items,
                },
            )
            return
        head = (
            f'{{"kind":{json.dumps(rt.list_kind)},"apiVersion":{json.dumps(rt.api_version(version))},'
            f'"metadata":{_dumps(meta)},"items":['
        )
        self._send_raw_json(200, head + ",".join(e.render(rt, version) for e in entries) + "]}")

    # -- emulator control endpoints -----------------------------------------------------------------
    def _emulator(self, method: str, path: str, body: bytes) -> None:
        app = self.server.app
        p = path.rstrip("/")
        if p == "/_emulator/faults":
            if method == "POST":
                spec = _parse_json(body)
                specs = spec if isinstance(spec, list) else [spec]
                added = [app.add_fault(s).describe() for s in specs]
                self._send_json(201, added[0] if not isinstance(spec, list) else {"rules": added})
            elif method == "DELETE":
                app.clear_faults()
                self._send_json(200, {"rules": []})
            elif method == "GET":
                self._send_json(200, {"rules": app.list_faults()})
            else:
                raise method_not_allowed()
        elif p == "/_emulator/requests":
            if method == "GET":
                self._send_json(200, app.counters())
            elif method == "DELETE":
                app.reset_counters()
                self._send_json(200, {})
            else:
                raise method_not_allowed()
        elif p == "/_emulator/reset" and method == "POST":
            app.store.reset()
            self._send_json(200, {"status": "reset"})
        elif p == "/_emulator/objects" and method == "POST":
            doc = _parse_json(body)
            items = doc.get("items") if isinstance(doc, dict) and "items" in doc else [doc]
            created = app.seed(items or [])
            self._send_json(201, {"created": created})
        else:
            raise generic_not_found()


class _Watch:
    """One watch stream: chunked JSON events until timeout, client disconnect or server stop."""

    def __init__(
        self,
        handler: _Handler,
        store: Store,
        rt: ResourceType,
        version: str,
        namespace: str | None,
        query: Mapping[str, str],
        accept: str,
    ) -> None:
        self.h = handler
        self.store = store
        self.rt = rt
        self.version = version
        self.namespace = namespace
        self.query = query
        self.labels = parse_label_selector(query.get("labelSelector", ""))
        self.fields = parse_field_selector(query.get("fieldSelector", ""))
        self.table = _accepts(accept, "Table")
        self.include = query.get("includeObject", "PartialObjectMetadata")
        self.headers_sent = False

    def _matches(self, obj: Mapping[str, Any] | None) -> bool:
        if obj is None:
            return False
        meta = obj.get("metadata") or {}
        if self.namespace and meta.get("namespace") != self.namespace:
            return False
        return match_labels(self.labels, meta.get("labels")) and match_fields(self.fields, obj)

    def _wire(self, etype: str, obj: Mapping[str, Any]) -> bytes:
        obj = dict(obj, apiVersion=self.rt.api_version(self.version)) if self.rt.group else obj
        if self.table and etype != "BOOKMARK":
            meta = {"resourceVersion": (obj.get("metadata") or {}).get("resourceVersion", "")}
            obj = build_table(
                self.rt, [obj], self.include, meta, f"meta.k8s.io/{self.table}", headers=not self.headers_sent
            )
            self.headers_sent = True
        return (_dumps({"type": etype, "object": obj}) + "\n").encode("utf-8")

    def _chunk(self, data: bytes) -> None:
        self.h.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def run(self) -> None:
        q = self.query
        rv_param = q.get("resourceVersion", "")
        send_initial = q.get("sendInitialEvents", "").lower() == "true"
        bookmarks = q.get("allowWatchBookmarks", "").lower() in ("1", "true")
        try:
            timeout = float(q.get("timeoutSeconds") or 1800)
        except ValueError:
            raise bad_request("invalid timeoutSeconds") from None
        deadline = time.monotonic() + timeout
        bkey = (self.rt.group, self.rt.plural)
        initial: list[dict[str, Any]] = []
        expired = None
        with self.store.cond:
            if rv_param in ("", "0") or send_initial:
                b = self.store.bucket(self.rt)
                initial = [b.objs[k].obj for k in b.keys if self._matches(b.objs[k].obj)]
                last = self.store.rv
            else:
                try:
                    last = int(rv_param)
                except ValueError:
                    raise bad_request(f"invalid resource version: {rv_param}") from None
                if last < self.store.log_dropped_upto:
                    expired = last
        head = (
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
            b"Cache-Control: no-cache, private\r\n\r\n"
        )
        self.h.wfile.write(head)
        try:
            if expired is not None:
                status = Refusal(
                    410, "Expired", f"too old resource version: {expired} ({self.store.log_dropped_upto})"
                )
                self._chunk((_dumps({"type": "ERROR", "object": status.status()}) + "\n").encode())
                return
            for obj in initial:
                self._chunk(self._wire("ADDED", obj))
            if send_initial and bookmarks:
                mark = {
                    "kind": self.rt.kind,
                    "apiVersion": self.rt.api_version(self.version),
                    "metadata": {
                        "resourceVersion": str(last),
                        "annotations": {"k8s.io/initial-events-end": "true"},
                    },
                }
                self._chunk((_dumps({"type": "BOOKMARK", "object": mark}) + "\n").encode())
            while True:
                batch: list[_Event] = []
                with self.store.cond:
                    while not self.store.closed and self.store.rv <= last:
                        remaining = deadline - time.monotonic()
                        if remaining <= 0:
                            break
                        self.store.cond.wait(min(remaining, 1.0))
                    if self.store.closed or (self.store.rv <= last and time.monotonic() >= deadline):
                        return
                    for ev in reversed(self.store.log):
                        if ev.rv <= last:
                            break
                        batch.append(ev)
                    last = self.store.rv
                for ev in reversed(batch):
                    if ev.bucket != bkey:
                        continue
                    now_in, was_in = self._matches(ev.obj), self._matches(ev.prev)
                    if ev.type == "ADDED" and now_in:
                        self._chunk(self._wire("ADDED", ev.obj))
                    elif ev.type == "DELETED" and was_in:
                        self._chunk(self._wire("DELETED", ev.obj))
                    elif ev.type == "MODIFIED":
                        if now_in and was_in:
                            self._chunk(self._wire("MODIFIED", ev.obj))
                        elif now_in:
                            self._chunk(self._wire("ADDED", ev.obj))
                        elif was_in:
                            self._chunk(self._wire("DELETED", ev.obj))
                if time.monotonic() >= deadline:
                    return
        finally:
            try:
                self.h.wfile.write(b"0\r\n\r\n")
            except OSError:
                self.h.close_connection = True


# --------------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------------


class KubeApiServer:
    """A kube-apiserver emulator serving real HTTP from a daemon thread."""

    def __init__(
        self, host: str = "127.0.0.1", port: int = 0, token: str | None = None, *, tls: bool = True
    ) -> None:
        self.host = host
        self.port = port
        self.token = token
        self.tls = tls
        self.store = Store()
        self._httpd: _Httpd | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._counters: dict[str, int] = {}
        self._faults: list[_Fault] = []
        self._fault_ids = 0
        self._fault_rng = random.Random(7)  # faults by probability are reproducible

    # -- lifecycle -------------------------------------------------------------------------------------
    def start(self) -> KubeApiServer:
        if self._httpd is not None:
            return self
        ctx = None
        material = tls_material() if self.tls else None
        if material is not None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(material.cert_chain_path, material.key_path)
            ctx.set_alpn_protocols(["http/1.1"])
        self.tls = ctx is not None
        self._httpd = _Httpd((self.host, self.port), self, ctx)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.1},
            name="kube-api-emulator",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self.store.close()
        httpd.shutdown()
        with httpd.sockets_lock:
            socks = list(httpd.open_sockets)
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> KubeApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        host = self.host if ":" not in self.host else f"[{self.host}]"
        return f"http://{host}:{self.port}"

    @property
    def https_url(self) -> str | None:
        """The same server over TLS (None without TLS); clients must trust ``ca_cert_pem``."""
        return "https" + self.url[4:] if self.tls else None

    @property
    def ca_cert_pem(self) -> str | None:
        material = tls_material() if self.tls else None
        return material.ca_pem if material else None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    # -- test hooks -------------------------------------------------------------------------------------
    def count(self, key: str) -> None:
        with self._lock:
            self._counters[key] = self._counters.get(key, 0) + 1

    def counters(self) -> dict[str, int]:
        with self._lock:
            return dict(sorted(self._counters.items()))

    def reset_counters(self) -> None:
        with self._lock:
            self._counters.clear()

    def add_fault(self, spec: Any) -> _Fault:
        if not isinstance(spec, dict):
            raise bad_request("a fault rule must be a JSON object")
        try:
            pattern = re.compile(str(spec.get("path") or ".*"))
        except re.error as exc:
            raise bad_request(f"invalid path regex: {exc}") from None
        status = spec.get("status")
        if status is not None and not (isinstance(status, int) and 400 <= status <= 599):
            raise bad_request("status must be an HTTP error code (400-599)")
        delete_before = bool(spec.get("delete_before"))
        delay = float(spec.get("delay_s") or 0)
        if status is None and not delete_before and not delay:
            raise bad_request("a fault rule needs a status, delete_before or delay_s")
        times = spec.get("times", 1)
        times = None if times is None or int(times) < 0 else int(times)
        probability = float(spec.get("probability", 1.0))
        if not 0.0 < probability <= 1.0:
            raise bad_request("probability must be in (0, 1]")
        method = spec.get("method")
        with self._lock:
            self._fault_ids += 1
            fault = _Fault(
                self._fault_ids,
                str(method).upper() if method and method != "*" else None,
                pattern,
                status,
                times,
                delay,
                delete_before,
                spec.get("message"),
                int(spec["retry_after"]) if spec.get("retry_after") else None,
                probability,
            )
            self._faults.append(fault)
        return fault

    def take_fault(self, method: str, path: str) -> _Fault | None:
        with self._lock:
            for f in self._faults:
                if (
                    (f.method is None or f.method == method)
                    and f.path.search(path)
                    and (f.times is None or f.times > 0)
                    and (f.probability >= 1.0 or self._fault_rng.random() < f.probability)
                ):
                    f.hits += 1
                    if f.times is not None:
                        f.times -= 1
                    if f.times == 0:
                        self._faults.remove(f)
                    return f
        return None

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    def list_faults(self) -> list[dict[str, Any]]:
        with self._lock:
            return [f.describe() for f in self._faults]

    def seed(self, objects: Iterable[Any]) -> int:
        """Store objects verbatim (status kept, no defaulting); each needs apiVersion and kind."""
        n = 0
        req = _Request({}, "emulator-seed")
        for obj in objects:
            if not isinstance(obj, dict) or not obj.get("apiVersion") or not obj.get("kind"):
                raise bad_request("every seeded object needs apiVersion and kind")
            group, _, version = str(obj["apiVersion"]).rpartition("/")
            rt = REGISTRY.by_gk.get((group, obj["kind"]))
            if rt is None or version not in rt.versions:
                raise bad_request(f"no resource for {obj['apiVersion']} {obj['kind']}")
            self.store.create(rt, version, None, _deep(obj), req, raw=True)
            n += 1
        return n


def write_kubeconfig(
    path: str | os.PathLike[str],
    server_url: str,
    token: str,
    context: str = "topogov-local",
    *,
    tls: bool | None = None,
) -> None:
    """Write a kubeconfig for ``kubectl`` and ``kubernetes.config.load_kube_config`` (mode 0600).

    kubectl (client-go) sends credentials only over TLS, so with a token (``tls=None``) or with
    ``tls=True`` an ``http://`` URL of this emulator is written as ``https://`` on the same port with
    the emulator's CA (every KubeApiServer serves both on one port). ``tls=False`` keeps the URL as is.
    """
    q = json.dumps  # JSON strings are valid YAML double-quoted scalars
    cluster = [f"    server: {q(server_url)}"]
    want_tls = bool(token) if tls is None else tls
    material = tls_material() if want_tls else None
    if material is not None and server_url.startswith(("http://", "https://")):
        cluster = [
            f"    server: {q('https://' + server_url.split('://', 1)[1])}",
            f"    certificate-authority-data: {base64.b64encode(material.ca_pem.encode()).decode()}",
        ]
    text = "\n".join(
        [
            "apiVersion: v1",
            "kind: Config",
            "preferences: {}",
            "clusters:",
            f"- name: {q(context)}",
            "  cluster:",
            *cluster,
            "users:",
            f"- name: {q(context)}",
            "  user:",
            f"    token: {q(token)}",
            "contexts:",
            f"- name: {q(context)}",
            "  context:",
            f"    cluster: {q(context)}",
            f"    user: {q(context)}",
            "    namespace: default",
            f"current-context: {q(context)}",
            "",
        ]
    )
    p = os.fspath(path)
    parent = os.path.dirname(os.path.abspath(p))
    os.makedirs(parent, exist_ok=True)
    tmp = f"{p}.tmp{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, p)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m topogov_local.kube_api", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=6443)
    parser.add_argument("--token", default=None, help="require 'Authorization: Bearer TOKEN'")
    parser.add_argument("--kubeconfig", default=None, help="write a kubeconfig for this server here")
    args = parser.parse_args(argv)
    server = KubeApiServer(args.host, args.port, args.token).start()
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        if args.kubeconfig:
            write_kubeconfig(
                args.kubeconfig, server.url, args.token or "no-token-required", tls=bool(args.token)
            )
        print(server.url, flush=True)
        while not stop.wait(0.5):
            pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
