"""``topogov local`` refuses in one line, before starting anything, when its API port is taken or
another stack runs in its directory; the running stack's files are left alone (issue 13, item 1)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from topogov_local.guard import StackError, StackLock, check_port_free, port_holder


def local(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "TOPOGOV_"))}
    return subprocess.run(
        [sys.executable, "-m", "topogov_cli.main", "local", "--once", *args],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


@pytest.fixture
def listening():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def test_a_busy_api_port_is_one_line_naming_the_port_its_holder_and_the_flag(tmp_path, listening):
    out = local(tmp_path, "--api-port", str(listening), "--dir", str(tmp_path / "state"))
    assert out.returncode == 2, out.stdout + out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith(f"topogov local: port {listening} is already in use by pid {os.getpid()} (")
    assert line.endswith(": choose another with --api-port PORT (--api-port 0 picks a free one)")
    assert "Traceback" not in out.stdout + out.stderr
    # and nothing was started or left behind: the lock is free again, no endpoints were written
    assert not (tmp_path / "state" / "endpoints.json").exists()
    StackLock(tmp_path / "state").acquire()


def test_port_holder_reads_proc_and_a_free_port_passes(listening):
    assert (port_holder(listening) or "").startswith(f"pid {os.getpid()} (")
    with pytest.raises(StackError, match=f"port {listening} is already in use by pid {os.getpid()}"):
        check_port_free(listening, "--api-port")
    check_port_free(0, "--api-port")  # any free port


def test_a_second_stack_in_the_same_directory_refuses_and_leaves_the_first_alone(tmp_path):
    from topogov_local.stack import LocalStack, StackOptions

    state = tmp_path / "state"
    with LocalStack(
        StackOptions(directory=state, fleet="p5.48xlarge=1", extra_nodes=False, api_port=0)
    ) as first:
        files = {p: p.read_bytes() for p in (first.credentials, first.kubeconfig, first.endpoints_file)}
        out = local(tmp_path, "--api-port", "0", "--dir", str(state))
        assert out.returncode == 2, out.stdout + out.stderr
        (line,) = out.stderr.strip().splitlines()
        assert line.startswith(
            f"topogov local: a local stack is already running in {state} (pid {os.getpid()}; "
        )
        assert f"api_url {first.api.url}" in line
        assert line.endswith(
            "or start another with its own directory and API port: topogov local --dir DIR --api-port 0"
        )
        assert {p: p.read_bytes() for p in files} == files  # nothing of the first one was touched
    # once the first one stops, the directory is free
    lock = StackLock(state)
    lock.acquire()
    lock.release()
