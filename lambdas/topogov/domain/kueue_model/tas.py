"""Topology-aware placement of pod sets on one TAS flavor, as Kueue v0.17.0 computes it
(``pkg/cache/scheduler/tas_flavor_snapshot.go``, ``FindTopologyAssignmentsForFlavor`` and
``findTopologyAssignment``), with the ``TASProfileMixed`` matrix (on by default since v0.15,
``pkg/features/kube_features.go``): **BestFit** for ``required`` and ``preferred``,
**LeastFreeCapacity** for ``unconstrained`` and implied requests (``useLeastFreeCapacityAlgorithm``).

Phase 1, counts (``fillInCounts``, ``fillInCountsHelper``)
    Each leaf holds ``count_in(requests + 1 pod, free - TAS usage - assumed usage)`` pods; with the
    hostname lowest a leaf with an untolerated ``NoSchedule``/``NoExecute`` taint (pod set's and
    flavor's tolerations) or not matching the pod set's ``nodeSelector`` holds 0 and is counted as
    excluded. A domain holds the sum of its children.

Phase 2a, the level (``findLevelWithFitDomains``)
    Domains of the requested level sorted by pods held (BestFit: descending; LeastFreeCapacity:
    ascending), ties by level values. BestFit: if the first holds the pod set, the tightest domain
    that holds it (``findBestFitDomain``: smallest count ≥ needed, first in sorted order). Else
    ``required`` fails, ``preferred`` tries the level above, and at the top level domains are taken in
    order until covered, the last one swapped for the tightest that covers the rest. LeastFreeCapacity:
    the first domain that holds it, else domains in ascending order until covered.

Phase 2b, descending (``updateCountsToMinimumGeneric``)
    The children of every chosen domain are pooled, sorted the same way, and taken greedily (BestFit
    optimising the last), level by level down to the leaves; the assignment lists the leaves
    (hostnames only when the hostname is the lowest level) in level-value order (``buildAssignment``).

Failure messages are Kueue's words (``notFitMessage``, ``ExclusionStats.formatReasons``), e.g.
``topology "default" allows to fit only 3 out of 4 pod(s)`` and ``... doesn't allow to fit any of 1
pod(s). Total nodes: 4; excluded: resource "cpu": 4``. A leader and its workers placed as one
(pod-set groups) are :mod:`.groups`'s, which also orders a workload's pod sets
(``find_assignments``).

Pod-set slices (``podSetSliceRequiredTopology``, ``podSetSliceSize``: :func:`find_slice_assignment`)
    Phase 1's counts, and per domain of the slice level ``pods // size`` slices, summed above it.
    Phase 2a is the same search counted in slices, domains sorted by slices held, then pods held
    ascending, then values; messages count slices (``allows to fit only 1 out of 2 slice(s)``).
    Phase 2b pools children by slices down to the slice level; below it each domain's pods go to its
    own children, the emptiest first. A request for slices alone is LeastFreeCapacity from the top
    level. Balanced placement, multi-layer slices (both behind gates off by default), node affinity
    and node replacement are out of scope (see the package docstring).
"""

from __future__ import annotations

import copy
import heapq
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from topogov.domain.kueue_model.objects import PODS, Toleration, TopologyRequest
from topogov.domain.kueue_model.resources import count_in
from topogov.domain.kueue_model.topology import DomainUsage, FlavorTree


@dataclass(frozen=True, slots=True)
class TASRequest:
    """``TASPodSetRequests``: a pod set asking for placement on one flavor. ``implied``: no topology
    annotation, in a ClusterQueue whose flavors are all TAS (``isTASImplied``)."""

    pod_set: str
    count: int
    requests: Mapping[str, int]
    topology: TopologyRequest | None = None
    implied: bool = False
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()


@dataclass(frozen=True, slots=True)
class TopologyAssignment:
    """``utiltas.TopologyAssignment``: ``levels`` and per domain (level values, pod count)."""

    levels: tuple[str, ...]
    domains: tuple[tuple[tuple[str, ...], int], ...]

    @property
    def pods(self) -> int:
        return sum(c for _, c in self.domains)

    def ranks(self) -> tuple[str, ...]:
        """The lowest-level value of each pod by rank, as the ungater assigns pods with a completion
        index (``topology_ungater.go``, ``rankToDomainID``): domains in order, ``count`` each."""
        return tuple(values[-1] for values, count in self.domains for _ in range(count))


