"""The governor: keep the cluster's Kueue objects equal to what the team policy renders.

One pass = :meth:`Governor.plan` (reads only) then :meth:`Governor.apply` (writes only what the plan
says). ``topogov governor plan`` prints the plan and stops there.

Ownership
    An object is Topogov's when it carries ``app.kubernetes.io/managed-by: topogov``. Topogov
    creates what is missing, corrects drift on what it owns, deletes what it owns and the policy no
    longer has, and never writes an object it does not own: a same-named object without the label
    is reported (``unowned``) and left alone. Namespaces are created when missing and never changed
    or deleted: they hold the teams' data.

Drift
    Everything Topogov renders is compared with the live object: its labels must be present with
    the rendered values, every rendered field must be there with the rendered value (quantities
    compared as quantities: ``60Ti`` = ``61440Gi``), lists must have the rendered items in order,
    and inside ``resourceGroups`` (the quotas) nothing else may be present — a hand-added
    ``lendingLimit`` is drift. Fields Topogov does not render (Kueue's defaults such as
    ``queueingStrategy``) are not compared. A drifted object is replaced (``PUT`` at the
    resourceVersion it was read: its whole spec is Topogov's, other labels and annotations are
    kept; the API server applies Kueue's defaults again), and the correction is logged with the
    differences. Every object Topogov writes carries ``topogov.io/rendered``, a hash of what it
    rendered, so a difference is told apart: the same hash means the object was *edited by hand*
    (logged as a warning), another hash means *the policy or the fleet changed* (logged as info).

Fields Kueue never lets change
    A ResourceFlavor's ``topologyName`` is immutable once set, and a Topology's ``levels`` are
    immutable (kubernetes-sigs/kueue v0.17.0 ``config/components/crd/bases``, CEL rules
    "topologyName is immutable when topologyName is set" and "field is immutable"). Topology names say
    their depth (:func:`topogov.domain.kueue.topology_name`), so levels never need to change; a flavor
    that must move to another Topology is *re-created*: Kueue keeps a flavor that a ClusterQueue lists
    (finalizer ``kueue.x-k8s.io/resource-in-use``, released by
    ``pkg/controller/core/resourceflavor_controller.go`` once no ClusterQueue uses it), so the governor
    first takes the flavor out of the ClusterQueues it owns, deletes it, waits (a few seconds) for
    Kueue to let it go, creates it again and puts it back in the queues. Admitted work keeps running;
    nothing new is admitted on that flavor meanwhile. When Kueue has not let go in time, the queues
    stay without the flavor and the next pass finishes the job; a ClusterQueue Topogov does not own
    that lists the flavor blocks the re-creation (reported, nothing written). A live Topology with the
    very levels a flavor needs is kept under its old name (a cluster from before the per-depth names
    keeps its ``topogov-network`` where its levels are right), so an upgrade re-creates only what is
    wrong. An owned object that is being deleted is waited for, never written.

A team removed from the policy
    Its ClusterQueue is deleted only when nothing is left in it: Kueue's status counts
    (``pendingWorkloads``, ``reservingWorkloads``, ``admittedWorkloads``) are zero and no unfinished
    Job is in the team's namespace (when the Jobs cannot be read, Topogov assumes some are there).
    Otherwise its ``stopPolicy`` is set to ``HoldAndDrain`` (Kueue admits nothing more and evicts
    what it admitted) and the queue, its LocalQueue and the flavors, topology and cohort it refers
    to are kept until a later pass finds it empty.
"""

from __future__ import annotations

import builtins
import enum
import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import InvalidOperation
from typing import Any, Protocol

from topogov.domain.errors import KubernetesError
from topogov.domain.kueue import (
    MANAGED_BY,
    MANAGED_BY_LABEL,
    NAMESPACE_NAME_LABEL,
    TEAM_LABEL,
    ApiVersion,
    FlavorInput,
    flavors_from_snapshot,
    render,
    topology_object,
)
from topogov.domain.quantity import Resources, parse_quantity

