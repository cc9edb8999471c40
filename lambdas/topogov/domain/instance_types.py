"""Allocatable per instance type, as the device plugins and kubelet report them on EKS: what the
local fleet registers and what the trace simulator gives a fleet file's nodes (``topogov whatif
--fleet``). Kubernetes quantity strings. An assumption of this project (kubelet's reserved CPU
and memory differ per AMI); listed in docs/architecture.md's table of assumptions."""

from __future__ import annotations

ALLOCATABLE: dict[str, dict[str, str]] = {
    "p5.48xlarge": {
        "nvidia.com/gpu": "8",
        "vpc.amazonaws.com/efa": "32",
        "cpu": "191450m",
        "memory": "2002Gi",
    },
    "p5e.48xlarge": {
        "nvidia.com/gpu": "8",
        "vpc.amazonaws.com/efa": "32",
        "cpu": "191450m",
        "memory": "2002Gi",
    },
    "p5en.48xlarge": {
        "nvidia.com/gpu": "8",
        "vpc.amazonaws.com/efa": "16",
        "cpu": "191450m",
        "memory": "2002Gi",
    },
    "p4d.24xlarge": {
        "nvidia.com/gpu": "8",
        "vpc.amazonaws.com/efa": "4",
        "cpu": "95690m",
        "memory": "1100Gi",
    },
    "p6-b200.48xlarge": {
        "nvidia.com/gpu": "8",
        "vpc.amazonaws.com/efa": "8",
        "cpu": "191450m",
        "memory": "2002Gi",
    },
    "trn2.48xlarge": {
        "aws.amazon.com/neuron": "16",
        "vpc.amazonaws.com/efa": "16",
        "cpu": "191450m",
        "memory": "2002Gi",
    },
    "c5.2xlarge": {"cpu": "7910m", "memory": "14Gi"},
    "m5.xlarge": {"cpu": "3920m", "memory": "14Gi"},
}
