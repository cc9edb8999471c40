"""``topogov local``: the local stack, a walkthrough of the labeler, then passes on a schedule."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from typing import Any

from topogov.domain.labels import ZONE_ID_LABEL, layer_label
from topogov_cli.common import EXIT_OK
from topogov_cli.render import governor_line, label_table, summary_line

LAYER_COLUMNS = ",".join([*(layer_label(i) for i in range(1, 5)), ZONE_ID_LABEL])


def say(text: str = "") -> None:
    print(text, flush=True)


def step(n: int, title: str) -> None:
    say()
    say(f"== {n}. {title}")


def invoke(event: dict[str, Any]) -> dict[str, Any]:
    """Run the reconcile Lambda handler in-process, exactly as Lambda would call it."""
    from topogov.handlers.reconcile import handler
    from topogov_local.lambda_context import LocalContext

    return handler(event, LocalContext())


def kubectl(stack: Any, *args: str, max_lines: int | None = None) -> None:
    exe = shutil.which("kubectl")
    cmd = ["kubectl", "--kubeconfig", str(stack.kubeconfig), *args]
    say("$ " + " ".join(cmd[:1] + cmd[3:]))
    if exe is None:
        say("(kubectl is not installed: `make kubectl` installs Debian's kubernetes-client)")
        return
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    lines = (out.stdout or out.stderr).rstrip("\n").splitlines()
    if max_lines and len(lines) > max_lines:
        hidden = len(lines) - max_lines
        lines = [*lines[:max_lines], f"... ({hidden} more rows)"]
    for line in lines:
        say(line)


def walkthrough(stack: Any) -> None:
    from topogov.domain.tree import to_mermaid
    from topogov_cli.topology import tree_from_cluster
    from topogov_local import events, fleet

    kube = stack.kube()
    nodes = kube.request("GET", "/api/v1/nodes").body["items"]
    step(1, f"A fleet of {len(nodes)} nodes, no topology labels yet")
    kubectl(stack, "get", "nodes", "-L", LAYER_COLUMNS, max_lines=6)

    step(2, "First pass (the EventBridge schedule): EC2 is asked once per 100 instances")
    first = invoke(events.scheduled_event())
    say(summary_line(first))
    if "governor" in first:
        say(governor_line(first["governor"]))
    kubectl(stack, "get", "nodes", "-L", LAYER_COLUMNS, max_lines=12)

    step(3, "Steady pass: nothing changed, so no EC2 call and no write")
    say(summary_line(invoke(events.scheduled_event())))

    victim = sorted(n["metadata"]["name"] for n in nodes if n["metadata"]["name"].startswith("i-"))[0]
    step(4, f"Someone edits a label by hand on {victim}; the next pass corrects it (no EC2 call)")
    kubectl(stack, "label", "node", victim, f"{layer_label(3)}=nn-edited-by-hand", "--overwrite")
    say(summary_line(invoke(events.scheduled_event())))
    escaped = layer_label(3).replace(".", "\\.")
    kubectl(stack, "get", "node", victim, "-o", f"jsonpath={{.metadata.labels.{escaped}}}")
    say()

    step(5, "A new p5.48xlarge starts: its state-change event triggers a targeted pass")
    (new,) = stack.add_instances([fleet.FleetGroup("p5.48xlarge", 1)])
    say(summary_line(invoke(events.state_change_event(new["InstanceId"]))))
    kubectl(stack, "get", "node", fleet.node_name(new), "-L", LAYER_COLUMNS)

    step(6, "The topology (topogov topology): Mermaid, from one list call")
    say(to_mermaid(tree_from_cluster(str(stack.kubeconfig))).rstrip())

    snap = stack.client("s3").get_object(Bucket="topogov-local-snapshot", Key="topology/snapshot.json")
    doc = json.loads(snap["Body"].read())
    step(7, "Snapshot written for the API and the CLI")
    say(
        f"s3://topogov-local-snapshot/topology/snapshot.json: {len(doc['instances'])} instances known, "
        f"{len(doc['nodes'])} nodes, tree depth {doc['tree']['depth']}"
    )
    governor_walkthrough(stack)
    if stack.api is not None:
        api_walkthrough(stack)


def governor_walkthrough(stack: Any) -> None:
    from topogov.domain.policy import load_policy_file
    from topogov.logic.governor import format_plan
    from topogov_local import events

    step(8, "The governor: Kueue objects rendered from teams.yaml (the first pass created them)")
    kubectl(
        stack, "get", "clusterqueues,localqueues,workloadpriorityclasses,topologies,resourceflavors", "-A"
    )
    say("Quotas are split over the GPU flavors by capacity, so the node added in step 5 moves them;")
    say("the next scheduled pass rewrites exactly the queues whose split changed:")
    say(governor_line(invoke(events.scheduled_event())["governor"]))
    cq = "hyperpod-ns-team-b-clusterqueue"
    say(f"Someone stops {cq} and changes its GPU quota by hand:")
    kubectl(
        stack,
        "patch",
        "clusterqueue",
        cq,
        "--type",
        "json",
        "-p",
        '[{"op":"replace","path":"/spec/stopPolicy","value":"Hold"},'
        '{"op":"replace","path":"/spec/resourceGroups/0/flavors/0/resources/0/nominalQuota","value":1}]',
    )
    say("$ topogov governor plan")
    say(format_plan(plan_now(stack, load_policy_file(str(stack.options.policy_file)))).rstrip())
    say("The next pass corrects it (and logs the correction with the differences):")
    say(governor_line(invoke(events.scheduled_event())["governor"]))
    kubectl(stack, "get", "clusterqueue", cq, "-o", "jsonpath={.spec.stopPolicy}")
    say()


def plan_now(stack: Any, policy: Any) -> Any:
    from topogov.adapters.kube_objects import KubeObjects
    from topogov.adapters.snapshot_store import S3SnapshotStore
    from topogov.logic.governor import Governor

    snapshot = S3SnapshotStore(stack.client("s3"), "topogov-local-snapshot").load()
    return Governor(KubeObjects(stack.kube())).plan(policy, snapshot)


def api_walkthrough(stack: Any) -> None:
    import concurrent.futures as cf

    import requests

    from topogov_cli.sigv4 import credentials_for_profile, signed_request
    from topogov_local.aws_example import AWS_EXAMPLE

    url = stack.api.url

    def post(profile: str, body: dict[str, Any], query: str = "") -> Any:
        creds = credentials_for_profile(profile, str(stack.credentials))
        return signed_request(
            "POST", f"{url}/v1/jobs{query}", credentials=creds, region="us-east-1", json_body=body
        )

    def show(resp: Any) -> None:
        body = resp.json()
        if "error" in body:
            err = body["error"]
            say(f"  -> {resp.status_code} {err['code']}: {err['message']}")
            if err.get("details"):
                say(f"     details: {json.dumps(err['details'])}")
        else:
            d = body["decision"]
            t = d["topology"]
            say(
                f"  -> {resp.status_code} team {d['team']}, "
                f"priority {d['priority_class']} ({d['priority_value']}), "
                f"{d['pods']} pods, topology {t['mode']} {t['level'] or ''}: {t['reason']}"
            )

    def gpu_job(name: str, **extra: Any) -> dict[str, Any]:
        return {"job_name": name, "image": "pytorch:2.5", "accelerators": 8, "efa": 32, **extra}

    step(9, f"The governance API on {url}: SigV4-signed requests, identity from the request context")
    say("AWS's own example (a raw Job, inference-priority, required layer-3), as team-a:")
    show(post("topogov-team-a", {"manifest": AWS_EXAMPLE}))
    say("A high-level job, 4 x 8 GPUs, required_topology layer-3, as team-a:")
    show(post("topogov-team-a", gpu_job("llm-finetune", replica_count=4, required_topology="layer-3")))
    say("8 x 8 GPUs required in one layer-3 domain (4 nodes each) can never fit:")
    show(post("topogov-team-a", gpu_job("too-wide", replica_count=8, required_topology="layer-3")))
    say("team-b asks for inference-priority, which its policy does not allow:")
    show(post("topogov-team-b", gpu_job("sneaky", replica_count=1, priority="inference-priority")))
    say("auto topology, dry run (nothing created or charged):")
    show(
        post(
            "topogov-team-a", gpu_job("auto-dry", replica_count=12, topology={"mode": "auto"}), "?dryRun=true"
        )
    )

    creds = credentials_for_profile("topogov-team-c", str(stack.credentials))
    team = signed_request("GET", f"{url}/v1/teams/team-c", credentials=creds, region="us-east-1").json()
    cap, before = team["max_in_flight"]["nvidia.com/gpu"], team["in_flight"]["nvidia.com/gpu"]
    n = cap // 8 + 8
    say(f"A burst of {n} concurrent 8-GPU submissions from team-c against its cap of {cap} GPUs in flight:")
    with cf.ThreadPoolExecutor(max_workers=16) as pool:
        codes = list(
            pool.map(lambda i: post("topogov-team-c", gpu_job(f"burst-{i}", efa=0)).status_code, range(n))
        )
    after = signed_request("GET", f"{url}/v1/teams/team-c", credentials=creds, region="us-east-1").json()
    used = after["in_flight"]["nvidia.com/gpu"]
    say(
        f"  -> {codes.count(201)} x 201, {codes.count(429)} x 429; in flight {before} -> {used} of {cap} GPUs"
    )
    unsigned = requests.get(f"{url}/v1/teams", timeout=10)
    say(f"An unsigned request: {unsigned.status_code} {unsigned.json()}")
    kubectl(stack, "get", "jobs", "-n", "hyperpod-ns-team-a")
    fallback_walkthrough(stack, post, show)


def fallback_walkthrough(stack: Any, post: Any, show: Any) -> None:
    import time

    from topogov_cli.jobs import job_text
    from topogov_cli.sigv4 import credentials_for_profile, signed_request
    from topogov_local import events

    step(10, "Time-bounded fallback: required layer-2, relaxed to preferred if not admitted in 3s")
    body = {
        "job_name": "wide-l2",
        "image": "pytorch:2.5",
        "accelerators": 8,
        "efa": 32,
        "replica_count": 8,
        "topology": {"mode": "required", "level": "layer-2", "fallbackAfter": "3s"},
    }
    say("team-a's ClusterQueue is stopped for the demo (stopPolicy: Hold), so Kueue admits nothing of it:")
    kubectl(stack, "patch", "clusterqueue", "hyperpod-ns-team-a-clusterqueue", "--type", "merge", "-p",
            '{"spec":{"stopPolicy":"Hold"}}')  # fmt: skip
    show(post("topogov-team-a", body))
    say("4 s later, the scheduled pass (its governor held back, or it would set the queue going first):")
    time.sleep(4)
    os.environ["TOPOGOV_GOVERNOR"] = "false"
    try:
        ledger = invoke(events.scheduled_event())["ledger"]
    finally:
        del os.environ["TOPOGOV_GOVERNOR"]
    say(f"  -> fallbacks this pass: {ledger['fallbacks']}")
    say("The next pass's governor sets the queue going again; Kueue admits the relaxed job:")
    invoke(events.scheduled_event())
    creds = credentials_for_profile("topogov-team-a", str(stack.credentials))
    view = signed_request(
        "GET", f"{stack.api.url}/v1/jobs/team-a/wide-l2", credentials=creds, region="us-east-1"
    ).json()
    say("$ topogov job wide-l2")
    say(job_text(view))


class Stopped(BaseException):
    """A stop signal arrived (SIGINT, SIGTERM, SIGHUP). A BaseException, so no ``except Exception``
    on the way swallows it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def run(args: argparse.Namespace) -> int:
    from topogov_local import fleet
    from topogov_local.stack import LocalStack, StackOptions

    options = StackOptions(
        directory=args.dir,
        fleet=args.fleet or fleet.DEFAULT_FLEET,
        extra_nodes=not args.no_extra_nodes,
        ec2_rate=args.ec2_rate,
        api_port=args.api_port,
    )
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        # Unwind whatever runs now (a walkthrough step, a pass): the stack stops in `finally`, its
        # children within ProcessManager's grace. A closed terminal (SIGHUP) is a stop like Ctrl-C.
        stop.set()
        raise Stopped(signum)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    # The functions' JSON logs go quiet here (set before their Logger is created); the walkthrough
    # prints what matters. Everything is still logged as in Lambda with POWERTOOLS_LOG_LEVEL=INFO.
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    say("Starting the local stack (EC2 + S3 on moto, a Kubernetes API) ...")
    stack = LocalStack(options)
    try:
        stack.start()
        os.environ.update(stack.env())
        endpoints = json.loads(stack.endpoints_file.read_text())
        say(f"ready: {json.dumps(endpoints)}")
        say(f"kubectl: export KUBECONFIG={stack.kubeconfig}")
        walkthrough(stack)
        if args.once:
            say()
            say("Walkthrough done (--once): stopping the stack.")
            return EXIT_OK
        from topogov_local import events

        say()
        say(f"Reconciling every {args.interval:g}s; Ctrl-C stops the stack.")
        while not stop.wait(args.interval):
            summary = invoke(events.scheduled_event())
            say(summary_line(summary))
            if summary.get("patched"):
                say(label_table(stack.kube().request("GET", "/api/v1/nodes").body["items"]))
        say("stopping")
        return EXIT_OK
    except Stopped as stopped:
        say(f"\n{signal.Signals(stopped.signum).name}: stopping the stack")
        return 128 + stopped.signum if stopped.signum != signal.SIGINT else 130
    finally:
        stack.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        sys.stdout.flush()
