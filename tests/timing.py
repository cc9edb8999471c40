"""Where the suite's time goes: a pytest plugin that records it and a report that adds it up.

``TOPOGOV_SUITE_TIMING=DIR pytest ...`` (tests/conftest.py registers the recorder when it is set)
writes ``DIR/<worker>.json`` per xdist worker: every test's setup, call and teardown (with their
wall-clock start and stop), the set-up time of each module- and session-scoped fixture (and of any
other that took a second or more), and what the local stack spent inside each phase, read from
``topogov_local.processes.SPENT`` (cluster starts and resets, stack starts and resets, CDK runs,
waits for Kueue, the scheduler and KWOK), and the CPU time the worker's process tree used in each
phase (:func:`tree_cpu`: the worker, every process below it, and what those have reaped).

``python -m tests.timing DIR`` prints the breakdown docs/benchmarks.md ("The suite's time") shows:
per suite, per file (worker, tests, wall, setup/call/teardown, stacks started and reset, clusters
started and reset, CDK runs, waits) and per worker (span, busy time, the files in the order it ran
them).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

ENV = "TOPOGOV_SUITE_TIMING"
SLOW_FIXTURE_S = 1.0


CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _cpu_s(pid: int) -> float:
    """CPU seconds of process ``pid`` and of the children it has reaped, from /proc; 0 once gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = raw[raw.rindex(")") + 2 :].split()  # after the command name, which may hold spaces
    return sum(int(f) for f in fields[11:15]) / CLOCK_TICKS  # utime, stime, cutime, cstime


def tree_cpu(root: int) -> float:
    """CPU seconds used so far by process ``root``, every live process below it
    (``topogov_local.processes.descendants``), and every process they reaped (a finished stack's
    servers count in the worker's reaped children). Linux only; 0 elsewhere."""
    if not Path("/proc/self/stat").exists():
        return 0.0
    from topogov_local.processes import descendants

    return sum(_cpu_s(pid) for pid in (root, *descendants(root)))


def _spent() -> list[tuple[str, float]]:
    processes = sys.modules.get("topogov_local.processes")
    return processes.SPENT if processes is not None else []


