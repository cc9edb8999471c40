"""Kueue's request arithmetic and quantity formatting (``pkg/resources/requests.go``), pure.

* :func:`count_in` is ``Requests.CountInWithLimitingResource``: how many times a request fits in a
  capacity, and the resource that limits it (ties: alphabetical).
* :func:`quantity_string` is ``ResourceQuantityString``: CPU as a milli-quantity, memory as a
  canonical BinarySI quantity (``newCanonicalQuantity``), the rest DecimalSI; the strings Kueue puts
  in its messages (``8``, ``500m``, ``16Gi``, ``100k``).
"""

from __future__ import annotations

from collections.abc import Mapping

from topogov.domain.kueue_model.objects import Requests

MAX_INT32 = 2**31 - 1
_DECIMAL = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_BINARY = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def go_div(a: int, b: int) -> int:
    """Integer division truncating toward zero, as Go's ``/`` (a negative free capacity counts as
    ``-(|a| // b)`` pods, not ``floor``)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def count_in(requests: Requests, capacity: Mapping[str, int]) -> tuple[int, str]:
    """How many ``requests`` fit in ``capacity`` and the limiting resource
    (``Requests.CountInWithLimitingResource``).

    A requested (non-zero) resource the capacity lacks gives 0 at once; Kueue meets it in map order,
    so with several such resources its limiting name is arbitrary: here the first in name order. A
    zero request fits without limit (``MaxInt32``); no request at all gives 0, as in Kueue.
    """
    result: int | None = None
    limiting = ""
    for name in sorted(requests):
        value = requests[name]
        cap = capacity.get(name)
        if cap is None and value != 0:
            return 0, name
        count = MAX_INT32 if value == 0 else go_div(cap or 0, value)
        if result is None or count < result or (count == result and name < limiting):
            result, limiting = count, name
    return (result if result is not None else 0), limiting


def add_into(target: dict[str, int], other: Mapping[str, int], times: int = 1) -> None:
    for name, value in other.items():
        target[name] = target.get(name, 0) + value * times


def _decimal(mantissa: int, exponent: int) -> str:
    if mantissa == 0:
        return "0"
    while mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    while exponent % 3:
        mantissa *= 10
        exponent -= 1
    while exponent > 18:
        mantissa *= 1000
        exponent -= 3
    return f"{mantissa}{_DECIMAL[exponent]}"


def quantity_string(resource: str, value: int) -> str:
    """``ResourceQuantityString(resource, value)``."""
    if resource == "cpu":
        return _decimal(value, -3)
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        if abs(value) >= 1024:
            for suffix, factor in _BINARY:
                if value % factor == 0:
                    return f"{value // factor}{suffix}"
        return _decimal(value, 0)
    return _decimal(value, 0)
