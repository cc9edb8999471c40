"""A stop signal stops ``topogov local`` even when the first :class:`Stopped` it raised is lost.

CI saw it: a SIGTERM that arrived while the stack started a child was raised inside ``logging``'s
at-fork callback, where the interpreter ignores exceptions ("Exception ignored in: _releaseLock"),
and the stack went on starting. :class:`~topogov_local.processes.StopOnSignal` delivers the signal
again until the main thread has it. Here the signal is sent from a ``__del__``, another place whose
exceptions are ignored, so the first raise is lost every time."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

LOCAL = Path(__file__).resolve().parents[2] / "local"

CHILD = """
import os, signal, sys, time
from topogov_local.processes import StopOnSignal, Stopped

class LosesExceptions:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(100_000):  # the handler runs in here, and what it raises is ignored
            pass

with StopOnSignal() as signals:
    try:
        item = LosesExceptions()
        del item
        print("lost once", flush=True)
        time.sleep(60)
        print("not stopped", flush=True)
    except Stopped as stopped:
        signals.unwinding()
        print(f"stopped by {stopped.signum}", flush=True)
        os.kill(os.getpid(), signal.SIGTERM)  # pressed again while stopping: ignored
        time.sleep(0.5)
        print("the stop went on", flush=True)
print("handler back:", signal.getsignal(signal.SIGTERM) == signal.SIG_DFL, flush=True)
sys.exit(3)
"""


@pytest.fixture
def run_child() -> Iterator[Callable[[], subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []

    def start() -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-c", CHILD],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={"PYTHONPATH": str(LOCAL), "PATH": "/usr/bin:/bin"},
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.kill()
        proc.wait()


def test_a_stop_whose_first_raise_is_lost_is_delivered_again(run_child):
    # Given a program whose stop signal first lands where exceptions are ignored
    proc = run_child()
    # When it runs (it would sleep 60 s if the lost raise were the only one)
    out, err = proc.communicate(timeout=30)
    # Then the first raise was lost, the signal came again, and the stop was not interrupted
    assert "Exception ignored" in err and "Stopped" in err, err
    assert out.splitlines() == [
        "lost once",
        f"stopped by {int(signal.SIGTERM)}",
        "the stop went on",
        "handler back: True",
    ], (out, err)
    assert proc.returncode == 3
