"""Job traces for the simulator's benchmarks, generated from published distributions (seeded).

``acme_seren``: job sizes and durations of the Seren cluster of the Acme trace (Hu et al.,
"Characterization of Large Language Model Development in the Datacenter", USENIX NSDI 2024;
github.com/InternLM/AcmeTrace). The numbers, and where each comes from, are in docs/traces.md:

* GPUs per job: the CDF of ``figure/cdf_job_gpunum.pdf`` (panel a) at 1, 2, 4, 8, 16, 32, 64, 128,
  256, 512, 1024 GPUs (54.04, 65.43, 67.95, 96.75, 97.86, 98.82, 99.32, 99.55, 99.73, 99.82, 100 %);
  a job of g GPUs is ceil(g / 8) pods, 8 GPUs each but the last (one node per pod, as on p5).
* Duration: the CDF of ``figure/cdf_job_duration_util.pdf`` (panel a) at 2^k seconds, sampled
  log-linearly between the points (the repository's summary gives median 122 s, mean 1,414 s).
* Duration by size: the repository gives none, but it gives each size bucket's share of jobs and
  of GPU-time (``cdf_job_gpunum.pdf``, panels a and b). A bucket's mean duration is then
  proportional to its GPU-time share / (job share x mean GPUs), scaled so that the mean of all jobs
  is the summary's 1,414 s (:data:`BUCKET_MEAN_S`); each job's duration is the CDF's shape (drawn
  as above, divided by that draw's mean) times its bucket's mean. Without this, sizes and durations
  drawn independently give multi-node jobs ~10 % of the GPU-time, where Seren's hold 88 %.
* Arrivals: Poisson, at the rate that offers ``load`` times the fleet's GPUs on average.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence

from topogov.logic.whatif.inputs import TraceJob

# (GPUs, CDF %) and (seconds, CDF %): docs/traces.md, section 1 and 2
ACME_SEREN_GPUS: tuple[tuple[int, float], ...] = (
    (1, 54.04), (2, 65.43), (4, 67.95), (8, 96.75), (16, 97.86), (32, 98.82), (64, 99.32),
    (128, 99.55), (256, 99.73), (512, 99.82), (1024, 100.0),
)  # fmt: skip
ACME_SEREN_DURATION: tuple[tuple[float, float], ...] = (
    (1, 0.0), (8, 11.8), (32, 31.7), (64, 37.1), (128, 48.9), (256, 65.6), (512, 79.2), (1024, 88.0),
    (2048, 92.9), (4096, 96.0), (8192, 97.5), (16384, 98.4), (32768, 99.2), (65536, 99.6),
    (131072, 99.8), (1_209_604, 100.0),
)  # fmt: skip
ACME_SEREN_MEAN_GPUS = 5.68  # data/cluster_summary.csv, avg_gpu_num
ACME_SEREN_MEAN_DURATION_S = 1414.3  # data/cluster_summary.csv, mean duration of GPU jobs
# (largest GPUs of the bucket, share of jobs %, share of GPU-time %): cdf_job_gpunum.pdf, a and b
ACME_SEREN_BUCKETS: tuple[tuple[int, float, float], ...] = (
    (1, 54.0, 1.4), (4, 13.9, 1.0), (8, 28.8, 9.6), (64, 2.6, 15.7), (256, 0.41, 28.7), (1024, 0.27, 43.7),
)  # fmt: skip


def _bucket_means() -> dict[int, float]:
    """Each bucket's mean duration (s), keyed by its largest size (see the module docstring)."""
    lows, relative = 0, {}
    for top, jobs, gpu_time in ACME_SEREN_BUCKETS:
        sizes = [(g, c) for g, c in _pmf() if lows < g <= top]
        mean_gpus = sum(g * p for g, p in sizes) / sum(p for _, p in sizes)
        relative[top] = gpu_time / (jobs * mean_gpus)
        lows = top
    overall = sum(jobs * relative[top] for top, jobs, _ in ACME_SEREN_BUCKETS) / 100
    return {top: r * ACME_SEREN_MEAN_DURATION_S / overall for top, r in relative.items()}


def _pmf() -> list[tuple[int, float]]:
    prev, out = 0.0, []
    for gpus, cdf in ACME_SEREN_GPUS:
        out.append((gpus, cdf - prev))
        prev = cdf
    return out


def _draw_gpus(rng: random.Random, max_gpus: int) -> int:
    u = rng.random() * 100
    for gpus, cdf in ACME_SEREN_GPUS:
        if u <= cdf:
            return min(gpus, max_gpus)
    return min(ACME_SEREN_GPUS[-1][0], max_gpus)


def _draw_duration(rng: random.Random) -> float:
    u = rng.random() * 100
    points = ACME_SEREN_DURATION
    for (x0, c0), (x1, c1) in itertools.pairwise(points):
        if u <= c1:
            if c1 == c0:
                return float(x1)
            f = (u - c0) / (c1 - c0)
            return math.exp(math.log(x0) + f * (math.log(x1) - math.log(x0)))
    return float(points[-1][0])


def mean_duration(samples: int = 200_000, seed: int = 7) -> float:
    rng = random.Random(seed)
    return sum(_draw_duration(rng) for _ in range(samples)) / samples


def acme_seren(
    jobs: int,
    teams: Sequence[str],
    fleet_gpus: int,
    *,
    load: float = 0.9,
    seed: int = 2024,
    max_duration_s: float = 7 * 24 * 3600,
    instance_type: str | None = "p5.48xlarge",
) -> list[TraceJob]:
    """``jobs`` jobs shaped like Seren's, for teams in turn (weighted 3:2:1... by their order)."""
    rng = random.Random(seed)
    weights = [len(teams) - i for i in range(len(teams))]
    shape_mean = mean_duration()
    means = _bucket_means()
    drawn = []
    for _ in range(jobs):
        gpus = _draw_gpus(rng, fleet_gpus)
        bucket = next(top for top in means if gpus <= top) if gpus <= max(means) else max(means)
        duration = _draw_duration(rng) / shape_mean * means[bucket]
        drawn.append((gpus, max(1.0, min(max_duration_s, round(duration)))))
    mean_gpu_s = sum(g * d for g, d in drawn) / len(drawn)
    rate = load * fleet_gpus / mean_gpu_s  # jobs per second
    t = 0.0
    out = []
    for i, (gpus, duration) in enumerate(drawn):
        t += rng.expovariate(rate)
        pods = max(1, math.ceil(gpus / 8))
        team = rng.choices(list(teams), weights=weights)[0]
        out.append(
            TraceJob(
                submit_s=round(t, 1),
                team=team,
                name=f"seren-{i:06d}",
                pods=pods,
                gpus_per_pod=gpus if pods == 1 else 8,
                duration_s=duration,
                instance_type=instance_type,
                topology_mode="auto",
            )
        )
    return out
