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

from topogov.cli.main import EXIT_OK
from topogov.cli.render import label_table, summary_line
from topogov.domain.labels import ZONE_ID_LABEL, layer_label

LAYER_COLUMNS = ",".join([*(layer_label(i) for i in range(1, 5)), ZONE_ID_LABEL])


def say(text: str = "") -> None:
    print(text, flush=True)


def step(n: int, title: str) -> None:
    say()
    say(f"== {n}. {title}")


def invoke(event: dict[str, Any]) -> dict[str, Any]:
    """Run the reconcile Lambda handler in-process, exactly as Lambda would call it."""
    from topogov.handlers.reconcile import handler
    from topogov.local.lambda_context import LocalContext

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
    from topogov.cli.topology_cmd import tree_from_cluster
    from topogov.domain.tree import to_mermaid
    from topogov.local import events, fleet

    kube = stack.kube()
    nodes = kube.request("GET", "/api/v1/nodes").body["items"]
    step(1, f"A fleet of {len(nodes)} nodes, no topology labels yet")
    kubectl(stack, "get", "nodes", "-L", LAYER_COLUMNS, max_lines=6)

    step(2, "First pass (the EventBridge schedule): EC2 is asked once per 100 instances")
    first = invoke(events.scheduled_event())
    say(summary_line(first))
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


def run(args: argparse.Namespace) -> int:
    from topogov.local import fleet
    from topogov.local.stack import LocalStack, StackOptions

    options = StackOptions(
        directory=args.dir,
        fleet=args.fleet or fleet.DEFAULT_FLEET,
        extra_nodes=not args.no_extra_nodes,
        ec2_rate=args.ec2_rate,
    )
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
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
        from topogov.local import events

        say()
        say(f"Reconciling every {args.interval:g}s; Ctrl-C stops the stack.")
        while not stop.wait(args.interval):
            summary = invoke(events.scheduled_event())
            say(summary_line(summary))
            if summary.get("patched"):
                say(label_table(stack.kube().request("GET", "/api/v1/nodes").body["items"]))
        say("stopping")
        return EXIT_OK
    finally:
        stack.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        sys.stdout.flush()
