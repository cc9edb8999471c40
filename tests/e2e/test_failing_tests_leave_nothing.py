"""A test that fails or times out mid-way still stops the stack it started (issue 22, item 6): the
stacks of the suites are fixtures and context managers whose finalizers stop them, not test bodies.

Each case runs a small pytest session in a subprocess, with the suites' own fixtures, whose test
starts a stack and fails; a later test of the same session — the stack's processes would die with
the session anyway (PR_SET_PDEATHSIG), so the check must run while it is alive — finds none of the
stack a context manager started left; the stack the modules share (tests/stacks.py) outlives its
module by design, and a check at the session's end, once the session's fixtures are finalized
(``pytest_sessionfinish``, still in the session's process), finds none of it and no descendant of
the session left. And the run's own last check (in ``tests/conftest.py``), when it does find a
process left, kills it with its process group and fails the run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

from tests.e2e.hygiene import Tree

ROOT = Path(__file__).resolve().parents[2]

FAILING = """
import json, os
from pathlib import Path

from tests.stacks import labelled_stack
from topogov_local.processes import wait_until

OUT = Path(os.environ["HYGIENE_OUT"])


def _record(stack, which):
    procs = [stack.aws, *stack.cluster.procs]
    pids = [p.proc.pid for p in procs if p.proc is not None]
    OUT.write_text(json.dumps({**json.loads(OUT.read_text() or "{}"), which: pids}))


def test_fails_inside_a_labelled_stack(tmp_path):  # tests/stacks.py's context manager
    with labelled_stack(tmp_path / "stack", "p5.48xlarge=1", api_port=0, extra_nodes=False) as stack:
        _record(stack, "own")
        assert stack.api is None, "fails on purpose"


def test_times_out_with_the_e2e_stack_up(stack):  # tests/e2e/conftest.py's: the modules' shared stack
    _record(stack, "shared")
    wait_until(lambda: False, "a condition that never holds", timeout_s=0.5)
"""

AFTER = """
import json, os
from pathlib import Path

from topogov_local.processes import descendants


def _alive(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_nothing_of_the_failed_tests_own_stack_is_left():
    pids = json.loads(Path(os.environ["HYGIENE_OUT"]).read_text())
    assert len(pids["own"]) >= 8 and len(pids["shared"]) >= 8, pids  # moto and the cluster's seven
    assert [p for p in pids["own"] if _alive(p)] == []
"""

# Loaded with -p: after the session's fixtures are finalized (the shared stack stopped with them),
# before the session's process ends, what is still alive of every stack and of the session's tree.
AT_THE_END = """
import json, os
from pathlib import Path

from topogov_local.processes import descendants


def _alive(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def pytest_sessionfinish(session):
    pids = json.loads(Path(os.environ["HYGIENE_OUT"]).read_text() or "{}")
    left = [p for group in pids.values() for p in group if _alive(p)]
    tree = [p for p in descendants(os.getpid()) if _alive(p)]
    Path(os.environ["HYGIENE_END"]).write_text(json.dumps({"stacks": left, "descendants": tree}))
"""


def _session(
    tmp_path: Path, files: dict[str, str], env: dict[str, str], plugins: tuple[str, ...] = ()
) -> Session:
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-p", "no:randomly",
            "-p", "tests.conftest", "-p", "tests.e2e.conftest", *(a for p in plugins for a in ("-p", p)),
            "--rootdir", str(tmp_path), "--basetemp", str(tmp_path / "basetemp"), "-q",
            *(str(tmp_path / n) for n in files if n.startswith("test_"))]  # fmt: skip
    proc = subprocess.Popen(
        args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    tree = Tree(proc.pid)
    try:
        out, _ = proc.communicate(timeout=900)
        left = [(s.pid, " ".join(s.argv)[:100]) for s in tree.left()]
    finally:  # this test's own stop: whatever of the session is left goes
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        tree.kill()
        tree.close()
    return Session(proc.returncode, out, left)


@dataclass
class Session:
    returncode: int
    stdout: str
    left: list[tuple[int, str]]  # what of the session's process tree outlived it


def test_a_failing_or_timed_out_test_stops_the_stack_it_started(tmp_path):
    # Given a session whose tests start a stack each (a module fixture, a context manager) and fail
    out_file, end_file = tmp_path / "pids.json", tmp_path / "end.json"
    out_file.write_text("")
    env = {**os.environ, "HYGIENE_OUT": str(out_file), "HYGIENE_END": str(end_file),
           "TOPOGOV_CHILD_PIDS": str(tmp_path / "children.txt"),
           "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}  # fmt: skip
    # When it runs (its own end-of-run check off: the fixtures alone must stop the stacks)
    files = {"test_a_failing.py": FAILING, "test_b_after.py": AFTER, "hygiene_at_the_end.py": AT_THE_END}
    run = _session(tmp_path, files, env, plugins=("hygiene_at_the_end",))
    # Then both failed, the test after them found nothing of the stack the failing test started, and
    # the session's end nothing of the shared one nor of any process the session started
    assert run.returncode == 1, run.stdout[-4000:]
    assert "2 failed, 1 passed" in run.stdout, run.stdout[-4000:]
    assert json.loads(end_file.read_text()) == {"stacks": [], "descendants": []}
    assert "processes the tests started and left running" not in run.stdout
    assert run.left == []
    # and the shared stack, paused since its module ended, was stopped as a running one is: its
    # functions' IAM record kept (read from its emulator, which a paused one would not answer)
    (kept,) = (tmp_path / "basetemp").glob("shared[0-9]*/labeler/.topogov/local/iam.json")
    assert json.loads(kept.read_text())["denied"] == []


LEAKING = """
import os, sys
from pathlib import Path

from topogov_local.processes import ManagedProcess, descendants, wait_until

GRANDCHILD = "import subprocess, time; subprocess.Popen(['sleep', '300']); time.sleep(300)"


def test_leaves_a_server_and_its_child_running():
    proc = ManagedProcess("leaky", [sys.executable, "-c", GRANDCHILD], ready=lambda: True)
    proc.start()
    wait_until(lambda: descendants(proc.proc.pid), "the server's child")
    Path(os.environ["HYGIENE_OUT"]).write_text(str(proc.proc.pid))
"""


def test_the_runs_last_check_kills_what_a_test_left_with_its_process_group_and_fails(tmp_path):
    # Given a session whose test starts a server that starts a child, and stops neither
    env = {k: v for k, v in os.environ.items() if k != "TOPOGOV_CHILD_PIDS"}  # the session's own check
    env["HYGIENE_OUT"] = str(tmp_path / "group.txt")
    # When the session ends
    run = _session(tmp_path, {"test_leaky.py": LEAKING}, env)
    # Then the run fails naming what was left, and the server's whole process group is gone (the
    # child too: it has no death signal of its own, only the group kill reaches it)
    assert run.returncode == 1, run.stdout[-4000:]
    assert "processes the tests started and left running (killed now):" in run.stdout, run.stdout[-4000:]
    assert (tmp_path / "group.txt").exists(), run.stdout[-4000:]
    assert run.left == []
