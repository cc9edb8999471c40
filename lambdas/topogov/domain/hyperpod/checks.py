"""What the task governance APIs (or the add-on's naming) would refuse in a valid ``teams.yaml``, each
named by the field that causes it (:func:`problems`), and what has no HyperPod equivalent and will
differ from ``teams.yaml`` on the cluster (:func:`warnings`). The limits are :mod:`.api`'s."""

from __future__ import annotations

from collections.abc import Iterator

from topogov.domain.hyperpod import api
from topogov.domain.hyperpod.addon import by_type
from topogov.domain.hyperpod.instances import NOMINAL
from topogov.domain.hyperpod.mapping import (
    TEAM_MAX,
    class_weight,
    flavors,
    hyperpod_class_name,
    local_queue,
    namespace,
    resource_configs,
)
from topogov.domain.policy import Policy, Problem, Team
from topogov.domain.policy.rules import dotted
from topogov.domain.quantity import CPU, EFA, GPU, MEMORY, Resources, amount_of, format_quantity

_AMOUNT_FIELDS = (
    (GPU, "Accelerators", "accelerators"),
    (CPU, "VCpu", "vCPUs"),
    (MEMORY, "MemoryInGiB", "GiB"),
)


def problems(policy: Policy) -> list[Problem]:
    """Every refusal of the policy as HyperPod task governance's policy, in document order."""
    return [*_cluster(policy), *_classes(policy), *(p for name in policy.teams for p in _team(policy, name))]


def _cluster(policy: Policy) -> Iterator[Problem]:
    if policy.hyperpod is None:
        yield (
            "hyperpod",
            "required for HyperPod task governance: hyperpod.instanceTypes names the cluster's "
            "instance types and how many of each, to split each team's quota over them",
        )
        return
    types = policy.hyperpod.instance_types
    if not types:
        yield ("hyperpod.instanceTypes", "must name at least one instance type of the cluster")
    if len(types) > api.MAX_QUOTA_RESOURCES:
        yield (
            "hyperpod.instanceTypes",
            f"at most {api.MAX_QUOTA_RESOURCES} instance types: a ComputeQuota lists at most "
            f"{api.MAX_QUOTA_RESOURCES} (ComputeQuotaResources), {len(types)} given",
        )
    for name in types:
        if name not in api.INSTANCE_TYPES:
            yield (
                dotted("hyperpod.instanceTypes", name),
                "not an instance type HyperPod takes (ClusterInstanceType, e.g. ml.p5.48xlarge)",
            )
        elif name not in NOMINAL:
            known = ", ".join(sorted(NOMINAL))
            yield (
                dotted("hyperpod.instanceTypes", name),
                f"Topogov does not know its vCPUs, memory and accelerators, so cannot split a quota "
                f"over it (domain/hyperpod/instances.py knows {known})",
            )


def _classes(policy: Policy) -> Iterator[Problem]:
    classes = policy.priority_classes
    if len(classes) > api.MAX_PRIORITY_CLASSES:
        yield (
            "priorityClasses",
            f"at most {api.MAX_PRIORITY_CLASSES} for HyperPod (SchedulerConfig.PriorityClasses), "
            f"{len(classes)} declared",
        )
    seen: dict[str, str] = {}
    for i, pc in enumerate(classes):
        short = hyperpod_class_name(pc.name)
        if not api.matches(api.PRIORITY_CLASS_NAME_PATTERN, short):
            yield (
                dotted("priorityClasses", i, "name"),
                f"HyperPod's priority class names ({short}) are lower-case letters, digits and '-', "
                "starting and ending with a letter or digit (no '.')",
            )
        elif short in seen:
            yield (
                dotted("priorityClasses", i, "name"),
                f"{pc.name} and {seen[short]} are the same HyperPod priority class ({short}: the add-on "
                "appends -priority)",
            )
        seen.setdefault(short, pc.name)
        if class_weight(pc) is None:
            yield (
                dotted("priorityClasses", i, "weight"),
                f"required for HyperPod: its value {pc.value} is not a HyperPod weight (0–100)",
            )
    yield from _class_order(policy)


