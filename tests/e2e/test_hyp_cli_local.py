"""AWS's own ``hyp`` (sagemaker-hyperpod 3.12.0, unmodified, ``.venv/hyp``) against ``topogov local
--hyperpod``: the local stack with the ``HyperPodPyTorchJob`` CRD and the stand-in training operator
(``local/topogov_local/hyperpod/``), Kueue told of the kind as an external framework.

The command is AWS's example, as a data scientist of team-a types it: ``hyp create hyp-pytorch-job
--job-name demo --image … --node-count 4 --instance-type ml.p5.48xlarge --preferred-topology
topology.k8s.aws/network-node-layer-3 --queue-name hyperpod-ns-team-a-localqueue --priority
training-priority`` (the namespace from the kubeconfig context, as ``hyp set-cluster-context`` sets
it). Then, all observed, nothing patched:

* Kueue admits the operator's Workload and its TAS places the 4 pods (``demo-pod-0..3``, labelled
  ``HPJob=demo``) in one layer-3 domain, although hyp also sets an instance-type nodeSelector;
* ``hyp list`` shows the job ``Running``, ``hyp list-pods`` its pods;
* ``topogov jobs`` (Topogov's CLI against the stack's API) lists it read-only;
* a job given a run time (``--command '[sleep, 20]'``) ends ``Completed``, its Workload Finished;
* ``hyp delete`` removes the job, and with it its pods and its Workload;
* no ``hyp`` run asks for a connection off this machine (a proxy counts what it is asked for).

Skipped, saying why, when ``.venv/hyp`` is missing (``make install`` makes it).
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from topogov.domain.labels import layer_label
from topogov_local import events
from topogov_local.hyperpod import hyp
from topogov_local.stack import LocalStack, StackOptions
from topogov_local.walkthrough.labeler import invoke

pytestmark = pytest.mark.skipif(not hyp.available(), reason=hyp.missing_reason())

FLEET = "p5.48xlarge=16,p6-b200.48xlarge=2,c5.2xlarge=1"
NAMESPACE = "hyperpod-ns-team-a"
QUEUE = "hyperpod-ns-team-a-localqueue"
PRIORITY = "training-priority"
KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
JOBS = "/apis/sagemaker.amazonaws.com/v1"
ROOT = Path(__file__).resolve().parents[2]
LAMBDAS = str(ROOT / "lambdas")
DOCS_MARK = "<!-- readme-test: hyperpod-stack -->"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: Any) -> Iterator[LocalStack]:
    """The stack in ``<home>/.topogov/local``, ``<home>`` laid out like a clone (``.venv``) for the
    docs' block, as ``topogov local --hyperpod`` run there makes it."""
    home = tmp_path_factory.mktemp("local-hyperpod-hyp")
    (home / ".venv").symlink_to(ROOT / ".venv")
    options = StackOptions(
        directory=home / ".topogov" / "local",
        fleet=FLEET,
        ec2_rate=1000,
        ec2_burst=1000,
        api_port=0,
        hyperpod=True,
    )
    with LocalStack(options) as s:
        saved = dict(os.environ)
        os.environ.update(s.env())
        try:
            invoke(events.scheduled_event())  # a reconcile pass: the snapshot the API reads
            yield s
        finally:
            os.environ.clear()
            os.environ.update(saved)


class CountingProxy:
    """An HTTP proxy on 127.0.0.1 that forwards nothing: it records the first line of each request it
    is asked for (``CONNECT host:443 …`` for HTTPS) and closes the connection."""

    def __init__(self) -> None:
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(16)
        self.asked: list[str] = []
        self._thread = threading.Thread(target=self._serve, name="counting-proxy", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.getsockname()[1]}"

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                with contextlib.suppress(OSError):
                    self.asked.append(conn.recv(4096).split(b"\r\n", 1)[0].decode(errors="replace"))

    def close(self) -> None:
        self.server.close()


@pytest.fixture
def proxy() -> Iterator[CountingProxy]:
    p = CountingProxy()
    yield p
    p.close()


def run_hyp(
    stack: LocalStack, *args: str, proxy: CountingProxy | None = None
) -> subprocess.CompletedProcess[str]:
    out = hyp.run(stack, *args, namespace=NAMESPACE, **({"proxy": proxy.url} if proxy else {}))
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    return out


def wait_for(what: str, check: Any, timeout_s: float = 240.0, every_s: float = 1.0) -> Any:
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(every_s)
    raise AssertionError(f"{what}: not within {timeout_s:.0f} s (last: {last!r})")


def listed(stack: LocalStack, job: str) -> str | None:
    """The STATUS ``hyp list hyp-pytorch-job`` shows for ``job``, None when it lists no such job."""
    out = run_hyp(stack, "list", "hyp-pytorch-job", "-n", NAMESPACE)
    assert out.returncode == 0, out.stdout + out.stderr
    m = re.search(rf"^{re.escape(job)}\s+{NAMESPACE}\s+(\S+)", out.stdout, re.M)
    return m.group(1) if m else None


