"""The reconcile handler end to end on the local stack: EC2 topology -> node labels.

Every step goes through the real clients over HTTP: boto3 -> moto (+ DescribeInstanceTopology),
the kubernetes client and kubectl -> the local Kubernetes API.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from topogov.bootstrap import build_labeler
from topogov.domain.labels import ZONE_ID_LABEL, layer_label
from topogov.handlers.reconcile import handler
from topogov.logic.labeler import PassOptions
from topogov.settings import ReconcileSettings
from topogov_local import events, fleet
from topogov_local.lambda_context import LocalContext

pytestmark = pytest.mark.usefixtures("stack")


def invoke(event):
    return handler(event, LocalContext())


def full_pass():
    return invoke(events.scheduled_event())


def truth(stack, instance_ids):
    """EC2's own answer, asked directly: what every node's labels must equal."""
    ec2 = stack.client("ec2")
    out = {}
    ids = list(instance_ids)
    for i in range(0, len(ids), 100):
        for item in ec2.describe_instance_topology(InstanceIds=ids[i : i + 100])["Instances"]:
            out[item["InstanceId"]] = item
    return out


def nodes(stack):
    return {o["metadata"]["name"]: o for o in stack.kube().request("GET", "/api/v1/nodes").body["items"]}


def owned(labels):
    return {k: v for k, v in labels.items() if k.startswith("topology.k8s.aws/")}


def expected(item):
    labels = {layer_label(i): n for i, n in enumerate(item["NetworkNodes"], start=1)}
    labels[ZONE_ID_LABEL] = item["ZoneId"]
    return labels


def assert_converged(stack):
    objs = nodes(stack)
    by_instance = {
        o["spec"]["providerID"].rsplit("/", 1)[-1]: o
        for o in objs.values()
        if o.get("spec", {}).get("providerID", "").startswith("aws:///us-east-1a/i-")
    }
    answer = truth(stack, by_instance)
    for iid, obj in by_instance.items():
        labels = obj["metadata"].get("labels") or {}
        if iid in answer:
            assert owned(labels) == expected(answer[iid]), obj["metadata"]["name"]
    return answer


def kubectl(stack, *args):
    assert shutil.which("kubectl"), "kubectl is required (make kubectl)"
    out = subprocess.run(
        ["kubectl", "--kubeconfig", str(stack.kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_1_first_pass_labels_every_supported_node_and_counts_every_skip(stack):
    s = full_pass()
    assert s["ec2_calls"] == 1  # 19 instances: one batch
    assert s["patched"] == 18 and s["failed"] == 0 and s["complete"]
    assert s["skipped"] == {
        "hyperpod_managed": 1,
        "malformed_provider_id": 1,
        "no_provider_id": 1,
        "not_ec2": 2,
        "not_in_ec2_answer": 1,
    }
    answer = assert_converged(stack)
    four = [i for i in answer.values() if i["InstanceType"] == "p6-b200.48xlarge"]
    assert len(four) == 2 and all(len(i["NetworkNodes"]) == 4 for i in four)
    # the non-EC2 nodes were left alone
    assert owned(nodes(stack)["hybrid-node-1"]["metadata"]["labels"]) == {}


def test_2_steady_pass_asks_ec2_nothing_and_writes_nothing(stack):
    s = full_pass()
    assert (s["ec2_calls"], s["k8s_writes"], s["patched"], s["unchanged"]) == (0, 0, 0, 18)


def test_3_a_label_edited_with_kubectl_is_corrected_and_foreign_labels_stay(stack):
    name = sorted(n for n in nodes(stack) if n.startswith("i-"))[0]
    kubectl(stack, "label", "node", name, f"{layer_label(2)}=nn-by-hand", "team=research", "--overwrite")
    s = full_pass()
    assert (s["patched"], s["ec2_calls"], s["k8s_writes"]) == (1, 0, 1)
    labels = json.loads(kubectl(stack, "get", "node", name, "-o", "jsonpath={.metadata.labels}"))
    assert labels["team"] == "research"
    assert_converged(stack)


def test_4_a_layer_deeper_than_ec2_reports_is_removed(stack):
    name = next(
        n
        for n, o in nodes(stack).items()
        if o["metadata"]["labels"].get("node.kubernetes.io/instance-type") == "p5.48xlarge"
    )
    kubectl(stack, "label", "node", name, f"{layer_label(4)}=nn-stale")
    s = full_pass()
    assert s["patched"] == 1
    assert layer_label(4) not in nodes(stack)[name]["metadata"]["labels"]


def test_5_stop_start_moves_an_instance_and_its_event_relabels_only_it(stack):
    ec2 = stack.client("ec2")
    inst = next(i for i in stack.instances if i["InstanceType"] == "p5.48xlarge")
    iid, name = inst["InstanceId"], fleet.node_name(inst)
    before = owned(nodes(stack)[name]["metadata"]["labels"])
    ec2.stop_instances(InstanceIds=[iid])
    ec2.start_instances(InstanceIds=[iid])
    assert expected(truth(stack, [iid])[iid]) != before  # the emulator moved it
    s = invoke(events.state_change_event(iid))
    assert (s["mode"], s["nodes_seen"], s["ec2_calls"], s["patched"]) == ("targeted", 1, 1, 1)
    assert s["k8s_reads"] == 1  # one GET: the snapshot knew the node
    assert_converged(stack)


def test_6_events_other_than_running_are_ignored(stack):
    assert invoke(events.state_change_event("i-0123456789abcdef0", "stopped")) == {"ignored": True}


def test_7_a_new_instance_before_its_node_registers_then_after(stack):
    (inst,) = stack.add_instances([fleet.FleetGroup("p5.48xlarge", 1)], register=False)
    s = invoke(events.state_change_event(inst["InstanceId"]))
    assert s["skipped"] == {"node_not_registered": 1} and s["ec2_calls"] == 1
    fleet.register_nodes(stack.kube(), [inst])
    s = full_pass()
    assert s["patched"] == 1 and s["ec2_calls"] == 0  # the event's answer was kept


def test_8_a_node_deleted_mid_pass_and_a_500_for_one_node_do_not_stop_the_others(stack):
    kube = stack.kube()
    names = sorted(
        n
        for n, o in nodes(stack).items()
        if o["metadata"]["labels"].get("node.kubernetes.io/instance-type") == "p5.48xlarge"
    )[:3]
    for n in names:
        kubectl(stack, "label", "node", n, f"{layer_label(3)}=nn-drift", "--overwrite")
    kube.request(
        "POST",
        "/_emulator/faults",
        body={"method": "PATCH", "path": f"/api/v1/nodes/{names[0]}$", "delete_before": True, "times": 1},
    )
    kube.request(
        "POST",
        "/_emulator/faults",
        body={"method": "PATCH", "path": f"/api/v1/nodes/{names[1]}$", "status": 500, "times": 100},
    )
    s = full_pass()
    kube.request("DELETE", "/_emulator/faults")
    assert (s["patched"], s["failed"], s["skipped"].get("node_gone")) == (1, 1, 1)
    assert s["failures"][0]["node"] == names[1] and not s["complete"]
    s = full_pass()  # the next pass converges
    assert (s["patched"], s["failed"]) == (1, 0)
    assert_converged(stack)


def test_9_an_ec2_throttling_storm_is_retried_then_reported_and_the_next_pass_converges(stack):
    from tests.integration.conftest import set_topology_rate

    stack.add_instances([fleet.FleetGroup("p5.48xlarge", 150)])
    settings = ReconcileSettings.from_env().model_copy(update={"ec2_max_attempts": 2, "ec2_rate_per_s": 1000})
    labeler = build_labeler(settings)
    set_topology_rate(stack.aws_url, 0.01, 1)
    try:
        s = labeler.run(PassOptions())
    finally:
        set_topology_rate(stack.aws_url, 1000, 1000)
    assert "RequestLimitExceeded" in (s.ec2_error or "")
    assert s.patched == 100 and s.skipped["pending"] == 50 and not s.complete
    s = full_pass()
    assert s["patched"] == 50 and s["ec2_calls"] == 1
    assert_converged(stack)


def test_10_the_snapshot_has_the_tree_and_capacity(stack):
    obj = stack.client("s3").get_object(Bucket=stack.output("SnapshotBucket"), Key="topology/snapshot.json")
    doc = json.loads(obj["Body"].read())
    assert doc["tree"]["depth"] == 4
    gpus = sum(d["allocatable"]["gpu"] for d in doc["tree"]["domains"])
    placed = [n for n in doc["nodes"] if n["path"]]
    assert gpus == 8 * len(placed)
    assert "hybrid-node-1" in doc["tree"]["unplaced"]


def test_the_labeler_runs_under_its_rbac_and_admission_policy_and_the_real_server_enforces_them(stack):
    """deploy/rbac.yaml, applied to the local cluster as on EKS: the reconciler's identity may patch a
    node's topology labels (the pass does), but the ValidatingAdmissionPolicy refuses any other label
    and RBAC any Job it has no verb for; the API's identity may not touch nodes at all."""
    from topogov.adapters.kube import KubeHttp
    from topogov.adapters.kube_auth import kubeconfig_api_client

    reconciler = KubeHttp(kubeconfig_api_client(str(stack.reconciler_kubeconfig)), max_attempts=1)
    api = KubeHttp(kubeconfig_api_client(str(stack.api_kubeconfig)), max_attempts=1)
    name = next(n for n in nodes(stack) if n.startswith("i-"))
    merge = "application/merge-patch+json"
    ok = reconciler.request(
        "PATCH",
        f"/api/v1/nodes/{name}",
        body={"metadata": {"labels": {layer_label(3): "nn-own"}}},
        content_type=merge,
    )
    assert ok.status == 200
    refused = reconciler.request(
        "PATCH", f"/api/v1/nodes/{name}", body={"metadata": {"labels": {"team": "mine"}}}, content_type=merge
    )
    assert refused.status == 403 and "topogov-reconciler-node-topology-labels-only" in refused.body["message"]
    assert "team" in refused.body["message"]
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "not-mine"}, "spec": {}}
    created = reconciler.request("POST", "/apis/batch/v1/namespaces/hyperpod-ns-team-a/jobs", body=job)
    assert created.status == 403 and 'cannot create resource "jobs"' in created.body["message"]
    assert api.request("GET", "/api/v1/nodes").status == 403
    assert api.request("GET", "/apis/batch/v1/namespaces/hyperpod-ns-team-a/jobs").status == 200
    assert api.request("GET", "/apis/batch/v1/namespaces/default/jobs").status == 403
    full_pass()  # the pass puts the label back to EC2's answer
    assert_converged(stack)


