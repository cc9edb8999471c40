"""The admission decision: team -> priority -> never-admissible -> topology (no I/O).

Everything here is decided from the request, the caller's ARN, the team policy and the capacity
index of the topology snapshot; the in-flight cap is checked atomically later, by the store.

Over 800 lines since pod-set slices came: the topology part (``placement_units`` to the end: the
level, ``auto``, the per-unit feasibility and the slices, about 400 lines) is the seam to cut into a
module of its own, with the team, priority and never-admissible checks left here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from topogov.domain.errors import (
    Forbidden,
    NeverAdmissible,
    PriorityNotAllowed,
    TopologyInfeasible,
    ValidationFailed,
)
from topogov.domain.hyperpod.mapping import workload_priority_class
from topogov.domain.jobs import complete_manifest
from topogov.domain.labels import SLICE_LEVEL_ANNOTATION, SLICE_SIZE_ANNOTATION
from topogov.domain.manifests import (
    JobShape,
    ManifestProblem,
    Placement,
    inspect_manifest,
    manifest_namespace,
)
from topogov.domain.manifests.pods import DEVICE_VARIABLES, device_variable
from topogov.domain.nodes import hyperpod_instance_type, normalized_instance_type
from topogov.domain.placement import (
    CapacityIndex,
    Feasibility,
    KueuePick,
    UnknownLevel,
    level_name,
    required_feasibility,
    resolve_level,
    slice_pods,
    tighter_or_equal,
)
from topogov.domain.podrequests import NamespaceDefaults
from topogov.domain.policy import Caller, Policy, Team
from topogov.domain.quantity import RESOURCE_ATTRS, Resources
from topogov.domain.render import HighLevel, NotServed, Rendered, choose_kind, render, requests_from
from topogov.domain.submission import (
    Decision,
    JobRequest,
    ManifestRequest,
    PodSetDecision,
    QuotaArithmetic,
    SliceSpec,
    TopologyDecision,
    TopologySpec,
    parse_duration,
)


@dataclass(frozen=True)
class Admission:
    decision: Decision
    manifest: dict[str, Any]
    shape: JobShape
    charge: Resources
    cap: Resources
    # made with the job, after it, owned by it (a rendered Indexed Job's headless Service)
    companions: tuple[dict[str, Any], ...] = ()


def caller_teams(policy: Policy, caller: Caller) -> list[str]:
    return list(policy.teams_for_principal(caller.principal))


def teams_hint(policy: Policy, caller: Caller) -> str:
    """``your teams: team-a`` (or every team, for an admin), to end a message about a wrong team."""
    if policy.is_admin(caller.principal):
        return f"the teams are: {', '.join(sorted(policy.teams))}"
    mine = caller_teams(policy, caller)
    return f"your teams: {', '.join(mine)}" if mine else "you are not a principal of any team"


def resolve_team(
    policy: Policy,
    caller: Caller,
    team: str | None,
    namespace: str | None,
    namespace_field: str = "namespace",
) -> str:
    """The body's team, else the team owning the named namespace, else the caller's only team."""
    from_namespace = False
    if team is not None and team not in policy.teams:
        raise ValidationFailed("team", f"no team {team!r}; {teams_hint(policy, caller)}")
    if namespace is not None:
        owner = policy.team_for_namespace(namespace)
        if owner is None:
            raise ValidationFailed(namespace_field, f"{namespace!r} is no team's namespace")
        if team is not None and owner != team:
            raise ValidationFailed(namespace_field, f"{namespace!r} belongs to team {owner!r}, not {team!r}")
        from_namespace = team is None
        team = owner
    admin = policy.is_admin(caller.principal)
    mine = caller_teams(policy, caller)
    if team is None:
        if len(mine) == 1:
            team = mine[0]
        elif mine:
            raise ValidationFailed("team", f"you are in several teams ({', '.join(mine)}): name one")
        elif admin:
            raise ValidationFailed("team", "admins must name the team")
        else:
            raise Forbidden("you are not a principal of any team", {"caller": caller.arn})
    if team not in mine and not admin:
        details = {"caller": caller.arn, "team": team}
        if from_namespace:
            details["field"] = namespace_field
        raise Forbidden(f"you are not a principal of team {team!r}", details)
    return team


def _quota_lines(
    total: Resources, quota: Resources, borrow: Resources, cap: Resources
) -> list[QuotaArithmetic]:
    lines = []
    for attr, name in RESOURCE_ATTRS.items():
        asked = getattr(total, attr)
        if asked or getattr(quota, attr):
            lines.append(
                QuotaArithmetic(
                    resource=name,
                    asked=asked,
                    quota=getattr(quota, attr),
                    borrow_limit=getattr(borrow, attr),
                    in_flight_cap=getattr(cap, attr),
                )
            )
    return lines


def decide(
    request: JobRequest | ManifestRequest,
    *,
    caller: Caller,
    policy: Policy,
    index: CapacityIndex | Callable[[], CapacityIndex],
    where_now: bool = True,
    hyperpod: bool = False,
    defaults: Callable[[Team], NamespaceDefaults] | None = None,
    served: frozenset[str] = frozenset({"Job"}),
) -> Admission:
    """The API's decision on a submission, in the order its refusals are checked: the team, the
    job's shape, the priority, never admissible, the topology; then the manifest to create.

    ``index`` may be a function giving it: it is asked for only when the job has a topology
    request, so a job without one is decided while no snapshot exists. ``where_now=False`` leaves
    out where Kueue would place the job now (``domain_now``: the model's placement, the costliest
    part; the trace simulator places jobs with the model itself).

    ``hyperpod``: the cluster's queues are SageMaker HyperPod task governance's (``policy`` has the
    quotas in force and the add-on's namespaces and LocalQueues): the Job carries the queue and the
    add-on's WorkloadPriorityClass (``<name>-priority``) on its pod template too, and a topology
    annotation beside an instance-type nodeSelector pins it to that type's flavor (:func:`_hyperpod_spec`).

    ``defaults``: what Kueue adds to the requests of a team namespace's pods (its LimitRanges'
    defaults, the RuntimeClasses' overhead), read from the cluster by the caller; none when not given.

    ``served``: the kinds the cluster serves (discovery, by the caller), which a high-level request is
    rendered as (``domain/render.choose_kind``)."""
    team_name = _team_of(request, policy, caller)
    team = policy.teams[team_name]
    rendered = _rendered(request, team, hyperpod, served) if isinstance(request, JobRequest) else None
    base, shape, asked_priority, spec = _shape_of(
        request, team, hyperpod, defaults(team) if defaults else None, rendered
    )
    asked_mode, pinned = spec.mode, ""
    if hyperpod:
        shape, pinned = _hyperpod_spec(shape)
    priority = _priority(team_name, team, asked_priority)
    total = shape.total
    _refuse_never_admissible(team_name, team, total)
    index_of, fields = (index if callable(index) else (lambda: index)), _slice_fields(request, shape)
    topo = topology_decision(spec, shape, index_of, where_now=where_now, slice_fields=fields)
    topo.reason += pinned if topo.level else ""
    manifest = complete_manifest(
        base,
        namespace=team.namespace,
        queue=team.local_queue,
        priority_class=workload_priority_class(priority) if hyperpod else priority,
        placement=Placement(topo.mode, topo.level, topo.slice_level, topo.slice_size) if topo.level else None,
        submitted_by=caller.arn,
        asked_mode=asked_mode,
        hyperpod=hyperpod,
        shape=shape,
    )
    decision = _decision(policy, team_name, team, priority, shape, topo)
    if rendered is not None:
        decision.rendered_as = rendered.why
    cap, companions = team.max_in_flight_resources, rendered.companions if rendered else ()
    return Admission(decision, manifest, shape, total, cap, companions)


def _decision(
    policy: Policy, team_name: str, team: Team, priority: str, shape: JobShape, topo: TopologyDecision
) -> Decision:
    cap = team.max_in_flight_resources
    return Decision(
        team=team_name,
        namespace=team.namespace,
        local_queue=team.local_queue,
        priority_class=priority,
        priority_value=policy.priority_value(priority),
        pods=shape.pods,
        topology=topo,
        quota=_quota_lines(shape.total, team.quota_resources, team.borrow_resources, cap),
        kind=shape.kind,
        pod_sets=[
            PodSetDecision(name=ps.name, pods=ps.count, gpus_per_pod=ps.per_pod.gpu) for ps in shape.pod_sets
        ],
    )


def _team_of(request: JobRequest | ManifestRequest, policy: Policy, caller: Caller) -> str:
    """The team the job is for: asked, or the manifest's namespace's, or the caller's only one."""
    if isinstance(request, ManifestRequest):
        ns = manifest_namespace(request.manifest)
        return resolve_team(policy, caller, request.team, ns, "manifest.metadata.namespace")
    return resolve_team(policy, caller, request.team, request.namespace)


def _shape_of(
    request: JobRequest | ManifestRequest,
    team: Team,
    hyperpod: bool,
    defaults: NamespaceDefaults | None,
    rendered: Rendered | None,
) -> tuple[dict[str, Any], JobShape, str | None, TopologySpec]:
    """The job's manifest before governance completes it (the caller's, or the high-level request
    rendered), its shape as :func:`topogov.domain.manifests.inspect_manifest` measures every job, the
    priority it asks for and its topology request."""
    if isinstance(request, JobRequest):
        _check_request(request, team)
    manifest = rendered.manifest if rendered is not None else request.manifest  # type: ignore[union-attr]
    try:
        shape = inspect_manifest(
            manifest,
            team_namespace=team.namespace,
            team_queue=team.local_queue,
            rules=team.pods,
            defaults=defaults,
            hyperpod=hyperpod,
        )
    except ManifestProblem as exc:
        details = {"problems": [{"field": f, "message": m} for f, m in exc.problems]}
        raise ValidationFailed(exc.field, exc.message, details if len(exc.problems) > 1 else None) from None
    if isinstance(request, JobRequest):
        return manifest, shape, request.priority, request.topology_spec()
    spec = request.topology
    if spec is not None and shape.placement is not None:
        raise ValidationFailed("topology", "the manifest already carries a topology annotation")
    if spec is None:
        asked = shape.placement
        spec = (
            TopologySpec(
                mode=asked.mode,  # type: ignore[arg-type]
                level=asked.level,
                slice=SliceSpec(level=asked.slice_level, size=asked.slice_size)
                if asked.slice_level
                else None,
            )
            if asked
            else TopologySpec(mode="none")
        )
    return dict(manifest), shape, shape.priority_class, spec


SLICE_FIELDS = ("topology.slice.level", "topology.slice.size")


def _slice_fields(request: JobRequest | ManifestRequest, shape: JobShape) -> tuple[str, str]:
    """The fields a refused slice is named by: the request's ``topology.slice``, or the manifest's
    annotations that asked for it."""
    if isinstance(request, JobRequest) or request.topology is not None or not shape.pod_sets:
        return SLICE_FIELDS
    at = f"{shape.pod_sets[0].field}.metadata.annotations"
    return f"{at}.{SLICE_LEVEL_ANNOTATION}", f"{at}.{SLICE_SIZE_ANNOTATION}"


def _check_request(request: JobRequest, team: Team) -> None:
    """What a high-level request names that its rendered pods would not show under the same name."""
    if request.queue_name is not None and request.queue_name != team.local_queue:
        raise ValidationFailed("queue_name", f"must be the team's LocalQueue {team.local_queue!r}")
    for name in request.environment or {}:
        if name in DEVICE_VARIABLES:
            raise ValidationFailed(f"environment.{name}", device_variable(name))


PINNED = (
    "; the instance type pins it to that type's flavor: Kueue never tries another, and while that "
    "type's domains are full its pending message names the last flavor it tried"
)


def _hyperpod_spec(shape: JobShape) -> tuple[JobShape, str]:
    """On HyperPod: the job's shape with EC2's name of its instance type (``ml.p5.48xlarge`` is
    ``p5.48xlarge`` in the snapshot), and what a topology beside an instance type means (appended to
    the decision's reason). The topology-aware scheduling page says to use one or the other; with the
    add-on's flavors (a ResourceFlavor per instance type, its ``nodeLabels`` that same label) Kueue
    places such a job as asked, the selector repeating its flavor's label (observed with Kueue
    v0.17.0, docs/hyperpod.md), so the pair is allowed, as ``hyp`` writes it."""
    if shape.instance_type is None:
        return shape, ""
    pod_sets = tuple(
        replace(ps, instance_type=normalized_instance_type(ps.instance_type)) if ps.instance_type else ps
        for ps in shape.pod_sets
    )
    normal = normalized_instance_type(shape.instance_type)
    return replace(shape, instance_type=normal, pod_sets=pod_sets), PINNED


def _priority(team_name: str, team: Team, asked: str | None) -> str:
    """The priority class: asked or the team's default, and one the team is allowed."""
    allowed = list(team.priority_class_names)
    priority = asked or team.default_priority_class
    if priority not in allowed:
        raise PriorityNotAllowed(
            f"priority class {priority!r} is not allowed for team {team_name!r}",
            {
                "field": "priority",
                "asked": priority,
                "allowed": allowed,
                "default": team.default_priority_class,
            },
        )
    return priority


def _refuse_never_admissible(team_name: str, team: Team, total: Resources) -> None:
    """422 when the job asks more of a resource than the team's quota and borrowing limit together."""
    quota, borrow = team.quota_resources, team.borrow_resources
    over = []
    for attr, name in RESOURCE_ATTRS.items():
        asked, limit = getattr(total, attr), getattr(quota, attr) + getattr(borrow, attr)
        if asked > limit:
            over.append(
                {
                    "resource": name,
                    "asked": asked,
                    "quota": getattr(quota, attr),
                    "borrow_limit": getattr(borrow, attr),
                    "max": limit,
                    "over_by": asked - limit,
                }
            )
    if over:
        first = over[0]
        raise NeverAdmissible(
            f"the job asks {first['asked']} {first['resource']} in all; team {team_name!r} can never be "
            f"admitted more than {first['max']} (quota {first['quota']} + borrow {first['borrow_limit']})",
            {"resources": over},
        )


def _rendered(request: JobRequest, team: Team, hyperpod: bool, served: frozenset[str]) -> Rendered:
    """The high-level request as the kind the cluster runs (``domain/render.py``; on HyperPod its
    nodeSelector names the instance type as HyperPod's nodes are labelled: ``ml.``), its pods held to
    the team's Pod Security level."""
    instance_type = request.instance_type
    if hyperpod and instance_type:
        instance_type = hyperpod_instance_type(instance_type)
    try:
        kind, why = choose_kind(request.render_as, served, hyperpod)
    except NotServed as exc:
        raise ValidationFailed("render_as", str(exc)) from None
    hl = HighLevel(
        name=request.job_name,
        namespace=team.namespace,
        image=request.image,
        pods=request.pods,
        per_pod_requests=requests_from(request.accelerators, request.vcpu, request.memory, request.efa),
        command=request.command,
        args=request.args,
        environment=request.environment,
        instance_type=instance_type,
        max_retry=request.max_retry,
        tasks_per_node=request.tasks_per_node,
        restricted=team.pods.security == "restricted",
        pull_policy=request.pull_policy,
        deep_health_check=request.deep_health_check_passed_nodes_only,
    )
    return render(hl, kind, why)


def _no_such_level(index: CapacityIndex, level: str, shape: JobShape) -> TopologyInfeasible:
    """Kueue skips a flavor whose Topology lacks the asked level ("does not contain the requested
    level", kueue v0.17.0 pkg/scheduler/flavorassigner/tas_flavorassigner.go), required or preferred:
    with no flavor left, the job would wait forever."""
    flavors = index.eligible(shape.instance_type)
    levels = {f: [level_name(lv) for lv in index.flavor_levels(f)] for f in flavors}
    if shape.instance_type is not None and not flavors:
        what = f"no {shape.instance_type} node is in the cluster's topology"
    elif shape.instance_type is not None:
        what = f"{shape.instance_type} nodes have {', '.join(levels[shape.instance_type])}"
    else:
        what = (
            "; ".join(f"{f}: {', '.join(lv)}" for f, lv in levels.items()) or "the cluster has no GPU flavor"
        )
    return TopologyInfeasible(
        f"no flavor the job can run on has a {level_name(level)} level ({what})",
        {
            "field": "topology.level",
            "level": level,
            "instance_type": shape.instance_type,
            "levels": levels,
        },
    )


@dataclass(frozen=True, slots=True)
class Unit:
    """Pods Kueue places in one domain of the level: ``count`` pods of ``pod`` (for a pod-set group,
    the leader among them: one ``leader`` pod, counted as Kueue counts a group), of pod sets
    ``names``."""

    pod: Resources
    count: int
    instance_type: str | None
    names: tuple[str, ...]
    leader: Resources | None = None


def placement_units(shape: JobShape) -> list[Unit]:
    """The job as Kueue places it: a pod-set group as one unit (its leader is the pod set of fewer
    pods, the second on a tie: ``findLeaderAndWorkers``, kueue v0.17.0
    ``pkg/cache/scheduler/tas_flavor_snapshot.go``), every other pod set alone."""
    if not shape.pod_sets:
        return [Unit(shape.per_pod, shape.pods, shape.instance_type, ("main",))]
    units = []
    for members in shape.units:
        itype = next((ps.instance_type for ps in members if ps.instance_type), shape.instance_type)
        if len(members) == 1:
            ps = members[0]
            units.append(Unit(ps.per_pod, ps.count, itype, (ps.name,)))
            continue
        first, second = members
        leader, workers = (first, second) if second.count > first.count else (second, first)
        units.append(
            Unit(workers.per_pod, workers.count + 1, itype, (first.name, second.name), leader.per_pod)
        )
    return units


def topology_decision(
    spec: TopologySpec,
    shape: JobShape,
    index_of: Callable[[], CapacityIndex],
    *,
    where_now: bool = True,
    slice_fields: tuple[str, str] = SLICE_FIELDS,
) -> TopologyDecision:
    """The topology the job gets: none; ``auto`` (the tightest level that holds it, preferred); or
    the asked level, preferred or required (refused when no domain of it can ever hold the job).
    ``index_of`` is called only when a topology is asked for. A job of several pod sets is held to
    it unit by unit (:func:`placement_units`): its group in one domain, each other pod set in one.
    Then its pod-set slices (:func:`slice_decision`): asked, or ``auto``'s when the job is wider than
    one domain of the level below the one it gets."""
    once: list[CapacityIndex] = []

    def index() -> CapacityIndex:  # one snapshot for the level and the slices
        if not once:
            once.append(index_of())
        return once[0]

    topo = _level_decision(spec, shape, index, where_now=where_now)
    if spec.slice is None and (spec.mode != "auto" or topo.level is None):
        return topo
    topo = slice_decision(spec.slice, topo, shape, index(), slice_fields, auto=spec.mode == "auto")
    units = placement_units(shape)
    if where_now and topo.level and topo.slice_level and topo.slice_size and len(units) == 1:
        # where Kueue would place it now, slices and all (the model's find_slice_assignment)
        unit = units[0]
        slices = (topo.slice_level, topo.slice_size)
        pick = index().kueue_pick(topo.level, unit.pod, unit.count, unit.instance_type, slices)
        topo.domain_now = pick.domain if pick else None
        topo.nodes_now = list(pick.nodes) if pick else None
    return topo


def _level_decision(
    spec: TopologySpec, shape: JobShape, index_of: Callable[[], CapacityIndex], *, where_now: bool = True
) -> TopologyDecision:
    """:func:`topology_decision`'s level: none, auto's, or the asked one."""
    if spec.mode == "none":
        return TopologyDecision(mode="none", level=None, reason="no topology asked")
    index = index_of()
    units = placement_units(shape)
    whole = len(units) == 1 and units[0].leader in (None, units[0].pod)

    def kueue_pick(level: str) -> KueuePick | None:
        # the model places one pod set: a group of like pods is placed as one pod set of all of them
        if not where_now or not whole:
            return None
        unit = units[0]
        return index.kueue_pick(level, unit.pod, unit.count, unit.instance_type)

    if spec.mode == "auto":
        return _auto(index, units, kueue_pick)
    assert spec.level is not None
    try:
        level = resolve_level(spec.level)
    except UnknownLevel as exc:
        raise ValidationFailed("topology.level", str(exc)) from None
    for unit in units:
        if not index.has_level(level, unit.instance_type):
            raise _no_such_level(index, level, shape)
    pick = kueue_pick(level)
    where = (
        f"fits now in {pick.domain} ({pick.free_nodes} of {pick.domain_nodes} nodes free; Kueue's BestFit "
        "would pick it)"
        if pick
        else None
        if where_now and whole
        else "where it fits now was not computed"
        if whole
        else None
    )
    if spec.mode == "preferred":
        return TopologyDecision(
            mode="preferred", level=level, domain_now=pick.domain if pick else None,
            nodes_now=list(pick.nodes) if pick else None,
            reason=f"preferred at {level_name(level)} as asked: "
            + (where or f"no {level_name(level)} domain has room for all of it now: Kueue places it as close "
               "as it can" if whole else _per_unit(units, level))
            + _placed_as(shape, units),
        )  # fmt: skip
    return _required(index, level, units, spec, pick, where, shape)


def _placed_as(shape: JobShape, units: list[Unit]) -> str:
    """What the answer says of a job of several pod sets: placed as one group, or pod set by pod set."""
    if len(shape.pod_sets) < 2:
        return ""
    if len(units) == 1:
        return (
            f"; its pod sets {' and '.join(units[0].names)} are one pod-set group, placed in one domain "
            "(kueue.x-k8s.io/podset-group-name)"
        )
    return (
        f"; its {len(units)} pod sets are placed one by one, each in a domain of its own (Kueue v0.17.0 "
        "groups only two pod sets of which one is a single pod: tas_validation.go)"
    )


def _per_unit(units: list[Unit], level: str) -> str:
    names = ", ".join("+".join(u.names) for u in units)
    return f"each of its pod sets ({names}) in one {level_name(level)} domain"


def _auto(
    index: CapacityIndex, units: list[Unit], kueue_pick: Callable[[str], KueuePick | None]
) -> TopologyDecision:
    """``auto``: the tightest level whose domains can hold the job (each placement unit), preferred
    there (never blocking)."""
    from topogov.domain.placement import tightest_level

    choices = [
        tightest_level(index, u.pod, u.count, instance_type=u.instance_type, leader=u.leader) for u in units
    ]
    missing = next((c for c in choices if c.level is None), None)
    if missing is not None:
        return TopologyDecision(
            mode="none", level=None, reason=f"auto: {missing.reason}; placed without topology"
        )
    order = index.levels(None)
    choice = max(choices, key=lambda c: order.index(c.level) if c.level in order else len(order))
    assert choice.level is not None
    pick = kueue_pick(choice.level)
    more = "" if len(units) == 1 else f" (the widest its {len(units)} pod sets need)"
    return TopologyDecision(
        mode="preferred",
        level=choice.level,
        domain_now=pick.domain if pick else None,
        nodes_now=list(pick.nodes) if pick else None,
        reason=f"auto: {choice.reason}{more}; preferred there so the job is never blocked by the choice",
    )


def _required(
    index: CapacityIndex,
    level: str,
    units: list[Unit],
    spec: TopologySpec,
    pick: KueuePick | None,
    where: str | None,
    shape: JobShape,
) -> TopologyDecision:
    """``required``: refused (422) when no domain of the level can ever hold all the pods of a unit."""
    fits = []
    for unit in units:
        feas = required_feasibility(
            index, level, unit.pod, unit.count, instance_type=unit.instance_type, leader=unit.leader
        )
        if not feas.feasible:
            raise _infeasible(level, unit, feas, len(units) > 1)
        fits.append(feas.fit)
    held = fits[0].domain if len(fits) == 1 else ", ".join(f"{f.domain}" for f in fits)
    return TopologyDecision(
        mode="required",
        level=level,
        domain_now=pick.domain if pick else None,
        nodes_now=list(pick.nodes) if pick else None,
        reason=f"required at {level_name(level)}: "
        + (
            where
            or f"fits once running work finishes ({held} holds all {shape.pods} pods when empty; "
            "nothing is reserved meanwhile)"
            if len(units) == 1
            else where
            or f"fits once running work finishes ({_per_unit(units, level)}: {held} when empty; "
            "nothing is reserved meanwhile)"
        )
        + _placed_as(shape, units),
        fallback_after_s=parse_duration(spec.fallbackAfter) if spec.fallbackAfter else None,
    )


def _infeasible(level: str, unit: Unit, feas: Feasibility, several: bool) -> TopologyInfeasible:
    alt = feas.would_fit
    of = f" of the pod set{'s' if len(unit.names) > 1 else ''} {' and '.join(unit.names)}" if several else ""
    return TopologyInfeasible(
        f"no {level_name(level)} domain can ever hold all {unit.count} pods{of}: the largest "
        f"({feas.fit.domain}) holds {feas.fit.pods}"
        + (f"; {level_name(alt.level)} would" if alt.level else "; no level would"),
        {
            "level": level,
            "pods": unit.count,
            "pod_sets": list(unit.names),
            "largest_domain": feas.fit.domain,
            "largest_domain_holds": feas.fit.pods,
            "tightest_level_that_holds": alt.level,
            "tightest_domain": alt.fit.domain if alt.fit else None,
        },
    )


# -- pod-set slices ------------------------------------------------------------------------------
NO_SLICE_WITH_GROUP = (
    "a pod-set group cannot be sliced: Kueue v0.17.0's job webhook refuses "
    "kueue.x-k8s.io/podset-group-name beside kueue.x-k8s.io/podset-slice-required-topology "
    "(tas_validation.go), and Topogov places this job's {names} as one group (its leader beside its "
    "workers); render it as an Indexed Job (render_as: job) or submit its workers alone to slice them"
)
REMAINDER = (
    "{count} pods are not a whole number of slices of {size}: Kueue v0.17.0 admits such a job with quota "
    "for every pod but places whole slices only, and its ungater fails on the remaining pods, so the job "
    "would hold its quota and never start; use a size that divides {count}"
)


def slice_decision(
    asked: SliceSpec | None,
    topo: TopologyDecision,
    shape: JobShape,
    index: CapacityIndex,
    fields: tuple[str, str] = SLICE_FIELDS,
    *,
    auto: bool = False,
) -> TopologyDecision:
    """The job's pod-set slices: every ``size`` consecutive pods (by completion index) in one domain of
    the slice level, inside one domain of the job's level. ``asked``: checked as Kueue's webhook
    checks it and for feasibility (a size of None: the largest that divides every pod set's count and
    that the slice level's domains hold); else ``auto``'s, when a tighter level than the job's cannot
    hold it whole (:func:`_auto_slices`)."""
    units = placement_units(shape)
    if asked is None:
        return _auto_slices(topo, units, index)
    level_field, size_field = fields
    if topo.level is None:
        raise ValidationFailed(
            level_field, f"a slice is placed inside one domain of the job's level: {topo.reason}"
        )
    if shape.grouped or any(u.leader is not None for u in units):
        names = " and ".join(next(u.names for u in units if len(u.names) > 1))
        raise ValidationFailed(level_field, NO_SLICE_WITH_GROUP.format(names=names))
    label = _slice_level(asked, topo, shape, index, level_field, auto=auto)
    size = asked.size
    if size is not None:
        for unit in units:
            if unit.count % size:
                raise ValidationFailed(size_field, REMAINDER.format(count=unit.count, size=size))
    size, why = _sized(
        index, topo.level, label, units, size, required=topo.mode == "required", field=size_field
    )
    topo.slice_level, topo.slice_size = label, size
    topo.reason += (
        f"; in slices of {size} consecutive pods (by completion index), each slice in one "
        f"{level_name(label)} domain ({why}); slices are always required (Kueue has no preferred slice)"
    )
    return topo


def _slice_level(
    asked: SliceSpec, topo: TopologyDecision, shape: JobShape, index: CapacityIndex, field: str, *, auto: bool
) -> str:
    """The asked slice level: one Topogov knows, that every flavor the job may get has, and tighter than
    or the same as the job's level (``auto``'s level is raised to it, rather than refused)."""
    assert topo.level is not None
    try:
        label = resolve_level(asked.level)
    except UnknownLevel as exc:
        raise ValidationFailed(field, str(exc)) from None
    for unit in placement_units(shape):
        if not index.has_level(label, unit.instance_type):
            missing = _no_such_level(index, label, shape)
            missing.details["field"] = field
            raise missing
        if auto and not tighter_or_equal(index, label, topo.level, unit.instance_type):
            topo.reason += f"; raised to {level_name(label)}, the level of the slices asked for"
            topo.level = label
        if not tighter_or_equal(index, label, topo.level, unit.instance_type):
            raise ValidationFailed(
                field,
                f"{level_name(label)} is wider than the job's level {level_name(topo.level)}: a slice's "
                "level must be tighter than or the same as the level that holds the whole job",
            )
    return label


def _divisors(units: list[Unit]) -> list[int]:
    """The sizes that divide every pod set's count, largest first."""
    counts = [u.count for u in units]
    return [d for d in range(min(counts), 0, -1) if all(c % d == 0 for c in counts)]


def _sized(
    index: CapacityIndex,
    level: str,
    slice_level: str,
    units: list[Unit],
    size: int | None,
    *,
    required: bool,
    field: str,
) -> tuple[int, str]:
    """The slice size (``size``, else the largest that divides every pod set's count and fits) and why
    it fits: a domain of the slice level holds a slice, by allocatable capacity; when the job's level is
    required, a domain of it holds all its slices (the model's count, as Kueue's ``sliceState``)."""
    fits = [
        slice_pods(index, level, slice_level, u.pod, now=False, instance_type=u.instance_type) for u in units
    ]
    largest = min(f.largest_slice_domain for f in fits)
    for candidate in [size] if size is not None else _divisors(units):
        if candidate > largest:
            continue
        held = [f.best(candidate) for f in fits]
        short = [(u, h) for u, h in zip(units, held, strict=True) if h[1] < u.count // candidate]
        if required and short:
            continue
        domain = held[0][0]
        return candidate, (
            ("as asked" if size is not None else f"the largest that divides the pod count and fits a "
             f"{level_name(slice_level)} domain, whose largest holds {largest} pods")
            + (f"; {domain} holds all {units[0].count // candidate} slices when empty" if not short else
               f"; no {level_name(level)} domain holds all {units[0].count // candidate} slices: the level "
               "is preferred, so Kueue places them in as few domains as it can")
        )  # fmt: skip
    if size is not None and size > largest:
        raise TopologyInfeasible(
            f"no {level_name(slice_level)} domain can ever hold a slice of {size} pods: the largest holds "
            f"{largest}",
            {"field": field, "slice_level": slice_level, "slice_size": size, "largest_domain_holds": largest},
        )
    best = fits[0].best(size or 1)
    raise TopologyInfeasible(
        f"no {level_name(level)} domain can ever hold all {units[0].count} pods in slices of "
        f"{size or 'any size'} each in one {level_name(slice_level)} domain: the best ({best[0]}) holds "
        f"{best[1]} slices" + ("" if size else " of 1"),
        {
            "field": field,
            "level": level,
            "slice_level": slice_level,
            "slice_size": size,
            "largest_domain": best[0],
        },
    )


def _auto_slices(topo: TopologyDecision, units: list[Unit], index: CapacityIndex) -> TopologyDecision:
    """``auto``'s slices: when the job's level is not the tightest (no domain of the level below holds
    it whole), its pods in slices at that level below, of the largest size that divides the pod count
    and that one of its domains holds (per node capacity: allocatable) while a domain of the job's
    level holds every slice. None for a pod-set group (Kueue v0.17.0 cannot slice one), a job of
    several pod sets, or when no slice of two pods or more fits."""
    if topo.level is None or len(units) != 1 or units[0].leader is not None or units[0].count < 2:
        if topo.level is not None and any(u.leader is not None for u in units):
            topo.reason += "; not sliced: " + NO_SLICE_WITH_GROUP.format(names=" and ".join(units[0].names))
        return topo
    unit = units[0]
    order = index.levels(unit.instance_type)
    if topo.level not in order or order.index(topo.level) == 0:
        return topo
    below = order[order.index(topo.level) - 1]
    fits = slice_pods(index, topo.level, below, unit.pod, now=False, instance_type=unit.instance_type)
    largest = fits.largest_slice_domain
    for size in _divisors(units):
        if size < 2 or size >= unit.count:
            continue
        domain, held = fits.best(size)
        if size <= largest and held >= unit.count // size:
            topo.slice_level, topo.slice_size = below, size
            wide = (
                f"no {level_name(below)} domain has room for all {unit.count} pods now"
                if largest >= unit.count
                else f"no {level_name(below)} domain holds all {unit.count} pods (the largest: {largest})"
            )
            topo.reason += (
                f"; {wide}, so every {size} consecutive pods (by completion index) go in one "
                f"{level_name(below)} domain: the largest slice that divides {unit.count} and that a "
                f"{level_name(below)} domain holds ({domain} holds all {unit.count // size} slices when "
                "empty); slices are required (Kueue has no preferred slice): the job waits for a slice's "
                "room in a domain"
            )
            return topo
    return topo
