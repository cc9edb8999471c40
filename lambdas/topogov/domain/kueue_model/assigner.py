"""Flavor assignment, as Kueue v0.17.0's ``FlavorAssigner`` does it
(``pkg/scheduler/flavorassigner/flavorassigner.go`` and ``tas_flavorassigner.go``).

Per pod set and resource group (``assignFlavors``, ``findFlavorForPodSets``)
    Flavors are tried in the ClusterQueue's order, from the one after the flavor the last attempt
    stopped at (``NextFlavorToTryForPodSetResource``; a full pass resets it to the first). A flavor is
    skipped with a reason when it does not match the pod set (TAS level missing, TAS-only flavor,
    ``nodeSelector`` not matching its ``nodeLabels``: ``checkFlavorForPodSets``,
    ``checkPodSetAndFlavorMatchForTAS``). Each resource is checked against quota
    (``fitsResourceQuota``): above ``potential_available`` is NoFit ("insufficient quota ..."), within
    ``available`` is Fit, else Preempt ("insufficient unused quota ... N more needed"), asking the
    preemption oracle whether candidates exist when the request is within nominal or preemption while
    borrowing is allowed. The flavor's mode is the worst of its resources; the search stops at a
    flavor ``shouldTryNextFlavor`` rejects (v0.17 defaults ``whenCanBorrow: MayStopSearch``,
    ``whenCanPreempt: TryNextFlavor``), else the best by ``isPreferred`` (BorrowingOverPreemption).

Pod-set groups (``podSetGroupName``)
    The pod sets of one group get their flavors together: the search runs once for the sum of their
    requests, every member must match the flavor, and each member gets the group's flavors (the same
    records) and reasons. So a group short of quota is reported for each member with the group's
    total ("couldn't assign flavors to pod set master: insufficient quota ... current podset request
    (32) ...; couldn't assign flavors to pod set worker: ..."), and the assignment lists the pod sets
    group by group.

Topology (the TopologyAwareScheduling branch of ``assignFlavors``)
    Only once quota gives Fit is placement computed; a placement failure turns the pod set to
    Preempt with the TAS reason. A Preempt assignment is placed again as if the flavor ran no TAS
    workload (``WithSimulateEmpty``): no fit even then is NoFit. Flavor choice never looks at
    topology: a pod set whose quota fits the first flavor but whose pods do not is retried on the
    next flavor only in a later cycle, through the pending-flavors requeue.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from topogov.domain.kueue_model.groups import find_assignments
from topogov.domain.kueue_model.objects import (
    PODS,
    ClusterQueue,
    PodSet,
    ResourceFlavor,
    ResourceGroup,
    TopologyRequest,
    Workload,
)
from topogov.domain.kueue_model.quota import FR, QuotaState
from topogov.domain.kueue_model.resources import quantity_string
from topogov.domain.kueue_model.tas import Placement, TASRequest, TopologyAssignment
from topogov.domain.kueue_model.topology import DomainUsage, FlavorTree

# preemptionMode (flavorassigner.go), ordered worst to best
NO_FIT, NO_CANDIDATES, PREEMPT, RECLAIM, FIT = range(5)
# FlavorAssignmentMode
MODE_NO_FIT, MODE_PREEMPT, MODE_FIT = range(3)
MODE_NAMES = {MODE_NO_FIT: "NoFit", MODE_PREEMPT: "Preempt", MODE_FIT: "Fit"}

Oracle = Callable[[str, Workload, FR, int], tuple[int, int]]  # -> (NO_CANDIDATES|PREEMPT|RECLAIM, borrow)


def assignment_mode(mode: int) -> int:
    """``preemptionMode.flavorAssignmentMode``."""
    return MODE_NO_FIT if mode == NO_FIT else MODE_FIT if mode == FIT else MODE_PREEMPT


@dataclass(slots=True)
class FlavorChoice:
    flavor: str
    mode: int
    tried: int = -1
    borrow: int = 0


@dataclass(slots=True)
class PodSetChoice:
    """``PodSetAssignment``: a flavor per resource, the reasons it is not Fit, the quota requests."""

    name: str
    count: int
    requests: dict[str, int]
    flavors: dict[str, FlavorChoice] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    error: str = ""
    topology: TopologyAssignment | None = None

    def is_fit(self) -> bool:
        return not self.error and not self.reasons

    def mode(self) -> int:
        """``PodSetAssignment.RepresentativeMode``."""
        if self.is_fit():
            return MODE_FIT
        if self.error or not self.flavors:
            return MODE_NO_FIT
        return min(f.mode for f in self.flavors.values())

    def message(self) -> str:
        return self.error or ", ".join(sorted(self.reasons))


@dataclass(slots=True)
class Assignment:
    pod_sets: list[PodSetChoice] = field(default_factory=list)
    borrowing: int = 0
    quota: dict[FR, int] = field(default_factory=dict)
    last_tried: list[dict[str, int]] = field(default_factory=list)
    generation: int = 0
    forced_mode: int | None = None
    pending: bool | None = None  # pending_flavors(), once asked

    def mode(self) -> int:
        """``Assignment.RepresentativeMode`` (cached once TAS overrides it)."""
        if not self.pod_sets:
            return MODE_NO_FIT
        if self.forced_mode is not None:
            return self.forced_mode
        return min(ps.mode() for ps in self.pod_sets)

    def message(self) -> str:
        """``Assignment.Message``."""
        parts = []
        for ps in self.pod_sets:
            if ps.is_fit():
                continue
            if ps.error:
                return f"failed to assign flavors to pod set {ps.name}: {ps.error}"
            parts.append(f"couldn't assign flavors to pod set {ps.name}: {ps.message()}")
        return "; ".join(parts)

    def pending_flavors(self) -> bool:
        """``AssignmentClusterQueueState.PendingFlavors`` (of the last attempt: set once assigned)."""
        if self.pending is None:
            self.pending = any(idx != -1 for tried in self.last_tried for idx in tried.values())
        return self.pending

    def net_tas_usage(self, trees: Mapping[str, FlavorTree]) -> dict[str, list[DomainUsage]]:
        """``ComputeTASNetUsage``: per pod set placed, its domains once per *resource* assigned a TAS
        flavor (Kueue loops over the pod set's per-resource flavors), with the TAS resources only."""
        out: dict[str, list[DomainUsage]] = {}
        for ps in self.pod_sets:
            if ps.topology is None:
                continue
            tas_res = {
                r: q for r, q in ps.requests.items() if r in ps.flavors and ps.flavors[r].flavor in trees
            }
            single = {r: q // ps.count for r, q in tas_res.items()} if ps.count else {}
            for choice in ps.flavors.values():
                if choice.flavor in trees:
                    out.setdefault(choice.flavor, []).extend(
                        DomainUsage(values, single, n) for values, n in ps.topology.domains
                    )
        return out


def is_tas_only(cq: ClusterQueue, trees: Mapping[str, FlavorTree]) -> bool:
    return all(name in trees for name in cq.flavor_names())


def tas_implied(ps: PodSet, cq: ClusterQueue, trees: Mapping[str, FlavorTree]) -> bool:
    """``isTASImplied``: no topology annotation, in a ClusterQueue with TAS flavors only."""
    return not (ps.topology is not None and ps.topology.explicit) and is_tas_only(cq, trees)


def tas_requested(ps: PodSet, cq: ClusterQueue, trees: Mapping[str, FlavorTree]) -> bool:
    return (ps.topology is not None and ps.topology.explicit) or tas_implied(ps, cq, trees)


def has_level(tree: FlavorTree, tr: TopologyRequest | None) -> bool:
    """``TASFlavorSnapshot.HasLevel``: the requested level (``levelKey``: required, preferred, the top
    level for slices alone, the lowest for unconstrained) and the slice level (the lowest by
    default) are the topology's."""
    if tr is None:
        return False
    key = tr.required if tr.required is not None else tr.preferred
    if key is None and tr.slice_level is not None:
        key = tree.levels[0]
    if key is None and tr.unconstrained:
        key = tree.levels[-1]
    slice_key = tr.slice_level if tr.slice_level is not None else tree.levels[-1]
    return key is not None and key in tree.levels and slice_key in tree.levels


def _tas_match(ps: PodSet, cq: ClusterQueue, flavor: str, rg: ResourceGroup, ctx: AssignContext) -> str:
    """``checkPodSetAndFlavorMatchForTAS``: "" when the flavor may serve the pod set."""
    rf = ctx.flavors.get(flavor)
    has_topology = rf is not None and rf.topology_name is not None
    if tas_requested(ps, cq, ctx.trees):
        if tas_implied(ps, cq, ctx.trees):
            return ""
        if not has_topology:
            if not any(r in rg.covered_resources for r in ps.requests):
                return ""
            return f'Flavor "{flavor}" does not support TopologyAwareScheduling'
        tree = ctx.trees.get(flavor)
        if tree is None:
            return f'Flavor "{flavor}" information missing in TAS cache'
        if not has_level(tree, ps.topology):
            return f'Flavor "{flavor}" does not contain the requested level'
        return ""
    return f'Flavor "{flavor}" supports only TopologyAwareScheduling' if has_topology else ""


@dataclass(slots=True)
class AssignContext:
    quota: QuotaState
    trees: Mapping[str, FlavorTree]
    flavors: Mapping[str, ResourceFlavor]
    oracle: Oracle
    fair_sharing: bool = False


def _fits_quota(
    ctx: AssignContext, cq: ClusterQueue, wl: Workload, fr: FR, assumed: int, request: int
) -> tuple[int, int, str]:
    """``fitsResourceQuota``: (preemption mode, borrowing level, reason)."""
    q = ctx.quota
    available, most = q.available(cq.name, fr), q.potential_available(cq.name, fr)
    value = assumed + request
    flavor, resource = fr
    if value > most:
        return (
            NO_FIT,
            0,
            f"insufficient quota for {resource} in flavor {flavor}, previously considered podsets requests "
            f"({quantity_string(resource, assumed)}) + current podset request "
            f"({quantity_string(resource, request)}) > maximum capacity ({quantity_string(resource, most)})",
        )
    borrow, may_reclaim = q.borrow_height(cq.name, fr, value)
    if value <= available:
        return FIT, borrow, ""
    reason = (
        f"insufficient unused quota for {resource} in flavor {flavor}, "
        f"{quantity_string(resource, value - available)} more needed"
    )
    preempt_while_borrowing = cq.preemption.borrow_within_cohort != "Never" or (
        ctx.fair_sharing and cq.preemption.reclaim_within_cohort != "Never"
    )
    if value <= q.quota(cq.name, fr).nominal or may_reclaim or preempt_while_borrowing:
        possibility, after = ctx.oracle(cq.name, wl, fr, value)
        return possibility, after, reason
    return NO_FIT, borrow, reason


def _preferred(a: tuple[int, int], b: tuple[int, int], cq: ClusterQueue) -> bool:
    """``isPreferred`` on (preemption mode, borrowing level)."""
    if a[0] == NO_FIT:
        return False
    if b[0] == NO_FIT:
        return True
    if cq.flavor_fungibility.preference == "PreemptionOverBorrowing":
        return a[1] < b[1] if a[1] != b[1] else a[0] > b[0]
    return a[0] > b[0] if a[0] != b[0] else a[1] < b[1]


def _try_next(mode: tuple[int, int], cq: ClusterQueue) -> bool:
    """``shouldTryNextFlavor``."""
    if mode[0] in (NO_FIT, NO_CANDIDATES):
        return True
    if mode[0] in (PREEMPT, RECLAIM) and cq.flavor_fungibility.when_can_preempt == "TryNextFlavor":
        return True
    return mode[1] != 0 and cq.flavor_fungibility.when_can_borrow == "TryNextFlavor"


def _check_flavor(ctx: AssignContext, cq: ClusterQueue, ps: PodSet, flavor: str, rg: ResourceGroup) -> str:
    """``checkFlavorForPodSets`` (flavor node taints are out of scope)."""
    rf = ctx.flavors.get(flavor)
    if rf is None:
        return f"flavor {flavor} not found"
    message = _tas_match(ps, cq, flavor, rg, ctx)
    if message:
        return message
    keys = {k for f in rg.flavors if f.name in ctx.flavors for k in ctx.flavors[f.name].node_labels}
    if any(rf.node_labels.get(k) != v for k, v in ps.node_selector.items() if k in keys):
        return f"flavor {flavor} doesn't match node affinity"
    return ""


def _find_flavor(
    ctx: AssignContext,
    cq: ClusterQueue,
    wl: Workload,
    ps_index: int,
    pod_sets: Sequence[PodSet],
    requests: Mapping[str, int],
    resource: str,
    assigned: Mapping[FR, int],
    last: Sequence[Mapping[str, int]] | None,
) -> tuple[dict[str, FlavorChoice] | None, list[str]]:
    """``findFlavorForPodSets``: the flavors of ``resource``'s group and, unless they fit, the reasons,
    for ``pod_sets`` (one, or a pod-set group's) asking ``requests`` together; ``ps_index`` is the
    first one's index (the flavor-attempt state read is its own: ``psIDs[0]``)."""
    rg = cq.group_of(resource)
    if rg is None:
        return None, [f"resource {resource} unavailable in ClusterQueue"]
    wanted = {r: v for r, v in requests.items() if r in rg.covered_resources}
    reasons: list[str] = []
    best: dict[str, FlavorChoice] | None = None
    best_mode = (NO_FIT, 2**62)
    start = 0
    if last is not None and ps_index < len(last) and resource in last[ps_index]:
        start = last[ps_index][resource] + 1
    attempted = -1
    for idx in range(start, len(rg.flavors)):
        attempted = idx
        flavor = rg.flavors[idx].name
        problem = next((m for ps in pod_sets if (m := _check_flavor(ctx, cq, ps, flavor, rg))), "")
        if problem:
            reasons.append(problem)
            continue
        choices: dict[str, FlavorChoice] = {}
        mode = (FIT, 0)
        for name in sorted(wanted):
            fr = (flavor, name)
            pmode, borrow, why = _fits_quota(ctx, cq, wl, fr, assigned.get(fr, 0), wanted[name])
            if why:
                reasons.append(why)
            if _preferred(mode, (pmode, borrow), cq):
                mode = (pmode, borrow)
            if mode[0] == NO_FIT:
                break
            choices[name] = FlavorChoice(flavor, assignment_mode(pmode), borrow=borrow)
        if not _try_next(mode, cq):
            best, best_mode = choices, mode
            break
        if _preferred(mode, best_mode, cq):
            best, best_mode = choices, mode
    if best is not None:
        for choice in best.values():
            choice.tried = -1 if attempted == len(rg.flavors) - 1 else attempted
    return best, ([] if best_mode[0] == FIT else reasons)


def _flavor_groups(wl: Workload) -> list[list[int]]:
    """The pod sets' indices by pod-set group (``podSetGroupName``), groups in the order they first
    appear, a pod set of none alone (``orderedgroups`` keyed by the group name or the index)."""
    groups: dict[str, list[int]] = {}
    for i, ps in enumerate(wl.pod_sets):
        group = ps.topology.group if ps.topology is not None else None
        groups.setdefault(group if group is not None else f"#{i}", []).append(i)
    return list(groups.values())


def assign(
    ctx: AssignContext,
    wl: Workload,
    cq: ClusterQueue,
    last: Sequence[Mapping[str, int]] | None,
    generation: int,
) -> Assignment:
    """``FlavorAssigner.Assign`` (no partial admission): flavors by quota, then topology. One piece on
    purpose: it follows upstream's function step by step, so that it reads beside it."""
    out = Assignment(generation=generation)
    for ids in _flavor_groups(wl):
        members = [wl.pod_sets[i] for i in ids]
        per_pod_set = []
        for ps in members:
            requests = ps.total()
            if cq.group_of(PODS) is not None:
                requests[PODS] = ps.count
            per_pod_set.append(requests)
        together: dict[str, int] = {}
        for requests in per_pod_set:
            for name, value in requests.items():
                together[name] = together.get(name, 0) + value
        group: dict[str, FlavorChoice] | None = {}
        reasons: list[str] = []
        for name in sorted(together):
            if together[name] == 0 and cq.group_of(name) is None:
                continue
            if group is not None and name in group:
                continue
            flavors, why = _find_flavor(ctx, cq, wl, ids[0], members, together, name, out.quota, last)
            if not flavors and together:
                group, reasons = None, why
                break
            assert group is not None and flavors is not None
            group.update(flavors)
            reasons.extend(why)
        failed = False
        for ps, requests in zip(members, per_pod_set, strict=True):
            # each member gets the group's status and the same flavor records (Kueue shares the
            # *FlavorAssignment pointers: a mode changed later changes every member's)
            choice = PodSetChoice(ps.name, ps.count, requests, reasons=list(reasons))
            choice.flavors = {r: f for r, f in (group or {}).items() if r in requests}
            out.pod_sets.append(choice)
            out.last_tried.append({r: f.tried for r, f in choice.flavors.items()})
            for r, f in choice.flavors.items():
                out.borrowing = max(out.borrowing, f.borrow)
                fr = (f.flavor, r)
                out.quota[fr] = out.quota.get(fr, 0) + requests[r]
            failed |= bool(requests) and not choice.flavors
        if failed:
            return out
    out.forced_mode = out.mode()  # RepresentativeMode caches its first answer
    if out.forced_mode == MODE_NO_FIT:
        return out
    tas = topology_requests(ctx, wl, cq, out)
    if out.mode() == MODE_FIT:
        result = find_all(ctx.trees, tas)
        failure = next(((n, p) for n, p in result.items() if p.failure), None)
        if failure is not None:
            ps_choice = next(p for p in out.pod_sets if p.name == failure[0])
            ps_choice.reasons.append(failure[1].failure)
            for f in ps_choice.flavors.values():
                f.mode = MODE_PREEMPT
            out.forced_mode = MODE_PREEMPT
        else:
            apply_placements(out, result)
    if out.mode() == MODE_PREEMPT:
        result = find_all(ctx.trees, tas, simulate_empty=True)
        failure = next(((n, p) for n, p in result.items() if p.failure), None)
        if failure is not None:
            ps_choice = next(p for p in out.pod_sets if p.name == failure[0])
            for f in ps_choice.flavors.values():
                f.mode = MODE_NO_FIT
            out.forced_mode = MODE_NO_FIT
        else:
            for requests_of_flavor in tas.values():
                for req in requests_of_flavor:
                    for f in next(p for p in out.pod_sets if p.name == req.pod_set).flavors.values():
                        f.mode = MODE_PREEMPT
            out.forced_mode = MODE_PREEMPT
    return out


def topology_requests(
    ctx: AssignContext, wl: Workload, cq: ClusterQueue, out: Assignment
) -> dict[str, list[TASRequest]]:
    """``Assignment.WorkloadsTopologyRequests``: per TAS flavor, the pod sets still to place."""
    result: dict[str, list[TASRequest]] = {}
    choices = {choice.name: choice for choice in out.pod_sets}
    for ps in wl.pod_sets:
        choice = choices.get(ps.name)  # podSetAssignmentByName
        if (
            choice is None
            or not tas_requested(ps, cq, ctx.trees)
            or choice.error
            or choice.topology is not None
        ):
            continue
        tas_flavors = sorted({f.flavor for f in choice.flavors.values() if f.flavor in ctx.trees})
        if not [n for n in cq.flavor_names() if n in ctx.trees]:
            choice.error = "workload requires Topology, but there is no TAS cache information"
        elif not tas_flavors:
            choice.error = "no TAS flavor assigned"
        elif len(tas_flavors) > 1:
            choice.error = f"more than one TAS flavor assigned: {', '.join(tas_flavors)}"
        else:
            result.setdefault(tas_flavors[0], []).append(
                TASRequest(
                    ps.name,
                    choice.count,
                    ps.requests,
                    ps.topology,
                    tas_implied(ps, cq, ctx.trees),
                    ps.node_selector,
                    ps.tolerations,
                )
            )
    return result


def find_all(
    trees: Mapping[str, FlavorTree],
    requests: Mapping[str, Sequence[TASRequest]],
    *,
    simulate_empty: bool = False,
) -> dict[str, Placement]:
    """``FindTopologyAssignmentsForWorkload``: every flavor's pod sets."""
    out: dict[str, Placement] = {}
    for flavor in sorted(requests):
        out.update(find_assignments(trees[flavor], requests[flavor], simulate_empty=simulate_empty))
    return out


def apply_placements(out: Assignment, result: Mapping[str, Placement]) -> None:
    """``UpdateForTASResult``."""
    for ps in out.pod_sets:
        if ps.name in result:
            ps.topology = result[ps.name].assignment
