"""The simulator against the real Kueue (issue 23, item 5): a trace with known durations is
submitted through the API to the local cluster (Kueue v0.17.0, kube-scheduler, KWOK running each
pod for its ``sleep``) on a wall clock, and the same trace is replayed by ``topogov whatif``'s
simulator on the snapshot's fleet under the same policy. Compared: the order of admissions, each
job's start (admission) time, and the layer-3 domains and nodes its pods got.

What makes the real one slower than the model's instant cycles is measured here, not assumed: the
lag from admission to the quota's release beyond the job's ``sleep`` (pods created, bound, started,
completed, the Job and Workload finished), whose median becomes the replay's ``release_lag_s``.
While the jobs wait, ``GET /v1/jobs`` is polled for their start estimates (each job is submitted
with ``expected_duration`` = its ``sleep``); each waiting job's first and last estimate before its
admission are compared with the real admission.

The figures are printed (``-s``) and written to ``agreement.json`` in the test's directory."""

from __future__ import annotations

import json
import os
import statistics
import threading
import time
from pathlib import Path

import pytest

from tests.stacks import labelled_stack, wait_until
from topogov.domain.policy import load_policy_file
from topogov.logic.whatif import simulate
from topogov.logic.whatif.inputs import TraceJob
from topogov_cli.sigv4 import credentials_for_profile, signed_request

ROOT = Path(__file__).resolve().parents[2]
NS = "hyperpod-ns-team-a"
L3 = "topology.k8s.aws/network-node-layer-3"
# (submit offset s, name, pods, mode, level, run s): 16 hosts in four layer-3 nodes of 4; the first
# four fill them, the rest wait for room, and the 8-pod job needs two layer-3 nodes of one layer-2
TRACE = [
    (0, "ag-1", 4, "required", "layer-3", 30),
    (1, "ag-2", 4, "required", "layer-3", 45),
    (2, "ag-3", 4, "required", "layer-3", 20),
    (3, "ag-4", 4, "required", "layer-3", 35),
    (5, "ag-5", 4, "required", "layer-3", 25),
    (6, "ag-6", 2, "preferred", "layer-3", 20),
    (8, "ag-7", 8, "preferred", "layer-2", 20),
    (10, "ag-8", 2, "preferred", "layer-3", 15),
]


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with labelled_stack(
        tmp_path_factory.mktemp("agree"), "p5.48xlarge=16", api_port=0, extra_nodes=False
    ) as s:
        yield s


def _post(stack, body):
    creds = credentials_for_profile("topogov-team-a", str(stack.credentials))
    return signed_request(
        "POST", stack.api.url + "/v1/jobs", credentials=creds, region="us-east-1", json_body=body
    )


def _fleet(stack):
    """The snapshot's GPU nodes with a topology, as ``topogov whatif --fleet snapshot`` reads them."""
    from dataclasses import replace

    from topogov.adapters.snapshot_store import S3SnapshotStore
    from topogov.domain.quantity import Resources

    snapshot = S3SnapshotStore(stack.client("s3"), os.environ["TOPOGOV_SNAPSHOT_BUCKET"]).load()
    assert snapshot is not None
    return [replace(n, requested=Resources()) for n in snapshot.nodes.values() if len(n.path) >= 3]


