"""Domain errors: the one module adapters translate boto/Kubernetes errors into.

A :class:`Refusal` is a request the service turns down on purpose, with a ``code`` of the API's
vocabulary (``VALIDATION_ERROR``, ``TOPOLOGY_INFEASIBLE``...), a message and details; which HTTP
status each kind is answered with is the API handler's business, in one table
(:data:`topogov.handlers.api.HTTP_STATUS`). Nothing here knows HTTP.
"""

from __future__ import annotations

from typing import Any


class TopogovError(Exception):
    """Base of every error Topogov raises on purpose."""


class ConfigError(TopogovError):
    """Configuration (environment, context, policy file) is invalid."""


class KubernetesError(TopogovError):
    """The Kubernetes API answered with an error the caller cannot work around."""

    def __init__(self, status: int, action: str, message: str = "") -> None:
        super().__init__(f"{action}: HTTP {status} {message}".strip())
        self.status = status
        self.action = action
        self.message = message


class TopologySourceError(TopogovError):
    """EC2 DescribeInstanceTopology failed (after botocore's retries)."""

    def __init__(self, code: str, message: str = "") -> None:
        super().__init__(f"{code}: {message}".strip(": "))
        self.code = code
        self.message = message


class SnapshotError(TopogovError):
    """The topology snapshot could not be read or written."""


class Refusal(TopogovError):
    """A request turned down on purpose: one code, a message and details (what would work)."""

    code = "VALIDATION_ERROR"

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}


class ValidationFailed(Refusal):
    code = "VALIDATION_ERROR"

    def __init__(self, field: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(f"{field}: {message}", {"field": field, **(details or {})})
        self.field = field


class Unauthenticated(Refusal):
    code = "FORBIDDEN"


class Forbidden(Refusal):
    code = "FORBIDDEN"


class NotFound(Refusal):
    code = "NOT_FOUND"


class Conflict(Refusal):
    code = "CONFLICT"


class PayloadTooLarge(Refusal):
    code = "VALIDATION_ERROR"


class NeverAdmissible(Refusal):
    code = "NEVER_ADMISSIBLE"


class TopologyInfeasible(Refusal):
    code = "TOPOLOGY_INFEASIBLE"


class PriorityNotAllowed(Refusal):
    code = "PRIORITY_NOT_ALLOWED"


class InFlightLimit(Refusal):
    code = "IN_FLIGHT_LIMIT"


class Unavailable(Refusal):
    """A dependency (Kubernetes, DynamoDB) failed; nothing was charged or left behind."""

    code = "UNAVAILABLE"


class TopologyUnavailable(Unavailable):
    """No topology snapshot to decide a topology request from (none written yet, or unreadable)."""

    code = "TOPOLOGY_UNAVAILABLE"


class QuotasUnavailable(Unavailable):
    """On HyperPod: the quotas in force (the task governance add-on's ClusterQueues) cannot be read, so
    nothing that depends on them is decided (never on ``teams.yaml``'s numbers instead)."""

    code = "QUOTAS_UNAVAILABLE"
