"""The dashboard's local server (cli/topogov_cli/dashboard/server.py) over real HTTP: it forwards only
the API routes the page uses, with only their query parameters; it refuses a request whose Host or
Origin is not its own (DNS rebinding, another page: CSRF) or that has no session; it serves the page
and gzips. The API side is a recording stand-in (the forwarding to the real API, signed, is in
tests/browser/test_dashboard.py against the local stack)."""

from __future__ import annotations

import gzip
import json

import pytest
import requests

from topogov_cli.dashboard.server import COOKIE, DashboardServer, Refused, Upstream, allowed


@pytest.fixture
def served(tmp_path):
    seen = []

    def forward(method, path, query, body):
        seen.append((method, path, query, body))
        return 200, json.dumps({"path": path, "padding": "x" * 4000}).encode(), None

    (tmp_path / "index.html").write_text("<!doctype html><title>t</title>")
    (tmp_path / "app.js").write_text("console.log(1)")
    server = DashboardServer(Upstream(forward, {"endpoint": "http://api", "signed_as": "p"}), static=tmp_path)
    server.start()
    http = requests.Session()
    try:
        yield server, http, seen
    finally:
        http.close()
        server.stop()


def session(server, http):
    r = http.get(server.url, allow_redirects=False)
    assert r.status_code == 303 and r.headers["Location"] == "/"
    assert "HttpOnly" in r.headers["Set-Cookie"] and "SameSite=Strict" in r.headers["Set-Cookie"]
    return http


def test_forwards_the_pages_calls_with_the_session(served):
    server, http, seen = served
    assert http.get(f"{server.origin}/api/v1/teams").status_code == 401  # no session yet
    assert seen == []
    session(server, http)
    r = http.get(f"{server.origin}/api/v1/topology?view=capacity&nodes=true")
    assert r.status_code == 200 and r.headers["Content-Encoding"] == "gzip"  # requests decodes it
    assert r.json()["path"] == "/v1/topology"
    http.get(f"{server.origin}/api/v1/jobs/team-a/train-1")
    origin = {"Origin": server.origin, "Content-Type": "application/json"}
    assert (
        http.post(f"{server.origin}/api/v1/whatif", data=b'{"trace": "x"}', headers=origin).status_code == 200
    )
    assert seen == [
        ("GET", "/v1/topology", [("view", "capacity"), ("nodes", "true")], None),
        ("GET", "/v1/jobs/team-a/train-1", [], None),
        ("POST", "/v1/whatif", [], b'{"trace": "x"}'),
    ]


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/api/v1/openapi.json", 404),  # an API route the page does not use
        ("DELETE", "/api/v1/jobs/team-a/x", 405),  # never a cancel
        ("POST", "/api/v1/jobs", 405),  # never a submit
        ("GET", "/api/v1/topology?view=tree", 400),
        ("GET", "/api/v1/topology?format=mermaid", 400),
        ("GET", "/api/v1/jobs?team=../x", 400),
        ("GET", "/api//evil.example/v1/teams", 404),
        ("GET", "/api/http://evil.example/v1/teams", 404),
    ],
)
def test_refuses_what_the_page_never_asks(served, method, path, status):
    server, http, seen = served
    session(server, http)
    r = http.request(method, server.origin + path, headers={"Origin": server.origin})
    assert r.status_code == status, r.text
    assert r.json()["error"]["message"]
    assert seen == []


def test_refuses_another_host_or_origin(served):
    server, http, seen = served
    session(server, http)
    rebound = http.get(f"{server.origin}/api/v1/teams", headers={"Host": f"evil.example:{server.port}"})
    assert rebound.status_code == 403 and "Host" in rebound.json()["error"]["message"]
    page = http.get(f"{server.origin}/", headers={"Host": "evil.example"})
    assert page.status_code == 403  # the page itself too: a rebound name gets nothing
    other = http.get(f"{server.origin}/api/v1/teams", headers={"Origin": "http://evil.example"})
    assert other.status_code == 403 and "Origin" in other.json()["error"]["message"]
    blind = http.post(
        f"{server.origin}/api/v1/whatif", data=b"{}", headers={"Content-Type": "application/json"}
    )
    assert blind.status_code == 403  # a POST without Origin is not the page's
    form = http.post(
        f"{server.origin}/api/v1/whatif", data=b"a=b",
        headers={"Origin": server.origin, "Content-Type": "application/x-www-form-urlencoded"},
    )  # fmt: skip
    assert form.status_code == 415
    assert seen == []
    local = http.get(f"http://localhost:{server.port}/api/v1/teams")
    assert local.status_code == 401  # localhost is the server's own name; the cookie is per host


