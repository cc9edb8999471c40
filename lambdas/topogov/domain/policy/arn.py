"""Who may act for a team: IAM principal patterns matched against the caller's ARN.

A principal pattern is an ARN whose six colon-separated parts
(``arn:PARTITION:SERVICE:REGION:ACCOUNT:RESOURCE``) are matched part by part, as IAM's
``ArnLike`` does, with ``*`` (any run of characters, ``/`` included) and ``?`` (exactly one
character), case-sensitively and against the whole part, so a wildcard never spills from the
account into the resource. The caller's ARN is taken literally, never as a pattern.

An assumed-role session ``arn:P:sts::ACCOUNT:assumed-role/ROLE/SESSION`` is first normalised to
its role ``arn:P:iam::ACCOUNT:role/ROLE``; the session name is dropped, so it never influences a
match. STS does not report a role's path, so for such a caller a role pattern
``role/PATH/NAME`` is matched by its name alone: the path (everything between ``role/`` and the
last ``/``) is ignored and ``NAME`` must match the role name. IAM role names are unique within an
account whatever their path, so an exact name still identifies exactly one role; a wildcard name
(``role/teams/TeamA*``) matches that name pattern on any path for session callers. A caller that
presents a role ARN itself (``arn:P:iam::ACCOUNT:role/PATH/NAME``) is matched with its path, as
IAM does. IAM users (``user/PATH/NAME``) and every other ARN are matched as they are.
"""

from __future__ import annotations

import functools
import re


@functools.lru_cache(maxsize=1024)
def _glob(pattern: str) -> re.Pattern[str]:
    return re.compile(
        "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern), re.DOTALL
    )


def _caller(arn: str) -> tuple[list[str], bool] | None:
    """The caller's ARN in parts, an assumed-role session normalised to its role; and whether it was one."""
    parts = arn.split(":", 5)
    if len(parts) != 6 or parts[0] != "arn":
        return None
    _, partition, service, _, account, resource = parts
    if service == "sts" and resource.startswith("assumed-role/"):
        segments = resource.split("/")
        if len(segments) < 3 or not segments[1]:
            return None
        return ["arn", partition, "iam", "", account, f"role/{segments[1]}"], True
    return parts, False


def principal_matches(pattern: str, arn: str) -> bool:
    """Whether the caller ``arn`` matches the principal ``pattern`` (see the module docstring)."""
    caller = _caller(arn)
    wanted = pattern.split(":", 5)
    if caller is None or len(wanted) != 6:
        return False
    parts, session = caller
    if not all(_glob(w).fullmatch(p) for w, p in zip(wanted[:5], parts[:5], strict=True)):
        return False
    resource = wanted[5]
    if session and resource.startswith("role/"):
        resource = "role/" + resource.rsplit("/", 1)[1]
    return _glob(resource).fullmatch(parts[5]) is not None
