"""API Lambda: the REST API (docs/api.md) on Powertools' APIGatewayRestResolver (validation on).

Thin: identity from the API Gateway request context only (IAM auth), one call into the service,
one mapping of domain exceptions to HTTP. Heavy clients (boto3, kubernetes) load on first use.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.openapi.exceptions import (
    RequestUnsupportedContentType,
    RequestValidationError,
)
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query
from pydantic import BaseModel

from topogov.domain.errors import (
    Conflict,
    Forbidden,
    InFlightLimit,
    NeverAdmissible,
    NotFound,
    PayloadTooLarge,
    PriorityNotAllowed,
    Refusal,
    TopologyInfeasible,
    Unauthenticated,
    Unavailable,
    ValidationFailed,
)
from topogov.domain.policy import Caller
from topogov.domain.submission import JobRequest, ManifestRequest, SubmitResponse
from topogov.handlers import snapstart
from topogov.handlers.models import ErrorResponse
from topogov.observability import logger, metrics, traced

if TYPE_CHECKING:
    from topogov.logic.api_service import ApiService

M = TypeVar("M", bound=BaseModel)

MAX_BODY_BYTES = 1024 * 1024
MAX_BODY_DEPTH = 24  # a Job manifest nests ~15 levels (affinity terms); the ledger adds one
OPENAPI_TITLE = "Topogov"
OPENAPI_VERSION = "1.0.0"


def _json_body(text: str) -> Any:
    """The body as JSON for the resolver. Everything that is not a JSON document - ``NaN`` and
    ``Infinity`` (not JSON), integers longer than Python converts (ValueError), nesting deeper than
    the parser recurses (RecursionError) - is a ``JSONDecodeError``, which validation answers with
    400 rather than the Lambda failing."""

    def no_constant(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    try:
        return json.loads(text, parse_constant=no_constant)
    except json.JSONDecodeError:
        raise
    except (ValueError, RecursionError) as exc:
        raise json.JSONDecodeError(f"not a JSON document ({exc})"[:200], text, 0) from None


app = APIGatewayRestResolver(enable_validation=True, json_body_deserializer=_json_body)
_service: ApiService | None = None


def service() -> ApiService:
    """The API's use cases (:class:`topogov.logic.api_service.ApiService`), built on first use and kept
    while the container is warm."""
    global _service
    if _service is None:
        from topogov.bootstrap import build_api_service

        _service = build_api_service()
    return _service


def set_service(svc: ApiService) -> None:
    """Wire a service explicitly (the local stack runs several stacks in one process in tests)."""
    global _service
    _service = svc


def caller() -> Caller:
    """The caller API Gateway authenticated (IAM auth: ``requestContext.identity.userArn``, never the
    body), with the principal ARN the policy's patterns are matched against."""
    identity = app.current_event.request_context.identity
    arn = identity.user_arn if identity else None
    if not arn:
        raise Unauthenticated("no caller identity: the API requires IAM (SigV4) authentication")
    return service().identify(arn)


def error(status: int, code: str, message: str, details: dict[str, Any] | None = None) -> Response[str]:
    body = {"error": {"code": code, "message": message, "details": details or {}}}
    return Response(status_code=status, content_type="application/json", body=json.dumps(body))


# The HTTP status of each kind of refusal (docs/api.md's table of statuses); the first class of an error's MRO
# found here decides, so a subclass inherits its parent's status unless listed.
HTTP_STATUS: dict[type[Refusal], int] = {
    ValidationFailed: 400,
    Unauthenticated: 401,
    Forbidden: 403,
    NotFound: 404,
    Conflict: 409,
    PayloadTooLarge: 413,
    NeverAdmissible: 422,
    TopologyInfeasible: 422,
    PriorityNotAllowed: 422,
    InFlightLimit: 429,
    Unavailable: 503,
    Refusal: 400,
}


def http_status(exc: Refusal) -> int:
    return next(HTTP_STATUS[k] for k in type(exc).__mro__ if k in HTTP_STATUS)


@app.exception_handler(Refusal)
def _api_error(exc: Refusal) -> Response[str]:
    status = http_status(exc)
    metrics_code(exc.code, status)
    logger.info("refused", extra={"code": exc.code, "status": status, "reason": exc.message})
    return error(status, exc.code, exc.message, exc.details)


