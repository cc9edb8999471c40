"""topogov.domain.podrequests against upstream's own table cases, translated from Go.

Sources (read from the Go module cache and the Kueue mirror; no Go is run here):

* ``k8s.io/component-helpers`` v0.35.4 ``resource/helpers_test.go`` (identical in v0.35.3, which Kueue
  v0.17.0 pins);
* Kueue v0.17.0 ``pkg/workload/resources_test.go`` and ``pkg/util/limitrange/limitrange_test.go``.

Each case keeps upstream's test function and case name in its id. A case is translated when upstream
runs it with ``PodResourcesOptions{}`` (explicit zero values such as ``UseStatusResources: false``
included), the only options Kueue passes; the rest are skipped, and each test's docstring says which.
"""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

import pytest

from topogov.domain.podrequests import (
    NamespaceDefaults,
    adjust_resources,
    aggregate_container_requests,
    governed,
    is_supported_pod_level_resource,
    kueue_pod_requests,
    pod_requests,
    resource_list,
    summarize_limit_ranges,
)
from topogov.domain.quantity import Resources, parse_quantity

GPU = "nvidia.com/gpu"
EFA = "vpc.amazonaws.com/efa"


def rl(**quantities: str) -> dict[str, Decimal]:
    """A parsed ResourceList (``resource.MustParse`` for each value); ``hugepages_2Mi`` is
    ``hugepages-2Mi``."""
    return {name.replace("_", "-"): parse_quantity(value) for name, value in quantities.items()}


def container(
    requests: dict[str, Any] | None = None,
    limits: dict[str, Any] | None = None,
    *,
    sidecar: bool = False,
    name: str | None = None,
) -> dict[str, Any]:
    """A v1.Container as JSON; ``sidecar`` sets ``restartPolicy: Always``."""
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    out: dict[str, Any] = {"resources": resources}
    if name is not None:
        out["name"] = name
    if sidecar:
        out["restartPolicy"] = "Always"
    return out


