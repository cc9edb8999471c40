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

The package: :mod:`.plan` (what a pass would change, and how ``topogov governor plan`` prints
it), :mod:`.drift` (pure: how a live object differs from what is rendered, the hash that tells hand
edits apart, keeping a Topology under its old name), :mod:`.reconciler` (the :class:`Governor`:
plan from reads, apply the writes).
"""

from __future__ import annotations

from topogov.logic.governor.drift import (
    corrected,
    drift,
    edited_by_hand,
    keep_equivalent_topologies,
    owned,
    rendered_hash,
    stamped,
    terminating,
)
from topogov.logic.governor.plan import (
    DRAIN,
    KINDS,
    SYMBOL,
    WRITES,
    Action,
    Change,
    GovernorSummary,
    ObjectsPort,
    Plan,
    format_plan,
)
from topogov.logic.governor.reconciler import Governor

__all__ = [
    "DRAIN",
    "KINDS",
    "SYMBOL",
    "WRITES",
    "Action",
    "Change",
    "Governor",
    "GovernorSummary",
    "ObjectsPort",
    "Plan",
    "corrected",
    "drift",
    "edited_by_hand",
    "format_plan",
    "keep_equivalent_topologies",
    "owned",
    "rendered_hash",
    "stamped",
    "terminating",
]
