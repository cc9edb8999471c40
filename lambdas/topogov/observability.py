"""The Logger, Metrics and Tracer singletons, configured by ``POWERTOOLS_*`` variables."""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics, Tracer

SERVICE = "topogov"

logger = Logger(service=SERVICE)
metrics = Metrics(service=SERVICE, namespace="Topogov")
tracer = Tracer(service=SERVICE)
