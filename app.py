#!/usr/bin/env python3
"""The CDK app: ``npx cdk synth`` / ``npx cdk deploy`` (the CLI is pinned in package.json).

Inputs come from cdk.json context or ``-c topogov:key=value``; the team policy is validated here,
at synth time. cdk-nag's AwsSolutions checks run on every synth. No AWS calls are made.
"""

from __future__ import annotations

import os
import sys
from typing import Any


def quiet_node_banner() -> None:
    """jsii prints an 11-line end-of-life banner (as Python byte strings) on every synth when Node is
    past its support; the variable that silences it is ``JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION``
    = the Node major version (jsii's runtime reads it; ``..._DEPRECATED_NODE_VERSION`` does not). Say
    it once, in one line, then silence it. Supported: Node 22 or 24; Node 20 works (README)."""
    import subprocess

    name = "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"
    if os.environ.get(name):
        return
    try:
        probe = ["node", "-p", "process.versions.node.split('.')[0]"]
        major = subprocess.run(probe, capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return
    if major.isdigit() and int(major) < 22:
        note = (
            f"note: Node {major} is past jsii's end of life (Node 22 or 24 are supported); synth works on it"
        )
        print(note, file=sys.stderr)
    os.environ[name] = major


quiet_node_banner()

import aws_cdk as cdk  # noqa: E402  (after the banner is settled: jsii starts Node on import)
from cdk_nag import AwsSolutionsChecks  # noqa: E402

from infra.config import (  # noqa: E402
    DeployConfig,
    DeployConfigError,
    refuse_other_region,
    refuse_unsupported_region,
)
from infra.nag import suppress  # noqa: E402
from infra.stack import TopogovStack  # noqa: E402


def build(app: cdk.App) -> TopogovStack:
    from topogov.domain.policy import PolicyError, load_policy_file

    config = DeployConfig.from_context(app.node.try_get_context)
    if not config.region and os.environ.get("CDK_DEFAULT_REGION"):  # the CLI's, from the profile
        try:
            refuse_unsupported_region(os.environ["CDK_DEFAULT_REGION"])
        except ValueError as exc:
            raise DeployConfigError(f"the deploy Region (your AWS profile's): {exc}") from None
    try:
        policy = load_policy_file(config.policy_path)
    except (PolicyError, OSError) as exc:
        raise DeployConfigError(f"topogov:policyFile {config.policy_path}: {exc}") from None
    env = (
        cdk.Environment(account=config.account, region=config.region)
        if config.account or config.region
        else None
    )
    governance = hyperpod_policy(config, policy)
    from topogov.domain.policy.arn import role_patterns

    stack = TopogovStack(
        app,
        "Topogov",
        config=config,
        teams=sorted(policy.teams),
        principal_roles=role_patterns(policy.principal_patterns),
        env=env,
        governance=governance,
    )
    suppress(stack)
    cdk.Aspects.of(app).add(AwsSolutionsChecks(verbose=True))
    return stack


def hyperpod_policy(config: DeployConfig, policy: Any) -> Any:
    """HyperPod task governance's policy of ``teams.yaml`` when the stack is given the cluster (None
    otherwise); what the APIs would refuse is refused here, each problem named by its field."""
    from topogov.domain import hyperpod
    from topogov.domain.policy import PolicyError

    if not config.hyperpod_cluster_arn:
        return None
    if not config.region and os.environ.get("CDK_DEFAULT_REGION"):  # the CLI's, from the profile
        try:
            refuse_other_region(config.hyperpod_cluster_arn, os.environ["CDK_DEFAULT_REGION"])
        except ValueError as exc:
            raise DeployConfigError(f"topogov:hyperpodClusterArn: {exc}") from None
    try:
        return hyperpod.render(policy, config.hyperpod_cluster_arn)
    except PolicyError as exc:
        raise DeployConfigError(
            f"topogov:policyFile {config.policy_path}: HyperPod task governance would refuse it "
            f"(topogov:hyperpodClusterArn is given):\n"
            + "\n".join(f"  {line}" for line in str(exc).splitlines())
        ) from None


def main() -> int:
    app = cdk.App()
    try:
        build(app)
    except DeployConfigError as exc:
        print(f"topogov: {exc}", file=sys.stderr)
        return 1
    app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
