"""IAM: the path of a caller's role (``logic/identity.RolePaths``), read with ``iam:GetRole``.

The api function may read exactly the roles the policy's role patterns name (``infra/api.py``
grants ``iam:GetRole`` on them), so a role outside them answers ``AccessDenied``: no pattern could
match it, and it has no role principal. ``NoSuchEntity`` (a session outliving its role) is the same.
GetRole reads the api function's own account; a role of another account with the same name is not
the caller's, so the answer's ARN must be the session's account's."""

from __future__ import annotations

from typing import Any

from topogov.domain.errors import Unavailable
from topogov.domain.policy.arn import SessionRole

NOT_THE_CALLERS = frozenset(
    {"AccessDenied", "AccessDeniedException", "NoSuchEntity", "NoSuchEntityException"}
)


class IamRolePaths:
    """``client`` is an IAM client, or a function that makes one on first use (most callers are
    not sessions of a role any pattern could match: they never pay for the client)."""

    def __init__(self, client: Any) -> None:
        self._make = client if callable(client) and not hasattr(client, "get_role") else (lambda: client)
        self._iam: Any = None

    def role_path(self, role: SessionRole) -> str | None:
        from botocore.exceptions import BotoCoreError, ClientError

        if self._iam is None:
            self._iam = self._make()
        try:
            found = self._iam.get_role(RoleName=role.name)["Role"]
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code in NOT_THE_CALLERS:
                return None
            raise Unavailable(f"the caller's role cannot be read now ({code}); try again") from exc
        except BotoCoreError as exc:
            raise Unavailable(f"IAM is unreachable ({type(exc).__name__}); try again") from exc
        arn, path = str(found.get("Arn", "")), str(found.get("Path", "/"))
        return path if arn == role.arn(path) else None
