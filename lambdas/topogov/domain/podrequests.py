"""What Kubernetes and Kueue count as a pod's resource requests (pure, no I/O).

A port, rule for rule, of:

* ``k8s.io/component-helpers`` v0.35.4, ``resource/helpers.go`` (identical in v0.35.3, the version
  Kueue v0.17.0's go.mod pins):

  - ``PodRequests(pod, PodResourcesOptions{})``, the options Kueue v0.17.0 passes
    (``pkg/resources/requests.go`` ``NewRequestsFromPodSpec``, ``pkg/workload/workload.go``
    ``totalRequestsFromPodSets``): container-level requests, then the pod-level
    ``spec.resources.requests`` replace them for the resources ``IsSupportedPodLevelResource`` accepts
    (``cpu``, ``memory``, ``hugepages-*``; others are ignored) and only when
    ``IsPodLevelRequestsSet`` (at least one of those is set), then ``spec.overhead`` is added
    (``addResourceList``). No feature gate is consulted there: PodLevelResources (beta, on by default
    since 1.34) and SidecarContainers (GA, locked on since 1.33) act in the API server.
  - ``AggregateContainerRequests``: the sum of the containers; each restartable init container
    (a sidecar: ``restartPolicy: Always``) adds to that sum; each init container's use is its own
    requests plus the sidecars started before it (a sidecar's use: all sidecars so far, itself
    included); the result is, per resource, the larger of the sum and the largest use
    (``maxResourceList``).
  - Not ported, being outside the options Kueue passes: ``UseStatusResources`` (in-place resize),
    ``ExcludeOverhead``, ``NonMissingContainerRequests``, ``Skip*``, ``Reuse``, ``ContainerFn``,
    and ``PodLimits``.

* Kueue v0.17.0, ``pkg/workload/resources.go`` ``AdjustResources``, in its order:

  1. ``handlePodOverhead``: a non-null ``runtimeClassName`` and an empty ``overhead`` take the
     RuntimeClass's ``overhead.podFixed`` (an unknown class changes nothing: Kueue logs and goes on);
  2. ``handlePodLimitRange``: ``pkg/util/limitrange`` ``Summarize`` (type ``Container``: first value
     wins per resource for ``default`` and ``defaultRequest``), then for init containers and then
     containers ``MergeResourceListKeepFirst(limits, default)`` and
     ``MergeResourceListKeepFirst(requests, defaultRequest)`` (``pkg/util/resource``);
  3. ``handleLimitsToRequests`` / ``UseLimitsAsMissingRequestsInPod``: a container's limits stand in
     for its missing requests (the container's own keys only; pod-level ``spec.resources`` is not
     touched).

* ``k8s.io/apimachinery`` v0.35.4 ``resource.Quantity``: ``ParseQuantity`` rounds a value finer than
  1n up (away from zero) to 1n and caps binary-suffixed values at 2^63-1; a JSON ``null`` decodes as
  zero. Kueue (``pkg/resources/requests.go`` ``ResourceValue``) turns a pod's total into integers with
  ``MilliValue`` for ``cpu`` and ``Value`` for the rest: both round up, away from zero
  (``int64Amount.AsScaledInt64``), which :func:`governed` follows.

Inputs are pod specs as JSON (camelCase). A value of the wrong type (a string where an object is
expected, a list where a quantity is) is skipped; an unparsable quantity raises ``ValueError``. Only
the quantities read are parsed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import MAX_PREC, ROUND_UP, Context, Decimal
from typing import Any

from topogov.domain.quantity import CPU, EFA, GPU, MEMORY, Resources, parse_quantity

Requests = dict[str, Decimal]  # resource name -> quantity in its base unit (cores, bytes, devices)

_ALWAYS = "Always"  # v1.ContainerRestartPolicyAlways: an init container so marked is a sidecar
_CONTAINER = "Container"  # v1.LimitTypeContainer
_HUGEPAGES_PREFIX = "hugepages-"  # v1.ResourceHugePagesPrefix
_POD_LEVEL = frozenset({CPU, MEMORY})  # helpers.go supportedPodLevelResources (plus hugepages-*)
_NANO = Decimal("1e-9")
_MAX_INT64 = Decimal(2**63 - 1)
_BINARY_SUFFIXES = ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_EXACT = Context(prec=MAX_PREC)  # sums never round, as Quantity.Add never does


@dataclass(frozen=True)
class NamespaceDefaults:
    """What Kueue reads from the cluster for a workload's namespace, as the API returns it (so with
    the API server's LimitRange defaulting already applied)."""

    container_default: Mapping[str, Any] = field(default_factory=dict)  # type Container, `default`
    container_default_request: Mapping[str, Any] = field(default_factory=dict)  # `defaultRequest`
    runtime_overhead: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # class -> podFixed


