"""Emulator processes of the local stack: started as subprocesses, so they are real HTTP peers and
so the reconciler's CPU is measured without theirs."""

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
from collections.abc import Iterator, Mapping, Sequence

_URL = re.compile(r"(https?://[0-9A-Za-z.\-]+:\d+)")


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class ManagedProcess:
    """A child process that prints its URL when ready and stops on SIGTERM."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        log_path: str | os.PathLike[str] | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.env = {**os.environ, **(env or {})}
        self.log_path = log_path
        self.proc: subprocess.Popen[str] | None = None
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
        )
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

    def stop(self, timeout_s: float = 10.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=timeout_s)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=timeout_s)


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
