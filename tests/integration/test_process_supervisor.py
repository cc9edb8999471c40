"""The supervisor a program with a tree of its own runs under (``topogov_local.processes.supervised``:
the CDK CLI, whose node runs ``python app.py``, which runs jsii's node): whatever ends it — a stop
signal, its parent's death, the program's own end — the whole tree goes, grandchildren included,
which PR_SET_PDEATHSIG alone does not reach."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from tests.e2e.hygiene import Tree
from topogov_local.processes import supervised

# a program like the CDK CLI: a child that starts a grandchild, each of them sleeping; "ready" once
# the grandchild runs. With "leave", the program ends once they run and leaves the two behind.
TREE = """
import subprocess, sys, time
GRANDCHILD = "import subprocess, time; p = subprocess.Popen(['sleep', '300']); print(p.pid, flush=True); time.sleep(300)"
child = subprocess.Popen([sys.executable, "-c", GRANDCHILD], stdout=subprocess.PIPE, text=True)
print("ready", child.pid, child.stdout.readline().strip(), flush=True)
if sys.argv[1:] != ["leave"]:
    time.sleep(300)
"""  # noqa: E501


def _started(proc: subprocess.Popen[str]) -> list[int]:
    """The pids of the program's child and grandchild, once both run."""
    assert proc.stdout is not None
    word, *pids = proc.stdout.readline().split()
    assert word == "ready"
    return [int(p) for p in pids]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture
def started() -> Iterator[list[tuple[subprocess.Popen[str], Tree]]]:
    """What a test starts; killed, with its tree, however the test ends."""
    runs: list[tuple[subprocess.Popen[str], Tree]] = []
    yield runs
    for proc, tree in runs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        tree.kill()
        tree.close()


def _supervise(started, *args: str) -> tuple[subprocess.Popen[str], Tree, list[int]]:
    argv = supervised([sys.executable, "-c", TREE, *args])
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, start_new_session=True)
    tree = Tree(proc.pid)
    started.append((proc, tree))
    return proc, tree, _started(proc)


def _gone(tree: Tree, within_s: float = 3.0) -> list[str]:
    deadline = time.monotonic() + within_s
    while tree.left() and time.monotonic() < deadline:
        time.sleep(0.01)
    return [" ".join(s.argv)[:80] for s in tree.left()]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_stop_signal_to_the_supervisor_ends_the_whole_tree(started, sig):
    # Given a program with a child and a grandchild under the supervisor
    proc, tree, pids = _supervise(started)
    assert all(_alive(p) for p in pids)
    # When the supervisor gets a stop signal
    proc.send_signal(sig)
    # Then it exits with the signal's status and nothing of the tree is left
    assert proc.wait(timeout=3) == 128 + sig
    assert _gone(tree) == [] and not any(_alive(p) for p in pids)


def test_the_tree_ends_when_the_supervisors_parent_is_killed(started):
    # Given a parent that started the supervisor, and the program's tree under it
    inner = (
        "import subprocess, sys, time\n"
        "from topogov_local.processes import supervised\n"
        f"p = subprocess.Popen(supervised([sys.executable, '-c', {TREE!r}]), start_new_session=True)\n"
        "time.sleep(300)"
    )
    parent = subprocess.Popen([sys.executable, "-c", inner], stdout=subprocess.PIPE, text=True)
    tree = Tree(parent.pid)
    started.append((parent, tree))
    pids = _started(parent)  # the program's line, through the supervisor's inherited stdout
    assert all(_alive(p) for p in pids)
    # When the parent is killed (no handler of its own runs)
    parent.kill()
    parent.wait(timeout=10)
    # Then the supervisor (its death signal) takes the whole tree down
    assert _gone(tree) == [] and not any(_alive(p) for p in pids)


def test_what_the_program_leaves_behind_goes_when_it_ends(started):
    # Given a program that ends at once, leaving a child and a grandchild running
    proc, tree, pids = _supervise(started, "leave")
    # When it has ended / Then the supervisor exits with its status, and nothing is left
    assert proc.wait(timeout=10) == 0
    assert _gone(tree) == [] and not any(_alive(p) for p in pids)
