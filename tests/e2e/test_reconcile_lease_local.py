"""The reconcile handler's lease on the local stack (the deployed counters table, the reconciler's
deployed role): an event that finds a pass running defers its instance to it instead of running
beside it, and the instance is still labelled — by the pass holding the lease, or the next one."""

from __future__ import annotations

import time

from topogov.adapters.lease import DynamoLease
from topogov.domain.labels import layer_label
from topogov.handlers.reconcile import handler
from topogov_local import events
from topogov_local.lambda_context import LocalContext


def lease_of(stack):
    return DynamoLease(stack.client("dynamodb"), stack.output("CountersTable"))


def an_instance(stack):
    for node in stack.kube().request("GET", "/api/v1/nodes").body["items"]:
        labels = node["metadata"].get("labels") or {}
        if labels.get("node.kubernetes.io/instance-type") == "p5.48xlarge":
            return node["spec"]["providerID"].rsplit("/", 1)[1]
    raise AssertionError("no p5.48xlarge node")


def node_of(stack, instance_id):
    for node in stack.kube().request("GET", "/api/v1/nodes").body["items"]:
        if node["spec"].get("providerID", "").endswith("/" + instance_id):
            return node
    raise AssertionError(f"no node for {instance_id}")


def unlabel(stack, node):
    body = {"metadata": {"labels": {layer_label(3): None}}}
    resp = stack.kube().request(
        "PATCH", f"/api/v1/nodes/{node['metadata']['name']}", body=body,
        content_type="application/merge-patch+json",
    )  # fmt: skip
    assert resp.status == 200, resp.body


def test_an_event_during_a_pass_is_deferred_to_it_and_labelled_when_the_lease_is_next_taken(stack):
    # Given a first full pass (every node labelled), then another pass holding the lease
    assert handler(events.scheduled_event(), LocalContext())["complete"]
    instance = an_instance(stack)
    node = node_of(stack, instance)
    unlabel(stack, node)  # a label the state change's targeted pass must restore
    other = lease_of(stack).acquire("another-pass", time.time(), 60)
    assert other is not None
    # When the instance's "running" event arrives while that pass runs
    answer = handler(events.state_change_event(instance), LocalContext())
    # Then it does not run beside it: it defers its instance and stops
    assert answer == {"skipped_pass": "another pass holds the lease", "deferred": [instance]}
    assert layer_label(3) not in node_of(stack, instance)["metadata"]["labels"]
    # When that pass lets go (it ran out of time) and the next scheduled pass takes the lease
    lease_of(stack).force_release(other)
    result = handler(events.scheduled_event(), LocalContext())
    # Then the next pass runs the deferred instance as the event's targeted pass would have
    (deferred,) = result["deferred_passes"]
    assert deferred["mode"] == "targeted" and deferred["complete"]
    assert layer_label(3) in node_of(stack, instance)["metadata"]["labels"]
    # and the lease is free again
    after = lease_of(stack).acquire("after", time.time(), 60)
    assert after is not None
    lease_of(stack).force_release(after)


def test_a_lease_left_by_a_pass_that_died_expires_with_it(stack):
    # Given a pass that took the lease 100 s ago for 90 s, and died
    dead = lease_of(stack).acquire("died", time.time() - 100, 90)
    assert dead is not None
    assert lease_of(stack).acquire("too-early", time.time() - 20, 60) is None  # it held then
    # When the next scheduled pass starts, it takes the expired lease and runs
    result = handler(events.scheduled_event(), LocalContext())
    assert result["complete"] and "skipped_pass" not in result