OWNED_SELECTOR = f"{MANAGED_BY_LABEL}={MANAGED_BY}"
# Creation order: what an object refers to exists before it. Deletion runs the other way.
KINDS = (
    "Namespace",
    "Topology",
    "ResourceFlavor",
    "Cohort",
    "WorkloadPriorityClass",
    "ClusterQueue",
    "LocalQueue",
)
KUEUE_KINDS = KINDS[1:]
QUANTITY_FIELDS = frozenset({"nominalQuota", "borrowingLimit", "lendingLimit"})
EXACT_UNDER = "resourceGroups"  # inside it, fields Topogov does not render count as drift
WORKLOAD_COUNTS = ("pendingWorkloads", "reservingWorkloads", "admittedWorkloads")
DRAIN = "HoldAndDrain"
_LOG = logging.getLogger("topogov.governor")
_LOG.addHandler(logging.NullHandler())  # a library's logger: silent unless the caller configures one
RENDERED_ANNOTATION = "topogov.io/rendered"  # hash of what Topogov last wrote: tells hand edits apart


Obj = dict[str, Any]  # a Kubernetes object as JSON


class ObjectsPort(Protocol):
    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Obj | None: ...
    def list(self, api_version: str, kind: str) -> builtins.list[Obj]: ...
    def create(self, obj: Mapping[str, Any]) -> Obj: ...
    def replace(self, obj: Mapping[str, Any]) -> Obj | None: ...
    def merge_patch(
        self, api_version: str, kind: str, name: str, namespace: str | None, patch: Mapping[str, Any]
    ) -> Obj: ...
    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> bool: ...
    def unfinished_jobs(self, namespace: str) -> builtins.list[str] | None: ...


class Action(enum.StrEnum):
    CREATE = "create"
    UPDATE = "update"  # drift corrected
    DELETE = "delete"
    HOLD = "hold"  # a removed team's queue still has work: stopPolicy HoldAndDrain
    KEEP = "keep"  # not in the policy any more, kept while a held queue drains
    UNOWNED = "unowned"  # same name, not Topogov's: left alone, reported
    RECREATE = "recreate"  # an immutable field must change: out of the queues, deleted, created again
    WAIT = "wait"  # being deleted (Kueue holds it while it is in use): nothing written
    BLOCKED = "blocked"  # must be re-created, but a ClusterQueue Topogov does not own lists it


SYMBOL = {
    Action.CREATE: "+",
    Action.UPDATE: "~",
    Action.DELETE: "-",
    Action.HOLD: "!",
    Action.KEEP: "=",
    Action.UNOWNED: "?",
    Action.RECREATE: "±",
    Action.WAIT: "…",
    Action.BLOCKED: "×",
}
WRITES = (Action.CREATE, Action.RECREATE, Action.UPDATE, Action.DELETE, Action.HOLD)


@dataclass
class Change:
    action: Action
    kind: str
    name: str
    namespace: str | None
    api_version: str
    diff: list[str] = field(default_factory=list)
    reason: str = ""
    desired: dict[str, Any] | None = field(default=None, repr=False)
    current: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def object(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}" if self.namespace else f"{self.kind} {self.name}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"action": str(self.action), "kind": self.kind, "name": self.name}
        if self.namespace:
            out["namespace"] = self.namespace
        if self.diff:
            out["diff"] = list(self.diff)
        if self.reason:
            out["reason"] = self.reason
        return out


@dataclass
class Plan:
    api_version: str
    flavors: list[str] = field(default_factory=list)
    topologies: dict[str, str] = field(default_factory=dict)  # flavor -> the Topology it is in
    changes: list[Change] = field(default_factory=list)
    unchanged: int = 0
    warnings: list[str] = field(default_factory=list)
    skipped: str | None = None  # why nothing was rendered (nothing is changed or deleted then)

    def count(self, action: Action) -> int:
        return sum(1 for c in self.changes if c.action == action)

    @property
    def writes(self) -> list[Change]:
        return [c for c in self.changes if c.action in WRITES]

    def to_json(self) -> dict[str, Any]:
        return {
            "api_version": self.api_version,
            "flavors": list(self.flavors),
            "topologies": dict(self.topologies),
            "changes": [c.to_json() for c in self.changes],
            "counts": {str(a): self.count(a) for a in Action} | {"unchanged": self.unchanged},
            "warnings": list(self.warnings),
            "skipped": self.skipped,
        }


