"""The API's transport-only models: the error body every refusal has (``{"error": {code, message,
details}}``). The request and decision models are the domain's (:mod:`topogov.domain.submission`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class ErrorBody(BaseModel):
    code: str
    message: str
    details: dict[str, Any] = Field(default_factory=dict)


class ErrorResponse(BaseModel):
    error: ErrorBody
