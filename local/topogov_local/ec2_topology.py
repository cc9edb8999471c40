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
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import re
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from xml.sax.saxutils import escape

__all__ = [
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

EC2_NS = "http://ec2.amazonaws.com/doc/2016-11-15/"
DEFAULT_ACCOUNT_ID = "123456789012"  # moto's default account
CONTROL_PREFIX = "/_topogov/ec2"

# --- documented facts ------------------------------------------------------------------------

# "Prerequisites for Amazon EC2 topology" (EC2 User Guide), instance types section.
THREE_LAYER_TYPES: frozenset[str] = frozenset(
    {
        "g6e.xlarge", "g6e.2xlarge", "g6e.4xlarge", "g6e.8xlarge", "g6e.12xlarge",
        "g6e.16xlarge", "g6e.24xlarge", "g6e.48xlarge",
        "g7e.2xlarge", "g7e.4xlarge", "g7e.8xlarge", "g7e.12xlarge", "g7e.24xlarge",
        "g7e.48xlarge",
        "hpc6a.48xlarge", "hpc6id.32xlarge",
        "hpc7g.4xlarge", "hpc7g.8xlarge", "hpc7g.16xlarge",
        "hpc7a.12xlarge", "hpc7a.24xlarge", "hpc7a.48xlarge", "hpc7a.96xlarge",
        "hpc8a.96xlarge",
        "p3dn.24xlarge", "p4d.24xlarge", "p4de.24xlarge",
        "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge", "p6e-gb200.36xlarge",
        "trn1.2xlarge", "trn1.32xlarge", "trn1n.32xlarge", "trn2.48xlarge", "trn2u.48xlarge",
    }
)  # fmt: skip
FOUR_LAYER_TYPES: frozenset[str] = frozenset({"p6-b200.48xlarge", "p6-b300.48xlarge"})
SUPPORTED_INSTANCE_TYPES: frozenset[str] = THREE_LAYER_TYPES | FOUR_LAYER_TYPES

# Same page, "AWS Regions" section (names mapped to codes).
SUPPORTED_REGIONS: frozenset[str] = frozenset(
    {
        "us-east-1", "us-east-2", "us-west-1", "us-west-2",
        "af-south-1",
        "ap-southeast-3", "ap-east-1", "ap-south-2", "ap-southeast-4", "ap-south-1",
        "ap-northeast-3", "ap-northeast-2", "ap-southeast-1", "ap-southeast-2", "ap-northeast-1",
        "ca-central-1",
        "eu-central-1", "eu-west-1", "eu-west-2", "eu-west-3", "eu-south-2", "eu-north-1",
        "eu-central-2",
        "il-central-1",
        "me-south-1", "me-central-1",
        "sa-east-1",
        "us-gov-west-1",
        "eusc-de-east-1",
    }
)  # fmt: skip

MAX_IDS = 100
MAX_GROUP_NAMES = 100
MAX_RESULTS_MIN = 1
MAX_RESULTS_MAX = 100
DEFAULT_MAX_RESULTS = 20
FILTER_NAMES = ("availability-zone", "instance-type", "zone-id")
_INSTANCE_ID_RE = re.compile(r"^i-(?:[0-9a-f]{8}|[0-9a-f]{17})$")

ENV_RATE = "TOPOGOV_EC2_TOPOLOGY_RATE"
ENV_BURST = "TOPOGOV_EC2_TOPOLOGY_BURST"
ENV_ENFORCE_REGIONS = "TOPOGOV_EC2_TOPOLOGY_ENFORCE_REGIONS"


# --- configuration ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Layout:
    """Tree shape: ``fanout[i]`` children per layer-``i`` node (``fanout[0]`` top-layer nodes in
    a full tree), ``per_leaf`` instances per bottom-layer node. ``len(fanout)`` is the layer
    count (3 or 4)."""

    fanout: tuple[int, ...]
    per_leaf: int

    def __post_init__(self) -> None:
        if len(self.fanout) not in (3, 4):
            raise ValueError("fanout needs 3 or 4 layers")
        if any(int(f) < 1 for f in self.fanout) or int(self.per_leaf) < 1:
            raise ValueError("fanout values and per_leaf must be >= 1")

    @property
    def depth(self) -> int:
        return len(self.fanout)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Layout:
        fanout = data.get("fanout")
        per_leaf = data.get("per_leaf")
        if not isinstance(fanout, list | tuple) or not all(
            isinstance(f, int) and not isinstance(f, bool) for f in fanout
        ):
            raise ValueError("layout.fanout must be a list of integers")
        if not isinstance(per_leaf, int) or isinstance(per_leaf, bool):
            raise ValueError("layout.per_leaf must be an integer")
        return cls(tuple(fanout), per_leaf)

    def to_json(self) -> dict[str, Any]:
        return {"fanout": list(self.fanout), "per_leaf": self.per_leaf}


DEFAULT_LAYOUTS: dict[int, Layout] = {3: Layout((2, 2, 4), 4), 4: Layout((1, 1, 1, 2), 2)}


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = float(raw)
    if value <= 0:
        raise ValueError(f"{name} must be > 0")
    return value


def _env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    return raw.strip().lower() not in ("0", "false", "no", "off")


@dataclass(slots=True)
class _Config:
    rate: float = 1.0
    burst: float = 1.0
    default_max_results: int = DEFAULT_MAX_RESULTS
    id_page_size: int = MAX_IDS
    enforce_regions: bool = True
    unknown_ids: str = "omit"  # or "error"
    layouts: dict[int, Layout] = field(default_factory=lambda: dict(DEFAULT_LAYOUTS))
    az_layouts: dict[tuple[str, int], Layout] = field(default_factory=dict)

    @classmethod
    def from_env(cls) -> _Config:
        return cls(
            rate=_env_float(ENV_RATE, 1.0),
            burst=_env_float(ENV_BURST, 1.0),
            enforce_regions=_env_bool(ENV_ENFORCE_REGIONS, True),
        )

    def layout_for(self, az: str, depth: int) -> Layout:
        return self.az_layouts.get((az, depth)) or self.layouts[depth]

    def to_json(self) -> dict[str, Any]:
        return {
            "rate": self.rate,
            "burst": self.burst,
            "default_max_results": self.default_max_results,
            "id_page_size": self.id_page_size,
            "enforce_regions": self.enforce_regions,
            "unknown_ids": self.unknown_ids,
            "layouts": [
                {"availability_zone": None, **layout.to_json()} for _, layout in sorted(self.layouts.items())
            ]
            + [
                {"availability_zone": az, **layout.to_json()}
                for (az, _), layout in sorted(self.az_layouts.items())
            ],
        }


# --- state -----------------------------------------------------------------------------------


class _TokenBucket:
    __slots__ = ("burst", "last", "rate", "tokens")

    def __init__(self, rate: float, burst: float) -> None:
        self.rate = rate
        self.burst = burst
        self.tokens = burst
        self.last = time.monotonic()

    def try_take(self) -> bool:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
        self.last = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False  # a refused call takes nothing


def _node_id(*parts: object) -> str:
    digest = hashlib.sha256("|".join(str(p) for p in parts).encode()).hexdigest()
    return "nn-" + digest[:17]


class _Tree:
    """Packs instances, in the order they are offered, into consecutive slots of one tree."""

    __slots__ = ("account", "az", "epoch", "layout", "next_slot", "region")

    def __init__(self, account: str, region: str, az: str, layout: Layout, epoch: int) -> None:
        self.account = account
        self.region = region
        self.az = az
        self.layout = layout
        self.epoch = epoch
        self.next_slot = 0

    def allocate(self) -> list[str]:
        slot = self.next_slot
        self.next_slot += 1
        leaf = slot // self.layout.per_leaf
        below = self.layout.fanout[1:]
        path_rev: list[int] = []
        for fan in reversed(below):
            path_rev.append(leaf % fan)
            leaf //= fan
        path = [leaf, *reversed(path_rev)]  # leaf now holds the top-layer branch index
        depth = self.layout.depth
        nodes = []
        for layer in range(1, depth + 1):
            prefix = ".".join(str(p) for p in path[:layer])
            parts: list[object] = [self.account, self.region, self.az, f"d{depth}", f"L{layer}", prefix]
            if self.epoch:
                parts.append(f"e{self.epoch}")
            nodes.append(_node_id(*parts))
        return nodes


@dataclass(slots=True)
class _Assignment:
    boot: tuple[int, Any]
    nodes: list[str]


@dataclass(slots=True)
class _RegionState:
    account: str
    region: str
    bucket: _TokenBucket
    trees: dict[tuple[str, int], _Tree] = field(default_factory=dict)
    epochs: dict[tuple[str, int], int] = field(default_factory=dict)
    assignments: dict[str, _Assignment] = field(default_factory=dict)
    explicit: dict[str, list[str]] = field(default_factory=dict)
    zone_ids: dict[str, str] | None = None
    # Incremental view of moto's reservations (append-only; a new dict means moto was reset):
    reservations_ref: Any = None
    seen_per_reservation: list[int] = field(default_factory=list)
    index: dict[str, tuple[int, Any]] = field(default_factory=dict)  # id -> (ordinal, instance)
    ordered: list[Any] = field(default_factory=list)  # instances in launch (discovery) order
    restarted: list[Any] = field(default_factory=list)  # started again since the last request

    def tree_for(self, az: str, depth: int, cfg: _Config) -> _Tree:
        layout = cfg.layout_for(az, depth)
        key = (az, depth)
        tree = self.trees.get(key)
        if tree is None or tree.layout != layout:
            # A changed layout starts a fresh tree (new node ids); existing assignments stay.
            epoch = self.epochs.get(key, -1) + 1
            self.epochs[key] = epoch
            tree = _Tree(self.account, self.region, az, layout, epoch)
            self.trees[key] = tree
        return tree

    def forget_automatic(self) -> None:
        self.trees.clear()
        self.epochs.clear()
        self.assignments.clear()
        self.zone_ids = None
        self.seen_per_reservation.clear()
        self.index.clear()
        self.ordered.clear()
        self.restarted.clear()


_LOCK = threading.RLock()
_CONFIG: _Config | None = None
_COUNTS = {"calls": 0, "throttled": 0}  # DescribeInstanceTopology requests answered / throttled
_REGIONS: dict[tuple[str, str], _RegionState] = {}
_INSTALLED = False


def _config() -> _Config:
    global _CONFIG
    if _CONFIG is None:
        _CONFIG = _Config.from_env()
    return _CONFIG


def _region_state(account: str, region: str) -> _RegionState:
    key = (account, region)
    state = _REGIONS.get(key)
    if state is None:
        cfg = _config()
        state = _RegionState(account, region, _TokenBucket(cfg.rate, cfg.burst))
        _REGIONS[key] = state
    return state


# --- public Python API -----------------------------------------------------------------------


def _normalise_nodes(instance_id: str, nodes: Any) -> list[str]:
    if not isinstance(nodes, list | tuple) or len(nodes) not in (3, 4):
        raise ValueError(f"placement for {instance_id} must be a list of 3 or 4 network node ids")
    if not all(isinstance(n, str) and n for n in nodes):
        raise ValueError(f"placement for {instance_id} must hold non-empty strings")
    return list(nodes)


def set_placement(
    account_id: str,
    region: str,
    placement: Mapping[str, Iterable[str] | None],
    *,
    replace: bool = False,
) -> int:
    """Pin instances to explicit network nodes (top layer first, 3 or 4 ids).

    ``None`` (or an empty list) for an instance removes its pin; with ``replace=True`` all pins
    of that account and region are dropped first. Returns the number of pins now set.
    """
    staged: dict[str, list[str] | None] = {}
    for instance_id, nodes in placement.items():
        if not isinstance(instance_id, str) or not instance_id:
            raise ValueError("instance ids must be non-empty strings")
        staged[instance_id] = None if not nodes else _normalise_nodes(instance_id, list(nodes))
    with _LOCK:
        state = _region_state(account_id, region)
        if replace:
            state.explicit.clear()
        for instance_id, nodes in staged.items():
            if nodes is None:
                state.explicit.pop(instance_id, None)
            else:
                state.explicit[instance_id] = nodes
        return len(state.explicit)


def clear_placement(account_id: str, region: str) -> None:
    """Drop every explicit pin of one account and region."""
    with _LOCK:
        _region_state(account_id, region).explicit.clear()


def get_placements(account_id: str, region: str) -> dict[str, Any]:
    """Current explicit pins and automatic assignments of one account and region."""
    with _LOCK:
        state = _REGIONS.get((account_id, region))
        if state is None:
            return {"explicit": {}, "automatic": {}}
        return {
            "explicit": {k: list(v) for k, v in state.explicit.items()},
            "automatic": {k: list(a.nodes) for k, a in state.assignments.items()},
        }


def set_layout(fanout: Iterable[int], per_leaf: int, availability_zone: str | None = None) -> None:
    """Set the tree shape for one AZ (or the default for all AZs) and ``len(fanout)`` layers."""
    layout = Layout(tuple(int(f) for f in fanout), int(per_leaf))
    with _LOCK:
        cfg = _config()
        if availability_zone:
            cfg.az_layouts[(availability_zone, layout.depth)] = layout
        else:
            cfg.layouts[layout.depth] = layout


def configure(
    *,
    rate: float | None = None,
    burst: float | None = None,
    default_max_results: int | None = None,
    id_page_size: int | None = None,
    enforce_regions: bool | None = None,
    unknown_ids: str | None = None,
    layouts: Iterable[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """Change the emulation at run time; returns the resulting configuration.

    Changing ``rate`` or ``burst`` refills every bucket to the new burst. ``layouts`` entries:
    ``{"fanout": [..3 or 4..], "per_leaf": n, "availability_zone": "us-east-1a" | None}``.
    """
    parsed_layouts: list[tuple[str | None, Layout]] = []
    for entry in layouts or ():
        parsed_layouts.append((entry.get("availability_zone") or None, Layout.from_json(entry)))
    for name, value in (("rate", rate), ("burst", burst)):
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int | float) or value <= 0
        ):
            raise ValueError(f"{name} must be a number > 0")
    if default_max_results is not None and (
        isinstance(default_max_results, bool)
        or not isinstance(default_max_results, int)
        or not MAX_RESULTS_MIN <= default_max_results <= MAX_RESULTS_MAX
    ):
        raise ValueError("default_max_results must be an integer in 1..100")
    if id_page_size is not None and (
        isinstance(id_page_size, bool)
        or not isinstance(id_page_size, int)
        or not 1 <= id_page_size <= MAX_IDS
    ):
        raise ValueError("id_page_size must be an integer in 1..100")
    if unknown_ids is not None and unknown_ids not in ("omit", "error"):
        raise ValueError("unknown_ids must be 'omit' or 'error'")
    if enforce_regions is not None and not isinstance(enforce_regions, bool):
        raise ValueError("enforce_regions must be a boolean")
    with _LOCK:
        cfg = _config()
        if rate is not None or burst is not None:
            cfg.rate = float(rate) if rate is not None else cfg.rate
            cfg.burst = float(burst) if burst is not None else cfg.burst
            for state in _REGIONS.values():
                state.bucket = _TokenBucket(cfg.rate, cfg.burst)
        if default_max_results is not None:
            cfg.default_max_results = default_max_results
        if id_page_size is not None:
            cfg.id_page_size = id_page_size
        if enforce_regions is not None:
            cfg.enforce_regions = enforce_regions
        if unknown_ids is not None:
            cfg.unknown_ids = unknown_ids
        for az, layout in parsed_layouts:
            if az:
                cfg.az_layouts[(az, layout.depth)] = layout
            else:
                cfg.layouts[layout.depth] = layout
        return cfg.to_json()


def get_config() -> dict[str, Any]:
    """The configuration, and the requests counted since the last reset (``calls``, ``throttled``)."""
    with _LOCK:
        return {**_config().to_json(), **_COUNTS}


def reset() -> None:
    """Forget all topology state and re-read the configuration from the environment."""
    global _CONFIG
    with _LOCK:
        _REGIONS.clear()
        _CONFIG = _Config.from_env()
        _COUNTS.update(calls=0, throttled=0)


# --- installation into moto ------------------------------------------------------------------


def is_installed() -> bool:
    return _INSTALLED


def install() -> None:
    """Register DescribeInstanceTopology on moto's EC2 responses (idempotent)."""
    global _INSTALLED
    with _LOCK:
        if _INSTALLED:
            return
        from moto.ec2.models.instances import Instance
        from moto.ec2.responses import EC2Response

        _config()  # read the environment once, now
        EC2Response.describe_instance_topology = _describe_instance_topology  # type: ignore[attr-defined]

        # moto does not record Placement.GroupName of RunInstances; keep it for GroupName.N.
        original_run = EC2Response.run_instances
        if not getattr(original_run, "_topogov", False):

            def run_instances(self: Any) -> Any:
                group_name = self._get_param("Placement.GroupName")
                result = original_run(self)
                reservation = getattr(result, "result", None)
                if group_name and reservation is not None:
                    for instance in getattr(reservation, "instances", ()):
                        if not instance.placement.group_name:
                            instance.placement.group_name = group_name
                return result

            run_instances._topogov = True  # type: ignore[attr-defined]
            EC2Response.run_instances = run_instances  # type: ignore[method-assign]

        # Count boots: a stopped instance that starts again lands on other hardware.
        original_start = Instance.start
        if not getattr(original_start, "_topogov", False):

            def start(self: Any) -> Any:
                previous = original_start(self)
                if getattr(previous, "name", "running") != "running":
                    self._topogov_boot = getattr(self, "_topogov_boot", 0) + 1
                    _note_restart(self)
                return previous

            start._topogov = True  # type: ignore[attr-defined]
            Instance.start = start  # type: ignore[method-assign]

        _accept_supported_instance_types()
        _INSTALLED = True


def _accept_supported_instance_types() -> None:
    """With MOTO_EC2_ENABLE_INSTANCE_TYPE_VALIDATION on, moto rejects types missing from its
    offerings data (e.g. p6e-gb200.36xlarge); add the topology types so RunInstances takes them.
    Without that setting moto accepts any type and nothing is changed."""
    from moto import settings

    if not settings.EC2_ENABLE_INSTANCE_TYPE_VALIDATION:
        return
    from moto.ec2.models.instance_types import INSTANCE_TYPE_OFFERINGS

    wanted = SUPPORTED_INSTANCE_TYPES | {"c5.large"}
    for region, offers in INSTANCE_TYPE_OFFERINGS.get("region", {}).items():
        have = {o["InstanceType"] for o in offers}
        offers.extend(
            {"InstanceType": t, "Location": region, "LocationType": "region"} for t in sorted(wanted - have)
        )
    for offers in INSTANCE_TYPE_OFFERINGS.get("availability-zone", {}).values():
        by_zone: dict[str, set[str]] = {}
        for o in offers:
            by_zone.setdefault(o["Location"], set()).add(o["InstanceType"])
        for zone, have in by_zone.items():
            offers.extend(
                {"InstanceType": t, "Location": zone, "LocationType": "availability-zone"}
                for t in sorted(wanted - have)
            )


# --- the action ------------------------------------------------------------------------------


class _ApiError(Exception):
    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status


def _error_response(error: _ApiError) -> tuple[str, dict[str, Any]]:
    request_id = str(uuid.uuid4())
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Response><Errors><Error><Code>{escape(error.code)}</Code>"
        f"<Message>{escape(error.message)}</Message></Error></Errors>"
        f"<RequestID>{request_id}</RequestID></Response>"
    )
    return body, {"status": error.status, "Content-Type": "text/xml;charset=UTF-8"}


