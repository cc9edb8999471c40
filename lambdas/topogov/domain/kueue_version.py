"""The Kueue the cluster runs: its release, where that was learnt, the API version Topogov reads and
writes, and the model profile that answers estimates and what-ifs for it. Pure: the adapters read the
cluster (``adapters/kueue_api.py``) and pass strings in.

* **API version** — ``kueue.x-k8s.io/v1beta2`` where the cluster serves it, else ``v1beta1``
  (:func:`choose_api_version`). Kueue v0.15 first serves v1beta2 (kubernetes-sigs/kueue v0.15.0
  ``apis/kueue/v1beta2``), v0.16 stores it, and v0.20 stops serving v1beta1 (kubernetes-sigs/kueue
  #14558). A configured version (``TOPOGOV_KUEUE_API_VERSION``) the cluster does not serve is an error,
  never a silent fallback.
* **release** — the Kueue controller Deployment's image tag (``kueue-system/kueue-controller-manager``,
  ``registry.k8s.io/kueue/kueue:v0.17.0``); on SageMaker HyperPod, the task governance add-on's
  version through :data:`ADDON_KUEUE`; else a setting (``TOPOGOV_KUEUE_VERSION``); else unknown.
* **guard** (:func:`check_writes`) — nothing writes ``podSetSliceRequiredTopology``/``podSetSliceSize``
  to a Kueue older than v0.13 (the fields first appear in kubernetes-sigs/kueue v0.13.0
  ``apis/kueue/v1beta1/workload_types.go``), nor v1beta2 objects to one older than v0.15.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from topogov.domain.errors import ConfigError
from topogov.domain.kueue import ApiVersion

Release = tuple[int, int, int]

MODEL_PROFILE: Release = (0, 17, 0)  # domain/kueue_model is faithful to Kueue v0.17.0
SLICES_SINCE: Release = (0, 13, 0)
V1BETA2_SINCE: Release = (0, 15, 0)

# The task governance add-on's version -> the Kueue it packages. SageMaker Developer Guide, "Upgrade
# the task governance add-on" (docs.aws.amazon.com/sagemaker/latest/dg/
# sagemaker-hyperpod-eks-operate-console-ui-governance-upgrade.html): "Version v1.6.0-eksbuild.1
# packages Kueue v0.19.2". The page names no Kueue release for earlier add-on versions: they read
# "older, unknown".
ADDON_KUEUE: dict[tuple[int, int, int], Release] = {(1, 6, 0): (0, 19, 2)}

# What a v0.17.0 model may answer differently from Kueue v0.19 (issue 40; kubernetes-sigs/kueue PRs).
V017_TO_V019 = (
    "ties between topology domains are broken by their level values (kubernetes-sigs/kueue #12052)",
    "topology assignments are recomputed inside the scheduling cycle (#12419)",
    "balanced placement falls back to BestFit (#11136)",
    "a topology assignment error counts as NoFit",
    "a pending workload's reason may be TopologyPlacementFailed (#13022)",
    "a Workload holds up to 18 pod sets, not 8",
)

_VERSION = re.compile(r"v?(\d+)\.(\d+)\.(\d+)")


def parse_release(text: str | None) -> Release | None:
    """``v0.17.0``, ``0.17.0``, ``v1.6.0-eksbuild.1`` -> ``(0, 17, 0)``...; None without one."""
    m = _VERSION.search(text or "")
    return (int(m[1]), int(m[2]), int(m[3])) if m else None


def release_of_image(image: str) -> Release | None:
    """The release in an image's tag (``registry.k8s.io/kueue/kueue:v0.17.0``), None without a tag
    that names one (a digest, ``latest``)."""
    name = image.split("@", 1)[0]
    tag = name.rsplit(":", 1)[1] if ":" in name.rsplit("/", 1)[-1] else ""
    return parse_release(tag)


def text(release: Release) -> str:
    return "v" + ".".join(map(str, release))


@dataclass(frozen=True)
class KueueVersion:
    """The release the cluster runs (None: unknown) and where that was learnt."""

    release: Release | None
    source: str

    @property
    def shown(self) -> str:
        return text(self.release) if self.release else "unknown"

    @property
    def profiled(self) -> bool:
        """The model has a profile for this release (v0.17.x)."""
        return self.release is not None and self.release[:2] == MODEL_PROFILE[:2]

    def profile(self) -> str:
        """Which model profile answers, and for another release what may differ."""
        if self.profiled:
            return f"Kueue {text(MODEL_PROFILE)} (the model's profile)"
        return (
            f"Kueue {text(MODEL_PROFILE)} — no profile for Kueue {self.shown}; what may differ: "
            + "; ".join(self.differences())
        )

    def differences(self) -> tuple[str, ...]:
        if self.profiled:
            return ()
        return V017_TO_V019

    def as_json(self) -> dict[str, object]:
        return {
            "version": self.shown,
            "source": self.source,
            "modelProfile": text(MODEL_PROFILE),
            "mayDiffer": list(self.differences()),
        }


UNKNOWN = KueueVersion(None, "unknown: no Kueue Deployment image, add-on version or setting")


def from_image(image: str) -> KueueVersion | None:
    release = release_of_image(image)
    return KueueVersion(release, f"the Kueue Deployment's image {image}") if release else None


def from_addon(addon_version: str) -> KueueVersion:
    """The Kueue a task governance add-on version packages (:data:`ADDON_KUEUE`)."""
    addon = parse_release(addon_version)
    release = ADDON_KUEUE.get(addon) if addon else None
    if release is None:
        return KueueVersion(
            None, f"task governance add-on {addon_version}: older, unknown (no cited Kueue release)"
        )
    return KueueVersion(
        release,
        f"task governance add-on {addon_version} (SageMaker Developer Guide, "
        "'Upgrade the task governance add-on')",
    )


def from_setting(value: str | None) -> KueueVersion | None:
    release = parse_release(value)
    return KueueVersion(release, "the setting TOPOGOV_KUEUE_VERSION") if release else None


def choose_api_version(served: tuple[str, ...], configured: str | None = None) -> ApiVersion:
    """``v1beta2`` where served, else ``v1beta1``; a configured version must be served (ConfigError
    otherwise). Nothing served (discovery failed): the configured one, else ``v1beta1``."""
    if configured is not None and configured not in ("v1beta1", "v1beta2"):
        raise ConfigError(f"Kueue API version {configured!r}: Topogov speaks v1beta1 or v1beta2")
    if served and configured is not None and configured not in served:
        raise ConfigError(
            f"TOPOGOV_KUEUE_API_VERSION={configured} but the cluster's Kueue serves "
            f"{', '.join(served)} — unset it (Topogov then uses "
            f"{'v1beta2' if 'v1beta2' in served else 'v1beta1'}) or set a served one"
        )
    if configured == "v1beta1":
        return "v1beta1"
    if configured == "v1beta2" or "v1beta2" in served:
        return "v1beta2"
    return "v1beta1"


def check_writes(kueue: KueueVersion, api_version: str, *, slices: bool = False) -> None:
    """Refuse (ConfigError) to write v1beta2 to a Kueue older than v0.15, or slices (a pod set's
    ``podSetSliceRequiredTopology``/``podSetSliceSize``) to one older than v0.13. An unknown release
    passes: the API server refuses what its CRDs do not serve."""
    if kueue.release is None:
        return
    if api_version == "v1beta2" and kueue.release < V1BETA2_SINCE:
        raise ConfigError(
            f"Kueue {kueue.shown} ({kueue.source}) has no v1beta2 API (Kueue {text(V1BETA2_SINCE)} "
            "or later serves it): nothing written"
        )
    if slices and kueue.release < SLICES_SINCE:
        raise ConfigError(
            f"Kueue {kueue.shown} ({kueue.source}) has no topology slices (podSetSliceRequiredTopology "
            f"came with Kueue {text(SLICES_SINCE)}): nothing written"
        )
