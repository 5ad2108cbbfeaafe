#!/usr/bin/env python3
"""faultproxy: a fault-injecting HTTP/1.1 proxy between dex and an S3-compatible store.

dex's durability rules are about what object storage does wrong: slow answers, 5xx/throttling,
requests that hang, writes that land but whose answer is lost, connections that break. This proxy
sits between `dex-server-zd serve` (objectStore.endpoint pointed at the proxy) and a real store
(MinIO) and does exactly those things to chosen requests, on command, while everything else is
forwarded unchanged. Python 3 standard library only; one thread per client connection.

Usage:
    faultproxy.py --listen 127.0.0.1:PORT --upstream 127.0.0.1:PORT [--seed N]

PORT 0 picks a free port. When ready it prints exactly one line on stdout:
    faultproxy listening on 127.0.0.1:PORT
Both addresses must be loopback: this is a test tool, never a network service.

Forwarding
    Each request (Content-Length body; `Expect: 100-continue` is answered by the proxy) is sent
    to the upstream on a fresh connection with the same method, target and headers in the same
    order -- Host included -- so SigV4 signatures still verify. The upstream's answer is returned
    with hop-by-hop headers dropped and a Content-Length. The client's connection is kept alive
    (unless it asked to close). A fresh upstream connection per request means the proxy never
    re-sends a request on a stale keep-alive connection: every request reaches the store at most
    once, which the conditional-write tests depend on.

Control API (same port, path prefix /_faultproxy/, never forwarded; JSON in and out)
    POST   /_faultproxy/rules        body: a JSON list of rules; appends them; returns their ids
    GET    /_faultproxy/rules        the rules with their applied counts and whether active
    DELETE /_faultproxy/rules        removes every rule
    GET    /_faultproxy/stats        counters (below)
    POST   /_faultproxy/stats/reset  zeroes the counters and the event log (rules stay)
    GET    /_faultproxy/events       recent requests (up to 20,000), oldest first; ?since=UNIX_TIME

Rules
    {"fault": KIND, "method": "PUT", "key": "/lease$", "count": 3, "for_seconds": 5,
     "probability": 0.5, "seconds": 4, "status": 503, "code": "SlowDown"}
    Only "fault" is required. For each request the first *active* rule that matches is applied;
    a request no rule matches is forwarded.
      method        optional; exact HTTP method (GET, PUT, HEAD, DELETE, POST)
      key           optional; regular expression searched (re.search) in the URL-decoded request
                    target, path and query, e.g. "/dex/PREFIX/nodes/N/lease" or
                    "/dex?list-type=2&prefix=PREFIX/nodes/N/log/"
      count         optional; the rule applies to the next N matching requests, then expires
      for_seconds   optional; the rule is active for this long after it was posted, or, with
                    "window_from": "first_match", after the first request it applied to (an
                    outage of exactly N seconds from the first renewal attempt it hits, whatever
                    the phase of the renewal cycle when the rule was posted)
      probability   optional (default 1); a matching request is faulted with this probability,
                    drawn from the --seed RNG (a request not drawn falls through to later rules)
    Kinds:
      status        answer `status` (default 503) with an S3 XML error body whose Code is `code`
                    (default SlowDown for 503, InternalError for 500, else ServiceUnavailable),
                    without forwarding: the store never sees the request
      delay         wait `seconds`, then forward: a slow store
      stall         hold the request `seconds` without answering, then close the connection
                    without forwarding: a hung store (the client's own timeout usually fires first)
      drop_response forward (the write lands), then close the client connection without an
                    answer: the lost answer of an applied write
      reset         close the connection at once with a TCP RST, without forwarding: a broken
                    network path

Stats (GET /_faultproxy/stats)
    {"requests": N, "by_method": {"PUT": n}, "by_class": {"lease": n},
     "by_action": {"forwarded": n, "status": n, ...},
     "detail": {"lease": {"PUT": {"forwarded": n, "stall": n}}},
     "upstream_status": {"lease": {"PUT": {"200": n, "412": n}}},
     "rules": [{"id": 1, "fault": "stall", "applied": n, "active": true, ...}]}
    Key classes: a target ending in /lease is "lease", one ending in /log/<digits> is "log", one
    containing /snapshots/ is "snapshot", anything else (lists, the bucket, the control API is not
    counted) is "other". Actions: the fault kind applied, "forwarded", or "upstream_error" (the
    upstream could not be reached or broke; the client's connection is closed without an answer).
    Events (GET /_faultproxy/events) carry {"t": unix time at arrival, "method", "class", "target",
    "action", "rule", "upstream_status", "status" (sent to the client, null if none)}.
"""
import argparse
import collections
import http.client
import ipaddress
import json
import random
import re
import signal
import socket
import struct
import sys
import threading
import time
import urllib.parse

