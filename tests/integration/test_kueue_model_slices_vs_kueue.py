"""Differential test of pod-set slices: :mod:`topogov.domain.kueue_model` against the real Kueue v0.17.0.

The harness is ``test_kueue_model_vs_kueue.py``'s (the local cluster, the same events given to both,
settling, and the comparison after every event: the admitted and pending sets, every pod's host by
completion index, pending messages word for word); this module adds Jobs whose pod template carries
``kueue.x-k8s.io/podset-slice-required-topology`` and ``kueue.x-k8s.io/podset-slice-size`` (Kueue
v0.17.0 reads them for batch Jobs with no feature gate: ``jobframework/tas.go``), beside a required
or preferred level or alone.

Scenarios: hand-made slices on racks and hosts of uneven room (the emptiest host first below the
slice level, slices alone from the top level, a preferred block going up to the whole cluster,
failures counted in slices), and two random sequences from fixed seeds mixing sliced and plain Jobs
with preemption: 37 events, about 2 minutes. Every pod count there is a whole number of slices.

A count with a remainder (5 pods in slices of 2) is a fault of Kueue v0.17.0, checked on its own:
the Job is admitted with quota for 5 pods and a topology assignment of 4 (whole slices only, as the
model places it), and the ungater panics on the fifth pod's rank (``rankToDomainID``: index out of
range) at every reconcile, so not one pod is ever ungated.
"""

from __future__ import annotations

import datetime as dt
import random
import time
from dataclasses import dataclass
from typing import Any

import pytest

from tests.integration.test_kueue_model_vs_kueue import (
    FLAVOR,
    HOSTNAME,
    K1,
    L1,
    L2,
    PRIORITIES,
    SETTLE_TIMEOUT_S,
    TOPOLOGY,
    Job,
    RealCluster,
    Scenario,
    gpu_node,
    per_pod,
    run,
    team_queue,
    topology_request,
)
from topogov.domain.kueue_model import Cluster, PodSet, TopologyRequest, Workload
from topogov.domain.kueue_model.resources import quantity_string


@dataclass(frozen=True)
class SliceJob(Job):
    """A Job whose every ``slice_size`` consecutive pods share one domain of ``slice_level``."""

    slice_level: str = ""
    slice_size: int = 0


def slice_request(job: Job) -> TopologyRequest | None:
    plain = topology_request(job)
    if not isinstance(job, SliceJob) or not job.slice_level:
        return plain
    base = plain or TopologyRequest()
    return TopologyRequest(
        base.required, base.preferred, base.unconstrained, None, job.slice_level, job.slice_size
    )


def job_object(job: Job) -> dict[str, Any]:
    """An Indexed batch Job, suspended, its topology (and slice) annotations on the pod template."""
    annotations = {"topogov.io/local-run-time": "3600s"}
    if job.mode in ("required", "preferred"):
        annotations[f"kueue.x-k8s.io/podset-{job.mode}-topology"] = job.level
    elif job.mode == "unconstrained":
        annotations["kueue.x-k8s.io/podset-unconstrained-topology"] = "true"
    if isinstance(job, SliceJob) and job.slice_level:
        annotations["kueue.x-k8s.io/podset-slice-required-topology"] = job.slice_level
        annotations["kueue.x-k8s.io/podset-slice-size"] = str(job.slice_size)
    res = {k: quantity_string(k, v) for k, v in per_pod(job).items()}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job.name,
            "namespace": job.queue,
            "labels": {"kueue.x-k8s.io/queue-name": job.queue, "kueue.x-k8s.io/priority-class": job.priority},
        },
        "spec": {
            "parallelism": job.pods,
            "completions": job.pods,
            "completionMode": "Indexed",
            "suspend": True,
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": annotations},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "main", "image": "busybox", "resources": {"requests": res, "limits": res}}
                    ],
                },
            },
        },
    }


