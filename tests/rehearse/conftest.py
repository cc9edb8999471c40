"""``cdk deploy`` rehearsed (issue #17): the real CDK CLI against the local AWS emulator, the deployed
stack checked through the services' APIs, the handlers run under their deployed roles with IAM
enforced, an upgrade, ``cdk destroy``.

One lifecycle per run (:class:`Lifecycle`, module scope in ``test_rehearse.py``), in phases; each
phase keeps its result or its error, so a test of a later phase fails naming the phase that broke.
Bounded in ``make test``; ``make rehearse`` sets ``TOPOGOV_REHEARSE=full`` (a larger fleet, every
scenario step repeated) and prints the report, also written to ``.topogov/rehearse/report.json``.
"""

from __future__ import annotations

import json
import os
import time
import traceback
from pathlib import Path
from typing import Any

import pytest

FULL = os.environ.get("TOPOGOV_REHEARSE") == "full"
ROOT = Path(__file__).resolve().parents[2]
REPORT_PATH = ROOT / ".topogov" / "rehearse" / "report.json"
CLUSTER = "rehearse-eks"


class Phase:
    def __init__(self, name: str) -> None:
        self.name = name
        self.result: Any = None
        self.error: str | None = None
        self.seconds = 0.0

    def get(self) -> Any:
        if self.error is not None:
            pytest.fail(f"phase {self.name!r} failed:\n{self.error}", pytrace=False)
        return self.result


class Lifecycle:
    """Deploy -> check -> least privilege -> upgrade -> destroy: phases planned with :meth:`add`, each
    run once, in order, when a test first asks for it (``phases[name]``) — so the tests of the deployed
    stack (in file order) look at it before the upgrade and ``cdk destroy`` change it."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.plan: list[tuple[str, Any]] = []
        self.done: dict[str, Phase] = {}
        self.phases = _Phases(self)
        self.report: dict[str, Any] = {"mode": "full" if FULL else "bounded", "phases": {}}

    def add(self, name: str, fn: Any) -> None:
        self.plan.append((name, fn))

    def until(self, name: str) -> Phase:
        if name not in {n for n, _ in self.plan}:
            raise KeyError(name)
        for planned, fn in self.plan:
            if planned not in self.done:
                self.run(planned, fn)
            if planned == name:
                break
        return self.done[name]

    def finish(self) -> None:
        """Every phase not run yet (``make rehearse`` reports them all)."""
        if self.plan:
            self.until(self.plan[-1][0])

    def run(self, name: str, fn: Any) -> Phase:
        phase = self.done[name] = Phase(name)
        failed = [p.name for p in self.done.values() if p.error and p is not phase]
        if failed:
            phase.error = "an earlier phase failed: " + ", ".join(failed)
            return phase
        started = time.monotonic()
        try:
            phase.result = fn()
        except Exception:
            phase.error = traceback.format_exc()
        phase.seconds = time.monotonic() - started
        self.report["phases"][name] = round(phase.seconds, 1)
        return phase


class _Phases:
    def __init__(self, lifecycle: Lifecycle) -> None:
        self._lc = lifecycle

    def __getitem__(self, name: str) -> Phase:
        return self._lc.until(name)


_REPORT: dict[str, Any] = {}


@pytest.fixture(scope="session")
def rehearse_report() -> dict[str, Any]:
    return _REPORT


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _REPORT:
        return
    from tests.rehearse.report import render

    if FULL:
        REPORT_PATH.parent.mkdir(parents=True, exist_ok=True)
        REPORT_PATH.write_text(json.dumps(_REPORT, indent=2, sort_keys=True, default=str) + "\n")
    for line in render(_REPORT):
        terminalreporter.write_line(line)
    if FULL:
        terminalreporter.write_line(f"(written to {REPORT_PATH.relative_to(ROOT)})")
