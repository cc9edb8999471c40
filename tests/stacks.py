"""The local stack as the end-to-end and hardening suites use it."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def labelled_stack(directory: Path, fleet: str, **options: Any) -> Iterator[Any]:
    """A local stack (EC2's bucket raised) whose environment is this process's while it runs, after
    one reconcile pass: nodes labelled, snapshot written, Kueue objects created."""
    from topogov_local import events
    from topogov_local.lambda_context import LocalContext
    from topogov_local.stack import LocalStack, StackOptions

    with LocalStack(
        StackOptions(directory=directory, fleet=fleet, ec2_rate=1000, ec2_burst=1000, **options)
    ) as stack:
        saved = dict(os.environ)
        os.environ.update(stack.env())
        os.environ["TOPOGOV_EC2_RATE_PER_S"] = "1000"
        try:
            from topogov.handlers.reconcile import handler

            handler(events.scheduled_event(), LocalContext())
            yield stack
        finally:
            os.environ.clear()
            os.environ.update(saved)


def wait_until(predicate: Any, what: str, timeout_s: float = 60, every_s: float = 0.2) -> Any:
    """``predicate()`` once it is truthy, else an AssertionError naming ``what``."""
    from topogov_local.processes import wait_until as until

    return until(predicate, what, timeout_s, every_s)


def hold_queue(stack: Any, queue: str, policy: str = "Hold") -> None:
    """Stop Kueue admitting to ClusterQueue ``queue`` (``stopPolicy``; "None" lets it go again)."""
    resp = stack.kube().request(
        "PATCH",
        f"/apis/kueue.x-k8s.io/v1beta2/clusterqueues/{queue}",
        body={"spec": {"stopPolicy": policy}},
        content_type="application/merge-patch+json",
    )
    assert resp.status == 200, resp.body


def pods_of(stack: Any, namespace: str, job: str) -> list[dict[str, Any]]:
    return (
        stack.kube()
        .request(
            "GET",
            f"/api/v1/namespaces/{namespace}/pods",
            query={"labelSelector": f"batch.kubernetes.io/job-name={job}"},
        )
        .body["items"]
    )


def node_labels(stack: Any) -> dict[str, dict[str, str]]:
    return {
        n["metadata"]["name"]: n["metadata"].get("labels") or {}
        for n in stack.kube().request("GET", "/api/v1/nodes").body["items"]
    }
