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
test run reads it at the end, kills the process group of any still alive and fails
(``tests/conftest.py``).

``PR_SET_PDEATHSIG`` reaches direct children only. A program that starts a tree of its own — the
CDK CLI runs node, which runs ``python app.py``, which runs jsii's node — is started under
:func:`supervised`: a small supervisor (``python -m topogov_local.processes supervise``) that is a
*child subreaper* (``PR_SET_CHILD_SUBREAPER``: the descendants it loses parents of are re-parented to
it, not to init) and, on SIGTERM, SIGINT, SIGHUP, the death of its own parent (``PR_SET_PDEATHSIG``
with SIGTERM) or the end of the program, SIGKILLs every descendant it has, then exits. (Before it, a
Ctrl-C during ``cdk synth`` killed the CLI's node alone and waited for the synth's python to finish:
29 s.)
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
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

_URL = re.compile(r"(https?://[0-9A-Za-z.\-]+:\d+)")
# SIGTERM, then SIGKILL (stop_all: every child at once). Nothing of a stack is kept across a start, so
# nothing needs a long graceful stop: with 1 s, etcd, kube-apiserver and Kueue were SIGKILLed at 1 s
# anyway (under load), and a stop in the ready phase took 1.5-1.8 s in all.
STOP_GRACE_S = 0.5
PID_LOG_ENV = "TOPOGOV_CHILD_PIDS"
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


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


class Stopped(BaseException):
    """A stop signal arrived (SIGINT, SIGTERM, SIGHUP). A BaseException, so no ``except Exception``
    on the way swallows it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
REDELIVER_S = 0.2


class StopOnSignal:
    """SIGINT, SIGTERM and SIGHUP raise :class:`Stopped` in the main thread, and go on doing so until
    the main thread says it has it (:meth:`unwinding`).

    One raise is not enough. An exception a signal handler raises is lost where the interpreter
    ignores exceptions: in an at-fork callback (``logging`` registers ``_releaseLock`` to run in the
    parent after every fork, and ``subprocess`` forks through those callbacks whenever a
    ``preexec_fn`` is given, as :class:`Managed` does), a ``__del__``, a weakref callback. A SIGTERM
    that arrived while a child was started was printed as "Exception ignored in: _releaseLock" and
    the stack went on starting. So from the first signal on, a thread sends the signal to the main
    thread again every :data:`REDELIVER_S` until the stop is under way; once it is, a further signal
    (Ctrl-C pressed again) is ignored and cannot interrupt the stop.

    Use as a context manager around the work; the previous handlers come back on exit."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._unwinding = threading.Event()
        self._redeliver: threading.Thread | None = None
        self._previous: dict[int, Any] = {}
        self._main = threading.main_thread().ident

    def __enter__(self) -> StopOnSignal:
        self._previous = {s: signal.signal(s, self._on_signal) for s in STOP_SIGNALS}
        return self

    def __exit__(self, *_exc: object) -> None:
        self.unwinding()
        if self._redeliver is not None:
            self._redeliver.join()
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def unwinding(self) -> None:
        """The main thread has the :class:`Stopped` (or is ending anyway): deliver no more."""
        self._unwinding.set()

    def _on_signal(self, signum: int, _frame: Any) -> None:
        if self._unwinding.is_set():
            return
        if self.signum is None:
            self.signum = signum
            self._redeliver = threading.Thread(target=self._again, name="stop-signal", daemon=True)
            self._redeliver.start()
        raise Stopped(self.signum)

    def _again(self) -> None:
        while not self._unwinding.wait(REDELIVER_S):
            assert self.signum is not None and self._main is not None
            signal.pthread_kill(self._main, self.signum)


# Where the local stack's time goes, in order, as (what, seconds): each start and reset of a cluster
# or a stack, each CDK run, each wait for an asynchronous actor. Appended to (a list's append is
# atomic: the deploying thread records too) and never read here; the suite's timing report reads it
# around each test (tests/timing.py, docs/benchmarks.md "The suite's time").
SPENT: list[tuple[str, float]] = []


def spent(what: str, seconds: float) -> None:
    SPENT.append((what, seconds))


def collect_rarely() -> None:
    """For a process whose large heap lives as long as it does (the moto server's modules and
    botocore's service models, a stack's clients in ``topogov local``, a test worker's collected
    tests): what it holds now frozen out of the cyclic garbage collector's passes, and its youngest
    generation collected every 50,000 allocations instead of 700 (Python's ``gc`` documentation:
    ``freeze``, ``set_threshold``). Until a stack is ready the moto server's CPU went 3.5 -> 2.6 s
    and ``topogov local``'s 2.8 -> 2.1 s; ``pytest tests/unit -p no:xdist`` 36-39 -> 28-31 s
    (docs/benchmarks.md). Nothing here depends on when a cycle is freed."""
    import gc

    gc.freeze()
    gc.set_threshold(50_000, 20, 20)
    gc.enable()


def wait_until(
    predicate: Callable[[], Any],
    what: str,
    timeout_s: float = 60,
    every_s: float = 0.2,
    error: type[Exception] = AssertionError,
) -> Any:
    """``predicate()`` once it is truthy (Kueue, the scheduler and KWOK act asynchronously), else
    ``error`` naming ``what`` and the last value."""
    started = time.monotonic()
    deadline = started + timeout_s
    last = None
    try:
        while time.monotonic() < deadline:
            last = predicate()
            if last:
                return last
            time.sleep(every_s)
    finally:
        spent("wait", time.monotonic() - started)
    raise error(f"not within {timeout_s:.0f}s: {what} (last: {last!r})")


