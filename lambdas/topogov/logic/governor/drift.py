"""How a live Kueue object differs from what Topogov renders (pure): the drift rules, the hash that
tells a hand edit from a policy change, the corrected object, and keeping a flavor in a live
Topology with the levels it needs (see the package docstring)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from decimal import InvalidOperation
from typing import Any

from topogov.domain.kueue import MANAGED_BY, topology_object
from topogov.domain.labels import MANAGED_BY_LABEL, NAMESPACE_NAME_LABEL, RENDERED_ANNOTATION
from topogov.domain.quantity import parse_quantity
from topogov.logic.governor.plan import EXACT_UNDER, QUANTITY_FIELDS

# --- drift (pure) ------------------------------------------------------------------------------------


def owned(obj: Mapping[str, Any] | None) -> bool:
    labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
    return labels.get(MANAGED_BY_LABEL) == MANAGED_BY


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


def drift(desired: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """How ``current`` differs from ``desired`` in what Topogov renders, one line per field."""
    out: list[str] = []
    have_labels = (current.get("metadata") or {}).get("labels") or {}
    for key, value in (desired["metadata"].get("labels") or {}).items():
        if have_labels.get(key) != value:
            out.append(f"metadata.labels.{key}: {shown(have_labels.get(key))} -> {shown(value)}")
    for key, value in desired.items():
        if key not in ("apiVersion", "kind", "metadata"):
            _compare(value, current.get(key), key, out, key == EXACT_UNDER)
    return out


def rendered_hash(desired: Mapping[str, Any]) -> str:
    body = {k: v for k, v in desired.items() if k != "metadata"}
    body["labels"] = desired["metadata"].get("labels") or {}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def stamped(desired: Mapping[str, Any]) -> dict[str, Any]:
    """``desired`` carrying the hash of itself (as created)."""
    meta = dict(desired["metadata"])
    meta["annotations"] = {**(meta.get("annotations") or {}), RENDERED_ANNOTATION: rendered_hash(desired)}
    return {**desired, "metadata": meta}


def edited_by_hand(desired: Mapping[str, Any], current: Mapping[str, Any]) -> bool:
    """True when Topogov last wrote exactly this rendering: the difference was made by someone else
    (False: the policy or the fleet changed what Topogov renders)."""
    annotations = (current.get("metadata") or {}).get("annotations") or {}
    return annotations.get(RENDERED_ANNOTATION) == rendered_hash(desired)


def corrected(desired: Mapping[str, Any], current: Mapping[str, Any]) -> dict[str, Any]:
    """The object to PUT: the live metadata (resourceVersion, other labels and annotations) with
    Topogov's labels, and every rendered top-level field as rendered."""
    meta = dict(current["metadata"])
    meta["labels"] = {**(meta.get("labels") or {}), **(desired["metadata"].get("labels") or {})}
    meta["annotations"] = {**(meta.get("annotations") or {}), RENDERED_ANNOTATION: rendered_hash(desired)}
    meta.pop("managedFields", None)
    obj: dict[str, Any] = {"apiVersion": desired["apiVersion"], "kind": desired["kind"], "metadata": meta}
    for key, value in desired.items():
        if key not in ("apiVersion", "kind", "metadata"):
            obj[key] = value
    return obj


def object_ref(obj: Mapping[str, Any]) -> tuple[str, str, str | None]:
    """(kind, name, namespace): namespace None for cluster-scoped objects, rendered or live."""
    meta = obj["metadata"]
    return obj["kind"], meta["name"], meta.get("namespace")


def cq_namespace(cq: Mapping[str, Any]) -> str | None:
    spec = cq.get("spec") or {}
    return ((spec.get("namespaceSelector") or {}).get("matchLabels") or {}).get(NAMESPACE_NAME_LABEL)


def cq_cohort(cq: Mapping[str, Any]) -> str | None:
    spec = cq.get("spec") or {}
    return spec.get("cohort") or spec.get("cohortName")


def cq_flavors(cq: Mapping[str, Any]) -> set[str]:
    groups = (cq.get("spec") or {}).get("resourceGroups") or []
    return {f.get("name") for g in groups for f in g.get("flavors") or []}


def without_flavors(cq: Mapping[str, Any], flavors: set[str]) -> dict[str, Any]:
    """``cq`` with ``flavors`` taken out of its resource groups (a group left with none goes too:
    Kueue requires at least one flavor per group)."""
    spec = dict(cq.get("spec") or {})
    groups = []
    for group in spec.get("resourceGroups") or []:
        kept = [f for f in group.get("flavors") or [] if f.get("name") not in flavors]
        if kept:
            groups.append({**group, "flavors": kept})
    spec["resourceGroups"] = groups
    return {**cq, "spec": spec}


def terminating(obj: Mapping[str, Any] | None) -> bool:
    return bool(((obj or {}).get("metadata") or {}).get("deletionTimestamp"))


def _levels(topology: Mapping[str, Any] | None) -> list[str]:
    return [lv.get("nodeLabel") for lv in ((topology or {}).get("spec") or {}).get("levels") or []]


def keep_equivalent_topologies(
    desired: list[dict[str, Any]], live: Mapping[tuple[str, str, str | None], Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """``desired`` with each owned flavor left in the live Topology it is in when that one has exactly
    the levels the flavor needs (an upgrade re-creates only flavors whose levels are wrong), and only
    the Topologies some flavor refers to."""
    levels = {o["metadata"]["name"]: _levels(o) for o in desired if o["kind"] == "Topology"}
    kept: dict[str, dict[str, Any]] = {}  # live owned Topologies kept under their old names
    flavors: list[dict[str, Any]] = []
    for obj in desired:
        if obj["kind"] != "ResourceFlavor":
            continue
        want = obj["spec"]["topologyName"]
        current = live.get(("ResourceFlavor", obj["metadata"]["name"], None))
        have: str | None = ((current or {}).get("spec") or {}).get("topologyName")
        old = live.get(("Topology", have, None)) if have and have != want else None
        if (
            have
            and old is not None
            and owned(current)
            and not terminating(old)
            and _levels(old) == levels[want]
        ):
            obj = {**obj, "spec": {**obj["spec"], "topologyName": have}}
            if owned(old) and have not in levels:
                kept[have] = topology_object(have, _levels(old), obj["apiVersion"].split("/")[1])
        flavors.append(obj)
    used = {f["spec"]["topologyName"] for f in flavors}
    topologies = [o for o in desired if o["kind"] == "Topology"] + list(kept.values())
    out: list[dict[str, Any]] = []
    for obj in desired:
        if obj["kind"] == "Topology":
            continue
        if obj["kind"] == "ResourceFlavor":
            out.extend(t for t in topologies if t["metadata"]["name"] in used)
            out.extend(flavors)
            topologies = flavors = []
            continue
        out.append(obj)
    return out
