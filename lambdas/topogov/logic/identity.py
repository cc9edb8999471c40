"""Who a caller is, as the policy's principal patterns are matched (``domain/policy/arn.py``).

API Gateway reports an assumed-role session as ``arn:P:sts::ACCOUNT:assumed-role/ROLE/SESSION``:
the role's path is not in it, and IAM matches a pattern against the role's ARN *with* its path
(``aws:PrincipalArn``). So the path is looked up, once per role and ``ttl_s``, through the
:class:`RolePaths` port (``iam:GetRole``, granted on exactly the policy's role patterns): a role the
API may not read, that does not exist, or of another account has no role principal, and no role
pattern matches it. Nothing is looked up for a caller no role pattern could match.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from topogov.domain.policy import Caller, Policy, session_role
from topogov.domain.policy.arn import SessionRole, could_be_role


class RolePaths(Protocol):
    """The path of an IAM role of this account (``/`` or ``/a/b/``); None when the role does not
    exist, is not readable (outside the grant) or belongs to another account."""

    def role_path(self, role: SessionRole) -> str | None: ...


@dataclass
class Identities:
    policy: Policy
    roles: RolePaths | None
    ttl_s: float = 900.0
    monotonic: Callable[[], float] = time.monotonic
    _paths: dict[SessionRole, tuple[float, str | None]] = field(default_factory=dict)

    def caller(self, arn: str) -> Caller:
        """The caller of a request whose identity is ``arn``, with the principal ARN patterns match."""
        role = session_role(arn)
        if role is None:
            return Caller.of(arn)
        path = self._path(role) if could_be_role(self.policy.principal_patterns, role) else None
        return Caller(arn, role.arn(path) if path is not None else arn)

    def _path(self, role: SessionRole) -> str | None:
        now = self.monotonic()
        held = self._paths.get(role)
        if held is not None and now - held[0] < self.ttl_s:
            return held[1]
        path = self.roles.role_path(role) if self.roles is not None else None
        if len(self._paths) > 4096:  # bounded: roles are few, sessions many (the key is the role)
            self._paths.clear()
        self._paths[role] = (now, path)
        return path
