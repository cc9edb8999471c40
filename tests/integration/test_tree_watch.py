"""The tests' process-tree watch (``tests/e2e/hygiene.Tree``) never counts the test run's own
process group or session as the tree's: a root started in them, with a child that stays in them,
once made every process of the run "left by the tree", and the finalizer that kills what is left
killed both xdist workers of a CI run."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from tests.e2e.hygiene import Tree

ROOT = "import subprocess, time; subprocess.Popen(['sleep', '0.5']); time.sleep(0.5)"


@pytest.fixture
def sibling() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "60"])  # in this run's group and session, not the tree's
    yield proc
    proc.kill()
    proc.wait()


@pytest.fixture
def root() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-c", ROOT])  # a child of it stays in our session
    yield proc
    proc.kill()
    proc.wait()


def test_a_process_of_the_runs_own_session_is_not_the_trees(sibling, root):
    tree = Tree(root.pid)
    try:
        deadline = time.monotonic() + 30
        while not any(s.argv[:1] == ("sleep",) and s.argv[1:] == ("0.5",) for s in tree.seen.values()):
            assert time.monotonic() < deadline, "the root's child was never seen"
            time.sleep(0.01)
        root.wait(timeout=30)
        left = {s.pid for s in tree.left()}
        assert sibling.pid not in left and sibling.poll() is None
    finally:
        tree.close()


# a root whose child waits 1 s between its fork and its exec: seen then, it carries the root's argv
SLOW_EXEC = (
    "import subprocess, time; "
    "p = subprocess.Popen(['sleep', '30'], preexec_fn=lambda: time.sleep(1)); "
    "p.wait()"
)


@pytest.fixture
def slow_exec() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-c", SLOW_EXEC], start_new_session=True)
    yield proc
    Tree(proc.pid).kill()
    proc.kill()
    proc.wait()


def test_a_child_seen_before_its_exec_is_known_by_what_it_execs(slow_exec):
    tree = Tree(slow_exec.pid)
    try:
        # Given the tree saw the child between its fork and its exec (its argv then: the root's)
        deadline = time.monotonic() + 30
        while not any(s.pid != slow_exec.pid and "-c" in s.argv for s in tree.seen.values()):
            assert time.monotonic() < deadline, "the forked child was never seen before its exec"
            time.sleep(0.005)
        # Then once it has exec'd, the tree knows it by its new argv (same pid, same start time)
        deadline = time.monotonic() + 30
        while not tree.running(lambda argv: argv == ("sleep", "30")):
            assert time.monotonic() < deadline, [s.argv for s in tree.seen.values()]
            time.sleep(0.02)
    finally:
        tree.kill()
        tree.close()
