"""Refusals a person reads (issue 13, item 8): the field, then what is wrong in words — no pydantic
prefix, no regular expression, the unit a duration lacks."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from topogov.domain.submission import JobRequest, problems_from

BASE = {"job_name": "ok", "image": "x", "accelerators": 8}
DNS = (
    "must be a DNS-1123 label: lower-case letters, digits and '-', starting and ending with a letter or digit"
)
FB = "topology.fallbackAfter"
L3 = {"mode": "required", "level": "layer-3"}
NOT_CONVERTED = 'must be a whole number (values are not converted: "8" is not 8)'


def problems(body):
    with pytest.raises(ValidationError) as exc:
        JobRequest.model_validate(body)
    return problems_from(exc.value.errors())


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"job_name": "X_bad"}, "job_name", DNS),
        ({"topology": {**L3, "fallbackAfter": "15"}}, FB,
         "'15' has no unit: add one, e.g. 15m (a duration like 15m, 1h30m or 90s)"),
        ({"topology": {**L3, "fallbackAfter": "soon"}}, FB, "must be a duration like 15m, 1h30m or 90s"),
        ({"replica_count": 0}, "replica_count", "must be at least 1"),
        ({"accelerators": "8"}, "accelerators", NOT_CONVERTED),
        ({"colour": "red"}, "colour", "unknown field"),
        ({"instance_type": "P5"}, "instance_type", "must be an EC2 instance type, e.g. p5.48xlarge"),
        ({"accelerators": 0}, "body",
         "request at least one of accelerators, vcpu, memory, efa: quota is charged on requests"),
    ],
)  # fmt: skip
def test_each_refusal_names_the_field_and_says_what_is_wrong(change, field, message):
    (first, *_) = problems({**BASE, **change})
    assert first == {"field": field, "message": message}
    assert "Value error" not in first["message"] and "^[" not in first["message"]


def test_a_missing_field_is_required():
    assert {"field": "image", "message": "required"} in problems({"job_name": "ok", "accelerators": 8})


def test_sagemakers_instance_type_name_is_taken_as_ec2s():
    """``hyp create hyp-pytorch-job --instance-type ml.p5.48xlarge``'s name: the request holds EC2's
    name, which the snapshot, the policy and (plain EKS) the nodeSelector use."""
    from topogov.domain.submission import JobRequest

    assert (
        JobRequest(job_name="a", image="i", accelerators=8, instance_type="ml.p5.48xlarge").instance_type
        == "p5.48xlarge"
    )
    assert (
        JobRequest(job_name="a", image="i", accelerators=8, instance_type="p5.48xlarge").instance_type
        == "p5.48xlarge"
    )