def pod_spec(
    containers: list[dict[str, Any]] | None = None,
    init: list[dict[str, Any]] | None = None,
    *,
    overhead: dict[str, Any] | None = None,
    resources: dict[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers or []}
    if init is not None:
        spec["initContainers"] = init
    if overhead is not None:
        spec["overhead"] = overhead
    if resources is not None:
        spec["resources"] = resources
    return spec


def get_pod(
    cpu_request: str = "",
    cpu_limit: str = "",
    memory_request: str = "",
    memory_limit: str = "",
    cpu_overhead: str = "",
    memory_overhead: str = "",
) -> dict[str, Any]:
    """helpers_test.go ``getPod``: one container and one init container with the same resources."""

    def pick(**values: str) -> dict[str, str]:
        return {name: value for name, value in values.items() if value}

    requests = pick(cpu=cpu_request, memory=memory_request)
    limits = pick(cpu=cpu_limit, memory=memory_limit)
    return pod_spec(
        [container(requests, limits, name="foo")],
        [container(dict(requests), dict(limits), name="init-foo")],
        overhead=pick(cpu=cpu_overhead, memory=memory_overhead),
    )


# --- component-helpers resource/helpers_test.go ----------------------------------------------------

POD_REQUESTS_AND_LIMITS = [
    pytest.param(get_pod(cpu_limit="9"), {}, id="just-limit-no-overhead"),
    pytest.param(get_pod(cpu_overhead="5", memory_overhead="5"), rl(cpu="5", memory="5"), id="just-overhead"),
    pytest.param(
        get_pod(cpu_request="1", memory_request="10", cpu_overhead="5", memory_overhead="5"),
        rl(cpu="6", memory="15"),
        id="req-and-overhead",
    ),
    pytest.param(
        get_pod(
            cpu_request="1",
            cpu_limit="2",
            memory_request="10",
            memory_limit="12",
            cpu_overhead="5",
            memory_overhead="5",
        ),
        rl(cpu="6", memory="15"),
        id="all-req-lim-and-overhead",
    ),
    pytest.param(
        get_pod(cpu_request="1", cpu_limit="2", memory_request="10", cpu_overhead="5", memory_overhead="5"),
        rl(cpu="6", memory="15"),
        id="req-some-lim-and-overhead",
    ),
]


@pytest.mark.parametrize(("spec", "expected"), POD_REQUESTS_AND_LIMITS)
def test_pod_requests_and_limits(spec: dict[str, Any], expected: dict[str, Decimal]) -> None:
    """helpers_test.go ``TestPodRequestsAndLimits``: all 5 cases, ``expectedRequests`` only (the
    ``expectedLimits`` check ``PodLimits``, which is not ported).

    Skipped: ``TestPodRequestsAndLimitsWithoutOverhead`` (3 cases), all run with
    ``ExcludeOverhead: true``, an option Kueue does not pass."""
    assert pod_requests(spec) == expected


def _cpu(value: str, **kw: Any) -> dict[str, Any]:
    return container({"cpu": value}, **kw)


POD_RESOURCE_REQUESTS = [
    pytest.param(pod_spec([_cpu("1")], [_cpu("4")]), rl(cpu="4"), id="nil options, larger init container"),
    pytest.param(
        pod_spec([_cpu("2"), _cpu("3")], [_cpu("2")]), rl(cpu="5"), id="nil options, larger containers"
    ),
    pytest.param(
        pod_spec(
            [_cpu("2"), _cpu("3")],
            [container({"cpu": "2"}, {"cpu": "2"})],
            overhead={"cpu": "1", "memory": "1Gi"},
        ),
        rl(cpu="6", memory="1Gi"),
        id="pod overhead included",
    ),
    # Upstream sets a container status and a PodResizePending condition; with UseStatusResources
    # false (what Kueue passes) PodRequests reads neither, so the spec alone is the translation.
    pytest.param(
        pod_spec([_cpu("4", name="container-1")]), rl(cpu="4"), id="resized, infeasible, but don't use status"
    ),
    pytest.param(
        pod_spec([], [_cpu("4", name="restartable-init-1", sidecar=True)]),
        rl(cpu="4"),
        id="resized, restartable init container, infeasible, but don't use status",
    ),
    pytest.param(
        pod_spec([_cpu("1", name="container-1")], [_cpu("1", name="restartable-init-1", sidecar=True)]),
        rl(cpu="2"),
        id="restartable init container",
    ),
    pytest.param(
        pod_spec(
            [_cpu("1", name="container-1")],
            [
                _cpu("5", name="init-1"),
                _cpu("1", name="restartable-init-1", sidecar=True),
                _cpu("2", name="restartable-init-2", sidecar=True),
                _cpu("3", name="restartable-init-3", sidecar=True),
            ],
        ),
        rl(cpu="7"),
        id="multiple restartable init containers",
    ),
    pytest.param(
        pod_spec(
            [_cpu("1", name="container-1")],
            [
                _cpu("5", name="init-1"),
                _cpu("1", name="restartable-init-1", sidecar=True),
                _cpu("2", name="restartable-init-2", sidecar=True),
                _cpu("5", name="init-2"),
                _cpu("3", name="restartable-init-3", sidecar=True),
            ],
        ),
        rl(cpu="8"),
        id="multiple restartable and regular init containers",
    ),
    pytest.param(
        pod_spec(
            [_cpu("100", name="container-1")],
            [_cpu("10", name="restartable-init-1", sidecar=True), _cpu("200", name="init-1")],
        ),
        rl(cpu="210"),
        id="restartable-init, init and regular",
    ),
]


@pytest.mark.parametrize(("spec", "expected"), POD_RESOURCE_REQUESTS)
def test_pod_resource_requests(spec: dict[str, Any], expected: dict[str, Decimal]) -> None:
    """helpers_test.go ``TestPodResourceRequests``: 9 of its 16 cases.

    Skipped (7), for options Kueue does not pass: ``pod overhead excluded`` (``ExcludeOverhead``);
    ``resized, infeasible``, ``resized, infeasible & in-progress``, ``resized, no resize status``,
    ``resized: per-resource 3-way maximum``, ``resized, restartable init container, infeasible`` and
    ``resized, restartable init container, no resize status`` (``UseStatusResources: true``, in-place
    resize of running pods). Also skipped: ``TestPodResourceRequestsReuse`` (the ``Reuse`` option, a Go
    map-reuse detail)."""
    assert pod_requests(spec) == expected


def _res(**quantities: str) -> dict[str, str]:
    return {name.replace("_", "-"): value for name, value in quantities.items()}


POD_LEVEL_RESOURCE_REQUESTS = [
    pytest.param({}, [], [], {}, id="nil"),
    pytest.param(
        {"requests": _res(memory="2Mi")},
        [],
        [],
        rl(memory="2Mi"),
        id="pod level memory resource with SkipPodLevelResources false",
    ),
    pytest.param(
        {"requests": _res(memory="2Mi")},
        [container(_res(cpu="2m"))],
        [],
        rl(memory="2Mi", cpu="2m"),
        id="pod level memory and container level cpu resources with SkipPodLevelResources false",
    ),
    pytest.param(
        {"requests": _res(storage="2Mi")},
        [container(_res(storage="3Mi"))],
        [],
        rl(storage="3Mi"),
        id="pod level unsupported resources set at both pod-level and container-level with "
        "SkipPodLevelResources false",
    ),
    pytest.param(
        {"requests": _res(storage="2Mi")},
        [container(_res(memory="3Mi"))],
        [],
        rl(memory="3Mi"),
        id="pod level unsupported resources set at pod-level with SkipPodLevelResources false",
    ),
    pytest.param(
        {},
        [container(_res(memory="3Mi", cpu="2m"))],
        [],
        rl(memory="3Mi", cpu="2m"),
        id="only container level resources set with SkipPodLevelResources false",
    ),
    pytest.param(
        {"requests": _res(memory="6Mi", cpu="8m")},
        [container(_res(memory="3Mi", cpu="2m"))],
        [],
        rl(memory="6Mi", cpu="8m"),
        id="both container-level and pod-level resources set with SkipPodLevelResources false",
    ),
    pytest.param(
        {},
        [container(_res(memory="3Mi", cpu="2m"))],
        [container(_res(memory="5Mi", cpu="4m"))],
        rl(memory="5Mi", cpu="4m"),
        id="container-level resources and init container set with SkipPodLevelResources false",
    ),
    pytest.param(
        {},
        [container(_res(memory="3Mi", cpu="2m"))],
        [container(_res(memory="5Mi", cpu="4m"), sidecar=True)],
        rl(memory="8Mi", cpu="6m"),
        id="container-level resources and sidecar container set with SkipPodLevelResources false",
    ),
    pytest.param(
        {},
        [container(_res(memory="3Mi", cpu="2m"))],
        [container(_res(memory="5Mi", cpu="4m"), sidecar=True), container(_res(memory="6Mi", cpu="8m"))],
        rl(memory="11Mi", cpu="12m"),
        id="container-level resources, init and sidecar container set with SkipPodLevelResources false",
    ),
    pytest.param(
        {"requests": _res(memory="15Mi", cpu="18m")},
        [container(_res(memory="3Mi", cpu="2m"))],
        [container(_res(memory="5Mi", cpu="4m"), sidecar=True), container(_res(memory="6Mi", cpu="8m"))],
        rl(memory="15Mi", cpu="18m"),
        id="pod-level resources, container-level resources, init and sidecar container set with "
        "SkipPodLevelResources false",
    ),
    pytest.param(
        {"limits": _res(hugepages_2Mi="2Mi"), "requests": _res(memory="10Mi", hugepages_2Mi="2Mi")},
        [],
        [],
        rl(memory="10Mi", hugepages_2Mi="2Mi"),
        id="pod-level resources, hugepage request/limit single page size",
    ),
    pytest.param(
        {
            "limits": _res(hugepages_2Mi="2Mi", hugepages_1Gi="1Gi"),
            "requests": _res(cpu="1", hugepages_2Mi="2Mi", hugepages_1Gi="1Gi"),
        },
        [],
        [],
        rl(cpu="1", hugepages_2Mi="2Mi", hugepages_1Gi="1Gi"),
        id="pod-level resources, hugepage request/limit multiple page sizes",
    ),
    pytest.param(
        {"limits": _res(hugepages_2Mi="10Mi"), "requests": _res(cpu="1", hugepages_2Mi="10Mi")},
        [container(_res(hugepages_2Mi="6Mi"), _res(hugepages_2Mi="6Mi"))],
        [],
        rl(cpu="1", hugepages_2Mi="10Mi"),
        id="pod-level resources, container-level resources, hugepage request/limit single page size",
    ),
    pytest.param(
        {
            "limits": _res(hugepages_2Mi="10Mi", hugepages_1Gi="2Gi"),
            "requests": _res(cpu="1", hugepages_2Mi="10Mi", hugepages_1Gi="2Gi"),
        },
        [container(_res(cpu="1", hugepages_1Gi="2Gi"), _res(hugepages_1Gi="2Gi"))],
        [],
        rl(cpu="1", hugepages_2Mi="10Mi", hugepages_1Gi="2Gi"),
        id="pod-level resources, container-level resources, hugepage request/limit multiple page sizes",
    ),
    pytest.param(
        {"limits": _res(hugepages_2Mi="10Mi"), "requests": _res(cpu="1", hugepages_2Mi="10Mi")},
        [container(_res(memory="4Mi", hugepages_1Gi="1Gi"), _res(hugepages_1Gi="1Gi"))],
        [],
        rl(cpu="1", memory="4Mi", hugepages_2Mi="10Mi", hugepages_1Gi="1Gi"),
        id="pod-level resources, container-level resources, hugepage request/limit multiple page sizes "
        "between pod-level and container-level",
    ),
]


@pytest.mark.parametrize(("resources", "containers", "init", "expected"), POD_LEVEL_RESOURCE_REQUESTS)
def test_pod_level_resource_requests(
    resources: dict[str, Any],
    containers: list[dict[str, Any]],
    init: list[dict[str, Any]],
    expected: dict[str, Decimal],
) -> None:
    """helpers_test.go ``TestPodLevelResourceRequests`` (pods built as ``getPodLevelResourcesPod``,
    with a non-nil ``spec.resources``): 16 of its 18 cases.

    Skipped (2), run with ``SkipPodLevelResources: true``: ``pod level memory resource with
    SkipPodLevelResources true`` and the second case named ``container-level resources and init
    container set with SkipPodLevelResources false`` (whose options say true; with no pod-level
    resources its expectation equals the first one's, translated here)."""
    assert pod_requests(pod_spec(containers, init, resources=resources)) == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param("cpu", True, id="cpu"),
        pytest.param("memory", True, id="memory"),
        pytest.param("ephemeral-storage", False, id="ephemeral-storage"),
        pytest.param("hugepages-2Mi", True, id="hugepages-2Mi"),
        pytest.param("hugepages-1Gi", True, id="hugepages-1Gi"),
    ],
)
def test_is_supported_pod_level_resource(name: str, expected: bool) -> None:
    """helpers_test.go ``TestIsSupportedPodLevelResource``: all 5 cases.

    Skipped: ``TestIsPodLevelResourcesSet`` (6) and ``TestIsPodLevelLimitsSet`` (5), predicates
    ``PodLimits`` uses (``PodRequests`` uses ``IsPodLevelRequestsSet``, exercised through the
    ``pod level unsupported resources`` cases above); ``TestPodResourceLimits``: limits only."""
    assert is_supported_pod_level_resource(name) is expected
    # And as PodRequests uses it: a supported pod-level request replaces the containers' figure.
    spec = pod_spec([container({name: "1"})], resources={"requests": {"cpu": "1", name: "2"}})
    assert pod_requests(spec)[name] == (2 if expected else 1)