def test_a_path_with_dot_segments_is_no_route(served):
    from http.client import HTTPConnection

    server, http, seen = served
    cookie = session(server, http).cookies.get(server.cookie)
    conn = HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:  # sent as is (requests would remove the dot segments first)
        conn.request(
            "GET", "/api/v1/jobs/team-a/x/../../../teams", headers={"Cookie": f"{server.cookie}={cookie}"}
        )
        assert conn.getresponse().status == 404
    finally:
        conn.close()
    assert seen == []


def test_a_wrong_token_or_cookie_gets_nothing(served):
    server, http, seen = served
    assert http.get(f"{server.origin}/?token=guess", allow_redirects=False).status_code == 401
    http.cookies.set(server.cookie, "guess")
    assert http.get(f"{server.origin}/api/v1/teams").status_code == 401
    assert http.get(f"{server.origin}/_dashboard/info").status_code == 401
    assert seen == []


def test_a_login_link_opens_one_session_once_with_a_cookie_named_after_the_port(served):
    # Given the link topogov dashboard printed, used by one browser
    server, http, _ = served
    first = http.get(server.url, allow_redirects=False)
    assert first.status_code == 303
    assert server.cookie == f"{COOKIE}_{server.port}" and server.cookie in first.headers["Set-Cookie"]
    assert "Max-Age=" in first.headers["Set-Cookie"]
    # Then the session cookie is not the link's token (a link seen later opens nothing)
    token = server.url.split("token=", 1)[1]
    assert http.cookies.get(server.cookie) != token
    # When another browser uses the same link
    other = requests.Session()
    try:
        again = other.get(server.url, allow_redirects=False)
        assert again.status_code == 401 and "already used" in again.json()["error"]["message"]
        assert other.get(f"{server.origin}/api/v1/teams").status_code == 401
        # And a new link (topogov dashboard --open makes its own) opens a session of its own
        assert other.get(server.login_url(), allow_redirects=False).status_code == 303
        assert other.get(f"{server.origin}/_dashboard/info").status_code == 200
    finally:
        other.close()


def test_serves_the_page_and_its_files_only(served):
    server, http, _ = served
    session(server, http)
    page = http.get(f"{server.origin}/")
    assert page.status_code == 200 and page.headers["Content-Type"].startswith("text/html")
    assert "script-src 'self'" in page.headers["Content-Security-Policy"]
    assert http.get(f"{server.origin}/app.js").status_code == 200
    for path in ("/../server.py", "/.hidden", "/static/../../x", "/%2e%2e/server.py"):
        assert http.get(server.origin + path).status_code in (403, 404), path
    info = http.get(f"{server.origin}/_dashboard/info").json()
    assert info == {"endpoint": "http://api", "signed_as": "p", "refresh_s": 10.0}


def test_an_unbuilt_page_says_how_to_build_it(tmp_path):
    server = DashboardServer(Upstream(lambda *a: (200, b"{}", None)), static=tmp_path / "missing")
    server.start()
    try:
        r = requests.get(f"{server.origin}/")
        assert r.status_code == 503 and "make install" in r.json()["error"]["message"]
    finally:
        server.stop()


def test_binds_to_loopback_only():
    server = DashboardServer(Upstream(lambda *a: (200, b"{}", None)))
    try:
        assert server.server_address[0] == "127.0.0.1"
    finally:
        server.server_close()


def test_allowed_names_what_it_refuses():
    with pytest.raises(Refused) as exc:
        allowed("GET", "/v1/jobs", "team=a&view=all")
    assert exc.value.status == 400 and "'view'" in exc.value.message
    assert allowed("GET", "/v1/jobs", "team=team-a") == [("team", "team-a")]
    # a page at a time: the size and the token of the next page
    assert allowed("GET", "/v1/jobs", "limit=500&nextToken=eyJ0ZWFtIjoidGVhbS1hIn0") == [
        ("limit", "500"),
        ("nextToken", "eyJ0ZWFtIjoidGVhbS1hIn0"),
    ]


