"""The governor in HyperPod mode: it writes nothing, it reads the Kueue objects SageMaker HyperPod task
governance's add-on keeps and reports how they differ from what the add-on would write for the policy
``teams.yaml`` renders (:func:`topogov.domain.hyperpod.expected_objects`: the ComputeQuotas and the cluster
policy the stack deploys, through the one model of the add-on's rendering, ``domain/hyperpod/addon.py``).

What it reports, per object of the kinds the add-on writes (Namespaces of the teams, Topology,
ResourceFlavors, Cohort, WorkloadPriorityClasses, ClusterQueues, LocalQueues):

* ``missing``   — expected and not in the cluster (the add-on has not synced the last ``cdk deploy`` yet,
  or a ComputeQuota failed);
* ``differs``   — in the cluster with other values than expected, field by field, by the same rules as
  the plain governor's drift (``logic/governor/drift.py``: quantities by amount, nothing extra inside
  ``resourceGroups``). A difference is either the add-on still applying a change, someone changing
  the policy outside the stack (console, CLI), or one of the assumptions of docs/hyperpod.md's table
  not holding for this add-on version;
* ``unexpected``— labelled ``sagemaker-managed-queue: "true"`` and not expected: a ComputeQuota made
  outside ``teams.yaml``.

Objects labelled ``app.kubernetes.io/managed-by: topogov`` (left by a plain-mode governor before the add-on
was installed) are listed as warnings: Topogov no longer manages them in HyperPod mode.

Drift is what the pass's summary, the ``AddonDrift`` metric (and its alarm) and ``topogov governor plan``
show. After a ``cdk deploy`` it lasts until the add-on has applied the new quotas, typically a pass.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from topogov.domain.errors import KubernetesError
from topogov.domain.hyperpod import ApiVersion, expected_objects
from topogov.domain.hyperpod.mode import Mode
from topogov.domain.labels import KUEUE_GROUP, MANAGED_BY_LABEL, SAGEMAKER_MANAGED_QUEUE_LABEL
from topogov.domain.policy import Policy, PolicyError
from topogov.domain.views.objects import ObjectView, object_view
from topogov.logic.governor.drift import Ref, drift
from topogov.logic.governor.plan import KINDS, Change, ObjectsPort
from topogov.logic.governor.team_pods import apply_team_pods, plan_team_pods, read_configmaps
from topogov.logic.ports import Counters

MISSING, DIFFERS, UNEXPECTED = "missing", "differs", "unexpected"
STATES = (MISSING, DIFFERS, UNEXPECTED)


@dataclass
class ObjectDrift:
    """One object of the add-on's that is not as ``teams.yaml`` would make it."""

    state: str  # MISSING, DIFFERS or UNEXPECTED
    kind: str
    name: str
    namespace: str | None = None
    diff: list[str] = field(default_factory=list)

    @property
    def object(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}" if self.namespace else f"{self.kind} {self.name}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"state": self.state, "kind": self.kind, "name": self.name}
        if self.namespace:
            out["namespace"] = self.namespace
        if self.diff:
            out["diff"] = list(self.diff)
        return out


@dataclass
class AddonReport:
    """A HyperPod-mode governor pass: what the add-on keeps against ``teams.yaml`` (none of its
    objects written), and Topogov's own team pod rules (``team_pods.py``) kept."""

    api_version: str
    mode: Mode
    expected: int = 0
    matching: int = 0
    drift: list[ObjectDrift] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    skipped: str | None = None  # why nothing was compared
    failures: list[dict[str, Any]] = field(default_factory=list)
    k8s_reads: int = 0
    k8s_writes: int = 0  # Topogov's team pod rules only: the add-on owns the Kueue objects
    duration_s: float = 0.0
    pod_rules: list[Change] = field(default_factory=list)  # writes of the team pod rules

    @property
    def complete(self) -> bool:
        return not self.failures

    def count(self, state: str) -> int:
        return sum(1 for d in self.drift if d.state == state)

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode.name,
            "api_version": self.api_version,
            "writes": len(self.pod_rules),
            "pod_rules": [c.to_json() for c in self.pod_rules],
            "expected": self.expected,
            "matching": self.matching,
            "counts": {s: self.count(s) for s in STATES},
            "drift": [d.to_json() for d in self.drift],
            "warnings": list(self.warnings),
            "skipped": self.skipped,
            "failures": list(self.failures),
            "complete": self.complete,
            "k8s_reads": self.k8s_reads,
            "k8s_writes": self.k8s_writes,
            "duration_s": self.duration_s,
        }


def compare(expected: Sequence[ObjectView], live: Mapping[Ref, ObjectView]) -> tuple[int, list[ObjectDrift]]:
    """How many expected objects match, and the drift of the others and of the add-on's objects no one
    expects (pure)."""
    matching, out = 0, []
    wanted = set()
    for obj in expected:
        wanted.add(obj.ref)
        current = live.get(obj.ref)
        if current is None:
            out.append(ObjectDrift(MISSING, obj.kind, obj.name, obj.namespace))
            continue
        diff = drift(obj, current)
        if diff:
            out.append(ObjectDrift(DIFFERS, obj.kind, obj.name, obj.namespace, diff))
        else:
            matching += 1
    for key, obj in sorted(live.items(), key=lambda kv: (KINDS.index(kv[0][0]), kv[0][2] or "", kv[0][1])):
        if key not in wanted and obj.labels.get(SAGEMAKER_MANAGED_QUEUE_LABEL) == "true" and not obj.deleting:
            out.append(ObjectDrift(UNEXPECTED, obj.kind, obj.name, obj.namespace))
    return matching, out


