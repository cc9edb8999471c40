"""The local API Gateway (REST API, ``AWS_IAM`` on every method, Lambda proxy integration), driven over
real HTTP by requests signed with ``topogov_cli.sigv4`` (botocore's SigV4 signer).

An echo handler answers with the event and context it was invoked with, so each test can check what
the handler would have seen; a few reserved paths make it misbehave on purpose.
"""

from __future__ import annotations

import base64
import configparser
import datetime as dt
import gzip
import http.client
import json
import os
import re
import threading
import uuid
import zlib
from concurrent.futures import ThreadPoolExecutor
from email.utils import formatdate
from pathlib import Path
from typing import Any

import pytest
import requests
from aws_lambda_powertools.event_handler import APIGatewayRestResolver
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent
from aws_lambda_powertools.utilities.parser.models import APIGatewayProxyEventModel
from botocore.credentials import Credentials
from botocore.exceptions import ProfileNotFound

from topogov_cli.sigv4 import credentials_for_profile, sign, signed_request
from topogov_local.apigw import (
    INVALID_SECURITY_TOKEN,
    MISSING_AUTHENTICATION_TOKEN,
    SIGNATURE_MISMATCH,
    Caller,
    LocalApiGateway,
    callers_from_credentials_file,
)

REGION = "us-east-1"
ACCOUNT = "123456789012"
TEAM_A = Caller(
    access_key_id="AKIAEXAMPLETEAMA0001",
    secret_access_key="team-a/secret+K7MDENG/bPxRfiCYEXAMPLEKEY",
    arn=f"arn:aws:iam::{ACCOUNT}:user/topogov-team-a",
)
TEAM_B = Caller(  # temporary credentials: every request must present the session token
    access_key_id="ASIAEXAMPLETEAMB0002",
    secret_access_key="team-b-secret-wJalrXUtnFEMI",
    arn=f"arn:aws:sts::{ACCOUNT}:assumed-role/topogov-team-b/cli-session",
    session_token="IQoJb3JpZ2luX2VjEXAMPLE//team-b-session-token==",
)
BINARY = bytes(range(256)) * 4  # not UTF-8
UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
STAMP = r"(\d{8}T\d{6}Z)"


