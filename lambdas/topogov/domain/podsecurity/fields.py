"""Reading a pod's JSON the way upstream reads its decoded ``corev1.PodSpec``, and naming fields.

Upstream's checks see a Go struct: a field of the wrong JSON type never decodes, an absent pointer is
nil, an absent string is ``""``. Here a value of the wrong type reads as absent (nil), so a malformed
document never raises; its structure is validated elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

EMPTY: Mapping[str, Any] = {}


class Finding(NamedTuple):
    """One offending field (a path from the pod template) and upstream's detail for it alone."""

    field: str
    detail: str


@dataclass(frozen=True, slots=True)
class Container:
    """One entry of ``initContainers``, ``containers`` or ``ephemeralContainers`` and its path."""

    path: str  # e.g. "spec.initContainers[1]"
    name: str  # "" when absent, as Go's zero value
    body: Mapping[str, Any]

    @property
    def security_context(self) -> Mapping[str, Any] | None:
        return obj(self.body, "securityContext")

    def quoted(self) -> str:
        """``container "name"``: upstream's ``pluralize`` and ``joinQuote`` for one container."""
        return f'container "{self.name}"'


def obj(parent: Mapping[str, Any] | None, key: str) -> Mapping[str, Any] | None:
    """A nested object (a Go pointer to a struct): None when absent, null or not an object."""
    value = parent.get(key) if parent is not None else None
    return value if isinstance(value, Mapping) else None


def items(parent: Mapping[str, Any] | None, key: str) -> Sequence[Any]:
    """A list (a Go slice): empty when absent, null or not a list."""
    value = parent.get(key) if parent is not None else None
    return value if isinstance(value, list | tuple) else ()


def text(parent: Mapping[str, Any] | None, key: str) -> str | None:
    """A string pointer: None when absent or not a string."""
    value = parent.get(key) if parent is not None else None
    return value if isinstance(value, str) else None


def flag(parent: Mapping[str, Any] | None, key: str) -> bool | None:
    """A boolean pointer: None when absent or not a boolean."""
    value = parent.get(key) if parent is not None else None
    return value if isinstance(value, bool) else None


def integer(parent: Mapping[str, Any] | None, key: str) -> int | None:
    """An integer pointer: None when absent or not an integer (a JSON boolean is not one)."""
    value = parent.get(key) if parent is not None else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def present(parent: Mapping[str, Any] | None, key: str) -> bool:
    """Whether a pointer field is set: any non-null value (a volume source, ``hostPath``)."""
    return parent is not None and parent.get(key) is not None


def field_path(base: str, *keys: str) -> str:
    """The path of the field ``keys`` under ``base`` (``securityContext.allowPrivilegeEscalation``):
    the field to set when a check requires it, whether or not any part of it is there yet (a
    refusal names the field to write)."""
    return ".".join((base, *keys))


def containers(spec: Mapping[str, Any]) -> Iterator[Container]:
    """Every container as upstream's ``visitContainers`` (``policy/visitor.go``) visits them: init
    containers, containers, then ephemeral containers; an entry that is not an object is skipped."""
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for i, body in enumerate(items(spec, key)):
            if isinstance(body, Mapping):
                yield Container(f"spec.{key}[{i}]", text(body, "name") or "", body)


def contexts(spec: Mapping[str, Any]) -> Iterator[tuple[str, str, Mapping[str, Any] | None]]:
    """(who, path, securityContext) of the pod, then of each container: upstream's checks of a field
    both levels have read the pod's first and name it ``pod``."""
    yield "pod", "spec.securityContext", obj(spec, "securityContext")
    for c in containers(spec):
        yield c.quoted(), f"{c.path}.securityContext", c.security_context


def windows(spec: Mapping[str, Any]) -> bool:
    """``spec.os.name == "windows"``: the 1.25+ restricted checks exempt such a pod."""
    return text(obj(spec, "os"), "name") == "windows"


def user_namespaced(spec: Mapping[str, Any]) -> bool:
    """``spec.hostUsers: false`` (``relaxPolicyForUserNamespacePod``, ``policy/helpers.go``)."""
    return flag(spec, "hostUsers") is False


_ESCAPES = {"\a": r"\a", "\b": r"\b", "\f": r"\f", "\n": r"\n", "\r": r"\r", "\t": r"\t", "\v": r"\v"}


def go_quote(value: str) -> str:
    """Go's ``%q`` (``strconv.Quote``) of a string."""
    out = []
    for ch in value:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return '"' + "".join(out) + '"'
