"""Field types of the policy and their checks: DNS names, ARN patterns, priority values, percentages,
and resource quantities (numbers or Kubernetes strings, as whole units)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PlainValidator, StrictStr

from topogov.domain.quantity import (
    CPU,
    EFA,
    GOVERNED,
    GPU,
    MEMORY,
    Resources,
    amount_of,
    parse_quantity,
    resources_of,
)

PRIORITY_MIN, PRIORITY_MAX = -2_147_483_648, 1_000_000_000  # Kubernetes/Kueue: int32, ≤ 1e9 for users
_MAX_QUANTITY = 2**63 - 1

_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def is_dns_label(value: str) -> bool:
    return len(value) <= 63 and _LABEL.fullmatch(value) is not None


def dns_label(value: str) -> str:
    if not is_dns_label(value):
        raise ValueError(
            f"{value!r} is not a DNS-1123 label (at most 63 characters: lower-case letters, digits "
            "and '-', starting and ending with a letter or digit)"
        )
    return value


def dns_subdomain(value: str) -> str:
    if len(value) > 253 or _SUBDOMAIN.fullmatch(value) is None:
        raise ValueError(
            f"{value!r} is not a DNS-1123 subdomain (at most 253 characters: dot-separated lower-case "
            "labels of letters, digits and '-')"
        )
    return value


def arn_pattern(value: str) -> str:
    if not value.startswith("arn:"):
        raise ValueError(f"{value!r} is not an ARN pattern: it must start with 'arn:'")
    if len(value.split(":", 5)) < 6:
        raise ValueError(
            f"{value!r} is not an ARN pattern: it must read arn:PARTITION:SERVICE:REGION:ACCOUNT:RESOURCE"
        )
    return value


def priority_value(value: int) -> int:
    if not PRIORITY_MIN <= value <= PRIORITY_MAX:
        raise ValueError(f"must be an integer from {PRIORITY_MIN} to {PRIORITY_MAX} (Kueue's range)")
    return value


def percent(value: int) -> int:
    if not 0 <= value <= 100:
        raise ValueError("must be from 0 to 100")
    return value


def positive(value: int) -> int:
    if value <= 0:
        raise ValueError("must be > 0")
    return value


MAX_RETENTION_DAYS = 3650


def retention_days(value: int) -> int:
    if not 1 <= value <= MAX_RETENTION_DAYS:
        raise ValueError(f"must be from 1 to {MAX_RETENTION_DAYS} days")
    return value


def non_empty(message: str) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    def check(value: tuple[Any, ...]) -> tuple[Any, ...]:
        if not value:
            raise ValueError(message)
        return value

    return check


def _quantity(scale: int, unit: str) -> Callable[[Any], int]:
    """A Kubernetes quantity (number or string) as a whole number of ``unit`` (``scale`` per unit)."""

    def validate(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise ValueError("must be a Kubernetes quantity: a number or a string such as 500m or 16Ti")
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"not a Kubernetes quantity: {value!r}")
        try:
            amount = parse_quantity(value)
        except ValueError:
            raise ValueError(f"not a Kubernetes quantity: {value!r}") from None
        if amount < 0:
            raise ValueError("must be ≥ 0")
        scaled = amount * scale
        if scaled > _MAX_QUANTITY:
            raise ValueError("is too large")
        if scaled != scaled.to_integral_value():
            raise ValueError(f"must be a whole number of {unit}")
        return int(scaled)

    return validate


DnsLabel = Annotated[StrictStr, AfterValidator(dns_label)]
DnsSubdomain = Annotated[StrictStr, AfterValidator(dns_subdomain)]
ArnPattern = Annotated[StrictStr, AfterValidator(arn_pattern)]
Devices = Annotated[int, PlainValidator(_quantity(1, "devices"))]
Millicores = Annotated[int, PlainValidator(_quantity(1000, "millicores"))]
Bytes = Annotated[int, PlainValidator(_quantity(1, "bytes"))]


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ResourceQuantities(Model):
    """A map of governed resources to quantities; a resource the map does not name is ``None``."""

    gpu: Devices | None = Field(default=None, alias=GPU)
    efa: Devices | None = Field(default=None, alias=EFA)
    cpu_m: Millicores | None = Field(default=None, alias=CPU)
    memory: Bytes | None = Field(default=None, alias=MEMORY)

    def get(self, resource: str) -> int | None:
        """The amount named for ``resource`` (a Kubernetes resource name), else ``None``."""
        return {GPU: self.gpu, EFA: self.efa, CPU: self.cpu_m, MEMORY: self.memory}[resource]

    def resources(self, fallback: Resources | None = None) -> Resources:
        """The named amounts; each resource not named comes from ``fallback`` (else 0)."""
        base = fallback or Resources()
        named = {r: self.get(r) for r in GOVERNED}
        return resources_of({r: amount_of(base, r) if n is None else n for r, n in named.items()})
