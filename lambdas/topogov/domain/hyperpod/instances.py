"""The instance types Topogov can split a HyperPod quota over, with the figures HyperPod task
governance counts them by: the type's *nominal* vCPUs and memory (not what kubelet leaves
allocatable), its accelerators and its EFA interfaces.

Why nominal: a compute allocation of 4 × ``ml.m5.xlarge`` became a ClusterQueue of ``cpu: 16`` and
``memory: 64Gi`` (4 vCPUs and 16 GiB each) on nodes with 1930m allocatable (a public field report on
add-on v1.6.1, 2026-10; not documented), and "the ratio [of] allocated resource divided by the total
amount of resources available in the instance" (SageMaker Developer Guide,
sagemaker-hyperpod-eks-operate-console-ui-governance-policies-compute-allocation.html) is taken of
such totals. The figures are Amazon EC2's instance type specifications (EC2 User Guide, "Amazon EC2
instance type specifications": accelerated computing, compute and general purpose tables): vCPUs,
memory in GiB, GPUs or Trainium devices, and the EFA network interfaces a type supports. A type not
listed here is refused by ``topogov policy check --hyperpod`` (a quota could not be split over it)
and skipped by the add-on's emulation.
"""

from __future__ import annotations

from typing import NamedTuple

from topogov.domain.quantity import Resources

GPU_DEVICE = "nvidia.com/gpu"
NEURON_DEVICE = "aws.amazon.com/neurondevice"  # Trainium/Inferentia, as the add-on names it (S5)


class InstanceSpec(NamedTuple):
    """One instance type as HyperPod counts it."""

    vcpus: int
    memory_gib: int
    accelerators: int = 0
    accelerator: str = GPU_DEVICE  # the Kubernetes resource its accelerators are
    efa: int = 0

    def resources(self) -> Resources:
        """As Topogov's governed resources (Trainium devices are not governed: 0 GPUs)."""
        return Resources(
            gpu=self.accelerators if self.accelerator == GPU_DEVICE else 0,
            efa=self.efa,
            cpu_m=self.vcpus * 1000,
            memory=self.memory_gib * 2**30,
        )


NOMINAL: dict[str, InstanceSpec] = {
    "ml.p4d.24xlarge": InstanceSpec(96, 1152, 8, efa=4),
    "ml.p4de.24xlarge": InstanceSpec(96, 1152, 8, efa=4),
    "ml.p5.48xlarge": InstanceSpec(192, 2048, 8, efa=32),
    "ml.p5e.48xlarge": InstanceSpec(192, 2048, 8, efa=32),
    "ml.p5en.48xlarge": InstanceSpec(192, 2048, 8, efa=16),
    "ml.p6-b200.48xlarge": InstanceSpec(192, 2048, 8, efa=8),
    "ml.trn1.32xlarge": InstanceSpec(128, 512, 16, NEURON_DEVICE, efa=8),
    "ml.trn2.48xlarge": InstanceSpec(192, 2048, 16, NEURON_DEVICE, efa=16),
    "ml.g5.8xlarge": InstanceSpec(32, 128, 1, efa=1),
    "ml.g5.48xlarge": InstanceSpec(192, 768, 8, efa=1),
    "ml.c5.xlarge": InstanceSpec(4, 8),
    "ml.c5.2xlarge": InstanceSpec(8, 16),
    "ml.m5.xlarge": InstanceSpec(4, 16),
    "ml.m5.2xlarge": InstanceSpec(8, 32),
    "ml.t3.medium": InstanceSpec(2, 4),
}