class AddonWatch:
    """Reads the add-on's objects (one list per kind) and compares them with the policy's."""

    def __init__(
        self,
        objects: ObjectsPort,
        *,
        api_version: str = "v1beta1",
        cluster_arn: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.objects = objects
        self.api_version = api_version
        self.cluster_arn = cluster_arn
        self._clock = clock

    @property
    def group_version(self) -> str:
        return f"{KUEUE_GROUP}/{self.api_version}"

    def expected(self, policy: Policy) -> list[ObjectView]:
        """What the add-on writes for the policy's ComputeQuotas and cluster policy (raises PolicyError)."""
        version: ApiVersion = "v1beta2" if self.api_version == "v1beta2" else "v1beta1"
        return [object_view(o) for o in expected_objects(policy, self.cluster_arn, api_version=version)]

    def live(self) -> dict[Ref, ObjectView]:
        live: dict[Ref, ObjectView] = {}
        for kind in KINDS:
            for obj in self.objects.list("v1" if kind == "Namespace" else self.group_version, kind):
                live[obj.ref] = obj
        return live

    def report(self, policy: Policy, mode: Mode) -> AddonReport:
        """The comparison, from reads only."""
        report = AddonReport(api_version=self.group_version, mode=mode)
        try:
            expected = self.expected(policy)
        except PolicyError as exc:
            report.skipped = (
                "teams.yaml cannot be rendered as HyperPod task governance's policy, so the add-on's objects "
                f"are not compared with it: {exc}"
            )
            return report
        live = self.live()
        report.expected = len(expected)
        report.matching, report.drift = compare(expected, live)
        ours = sorted(
            f"{k} {n}" for (k, n, _), o in live.items() if o.labels.get(MANAGED_BY_LABEL) == "topogov"
        )
        ours = [o for o in ours if not o.startswith("Namespace ")]
        if ours:
            report.warnings.append(
                f"{len(ours)} Kueue object(s) labelled {MANAGED_BY_LABEL}=topogov, left from before the "
                f"add-on managed the queues ({', '.join(ours[:4])}{' ...' if len(ours) > 4 else ''}): in "
                "HyperPod mode "
                "Topogov no longer keeps them; delete them (kubectl delete ... -l "
                f"{MANAGED_BY_LABEL}=topogov)"
            )
        return report

    def run(self, policy: Policy, mode: Mode, counters: Counters | None = None) -> AddonReport:
        started = self._clock()
        reads0, writes0 = (counters.reads, counters.writes) if counters is not None else (0, 0)
        try:
            report = self.report(policy, mode)
        except KubernetesError as exc:
            report = AddonReport(api_version=self.group_version, mode=mode, skipped=str(exc))
            report.failures.append({"object": None, "action": "read", "error": str(exc)})
        report.warnings = [*mode.warnings, *report.warnings]
        self._keep_pod_rules(policy, report)
        if counters is not None:
            report.k8s_reads = counters.reads - reads0
            report.k8s_writes = counters.writes - writes0
        report.duration_s = round(self._clock() - started, 4)
        return report

    def _keep_pod_rules(self, policy: Policy, report: AddonReport) -> None:
        """The team pod rules' ConfigMaps, Topogov's own objects (the namespaces are the add-on's)."""
        try:
            report.pod_rules = plan_team_pods(policy, None, read_configmaps(self.objects))
            for change in report.pod_rules:
                apply_team_pods(self.objects, change)
        except KubernetesError as exc:
            report.failures.append({"object": "pod rules", "action": "apply", "error": str(exc)})


def format_report(report: AddonReport) -> str:
    """The report as ``topogov governor plan`` prints it in HyperPod mode."""
    lines = [
        f"HyperPod mode ({report.mode.why}): the task governance add-on owns the Kueue objects; "
        "Topogov writes none.",
    ]
    if report.skipped:
        lines.append(f"Nothing compared: {report.skipped}")
    else:
        lines.append(
            f"The add-on's objects ({report.api_version}) against what it would write for teams.yaml: "
            f"{report.matching} of {report.expected} as expected."
        )
        symbol = {MISSING: "-", DIFFERS: "~", UNEXPECTED: "?"}
        for d in report.drift:
            lines.append(f"  {symbol[d.state]} {d.state:<10} {d.object}")
            lines.extend(f"        {x}" for x in d.diff)
        if not report.drift:
            lines.append("  (no drift)")
        counts = ", ".join(f"{report.count(s)} {s}" for s in STATES)
        lines.append(f"Drift: {counts}.")
    lines.extend(f"warning: {w}" for w in report.warnings)
    return "\n".join(lines) + "\n"
