"""``topogov local`` and everything it starts end together, in every phase of its start and once
ready (issues 12 and 22, item 6): SIGINT (Ctrl-C, sent to the process group as a terminal does),
SIGTERM (``kill``) and SIGHUP (a closed terminal) make it exit within 3 s and leave no process of its
tree — moto, etcd, kube-apiserver, the controller manager, the scheduler, KWOK, Kueue, the fault
proxy, the CDK CLI's node, the app's python, jsii's node — and a SIGKILL of it takes them down too.

Each case signals once its phase is under way, as the process tree shows it (:mod:`tests.e2e.hygiene`:
the synth's ``python app.py``, ``cdk bootstrap``, ``cdk deploy``, ``kube-apiserver``) or, once ready,
by the line the stack prints: never at a deadline, so a loaded machine only makes it wait longer. The
tree is watched from outside (every descendant by pid and start time, and the groups and sessions
they made), and whatever is left when a case fails is killed by the ``local`` fixture's finalizer.

The synth cases synthesize into a directory of their own (``TOPOGOV_ASSEMBLY_DIR``), so a synth runs
whatever the shared assembly cache holds. Figures are printed for the record (``-s``)."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.hygiene import Local, local

STOP_WITHIN_S = 3.0  # issue 22: exit, and no process of the tree left, within 3 s of the signal

CASES = [
    ("synth", signal.SIGINT),  # the case: Ctrl-C while `cdk synth` runs took 29 s
    ("synth", signal.SIGTERM),
    ("synth", signal.SIGHUP),
    ("bootstrap", signal.SIGHUP),
    ("deploy", signal.SIGINT),
    ("deploy", signal.SIGTERM),
    ("controlplane", signal.SIGINT),
    ("controlplane", signal.SIGHUP),
    ("ready", signal.SIGINT),
    ("ready", signal.SIGTERM),
    ("ready", signal.SIGHUP),
]


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Any]:
    """Starts ``topogov local`` (a synth of its own for ``synth``); the finalizer kills what is left
    of its tree, however the test ended."""
    with_synth = {"TOPOGOV_ASSEMBLY_DIR": str(tmp_path / "assembly")}
    with contextlib.ExitStack() as finalizers:

        def starter(phase: str) -> Local:
            return finalizers.enter_context(local(tmp_path / "run", with_synth if phase == "synth" else None))

        yield starter


@pytest.mark.parametrize(("phase", "sig"), CASES, ids=[f"{p}-{s.name}" for p, s in CASES])
def test_a_stop_signal_in_any_phase_ends_the_stack_and_its_whole_tree_within_3_s(start, tmp_path, phase, sig):
    # Given topogov local in the phase (known by what runs, or by its ready line)
    it = start(phase)
    it.reached(phase)
    # When the signal arrives
    code, exited, gone, left = it.stop(sig, within_s=STOP_WITHIN_S)
    print(f"\n{phase} {sig.name}: exit {code} after {exited:.2f} s; the tree gone after {gone:.2f} s")
    # Then it exits with the signal's status within 3 s, and nothing of its tree is left
    assert code is not None, f"still running {STOP_WITHIN_S} s after {sig.name}:\n{it.output()}"
    assert code == (130 if sig == signal.SIGINT else 128 + sig), it.output()
    assert not left, [(s.pid, " ".join(s.argv)[:120]) for s in left]
    assert not (tmp_path / "run" / "state" / "endpoints.json").exists()
    assert f"{sig.name}: stopping the stack" in it.output()


@pytest.mark.parametrize("phase", ["synth", "ready"])
def test_a_killed_parent_takes_its_whole_tree_down(start, phase):
    # Given topogov local in the phase
    it = start(phase)
    it.reached(phase)
    # When it is killed (SIGKILL: no handler of its own runs)
    code, _, gone, left = it.stop(signal.SIGKILL, within_s=STOP_WITHIN_S)
    print(f"\nSIGKILL during {phase}: the tree gone {gone:.2f} s after")
    # Then its children go with it (PR_SET_PDEATHSIG), the CDK CLI's tree too (its supervisor)
    assert code == -signal.SIGKILL
    assert not left, [(s.pid, " ".join(s.argv)[:120]) for s in left]
