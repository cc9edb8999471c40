"""Walkthrough, part 1: the labeler keeps node labels equal to EC2's answer."""

from __future__ import annotations

from typing import Any

from topogov.domain.labels import layer_label
from topogov_cli.render import governor_line, summary_line
from topogov_local.walkthrough.console import Console, shown

L3 = layer_label(3)


def invoke(event: dict[str, Any]) -> dict[str, Any]:
    """Run the reconcile Lambda handler in-process, exactly as Lambda would call it."""
    from topogov.handlers.reconcile import handler
    from topogov_local.lambda_context import LocalContext

    return handler(event, LocalContext())


def labeler(c: Console) -> None:
    from topogov_local import events, fleet

    stack = c.stack
    nodes = stack.kube().request("GET", "/api/v1/nodes").body["items"]
    gpu = sum(1 for n in nodes if "nvidia.com/gpu" in (n.get("status") or {}).get("allocatable", {}))
    c.step(1, f"A fleet of {len(nodes)} nodes ({gpu} with GPUs), no topology labels yet")
    c.kubectl("get", "nodes", "-L", L3, "--sort-by=.metadata.name", max_lines=4)

    c.step(2, "First pass (the EventBridge schedule): EC2 is asked once per 100 instances")
    first = invoke(events.scheduled_event())
    c.say(summary_line(first))
    if "governor" in first:
        c.say(governor_line(first["governor"]))
    c.kubectl("get", "nodes", "-L", L3, "--sort-by=.metadata.name", max_lines=4)

    c.step(3, "Steady pass: nothing changed, so no EC2 call and no write")
    c.say(summary_line(invoke(events.scheduled_event())))

    victim = sorted(n["metadata"]["name"] for n in nodes if n["metadata"]["name"].startswith("i-"))[0]
    c.step(4, "Someone edits a label by hand; the next pass puts EC2's value back (no EC2 call)")
    c.kubectl("label", "node", victim, f"{L3}=nn-edited-by-hand", "--overwrite")
    c.say(summary_line(invoke(events.scheduled_event())))
    c.kubectl("get", "node", victim, "-L", L3)

    c.step(5, "A new p5.48xlarge starts: its state-change event triggers a targeted pass")
    (new,) = stack.add_instances([fleet.FleetGroup("p5.48xlarge", 1)])
    c.say(summary_line(invoke(events.state_change_event(new["InstanceId"]))))
    c.kubectl("get", "node", fleet.node_name(new), "-L", L3)

    c.step(6, "The topology the API decides on (from the snapshot the pass wrote)")
    mermaid = stack.dir / "topology.mmd"
    c.topogov("topogov-admin", "topology", "--format", "tree", "--depth", "2")
    c.topogov("topogov-admin", "topology", "--out", str(mermaid), show=False)
    c.say(f"(every layer and node as Mermaid, like AWS's visualize_topology.sh: {shown(mermaid)})")