def echo_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Answers with what it received, except on a few paths that exercise the response mapping."""
    path = event["path"]
    if path == "/boom":
        raise RuntimeError("kaboom: handler failure")
    if path == "/malformed":
        return {"body": "no statusCode"}
    if path == "/teapot":
        return {
            "statusCode": 418,
            "headers": {"Content-Type": "text/plain; charset=utf-8", "X-Single": "one"},
            "multiValueHeaders": {"Set-Cookie": ["a=1; Path=/", "b=2; Path=/"]},
            "body": "short and stout",
            "isBase64Encoded": False,
        }
    if path == "/binary":
        return {
            "statusCode": 200,
            "headers": {"Content-Type": "application/octet-stream"},
            "body": base64.b64encode(BINARY).decode(),
            "isBase64Encoded": True,
        }
    return {
        "statusCode": 200,
        "headers": {"Content-Type": "application/json"},
        "body": json.dumps({"event": event, "requestId": context.aws_request_id}),
        "isBase64Encoded": False,
    }


def creds(caller: Caller, *, secret: str | None = None, token: str | None = None) -> Credentials:
    return Credentials(caller.access_key_id, secret or caller.secret_access_key, token)


def creds_b() -> Credentials:
    return creds(TEAM_B, token=TEAM_B.session_token)


@pytest.fixture(scope="module")
def gateway():
    gw = LocalApiGateway(echo_handler, {c.access_key_id: c for c in (TEAM_A, TEAM_B)}, port=0).start()
    yield gw
    gw.stop()


@pytest.fixture
def session():
    with requests.Session() as s:
        s.trust_env = False  # never route 127.0.0.1 through a proxy from the environment
        yield s


def call(
    gateway: LocalApiGateway,
    session: requests.Session,
    method: str,
    path: str,
    credentials: Credentials | None = None,
    **kwargs: Any,
) -> requests.Response:
    return signed_request(
        method,
        gateway.url + path,
        credentials=credentials or creds(TEAM_A),
        region=REGION,
        session=session,
        **kwargs,
    )


def echoed(resp: requests.Response) -> dict[str, Any]:
    assert resp.status_code == 200, resp.text
    return resp.json()["event"]


def assert_rejected(resp: requests.Response, status: int, error_type: str | None, message: str) -> None:
    assert resp.status_code == status, resp.text
    assert resp.json() == {"message": message}
    assert resp.headers.get("x-amzn-ErrorType") == error_type
    assert resp.headers["Content-Type"] == "application/json"
    assert UUID_RE.match(resp.headers["x-amzn-RequestId"])


# -- accepted requests -----------------------------------------------------------------------------------
def test_signed_get_with_query_reaches_the_handler_as_the_caller(gateway, session):
    # Given team A's credentials and a GET with a repeated, encoded query parameter
    path = "/teams/team-a/quota?limit=5&tag=gpu&tag=h100&note=a%20b%2Bc&empty="

    # When it is signed and sent
    resp = call(gateway, session, "GET", path, headers={"X-Topogov-Trace": "t-1"})

    # Then the handler sees a REST proxy event for that caller, path and query
    event = echoed(resp)
    assert event["httpMethod"] == "GET"
    assert event["path"] == "/teams/team-a/quota"
    assert event["resource"] == "/{proxy+}"
    assert event["pathParameters"] == {"proxy": "teams/team-a/quota"}
    assert event["stageVariables"] is None
    assert event["queryStringParameters"] == {"limit": "5", "tag": "h100", "note": "a b+c", "empty": ""}
    assert event["multiValueQueryStringParameters"] == {
        "limit": ["5"],
        "tag": ["gpu", "h100"],
        "note": ["a b+c"],
        "empty": [""],
    }
    assert event["body"] is None
    assert event["isBase64Encoded"] is False
    identity = event["requestContext"]["identity"]
    assert identity["userArn"] == TEAM_A.arn
    assert identity["accessKey"] == TEAM_A.access_key_id
    assert identity["accountId"] == ACCOUNT
    assert identity["caller"] == identity["user"] and identity["user"].startswith("AIDA")
    assert identity["sourceIp"] == "127.0.0.1"
    assert identity["userAgent"] == session.headers["User-Agent"]
    assert identity["cognitoIdentityId"] is None and identity["principalOrgId"] is None
    headers = event["headers"]
    assert headers["X-Topogov-Trace"] == "t-1"
    assert headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIAEXAMPLETEAMA0001/")
    assert re.fullmatch(r"\d{8}T\d{6}Z", headers["X-Amz-Date"])
    assert headers["Host"] == f"127.0.0.1:{gateway.port}"
    assert headers["X-Forwarded-For"] == "127.0.0.1"
    assert headers["X-Forwarded-Proto"] == "http"
    assert event["multiValueHeaders"]["X-Topogov-Trace"] == ["t-1"]


def test_request_context_matches_api_gateway(gateway, session):
    # Given a signed request
    resp = call(gateway, session, "GET", "/health")

    # Then the request context is the stage's, with AWS's id and time formats
    ctx = echoed(resp)["requestContext"]
    assert ctx["accountId"] == ACCOUNT
    assert ctx["apiId"] == "topogovlocal"
    assert ctx["stage"] == "v1"
    assert ctx["path"] == "/v1/health"
    assert ctx["resourcePath"] == "/{proxy+}"
    assert ctx["httpMethod"] == "GET"
    assert ctx["protocol"] == "HTTP/1.1"
    assert ctx["domainName"] == f"127.0.0.1:{gateway.port}"
    assert UUID_RE.match(ctx["requestId"])
    assert resp.headers["x-amzn-RequestId"] == ctx["requestId"]
    assert resp.headers["x-amz-apigw-id"] == ctx["extendedRequestId"]
    received = dt.datetime.fromtimestamp(ctx["requestTimeEpoch"] / 1000, dt.UTC)
    assert abs((dt.datetime.now(dt.UTC) - received).total_seconds()) < 30
    assert ctx["requestTime"] == received.strftime("%d/%b/%Y:%H:%M:%S +0000")
    # and the handler got a Lambda context of its own
    assert UUID_RE.match(resp.json()["requestId"])


def test_signed_post_with_json_body_is_verified_and_delivered(gateway, session):
    # Given a JSON body (its SHA-256 is part of the signature)
    payload = {"team": "team-a", "gpus": 16, "note": "ünïcode"}

    # When it is POSTed signed
    resp = call(gateway, session, "POST", "/teams/team-a/requests", json_body=payload)

    # Then the handler gets the body as the string that was sent
    event = echoed(resp)
    assert event["httpMethod"] == "POST"
    assert json.loads(event["body"]) == payload
    assert event["isBase64Encoded"] is False
    assert event["headers"]["Content-Type"] == "application/json"
    assert event["queryStringParameters"] is None
    assert event["multiValueQueryStringParameters"] is None


def test_events_parse_with_powertools_models(gateway, session):
    # Given the events of a GET with a query and a POST with a body
    get = echoed(call(gateway, session, "GET", "/teams?limit=1&limit=2"))
    post = echoed(call(gateway, session, "POST", "/teams", json_body={"name": "x"}))

    for event in (get, post):
        # When Powertools' parser model and data class read them
        model = APIGatewayProxyEventModel.model_validate(event)
        data = APIGatewayProxyEvent(event)

        # Then they are valid REST API proxy events carrying the caller's identity
        assert model.requestContext.identity.userArn == TEAM_A.arn
        assert model.requestContext.stage == "v1"
        assert data.request_context.identity.user_arn == TEAM_A.arn
        assert data.request_context.identity.access_key == TEAM_A.access_key_id
    assert APIGatewayProxyEventModel.model_validate(get).multiValueQueryStringParameters == {
        "limit": ["1", "2"]
    }
    assert json.loads(APIGatewayProxyEvent(post).body or "") == {"name": "x"}


def test_powertools_rest_resolver_behind_the_gateway(session):
    # Given a Powertools APIGatewayRestResolver app (what Topogov's API handler is) behind the gateway
    app = APIGatewayRestResolver()

    @app.get("/whoami/<team>")
    def whoami(team: str) -> dict[str, Any]:
        identity = app.current_event.request_context.identity
        return {
            "team": team,
            "arn": identity.user_arn,
            "limit": app.current_event.get_query_string_value("limit"),
        }

    with LocalApiGateway(app.resolve, {TEAM_A.access_key_id: TEAM_A}, port=0) as gw:
        # When a signed request reaches a route, and another one reaches no route
        ok = signed_request(
            "GET",
            f"{gw.url}/whoami/team-a?limit=3",
            credentials=creds(TEAM_A),
            region=REGION,
            session=session,
        )
        missing = signed_request(
            "GET", f"{gw.url}/nope", credentials=creds(TEAM_A), region=REGION, session=session
        )

    # Then the resolver routes on the event and its response is passed through
    assert ok.status_code == 200, ok.text
    assert ok.json() == {"team": "team-a", "arn": TEAM_A.arn, "limit": "3"}
    assert missing.status_code == 404


def test_encoded_path_is_verified_and_decoded(gateway, session):
    # Given a path with a space and a non-ASCII character (double-encoded in the canonical request)
    resp = call(gateway, session, "GET", "/nodes/a b/ü")

    # Then the signature verifies and the event carries the decoded path
    event = echoed(resp)
    assert event["path"] == "/nodes/a b/ü"
    assert event["pathParameters"] == {"proxy": "nodes/a b/ü"}
    assert event["requestContext"]["path"] == "/v1/nodes/a%20b/%C3%BC"


def test_root_path_has_the_root_resource(gateway, session):
    event = echoed(call(gateway, session, "GET", "/"))
    assert event["resource"] == "/"
    assert event["path"] == "/"
    assert event["pathParameters"] is None


def test_date_header_can_replace_x_amz_date(gateway, session):
    # Given a request signed with a Date header rather than X-Amz-Date
    url = f"{gateway.url}/health"
    headers = sign("GET", url, credentials=creds(TEAM_A), region=REGION, headers={"Date": formatdate()})
    assert "X-Amz-Date" not in headers

    # When it is sent, then it is accepted
    event = echoed(session.get(url, headers=headers))
    assert event["requestContext"]["identity"]["userArn"] == TEAM_A.arn


def test_non_utf8_request_body_arrives_base64_encoded(gateway, session):
    # Given a binary body
    resp = call(
        gateway, session, "PUT", "/blobs/1", body=BINARY, headers={"Content-Type": "application/octet-stream"}
    )

    # Then the event carries it base64-encoded, flagged as such
    event = echoed(resp)
    assert event["isBase64Encoded"] is True
    assert base64.b64decode(event["body"]) == BINARY


def test_chunked_request_body_is_read_and_verified(gateway, session):
    # Given a body signed as bytes but streamed with Transfer-Encoding: chunked
    url = f"{gateway.url}/teams/team-a/requests"
    body = json.dumps({"chunks": list(range(50))}).encode()
    headers = sign("POST", url, credentials=creds(TEAM_A), region=REGION, body=body)

    # When it is sent in pieces
    resp = session.post(url, data=(body[i : i + 7] for i in range(0, len(body), 7)), headers=headers)

    # Then the reassembled body verifies and reaches the handler
    assert echoed(resp)["body"] == body.decode()


def test_two_requests_share_one_keep_alive_connection(gateway):
    # Given one HTTP/1.1 connection
    conn = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=10)
    try:
        for i in range(2):
            # When a signed request is sent on it (and its response read by Content-Length)
            url = f"{gateway.url}/ping/{i}"
            conn.request(
                "GET", f"/ping/{i}", headers=sign("GET", url, credentials=creds(TEAM_A), region=REGION)
            )
            resp = conn.getresponse()
            raw = resp.read()

            # Then each is answered on the same connection, framed by its Content-Length
            assert resp.status == 200
            assert resp.getheader("Content-Length") == str(len(raw))
            assert json.loads(raw)["event"]["path"] == f"/ping/{i}"
            assert not resp.will_close
    finally:
        conn.close()


# -- temporary credentials ------------------------------------------------------------------------------
def test_session_token_caller_is_accepted_with_its_token(gateway, session):
    # Given team B's temporary credentials (key, secret and session token)
    resp = call(gateway, session, "GET", "/teams/team-b", credentials=creds_b())

    # Then the request is accepted as the assumed role, token header included
    event = echoed(resp)
    identity = event["requestContext"]["identity"]
    assert identity["userArn"] == TEAM_B.arn
    assert identity["accessKey"] == TEAM_B.access_key_id
    assert identity["user"].startswith("AROA") and identity["user"].endswith(":cli-session")
    assert event["headers"]["X-Amz-Security-Token"] == TEAM_B.session_token


@pytest.mark.parametrize("token", [None, "not-the-session-token"], ids=["no-token", "wrong-token"])
def test_session_token_caller_without_its_token_is_rejected(gateway, session, token):
    # Given a correct signature from team B's key and secret, but without its session token
    resp = call(gateway, session, "GET", "/teams/team-b", credentials=creds(TEAM_B, token=token))

    # Then the token is refused as API Gateway refuses it
    assert_rejected(resp, 403, "UnrecognizedClientException", INVALID_SECURITY_TOKEN)


def test_session_token_from_a_long_term_key_is_rejected(gateway, session):
    # Given team A's long-term key signing with a session token it was never issued
    resp = call(gateway, session, "GET", "/teams", credentials=creds(TEAM_A, token="made-up"))
    assert_rejected(resp, 403, "UnrecognizedClientException", INVALID_SECURITY_TOKEN)


# -- rejected requests ------------------------------------------------------------------------------------
def test_unsigned_request_is_missing_authentication_token(gateway, session):
    resp = session.get(f"{gateway.url}/teams")
    assert_rejected(resp, 403, "MissingAuthenticationTokenException", MISSING_AUTHENTICATION_TOKEN)


def test_wrong_secret_is_a_signature_mismatch(gateway, session):
    resp = call(gateway, session, "GET", "/teams", credentials=creds(TEAM_A, secret="not-the-secret"))
    assert_rejected(resp, 403, "InvalidSignatureException", SIGNATURE_MISMATCH)


def test_body_tampered_after_signing_is_rejected(gateway, session):
    # Given a POST signed for one body
    url = f"{gateway.url}/teams/team-a/requests"
    signed_body = b'{"gpus": 8}'
    headers = sign("POST", url, credentials=creds(TEAM_A), region=REGION, body=signed_body)

    # When another body of the same length is sent with that signature
    resp = session.post(url, data=b'{"gpus": 9}', headers=headers)

    # Then the body hash no longer matches
    assert_rejected(resp, 403, "InvalidSignatureException", SIGNATURE_MISMATCH)
    # (and the untampered request is fine)
    assert echoed(session.post(url, data=signed_body, headers=headers))["body"] == signed_body.decode()


def test_query_tampered_after_signing_is_rejected(gateway, session):
    url = f"{gateway.url}/teams?limit=5"
    headers = sign("GET", url, credentials=creds(TEAM_A), region=REGION)
    resp = session.get(f"{gateway.url}/teams?limit=500", headers=headers)
    assert_rejected(resp, 403, "InvalidSignatureException", SIGNATURE_MISMATCH)


def test_signed_header_tampered_after_signing_is_rejected(gateway, session):
    url = f"{gateway.url}/teams"
    headers = sign("GET", url, credentials=creds(TEAM_A), region=REGION, headers={"X-Topogov-Team": "team-a"})
    resp = session.get(url, headers={**headers, "X-Topogov-Team": "team-b"})
    assert_rejected(resp, 403, "InvalidSignatureException", SIGNATURE_MISMATCH)


def test_signature_from_twenty_minutes_ago_has_expired(gateway, session):
    # Given a request honestly signed as of 20 minutes ago
    url = f"{gateway.url}/teams"
    signed_at = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=20)
    headers = sign("GET", url, credentials=creds(TEAM_A), region=REGION, timestamp=signed_at)

    # When it is sent now
    resp = session.get(url, headers=headers)

    # Then API Gateway's expiry message names the signing time, the earliest accepted time and now
    assert resp.status_code == 403
    assert resp.headers["x-amzn-ErrorType"] == "InvalidSignatureException"
    message = resp.json()["message"]
    m = re.fullmatch(
        rf"Signature expired: {STAMP} is now earlier than {STAMP} \({STAMP} - 5 min\.\)", message
    )
    assert m, message
    signed, earliest, now = (dt.datetime.strptime(s, "%Y%m%dT%H%M%SZ") for s in m.groups())
    assert m.group(1) == headers["X-Amz-Date"]
    assert now - earliest == dt.timedelta(minutes=5)
    assert dt.timedelta(minutes=19) < now - signed < dt.timedelta(minutes=21)


def test_signature_from_the_future_is_not_yet_current(gateway, session):
    url = f"{gateway.url}/teams"
    signed_at = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=20)
    resp = session.get(
        url, headers=sign("GET", url, credentials=creds(TEAM_A), region=REGION, timestamp=signed_at)
    )
    assert resp.status_code == 403
    assert resp.headers["x-amzn-ErrorType"] == "InvalidSignatureException"
    pattern = rf"Signature not yet current: {STAMP} is still later than {STAMP} \({STAMP} \+ 5 min\.\)"
    assert re.fullmatch(pattern, resp.json()["message"])


def test_unknown_access_key_is_an_invalid_security_token(gateway, session):
    stranger = Credentials("AKIAEXAMPLESTRANGER9", "whatever")
    resp = call(gateway, session, "GET", "/teams", credentials=stranger)
    assert_rejected(resp, 403, "UnrecognizedClientException", INVALID_SECURITY_TOKEN)


@pytest.mark.parametrize(
    ("region", "service", "message"),
    [
        ("eu-west-1", "execute-api", "Credential should be scoped to a valid region, not 'eu-west-1'. "),
        (REGION, "lambda", "Credential should be scoped to correct service: 'execute-api'. "),
    ],
    ids=["wrong-region", "wrong-service"],
)
def test_credential_scope_for_another_region_or_service_is_rejected(
    gateway, session, region, service, message
):
    url = f"{gateway.url}/teams"
    headers = sign("GET", url, credentials=creds(TEAM_A), region=region, service=service)
    assert_rejected(session.get(url, headers=headers), 403, "InvalidSignatureException", message)


def test_non_sigv4_authorization_is_an_incomplete_signature(gateway, session):
    resp = session.get(f"{gateway.url}/teams", headers={"Authorization": "Bearer abc.def"})
    assert_rejected(
        resp,
        403,
        "IncompleteSignatureException",
        "'abc.def' not a valid key=value pair (missing equal-sign) in Authorization header: "
        "'Bearer abc.def'.",
    )


def test_authorization_without_a_date_is_an_incomplete_signature(gateway, session):
    url = f"{gateway.url}/teams"
    headers = sign("GET", url, credentials=creds(TEAM_A), region=REGION)
    del headers["X-Amz-Date"]
    resp = session.get(url, headers=headers)
    assert_rejected(
        resp,
        403,
        "IncompleteSignatureException",
        "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header. "
        f"Authorization={headers['Authorization']}",
    )


def test_body_over_ten_megabytes_is_request_too_long(gateway, session):
    # Given an 11 MB body, signed
    body = b"x" * (11 * 1024 * 1024)
    resp = call(gateway, session, "POST", "/teams/team-a/requests", body=body)

    # Then the gateway refuses it as API Gateway does
    assert_rejected(resp, 413, None, "Request Too Long")
    # and the connection stays usable
    assert echoed(call(gateway, session, "GET", "/teams"))["path"] == "/teams"


# -- the handler's response ------------------------------------------------------------------------------
def test_handler_exception_is_a_502_with_the_traceback_on_stderr(gateway, session, capfd):
    resp = call(gateway, session, "GET", "/boom")
    assert resp.status_code == 502
    assert resp.json() == {"message": "Internal server error"}
    assert resp.headers["x-amzn-ErrorType"] == "InternalServerErrorException"
    assert UUID_RE.match(resp.headers["x-amzn-RequestId"])
    err = capfd.readouterr().err
    assert "Traceback" in err and "RuntimeError: kaboom: handler failure" in err


def test_malformed_proxy_response_is_a_502(gateway, session):
    resp = call(gateway, session, "GET", "/malformed")
    assert resp.status_code == 502
    assert resp.json() == {"message": "Internal server error"}


def test_handler_status_headers_and_body_are_passed_through(gateway, session):
    resp = call(gateway, session, "GET", "/teapot")
    assert resp.status_code == 418
    assert resp.text == "short and stout"
    assert resp.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert resp.headers["X-Single"] == "one"
    assert resp.raw.headers.getlist("Set-Cookie") == ["a=1; Path=/", "b=2; Path=/"]
    assert resp.headers["Content-Length"] == str(len(b"short and stout"))
    assert UUID_RE.match(resp.headers["x-amzn-RequestId"])


def test_base64_response_body_is_decoded(gateway, session):
    resp = call(gateway, session, "GET", "/binary")
    assert resp.status_code == 200
    assert resp.headers["Content-Type"] == "application/octet-stream"
    assert resp.content == BINARY


def test_head_response_has_no_body(gateway, session):
    resp = call(gateway, session, "HEAD", "/teams")
    assert resp.status_code == 200
    assert resp.content == b""
    assert int(resp.headers["Content-Length"]) > 0


# -- credentials file -------------------------------------------------------------------------------------
def write_credentials(path: Path) -> dict[str, dict[str, str]]:
    """A credentials file shaped like the one the local stack writes."""
    cfg = configparser.ConfigParser()
    profiles = {}
    for profile in ("topogov-admin", "topogov-team-a", "topogov-team-b", "topogov-team-c"):
        profiles[profile] = {
            "aws_access_key_id": "AKIA" + uuid.uuid4().hex[:16].upper(),
            "aws_secret_access_key": base64.urlsafe_b64encode(uuid.uuid4().bytes * 2).decode(),
            "region": REGION,
        }
        cfg[profile] = profiles[profile]
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("# Local stack only: keys the local API accepts, one profile per team. Not AWS keys.\n")
        cfg.write(fh)
    return profiles


def test_callers_from_credentials_file_maps_profiles_to_user_arns(tmp_path, session):
    # Given a credentials file with the local stack's four profiles
    path = tmp_path / "aws-credentials"
    profiles = write_credentials(path)

    # When it is read as callers
    callers = callers_from_credentials_file(path)

    # Then each access key is its profile's IAM user
    assert set(callers) == {p["aws_access_key_id"] for p in profiles.values()}
    for profile, keys in profiles.items():
        caller = callers[keys["aws_access_key_id"]]
        assert caller.arn == f"arn:aws:iam::{ACCOUNT}:user/{profile}"
        assert caller.secret_access_key == keys["aws_secret_access_key"]
        assert caller.account_id == ACCOUNT
        assert caller.session_token is None

    # and a client using a profile of that file (via botocore) is accepted as that user
    with LocalApiGateway(echo_handler, callers, port=0) as gw:
        team_c = credentials_for_profile("topogov-team-c", path)
        assert team_c.access_key == profiles["topogov-team-c"]["aws_access_key_id"]
        resp = signed_request(
            "GET", f"{gw.url}/teams/team-c", credentials=team_c, region=REGION, session=session
        )
    assert (
        echoed(resp)["requestContext"]["identity"]["userArn"] == f"arn:aws:iam::{ACCOUNT}:user/topogov-team-c"
    )


def test_credentials_are_read_once_per_version_of_the_file(tmp_path):
    # Given a credentials file read as a profile
    path = tmp_path / "aws-credentials"
    first = write_credentials(path)["topogov-team-a"]
    keys = credentials_for_profile("topogov-team-a", path)
    assert keys.access_key == first["aws_access_key_id"]
    # Then reading it again, unchanged, gives the keys already resolved
    assert credentials_for_profile("topogov-team-a", path) is keys
    # and once the file is written again (new keys, another modification time), its new keys
    stat = path.stat()
    second = write_credentials(path)["topogov-team-a"]
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    again = credentials_for_profile("topogov-team-a", path)
    assert again.access_key == second["aws_access_key_id"] != first["aws_access_key_id"]
    assert again.secret_key == second["aws_secret_access_key"]


def test_credentials_for_an_unknown_profile_raise(tmp_path):
    path = tmp_path / "aws-credentials"
    write_credentials(path)
    with pytest.raises(ProfileNotFound):
        credentials_for_profile("topogov-team-z", path)


# -- concurrency ------------------------------------------------------------------------------------------
def test_concurrent_burst_of_signed_requests_all_succeed(gateway):
    # Given 20 threads released together, alternating between the two callers
    barrier = threading.Barrier(20)

    def one(i: int) -> tuple[str, dict[str, Any]]:
        caller, credentials = (TEAM_A, creds(TEAM_A)) if i % 2 else (TEAM_B, creds_b())
        barrier.wait(timeout=10)
        with requests.Session() as session:
            session.trust_env = False
            resp = signed_request(
                "POST",
                f"{gateway.url}/burst/{i}?i={i}",
                credentials=credentials,
                region=REGION,
                json_body={"i": i},
                session=session,
            )
        return caller.arn, echoed(resp)

    # When each sends a signed request
    with ThreadPoolExecutor(max_workers=20) as pool:
        results = list(pool.map(one, range(20)))

    # Then every one is answered, as its own caller, with its own request id
    for i, (arn, event) in enumerate(results):
        assert event["requestContext"]["identity"]["userArn"] == arn
        assert event["path"] == f"/burst/{i}"
        assert json.loads(event["body"]) == {"i": i}
    assert len({event["requestContext"]["requestId"] for _, event in results}) == 20


def test_with_its_routes_the_gateway_serves_those_resources_and_methods_only(session):
    """A REST API has the resources it was deployed with: the event names the matched resource and
    its path parameters (a literal segment wins over a parameter), and a path or a method the API
    does not have is API Gateway's 403 ``Missing Authentication Token``, never the function."""
    routes = {
        "/v1/jobs": ["GET", "POST"],
        "/v1/jobs/{team}/{name}": ["GET"],
        "/v1/jobs/team-a/special": ["GET"],
    }
    seen = []

    def handler(event, context):
        seen.append(event)
        return echo_handler(event, context)

    with LocalApiGateway(handler, {TEAM_A.access_key_id: TEAM_A}, port=0, routes=routes) as gw:

        def get(method, path):
            return signed_request(
                method, gw.url + path, credentials=creds(TEAM_A), region=REGION, session=session
            )

        job = echoed(get("GET", "/v1/jobs/team-a/train%20x"))
        assert job["resource"] == "/v1/jobs/{team}/{name}"
        assert job["pathParameters"] == {"team": "team-a", "name": "train x"}
        assert job["requestContext"]["resourcePath"] == "/v1/jobs/{team}/{name}"
        assert echoed(get("GET", "/v1/jobs/team-a/special"))["resource"] == "/v1/jobs/team-a/special"
        assert echoed(get("GET", "/v1/jobs"))["pathParameters"] is None
        before = len(seen)
        for method, path in (("DELETE", "/v1/jobs/team-a/x"), ("GET", "/v1/nope"), ("GET", "/v1/jobs/a/b/c")):
            resp = get(method, path)
            assert resp.status_code == 403 and resp.json() == {"message": "Missing Authentication Token"}, (
                path
            )
            assert resp.headers["x-amzn-ErrorType"].startswith("MissingAuthenticationTokenException")
        unsigned = session.get(gw.url + "/v1/nope")
        assert unsigned.status_code == 403 and unsigned.json() == {"message": "Missing Authentication Token"}
        assert len(seen) == before