def record_child(pid: int, argv: Sequence[str]) -> None:
    """One line per child in ``$TOPOGOV_CHILD_PIDS``: its pid, program and arguments (a line
    break in an argument, ``python -c`` with a script, written as ``\\n``)."""
    path = os.environ.get(PID_LOG_ENV)
    if path:
        args = " ".join(argv[1:]).replace("\n", "\\n")[:200]
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(f"{pid} {argv[0]} {args}\n")


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on and no other stack of this machine is about to take.

    Below the kernel's ephemeral range: a port the kernel hands out (bind to 0) can be taken,
    between this check and the server's own bind, as the local port of one of the many outgoing
    connections a starting stack makes (seen in CI: kube-scheduler's "bind: address already in
    use"). Checked free on every address, as the Go servers bind 0.0.0.0. And *reserved* for this
    process (:func:`_reserve`): a free port is only free until its server binds it, and the stacks
    of parallel test workers pick from the same range (seen in CI: two stacks, one port)."""
    import random

    low = _ephemeral_low()
    for _ in range(200):
        port = random.randrange(max(1024, low - 12000), low)
        with socket.socket() as s:
            try:
                s.bind(("0.0.0.0", port))
            except OSError:
                continue
        if _reserve(port):
            return port
    with socket.socket() as s:  # nothing free below the range: let the kernel choose
        s.bind((host, 0))
        return int(s.getsockname()[1])


PORT_RESERVATIONS = Path(tempfile.gettempdir()) / "topogov-ports"


def _reserve(port: int) -> bool:
    """Claim ``port`` for this process's lifetime: a file named for it, created exclusively, holding
    the pid. A claim whose process is gone is stale and taken over (one attempt: a racing taker wins
    or loses cleanly on the exclusive create). A process re-picking its own port is refused too (a
    stack's ten ports must differ)."""
    PORT_RESERVATIONS.mkdir(exist_ok=True)
    path = PORT_RESERVATIONS / str(port)
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                holder = int(path.read_text(encoding="ascii"))
            except (OSError, ValueError):
                return False  # being written (empty) or unreadable: someone else's
            if _pid_alive(holder):
                return False
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            continue
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(str(os.getpid()))
        return True
    return False


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
        record_child(self.proc.pid, self.argv)
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

    def pause(self) -> None:
        """Stop the process group where it stands (SIGSTOP): it uses no processor until
        :meth:`resume`, and keeps its state, its sockets and its children. A stop or a SIGKILL still
        ends it (:meth:`_signal` continues a paused group after a SIGTERM). For servers kept for
        later: an idle local stack still uses about 5 % of a core (the API server's and the
        controllers' periodic work)."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        """Continue a paused process group (SIGCONT; nothing for one that runs)."""
        self._signal(signal.SIGCONT)

    def _signal(self, sig: int) -> bool:
        """Send ``sig`` to the process group; False when there is nothing left to stop. A SIGTERM
        is followed by a SIGCONT: a paused group would otherwise keep it pending."""
        if self.proc is None or self.proc.poll() is not None:
            return False
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)
            if sig == signal.SIGTERM:
                os.killpg(self.proc.pid, signal.SIGCONT)
        return True


def stop_all(procs: Iterable[ManagedProcess], timeout_s: float = STOP_GRACE_S) -> None:
    """Stop processes together: SIGTERM to each group at once, then wait for all within one grace
    period, and SIGKILL what is left. A stack of seven servers then stops in about the time of the
    slowest, not of their sum."""
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


# --- a supervisor for programs that start trees of their own ---------------------------------------
SUPERVISED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def supervised(argv: Sequence[str]) -> list[str]:
    """``argv`` run under the supervisor (see the module docstring). Start it with
    ``start_new_session=True`` and stop it with SIGTERM to its pid: it kills the whole tree at once."""
    return [sys.executable, "-m", "topogov_local.processes", "supervise", str(os.getpid()), "--", *argv]


def descendants(root: int) -> list[int]:
    """The pids below ``root`` (children first), from each process's parent in ``/proc/<pid>/stat``."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", encoding="ascii", errors="replace") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    out: list[int] = []
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop(0)
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def _kill_descendants(timeout_s: float = 5.0) -> None:
    """SIGKILL every descendant of this process and reap them, until none is left: orphans of a
    killed parent come back to this process (a subreaper), and a fork under way shows up next round."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        left = descendants(os.getpid())
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        if not left:
            return
        time.sleep(0.005)


def _supervise(parent: int, argv: Sequence[str]) -> int:
    """Run ``argv`` (stdio inherited); kill its whole tree when it ends or when told to stop."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)  # handled: the tree goes with this process
    stopping: list[int] = []

    def on_signal(signum: int, _frame: Any) -> None:
        stopping.append(signum)
        _kill_descendants()
        os._exit(128 + signum)

    for sig in SUPERVISED_SIGNALS:
        signal.signal(sig, on_signal)
    if os.getppid() != parent:  # the parent died before the death signal was asked for
        return 1
    child = subprocess.Popen(list(argv))
    code = child.wait()
    _kill_descendants()  # what the program left behind (a jsii kernel, a bundler) goes with it
    return code


def main(argv: Sequence[str]) -> int:
    if len(argv) >= 3 and argv[0] == "supervise" and argv[2] == "--":
        return _supervise(int(argv[1]), argv[3:])
    print(
        "usage: python -m topogov_local.processes supervise PARENT_PID -- PROGRAM [ARG...]", file=sys.stderr
    )
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