@dataclass(frozen=True, slots=True)
class Placement:
    """``tasPodSetAssignmentResult``: an assignment, or a failure reason (Kueue's words)."""

    assignment: TopologyAssignment | None
    failure: str = ""


class Counts:
    """Phase 1 for one pod set: per-level pod counts, how many domains of each level hold each count
    (``hists``: the level search reads the largest and the smallest sufficient count there instead of
    scanning every domain), and what the exclusion message needs.

    Without assumed usage, one is kept per question in the tree and *caught up* with the leaves whose
    usage changed since it was counted (:meth:`catch_up`: each changed leaf's new count and the
    difference added to its ancestors), the same integer sums as a recount
    (tests/unit/test_kueue_model_counts.py compares them after random admissions and finishes)."""

    def __init__(
        self,
        tree: FlavorTree,
        requests: Mapping[str, int],
        assumed: Mapping[int, Mapping[str, int]],
        simulate_empty: bool,
        tolerations: Sequence[Toleration],
        selector: Mapping[str, str],
    ) -> None:
        self.tree = tree
        self.requests = requests
        # the tree's own list, changed in place by change_usage (read at the counts' position)
        self.classes = tree.leaf_empty_class if simulate_empty else tree.leaf_class
        self.per_class: dict[int, tuple[int, str]] = {}
        self.leaf_limit: dict[int, str] = {}
        self.excluded: dict[int, str] = {}  # leaf -> "taint ..." | "nodeSelector"
        if tree.lowest_is_host:
            for i in tree.tainted:
                for taint in tree.leaf_nodes[i].taints:
                    if taint.effect in ("NoSchedule", "NoExecute") and not any(
                        t.tolerates(taint) for t in tolerations
                    ):
                        self.excluded[i] = f"taint:{taint}"
                        break
            if selector:
                for i in tree.unselected(selector):
                    if i not in self.excluded:
                        self.excluded[i] = "nodeSelector"
        self.states: list[list[int]] = []
        self.hists: list[dict[int, int]] = []
        # per level, count -> a heap of the domains that held it (made on first asking, each change
        # pushed; an entry whose domain now holds another count is dropped when met)
        self.holding: list[dict[int, list[int]]] = []
        self.leaf_state: list[int] = []
        self.synced = 0
        self._count(assumed, simulate_empty)

    def copy(self, tree: FlavorTree) -> Counts:
        """These counts for a copy of their tree (:meth:`FlavorTree.copy`)."""
        other = copy.copy(self)
        other.tree = tree
        other.classes = (
            tree.leaf_empty_class if self.classes is self.tree.leaf_empty_class else tree.leaf_class
        )
        other.per_class = dict(self.per_class)
        other.states = [list(level) for level in self.states]
        other.hists = [dict(h) for h in self.hists]
        other.holding = [{c: list(h) for c, h in level.items()} for level in self.holding]
        other.leaf_state = other.states[-1] if other.states else list(self.leaf_state)
        return other

    def _class_count(self, cls: int) -> int:
        counted = self.per_class.get(cls)
        if counted is None:
            counted = self.per_class[cls] = count_in(self.requests, self.tree.class_remaining[cls])
        return counted[0]

    def _count(self, assumed: Mapping[int, Mapping[str, int]], simulate_empty: bool) -> None:
        """Every leaf counted and summed up the levels."""
        tree = self.tree
        for c in set(self.classes):
            self._class_count(c)
        state = [self.per_class[c][0] for c in self.classes]
        for i, extra in assumed.items():
            remaining = tree.remaining(i, simulate_empty=simulate_empty)
            for name, value in extra.items():
                remaining[name] = remaining.get(name, 0) - value
            state[i], self.leaf_limit[i] = count_in(self.requests, remaining)
        for i in self.excluded:
            state[i] = 0
        self.leaf_state = state
        self.states = [[] for _ in tree.levels]
        if tree.levels:
            self.states[-1] = state
            for lvl in range(len(tree.levels) - 1, 0, -1):
                acc = [0] * len(tree.values[lvl - 1])
                for p, s in zip(tree.parent[lvl], self.states[lvl], strict=True):
                    acc[p] += s
                self.states[lvl - 1] = acc
        self.hists = [dict(Counter(s)) for s in self.states]
        self.holding = [{} for _ in self.states]
        self.synced = tree.position

    def first_holding(self, level: int, count: int) -> int:
        """The first domain (by values) of ``level`` holding exactly ``count`` (one must), as
        ``states[level].index(count)`` finds it, without scanning the level each time."""
        state = self.states[level]
        heap = self.holding[level].get(count)
        if heap is None:
            heap = self.holding[level][count] = [d for d, held in enumerate(state) if held == count]
        while state[heap[0]] != count:
            heapq.heappop(heap)
        return heap[0]

    def catch_up(self) -> None:
        """Bring live counts (no assumed usage, not as if empty) to the tree's current usage."""
        tree = self.tree
        end = tree.position
        if self.synced == end:
            return
        start = self.synced - tree.changed_base
        if start < 0 or end - self.synced > len(self.leaf_state) // 4:
            self._count({}, False)
            return
        self.synced = end
        states, hists, holding, parent = self.states, self.hists, self.holding, tree.parent
        bottom = len(states) - 1
        for i in set(tree.changed[start:]):
            new = 0 if i in self.excluded else self._class_count(self.classes[i])
            delta = new - states[bottom][i]
            if not delta:
                continue
            d = i
            for lvl in range(bottom, -1, -1):
                level_state, hist = states[lvl], hists[lvl]
                old = level_state[d]
                level_state[d] = old + delta
                if hist[old] == 1:
                    del hist[old]
                else:
                    hist[old] -= 1
                hist[old + delta] = hist.get(old + delta, 0) + 1
                heap = holding[lvl].get(old + delta)
                if heap is not None:
                    heapq.heappush(heap, d)
                d = parent[lvl][d]

    def exclusions(self) -> str:
        """``". Total nodes: N; excluded: ..."`` or ``""`` (``ExclusionStats``)."""
        selector = sum(1 for r in self.excluded.values() if r == "nodeSelector")
        taints: dict[str, int] = {}
        for reason in self.excluded.values():
            if reason.startswith("taint:"):
                taints[reason[6:]] = taints.get(reason[6:], 0) + 1
        resources: dict[str, int] = {}
        for i, s in enumerate(self.leaf_state):
            if i in self.excluded or s != 0:
                continue
            limit = self.leaf_limit[i] if i in self.leaf_limit else self.per_class[self.classes[i]][1]
            if limit:
                resources[limit] = resources.get(limit, 0) + 1
        reasons = [f"nodeSelector: {selector}"] if selector else []
        reasons += [f'taint "{t}": {n}' for t, n in sorted(taints.items())]
        reasons += [f'resource "{r}": {n}' for r, n in sorted(resources.items())]
        if not reasons:
            return ""
        return f". Total nodes: {len(self.leaf_state)}; excluded: {', '.join(sorted(reasons))}"


