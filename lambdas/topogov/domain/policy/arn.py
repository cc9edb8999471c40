"""Who may act for a team: IAM principal patterns matched against the caller, as IAM matches them.

A principal pattern is an ARN whose six colon-separated parts
(``arn:PARTITION:SERVICE:REGION:ACCOUNT:RESOURCE``) are matched part by part, as IAM's
``ArnLike`` does, with ``*`` (any run of characters, ``/`` included) and ``?`` (exactly one
character), case-sensitively and against the whole part, so a wildcard never spills from the
account into the resource. The caller's ARN is taken literally, never as a pattern.

What a pattern is matched against is the caller's *principal ARN*, the value IAM gives the condition
key ``aws:PrincipalArn`` (IAM User Guide, "AWS global condition context keys"): an IAM user's ARN
with its path, and for an assumed-role session (``arn:P:sts::ACCOUNT:assumed-role/ROLE/SESSION``,
what API Gateway reports as the caller) the ARN of its role **with the role's path**
(``arn:P:iam::ACCOUNT:role/PATH/ROLE``). STS does not put the path in a session's ARN, so the API
looks it up (``iam:GetRole``, ``logic/identity.py``); a session whose role cannot be looked up has no
role principal and no role pattern matches it. So ``role/teams/team-a/*`` means the roles under that
path, and ``role/aws-reserved/sso.amazonaws.com/AWSReservedSSO_*`` the IAM Identity Center roles:
a pattern never matches a role it would not match in an IAM policy.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is calling: ``arn`` as the request says (a session's ARN names the session: it is what a
    job's ``submitted_by`` keeps), ``principal`` the ARN the policy's patterns are matched against."""

    arn: str
    principal: str

    @classmethod
    def of(cls, arn: str) -> Caller:
        """A caller whose ARN is its principal ARN (an IAM user, a role, a test's made-up caller)."""
        return cls(arn, arn)


@dataclass(frozen=True, slots=True)
class SessionRole:
    """The role of an assumed-role session: its partition, account and name (no path)."""

    partition: str
    account: str
    name: str

    def arn(self, path: str) -> str:
        """The role's ARN with its ``path`` (``/`` or ``/a/b/``), as IAM names it."""
        return f"arn:{self.partition}:iam::{self.account}:role{path}{self.name}"


def session_role(arn: str) -> SessionRole | None:
    """The role of an STS assumed-role session ARN; None for any other ARN."""
    parts = arn.split(":", 5)
    if len(parts) != 6 or parts[0] != "arn" or parts[2] != "sts":
        return None
    segments = parts[5].split("/")
    if segments[0] != "assumed-role" or len(segments) < 3 or not segments[1]:
        return None
    return SessionRole(parts[1], parts[4], segments[1])


@functools.lru_cache(maxsize=1024)
def _glob(pattern: str) -> re.Pattern[str]:
    return re.compile(
        "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern), re.DOTALL
    )


def principal_matches(pattern: str, principal: str) -> bool:
    """Whether the principal ARN ``principal`` matches ``pattern`` (IAM's ``ArnLike``)."""
    wanted, parts = pattern.split(":", 5), principal.split(":", 5)
    if len(wanted) != 6 or len(parts) != 6 or parts[0] != "arn":
        return False
    return all(_glob(w).fullmatch(p) is not None for w, p in zip(wanted, parts, strict=True))


def role_patterns(patterns: list[str] | tuple[str, ...]) -> list[str]:
    """The patterns that name IAM roles (``arn:P:iam::ACCOUNT:role/...``): the roles whose path the
    API must be able to read (the grant of ``iam:GetRole`` is exactly these)."""
    out = []
    for p in patterns:
        parts = p.split(":", 5)
        if len(parts) == 6 and _glob(parts[2]).fullmatch("iam") and parts[5].startswith(("role/", "*")):
            out.append(p)
    return out


def could_be_role(patterns: list[str] | tuple[str, ...], role: SessionRole) -> bool:
    """Whether some role pattern could match a role of this partition and account named
    ``role.name``, on some path: only then is the role's path worth looking up."""
    for p in role_patterns(patterns):
        parts = p.split(":", 5)
        if not (_glob(parts[1]).fullmatch(role.partition) and _glob(parts[4]).fullmatch(role.account)):
            continue
        if "*" in parts[5] or _glob(parts[5].rsplit("/", 1)[-1]).fullmatch(role.name):
            return True
    return False


def describe(pattern: str) -> str:
    """What a principal pattern matches, in words (``topogov policy check``)."""
    parts = pattern.split(":", 5)
    if len(parts) != 6:
        return "nothing: not an ARN pattern"
    _, partition, service, _, account, resource = parts
    where = f"account {account}" if account != "*" else "every account"
    where += (
        f" ({partition})"
        if partition not in ("aws", "*")
        else (" (every partition)" if partition == "*" else "")
    )
    kind, _, rest = resource.partition("/")
    if service == "iam" and kind == "role":
        shape = "with that path and name" if "/" in rest else "named so (at the root path; '*' spans a path)"
        return f"IAM roles of {where} {shape}, and their sessions"
    if service == "iam" and kind == "user":
        return f"IAM users of {where}"
    if service == "sts" and kind == "assumed-role":
        return f"sessions of {where} whose role and session name match"
    return f"{service} principals of {where}"


def too_wide(pattern: str) -> str | None:
    """Why a principal pattern reaches further than a team's principals likely should, or None."""
    parts = pattern.split(":", 5)
    if len(parts) != 6:
        return None
    if "*" in parts[4] or "?" in parts[4]:
        return f"{pattern}: its account is a wildcard: it matches principals of every AWS account it fits"
    if parts[1] == "*" or "?" in parts[1]:
        return f"{pattern}: its partition is a wildcard"
    if parts[5] in ("*", "role/*", "user/*"):
        what = parts[5].split("/")[0] if "/" in parts[5] else "principal"
        return f"{pattern}: matches every {what} of the account"
    return None