def _wildcard(value: str) -> re.Pattern[str]:
    out = []
    for ch in value:
        if ch == "*":
            out.append(".*")
        elif ch == "?":
            out.append(".?")
        else:
            out.append(re.escape(ch))
    return re.compile("".join(out), re.DOTALL)


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, list | tuple):
        return list(value)
    return [value]


def _encode_token(ordinal: int) -> str:
    raw = json.dumps({"v": 1, "o": ordinal}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_token(token: str) -> int:
    try:
        padded = token + "=" * (-len(token) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode()))
        ordinal = data["o"]
        if data.get("v") != 1 or not isinstance(ordinal, int) or ordinal < 0:
            raise ValueError
        return ordinal
    except (ValueError, KeyError, TypeError, binascii.Error, UnicodeDecodeError) as exc:
        raise _ApiError("InvalidParameterValue", "The NextToken is invalid") from exc


@dataclass(slots=True)
class _Query:
    instance_ids: list[str]
    group_names: set[str]
    filters: dict[str, list[re.Pattern[str]]]
    page_size: int
    after: int


def _parse_query(response: Any, cfg: _Config) -> _Query:
    instance_ids = [str(i) for i in _as_list(response._get_param("InstanceIds"))]
    group_names = [str(g) for g in _as_list(response._get_param("GroupNames"))]
    max_results = response._get_param("MaxResults")
    if len(instance_ids) > MAX_IDS:
        raise _ApiError("InvalidParameterValue", "instance-ids cannot contain over 100 values.")
    if len(group_names) > MAX_GROUP_NAMES:
        raise _ApiError("InvalidParameterValue", "group-names cannot contain over 100 values.")
    if max_results is not None:
        if instance_ids:
            raise _ApiError(
                "InvalidParameterCombination",
                "The parameter instancesSet cannot be used with the parameter maxResults",
            )
        try:
            max_results = int(max_results)
        except (TypeError, ValueError) as exc:
            raise _ApiError(
                "InvalidParameterValue", f"Value ( {max_results} ) for parameter maxResults is invalid."
            ) from exc
        if not MAX_RESULTS_MIN <= max_results <= MAX_RESULTS_MAX:
            raise _ApiError(
                "InvalidParameterValue",
                f"Value ( {max_results} ) for parameter maxResults is invalid. "
                f"Expecting a value between {MAX_RESULTS_MIN} and {MAX_RESULTS_MAX}.",
            )
    filters: dict[str, list[re.Pattern[str]]] = {}
    for flt in _as_list(response._get_param("Filters")):
        name = flt.get("Name") if isinstance(flt, Mapping) else None
        if name not in FILTER_NAMES:
            raise _ApiError("InvalidParameterValue", f"The filter '{name or 'null'}' is invalid")
        values = [str(v) for v in _as_list(flt.get("Values"))]
        filters.setdefault(name, []).extend(_wildcard(v) for v in values)
    token = response._get_param("NextToken")
    after = _decode_token(str(token)) if token else -1
    if cfg.unknown_ids == "error":
        for instance_id in instance_ids:
            if not _INSTANCE_ID_RE.match(instance_id):
                raise _ApiError("InvalidInstanceID.Malformed", f'Invalid id: "{instance_id}"')
    return _Query(
        instance_ids=instance_ids,
        group_names=set(group_names),
        filters=filters,
        page_size=(
            max_results
            if max_results is not None
            else (cfg.id_page_size if instance_ids else cfg.default_max_results)
        ),
        after=after,
    )


