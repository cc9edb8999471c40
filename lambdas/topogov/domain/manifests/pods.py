"""The checks every pod template the API accepts goes through, whatever the kind that carries it.

A team member needs only ``execute-api:Invoke``; the API creates the pods with its own Kubernetes
rights. So a pod template may do nothing the team could not be granted: it is held to the team's Pod
Security level (``domain/podsecurity.py``, Kubernetes' own rules) and, beyond Pod Security, refused
when it would

- leave Kueue's and the scheduler's hands: ``nodeName``, a ``kubernetes.io/hostname`` pin in a
  nodeSelector or a node affinity term (the same pin), another ``schedulerName``, a pod
  ``priorityClassName`` (priority is the team's WorkloadPriorityClass), ``schedulingGates`` (Kueue's);
- land where team work must not: a toleration of every taint (``Exists`` without a key) or of the
  taints that mark a node unhealthy, cordoned or not the team's (``domain/labels.py``);
- act as someone else: a ServiceAccount, a Secret or a RuntimeClass the team's ``pods`` rules do not
  list (``domain/policy/pods.py``);
- use a device uncharged: a device-visibility variable of the NVIDIA container runtime (or AWS
  Neuron's) in ``env``, or possibly from a ConfigMap through ``envFrom`` without a prefix; an
  extended resource Topogov does not govern; a ``resourceClaim``;
- hold its GPUs after Kueue has freed the quota: a grace period over the team's bound;
- be charged other than Kubernetes counts it: a hand-written ``overhead`` (the RuntimeClass admission
  plugin sets it), requests above limits (Kueue refuses such a Workload, ``pkg/workload/resources.go``
  ``ValidateResources``).

Every problem is reported with the JSON path of its field; :func:`check_pod_template` raises one
:class:`ManifestProblem` naming the first and listing them all.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from decimal import Decimal
from typing import Any

from topogov.domain import podsecurity
from topogov.domain.labels import (
    CLOUD_PROVIDER_TAINT_PREFIX,
    HOSTNAME_LABEL,
    HYPERPOD_TAINT_PREFIX,
    KARPENTER_TAINT_PREFIX,
    LIFECYCLE_TAINT_PREFIX,
    NODE_ROLE_TAINT_PREFIX,
)
from topogov.domain.manifests.metadata import TEMPLATE_KUEUE_KEYS, checked_template_metadata, string_map
from topogov.domain.manifests.shape import ManifestProblem
from topogov.domain.policy.pods import PodRules
from topogov.domain.quantity import EFA, GPU, parse_quantity

Problems = list[tuple[str, str]]

# Kubernetes quantities are int64 counts of their smallest unit: anything larger is not a quantity
# (and would not survive the arithmetic and JSON that follow).
MAX_QUANTITY = Decimal(2**63 - 1)
# The resources a container may request: Kubernetes' own (cpu, memory, ephemeral-storage, hugepages-*)
# and the two extended resources Topogov charges. Any other extended resource (a MIG profile
# nvidia.com/mig-*, aws.amazon.com/neuron*, ...) would run uncharged.
STANDARD_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})
CHARGED_DEVICES = frozenset({GPU, EFA})
POD_LEVEL_RESOURCES = frozenset({"cpu", "memory"})  # + hugepages-* (core/v1 validation of spec.resources)
# The NVIDIA container runtime gives a container the devices and driver features these name, read
# from the container's environment (NVIDIA Container Toolkit, "Environment variables (OCI spec)"),
# whatever it requested; AWS Neuron's OCI hook reads its own. CUDA images set NVIDIA_VISIBLE_DEVICES
# themselves: preflight checks that the device plugin does not let the runtime honour it.
DEVICE_VARIABLES = frozenset(
    {
        "NVIDIA_VISIBLE_DEVICES",
        "NVIDIA_DRIVER_CAPABILITIES",
        "NVIDIA_MIG_CONFIG_DEVICES",
        "NVIDIA_MIG_MONITOR_DEVICES",
        "NVIDIA_IMEX_CHANNELS",
        "NVIDIA_GDS",
        "NVIDIA_GDRCOPY",
        "NVIDIA_MOFED",
        "NVIDIA_NVSWITCH",
        "AWS_NEURON_VISIBLE_DEVICES",
    }
)
UNFIT_NODE_TAINTS = (
    LIFECYCLE_TAINT_PREFIX,
    NODE_ROLE_TAINT_PREFIX,
    CLOUD_PROVIDER_TAINT_PREFIX,
    KARPENTER_TAINT_PREFIX,
    HYPERPOD_TAINT_PREFIX,
)
DEFAULT_SCHEDULER = "default-scheduler"
NODE_NAME_FIELD = "metadata.name"  # a node affinity matchFields key: the node's name
CONTAINER_KINDS = ("initContainers", "containers")


def check_pod_template(
    template: Any,
    field: str,
    rules: PodRules,
    kueue_keys: Iterable[str] = TEMPLATE_KUEUE_KEYS,
    named: bool = False,
) -> None:
    """Refuse a pod template a team member may not submit (the module docstring); ``field`` is the
    JSON path of the template in the request (``manifest.spec.template``). ``kueue_keys``: the keys
    of Kueue's its kind may carry on a template; ``named``: its metadata may name it (a
    HyperPodPyTorchJob's template, as ``hyp`` writes it)."""
    if not isinstance(template, Mapping) or not isinstance(template.get("spec"), Mapping):
        raise ManifestProblem(f"{field}.spec", "is required")
    checked_template_metadata(template.get("metadata"), f"{field}.metadata", kueue_keys, named=named)
    spec, at = template["spec"], f"{field}.spec"
    _check_structure(spec, at)
    problems = [
        *_scheduling(spec, at),
        *_identity(spec, at, rules),
        *_runtime(spec, at, rules),
        *_devices(spec, at),
        *_pod_security(template, field, rules),
    ]
    if problems:
        first_field, first_message = problems[0]
        raise ManifestProblem(first_field, first_message, problems)


