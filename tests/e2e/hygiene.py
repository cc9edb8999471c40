"""``topogov local`` as a process tree: started in a session of its own, watched from outside
(``/proc``: every descendant it ever had, by pid and start time, and the process groups and
sessions they made), stopped by a signal once a phase of its start is under way — known by what
runs (the synth's ``python app.py``, ``cdk bootstrap``, ``cdk deploy``, ``kube-apiserver``) or by
what it prints once ready, never by a deadline.

Also a script, for the figures: ``python -m tests.e2e.hygiene PHASE SIGNAL [RUNS]`` (from the
repository, with the venv's python) prints, per run, how long ``topogov local`` took to exit after
the signal and how long until the last process of its tree was gone.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
READY_LINE = "Reconciling every"  # printed once the stack is up and its first pass ran
# Three instances, not the default 70: the subject is the process tree, which the fleet's size does
# not change (every server, the CDK CLI's tree); the default's instances, nodes and first pass made a
# start to the ready line cost 23.4 CPU-s against 20.8 (the mean of five starts each, every process
# of the tree counted).
FLEET = "p5.48xlarge=2,c5.2xlarge=1"


@dataclass(frozen=True)
class Seen:
    pid: int
    started: int  # the process's start time (clock ticks since boot): a reused pid is another process
    pgid: int
    sid: int
    argv: tuple[str, ...]


def _stat(pid: int) -> tuple[str, int, int, int, int] | None:
    """(state, ppid, pgid, sid, start time) of ``pid`` from /proc/PID/stat, None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19])


def _argv(pid: int) -> tuple[str, ...]:
    try:
        return tuple(
            a.decode(errors="replace") for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a
        )
    except OSError:
        return ()


def _table() -> dict[int, tuple[str, int, int, int, int]]:
    out = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            st = _stat(int(entry.name))
            if st is not None:
                out[int(entry.name)] = st
    return out


@dataclass
class Tree:
    """Every descendant ``root`` has had, sampled every 20 ms until :meth:`close`."""

    root: int
    seen: dict[int, Seen] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        # this process's group and session are the test run's (the CI job's, the xdist workers'),
        # never the tree's: a root started in them, or a child of it that stays in them, would
        # otherwise make every process of the run "the tree's", left and killed (a CI run lost
        # both its workers so). A root started in a session of its own keeps it.
        self._outer = {os.getpgid(0), os.getsid(0)}
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._watch, name="tree-watch", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(0.02)

    def sample(self) -> None:
        table = _table()
        children: dict[int, list[int]] = {}
        for pid, (_, ppid, *_rest) in table.items():
            children.setdefault(ppid, []).append(pid)
        todo = list(children.get(self.root, []))
        with self._lock:
            groups = {self.root} | {s.pgid for s in self.seen.values()} | {s.sid for s in self.seen.values()}
            groups -= self._outer
            # a process in a group or session of the tree belongs to it, even once re-parented to init
            todo += [
                pid for pid, st in table.items() if (st[2] in groups or st[3] in groups) and pid != self.root
            ]
            while todo:
                pid = todo.pop()
                st = table.get(pid)
                if st is None or st[0] == "Z":
                    continue
                key = self.seen.get(pid)
                argv = _argv(pid)
                # read again at every sample: a child seen between its fork and its exec shows its
                # parent's argv under the pid and start time it keeps after the exec (a CI run never
                # saw its kube-apiserver so, and waited 900 s for it)
                same = key is not None and key.started == st[4]
                if not same or (argv and key is not None and key.argv != argv):
                    kept = key.argv if key is not None and same else ()
                    self.seen[pid] = Seen(pid, st[4], st[2], st[3], argv or kept)
                todo.extend(children.get(pid, []))

    def running(self, match: Callable[[tuple[str, ...]], bool]) -> bool:
        with self._lock:
            return any(match(s.argv) for s in self.seen.values() if _alive(s))

    def left(self) -> list[Seen]:
        """What of the tree still runs: each process seen (same pid, same start time, not a zombie),
        and any other process in one of their groups or sessions."""
        self.sample()
        with self._lock:
            return [s for s in self.seen.values() if _alive(s)]

    def kill(self) -> None:
        """SIGKILL whatever of the tree is left (a finalizer's last resort)."""
        for _ in range(50):
            left = self.left()
            if not left:
                return
            for s in left:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(s.pid, signal.SIGKILL)
            time.sleep(0.02)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def _alive(s: Seen) -> bool:
    st = _stat(s.pid)
    return st is not None and st[0] != "Z" and st[4] == s.started


# --- what shows a phase is under way -----------------------------------------------------------------
def _synth(argv: tuple[str, ...]) -> bool:
    return any(a.endswith("app.py") for a in argv)  # cdk.json's app: the CLI runs it to synthesize


