"""What AWS documents about DescribeInstanceTopology that the emulation follows: the supported
instance types (three or four network layers) and Regions (EC2 User Guide, 'Prerequisites for
Amazon EC2 topology')."""

from __future__ import annotations

import re

EC2_NS = "http://ec2.amazonaws.com/doc/2016-11-15/"
DEFAULT_ACCOUNT_ID = "123456789012"  # moto's default account
CONTROL_PREFIX = "/_topogov/ec2"

# --- documented facts ------------------------------------------------------------------------

# "Prerequisites for Amazon EC2 topology" (EC2 User Guide), instance types section.
THREE_LAYER_TYPES: frozenset[str] = frozenset(
    {
        "g6e.xlarge", "g6e.2xlarge", "g6e.4xlarge", "g6e.8xlarge", "g6e.12xlarge",
        "g6e.16xlarge", "g6e.24xlarge", "g6e.48xlarge",
        "g7e.2xlarge", "g7e.4xlarge", "g7e.8xlarge", "g7e.12xlarge", "g7e.24xlarge",
        "g7e.48xlarge",
        "hpc6a.48xlarge", "hpc6id.32xlarge",
        "hpc7g.4xlarge", "hpc7g.8xlarge", "hpc7g.16xlarge",
        "hpc7a.12xlarge", "hpc7a.24xlarge", "hpc7a.48xlarge", "hpc7a.96xlarge",
        "hpc8a.96xlarge",
        "p3dn.24xlarge", "p4d.24xlarge", "p4de.24xlarge",
        "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge", "p6e-gb200.36xlarge",
        "trn1.2xlarge", "trn1.32xlarge", "trn1n.32xlarge", "trn2.48xlarge", "trn2u.48xlarge",
    }
)  # fmt: skip
FOUR_LAYER_TYPES: frozenset[str] = frozenset({"p6-b200.48xlarge", "p6-b300.48xlarge"})
SUPPORTED_INSTANCE_TYPES: frozenset[str] = THREE_LAYER_TYPES | FOUR_LAYER_TYPES

# Same page, "AWS Regions" section (names mapped to codes).
SUPPORTED_REGIONS: frozenset[str] = frozenset(
    {
        "us-east-1", "us-east-2", "us-west-1", "us-west-2",
        "af-south-1",
        "ap-southeast-3", "ap-east-1", "ap-south-2", "ap-southeast-4", "ap-south-1",
        "ap-northeast-3", "ap-northeast-2", "ap-southeast-1", "ap-southeast-2", "ap-northeast-1",
        "ca-central-1",
        "eu-central-1", "eu-west-1", "eu-west-2", "eu-west-3", "eu-south-2", "eu-north-1",
        "eu-central-2",
        "il-central-1",
        "me-south-1", "me-central-1",
        "sa-east-1",
        "us-gov-west-1",
        "eusc-de-east-1",
    }
)  # fmt: skip

MAX_IDS = 100
MAX_GROUP_NAMES = 100
MAX_RESULTS_MIN = 1
MAX_RESULTS_MAX = 100
DEFAULT_MAX_RESULTS = 20
FILTER_NAMES = ("availability-zone", "instance-type", "zone-id")
INSTANCE_ID_RE = re.compile(r"^i-(?:[0-9a-f]{8}|[0-9a-f]{17})$")

ENV_RATE = "TOPOGOV_EC2_TOPOLOGY_RATE"
ENV_BURST = "TOPOGOV_EC2_TOPOLOGY_BURST"
ENV_ENFORCE_REGIONS = "TOPOGOV_EC2_TOPOLOGY_ENFORCE_REGIONS"