def counts_for(
    tree: FlavorTree,
    requests: Mapping[str, int],
    assumed: Mapping[int, Mapping[str, int]],
    simulate_empty: bool,
    tolerations: Sequence[Toleration],
    selector: Mapping[str, str],
) -> Counts:
    """:class:`Counts`, kept per question when nothing is assumed (the heads of a cycle and their
    retries ask it again and again; a placement only reads it): as if empty once, else caught up
    with the usage's changes."""
    if not simulate_empty:
        tree.reads += 1
    if assumed:
        return Counts(tree, requests, assumed, simulate_empty, tolerations, selector)
    key = (
        simulate_empty,
        tuple(sorted(requests.items())),
        tuple(tolerations),
        tuple(sorted(selector.items())),
    )
    counts: Counts | None = tree.memo.get(key)
    if counts is None:
        if len(tree.memo) > 256:
            tree.memo.clear()
        counts = tree.memo[key] = Counts(tree, requests, assumed, simulate_empty, tolerations, selector)
    elif not simulate_empty:
        counts.catch_up()
    return counts


def _best_fit(domains: Sequence[int], state: Sequence[int], needed: int) -> int:
    """``findBestFitDomainBy``: from the first domain, the first with the smallest count ≥ needed."""
    best = domains[0]
    best_state = state[best]
    for d in domains:
        s = state[d]
        if needed <= s < best_state:
            best, best_state = d, s
    return best


def _take(domains: Sequence[int], count: int, state: Sequence[int], best_fit: bool) -> list[tuple[int, int]]:
    """``updateCountsToMinimumGeneric`` without slices or leaders: (domain, pods) taken in order, the
    last optimised by BestFit. Kueue logs an error and returns nothing if the domains fall short."""
    remaining, out = count, []
    for i, d in enumerate(domains):
        if best_fit and state[d] >= remaining:
            d = _best_fit(domains[i:], state, remaining)
        if state[d] >= remaining:
            out.append((d, remaining))
            return out
        remaining -= state[d]
        out.append((d, state[d]))
    return []


