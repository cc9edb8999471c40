"""Jobs that train, through the API, on ``topogov local`` with the real controllers (issue 39): JobSet
v0.11.1 and the Kubeflow training operator v1.9.3 run in the stack, Kueue v0.17.0 manages both kinds.

* a PyTorchJob (``examples/pytorchjob.yaml``: a master and 3 workers, 8 GPUs each, required layer-3)
  runs with all 4 pods in one layer-3 domain; its pods carry the rendezvous the training operator set;
  its Workload holds the master and worker pod sets as one pod-set group; once it ends the reconcile
  pass releases its charge with its run time;
* a JobSet (``examples/jobset.yaml``: a leader and 3 workers) the same;
* the high-level request of ``examples/high-level-job.json`` rendered each way ``render_as`` allows
  here: as an Indexed Job with its headless Service, whose EndpointSlice names the hosts
  ``PET_MASTER_ADDR`` names, and (``auto``, the operator being installed) as a PyTorchJob;
* each cancelled through the API, its pods and what it made gone with it.

Checked as ``kubectl get pods -o wide`` shows it: every pod's node, and that node's layer-3 label."""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from topogov.domain.labels import layer_label
from topogov_local import events
from topogov_local.lambda_context import LocalContext
from topogov_local.processes import wait_until
from topogov_local.stack import LocalStack, StackOptions
from topogov_local.walkthrough.labeler import invoke

ROOT = Path(__file__).resolve().parents[2]
FLEET = "p5.48xlarge=16"
NAMESPACE = "hyperpod-ns-team-a"
L3 = layer_label(3)
KUEUE = "/apis/kueue.x-k8s.io/v1beta2"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: Any) -> Iterator[LocalStack]:
    options = StackOptions(
        directory=tmp_path_factory.mktemp("local-training"), fleet=FLEET, ec2_rate=1000, ec2_burst=1000,
        api_port=0, training_controllers=True,
    )  # fmt: skip
    with LocalStack(options) as s:
        saved = dict(os.environ)
        os.environ.update(s.env())
        try:
            invoke(events.scheduled_event())  # the first pass: the labels and the snapshot
            yield s
        finally:
            os.environ.clear()
            os.environ.update(saved)


def call(stack: LocalStack, method: str, path: str, body: Any = None) -> Any:
    from topogov_cli.sigv4 import credentials_for_profile, signed_request

    creds = credentials_for_profile("topogov-team-a", str(stack.credentials))
    return signed_request(method, stack.api.url + path, credentials=creds, region="us-east-1", json_body=body)


def get(stack: LocalStack, path: str, **query: str) -> Any:
    resp = stack.kube().request("GET", path, query=query or None)
    assert resp.status == 200, (path, resp.status, resp.body)
    return resp.body


def running_pods(stack: LocalStack, selector: str, count: int) -> list[dict[str, Any]]:
    """The pods of ``selector`` once all ``count`` are Running (as ``kubectl get pods -o wide``)."""

    def all_running() -> list[dict[str, Any]]:
        pods = get(stack, f"/api/v1/namespaces/{NAMESPACE}/pods", labelSelector=selector)["items"]
        ok = len(pods) == count and all(p["status"].get("phase") == "Running" for p in pods)
        return pods if ok else []

    return wait_until(all_running, f"{count} pods of {selector} Running", 240, 1.0)


def domains(stack: LocalStack, pods: list[dict[str, Any]]) -> set[str]:
    nodes = {n["metadata"]["name"]: n["metadata"]["labels"] for n in get(stack, "/api/v1/nodes")["items"]}
    assert len({p["spec"]["nodeName"] for p in pods}) == len(pods)  # one pod a node (8 GPUs each)
    return {nodes[p["spec"]["nodeName"]][L3] for p in pods}


def env_of(pod: dict[str, Any], container: str) -> dict[str, Any]:
    main = next(c for c in pod["spec"]["containers"] if c["name"] == container)
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in main.get("env") or []}