@dataclass
class GovernorSummary:
    plan: Plan
    applied: int = 0
    failures: list[dict[str, Any]] = field(default_factory=list)
    k8s_reads: int = 0
    k8s_writes: int = 0
    duration_s: float = 0.0

    @property
    def complete(self) -> bool:
        return not self.failures

    def to_json(self) -> dict[str, Any]:
        return self.plan.to_json() | {
            "applied": self.applied,
            "failures": list(self.failures),
            "complete": self.complete,
            "k8s_reads": self.k8s_reads,
            "k8s_writes": self.k8s_writes,
            "duration_s": self.duration_s,
        }


# --- drift (pure) ------------------------------------------------------------------------------------


def owned(obj: Mapping[str, Any] | None) -> bool:
    labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
    return labels.get(MANAGED_BY_LABEL) == MANAGED_BY


def _show(value: Any) -> str:
    if value is None:
        return "(absent)"
    text = json.dumps(value, separators=(",", ":"), sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."


def _same_quantity(a: Any, b: Any) -> bool:
    try:
        return parse_quantity(a) == parse_quantity(b)
    except (InvalidOperation, ValueError, TypeError):
        return False


def _compare(want: Any, have: Any, path: str, out: list[str], exact: bool) -> None:
    if isinstance(want, Mapping):
        if not isinstance(have, Mapping):
            out.append(f"{path}: {_show(have)} -> {_show(want)}")
            return
        for key, value in want.items():
            sub = f"{path}.{key}" if path else key
            _compare(value, have.get(key), sub, out, exact or key == EXACT_UNDER)
        if exact:
            for key in sorted(set(have) - set(want)):
                out.append(f"{path}.{key}: {_show(have[key])} -> (absent)")
        return
    if isinstance(want, list):
        if not isinstance(have, list) or len(have) != len(want):
            out.append(f"{path}: {_show(have)} -> {_show(want)}")
            return
        for i, (w, h) in enumerate(zip(want, have, strict=True)):
            label = w["name"] if isinstance(w, Mapping) and isinstance(w.get("name"), str) else i
            _compare(w, h, f"{path}[{label}]", out, exact)
        return
    if want == have and type(want) is type(have):
        return
    if path.rsplit(".", 1)[-1] in QUANTITY_FIELDS and _same_quantity(want, have):
        return
    out.append(f"{path}: {_show(have)} -> {_show(want)}")


def drift(desired: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """How ``current`` differs from ``desired`` in what Topogov renders, one line per field."""
    out: list[str] = []
    have_labels = (current.get("metadata") or {}).get("labels") or {}
    for key, value in (desired["metadata"].get("labels") or {}).items():
        if have_labels.get(key) != value:
            out.append(f"metadata.labels.{key}: {_show(have_labels.get(key))} -> {_show(value)}")
    for key, value in desired.items():
        if key not in ("apiVersion", "kind", "metadata"):
            _compare(value, current.get(key), key, out, key == EXACT_UNDER)
    return out


def rendered_hash(desired: Mapping[str, Any]) -> str:
    body = {k: v for k, v in desired.items() if k != "metadata"}
    body["labels"] = desired["metadata"].get("labels") or {}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def stamped(desired: Mapping[str, Any]) -> dict[str, Any]:
    """``desired`` carrying the hash of itself (as created)."""
    meta = dict(desired["metadata"])
    meta["annotations"] = {**(meta.get("annotations") or {}), RENDERED_ANNOTATION: rendered_hash(desired)}
    return {**desired, "metadata": meta}


def edited_by_hand(desired: Mapping[str, Any], current: Mapping[str, Any]) -> bool:
    """True when Topogov last wrote exactly this rendering: the difference was made by someone else
    (False: the policy or the fleet changed what Topogov renders)."""
    annotations = (current.get("metadata") or {}).get("annotations") or {}
    return annotations.get(RENDERED_ANNOTATION) == rendered_hash(desired)


def corrected(desired: Mapping[str, Any], current: Mapping[str, Any]) -> dict[str, Any]:
    """The object to PUT: the live metadata (resourceVersion, other labels and annotations) with
    Topogov's labels, and every rendered top-level field as rendered."""
    meta = dict(current["metadata"])
    meta["labels"] = {**(meta.get("labels") or {}), **(desired["metadata"].get("labels") or {})}
    meta["annotations"] = {**(meta.get("annotations") or {}), RENDERED_ANNOTATION: rendered_hash(desired)}
    meta.pop("managedFields", None)
    obj: dict[str, Any] = {"apiVersion": desired["apiVersion"], "kind": desired["kind"], "metadata": meta}
    for key, value in desired.items():
        if key not in ("apiVersion", "kind", "metadata"):
            obj[key] = value
    return obj


def _ref(obj: Mapping[str, Any]) -> tuple[str, str, str | None]:
    """(kind, name, namespace): namespace None for cluster-scoped objects, rendered or live."""
    meta = obj["metadata"]
    return obj["kind"], meta["name"], meta.get("namespace")


def _cq_namespace(cq: Mapping[str, Any]) -> str | None:
    spec = cq.get("spec") or {}
    return ((spec.get("namespaceSelector") or {}).get("matchLabels") or {}).get(NAMESPACE_NAME_LABEL)


def _cq_cohort(cq: Mapping[str, Any]) -> str | None:
    spec = cq.get("spec") or {}
    return spec.get("cohort") or spec.get("cohortName")


def _cq_flavors(cq: Mapping[str, Any]) -> set[str]:
    groups = (cq.get("spec") or {}).get("resourceGroups") or []
    return {f.get("name") for g in groups for f in g.get("flavors") or []}


def without_flavors(cq: Mapping[str, Any], flavors: set[str]) -> dict[str, Any]:
    """``cq`` with ``flavors`` taken out of its resource groups (a group left with none goes too:
    Kueue requires at least one flavor per group)."""
    spec = dict(cq.get("spec") or {})
    groups = []
    for group in spec.get("resourceGroups") or []:
        kept = [f for f in group.get("flavors") or [] if f.get("name") not in flavors]
        if kept:
            groups.append({**group, "flavors": kept})
    spec["resourceGroups"] = groups
    return {**cq, "spec": spec}


def terminating(obj: Mapping[str, Any] | None) -> bool:
    return bool(((obj or {}).get("metadata") or {}).get("deletionTimestamp"))


def _levels(topology: Mapping[str, Any] | None) -> list[str]:
    return [lv.get("nodeLabel") for lv in ((topology or {}).get("spec") or {}).get("levels") or []]


def keep_equivalent_topologies(
    desired: list[dict[str, Any]], live: Mapping[tuple[str, str, str | None], Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """``desired`` with each owned flavor left in the live Topology it is in when that one has exactly
    the levels the flavor needs (an upgrade re-creates only flavors whose levels are wrong), and only
    the Topologies some flavor refers to."""
    levels = {o["metadata"]["name"]: _levels(o) for o in desired if o["kind"] == "Topology"}
    kept: dict[str, dict[str, Any]] = {}  # live owned Topologies kept under their old names
    flavors: list[dict[str, Any]] = []
    for obj in desired:
        if obj["kind"] != "ResourceFlavor":
            continue
        want = obj["spec"]["topologyName"]
        current = live.get(("ResourceFlavor", obj["metadata"]["name"], None))
        have: str | None = ((current or {}).get("spec") or {}).get("topologyName")
        old = live.get(("Topology", have, None)) if have and have != want else None
        if (
            have
            and old is not None
            and owned(current)
            and not terminating(old)
            and _levels(old) == levels[want]
        ):
            obj = {**obj, "spec": {**obj["spec"], "topologyName": have}}
            if owned(old) and have not in levels:
                kept[have] = topology_object(have, _levels(old), obj["apiVersion"].split("/")[1])
        flavors.append(obj)
    used = {f["spec"]["topologyName"] for f in flavors}
    topologies = [o for o in desired if o["kind"] == "Topology"] + list(kept.values())
    out: list[dict[str, Any]] = []
    for obj in desired:
        if obj["kind"] == "Topology":
            continue
        if obj["kind"] == "ResourceFlavor":
            out.extend(t for t in topologies if t["metadata"]["name"] in used)
            out.extend(flavors)
            topologies = flavors = []
            continue
        out.append(obj)
    return out


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
        self._log = log or _LOG
        self._clock = clock

    @property
    def group_version(self) -> str:
        return f"kueue.x-k8s.io/{self.api_version}"

    def desired(self, policy: Any, flavors: list[FlavorInput]) -> list[dict[str, Any]]:
        return render(policy, flavors, api_version=self.api_version, cohort=self.cohort)

    def plan(self, policy: Any, snapshot: Any) -> Plan:
        """What a pass would change, from reads only."""
        plan = Plan(api_version=self.group_version)
        flavors = flavors_from_snapshot(snapshot) if snapshot is not None else []
        if not flavors:
            plan.skipped = (
                "no GPU node in the topology snapshot yet (the labeler has not run, or the fleet has no "
                "GPU nodes): nothing rendered, nothing changed or deleted"
            )
            return plan
        plan.flavors = [f.instance_type for f in flavors]
        capacity = Resources()
        for f in flavors:
            capacity = capacity + f.capacity
        plan.warnings = policy.warnings(capacity)
        # One list per kind (7 reads a pass, whatever the number of teams), not one GET per object.
        live: dict[tuple[str, str, str | None], dict[str, Any]] = {}
        for kind in KINDS:
            version = "v1" if kind == "Namespace" else self.group_version
            for obj in self.objects.list(version, kind):
                live[_ref(obj)] = obj
        desired = keep_equivalent_topologies(self.desired(policy, flavors), live)
        plan.topologies = {
            o["metadata"]["name"]: o["spec"]["topologyName"] for o in desired if o["kind"] == "ResourceFlavor"
        }
        wanted = {_ref(o) for o in desired}
        recreate, waiting = self._plan_immutable(plan, desired, live)
        if waiting:  # a flavor Kueue is letting go must leave every queue first, or it never goes
            desired = [without_flavors(o, waiting) if o["kind"] == "ClusterQueue" else o for o in desired]
        planned = {(c.kind, c.name, c.namespace) for c in plan.changes}

        for obj in desired:
            kind, name, ns = _ref(obj)
            current = live.get((kind, name, ns))
            if (kind, name, ns) in planned:
                continue
            if current is None:
                plan.changes.append(Change(Action.CREATE, kind, name, ns, obj["apiVersion"], desired=obj))
            elif kind == "Namespace":
                plan.unchanged += 1  # exists: the team's, whoever created it
            elif terminating(current):
                plan.changes.append(
                    Change(
                        Action.WAIT,
                        kind,
                        name,
                        ns,
                        obj["apiVersion"],
                        reason="being deleted (Kueue keeps it while it is in use): created again once gone",
                    )
                )
            elif not owned(current):
                plan.changes.append(
                    Change(
                        Action.UNOWNED,
                        kind,
                        name,
                        ns,
                        obj["apiVersion"],
                        reason=f"exists without {OWNED_SELECTOR}: not Topogov's, left alone",
                    )
                )
            else:
                diff = drift(obj, current)
                readds = sorted(recreate & _cq_flavors(current)) if kind == "ClusterQueue" else []
                if diff or readds:
                    hand = edited_by_hand(obj, current)
                    why = "edited by hand" if hand else "the policy or the fleet changed"
                    if not diff:
                        why = f"takes back ResourceFlavor {', '.join(readds)} once it is re-created"
                    plan.changes.append(
                        Change(
                            Action.UPDATE,
                            kind,
                            name,
                            ns,
                            obj["apiVersion"],
                            diff,
                            reason=why,
                            desired=obj,
                            current=current,
                        )
                    )
                else:
                    plan.unchanged += 1

        order = {k: i for i, k in enumerate(KINDS)}  # creation order; re-creations in their kind's place
        plan.changes.sort(key=lambda c: order[c.kind])
        stale: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KUEUE_KINDS}
        for key, obj in live.items():
            if key[0] != "Namespace" and key not in wanted and owned(obj):
                if terminating(obj):
                    plan.changes.append(
                        Change(Action.WAIT, key[0], key[1], key[2], obj["apiVersion"], reason="being deleted")
                    )
                else:
                    stale[key[0]].append(obj)
        self._plan_removals(plan, stale)
        return plan

    def _plan_immutable(
        self,
        plan: Plan,
        desired: list[dict[str, Any]],
        live: Mapping[tuple[str, str, str | None], dict[str, Any]],
    ) -> tuple[set[str], set[str]]:
        """Flavors whose ``topologyName`` must change (re-created) and flavors being deleted."""
        recreate: set[str] = set()
        waiting: set[str] = set()
        queues = [o for k, o in live.items() if k[0] == "ClusterQueue"]
        for obj in desired:
            if obj["kind"] != "ResourceFlavor":
                continue
            name = obj["metadata"]["name"]
            current = live.get(("ResourceFlavor", name, None))
            if current is None or not owned(current):
                continue
            if terminating(current):
                waiting.add(name)
                continue
            have = (current.get("spec") or {}).get("topologyName")
            want = obj["spec"]["topologyName"]
            if have is None or have == want:
                continue
            diff = [f"spec.topologyName: {_show(have)} -> {_show(want)}"]
            users = sorted(q["metadata"]["name"] for q in queues if name in _cq_flavors(q))
            foreign = sorted(q["metadata"]["name"] for q in queues if name in _cq_flavors(q) and not owned(q))
            if foreign:
                why = (
                    f"topologyName is immutable in Kueue, so it must be re-created, but ClusterQueue "
                    f"{', '.join(foreign)} (not Topogov's) lists it and Kueue would keep it: "
                    "take it out there"
                )
                plan.changes.append(
                    Change(Action.BLOCKED, "ResourceFlavor", name, None, obj["apiVersion"], diff, reason=why)
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
                    obj["apiVersion"],
                    diff,
                    reason=why,
                    desired=obj,
                    current=current,
                )
            )
        return recreate, waiting

    def _plan_removals(self, plan: Plan, stale: Mapping[str, list[dict[str, Any]]]) -> None:
        gv = self.group_version
        held: dict[str, Mapping[str, Any]] = {}  # ClusterQueues kept while they drain
        removals: list[Change] = []
        for cq in stale["ClusterQueue"]:
            name = cq["metadata"]["name"]
            busy = self._busy(cq)
            if not busy:
                removals.append(
                    Change(Action.DELETE, "ClusterQueue", name, None, gv, reason="not in the policy")
                )
                continue
            held[name] = cq
            if (cq.get("spec") or {}).get("stopPolicy") == DRAIN:
                removals.append(
                    Change(Action.KEEP, "ClusterQueue", name, None, gv, reason=f"held and draining: {busy}")
                )
            else:
                before = (cq.get("spec") or {}).get("stopPolicy", "None")
                removals.append(
                    Change(
                        Action.HOLD,
                        "ClusterQueue",
                        name,
                        None,
                        gv,
                        [f"spec.stopPolicy: {_show(before)} -> {_show(DRAIN)}"],
                        reason=f"team removed from the policy, but {busy}: stopped and drained, not deleted",
                    )
                )
        kept_flavors = set().union(*(_cq_flavors(cq) for cq in held.values())) if held else set()
        kept_cohorts = {_cq_cohort(cq) for cq in held.values()}
        kept_topologies = {
            (rf.get("spec") or {}).get("topologyName")
            for rf in stale["ResourceFlavor"]
            if rf["metadata"]["name"] in kept_flavors
        }
        keep_rules: tuple[tuple[str, Callable[[Obj], bool]], ...] = (
            ("LocalQueue", lambda o: (o.get("spec") or {}).get("clusterQueue") in held),
            ("WorkloadPriorityClass", lambda o: False),
            ("Cohort", lambda o: o["metadata"]["name"] in kept_cohorts),
            ("ResourceFlavor", lambda o: o["metadata"]["name"] in kept_flavors),
            ("Topology", lambda o: o["metadata"]["name"] in kept_topologies),
        )
        for kind, keep_if in keep_rules:
            for obj in stale[kind]:
                name, ns = obj["metadata"]["name"], obj["metadata"].get("namespace")
                if keep_if(obj):
                    removals.append(
                        Change(
                            Action.KEEP,
                            kind,
                            name,
                            ns,
                            gv,
                            reason="still used by a ClusterQueue that is draining",
                        )
                    )
                else:
                    removals.append(Change(Action.DELETE, kind, name, ns, gv, reason="not in the policy"))
        # Deletion order: LocalQueues, ClusterQueues, then what they referred to.
        order = {k: i for i, k in enumerate(reversed(KINDS))}
        plan.changes.extend(sorted(removals, key=lambda c: (order[c.kind], c.namespace or "", c.name)))

    def _busy(self, cq: Mapping[str, Any]) -> str:
        """Why a removed team's ClusterQueue cannot go yet ('' when it can)."""
        status = cq.get("status") or {}
        counts = [f"{status[k]} {k}" for k in WORKLOAD_COUNTS if int(status.get(k) or 0) > 0]
        namespace = _cq_namespace(cq) or ((cq["metadata"].get("labels") or {}).get(TEAM_LABEL))
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

    def _queue_as_allowed(self, desired: dict[str, Any]) -> dict[str, Any]:
        if desired["kind"] == "ClusterQueue" and self._withheld & _cq_flavors(desired):
            return without_flavors(desired, self._withheld)
        return desired

    def _recreate_flavor(self, change: Change) -> None:
        """Out of every queue, deleted, created again once Kueue lets it go (see the module docstring)."""
        assert change.desired is not None
        name = change.name
        for cq in self.objects.list(self.group_version, "ClusterQueue"):
            if name in _cq_flavors(cq) and owned(cq):
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

    def _detach(self, cq: dict[str, Any], change: Change) -> None:
        """PUT the live queue ``cq`` without the flavor of ``change``, re-reading on a 409."""
        for _ in range(3):
            if self.objects.replace(without_flavors(cq, {change.name})) is not None:
                return
            fresh = self.objects.get(change.api_version, "ClusterQueue", cq["metadata"]["name"])
            if fresh is None or not owned(fresh):
                return
            cq = fresh
        raise KubernetesError(409, f"update ClusterQueue {cq['metadata']['name']}", "kept conflicting")

    def _apply_one(self, change: Change) -> None:
        if change.action == Action.CREATE:
            assert change.desired is not None
            desired = self._queue_as_allowed(change.desired)
            self.objects.create(desired if change.kind == "Namespace" else stamped(desired))
            self._log.info("created", extra={"object": change.object})
        elif change.action == Action.RECREATE:
            self._recreate_flavor(change)
        elif change.action == Action.UPDATE:
            assert change.desired is not None and change.current is not None
            current = change.current
            desired = self._queue_as_allowed(change.desired)
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

    def run(self, policy: Any, snapshot: Any, counters: Any = None) -> GovernorSummary:
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


def format_plan(plan: Plan) -> str:
    """The plan as ``topogov governor plan`` prints it."""
    lines: list[str] = []
    if plan.skipped:
        return f"Nothing to plan: {plan.skipped}\n"
    shown = ", ".join(f"{f} in {plan.topologies[f]}" if f in plan.topologies else f for f in plan.flavors)
    lines.append(f"Kueue objects ({plan.api_version}) for {len(plan.flavors)} GPU flavor(s) [{shown}]:")
    for change in plan.changes:
        lines.append(f"  {SYMBOL[change.action]} {change.action:<8} {change.object}")
        for d in change.diff:
            lines.append(f"        {d}")
        if change.reason and change.action != Action.CREATE:
            lines.append(f"        ({change.reason})")
    if not plan.changes:
        lines.append("  (no changes)")
    counts = ", ".join(f"{plan.count(a)} to {a}" for a in WRITES if plan.count(a))
    extras = [f"{plan.unchanged} unchanged"]
    if plan.count(Action.KEEP):
        extras.append(f"{plan.count(Action.KEEP)} kept while draining")
    if plan.count(Action.UNOWNED):
        extras.append(f"{plan.count(Action.UNOWNED)} not Topogov's (left alone)")
    if plan.count(Action.WAIT):
        extras.append(f"{plan.count(Action.WAIT)} being deleted")
    if plan.count(Action.BLOCKED):
        extras.append(f"{plan.count(Action.BLOCKED)} blocked")
    lines.append(f"Plan: {counts or 'no changes'}; " + ", ".join(extras) + ".")
    for w in plan.warnings:
        lines.append(f"warning: {w}")
    return "\n".join(lines) + "\n"
