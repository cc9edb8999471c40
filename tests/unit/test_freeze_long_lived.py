"""``bootstrap.freeze_long_lived``: what a warm API keeps leaves the garbage collector's full passes,
and what an earlier build left unreferenced is collected first."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from topogov.bootstrap import freeze_long_lived


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


@pytest.fixture
def frozen() -> Iterator[None]:
    yield
    gc.unfreeze()


def _cycle() -> weakref.ref[Node]:
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_what_lives_on_is_frozen_and_an_earlier_cycle_is_collected(frozen: None) -> None:
    kept = Node()
    freeze_long_lived()
    assert gc.get_freeze_count() > 0
    garbage = _cycle()  # made after the freeze, unreferenced: only the cyclic collector frees it
    gc.freeze()  # as if frozen by the last build (so a plain collection would never look at it)
    assert garbage() is not None
    freeze_long_lived()  # the next build: unfrozen, collected, then what lives on frozen again
    assert garbage() is None
    assert gc.get_freeze_count() > 0 and kept.other is None
