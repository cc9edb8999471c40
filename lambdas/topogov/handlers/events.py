"""Typed events of the reconcile function (Powertools parser models)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from aws_lambda_powertools.utilities.parser.models import EventBridgeModel
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter


class Ec2StateChangeDetail(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    instance_id: str = Field(alias="instance-id", pattern=r"^i-[0-9a-f]{8,17}$")
    state: str


class Ec2StateChangeEvent(EventBridgeModel):
    detail_type: Literal["EC2 Instance State-change Notification"] = Field(alias="detail-type")
    source: Literal["aws.ec2"]
    detail: Ec2StateChangeDetail


class ScheduledEvent(EventBridgeModel):
    detail_type: Literal["Scheduled Event"] = Field(alias="detail-type")
    detail: dict[str, Any] = Field(default_factory=dict)


ReconcileEvent = Annotated[Ec2StateChangeEvent | ScheduledEvent, Field(discriminator="detail_type")]
_ADAPTER: TypeAdapter[Ec2StateChangeEvent | ScheduledEvent] = TypeAdapter(ReconcileEvent)


def parse_reconcile_event(event: dict[str, Any]) -> Ec2StateChangeEvent | ScheduledEvent:
    return _ADAPTER.validate_python(event)
