"""Walkthrough of ``topogov local --hyperpod``: the local stack as a SageMaker HyperPod cluster whose task
governance add-on (emulated, ``local/topogov_local/hyperpod/``) keeps Kueue's objects; Topogov reads them.

The example Job is AWS's, as published (``examples/test-tas-job.yaml``: a batch/v1 Job in
``hyperpod-ns-team-a`` with the add-on's LocalQueue and the
``kueue.x-k8s.io/podset-required-topology: topology.k8s.aws/network-node-layer-3`` annotation).
"""

from __future__ import annotations

import copy
import json
import os
import time
from typing import Any

from topogov.domain.labels import HYPERPOD_HEALTH_LABEL, INSTANCE_TYPE_LABEL, layer_label
from topogov.domain.quantity import GPU, parse_quantity
from topogov_cli.render import governor_line, summary_line
from topogov_local.walkthrough.console import Console, shown
from topogov_local.walkthrough.labeler import invoke


def example_job() -> dict[str, Any]:
    """AWS's example Job as AWS publishes it (``examples/test-tas-job.yaml``): 10 pods that must share one
    layer-3 network node, in ``hyperpod-ns-team-a`` with the add-on's LocalQueue, submitted as is."""
    from topogov_local.aws_example import AWS_EXAMPLE

    return copy.deepcopy(AWS_EXAMPLE)


def example_pods() -> int:
    return int(example_job()["spec"]["parallelism"])


def nominal_gpus(cluster_queue: dict[str, Any]) -> int:
    """A ClusterQueue's nominal GPU quota, over all its flavors."""
    return sum(
        int(parse_quantity(str(r.get("nominalQuota", 0))))
        for group in (cluster_queue.get("spec") or {}).get("resourceGroups") or []
        for flavor in group.get("flavors") or []
        for r in flavor.get("resources") or []
        if r.get("name") == GPU
    )


def policy_with_more_gpus(text: str, team: str, now: int, more: int) -> tuple[str, int]:
    """teams.yaml's ``text`` with ``team``'s GPU quota ``now`` raised by ``more`` (the team's
    ``quota: {nvidia.com/gpu: N, ...}`` line), and the new quota."""
    start = text.index(f"\n  {team}:\n")
    old, new = f"quota: {{{GPU}: {now},", f"quota: {{{GPU}: {now + more},"
    at = text.index(old, start)
    return text[:at] + new + text[at + len(old) :], now + more


def hyperpod_walkthrough(c: Console) -> None:
    """The steps of ``topogov local --hyperpod``."""
    from topogov_local import events

    stack = c.stack
    c.step(1, "A SageMaker HyperPod cluster: HyperPod's nodes, labelled by HyperPod (a few unhealthy)")
    c.kubectl(
        "get", "nodes", "-l", "sagemaker.amazonaws.com/compute-type=hyperpod", "-L", INSTANCE_TYPE_LABEL,
        "-L", HYPERPOD_HEALTH_LABEL, "-L", layer_label(3), "--sort-by=.metadata.name", max_lines=6,
    )  # fmt: skip
    c.step(2, "`cdk deploy` made teams.yaml the cluster's ComputeQuotas; the add-on wrote Kueue's objects")
    c.say(f"  HyperPod cluster {stack.hyperpod_arn}")
    c.kubectl("get", "clusterqueues,localqueues", "-A", max_lines=8)
    c.step(3, "A reconcile pass in HyperPod mode: no node label, no EC2 call, no Kueue object written")
    summary = invoke(events.scheduled_event())
    c.say(summary_line(summary))
    c.note(f"  mode: {summary['cluster_mode_why']}", indent=4)
    c.say(governor_line(summary["governor"]))
    _example_job(c)
    hyp_job(c)
    _policy_change(c)


