"""Races (issue #7, item 3): the in-flight cap under parallel submissions, submit racing cancel, two
reconcile passes at once. Every "container" is its own ApiService (its own boto3 and Kubernetes
clients), as separate Lambda environments would be; DynamoDB (moto, serialised like the real
service's per-item atomicity) and the Kubernetes API are shared over HTTP.

Figures: runs, submissions, accepted, the largest overshoot of the cap seen at any moment (sampled
while the race runs, and after) — must be 0 — and items lost (ledger vs cluster) — must be 0.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import random
import threading
import time

from tests.stacks import wait_until
from topogov.adapters.ledger import DynamoLedger
from topogov.domain.errors import Refusal
from topogov.domain.policy import Caller
from topogov.domain.submission import JobRequest
from topogov_local import events
from topogov_local.lambda_context import LocalContext

from .conftest import scale
from .invariants import consistent, items_lost, ledger_vs_cluster, mislabelled_nodes

ADMIN = Caller.of("arn:aws:iam::123456789012:user/topogov-admin")
TEAM_C = Caller.of("arn:aws:iam::123456789012:user/topogov-team-c")
CAP_GPU = 256  # team-c's maxInFlight in teams.yaml


def governance(stack):
    """One API "container", as the api function's role: topogov:api under deploy/rbac.yaml."""
    from topogov.bootstrap import build_api_service
    from topogov.settings import ApiSettings
    from topogov_local.processes import environ

    env = stack.api_env()
    with environ(env):  # boto3 takes the credentials (the api role's session) from the environment
        return build_api_service(ApiSettings.from_env({**os.environ, **env}))


def request(name: str, gpus: int = 8, command: list[str] | None = None) -> JobRequest:
    body = {"job_name": name, "image": "pytorch:2.5", "accelerators": gpus, "efa": 0, "team": "team-c"}
    if command:
        body["command"] = command
    return JobRequest.model_validate(body)


class CapSampler:
    """Reads team-c's counter in a loop while a race runs; remembers the largest value seen."""

    def __init__(self, stack) -> None:
        self._ddb = stack.client("dynamodb")
        self._counters = stack.output("CountersTable")
        self._stop = threading.Event()
        self.largest = 0
        self.samples = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            item = self._ddb.get_item(
                TableName=self._counters, Key={"team": {"S": "team-c"}}, ConsistentRead=True
            ).get("Item", {})
            self.largest = max(self.largest, int(item.get("gpu", {"N": "0"})["N"]))
            self.samples += 1
            time.sleep(0.005)

    def __enter__(self) -> CapSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def cancel_everything(gov) -> None:
    token = ""
    while token is not None:
        jobs, token = gov.jobs_of(ADMIN, "team-c", limit=500, token=token or None)
        for job in jobs:
            if job["state"] != "released":
                gov.cancel(ADMIN, "team-c", job["name"])


def test_parallel_submissions_never_pass_the_cap(stack, report):
    containers = [governance(stack) for _ in range(scale(8, 16))]
    n = scale(50, 500)
    outcomes: dict[str, int] = {}
    lock = threading.Lock()

    def submit(i: int) -> None:
        gov = containers[i % len(containers)]
        try:
            gov.submit(request(f"race-{i}"), caller=TEAM_C, dry_run=False)
            key = "accepted"
        except Refusal as exc:
            key = exc.code
        with lock:
            outcomes[key] = outcomes.get(key, 0) + 1

    with CapSampler(stack) as sampler, cf.ThreadPoolExecutor(max_workers=len(containers)) as pool:
        list(pool.map(submit, range(n)))
    tables = stack.output("LedgerTable"), stack.output("CountersTable")
    ledger = DynamoLedger(stack.client("dynamodb"), *tables)
    usage = ledger.usage("team-c").gpu
    overshoot = max(0, max(sampler.largest, usage) - CAP_GPU)
    found = ledger_vs_cluster(stack)
    report.add("races", runs=1, submissions=n, accepted=outcomes.get("accepted", 0))
    report.max("races", "largest_overshoot_gpu", overshoot)
    report.add("races", items_lost=items_lost(found))
    assert overshoot == 0, f"in flight reached {sampler.largest} of {CAP_GPU}"
    assert outcomes.get("accepted") == CAP_GPU // 8 and usage == CAP_GPU, outcomes
    assert outcomes.get("IN_FLIGHT_LIMIT") == n - CAP_GPU // 8, outcomes
    assert consistent(found), found
    cancel_everything(containers[0])
    assert consistent(ledger_vs_cluster(stack))