def _sorted(domains: Iterable[int], state: Sequence[int], best_fit: bool) -> list[int]:
    """``sortedDomains`` without slices: pods held descending (BestFit) or ascending, then values
    (a domain's index is its rank by values: sorting the indices first, then stably by count)."""
    return sorted(sorted(domains), key=state.__getitem__, reverse=best_fit)


def _smallest_holding(hist: Mapping[int, int], count: int) -> int | None:
    """The smallest count a domain of the level holds that is at least ``count``."""
    best = None
    for held in hist:
        if held >= count and (best is None or held < best):
            best = held
    return best


def _ascending_nonzero(state: list[int], hist: Mapping[int, int]) -> Iterator[int]:
    """The domains holding a non-zero count, by count then values (``sortedDomains`` ascending)."""
    for held in sorted(hist):
        if held == 0:
            continue
        d = -1
        for _ in range(hist[held]):
            d = state.index(held, d + 1)
            yield d


def not_fit_message(tree: FlavorTree, counts: Counts, fit: int, total: int, slice_size: int = 1) -> str:
    """``notFitMessage``: ``fit`` out of ``total`` pods, or slices when a slice holds several pods."""
    name = tree.topology_name
    unit = "pod" if slice_size == 1 else "slice"
    if fit == 0:
        head = f'topology "{name}" doesn\'t allow to fit any of {total} {unit}(s)'
    else:
        head = f'topology "{name}" allows to fit only {fit} out of {total} {unit}(s)'
    return head + counts.exclusions()


def _find_level(
    tree: FlavorTree, counts: Counts, level: int, required: bool, count: int, lfc: bool
) -> tuple[int, list[int], str]:
    """``findLevelWithFitDomains``: the level and its chosen domains, or a failure reason. One domain
    that holds the pods is the first (by values) of the smallest sufficient count, for BestFit
    (``findBestFitDomain`` from the largest) and LeastFreeCapacity alike."""
    state = counts.states[level]
    n = len(state)
    if n == 0:
        return 0, [], f"no topology domains at level: {tree.levels[level]}"
    hist = counts.hists[level]
    order: Iterable[int]
    if lfc:
        fit = _smallest_holding(hist, count)
        if fit is not None:
            return level, [counts.first_holding(level, fit)], ""
        order = _ascending_nonzero(state, hist)
    else:
        top = max(hist)
        if top >= count:
            fit = _smallest_holding(hist, count)
            assert fit is not None
            return level, [counts.first_holding(level, fit)], ""
        if required:
            return 0, [], not_fit_message(tree, counts, top, count)
        if level > 0:
            return _find_level(tree, counts, level - 1, required, count, lfc)
        order = _sorted(range(n), state, True)
    results, remaining = [], count
    ordered = order if isinstance(order, list) else []  # BestFit's, for its last swap
    for idx, d in enumerate(order):
        if remaining <= 0:
            break
        if not lfc and state[d] >= remaining:
            d = _best_fit(ordered[idx:], state, remaining)
        results.append(d)
        remaining -= state[d]
    if remaining > 0:
        return 0, [], not_fit_message(tree, counts, count - remaining, count)
    return level, results, ""


def level_key(tree: FlavorTree, request: TASRequest) -> str | None:
    """``levelKeyWithImpliedFallback``: required, preferred, the lowest level for unconstrained and
    implied requests."""
    tr = request.topology
    if tr is not None and tr.required is not None:
        return tr.required
    if tr is not None and tr.preferred is not None:
        return tr.preferred
    if (tr is not None and tr.unconstrained) or request.implied:
        return tree.levels[-1] if tree.levels else None
    return None