def _sign(x: int) -> int:
    return (x > 0) - (x < 0)


def _class_order(policy: Policy) -> Iterator[Problem]:
    """Weights must order the classes as their values do: the add-on's WorkloadPriorityClass value is
    the weight, so otherwise Kueue would preempt (or not) unlike it does with ``teams.yaml``'s values."""
    weighed = [
        (i, pc, w) for i, pc in enumerate(policy.priority_classes) if (w := class_weight(pc)) is not None
    ]
    for j, later, w in weighed:
        for _, earlier, v in (x for x in weighed if x[0] < j):
            if _sign(later.value - earlier.value) != _sign(w - v):
                yield (
                    dotted("priorityClasses", j, "weight"),
                    f"{w} does not order {later.name} against {earlier.name} as their values do "
                    f"({later.value} against {earlier.value}; weights {w} against {v})",
                )
                break


def _team(policy: Policy, name: str) -> Iterator[Problem]:
    team = policy.teams[name]
    path = ("teams", name)
    if len(name) > TEAM_MAX or not api.matches(api.TEAM_NAME_PATTERN, name):
        yield (
            dotted(*path),
            f"HyperPod makes the namespace {namespace(name)}, a DNS-1123 label of at most 63 characters: "
            f"a team name of at most {TEAM_MAX}",
        )
    if not api.matches(api.NAME_PATTERN, name) or len(name) > api.NAME_MAX:
        yield (dotted(*path), f"not a ComputeQuota name (at most {api.NAME_MAX} letters, digits and '-')")
    for field, value, expected in (
        ("namespace", team.namespace, namespace(name)),
        ("localQueue", team.local_queue, local_queue(name)),
    ):
        if value != expected:
            yield (
                dotted(*path, field),
                f"the add-on names it {expected} (CreateComputeQuota takes no {field}): remove {field} "
                f"or set it to {expected}",
            )
    if not api.WEIGHT_MIN <= team.fair_share_weight <= api.WEIGHT_MAX:
        yield (
            dotted(*path, "fairShareWeight"),
            f"HyperPod's FairShareWeight is {api.WEIGHT_MIN}–{api.WEIGHT_MAX}, "
            f"{team.fair_share_weight} given",
        )
    yield from _amounts(policy, team, path)


def _amounts(policy: Policy, team: Team, path: tuple[str, ...]) -> Iterator[Problem]:
    types = flavors(policy)
    if not types:
        return
    for field, amounts in (("quota", team.quota_resources), ("borrowLimit", team.borrow_resources)):
        if field == "borrowLimit" and team.borrow_limit is None:
            continue
        for item in resource_configs(amounts, types):
            for resource, key, unit in _AMOUNT_FIELDS:
                if item[key] > api.AMOUNT_MAX:
                    yield (
                        dotted(*path, field, resource),
                        f"{format_quantity(resource, amount_of(amounts, resource))} puts "
                        f"{item[key]} {unit} on {item['InstanceType']}: HyperPod takes at most "
                        f"{api.AMOUNT_MAX} ({key})",
                    )


def warnings(policy: Policy) -> list[str]:
    """What will differ on a HyperPod cluster from ``teams.yaml`` though nothing refuses it: EFA, which
    no ComputeQuota can give, as the add-on derives it from the accelerators."""
    types = flavors(policy)
    if not types:
        return []
    out = []
    for name, team in policy.teams.items():
        for field, amounts in (("quota", team.quota_resources), ("borrowLimit", team.borrow_resources)):
            if field == "borrowLimit" and team.borrow_limit is None:
                continue
            derived = _derived_efa(amounts, policy)
            asked = amount_of(amounts, EFA)
            if derived != asked:
                out.append(
                    f"teams.{name}.{field}.{EFA}: HyperPod has no EFA quota; the add-on derives "
                    f"{derived} from the accelerators ({asked} in teams.yaml)"
                )
    return out


def _derived_efa(amounts: Resources, policy: Policy) -> int:
    return sum(a.get(EFA, 0) for a in by_type(resource_configs(amounts, flavors(policy))).values())
