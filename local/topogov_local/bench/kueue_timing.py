"""What a running Kueue spends that the model's cycles do not, for replays on a clock.

The Kueue model (:mod:`topogov.domain.kueue_model`) decides what Kueue decides; its cycles take no
time. A real Kueue's do, and in Kueue's own TAS performance test the difference is most of the
waiting: the run measured here (``topogov bench kueue-perf``, upstream's own runner and
``minimalkueue`` built from ``sigs.k8s.io/kueue@v0.17.0``; two runs on 2026-12-02) wrote Workload
status at 50 requests a second for its whole run (18,646 and 18,901 PATCHes in 373 and 382 s), and
its scheduler spent nearly all of its cycles' time (362 of 366 s) waiting for those writes.
:class:`Timing` holds what makes that so, each with its source:

==========================  ==========  ===============================================================
what                        value       source
==========================  ==========  ===============================================================
client rate limit           50/s        ``test/performance/scheduler/minimalkueue/main.go``:
                                        ``kubeConfig.QPS = 50`` "based on the default config" (Kueue's
                                        ``clientConnection.qps`` default)
client burst                100         same file, ``kubeConfig.Burst = 100``
one limiter per resource    Workload    client-go ``rest.RESTClientForConfigAndClient`` makes a token
                                        bucket per REST client and controller-runtime one REST client
                                        per kind; so every Workload write (admissions, status of
                                        the inadmissible, preemptions) shares one bucket. Measured:
                                        18,646 PATCHes in 373 s, 51/s, while PUTs (ClusterQueue and
                                        LocalQueue status) ran at 69/s beside them
admission write             async       ``pkg/scheduler/scheduler.go`` ``admit``: the cache assumes
                                        the workload, the status patch runs in a goroutine
                                        (``admissionRoutineWrapper.Run``); the runner sees
                                        ``Admitted`` only once it is written
inadmissible status write   in cycle    ``requeueAndUpdate``: ``PatchAdmissionStatus`` inline, for a
                                        not-nominated or skipped head, when the condition changed
                                        (``UnsetQuotaReservationWithCondition`` returns false for the
                                        same message); measured: 4,384 requeues, about 3,600 writes
preemption write            in cycle    ``preemptor.IssuePreemptions``: one patch per victim, awaited
cycle compute               3.8 ms      snapshot and nomination, p50 of 756 cycles measured here
                                        (log lines "Snapshot taken", "Nomination done")
request round trip          5 ms        the fastest assumed-to-written admission measured here: 4.6 ms
backoff                     1 → 10 ms   ``pkg/util/wait/backoff.go``: after a cycle that admits
                                        nothing, doubling from ``initialBackoff`` to ``maxBackoff``
watch delivery              2 ms        assumed: an update's delivery to a watcher (the runner,
                                        Kueue's cache); not measured separately
==========================  ==========  ===============================================================

Not modelled: the API server's own latency under load (it ran at 1.2 cores of 2 here). While the
generator creates (about 340 creations a second here, so 44 s for what its intervals spread over
20), the runner's finishes reached Kueue 2.96 s (p50) after the run time instead of 0.05 s, and
Kueue's in-cycle writes took 0.1-0.2 s each; ``topogov bench kueue-perf`` measures both and also
replays the model on the run's own arrivals (docs/benchmarks.md says what that shows and why
adding these delays alone does not bring the replay closer). Nor are preempted workloads keeping
their quota until the runner clears their reservation (29 and 83 evictions in two runs).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Timing:
    """The costs of the table above, in seconds and requests per second."""

    qps: float = 50.0
    burst: int = 100
    cycle_s: float = 0.0038
    request_s: float = 0.005
    backoff_s: tuple[float, float] = (0.001, 0.010)
    watch_s: float = 0.002


class TokenBucket:
    """client-go's token bucket (``flowcontrol.NewTokenBucketRateLimiter``, ``x/time/rate``): ``qps``
    tokens a second up to ``burst``; a request waits for its token, in the order requested."""

    def __init__(self, qps: float, burst: int) -> None:
        self.interval = 1.0 / qps
        self.tolerance = (burst - 1) * self.interval
        self.tat = 0.0  # theoretical arrival time of the next token (GCRA)
        self.granted = 0

    def take(self, t: float) -> float:
        """The time a request made at ``t`` is let through."""
        granted = max(t, self.tat - self.tolerance)
        self.tat = max(self.tat, granted) + self.interval
        self.granted += 1
        return granted


class KueueClock:
    """One Kueue's time, cycle by cycle: when a cycle ends, when its admissions are written."""

    def __init__(self, timing: Timing | None = None) -> None:
        self.timing = timing or Timing()
        self.workloads = TokenBucket(self.timing.qps, self.timing.burst)
        self._backoff: float | None = None
        self._message: dict[str, str] = {}

    def cycle(
        self, start: float, admitted: list[str], evicted: list[str], pending: list[tuple[str, str]]
    ) -> tuple[float, dict[str, float]]:
        """A cycle begun at ``start`` that admitted, evicted and left pending (name, message) these:
        when the next cycle may begin, and when each admission is written (seen by a watcher).
        Admissions are written in the background; evictions and the changed status of those left
        pending are written in the cycle, behind whatever the bucket already holds."""
        t = self.timing
        now = start + t.cycle_s
        seen = {}
        for name in admitted:
            seen[name] = self.workloads.take(now) + t.request_s + t.watch_s
            self._message.pop(name, None)
        for _name in evicted:
            now = self.workloads.take(now) + t.request_s
        for name, message in pending:
            if self._message.get(name) != message:
                self._message[name] = message
                now = self.workloads.take(now) + t.request_s
        if admitted:
            self._backoff = None
        else:
            lo, hi = t.backoff_s
            self._backoff = lo if self._backoff is None else min(hi, self._backoff * 2)
            now += self._backoff
        return now, seen
