"""What every view reads the same way: an object's conditions, and fields that may be absent or null."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

# A field absent or null reads as empty (``x.get(k) or {}``, once, here); read-only, so that no
# caller can write into the one empty map every view shares.
EMPTY: Mapping[str, Any] = MappingProxyType({})


def empty() -> Mapping[str, Any]:
    """:data:`EMPTY`, as a dataclass field's default (``field(default_factory=empty)``)."""
    return EMPTY


def section(body: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """``body[key]`` as an object: empty when absent or null."""
    return body.get(key) or EMPTY


def string_map(value: Any) -> Mapping[str, str]:
    """Labels, annotations, a node selector: empty when absent or null (a dict of its own: these
    are written into JSON answers and bodies)."""
    return value or {}
