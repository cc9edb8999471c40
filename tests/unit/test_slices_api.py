"""Pod-set slices decided by the API (issue 40): asked in a request (``topology.slice``) or in a
manifest's ``podset-slice-*`` annotations, checked as Kueue v0.17.0's job webhook checks them and for
feasibility; decided by ``auto`` when a job is wider than one domain of the level below its own; and
written on every pod template of every governed kind."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from topogov.domain.errors import TopologyInfeasible, ValidationFailed
from topogov.domain.labels import (
    GROUP_ANNOTATION,
    PREFERRED_ANNOTATION,
    REQUIRED_ANNOTATION,
    SLICE_LEVEL_ANNOTATION,
    SLICE_SIZE_ANNOTATION,
    layer_label,
)
from topogov.domain.manifests import ManifestProblem, inspect_manifest
from topogov.domain.placement import CapacityIndex, slice_pods
from topogov.domain.policy import Caller, load_policy_file
from topogov.domain.quantity import Resources
from topogov.domain.submission import JobRequest, ManifestRequest, TopologySpec
from topogov.domain.tree import NodeCapacity
from topogov.logic.admission import decide
from topogov.logic.ledger_sync import fall_back

ROOT = Path(__file__).resolve().parents[2]
NS, QUEUE = "hyperpod-ns-team-a", "hyperpod-ns-team-a-localqueue"
L2, L3 = layer_label(2), layer_label(3)
P5 = Resources(gpu=8, efa=32, cpu_m=191_000, memory=2000 * 2**30)
POLICY = load_policy_file(ROOT / "teams.yaml")
TEAM_A = Caller.of("arn:aws:iam::123456789012:user/topogov-team-a")


def fleet(blocks: int = 2, racks: int = 2, per_rack: int = 4) -> CapacityIndex:
    """``blocks`` layer-2 domains of ``racks`` layer-3 domains of ``per_rack`` p5 nodes each."""
    return CapacityIndex(
        NodeCapacity(f"n{b}{r}{i}", ("A", f"B{b}", f"C{b}{r}"), "p5.48xlarge", "", P5, Resources())
        for b in range(blocks)
        for r in range(racks)
        for i in range(per_rack)
    )


def request(pods: int, topology: dict[str, Any], **kw: Any) -> JobRequest:
    body = {"job_name": "x", "image": "i", "accelerators": 8, "replica_count": pods, "topology": topology}
    return JobRequest.model_validate(body | kw)


def decided(req: JobRequest | ManifestRequest, index: CapacityIndex | None = None, **kw: Any):
    return decide(req, caller=TEAM_A, policy=POLICY, index=index or fleet(), **kw)


def annotations_of(template: dict[str, Any]) -> dict[str, str]:
    return template["metadata"]["annotations"]


# --- asked in a request ----------------------------------------------------------------------------


def test_a_requested_slice_is_decided_and_written_on_the_pod_template():
    adm = decided(
        request(8, {"mode": "required", "level": "layer-2", "slice": {"level": "layer-3", "size": 4}})
    )
    topo = adm.decision.topology
    assert (topo.mode, topo.level, topo.slice_level, topo.slice_size) == ("required", L2, L3, 4)
    assert "in slices of 4 consecutive pods" in topo.reason and "as asked" in topo.reason
    assert annotations_of(adm.manifest["spec"]["template"]) == {
        REQUIRED_ANNOTATION: L2,
        SLICE_LEVEL_ANNOTATION: L3,
        SLICE_SIZE_ANNOTATION: "4",
    }
    # where Kueue would place it now, slices and all: one layer-2 domain, 4 nodes in each of its racks
    assert topo.domain_now == "B0" and len(topo.nodes_now or []) == 8


def test_a_slice_without_a_size_gets_the_largest_that_divides_the_pods_and_fits_a_domain():
    adm = decided(request(12, {"mode": "preferred", "level": "layer-2", "slice": {"level": "layer-3"}}))
    topo = adm.decision.topology
    # 12 pods: 6 and 12 are larger than a rack (4 nodes), 4 divides 12 and fits
    assert (topo.mode, topo.slice_level, topo.slice_size) == ("preferred", L3, 4)
    assert "the largest that divides the pod count" in topo.reason


@pytest.mark.parametrize(
    ("topology", "field", "words"),
    [
        ({"level": "layer-3", "size": 3}, "topology.slice.size", "not a whole number of slices of 3"),
        ({"level": "layer-3", "size": 16}, "topology.slice.size", "not a whole number of slices of 16"),
        ({"level": "layer-1", "size": 4}, "topology.slice.level", "wider than the job's level layer-2"),
        ({"level": "layer-9", "size": 4}, "topology.slice.level", "unknown topology level"),
    ],
)
def test_a_slice_kueue_would_refuse_or_never_start_is_refused_naming_the_field(topology, field, words):
    with pytest.raises(ValidationFailed) as exc:
        decided(request(8, {"mode": "required", "level": "layer-2", "slice": topology}))
    assert exc.value.details["field"] == field and words in exc.value.message, exc.value.message


def test_a_slice_no_domain_can_hold_is_infeasible_per_slice_and_per_level():
    # a slice of 8 pods: no rack holds more than 4
    with pytest.raises(TopologyInfeasible) as exc:
        decided(
            request(8, {"mode": "required", "level": "layer-2", "slice": {"level": "layer-3", "size": 8}})
        )
    assert exc.value.details["field"] == "topology.slice.size" and "largest holds 4" in exc.value.message
    # 4 racks of 3 nodes: a layer-2 domain holds all 12 pods, but one slice of 2 per rack only (the
    # third node of a rack is left over): 4 slices, not the 6 that 12 pods need
    small = fleet(racks=4, per_rack=3)
    with pytest.raises(TopologyInfeasible) as exc:
        decided(
            request(12, {"mode": "required", "level": "layer-2", "slice": {"level": "layer-3", "size": 2}}),
            small,
        )
    assert exc.value.details["field"] == "topology.slice.size" and "no layer-2 domain" in exc.value.message


def test_a_preferred_level_no_domain_of_which_holds_every_slice_is_accepted_and_says_so():
    small = fleet(racks=4, per_rack=3)
    body = {"mode": "preferred", "level": "layer-2", "slice": {"level": "layer-3", "size": 2}}
    topo = decided(request(12, body), small).decision.topology
    assert topo.slice_size == 2 and "no layer-2 domain holds all 6 slices" in topo.reason


def test_a_slice_with_mode_none_is_refused_by_the_request_model():
    with pytest.raises(ValidationError, match="mode 'none' takes no slice"):
        TopologySpec.model_validate({"mode": "none", "slice": {"level": "layer-3", "size": 4}})
    with pytest.raises(ValidationError):
        TopologySpec.model_validate({"mode": "auto", "slice": {"level": "layer-3", "size": 0}})


# --- auto --------------------------------------------------------------------------------------------


def test_auto_slices_a_job_wider_than_a_domain_of_the_level_below():
    adm = decided(request(8, {"mode": "auto"}))
    topo = adm.decision.topology
    assert (topo.mode, topo.level, topo.slice_level, topo.slice_size) == ("preferred", L2, L3, 4)
    assert "no layer-3 domain holds all 8 pods" in topo.reason and "every 4 consecutive pods" in topo.reason
    assert annotations_of(adm.manifest["spec"]["template"]) == {
        PREFERRED_ANNOTATION: L2,
        SLICE_LEVEL_ANNOTATION: L3,
        SLICE_SIZE_ANNOTATION: "4",
    }


def test_auto_takes_the_largest_divisor_that_fits_a_domain_of_the_level_below():
    # racks of 18 nodes (an UltraServer's), a job of 24: 24 and 12 do not fit a rack... 12 does;
    # a job of 30: 15 and 10 do, 15 is the largest
    wide = fleet(racks=2, per_rack=18)
    assert decided(request(24, {"mode": "auto"}), wide).decision.topology.slice_size == 12
    assert decided(request(30, {"mode": "auto"}), wide).decision.topology.slice_size == 15


def test_auto_does_not_slice_a_job_one_domain_of_its_level_below_holds_or_that_no_slice_suits():
    # 4 pods: one rack holds them; below a rack are hosts of one pod each
    topo = decided(request(4, {"mode": "auto"})).decision.topology
    assert topo.level == L3 and topo.slice_level is None
    # 7 pods (prime): no slice of 2 or more divides them
    topo = decided(request(7, {"mode": "auto"})).decision.topology
    assert topo.level == L2 and topo.slice_level is None


def test_auto_with_an_asked_slice_places_it_inside_the_level_auto_decides():
    topo = decided(request(8, {"mode": "auto", "slice": {"level": "layer-3", "size": 2}})).decision.topology
    assert (topo.level, topo.slice_level, topo.slice_size) == (L2, L3, 2)


def test_auto_is_raised_to_an_asked_slice_level_wider_than_its_own():
    # 4 pods fit one rack: auto decides layer-3; slices asked at layer-2 raise the job's level to it
    topo = decided(request(4, {"mode": "auto", "slice": {"level": "layer-2", "size": 2}})).decision.topology
    assert (topo.level, topo.slice_level, topo.slice_size) == (L2, L2, 2)
    assert "raised to layer-2, the level of the slices asked for" in topo.reason


def test_slice_pods_counts_slices_as_kueue_does_per_domain_of_the_slice_level():
    racks = slice_pods(fleet(racks=2, per_rack=3), L2, L3, P5, now=False)
    assert racks.largest_slice_domain == 3
    assert racks.best(2) == ("B0", 2) and racks.best(3) == ("B0", 2) and racks.best(4) == ("B0", 0)


# --- manifests ---------------------------------------------------------------------------------------


def indexed_job(pods: int, annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": NS},
        "spec": {
            "parallelism": pods,
            "completions": pods,
            "completionMode": "Indexed",
            "template": {
                "metadata": {"annotations": annotations},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "main", "image": "i", "resources": {"limits": {"nvidia.com/gpu": "8"}}}
                    ],
                },
            },
        },
    }


SLICED = {REQUIRED_ANNOTATION: "layer-2", SLICE_LEVEL_ANNOTATION: "layer-3", SLICE_SIZE_ANNOTATION: "4"}
T = "manifest.spec.template.metadata.annotations"


def test_a_manifests_slice_annotations_are_accepted_and_decided():
    adm = decided(ManifestRequest(manifest=indexed_job(8, SLICED)))
    topo = adm.decision.topology
    assert (topo.mode, topo.level, topo.slice_level, topo.slice_size) == ("required", L2, L3, 4)
    assert annotations_of(adm.manifest["spec"]["template"]) == {
        REQUIRED_ANNOTATION: L2,
        SLICE_LEVEL_ANNOTATION: L3,
        SLICE_SIZE_ANNOTATION: "4",
    }


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({SLICE_SIZE_ANNOTATION: "0"}, f"{T}.{SLICE_SIZE_ANNOTATION}", "at least 1"),
        ({SLICE_SIZE_ANNOTATION: "four"}, f"{T}.{SLICE_SIZE_ANNOTATION}", "whole number"),
        ({SLICE_SIZE_ANNOTATION: None}, f"{T}.{SLICE_SIZE_ANNOTATION}", "must be set with"),
        ({SLICE_LEVEL_ANNOTATION: None}, f"{T}.{SLICE_SIZE_ANNOTATION}", "may not be set when"),
        ({SLICE_LEVEL_ANNOTATION: "rack"}, f"{T}.{SLICE_LEVEL_ANNOTATION}", "unknown topology level"),
        (
            {REQUIRED_ANNOTATION: None},
            f"{T}.{SLICE_LEVEL_ANNOTATION}",
            "needs kueue.x-k8s.io/podset-required",
        ),
    ],
)
def test_a_manifests_slice_annotations_are_checked_as_kueues_webhook_does(change, field, words):
    annotations = {k: v for k, v in (SLICED | change).items() if v is not None}
    with pytest.raises(ManifestProblem) as exc:
        inspect_manifest(indexed_job(8, annotations), team_namespace=NS, team_queue=QUEUE)
    assert exc.value.field == field and words in exc.value.message, exc.value.message


def test_a_manifests_slice_that_never_starts_is_refused_naming_its_annotation():
    with pytest.raises(ValidationFailed) as exc:
        decided(ManifestRequest(manifest=indexed_job(6, SLICED)))
    assert exc.value.details["field"] == f"{T}.{SLICE_SIZE_ANNOTATION}"
    assert "6 pods are not a whole number of slices of 4" in exc.value.message


def pytorchjob(annotations: dict[str, str], workers: int = 7) -> dict[str, Any]:
    def template() -> dict[str, Any]:
        return {
            "metadata": {"annotations": dict(annotations)},
            "spec": {
                "restartPolicy": "OnFailure",
                "containers": [
                    {"name": "pytorch", "image": "i", "resources": {"limits": {"nvidia.com/gpu": "8"}}}
                ],
            },
        }

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "p", "namespace": NS},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": template()},
                "Worker": {"replicas": workers, "template": template()},
            }
        },
    }


def test_a_slice_on_a_pod_set_group_is_refused_with_the_reason():
    with pytest.raises(ValidationFailed) as exc:
        decided(ManifestRequest(manifest=pytorchjob(SLICED)), served=frozenset({"Job", "PyTorchJob"}))
    assert "a pod-set group cannot be sliced" in exc.value.message
    assert exc.value.details["field"].endswith(SLICE_LEVEL_ANNOTATION)
    # a high-level request rendered as a PyTorchJob (master + workers): auto does not slice it, and says so
    adm = decided(request(8, {"mode": "auto"}), served=frozenset({"Job", "PyTorchJob"}))
    topo = adm.decision.topology
    assert topo.level == L2 and topo.slice_level is None and "not sliced: a pod-set group" in topo.reason
    workers = adm.manifest["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]
    assert annotations_of(workers)[GROUP_ANNOTATION] and SLICE_LEVEL_ANNOTATION not in annotations_of(workers)


def jobset(annotations: dict[str, str]) -> dict[str, Any]:
    job = indexed_job(4, annotations)
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "s", "namespace": NS},
        "spec": {
            "replicatedJobs": [
                {"name": name, "replicas": 1, "template": {"spec": copy.deepcopy(job["spec"])}}
                for name in ("a", "b")
            ]
        },
    }


def test_every_pod_set_of_a_jobset_is_sliced():
    adm = decided(
        ManifestRequest(
            manifest=jobset({}),
            topology={"mode": "required", "level": "layer-2", "slice": {"level": "layer-3", "size": 2}},
        )
    )
    for rj in adm.manifest["spec"]["replicatedJobs"]:
        assert annotations_of(rj["template"]["spec"]["template"]) == {
            REQUIRED_ANNOTATION: L2,
            SLICE_LEVEL_ANNOTATION: L3,
            SLICE_SIZE_ANNOTATION: "2",
        }


def test_a_hyperpod_jobs_slices_go_on_its_templates_its_object_keeps_the_level_only():
    import json

    manifest = json.loads((ROOT / "tests/unit/data/hyp-create-hyp-pytorch-job.json").read_text())
    manifest["metadata"]["annotations"] = {PREFERRED_ANNOTATION: L2}
    spec = manifest["spec"]["replicaSpecs"][0]
    spec["replicas"] = 8
    spec["template"]["metadata"]["annotations"] = {
        PREFERRED_ANNOTATION: L2,
        SLICE_LEVEL_ANNOTATION: L3,
        SLICE_SIZE_ANNOTATION: "4",
    }
    adm = decided(ManifestRequest(manifest=manifest), hyperpod=True)
    assert (adm.decision.topology.slice_level, adm.decision.topology.slice_size) == (L3, 4)
    done = adm.manifest
    assert done["metadata"]["annotations"][PREFERRED_ANNOTATION] == L2
    assert SLICE_LEVEL_ANNOTATION not in done["metadata"]["annotations"]
    assert annotations_of(done["spec"]["replicaSpecs"][0]["template"]) == {
        PREFERRED_ANNOTATION: L2,
        SLICE_LEVEL_ANNOTATION: L3,
        SLICE_SIZE_ANNOTATION: "4",
    }


# --- the timed fallback ------------------------------------------------------------------------------


class Ledger:
    def __init__(self) -> None:
        self.fallbacks: list[dict[str, Any]] = []

    def record_fallback(self, team: str, name: str, fallback: dict[str, Any]) -> bool:
        self.fallbacks.append(fallback)
        return True


class Jobs:
    """The cluster's jobs as the fallback sees them: a pending Job without a Workload yet."""

    def __init__(self) -> None:
        self.relaxed: list[str] = []

    def workload_for(self, namespace: str, uid: str) -> None:
        return None

    def relax_topology(self, namespace: str, name: str, level: str, kind: str = "Job") -> str:
        self.relaxed.append(level)
        return "switched"


