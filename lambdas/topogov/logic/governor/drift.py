"""How a live Kueue object differs from what Topogov renders (pure): the drift rules, the hash that
tells a hand edit from a policy change, the corrected object, and keeping a flavor in a live
Topology with the levels it needs (see the package docstring).

Objects come as views (``domain/views/objects.py``), the rendered ones and the live ones alike. The
comparison walks the rendered body field by field against the live one, and the corrected object
is the live body with the rendered fields: the two places that read a view's ``raw``."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from decimal import InvalidOperation
from typing import Any, cast

from topogov.domain.kueue import ApiVersion, topology_object
from topogov.domain.labels import MANAGED_BY, MANAGED_BY_LABEL, RENDERED_ANNOTATION
from topogov.domain.quantity import parse_quantity
from topogov.domain.views.objects import (
    ClusterQueueView,
    ObjectView,
    ResourceFlavorView,
    TopologyView,
    object_view,
)
from topogov.logic.governor.plan import EXACT_UNDER, QUANTITY_FIELDS

Ref = tuple[str, str, str | None]  # (kind, name, namespace)
OWN_FIELDS = ("apiVersion", "kind", "metadata")  # the rest of a body is what is compared and written

# --- drift (pure) ------------------------------------------------------------------------------------


def owned(obj: ObjectView | None) -> bool:
    return obj is not None and obj.labels.get(MANAGED_BY_LABEL) == MANAGED_BY


def shown(value: Any) -> str:
    if value is None:
        return "(absent)"
    text = json.dumps(value, separators=(",", ":"), sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."


def _same_quantity(a: Any, b: Any) -> bool:
    try:
        return parse_quantity(a) == parse_quantity(b)
    except (InvalidOperation, ValueError, TypeError):
        return False


def _compare(want: Any, have: Any, path: str, out: list[str], exact: bool) -> None:
    if isinstance(want, Mapping):
        if not isinstance(have, Mapping):
            out.append(f"{path}: {shown(have)} -> {shown(want)}")
            return
        for key, value in want.items():
            sub = f"{path}.{key}" if path else key
            _compare(value, have.get(key), sub, out, exact or key == EXACT_UNDER)
        if exact:
            for key in sorted(set(have) - set(want)):
                out.append(f"{path}.{key}: {shown(have[key])} -> (absent)")
        return
    if isinstance(want, list):
        if not isinstance(have, list) or len(have) != len(want):
            out.append(f"{path}: {shown(have)} -> {shown(want)}")
            return
        for i, (w, h) in enumerate(zip(want, have, strict=True)):
            label = w["name"] if isinstance(w, Mapping) and isinstance(w.get("name"), str) else i
            _compare(w, h, f"{path}[{label}]", out, exact)
        return
    if want == have and type(want) is type(have):
        return
    if path.rsplit(".", 1)[-1] in QUANTITY_FIELDS and _same_quantity(want, have):
        return
    out.append(f"{path}: {shown(have)} -> {shown(want)}")


def drift(desired: ObjectView, current: ObjectView) -> list[str]:
    """How ``current`` differs from ``desired`` in what Topogov renders, one line per field."""
    out: list[str] = []
    have_labels = current.labels
    for key, value in desired.labels.items():
        if have_labels.get(key) != value:
            out.append(f"metadata.labels.{key}: {shown(have_labels.get(key))} -> {shown(value)}")
    for key, value in desired.raw.items():
        if key not in OWN_FIELDS:
            _compare(value, current.raw.get(key), key, out, key == EXACT_UNDER)
    return out


def rendered_hash(desired: ObjectView) -> str:
    body = {k: v for k, v in desired.raw.items() if k != "metadata"}
    body["labels"] = dict(desired.labels)
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def stamped(desired: ObjectView) -> dict[str, Any]:
    """The body of ``desired`` carrying the hash of itself (as created)."""
    annotations = {**desired.annotations, RENDERED_ANNOTATION: rendered_hash(desired)}
    return {**desired.raw, "metadata": desired.metadata_with(annotations=annotations)}


def edited_by_hand(desired: ObjectView, current: ObjectView) -> bool:
    """True when Topogov last wrote exactly this rendering: the difference was made by someone else
    (False: the policy or the fleet changed what Topogov renders)."""
    return current.annotations.get(RENDERED_ANNOTATION) == rendered_hash(desired)


def corrected(desired: ObjectView, current: ObjectView) -> dict[str, Any]:
    """The body to PUT: the live metadata (resourceVersion, other labels and annotations) with
    Topogov's labels, and every rendered top-level field as rendered."""
    meta = current.metadata_with(
        labels={**current.labels, **desired.labels},
        annotations={**current.annotations, RENDERED_ANNOTATION: rendered_hash(desired)},
    )
    obj: dict[str, Any] = {"apiVersion": desired.api_version, "kind": desired.kind, "metadata": meta}
    for key, value in desired.raw.items():
        if key not in OWN_FIELDS:
            obj[key] = value
    return obj


