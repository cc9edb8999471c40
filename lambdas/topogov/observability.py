"""The Logger, Metrics and Tracer singletons, configured by ``POWERTOOLS_*`` variables.

The Tracer is created on first use: the X-Ray SDK costs ~0.3 s to import (measured with
``python -X importtime``), more than everything else a handler module imports.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger, Metrics

SERVICE = "topogov"

logger = Logger(service=SERVICE)
metrics = Metrics(service=SERVICE, namespace="Topogov")


@functools.cache
def get_tracer() -> Any:
    from aws_lambda_powertools import Tracer

    return Tracer(service=SERVICE)


def traced(handler: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """``Tracer.capture_lambda_handler``, bound on the first invocation instead of at import."""
    wrapped: Callable[[Any, Any], Any] | None = None

    @functools.wraps(handler)
    def invoke(event: Any, context: Any) -> Any:
        nonlocal wrapped
        if wrapped is None:
            wrapped = get_tracer().capture_lambda_handler(handler)
        return wrapped(event, context)

    return invoke