AGGREGATE_CONTAINER_REQUESTS = [
    pytest.param([container(limits={"cpu": "9"})], [], {}, id="one container with limits"),
    pytest.param(
        [container(limits={"cpu": "9"}), container(limits={"cpu": "9"})],
        [],
        {},
        id="two containers with limits",
    ),
    pytest.param([_cpu("9")], [], rl(cpu="9"), id="one container with requests"),
    pytest.param([_cpu("9"), _cpu("9")], [], rl(cpu="18"), id="two containers with requests"),
    pytest.param([_cpu("9")], [_cpu("9")], rl(cpu="9"), id="regular and init containers with requests"),
    pytest.param(
        [_cpu("9")],
        [_cpu("8", sidecar=True), _cpu("6")],
        rl(cpu="17"),
        id="regular, init and sidecar containers with requests",
    ),
    pytest.param(
        [container(limits={"cpu": "9"})],
        [container(limits={"cpu": "9"})],
        {},
        id="regular and init containers with limits",
    ),
    pytest.param(
        [container(limits={"cpu": "9"})],
        [container(limits={"cpu": "8"}, sidecar=True), container(limits={"cpu": "6"})],
        {},
        id="regular, init and sidecar containers with limits",
    ),
]


@pytest.mark.parametrize(("containers", "init", "expected"), AGGREGATE_CONTAINER_REQUESTS)
def test_aggregate_container_requests(
    containers: list[dict[str, Any]], init: list[dict[str, Any]], expected: dict[str, Decimal]
) -> None:
    """helpers_test.go ``TestAggregateContainerRequestsAndLimits``: 8 of its 10 cases,
    ``expectedRequests`` only. Without ``spec.resources`` or ``overhead``, ``PodRequests`` is
    ``AggregateContainerRequests``, so both are checked.

    Skipped (2), run with ``UseStatusResources: true``: ``regularcontainers with empty requests, but
    status with non-empty requests`` and ``always-restart init containers with empty requests, but
    status with non-empty requests``."""
    spec = pod_spec(containers, init)
    assert aggregate_container_requests(spec) == expected
    assert pod_requests(spec) == expected