_NO_DEFAULTS = NamespaceDefaults()


# --- quantities and resource lists ---------------------------------------------------------------


def _quantity(raw: object) -> Decimal | None:
    """``raw`` as a Quantity would hold it; None for a value of the wrong type (skipped)."""
    if raw is None:
        return Decimal(0)  # Quantity.UnmarshalJSON: null is the zero quantity
    if isinstance(raw, Decimal):
        if not raw.is_finite():
            raise ValueError(f"not a quantity: {raw!r}")
        value = raw
    elif isinstance(raw, str | int | float):  # bool is an int: parse_quantity rejects it
        value = parse_quantity(raw)
    else:
        return None
    exponent = value.as_tuple().exponent
    if isinstance(exponent, int) and exponent < -9:
        value = value.quantize(_NANO, rounding=ROUND_UP, context=_EXACT)  # ParseQuantity: RoundUp to 1n
    if isinstance(raw, str) and raw.strip().endswith(_BINARY_SUFFIXES) and abs(value) > _MAX_INT64:
        value = _MAX_INT64.copy_sign(value)  # ParseQuantity: BinarySI values are capped at maxAllowed
    return value


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _objects(value: object) -> list[Mapping[str, Any]]:
    """The objects of a JSON list (containers, limit range items); anything else is skipped."""
    if not isinstance(value, list | tuple):
        return []
    return [item for item in value if isinstance(item, Mapping)]


def resource_list(value: object) -> Requests:
    """A ``ResourceList`` (``requests``, ``overhead``...) parsed: name -> quantity."""
    parsed: Requests = {}
    for name, raw in _mapping(value).items():
        quantity = _quantity(raw)
        if isinstance(name, str) and quantity is not None:
            parsed[name] = quantity
    return parsed


def _add(into: Requests, other: Mapping[str, Decimal]) -> None:
    """helpers.go ``addResourceList``."""
    for name, quantity in other.items():
        into[name] = _EXACT.add(into[name], quantity) if name in into else quantity


def _max(into: Requests, other: Mapping[str, Decimal]) -> None:
    """helpers.go ``maxResourceList``."""
    for name, quantity in other.items():
        if name not in into or quantity > into[name]:
            into[name] = quantity


# --- component-helpers: PodRequests ---------------------------------------------------------------


def _container_requests(container: Mapping[str, Any]) -> Requests:
    return resource_list(_mapping(container.get("resources")).get("requests"))


def aggregate_container_requests(spec: Mapping[str, Any]) -> Requests:
    """helpers.go ``AggregateContainerRequests(pod, PodResourcesOptions{})``."""
    spec = _mapping(spec)
    requests: Requests = {}
    for container in _objects(spec.get("containers")):
        _add(requests, _container_requests(container))
    sidecars: Requests = {}  # the restartable init containers started so far
    init_use: Requests = {}  # the largest InitContainerUse(i)
    for container in _objects(spec.get("initContainers")):
        own = _container_requests(container)
        if container.get("restartPolicy") == _ALWAYS:
            _add(requests, own)  # a sidecar runs beside the containers
            _add(sidecars, own)
            use = dict(sidecars)
        else:
            use = dict(own)
            _add(use, sidecars)
        _max(init_use, use)
    _max(requests, init_use)
    return requests


