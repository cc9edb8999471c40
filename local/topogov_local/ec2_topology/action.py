"""DescribeInstanceTopology itself, added to moto's EC2 responses, and the launcher's control requests."""

from __future__ import annotations

import base64
import binascii
import json
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape

from topogov_local.ec2_topology.facts import (
    CONTROL_PREFIX,
    DEFAULT_ACCOUNT_ID,
    EC2_NS,
    FILTER_NAMES,
    FOUR_LAYER_TYPES,
    INSTANCE_ID_RE,
    MAX_GROUP_NAMES,
    MAX_IDS,
    MAX_RESULTS_MAX,
    MAX_RESULTS_MIN,
    SUPPORTED_INSTANCE_TYPES,
    SUPPORTED_REGIONS,
)
from topogov_local.ec2_topology.state import (
    COUNTS,
    LOCK,
    REGIONS,
    Assignment,
    Config,
    RegionState,
    configure,
    current_config,
    get_config,
    get_placements,
    region_state,
    reset,
    set_placement,
)

# --- installation into moto ------------------------------------------------------------------

_INSTALLED = False


def is_installed() -> bool:
    return _INSTALLED


def install() -> None:
    """Register DescribeInstanceTopology on moto's EC2 responses (idempotent)."""
    global _INSTALLED
    with LOCK:
        if _INSTALLED:
            return
        from moto.ec2.models.instances import Instance
        from moto.ec2.responses import EC2Response

        current_config()  # read the environment once, now
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


def _parse_query(response: Any, cfg: Config) -> _Query:
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
            if not INSTANCE_ID_RE.match(instance_id):
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
    with LOCK:
        state = REGIONS.get(key)  # type: ignore[arg-type]
        if state is not None:
            state.restarted.append(instance)


def _ensure_assigned(state: RegionState, instance: Any, cfg: Config) -> None:
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
    state.assignments[instance.id] = Assignment(boot, tree.allocate())


def _refresh(state: RegionState, backend: Any, cfg: Config) -> None:
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
    with LOCK:
        cfg = current_config()
        if cfg.enforce_regions and region not in SUPPORTED_REGIONS:
            raise _ApiError(
                "UnsupportedOperation", "The functionality you requested is not available in this region."
            )
        state = region_state(account, region)
        COUNTS["calls"] += 1
        if not state.bucket.try_take():
            COUNTS["throttled"] += 1
            raise _ApiError("RequestLimitExceeded", "Request limit exceeded.", 503)
    if response._get_param("DryRun", False):
        raise _ApiError("DryRunOperation", "Request would have succeeded, but DryRun flag is set.", 412)
    query = _parse_query(response, cfg)
    backend = response.ec2_backend
    with LOCK:
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


def answers_of(account: str, region: str) -> dict[str, Any]:
    """``{"instances": {id: {"network_nodes", "zone_id", "instance_type"}}}``: DescribeInstanceTopology's
    answer for every running instance of a supported type, not counted and not taken from the bucket.
    It stands for what EKS reads to label the nodes itself (EKS User Guide, "Place distributed AI/ML
    workloads with network topology labels"): the same network nodes, so a local stack can start with
    nodes labelled as EKS labels them (``topogov local --labelled-by-eks``)."""
    from moto.ec2.models import ec2_backends

    backend = ec2_backends[account][region]
    out: dict[str, Any] = {}
    with LOCK:
        cfg = current_config()
        state = region_state(account, region)
        _refresh(state, backend, cfg)
        zone_ids = state.zone_ids or {}
        for instance in state.ordered:
            if instance.instance_type not in SUPPORTED_INSTANCE_TYPES or instance._state.name != "running":
                continue
            nodes = state.explicit.get(instance.id)
            if nodes is None:
                _ensure_assigned(state, instance, cfg)
                nodes = state.assignments[instance.id].nodes
            out[instance.id] = {
                "network_nodes": list(nodes),
                "zone_id": zone_ids.get(instance.placement.zone or "", ""),
                "instance_type": instance.instance_type,
            }
    return {"instances": out}


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
    * ``GET  /_topogov/ec2/topology?region=..&account_id=..`` -> what DescribeInstanceTopology would
      answer for every running instance, outside the request bucket (the labels EKS writes)
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
        elif route == "/topology" and method == "GET":
            region = query.get("region") or "us-east-1"
            return 200, answers_of(query.get("account_id") or DEFAULT_ACCOUNT_ID, region)
        elif route == "/reset" and method == "POST":
            reset()
            return 200, {"ok": True}
        else:
            return 404, {"error": f"no control route {method} {path}"}
        return 405, {"error": f"method {method} not allowed on {path}"}
    except (ValueError, TypeError) as exc:
        return 400, {"error": str(exc)}
