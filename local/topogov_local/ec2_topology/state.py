"""The emulation's configuration (environment and control requests), its per-account, per-Region
state (network trees, assignments, the request bucket), and the Python API the tests use."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from topogov_local.ec2_topology.facts import (
    DEFAULT_MAX_RESULTS,
    ENV_BURST,
    ENV_ENFORCE_REGIONS,
    ENV_RATE,
    MAX_IDS,
    MAX_RESULTS_MAX,
    MAX_RESULTS_MIN,
)

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
class Config:
    rate: float = 1.0
    burst: float = 1.0
    default_max_results: int = DEFAULT_MAX_RESULTS
    id_page_size: int = MAX_IDS
    enforce_regions: bool = True
    unknown_ids: str = "omit"  # or "error"
    layouts: dict[int, Layout] = field(default_factory=lambda: dict(DEFAULT_LAYOUTS))
    az_layouts: dict[tuple[str, int], Layout] = field(default_factory=dict)

    @classmethod
    def from_env(cls) -> Config:
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
class Assignment:
    boot: tuple[int, Any]
    nodes: list[str]


@dataclass(slots=True)
class RegionState:
    account: str
    region: str
    bucket: _TokenBucket
    trees: dict[tuple[str, int], _Tree] = field(default_factory=dict)
    epochs: dict[tuple[str, int], int] = field(default_factory=dict)
    assignments: dict[str, Assignment] = field(default_factory=dict)
    explicit: dict[str, list[str]] = field(default_factory=dict)
    zone_ids: dict[str, str] | None = None
    # Incremental view of moto's reservations (append-only; a new dict means moto was reset):
    reservations_ref: Any = None
    seen_per_reservation: list[int] = field(default_factory=list)
    index: dict[str, tuple[int, Any]] = field(default_factory=dict)  # id -> (ordinal, instance)
    ordered: list[Any] = field(default_factory=list)  # instances in launch (discovery) order
    restarted: list[Any] = field(default_factory=list)  # started again since the last request

    def tree_for(self, az: str, depth: int, cfg: Config) -> _Tree:
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


LOCK = threading.RLock()
_CONFIG: Config | None = None
COUNTS = {"calls": 0, "throttled": 0}  # DescribeInstanceTopology requests answered / throttled
REGIONS: dict[tuple[str, str], RegionState] = {}


def current_config() -> Config:
    global _CONFIG
    if _CONFIG is None:
        _CONFIG = Config.from_env()
    return _CONFIG


def region_state(account: str, region: str) -> RegionState:
    key = (account, region)
    state = REGIONS.get(key)
    if state is None:
        cfg = current_config()
        state = RegionState(account, region, _TokenBucket(cfg.rate, cfg.burst))
        REGIONS[key] = state
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
    with LOCK:
        state = region_state(account_id, region)
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
    with LOCK:
        region_state(account_id, region).explicit.clear()


def get_placements(account_id: str, region: str) -> dict[str, Any]:
    """Current explicit pins and automatic assignments of one account and region."""
    with LOCK:
        state = REGIONS.get((account_id, region))
        if state is None:
            return {"explicit": {}, "automatic": {}}
        return {
            "explicit": {k: list(v) for k, v in state.explicit.items()},
            "automatic": {k: list(a.nodes) for k, a in state.assignments.items()},
        }


def set_layout(fanout: Iterable[int], per_leaf: int, availability_zone: str | None = None) -> None:
    """Set the tree shape for one AZ (or the default for all AZs) and ``len(fanout)`` layers."""
    layout = Layout(tuple(int(f) for f in fanout), int(per_leaf))
    with LOCK:
        cfg = current_config()
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
    with LOCK:
        cfg = current_config()
        if rate is not None or burst is not None:
            cfg.rate = float(rate) if rate is not None else cfg.rate
            cfg.burst = float(burst) if burst is not None else cfg.burst
            for state in REGIONS.values():
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
    with LOCK:
        return {**current_config().to_json(), **COUNTS}


def reset() -> None:
    """Forget all topology state and re-read the configuration from the environment."""
    global _CONFIG
    with LOCK:
        REGIONS.clear()
        _CONFIG = Config.from_env()
        COUNTS.update(calls=0, throttled=0)