def is_supported_pod_level_resource(name: str) -> bool:
    """helpers.go ``IsSupportedPodLevelResource``: ``cpu``, ``memory`` and ``hugepages-*``."""
    return name in _POD_LEVEL or name.startswith(_HUGEPAGES_PREFIX)


def pod_requests(spec: Mapping[str, Any]) -> Requests:
    """helpers.go ``PodRequests(&v1.Pod{Spec: spec}, PodResourcesOptions{})``: what the scheduler and
    Kueue count for one pod of ``spec``. Keys whose value is zero are kept, as upstream keeps them."""
    spec = _mapping(spec)
    requests = aggregate_container_requests(spec)
    pod_level = _mapping(_mapping(spec.get("resources")).get("requests"))
    # IsPodLevelRequestsSet looks at the names only; then each supported pod-level value replaces
    # the containers' figure (even a smaller one), and every other pod-level name is ignored.
    if any(isinstance(name, str) and is_supported_pod_level_resource(name) for name in pod_level):
        for name, quantity in resource_list(pod_level).items():
            if is_supported_pod_level_resource(name):
                requests[name] = quantity
    _add(requests, resource_list(spec.get("overhead")))
    return requests


# --- Kueue: limitrange.Summarize and AdjustResources ----------------------------------------------


def _keep_first(target: dict[str, Any], key: str, source: Mapping[str, Any]) -> None:
    """``target[key] = MergeResourceListKeepFirst(target[key], source)``: every value already there
    stays, the names it lacks come from ``source``. A ``target[key]`` of the wrong type is left alone."""
    first = target.get(key)
    if first is not None and not isinstance(first, Mapping):
        return
    missing = {name: _copy(value) for name, value in source.items() if first is None or name not in first}
    if missing:
        target[key] = {**(first or {}), **missing}


def summarize_limit_ranges(
    limit_ranges: Iterable[Mapping[str, Any]],
    *,
    runtime_overhead: Mapping[str, Mapping[str, Any]] | None = None,
) -> NamespaceDefaults:
    """Kueue ``limitrange.Summarize(ranges...)[Container]``, the part ``handlePodLimitRange`` reads:
    ``default`` and ``defaultRequest``, the first value met for each resource kept (in the order
    given; Kueue lists the namespace's LimitRanges from its informer cache, whose order is not
    defined when two ranges default the same resource). Items of other types (``Pod``,
    ``PersistentVolumeClaim``) and ``min``/``max``/``maxLimitRequestRatio`` do not change requests.
    ``runtime_overhead`` (RuntimeClass name -> ``overhead.podFixed``) is passed through."""
    summary: dict[str, dict[str, Any]] = {"default": {}, "defaultRequest": {}}
    for limit_range in limit_ranges:
        if not isinstance(limit_range, Mapping):
            continue
        for item in _objects(_mapping(limit_range.get("spec")).get("limits")):
            if item.get("type") != _CONTAINER:
                continue
            for key in ("default", "defaultRequest"):
                _keep_first(summary, key, _mapping(item.get(key)))
    return NamespaceDefaults(
        container_default=summary["default"],
        container_default_request=summary["defaultRequest"],
        runtime_overhead=dict(runtime_overhead or {}),
    )


def _copy(value: Any) -> Any:
    """A deep copy of JSON (mappings become dicts, lists stay lists)."""
    if isinstance(value, Mapping):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_copy(item) for item in value]
    return value