CONTROL_PREFIX = "/_faultproxy/"
KINDS = ("status", "delay", "stall", "drop_response", "reset")
RULE_FIELDS = {"fault", "method", "key", "count", "for_seconds", "window_from", "probability",
               "seconds", "status", "code"}
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "te",
              "trailer", "upgrade"}
EVENTS_MAX = 20000
HEADER_LINE_MAX = 65536
HEADERS_MAX = 200
UPSTREAM_TIMEOUT_S = 120


def classify(target):
    path = urllib.parse.unquote(target.split("?", 1)[0])
    if path.endswith("/lease"):
        return "lease"
    if re.search(r"/log/\d+$", path):
        return "log"
    if "/snapshots/" in path:
        return "snapshot"
    return "other"


def loopback(host):
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def split_address(text):
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"expected HOST:PORT, got {text!r}")
    if not loopback(host):
        raise ValueError(f"{text}: only loopback addresses are allowed")
    return host, int(port)


class RuleError(ValueError):
    pass


class Rule:
    def __init__(self, rule_id, spec, now):
        if not isinstance(spec, dict):
            raise RuleError(f"a rule must be a JSON object, got {spec!r}")
        unknown = set(spec) - RULE_FIELDS
        if unknown:
            raise RuleError(f"unknown rule fields {sorted(unknown)}; known: {sorted(RULE_FIELDS)}")
        self.id = rule_id
        self.spec = dict(spec)
        self.fault = spec.get("fault")
        if self.fault not in KINDS:
            raise RuleError(f"fault must be one of {KINDS}, got {self.fault!r}")
        self.method = spec.get("method")
        self.key = re.compile(spec["key"]) if spec.get("key") is not None else None
        self.count = self._number(spec, "count", int, minimum=1)
        self.for_seconds = self._number(spec, "for_seconds", (int, float), minimum=0)
        self.probability = self._number(spec, "probability", (int, float), minimum=0)
        if self.probability is not None and self.probability > 1:
            raise RuleError("probability must be within [0, 1]")
        self.seconds = self._number(spec, "seconds", (int, float), minimum=0)
        if self.fault in ("delay", "stall") and self.seconds is None:
            raise RuleError(f"a {self.fault} rule needs 'seconds'")
        self.status = self._number(spec, "status", int, minimum=100) or 503
        if self.status > 599:
            raise RuleError("status must be within [100, 599]")
        self.code = spec.get("code") or {503: "SlowDown", 500: "InternalError"}.get(
            self.status, "ServiceUnavailable")
        self.window_from = spec.get("window_from", "posted")
        if self.window_from not in ("posted", "first_match"):
            raise RuleError("window_from must be 'posted' or 'first_match'")
        # None until the first application when the window starts at the first match.
        self.window_start = now if self.window_from == "posted" else None
        self.applied = 0

    @staticmethod
    def _number(spec, name, types, minimum):
        value = spec.get(name)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, types) or value < minimum:
            raise RuleError(f"{name} must be a number >= {minimum}, got {value!r}")
        return value

    def active(self, now):
        if self.count is not None and self.applied >= self.count:
            return False
        if self.for_seconds is None or self.window_start is None:
            return True
        return now < self.window_start + self.for_seconds

    def apply(self, now):
        self.applied += 1
        if self.window_start is None:
            self.window_start = now

    def matches(self, method, target):
        if self.method is not None and self.method != method:
            return False
        return self.key is None or self.key.search(target) is not None

    def describe(self, now):
        return dict(self.spec, id=self.id, applied=self.applied, active=self.active(now))


def nested():
    return collections.defaultdict(lambda: collections.defaultdict(collections.Counter))


class Stats:
    def __init__(self):
        self.reset()

    def reset(self):
        self.requests = 0
        self.by_method = collections.Counter()
        self.by_class = collections.Counter()
        self.by_action = collections.Counter()
        self.detail = nested()
        self.upstream_status = nested()
        self.events = collections.deque(maxlen=EVENTS_MAX)

    def as_json(self):
        def plain(d):
            return {k: plain(v) if isinstance(v, dict) else v for k, v in d.items()}
        return {"requests": self.requests, "by_method": dict(self.by_method),
                "by_class": dict(self.by_class), "by_action": dict(self.by_action),
                "detail": plain(self.detail),
                "upstream_status": plain(self.upstream_status)}  # json makes the codes strings


class Request:
    def __init__(self, method, target, version, headers, body):
        self.method, self.target, self.version = method, target, version
        self.headers, self.body = headers, body

    def header(self, name):
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return None

    def wants_close(self):
        conn = (self.header("connection") or "").lower()
        return "close" in conn or (self.version == "HTTP/1.0" and "keep-alive" not in conn)


class BadRequest(Exception):
    pass