class Recorder:
    """Registered by tests/conftest.py when ``$TOPOGOV_SUITE_TIMING`` names a directory."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        self.phases: list[dict[str, Any]] = []
        self.fixtures: list[dict[str, Any]] = []
        self._seen = 0  # how much of SPENT earlier phases took
        self._cpu = tree_cpu(os.getpid())  # the tree's CPU seconds at the last report

    def _take_cpu(self) -> float:
        now = tree_cpu(os.getpid())
        used, self._cpu = now - self._cpu, now
        return round(used, 2)

    def _take_spent(self) -> dict[str, list[float]]:
        spent = _spent()
        new, self._seen = spent[self._seen :], len(spent)
        out: dict[str, list[float]] = defaultdict(list)
        for what, seconds in new:
            out[what].append(round(seconds, 3))
        return dict(out)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef: Any, request: Any) -> Any:
        started = time.monotonic()
        yield
        seconds = time.monotonic() - started
        if fixturedef.scope != "function" or seconds >= SLOW_FIXTURE_S:
            self.fixtures.append(
                {
                    "file": _file_of(request.node.nodeid),
                    "fixture": fixturedef.argname,
                    "scope": fixturedef.scope,
                    "seconds": round(seconds, 3),
                }
            )

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.phases.append(
            {
                "nodeid": report.nodeid,
                "file": _file_of(report.nodeid),
                "when": report.when,
                "outcome": report.outcome,
                "seconds": round(report.duration, 3),
                "start": report.start,
                "stop": report.stop,
                "spent": self._take_spent(),
                "cpu": self._take_cpu(),
            }
        )

    def pytest_sessionfinish(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        doc = {"worker": self.worker, "phases": self.phases, "fixtures": self.fixtures}
        (self.dir / f"{self.worker}.json").write_text(json.dumps(doc) + "\n", encoding="utf-8")


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


# -- the report ------------------------------------------------------------------------------------


def load(directory: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))]


def per_file(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    files: dict[str, dict[str, Any]] = {}
    for doc in docs:
        for ph in doc["phases"]:
            f = files.setdefault(
                ph["file"],
                {"worker": doc["worker"], "tests": set(), "start": ph["start"], "stop": ph["stop"],
                 "setup": 0.0, "call": 0.0, "teardown": 0.0, "spent": defaultdict(list), "failed": 0,
                 "cpu": 0.0},
            )  # fmt: skip
            f["tests"].add(ph["nodeid"])
            f["start"], f["stop"] = min(f["start"], ph["start"]), max(f["stop"], ph["stop"])
            f[ph["when"]] += ph["seconds"]
            f["cpu"] += ph.get("cpu", 0.0)  # recorded since 2026-12-04
            f["failed"] += ph["outcome"] == "failed"
            for what, values in ph["spent"].items():
                f["spent"][what] += values
    return files


def _n_s(values: list[float]) -> str:
    return f"{len(values)} × {sum(values) / len(values):.1f} s" if values else ""


def _waits(spent: dict[str, list[float]]) -> float:
    return sum(sum(v) for k, v in spent.items() if k.startswith("wait"))


def _cdk(spent: dict[str, list[float]]) -> list[float]:
    return [s for k, v in spent.items() if k.startswith("cdk ") for s in v]


def report(docs: list[dict[str, Any]], top: int = 0) -> list[str]:
    files = per_file(docs)
    suites: dict[str, list[float]] = defaultdict(lambda: [0.0, 0, 0.0])
    for name, f in files.items():
        suite = name.split("/")[1] if name.count("/") >= 2 else name
        suites[suite][0] += f["setup"] + f["call"] + f["teardown"]
        suites[suite][1] += len(f["tests"])
        suites[suite][2] += f["cpu"]
    total = sum(v[0] for v in suites.values())
    start = min(f["start"] for f in files.values())
    stop = max(f["stop"] for f in files.values())
    out = [
        f"{sum(len(f['tests']) for f in files.values())} tests in {len(files)} files; "
        f"{total:.0f} s of test time over {len(docs)} worker(s), {stop - start:.0f} s from the first "
        f"test's start to the last one's end; {sum(v[2] for v in suites.values()):.0f} s of CPU in the "
        "workers' process trees",
        "",
        "| suite | tests | test time | CPU |",
        "|---|---:|---:|---:|",
    ]
    ranked_suites = sorted(suites.items(), key=lambda kv: -kv[1][0])
    out += [f"| {s} | {n} | {t:.0f} s | {c:.0f} s |" for s, (t, n, c) in ranked_suites]
    out += [
        "",
        "| file | worker | tests | time | setup | call | teardown | stacks started | stack resets "
        "| clusters started | cluster resets | CDK runs | waits | CPU |",
        "|---|---|---:|---:|---:|---:|---:|---|---|---|---|---|---:|---:|",
    ]
    ranked = sorted(files.items(), key=lambda kv: -(kv[1]["setup"] + kv[1]["call"] + kv[1]["teardown"]))
    for name, f in ranked[: top or None]:
        sp = f["spent"]
        out.append(
            f"| {name} | {f['worker']} | {len(f['tests'])} | {f['setup'] + f['call'] + f['teardown']:.1f} "
            f"| {f['setup']:.1f} | {f['call']:.1f} | {f['teardown']:.1f} | {_n_s(sp.get('stack start', []))} "
            f"| {_n_s(sp.get('stack reset', []))} | {_n_s(sp.get('cluster start', []))} "
            f"| {_n_s(sp.get('cluster reset', []))} "
            f"| {_n_s(_cdk(sp))} | {_waits(sp):.1f} | {f['cpu']:.1f} |"
        )
    out += ["", "| worker | span | busy | files, in order |", "|---|---:|---:|---|"]
    for doc in docs:
        mine = sorted((f["start"], n, f) for n, f in files.items() if f["worker"] == doc["worker"])
        if not mine:
            continue
        busy = sum(f["setup"] + f["call"] + f["teardown"] for _, _, f in mine)
        span = max(f["stop"] for *_, f in mine) - mine[0][0]
        out.append(f"| {doc['worker']} | {span:.0f} s | {busy:.0f} s | {len(mine)} files |")
    return out


def fixtures(docs: list[dict[str, Any]], top: int = 30) -> list[str]:
    rows = sorted((fx for doc in docs for fx in doc["fixtures"]), key=lambda fx: -fx["seconds"])
    out = ["| fixture | scope | file | set-up |", "|---|---|---|---:|"]
    for fx in rows[:top]:
        out.append(f"| {fx['fixture']} | {fx['scope']} | {fx['file']} | {fx['seconds']:.1f} s |")
    return out


def weights(docs: list[dict[str, Any]]) -> dict[str, float]:
    """Each file's time (set-up, calls, tear-down), the heaviest first: ``tests/weights.json``, the
    order in which the workers are handed files (tests/conftest.py), so that they end together."""
    files = per_file(docs)
    total = {name: round(f["setup"] + f["call"] + f["teardown"], 1) for name, f in files.items()}
    return dict(sorted(total.items(), key=lambda kv: (-kv[1], kv[0])))


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m tests.timing DIR [--top N | --weights]", file=sys.stderr)
        return 2
    top = int(argv[argv.index("--top") + 1]) if "--top" in argv else 0
    docs = load(Path(argv[0]))
    if not docs:
        print(f"no timing files in {argv[0]} (run pytest with {ENV}={argv[0]})", file=sys.stderr)
        return 2
    if "--weights" in argv:
        print(json.dumps(weights(docs), indent=1))
        return 0
    print("\n".join([*report(docs, top), "", *fixtures(docs)]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
