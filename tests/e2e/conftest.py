"""The end-to-end modules' local stack (subprocess emulators over real HTTP): the labeler's kind of
tests/stacks.py, shared by the modules of an xdist worker and reset between them. A module that
needs other options defines its own ``stack`` fixture."""

from __future__ import annotations

import pytest

from tests.stacks import shared_stack


@pytest.fixture(scope="module")
def stack(shared_stacks):
    with shared_stack(shared_stacks, "labeler") as s:
        yield s