def test_the_timed_fallback_relaxes_the_level_and_says_the_slices_stay_required():
    import datetime as dt

    from topogov.domain.views.batch import JobView

    adm = decided(
        request(
            8,
            {
                "mode": "required",
                "level": "layer-2",
                "slice": {"level": "layer-3", "size": 4},
                "fallbackAfter": "1m",
            },
        )
    )
    body = copy.deepcopy(adm.manifest)
    body["metadata"]["uid"] = "u1"
    job = JobView.from_api(body)
    record = {
        "namespace": NS,
        "name": "x",
        "submitted_at": "2026-01-01T00:00:00Z",
        "decision": adm.decision.model_dump(mode="json"),
    }
    ledger, jobs = Ledger(), Jobs()
    now = dt.datetime(2026, 1, 1, 0, 5, tzinfo=dt.UTC)
    assert fall_back("team-a", record, job, ledger, jobs, now)  # type: ignore[arg-type]
    assert jobs.relaxed == [L2]
    (fallback,) = ledger.fallbacks
    assert "its slices of 4 pods stay required at" in fallback["reason"], fallback["reason"]


# --- the CLI -----------------------------------------------------------------------------------------


def cli_body(*flags: str) -> dict[str, Any]:
    from topogov_cli.main import parser
    from topogov_cli.submit import submission

    args = parser().parse_args(["submit", "--job-name", "x", "--image", "y", "--accelerators", "8", *flags])
    return submission(args)[0]


