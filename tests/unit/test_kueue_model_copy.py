"""A copy of the model's cluster advances on its own: what it admits, evicts and leaves pending
changes nothing the original (or another copy) decides afterwards, though the two share every
record until one changes it (``Cluster._own``)."""

from __future__ import annotations

import heapq

from topogov_local.bench.admission import _perf_shape


def _started(until: float):
    """Kueue's TAS performance shape with its submissions up to ``until`` made."""
    cluster, events, _, _ = _perf_shape()
    while events and events[0][0] <= until:
        _, _, kind, wl = heapq.heappop(events)
        if kind == "submit":
            cluster.submit(wl)
    return cluster


def _decisions(cluster, now: float, cycles: int) -> list:
    out = []
    for i in range(cycles):
        result = cluster.cycle(now + i)
        out.append(
            (
                [(a.name, tuple(p.pods for p in a.pod_sets)) for a in result.admitted],
                [e.name for e in result.evicted],
                [(p.name, p.message) for p in result.pending],
            )
        )
        for a in result.admitted[::3]:
            cluster.finish(a.name, now + i)
        cluster.fire_requeues(now + i + 1)
    return out


def test_a_copy_changes_nothing_the_original_decides_after():
    copied, untouched = _started(3.0), _started(3.0)
    copy = copied.copy()
    first = _decisions(copy, 3.0, 40)  # admissions, finishes, pending messages on the copy
    assert any(admitted for admitted, _, _ in first) and any(pending for _, _, pending in first)
    assert copied.admitted() == untouched.admitted() == {}  # what the copy admitted is its own
    assert copied.pending() == untouched.pending()  # and so are its pending messages
    again = copied.copy()
    assert _decisions(copied, 3.0, 40) == _decisions(untouched, 3.0, 40) == first
    assert _decisions(again, 3.0, 40) == first  # a copy made after the original's copy was used
    assert copied.admitted().keys() == untouched.admitted().keys()
    assert copied.pending() == untouched.pending()
