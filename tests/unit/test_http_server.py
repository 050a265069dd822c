"""The in-process HTTP/1.1 server (``novella.service.HTTPServer``): keep-alive,
framing, and an environ holding only what the client sent."""
import http.client
import json
import socket

import pytest

from novella.service import HTTPServer


class Recorder:
    """A WSGI app that answers with what it saw (and keeps every environ)."""

    def __init__(self, body=None, read=True):
        self.environs = []
        self.body = body
        self.read = read

    def __call__(self, environ, start_response):
        data = environ["wsgi.input"].read() if self.read else b""
        self.environs.append(dict(environ, body=data))
        start_response("200 OK", [("Content-Type", "application/json")])
        if self.body is not None:
            return iter(self.body)  # length unknown: sent chunked
        return [json.dumps({"body": data.decode(), "n": len(self.environs)}).encode()]


@pytest.fixture
def serve():
    servers = []

    def start(app, name="placement"):
        srv = HTTPServer(app, "127.0.0.1", 0, name).start()
        servers.append(srv)
        return srv
    yield start
    for srv in servers:
        srv.stop()


def test_requests_share_one_kept_alive_connection(serve):
    app = Recorder()
    srv = serve(app)
    conn = http.client.HTTPConnection(srv.host, srv.port, timeout=10)
    for i in range(3):
        conn.request("PUT", "/x", body=b"body%d" % i, headers={"Content-Type": "text/x"})
        resp = conn.getresponse()
        assert (resp.status, resp.version) == (200, 11)
        assert resp.getheader("Content-Length") is not None
        assert json.loads(resp.read()) == {"body": "body%d" % i, "n": i + 1}
    conn.close()
    # One TCP connection carried the three requests.
    assert len({e["REMOTE_PORT"] for e in app.environs}) == 1
    assert [e["CONTENT_TYPE"] for e in app.environs] == ["text/x"] * 3


def test_no_content_type_is_made_up(serve):
    app = Recorder()
    srv = serve(app)
    conn = http.client.HTTPConnection(srv.host, srv.port, timeout=10)
    conn.request("PUT", "/resource_providers/x")  # no body, no Content-Type
    conn.getresponse().read()
    conn.request("POST", "/resource_providers", body=b"data")  # a body, no Content-Type
    conn.getresponse().read()
    conn.putrequest("GET", "/", skip_accept_encoding=True)  # no Content-Length either
    conn.endheaders()
    conn.getresponse().read()
    assert [("CONTENT_TYPE" in e, e.get("CONTENT_LENGTH"), e["body"]) for e in app.environs] == [
        (False, "0", b""), (False, "4", b"data"), (False, None, b"")]


def test_body_of_unknown_length_is_chunked_and_head_has_none(serve):
    srv = serve(Recorder(body=[b"ab", b"", b"cde"]))
    conn = http.client.HTTPConnection(srv.host, srv.port, timeout=10)
    conn.request("GET", "/")
    resp = conn.getresponse()
    assert resp.getheader("Transfer-Encoding") == "chunked"
    assert resp.read() == b"abcde"
    conn.request("HEAD", "/")
    resp = conn.getresponse()
    assert (resp.status, resp.read()) == (200, b"")
    conn.request("GET", "/")  # the connection is still in step
    assert conn.getresponse().read() == b"abcde"


def test_unread_body_is_drained_before_the_next_request(serve):
    app = Recorder(read=False)
    srv = serve(app)
    conn = http.client.HTTPConnection(srv.host, srv.port, timeout=10)
    conn.request("POST", "/first", body=b"x" * 5000)
    assert json.loads(conn.getresponse().read())["body"] == ""  # not read by the app
    conn.request("GET", "/second")
    assert json.loads(conn.getresponse().read())["n"] == 2
    assert [e["PATH_INFO"] for e in app.environs] == ["/first", "/second"]
    assert len({e["REMOTE_PORT"] for e in app.environs}) == 1


def test_chunked_request_body_is_decoded(serve):
    app = Recorder()
    srv = serve(app)
    conn = http.client.HTTPConnection(srv.host, srv.port, timeout=10)
    conn.request("POST", "/", body=iter([b"hello ", b"world"]),
                 encode_chunked=True, headers={"Transfer-Encoding": "chunked"})
    assert json.loads(conn.getresponse().read())["body"] == "hello world"
    assert app.environs[0]["CONTENT_LENGTH"] == "11"


def test_malformed_content_length_reaches_the_app_and_closes(serve):
    app = Recorder()
    srv = serve(app)
    with socket.create_connection((srv.host, srv.port), timeout=10) as sock:
        sock.sendall(b"POST /rp HTTP/1.1\r\nHost: x\r\nContent-Length: hi mom\r\n\r\n{}")
        data = b""
        while chunk := sock.recv(65536):
            data += chunk  # the server closes: where the next request starts is unknown
    assert data.startswith(b"HTTP/1.1 200 ")
    assert b"Connection: close" in data
    assert app.environs[0]["CONTENT_LENGTH"] == "hi mom"
    assert app.environs[0]["body"] == b""


def test_http_1_0_client_and_connection_close(serve):
    srv = serve(Recorder())
    with socket.create_connection((srv.host, srv.port), timeout=10) as sock:
        sock.sendall(b"GET / HTTP/1.0\r\n\r\n")
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    assert data.startswith(b"HTTP/1.1 200 ") and b"Connection: close" in data
    assert data.endswith(b'"n": 1}')


def test_application_error_is_a_json_500(serve):
    def broken(environ, start_response):
        raise RuntimeError("boom")
    srv = serve(broken)
    conn = http.client.HTTPConnection(srv.host, srv.port, timeout=10)
    conn.request("GET", "/")
    resp = conn.getresponse()
    assert resp.status == 500
    assert json.loads(resp.read())["errors"][0]["status"] == 500


def test_request_line_too_long_is_a_json_414(serve):
    srv = serve(Recorder(), name="compute")
    conn = http.client.HTTPConnection(srv.host, srv.port, timeout=10)
    conn.request("GET", "/" + "a" * 70000)
    resp = conn.getresponse()
    assert resp.status == 414
    assert resp.getheader("Content-Type") == "application/json"
    assert json.loads(resp.read())


def test_stop_ends_kept_alive_connections(serve):
    srv = serve(Recorder())
    conn = http.client.HTTPConnection(srv.host, srv.port, timeout=10)
    conn.request("GET", "/")
    conn.getresponse().read()
    srv.stop()
    assert conn.sock.recv(1) == b""  # the server closed the idle connection
