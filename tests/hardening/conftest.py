"""Hardening suites (issue #7): fuzzing, authorization matrix, races, faults, escape attempts.

Bounded in ``make test``; ``make hardening`` sets ``TOPOGOV_HARDENING=full`` for the report sizes
(e.g. 1,000+ fuzzed requests, 500 racing submissions) and prints the report at the end.

Every test records its figures with the ``report`` fixture: ``report.add("section", key=value...)``
(numbers add up across calls; other values are replaced). In full mode (one process, no xdist),
the report is printed after the run and written to ``.topogov/hardening/report.json``.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from tests.stacks import shared_stack

FULL = os.environ.get("TOPOGOV_HARDENING") == "full"
REPORT_PATH = Path(".topogov/hardening/report.json")


def scale(bounded: int, full: int) -> int:
    """The size of a run: ``bounded`` in ``make test``, ``full`` in ``make hardening``."""
    return full if FULL else bounded


class Report:
    def __init__(self) -> None:
        self.sections: dict[str, dict[str, Any]] = defaultdict(dict)

    def add(self, section: str, **figures: Any) -> None:
        into = self.sections[section]
        for key, value in figures.items():
            if isinstance(value, int | float) and not isinstance(value, bool) and key in into:
                into[key] += value
            else:
                into[key] = value

    def max(self, section: str, key: str, value: float) -> None:
        into = self.sections[section]
        into[key] = max(into.get(key, value), value)

    def to_json(self) -> dict[str, Any]:
        return {"mode": "full" if FULL else "bounded", "sections": dict(self.sections)}


_REPORT = Report()


@pytest.fixture(scope="session")
def report() -> Report:
    return _REPORT


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _REPORT.sections:
        return
    doc = _REPORT.to_json()
    if FULL:
        REPORT_PATH.parent.mkdir(parents=True, exist_ok=True)
        REPORT_PATH.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    write = terminalreporter.write_line
    write("")
    write(f"== hardening report ({doc['mode']}) ==")
    for section in sorted(doc["sections"]):
        figures = doc["sections"][section]
        write(f"{section}:")
        for key in sorted(figures):
            write(f"  {key}: {figures[key]}")
    if FULL:
        write(f"(written to {REPORT_PATH})")


# --- the local stack with the API, shared by the modules of a worker ----------------------------------

PROFILES = ("topogov-team-a", "topogov-team-b", "topogov-team-c", "topogov-admin")


@pytest.fixture(scope="module")
def stack(shared_stacks):
    """The local stack (moto server, Kubernetes API, API Gateway + api handler), the nodes labelled,
    the snapshot written and the Kueue objects created by one reconcile pass: the worker's stack of
    the API's kind (tests/stacks.py), put back as it was after that pass before this module."""
    with shared_stack(shared_stacks, "api") as s:
        yield s


def call(stack: Any, method: str, path: str, profile: str = "topogov-team-a", body: Any = None, **kw: Any):
    """A SigV4-signed request to the local API as ``profile`` (see .topogov/local/aws-credentials)."""
    from topogov_cli.sigv4 import credentials_for_profile, signed_request

    creds = credentials_for_profile(profile, str(stack.credentials))
    return signed_request(
        method, stack.api.url + path, credentials=creds, region="us-east-1", json_body=body, **kw
    )