# -- payload compression (local/topogov_local/apigw/compression.py) ------------------------------------
PRECOMPRESSED = gzip.compress(b'{"already": "gzipped"}' * 100)


def sized_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """``/sized/N``: a body of N bytes; ``/precompressed``: a body the function gzipped itself."""
    if event["path"] == "/precompressed":
        return {
            "statusCode": 200,
            "headers": {"Content-Type": "application/json", "Content-Encoding": "gzip"},
            "body": base64.b64encode(PRECOMPRESSED).decode(),
            "isBase64Encoded": True,
        }
    size = int(event["path"].rsplit("/", 1)[1])
    return {"statusCode": 200, "headers": {"Content-Type": "text/plain"}, "body": "x" * size}


@pytest.fixture(scope="module")
def compressing():
    with LocalApiGateway(
        sized_handler, {TEAM_A.access_key_id: TEAM_A}, port=0, minimum_compression_size=1024
    ) as gw:
        yield gw


def wire(gw: LocalApiGateway, session: requests.Session, path: str, accept: str | None):
    """The answer to a signed GET with this ``Accept-Encoding`` (none: ``None``), and its body as it
    came over the wire (not decoded)."""
    if accept is None:
        session.headers.pop("Accept-Encoding", None)  # requests sends "gzip, deflate" unless told
    headers = {} if accept is None else {"Accept-Encoding": accept}
    resp = call(gw, session, "GET", path, headers=headers, stream=True)
    try:
        return resp, resp.raw.read(decode_content=False)
    finally:
        resp.close()


