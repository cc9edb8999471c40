"""A model of Kueue's admission and topology-aware scheduling, as pure domain code.

Pinned to **Kueue v0.17.0** (``sigs.k8s.io/kueue@v0.17.0``, the version the local cluster runs) with
the feature gates at their defaults (``pkg/features/kube_features.go``). Modelled: TopologyAware-
Scheduling (Beta, on), TASProfileMixed (Beta, on: BestFit for required/preferred, LeastFreeCapacity
for unconstrained), FlavorFungibility (on), PrioritySortingWithinCohort (on), LendingLimit (GA),
FairSharingPreemptWithinNominal and FairSharingPrioritizeNonBorrowing (Beta, on; used only when fair
sharing is enabled, which the Kueue Configuration leaves off by default). Off and not modelled:
TASBalancedPlacement, TASMultiLayerTopology, SchedulingEquivalenceHashing, ElasticJobsViaWorkload-
Slices, PriorityBoost, SchedulerTimestampPreemptionBuffer.

The reference notes in ``/work/shared/reference/kueue-model.md`` summarise a later Kueue (``main``
≈ v0.19.2); where they differ, this code follows v0.17.0: there is no ``TopologyPlacementFailed`` /
``WaitingForQuota`` reason (a pending workload's reason is ``Pending``, or ``Inadmissible`` for a
stopped queue) and no ``scheduling_simulator_default.go`` (taints, ``nodeSelector`` and affinity are
checked in ``tas_flavor_snapshot.go``, ``fillInCounts``); a stopped queue's pending workloads read
``ClusterQueue <name> is inactive``.

Public API (all pure; time is an argument, nothing reads a clock or does I/O)::

    from topogov.domain.kueue_model import Cluster, Workload, PodSet, TopologyRequest, ...
    cluster = Cluster(nodes=..., flavors=..., topologies=..., cluster_queues=...)
    cluster.submit(Workload("job-a", "team-a-cq", (PodSet(8, {"nvidia.com/gpu": 8}, ...),), created=t))
    cluster.settle(now)          # admission cycles until quiescent -> [CycleResult]
    cluster.admitted()           # name -> Admitted (per pod set: flavors, topology, pods' hosts)
    cluster.pending()            # name -> Pending (reason, Kueue's message)
    cluster.finish(name, now); cluster.cancel(name, now); cluster.set_stop_policy(cq, "Hold", now)

and, for one placement, :func:`find_assignment` on a :class:`FlavorTree`. Modules: :mod:`.objects`
(inputs), :mod:`.topology` and :mod:`.tas` (placement), :mod:`.quota` and :mod:`.assigner` (quota,
flavors), :mod:`.preemption`, :mod:`.scheduler` (one cycle), :mod:`.simulator` (queues, events).
Each rule cites its upstream file and function.

Covered
    Node eligibility, taints/tolerations, ``nodeSelector``, free capacity (allocatable − assigned TAS
    usage − non-TAS pods, and ``pods``); BestFit/LeastFreeCapacity placement, level choice, preferred
    going up, descent with pooled children; the "as if empty" re-run; Kueue's failure messages word for
    word. Pod-set groups (a leader and its workers given flavors together and placed as one,
    ``podSetGroupName``: :mod:`.groups`), v0.17.0's two faults included (a group counted as fitting
    where it does not, or optimised onto a host without room for its leader, is placed on no domain:
    fixed in later releases), and what follows: the API server rejects that admission and Kueue retries
    it in every cycle (:mod:`.simulator`, "Admissions the API server rejects"). Pod-set slices
    (``podset-slice-required-topology`` and ``podset-slice-size``: every slice of that many
    consecutive pods in one domain of the slice level, :func:`.tas.find_slice_assignment`), alone or
    beside required or preferred, with Kueue's slice messages; a pod count that is no multiple of the
    slice size places whole slices only, as v0.17.0 does (a fault there: it admits the pod set so,
    and its ungater, indexing past the assignment, then releases none of the pods). Quota per flavor
    and resource with borrowing and lending limits in a flat cohort; flavor order, fungibility, the
    flavor attempt carried between cycles. Classical preemption (``withinClusterQueue``
    Never/LowerPriority/LowerOrNewerEqualPriority, ``reclaimWithinCohort`` Never/LowerPriority/Any,
    ``borrowWithinCohort`` with its threshold), candidate order and the minimal set; fair-sharing
    ordering and preemption (flat cohorts). BestEffortFIFO heads, the entry order, reservations of
    waiting preemptors, skips; inadmissible requeue on finish, delete, eviction, node change;
    ``stopPolicy`` Hold/HoldAndDrain; pending messages as Kueue writes them.

Out of scope (Kueue does them; the model does not)
    Admission checks and ProvisioningRequests, MultiKueue, partial admission (``minCount``),
    multi-layer slices (``TASMultiLayerTopology``, off), a pod-set group with slices (the job
    webhooks refuse it; the model refuses it too), balanced placement, elastic workloads,
    ``waitForPodsReady`` and requeue backoff, node-failure replacement, StrictFIFO, hierarchical cohorts
    and Cohort-level quota, admission fair sharing, node affinity (only ``nodeSelector``), flavor
    ``nodeTaints``, resource transformations, DRA, LimitRanges, reclaimable pods.

Checked against the real Kueue
    ``tests/integration/test_kueue_model_vs_kueue.py`` drives the local cluster's Kueue v0.17.0 and
    this model through the same events and compares admitted sets, every pod's host by completion
    index, and pending messages word for word. It found two differences: the stopped queue's message
    (``is inactive``, not ``is stopped``; fixed), and the order in which a queue that resumes admits
    the workloads ``HoldAndDrain`` evicted and those queued meanwhile (below). Its pod-set groups
    (Workloads of a leader and its workers) found two more, both fixed: a group's flavors are
    assigned once for its pod sets together, and a group placed on no domain is not admitted (the
    API server rejects the status). ``tests/integration/test_kueue_model_slices_vs_kueue.py`` does
    the same with Jobs asking for pod-set slices (no difference), and shows the remainder fault above.

Known, documented differences (Kueue's behaviour is timing- or map-order-dependent there)
    * Ties Kueue leaves to Go map order or unstable sorts (entries of equal borrowing, priority and
      creation time across ClusterQueues; several resources short in one flavor; several TAS flavors
      failing; several resources missing from a node's allocatable) are broken here by UID, name or
      sorted order. So is the rack of a leaf whose hostname several nodes share: Kueue files it under
      the first node its node cache's map yields, the model under the first by name
      (``topology.FlavorTree``).
    * A pod-set group that cannot be placed fails for both pod sets with one reason; Kueue's message
      names the one its result map yields first (``TASAssignmentsResult.Failure``: Go map order, so
      either, and it may change from one attempt to the next), the model's the workers.
    * A group whose admission the API server rejected: Kueue's cache may still hold its quota when
      the next cycle takes its snapshot (the answer races with the cycle); the model releases it at
      once.
    * Kueue builds a fresh ``workload.Info`` when it observes its own status update of a pending
      workload, which can drop the flavor attempt state (``LastAssignment``) before the next cycle;
      the model keeps it, as the scheduler's own requeue does. With one flavor per queue there is no
      difference; with several, Kueue may retry the first flavor once more before moving on.
    * Admitted workloads' status updates also bump ``AllocatableResourceGeneration`` in Kueue; the
      model bumps it only when an admitted workload leaves the queue.
    * Evicted workloads release their quota at the end of the cycle that evicted them; in Kueue they
      do once their Job is stopped, a few cycles later (the preemptor keeps waiting meanwhile).
    * When a stopped queue resumes, workloads it drained come back once the workload controller sets
      their ``Requeued`` condition again, which races with the scheduler's first cycle: usually the
      workloads queued meanwhile go first (the model's order), in about one run in six the drained
      ones do.
    * Admission times are the ``now`` of the cycle; Kueue's are whole seconds of its clock, so two
      admissions of one event that straddle a second boundary may order preemption candidates of
      equal priority differently (by time in Kueue, by UID here).
"""

