"""What would be: a job trace replayed on a fleet under a policy, on the Kueue model, with a
virtual clock (``topogov whatif``, ``topogov bench policies``). Pure: inputs are text and values,
nothing reads a clock or does I/O.

:mod:`.inputs` reads traces, fleets and fleet changes; :mod:`.engine` replays (the API's decision,
then the Kueue model); :mod:`.report` turns a replay into per-team and fleet figures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from topogov.domain.policy import Policy
from topogov.domain.tree import NodeCapacity
from topogov.logic.whatif.engine import NO_PENALTY, REGIMES, Penalty, Run, simulate
from topogov.logic.whatif.inputs import InputError, TraceJob, change_fleet, parse_fleet, parse_trace
from topogov.logic.whatif.report import render_text, summarize


def compare(
    trace: Sequence[TraceJob],
    scenarios: Mapping[str, tuple[Sequence[NodeCapacity], Policy]],
    **options: Any,
) -> dict[str, Any]:
    """Each scenario (name -> fleet, policy) replayed on the same trace: ``{"scenarios": {name:
    {"regime", "teams", "fleet", "jobs"}}}``; ``options`` go to :func:`~.engine.simulate`."""
    out = {}
    for name, (nodes, policy) in scenarios.items():
        out[name] = summarize(simulate(trace, nodes, policy, name=name, **options))
    return {"scenarios": out}


__all__ = [
    "NO_PENALTY",
    "REGIMES",
    "InputError",
    "Penalty",
    "Run",
    "TraceJob",
    "change_fleet",
    "compare",
    "parse_fleet",
    "parse_trace",
    "render_text",
    "simulate",
    "summarize",
]