@app.exception_handler(RequestValidationError)
def _invalid(exc: RequestValidationError) -> Response[str]:
    from topogov.domain.submission import problems_from

    problems = problems_from(list(exc.errors()))
    first = problems[0] if problems else {"field": "body", "message": "invalid"}
    metrics_code("VALIDATION_ERROR", 400)
    return error(400, "VALIDATION_ERROR", f"{first['field']}: {first['message']}", {"problems": problems})


@app.exception_handler(UnicodeDecodeError)
def _not_utf8(exc: UnicodeDecodeError) -> Response[str]:
    """A (base64-encoded) body that is not UTF-8 text: the resolver fails decoding it for JSON."""
    metrics_code("VALIDATION_ERROR", 400)
    return error(400, "VALIDATION_ERROR", "body: not UTF-8 text", {"field": "body"})


@app.exception_handler(RequestUnsupportedContentType)
def _unsupported_media_type(exc: Exception | None) -> Response[str]:
    metrics_code("VALIDATION_ERROR", 415)
    return error(
        415, "VALIDATION_ERROR", "body: Content-Type must be application/json", {"field": "Content-Type"}
    )


@app.not_found
def _no_route(exc: Exception) -> Response[str]:
    """No route matches (an unknown path or method, or a path parameter with characters the router's
    patterns refuse, e.g. control characters): 404 in the API's error shape, not Powertools' own body."""
    event = app.current_event
    metrics_code("NOT_FOUND", 404)
    return error(
        404,
        "NOT_FOUND",
        f"no route {event.http_method} {event.path}",
        {"method": event.http_method, "path": event.path},
    )


def metrics_code(code: str, status: int) -> None:
    """An answer's status class (``Status2xx``, ``Status4xx``...) with the request's other metrics; a
    refusal also as ``Refused`` by ``Code`` (``TOPOLOGY_INFEASIBLE``, ``CAP_EXCEEDED``...) in a metric
    of its own, so a dashboard tells what users are refused most without reading the logs."""
    from aws_lambda_powertools.metrics import MetricUnit, single_metric
    from aws_lambda_powertools.metrics.functions import is_metrics_disabled

    metrics.add_metric(name=f"Status{status // 100}xx", unit=MetricUnit.Count, value=1)
    if status < 400 or is_metrics_disabled():  # single_metric flushes on its own, ignoring the switch
        return
    with single_metric(
        name="Refused",
        unit=MetricUnit.Count,
        value=1,
        namespace=metrics.namespace,
        default_dimensions=metrics.default_dimensions,
    ) as metric:
        metric.add_dimension(name="Code", value=code)


