"""What stops a local stack before it starts, in one line each: another stack already running in the
same directory, and a port already in use (with who holds it, when Linux's /proc says)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import time
from pathlib import Path
from typing import IO, Any


class StackError(Exception):
    """The stack cannot start; the message is the one line to print (no traceback)."""


class StackLock:
    """``DIR/stack.lock``, held with ``flock`` while the stack runs, so a second stack in the same
    directory refuses instead of overwriting the first one's credentials, kubeconfig and endpoints.
    The kernel drops the lock when its process ends, however it ends: a lock is never stale."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "stack.lock"
        self._file: IO[str] | None = None

    def acquire(self, **facts: Any) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        f = self.path.open("a+", encoding="utf-8")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            f.seek(0)
            held = _facts(f.read())
            f.close()
            raise StackError(self._busy_message(held)) from None
        f.seek(0)
        f.truncate()
        f.write(json.dumps({"pid": os.getpid(), "started": time.strftime("%Y-%m-%dT%H:%M:%S"), **facts}))
        f.flush()
        self._file = f

    def update(self, **facts: Any) -> None:
        """Add what is known once started (the ports), for the message a second stack prints."""
        if self._file is None:
            return
        self._file.seek(0)
        held = _facts(self._file.read())
        self._file.seek(0)
        self._file.truncate()
        self._file.write(json.dumps({**held, **facts}))
        self._file.flush()

    def release(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.seek(0)
                self._file.truncate()
                fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None

    def _busy_message(self, held: dict[str, Any]) -> str:
        who = f"pid {held['pid']}" if held.get("pid") else "another process"
        ports = ", ".join(f"{k} {v}" for k, v in held.items() if k.endswith("_url") or k == "api_port")
        return (
            f"a local stack is already running in {self.path.parent} ({who}"
            + (f"; {ports}" if ports else "")
            + "): stop it (Ctrl-C in its terminal), or start another with its own directory and API "
            "port: topogov local --dir DIR --api-port 0"
        )


def _facts(text: str) -> dict[str, Any]:
    try:
        data = json.loads(text or "{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def check_port_free(port: int, flag: str, host: str = "127.0.0.1") -> None:
    """A StackError naming ``port``, who holds it (if /proc tells) and ``flag`` to choose another,
    when ``port`` cannot be bound on ``host``. Port 0 (any free port) always passes."""
    if not port:
        return
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise StackError(f"port {port} on {host} cannot be used: {exc.strerror}") from None
            holder = port_holder(port)
            raise StackError(
                f"port {port} is already in use" + (f" by {holder}" if holder else "")
                + f": choose another with {flag} PORT ({flag} 0 picks a free one)"
            ) from None  # fmt: skip


def port_holder(port: int) -> str | None:
    """``pid 1234 (python3 -m http.server 8080)`` for the process listening on TCP ``port``, from
    /proc/net/tcp{,6} and each process's open sockets; None when unknown (not Linux, not ours to see)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                    inodes.add(f"socket:[{inode}]")
    if not inodes:
        return None
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in (proc / "fd").iterdir():
                if os.readlink(fd) in inodes:
                    cmd = (
                        (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
                    )
                    return f"pid {proc.name}" + (f" ({cmd[:80]})" if cmd else "")
    return None