def manifest(name: str) -> dict[str, Any]:
    return yaml.safe_load((ROOT / "examples" / name).read_text(encoding="utf-8"))


def cancelled(stack: LocalStack, job: str, selector: str) -> None:
    answer = call(stack, "DELETE", f"/v1/jobs/team-a/{job}")
    assert answer.status_code == 200 and answer.json()["job_deleted"], answer.text
    wait_until(
        lambda: not get(stack, f"/api/v1/namespaces/{NAMESPACE}/pods", labelSelector=selector)["items"],
        f"{job}'s pods gone",
        180,
        1.0,
    )


def test_a_pytorchjob_runs_in_one_layer3_domain_with_the_operators_rendezvous(stack: LocalStack) -> None:
    resp = call(stack, "POST", "/v1/jobs", {"manifest": manifest("pytorchjob.yaml")})
    assert resp.status_code == 201, resp.text
    decision = resp.json()["decision"]
    assert decision["kind"] == "kubeflow.org/v1 PyTorchJob"
    assert [(p["name"], p["pods"]) for p in decision["pod_sets"]] == [("master", 1), ("worker", 3)]
    assert decision["quota"][0]["asked"] == 32 and "one pod-set group" in decision["topology"]["reason"]
    pods = running_pods(stack, "training.kubeflow.org/job-name=llm-pt", 4)
    assert len(domains(stack, pods)) == 1
    ranks = {}
    for pod in pods:
        env = env_of(pod, "pytorch")
        assert (env["MASTER_ADDR"], env["MASTER_PORT"], env["PET_NNODES"]) == (
            "llm-pt-master-0",
            "23456",
            "4",
        )
        assert env["WORLD_SIZE"] == "32"  # 4 nodes x nprocPerNode 8, as the operator counts it
        ranks[pod["metadata"]["name"]] = env["RANK"]
    assert sorted(ranks.values()) == ["0", "1", "2", "3"] and ranks["llm-pt-master-0"] == "0"
    # Kueue's Workload: the master and the workers, one group, both required at layer-3
    workloads = get(stack, f"{KUEUE}/namespaces/{NAMESPACE}/workloads")["items"]
    wl = next(w for w in workloads if w["metadata"]["ownerReferences"][0]["name"] == "llm-pt")
    requests = [(ps["name"], ps["count"], ps["topologyRequest"]) for ps in wl["spec"]["podSets"]]
    assert [(n, c) for n, c, _ in requests] == [("master", 1), ("worker", 3)]
    assert all(t.get("required") == L3 and t.get("podSetGroupName") for _, _, t in requests)
    view = call(stack, "GET", "/v1/jobs/team-a/llm-pt").json()
    assert (view["kind"], view["status"], view["placement"]["verdict"]) == (
        "PyTorchJob",
        "Running",
        "layer-3 ×1",
    )
    # the pods end (KWOK's run time): the job succeeds and the reconcile pass releases its charge
    from topogov.handlers.reconcile import handler

    wait_until(
        lambda: call(stack, "GET", "/v1/jobs/team-a/llm-pt").json()["status"] == "Succeeded",
        "llm-pt succeeds",
        240,
        1.0,
    )
    handler(events.scheduled_event(), LocalContext())
    done = call(stack, "GET", "/v1/jobs/team-a/llm-pt").json()
    assert done["state"] == "released" and done["ran_s"] is not None, done


