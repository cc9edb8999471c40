"""The restricted checks, each as upstream's newest version of it (v1.35 policy).

As in :mod:`.baseline`, one :class:`Finding` per offending field. A check that requires a field
(``allowPrivilegeEscalation: false``, ``runAsNonRoot: true``, a seccomp profile, ``drop: [ALL]``)
names, for a container that lacks it, the field to set (``securityContext.allowPrivilegeEscalation``),
present or not. Where upstream's detail names only the
containers that set a bad value and leaves out those that set none (runAsNonRoot, seccomp), so do
these findings.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from topogov.domain.podsecurity.baseline import explicit_seccomp, unmasked_proc_mounts
from topogov.domain.podsecurity.fields import (
    Finding,
    containers,
    contexts,
    field_path,
    flag,
    integer,
    items,
    obj,
    present,
    text,
    user_namespaced,
    windows,
)

# policy/check_restrictedVolumes.go: the inline volume sources the restricted level allows, and the
# restricted ones in the order upstream's switch names them (a JSON key is the type's name there).
ALLOWED_VOLUMES = (
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "image",
    "persistentVolumeClaim",
    "projected",
    "secret",
)
RESTRICTED_VOLUMES = (
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "nfs",
    "iscsi",
    "glusterfs",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "fc",
    "azureFile",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "portworxVolume",
    "scaleIO",
    "storageos",
)


def allow_privilege_escalation(_: Mapping[str, Any], spec: Mapping[str, Any]) -> Iterator[Finding]:
    """``allowPrivilegeEscalation``, policy/check_allowPrivilegeEscalation.go (1.25): every container
    sets allowPrivilegeEscalation=false; a Windows pod (``spec.os.name``) is exempt."""
    if windows(spec):
        return
    for c in containers(spec):
        if flag(c.security_context, "allowPrivilegeEscalation") is not False:
            yield Finding(
                field_path(c.path, "securityContext", "allowPrivilegeEscalation"),
                f"{c.quoted()} must set securityContext.allowPrivilegeEscalation=false",
            )


def capabilities_restricted(_: Mapping[str, Any], spec: Mapping[str, Any]) -> Iterator[Finding]:
    """``capabilities_restricted``, policy/check_capabilities_restricted.go (1.25): every container
    drops ALL and adds nothing but NET_BIND_SERVICE; a Windows pod is exempt. Replaces
    ``capabilities_baseline`` at the restricted level."""
    if windows(spec):
        return
    for c in containers(spec):
        capabilities = obj(c.security_context, "capabilities")
        if "ALL" not in items(capabilities, "drop"):
            yield Finding(
                field_path(c.path, "securityContext", "capabilities", "drop"),
                f'{c.quoted()} must set securityContext.capabilities.drop=["ALL"]',
            )
        for j, cap in enumerate(items(capabilities, "add")):
            if isinstance(cap, str) and cap != "NET_BIND_SERVICE":
                yield Finding(
                    f"{c.path}.securityContext.capabilities.add[{j}]",
                    f'{c.quoted()} must not include "{cap}" in securityContext.capabilities.add',
                )


def proc_mount_restricted(_: Mapping[str, Any], spec: Mapping[str, Any]) -> Iterator[Finding]:
    """``procMount_restricted``, policy/check_procMount_restricted.go (1.35): a procMount other than
    Default, user namespace or not. Replaces the baseline ``procMount`` at the restricted level."""
    yield from unmasked_proc_mounts(spec)


def restricted_volumes(_: Mapping[str, Any], spec: Mapping[str, Any]) -> Iterator[Finding]:
    """``restrictedVolumes``, policy/check_restrictedVolumes.go (1.0): a volume of a source outside
    the allowed ones. Replaces ``hostPathVolumes`` at the restricted level.

    A volume with no source at all is not one: the API server defaults it to ``emptyDir: {}``
    before admission (``SetDefaults_Volume``, kubernetes pkg/apis/core/v1/defaults.go), so upstream's
    ``unknown`` type never reaches it (upstream's pass fixture ``restrictedvolumes0`` has one)."""
    for i, volume in enumerate(items(spec, "volumes")):
        if not isinstance(volume, Mapping) or any(present(volume, k) for k in ALLOWED_VOLUMES):
            continue
        kind = next((k for k in RESTRICTED_VOLUMES if present(volume, k)), None)
        if kind is not None:
            name = text(volume, "name") or ""
            detail = f'volume "{name}" uses restricted volume type "{kind}"'
            yield Finding(f"spec.volumes[{i}].{kind}", detail)


def run_as_non_root(_: Mapping[str, Any], spec: Mapping[str, Any]) -> Iterator[Finding]:
    """``runAsNonRoot``, policy/check_runAsNonRoot.go (1.35): runAsNonRoot=true on the pod, or on
    every container; none set to false. A pod in a user namespace (``hostUsers: false``) is exempt.
    As upstream, the containers that merely lack it are named only when nothing sets false."""
    if user_namespaced(spec):
        return
    explicit = [
        Finding(f"{path}.runAsNonRoot", f"{who} must not set securityContext.runAsNonRoot=false")
        for who, path, context in contexts(spec)
        if flag(context, "runAsNonRoot") is False
    ]
    yield from explicit
    if explicit or flag(obj(spec, "securityContext"), "runAsNonRoot"):
        return
    for c in containers(spec):
        if flag(c.security_context, "runAsNonRoot") is None:
            yield Finding(
                field_path(c.path, "securityContext", "runAsNonRoot"),
                f"pod or {c.quoted()} must set securityContext.runAsNonRoot=true",
            )


def run_as_user(_: Mapping[str, Any], spec: Mapping[str, Any]) -> Iterator[Finding]:
    """``runAsUser``, policy/check_runAsUser.go (1.35): runAsUser=0 on the pod or a container. A pod
    in a user namespace (``hostUsers: false``) is exempt."""
    if user_namespaced(spec):
        return
    for who, path, context in contexts(spec):
        if integer(context, "runAsUser") == 0:
            yield Finding(f"{path}.runAsUser", f"{who} must not set runAsUser=0")


def seccomp_profile_restricted(_: Mapping[str, Any], spec: Mapping[str, Any]) -> Iterator[Finding]:
    """``seccompProfile_restricted``, policy/check_seccompProfile_restricted.go (1.25): the pod, or
    else every container, sets a seccompProfile of type RuntimeDefault or Localhost; a Windows pod is
    exempt. Replaces ``seccompProfile_baseline`` at the restricted level. As upstream, the containers
    that merely lack one are named only when nothing sets a forbidden type."""
    if windows(spec):
        return
    explicit = list(explicit_seccomp(spec))
    yield from explicit
    pod_profile = obj(obj(spec, "securityContext"), "seccompProfile")
    if explicit or pod_profile is not None:  # a pod-level profile: valid, else it is in `explicit`
        return
    for c in containers(spec):
        if obj(c.security_context, "seccompProfile") is None:
            yield Finding(
                field_path(c.path, "securityContext", "seccompProfile", "type"),
                f"pod or {c.quoted()} must set securityContext.seccompProfile.type"
                ' to "RuntimeDefault" or "Localhost"',
            )