def _matches(patterns: list[re.Pattern[str]] | None, value: str) -> bool:
    if not patterns:
        return True
    return any(p.fullmatch(value) for p in patterns)


def _boot_key(instance: Any) -> tuple[int, Any]:
    return (getattr(instance, "_topogov_boot", 0), getattr(instance, "launch_time", None))


def _note_restart(instance: Any) -> None:
    """Called from moto's Instance.start: queue the instance to be packed again, in start order."""
    backend = getattr(instance, "ec2_backend", None)
    key = (getattr(backend, "account_id", None), getattr(backend, "region_name", None))
    with _LOCK:
        state = _REGIONS.get(key)  # type: ignore[arg-type]
        if state is not None:
            state.restarted.append(instance)


def _ensure_assigned(state: _RegionState, instance: Any, cfg: _Config) -> None:
    """Pack a running supported instance that has no current (same boot) assignment."""
    itype = instance.instance_type
    if itype not in SUPPORTED_INSTANCE_TYPES or instance._state.name != "running":
        return
    if instance.id in state.explicit:
        return
    boot = _boot_key(instance)
    current = state.assignments.get(instance.id)
    if current is not None and current.boot == boot:
        return
    depth = 4 if itype in FOUR_LAYER_TYPES else 3
    tree = state.tree_for(instance.placement.zone or "", depth, cfg)
    state.assignments[instance.id] = _Assignment(boot, tree.allocate())


