"""The baseline checks, each as upstream's newest version of it (v1.35 policy).

Each check yields one :class:`Finding` per offending field, in the order upstream visits the fields:
the pod's own fields first where upstream reads them first, then the containers (``visitContainers``),
then, for AppArmor, the annotations sorted. A detail is upstream's ``ForbiddenDetail`` as it reads
when that field is the only offender (so ``container "main"``, never ``containers "a", "b"``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from topogov.domain.labels import APPARMOR_ANNOTATION_PREFIX
from topogov.domain.podsecurity.fields import (
    EMPTY,
    Finding,
    containers,
    contexts,
    flag,
    go_quote,
    integer,
    items,
    obj,
    present,
    text,
    user_namespaced,
)

# policy/check_capabilities_baseline.go: capabilities_allowed_1_0
BASELINE_CAPABILITIES = frozenset(
    {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE"}
    | {"SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
)
# policy/check_seLinuxOptions.go: selinuxAllowedTypes1_31
SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})
# policy/check_sysctls.go: sysctlsAllowedV1Dot32
SAFE_SYSCTLS = frozenset(
    {"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies"}
    | {"net.ipv4.ping_group_range", "net.ipv4.ip_unprivileged_port_start", "net.ipv4.ip_local_reserved_ports"}
    | {"net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl"}
    | {"net.ipv4.tcp_keepalive_probes", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"}
)
FIELD_HOST_PROCESS = "securityContext.windowsOptions.hostProcess"
PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
SECCOMP_TYPES = frozenset({"RuntimeDefault", "Localhost"})  # validSeccomp
APPARMOR_TYPES = frozenset({"RuntimeDefault", "Localhost"})  # allowedProfileType


def profile_type(base: str, profile: Mapping[str, Any]) -> tuple[str, str]:
    """A profile's ``type`` (``""`` when absent, Go's zero value) and the field to name for it."""
    value = text(profile, "type")
    return value or "", f"{base}.type" if profile.get("type") is not None else base


def app_armor_profile(metadata: Mapping[str, Any], spec: Mapping[str, Any]) -> Iterator[Finding]:
    """``appArmorProfile``, policy/check_appArmorProfile.go (1.0): a profile type other than
    RuntimeDefault or Localhost, on the pod or a container, or a beta annotation whose value is not
    empty, ``runtime/default`` or ``localhost/*``."""
    for who, path, context in contexts(spec):
        profile = obj(context, "appArmorProfile")
        if profile is None:
            continue
        kind, field = profile_type(f"{path}.appArmorProfile", profile)
        if kind not in APPARMOR_TYPES:
            yield Finding(field, f'{who} must not set AppArmor profile type to "{kind}"')
    annotations = obj(metadata, "annotations") or EMPTY
    forbidden = sorted(
        (f"{key}={go_quote(value)}", key)
        for key, value in annotations.items()
        if isinstance(key, str) and key.startswith(APPARMOR_ANNOTATION_PREFIX) and isinstance(value, str)
        if not (value in ("", "runtime/default") or value.startswith("localhost/"))
    )
    for shown, key in forbidden:
        detail = f'annotation must not set AppArmor profile type to "{shown}"'
        yield Finding(f"metadata.annotations.{key}", detail)


def capabilities_baseline(_: Mapping[str, Any], spec: Mapping[str, Any]) -> Iterator[Finding]:
    """``capabilities_baseline``, policy/check_capabilities_baseline.go (1.0): a capability added
    beyond the default set."""
    for c in containers(spec):
        capabilities = obj(c.security_context, "capabilities")
        for j, cap in enumerate(items(capabilities, "add")):
            if isinstance(cap, str) and cap not in BASELINE_CAPABILITIES:
                yield Finding(
                    f"{c.path}.securityContext.capabilities.add[{j}]",
                    f'{c.quoted()} must not include "{cap}" in securityContext.capabilities.add',
                )


def host_namespaces(_: Mapping[str, Any], spec: Mapping[str, Any]) -> Iterator[Finding]:
    """``hostNamespaces``, policy/check_hostNamespaces.go (1.0): hostNetwork, hostPID or hostIPC."""
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if flag(spec, key):
            yield Finding(f"spec.{key}", f"{key}=true")


def host_path_volumes(_: Mapping[str, Any], spec: Mapping[str, Any]) -> Iterator[Finding]:
    """``hostPathVolumes``, policy/check_hostPathVolumes.go (1.0): a hostPath volume."""
    for i, volume in enumerate(items(spec, "volumes")):
        if isinstance(volume, Mapping) and present(volume, "hostPath"):
            yield Finding(f"spec.volumes[{i}].hostPath", f'volume "{text(volume, "name") or ""}"')


def host_ports(_: Mapping[str, Any], spec: Mapping[str, Any]) -> Iterator[Finding]:
    """``hostPorts``, policy/check_hostPorts.go (1.0): a container port with a non-zero hostPort."""
    for c in containers(spec):
        for j, port in enumerate(items(c.body, "ports")):
            host_port = integer(port, "hostPort") if isinstance(port, Mapping) else None
            if host_port:
                yield Finding(f"{c.path}.ports[{j}].hostPort", f"{c.quoted()} uses hostPort {host_port}")


def handler_hosts(base: str, handler: Mapping[str, Any] | None) -> Iterator[tuple[str, str]]:
    """(field, host) of a probe's or lifecycle handler's non-empty httpGet.host and tcpSocket.host
    (``getForbiddenHostProbes``, ``getForbiddenHostLifecycle``)."""
    for action in ("httpGet", "tcpSocket"):
        host = text(obj(handler, action), "host")
        if host:
            yield f"{base}.{action}.host", host


def host_probes_and_host_lifecycle(_: Mapping[str, Any], spec: Mapping[str, Any]) -> Iterator[Finding]:
    """``hostProbesAndHostLifecycle``, policy/check_hostProbesAndhostLifecycle.go (1.34): a host in a
    probe's or a lifecycle handler's httpGet or tcpSocket."""
    for c in containers(spec):
        handlers = [(f"{c.path}.{p}", obj(c.body, p)) for p in PROBES]
        lifecycle = obj(c.body, "lifecycle")
        handlers += [(f"{c.path}.lifecycle.{h}", obj(lifecycle, h)) for h in ("postStart", "preStop")]
        for base, handler in handlers:
            for field, host in handler_hosts(base, handler):
                yield Finding(field, f'{c.quoted()} uses probe or lifecycle host "{host}"')


def privileged(_: Mapping[str, Any], spec: Mapping[str, Any]) -> Iterator[Finding]:
    """``privileged``, policy/check_privileged.go (1.0): securityContext.privileged=true."""
    for c in containers(spec):
        if flag(c.security_context, "privileged"):
            yield Finding(
                f"{c.path}.securityContext.privileged",
                f"{c.quoted()} must not set securityContext.privileged=true",
            )


def unmasked_proc_mounts(spec: Mapping[str, Any]) -> Iterator[Finding]:
    """A procMount other than Default (``procMount_1_0``, policy/check_procMount_baseline.go)."""
    for c in containers(spec):
        mount = text(c.security_context, "procMount")
        if mount is not None and mount != "Default":
            yield Finding(
                f"{c.path}.securityContext.procMount",
                f'{c.quoted()} must not set securityContext.procMount to "{mount}"',
            )


def proc_mount(_: Mapping[str, Any], spec: Mapping[str, Any]) -> Iterator[Finding]:
    """``procMount``, policy/check_procMount_baseline.go (1.35): :func:`unmasked_proc_mounts`, unless
    the pod is in a user namespace (``hostUsers: false``)."""
    if not user_namespaced(spec):
        yield from unmasked_proc_mounts(spec)


def selinux_findings(who: str, base: str, options: Mapping[str, Any]) -> Iterator[Finding]:
    """The forbidden fields of one seLinuxOptions (``validSELinuxOptions``)."""
    prefix = f"{who} set forbidden securityContext.seLinuxOptions"
    kind = text(options, "type") or ""
    if kind not in SELINUX_TYPES:
        yield Finding(f"{base}.type", f'{prefix}: type "{kind}"')
    for key in ("user", "role"):
        if text(options, key):
            yield Finding(f"{base}.{key}", f"{prefix}: {key} may not be set")


def selinux_options(_: Mapping[str, Any], spec: Mapping[str, Any]) -> Iterator[Finding]:
    """``seLinuxOptions``, policy/check_seLinuxOptions.go (1.31): a type outside the container types,
    or any user or role, on the pod or a container."""
    for who, path, context in contexts(spec):
        options = obj(context, "seLinuxOptions")
        if options is not None:
            yield from selinux_findings(who, f"{path}.seLinuxOptions", options)


def bad_seccomp(who: str, base: str, context: Mapping[str, Any] | None) -> Finding | None:
    """A seccompProfile set to a type other than RuntimeDefault or Localhost, or None."""
    profile = obj(context, "seccompProfile")
    if profile is None:
        return None
    kind, field = profile_type(f"{base}.seccompProfile", profile)
    if kind in SECCOMP_TYPES:
        return None
    return Finding(field, f'{who} must not set securityContext.seccompProfile.type to "{kind}"')


def explicit_seccomp(spec: Mapping[str, Any]) -> Iterator[Finding]:
    """Each pod or container seccompProfile set to a forbidden type."""
    for who, path, context in contexts(spec):
        found = bad_seccomp(who, path, context)
        if found is not None:
            yield found


def seccomp_profile_baseline(_: Mapping[str, Any], spec: Mapping[str, Any]) -> Iterator[Finding]:
    """``seccompProfile_baseline``, policy/check_seccompProfile_baseline.go (1.19): a seccompProfile
    type other than RuntimeDefault or Localhost (the field may be absent)."""
    yield from explicit_seccomp(spec)


def sysctls(_: Mapping[str, Any], spec: Mapping[str, Any]) -> Iterator[Finding]:
    """``sysctls``, policy/check_sysctls.go (1.32): a sysctl outside the safe set."""
    for i, sysctl in enumerate(items(obj(spec, "securityContext"), "sysctls")):
        if not isinstance(sysctl, Mapping):
            continue
        name = text(sysctl, "name") or ""
        if name not in SAFE_SYSCTLS:
            field = f"spec.securityContext.sysctls[{i}]"
            yield Finding(f"{field}.name" if sysctl.get("name") is not None else field, name)


def windows_host_process(_: Mapping[str, Any], spec: Mapping[str, Any]) -> Iterator[Finding]:
    """``windowsHostProcess``, policy/check_windowsHostProcess.go (1.0): windowsOptions.hostProcess
    set to true on a container or the pod (upstream names the pod first)."""
    for who, path, context in contexts(spec):
        if flag(obj(context, "windowsOptions"), "hostProcess"):
            detail = f"{who} must not set {FIELD_HOST_PROCESS}=true"
            yield Finding(f"{path}.windowsOptions.hostProcess", detail)