# -- the API's answer as it came: gzip passed on, unpacked for a browser without gzip ------------------
BODY = json.dumps({"teams": [{"name": f"team-{i}"} for i in range(200)]}).encode()


@pytest.fixture
def relaying(tmp_path):
    """A server whose upstream answers what ``answer`` holds: (status, body as sent, its encoding)."""
    answer: dict[str, tuple[int, bytes, str | None]] = {}
    (tmp_path / "index.html").write_text("<!doctype html><title>t</title>")
    server = DashboardServer(Upstream(lambda *a: answer["now"]), static=tmp_path)
    server.start()
    http = requests.Session()
    try:
        session(server, http)
        yield server, http, answer
    finally:
        http.close()
        server.stop()


def raw_get(http, url, accept):
    """The answer's body as it came over the wire, with this Accept-Encoding."""
    r = http.get(url, headers={"Accept-Encoding": accept}, stream=True)
    try:
        return r, r.raw.read(decode_content=False)
    finally:
        r.close()


def test_a_gzipped_answer_is_passed_on_as_it_came(relaying):
    server, http, answer = relaying
    sent = gzip.compress(BODY, mtime=1)  # as the API sent it (this mtime is nobody else's)
    answer["now"] = (200, sent, "gzip")
    r, raw = raw_get(http, f"{server.origin}/api/v1/teams", "gzip, deflate")
    assert r.status_code == 200 and r.headers["Content-Encoding"] == "gzip" and raw == sent


def test_a_gzipped_or_deflated_answer_is_unpacked_for_a_browser_without_gzip(relaying):
    import zlib

    server, http, answer = relaying
    for sent, encoding in ((gzip.compress(BODY), "gzip"), (zlib.compress(BODY), "deflate")):
        answer["now"] = (200, sent, encoding)
        r, raw = raw_get(http, f"{server.origin}/api/v1/teams", "identity")
        assert r.status_code == 200 and "Content-Encoding" not in r.headers and raw == BODY, encoding
    answer["now"] = (200, zlib.compress(BODY), "deflate")  # deflate is re-packed as gzip
    r, raw = raw_get(http, f"{server.origin}/api/v1/teams", "gzip")
    assert r.headers["Content-Encoding"] == "gzip" and gzip.decompress(raw) == BODY


def test_an_answer_it_cannot_read_is_a_502_that_says_why(relaying):
    server, http, answer = relaying
    answer["now"] = (200, b"\x1b\x00brotli", "br")
    r = http.get(f"{server.origin}/api/v1/teams")
    assert r.status_code == 502 and "'br'" in r.json()["error"]["message"]
    answer["now"] = (200, b"not gzip at all", "gzip")
    r, raw = raw_get(http, f"{server.origin}/api/v1/teams", "identity")
    assert r.status_code == 502 and "not valid gzip" in json.loads(raw)["error"]["message"]


def test_the_api_is_asked_for_gzip_and_its_bytes_kept_as_they_came(tmp_path, monkeypatch):
    """``api_upstream`` against a gateway that compresses as API Gateway does: the upstream leg
    carries gzip, and what ``forward`` returns is that gzip, not the JSON unpacked."""
    from topogov_cli.client import Api, Endpoint
    from topogov_cli.dashboard.server import api_upstream
    from topogov_local.apigw import LocalApiGateway, callers_from_credentials_file

    credentials = tmp_path / "credentials"
    credentials.write_text(
        "[viewer]\naws_access_key_id = AKIAVIEWER000000001\naws_secret_access_key = s3cr3t\n"
    )
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    seen = []

    def handler(event, context):
        seen.append(event["headers"].get("Accept-Encoding"))
        return {"statusCode": 200, "headers": {"Content-Type": "application/json"}, "body": BODY.decode()}

    callers = callers_from_credentials_file(str(credentials))
    with LocalApiGateway(handler, callers, port=0, minimum_compression_size=1024) as gw:
        api = Api(Endpoint(gw.url, "test"), profile="viewer", region_flag="us-east-1")
        status, raw, encoding = api_upstream(api, "viewer").forward("GET", "/v1/teams", [], None)
    assert (status, encoding, seen) == (200, "gzip", ["gzip"])
    assert len(raw) < len(BODY) / 5 and gzip.decompress(raw) == BODY