def _refresh(state: _RegionState, backend: Any, cfg: _Config) -> None:
    """Catch up with moto: index instances launched since the last request (launch order) and
    pack them; re-pack instances started again. Costs O(reservations + new instances)."""
    reservations = backend.reservations
    if state.reservations_ref is not reservations:
        if state.reservations_ref is not None:
            state.forget_automatic()  # moto was reset: its instances are gone
        state.reservations_ref = reservations
    if state.zone_ids is None:
        state.zone_ids = {z.name: z.zone_id for z in backend.describe_availability_zones()}
    seen = state.seen_per_reservation
    for position, reservation in enumerate(list(reservations.values())):
        instances = reservation.instances
        count = len(instances)
        if position == len(seen):
            seen.append(0)
        if count <= seen[position]:
            continue
        for instance in instances[seen[position] : count]:
            state.index[instance.id] = (len(state.ordered), instance)
            state.ordered.append(instance)
            _ensure_assigned(state, instance, cfg)
        seen[position] = count
    if state.restarted:
        restarted, state.restarted = state.restarted, []
        for instance in restarted:
            _ensure_assigned(state, instance, cfg)


def _render(items: list[tuple[Any, list[str], str]], next_token: str | None) -> str:
    parts = [
        '<?xml version="1.0" encoding="UTF-8"?>\n',
        f'<DescribeInstanceTopologyResponse xmlns="{EC2_NS}">',
        f"<requestId>{uuid.uuid4()}</requestId>",
        "<instanceSet>",
    ]
    for instance, nodes, zone_id in items:
        parts.append("<item>")
        parts.append(f"<instanceId>{escape(instance.id)}</instanceId>")
        parts.append(f"<instanceType>{escape(instance.instance_type)}</instanceType>")
        group = instance.placement.group_name
        if group:
            parts.append(f"<groupName>{escape(group)}</groupName>")
        parts.append("<networkNodeSet>")
        parts.extend(f"<item>{escape(n)}</item>" for n in nodes)
        parts.append("</networkNodeSet>")
        parts.append(f"<availabilityZone>{escape(instance.placement.zone or '')}</availabilityZone>")
        if zone_id:
            parts.append(f"<zoneId>{escape(zone_id)}</zoneId>")
        parts.append("</item>")
    parts.append("</instanceSet>")
    if next_token:
        parts.append(f"<nextToken>{escape(next_token)}</nextToken>")
    parts.append("</DescribeInstanceTopologyResponse>")
    return "".join(parts)


