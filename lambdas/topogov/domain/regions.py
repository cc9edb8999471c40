"""The AWS Regions where the stack can run: both APIs it cannot do without exist there (pure, no I/O).

One list per feature, each copied from the AWS page that publishes it (read 2026-12); `infra/config.py`
refuses any other Region at synth and `topogov preflight` says the same before a deploy. When AWS adds a
Region, add it here (and only here), citing the page again.
"""

from __future__ import annotations

# Amazon EC2 User Guide, "Prerequisites for Amazon EC2 topology", section "AWS Regions":
# https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-instance-topology-prerequisites.html
# ("Supported AWS Regions: US East (N. Virginia), US East (Ohio), US West (N. California), US West (Oregon);
# Africa (Cape Town); Asia Pacific (Jakarta), (Hong Kong), (Hyderabad), (Melbourne), (Mumbai), (Osaka),
# (Seoul), (Singapore), (Sydney), (Tokyo); Canada (Central); Europe (Frankfurt), (Ireland), (London),
# (Paris), (Spain), (Stockholm), (Zurich); Israel (Tel Aviv); Middle East (Bahrain), (UAE);
# South America (São Paulo); AWS GovCloud (US-West)"). DescribeInstanceTopology is the labeler's only
# source of the network layers.
TOPOLOGY_REGIONS: frozenset[str] = frozenset(
    {
        "us-east-1",
        "us-east-2",
        "us-west-1",
        "us-west-2",
        "af-south-1",
        "ap-southeast-3",
        "ap-east-1",
        "ap-south-2",
        "ap-southeast-4",
        "ap-south-1",
        "ap-northeast-3",
        "ap-northeast-2",
        "ap-southeast-1",
        "ap-southeast-2",
        "ap-northeast-1",
        "ca-central-1",
        "eu-central-1",
        "eu-west-1",
        "eu-west-2",
        "eu-west-3",
        "eu-south-2",
        "eu-north-1",
        "eu-central-2",
        "il-central-1",
        "me-south-1",
        "me-central-1",
        "sa-east-1",
        "us-gov-west-1",
    }
)

# The commercial ("aws" partition) Regions, as the AWS SDKs' endpoint data lists them (botocore 1.44).
_COMMERCIAL: frozenset[str] = frozenset(
    {
        "af-south-1",
        "ap-east-1",
        "ap-east-2",
        "ap-northeast-1",
        "ap-northeast-2",
        "ap-northeast-3",
        "ap-south-1",
        "ap-south-2",
        "ap-southeast-1",
        "ap-southeast-2",
        "ap-southeast-3",
        "ap-southeast-4",
        "ap-southeast-5",
        "ap-southeast-6",
        "ap-southeast-7",
        "ca-central-1",
        "ca-west-1",
        "eu-central-1",
        "eu-central-2",
        "eu-north-1",
        "eu-south-1",
        "eu-south-2",
        "eu-west-1",
        "eu-west-2",
        "eu-west-3",
        "il-central-1",
        "me-central-1",
        "me-south-1",
        "mx-central-1",
        "sa-east-1",
        "us-east-1",
        "us-east-2",
        "us-west-1",
        "us-west-2",
    }
)

# AWS Lambda Developer Guide, "Improving startup performance with Lambda SnapStart", section
# "Supported Regions": https://docs.aws.amazon.com/lambda/latest/dg/snapstart.html#snapstart-supported-regions
# ("Lambda SnapStart is available in all commercial Regions except Asia Pacific (New Zealand) and
# Asia Pacific (Taipei)"). The API function is published with SnapStart for Python (its alias `live`).
SNAPSTART_REGIONS: frozenset[str] = _COMMERCIAL - {"ap-southeast-6", "ap-east-2"}

TOPOLOGY_DOC = "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-instance-topology-prerequisites.html"
SNAPSTART_DOC = "https://docs.aws.amazon.com/lambda/latest/dg/snapstart.html#snapstart-supported-regions"

SUPPORTED_REGIONS: frozenset[str] = TOPOLOGY_REGIONS & SNAPSTART_REGIONS


def unsupported(region: str) -> list[str]:
    """What the stack needs that `region` lacks, one sentence per missing feature (empty when it has all).

    Each sentence names the feature, the Region and where AWS lists the Regions that have it; a caller
    that refuses the Region adds `supported_list()`.
    """
    missing: list[str] = []
    if region not in TOPOLOGY_REGIONS:
        missing.append(
            f"EC2 DescribeInstanceTopology is not available in {region!r} (Regions: {TOPOLOGY_DOC})"
        )
    if region not in SNAPSTART_REGIONS:
        missing.append(f"Lambda SnapStart is not available in {region!r} (Regions: {SNAPSTART_DOC})")
    return missing


def supported_list() -> str:
    """The Regions that have both, sorted, comma-separated: what a refusal offers instead."""
    return ", ".join(sorted(SUPPORTED_REGIONS))