def find_assignment(
    tree: FlavorTree,
    request: TASRequest,
    assumed: Mapping[int, Mapping[str, int]] | None = None,
    *,
    simulate_empty: bool = False,
) -> Placement:
    """``findTopologyAssignment`` for one pod set (no leader); one asking for slices is placed by
    :func:`find_slice_assignment`."""
    if request.topology is not None and request.topology.slice_level is not None:
        return find_slice_assignment(tree, request, assumed, simulate_empty=simulate_empty)
    key = level_key(tree, request)
    if key is None:
        return Placement(None, "topology level not specified")
    if key not in tree.levels:
        return Placement(None, f"no requested topology level: {key}")
    level = tree.levels.index(key)
    required = request.topology is not None and request.topology.required is not None
    lfc = (request.topology is not None and request.topology.unconstrained) or request.implied
    requests = {**request.requests, PODS: request.requests.get(PODS, 0) + 1}
    tolerations = (*request.tolerations, *tree.tolerations)
    counts = counts_for(tree, requests, assumed or {}, simulate_empty, tolerations, request.node_selector)
    fit_level, domains, reason = _find_level(tree, counts, level, required, request.count, lfc)
    if reason:
        return Placement(None, reason)
    best_fit = not lfc
    current = _take(domains, request.count, counts.states[fit_level], best_fit)
    for lvl in range(fit_level, len(tree.levels) - 1):
        state = counts.states[lvl + 1]
        pooled = (c for d, _ in current for c in tree.children[lvl][d])
        current = _take(_sorted(pooled, state, best_fit), request.count, state, best_fit)
    leaves = sorted((d, n) for d, n in current if n != 0)
    start = len(tree.levels) - 1 if tree.lowest_is_host else 0
    values = tree.values[-1]
    return Placement(
        TopologyAssignment(tuple(tree.levels[start:]), tuple((values[d][start:], n) for d, n in leaves))
    )