def containers(spec: Mapping[str, Any], at: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Each container of the pod spec (init containers first) with its JSON path."""
    for kind in CONTAINER_KINDS:
        items = spec.get(kind)
        for i, c in enumerate(items if isinstance(items, list) else []):
            if isinstance(c, Mapping):
                yield f"{at}.{kind}[{i}]", c


# --- structure --------------------------------------------------------------------------------------


def _check_structure(spec: Mapping[str, Any], at: str) -> None:
    """Containers well formed, each main container with requests, every quantity a quantity."""
    items = spec.get("containers")
    if not isinstance(items, list) or not items:
        raise ManifestProblem(f"{at}.containers", "needs at least one container")
    if spec.get("initContainers") is not None and not isinstance(spec.get("initContainers"), list):
        raise ManifestProblem(f"{at}.initContainers", "must be a list")
    if spec.get("ephemeralContainers") is not None:
        raise ManifestProblem(
            f"{at}.ephemeralContainers", "cannot be set when a pod is created (kubectl debug adds them)"
        )
    for kind in CONTAINER_KINDS:
        for i, c in enumerate(spec.get(kind) or []):
            _check_container(c, f"{at}.{kind}[{i}]", need_requests=kind == "containers")
    string_map(spec, "nodeSelector", f"{at}.nodeSelector")
    _check_pod_resources(spec.get("resources"), f"{at}.resources")


def _resource_tables(resources: Any, field: str) -> dict[str, Mapping[str, Any]]:
    if resources is not None and not isinstance(resources, Mapping):
        raise ManifestProblem(field, "must be an object")
    tables = {}
    for kind in ("requests", "limits"):
        table = (resources or {}).get(kind)
        if table is not None and not isinstance(table, Mapping):
            raise ManifestProblem(f"{field}.{kind}", "must be an object")
        tables[kind] = table or {}
    return tables


def _check_container(c: Any, field: str, *, need_requests: bool) -> None:
    if not isinstance(c, Mapping):
        raise ManifestProblem(field, "must be an object")
    tables = _resource_tables(c.get("resources"), f"{field}.resources")
    if need_requests and not tables["requests"] and not tables["limits"]:
        raise ManifestProblem(
            f"{field}.resources.requests",
            "are required: quota is charged on requests (cpu, memory, nvidia.com/gpu, vpc.amazonaws.com/efa)",
        )
    _check_quantities(tables, f"{field}.resources", _container_resource)


def _check_pod_resources(resources: Any, field: str) -> None:
    """Pod-level ``spec.resources`` (Kubernetes' PodLevelResources): cpu, memory and huge pages."""
    if resources is None:
        return
    tables = _resource_tables(resources, field)
    _check_quantities(tables, field, _pod_resource)


def _container_resource(name: str) -> str | None:
    if name in STANDARD_RESOURCES or name in CHARGED_DEVICES or name.startswith("hugepages-"):
        return None
    if "/" in name:
        return (
            "is an extended resource Topogov does not govern: it would be used uncharged (the team's "
            f"quota covers {', '.join(sorted(CHARGED_DEVICES))}, cpu and memory)"
        )
    return "is not a Kubernetes resource name"


def _pod_resource(name: str) -> str | None:
    if name in POD_LEVEL_RESOURCES or name.startswith("hugepages-"):
        return None
    return "is not a pod-level resource (Kubernetes accepts cpu, memory and hugepages-* here)"


def _check_quantities(tables: Mapping[str, Mapping[str, Any]], field: str, allowed: Any) -> None:
    amounts: dict[str, dict[str, Decimal]] = {}
    for kind, table in tables.items():
        for name, value in table.items():
            why = allowed(str(name))
            if why is not None:
                raise ManifestProblem(f"{field}.{kind}.{name}", why)
            amount = _quantity(value)
            if amount is None:
                raise ManifestProblem(f"{field}.{kind}.{name}", "is not a quantity")
            amounts.setdefault(kind, {})[str(name)] = amount
    limits = amounts.get("limits", {})
    for name, asked in amounts.get("requests", {}).items():
        if name in limits and asked > limits[name]:
            raise ManifestProblem(
                f"{field}.requests.{name}",
                "must not exceed its limit (Kubernetes refuses the pod, Kueue the Workload)",
            )


def _quantity(value: Any) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    try:
        q = parse_quantity(value)
    except (ValueError, ArithmeticError):
        return None
    return q if q.is_finite() and 0 <= q <= MAX_QUANTITY else None


# --- beyond Pod Security -------------------------------------------------------------------------------


_NOT_KUEUES = {
    "nodeName": "it pins pods to a node, bypassing the scheduler and Kueue's topology placement",
    "priorityClassName": "a pod PriorityClass preempts outside Kueue: priority comes from the team's "
    "WorkloadPriorityClass (the job's `priority`)",
    "schedulingGates": "they are Kueue's to set and lift: a pod with another gate never starts",
    "overhead": "Kubernetes sets it from the pod's RuntimeClass (the RuntimeClass admission plugin)",
}
_SCHEDULER = (
    f"must be absent or {DEFAULT_SCHEDULER!r}: Kueue's placement is carried out by the default scheduler"
)


def _scheduling(spec: Mapping[str, Any], at: str) -> Problems:
    """What would place the pods outside Kueue's and the scheduler's hands, or on unfit nodes."""
    out: Problems = [
        (f"{at}.{key}", f"is not allowed: {why}")
        for key, why in _NOT_KUEUES.items()
        if spec.get(key) is not None
    ]
    if spec.get("schedulerName") not in (None, DEFAULT_SCHEDULER):
        out.append((f"{at}.schedulerName", _SCHEDULER))
    selector = spec.get("nodeSelector")
    if isinstance(selector, Mapping) and HOSTNAME_LABEL in selector:
        out.append((f"{at}.nodeSelector.{HOSTNAME_LABEL}", _PIN))
    out += _affinity_pins(spec.get("affinity"), f"{at}.affinity")
    out += _tolerations(spec.get("tolerations"), f"{at}.tolerations")
    return out


_PIN = "pins pods to named nodes (as nodeName does), bypassing Kueue's topology placement"


def _affinity_pins(affinity: Any, at: str) -> Problems:
    """A node affinity term that names nodes: ``kubernetes.io/hostname`` or the node's name field."""
    node = affinity.get("nodeAffinity") if isinstance(affinity, Mapping) else None
    if not isinstance(node, Mapping):
        return []
    terms: list[tuple[str, Any]] = []
    required = node.get("requiredDuringSchedulingIgnoredDuringExecution")
    if isinstance(required, Mapping) and isinstance(required.get("nodeSelectorTerms"), list):
        base = f"{at}.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
        terms += [(f"{base}[{i}]", t) for i, t in enumerate(required["nodeSelectorTerms"])]
    preferred = node.get("preferredDuringSchedulingIgnoredDuringExecution")
    if isinstance(preferred, list):
        base = f"{at}.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
        terms += [
            (f"{base}[{i}].preference", p.get("preference"))
            for i, p in enumerate(preferred)
            if isinstance(p, Mapping)
        ]
    out: Problems = []
    for path, term in terms:
        if not isinstance(term, Mapping):
            continue
        for kind, key in (("matchExpressions", HOSTNAME_LABEL), ("matchFields", NODE_NAME_FIELD)):
            items = term.get(kind)
            for j, expr in enumerate(items if isinstance(items, list) else []):
                if isinstance(expr, Mapping) and expr.get("key") == key:
                    out.append((f"{path}.{kind}[{j}].key", _PIN))
    return out


_EVERY_TAINT = (
    "tolerates every taint (operator Exists without a key): the pods could land on cordoned, unhealthy "
    "or system nodes"
)
_UNFIT = (
    "marks nodes unfit for team work (unhealthy, cordoned, not initialised, being replaced, or the "
    "control plane's): it may not be tolerated"
)


def _tolerations(tolerations: Any, at: str) -> Problems:
    out: Problems = []
    for i, t in enumerate(tolerations if isinstance(tolerations, list) else []):
        if not isinstance(t, Mapping):
            continue
        key = t.get("key") or ""
        if t.get("operator") == "Exists" and not key:
            out.append((f"{at}[{i}]", _EVERY_TAINT))
        elif isinstance(key, str) and key.startswith(UNFIT_NODE_TAINTS):
            out.append((f"{at}[{i}].key", f"{key!r} {_UNFIT}"))
    return out


def _identity(spec: Mapping[str, Any], at: str, rules: PodRules) -> Problems:
    """The ServiceAccount and the Secrets the pods would act as or read."""
    out: Problems = []
    accounts = ", ".join(rules.service_accounts) or "none"
    for key in ("serviceAccountName", "serviceAccount"):  # serviceAccount: the deprecated alias
        account = spec.get(key)
        if account is not None and account not in rules.service_accounts:
            why = f"is not one of the team's ServiceAccounts ({accounts}; teams.yaml pods.serviceAccounts)"
            out.append(
                (f"{at}.{key}", f"{account!r} {why}: its IAM role and Kubernetes rights are not the team's")
            )
    secrets = ", ".join(rules.secrets) or "none"
    for path, name in _secret_references(spec, at):
        if name not in rules.secrets:
            why = f"is not one the team's pods may read ({secrets}; teams.yaml pods.secrets)"
            out.append((path, f"Secret {name!r} {why}"))
    return out


def _secret_references(spec: Mapping[str, Any], at: str) -> Iterator[tuple[str, str]]:
    """(path, secret name) of every Secret a pod would read: in volumes (any volume source's
    ``secretName``/``secretRef``/``nodePublishSecretRef``, projected sources' ``secret``) and in
    containers' ``env`` (``secretKeyRef``) and ``envFrom`` (``secretRef``)."""
    volumes = spec.get("volumes")
    for i, volume in enumerate(volumes if isinstance(volumes, list) else []):
        if isinstance(volume, Mapping):
            yield from _volume_secrets(volume, f"{at}.volumes[{i}]")
    for path, c in containers(spec, at):
        env = c.get("env")
        for j, var in enumerate(env if isinstance(env, list) else []):
            ref = ((var.get("valueFrom") or {}) if isinstance(var, Mapping) else {}).get("secretKeyRef")
            if isinstance(ref, Mapping):
                yield f"{path}.env[{j}].valueFrom.secretKeyRef.name", str(ref.get("name", ""))
        env_from = c.get("envFrom")
        for j, source in enumerate(env_from if isinstance(env_from, list) else []):
            ref = source.get("secretRef") if isinstance(source, Mapping) else None
            if isinstance(ref, Mapping):
                yield f"{path}.envFrom[{j}].secretRef.name", str(ref.get("name", ""))


def _volume_secrets(volume: Mapping[str, Any], at: str) -> Iterator[tuple[str, str]]:
    for kind, source in volume.items():
        if not isinstance(source, Mapping):
            continue
        if kind == "secret":
            yield f"{at}.secret.secretName", str(source.get("secretName", ""))
        elif kind == "projected":
            items = source.get("sources")
            for k, item in enumerate(items if isinstance(items, list) else []):
                secret = item.get("secret") if isinstance(item, Mapping) else None
                if isinstance(secret, Mapping):
                    yield f"{at}.projected.sources[{k}].secret.name", str(secret.get("name", ""))
        else:
            if isinstance(source.get("secretName"), str):
                yield f"{at}.{kind}.secretName", source["secretName"]
            for ref_key in ("secretRef", "nodePublishSecretRef", "controllerPublishSecretRef"):
                ref = source.get(ref_key)
                if isinstance(ref, Mapping):
                    yield f"{at}.{kind}.{ref_key}.name", str(ref.get("name", ""))


def _runtime(spec: Mapping[str, Any], at: str, rules: PodRules) -> Problems:
    out: Problems = []
    runtime = spec.get("runtimeClassName")
    if runtime is not None and runtime not in rules.runtime_classes:
        known = ", ".join(rules.runtime_classes) or "none"
        why = f"is not one of the team's RuntimeClasses ({known}; teams.yaml pods.runtimeClasses)"
        out.append((f"{at}.runtimeClassName", f"{runtime!r} {why}"))
    grace = spec.get("terminationGracePeriodSeconds")
    if grace is not None and (
        not isinstance(grace, int) or isinstance(grace, bool) or grace > rules.max_grace_period_s
    ):
        bound = rules.max_grace_period_s
        why = (
            f"must be at most {bound} (teams.yaml pods.maxGracePeriodSeconds): a stopped pod keeps its "
            "GPUs that long after Kueue has given the quota to another job"
        )
        out.append((f"{at}.terminationGracePeriodSeconds", why))
    return out


def _devices(spec: Mapping[str, Any], at: str) -> Problems:
    """Devices a container would get uncharged: device-visibility variables, resource claims."""
    out: Problems = []
    if spec.get("resourceClaims") is not None:
        out.append((f"{at}.resourceClaims", _CLAIMS))
    for path, c in containers(spec, at):
        env = c.get("env")
        for j, var in enumerate(env if isinstance(env, list) else []):
            name = var.get("name") if isinstance(var, Mapping) else None
            if name in DEVICE_VARIABLES:
                out.append((f"{path}.env[{j}].name", device_variable(str(name))))
        env_from = c.get("envFrom")
        for j, source in enumerate(env_from if isinstance(env_from, list) else []):
            if isinstance(source, Mapping):
                why = _env_from_prefix(source.get("prefix"))
                if why:
                    out.append((f"{path}.envFrom[{j}].prefix", why))
        claims = (c.get("resources") or {}).get("claims") if isinstance(c.get("resources"), Mapping) else None
        if claims is not None:
            out.append((f"{path}.resources.claims", _CLAIMS))
    return out


_CLAIMS = "is not allowed: a claimed device (dynamic resource allocation) is not charged to the team's quota"


def device_variable(name: str) -> str:
    """Why the environment variable ``name`` may not be set (the high-level job's ``environment`` too)."""
    return (
        f"{name} is read by the container runtime to choose the node's devices: a container could "
        "see GPUs it did not request, uncharged"
    )


def _env_from_prefix(prefix: Any) -> str | None:
    """An ``envFrom`` source must have a prefix that no device-visibility variable starts with: its
    variables come from a ConfigMap or Secret the API cannot read."""
    if not isinstance(prefix, str) or not prefix:
        return (
            "is required: without a prefix the source could set NVIDIA_VISIBLE_DEVICES and its kin "
            "(give one, e.g. CFG_)"
        )
    clash = sorted(v for v in DEVICE_VARIABLES if v.startswith(prefix))
    if clash:
        return f"{prefix!r} could make {clash[0]}: choose a prefix no device variable starts with"
    return None


# --- Pod Security ---------------------------------------------------------------------------------------


def _pod_security(template: Mapping[str, Any], field: str, rules: PodRules) -> Problems:
    """The team's Pod Security level, Kubernetes' checks (``domain/podsecurity.py``)."""
    found = podsecurity.violations(rules.security, template.get("metadata"), template["spec"])
    return [
        (f"{field}.{v.field}", f"Pod Security {v.level} (the team's level is {rules.security}): {v.message}")
        for v in found
    ]