def _cdk(command: str) -> Callable[[tuple[str, ...]], bool]:
    """The CLI's own node running ``cdk COMMAND`` (not its supervisor, which names it too)."""

    def match(argv: tuple[str, ...]) -> bool:
        node = bool(argv) and Path(argv[0]).name == "node"
        return node and any(a.endswith(("/.bin/cdk", "aws-cdk/bin/cdk")) for a in argv) and command in argv

    return match


def _apiserver(argv: tuple[str, ...]) -> bool:
    return bool(argv) and argv[0].endswith("/kube-apiserver")


PHASES: dict[str, Callable[[tuple[str, ...]], bool] | None] = {
    "synth": _synth,
    "bootstrap": _cdk("bootstrap"),
    "deploy": _cdk("deploy"),
    "controlplane": _apiserver,
    "ready": None,  # the line READY_LINE
}


@dataclass
class Local:
    """One ``topogov local`` (no walkthrough, one pass, then reconcile every hour; :data:`FLEET`)
    and its tree."""

    proc: subprocess.Popen[str]
    tree: Tree
    lines: list[str]
    ready: threading.Event

    def reached(self, phase: str, timeout_s: float = 900) -> None:
        """Until ``phase`` is under way (a failure only when the start ended first, or after
        ``timeout_s``: a hung start, not a slow one)."""
        match = PHASES[phase]
        deadline = time.monotonic() + timeout_s
        while not (self.ready.is_set() if match is None else self.tree.running(match)):
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"topogov local exited {self.proc.returncode} before {phase}:\n{self.output()}"
                )
            if time.monotonic() > deadline:
                raise AssertionError(f"no {phase} after {timeout_s:.0f} s:\n{self.output()}")
            time.sleep(0.02)

    def stop(self, sig: signal.Signals, within_s: float) -> tuple[int | None, float, float, list[Seen]]:
        """Send ``sig`` as it comes (SIGINT and SIGHUP to the process group, as a terminal sends
        them; SIGTERM and SIGKILL to the pid, as ``kill`` does); return (exit code or None, seconds
        to exit, seconds until the tree was gone, what was left of it after ``within_s``)."""
        children = [s for s in self.tree.left() if s.pid != self.proc.pid]
        sent = time.monotonic()
        if sig in (signal.SIGINT, signal.SIGHUP):
            os.killpg(self.proc.pid, sig)
        else:
            self.proc.send_signal(sig)
        try:
            code: int | None = self.proc.wait(timeout=within_s)
        except subprocess.TimeoutExpired:
            code = None
        exited = time.monotonic() - sent
        while self.tree.left() and time.monotonic() - sent < within_s:
            time.sleep(0.01)
        gone = time.monotonic() - sent
        assert children, "the tree had no children when signalled"
        return code, exited, gone, self.tree.left()

    def output(self) -> str:
        return "".join(self.lines[-60:])

    def kill(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        self.tree.kill()
        self.tree.close()


@contextlib.contextmanager
def local(directory: Path, env: dict[str, str] | None = None) -> Iterator[Local]:
    """``topogov local`` in ``directory``, killed with its whole tree on the way out whatever
    happened (a failed assertion, a timeout, an interrupted run)."""
    directory.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "topogov_cli.main", "local", "--api-port", "0", "--no-walkthrough",
         "--dir", str(directory / "state"), "--interval", "3600", "--fleet", FLEET],
        cwd=directory, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}, start_new_session=True,
    )  # fmt: skip
    lines: list[str] = []
    ready = threading.Event()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if READY_LINE in line:
                ready.set()

    threading.Thread(target=pump, name="local-output", daemon=True).start()
    it = Local(proc, Tree(proc.pid), lines, ready)
    try:
        yield it
    finally:
        it.kill()


def _measure(phase: str, sig: signal.Signals, runs: int) -> None:
    import tempfile

    for i in range(runs):
        with tempfile.TemporaryDirectory(prefix="topogov-stop-") as tmp:
            env = {"TOPOGOV_ASSEMBLY_DIR": str(Path(tmp) / "assembly")} if phase == "synth" else {}
            with local(Path(tmp), env) as it:
                t0 = time.monotonic()
                it.reached(phase)
                at = time.monotonic() - t0
                n = len(it.tree.left())
                code, exited, gone, left = it.stop(sig, within_s=60)
                print(
                    f"{phase} {sig.name} run {i + 1}: signalled {at:.1f} s after start ({n} processes); "
                    f"exit {code} after {exited:.2f} s; tree gone after {gone:.2f} s; left {len(left)}",
                    flush=True,
                )


if __name__ == "__main__":
    _measure(sys.argv[1], signal.Signals[sys.argv[2]], int(sys.argv[3]) if len(sys.argv) > 3 else 1)