def _container_resources(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``resources`` object of every init container, then every container, of the copy ``spec``
    (created where absent); containers whose ``resources`` is of the wrong type are skipped."""
    found: list[dict[str, Any]] = []
    for key in ("initContainers", "containers"):
        containers = spec.get(key)
        for container in containers if isinstance(containers, list) else []:
            if not isinstance(container, dict):
                continue
            if container.get("resources") is None:
                container["resources"] = {}
            if isinstance(container["resources"], dict):
                found.append(container["resources"])
    return found


def adjust_resources(spec: Mapping[str, Any], defaults: NamespaceDefaults = _NO_DEFAULTS) -> dict[str, Any]:
    """Kueue ``AdjustResources`` on a copy of ``spec`` (the input is never changed)."""
    adjusted: dict[str, Any] = _copy(_mapping(spec))
    # 1. handlePodOverhead
    runtime_class = adjusted.get("runtimeClassName")
    if runtime_class is not None and not _mapping(adjusted.get("overhead")):
        pod_fixed = defaults.runtime_overhead.get(runtime_class) if isinstance(runtime_class, str) else None
        if isinstance(pod_fixed, Mapping) and pod_fixed:
            adjusted["overhead"] = _copy(pod_fixed)
    # 2. handlePodLimitRange: init containers first, then containers; limits, then requests.
    resources = _container_resources(adjusted)
    if defaults.container_default or defaults.container_default_request:
        for res in resources:
            _keep_first(res, "limits", defaults.container_default)
            _keep_first(res, "requests", defaults.container_default_request)
    # 3. handleLimitsToRequests (UseLimitsAsMissingRequestsInPod)
    for res in resources:
        _keep_first(res, "requests", _mapping(res.get("limits")))
    return adjusted


def kueue_pod_requests(spec: Mapping[str, Any], defaults: NamespaceDefaults = _NO_DEFAULTS) -> Requests:
    """What Kueue charges for one pod of ``spec``: ``AdjustResources``, then ``PodRequests``."""
    return pod_requests(adjust_resources(spec, defaults))


# --- the governed resources -------------------------------------------------------------------------


def _integer(quantity: Decimal | None, scale: int = 1) -> int:
    """``Quantity.Value()`` (scale 1) or ``MilliValue()`` (scale 1000): rounded up, away from zero."""
    if quantity is None:
        return 0
    return int(_EXACT.multiply(quantity, Decimal(scale)).to_integral_value(rounding=ROUND_UP))


def governed(requests: Mapping[str, Decimal]) -> Resources:
    """The four governed resources of a pod's ``requests`` as Kueue counts them
    (``pkg/resources/requests.go`` ``ResourceValue``): GPUs, EFAs, CPU millicores, memory bytes."""
    return Resources(
        gpu=_integer(requests.get(GPU)),
        efa=_integer(requests.get(EFA)),
        cpu_m=_integer(requests.get(CPU), 1000),
        memory=_integer(requests.get(MEMORY)),
    )


def defaults_record(
    limit_ranges: Iterable[Mapping[str, Any]], runtime_classes: Iterable[Mapping[str, Any]]
) -> dict[str, Any]:
    """What the reconcile pass keeps in the snapshot of the cluster's LimitRanges (every namespace's,
    summarized as Kueue does) and RuntimeClasses (their ``overhead.podFixed``), for the API's charges
    (:func:`namespace_defaults`)."""
    by_namespace: dict[str, list[Mapping[str, Any]]] = {}
    for lr in limit_ranges:
        if isinstance(lr, Mapping):
            ns = str(_mapping(lr.get("metadata")).get("namespace", ""))
            by_namespace.setdefault(ns, []).append(lr)
    namespaces = {}
    for ns, ranges in sorted(by_namespace.items()):
        summary = summarize_limit_ranges(ranges)
        namespaces[ns] = {
            "default": dict(summary.container_default),
            "defaultRequest": dict(summary.container_default_request),
        }
    overhead = {}
    for rc in runtime_classes:
        if isinstance(rc, Mapping):
            name = str(_mapping(rc.get("metadata")).get("name", ""))
            fixed = _mapping(_mapping(rc.get("overhead")).get("podFixed"))
            if name and fixed:
                overhead[name] = dict(fixed)
    return {"namespaces": namespaces, "runtime_classes": overhead}


def namespace_defaults(record: Mapping[str, Any], namespace: str) -> NamespaceDefaults:
    """The :class:`NamespaceDefaults` of ``namespace`` from a :func:`defaults_record`."""
    mine = _mapping(_mapping(record.get("namespaces")).get(namespace))
    return NamespaceDefaults(
        container_default=_mapping(mine.get("default")),
        container_default_request=_mapping(mine.get("defaultRequest")),
        runtime_overhead={k: _mapping(v) for k, v in _mapping(record.get("runtime_classes")).items()},
    )