@pytest.mark.parametrize(
    ("size", "accept", "coding"),
    [
        (1024, "gzip", "gzip"),  # at minimumCompressionSize: compressed
        (1023, "gzip", None),  # below it: as it is
        (5000, None, None),  # no Accept-Encoding (RFC 7231's "*"): as it is
        (5000, "*", None),
        (5000, "identity", None),
        (5000, "deflate", "deflate"),
        (5000, "gzip, deflate, br", "gzip"),  # a browser's
        (5000, "br, gzip", None),  # the highest priority is a coding API Gateway lacks
        (5000, "br;q=0.5, gzip", "gzip"),
        (5000, "gzip;q=0, deflate", "deflate"),  # q=0: not acceptable
        (5000, "gzip;q=x", None),  # not a q-value: ignored
    ],
)
def test_answers_are_compressed_as_api_gateway_documents(compressing, session, size, accept, coding):
    resp, raw = wire(compressing, session, f"/sized/{size}", accept)
    assert resp.status_code == 200
    assert resp.headers.get("Content-Encoding") == coding
    assert int(resp.headers["Content-Length"]) == len(raw)
    unpacked = {"gzip": gzip.decompress, "deflate": zlib.decompress, None: bytes}[coding](raw)
    assert unpacked == b"x" * size
    if coding:
        assert len(raw) < 100  # 5,000 x's compress to a few dozen bytes


def test_an_answer_the_function_compressed_is_not_compressed_again(compressing, session):
    resp, raw = wire(compressing, session, "/precompressed", "gzip")
    assert resp.headers["Content-Encoding"] == "gzip" and raw == PRECOMPRESSED


def test_without_minimum_compression_size_nothing_is_compressed(gateway, session):
    resp, raw = wire(gateway, session, "/anything", "gzip")
    assert len(raw) > 1024 and "Content-Encoding" not in resp.headers
    assert json.loads(raw)["event"]["headers"]["Accept-Encoding"] == "gzip"  # the function sees it
