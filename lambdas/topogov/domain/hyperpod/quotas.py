"""The quotas in force on a HyperPod cluster, read from the task governance add-on's ClusterQueues (pure):
one source of truth for the API's arithmetic (never admissible, borrow limits, the in-flight cap's
default, the what-if baseline), not ``teams.yaml``, which the add-on may not have applied yet or which
someone may have overridden in the console.

A team's ClusterQueue is ``hyperpod-ns-<team>-clusterqueue`` (documented). Per governed resource, summed
over every flavor of its resource groups: ``nominalQuota`` is the quota; ``borrowingLimit`` how much it
may borrow; a flavor with no ``borrowingLimit`` may borrow all that the cohort's other queues lend
(Kueue: "if empty, the ClusterQueue can borrow up to the sum of the nominal quotas of the other
ClusterQueues in the cohort", kubernetes-sigs/kueue v0.17.0 ``apis/kueue/v1beta1/clusterqueue_types.go``,
minus their ``lendingLimit`` where set). The queue's sharing follows: ``lendingLimit`` 0 everywhere is
``DontLend``, ``borrowingLimit`` 0 everywhere ``Lend``, else ``LendAndBorrow``.

:func:`policy_in_force` is ``teams.yaml`` with each team's quota, borrow limit and sharing replaced by
those of its ClusterQueue; what has no HyperPod equivalent (principals, priority classes, ``maxInFlight``)
stays ``teams.yaml``'s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from topogov.domain.errors import QuotasUnavailable
from topogov.domain.hyperpod.mapping import cluster_queue
from topogov.domain.policy import Policy
from topogov.domain.policy.fields import ResourceQuantities
from topogov.domain.quantity import CPU, EFA, GOVERNED, GPU, MEMORY, Resources, parse_quantity, quantity_json
from topogov.domain.views.objects import ClusterQueueView

SCALE = {GPU: 1, EFA: 1, CPU: 1000, MEMORY: 1}  # Resources' units: devices, millicores, bytes


@dataclass(frozen=True, slots=True)
class QuotaInForce:
    """One team's quota as its ClusterQueue has it."""

    team: str
    cluster_queue: str
    quota: Resources
    borrow: Resources
    sharing: str  # Lend, DontLend or LendAndBorrow, as the limits say

    def to_json(self) -> dict[str, object]:
        return {
            "cluster_queue": self.cluster_queue,
            "quota": self.quota.to_json(),
            "borrow": self.borrow.to_json(),
            "sharing": self.sharing,
        }


def _amount(value: object, resource: str) -> int:
    return int(parse_quantity(str(value)) * SCALE[resource]) if value is not None else 0


def _sums(cq: ClusterQueueView) -> tuple[dict[str, int], dict[str, int | None], dict[str, int | None]]:
    """Per governed resource: nominal, borrowing limit (None: some flavor has none), lendable (None:
    all of it: some flavor has no lendingLimit)."""
    nominal = dict.fromkeys(GOVERNED, 0)
    borrow: dict[str, int | None] = dict.fromkeys(GOVERNED, 0)
    lend: dict[str, int | None] = dict.fromkeys(GOVERNED, 0)
    for group in cq.resource_groups:
        for flavor in group.flavors:
            for item in flavor.resources:
                if item.name not in SCALE:
                    continue
                nominal[item.name] += _amount(item.nominal_quota, item.name)
                b, lent = borrow[item.name], lend[item.name]
                borrow[item.name] = (
                    None
                    if item.borrowing_limit is None or b is None
                    else (b + _amount(item.borrowing_limit, item.name))
                )
                lend[item.name] = (
                    None
                    if item.lending_limit is None or lent is None
                    else (lent + _amount(item.lending_limit, item.name))
                )
    return nominal, borrow, lend


def _resources(amounts: Mapping[str, int | None]) -> Resources:
    return Resources(*(int(amounts[r] or 0) for r in (GPU, EFA, CPU, MEMORY)))


def _lendable(nominal: Mapping[str, int], lend: Mapping[str, int | None], resource: str) -> int:
    """What a queue lends of ``resource``: its lending limit, else all its nominal quota."""
    limit = lend[resource]
    return nominal[resource] if limit is None else limit


def in_force(queues: Mapping[str, ClusterQueueView]) -> dict[str, QuotaInForce]:
    """Each team's quota in force from its ClusterQueue (``queues``: team -> its queue); a resource with
    no borrowing limit borrows what the other queues of its cohort lend."""
    sums = {team: _sums(cq) for team, cq in queues.items()}
    out = {}
    for team, cq in queues.items():
        nominal, borrow, lend = sums[team]
        for r in GOVERNED:
            if borrow[r] is None:
                borrow[r] = sum(
                    _lendable(other_nominal, other_lend, r)
                    for other, (other_nominal, _, other_lend) in sums.items()
                    if other != team and queues[other].cohort == cq.cohort and cq.cohort
                )
        borrow_r, lend_r = _resources(borrow), lend
        lends = any(lend_r[r] is None or bool(lend_r[r]) for r in GOVERNED if nominal[r])
        sharing = "DontLend" if not lends else ("Lend" if borrow_r == Resources() else "LendAndBorrow")
        out[team] = QuotaInForce(team, cq.name, _resources(nominal), borrow_r, sharing)
    return out


def read_queues(policy: Policy, get: Callable[[str], ClusterQueueView | None]) -> dict[str, ClusterQueueView]:
    """Every team's ClusterQueue by ``get(name)`` (a view, or None when it does not exist); raises
    :class:`~topogov.domain.errors.QuotasUnavailable` naming the first team whose queue the add-on has not
    written."""
    queues = {}
    for team in sorted(policy.teams):
        cq = get(cluster_queue(team))
        if cq is None:
            raise QuotasUnavailable(
                f"the quotas in force are read from the task governance add-on's ClusterQueues, and "
                f"{cluster_queue(team)} does not exist: the add-on has not applied team {team}'s "
                "ComputeQuota "
                "(yet): `topogov governor plan` shows what it has written"
            )
        queues[team] = cq
    return queues


def _quantities(resources: Resources) -> ResourceQuantities:
    amounts = {GPU: resources.gpu, EFA: resources.efa, CPU: resources.cpu_m, MEMORY: resources.memory}
    return ResourceQuantities.model_validate({r: quantity_json(r, amounts[r]) for r in GOVERNED})


def policy_in_force(policy: Policy, quotas: Mapping[str, QuotaInForce]) -> Policy:
    """``policy`` with each team's quota, borrow limit and sharing those in force (see the module doc)."""
    teams = {}
    for name, team in policy.teams.items():
        q = quotas.get(name)
        if q is None:
            teams[name] = team
            continue
        teams[name] = team.model_copy(
            update={
                "quota": _quantities(q.quota),
                "borrow_limit": _quantities(q.borrow) if q.sharing == "LendAndBorrow" else None,
                "borrow_limit_percent": None,
                "sharing": q.sharing,
            }
        )
    return policy.model_copy(update={"teams": teams})
