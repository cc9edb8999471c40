"""The team policy: teams, quotas, priority classes and who may act for a team (pure, no I/O except
:func:`load_policy_file`).

The policy is one YAML file (docs/policy.md). :func:`load_policy` parses it, applies the
defaults and checks it, reporting **every** problem at once as a :class:`PolicyError` whose problems
name the offending path dotted from the root (``teams.team-a.quota.nvidia.com/gpu: must be ≥ 0``).
The models are frozen pydantic models; unknown keys are refused and numbers are never read from
strings, except resource quantities, which Kubernetes writes either way (``cpu: 1536``, ``"500m"``,
``memory: 16Ti``).

Beyond each field's type and range, the checks that relate fields: priority class names unique; a
team's classes declared and its default one of them; one team per namespace; ``borrowLimit`` xor
``borrowLimitPercent``, and either only with ``sharing: LendAndBorrow``; ``maxInFlight`` ≥ quota for
each resource it names. Also refused, to catch typing mistakes early: a principal pattern that does not
have the six ARN parts, a policy without priority classes, and a YAML key given twice in one mapping
(PyYAML would silently keep the last, e.g. a second ``team-a:``). A problem in one field does not hide
the others: each field is validated on its own and the cross-field checks run on the valid ones.

Defaults
    ``namespace`` ``hyperpod-ns-<team>``; ``localQueue`` ``<namespace>-localqueue``; ``sharing``
    ``LendAndBorrow``; ``preemptTeamTasks`` ``LowerPriority``; ``fairShareWeight`` 1; ``fairShare``
    ``enabled``; ``priorityClasses`` of a team: every declared class; ``defaultPriorityClass``: the
    lowest-value class of the team's; borrowing (``LendAndBorrow`` only) ``borrowLimitPercent: 50``;
    ``maxInFlight``: 2 × (quota + borrow) for every resource it does not name. These follow HyperPod
    task governance's defaults (strategy LendAndBorrow, BorrowLimit 50 %, PreemptTeamTasks
    LowerPriority) and Kueue's (fair-sharing weight 1).

Sharing and borrowing (HyperPod ``ResourceSharingConfig.Strategy``, rendered as Kueue limits)
    ``LendAndBorrow``  lends its idle nominal quota to the cohort and borrows idle quota of others up to
                       its borrow limit (Kueue ``borrowingLimit`` = :attr:`Team.borrow_resources`, no
                       ``lendingLimit``).
    ``Lend``           lends its idle quota, never borrows (``borrowingLimit: 0``).
    ``DontLend``       neither lends nor borrows: its quota is reserved for it (``lendingLimit: 0``,
                       ``borrowingLimit: 0``).
    Only a ``LendAndBorrow`` team may borrow, so ``borrowLimit``/``borrowLimitPercent`` on a ``Lend``
    or ``DontLend`` team is an error rather than a setting silently ignored. ``borrowLimit`` is
    absolute per resource and a resource it does not name is not borrowed (a warning points out a
    team that may borrow GPUs but no CPU or memory to run them with); ``borrowLimitPercent`` is a
    percentage of each quota, rounded down.

The package, by concern: :mod:`.model` (the frozen models and what they mean), :mod:`.fields`
(field types and their checks), :mod:`.defaults`, :mod:`.rules` (rules that relate fields, and
:class:`PolicyError`), :mod:`.problems` (every problem of a document at once), :mod:`.arn`
(principal matching), :mod:`.pods` (what a team's pods may do), :mod:`.loading` (YAML).
"""

from __future__ import annotations

from topogov.domain.policy.arn import Caller, principal_matches, session_role
from topogov.domain.policy.fields import ResourceQuantities, is_dns_label
from topogov.domain.policy.loading import load_policy, load_policy_file, parse_policy
from topogov.domain.policy.model import Policy, PriorityClass, Sharing, Team
from topogov.domain.policy.rules import PolicyError, Problem
from topogov.domain.quantity import GOVERNED, amount_of, format_quantity

__all__ = [
    "GOVERNED",
    "Caller",
    "Policy",
    "PolicyError",
    "PriorityClass",
    "Problem",
    "ResourceQuantities",
    "Sharing",
    "Team",
    "amount_of",
    "format_quantity",
    "is_dns_label",
    "load_policy",
    "load_policy_file",
    "parse_policy",
    "principal_matches",
    "session_role",
]
