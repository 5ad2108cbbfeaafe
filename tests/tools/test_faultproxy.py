"""faultproxy.py against a trivial upstream: it forwards unchanged, and each fault kind does what
its docstring says (who sees the request, what the client sees, when).

The proxy runs as a subprocess through its CLI, as the outage tests and the chaos harness use it.
"""
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

PROXY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "faultproxy.py")


class Upstream:
    """Answers every request 200 with a small body and remembers what it received."""

    def __init__(self):
        self.received = []
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                upstream.received.append((self.command, self.path, list(self.headers.items()),
                                          body))
                out = b"<ok/>" + body
                self.send_response(200)
                self.send_header("ETag", '"e1"')
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(out)

            do_GET = do_PUT = do_HEAD = do_DELETE = do_POST = _answer

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class Proxy:
    def __init__(self, upstream_port, seed=0):
        self.p = subprocess.Popen([sys.executable, PROXY, "--listen", "127.0.0.1:0", "--upstream",
                                   f"127.0.0.1:{upstream_port}", "--seed", str(seed)],
                                  stdout=subprocess.PIPE, text=True)
        line = self.p.stdout.readline()
        assert line.startswith("faultproxy listening on 127.0.0.1:"), line
        self.port = int(line.rsplit(":", 1)[1])

    def control(self, method, path, body=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        c.request(method, "/_faultproxy/" + path,
                  body=None if body is None else json.dumps(body))
        r = c.getresponse()
        data = json.loads(r.read())
        c.close()
        return r.status, data

    def rules(self, *rules):
        status, data = self.control("POST", "rules", list(rules))
        assert status == 200, data
        return data["ids"]

    def stats(self):
        return self.control("GET", "stats")[1]

    def conn(self, timeout=10):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def close(self):
        self.p.terminate()
        self.p.wait(timeout=10)


@pytest.fixture
def upstream():
    u = Upstream()
    yield u
    u.close()


@pytest.fixture
def proxy(upstream):
    p = Proxy(upstream.port)
    yield p
    p.close()


def put(conn, path, body=b"x", headers=None):
    conn.request("PUT", path, body=body, headers=headers or {})
    r = conn.getresponse()
    return r.status, r.read()


def test_forwards_unchanged_with_keep_alive(proxy, upstream):
    c = proxy.conn()
    headers = {"Host": "example.invalid:9000", "If-None-Match": "*", "X-Amz-Date": "20240101T0Z"}
    assert put(c, "/dex/p/nodes/n/log/00000000000000000007", b"batch", headers) == \
        (200, b"<ok/>batch")
    c.request("HEAD", "/dex/p/nodes/n/lease")  # same client connection
    r = c.getresponse()
    assert r.status == 200 and r.read() == b"" and r.getheader("Content-Length") == "5"
    c.request("GET", "/dex?list-type=2&prefix=p%2Fnodes%2Fn%2Flog%2F")
    assert c.getresponse().read() == b"<ok/>"
    method, path, got_headers, body = upstream.received[0]
    assert (method, path, body) == ("PUT", "/dex/p/nodes/n/log/00000000000000000007", b"batch")
    got = {k.lower(): v for k, v in got_headers}
    assert got["host"] == "example.invalid:9000"  # untouched: SigV4 signs it
    assert got["if-none-match"] == "*" and got["content-length"] == "5"
    s = proxy.stats()
    assert s["by_class"] == {"log": 1, "lease": 1, "other": 1}
    assert s["by_action"] == {"forwarded": 3}
    assert s["upstream_status"]["log"]["PUT"] == {"200": 1}


def test_expect_100_continue_is_answered_by_the_proxy(proxy, upstream):
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as s:
        s.sendall(b"PUT /dex/k HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n"
                  b"Expect: 100-continue\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 100 Continue")
        s.sendall(b"abc")
        reply = s.recv(1000)
    assert reply.startswith(b"HTTP/1.1 200") and reply.endswith(b"<ok/>abc")
    assert upstream.received[0][3] == b"abc"


def test_status_answers_an_s3_error_without_forwarding(proxy, upstream):
    proxy.rules({"fault": "status", "status": 503, "method": "PUT", "key": "/lease$"})
    c = proxy.conn()
    status, body = put(c, "/dex/p/nodes/n/lease")
    assert status == 503 and b"<Code>SlowDown</Code>" in body
    assert put(c, "/dex/p/nodes/n/log/00000000000000000001")[0] == 200  # same connection
    c.request("GET", "/dex/p/nodes/n/lease")  # method does not match
    assert c.getresponse().read() == b"<ok/>"
    assert [(m, p) for m, p, _, _ in upstream.received] == [
        ("PUT", "/dex/p/nodes/n/log/00000000000000000001"), ("GET", "/dex/p/nodes/n/lease")]
    s = proxy.stats()
    assert s["detail"]["lease"]["PUT"] == {"status": 1}
    assert s["rules"][0]["applied"] == 1


def test_delay_forwards_after_the_delay(proxy, upstream):
    proxy.rules({"fault": "delay", "seconds": 0.6})
    t0 = time.monotonic()
    assert put(proxy.conn(), "/dex/k")[0] == 200
    assert time.monotonic() - t0 >= 0.6
    assert len(upstream.received) == 1
    assert proxy.stats()["by_action"] == {"delay": 1}


def test_stall_holds_then_closes_without_forwarding(proxy, upstream):
    proxy.rules({"fault": "stall", "seconds": 1.0})
    c = proxy.conn(timeout=10)
    t0 = time.monotonic()
    with pytest.raises(http.client.RemoteDisconnected):
        put(c, "/dex/p/nodes/n/lease")
    held = time.monotonic() - t0
    assert 1.0 <= held < 5, held
    assert upstream.received == []
    # A client whose own timeout is shorter gives up first: the usual case with dex.
    proxy.rules({"fault": "stall", "seconds": 30})
    t0 = time.monotonic()
    with pytest.raises(socket.timeout):
        put(proxy.conn(timeout=0.5), "/dex/p/nodes/n/lease")
    assert time.monotonic() - t0 < 5
    assert proxy.stats()["by_action"] == {"stall": 2}


def test_drop_response_lands_the_write_but_answers_nothing(proxy, upstream):
    proxy.rules({"fault": "drop_response", "method": "PUT", "count": 1})
    with pytest.raises(http.client.RemoteDisconnected):
        put(proxy.conn(), "/dex/p/nodes/n/lease", b"late")
    assert [(m, b) for m, _, _, b in upstream.received] == [("PUT", b"late")]
    assert put(proxy.conn(), "/dex/p/nodes/n/lease", b"again")[0] == 200  # count 1: expired
    s = proxy.stats()
    assert s["detail"]["lease"]["PUT"] == {"drop_response": 1, "forwarded": 1}
    assert s["upstream_status"]["lease"]["PUT"] == {"200": 2}  # both reached the store


def test_reset_breaks_the_connection_at_once(proxy, upstream):
    proxy.rules({"fault": "reset", "key": "/snapshots/"})
    t0 = time.monotonic()
    with pytest.raises(ConnectionResetError):
        put(proxy.conn(), "/dex/p/nodes/n/snapshots/0001/manifest")
    assert time.monotonic() - t0 < 2
    assert upstream.received == []
    assert proxy.stats()["detail"]["snapshot"]["PUT"] == {"reset": 1}


def test_count_and_for_seconds_expire_rules(proxy, upstream):
    proxy.rules({"fault": "status", "status": 500, "count": 2})
    c = proxy.conn()
    status, body = put(c, "/dex/a")
    assert status == 500 and b"<Code>InternalError</Code>" in body
    assert [put(c, "/dex/a")[0] for _ in range(3)] == [500, 200, 200]
    proxy.rules({"fault": "status", "for_seconds": 0.5})
    assert put(c, "/dex/a")[0] == 503
    time.sleep(0.7)
    assert put(c, "/dex/a")[0] == 200
    # window_from first_match: the window opens at the first request the rule applies to.
    proxy.rules({"fault": "status", "key": "/b$", "for_seconds": 0.5, "window_from": "first_match"})
    time.sleep(0.7)
    assert put(c, "/dex/b")[0] == 503
    time.sleep(0.2)
    assert put(c, "/dex/b")[0] == 503
    time.sleep(0.5)
    assert put(c, "/dex/b")[0] == 200
    rules = proxy.control("GET", "rules")[1]
    assert [(r["applied"], r["active"]) for r in rules] == [(2, False), (1, False), (2, False)]
    assert proxy.control("DELETE", "rules")[1] == {"deleted": 3}


def test_probability_is_seeded_and_misses_fall_through(upstream):
    patterns = []
    for _ in range(2):
        p = Proxy(upstream.port, seed=7)
        try:
            p.rules({"fault": "status", "status": 503, "probability": 0.5},
                    {"fault": "status", "status": 500})
            c = p.conn()
            patterns.append([put(c, "/dex/a")[0] for _ in range(40)])
        finally:
            p.close()
    assert patterns[0] == patterns[1]  # same seed, same faults
    assert set(patterns[0]) == {503, 500}  # a miss falls through to the next rule


def test_stats_reset_and_bad_rules(proxy):
    put(proxy.conn(), "/dex/a")
    assert proxy.stats()["requests"] == 1
    proxy.control("POST", "stats/reset")
    assert proxy.stats()["requests"] == 0 and proxy.control("GET", "events")[1] == []
    for bad in ({"fault": "explode"}, {"fault": "stall"}, {"fault": "status", "colour": 1},
                {"fault": "status", "count": 0}, {"fault": "status", "key": "("}, "x",
                {"fault": "status", "window_from": "later"}):
        status, data = proxy.control("POST", "rules", [bad])
        assert status == 400 and data["error"], bad
    assert proxy.control("GET", "rules")[1] == []
    assert proxy.control("GET", "nothing")[0] == 404


def test_events_record_time_action_and_upstream_status(proxy):
    t0 = time.time()
    proxy.rules({"fault": "status", "count": 1})
    c = proxy.conn()
    put(c, "/dex/p/nodes/n/lease")
    put(c, "/dex/p/nodes/n/lease")
    events = proxy.control("GET", f"events?since={t0}")[1]
    assert [(e["action"], e["status"], e["upstream_status"]) for e in events] == [
        ("status", 503, None), ("forwarded", 200, 200)]
    assert all(t0 <= e["t"] <= time.time() and e["class"] == "lease" for e in events)


def test_refuses_non_loopback_addresses():
    r = subprocess.run([sys.executable, PROXY, "--listen", "0.0.0.0:0", "--upstream",
                        "127.0.0.1:1"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and "loopback" in r.stderr
