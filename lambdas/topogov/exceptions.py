"""Domain exceptions: the one module adapters translate boto/Kubernetes errors into."""

from __future__ import annotations


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


class ApiError(TopogovError):
    """An answer the API gives on purpose: one HTTP status, one code, a message and details.

    The handler maps every subclass to ``{"error": {"code", "message", "details"}}`` in one place.
    """

    status = 400
    code = "VALIDATION_ERROR"

    def __init__(self, message: str, details: dict | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}


class ValidationFailed(ApiError):
    status, code = 400, "VALIDATION_ERROR"

    def __init__(self, field: str, message: str, details: dict | None = None) -> None:
        super().__init__(f"{field}: {message}", {"field": field, **(details or {})})
        self.field = field


class Unauthenticated(ApiError):
    status, code = 401, "FORBIDDEN"


class Forbidden(ApiError):
    status, code = 403, "FORBIDDEN"


class NotFound(ApiError):
    status, code = 404, "NOT_FOUND"


class Conflict(ApiError):
    status, code = 409, "CONFLICT"


class PayloadTooLarge(ApiError):
    status, code = 413, "VALIDATION_ERROR"


class NeverAdmissible(ApiError):
    status, code = 422, "NEVER_ADMISSIBLE"


class TopologyInfeasible(ApiError):
    status, code = 422, "TOPOLOGY_INFEASIBLE"


class PriorityNotAllowed(ApiError):
    status, code = 422, "PRIORITY_NOT_ALLOWED"


class InFlightLimit(ApiError):
    status, code = 429, "IN_FLIGHT_LIMIT"


class Unavailable(ApiError):
    """A dependency (Kubernetes, DynamoDB) failed; nothing was charged or left behind."""

    status, code = 503, "UNAVAILABLE"


class TopologyUnavailable(Unavailable):
    """No topology snapshot to decide a topology request from (none written yet, or unreadable)."""

    status, code = 503, "TOPOLOGY_UNAVAILABLE"
