#!/usr/bin/env python3
"""The CDK app (`cdk synth` / `cdk deploy`).

Not built yet: the stack (functions, API Gateway, EventBridge rules, storage, EKS access, alarms,
cdk-nag) is issue #5. Until then this entry point refuses clearly instead of synthesizing a
half-stack; the labeler runs locally (`make local`) and against any cluster (`topogov reconcile`).
"""

import sys


def main() -> int:
    print("topogov: the CDK stack is not implemented yet (issue #5); see README.md", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
