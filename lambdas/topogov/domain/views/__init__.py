"""Typed views of the Kubernetes objects the service reads: made once, in the adapters.

An adapter turns each object the API server returns into its view (``JobView.from_api(body)``);
the logic and the rest of the domain read ``job.uid``, ``workload.conditions`` or ``cq.flavor_names``
and never index a raw body (``tests/unit/test_structure.py`` keeps it so). This package is the one
place, besides the renderers (``domain/kueue.py`` renders the Kueue objects, ``domain/jobs.py`` the
Job manifest and checks a submitted one), that reads Kubernetes JSON.

Why dataclasses with slots, filled eagerly (``common.view``: frozen for mypy, plain at run time),
and not TypedDicts with accessor classes (kopf's ``RawBody`` and ``Body``): mypy strict checks every
field where it is read and refuses a write to one, and each object is read once, where it arrives
(the reconcile pass reads each of tens of thousands of pods once), so nothing would be gained by
reading lazily. Only what some reader uses is kept. The cost is the objects: reading the 1,333
Workloads and Jobs of ``topogov bench estimate --nodes 1000`` into the model's state takes 42-45 ms
of CPU instead of 32-37 ms reading the JSON directly, about 2 % of one start estimate and within its
run-to-run spread (with frozen dataclasses at run time it was 56-65 ms).

Where a body must pass through whole, its view keeps it as the explicit field ``raw``, used only
for that: the Job the API answers a submission with (``JobView.raw``), and the governor's objects,
which it compares field by field with what it renders and writes back
(``ObjectView.raw``: ``logic/governor/drift.py``). Nothing else reads ``raw``.

The modules: :mod:`.common` (conditions, the parts of a body every view reads),
:mod:`.batch` (Pod, pod spec, Job), :mod:`.workload` (Kueue's Workload), :mod:`.objects` (what the
governor manages: Namespace, Topology, ResourceFlavor, Cohort, WorkloadPriorityClass, ClusterQueue,
LocalQueue), :mod:`.nodes` (Node).
"""