def test_kubectl_auth_can_i_answers_as_deploy_rbac_yaml_grants(stack):
    """``kubectl auth can-i`` (a SubjectAccessReview the real RBAC authorizer answers) for the two
    groups of ``deploy/rbac.yaml``: the labeler may patch nodes and list pods cluster-wide, the API
    may only create jobs and list pods in a team's namespace (issue 14)."""

    def can(verb, resource, group, namespace=None):
        args = ["auth", "can-i", verb, resource, "--as", "someone", "--as-group", group]
        args += ["-n", namespace] if namespace else []
        out = subprocess.run(
            ["kubectl", "--kubeconfig", str(stack.kubeconfig), *args],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        return out.stdout.strip()

    assert can("patch", "nodes", "topogov:reconciler") == "yes"
    assert can("list", "pods", "topogov:reconciler") == "yes"
    assert can("update", "nodes", "topogov:reconciler") == "no"
    assert can("patch", "nodes", "topogov:api") == "no"
    assert can("create", "jobs", "topogov:api", "hyperpod-ns-team-a") == "yes"
    assert can("list", "pods", "topogov:api", "hyperpod-ns-team-a") == "yes"
    assert (
        can("get", "pods", "topogov:api", "hyperpod-ns-team-a") == "no"
    )  # listed by label, never read by name
    assert can("create", "jobs", "topogov:api", "default") == "no"


def test_a_node_whose_instance_id_is_all_digits_becomes_ready(stack):
    """KWOK's node stage renders the Node's ``status.nodeInfo`` into YAML: a ``machineID`` of digits
    only (an instance id such as ``i-93062104936921069``, about 1 in 3,000) was read back as a
    number and the node never got Ready (seen in CI). Found by the stack's wait for its nodes."""
    from topogov_local import fleet

    instance = {"InstanceId": "i-93062104936921069", "InstanceType": "p5.48xlarge",
                "Placement": {"AvailabilityZone": "us-east-1a"}, "PrivateIpAddress": "10.0.99.9"}  # fmt: skip
    name = fleet.register_nodes(stack.kube(), [instance])[0]
    try:
        stack.wait_nodes_settled([name], timeout_s=30)
    finally:
        stack.kube().request("DELETE", f"/api/v1/nodes/{name}")
