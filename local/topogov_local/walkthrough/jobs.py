"""Walkthrough, part 4: jobs that run. Kueue (the real one, v0.17.0) admits, places, preempts and
reclaims with the objects the governor wrote; KWOK runs the pods on the simulated nodes.

The story needs the default fleet's shape (64 p5.48xlarge: 2 layer-1 domains of 32 nodes, 4
layer-2 of 16, 16 layer-3 of 4); with another fleet it is skipped. Every figure printed is read
from the system (the ClusterQueues, the API, Kueue's messages), not assumed.
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from topogov.domain.labels import layer_label
from topogov_cli.render import joined, placement_line
from topogov_local.walkthrough.api import GPU_JOB
from topogov_local.walkthrough.console import Console, shown
from topogov_local.walkthrough.labeler import invoke

NS_A = "hyperpod-ns-team-a"
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
P5 = "p5.48xlarge"
POD_COLUMNS = "custom-columns=NAME:.metadata.name,STATUS:.status.phase,NODE:.spec.nodeName"

A, B, C, ADMIN = "topogov-team-a", "topogov-team-b", "topogov-team-c", "topogov-admin"


def submit(c: Console, profile: str, name: str, pods: int, *flags: str, run_s: int) -> None:
    """A high-level GPU job of ``pods`` x 8 GPUs that runs ``run_s`` seconds (its command is
    ``sleep``, which the local stack's KWOK runs as that long); its first line of output."""
    c.topogov(profile, "submit", "--job-name", name, *GPU_JOB, "--replica-count", str(pods), *flags,
              "--command", f"sleep {run_s}", max_lines=1)  # fmt: skip


def fits_default_fleet(stack: Any) -> bool:
    nodes = stack.kube().request("GET", "/api/v1/nodes").body["items"]
    labels = [n["metadata"].get("labels") or {} for n in nodes]
    p5 = [x for x in labels if x.get("node.kubernetes.io/instance-type") == P5 and layer_label(3) in x]
    return len(p5) >= 64


def jobs(c: Console, first: int) -> int:
    """Steps ``first``...; returns the next step's number."""
    if not fits_default_fleet(c.stack):
        c.step(first, "Jobs that run: skipped (the story needs the default fleet's 64 p5.48xlarge)")
        return first + 1
    aws_example(c, first)
    training(c, first + 1)
    lifecycle(c, first + 2)
    borrowing(c, first + 3)
    priority(c, first + 4)
    fallback(c, first + 5)
    placement(c, first + 6)
    return first + 7


def aws_example(c: Console, n: int) -> None:
    c.step(n, "AWS's example Job, as is: Kueue admits it and places its 10 pods in one layer-3 domain")
    c.topogov(A, "submit", "-f", shown(_example("test-tas-job.yaml")), max_lines=1)
    view = c.wait_status(A, "team-a", "test-tas-job", ("Running",))
    c.kubectl("get", "pods", "-n", NS_A, "-l", "job-name=test-tas-job", "-o", POD_COLUMNS, max_lines=4)
    nodes = [r["node"] for r in (view.get("placement") or {}).get("by_node") or []]
    if nodes:
        c.kubectl("get", "nodes", *nodes, "-L", layer_label(3))
    c.note(
        "(AWS's check is `kubectl get pods -n hyperpod-ns-team-a -o wide`: the same pods, wider. "
        "Its pods ask for 1 vCPU each, so Kueue's BestFit packs them onto as few nodes as hold them; "
        "their `sleep 3600s` runs an hour here too.) `topogov job` joins pods, nodes and domains:"
    )
    c.topogov(A, "job", "test-tas-job")


def training(c: Console, n: int) -> None:
    """A Kubeflow PyTorchJob through the API (the stack runs the training operator and JobSet unless
    ``--no-training-controllers``): one pod-set group, placed in one layer-3 domain, the operator's
    rendezvous on every pod; cancelled after, so the GPUs are free for the steps that follow."""
    if not c.stack.options.training_controllers:
        c.step(n, "A PyTorchJob: skipped (the stack runs no training operator: --no-training-controllers)")
        return
    c.step(n, "A Kubeflow PyTorchJob: a master and 3 workers, placed as one in a layer-3 domain")
    c.topogov(A, "submit", "-f", shown(_example("pytorchjob.yaml")), max_lines=12)
    view = c.wait_status(A, "team-a", "llm-pt", ("Running",))
    c.kubectl("get", "pods", "-n", NS_A, "-l", "training.kubeflow.org/job-name=llm-pt", "-o", POD_COLUMNS)
    nodes = [r["node"] for r in (view.get("placement") or {}).get("by_node") or []]
    if nodes:
        c.kubectl("get", "nodes", *nodes, "-L", layer_label(3))
    c.note(
        "The training operator gave every pod torchrun's rendezvous (MASTER_ADDR, RANK, WORLD_SIZE, "
        "PET_NNODES); a worker's:"
    )
    c.kubectl(
        "get", "pod", "-n", NS_A, "llm-pt-worker-0", "-o",
        "jsonpath={range .spec.containers[0].env[*]}{.name}={.value}{'\\n'}{end}",
    )  # fmt: skip
    c.topogov(A, "cancel", "llm-pt")


def lifecycle(c: Console, n: int) -> None:
    c.step(n, "4 x 8 GPUs required in one layer-3 domain: Admitted -> Running -> Succeeded")
    submit(c, A, "llm-finetune", 4, "--required-topology", "layer-3", run_s=8)
    c.timeline(A, "team-a", "llm-finetune", ("Succeeded", "Failed"))
    c.topogov(A, "job", "llm-finetune")


def p5_quotas(c: Console) -> dict[str, tuple[int, int | None]]:
    """Per team, the ClusterQueue's p5 GPU nominal quota and borrowing limit (None: no limit)."""
    out = {}
    items = c.stack.kube().request("GET", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues").body["items"]
    for cq in items:
        team = cq["metadata"]["name"].removeprefix("hyperpod-ns-").removesuffix("-clusterqueue")
        for rg in cq["spec"]["resourceGroups"]:
            for flavor in rg["flavors"]:
                for r in flavor["resources"] if flavor["name"] == P5 else []:
                    if r["name"] == "nvidia.com/gpu":
                        limit = r.get("borrowingLimit")
                        out[team] = (int(r["nominalQuota"]), None if limit is None else int(limit))
    return out


def borrowing(c: Console, n: int) -> None:
    c.step(n, "Borrowing: team-a runs beyond its quota on idle GPUs until team-c takes its own back")
    quotas = p5_quotas(c)
    parts = [
        f"{t} {q}" + (f" (+{b} borrow)" if b else " (lends, never borrows)") for t, (q, b) in quotas.items()
    ]
    c.say(
        joined(
            [
                f"{P5} GPU quotas: " + parts[0],
                *parts[1:],
                f"the cohort holds {sum(q for q, _ in quotas.values())}",
            ]
        )
    )
    submit(c, B, "b-train", 15, "--required-topology", "layer-2", run_s=600)
    submit(c, A, "a-big", 36, "--preferred-topology", "layer-1", run_s=600)
    c.wait_status(B, "team-b", "b-train", ("Running",))
    c.wait_status(A, "team-a", "a-big", ("Running",))
    c.note("team-a now uses more than its quota: Kueue admitted a-big on team-b's and team-c's idle GPUs.")
    c.topogov(A, "teams", "--team", "team-a")
    c.say("team-c submits two jobs within its own quota; the first needs what team-a borrowed:")
    submit(c, C, "c-exp", 7, "--required-topology", "layer-2", "--expected-duration", "15s", run_s=15)
    submit(c, C, "c-next", 4, "--required-topology", "layer-3", "--expected-duration", "10s", run_s=10)
    c.wait_status(C, "team-c", "c-exp", ("Running",))
    view = c.wait_status(A, "team-a", "a-big", ("Pending",))
    _events(c, "a-big", view, "kueue: Preempted")
    c.note(f"  a-big is Pending again: {view.get('why_pending')}", 2)
    c.topogov(C, "jobs")
    c.note(
        "c-next waits for c-exp to finish (team-c's quota is in use), then starts; a-big waits for "
        "both, then Kueue admits it again. Each was submitted with --expected-duration, so the API "
        "runs the Kueue model forward from now and says when c-next should start:"
    )
    estimate = c.job(C, "team-c", "c-next").get("estimate") or {}
    c.topogov(C, "job", "c-next", from_line="estimate", max_lines=7)
    c.wait_status(C, "team-c", "c-exp", ("Succeeded",))
    nxt = c.wait_status(C, "team-c", "c-next", ("Running", "Succeeded"))
    c.say(f"  c-exp Succeeded; c-next {nxt.get('status')}")
    c.note("  " + estimate_beside_start(estimate, nxt), 2)
    c.wait_status(C, "team-c", "c-next", ("Succeeded",))
    view = c.wait_status(A, "team-a", "a-big", ("Running",))
    c.say(f"  c-next Succeeded; a-big {view.get('status')}")
    c.topogov(A, "job", "a-big", max_lines=14)


def priority(c: Console, n: int) -> None:
    c.step(n, "Priority within a team: a training-priority job preempts team-a's experiment")
    submit(
        c, A, "a-urgent", 10, "--priority", "training-priority", "--required-topology", "layer-2", run_s=600
    )
    c.wait_status(A, "team-a", "a-urgent", ("Running",))
    view = c.wait_status(A, "team-a", "a-big", ("Pending",))
    _events(c, "a-big", view, "kueue: Preempted")
    c.topogov(A, "jobs")
    c.say("team-a gives up on a-big; its in-flight charge is released at once:")
    c.topogov(A, "cancel", "a-big")


def fallback(c: Console, n: int) -> None:
    c.step(n, "Time-bounded fallback: required layer-2, relaxed to preferred when it cannot start")
    cordoned = maintenance_nodes(c.stack)
    c.note(
        f"One idle node in each layer-2 domain is cordoned for maintenance ({len(cordoned)} nodes), so "
        "no layer-2 domain has 16 schedulable nodes; Kueue's TAS skips unschedulable nodes."
    )
    c.kubectl("cordon", *cordoned)
    submit(c, A, "wide-l2", 16, "--required-topology", "layer-2", "--fallback-after", "5s", run_s=60)
    view = c.wait_status(A, "team-a", "wide-l2", ("Pending",))
    deadline = time.monotonic() + 8
    while not view.get("why_pending", "").startswith("couldn't") and time.monotonic() < deadline:
        time.sleep(0.5)
        view = c.job(A, "team-a", "wide-l2")
    c.note(f"  Pending, Kueue says: {view.get('why_pending')}", 2)
    time.sleep(6)  # past fallbackAfter (the ledger counts whole seconds)
    c.say("The next scheduled pass finds it past its deadline and relaxes it to preferred:")
    ledger = invoke(_scheduled())["ledger"]
    c.say(f"  fallbacks this pass: {', '.join(ledger['fallbacks']) or 'none'}")
    c.say(
        f"  (the same pass gave back the in-flight charges of {ledger['released_finished']} finished "
        f"jobs and checked {ledger['checked']} records)"
    )
    c.wait_status(A, "team-a", "wide-l2", ("Running",))
    c.topogov(A, "job", "wide-l2", max_lines=26)
    c.kubectl("uncordon", *cordoned)


def placement(c: Console, n: int) -> None:
    c.step(n, "How tight the jobs landed, what is free, and what holds the next big one back")
    c.note(
        "PLACEMENT is read from each job's pods and their nodes' labels: the deepest layer holding "
        "them all in one domain (x1) and how the next layer splits them."
    )
    c.topogov(ADMIN, "jobs")
    quality = invoke(_scheduled()).get("placement") or {}
    c.say("Each reconcile pass computes the fleet's placement quality (metric PlacementInOneDomain):")
    c.say("  " + placement_line(quality))
    c.say("Free capacity per layer, as Kueue counts it; LARGEST JOB NOW is what the Kueue model places:")
    c.topogov(ADMIN, "topology", "--capacity")
    c.say("team-b asks for a whole layer-2 domain (16 nodes), which no domain has free now:")
    submit(c, B, "b-wide", 16, "--required-topology", "layer-2", run_s=60)
    view = c.wait_status(B, "team-b", "b-wide", ("Pending",))
    deadline = time.monotonic() + 10
    while not (view.get("why_pending") and view.get("waiting")) and time.monotonic() < deadline:
        time.sleep(0.5)
        view = c.job(B, "team-b", "b-wide")
    c.topogov(B, "job", "b-wide", from_line="waiting")
    c.topogov(B, "cancel", "b-wide")


def ledger(c: Console, n: int) -> None:
    c.step(n, "Where it all stands: admitted (Kueue's Workloads) and in flight (the ledger), per team")
    c.topogov(ADMIN, "teams")


def maintenance_nodes(stack: Any) -> list[str]:
    """Per layer-2 domain of the p5 nodes, the first node (by name) no pod runs on."""
    kube = stack.kube()
    busy = {p["spec"].get("nodeName") for p in kube.request("GET", "/api/v1/pods").body["items"]}
    by_domain: dict[str, list[str]] = defaultdict(list)
    for node in kube.request("GET", "/api/v1/nodes").body["items"]:
        labels = node["metadata"].get("labels") or {}
        if labels.get("node.kubernetes.io/instance-type") == P5 and layer_label(2) in labels:
            by_domain[labels[layer_label(2)]].append(node["metadata"]["name"])
    return [free[0] for _, names in sorted(by_domain.items()) if (free := sorted(set(names) - busy))]


def estimate_beside_start(estimate: dict[str, Any], view: dict[str, Any]) -> str:
    """``c-next: estimated to start at 07:10:05, Kueue admitted it at 07:10:06 (1 s later)``."""
    import datetime as dt

    admitted = next(
        (e.get("at") for e in view.get("events") or [] if e.get("what") == "kueue: QuotaReserved"), None
    )
    if not estimate.get("start_at"):
        why = estimate.get("error") or "the model saw no start"
        return f"{view.get('name')}: no estimate was given ({why}); Kueue admitted it at {admitted}"
    if not admitted:
        return f"{view.get('name')}: estimated to start at {estimate['start_at']}; not admitted yet"

    def at(stamp: str) -> dt.datetime:
        return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))

    late = (at(admitted) - at(estimate["start_at"])).total_seconds()
    when = f"{abs(late):.0f} s {'later' if late >= 0 else 'earlier'}"
    return (
        f"{view.get('name')}: estimated to start at {estimate['start_at'][11:19]}, Kueue admitted it "
        f"at {admitted[11:19]} ({when}: the estimate counts c-exp's 15 s from its admission, and its "
        "pods start a few seconds after that)"
    )


def _events(c: Console, name: str, view: dict[str, Any], what: str) -> None:
    for e in view.get("events") or []:
        if e.get("what") == what:
            c.note(f"  {name}: {what} ({e.get('reason')}): {e.get('message')}", 2)


def _scheduled() -> dict[str, Any]:
    from topogov_local import events

    return events.scheduled_event()


def _example(name: str) -> Path:
    return EXAMPLES / name
