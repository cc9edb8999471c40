"""A server kept for later is paused (``ManagedProcess.pause``, ``ControlPlane.pause``,
``LocalStack.pause``: SIGSTOP to its process group): it uses no processor while paused, answers again
once resumed with its state whole, and a stop still ends it (tests/stacks.py and the integration
conftest keep a worker's clusters this way between the modules that use them)."""

from __future__ import annotations

import os
import ssl
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from tests.stacks import process_state, wait_until
from topogov_local.processes import ManagedProcess

# a server that is ready once it prints its URL, then spins (a processor's worth of work to stop)
SPINNER = "print('listening on http://127.0.0.1:9', flush=True)\nwhile True:\n    pass\n"
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


@pytest.fixture
def spinner() -> Iterator[ManagedProcess]:
    proc = ManagedProcess("spinner", [sys.executable, "-c", SPINNER])
    proc.start(timeout_s=30)
    try:
        yield proc
    finally:
        proc.stop()  # a paused one too (the stop continues it after its SIGTERM)


def test_a_paused_process_uses_no_processor_and_goes_on_when_resumed(spinner):
    assert spinner.proc is not None
    pid = spinner.proc.pid
    wait_until(lambda: cpu_s(pid) > 0.05, "the spinner spins", timeout_s=30)
    # When it is paused
    spinner.pause()
    wait_until(lambda: process_state(pid) == "T", "the spinner is stopped", timeout_s=10)
    # Then its processor time stands still
    held = cpu_s(pid)
    time.sleep(0.5)
    assert process_state(pid) == "T" and cpu_s(pid) == held
    # When it is resumed, it runs on: the same process, its processor time growing again
    spinner.resume()
    wait_until(lambda: cpu_s(pid) > held + 0.05, "the spinner spins again", timeout_s=30)
    assert spinner.proc.poll() is None


def test_a_stop_ends_a_paused_process_with_its_sigterm(spinner):
    assert spinner.proc is not None
    spinner.pause()
    wait_until(lambda: process_state(spinner.proc.pid) == "T", "the spinner is stopped", timeout_s=10)
    spinner.stop(timeout_s=10)
    # ended by the SIGTERM itself (a SIGTERM left pending would have waited for the SIGKILL)
    assert spinner.proc.returncode == -15


def _readyz(cluster, timeout_s: float) -> int:
    ctx = ssl.create_default_context(cafile=str(cluster.pki.ca))
    req = urllib.request.Request(
        f"{cluster.apiserver_url}/readyz", headers={"Authorization": f"Bearer {cluster.pki.token('admin')}"}
    )
    with urllib.request.urlopen(req, timeout=timeout_s, context=ctx) as resp:
        return resp.status


def test_a_paused_cluster_answers_nothing_and_keeps_its_objects_for_its_resume(server):
    cluster, _ = server
    admin = cluster.admin()
    body = {"metadata": {"name": "kept-while-paused"}}
    assert admin.request("POST", "/api/v1/namespaces", body=body).status == 201
    cluster.pause()
    try:
        for proc in cluster.procs:
            assert proc.proc is not None
            pid = proc.proc.pid
            wait_until(lambda p=pid: process_state(p) == "T", f"{proc.name} is stopped", timeout_s=10)
        with pytest.raises((TimeoutError, urllib.error.URLError)):
            _readyz(cluster, timeout_s=1)
    finally:
        cluster.resume()
    assert _readyz(cluster, timeout_s=30) == 200
    got = admin.request("GET", "/api/v1/namespaces/kept-while-paused")
    assert got.status == 200 and got.body["metadata"]["name"] == "kept-while-paused"