# --- Kueue pkg/workload/resources_test.go TestAdjustResources -------------------------------------


def podset(
    *,
    requests: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
    init: list[dict[str, Any]] | None = None,
    runtime_class: str | None = None,
    overhead: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Kueue ``utiltestingapi.MakePodSet(name, 1)``'s template spec: one container ``c`` with an empty
    requests map; ``.Request``/``.Limit`` set its values."""
    resources: dict[str, Any] = {"requests": dict(requests or {})}
    if limits:
        resources["limits"] = dict(limits)
    spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [{"name": "c", "resources": resources}]}
    if init is not None:
        spec["initContainers"] = init
    if runtime_class is not None:
        spec["runtimeClassName"] = runtime_class
    if overhead is not None:
        spec["overhead"] = overhead
    return spec


def canonical(spec: dict[str, Any]) -> dict[str, Any]:
    """What AdjustResources can change, parsed, an empty map the same as none (as ``cmp.Diff`` of
    Quantities compares values)."""

    def requirements(containers: Any) -> list[tuple[dict[str, Decimal], dict[str, Decimal]]]:
        return [
            (
                resource_list(c.get("resources", {}).get("requests")),
                resource_list(c.get("resources", {}).get("limits")),
            )
            for c in containers or []
        ]

    return {
        "runtimeClassName": spec.get("runtimeClassName"),
        "overhead": resource_list(spec.get("overhead")),
        "initContainers": requirements(spec.get("initContainers")),
        "containers": requirements(spec.get("containers")),
    }


# resources.ResourceQuantity(cpu, n) is n millicores; (memory, n) is n bytes.
OVERHEAD_1 = {"cpu": "1m", "memory": "1024"}
OVERHEAD_2 = {"cpu": "2m", "memory": "2048"}

INIT_4_3 = container({"cpu": "4"}, {"cpu": "4"})  # Limits cpu NewQuantity(4), Requests cpu NewQuantity(3)
INIT_4_3["resources"]["requests"] = {"cpu": "3"}


def limit_range(limit_type: str, **values: dict[str, str]) -> dict[str, Any]:
    """Kueue ``testingutil.MakeLimitRange(...).WithType(t).WithValue(...)``: one item, every list
    present and empty unless given."""
    item: dict[str, Any] = {"type": limit_type, "max": {}, "min": {}, "default": {}, "defaultRequest": {}}
    item |= {"maxLimitRequestRatio": {}} | values
    return {"spec": {"limits": [item]}}


LR_VALUES = {
    "default": {"cpu": "4"},
    "defaultRequest": {"cpu": "3"},
    "max": {"cpu": "5"},
    "min": {"cpu": "2"},
}
CONTAINER_LIMIT_RANGE = limit_range("Container", **LR_VALUES)
POD_LIMIT_RANGE = limit_range("Pod", **LR_VALUES)
EMPTY_CONTAINER_LIMIT_RANGE = limit_range("Container")


WITH_OVERHEAD = {"runtime-a": OVERHEAD_1}  # MakeRuntimeClass("runtime-a", ...).PodOverhead(...)
WITHOUT_OVERHEAD: dict[str, dict[str, Any]] = {"runtime-a": {}}  # a RuntimeClass with no overhead
RC_WITH = "Handle runtimeClass with podOverHead"
RC_WITHOUT = "Handle runtimeClass without podOverHead"
LR_CONTAINER = "Handle container limit range"
LR_POD = "Handle pod limit range"
LR_EMPTY = "Handle empty container limit range"
LIMITS = "Apply limits to requests"


def adjust_case(
    case: str,
    pod_set: str,
    spec: dict[str, Any],
    want: dict[str, Any],
    *,
    ranges: tuple[dict[str, Any], ...] = (),
    runtime: dict[str, dict[str, Any]] | None = None,
) -> Any:
    return pytest.param(list(ranges), runtime or {}, spec, want, id=f"{case}/podset {pod_set}")


ADJUST_RESOURCES = [
    adjust_case(
        RC_WITH,
        "a",
        podset(runtime_class="runtime-a"),
        podset(runtime_class="runtime-a", overhead=OVERHEAD_1),
        runtime=WITH_OVERHEAD,
    ),
    adjust_case(RC_WITH, "b", podset(), podset(), runtime=WITH_OVERHEAD),
    adjust_case(
        RC_WITH,
        "c",
        podset(runtime_class="runtime-a", overhead=OVERHEAD_2),
        podset(runtime_class="runtime-a", overhead=OVERHEAD_2),
        runtime=WITH_OVERHEAD,
    ),
    adjust_case(
        RC_WITH,
        "d",
        podset(runtime_class="runtime-d"),
        podset(runtime_class="runtime-d"),
        runtime=WITH_OVERHEAD,
    ),
    adjust_case(
        RC_WITH,
        "e",
        podset(runtime_class="runtime-e", overhead=OVERHEAD_2),
        podset(runtime_class="runtime-e", overhead=OVERHEAD_2),
        runtime=WITH_OVERHEAD,
    ),
    adjust_case(
        RC_WITHOUT,
        "a",
        podset(runtime_class="runtime-a"),
        podset(runtime_class="runtime-a"),
        runtime=WITHOUT_OVERHEAD,
    ),
    adjust_case(RC_WITHOUT, "b", podset(), podset(), runtime=WITHOUT_OVERHEAD),
    adjust_case(
        RC_WITHOUT,
        "c",
        podset(runtime_class="runtime-a", overhead=OVERHEAD_1),
        podset(runtime_class="runtime-a", overhead=OVERHEAD_1),
        runtime=WITHOUT_OVERHEAD,
    ),
    adjust_case(
        RC_WITHOUT,
        "d",
        podset(runtime_class="runtime-d"),
        podset(runtime_class="runtime-d"),
        runtime=WITHOUT_OVERHEAD,
    ),
    adjust_case(
        RC_WITHOUT,
        "e",
        podset(runtime_class="runtime-e", overhead=OVERHEAD_1),
        podset(runtime_class="runtime-e", overhead=OVERHEAD_1),
        runtime=WITHOUT_OVERHEAD,
    ),
    adjust_case(
        LR_CONTAINER,
        "a",
        podset(init=[{}]),
        podset(limits={"cpu": "4"}, requests={"cpu": "3"}, init=[INIT_4_3]),
        ranges=(CONTAINER_LIMIT_RANGE,),
    ),
    adjust_case(
        LR_CONTAINER,
        "b",
        podset(init=[{}], limits={"cpu": "6"}),
        podset(limits={"cpu": "6"}, requests={"cpu": "3"}, init=[INIT_4_3]),
        ranges=(CONTAINER_LIMIT_RANGE,),
    ),
    adjust_case(
        LR_CONTAINER,
        "c",
        podset(init=[{}], requests={"cpu": "1"}),
        podset(limits={"cpu": "4"}, requests={"cpu": "1"}, init=[INIT_4_3]),
        ranges=(CONTAINER_LIMIT_RANGE,),
    ),
    adjust_case(LR_POD, "a", podset(), podset(), ranges=(POD_LIMIT_RANGE,)),
    adjust_case(
        LR_POD,
        "b",
        podset(limits={"cpu": "6"}, requests={"cpu": "1"}),
        podset(limits={"cpu": "6"}, requests={"cpu": "1"}),
        ranges=(POD_LIMIT_RANGE,),
    ),
    adjust_case(LR_EMPTY, "a", podset(), podset(), ranges=(EMPTY_CONTAINER_LIMIT_RANGE,)),
    adjust_case(
        LR_EMPTY,
        "b",
        podset(limits={"cpu": "6"}, requests={"cpu": "1"}),
        podset(limits={"cpu": "6"}, requests={"cpu": "1"}),
        ranges=(EMPTY_CONTAINER_LIMIT_RANGE,),
    ),
    adjust_case(
        LIMITS,
        "a",
        podset(limits={"cpu": "1", "memory": "1Gi"}, init=[container(None, {"cpu": "1", "memory": "1"})]),
        podset(
            limits={"cpu": "1", "memory": "1Gi"},
            requests={"cpu": "1", "memory": "1Gi"},
            init=[container({"cpu": "1", "memory": "1"}, {"cpu": "1", "memory": "1"})],
        ),
    ),
    adjust_case(
        LIMITS,
        "b",
        podset(
            requests={"cpu": "2"},
            limits={"cpu": "3", "memory": "1Gi"},
            init=[container({"cpu": "2"}, {"cpu": "3", "memory": "1"})],
        ),
        podset(
            limits={"cpu": "3", "memory": "1Gi"},
            requests={"cpu": "2", "memory": "1Gi"},
            init=[container({"cpu": "2", "memory": "1"}, {"cpu": "3", "memory": "1"})],
        ),
    ),
    adjust_case(
        LIMITS,
        "c",
        podset(
            requests={"memory": "1Gi"},
            limits={"cpu": "1", "memory": "3Gi"},
            init=[container({"memory": "1"}, {"cpu": "1", "memory": "3"})],
        ),
        podset(
            limits={"cpu": "1", "memory": "3Gi"},
            requests={"cpu": "1", "memory": "1Gi"},
            init=[container({"cpu": "1", "memory": "1"}, {"cpu": "1", "memory": "3"})],
        ),
    ),
    adjust_case(
        LIMITS,
        "d",
        podset(limits={"cpu": "1"}, init=[container(None, {"cpu": "1"})]),
        podset(limits={"cpu": "1"}, requests={"cpu": "1"}, init=[container({"cpu": "1"}, {"cpu": "1"})]),
    ),
    adjust_case(
        LIMITS,
        "e",
        podset(requests={"memory": "1Gi"}, init=[container({"memory": "1"})]),
        podset(requests={"memory": "1Gi"}, init=[container({"memory": "1"})]),
    ),
]


@pytest.mark.parametrize(("limit_ranges", "runtime_classes", "spec", "want"), ADJUST_RESOURCES)
def test_adjust_resources(
    limit_ranges: list[dict[str, Any]],
    runtime_classes: dict[str, dict[str, Any]],
    spec: dict[str, Any],
    want: dict[str, Any],
) -> None:
    """Kueue v0.17.0 pkg/workload/resources_test.go ``TestAdjustResources``: all 6 cases, one
    parameter per pod set (22). RuntimeClasses become the name -> ``overhead.podFixed`` map
    (``Handle runtimeClass without podOverHead``: a class with no overhead); the fake client's
    ``LimitRangeHasContainerType`` index is what :func:`summarize_limit_ranges` reads (type Container).
    Upstream compares the adjusted Workload; here the adjusted spec, and what Kueue then charges."""
    original = copy.deepcopy(spec)
    defaults = summarize_limit_ranges(limit_ranges, runtime_overhead=runtime_classes)
    adjusted = adjust_resources(spec, defaults)
    assert canonical(adjusted) == canonical(want)
    assert kueue_pod_requests(spec, defaults) == pod_requests(want)
    assert spec == original  # never mutated


# --- Kueue pkg/util/limitrange/limitrange_test.go TestSummarize ----------------------------------


POD_DEFAULTS = [  # the two ranges of case podDefaults, by WithValue member
    {"default": {"cpu": "2"}, "defaultRequest": {"cpu": "500m", "memory": "1Gi"}},
    {"default": {"memory": "2Gi"}, "defaultRequest": {"cpu": "1"}},
]


@pytest.mark.parametrize(
    ("ranges", "default", "default_request"),
    [
        pytest.param([], {}, {}, id="empty"),
        pytest.param([limit_range("Pod", **v) for v in POD_DEFAULTS], {}, {}, id="podDefaults"),
        pytest.param(
            [limit_range("Container", **v) for v in POD_DEFAULTS],
            rl(cpu="2", memory="2Gi"),
            rl(cpu="500m", memory="1Gi"),
            id="podDefaults, as type Container",
        ),
    ],
)
def test_summarize(
    ranges: list[dict[str, Any]], default: dict[str, Decimal], default_request: dict[str, Decimal]
) -> None:
    """limitrange_test.go ``TestSummarize``, as ``handlePodLimitRange`` reads it (the Container item's
    ``Default`` and ``DefaultRequest``): ``empty``; ``podDefaults``, whose ranges are of type Pod, so
    the Container summary stays empty (as in resources_test.go ``Handle pod limit range``); and the
    same ranges as type Container (an adaptation), which give upstream's expected ``Default`` and
    ``DefaultRequest``: the first value met wins per resource.

    Skipped: case ``limits`` (``Max``, ``Min``, ``MaxLimitRequestRatio`` only, which AdjustResources
    does not read)."""
    summary = summarize_limit_ranges(ranges)
    assert resource_list(summary.container_default) == default
    assert resource_list(summary.container_default_request) == default_request
    assert summary.runtime_overhead == {}


# --- the bug report, and Topogov's own edges -------------------------------------------------------


def test_sidecars_are_charged_beside_the_containers() -> None:
    """A 4-GPU container and two 4-GPU sidecars run together: 12 GPUs (the old rule said 4)."""
    spec = pod_spec(
        [container({GPU: "4"})], [container({GPU: "4"}, sidecar=True), container({GPU: "4"}, sidecar=True)]
    )
    assert pod_requests(spec) == {GPU: Decimal(12)}
    assert governed(kueue_pod_requests(spec)) == Resources(gpu=12)


def test_a_regular_init_container_is_charged_its_peak() -> None:
    """An 8-GPU init container before a 4-GPU container: 8 (they never run together)."""
    spec = pod_spec([container({GPU: "4"})], [container({GPU: "8"})])
    assert governed(pod_requests(spec)) == Resources(gpu=8)


def test_pod_level_cpu_replaces_the_containers_sum_but_not_gpus() -> None:
    """Pod-level ``resources.requests.cpu`` replaces the containers' sum; a pod-level GPU is not a
    supported pod-level resource, so the containers' GPUs stand."""
    spec = pod_spec(
        [container({"cpu": "2", GPU: "4"}), container({"cpu": "3"})],
        resources={"requests": {"cpu": "8", GPU: "1"}},
    )
    assert governed(pod_requests(spec)) == Resources(gpu=4, cpu_m=8000)


def test_overhead_adds() -> None:
    spec = pod_spec([container({"cpu": "1", "memory": "1Gi"})], overhead={"cpu": "250m", "memory": "120Mi"})
    assert governed(pod_requests(spec)) == Resources(cpu_m=1250, memory=(1024 + 120) * 2**20)


def test_runtime_class_overhead_adds_when_overhead_is_empty() -> None:
    spec = pod_spec([container({"cpu": "1"})]) | {"runtimeClassName": "kata", "overhead": {}}
    defaults = NamespaceDefaults(runtime_overhead={"kata": {"cpu": "250m"}})
    assert governed(kueue_pod_requests(spec, defaults)) == Resources(cpu_m=1250)
    assert governed(pod_requests(spec)) == Resources(cpu_m=1000)  # PodRequests alone does not look


def test_limit_range_default_request_wins_over_the_container_limit() -> None:
    """Kueue's order: LimitRange defaults first, limits as missing requests after. A container with
    only a 6-CPU limit under a LimitRange whose defaultRequest is 3 is charged 3."""
    spec = pod_spec([container(None, {"cpu": "6", GPU: "2"})])
    defaults = NamespaceDefaults(container_default={"cpu": "4"}, container_default_request={"cpu": "3"})
    assert governed(kueue_pod_requests(spec, defaults)) == Resources(gpu=2, cpu_m=3000)
    assert governed(kueue_pod_requests(spec)) == Resources(gpu=2, cpu_m=6000)
    assert pod_requests(spec) == {}  # PodRequests reads requests only


def test_explicit_zero_request_is_kept() -> None:
    """MergeResourceListKeepFirst keeps a value that is set, even zero; PodRequests keeps zero keys."""
    spec = pod_spec([container({GPU: "0"}, {GPU: "1"})])
    assert kueue_pod_requests(spec) == {GPU: Decimal(0)}


@pytest.mark.parametrize(
    ("requests", "expected"),
    [
        pytest.param({"cpu": "1.0001"}, Resources(cpu_m=1001), id="MilliValue rounds up"),
        pytest.param({"cpu": "100u"}, Resources(cpu_m=1), id="MilliValue rounds 100u up to 1m"),
        pytest.param({"memory": "1.5"}, Resources(memory=2), id="Value rounds up"),
        pytest.param({GPU: 2, EFA: "1"}, Resources(gpu=2, efa=1), id="JSON numbers"),
        pytest.param({"memory": None}, Resources(), id="null is zero"),
    ],
)
def test_governed_rounding(requests: dict[str, Any], expected: Resources) -> None:
    assert governed(resource_list(requests)) == expected


def test_quantities_round_up_to_a_nano_and_binary_ones_cap_at_int64() -> None:
    """apimachinery ParseQuantity: finer than 1n rounds up to 1n; ``9Ei`` is capped at 2^63-1
    (quantity_test.go ``TestQuantityParse``)."""
    assert resource_list({"cpu": "0.0000000001", "memory": "9Ei"}) == {
        "cpu": Decimal("1e-9"),
        "memory": Decimal(2**63 - 1),
    }


def test_a_sidecar_is_only_restart_policy_always() -> None:
    spec = pod_spec([container({"cpu": "1"})], [container({"cpu": "1"}) | {"restartPolicy": "OnFailure"}])
    assert pod_requests(spec) == rl(cpu="1")


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param({"containers": "nope"}, id="containers not a list"),
        pytest.param({"containers": ["nope", {"resources": "nope"}]}, id="container and resources"),
        pytest.param({"containers": [{"resources": {"requests": ["1"]}}]}, id="requests not a map"),
        pytest.param({"containers": [{"resources": {"requests": {"cpu": ["1"]}}}]}, id="quantity a list"),
        pytest.param(
            {"initContainers": [{"resources": {"limits": "x"}}], "overhead": 3}, id="limits, overhead"
        ),
        pytest.param({"resources": "x", "runtimeClassName": 7}, id="pod resources, runtime class"),
    ],
)
def test_wrong_types_are_skipped(spec: dict[str, Any]) -> None:
    defaults = NamespaceDefaults(
        container_default={"cpu": "1"}, container_default_request={}, runtime_overhead={"7": {"cpu": "1"}}
    )
    assert pod_requests(spec) == {}
    kueue = kueue_pod_requests(spec, defaults)
    assert set(kueue) <= {"cpu"}
    assert pod_requests("not a spec") == {}  # type: ignore[arg-type]


def test_unparsable_quantity_raises() -> None:
    with pytest.raises(ValueError, match="not a quantity"):
        pod_requests(pod_spec([container({"cpu": "lots"})]))
    with pytest.raises(ValueError, match="not a quantity"):
        pod_requests(pod_spec([container({"cpu": True})]))


def test_summarize_skips_wrong_types_and_keeps_first() -> None:
    ranges: list[Any] = [
        "nope",
        {"spec": "nope"},
        {"spec": {"limits": ["nope", {"type": "Container", "default": "nope"}]}},
        limit_range("Container", default={"cpu": "1"}),
        limit_range("Container", default={"cpu": "2", GPU: "1"}, defaultRequest={"cpu": "500m"}),
    ]
    defaults = summarize_limit_ranges(ranges)
    assert defaults.container_default == {"cpu": "1", GPU: "1"}
    assert defaults.container_default_request == {"cpu": "500m"}
