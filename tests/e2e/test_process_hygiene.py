"""``topogov local`` and its children end together, however the parent ends (issue 12, item 6):
SIGTERM, SIGINT and SIGHUP (a closed terminal) stop the stack and its emulators promptly; a SIGKILL
of the parent takes the children down through PR_SET_PDEATHSIG. The figures are printed for the
record (``-s``); the assertions are on behaviour, with generous bounds, not on speed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _children(pid_log: Path, before: int) -> list[int]:
    return [int(line.split()[0]) for line in pid_log.read_text().splitlines()[before:]]


def _start(tmp_path: Path, pid_log: Path) -> tuple[subprocess.Popen[str], list[int]]:
    before = len(pid_log.read_text().splitlines()) if pid_log.exists() else 0
    proc = subprocess.Popen(
        [sys.executable, "-m", "topogov_cli.main", "local", "--api-port", "0", "--no-walkthrough",
         "--dir", str(tmp_path / "state"), "--interval", "3600"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "TOPOGOV_CHILD_PIDS": str(pid_log)},
    )  # fmt: skip
    deadline = time.monotonic() + 120
    assert proc.stdout is not None
    for line in proc.stdout:  # the stack starts, one pass runs, then it reconciles on its interval
        if "Reconciling every" in line or time.monotonic() > deadline:
            break
    children = _children(pid_log, before)
    assert len(children) >= 2 and all(_alive(p) for p in children), children  # moto + Kubernetes
    return proc, children


def _gone_within(pids: list[int], seconds: float) -> float:
    start = time.monotonic()
    while any(_alive(p) for p in pids):
        assert time.monotonic() - start < seconds, [p for p in pids if _alive(p)]
        time.sleep(0.02)
    return time.monotonic() - start


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_stop_signal_stops_the_stack_and_its_children(tmp_path, sig):
    pid_log = tmp_path / "pids.txt"
    proc, children = _start(tmp_path, pid_log)
    sent = time.monotonic()
    proc.send_signal(sig)
    code = proc.wait(timeout=30)
    took = time.monotonic() - sent
    _gone_within(children, 10)
    print(f"\n{sig.name}: topogov local exited {code} after {took:.2f}s; its {len(children)} children gone")
    assert code in (128 + sig, 130)
    assert not (tmp_path / "state" / "endpoints.json").exists()


def test_a_killed_parent_takes_its_children_down(tmp_path):
    pid_log = tmp_path / "pids.txt"
    proc, children = _start(tmp_path, pid_log)
    proc.kill()  # SIGKILL: no handler runs in the parent
    proc.wait(timeout=10)
    took = _gone_within(children, 10)
    print(f"\nSIGKILL: the {len(children)} children were gone {took:.2f}s after the parent")
