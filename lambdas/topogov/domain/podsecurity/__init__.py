"""Kubernetes' Pod Security Standards, the ``baseline`` and ``restricted`` levels, in pure Python.

A port of ``k8s.io/pod-security-admission`` v0.35.4 (``policy/``), evaluating at policy version
``latest``, which that release resolves to v1.35 (the newest ``MinimumVersion`` of its checks,
``policy/registry.go``): the same checks, the same versions of them, the same decisions, each check
citing its upstream file. Where upstream returns one result per check naming every offending
container, this returns one :class:`Violation` per offending field, with upstream's reason and its
detail for that field alone, so an API can refuse a submitted pod template field by field.

The input is a pod template's (or pod's) ``metadata`` and ``spec`` as JSON, which upstream sees
decoded and defaulted by the API server; the one default a check can see is applied (a volume with
no source is an ``emptyDir``, :func:`.restricted.restricted_volumes`). A value of the wrong JSON type,
which would never decode, is read as absent: nothing here raises on a malformed document.
"""

from __future__ import annotations

from topogov.domain.podsecurity.registry import (
    LEVELS,
    OVERRIDES,
    POLICY_VERSION,
    REASONS,
    Violation,
    check_ids,
    violations,
)

__all__ = ["LEVELS", "OVERRIDES", "POLICY_VERSION", "REASONS", "Violation", "check_ids", "violations"]
