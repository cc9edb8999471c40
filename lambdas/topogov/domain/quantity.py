"""Kubernetes resource quantities and the four resources Topogov governs (pure, no I/O)."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

GPU = "nvidia.com/gpu"
EFA = "vpc.amazonaws.com/efa"
CPU = "cpu"
MEMORY = "memory"
GOVERNED: tuple[str, ...] = (GPU, EFA, CPU, MEMORY)  # the four resources Topogov governs, in this order

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$")


def parse_quantity(value: str | int | float) -> Decimal:
    """Parse a Kubernetes quantity (``"500m"``, ``"16Gi"``, ``"1e3"``, ``8``) into a Decimal."""
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, int | float):
        return Decimal(str(value))
    return _parse_text(value)


@functools.lru_cache(maxsize=4096)
def _parse_text(value: str) -> Decimal:
    # Cached: a fleet repeats the same few allocatable strings on thousands of nodes.
    m = _QUANTITY.match(value.strip())
    if m is None:
        raise ValueError(f"not a quantity: {value!r}")
    number, exponent, suffix = m.groups()
    try:
        base = Decimal(number)
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only valid numbers
        raise ValueError(f"not a quantity: {value!r}") from exc
    if exponent:
        return base * (Decimal(10) ** int(exponent[1:]))
    suffix = suffix or ""
    if suffix in _BINARY:
        return base * _BINARY[suffix]
    return base * _DECIMAL[suffix]


@dataclass(frozen=True, slots=True)
class Resources:
    """GPU and EFA devices, CPU in millicores, memory in bytes."""

    gpu: int = 0
    efa: int = 0
    cpu_m: int = 0
    memory: int = 0

    def __add__(self, other: Resources) -> Resources:
        return Resources(
            self.gpu + other.gpu, self.efa + other.efa, self.cpu_m + other.cpu_m, self.memory + other.memory
        )

    def __sub__(self, other: Resources) -> Resources:
        return Resources(
            self.gpu - other.gpu, self.efa - other.efa, self.cpu_m - other.cpu_m, self.memory - other.memory
        )

    def times(self, n: int) -> Resources:
        """``n`` of these (a pod's requests -> a pod set's, a job's)."""
        return Resources(self.gpu * n, self.efa * n, self.cpu_m * n, self.memory * n)

    def to_json(self) -> dict[str, int]:
        return {"gpu": self.gpu, "efa": self.efa, "cpu_m": self.cpu_m, "memory": self.memory}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Resources:
        return cls(int(data["gpu"]), int(data["efa"]), int(data["cpu_m"]), int(data["memory"]))


def resources_from(quantities: Mapping[str, Any]) -> Resources:
    """The governed resources in a ``status.allocatable`` or ``resources.requests`` map."""

    def get(name: str, scale: int = 1) -> int:
        raw = quantities.get(name)
        return 0 if raw is None else int(parse_quantity(raw) * scale)

    return Resources(gpu=get(GPU), efa=get(EFA), cpu_m=get(CPU, 1000), memory=get(MEMORY))


def total(items: Iterable[Resources]) -> Resources:
    gpu = efa = cpu_m = memory = 0
    for item in items:
        gpu += item.gpu
        efa += item.efa
        cpu_m += item.cpu_m
        memory += item.memory
    return Resources(gpu, efa, cpu_m, memory)


def amount_of(resources: Resources, resource: str) -> int:
    """One governed resource of ``resources`` by its Kubernetes name (CPU in millicores)."""
    return {GPU: resources.gpu, EFA: resources.efa, CPU: resources.cpu_m, MEMORY: resources.memory}[resource]


def resources_of(amounts: Mapping[str, int]) -> Resources:
    """The inverse of :func:`amount_of`: a map of the four governed resources as :class:`Resources`."""
    return Resources(gpu=amounts[GPU], efa=amounts[EFA], cpu_m=amounts[CPU], memory=amounts[MEMORY])


def format_quantity(resource: str, amount: int) -> str:
    """``amount`` of ``resource`` as Kubernetes writes it: ``256``, ``1536`` or ``500m`` CPUs, ``16Ti``
    (the largest binary, else decimal, suffix that divides it)."""
    if resource == CPU:
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    if resource == MEMORY and amount:
        binary = sorted(_BINARY.items(), key=lambda kv: -kv[1])
        decimal = [(s, int(f)) for s, f in sorted(_DECIMAL.items(), key=lambda kv: -kv[1]) if f >= 1000]
        for suffix, factor in (*binary, *decimal):
            if amount % factor == 0:
                return f"{amount // factor}{suffix}"
    return str(amount)


def quantity_json(resource: str, amount: int) -> int | str:
    """:func:`format_quantity` as JSON writes a quantity: a number when it is one."""
    text = format_quantity(resource, amount)
    return int(text) if text.isdigit() else text


RESOURCE_ATTRS = {"gpu": GPU, "efa": EFA, "cpu_m": CPU, "memory": MEMORY}  # Resources field -> name


def over_cap(used: Resources, charge: Resources, cap: Resources) -> list[dict[str, Any]]:
    """The governed resources ``charge`` would push past ``cap`` on top of ``used`` (the in-flight
    rule the ledger applies atomically), each as ``{resource, used, asked, cap}``; empty if none."""
    return [
        {"resource": name, "used": getattr(used, a), "asked": getattr(charge, a), "cap": getattr(cap, a)}
        for a, name in RESOURCE_ATTRS.items()
        if getattr(charge, a) and getattr(used, a) + getattr(charge, a) > getattr(cap, a)
    ]


def over_cap_message(team: str, over: list[dict[str, Any]]) -> str:
    first = over[0] if over else {"resource": "?", "used": 0, "asked": 0, "cap": 0}
    return (
        f"team {team!r} has {first['used']} {first['resource']} in flight; {first['asked']} more would pass "
        f"its cap of {first['cap']}"
    )