def to_create(desired: ObjectView) -> dict[str, Any]:
    """The body to create: the rendered object stamped with its hash (a Namespace as rendered: it
    is the team's once created, never compared again)."""
    return dict(desired.raw) if desired.kind == "Namespace" else stamped(desired)


def detached(cq: ClusterQueueView, flavor: str) -> dict[str, Any]:
    """The body to PUT: the live queue ``cq``, whole, without ``flavor``."""
    return dict(cq.without_flavors({flavor}).raw)


def terminating(obj: ObjectView | None) -> bool:
    return obj is not None and obj.deleting


def _levels(topology: ObjectView | None) -> tuple[str, ...]:
    return topology.levels if isinstance(topology, TopologyView) else ()


def _topology_name(flavor: ObjectView | None) -> str | None:
    return flavor.topology_name if isinstance(flavor, ResourceFlavorView) else None


def keep_equivalent_topologies(desired: list[ObjectView], live: Mapping[Ref, ObjectView]) -> list[ObjectView]:
    """``desired`` with each owned flavor left in the live Topology it is in when that one has exactly
    the levels the flavor needs (an upgrade re-creates only flavors whose levels are wrong), and only
    the Topologies some flavor refers to."""
    levels = {o.name: o.levels for o in desired if isinstance(o, TopologyView)}
    kept: dict[str, ObjectView] = {}  # live owned Topologies kept under their old names
    flavors: list[ObjectView] = []
    for obj in desired:
        if not isinstance(obj, ResourceFlavorView):
            continue
        want = obj.topology_name
        current = live.get(("ResourceFlavor", obj.name, None))
        have = _topology_name(current)
        old = live.get(("Topology", have, None)) if have and have != want else None
        if (
            have
            and old is not None
            and owned(current)
            and not terminating(old)
            and _levels(old) == levels[want or ""]
        ):
            obj = obj.in_topology(have)
            if owned(old) and have not in levels:
                version = cast(ApiVersion, obj.api_version.split("/")[1])
                kept[have] = object_view(topology_object(have, _levels(old), version))
        flavors.append(obj)
    used = {_topology_name(f) for f in flavors}
    topologies = [o for o in desired if isinstance(o, TopologyView)] + list(kept.values())
    out: list[ObjectView] = []
    for obj in desired:
        if isinstance(obj, TopologyView):
            continue
        if isinstance(obj, ResourceFlavorView):
            out.extend(t for t in topologies if t.name in used)
            out.extend(flavors)
            topologies = flavors = []
            continue
        out.append(obj)
    return out


def queue_as_allowed(desired: ObjectView, withheld: set[str]) -> ObjectView:
    """A ClusterQueue without the flavors ``withheld`` (being re-created); any other object as it is."""
    if isinstance(desired, ClusterQueueView) and withheld & desired.flavor_names:
        return desired.without_flavors(withheld)
    return desired
