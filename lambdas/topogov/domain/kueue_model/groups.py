"""A pod-set group placed as one, as Kueue v0.17.0 places it: ``findTopologyAssignment`` with a leader
(``pkg/cache/scheduler/tas_flavor_snapshot.go``), for two pod sets of one workload that carry the
same ``podSetGroupName`` (``kueue.x-k8s.io/podset-group-name``): a leader of one pod and its workers,
put in one domain of the requested level.

Which is the leader (``findLeaderAndWorkers``)
    The second pod set, unless it has more pods than the first: then the first. Its count is taken
    as 1 whatever it is. A third pod set of the group is ignored.

Phase 1 (``fillInCounts`` with ``leaderRequests``)
    Each leaf counts the workers it holds (``state``, as for one pod set: the same counts and
    exclusions, :class:`topogov.domain.kueue_model.tas.Counts`), whether it holds the leader
    (``leaderState``, 0 or 1) and the workers it holds beside the leader (``stateWithLeader``; as
    ``state`` when it does not hold the leader). A domain's ``state`` is its children's sum, its
    ``leaderState`` their largest, its ``stateWithLeader`` its ``state`` less the smallest
    ``state - stateWithLeader`` of its children (``fillInCountsHelper``): a child that cannot hold the
    leader loses nothing, so a domain with a full node counts the leader as costing nothing.

Phase 2a (``findLevelWithFitDomains``)
    Domains sorted by ``leaderState`` descending, ``stateWithLeader`` descending (ascending for
    LeastFreeCapacity), ``stateWithLeader`` ascending, values (``sortedDomainsWithLeader``). The first
    holds the group when its ``stateWithLeader`` covers the workers and it holds the leader; BestFit
    then takes the first with the smallest sufficient ``stateWithLeader``. Else ``required`` fails,
    ``preferred`` tries the level above; at the top, domains holding the leader are taken until the
    leader is placed, the rest sorted by ``state`` (``sortedDomains``) until the workers are.

Phase 2b (``updateCountsToMinimumGeneric``, ``consumeWithLeadersGeneric``)
    Level by level down to the leaves, the chosen domains' children (``sortedDomains``) are consumed
    while a leader remains with ``stateWithLeader``, then with ``state``, BestFit optimising the last;
    the leaves then give the leader's assignment (those with ``leaderState``) and the workers'.
    Where v0.17.0 errs (phase 1 counting a full node as room for the leader, or the best fit picking
    a host without room for it) this runs out: both pod sets get an assignment of no domain and no
    failure, the scheduler admits the group and the API server rejects it (:mod:`.simulator`).

Domains here are mutable records, changed in place exactly where Kueue changes its ``domain``
structs (the choice of one phase reads what the phase before changed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from topogov.domain.kueue_model.objects import PODS
from topogov.domain.kueue_model.resources import add_into, count_in
from topogov.domain.kueue_model.tas import (
    Counts,
    Placement,
    TASRequest,
    TopologyAssignment,
    counts_for,
    find_assignment,
    level_key,
    not_fit_message,
)
from topogov.domain.kueue_model.topology import FlavorTree


class _Domain:
    """Kueue's ``domain`` for a group, made for the domains phase 2 consumes: its level, index (its
    rank by values) and counts. With slices of one pod, ``sliceState`` is ``state`` and
    ``sliceStateWithLeader`` is ``stateWithLeader`` until phase 2b changes ``state`` alone (``slice``
    keeps Kueue's ``sliceState``)."""

    __slots__ = ("index", "lead", "level", "slice", "state", "with_leader")

    def __init__(self, level: int, index: int, state: int, lead: int, with_leader: int) -> None:
        self.level, self.index, self.state, self.slice = level, index, state, state
        self.lead, self.with_leader = lead, with_leader


class _Leaders:
    """Phase 1's leader columns for one question: per level, each domain's ``leaderState`` and
    ``stateWithLeader`` beside the workers' ``state`` of their :class:`~.tas.Counts` (``counts``).
    Without assumed usage, kept per question in the tree and caught up, as the counts are, with the
    leaves whose usage changed (each changed leaf counted again and its ancestors recomputed from
    their children): the same integers as a recount (tests/unit/test_kueue_model_groups.py)."""

    def __init__(
        self,
        tree: FlavorTree,
        counts: Counts,
        requests: Mapping[str, int],
        lead_requests: Mapping[str, int],
        assumed: Mapping[int, Mapping[str, int]],
        simulate_empty: bool,
    ) -> None:
        self.tree, self.counts = tree, counts
        self.requests, self.lead_requests = requests, lead_requests
        self.simulate_empty = simulate_empty
        self.classes = tree.leaf_empty_class if simulate_empty else tree.leaf_class
        self.per_class: dict[int, tuple[int, int]] = {}
        self.lead: list[list[int]] = []
        self.with_leader: list[list[int]] = []
        self.synced = tree.position
        self._count(assumed)

    def copy(self, tree: FlavorTree) -> None:
        """Not carried into a copy of the tree (:meth:`FlavorTree.copy`): they are kept by their
        counts, which the copy has copies of; the copy counts its own when first asked."""
        return None

    def _leaf(self, i: int, assumed: Mapping[int, Mapping[str, int]]) -> tuple[int, int]:
        """A leaf's (leaderState, stateWithLeader)."""
        state = self.counts.leaf_state[i]
        if i in self.counts.excluded:
            return 0, state
        if i in assumed:
            remaining = self.tree.remaining(i, simulate_empty=self.simulate_empty)
            for name, value in assumed[i].items():
                remaining[name] = remaining.get(name, 0) - value
            return _with_leader(self.requests, self.lead_requests, remaining, state)
        cls = self.classes[i]
        known = self.per_class.get(cls)
        if known is None:
            remaining = dict(self.tree.class_remaining[cls])
            known = self.per_class[cls] = _with_leader(self.requests, self.lead_requests, remaining, state)
        return known

    def _count(self, assumed: Mapping[int, Mapping[str, int]]) -> None:
        tree, depth = self.tree, len(self.tree.levels)
        if not depth:
            return
        leaves = [self._leaf(i, assumed) for i in range(len(tree.leaf_ids))]
        self.lead = [[] for _ in range(depth)]
        self.with_leader = [[] for _ in range(depth)]
        self.lead[-1] = [lead for lead, _ in leaves]
        self.with_leader[-1] = [wl for _, wl in leaves]
        for lvl in range(depth - 2, -1, -1):
            self.lead[lvl] = [0] * len(tree.values[lvl])
            self.with_leader[lvl] = [0] * len(tree.values[lvl])
            for d in range(len(tree.values[lvl])):
                self._domain(lvl, d)
        self.synced = tree.position

    def _domain(self, lvl: int, d: int) -> None:
        """A domain's columns from its children's (``fillInCountsHelper``)."""
        states, below = self.counts.states, lvl + 1
        kids = self.tree.children[lvl][d]
        child_state, child_lead, child_wl = states[below], self.lead[below], self.with_leader[below]
        self.lead[lvl][d] = max(child_lead[c] for c in kids)
        loss = min(child_state[c] - child_wl[c] for c in kids)
        self.with_leader[lvl][d] = states[lvl][d] - loss

    def catch_up(self) -> None:
        """Bring kept columns (no assumed usage) to the tree's usage and their counts' states."""
        tree = self.tree
        end = tree.position
        if self.synced == end:
            return
        start = self.synced - tree.changed_base
        if start < 0 or end - self.synced > len(tree.leaf_ids) // 4:
            self._count({})
            return
        self.synced = end
        bottom = len(tree.levels) - 1
        changed = set(tree.changed[start:])
        for i in changed:
            self.lead[bottom][i], self.with_leader[bottom][i] = self._leaf(i, {})
        for lvl in range(bottom - 1, -1, -1):
            changed = {tree.parent[lvl + 1][c] for c in changed}
            for d in changed:
                self._domain(lvl, d)


def _leaders(
    tree: FlavorTree,
    counts: Counts,
    requests: Mapping[str, int],
    lead_requests: Mapping[str, int],
    assumed: Mapping[int, Mapping[str, int]],
    simulate_empty: bool,
) -> _Leaders:
    """:class:`_Leaders`, kept per question beside its counts when nothing is assumed."""
    if assumed:
        return _Leaders(tree, counts, requests, lead_requests, assumed, simulate_empty)
    key = ("leaders", id(counts), tuple(sorted(lead_requests.items())))
    kept: _Leaders | None = tree.memo.get(key)
    if kept is None or kept.counts is not counts:
        if len(tree.memo) > 256:
            tree.memo.clear()
        kept = tree.memo[key] = _Leaders(tree, counts, requests, lead_requests, assumed, simulate_empty)
    elif not simulate_empty:
        kept.catch_up()
    return kept


def leader_and_workers(requests: Sequence[TASRequest]) -> tuple[TASRequest | None, TASRequest]:
    """``findLeaderAndWorkers``: (leader, workers) of a group's requests."""
    workers = requests[0]
    if len(requests) < 2:
        return None, workers
    leader = requests[1]
    if leader.count > workers.count:
        leader, workers = workers, leader
    return leader, workers


def find_group_assignment(
    tree: FlavorTree,
    workers: TASRequest,
    leader: TASRequest,
    assumed: Mapping[int, Mapping[str, int]] | None = None,
    *,
    simulate_empty: bool = False,
) -> dict[str, Placement]:
    """``findTopologyAssignment(workers, leader, ...)``: each pod set's placement (both fail alike)."""

    def failed(reason: str) -> dict[str, Placement]:
        return {workers.pod_set: Placement(None, reason), leader.pod_set: Placement(None, reason)}

    key = level_key(tree, workers)
    if key is None:
        return failed("topology level not specified")
    if key not in tree.levels:
        return failed(f"no requested topology level: {key}")
    level = tree.levels.index(key)
    required = workers.topology is not None and workers.topology.required is not None
    lfc = (workers.topology is not None and workers.topology.unconstrained) or workers.implied
    requests = {**workers.requests, PODS: workers.requests.get(PODS, 0) + 1}
    lead_requests = {**leader.requests, PODS: leader.requests.get(PODS, 0) + 1}
    tolerations = (*workers.tolerations, *tree.tolerations)
    counts = counts_for(tree, requests, assumed or {}, simulate_empty, tolerations, workers.node_selector)
    cols = _leaders(tree, counts, requests, lead_requests, assumed or {}, simulate_empty)
    count = workers.count
    fit_level, chosen, reason = _find_level(tree, cols, level, required, count, lfc)
    if reason:
        return failed(reason)
    best_fit = not lfc
    made: dict[int, _Domain] = {}  # one record per domain, as Kueue has one struct per domain
    chosen_domains = [made.setdefault(d, _made(cols, fit_level, d)) for d in chosen]
    current = _update(chosen_domains, count, 1, best_fit)
    for lvl in range(fit_level, len(tree.levels) - 1):
        made = {}
        lower = [
            made.setdefault(c, _made(cols, lvl + 1, c)) for d in current for c in tree.children[lvl][d.index]
        ]
        current = _update(_sorted(lower, best_fit), count, 1, best_fit)
    lead_domains = [(d.index, d.lead) for d in current if d.lead > 0]
    worker_domains = [(d.index, d.state) for d in current if d.state > 0]
    return {
        leader.pod_set: Placement(_assignment(tree, lead_domains)),
        workers.pod_set: Placement(_assignment(tree, worker_domains)),
    }


def _made(cols: _Leaders, lvl: int, d: int) -> _Domain:
    return _Domain(lvl, d, cols.counts.states[lvl][d], cols.lead[lvl][d], cols.with_leader[lvl][d])


def _with_leader(
    requests: Mapping[str, int], lead_requests: Mapping[str, int], remaining: dict[str, int], state: int
) -> tuple[int, int]:
    """A leaf's (leaderState, stateWithLeader)."""
    if count_in(lead_requests, remaining)[0] <= 0:
        return 0, state
    for name, value in lead_requests.items():  # Go's Requests.Sub adds missing keys, negative
        remaining[name] = remaining.get(name, 0) - value
    return 1, count_in(requests, remaining)[0]


def _best_fit(domains: Sequence[_Domain], needed: int, with_leader: bool) -> _Domain:
    """``findBestFitDomainForSlices``: from the first, the first with the smallest
    ``sliceStateWithLeader`` (with a leader to place) or ``sliceState`` ≥ needed."""
    best = domains[0]
    best_state = best.with_leader if with_leader else best.slice
    for d in domains:
        s = d.with_leader if with_leader else d.slice
        if needed <= s < best_state:
            best, best_state = d, s
    return best


def _sorted(domains: Sequence[_Domain], best_fit: bool) -> list[_Domain]:
    """``sortedDomains``: sliceState descending (ascending for LeastFreeCapacity), state ascending,
    values."""
    sign = -1 if best_fit else 1
    return sorted(domains, key=lambda d: (sign * d.slice, d.state, d.index))


def _find_level(
    tree: FlavorTree, cols: _Leaders, level: int, required: bool, count: int, lfc: bool
) -> tuple[int, list[int], str]:
    """``findLevelWithFitDomains`` with a leader of one pod: the level and its chosen domains, or a
    failure reason. The first of ``sortedDomainsWithLeader`` (leaderState descending,
    stateWithLeader descending, then ascending, values) and the best fit from it (the first in that
    order of the smallest sufficient stateWithLeader) are found by one scan each; the full sort is
    made only where several domains are taken (at the top level, preferred) or for
    LeastFreeCapacity."""
    states = cols.counts.states[level]
    n = len(states)
    if n == 0:
        return 0, [], f"no topology domains at level: {tree.levels[level]}"
    counts = cols.counts
    leads, wls = cols.lead[level], cols.with_leader[level]
    if lfc:
        order = sorted(range(n), key=lambda d: (-leads[d], wls[d], wls[d], d))
        for d in order:
            if states[d] >= count:
                return level, [d], ""
        if required:
            return 0, [], not_fit_message(tree, counts, states[order[-1]], count)
        return _several(tree, cols, level, order, count, lfc)
    top = min(range(n), key=lambda d: (-leads[d], -wls[d], d))
    if wls[top] >= count and leads[top] >= 1:
        # findBestFitDomainBy: the first (in the order above) of the smallest stateWithLeader >= count
        top = min((d for d in range(n) if wls[d] >= count), key=lambda d: (wls[d], -leads[d], d))
    if wls[top] >= count and leads[top] >= 1:
        return level, [top], ""
    if required:
        return 0, [], not_fit_message(tree, counts, states[top], count)
    if level > 0:
        return _find_level(tree, cols, level - 1, required, count, lfc)
    order = sorted(range(n), key=lambda d: (-leads[d], -wls[d], wls[d], d))
    return _several(tree, cols, level, order, count, lfc)


def _several(
    tree: FlavorTree, cols: _Leaders, level: int, order: list[int], count: int, lfc: bool
) -> tuple[int, list[int], str]:
    """The top level's domains taken in order: those holding the leader until it is placed, then the
    rest by state until the workers are (``findLevelWithFitDomains``'s last part)."""
    counts = cols.counts
    ordered = [_made(cols, level, d) for d in order]
    results: list[_Domain] = []
    remaining, leaders = count, 1
    idx = 0
    while leaders > 0 and idx < len(ordered) and ordered[idx].lead > 0:
        d = ordered[idx]
        if not lfc and d.with_leader >= remaining:
            d = _best_fit(ordered[idx:], remaining, True)
        results.append(d)
        leaders -= d.lead
        remaining -= d.with_leader
        idx += 1
    if leaders > 0:
        return 0, [], not_fit_message(tree, counts, 0, count)
    rest = _sorted(ordered[idx:], not lfc)
    for i in range(len(rest)):
        if remaining <= 0:
            break
        d = rest[i]
        if not lfc and d.slice >= remaining:
            d = _best_fit(rest[i:], remaining, False)
        results.append(d)
        remaining -= d.slice
    if remaining > 0:
        return 0, [], not_fit_message(tree, counts, count - remaining, count)
    return level, [d.index for d in results], ""


def _update(domains: Sequence[_Domain], count: int, leaders: int, best_fit: bool) -> list[_Domain]:
    """``updateCountsToMinimumGeneric`` with slices of one pod (``slices`` true: Kueue's phase 2b
    passes it so, and a slice of one pod reads ``sliceState`` as ``state``)."""
    result: list[_Domain] = []
    remaining = count
    for i, dom in enumerate(domains):
        if leaders > 0:
            d = dom
            if best_fit and d.with_leader >= remaining and d.lead >= leaders:
                d = _best_fit(domains[i:], remaining, True)
            if d.with_leader >= remaining and d.lead >= leaders:
                d.lead, d.state, d.slice = leaders, remaining, remaining
                result.append(d)
                return result
            d.with_leader = min(d.with_leader, remaining)
            d.lead = min(d.lead, leaders)
            d.state = d.with_leader
            leaders -= d.lead
            remaining -= d.with_leader
            result.append(d)
            continue
        if best_fit and dom.slice >= remaining:
            dom = _best_fit(domains[i:], remaining, False)
        dom.lead = 0
        if dom.slice >= remaining:
            dom.state = dom.slice = remaining
            result.append(dom)
            return result
        dom.state = dom.slice
        remaining -= dom.slice
        result.append(dom)
    return []  # Kueue logs "unexpected remainingCount" and places nothing


def _assignment(tree: FlavorTree, domains: list[tuple[int, int]]) -> TopologyAssignment:
    """``buildAssignment`` of leaves: by values, hostnames only when the lowest level is the host."""
    start = len(tree.levels) - 1 if tree.lowest_is_host else 0
    values = tree.values[-1]
    return TopologyAssignment(
        tuple(tree.levels[start:]), tuple((values[d][start:], n) for d, n in sorted(domains) if n)
    )


def find_assignments(
    tree: FlavorTree, requests: Sequence[TASRequest], *, simulate_empty: bool = False
) -> dict[str, Placement]:
    """``FindTopologyAssignmentsForFlavor``: pod sets in order, those of one pod-set group together
    (where the group first appears: :mod:`.groups`), each seeing the ones before it as assumed usage
    (single-pod requests times count, without ``pods``: ``addAssumedUsage``); stops at the first
    failure."""
    out: dict[str, Placement] = {}
    assumed: dict[int, dict[str, int]] = {}
    groups: dict[str, list[TASRequest]] = {}
    for i, request in enumerate(requests):
        group = request.topology.group if request.topology is not None else None
        groups.setdefault(group if group is not None else f"#{i}", []).append(request)
    for members in groups.values():
        leader, workers = leader_and_workers(members)
        if leader is None:
            placed = {workers.pod_set: find_assignment(tree, workers, assumed, simulate_empty=simulate_empty)}
        else:
            placed = find_group_assignment(tree, workers, leader, assumed, simulate_empty=simulate_empty)
        out.update(placed)
        if any(p.failure or p.assignment is None for p in placed.values()):
            return out
        for request in members:
            assignment = placed[request.pod_set].assignment if request.pod_set in placed else None
            for values, n in assignment.domains if assignment else ():
                leaf = tree.leaf_of(values)
                if leaf is not None:
                    add_into(assumed.setdefault(leaf, {}), request.requests, n)
    return out
