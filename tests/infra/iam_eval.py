"""Just enough of AWS's policy evaluation to follow a request through the synthesized template.

Rules, from the IAM User Guide (https://docs.aws.amazon.com/IAM/latest/UserGuide/):
``reference_policies_evaluation-logic.html`` — an explicit ``Deny`` that matches wins, else an
``Allow`` that matches is needed; a statement matches when its principal, action and resource match
and *every* condition holds (``reference_policies_elements_condition.html``: all operators ANDed,
values of one key ORed); a condition on a key the request does not carry is false, except for the
``...IfExists`` operators and the negated ones (``StringNotEquals``...), which hold. Operators
implemented: ``StringEquals``/``StringNotEquals``, ``StringLike``, ``ArnEquals``/``ArnLike``
(``reference_policies_elements_condition_operators.html``: ARN matching is wildcard matching per ARN
segment, here on the whole string), ``Bool``. Anything else raises, so a policy using an operator
this module does not know fails the test instead of passing it.

CloudFormation values (``Ref``, ``Fn::GetAtt``, ``Fn::Join``) are resolved against the template with
the stack's account, region and partition.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Resolver:
    template: dict[str, Any]
    account: str
    region: str
    partition: str = "aws"

    def arn(self, logical_id: str) -> str:
        res = self.template["Resources"][logical_id]
        kind, props = res["Type"], res.get("Properties", {})
        acct, region = self.account, self.region
        if kind == "AWS::SNS::Topic":
            return f"arn:{self.partition}:sns:{region}:{acct}:{props.get('TopicName', logical_id)}"
        if kind == "AWS::KMS::Key":
            return f"arn:{self.partition}:kms:{region}:{acct}:key/{logical_id}"
        if kind == "AWS::ApiGateway::RestApi":
            return f"arn:{self.partition}:execute-api:{region}:{acct}:{logical_id}"
        if kind == "AWS::S3::Bucket":
            return f"arn:{self.partition}:s3:::{logical_id.lower()}"
        if kind == "AWS::Logs::LogGroup":
            return f"arn:{self.partition}:logs:{region}:{acct}:log-group:{logical_id}:*"
        if kind == "AWS::DynamoDB::Table":
            return f"arn:{self.partition}:dynamodb:{region}:{acct}:table/{logical_id}"
        if kind == "AWS::SQS::Queue":
            return f"arn:{self.partition}:sqs:{region}:{acct}:{logical_id}"
        if kind == "AWS::CloudWatch::Alarm":
            return (
                f"arn:{self.partition}:cloudwatch:{region}:{acct}:alarm:{props.get('AlarmName', logical_id)}"
            )
        raise KeyError(f"no ARN rule for {kind}")

    def ref(self, name: str) -> str:
        pseudo = {
            "AWS::Partition": self.partition,
            "AWS::AccountId": self.account,
            "AWS::Region": self.region,
            "AWS::URLSuffix": "amazonaws.com",
        }
        if name in pseudo:
            return pseudo[name]
        kind = self.template["Resources"][name]["Type"]
        if kind in ("AWS::SNS::Topic", "AWS::CloudWatch::Alarm"):
            return self.arn(name)  # Ref of a topic is its ARN; of an alarm, its name (unused here)
        return name  # a key's Ref is its id; a RestApi's its id

    def __call__(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self(v) for v in value]
        if not isinstance(value, dict):
            return value
        if set(value) == {"Ref"}:
            return self.ref(value["Ref"])
        if set(value) == {"Fn::GetAtt"}:
            logical_id, attr = value["Fn::GetAtt"]
            if attr == "Arn":
                return self.arn(logical_id)
            raise KeyError(f"GetAtt {attr}")
        if set(value) == {"Fn::Join"}:
            sep, parts = value["Fn::Join"]
            return sep.join(str(self(p)) for p in parts)
        return {k: self(v) for k, v in value.items()}


@dataclass
class Request:
    action: str
    resource: str
    principal_service: str | None = None
    principal_arn: str | None = None
    context: dict[str, str] = field(default_factory=dict)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _principal_matches(principal: Any, req: Request) -> bool:
    if principal == "*":
        return True
    if "AWS" in principal:
        for p in _list(principal["AWS"]):
            if p == "*":
                return True
            if req.principal_arn and (
                p == req.principal_arn
                or (p.endswith(":root") and req.principal_arn.split(":")[4] == p.split(":")[4])
            ):
                return True
    if "Service" in principal:
        return req.principal_service in _list(principal["Service"])
    return False


def _condition_holds(op: str, key: str, values: list[str], ctx: dict[str, str]) -> bool:
    if key not in ctx:  # absent: false, but true for ...IfExists and the negated operators
        return op.endswith("IfExists") or "Not" in op
    have = ctx[key]
    base = op.removesuffix("IfExists")
    if base in ("StringEquals", "ArnEquals"):
        return have in values
    if base == "StringNotEquals":
        return have not in values
    if base in ("StringLike", "ArnLike"):
        return any(fnmatch.fnmatchcase(have, v) for v in values)
    if base == "Bool":
        return have.lower() in [str(v).lower() for v in values]
    raise NotImplementedError(f"condition operator {op}")


def statement_matches(st: dict[str, Any], req: Request) -> bool:
    if "Principal" in st and not _principal_matches(st["Principal"], req):
        return False
    if not any(fnmatch.fnmatchcase(req.action, a) for a in _list(st["Action"])):
        return False
    if not any(r == "*" or fnmatch.fnmatchcase(req.resource, r) for r in _list(st["Resource"])):
        return False
    for op, keys in (st.get("Condition") or {}).items():
        for key, values in keys.items():
            if not _condition_holds(op, key, [str(v) for v in _list(values)], req.context):
                return False
    return True


def allows(document: dict[str, Any], req: Request) -> bool:
    """True when the policy document lets ``req`` through: an Allow matches and no Deny does."""
    statements = _list(document["Statement"])
    if any(st["Effect"] == "Deny" and statement_matches(st, req) for st in statements):
        return False
    return any(st["Effect"] == "Allow" and statement_matches(st, req) for st in statements)


def denies(document: dict[str, Any], req: Request) -> bool:
    return any(st["Effect"] == "Deny" and statement_matches(st, req) for st in _list(document["Statement"]))


def api_gateway_lets_in(
    resource_policy: dict[str, Any], identity_allows: bool, req: Request, api_account: str
) -> bool:
    """API Gateway's decision for an IAM-authorized method with a resource policy (API Gateway
    Developer Guide, "How API Gateway resource policies affect authorization workflow", table
    "API Gateway resource policy and IAM policy"): an explicit deny in either ends it; a caller of the
    API's own account is let in when its IAM policy or the resource policy allows, a caller of another
    account only when both do. ``identity_allows``: the caller's own IAM policies allow the call."""
    if denies(resource_policy, req):
        return False
    resource_allows = allows(resource_policy, req)
    same_account = req.context.get("aws:PrincipalAccount") == api_account
    return (identity_allows or resource_allows) if same_account else (identity_allows and resource_allows)