def test_a_jobset_runs_its_leader_and_workers_in_one_layer3_domain(stack: LocalStack) -> None:
    body = {"manifest": manifest("jobset.yaml"), "topology": {"mode": "required", "level": "layer-3"}}
    resp = call(stack, "POST", "/v1/jobs", body)
    assert resp.status_code == 201, resp.text
    pods = running_pods(stack, "jobset.sigs.k8s.io/jobset-name=ls", 4)
    assert len(domains(stack, pods)) == 1
    assert call(stack, "GET", "/v1/jobs/team-a/ls").json()["kind"] == "JobSet"
    cancelled(stack, "ls", "jobset.sigs.k8s.io/jobset-name=ls")
    assert not get(
        stack,
        f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs",
        labelSelector="jobset.sigs.k8s.io/jobset-name=ls",
    )["items"] or wait_until(
        lambda: (
            not get(
                stack,
                f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs",
                labelSelector="jobset.sigs.k8s.io/jobset-name=ls",
            )["items"]
        ),
        "ls's child Jobs gone",
        120,
        1.0,
    )


def high_level(name: str, **extra: Any) -> dict[str, Any]:
    body = json.loads((ROOT / "examples" / "high-level-job.json").read_text(encoding="utf-8"))
    body = copy.deepcopy(body)
    body["job_name"] = name
    body["command"] = ["torchrun", "train.py"]
    return {**body, **extra}


def test_a_high_level_job_rendered_as_an_indexed_job_finds_its_master_through_the_service(
    stack: LocalStack,
) -> None:
    resp = call(stack, "POST", "/v1/jobs", high_level("ft-job", render_as="job"))
    assert resp.status_code == 201, resp.text
    assert resp.json()["decision"]["rendered_as"].startswith("batch/v1 Job, as asked")
    pods = running_pods(stack, "batch.kubernetes.io/job-name=ft-job", 4)
    assert len(domains(stack, pods)) == 1
    env = env_of(pods[0], "main")
    master = env["PET_MASTER_ADDR"]
    assert master == env["MASTER_ADDR"] == "ft-job-0.ft-job" and env["PET_NNODES"] == "4"
    index = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    assert env["PET_NODE_RANK"] == env["RANK"] == {"fieldRef": {"apiVersion": "v1", "fieldPath": index}}
    service = get(stack, f"/api/v1/namespaces/{NAMESPACE}/services/ft-job")
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is True
    assert service["metadata"]["ownerReferences"][0]["kind"] == "Job"

    def hostnames() -> set[str]:
        slices = get(
            stack, f"/apis/discovery.k8s.io/v1/namespaces/{NAMESPACE}/endpointslices",
            labelSelector="kubernetes.io/service-name=ft-job",
        )["items"]  # fmt: skip
        names = {e.get("hostname") for s in slices for e in s.get("endpoints") or []}
        return names if len(names) == 4 else set()

    names = wait_until(hostnames, "ft-job's EndpointSlice names its 4 pods", 120, 1.0)
    assert names == {f"ft-job-{i}" for i in range(4)} and master.split(".")[0] in names
    cancelled(stack, "ft-job", "batch.kubernetes.io/job-name=ft-job")
    wait_until(
        lambda: stack.kube().request("GET", f"/api/v1/namespaces/{NAMESPACE}/services/ft-job").status == 404,
        "ft-job's Service deleted with its Job",
        120,
        1.0,
    )


def test_a_high_level_job_is_a_pytorchjob_where_the_operator_is_installed(stack: LocalStack) -> None:
    resp = call(stack, "POST", "/v1/jobs", high_level("ft-pt"))
    assert resp.status_code == 201, resp.text
    decision = resp.json()["decision"]
    assert decision["rendered_as"].startswith("kubeflow.org/v1 PyTorchJob: the cluster serves it")
    pods = running_pods(stack, "training.kubeflow.org/job-name=ft-pt", 4)
    assert len(domains(stack, pods)) == 1
    assert {env_of(p, "pytorch")["MASTER_ADDR"] for p in pods} == {"ft-pt-master-0"}
    forced = call(stack, "POST", "/v1/jobs?dryRun=true", high_level("ft-hp", render_as="hyperpodpytorchjob"))
    assert forced.status_code == 400 and "does not serve" in forced.text, forced.text
    cancelled(stack, "ft-pt", "training.kubeflow.org/job-name=ft-pt")
