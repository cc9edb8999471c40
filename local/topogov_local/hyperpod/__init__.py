"""SageMaker HyperPod task governance, emulated for the local stack: the add-on that turns the
ComputeQuotas and the cluster policy of the AWS emulator into Kueue objects in the local API server
(:mod:`.addon`). What it writes is :func:`topogov.domain.hyperpod.addon_objects`, the one model of the
add-on's rendering; its undocumented parts are docs/hyperpod.md's table of assumptions."""

from topogov_local.hyperpod.addon import AddonEmulator, SyncResult

__all__ = ["AddonEmulator", "SyncResult"]
