"""A local Amazon API Gateway for the offline stack: a REST API (v1) whose every method uses ``AWS_IAM``
authorization and a Lambda proxy integration, served over HTTP on 127.0.0.1.

Each request is authenticated the way API Gateway's IAM authorization does it: the SigV4 signature in
the ``Authorization`` header is recomputed from the request as received (method, path, query string,
the signed headers, the SHA-256 of the body) with the secret of the access key it names, at the
request's own timestamp, and compared in constant time. A rejected request gets API Gateway's 403
answer (status, ``{"message": ...}`` body and ``x-amzn-ErrorType`` header); an accepted one is turned
into the REST proxy event (payload format 1.0) AWS builds - ``requestContext.identity.userArn`` is the
caller's ARN, which is what the handler authorises on - and the handler is invoked in-process. Its
proxy response is written back as the HTTP response.

The checks run in the order AWS's request authentication runs them (the same framework answers for
API Gateway, DynamoDB, ...), with AWS's messages; ``x-amzn-ErrorType`` in brackets:

* no ``Authorization`` header [MissingAuthenticationTokenException]: ``Missing Authentication Token``;
* an ``Authorization`` token that is not key=value [IncompleteSignatureException]:
  ``'<token>' not a valid key=value pair (missing equal-sign) in Authorization header: '<header>'.``;
* no Credential / Signature / SignedHeaders, or neither ``X-Amz-Date`` nor ``Date``
  [IncompleteSignatureException]: ``Authorization header requires 'Credential' parameter. ...
  Authorization=<header>``;
* an ``X-Amz-Date`` that is not ``yyyymmddThhmmssZ`` [IncompleteSignatureException]:
  ``Date must be in ISO-8601 'basic format'. Got '<value>'. See http://en.wikipedia.org/wiki/ISO_8601``;
* a timestamp more than 5 minutes old [InvalidSignatureException]:
  ``Signature expired: <t> is now earlier than <now - 5 min> (<now> - 5 min.)``, or ahead:
  ``Signature not yet current: <t> is still later than <now + 5 min> (<now> + 5 min.)``;
* ``host`` not signed [InvalidSignatureException]:
  ``'Host' must be a 'SignedHeader' in the AWS Authorization.``;
* an algorithm other than AWS4-HMAC-SHA256 [IncompleteSignatureException]:
  ``Unsupported AWS 'algorithm': '<algorithm>' (only AWS4-HMAC-SHA256 for now). ``;
* a Credential that is not keyid/date/region/service/term [IncompleteSignatureException]:
  ``Credential must have exactly 5 slash-delimited elements, e.g. keyid/date/region/service/term,
  got '<credential>'``;
* a scope with the wrong region, service, terminator or date [InvalidSignatureException], one
  sentence each, concatenated: ``Credential should be scoped to a valid region, not '<region>'. ``,
  ``Credential should be scoped to correct service: 'execute-api'. ``, ...;
* an unknown access key [UnrecognizedClientException]:
  ``The security token included in the request is invalid.``;
* a signature that does not match [InvalidSignatureException]: ``The request signature we calculated
  does not match the signature you provided. Check your AWS Secret Access Key and signing method.
  Consult the service documentation for details.``;
* a missing or wrong ``X-Amz-Security-Token`` for a caller with a session token (or one sent for a
  caller without) [UnrecognizedClientException]: ``The security token included in the request is
  invalid.``

All of them are 403. Bodies are compact JSON (``{"message":"..."}``); every response carries
``x-amzn-RequestId`` (the event's ``requestContext.requestId``) and ``x-amz-apigw-id`` (its
``extendedRequestId``). Other gateway answers: a body over 10 MB is refused before authentication with
413 ``{"message":"Request Too Long"}``; a handler that raises, or returns something that is not a
valid proxy response, gives 502 ``{"message": "Internal server error"}`` (the traceback goes to
stderr).

Deliberate differences from AWS: there is no IAM policy evaluation (any accepted key may invoke any
route - authorisation is the handler's job, as it is for Topogov); there is one greedy resource
(``/{proxy+}``, plus ``/`` for the root) and the local URL has no stage prefix (``/teams`` here is
``/v1/teams`` on AWS, which is what ``requestContext.path`` reports); presigned (query-string) SigV4 is
not accepted; there is no 29 s integration timeout.

The package: :mod:`.auth` (callers and SigV4 verification, API Gateway's own answers),
:mod:`.proxy` (the REST proxy event and the function's response), :mod:`.server` (the gateway).
"""

from __future__ import annotations

from topogov_local.apigw.auth import (
    INTERNAL_SERVER_ERROR,
    INVALID_SECURITY_TOKEN,
    LOCAL_ACCOUNT,
    MAX_PAYLOAD_BYTES,
    MISSING_AUTHENTICATION_TOKEN,
    REQUEST_TOO_LONG,
    SIGNATURE_MISMATCH,
    Caller,
    GatewayError,
    authenticate,
    callers_from_credentials_file,
    canonical_query,
    canonical_uri,
)
from topogov_local.apigw.server import LocalApiGateway, match_route

__all__ = [
    "INTERNAL_SERVER_ERROR",
    "INVALID_SECURITY_TOKEN",
    "LOCAL_ACCOUNT",
    "MAX_PAYLOAD_BYTES",
    "MISSING_AUTHENTICATION_TOKEN",
    "REQUEST_TOO_LONG",
    "SIGNATURE_MISMATCH",
    "Caller",
    "GatewayError",
    "LocalApiGateway",
    "authenticate",
    "callers_from_credentials_file",
    "canonical_query",
    "canonical_uri",
    "match_route",
]
