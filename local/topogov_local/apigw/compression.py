"""API Gateway's payload compression of a REST API's answers, as the API Gateway Developer Guide
describes it ("Receive an API response with a compressed payload in API Gateway",
https://docs.aws.amazon.com/apigateway/latest/developerguide/api-gateway-receive-response-with-compressed-payload.html;
"Enable payload compression for an API in API Gateway", .../api-gateway-enable-compression.html).

API Gateway compresses an integration's answer only when all of these hold:

* the API has ``minimumCompressionSize`` set (unset: compression off);
* the request has an ``Accept-Encoding`` header whose highest-priority content coding is one API
  Gateway supports (``gzip``, ``deflate``, ``identity``); without the header (RFC 7231's default
  ``*``) nothing is compressed, nor when the highest-priority coding is one API Gateway lacks
  (``br``, ``zstd``);
* the integration's answer has no ``Content-Encoding`` header (it is taken as compressed already);
* the answer's body is at least ``minimumCompressionSize`` bytes.

The answer then carries ``Content-Encoding`` with the coding used. ``identity`` chosen: the body as
it is. What the guide leaves open is decided here and listed in docs/architecture.md
("Assumptions"): among codings of equal ``q`` the one listed first has the priority; an entry whose
``q`` is not a number is ignored; the gzip level is zlib's default (6); ``deflate`` is the zlib
format, as HTTP defines it (RFC 9110, 8.4.1.2).
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Sequence

SUPPORTED = ("gzip", "deflate", "identity")  # the content codings API Gateway supports


def chosen_coding(accept_encoding: str | None) -> str | None:
    """The coding API Gateway answers in for this ``Accept-Encoding``: ``gzip`` or ``deflate``, or
    ``None`` (the body as it is: no header, ``identity``, or an unsupported coding first)."""
    if accept_encoding is None:
        return None
    best: tuple[float, str] | None = None
    for entry in accept_encoding.split(","):
        name, *params = (part.strip() for part in entry.split(";"))
        if not name:
            continue
        q = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = -1.0
        if q <= 0:  # q=0: "not acceptable"; not a number: ignored
            continue
        if best is None or q > best[0]:
            best = (q, name.lower())
    if best is None or best[1] not in ("gzip", "deflate"):
        return None
    return best[1]


def compress(body: bytes, coding: str) -> bytes:
    """``body`` in ``coding`` (``gzip`` or ``deflate``)."""
    if coding == "gzip":
        return gzip.compress(body, compresslevel=6, mtime=0)
    if coding == "deflate":
        return zlib.compress(body, 6)
    raise ValueError(f"coding {coding!r}: API Gateway compresses with gzip or deflate only")


def compressed(
    minimum_size: int | None, accept_encoding: str | None, headers: Sequence[tuple[str, str]], body: bytes
) -> tuple[list[tuple[str, str]], bytes]:
    """The integration's answer (``headers``, ``body``) as API Gateway sends it back."""
    out = list(headers)
    if minimum_size is None or len(body) < minimum_size:
        return out, body
    if any(name.lower() == "content-encoding" for name, _ in out):
        return out, body
    coding = chosen_coding(accept_encoding)
    if coding is None:
        return out, body
    return [*out, ("Content-Encoding", coding)], compress(body, coding)