class SliceCluster(RealCluster):
    """The harness's cluster, submitting Jobs with slice annotations."""

    def submit(self, job: Job) -> Workload:
        self.jobs[job.name] = job
        created = self._ok("POST", f"/apis/batch/v1/namespaces/{job.queue}/jobs", job_object(job))
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while time.monotonic() < deadline:
            for wl in self._workloads(job.queue):
                if (wl["metadata"].get("ownerReferences") or [{}])[0].get("name") == job.name:
                    meta = wl["metadata"]
                    ps = PodSet(job.pods, per_pod(job), topology=slice_request(job))
                    stamp = dt.datetime.fromisoformat(meta["creationTimestamp"].replace("Z", "+00:00"))
                    return Workload(
                        job.name,
                        job.queue,
                        (ps,),
                        PRIORITIES[job.priority],
                        stamp.timestamp(),
                        meta["uid"],
                        created["metadata"]["uid"],
                    )
            time.sleep(0.05)
        raise AssertionError(f"no Workload for {job.name}")


def slices_scenario() -> Scenario:
    """Two blocks; block 0 has racks of hosts with 2, 8, 8 and 8, 8, 4 GPUs, block 1 one rack of
    three 8-GPU hosts. Slices on racks and hosts, alone and beside required and preferred (going up
    to the whole cluster), failures counted in slices, and a finish that lets a pending sliced job in."""
    gpus = {"r00": (2, 8, 8), "r01": (8, 8, 4), "r10": (8, 8, 8)}
    nodes = [
        gpu_node(f"h{rack[1:]}{i}", f"nn-b{rack[1]}", f"nn-{rack}", g)
        for rack, room in gpus.items()
        for i, g in enumerate(room)
    ]
    queue = team_queue("team-a", 128, within_cluster_queue="LowerPriority", reclaim_within_cohort="Any")
    events: list[tuple[str, Any]] = [
        # rack slices of 4 pods × 2 GPUs, 4 of them: only block 0 holds them; below a rack the host of
        # 2 GPUs is filled first
        ("submit", SliceJob("rack-slices", "team-a", 16, 2, "required", L1, slice_level=L2, slice_size=4)),
        ("cancel", "rack-slices"),
        # host slices of 3 pods × 2 GPUs, 5 of them: no block holds them, the cluster does
        (
            "submit",
            SliceJob("preferred", "team-a", 15, 2, "preferred", L1, slice_level=HOSTNAME, slice_size=3),
        ),
        # slices alone (LeastFreeCapacity from the top level): 2 of 3 host slices fit, then all
        ("submit", SliceJob("slices-alone", "team-a", 6, 4, "none", slice_level=HOSTNAME, slice_size=2)),
        # a rack slice that no rack holds: pending, counted in slices
        ("submit", SliceJob("too-big", "team-a", 8, 4, "required", L1, slice_level=L2, slice_size=8)),
        ("finish", "preferred"),
        # host slices of 2 pods × 4 GPUs inside one rack
        (
            "submit",
            SliceJob("host-slices", "team-a", 4, 4, "required", L2, slice_level=HOSTNAME, slice_size=2),
        ),
        ("finish", "slices-alone"),
        ("finish", "host-slices"),
    ]
    return Scenario("slices", nodes, [TOPOLOGY], [FLAVOR], [queue], events)


def random_slices_scenario(seed: int, events: int) -> Scenario:
    """12 hosts (2 blocks × 2 racks × 3) of 8 or 4 GPUs, two teams in a cohort; random Jobs, half of
    them sliced (rack or host slices, with a required or preferred level or alone), and finishes."""
    rng = random.Random(seed)
    nodes = [
        gpu_node(f"n{b}{r}{h}", f"nn-b{b}", f"nn-r{b}{r}", rng.choice([8, 8, 4]))
        for b in range(2)
        for r in range(2)
        for h in range(3)
    ]
    queues = [
        team_queue(
            "team-a", 48, borrow=16, within_cluster_queue="LowerPriority", reclaim_within_cohort="Any"
        ),
        team_queue("team-b", 32, within_cluster_queue="Never", reclaim_within_cohort="Any"),
    ]
    shapes = [("required", L1), ("required", L2), ("preferred", L1), ("preferred", L2), ("none", "")]
    live: list[str] = []
    out: list[tuple[str, Any]] = []
    for i in range(events):
        if i < 4 or rng.random() < 0.65 or not live:
            mode, level = rng.choice(shapes)
            slice_level = rng.choice([L2, HOSTNAME]) if mode == "none" or rng.random() < 0.6 else ""
            size = rng.choice([2, 3, 4]) if slice_level else 0
            pods = size * rng.choice([1, 2, 3]) if size else rng.choice([1, 2, 4, 6])
            gpu = rng.choice([g for g in (1, 2, 4) if g * pods <= 32] or [1])
            priority = "high" if rng.random() < min(0.8, i / events) else "low"
            name = f"s{seed}-j{i}"
            queue = rng.choice(["team-a", "team-b"])
            out.append(("submit", SliceJob(name, queue, pods, gpu, mode, level, priority, slice_level, size)))
            live.append(name)
        else:
            out.append(("finish", live.pop(rng.randrange(len(live)))))
    return Scenario(f"random-slices-{seed}", nodes, [TOPOLOGY], [FLAVOR], queues, out)