def test_submissions_racing_cancels_leave_nothing_uncharged_or_lost(stack, report):
    containers = [governance(stack) for _ in range(scale(6, 12))]
    n = scale(40, 300)
    rng = random.Random(5)
    released = {"True": 0, "False": 0}
    lock = threading.Lock()

    def submit(i: int) -> None:
        try:
            containers[i % len(containers)].submit(request(f"sc-{i}", gpus=1), caller=TEAM_C, dry_run=False)
        except Refusal as exc:  # cancelled while being submitted (409): nothing is owed
            with lock:
                released[exc.code] = released.get(exc.code, 0) + 1

    def cancel(i: int) -> None:
        time.sleep(rng.random() * 0.05)
        try:
            out = containers[(i + 1) % len(containers)].cancel(ADMIN, "team-c", f"sc-{i}")
        except Refusal:
            return  # not recorded yet: nothing to cancel
        with lock:
            released[str(out["charge_released"])] += 1

    with CapSampler(stack) as sampler, cf.ThreadPoolExecutor(max_workers=2 * len(containers)) as pool:
        futures = []
        for i in range(n):
            futures.append(pool.submit(submit, i))
            if i % 2 == 0:
                futures.append(pool.submit(cancel, i))
        for f in futures:
            f.result()
    # The reconcile pass finishes what a race may leave (a cancelled Job still there, a record whose
    # confirmation was lost); then the ledger must equal the cluster.
    from topogov.handlers.reconcile import handler

    handler(events.scheduled_event(), LocalContext())
    found = ledger_vs_cluster(stack)
    report.add("races", runs=1, submissions=n, cancels=released["True"])
    report.add("races", cancelled_while_submitting=released.get("CONFLICT", 0))
    report.max("races", "largest_overshoot_gpu", max(0, sampler.largest - CAP_GPU))
    report.add("races", items_lost=items_lost(found))
    assert consistent(found), found
    cancel_everything(containers[0])


def _bundle():
    from topogov.bootstrap import build_reconcile
    from topogov.settings import ReconcileSettings

    return build_reconcile(ReconcileSettings.from_env())


def test_two_reconcile_passes_at_once_release_each_charge_once_and_converge(stack, report):
    from topogov.logic.labeler import PassOptions

    gov = governance(stack)
    k = scale(10, 60)
    for i in range(k):  # (the local cluster runs a pod for the `sleep` of its command)
        gov.submit(request(f"done-{i}", gpus=1, command=["sleep", "1s"]), caller=TEAM_C, dry_run=False)
    kube = stack.kube()

    def finished() -> int:  # Kueue admits them, KWOK runs their pods, the Job controller says Complete
        jobs = kube.request("GET", "/apis/batch/v1/namespaces/hyperpod-ns-team-c/jobs").body["items"]
        done = 0
        for j in jobs:
            conditions = (j.get("status") or {}).get("conditions") or []
            if j["metadata"]["name"].startswith("done-") and any(
                c["type"] == "Complete" and c["status"] == "True" for c in conditions
            ):
                done += 1
        return done

    wait_until(lambda: finished() == k, f"the {k} jobs finish", timeout_s=120)
    # and labels drift by hand on a few nodes
    names = sorted(
        n for n in (o["metadata"]["name"] for o in kube.request("GET", "/api/v1/nodes").body["items"])
    )
    ec2_nodes = [n for n in names if n.startswith("i-")][:5]
    for n in ec2_nodes:
        kube.request(
            "PATCH",
            f"/api/v1/nodes/{n}",
            body={"metadata": {"labels": {"topology.k8s.aws/network-node-layer-3": "nn-wrong"}}},
            content_type="application/merge-patch+json",
        )
    bundles = [_bundle(), _bundle()]
    barrier = threading.Barrier(2)

    def run(bundle):
        labeler, sync, governor = bundle.labeler, bundle.ledger_sync, bundle.governor
        barrier.wait()
        outcome = labeler.reconcile(PassOptions())
        return outcome.summary, sync(), governor(outcome.snapshot)

    with cf.ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(run, bundles))
    released = sum(r[1].released_finished for r in results)
    found = ledger_vs_cluster(stack)
    wrong = mislabelled_nodes(stack)
    report.add("races", runs=1, concurrent_passes=2, releases=released, double_releases=released - k)
    report.add("races", items_lost=items_lost(found) + len(wrong))
    assert released == k  # each finished job's charge released exactly once across both passes
    assert consistent(found), found
    assert wrong == []
    assert sum(r[0].patched for r in results) >= len(ec2_nodes)


