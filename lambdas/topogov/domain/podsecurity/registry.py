"""The checks each level applies and their order, as upstream's ``policy/registry.go`` builds them
for the newest policy version; the one entry point, :func:`violations`."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from topogov.domain.podsecurity import baseline, restricted
from topogov.domain.podsecurity.fields import EMPTY, Finding

LEVELS = ("privileged", "baseline", "restricted")
POLICY_VERSION = "v1.35"

CheckFn = Callable[[Mapping[str, Any], Mapping[str, Any]], Iterator[Finding]]


@dataclass(frozen=True, slots=True)
class Violation:
    """One offending field of a pod template.

    ``check`` is upstream's check ID (``hostNamespaces``), ``level`` the level whose rule it breaks,
    ``field`` a path from the template (``spec.containers[0].securityContext.privileged``), and
    ``message`` upstream's forbidden reason and, in parentheses, its detail for this field alone
    (``privileged (container "main" must not set securityContext.privileged=true)``)."""

    check: str
    level: str
    field: str
    message: str


@dataclass(frozen=True, slots=True)
class Check:
    id: str
    level: str
    reason: str  # upstream's ForbiddenReason (singular: one field at a time)
    fn: CheckFn
    overrides: str | None = None  # the baseline check it replaces at the restricted level


CHECKS = (
    Check("appArmorProfile", "baseline", "forbidden AppArmor profile", baseline.app_armor_profile),
    Check("capabilities_baseline", "baseline", "non-default capabilities", baseline.capabilities_baseline),
    Check("hostNamespaces", "baseline", "host namespaces", baseline.host_namespaces),
    Check("hostPathVolumes", "baseline", "hostPath volumes", baseline.host_path_volumes),
    Check("hostPorts", "baseline", "hostPort", baseline.host_ports),
    Check(
        "hostProbesAndHostLifecycle",
        "baseline",
        "probe or lifecycle host",
        baseline.host_probes_and_host_lifecycle,
    ),
    Check("privileged", "baseline", "privileged", baseline.privileged),
    Check("procMount", "baseline", "procMount", baseline.proc_mount),
    Check("seLinuxOptions", "baseline", "seLinuxOptions", baseline.selinux_options),
    Check("seccompProfile_baseline", "baseline", "seccompProfile", baseline.seccomp_profile_baseline),
    Check("sysctls", "baseline", "forbidden sysctls", baseline.sysctls),
    Check("windowsHostProcess", "baseline", "hostProcess", baseline.windows_host_process),
    Check(
        "allowPrivilegeEscalation",
        "restricted",
        "allowPrivilegeEscalation != false",
        restricted.allow_privilege_escalation,
    ),
    Check(
        "capabilities_restricted",
        "restricted",
        "unrestricted capabilities",
        restricted.capabilities_restricted,
        overrides="capabilities_baseline",
    ),
    Check(
        "procMount_restricted",
        "restricted",
        "procMount",
        restricted.proc_mount_restricted,
        overrides="procMount",
    ),
    Check(
        "restrictedVolumes",
        "restricted",
        "restricted volume types",
        restricted.restricted_volumes,
        overrides="hostPathVolumes",
    ),
    Check("runAsNonRoot", "restricted", "runAsNonRoot != true", restricted.run_as_non_root),
    Check("runAsUser", "restricted", "runAsUser=0", restricted.run_as_user),
    Check(
        "seccompProfile_restricted",
        "restricted",
        "seccompProfile",
        restricted.seccomp_profile_restricted,
        overrides="seccompProfile_baseline",
    ),
)

# upstream's ForbiddenReason of each check (the display string its warnings and errors show)
REASONS: Mapping[str, str] = {c.id: c.reason for c in CHECKS}
# a baseline check -> the restricted check that replaces it at the restricted level (OverrideCheckIDs)
OVERRIDES: Mapping[str, str] = {c.overrides: c.id for c in CHECKS if c.overrides}


def applied(level: str) -> tuple[Check, ...]:
    """The checks of a level in upstream's order (``populate``): the baseline IDs sorted, then the
    restricted IDs sorted; restricted adds its own and drops the baseline checks it overrides."""
    if level not in LEVELS:
        raise ValueError(f"unknown Pod Security level {level!r}: one of {', '.join(LEVELS)}")
    if level == "privileged":
        return ()
    ordered = sorted((c for c in CHECKS if c.level == "baseline"), key=lambda c: c.id)
    if level == "restricted":
        ordered = [c for c in ordered if c.id not in OVERRIDES]
        ordered += sorted((c for c in CHECKS if c.level == "restricted"), key=lambda c: c.id)
    return tuple(ordered)


def check_ids(level: str) -> tuple[str, ...]:
    """The IDs of the checks ``level`` applies, in the order :func:`violations` runs them."""
    return tuple(c.id for c in applied(level))


def violations(level: str, metadata: Mapping[str, Any] | None, spec: Mapping[str, Any]) -> list[Violation]:
    """Every field of a pod template (or pod) that ``level`` forbids at policy version ``latest``
    (v1.35), one :class:`Violation` each: by check in upstream's order, then in field order.

    ``metadata`` and ``spec`` are the template's JSON objects (camelCase). A value of the wrong JSON
    type is read as absent and never raises; an unknown ``level`` raises ValueError."""
    meta = metadata if isinstance(metadata, Mapping) else EMPTY
    body = spec if isinstance(spec, Mapping) else EMPTY
    found = []
    for check in applied(level):
        for field, detail in check.fn(meta, body):
            message = f"{check.reason} ({detail})" if detail else check.reason
            found.append(Violation(check.id, check.level, field, message))
    return found
