"""Shared test configuration: the packages are importable from their folders without an install,
and the run fails if any emulator process a test started outlived it (each is killed, with its
process group, before the run ends)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
for folder in ("lambdas", "cli", "local"):
    sys.path.insert(0, str(ROOT / folder))

PID_LOG_ENV = "TOPOGOV_CHILD_PIDS"  # topogov_local.processes appends each child it starts
LAYER_CACHE_ENV = "TOPOGOV_LAYER_CACHE"
# The CDK's own template validation (aws-cdk-lib's CloudFormationValidatePlugin, on by default: every
# synth compiles its WebAssembly engine and checks the template against CloudFormation's schemas)
# cost 7 of a CLI synth's 12 CPU-seconds, at each of the run's synths of the same three templates.
# The run skips it (aws-cdk-lib reads CDK_VALIDATION=false), but for the one test that asserts its
# verdict on each template (tests/infra/test_template_checks.py) and any run that sets it itself.
CDK_VALIDATION_ENV = "CDK_VALIDATION"


def pytest_configure(config: pytest.Config) -> None:
    # where the suite's time goes (tests/timing.py): recorded where the tests run, by each xdist
    # worker, not by the controller too (it receives every worker's reports and would count them twice)
    distributed = bool(getattr(config.option, "numprocesses", None)) and not hasattr(config, "workerinput")
    if os.environ.get("TOPOGOV_SUITE_TIMING") and not distributed:
        from tests.timing import Recorder

        config.pluginmanager.register(Recorder(Path(os.environ["TOPOGOV_SUITE_TIMING"])), "topogov-timing")
    if not hasattr(config, "workerinput") and PID_LOG_ENV not in os.environ:  # the controller
        fd, path = tempfile.mkstemp(prefix="topogov-children-", suffix=".txt")
        os.close(fd)
        os.environ[PID_LOG_ENV] = path  # xdist workers and every subprocess inherit it
        config._topogov_pid_log = path  # type: ignore[attr-defined]
    if not hasattr(config, "workerinput"):
        os.environ.setdefault(CDK_VALIDATION_ENV, "false")  # xdist workers and every subprocess inherit it
    if not hasattr(config, "workerinput") and LAYER_CACHE_ENV not in os.environ:
        # the layer's pip install, made once per run and copied by every later build (infra/layer.py)
        os.environ[LAYER_CACHE_ENV] = tempfile.mkdtemp(prefix="topogov-layer-")
        config._topogov_layer_cache = os.environ[LAYER_CACHE_ENV]  # type: ignore[attr-defined]


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection made (the modules, the items) lives until the run ends:
    :func:`topogov_local.processes.collect_rarely` (a fifth of a worker's CPU was the collector's);
    tests of the collector's use set what they need (tests/unit/test_freeze_long_lived.py)."""
    from topogov_local.processes import collect_rarely

    collect_rarely()


WEIGHTS = Path(__file__).with_name("weights.json")  # python -m tests.timing DIR --weights


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The heaviest files first (tests/weights.json: each file's time in a measured run; a file not
    listed last), each file's tests in their order: with ``--dist loadfile --no-loadscope-reorder``
    (make test) xdist hands the workers the files in this order, the longest first, so that the
    workers end together instead of one running a long file alone at the end. The order is the
    same in every worker, as xdist requires."""
    weight = json.loads(WEIGHTS.read_text()) if WEIGHTS.exists() else {}
    rank = {}
    for item in items:
        rank.setdefault(item.nodeid.split("::", 1)[0], len(rank))
    items.sort(
        key=lambda item: (
            -weight.get(item.nodeid.split("::", 1)[0], 0.0),
            rank[item.nodeid.split("::", 1)[0]],
        )
    )


def _alive(pid: int, program: str) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] != "Z" and cmdline[0].decode(errors="replace") == program


def _kill(pid: int) -> None:
    """SIGKILL ``pid`` and, when it leads a process group (every child the local stack starts does:
    a server, the CDK CLI's supervisor), the whole group: what it started goes too."""
    with contextlib.suppress(ProcessLookupError):
        if os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    cache = getattr(session.config, "_topogov_layer_cache", None)
    if cache is not None:
        shutil.rmtree(cache, ignore_errors=True)
    path = getattr(session.config, "_topogov_pid_log", None)
    if path is None:
        return
    left = []
    for line in Path(path).read_text().splitlines():
        pid, program, *_ = [*line.split(" ", 2), ""]
        if _alive(int(pid), program):
            left.append(line)
            _kill(int(pid))
    os.unlink(path)
    if left:
        print("\nprocesses the tests started and left running (killed now):", *left, sep="\n  ")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def shared_stacks(tmp_path_factory):
    """The local stacks this process shares between modules (tests/stacks.py), stopped at the end."""
    from tests.stacks import SharedStacks

    stacks = SharedStacks(tmp_path_factory.mktemp("shared"))
    yield stacks
    stacks.close()


@pytest.fixture(autouse=True, scope="module")
def _every_aws_call_of_a_local_function_is_allowed_by_its_deployed_role():
    """Least privilege, observed in every suite: a local stack's functions call AWS with sessions of
    their deployed roles, judged against those roles' policies and the real resource ARNs
    (topogov_local.aws.iam); a module whose stacks saw a call refused fails, naming each call."""
    stack = sys.modules.get("topogov_local.stack")
    before = len(stack.IAM_DENIED) if stack else 0
    yield
    stack = sys.modules.get("topogov_local.stack")
    denied = stack.IAM_DENIED[before:] if stack else []
    assert not denied, "calls the deployed roles refused:\n" + "\n".join(
        f"  {d['principal']}: {d['action']} on {d['resource']}" for d in denied
    )