class Interleaved:
    """The real Kubernetes jobs port, with another actor's step run at the worst moment of a
    submission: ``before`` the Job is created (a cancel landing while the charge is reserved), or
    ``after`` it is created and before the API confirms its record (a reconcile pass)."""

    def __init__(self, jobs, *, before=None, after=None) -> None:
        self._jobs, self._before, self._after = jobs, before, after

    def create(self, namespace, manifest):
        if self._before:
            self._before(manifest["metadata"]["name"])
        created = self._jobs.create(namespace, manifest)
        if self._after:
            self._after(manifest["metadata"]["name"])
        return created

    def __getattr__(self, name):
        return getattr(self._jobs, name)


def _with_jobs(gov, jobs):
    from topogov.logic.api_service import ApiService

    return ApiService(policy=gov.policy, snapshots=gov.snapshots, ledger=gov.ledger, jobs=jobs)


def test_a_cancel_landing_while_the_job_is_created_wins_and_no_job_runs_uncharged(stack, report):
    from topogov.domain.errors import Conflict

    gov, other = governance(stack), governance(stack)
    before = other.team_view(ADMIN, "team-c")["in_flight"]
    racing = _with_jobs(gov, Interleaved(gov.jobs, before=lambda name: other.cancel(ADMIN, "team-c", name)))
    try:
        racing.submit(request("cancel-wins", gpus=2), caller=TEAM_C, dry_run=False)
        raise AssertionError("the submission should have lost to the cancel")
    except Conflict as exc:
        assert "cancelled while it was being submitted" in exc.message
    job = stack.kube().request("GET", "/apis/batch/v1/namespaces/hyperpod-ns-team-c/jobs/cancel-wins")
    assert job.status == 404  # created, then removed by the submission that lost
    assert other.team_view(ADMIN, "team-c")["in_flight"] == before  # released once, by the cancel
    assert gov.ledger.get("team-c", "cancel-wins")["state"] == "released"
    found = ledger_vs_cluster(stack)
    report.add("races", forced_interleavings=1, items_lost=items_lost(found))
    assert consistent(found), found


def test_a_reconcile_pass_confirming_first_does_not_fail_the_submission(stack, report):
    gov = governance(stack)
    sync = _bundle().ledger_sync
    racing = _with_jobs(gov, Interleaved(gov.jobs, after=lambda name: sync()))
    out = racing.submit(request("pass-first", gpus=2), caller=TEAM_C, dry_run=False)
    assert out.created
    assert gov.ledger.get("team-c", "pass-first")["state"] == "submitted"
    found = ledger_vs_cluster(stack)
    report.add("races", forced_interleavings=1, items_lost=items_lost(found))
    assert consistent(found), found
    cancel_everything(gov)
