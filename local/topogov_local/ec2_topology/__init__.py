"""Emulation of EC2 ``DescribeInstanceTopology`` for a moto (5.2) server.

moto does not implement the action. :func:`install` adds a ``describe_instance_topology``
method to moto's ``EC2Response`` class (moto dispatches ``Action=DescribeInstanceTopology`` to
it by name) and answers in EC2's own XML, which botocore parses with its EC2 model. Nothing
happens at import time.

Rules emulated (sources: botocore's ec2 ``service-2.json`` model, the EC2 API reference page
``API_DescribeInstanceTopology`` and the EC2 User Guide pages "Prerequisites for Amazon EC2
topology" / "How Amazon EC2 topology works"):

* ``InstanceId.N``: at most 100 -> ``InvalidParameterValue`` "instance-ids cannot contain over
  100 values." (message as reported by a real account in aws-samples/ec2-topology-aware-for-slurm#4).
  ``GroupName.N``: at most 100.
* ``MaxResults``: 1..100 (model min/max); default page size 20; cannot be combined with
  ``InstanceId.N`` -> ``InvalidParameterCombination``. A request naming instance ids is answered
  in one page (``id_page_size``, default 100), as EC2's other Describe actions that refuse
  ``MaxResults`` beside ids do (DescribeInstances): the documentation's "Default: 20" is read as
  the page size of listings. The docs do not settle it, so ``configure(id_page_size=20)`` pages id
  requests too, and the labeler follows ``NextToken`` either way (a test covers both).
* Unknown, malformed, stopped or unsupported ids are absent (no error is documented; AWS's
  cloud-provider-aws treats an empty answer as "type unsupported"). ``configure(unknown_ids=
  "error")`` answers ``InvalidInstanceID.Malformed`` / ``InvalidInstanceID.NotFound`` instead.
* Filters ``availability-zone``, ``instance-type``, ``zone-id``; ``*`` matches zero or more
  characters, ``?`` zero or one; values of one filter are OR-ed, filters are AND-ed.
* Only ``running`` instances of the documented instance types appear; anything else asked for
  (stopped, unsupported type, unknown id) is simply absent.
* ``NetworkNodes`` top layer first: 3 nodes, 4 for p6-b200.48xlarge / p6-b300.48xlarge.
  Node ids are hashed per account ("The nodes are hashed based on your account").
* Own request bucket per account and region (token bucket); an empty bucket answers HTTP 503
  ``RequestLimitExceeded`` / "Request limit exceeded." and does not take a token.
* Regions outside the documented list answer ``UnsupportedOperation`` (switchable).

Placement model: per (account, region), per Availability Zone and per layer count, instances
are packed in launch order into a tree (fan-out per layer, instances per leaf); a full tree
opens another top-layer branch. Assignments are sticky: the same running instance always gets
the same nodes, until it is stopped and started again (then it is packed into the next free
slot). Explicit placement (:func:`set_placement`) overrides the packing.

The package: :mod:`.facts` (what AWS documents: supported types and Regions), :mod:`.state`
(configuration, the network trees and the Python API the tests and the launcher use), :mod:`.action`
(the action itself, its installation into moto, and the control requests).
"""

from __future__ import annotations

from topogov_local.ec2_topology.action import handle_control_request, install, is_installed
from topogov_local.ec2_topology.facts import (
    CONTROL_PREFIX,
    DEFAULT_ACCOUNT_ID,
    FOUR_LAYER_TYPES,
    SUPPORTED_INSTANCE_TYPES,
    SUPPORTED_REGIONS,
    THREE_LAYER_TYPES,
)
from topogov_local.ec2_topology.state import (
    Layout,
    clear_placement,
    configure,
    get_config,
    get_placements,
    reset,
    set_layout,
    set_placement,
)

__all__ = [
    "CONTROL_PREFIX",
    "DEFAULT_ACCOUNT_ID",
    "FOUR_LAYER_TYPES",
    "SUPPORTED_INSTANCE_TYPES",
    "SUPPORTED_REGIONS",
    "THREE_LAYER_TYPES",
    "Layout",
    "clear_placement",
    "configure",
    "get_config",
    "get_placements",
    "handle_control_request",
    "install",
    "is_installed",
    "reset",
    "set_layout",
    "set_placement",
]