def _describe(response: Any) -> tuple[str, dict[str, Any]]:
    account = response.current_account
    region = response.region
    with _LOCK:
        cfg = _config()
        if cfg.enforce_regions and region not in SUPPORTED_REGIONS:
            raise _ApiError(
                "UnsupportedOperation", "The functionality you requested is not available in this region."
            )
        state = _region_state(account, region)
        _COUNTS["calls"] += 1
        if not state.bucket.try_take():
            _COUNTS["throttled"] += 1
            raise _ApiError("RequestLimitExceeded", "Request limit exceeded.", 503)
    if response._get_param("DryRun", False):
        raise _ApiError("DryRunOperation", "Request would have succeeded, but DryRun flag is set.", 412)
    query = _parse_query(response, cfg)
    backend = response.ec2_backend
    with _LOCK:
        _refresh(state, backend, cfg)
        index, ordered = state.index, state.ordered
        if query.instance_ids:
            wanted: list[tuple[int, Any]] = []
            seen: set[str] = set()
            for instance_id in query.instance_ids:
                if instance_id in seen:
                    continue
                seen.add(instance_id)
                hit = index.get(instance_id)
                if hit is not None:
                    if hit[0] > query.after:
                        wanted.append(hit)
                elif cfg.unknown_ids == "error":
                    raise _ApiError(
                        "InvalidInstanceID.NotFound", f"The instance ID '{instance_id}' does not exist"
                    )
            wanted.sort(key=lambda pair: pair[0])
            candidates: Iterable[tuple[int, Any]] = wanted
        else:
            start = query.after + 1
            candidates = zip(range(start, len(ordered)), ordered[start:], strict=True)
        zone_ids = state.zone_ids or {}
        page: list[tuple[Any, list[str], str]] = []
        next_token: str | None = None
        page_last = -1
        for ordinal, instance in candidates:
            itype = instance.instance_type
            if itype not in SUPPORTED_INSTANCE_TYPES or instance._state.name != "running":
                continue
            az = instance.placement.zone or ""
            zone_id = zone_ids.get(az, "")
            if not (
                _matches(query.filters.get("availability-zone"), az)
                and _matches(query.filters.get("instance-type"), itype)
                and _matches(query.filters.get("zone-id"), zone_id)
            ):
                continue
            if query.group_names and instance.placement.group_name not in query.group_names:
                continue
            if len(page) == query.page_size:
                next_token = _encode_token(page_last)
                break
            nodes = state.explicit.get(instance.id)
            if nodes is None:
                _ensure_assigned(state, instance, cfg)  # e.g. a pin was just removed
                nodes = state.assignments[instance.id].nodes
            page.append((instance, list(nodes), zone_id))
            page_last = ordinal
        body = _render(page, next_token)
    return body, {"status": 200, "Content-Type": "text/xml;charset=UTF-8"}