def test_the_cli_asks_for_slices_with_its_topology():
    body = cli_body("--required-topology", "layer-2", "--slice-level", "layer-3", "--slice-size", "4")
    assert body["topology"] == {
        "mode": "required",
        "level": "layer-2",
        "slice": {"level": "layer-3", "size": 4},
    }
    assert cli_body("--topology", "auto", "--slice-level", "layer-3")["topology"] == {
        "mode": "auto",
        "slice": {"level": "layer-3"},
    }
    from topogov_cli.common import topology_text

    told = {"mode": "required", "level": L2, "slice_level": L3, "slice_size": 4}
    assert topology_text(told) == "required layer-2, slices of 4 at layer-3"


@pytest.mark.parametrize(
    "flags",
    [("--slice-level", "layer-3"), ("--topology", "none", "--slice-level", "layer-3"), ("--slice-size", "4")],
)
def test_the_cli_refuses_a_slice_without_a_level_for_the_job(flags):
    from topogov_cli.base import CliError

    with pytest.raises(CliError) as exc:
        cli_body(*flags)
    assert exc.value.exit_code == 2 and "--slice-" in str(exc.value)


# --- the what-if simulator ----------------------------------------------------------------------------


def test_the_simulator_replays_autos_slices():
    """Five hosts out: layer-2 domain nn-2-0 has 7 free hosts (4 + 3), nn-2-1 has 4 (2 + 2). auto puts
    an 8-pod job at layer-1 in slices of 4 at layer-2: one slice in each layer-2 domain, where
    without the slices Kueue's BestFit would put 7 pods in one and 1 in the other."""
    from dataclasses import replace

    from tests.unit.test_whatif import POLICY as WHATIF_POLICY
    from tests.unit.test_whatif import trace
    from topogov.domain.policy import load_policy
    from topogov.logic.whatif import simulate
    from topogov.logic.whatif.inputs import synthetic_fleet

    out = {"n00007", "n00008", "n00009", "n00012", "n00013"}
    hosts = [
        replace(n, available=False) if n.name in out else n
        for n in synthetic_fleet("p5.48xlarge", (1, 2, 2), 4)
    ]
    paths = {n.name: n.path for n in hosts}
    (job,) = simulate(trace("0,team-a,wide,8,8,100,auto,,,"), hosts, load_policy(WHATIF_POLICY)).jobs
    assert job.start_s == 0 and job.level == layer_label(1)
    assert sorted(paths[n][1] for n in job.nodes) == ["nn-2-0"] * 4 + ["nn-2-1"] * 4
