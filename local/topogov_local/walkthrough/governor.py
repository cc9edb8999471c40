"""Walkthrough, part 2: the governor keeps Kueue's objects equal to the team policy."""

from __future__ import annotations

from typing import Any

from topogov_cli.render import governor_line
from topogov_local.walkthrough.console import Console
from topogov_local.walkthrough.labeler import invoke

TEAM_B_QUEUE = "hyperpod-ns-team-b-clusterqueue"


def governor(c: Console) -> None:
    from topogov_local import events
    from topogov_local.walkthrough.jobs import P5, p5_quotas

    stack = c.stack
    c.step(7, "The governor: Kueue's objects from teams.yaml (the first pass created them)")
    c.kubectl("get", "topologies,resourceflavors,workloadpriorityclasses,clusterqueues")
    c.note(
        "Each team's quota is split over the GPU flavors by their capacity ("
        + ", ".join(f"{t} {q} {P5} GPUs" for t, (q, _) in p5_quotas(c).items())
        + "), so the node added in step 5 moves it; the next pass rewrites exactly the queues that "
        "changed:"
    )
    c.say(governor_line(invoke(events.scheduled_event())["governor"]))
    c.say("Someone stops team-b's ClusterQueue by hand:")
    c.kubectl(
        "patch", "clusterqueue", TEAM_B_QUEUE, "--type", "merge", "-p", '{"spec":{"stopPolicy":"Hold"}}'
    )
    c.topogov(None, "governor", "plan", *local_flags(stack))
    c.say("The next pass corrects it:")
    c.say(governor_line(invoke(events.scheduled_event())["governor"]))
    c.kubectl("get", "clusterqueue", TEAM_B_QUEUE, "-o", "jsonpath={.spec.stopPolicy}{'\\n'}")


def local_flags(stack: Any) -> list[str]:
    """Nothing when the stack is in ./.topogov/local (the commands find it); else where it is."""
    from topogov_cli.common import LOCAL_DIR

    if stack.dir == LOCAL_DIR.resolve():
        return []
    return ["--kubeconfig", str(stack.kubeconfig), "--bucket", stack.output("SnapshotBucket")]
