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
round trip under load       80 ms       fitted here: every request sent while the generator creates
                                        (until its last creation) takes this instead of
                                        ``request_s``. A run here (2026-12-03) measured the runner's
                                        finish reaching Kueue 2.96 s (p50) after the run time while
                                        the generator created, 0.05 s after, and Kueue's in-cycle
                                        writes at 0.1-0.2 s then; the replay on that run's arrivals
                                        gives a finish lag of 2.2 s with 80 ms (0.4 s with 50 ms, 7 s
                                        with 100 ms: the runner's queue is near its edge)
the runner's finishes       1 worker    :class:`Runner`: upstream's runner writes ``Finished`` from
                                        one reconcile worker (controller-runtime's default), so its
                                        finishes queue behind each other's round trips
==========================  ==========  ===============================================================

That one round trip holds for the whole creation (20.4 s on the generator's intervals, 44 s in
the runs here, where the API server created about 340 a second throughout) is an assumption: the
runs measured the lag, not how it varies. Not modelled:
preempted workloads keeping their quota until the runner clears their reservation (29 and 83
evictions in Kueue's runs here), and the runner's 48 ms from a run's end to Kueue seeing it
finished when nothing loads the server (the replay has 7 ms: one round trip and the watch).
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
    loaded_request_s: float = 0.08


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

    def __init__(self, timing: Timing | None = None, loaded_until: float = 0.0) -> None:
        self.timing = timing or Timing()
        self.loaded_until = loaded_until
        self.workloads = TokenBucket(self.timing.qps, self.timing.burst)
        self._backoff: float | None = None
        self._message: dict[str, str] = {}

    def round_trip(self, t: float) -> float:
        """A request's round trip when sent at ``t``: slower while the generator creates (before
        ``loaded_until``, its last creation)."""
        return self.timing.loaded_request_s if t < self.loaded_until else self.timing.request_s

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
            sent = self.workloads.take(now)
            seen[name] = sent + self.round_trip(sent) + t.watch_s
            self._message.pop(name, None)
        for _name in evicted:
            sent = self.workloads.take(now)
            now = sent + self.round_trip(sent)
        for name, message in pending:
            if self._message.get(name) != message:
                self._message[name] = message
                sent = self.workloads.take(now)
                now = sent + self.round_trip(sent)
        if admitted:
            self._backoff = None
        else:
            lo, hi = t.backoff_s
            self._backoff = lo if self._backoff is None else min(hi, self._backoff * 2)
            now += self._backoff
        return now, seen


class Runner:
    """Upstream's test runner finishing workloads (``runner/controller/controller.go``): once a
    workload's run time is up since it saw ``Admitted``, one reconcile writes ``Finished``
    (``SetConditionAndUpdate``). It has one worker (controller-runtime's default
    ``MaxConcurrentReconciles``), so finishes queue behind each other's round trips; its client has
    no limit that binds (the Makefile's ``--qps=1000 --burst=2000``)."""

    def __init__(self, clock: KueueClock) -> None:
        self.clock = clock
        self.free = 0.0  # when the worker is next free
        self.lags: list[tuple[float, float]] = []  # (admission seen, finish seen - its run's end)

    def finish(self, admitted: float, run_s: float) -> float:
        """A workload whose admission was seen at ``admitted`` and runs ``run_s`` (given in the order
        they are due): when Kueue sees it finished."""
        due = admitted + run_s
        start = max(due, self.free)
        self.free = start + self.clock.round_trip(start)
        seen = self.free + self.clock.timing.watch_s
        self.lags.append((admitted, seen - due))
        return seen