from __future__ import annotations

from topogov.domain.kueue_model.objects import (
    HOSTNAME,
    ClusterQueue,
    FlavorFungibility,
    FlavorQuotas,
    Node,
    NonTASPod,
    PodSet,
    Preemption,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Taint,
    Toleration,
    Topology,
    TopologyRequest,
    Workload,
    requests_from,
    requests_of,
)
from topogov.domain.kueue_model.simulator import Cluster, CycleResult, Eviction, Pending
from topogov.domain.kueue_model.state import Admitted, PodSetAdmission
from topogov.domain.kueue_model.tas import Placement, TASRequest, TopologyAssignment, find_assignment
from topogov.domain.kueue_model.topology import FlavorTree

KUEUE_VERSION = "v0.17.0"

__all__ = [
    "HOSTNAME",
    "KUEUE_VERSION",
    "Admitted",
    "Cluster",
    "ClusterQueue",
    "CycleResult",
    "Eviction",
    "FlavorFungibility",
    "FlavorQuotas",
    "FlavorTree",
    "Node",
    "NonTASPod",
    "Pending",
    "Placement",
    "PodSet",
    "PodSetAdmission",
    "Preemption",
    "ResourceFlavor",
    "ResourceGroup",
    "ResourceQuota",
    "TASRequest",
    "Taint",
    "Toleration",
    "Topology",
    "TopologyAssignment",
    "TopologyRequest",
    "Workload",
    "find_assignment",
    "requests_from",
    "requests_of",
]