def _depth(value: Any) -> int:
    """How deeply JSON objects and arrays nest in ``value`` (a scalar is 0), without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            level += 1
            deepest = max(deepest, level)
            stack.extend((child, level) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def parse_submission(body: Any) -> JobRequest | ManifestRequest:
    """The two request shapes: ``{"manifest": ...}`` or the high-level job (strict, field errors)."""
    if not isinstance(body, dict):
        raise ValidationFailed("body", "must be a JSON object")
    if _depth(body) > MAX_BODY_DEPTH:
        # The request is kept in the ledger (DynamoDB nests at most 32 levels) and echoed in answers.
        raise ValidationFailed("body", f"nested deeper than {MAX_BODY_DEPTH} levels")
    if "manifest" in body:
        return validated(ManifestRequest, body)
    return validated(JobRequest, body)


def validated(model: type[M], body: Any) -> M:
    """``body`` as ``model``, strictly; a 400 naming the first wrong field (and listing them all)."""
    from pydantic import ValidationError

    from topogov.domain.submission import problems_from

    try:
        return model.model_validate(body)
    except ValidationError as exc:
        problems = problems_from(list(exc.errors()))
        first = problems[0]
        raise ValidationFailed(first["field"], first["message"], {"problems": problems}) from None


@app.post(
    "/v1/jobs",
    summary="Submit a job (high-level or a raw batch/v1 Job manifest)",
    responses={
        200: {"description": "dry run", "content": {"application/json": {"model": SubmitResponse}}},
        201: {"description": "created", "content": {"application/json": {"model": SubmitResponse}}},
        400: {"description": "invalid", "content": {"application/json": {"model": ErrorResponse}}},
        403: {"description": "not a principal", "content": {"application/json": {"model": ErrorResponse}}},
        409: {"description": "exists", "content": {"application/json": {"model": ErrorResponse}}},
        422: {"description": "never admissible", "content": {"application/json": {"model": ErrorResponse}}},
        429: {"description": "in-flight cap", "content": {"application/json": {"model": ErrorResponse}}},
    },
)
def submit(
    body: Annotated[dict[str, Any], Body(description="JobRequest or ManifestRequest (see components)")],
    dryRun: Annotated[bool, Query(description="decide and explain, create nothing")] = False,
) -> Response[Any]:
    request = parse_submission(body)
    key = app.current_event.headers.get("Idempotency-Key") or app.current_event.headers.get("idempotency-key")
    if key is not None and not 1 <= len(key) <= 255:
        raise ValidationFailed("Idempotency-Key", "must be 1 to 255 characters")
    result = service().submit_once(request, caller=caller(), dry_run=dryRun, key=key)
    metrics_code("OK", 200 if dryRun else 201)
    return Response(
        status_code=200 if dryRun else 201, content_type="application/json", body=json.dumps(result)
    )


@app.get("/v1/jobs", summary="List jobs of the caller's teams (or one team), a page at a time")
def list_jobs(
    team: Annotated[str | None, Query(max_length=63)] = None,
    limit: Annotated[int, Query(ge=1, le=500, description="jobs a page holds at most")] = 100,
    nextToken: Annotated[
        str | None, Query(max_length=512, description="the previous page's nextToken: the page after it")
    ] = None,
) -> dict[str, Any]:
    jobs, token = service().jobs_of(caller(), team, limit=limit, token=nextToken)
    return {"jobs": jobs, "nextToken": token}


@app.get(
    "/v1/jobs/<team>/<name>",
    summary="One job: status, why pending (Kueue's reason), where its pods landed, events",
)
def get_job(
    team: Annotated[str, Path(max_length=63)], name: Annotated[str, Path(max_length=63)]
) -> dict[str, Any]:
    return service().job(caller(), team, name)


@app.delete("/v1/jobs/<team>/<name>", summary="Cancel a job; its in-flight share is released")
def cancel_job(
    team: Annotated[str, Path(max_length=63)], name: Annotated[str, Path(max_length=63)]
) -> dict[str, Any]:
    return service().cancel(caller(), team, name)


@app.get("/v1/teams", summary="The caller's teams")
def list_teams() -> dict[str, Any]:
    svc = service()
    who = caller()
    return {"teams": [svc.team_view(who, t) for t in svc.visible_teams(who)]}


@app.get("/v1/teams/<team>", summary="Quota, borrow limit, in-flight usage of a team")
def get_team(team: Annotated[str, Path(max_length=63)]) -> dict[str, Any]:
    return service().team_view(caller(), team)


@app.get(
    "/v1/topology",
    summary="The topology tree with per-domain capacity, a Mermaid flowchart, or (view=capacity) free "
    "capacity per layer and the largest job that could start now in one domain",
)
def topology(
    format: Annotated[str, Query(pattern="^(json|mermaid)$")] = "json",
    view: Annotated[str, Query(pattern="^(tree|capacity)$")] = "tree",
    nodes: Annotated[
        bool, Query(description="with view=capacity: every GPU node and the running jobs on it")
    ] = False,
) -> Response[Any]:
    who = caller()
    service().require_member(who)
    if nodes and view != "capacity":
        raise ValidationFailed("nodes", "is only for view=capacity")
    if view == "capacity":
        view_doc = service().fleet_map(who) if nodes else service().capacity()
        compact = (",", ":") if nodes else None  # 10,000 rows: no blank after each separator
        return Response(
            status_code=200, content_type="application/json", body=json.dumps(view_doc, separators=compact)
        )
    doc = service().topology(format)
    if isinstance(doc, str):  # format=mermaid
        return Response(status_code=200, content_type="text/plain", body=doc)
    return Response(status_code=200, content_type="application/json", body=json.dumps(doc))


@app.post(
    "/v1/whatif",
    summary="Admins: replay a job trace under the policy in force and a proposed policy or fleet change",
    responses={
        400: {"description": "invalid", "content": {"application/json": {"model": ErrorResponse}}},
        403: {"description": "not an admin", "content": {"application/json": {"model": ErrorResponse}}},
    },
)
def whatif(body: Annotated[dict[str, Any], Body(description="WhatIfRequest")]) -> dict[str, Any]:
    from topogov.domain.submission import WhatIfRequest

    who = caller()
    svc = service()
    svc.require_admin(who)  # a member learns nothing of the body's checks
    if not isinstance(body, dict):
        raise ValidationFailed("body", "must be a JSON object")
    request = validated(WhatIfRequest, body)
    return svc.whatif(who, request)


@app.get("/v1/openapi.json", summary="This document")
def openapi() -> Response[Any]:
    return Response(status_code=200, content_type="application/json", body=openapi_document())


def openapi_document() -> str:
    """Generated from the routes; the submission body documented as its two shapes (parsed strictly
    in ``parse_submission``, so errors name the fields of the shape the request meant)."""
    doc = json.loads(
        app.get_openapi_json_schema(
            title=OPENAPI_TITLE,
            version=OPENAPI_VERSION,
            description="Topology-aware task governance for EKS. Every route requires IAM (SigV4) auth.",
        )
    )
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    refs = []
    for model in (JobRequest, ManifestRequest):
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(schema.pop("$defs", {}))
        schemas[model.__name__] = schema
        refs.append({"$ref": f"#/components/schemas/{model.__name__}"})
    body = doc["paths"]["/v1/jobs"]["post"].setdefault("requestBody", {"required": True})
    body["content"] = {"application/json": {"schema": {"oneOf": refs}}}
    from topogov.domain.submission import WhatIfRequest

    schema = WhatIfRequest.model_json_schema(ref_template="#/components/schemas/{model}")
    schemas.update(schema.pop("$defs", {}))
    schemas["WhatIfRequest"] = schema
    body = doc["paths"]["/v1/whatif"]["post"].setdefault("requestBody", {"required": True})
    body["content"] = {"application/json": {"schema": {"$ref": "#/components/schemas/WhatIfRequest"}}}
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def routes() -> dict[str, list[str]]:
    """The API's routes as API Gateway resources (``/v1/jobs/{team}/{name}``) with their methods, read
    from the resolver's own OpenAPI document: what ``infra/api.py`` deploys and the local gateway
    serves, so a route exists in all three or in none."""
    doc = json.loads(openapi_document())
    return {path: sorted(m.upper() for m in item) for path, item in sorted(doc["paths"].items())}


def _not_json(event: dict[str, Any]) -> dict[str, Any] | None:
    """A body sent as anything but JSON: 415 here, before the resolver parses form or multipart data
    (whose parsers fail with exceptions of their own on malformed input). The test is the resolver's
    own (``Content-Type`` absent or starting with ``application/json``)."""
    if event.get("httpMethod") not in ("POST", "PUT", "PATCH") and not event.get("body"):
        return None
    headers = event.get("headers") or {}
    content_type = next((v for k, v in headers.items() if k.lower() == "content-type"), None) or ""
    if not content_type.strip() or content_type.strip().startswith("application/json"):
        return None
    resp = _unsupported_media_type(None)
    return {"statusCode": 415, "headers": {"Content-Type": "application/json"}, "body": resp.body,
            "isBase64Encoded": False}  # fmt: skip


def _too_large(event: dict[str, Any]) -> dict[str, Any] | None:
    body = event.get("body") or ""
    if len(body.encode() if isinstance(body, str) else body) > MAX_BODY_BYTES:
        exc = PayloadTooLarge(f"body: larger than {MAX_BODY_BYTES} bytes", {"field": "body"})
        resp = error(413, exc.code, exc.message, exc.details)
        return {"statusCode": 413, "headers": {"Content-Type": "application/json"}, "body": resp.body,
                "isBase64Encoded": False}  # fmt: skip
    return None


@logger.inject_lambda_context(correlation_id_path="requestContext.requestId")
@metrics.log_metrics
@traced
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    from aws_lambda_powertools.metrics import MetricUnit

    metrics.clear_metrics()
    metrics.add_metric(name="Requests", unit=MetricUnit.Count, value=1)
    refused = _too_large(event) or _not_json(event)
    if refused is not None:
        return refused
    if _service is not None:
        _service.lambda_context = context
    return app.resolve(event, context)


# SnapStart's hooks are run only when a module the handler imports registered them.
snapstart.register(app, set_service)
