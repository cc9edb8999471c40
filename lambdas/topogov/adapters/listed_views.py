"""Views of listed Kubernetes objects, made once per object version.

The API server returns an object unchanged for as long as its ``metadata.resourceVersion`` is
unchanged (the resourceVersion changes on every write: "Resource versions", Kubernetes API
concepts), so a view made from it can be kept and returned again for the same uid and
resourceVersion. A warm API container lists the same thousands of Workloads and Jobs for every
start estimate; keeping their views makes each listing cost the JSON, not the JSON and the views.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, TypeVar

V = TypeVar("V")


class ListedViews(Generic[V]):
    """One kind's views, per namespace, by uid: each listing of a namespace replaces its entries, so
    an object that was deleted leaves with the listing that no longer has it."""

    def __init__(self, make: Callable[[Mapping[str, Any]], V]) -> None:
        self._make = make
        self._kept: dict[str, dict[str, tuple[str, V]]] = {}
        self.made = 0  # views made (not found kept): what a listing cost

    def views(self, namespace: str, items: Iterable[Mapping[str, Any]]) -> list[V]:
        """The views of one complete listing of ``namespace``, in its order."""
        before = self._kept.get(namespace, {})
        kept: dict[str, tuple[str, V]] = {}
        out = []
        for body in items:
            meta = body.get("metadata") or {}
            uid, version = meta.get("uid"), meta.get("resourceVersion")
            hit = before.get(uid) if uid else None
            if uid and version and hit is not None and hit[0] == version:
                kept[uid] = hit
                out.append(hit[1])
                continue
            view = self._make(body)
            self.made += 1
            if uid and version:
                kept[uid] = (version, view)
            out.append(view)
        self._kept[namespace] = kept
        return out