class Watcher(threading.Thread):
    """Polls the team's Workloads: when each got quota (first seen admitted, on this clock) and when
    Kueue marked it Finished."""

    def __init__(self, stack, t0):
        super().__init__(daemon=True)
        self.kube, self.t0 = stack.kube(), t0
        self.admitted: dict[str, float] = {}
        self.finished: dict[str, float] = {}
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            now = time.time() - self.t0
            resp = self.kube.request("GET", f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/workloads")
            for wl in (resp.body or {}).get("items", []) if resp.status == 200 else []:
                owner = (wl["metadata"].get("ownerReferences") or [{}])[0].get("name", "")
                status = wl.get("status") or {}
                if status.get("admission") and owner not in self.admitted:
                    self.admitted[owner] = now
                done = [
                    c
                    for c in status.get("conditions", [])
                    if c["type"] == "Finished" and c["status"] == "True"
                ]
                if done and owner not in self.finished:
                    self.finished[owner] = now
            self.stop.wait(0.25)


class Estimates(threading.Thread):
    """Polls ``GET /v1/jobs`` (the ETA of every pending job, one model run) while the trace runs:
    for each job, its first estimate and its last one before Kueue admitted it, as times on this
    clock (the request's time plus ``start_in_s``)."""

    def __init__(self, stack, t0, admitted):
        super().__init__(daemon=True)
        self.stack, self.t0, self.admitted = stack, t0, admitted
        self.first: dict[str, float] = {}
        self.last: dict[str, float] = {}
        self.stop = threading.Event()

    def run(self):
        creds = credentials_for_profile("topogov-team-a", str(self.stack.credentials))
        while not self.stop.is_set():
            asked = time.time() - self.t0
            resp = signed_request(
                "GET", self.stack.api.url + "/v1/jobs?team=team-a", credentials=creds, region="us-east-1"
            )
            for job in resp.json().get("jobs", []) if resp.status_code == 200 else []:
                start = (job.get("eta") or {}).get("start_in_s")
                if job["status"] != "Pending" or start is None or job["name"] in self.admitted:
                    continue
                self.first.setdefault(job["name"], asked + start)
                self.last[job["name"]] = asked + start
            self.stop.wait(2.0)


def _nodes(stack, job):
    pods = stack.kube().request(
        "GET", f"/api/v1/namespaces/{NS}/pods", query={"labelSelector": f"job-name={job}"}
    )
    return sorted({p["spec"].get("nodeName") for p in pods.body["items"] if p["spec"].get("nodeName")})


def test_the_replay_agrees_with_the_real_kueue_on_order_starts_and_domains(stack, tmp_path):
    policy = load_policy_file(ROOT / "teams.yaml")
    fleet = _fleet(stack)
    paths = {n.name: n.path for n in fleet}
    t0 = time.time()
    watcher = Watcher(stack, t0)
    watcher.start()
    estimates = Estimates(stack, t0, watcher.admitted)
    estimates.start()
    submitted = {}
    try:
        for offset, name, pods, mode, level, run_s in TRACE:
            time.sleep(max(0.0, t0 + offset - time.time()))
            submitted[name] = time.time() - t0
            body = {"job_name": name, "image": "pytorch:latest", "accelerators": 8, "efa": 32,
                    "replica_count": pods, "command": ["sleep", f"{run_s}s"],
                    "topology": {"mode": mode, "level": level}, "expected_duration": f"{run_s}s"}  # fmt: skip
            resp = _post(stack, body)
            assert resp.status_code == 201, resp.text
        wait_until(
            lambda: len(watcher.finished) == len(TRACE), "every job finished", timeout_s=600, every_s=1
        )
    finally:
        watcher.stop.set()
        estimates.stop.set()
        watcher.join(timeout=10)
        estimates.join(timeout=30)
    real_nodes = {name: _nodes(stack, name) for _, name, *_ in TRACE}
    run_s = {name: run for _, name, _, _, _, run in TRACE}
    lags = [watcher.finished[n] - watcher.admitted[n] - run_s[n] for n in run_s]
    lag = statistics.median(lags)
    # the replay: the same submissions, their measured times, the measured lag
    trace = [
        TraceJob(submitted[name], "team-a", name, pods, 8, run, topology_mode=mode, topology_level=level)
        for _, name, pods, mode, level, run in TRACE
    ]
    replay = {j.name: j for j in simulate(trace, fleet, policy, release_lag_s=lag).jobs}
    # order: pairs whose real admissions are more than a second apart (the poll's resolution)
    names = [n for _, n, *_ in TRACE]
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]
             if abs(watcher.admitted[a] - watcher.admitted[b]) > 1.0]  # fmt: skip
    agree = sum(
        (watcher.admitted[a] < watcher.admitted[b]) == (replay[a].start_s < replay[b].start_s)
        for a, b in pairs
    )
    errors = sorted(abs(replay[n].start_s - watcher.admitted[n]) for n in names)
    domains = sum(
        {paths[h][2] for h in real_nodes[n]} == {paths[h][2] for h in replay[n].nodes} for n in names
    )
    exact = sum(set(real_nodes[n]) == set(replay[n].nodes) for n in names)
    # the start estimates shown while the jobs waited (the jobs that waited long enough to get one)
    waited = sorted(estimates.last)
    first_err = sorted(abs(estimates.first[n] - watcher.admitted[n]) for n in waited)
    last_err = sorted(abs(estimates.last[n] - watcher.admitted[n]) for n in waited)

    def pct(xs, q):
        return round(xs[min(len(xs) - 1, int(q * len(xs)))], 2) if xs else None

    report = {
        "jobs": len(names),
        "order_pairs": len(pairs),
        "order_agreement": agree / len(pairs),
        "start_error_p50_s": errors[len(errors) // 2],
        "start_error_p90_s": errors[min(len(errors) - 1, int(0.9 * len(errors)))],
        "layer3_domains_agree": domains / len(names),
        "nodes_agree": exact / len(names),
        "release_lag_p50_s": lag,
        "release_lags_s": [round(x, 2) for x in lags],
        "estimated_jobs": len(waited),
        "estimate_first_error_p50_s": pct(first_err, 0.5),
        "estimate_first_error_p90_s": pct(first_err, 0.9),
        "estimate_last_error_p50_s": pct(last_err, 0.5),
        "estimate_last_error_p90_s": pct(last_err, 0.9),
        "estimates": {
            n: {"first": round(estimates.first[n], 2), "last": round(estimates.last[n], 2)} for n in waited
        },
        "real": {
            n: {
                "submitted": round(submitted[n], 2),
                "admitted": round(watcher.admitted[n], 2),
                "nodes": real_nodes[n],
            }
            for n in names
        },
        "replay": {
            n: {"start": round(replay[n].start_s, 2), "nodes": sorted(set(replay[n].nodes))} for n in names
        },
    }
    (tmp_path / "agreement.json").write_text(json.dumps(report, indent=2))
    print(json.dumps({k: v for k, v in report.items() if k not in ("real", "replay")}))
    assert len(pairs) >= 10, report
    assert report["order_agreement"] >= 0.9, report
    assert report["layer3_domains_agree"] >= 0.75, report
    assert report["start_error_p50_s"] <= 5.0 and report["start_error_p90_s"] <= 15.0, report
    # the estimates shown while they waited: the jobs that wait for room got one, close to the truth
    # (early by about the release lag, which an estimate does not add: measured 3.1 s p50 here)
    assert report["estimated_jobs"] >= 3, report
    assert report["estimate_last_error_p50_s"] <= 10.0 and report["estimate_last_error_p90_s"] <= 20.0, report
