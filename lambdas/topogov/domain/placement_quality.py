"""How tight the fleet's running jobs are: per network layer, the share of running multi-pod jobs
whose pods all sit in one domain of that layer — overall, per team and per the topology mode the job
asked for (required / preferred / auto / none). Pure; the reconcile pass feeds it the pods it
already lists for node capacity (no extra call) and the snapshot's nodes.

A job is the pods of one Job (``batch.kubernetes.io/controller-uid``) that Kueue admitted
(``kueue.x-k8s.io/podset``) and that are Running on a node the snapshot knows; jobs with fewer than
two such pods are left out (one pod is trivially tight).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from topogov.domain.kinds import pod_job_name, pod_owner
from topogov.domain.labels import (
    POD_PRIORITY_LABEL,
    PODSET_LABEL,
    PREFERRED_ANNOTATION,
    REQUIRED_ANNOTATION,
    TOPOLOGY_MODE_LABEL,
)
from topogov.domain.tree import NodeCapacity
from topogov.domain.views.batch import PodView

MODES = ("required", "preferred", "auto", "none")


@dataclass(frozen=True, slots=True)
class JobPod:
    """The little of a pod the placement needs, as the reconcile pass keeps it."""

    namespace: str
    job: str  # the Job's name
    job_uid: str
    node: str
    mode: str  # as asked (TOPOLOGY_MODE_LABEL), else from the annotation, else "none"
    priority: str | None
    gpus: int


def job_pod(pod: PodView, gpus: int) -> JobPod | None:
    """A Running pod Kueue admitted for a job of a governed kind (``domain/kinds.py``: a Job, a
    JobSet's pods as the JobSet's, a PyTorchJob, a HyperPodPyTorchJob: the last two by the job's
    name, which stands for its uid within the namespace), bound to a node; None for any other pod."""
    labels = pod.labels
    owner = pod_owner(labels)
    kind, _, value = (owner or "").partition(":")
    # a Job's and a JobSet's uid; a job known by its name: its kind, namespace and name
    uid = value if kind in ("Job", "JobSet") else f"{kind}/{pod.namespace}/{value}" if owner else None
    node = pod.node_name
    if PODSET_LABEL not in labels or not uid or not node or pod.phase != "Running":
        return None
    annotations = pod.annotations
    mode = labels.get(TOPOLOGY_MODE_LABEL)
    if not mode:
        mode = "required" if REQUIRED_ANNOTATION in annotations else "none"
        mode = "preferred" if PREFERRED_ANNOTATION in annotations else mode
    return JobPod(
        pod.namespace, pod_job_name(labels), str(uid), str(node),
        mode if mode in MODES else "none", labels.get(POD_PRIORITY_LABEL), gpus,
    )  # fmt: skip


def jobs_of(pods: Iterable[JobPod]) -> dict[str, list[JobPod]]:
    by_job: dict[str, list[JobPod]] = defaultdict(list)
    for p in pods:
        by_job[p.job_uid].append(p)
    return dict(by_job)


def quality(
    pods: Iterable[JobPod], nodes: Mapping[str, NodeCapacity], team_of: Mapping[str, str]
) -> dict[str, Any]:
    """``{"jobs": n, "in_one_domain": {"layer-1": share, ...}, "teams": {team: {...}}, "modes":
    {mode: {...}}}`` with shares in [0, 1] (rounded to 3 places) over the jobs that have that layer;
    ``team_of`` maps a namespace to its team (other namespaces count overall only)."""
    overall = _Tally()
    teams: dict[str, _Tally] = defaultdict(_Tally)
    modes: dict[str, _Tally] = defaultdict(_Tally)
    for members in jobs_of(pods).values():
        if len(members) < 2 or any(p.node not in nodes for p in members):
            continue
        paths = [nodes[p.node].path for p in members]
        depth = min(len(p) for p in paths)
        if depth == 0:
            continue
        one = [len({p[:level] for p in paths}) == 1 for level in range(1, depth + 1)]
        overall.add(one)
        team = team_of.get(members[0].namespace)
        if team:
            teams[team].add(one)
        modes[members[0].mode].add(one)
    return {
        **overall.to_json(),
        "teams": {t: v.to_json() for t, v in sorted(teams.items())},
        "modes": {m: modes[m].to_json() for m in MODES if m in modes},
    }


@dataclass
class _Tally:
    jobs: int = 0

    def __post_init__(self) -> None:
        self.inside: dict[int, int] = defaultdict(int)
        self.having: dict[int, int] = defaultdict(int)

    def add(self, one_per_level: list[bool]) -> None:
        self.jobs += 1
        for level, inside in enumerate(one_per_level, start=1):
            self.having[level] += 1
            self.inside[level] += inside

    def to_json(self) -> dict[str, Any]:
        return {
            "jobs": self.jobs,
            "in_one_domain": {
                f"layer-{lv}": round(self.inside[lv] / self.having[lv], 3) for lv in sorted(self.having)
            },
        }
