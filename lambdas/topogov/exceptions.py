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
