#!/usr/bin/env python3
"""The CDK app: ``npx cdk synth`` / ``npx cdk deploy`` (the CLI is pinned in package.json).

Inputs come from cdk.json context or ``-c topogov:key=value``; the team policy is validated here,
at synth time. cdk-nag's AwsSolutions checks run on every synth. No AWS calls are made.
"""

from __future__ import annotations

import sys

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from infra.config import DeployConfig, DeployConfigError
from infra.nag import suppress
from infra.stack import TopogovStack


def build(app: cdk.App) -> TopogovStack:
    from topogov.domain.policy import PolicyError, load_policy_file

    config = DeployConfig.from_context(app.node.try_get_context)
    try:
        policy = load_policy_file(config.policy_path)
    except (PolicyError, OSError) as exc:
        raise DeployConfigError(f"topogov:policyFile {config.policy_path}: {exc}") from None
    env = (
        cdk.Environment(account=config.account, region=config.region)
        if config.account or config.region
        else None
    )
    stack = TopogovStack(app, "Topogov", config=config, teams=sorted(policy.teams), env=env)
    suppress(stack)
    cdk.Aspects.of(app).add(AwsSolutionsChecks(verbose=True))
    return stack


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
