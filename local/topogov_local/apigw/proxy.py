"""The REST API proxy event (payload format 1.0) API Gateway hands the function, and how it turns the
function's answer into an HTTP response."""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import decimal
import json
import secrets
from typing import Any

from topogov_local.apigw.auth import HOP_BY_HOP, MONTHS


# -- the proxy event and response -------------------------------------------------------------------------
def request_time(when: dt.datetime) -> str:
    """CLF time as API Gateway writes it, e.g. ``30/Nov/2026:01:23:45 +0000`` (locale-independent)."""
    return f"{when.day:02d}/{MONTHS[when.month - 1]}/{when.year}:{when:%H:%M:%S} +0000"


def new_extended_request_id() -> str:
    return base64.b64encode(secrets.token_bytes(10)).decode()  # 16 chars, like "Kx9bXFjvIAMEY0A="


def new_trace_id(when: dt.datetime) -> str:
    return f"Root=1-{int(when.timestamp()):08x}-{secrets.token_hex(12)}"


def header_maps(pairs: list[tuple[str, str]]) -> tuple[dict[str, str] | None, dict[str, list[str]] | None]:
    """(single-value map with the last value winning, multi-value map); ``None``s when empty."""
    if not pairs:
        return None, None
    multi: dict[str, list[str]] = {}
    for name, value in pairs:
        multi.setdefault(name, []).append(value)
    return {name: values[-1] for name, values in multi.items()}, multi


def marshal(result: Any) -> Any:
    """The handler's return value as the Lambda runtime hands it back: JSON-serialised (Decimals as
    numbers), so a value Lambda could not return fails here too."""

    def default(value: Any) -> Any:
        if isinstance(value, decimal.Decimal):
            return int(value) if value == value.to_integral_value() else float(value)
        raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")

    return json.loads(json.dumps(result, default=default))


def proxy_response(result: Any) -> tuple[int, list[tuple[str, str]], bytes]:
    """A Lambda proxy response -> (status, headers, body); ``ValueError`` when it is malformed (API
    Gateway answers 502 then)."""
    if not isinstance(result, dict):
        raise ValueError(f"malformed Lambda proxy response: {type(result).__name__}, not an object")
    try:
        status = int(result.get("statusCode"))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(
            f"malformed Lambda proxy response: statusCode {result.get('statusCode')!r}"
        ) from None
    if not 100 <= status <= 599:
        raise ValueError(f"malformed Lambda proxy response: statusCode {status}")
    single = result.get("headers") or {}
    multi = result.get("multiValueHeaders") or {}
    if not isinstance(single, dict) or not isinstance(multi, dict):
        raise ValueError("malformed Lambda proxy response: headers must be objects")
    merged: dict[str, list[str]] = {}
    lowered: dict[str, str] = {}
    for name, values in multi.items():
        if not isinstance(values, list):
            raise ValueError(f"malformed Lambda proxy response: multiValueHeaders[{name!r}] is not a list")
        merged[name] = [_header_text(v) for v in values]
        lowered.setdefault(name.lower(), name)
    for name, value in single.items():
        text = _header_text(value)
        existing = lowered.get(name.lower())
        if existing is None:
            merged[name] = [text]
            lowered[name.lower()] = name
        elif text not in merged[existing]:
            merged[existing].append(text)
    headers = [
        (n, v) for n, vs in merged.items() if n.lower() not in HOP_BY_HOP | {"content-length"} for v in vs
    ]
    raw = result.get("body")
    if raw is None:
        body = b""
    elif not isinstance(raw, str):
        raise ValueError("malformed Lambda proxy response: body must be a string")
    elif result.get("isBase64Encoded"):
        try:
            body = base64.b64decode(raw, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("malformed Lambda proxy response: body is not valid base64") from None
    else:
        body = raw.encode("utf-8")
    return status, headers, body


def _header_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def json_message(message: str) -> bytes:
    return json.dumps({"message": message}, separators=(",", ":")).encode()
