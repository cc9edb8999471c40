"""The one place every adapter learns which Kueue API version to read and write, and which Kueue
release the cluster runs (``domain/kueue_version.py`` says how each is chosen).

Discovery of ``/apis/kueue.x-k8s.io`` (its ``versions`` and ``preferredVersion``) is kept
:data:`DISCOVERY_TTL_S`, like ``KubeJobs.served_kinds``: a Kueue upgrade that stops serving v1beta1 is
followed within that time, and a pass makes one discovery call at most.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from topogov.adapters.kube import KubeHttp
from topogov.domain.kueue import ApiVersion
from topogov.domain.kueue_version import (
    UNKNOWN,
    KueueVersion,
    choose_api_version,
    from_addon,
    from_image,
    from_setting,
)

GROUP = "kueue.x-k8s.io"
DISCOVERY_TTL_S = 300.0
DEPLOYMENT = "/apis/apps/v1/namespaces/kueue-system/deployments/kueue-controller-manager"


@dataclass(frozen=True)
class Served:
    """What discovery said: the versions served (empty: no Kueue, or discovery failed) and the
    preferred one."""

    versions: tuple[str, ...]
    preferred: str | None
    status: int = 200


class KueueApi:
    """``version()`` is the API version to use; ``path()`` its ``/apis/kueue.x-k8s.io/<version>``."""

    def __init__(
        self,
        http: KubeHttp,
        *,
        configured: str | None = None,
        kueue_version: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.http = http
        self.configured = configured  # TOPOGOV_KUEUE_API_VERSION: must be served (else ConfigError)
        self.kueue_version_setting = kueue_version  # TOPOGOV_KUEUE_VERSION: the last source
        self.clock = clock
        self._served: tuple[float, Served] | None = None
        self._release: tuple[float, KueueVersion] | None = None

    def served(self) -> Served:
        now = self.clock()
        if self._served is not None and now - self._served[0] < DISCOVERY_TTL_S:
            return self._served[1]
        resp = self.http.request("GET", f"/apis/{GROUP}")
        body: dict[str, Any] = resp.body if resp.status == 200 and isinstance(resp.body, dict) else {}
        served = Served(
            tuple(str(v.get("version")) for v in body.get("versions") or ()),
            (body.get("preferredVersion") or {}).get("version"),
            resp.status,
        )
        if resp.status in (200, 404):  # a failed discovery is asked again next time
            self._served = (now, served)
        return served

    def version(self) -> ApiVersion:
        """v1beta2 where served, else v1beta1; the configured one if it is served (ConfigError if
        not); with discovery failing, the configured one, else v1beta1."""
        return choose_api_version(self.served().versions, self.configured)

    def group_version(self) -> str:
        return f"{GROUP}/{self.version()}"

    def path(self) -> str:
        return f"/apis/{self.group_version()}"

    def kueue_version(self, addon_version: str | None = None) -> KueueVersion:
        """The release: the controller Deployment's image tag, else the task governance add-on's
        version (``addon_version``, EKS ``DescribeAddon``'s ``addonVersion``, read by the caller),
        else the setting, else unknown. Kept :data:`DISCOVERY_TTL_S` (without an add-on version)."""
        now = self.clock()
        if addon_version is None and self._release and now - self._release[0] < DISCOVERY_TTL_S:
            return self._release[1]
        found = self._find_version(addon_version)
        if addon_version is None:
            self._release = (now, found)
        return found

    def _find_version(self, addon_version: str | None) -> KueueVersion:
        image = deployment_image(self.http)
        found = from_image(image) if image else None
        if found is None and addon_version:
            found = from_addon(addon_version)
        if found is None or found.release is None:
            found = from_setting(self.kueue_version_setting) or found
        return found or UNKNOWN


def deployment_image(http: KubeHttp) -> str | None:
    """The manager container's image of ``kueue-system/kueue-controller-manager`` (Kueue's release
    manifests, config/default), None without one or without ``get`` on it."""
    resp = http.request("GET", DEPLOYMENT)
    if resp.status != 200 or not isinstance(resp.body, dict):
        return None
    containers = ((resp.body.get("spec") or {}).get("template") or {}).get("spec", {}).get("containers") or []
    manager = next((c for c in containers if c.get("name") == "manager"), containers[0] if containers else {})
    image = manager.get("image")
    return str(image) if image else None