def _example_job(c: Console) -> None:
    kube, namespace = c.stack.kube(), "hyperpod-ns-team-a"
    c.step(4, "AWS's example Job: required topology network-node-layer-3, submitted with kubectl")
    job, count = example_job(), example_pods()
    c.say(json.dumps(job["spec"]["template"]["metadata"], indent=None))
    resp = kube.request("POST", f"/apis/batch/v1/namespaces/{namespace}/jobs", body=job)
    if resp.status not in (201, 409):
        raise RuntimeError(f"creating the example Job: HTTP {resp.status} {resp.body}")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        pods = kube.request(
            "GET", f"/api/v1/namespaces/{namespace}/pods", query={"labelSelector": "job-name=test-tas-job"}
        ).body["items"]
        if sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Running") == count:
            break
        time.sleep(1.0)
    c.kubectl("get", "pods", "-n", namespace, "-o", "wide")
    nodes = {n["metadata"]["name"]: n for n in kube.request("GET", "/api/v1/nodes").body["items"]}
    domains = {
        nodes[p["spec"]["nodeName"]]["metadata"]["labels"].get(layer_label(3))
        for p in kube.request(
            "GET", f"/api/v1/namespaces/{namespace}/pods", query={"labelSelector": "job-name=test-tas-job"}
        ).body["items"]
        if (p.get("spec") or {}).get("nodeName") in nodes
    }
    c.say(f"  -> the pods' layer-3 domain(s): {', '.join(sorted(d for d in domains if d))}")


def hyp_job(c: Console) -> None:
    """AWS's CLI, unmodified: ``hyp create hyp-pytorch-job`` as team-a, the stand-in training operator
    running it (``hyperpod/operator.py``), Kueue placing it; then ``hyp list`` and ``topogov jobs``."""
    from topogov_local.hyperpod import hyp

    namespace, job = "hyperpod-ns-team-a", "demo"
    c.step(5, "`hyp create hyp-pytorch-job` (AWS's HyperPod CLI) as team-a: the training operator runs it")
    if not hyp.available():
        c.say(f"  ({hyp.missing_reason()})")
        return
    args = hyp.create_command(
        job, image="pytorch:latest", queue=f"{namespace}-localqueue", priority="training-priority"
    )
    c.note(f"  hyp's kubeconfig: context {hyp.CONTEXT}, namespace {namespace} "
           f"({shown(hyp.write_kubeconfig(c.stack, namespace))})", indent=2)  # fmt: skip
    _hyp(c, namespace, *args)
    kube = c.stack.kube()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        pods = kube.request(
            "GET", f"/api/v1/namespaces/{namespace}/pods", query={"labelSelector": f"HPJob={job}"}
        ).body["items"]
        if sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Running") == 4:
            break
        time.sleep(1.0)
    c.kubectl("get", "pods", "-n", namespace, "-l", f"HPJob={job}", "-o", "wide")
    _hyp(c, namespace, "list", "hyp-pytorch-job", "-n", namespace)
    c.topogov("topogov-team-a", "jobs", "--team", "team-a")


def _hyp(c: Console, namespace: str, *args: str) -> None:
    from topogov_local.hyperpod import hyp

    c.command("[team-a] $ ", ["hyp", *args])
    out = hyp.run(c.stack, *args, namespace=namespace)
    text = out.stdout if out.returncode == 0 else out.stdout + out.stderr
    for line in text.strip("\n").splitlines():
        c.say(line)
    if out.returncode:
        c.say(f"(exit {out.returncode})")


def _policy_change(c: Console) -> None:
    from topogov_local import events

    stack, kube = c.stack, c.stack.kube()
    queue = "/apis/kueue.x-k8s.io/v1beta1/clusterqueues/hyperpod-ns-team-c-clusterqueue"
    c.step(6, "A policy change shipped with `cdk deploy`: team-c gets 8 more GPUs")
    before = nominal_gpus(kube.request("GET", queue).body)
    c.say(f"  before: ClusterQueue hyperpod-ns-team-c-clusterqueue nominal GPUs {before}")
    text, wanted = policy_with_more_gpus(stack.options.policy_file.read_text(), "team-c", before, 8)
    stack.redeploy(text)
    deadline = time.monotonic() + 60
    after = before
    while time.monotonic() < deadline and after != wanted:
        time.sleep(1.0)
        after = nominal_gpus(kube.request("GET", queue).body)
    c.say(
        f"  after:  ClusterQueue hyperpod-ns-team-c-clusterqueue nominal GPUs {after} (the add-on applied it)"
    )
    os.environ.update(stack.env())  # the functions of the new deployment
    c.say(governor_line(invoke(events.scheduled_event())["governor"]))
