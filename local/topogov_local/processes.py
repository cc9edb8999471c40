"""Emulator processes of the local stack: started as subprocesses, so they are real HTTP peers and
so the reconciler's CPU is measured without theirs.

Children end with their parent however it ends. Each is started with ``PR_SET_PDEATHSIG`` (Linux
``prctl(2)``): when the process that started it dies — a SIGKILL, a closed terminal — the kernel
sends the child SIGKILL. (SIGKILL, not SIGTERM: with its parent gone nothing waits for a graceful
stop, and a server shutting down gracefully under load — Kueue's manager waiting on an API server
that is going too — outlived its parent by more than 10 s. Nothing of the stack is kept across a
start.) (The signal follows the *thread* that forked, so start them from the
thread that lives as long as the stack: the main thread, as ``topogov local`` and the tests do.) A
normal stop sends SIGTERM to the child's process group and SIGKILL after :data:`STOP_GRACE_S`.

``$TOPOGOV_CHILD_PIDS``, when set, names a file each child's pid and program are appended to: the
test run reads it at the end and fails if any is still alive (``tests/conftest.py``).
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

_URL = re.compile(r"(https?://[0-9A-Za-z.\-]+:\d+)")
STOP_GRACE_S = 1.0  # SIGTERM, then SIGKILL (stop_all: every child at once): a stack stops within 2 s
PID_LOG_ENV = "TOPOGOV_CHILD_PIDS"
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` that asks the kernel for SIGKILL when the parent dies (Linux; else None).
    libc is resolved here, in the parent: the child only makes the one system call."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    prctl = ctypes.CDLL(None, use_errno=True).prctl
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return preexec


def wait_until(
    predicate: Callable[[], Any],
    what: str,
    timeout_s: float = 60,
    every_s: float = 0.2,
    error: type[Exception] = AssertionError,
) -> Any:
    """``predicate()`` once it is truthy (Kueue, the scheduler and KWOK act asynchronously), else
    ``error`` naming ``what`` and the last value."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(every_s)
    raise error(f"not within {timeout_s:.0f}s: {what} (last: {last!r})")


def _record(pid: int, argv: Sequence[str]) -> None:
    path = os.environ.get(PID_LOG_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(f"{pid} {argv[0]} {' '.join(argv[1:])[:200]}\n")


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on, below the kernel's ephemeral range: a port the kernel hands out
    (bind to 0) can be taken, between this check and the server's own bind, as the local port of one
    of the many outgoing connections a starting stack makes (seen in CI: kube-scheduler's "bind:
    address already in use"). Checked free on every address, as the Go servers bind 0.0.0.0."""
    import random

    low = _ephemeral_low()
    for _ in range(100):
        port = random.randrange(max(1024, low - 12000), low)
        with socket.socket() as s:
            try:
                s.bind(("0.0.0.0", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:  # nothing free below the range: let the kernel choose
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as fh:
            return int(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


class ManagedProcess:
    """A child process that is ready when it prints its URL (our own emulators), or, given ``ready``,
    when that probe answers True (upstream programs: a health endpoint), and stops on SIGTERM."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        log_path: str | os.PathLike[str] | None = None,
        ready: Callable[[], bool] | None = None,
        url: str | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.env = {**os.environ, **(env or {})}
        self.log_path = log_path
        self.proc: subprocess.Popen[str] | None = None
        self.ready = ready
        self.known_url = url
        self.url: str | None = None

    def start(self, timeout_s: float = 60.0) -> str:
        self.proc = subprocess.Popen(
            self.argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            env=self.env,
            start_new_session=True,
            preexec_fn=_die_with_parent(),
        )
        _record(self.proc.pid, self.argv)
        lines: queue.Queue[str | None] = queue.Queue()
        log = open(self.log_path, "a", encoding="utf-8") if self.log_path else None  # noqa: SIM115

        def pump() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for line in self.proc.stdout:
                if self.url is None:
                    lines.put(line)
                if log:
                    log.write(line)
                    log.flush()
            lines.put(None)

        threading.Thread(target=pump, name=f"{self.name}-output", daemon=True).start()
        deadline = time.monotonic() + timeout_s
        seen: list[str] = []
        if self.ready is not None:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                if self.ready():
                    self.url = self.known_url
                    return self.url or ""
                time.sleep(0.05)
            while True:  # what it said before it died (or while it was not getting ready)
                try:
                    line = lines.get_nowait()
                except queue.Empty:
                    break
                if line is not None:
                    seen.append(line)
            self.stop()
            tail = "".join(seen[-30:])
            raise RuntimeError(
                f"{self.name} did not become ready in {timeout_s:.0f}s: {' '.join(self.argv)}\n{tail}"
            )
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=0.2)
            except queue.Empty:
                continue
            if line is None:
                break
            seen.append(line)
            m = _URL.search(line)
            if m:
                self.url = m.group(1)
                return self.url
        self.stop()
        tail = "".join(seen[-20:])
        raise RuntimeError(
            f"{self.name} did not become ready in {timeout_s:.0f}s: {' '.join(self.argv)}\n{tail}"
        )

    def stop(self, timeout_s: float = STOP_GRACE_S) -> None:
        stop_all([self], timeout_s)

    def _signal(self, sig: int) -> bool:
        """Send ``sig`` to the process group; False when there is nothing left to stop."""
        if self.proc is None or self.proc.poll() is not None:
            return False
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)
        return True


def stop_all(procs: Iterable[ManagedProcess], timeout_s: float = STOP_GRACE_S) -> None:
    """Stop processes together: SIGTERM to each group at once, then wait for all within one grace
    period, and SIGKILL what is left. A stack of seven servers then stops in about the time of the
    slowest, not of their sum (within 2 s of SIGTERM/SIGINT/SIGHUP)."""
    running = [p for p in procs if p._signal(signal.SIGTERM)]
    deadline = time.monotonic() + timeout_s
    for p in running:
        assert p.proc is not None
        try:
            p.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p._signal(signal.SIGKILL)
            p.proc.wait(timeout=10)


@contextlib.contextmanager
def environ(values: Mapping[str, str]) -> Iterator[None]:
    """Set environment variables for a block (boto3 reads AWS_ENDPOINT_URL from the environment)."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def python_module(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]