def _describe_instance_topology(self: Any) -> tuple[str, dict[str, Any]]:
    """moto EC2Response method for Action=DescribeInstanceTopology."""
    try:
        return _describe(self)
    except _ApiError as error:
        return _error_response(error)


# --- control requests (served by the launcher's WSGI middleware) -----------------------------


def handle_control_request(method: str, path: str, query: Mapping[str, str], body: bytes) -> tuple[int, Any]:
    """Answer ``/_topogov/ec2/...`` control requests; returns (HTTP status, JSON-able body).

    * ``GET  /_topogov/ec2/config`` -> current configuration
    * ``POST /_topogov/ec2/config`` ``{"rate", "burst", "default_max_results",
      "enforce_regions", "unknown_ids", "layouts": [{"fanout", "per_leaf",
      "availability_zone"?}]}`` (all optional) -> resulting configuration
    * ``POST /_topogov/ec2/placement`` ``{"region", "account_id"?, "placement":
      {instance_id: [nn, nn, nn(, nn)] | null}, "replace"?}``
    * ``GET  /_topogov/ec2/placement?region=..&account_id=..`` -> explicit and automatic nodes
    * ``POST /_topogov/ec2/reset`` -> forget all topology state, configuration from env
    """
    route = path[len(CONTROL_PREFIX) :].rstrip("/") if path.startswith(CONTROL_PREFIX) else None
    try:
        payload: Any = json.loads(body.decode() or "{}") if method == "POST" else {}
        if not isinstance(payload, dict):
            raise ValueError("body must be a JSON object")
        if route == "/config":
            if method == "GET":
                return 200, get_config()
            if method == "POST":
                unknown = set(payload) - {
                    "rate", "burst", "default_max_results", "id_page_size", "enforce_regions",
                    "unknown_ids", "layouts",
                }  # fmt: skip
                if unknown:
                    raise ValueError(f"unknown config keys: {sorted(unknown)}")
                return 200, configure(**payload)
        elif route == "/placement":
            if method == "GET":
                region = query.get("region") or "us-east-1"
                account = query.get("account_id") or DEFAULT_ACCOUNT_ID
                return 200, get_placements(account, region)
            if method == "POST":
                asked = payload.get("region")
                if not isinstance(asked, str) or not asked:
                    raise ValueError("region is required")
                placement = payload.get("placement")
                if not isinstance(placement, dict):
                    raise ValueError("placement must be an object {instance_id: [network nodes]}")
                count = set_placement(
                    str(payload.get("account_id") or DEFAULT_ACCOUNT_ID),
                    asked,
                    placement,
                    replace=bool(payload.get("replace", False)),
                )
                return 200, {"ok": True, "pinned": count}
        elif route == "/reset" and method == "POST":
            reset()
            return 200, {"ok": True}
        else:
            return 404, {"error": f"no control route {method} {path}"}
        return 405, {"error": f"method {method} not allowed on {path}"}
    except (ValueError, TypeError) as exc:
        return 400, {"error": str(exc)}