SCENARIOS = [slices_scenario(), random_slices_scenario(5, 14), random_slices_scenario(11, 14)]


@pytest.fixture(scope="module")
def real(server: tuple[Any, str]) -> SliceCluster:
    return SliceCluster(server[0])


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_the_model_places_slices_as_kueue_does(real: SliceCluster, scenario: Scenario) -> None:
    """Given the same cluster and events, Jobs asking for slices among them, when each event has
    settled in Kueue and in the model, then both admitted the same workloads, on the same hosts by
    pod index, and left the same ones pending with the same message."""
    log, problems = [], []
    placements = messages = sliced = 0
    for i, what, diffs, observed in run(real, scenario):
        placements += len(observed.admitted)
        messages += len(observed.pending)
        sliced += sum(1 for name in observed.admitted if getattr(real.jobs[name], "slice_level", ""))
        log.append(f"#{i} {what}: admitted {sorted(observed.admitted)}, pending {sorted(observed.pending)}")
        problems += [f"after #{i} {what}: {d}" for d in diffs]
    log.append(
        f"{scenario.name}: {len(scenario.events)} events, {placements} placements ({sliced} sliced) and "
        f"{messages} pending messages compared"
    )
    print("\n".join(log))
    assert sliced, "no sliced Job was admitted: the scenario tests nothing"
    assert not problems, "\n".join(problems)


def test_a_remainder_past_whole_slices_is_admitted_on_whole_slices_and_never_ungated(
    real: SliceCluster,
) -> None:
    """Given three 8-GPU hosts in one rack and a Job of 5 pods × 2 GPUs in host slices of 2 (the job
    webhook lets it through: a slice is no larger than the pod set), when Kueue admits it, then its
    topology assignment holds 4 pods, as the model's does, and after a while every pod is still
    gated (Kueue v0.17.0's ungater panics on rank 4 of an assignment of 4)."""
    nodes = [gpu_node(f"h{i}", "nn-b0", "nn-r0", 8) for i in range(3)]
    queue = team_queue("team-a", 64)
    real.setup(Scenario("remainder", nodes, [TOPOLOGY], [FLAVOR], [queue], []))
    model = Cluster(nodes=nodes, flavors=[FLAVOR], topologies=[TOPOLOGY], cluster_queues=[queue])
    job = SliceJob("remainder", "team-a", 5, 2, "required", L2, slice_level=HOSTNAME, slice_size=2)
    wl = real.submit(job)
    model.submit(wl)
    model.settle(wl.created)
    admitted = model.admitted()["remainder"].pod_sets[0]
    assert admitted.topology is not None
    want = (
        [list(values) for values, _ in admitted.topology.domains],
        [c for _, c in admitted.topology.domains],
    )
    assert sum(want[1]) == 4
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    got: Any = None
    while time.monotonic() < deadline and got is None:
        for item in real._ok("GET", f"{K1}/namespaces/team-a/workloads")["items"]:
            psa = ((item.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []
            if psa and psa[0].get("topologyAssignment"):
                domains = psa[0]["topologyAssignment"]["domains"]
                got = [d["values"] for d in domains], [d["count"] for d in domains], psa[0]["count"]
        time.sleep(0.2)
    assert got == (*want, 5)
    time.sleep(5)
    pods = real._ok("GET", "/api/v1/namespaces/team-a/pods")["items"]
    assert len(pods) == 5
    assert all(
        "kueue.x-k8s.io/topology" in [g["name"] for g in p["spec"].get("schedulingGates") or []] for p in pods
    )