class FaultProxy:
    """The proxy; usable in-process too: FaultProxy(...).start() returns the bound port."""

    def __init__(self, listen, upstream, seed=0):
        self.listen = split_address(listen)
        self.upstream = split_address(upstream)
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.rules = []
        self.next_rule_id = 1
        self.stats = Stats()
        self.closing = threading.Event()
        self.sock = None

    # ------------------------------------------------------------------ lifecycle

    def start(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(self.listen)
        self.sock.listen(128)
        threading.Thread(target=self._accept_loop, daemon=True).start()
        return self.sock.getsockname()[1]

    def close(self):
        self.closing.set()
        if self.sock is not None:
            self.sock.close()

    def _accept_loop(self):
        while not self.closing.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._serve_connection, args=(conn,), daemon=True).start()

    # ------------------------------------------------------------------ one client connection

    def _serve_connection(self, conn):
        rfile = conn.makefile("rb")
        try:
            while not self.closing.is_set():
                try:
                    req = self._read_request(conn, rfile)
                except BadRequest as e:
                    self._send(conn, 400, "Bad Request", [("Content-Type", "text/plain")],
                               str(e).encode(), head=False)
                    return
                if req is None:
                    return
                if req.target.startswith(CONTROL_PREFIX):
                    keep = self._control(conn, req)
                else:
                    keep = self._proxy(conn, req)
                if not keep or req.wants_close():
                    return
        except OSError:
            return  # the client went away
        finally:
            try:
                rfile.close()
                conn.close()
            except OSError:
                pass

    def _read_request(self, conn, rfile):
        line = rfile.readline(HEADER_LINE_MAX)
        if not line:
            return None
        parts = line.decode("latin-1").rstrip("\r\n").split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            raise BadRequest(f"bad request line {line[:200]!r}")
        method, target, version = parts
        headers = []
        while True:
            h = rfile.readline(HEADER_LINE_MAX)
            if not h:
                return None
            if h in (b"\r\n", b"\n"):
                break
            if len(headers) >= HEADERS_MAX:
                raise BadRequest("too many headers")
            name, sep, value = h.decode("latin-1").rstrip("\r\n").partition(":")
            if not sep:
                raise BadRequest(f"bad header line {h[:200]!r}")
            headers.append((name, value.strip()))
        req = Request(method, target, version, headers, b"")
        if req.header("transfer-encoding"):
            # dex (libcurl with CURLOPT_INFILESIZE) and boto3 both send Content-Length.
            raise BadRequest("chunked request bodies are not supported")
        if (req.header("expect") or "").lower() == "100-continue":
            conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        length = req.header("content-length")
        if length:
            if not length.isdigit():
                raise BadRequest(f"bad Content-Length {length!r}")
            req.body = rfile.read(int(length))
            if len(req.body) != int(length):
                return None
        return req

    # ------------------------------------------------------------------ faults

    def _decide(self, req):
        """Picks the rule to apply (None: forward) and counts its use, under the lock."""
        now = time.monotonic()
        target = urllib.parse.unquote(req.target)
        with self.lock:
            chosen = None
            for rule in self.rules:
                if not rule.active(now) or not rule.matches(req.method, target):
                    continue
                if rule.probability is not None and self.rng.random() >= rule.probability:
                    continue
                rule.apply(now)
                chosen = rule
                break
            return chosen

    def _record(self, req, cls, action, rule, upstream_status, status, t):
        with self.lock:
            s = self.stats
            s.requests += 1
            s.by_method[req.method] += 1
            s.by_class[cls] += 1
            s.by_action[action] += 1
            s.detail[cls][req.method][action] += 1
            if upstream_status is not None:
                s.upstream_status[cls][req.method][upstream_status] += 1
            s.events.append({"t": t, "method": req.method, "class": cls, "target": req.target,
                             "action": action, "rule": rule.id if rule else None,
                             "upstream_status": upstream_status, "status": status})

    def _proxy(self, conn, req):
        """Serves one request; returns whether the client connection stays open."""
        t = time.time()
        cls = classify(req.target)
        rule = self._decide(req)
        kind = rule.fault if rule else None
        if kind == "status":
            body = self._s3_error(rule, req)
            self._record(req, cls, kind, rule, None, rule.status, t)
            self._send(conn, rule.status, http.client.responses.get(rule.status, "Error"),
                       [("Content-Type", "application/xml"), ("x-amz-request-id", "faultproxy")],
                       body, head=req.method == "HEAD")
            return True
        if kind == "stall":
            # Hold the request unanswered; the store never sees it. Record first, so the stats
            # show the stall while it is still going on.
            self._record(req, cls, kind, rule, None, None, t)
            self.closing.wait(rule.seconds)
            return False
        if kind == "reset":
            self._record(req, cls, kind, rule, None, None, t)
            # SO_LINGER with a zero timeout makes close() send RST instead of FIN.
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return False
        if kind == "delay":
            self.closing.wait(rule.seconds)
        try:
            status, reason, headers, body = self._forward(req)
        except (OSError, http.client.HTTPException):
            self._record(req, cls, "upstream_error", rule, None, None, t)
            return False
        if kind == "drop_response":
            # The store applied the request; the client never learns it.
            self._record(req, cls, kind, rule, status, None, t)
            return False
        self._record(req, cls, kind or "forwarded", rule, status, status, t)
        self._send(conn, status, reason, headers, body, head=req.method == "HEAD")
        return True

    def _forward(self, req):
        up = http.client.HTTPConnection(*self.upstream, timeout=UPSTREAM_TIMEOUT_S)
        try:
            up.putrequest(req.method, req.target, skip_host=True, skip_accept_encoding=True)
            for name, value in req.headers:
                up.putheader(name, value)
            up.endheaders(req.body or None)
            resp = up.getresponse()  # skips an interim 100 Continue
            body = resp.read()
            headers = [(k, v) for k, v in resp.getheaders() if k.lower() not in HOP_BY_HOP]
            if req.method != "HEAD":
                headers = [(k, v) for k, v in headers if k.lower() != "content-length"]
            return resp.status, resp.reason, headers, body
        finally:
            up.close()

    @staticmethod
    def _s3_error(rule, req):
        resource = urllib.parse.unquote(req.target.split("?", 1)[0])
        return ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{}</Code>'
                "<Message>faultproxy: injected {} (rule {})</Message><Resource>{}</Resource>"
                "<RequestId>faultproxy-{}</RequestId></Error>").format(
                    rule.code, rule.status, rule.id, resource, rule.id).encode()

    @staticmethod
    def _send(conn, status, reason, headers, body, head):
        out = [f"HTTP/1.1 {status} {reason}"]
        out += [f"{k}: {v}" for k, v in headers]
        if not any(k.lower() == "content-length" for k, _ in headers):
            out.append(f"Content-Length: {len(body)}")
        data = ("\r\n".join(out) + "\r\n\r\n").encode("latin-1")
        conn.sendall(data if head else data + body)

    # ------------------------------------------------------------------ control API

    def _control(self, conn, req):
        path, _, query = req.target.partition("?")
        now = time.monotonic()
        code, result = 200, None
        try:
            if path == "/_faultproxy/rules" and req.method == "POST":
                specs = json.loads(req.body or b"null")
                if not isinstance(specs, list):
                    raise RuleError("POST /_faultproxy/rules takes a JSON list of rules")
                with self.lock:
                    rules = []
                    for spec in specs:
                        rules.append(Rule(self.next_rule_id + len(rules), spec, now))
                    self.next_rule_id += len(rules)
                    self.rules.extend(rules)
                result = {"ids": [r.id for r in rules]}
            elif path == "/_faultproxy/rules" and req.method == "GET":
                with self.lock:
                    result = [r.describe(now) for r in self.rules]
            elif path == "/_faultproxy/rules" and req.method == "DELETE":
                with self.lock:
                    result = {"deleted": len(self.rules)}
                    self.rules = []
            elif path == "/_faultproxy/stats" and req.method == "GET":
                with self.lock:
                    result = self.stats.as_json()
                    result["rules"] = [r.describe(now) for r in self.rules]
            elif path == "/_faultproxy/stats/reset" and req.method == "POST":
                with self.lock:
                    self.stats.reset()
                result = {"reset": True}
            elif path == "/_faultproxy/events" and req.method == "GET":
                since = float(urllib.parse.parse_qs(query).get("since", ["0"])[0])
                with self.lock:
                    result = [e for e in self.stats.events if e["t"] >= since]
            else:
                code, result = 404, {"error": f"no control endpoint {req.method} {path}"}
        except (ValueError, re.error) as e:  # RuleError, bad JSON, bad regex, bad number
            code, result = 400, {"error": str(e)}
        body = json.dumps(result).encode()
        self._send(conn, code, http.client.responses[code],
                   [("Content-Type", "application/json")], body, head=False)
        return True


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--listen", required=True, help="loopback HOST:PORT (PORT 0: any free)")
    parser.add_argument("--upstream", required=True, help="loopback HOST:PORT of the S3 store")
    parser.add_argument("--seed", type=int, default=0, help="seed of the probability RNG")
    args = parser.parse_args()
    try:
        proxy = FaultProxy(args.listen, args.upstream, args.seed)
    except ValueError as e:
        parser.error(str(e))
    port = proxy.start()
    print(f"faultproxy listening on {proxy.listen[0]}:{port}", flush=True)
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    while not done.wait(0.5):
        pass
    proxy.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
