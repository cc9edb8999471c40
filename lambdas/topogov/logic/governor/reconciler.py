"""The governor: a plan from reads only, then an apply of exactly the plan's writes (see the package
docstring for the rules)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from topogov.domain.errors import KubernetesError
from topogov.domain.kueue import ApiVersion, FlavorInput, flavors_from_snapshot, render
from topogov.domain.labels import KUEUE_GROUP, TEAM_LABEL
from topogov.domain.policy import Policy
from topogov.domain.quantity import Resources
from topogov.domain.snapshot import Snapshot
from topogov.domain.views.objects import (
    ClusterQueueView,
    LocalQueueView,
    ObjectView,
    ResourceFlavorView,
    object_view,
)
from topogov.logic.governor.drift import (
    Ref,
    corrected,
    detached,
    drift,
    edited_by_hand,
    keep_equivalent_topologies,
    owned,
    queue_as_allowed,
    shown,
    stamped,
    terminating,
    to_create,
)
from topogov.logic.governor.plan import (
    DRAIN,
    KINDS,
    KUEUE_KINDS,
    LOG,
    OWNED_SELECTOR,
    Action,
    Change,
    GovernorSummary,
    ObjectsPort,
    Plan,
)
from topogov.logic.governor.team_pods import apply_team_pods, is_team_pods, plan_team_pods, read_configmaps
from topogov.logic.ports import Counters

# --- the governor ------------------------------------------------------------------------------------


class Governor:
    def __init__(
        self,
        objects: ObjectsPort,
        *,
        api_version: ApiVersion = "v1beta1",
        cohort: str = "topogov",
        log: Any = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        release_wait_s: float = 10.0,
    ) -> None:
        self.objects = objects
        self.api_version = api_version
        self.cohort = cohort
        self._sleep = sleep
        self.release_wait_s = release_wait_s  # how long a re-creation waits for Kueue to let go
        self._withheld: set[str] = set()
        # What it did, with the object: warnings for what an operator must look at (a hand edit
        # corrected, an object left alone, a queue stopped, a failed write), info for the rest.
        self._log = log or LOG
        self._clock = clock

    @property
    def group_version(self) -> str:
        return f"{KUEUE_GROUP}/{self.api_version}"

    def desired(self, policy: Policy, flavors: list[FlavorInput]) -> list[ObjectView]:
        """What the policy renders for these flavors, read through the same views as the live objects."""
        rendered = render(policy, flavors, api_version=self.api_version, cohort=self.cohort)
        return [object_view(o) for o in rendered]

    def plan(self, policy: Policy, snapshot: Snapshot | None) -> Plan:
        """What a pass would change, from reads only."""
        plan = Plan(api_version=self.group_version)
        flavors = flavors_from_snapshot(snapshot) if snapshot is not None else []
        if not flavors:
            plan.skipped = (
                "no GPU node in the topology snapshot yet (the labeler has not run, or the fleet has no "
                "GPU nodes): nothing rendered, no Kueue object changed or deleted"
            )
            namespaces = {o.name: o for o in self.objects.list("v1", "Namespace")}
            plan.changes += plan_team_pods(policy, namespaces, read_configmaps(self.objects))
            return plan
        plan.flavors = [f.instance_type for f in flavors]
        capacity = Resources()
        for f in flavors:
            capacity = capacity + f.capacity
        plan.warnings = policy.warnings(capacity)
        live = self._live()
        desired = keep_equivalent_topologies(self.desired(policy, flavors), live)
        plan.topologies = {
            o.name: o.topology_name or "" for o in desired if isinstance(o, ResourceFlavorView)
        }
        wanted = {o.ref for o in desired}
        recreate, waiting = self._plan_immutable(plan, desired, live)
        if waiting:  # a flavor Kueue is letting go must leave every queue first, or it never goes
            desired = [o.without_flavors(waiting) if isinstance(o, ClusterQueueView) else o for o in desired]
        planned = {(c.kind, c.name, c.namespace) for c in plan.changes}
        for obj in desired:
            if obj.ref not in planned:
                self._plan_object(plan, obj, live.get(obj.ref), recreate)
        order = {k: i for i, k in enumerate(KINDS)}  # creation order; re-creations in their kind's place
        plan.changes.sort(key=lambda c: order[c.kind])
        self._plan_removals(plan, self._stale(plan, live, wanted))
        namespaces = {ref[1]: o for ref, o in live.items() if ref[0] == "Namespace"}
        plan.changes += plan_team_pods(policy, namespaces, read_configmaps(self.objects))
        return plan

    def _live(self) -> dict[Ref, ObjectView]:
        """The objects of every kind Topogov renders, by (kind, name, namespace). One list per kind
        (7 reads a pass, whatever the number of teams), not one GET per object."""
        live: dict[Ref, ObjectView] = {}
        for kind in KINDS:
            version = "v1" if kind == "Namespace" else self.group_version
            for obj in self.objects.list(version, kind):
                live[obj.ref] = obj
        return live

    def _plan_object(
        self, plan: Plan, obj: ObjectView, current: ObjectView | None, recreate: set[str]
    ) -> None:
        """One desired object against what is live: create, wait, leave alone (not Topogov's),
        update (drift, or a ClusterQueue taking back a re-created flavor), or nothing."""
        kind, name, ns = obj.ref
        version = obj.api_version
        if current is None:
            plan.changes.append(Change(Action.CREATE, kind, name, ns, version, desired=obj))
        elif kind == "Namespace":
            plan.unchanged += 1  # exists: the team's, whoever created it
        elif terminating(current):
            why = "being deleted (Kueue keeps it while it is in use): created again once gone"
            plan.changes.append(Change(Action.WAIT, kind, name, ns, version, reason=why))
        elif not owned(current):
            why = f"exists without {OWNED_SELECTOR}: not Topogov's, left alone"
            plan.changes.append(Change(Action.UNOWNED, kind, name, ns, version, reason=why))
        else:
            diff = drift(obj, current)
            readds = sorted(recreate & current.flavor_names) if isinstance(current, ClusterQueueView) else []
            if not (diff or readds):
                plan.unchanged += 1
                return
            why = "edited by hand" if edited_by_hand(obj, current) else "the policy or the fleet changed"
            if not diff:
                why = f"takes back ResourceFlavor {', '.join(readds)} once it is re-created"
            plan.changes.append(
                Change(Action.UPDATE, kind, name, ns, version, diff, reason=why, desired=obj, current=current)
            )

    @staticmethod
    def _stale(plan: Plan, live: Mapping[Ref, ObjectView], wanted: set[Ref]) -> dict[str, list[ObjectView]]:
        """Topogov's objects the policy no longer has, by kind (those being deleted: waited for)."""
        stale: dict[str, list[ObjectView]] = {kind: [] for kind in KUEUE_KINDS}
        for key, obj in live.items():
            if key[0] != "Namespace" and key not in wanted and owned(obj):
                if terminating(obj):
                    plan.changes.append(
                        Change(Action.WAIT, key[0], key[1], key[2], obj.api_version, reason="being deleted")
                    )
                else:
                    stale[key[0]].append(obj)
        return stale

    def _plan_immutable(
        self,
        plan: Plan,
        desired: list[ObjectView],
        live: Mapping[Ref, ObjectView],
    ) -> tuple[set[str], set[str]]:
        """Flavors whose ``topologyName`` must change (re-created) and flavors being deleted."""
        recreate: set[str] = set()
        waiting: set[str] = set()
        queues = [o for o in live.values() if isinstance(o, ClusterQueueView)]
        for obj in desired:
            if not isinstance(obj, ResourceFlavorView):
                continue
            name = obj.name
            current = live.get(("ResourceFlavor", name, None))
            if not isinstance(current, ResourceFlavorView) or not owned(current):
                continue
            if terminating(current):
                waiting.add(name)
                continue
            have = current.topology_name
            want = obj.topology_name
            if have is None or have == want:
                continue
            diff = [f"spec.topologyName: {shown(have)} -> {shown(want)}"]
            users = sorted(q.name for q in queues if name in q.flavor_names)
            foreign = sorted(q.name for q in queues if name in q.flavor_names and not owned(q))
            if foreign:
                why = (
                    f"topologyName is immutable in Kueue, so it must be re-created, but ClusterQueue "
                    f"{', '.join(foreign)} (not Topogov's) lists it and Kueue would keep it: "
                    "take it out there"
                )
                plan.changes.append(
                    Change(Action.BLOCKED, "ResourceFlavor", name, None, obj.api_version, diff, reason=why)
                )
                plan.warnings.append(f"ResourceFlavor {name}: {why}")
                continue
            recreate.add(name)
            why = (
                "topologyName is immutable in Kueue: taken out of "
                + (f"ClusterQueue {', '.join(users)}" if users else "no ClusterQueue")
                + ", deleted and created again; admitted work keeps running"
            )
            plan.changes.append(
                Change(
                    Action.RECREATE,
                    "ResourceFlavor",
                    name,
                    None,
                    obj.api_version,
                    diff,
                    reason=why,
                    desired=obj,
                    current=current,
                )
            )
        return recreate, waiting

    def _plan_removals(self, plan: Plan, stale: Mapping[str, list[ObjectView]]) -> None:
        """Stale ClusterQueues go, or are held and drained while they have work; what a held one
        still uses stays; the rest goes. Deleted LocalQueues first, then what they referred to."""
        queues = [q for q in stale["ClusterQueue"] if isinstance(q, ClusterQueueView)]
        held, removals = self._plan_queue_removals(queues)
        removals += self._plan_leftovers(stale, held)
        order = {k: i for i, k in enumerate(reversed(KINDS))}
        plan.changes.extend(sorted(removals, key=lambda c: (order[c.kind], c.namespace or "", c.name)))

    def _plan_queue_removals(
        self, queues: list[ClusterQueueView]
    ) -> tuple[dict[str, ClusterQueueView], list[Change]]:
        """The ClusterQueues kept while they drain, and each stale queue's change."""
        gv = self.group_version
        held: dict[str, ClusterQueueView] = {}
        removals: list[Change] = []
        for cq in queues:
            name = cq.name
            busy = self._busy(cq)
            if not busy:
                removals.append(
                    Change(Action.DELETE, "ClusterQueue", name, None, gv, reason="not in the policy")
                )
                continue
            held[name] = cq
            if cq.stop_policy == DRAIN:
                removals.append(
                    Change(Action.KEEP, "ClusterQueue", name, None, gv, reason=f"held and draining: {busy}")
                )
            else:
                before = cq.stop_policy
                removals.append(
                    Change(
                        Action.HOLD,
                        "ClusterQueue",
                        name,
                        None,
                        gv,
                        [f"spec.stopPolicy: {shown(before)} -> {shown(DRAIN)}"],
                        reason=f"team removed from the policy, but {busy}: stopped and drained, not deleted",
                    )
                )
        return held, removals

    def _plan_leftovers(
        self, stale: Mapping[str, list[ObjectView]], held: Mapping[str, ClusterQueueView]
    ) -> list[Change]:
        """The other stale objects: kept while a draining ClusterQueue uses them, else deleted."""
        gv = self.group_version
        kept_flavors = set().union(*(cq.flavor_names for cq in held.values())) if held else set()
        kept_cohorts = {cq.cohort for cq in held.values()}
        kept_topologies = {
            rf.topology_name
            for rf in stale["ResourceFlavor"]
            if isinstance(rf, ResourceFlavorView) and rf.name in kept_flavors
        }
        keep_rules: tuple[tuple[str, Callable[[ObjectView], bool]], ...] = (
            ("LocalQueue", lambda o: isinstance(o, LocalQueueView) and o.cluster_queue in held),
            ("WorkloadPriorityClass", lambda o: False),
            ("Cohort", lambda o: o.name in kept_cohorts),
            ("ResourceFlavor", lambda o: o.name in kept_flavors),
            ("Topology", lambda o: o.name in kept_topologies),
        )
        changes = []
        for kind, keep_if in keep_rules:
            for obj in stale[kind]:
                name, ns = obj.name, obj.namespace
                if keep_if(obj):
                    why = "still used by a ClusterQueue that is draining"
                    changes.append(Change(Action.KEEP, kind, name, ns, gv, reason=why))
                else:
                    changes.append(Change(Action.DELETE, kind, name, ns, gv, reason="not in the policy"))
        return changes

    def _busy(self, cq: ClusterQueueView) -> str:
        """Why a removed team's ClusterQueue cannot go yet ('' when it can)."""
        counts = [f"{n} {k}" for k, n in cq.workload_counts.items() if n > 0]
        namespace = cq.team_namespace or cq.labels.get(TEAM_LABEL)
        reasons = []
        if counts:
            reasons.append("Kueue reports " + ", ".join(counts))
        if namespace:
            jobs = self.objects.unfinished_jobs(namespace)
            if jobs is None:
                reasons.append(f"the Jobs in {namespace} cannot be read (assumed running)")
            elif jobs:
                shown = ", ".join(jobs[:5]) + (f" and {len(jobs) - 5} more" if len(jobs) > 5 else "")
                reasons.append(f"{len(jobs)} unfinished Job(s) in {namespace}: {shown}")
        return "; ".join(reasons)

    # -- writes --------------------------------------------------------------------------------------
    def apply(self, plan: Plan) -> GovernorSummary:
        summary = GovernorSummary(plan=plan)
        # Flavors no queue may list while this apply runs: those being re-created until they are back.
        self._withheld = {c.name for c in plan.changes if c.action == Action.RECREATE}
        for change in plan.writes:
            try:
                self._apply_one(change)
                summary.applied += 1
            except KubernetesError as exc:
                summary.failures.append(
                    {"object": change.object, "action": str(change.action), "error": str(exc)}
                )
                self._log.warning("governor write failed", extra={"object": change.object, "error": str(exc)})
        for change in plan.changes:
            if change.action == Action.UNOWNED:
                self._log.warning("object not owned by topogov left alone", extra={"object": change.object})
        return summary

    def _recreate_flavor(self, change: Change) -> None:
        """Out of every queue, deleted, created again once Kueue lets it go (see the module docstring)."""
        assert change.desired is not None
        name = change.name
        for cq in self.objects.list(self.group_version, "ClusterQueue"):
            if isinstance(cq, ClusterQueueView) and name in cq.flavor_names and owned(cq):
                self._detach(cq, change)
        self.objects.delete(change.api_version, "ResourceFlavor", name)
        waited = 0.0
        while self.objects.get(change.api_version, "ResourceFlavor", name) is not None:
            if waited >= self.release_wait_s:
                self._log.warning(
                    "flavor not released yet: the queues stay without it until the next pass",
                    extra={"object": change.object, "waited_s": waited},
                )
                return
            self._sleep(0.5)
            waited += 0.5
        self.objects.create(stamped(change.desired))
        self._withheld.discard(name)
        self._log.warning(
            "re-created a flavor (its topologyName is immutable)",
            extra={"object": change.object, "diff": change.diff},
        )

    def _detach(self, cq: ClusterQueueView, change: Change) -> None:
        """PUT the live queue ``cq`` without the flavor of ``change``, re-reading on a 409."""
        for _ in range(3):
            if self.objects.replace(detached(cq, change.name)) is not None:
                return
            fresh = self.objects.get(change.api_version, "ClusterQueue", cq.name)
            if not isinstance(fresh, ClusterQueueView) or not owned(fresh):
                return
            cq = fresh
        raise KubernetesError(409, f"update ClusterQueue {cq.name}", "kept conflicting")

    def _apply_one(self, change: Change) -> None:
        if is_team_pods(change):
            apply_team_pods(self.objects, change)
            self._log.info(str(change.action), extra={"object": change.object, "diff": change.diff})
        elif change.action == Action.CREATE:
            assert change.desired is not None
            desired = queue_as_allowed(change.desired, self._withheld)
            self.objects.create(to_create(desired))
            self._log.info("created", extra={"object": change.object})
        elif change.action == Action.RECREATE:
            self._recreate_flavor(change)
        elif change.action == Action.UPDATE:
            assert change.desired is not None and change.current is not None
            current = change.current
            desired = queue_as_allowed(change.desired, self._withheld)
            for _ in range(3):
                if self.objects.replace(corrected(desired, current)) is not None:
                    extra = {"object": change.object, "diff": change.diff, "why": change.reason}
                    if change.reason == "edited by hand":
                        self._log.warning("corrected drift", extra=extra)
                    else:
                        self._log.info("updated", extra=extra)
                    return
                fresh = self.objects.get(change.api_version, change.kind, change.name, change.namespace)
                if fresh is None or not owned(fresh):
                    return  # deleted or disowned meanwhile: the next pass decides again
                current = fresh
            raise KubernetesError(409, f"update {change.object}", "kept conflicting with other writers")
        elif change.action == Action.HOLD:
            self.objects.merge_patch(
                change.api_version,
                change.kind,
                change.name,
                change.namespace,
                {"spec": {"stopPolicy": DRAIN}},
            )
            self._log.warning(
                "stopped a removed team's queue", extra={"object": change.object, "reason": change.reason}
            )
        elif change.action == Action.DELETE:
            self.objects.delete(change.api_version, change.kind, change.name, change.namespace)
            self._log.info("deleted", extra={"object": change.object, "reason": change.reason})

    def run(
        self, policy: Policy, snapshot: Snapshot | None, counters: Counters | None = None
    ) -> GovernorSummary:
        started = self._clock()
        reads0, writes0 = (counters.reads, counters.writes) if counters is not None else (0, 0)
        try:
            plan = self.plan(policy, snapshot)
        except KubernetesError as exc:
            summary = GovernorSummary(plan=Plan(api_version=self.group_version, skipped=str(exc)))
            summary.failures.append({"object": None, "action": "plan", "error": str(exc)})
        else:
            summary = self.apply(plan)
        if counters is not None:
            summary.k8s_reads = counters.reads - reads0
            summary.k8s_writes = counters.writes - writes0
        summary.duration_s = round(self._clock() - started, 4)
        return summary
