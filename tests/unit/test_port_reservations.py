"""Ports of parallel stacks never collide: :func:`free_port` reserves what it hands out, per process
(a CI run once saw two stacks' servers given one port). Ports below 1024 are used here: free_port
never picks them, so these claims cannot disturb a stack of a parallel worker."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from topogov_local.processes import PORT_RESERVATIONS, _reserve, free_port


@pytest.fixture
def claims():
    made: list[int] = []
    yield made
    for port in made:
        (PORT_RESERVATIONS / str(port)).unlink(missing_ok=True)


def _held_by(port: int, pid: int) -> None:
    PORT_RESERVATIONS.mkdir(exist_ok=True)
    (PORT_RESERVATIONS / str(port)).write_text(str(pid), encoding="ascii")


def test_a_port_is_reserved_once_even_for_the_process_that_holds_it(claims):
    claims.append(101)
    (PORT_RESERVATIONS / "101").unlink(missing_ok=True)
    assert _reserve(101) is True
    assert (PORT_RESERVATIONS / "101").read_text(encoding="ascii") == str(os.getpid())
    assert _reserve(101) is False


def test_a_port_held_by_a_live_process_is_refused_and_a_dead_ones_is_taken_over(claims):
    claims.extend([102, 103])
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as live:
        try:
            _held_by(102, live.pid)
            assert _reserve(102) is False
        finally:
            live.kill()
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    )
    _held_by(103, int(dead.stdout))
    assert _reserve(103) is True
    assert (PORT_RESERVATIONS / "103").read_text(encoding="ascii") == str(os.getpid())


def test_a_claim_being_written_is_someone_elses(claims):
    claims.append(104)
    PORT_RESERVATIONS.mkdir(exist_ok=True)
    (PORT_RESERVATIONS / "104").write_text("", encoding="ascii")
    assert _reserve(104) is False


def test_free_port_hands_out_distinct_reserved_ports_below_the_ephemeral_range():
    ports = [free_port() for _ in range(30)]
    assert len(set(ports)) == 30
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text(encoding="ascii").split()[0])
    assert all(1024 <= p < low for p in ports)
    assert all((PORT_RESERVATIONS / str(p)).read_text(encoding="ascii") == str(os.getpid()) for p in ports)
