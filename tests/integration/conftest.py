"""Integration fixtures: the local AWS (moto server + DescribeInstanceTopology) and a real Kubernetes
control plane with Kueue, each a subprocess speaking real HTTP, driven by the real clients."""

from __future__ import annotations

import json
import urllib.request

import boto3
import pytest
from botocore.config import Config

from topogov_local.processes import ManagedProcess, free_port, python_module

REGION = "us-east-1"


def start_aws(tmp_path_factory, rate: float, burst: int = 1) -> ManagedProcess:
    log = tmp_path_factory.mktemp("aws") / "aws.log"
    proc = ManagedProcess(
        "aws",
        python_module("topogov_local.aws.server", "--host", "127.0.0.1", "--port", str(free_port())),
        env={"TOPOGOV_EC2_TOPOLOGY_RATE": str(rate), "TOPOGOV_EC2_TOPOLOGY_BURST": str(burst)},
        log_path=log,
    )
    proc.start()
    return proc


@pytest.fixture(scope="session")
def aws_url(tmp_path_factory):
    """A moto server whose DescribeInstanceTopology bucket is raised (fast tests)."""
    proc = start_aws(tmp_path_factory, rate=1000, burst=1000)
    yield proc.url
    proc.stop()


def aws_client(url: str, service: str, max_attempts: int = 3):
    return boto3.client(
        service,
        endpoint_url=url,
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"mode": "standard", "total_max_attempts": max_attempts}),
    )


def set_topology_rate(url: str, rate: float, burst: float = 1) -> None:
    """Change the emulated DescribeInstanceTopology bucket through the emulator's control route."""
    req = urllib.request.Request(
        f"{url}/_topogov/ec2/config",
        data=json.dumps({"rate": rate, "burst": burst}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 200


def launch(ec2, itype: str, n: int, az: str = "us-east-1a") -> list[str]:
    resp = ec2.run_instances(
        ImageId="ami-12345678", MinCount=n, MaxCount=n, InstanceType=itype, Placement={"AvailabilityZone": az}
    )
    return [i["InstanceId"] for i in resp["Instances"]]


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    """A real Kubernetes control plane with the real Kueue (built from their Go modules), reached as
    cluster admin through the counting, fault-injecting proxy; no Topogov RBAC (these tests are about
    the adapters and the governor's logic, not permissions). One per process (an xdist worker),
    shared by the modules that use it: each test that wants an empty cluster resets it
    (:func:`kube`, ``ControlPlane.reset``), so a module finds none of another's objects, and a start
    is not repeated per module (about 9 s of wall time and 7 s of CPU each)."""
    from topogov_local.cluster.controlplane import ControlPlane

    cluster = ControlPlane(tmp_path_factory.mktemp("cluster"), rbac=None).start()
    _SERVER.append(cluster)
    try:
        yield cluster, str(cluster.kubeconfig("admin"))
    finally:
        _SERVER.clear()
        cluster.stop()


_SERVER: list[object] = []  # the worker's `server` cluster while it exists


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_setup(item):
    """The worker's cluster runs while a test that uses it runs (its fixtures set up included)."""
    if _SERVER and "server" in item.fixturenames:
        _SERVER[0].resume()
    yield


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_teardown(item, nextitem):
    """...and is paused (``ControlPlane.pause``) once its fixtures are torn down when the next test
    does not use it: an idle cluster with Kueue used about 3 % of a core, for the whole session."""
    yield
    if _SERVER and (nextitem is None or "server" not in nextitem.fixturenames):
        _SERVER[0].pause()


@pytest.fixture
def kube(server):
    """The kubernetes client's ApiClient on that cluster, everything reset: objects, faults, counters."""
    from topogov.adapters.kube import KubeHttp
    from topogov.adapters.kube_auth import kubeconfig_api_client

    cluster, cfg = server
    cluster.reset()
    http = KubeHttp(kubeconfig_api_client(cfg), backoff_base_s=0.01)
    http.request("DELETE", "/_emulator/faults")
    http.request("DELETE", "/_emulator/requests")
    return http


@pytest.fixture(scope="module")
def training_cluster(tmp_path_factory):
    """A control plane of the module's own with JobSet and the Kubeflow training operator running and
    Kueue managing PyTorchJobs and JobSets (``ControlPlane(training_controllers=True)``), reached as
    cluster admin (``cluster.admin()``); stopped when the module ends, however it ends. No Topogov
    RBAC."""
    from topogov_local.cluster.controlplane import ControlPlane

    cluster = ControlPlane(tmp_path_factory.mktemp("training-cluster"), rbac=None, training_controllers=True)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
