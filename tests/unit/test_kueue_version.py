"""The Kueue the cluster runs (domain/kueue_version.py, adapters/kueue_api.py): the API version chosen
from discovery, the release from each source, the guard, the model profile stated (by the API's
estimates and what-ifs, and the CLI), and the views reading both encodings of a Workload's
topologyAssignment.

The discovery and Deployment answers are recorded from the local control plane (data/
kueue_recorded.json); the topologyAssignment pair is kubernetes-sigs/kueue v0.17.0's own conversion
case (``apis/kueue/v1beta1/workload_conversion_test.go``, "with TopologyAssignment")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest

from topogov.adapters.kube import Response
from topogov.adapters.kueue_api import DISCOVERY_TTL_S, KueueApi
from topogov.domain.errors import ConfigError, Unavailable
from topogov.domain.kueue_version import (
    V017_TO_V019,
    KueueVersion,
    check_writes,
    choose_api_version,
    from_addon,
    release_of_image,
)
from topogov.domain.views.workload import WorkloadView
from topogov.logic.api_service import ApiService
from topogov_cli.whatif import kueue_header, kueue_line

RECORDED = json.loads((Path(__file__).parent / "data" / "kueue_recorded.json").read_text())
DEPLOYMENT = "/apis/apps/v1/namespaces/kueue-system/deployments/kueue-controller-manager"


class Recorded:
    """Answers GETs from recorded bodies (404 for any other path); counts the calls."""

    def __init__(self, bodies: dict[str, Any]) -> None:
        self.bodies = bodies
        self.calls: list[str] = []

    def request(self, method: str, path: str, **_: Any) -> Response:
        self.calls.append(path)
        body = self.bodies.get(path)
        return Response(200, body) if body is not None else Response(404, {"kind": "Status"})


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def api(discovery: str | None, *, deployment: bool = True, **kw: Any) -> tuple[KueueApi, Recorded]:
    bodies: dict[str, Any] = {}
    if discovery:
        bodies["/apis/kueue.x-k8s.io"] = RECORDED[discovery]
    if deployment:
        bodies[DEPLOYMENT] = RECORDED["deployment"]
    http = Recorded(bodies)
    return KueueApi(http, **kw), http  # type: ignore[arg-type]


# --- the API version --------------------------------------------------------------------------------


def test_v1beta2_where_served_and_the_served_list_is_kept_for_the_ttl() -> None:
    clock = Clock()
    kueue, http = api("discovery_v0.17.0", clock=clock)
    assert kueue.served().versions == ("v1beta2", "v1beta1") and kueue.served().preferred == "v1beta2"
    assert kueue.version() == "v1beta2" and kueue.path() == "/apis/kueue.x-k8s.io/v1beta2"
    assert http.calls.count("/apis/kueue.x-k8s.io") == 1  # kept
    clock.now = DISCOVERY_TTL_S + 1
    kueue.version()
    assert http.calls.count("/apis/kueue.x-k8s.io") == 2  # asked again once it is old


def test_a_v1beta2_only_cluster_and_no_kueue() -> None:
    only, _ = api("discovery_v1beta1_unserved")
    assert only.served().versions == ("v1beta2",) and only.version() == "v1beta2"
    none, _ = api(None)
    assert none.served().versions == () and none.version() == "v1beta1"


def test_a_configured_version_must_be_served_never_silently_replaced() -> None:
    kueue, _ = api("discovery_v0.17.0", configured="v1beta1")
    assert kueue.version() == "v1beta1"  # served: the override holds
    unserved, _ = api("discovery_v1beta1_unserved", configured="v1beta1")
    with pytest.raises(
        ConfigError, match="TOPOGOV_KUEUE_API_VERSION=v1beta1 but the cluster's Kueue serves v1beta2"
    ):
        unserved.version()
    assert choose_api_version((), "v1beta2") == "v1beta2"  # discovery failed: the setting
    with pytest.raises(ConfigError):
        choose_api_version(("v1beta2",), "v1alpha1")


# --- the release --------------------------------------------------------------------------------------


def test_the_release_from_the_deployments_image_tag() -> None:
    kueue, _ = api("discovery_v0.17.0")
    found = kueue.kueue_version()
    assert found.release == (0, 17, 0) and found.profiled
    assert found.source == "the Kueue Deployment's image registry.k8s.io/kueue/kueue:v0.17.0"
    assert release_of_image("registry.k8s.io/kueue/kueue@sha256:abc") is None
    assert release_of_image("localhost:5000/kueue:v0.19.2") == (0, 19, 2)
    assert release_of_image("localhost:5000/kueue") is None


def test_the_release_from_the_task_governance_add_on_then_the_setting() -> None:
    kueue, _ = api("discovery_v0.17.0", deployment=False, kueue_version="v0.18.1")
    found = kueue.kueue_version(addon_version="v1.6.0-eksbuild.1")
    assert found.release == (0, 19, 2) and "task governance add-on v1.6.0-eksbuild.1" in found.source
    # an add-on version the cited page names no Kueue for: the setting, if any, else "older, unknown"
    older = kueue.kueue_version(addon_version="v1.5.1-eksbuild.1")
    assert older.release == (0, 18, 1) and older.source == "the setting TOPOGOV_KUEUE_VERSION"
    assert from_addon("v1.5.1-eksbuild.1").shown == "unknown"
    assert "older, unknown" in from_addon("v1.5.1-eksbuild.1").source
    bare, _ = api("discovery_v0.17.0", deployment=False)
    assert bare.kueue_version().release is None and bare.kueue_version().shown == "unknown"


# --- the guard ----------------------------------------------------------------------------------------


def test_no_v1beta2_below_v0_15_and_no_slices_below_v0_13() -> None:
    old = KueueVersion((0, 14, 2), "the setting TOPOGOV_KUEUE_VERSION")
    with pytest.raises(ConfigError, match=r"Kueue v0\.14\.2 .* has no v1beta2 API"):
        check_writes(old, "v1beta2")
    check_writes(old, "v1beta1", slices=True)
    with pytest.raises(ConfigError, match="no topology slices"):
        check_writes(KueueVersion((0, 12, 0), "x"), "v1beta1", slices=True)
    check_writes(KueueVersion(None, "unknown"), "v1beta2", slices=True)  # unknown: the API server decides


# --- the profile stated ---------------------------------------------------------------------------------


def test_the_model_profile_and_what_may_differ() -> None:
    v017 = KueueVersion((0, 17, 3), "s")
    assert v017.profile() == "Kueue v0.17.0 (the model's profile)" and v017.as_json()["mayDiffer"] == []
    v019 = KueueVersion((0, 19, 2), "s")
    assert v019.profile().startswith("Kueue v0.17.0 — no profile for Kueue v0.19.2; what may differ:")
    assert v019.as_json() == {
        "version": "v0.19.2",
        "source": "s",
        "modelProfile": "v0.17.0",
        "mayDiffer": list(V017_TO_V019),
    }
    assert any("#12052" in d for d in V017_TO_V019) and any("18 pod sets" in d for d in V017_TO_V019)


# --- both encodings of topologyAssignment --------------------------------------------------------------


def _workload(assignment: dict[str, Any]) -> WorkloadView:
    psa = {"name": "main", "count": 30, "topologyAssignment": assignment}
    return WorkloadView.from_api(
        {"status": {"admission": {"clusterQueue": "cq", "podSetAssignments": [psa]}}}
    )


V1BETA1 = {
    "levels": ["a", "b"],
    "domains": [{"values": ["a1", "b1"], "count": 10}, {"values": ["a1", "b2"], "count": 20}],
}
V1BETA2 = {
    "levels": ["a", "b"],
    "slices": [
        {
            "domainCount": 2,
            "valuesPerLevel": [{"universal": "a1"}, {"individual": {"prefix": "b", "roots": ["1", "2"]}}],
            "podCounts": {"individual": [10, 20]},
        }
    ],
}


def test_both_encodings_read_as_the_same_domains() -> None:
    old = _workload(V1BETA1).pod_set_assignments[0].topology_assignment
    new = _workload(V1BETA2).pod_set_assignments[0].topology_assignment
    assert old == new
    assert new is not None and new.domains == ((("a1", "b1"), 10), (("a1", "b2"), 20))


def test_v1beta2_universal_counts_suffixes_and_several_slices() -> None:
    ta = {
        "levels": ["rack", "host"],
        "slices": [
            {
                "domainCount": 2,
                "valuesPerLevel": [
                    {"universal": "r1"},
                    {"individual": {"roots": ["h1", "h2"], "suffix": ".x"}},
                ],
                "podCounts": {"universal": 4},
            },
            {
                "domainCount": 1,
                "valuesPerLevel": [{"universal": "r2"}, {"universal": "h9"}],
                "podCounts": {"universal": 2},
            },
        ],
    }
    got = _workload(ta).pod_set_assignments[0].topology_assignment
    assert got is not None and got.domains == (
        (("r1", "h1.x"), 4),
        (("r1", "h2.x"), 4),
        (("r2", "h9"), 2),
    )


# --- estimates and what-ifs say which release they model -------------------------------------------------


class Release:
    def __init__(self, found: KueueVersion | Exception) -> None:
        self.found = found

    def kueue_release(self) -> KueueVersion:
        if isinstance(self.found, Exception):
            raise self.found
        return self.found


def _service(kueue: Any) -> ApiService:
    return ApiService(policy=cast(Any, None), snapshots=cast(Any, None), ledger=cast(Any, None),
                      jobs=cast(Any, None), kueue=kueue)  # fmt: skip


def test_the_api_states_the_release_it_models_and_what_may_differ() -> None:
    on_v019 = _service(Release(KueueVersion((0, 19, 2), "task governance add-on v1.6.0-eksbuild.1")))
    assert on_v019.kueue_modelled() == {
        "version": "v0.19.2",
        "source": "task governance add-on v1.6.0-eksbuild.1",
        "modelProfile": "v0.17.0",
        "mayDiffer": list(V017_TO_V019),
    }
    on_v017 = _service(Release(KueueVersion((0, 17, 0), "the Kueue Deployment's image k:v0.17.0")))
    assert on_v017.kueue_modelled()["mayDiffer"] == []
    # the cluster not answering: the estimate still answers, for an unknown release
    down = _service(Release(Unavailable("reading the Deployment failed: HTTP 503")))
    assert down.kueue_modelled()["version"] == "unknown" and down.kueue_modelled()["mayDiffer"]
    assert _service(None).kueue_modelled()["version"] == "unknown"


def test_the_cli_prints_the_release_and_for_another_what_may_differ() -> None:
    line = kueue_line(KueueVersion((0, 19, 2), "s").as_json())
    assert line.startswith("the cluster's Kueue v0.19.2 (from s); no model profile for it, Kueue v0.17.0's")
    assert "TopologyPlacementFailed" in line
    assert kueue_line(KueueVersion((0, 17, 0), "s").as_json()) == (
        "the cluster's Kueue v0.17.0 (from s); model profile Kueue v0.17.0"
    )
    # as `topogov whatif` prints it: inside 100 columns, whatever the source says
    source = "the Kueue Deployment's image registry.k8s.io/kueue/kueue:v0.19.2"
    header = kueue_header(KueueVersion((0, 19, 2), source).as_json()).splitlines()
    assert max(map(len, header)) <= 100 and header[0].startswith("  the cluster's Kueue v0.19.2")
    assert " ".join(h.strip() for h in header) == kueue_line(KueueVersion((0, 19, 2), source).as_json())
