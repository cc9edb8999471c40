"""EKS's own topology labels on the local stack (``topogov local --labelled-by-eks``): the nodes
start with the labels EKS writes from EC2's answers; the reconcile handler adopts them without an
EC2 call and writes nothing, verifies them on its cadence, and still corrects what it finds.

Real clients over HTTP throughout: the deployed reconcile function's handler, boto3 -> moto (+ the
emulated DescribeInstanceTopology), the Kubernetes API."""

from __future__ import annotations

import os

import pytest

from topogov.domain.labels import ZONE_ID_LABEL, layer_label
from topogov.handlers.reconcile import handler
from topogov_local import events, fleet
from topogov_local.lambda_context import LocalContext
from topogov_local.processes import environ
from topogov_local.stack import LocalStack, StackOptions

FLEET = "p5.48xlarge=12,p6-b200.48xlarge=2,c5.2xlarge=1"
GPU_NODES = 14


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    options = StackOptions(
        directory=tmp_path_factory.mktemp("local"),
        fleet=FLEET,
        ec2_rate=1000,
        ec2_burst=1000,
        api_port=None,
        labelled_by_eks=True,
    )
    with LocalStack(options) as s, environ({**s.env(), "TOPOGOV_EC2_RATE_PER_S": "1000"}):
        yield s


def full_pass():
    return handler(events.scheduled_event(), LocalContext())


def nodes(stack):
    return {o["metadata"]["name"]: o for o in stack.kube().request("GET", "/api/v1/nodes").body["items"]}


def truth(stack, iid):
    (item,) = stack.client("ec2").describe_instance_topology(InstanceIds=[iid])["Instances"]
    labels = {layer_label(i): n for i, n in enumerate(item["NetworkNodes"], start=1)}
    return {**labels, ZONE_ID_LABEL: item["ZoneId"]}


def owned(obj):
    return {k: v for k, v in obj["metadata"]["labels"].items() if k.startswith("topology.k8s.aws/")}


def gpu(stack, itype="p5.48xlarge"):
    return next(i for i in stack.instances if i["InstanceType"] == itype)


def test_1_the_nodes_start_with_ec2s_labels_as_eks_writes_them(stack):
    for itype, layers in (("p5.48xlarge", 3), ("p6-b200.48xlarge", 4)):
        inst = gpu(stack, itype)
        labels = owned(nodes(stack)[fleet.node_name(inst)])
        assert labels == truth(stack, inst["InstanceId"]) and len(labels) == layers + 1


def test_2_the_first_pass_adopts_them_asks_ec2_only_about_the_unlabelled_node_and_writes_nothing(stack):
    s = full_pass()
    assert (s["adopted"], s["k8s_writes"], s["patched"]) == (GPU_NODES, 0, 0)
    assert s["ec2_instances_asked"] == 1 and s["ec2_missing"] != []  # the c5: no labels, no topology
    assert s["with_topology"] == GPU_NODES and s["complete"]
    steady = full_pass()
    assert (steady["ec2_calls"], steady["k8s_writes"], steady["adopted"]) == (0, 0, 0)


def test_3_a_label_edited_by_hand_is_settled_by_ec2_and_corrected(stack):
    inst = gpu(stack)
    name = fleet.node_name(inst)
    stack.kube().request(
        "PATCH",
        f"/api/v1/nodes/{name}",
        body={"metadata": {"labels": {layer_label(3): "nn-edited-by-hand"}}},
        content_type="application/merge-patch+json",
    )
    s = full_pass()
    assert (s["ec2_instances_asked"], s["verified"], s["patched"], s["k8s_writes"]) == (1, 1, 1, 1)
    assert owned(nodes(stack)[name]) == truth(stack, inst["InstanceId"])


def test_4_after_verify_after_every_adopted_answer_is_verified_once_and_nothing_is_written(stack):
    with environ({"TOPOGOV_VERIFY_AFTER_S": "0.001"}):
        s = full_pass()
    assert s["verified"] == GPU_NODES  # the one corrected in test 3 too: EC2 confirmed its adopted answer
    assert s["k8s_writes"] == 0
    again = full_pass()  # back to the default (a day): not asked again
    assert (again["ec2_calls"], again["verified"]) == (0, 0)
    assert os.environ.get("TOPOGOV_VERIFY_AFTER_S") == stack.env().get("TOPOGOV_VERIFY_AFTER_S")  # restored


def test_5_a_stop_start_event_still_asks_ec2_and_moves_the_labels(stack):
    inst = gpu(stack)
    iid, name = inst["InstanceId"], fleet.node_name(inst)
    before = owned(nodes(stack)[name])
    ec2 = stack.client("ec2")
    ec2.stop_instances(InstanceIds=[iid])
    ec2.start_instances(InstanceIds=[iid])
    assert truth(stack, iid) != before  # the emulator moved it; the node still has the old labels
    s = handler(events.state_change_event(iid), LocalContext())
    assert (s["mode"], s["ec2_instances_asked"], s["patched"]) == ("targeted", 1, 1)
    assert owned(nodes(stack)[name]) == truth(stack, iid)


def test_6_a_new_node_labelled_by_eks_is_adopted_too(stack):
    (inst,) = stack.add_instances([fleet.FleetGroup("p5.48xlarge", 1)])
    s = full_pass()
    assert (s["adopted"], s["ec2_calls"], s["k8s_writes"]) == (1, 0, 0)
    assert owned(nodes(stack)[fleet.node_name(inst)]) == truth(stack, inst["InstanceId"])
