"""The local stack as the end-to-end and hardening suites use it."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def labelled_stack(directory: Path, fleet: str, **options: Any) -> Iterator[Any]:
    """A local stack (EC2's bucket raised) whose environment is this process's while it runs, after
    one reconcile pass: nodes labelled, snapshot written, Kueue objects created."""
    from topogov_local import events
    from topogov_local.lambda_context import LocalContext
    from topogov_local.stack import LocalStack, StackOptions

    with LocalStack(
        StackOptions(directory=directory, fleet=fleet, ec2_rate=1000, ec2_burst=1000, **options)
    ) as stack:
        saved = dict(os.environ)
        os.environ.update(stack.env())
        os.environ["TOPOGOV_EC2_RATE_PER_S"] = "1000"
        try:
            from topogov.handlers.reconcile import handler

            handler(events.scheduled_event(), LocalContext())
            yield stack
        finally:
            os.environ.clear()
            os.environ.update(saved)