# -- pod-set slices ------------------------------------------------------------------------------
def slice_states(tree: FlavorTree, counts: Counts, slice_level: int, slice_size: int) -> list[list[int]]:
    """``fillInCountsHelper``'s ``sliceState`` of each level down to the slice level: a domain of the
    slice level holds ``state // slice_size`` slices, one above it the sum of its children's (below
    the slice level Kueue leaves 0, and nothing here reads it: an empty list per level)."""
    states = counts.states
    out: list[list[int]] = [[] for _ in states]
    out[slice_level] = [held // slice_size for held in states[slice_level]]
    for lvl in range(slice_level, 0, -1):
        acc = [0] * len(states[lvl - 1])
        for p, held in zip(tree.parent[lvl], out[lvl], strict=True):
            acc[p] += held
        out[lvl - 1] = acc
    return out


def _slice_order(domains: Iterable[int], held: Sequence[int], state: Sequence[int], lfc: bool) -> list[int]:
    """``sortedDomains`` (and ``sortedDomainsWithLeader`` without a leader): slices held descending
    (ascending for LeastFreeCapacity), then pods held ascending, then values."""
    sign = 1 if lfc else -1
    return sorted(domains, key=lambda d: (sign * held[d], state[d], d))


def _find_slice_level(
    tree: FlavorTree,
    counts: Counts,
    slices: list[list[int]],
    level: int,
    required: bool,
    count: int,
    slice_size: int,
    lfc: bool,
) -> tuple[int, list[int], str]:
    """``findLevelWithFitDomains`` with slices and no leader: the level and its chosen domains, which
    hold ``count // slice_size`` slices between them, or a failure reason counted in slices."""
    state, held = counts.states[level], slices[level]
    if not state:
        return 0, [], f"no topology domains at level: {tree.levels[level]}"
    order = _slice_order(range(len(state)), held, state, lfc)
    need = count // slice_size
    top = order[0]
    if not lfc and held[top] >= need:
        top = _best_fit(order, held, need)
    if lfc:
        fit = next((d for d in order if held[d] >= need), None)
        if fit is not None:
            return level, [fit], ""
        if required:  # Kueue reports the last domain's pods here
            return 0, [], not_fit_message(tree, counts, state[order[-1]], need, slice_size)
    if held[top] >= need:
        return level, [top], ""
    if required:
        return 0, [], not_fit_message(tree, counts, held[top], need, slice_size)
    if level > 0 and not lfc:
        return _find_slice_level(tree, counts, slices, level - 1, required, count, slice_size, lfc)
    results, remaining = [], need
    for idx, d in enumerate(order):
        if remaining <= 0:
            break
        if not lfc and held[d] >= remaining:
            d = _best_fit(order[idx:], held, remaining)
        results.append(d)
        remaining -= held[d]
    if remaining > 0:
        return 0, [], not_fit_message(tree, counts, need - remaining, need, slice_size)
    return level, results, ""


def _slice_request_checks(tree: FlavorTree, topology: TopologyRequest) -> tuple[int, int, str]:
    """``findTopologyAssignment``'s checks before counting, in its order: (the requested level, the
    slice level, "") or a failure reason. Without required or preferred the top level is requested
    (``levelKey``, ``isSliceTopologyOnlyRequest``)."""
    if topology.slice_size is None:
        return 0, 0, "slice topology requested, but slice size not provided"
    key = topology.required if topology.required is not None else topology.preferred
    if key is None:
        key = tree.levels[0]
    if key not in tree.levels:
        return 0, 0, f"no requested topology level: {key}"
    if topology.slice_level not in tree.levels:
        return 0, 0, f"no requested topology level for slices: {topology.slice_level}"
    level, slice_level = tree.levels.index(key), tree.levels.index(topology.slice_level)
    if level > slice_level:
        return 0, 0, f"podset slice topology {topology.slice_level} is above the podset topology {key}"
    return level, slice_level, ""


def find_slice_assignment(
    tree: FlavorTree,
    request: TASRequest,
    assumed: Mapping[int, Mapping[str, int]] | None = None,
    *,
    simulate_empty: bool = False,
) -> Placement:
    """``findTopologyAssignment`` for a pod set asking for slices (``podSetSliceRequiredTopology``,
    ``podSetSliceSize``), without a leader. Counts are the pods' (:func:`counts_for`, kept per
    question), slices are counted from them (:func:`slice_states`). Down to the slice level the chosen
    domains' children are pooled and taken by slices (``updateCountsToMinimumGeneric`` with
    ``slices``); from it on each domain's pods go to its own children, taken by pods in ascending
    order of what they hold (their ``sliceState`` is 0 there, so ``sortedDomains`` sorts by ``state``).
    A request only for slices is LeastFreeCapacity from the top level (``isUnconstrained``)."""
    topology = request.topology
    assert topology is not None and topology.slice_level is not None
    if not tree.levels:
        return Placement(None, "topology level not specified")
    level, slice_level, reason = _slice_request_checks(tree, topology)
    if reason:
        return Placement(None, reason)
    size = topology.slice_size
    assert size is not None  # checked above
    required = topology.required is not None
    lfc = (
        topology.unconstrained
        or request.implied
        or (topology.required is None and topology.preferred is None)
    )
    requests = {**request.requests, PODS: request.requests.get(PODS, 0) + 1}
    tolerations = (*request.tolerations, *tree.tolerations)
    counts = counts_for(tree, requests, assumed or {}, simulate_empty, tolerations, request.node_selector)
    slices = slice_states(tree, counts, slice_level, size)
    fit_level, domains, reason = _find_slice_level(
        tree, counts, slices, level, required, request.count, size, lfc
    )
    if reason:
        return Placement(None, reason)
    best_fit, need = not lfc, request.count // size
    current = [(d, n * size) for d, n in _take(domains, need, slices[fit_level], best_fit)]
    for lvl in range(fit_level, slice_level):
        held, state = slices[lvl + 1], counts.states[lvl + 1]
        pooled = (c for d, _ in current for c in tree.children[lvl][d])
        order = _slice_order(pooled, held, state, not best_fit)
        current = [(c, n * size) for c, n in _take(order, need, held, best_fit)]
    for lvl in range(slice_level, len(tree.levels) - 1):
        state = counts.states[lvl + 1]
        current = [
            taken
            for d, pods in current
            for taken in _take(
                sorted(tree.children[lvl][d], key=lambda c: (state[c], c)), pods, state, best_fit
            )
        ]
    return Placement(leaf_assignment(tree, current))


def leaf_assignment(tree: FlavorTree, leaves: Iterable[tuple[int, int]]) -> TopologyAssignment:
    """``buildAssignment`` of leaves (index, pods): by values, those with pods, hostnames only when
    the lowest level is the host."""
    start = len(tree.levels) - 1 if tree.lowest_is_host else 0
    values = tree.values[-1]
    return TopologyAssignment(
        tuple(tree.levels[start:]), tuple((values[d][start:], n) for d, n in sorted(leaves) if n != 0)
    )


def level_counts(tree: FlavorTree, request: TASRequest, *, simulate_empty: bool = False) -> list[list[int]]:
    """Phase 1's pods per domain of each level for ``request``'s pods (each level's domains in value
    order), as a placement reads them: for tests and explanations."""
    requests = {**request.requests, PODS: request.requests.get(PODS, 0) + 1}
    tolerations = (*request.tolerations, *tree.tolerations)
    counts = counts_for(tree, requests, {}, simulate_empty, tolerations, request.node_selector)
    return [list(level) for level in counts.states]


def domain_usage(assignment: TopologyAssignment, single: Mapping[str, int]) -> list[DomainUsage]:
    """The TAS usage of an assignment (``ComputeTASNetUsage``, one flavor)."""
    return [DomainUsage(values, dict(single), n) for values, n in assignment.domains]


Finder = Callable[[FlavorTree, Sequence[TASRequest]], dict[str, Placement]]
