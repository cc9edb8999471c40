"""The local stack as the end-to-end and hardening suites use it."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
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


# --- one stack per kind and per process, shared by the modules that use the same options ------------

API_FLEET = "p5.48xlarge=64,p6-b200.48xlarge=4,c5.2xlarge=2"
LABELER_FLEET = "p5.48xlarge=16,p6-b200.48xlarge=2,c5.2xlarge=1"
RATE_ENV = {"TOPOGOV_EC2_RATE_PER_S": "1000"}


@dataclass(frozen=True)
class Kind:
    """A set of options modules start a stack with today; ``labelled``: one reconcile pass after the
    start (and after each reset), as :func:`labelled_stack`."""

    fleet: str
    labelled: bool
    api_snapshot_ttl_s: float | None = None


KINDS = {
    # the API's suites: e2e/test_api_local, test_cli_jobs, test_readme and the hardening suites
    "api": Kind(API_FLEET, labelled=True),
    # the labeler's: e2e/conftest.py's stack (test_cli, test_labeler_local, ...), no pass; also the
    # dashboard's (its own pass, an API that reads the snapshot at every request)
    "labeler": Kind(LABELER_FLEET, labelled=False, api_snapshot_ttl_s=0),
}


@dataclass
class Shared:
    stack: Any
    baseline: Any
    used: bool = False  # a module has had it since the last reset


class SharedStacks:
    """One local stack per :data:`KINDS` entry in this process (an xdist worker), started by the first
    module that asks for it and put back as it was just after its start
    (:func:`topogov_local.stack_reset.reset`) before each next module gets it; all stopped when the
    session ends. Each lives in ``<root>/<kind>/.topogov/local``, as ``topogov local`` run in
    ``<root>/<kind>`` would make it; between a module's end and the next acquire its servers are
    paused (:meth:`release`)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.stacks: dict[str, Shared] = {}
        self.resets = 0

    def acquire(self, kind: str) -> Any:
        shared = self.stacks.get(kind)
        if shared is None:
            shared = self.stacks[kind] = self._start(kind)
        else:
            shared.stack.resume()
            if shared.used:
                self.reset(kind)
        shared.used = True
        return shared.stack

    def reset(self, kind: str) -> None:
        """Back to the state after the start; a refused call of a function's role since the last
        reset fails the session's least-privilege check (IAM_DENIED), as a stop would."""
        from topogov_local.stack import IAM_DENIED
        from topogov_local.stack_reset import reset

        shared = self.stacks[kind]
        IAM_DENIED.extend(reset(shared.stack, shared.baseline))
        if KINDS[kind].labelled:
            first_pass(shared.stack)
        shared.used = False
        self.resets += 1

    def release(self, kind: str) -> None:
        """A module is done with its stack: the refusals its calls met are counted now (the root
        conftest's check of the module reads IAM_DENIED), not when the stack stops."""
        from topogov_local.stack import IAM_DENIED
        from topogov_local.stack_reset import take_iam_decisions

        shared = self.stacks[kind]
        shared.used = True  # whatever the module did since it acquired it, or since it reset it
        IAM_DENIED.extend(take_iam_decisions(shared.stack))
        # Paused until a module acquires it again (LocalStack.pause): an idle stack used about 5 %
        # of a core, and a worker keeps each kind it started until the session ends. Whatever the
        # module left running (jobs, pods) stands still meanwhile; the next acquire's reset removes it.
        shared.stack.pause()

    def _start(self, kind: str) -> Shared:
        from topogov_local.stack import LocalStack, StackOptions
        from topogov_local.stack_reset import Baseline

        spec = KINDS[kind]
        directory = self.root / kind / ".topogov" / "local"
        options = StackOptions(
            directory=directory,
            fleet=spec.fleet,
            ec2_rate=1000,
            ec2_burst=1000,
            api_port=0,
            api_snapshot_ttl_s=spec.api_snapshot_ttl_s,
        )
        stack = LocalStack(options).start()
        try:
            if spec.labelled:
                first_pass(stack)
            return Shared(stack, Baseline.take(stack))
        except BaseException:
            stack.stop()
            raise

    def close(self) -> None:
        for shared in self.stacks.values():
            shared.stack.stop()
        self.stacks.clear()


def first_pass(stack: Any) -> None:
    """One reconcile pass with the stack's environment: nodes labelled, snapshot written, Kueue's
    objects created."""
    from topogov.handlers.reconcile import handler
    from topogov_local import events
    from topogov_local.lambda_context import LocalContext
    from topogov_local.processes import environ

    with environ({**stack.env(), **RATE_ENV}):
        handler(events.scheduled_event(), LocalContext())


@contextlib.contextmanager
def shared_stack(stacks: SharedStacks, kind: str) -> Iterator[Any]:
    """The worker's stack of ``kind`` for one module, its environment this process's meanwhile (and
    the environment as it was before once the module ends, whatever the module changed in it)."""
    stack = stacks.acquire(kind)
    saved = dict(os.environ)
    os.environ.update({**stack.env(), **RATE_ENV})
    try:
        yield stack
    finally:
        os.environ.clear()
        os.environ.update(saved)
        stacks.release(kind)


def process_state(pid: int) -> str:
    """The state letter of ``pid`` in ``/proc/<pid>/stat`` (``T``: stopped, as a paused server is)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
        return fh.read().rsplit(")", 1)[1].split()[0]


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