def pods_of(stack: LocalStack, job: str) -> list[dict[str, Any]]:
    return (
        stack.kube()
        .request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods", query={"labelSelector": f"HPJob={job}"})
        .body["items"]
    )


def workloads_of(stack: LocalStack, job: str) -> list[dict[str, Any]]:
    items = stack.kube().request("GET", f"{KUEUE}/namespaces/{NAMESPACE}/workloads").body["items"]
    return [w for w in items if any(r["name"] == job for r in w["metadata"].get("ownerReferences") or [])]


def test_hyp_sends_no_telemetry_off_this_machine(stack: LocalStack, proxy: CountingProxy) -> None:
    out = run_hyp(stack, "list", "hyp-pytorch-job", "-n", NAMESPACE, proxy=proxy)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "No jobs found" in out.stdout
    assert proxy.asked == []
    assert "Region not found in supported regions" in out.stderr  # hyp's own word that it sent nothing
    # the instrument works: a context named like an AWS Region (what `hyp set-cluster-context` writes,
    # an EKS cluster's ARN) makes hyp ask the proxy for AWS's telemetry host, which goes nowhere
    import yaml

    config = hyp.write_kubeconfig(stack, NAMESPACE)
    doc = yaml.safe_load(config.read_text())
    doc["contexts"][0]["name"] = doc["current-context"] = "arn:aws:eks:us-west-2:123456789012:cluster/x"
    regional = config.with_name("regional.kubeconfig")
    regional.write_text(yaml.safe_dump(doc))
    out = subprocess.run(
        [str(hyp.HYP), "list", "hyp-pytorch-job", "-n", NAMESPACE],
        env=hyp.environment(regional, proxy=proxy.url),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert proxy.asked and all(
        line.startswith("CONNECT sm-pysdk-t-us-west-2.s3.us-west-2.amazonaws.com:443") for line in proxy.asked
    ), proxy.asked


def test_hyp_create_runs_the_job_in_one_layer3_domain(stack: LocalStack, proxy: CountingProxy) -> None:
    args = hyp.create_command("demo", image="pytorch:latest", queue=QUEUE, priority=PRIORITY)
    out = run_hyp(stack, *args, proxy=proxy)
    assert out.returncode == 0, out.stdout + out.stderr
    assert proxy.asked == []

    def running() -> list[dict[str, Any]]:
        pods = pods_of(stack, "demo")
        up = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
        return up if len(up) == 4 else []

    pods = wait_for("demo's 4 pods Running", running)
    assert sorted(p["metadata"]["name"] for p in pods) == [f"demo-pod-{i}" for i in range(4)]
    kube = stack.kube()
    nodes = {n["metadata"]["name"]: n for n in kube.request("GET", "/api/v1/nodes").body["items"]}
    on = [nodes[p["spec"]["nodeName"]]["metadata"]["labels"] for p in pods]
    assert len({labels[layer_label(3)] for labels in on}) == 1, on
    assert {labels["node.kubernetes.io/instance-type"] for labels in on} == {"ml.p5.48xlarge"}
    assert all(labels["sagemaker.amazonaws.com/node-health-status"] == "Schedulable" for labels in on)
    for p in pods:  # the ungater chose the domain and lifted its gate; hyp's nodeSelector kept
        assert not p["spec"].get("schedulingGates"), p["spec"]
        assert p["spec"]["nodeSelector"]["node.kubernetes.io/instance-type"] == "ml.p5.48xlarge"
        assert p["spec"]["containers"][0]["name"] == "pytorch-job-container"
    # Kueue admitted the operator's Workload, owned by the job, with a topology assignment
    (workload,) = workloads_of(stack, "demo")
    owner = workload["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["apiVersion"], owner["controller"]) == (
        "HyperPodPyTorchJob",
        "sagemaker.amazonaws.com/v1",
        True,
    )
    assert workload["spec"]["priorityClassRef"]["name"] == PRIORITY
    (assignment,) = workload["status"]["admission"]["podSetAssignments"]
    assert assignment["name"] == "demo-pod-podset"
    assert assignment["topologyAssignment"]["levels"]
    assert wait_for("hyp list: demo Running", lambda: listed(stack, "demo") == "Running", every_s=2)


def test_hyp_list_pods_shows_the_jobs_pods(stack: LocalStack) -> None:
    out = run_hyp(stack, "list-pods", "hyp-pytorch-job", "--job-name", "demo", "-n", NAMESPACE)
    assert out.returncode == 0, out.stdout + out.stderr
    assert sorted(re.findall(r"^(demo-pod-\d)\s", out.stdout, re.M)) == [f"demo-pod-{i}" for i in range(4)]


def topogov(stack: LocalStack, *argv: str) -> subprocess.CompletedProcess[str]:
    """Topogov's CLI as a subprocess, as team-a (tests/e2e/test_cli_jobs.py's way)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AWS_", "TOPOGOV_", "POWERTOOLS_", "KUBECONFIG", "COLUMNS"))
    }
    env.update(
        {
            "PYTHONPATH": LAMBDAS,
            "AWS_SHARED_CREDENTIALS_FILE": str(stack.credentials),
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_PROFILE": "topogov-team-a",
            "TOPOGOV_ENDPOINT": stack.api.url,
        }
    )
    return subprocess.run(
        [sys.executable, "-m", "topogov_cli.main", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def test_topogov_jobs_lists_the_hyp_job_read_only(stack: LocalStack) -> None:
    out = topogov(stack, "jobs", "--team", "team-a")
    assert out.returncode == 0, out.stdout + out.stderr
    row = next(line for line in out.stdout.splitlines() if line.startswith("demo *"))
    assert "team-a" in row and "Admitted" in row, out.stdout
    assert "* a HyperPodPyTorchJob (submitted with `hyp create hyp-pytorch-job`)" in out.stdout


def test_a_job_with_a_run_time_completes(stack: LocalStack) -> None:
    args = [
        *hyp.create_command("short", image="pytorch:latest", queue=QUEUE, priority=PRIORITY, nodes=2),
        "--command",
        "[sleep, 20]",  # hyp splits the list on commas, quotes kept: not JSON
    ]
    out = run_hyp(stack, *args)
    assert out.returncode == 0, out.stdout + out.stderr

    def finished() -> dict[str, Any] | None:
        wls = workloads_of(stack, "short")
        done = [
            c for w in wls for c in (w.get("status") or {}).get("conditions") or [] if c["type"] == "Finished"
        ]
        return done[0] if done else None

    assert wait_for("short's Workload Finished", finished)["reason"] == "Succeeded"
    assert listed(stack, "short") == "Completed"
    assert {(p.get("status") or {}).get("phase") for p in pods_of(stack, "short")} == {"Succeeded"}


def test_hyp_delete_removes_the_job_its_pods_and_its_workload(
    stack: LocalStack, proxy: CountingProxy
) -> None:
    for job in ("demo", "short"):
        out = run_hyp(stack, "delete", "hyp-pytorch-job", "--job-name", job, "-n", NAMESPACE, proxy=proxy)
        assert out.returncode == 0, out.stdout + out.stderr
    assert proxy.asked == []
    kube = stack.kube()

    def gone() -> bool:
        jobs = kube.request("GET", f"{JOBS}/namespaces/{NAMESPACE}/hyperpodpytorchjobs").body["items"]
        return not jobs and not any(pods_of(stack, j) or workloads_of(stack, j) for j in ("demo", "short"))

    assert wait_for("the jobs, their pods and Workloads gone", gone)
    assert listed(stack, "demo") is None


def test_the_walkthrough_runs_hyp_create_as_its_step(stack: LocalStack, monkeypatch: Any) -> None:
    from topogov_local.walkthrough.console import Console
    from topogov_local.walkthrough.hyperpod import hyp_job

    # what `topogov local` sets before its walkthrough (walkthrough/__init__.py, _run)
    monkeypatch.setenv("TOPOGOV_ENDPOINT", stack.api.url)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(stack.credentials))
    lines: list[str] = []
    try:
        hyp_job(Console(stack, out=lines.append))
    finally:
        out = run_hyp(stack, "delete", "hyp-pytorch-job", "--job-name", "demo", "-n", NAMESPACE)
    text = "\n".join(lines)
    assert "[team-a] $ hyp create hyp-pytorch-job --job-name demo" in text, text
    assert re.search(rf"^demo\s+{NAMESPACE}\s+Running", text, re.M), text  # hyp list
    assert len(re.findall(r"^demo-pod-\d\s+1/1\s+Running", text, re.M)) == 4, text  # kubectl get pods
    assert re.search(r"^demo \*\s+HyperPodPyTorchJob\s+team-a", text, re.M), text  # topogov jobs
    assert out.returncode == 0, out.stdout + out.stderr
    assert wait_for(
        "demo's pods and Workload gone", lambda: not (pods_of(stack, "demo") or workloads_of(stack, "demo"))
    )


def test_the_docs_hyp_commands_run_as_written(stack: LocalStack) -> None:
    """docs/hyperpod.md's block marked ``readme-test: hyperpod-stack``, command by command, in bash in
    the stack's directory, each with the block's ``export`` lines (tests/e2e/test_readme.py's way)."""
    from tests.e2e.test_readme import blocks, commands

    (block,) = blocks((ROOT / "docs" / "hyperpod.md").read_text(), DOCS_MARK)
    cmds = commands(block)
    exports = [c for c in cmds if c.startswith("export ")]
    assert any(c.startswith("hyp create hyp-pytorch-job") for c in cmds)
    home = Path(stack.dir).parent.parent
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "TOPOGOV_", "KUBECONFIG", "COLUMNS"))
    }
    for command in (c for c in cmds if not c.startswith("export ")):
        out = subprocess.run(
            ["bash", "-c", "\n".join([*exports, command])],
            cwd=home,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
        )
        assert out.returncode == 0, f"$ {command}\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}"
        assert "Traceback" not in out.stderr, out.stderr[-2000:]
        if command.startswith("hyp list"):
            assert re.search(rf"^demo\s+{NAMESPACE}\s+Running", out.stdout, re.M), out.stdout
