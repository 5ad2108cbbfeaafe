"""Object-storage outages, end to end: `dex-server-zd serve` -> faultproxy -> real MinIO.

The spec (high-availability.md, "Lease") says which outages a node rides out and which stop it;
docs/lease.md §4 gives the figures. With lease.duration = 6 s (LEASE_S):

    renewal after duration/3 = 2 s from the period start (the send of the last good renewal)
    attempt cut-off duration/6 clamped to [1 s, 5 s] = 1 s, while another attempt still fits
    renewal cutoff = period end - 100 ms = 5.9 s after the period start
    backoff 100 ms doubling to at most 1 s (equal jitter)
    a log write not accepted within 10 s of its first attempt stops the node (any duration)

Each case is built so that its outcome follows from those rules, and asserts what can be seen
from outside: exit codes and messages, the epoch (dexcli admin describe and the lease record read
straight from MinIO), flows that start and complete during the fault, and the proxy's own record
of the faults it applied (a case whose fault never fired fails). Every wait is bounded.
"""
import json
import os
import sys
import threading
import time
import urllib.request
import uuid

import pytest

from conftest import ACCESS, SECRET, Proc, binary, closed_flows, flow_worker, run
from test_recovery import check_recovery_rules, start_e2e, summarize

FAULTPROXY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../tools/faultproxy.py")
NODE = "node-o"
LEASE_S = 6.0
RENEW_S = LEASE_S / 3                           # 2 s
ATTEMPT_CUTOFF_S = min(max(LEASE_S / 6, 1), 5)  # 1 s
RENEWAL_CUTOFF_S = LEASE_S - 0.1                # 5.9 s after the period start
BACKOFF_MAX_S = 1.0
LOG_WRITE_LIMIT_S = 10.0
LEASE_KEY = rf"/nodes/{NODE}/lease$"
LOG_KEY = rf"/nodes/{NODE}/log/\d+$"
# Slack for process start/exit, dexcli round trips and a loaded 2-core machine (the outage tests
# run in parallel with the rest of the e2e suite).
SLACK_S = 1.5


# ---------------------------------------------------------------------------- fixtures and helpers

class FaultProxy:
    def __init__(self, procs, upstream):
        self.proc = procs(sys.executable, FAULTPROXY, "--listen", "127.0.0.1:0", "--upstream",
                          upstream.removeprefix("http://"), "--seed", "1")
        line = self.proc.wait_for_line("faultproxy listening on", 15)
        self.endpoint = "http://" + line.rsplit(" ", 1)[1]

    def _call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"{self.endpoint}/_faultproxy/{path}", data=data,
                                     method=method)
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())

    def rules(self, *rules):
        return self._call("POST", "rules", list(rules))

    def clear(self):
        return self._call("DELETE", "rules")

    def stats(self):
        return self._call("GET", "stats")

    def events(self, since=0.0):
        return self._call("GET", f"events?since={since}")


def decode_lease(body):
    """The LeaseRecord in a DXLS frame (docs/lease.md §1), decoded by hand: no protobuf needed."""
    assert body[:4] == b"DXLS", body[:16]
    length = int.from_bytes(body[5:9], "little")
    payload, i, out = body[13:13 + length], 0, {}
    names = {1: "node_id", 2: "epoch", 3: "holder", 4: "duration_ms", 5: "renewal_count",
             6: "released", 7: "write_id"}

    def varint():
        nonlocal i
        value, shift = 0, 0
        while True:
            b = payload[i]
            i += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return value

    while i < len(payload):
        key = varint()
        field, wire = key >> 3, key & 7
        if wire == 0:
            out[names.get(field, field)] = varint()
        elif wire == 2:
            n = varint()
            out[names.get(field, field)] = payload[i:i + n].decode()
            i += n
        else:
            raise AssertionError(f"unexpected wire type {wire}")
    out.setdefault("epoch", 0)
    out.setdefault("renewal_count", 0)
    return out


class Node:
    """One `serve` node whose object store is MinIO behind the proxy, with a
    `dex-flow-examples worker` running its E2EThreeSteps flows."""

    def __init__(self, procs, tmp_path, minio, proxy):
        import boto3
        self.procs, self.proxy = procs, proxy
        self.prefix = f"o-{uuid.uuid4().hex[:8]}"
        self.s3 = boto3.client("s3", endpoint_url=minio, aws_access_key_id=ACCESS,
                               aws_secret_access_key=SECRET, region_name="us-east-1")
        self.config = tmp_path / "node.yaml"
        self.config.write_text(
            f"nodeId: {NODE}\napi:\n  listen: 127.0.0.1:0\n"
            f"objectStore:\n  type: s3\n  bucket: dex\n  prefix: {self.prefix}\n"
            f"  endpoint: {proxy.endpoint}\n"
            f"localStore:\n  path: {tmp_path / 'local'}\nlease:\n  duration: {LEASE_S:g}s\n")
        env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS, AWS_SECRET_ACCESS_KEY=SECRET)
        self.proc = Proc([binary("dex-server-zd"), "serve", "--config", str(self.config)], env=env)
        procs.register(self.proc)
        line = self.proc.wait_for_line("dex-server-zd serve ready", 60)
        self.epoch = int(line.split(" epoch ", 1)[1].split()[0])
        self.address = line.split(" listening on ", 1)[1].split()[0]
        self.worker = flow_worker(procs, self.address, "--concurrency", "16", "--work-time", "20ms")

    def cli(self, *args, call_timeout="10s", timeout=60):
        return run(binary("dexcli"), "--server", self.address, "--timeout", call_timeout, *args,
                   timeout=timeout)

    def described_epoch(self):
        r = self.cli("admin", "describe")
        assert r.returncode == 0, r.stderr
        return int(json.loads(r.stdout)["nodeEpoch"])

    def lease(self):
        got = self.s3.get_object(Bucket="dex", Key=f"{self.prefix}/nodes/{NODE}/lease")
        return decode_lease(got["Body"].read())

    def alive(self):
        return self.proc.p.poll() is None

    def wait_exit(self, timeout):
        """Returns (exit code, unix time of the exit)."""
        rc = self.proc.p.wait(timeout=timeout)
        t = time.time()
        self.proc.drain()
        return rc, t

    def start_flow(self, flow_id):
        return start_e2e(self.address, flow_id)

    def assert_flows_complete(self, ids, timeout=60):
        flows = closed_flows(self.address, ids, timeout)
        problems = check_recovery_rules(flows, set(ids), server_died=False)
        assert not problems, "\n".join(problems[:20])
        return summarize(flows)


@pytest.fixture
def node(procs, tmp_path, minio):
    proxy = FaultProxy(procs, minio)
    return Node(procs, tmp_path, minio, proxy)


class Prober:
    """Starts a flow, waits for it to complete, and repeats, on `lanes` threads, recording the
    unix times of each start, its acknowledgement and its completion."""

    def __init__(self, node, name, lanes=2):
        self.node, self.name = node, name
        self.results = []  # dicts: id, t_start, t_ack, t_done, status
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._lane, args=(k,), daemon=True)
                         for k in range(lanes)]
        for t in self._threads:
            t.start()

    def _lane(self, k):
        i = 0
        while not self._stop.is_set():
            flow_id = f"{self.name}-{k}-{i:03d}"
            i += 1
            t_start = time.time()
            r = self.node.start_flow(flow_id)
            t_ack = time.time()
            rec = {"id": flow_id, "t_start": t_start, "t_ack": t_ack, "t_done": None,
                   "status": None, "start_rc": r.returncode, "start_err": r.stderr.strip()}
            if r.returncode == 0:
                w = self.node.cli("flow", "wait", flow_id, "--wait-timeout", "30s")
                rec["t_done"] = time.time()
                rec["status"] = (json.loads(w.stdout)["status"] if w.returncode == 0
                                 else w.stderr.strip())
            with self._lock:
                self.results.append(rec)
            if r.returncode != 0:
                time.sleep(0.1)

    def stop(self):
        self._stop.set()
        for t in self._threads:
            t.join(timeout=60)
            assert not t.is_alive(), "a prober lane did not finish"
        return self.results

    def acknowledged(self):
        return [r["id"] for r in self.results if r["start_rc"] == 0]


def applied(proxy, cls, method, action):
    """How often the proxy's stats say it applied `action` to `method` requests of `cls` keys."""
    return proxy.stats()["detail"].get(cls, {}).get(method, {}).get(action, 0)


def lease_puts(events):
    return [e for e in events if e["class"] == "lease" and e["method"] == "PUT"]


def first_after(events, t, pred):
    return next((e for e in events if e["t"] > t and pred(e)), None)


def ok(e):
    return e["action"] == "forwarded" and e["upstream_status"] == 200


def wait_for_event(proxy, since, pred, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        hit = next((e for e in proxy.events(since) if pred(e)), None)
        if hit:
            return hit
        time.sleep(0.05)
    raise AssertionError(f"no matching proxy event within {timeout}s")


def report(text):
    print(f"\n[outage] {text}")


# ---------------------------------------------------------------------------- lease renewal faults

def test_lease_put_503_for_less_than_the_renewal_slack_is_ridden_out(node):
    """Transient 5xx/throttling on renewals are retried after a backoff while the backoff ends
    before the renewal cutoff: 2 s of 503 SlowDown from the first renewal attempt it hits leaves
    the last retry at most 2 s + 1 s (max backoff) after the renewal started, before the cutoff at
    3.9 s. The lease stays valid meanwhile, so the node keeps serving."""
    before = node.lease()
    t0 = time.time()
    node.proxy.rules({"fault": "status", "status": 503, "method": "PUT", "key": LEASE_KEY,
                      "for_seconds": 2.0, "window_from": "first_match"})
    prober = Prober(node, "a")
    first = wait_for_event(node.proxy, t0, lambda e: e["action"] == "status", RENEW_S + SLACK_S)
    recovered = wait_for_event(node.proxy, first["t"],
                               lambda e: e["class"] == "lease" and e["method"] == "PUT" and ok(e),
                               RENEWAL_CUTOFF_S + SLACK_S)
    time.sleep(RENEW_S + 0.5)  # one more renewal after the outage
    results = prober.stop()

    assert node.alive(), node.proc.output()
    faulted = [e for e in lease_puts(node.proxy.events(t0)) if e["action"] == "status"]
    assert len(faulted) >= 3, faulted  # retried with backoff, not given up
    assert applied(node.proxy, "lease", "PUT", "status") == len(faulted)
    rode_out = recovered["t"] - first["t"]
    assert 2.0 <= rode_out <= 2.0 + BACKOFF_MAX_S + 0.5, rode_out
    # Same holder, same epoch, renewals continued.
    after = node.lease()
    assert (after["epoch"], after["holder"]) == (before["epoch"], before["holder"])
    assert after["renewal_count"] >= before["renewal_count"] + 2
    assert node.described_epoch() == node.epoch == after["epoch"]
    # Flows started and completed while the renewal was being retried.
    during = [r for r in results if r["t_start"] >= first["t"] and r["t_done"]
              and r["t_done"] <= recovered["t"] and r["status"] == "COMPLETED"]
    assert during, results
    outcomes = node.assert_flows_complete(prober.acknowledged())
    report(f"lease 503 x{len(faulted)}: rode out {rode_out:.2f}s of failed renewals; "
           f"{len(during)} flows started and completed meanwhile; completed at attempts {outcomes}")


def test_lease_put_stalled_past_the_attempt_cutoff_is_ridden_out_by_a_later_attempt(node):
    """While another attempt fits, an attempt is cut off after duration/6 = 1 s. Two stalled
    renewal PUTs (4 s each: longer than the cut-off, shorter than the lease) are each cut off
    after 1 s; the third attempt, about 2 s after the renewal started and before the 3.9 s
    cutoff, succeeds."""
    before = node.lease()
    t0 = time.time()
    node.proxy.rules({"fault": "stall", "seconds": 4, "method": "PUT", "key": LEASE_KEY,
                      "count": 2})
    prober = Prober(node, "b")
    first = wait_for_event(node.proxy, t0, lambda e: e["action"] == "stall", RENEW_S + SLACK_S)
    recovered = wait_for_event(node.proxy, first["t"],
                               lambda e: e["class"] == "lease" and e["method"] == "PUT" and ok(e),
                               RENEWAL_CUTOFF_S + SLACK_S)
    time.sleep(RENEW_S + 0.5)
    results = prober.stop()

    assert node.alive(), node.proc.output()
    puts = lease_puts(node.proxy.events(t0))
    stalls = [e for e in puts if e["action"] == "stall"]
    assert len(stalls) == 2, puts
    assert applied(node.proxy, "lease", "PUT", "stall") == 2
    # Each stalled attempt was given up after the 1 s cut-off, not after the 4 s stall.
    second_gap = stalls[1]["t"] - stalls[0]["t"]
    assert ATTEMPT_CUTOFF_S <= second_gap <= ATTEMPT_CUTOFF_S + 0.5, second_gap
    rode_out = recovered["t"] - first["t"]
    assert 2 * ATTEMPT_CUTOFF_S <= rode_out <= 2 * ATTEMPT_CUTOFF_S + 1.0, rode_out
    after = node.lease()
    assert (after["epoch"], after["holder"]) == (before["epoch"], before["holder"])
    assert after["renewal_count"] >= before["renewal_count"] + 2
    assert node.described_epoch() == node.epoch
    during = [r for r in results if r["t_start"] >= first["t"] and r["t_done"]
              and r["t_done"] <= recovered["t"] and r["status"] == "COMPLETED"]
    assert during, results
    outcomes = node.assert_flows_complete(prober.acknowledged())
    report(f"lease stall x2: attempts cut off {second_gap:.2f}s apart; rode out {rode_out:.2f}s; "
           f"{len(during)} flows completed meanwhile; completed at attempts {outcomes}")


def test_lease_renewal_whose_answer_is_lost_after_it_landed_is_adopted(node):
    """A renewal write that landed although its answer was lost counts if a later attempt finds
    it: the retry's conditional PUT fails 412 (the ETag moved), the node reads the lease, sees its
    own write of this renewal and adopts it.

    The proxy drops two answers: the landed renewal's, and the next PUT's (a 412). libcurl
    re-sends a request once on a fresh connection when a reused connection dies without an
    answer, so the second PUT is libcurl's own; its answer lost too, the keeper gets a transient
    error and retries after a backoff. Either way the keeper's retry is the third PUT: 412, read,
    adopt."""
    before = node.lease()
    t0 = time.time()
    node.proxy.rules({"fault": "drop_response", "method": "PUT", "key": LEASE_KEY, "count": 2})
    dropped = wait_for_event(node.proxy, t0, lambda e: e["action"] == "drop_response",
                             RENEW_S + SLACK_S)
    # The next renewal after adoption proves the node carried on from the adopted version.
    wait_for_event(node.proxy, dropped["t"] + 1.0,
                   lambda e: e["class"] == "lease" and e["method"] == "PUT" and ok(e),
                   RENEW_S + SLACK_S)
    ids = [f"c-{i}" for i in range(10)]
    for i in ids:
        r = node.start_flow(i)
        assert r.returncode == 0, r.stderr

    assert node.alive(), node.proc.output()
    lease_events = sorted((e for e in node.proxy.events(dropped["t"]) if e["class"] == "lease"),
                          key=lambda e: e["t"])
    steps = [(e["method"], e["action"], e["upstream_status"]) for e in lease_events[:5]]
    assert steps == [("PUT", "drop_response", 200),     # the renewal landed; answer lost
                     ("PUT", "drop_response", 412),     # re-sent: ETag moved; answer lost
                     ("PUT", "forwarded", 412),         # the keeper's retry after a backoff
                     ("GET", "forwarded", 200),         # read: our own write of this renewal
                     ("PUT", "forwarded", 200)], lease_events  # the next renewal, from it
    assert applied(node.proxy, "lease", "PUT", "drop_response") == 2
    backoff = lease_events[2]["t"] - lease_events[1]["t"]
    assert backoff >= 0.04, backoff  # 100 ms initial backoff, equal jitter: at least 50 ms
    after = node.lease()
    assert (after["epoch"], after["holder"]) == (before["epoch"], before["holder"])
    assert after["renewal_count"] >= before["renewal_count"] + 2
    assert node.described_epoch() == node.epoch
    outcomes = node.assert_flows_complete(ids)
    report(f"lease lost answers: re-sent after {lease_events[1]['t'] - dropped['t']:.3f}s, "
           f"keeper retry after a {backoff:.3f}s backoff, adopted "
           f"{lease_events[3]['t'] - dropped['t']:.2f}s after the drop; "
           f"completed at attempts {outcomes}")


def test_lease_renewal_landing_after_its_cutoff_is_adopted_by_the_next_attempt(node):
    """A renewal write that lands after its attempt was cut off still counts if a later attempt
    finds it. The proxy holds the first renewal PUT 1.2 s before forwarding it (the keeper cuts
    the attempt off at 1 s, the write lands at 1.2 s) and the retry 0.5 s (it reaches MinIO
    after the late write): the retry fails 412, the read shows this renewal's own late write, and
    the node adopts it, well before the renewal cutoff, and carries on."""
    before = node.lease()
    t0 = time.time()
    node.proxy.rules(
        {"fault": "delay", "seconds": 1.2, "method": "PUT", "key": LEASE_KEY, "count": 1},
        {"fault": "delay", "seconds": 0.5, "method": "PUT", "key": LEASE_KEY, "count": 1})
    late = wait_for_event(node.proxy, t0, lambda e: e["action"] == "delay", RENEW_S + SLACK_S)
    wait_for_event(node.proxy, late["t"] + 1.5,
                   lambda e: e["class"] == "lease" and e["method"] == "PUT" and ok(e),
                   RENEW_S + SLACK_S)
    assert node.alive(), node.proc.output()
    lease_events = sorted((e for e in node.proxy.events(late["t"]) if e["class"] == "lease"),
                          key=lambda e: e["t"])
    steps = [(e["method"], e["action"], e["upstream_status"]) for e in lease_events[:4]]
    assert steps == [("PUT", "delay", 200), ("PUT", "delay", 412), ("GET", "forwarded", 200),
                     ("PUT", "forwarded", 200)], lease_events
    assert applied(node.proxy, "lease", "PUT", "delay") == 2
    cut_off_after = lease_events[1]["t"] - late["t"]
    assert ATTEMPT_CUTOFF_S <= cut_off_after < 1.2, cut_off_after  # retried before it landed
    after = node.lease()
    assert (after["epoch"], after["holder"]) == (before["epoch"], before["holder"])
    assert after["renewal_count"] >= before["renewal_count"] + 2
    assert node.described_epoch() == node.epoch
    ids = [f"c2-{i}" for i in range(5)]
    for i in ids:
        assert node.start_flow(i).returncode == 0
    outcomes = node.assert_flows_complete(ids)
    report(f"lease late landing: attempt cut off and retried after {cut_off_after:.2f}s, the late "
           f"write adopted {lease_events[2]['t'] - late['t']:.2f}s after its send; "
           f"completed at attempts {outcomes}")


@pytest.mark.parametrize("fault", ["status", "stall"])
def test_lease_puts_failing_longer_than_the_lease_stop_the_node_with_exit_1(node, fault):
    """When no retry fits before the renewal cutoff (100 ms before the period ends), the node
    stops and exits 1. Measured from the send of the last good renewal (the period start P):
    with fast 503s it stops once the next backoff would pass P + 5.9 s, so within [P + 4.9 s,
    P + 5.9 s]; with stalls the last attempt runs to the cutoff P + 5.9 s itself."""
    rule = {"fault": fault, "method": "PUT", "key": LEASE_KEY}
    if fault == "stall":
        rule["seconds"] = 60
    t0 = time.time()
    node.proxy.rules(rule)
    rc, t_exit = node.wait_exit(LEASE_S + RENEW_S + 10)
    out = node.proc.output()
    assert rc == 1, out
    puts = lease_puts(node.proxy.events(t0 - RENEW_S - 1))
    good = [e for e in puts if ok(e) and e["t"] < t0 + 0.5]
    faulted = [e for e in puts if e["action"] == fault]
    assert good and faulted, puts
    assert applied(node.proxy, "lease", "PUT", fault) == len(faulted)
    period_start = good[-1]["t"]
    stopped_after = t_exit - period_start
    low = RENEWAL_CUTOFF_S - (BACKOFF_MAX_S if fault == "status" else 0) - 0.2
    assert low <= stopped_after <= RENEWAL_CUTOFF_S + SLACK_S, (stopped_after, puts)
    if fault == "stall":
        # Cut off after 1 s while another attempt fits, then a last attempt up to the cutoff.
        assert len(faulted) >= 2, faulted
    else:
        assert len(faulted) >= 4, faulted
    assert "lease lost" in out and "no retry fits before the renewal cutoff" in out, out
    assert ("SlowDown" if fault == "status" else "timed out") in out, out
    assert f"stopping node {NODE}" in out, out
    report(f"lease {fault} forever: {len(faulted)} failed attempts; exit 1 "
           f"{stopped_after:.2f}s after the last good renewal was sent "
           f"({t_exit - faulted[0]['t']:.2f}s after the first failed one)\n  "
           + next(line for line in node.proc.lines if "stopping node" in line))


# ---------------------------------------------------------------------------- log write faults

@pytest.mark.parametrize("fault", ["status", "stall"])
def test_log_writes_failing_for_more_than_10s_stop_the_node_with_exit_1(node, fault):
    """A log write that object storage does not accept within 10 s of its first attempt stops
    the node (whatever the lease duration: here the lease is renewed throughout). A stalled request
    gets the time left until the limit as its timeout, so a hang cannot outlive it either."""
    rule = {"fault": fault, "method": "PUT", "key": LOG_KEY}
    if fault == "stall":
        rule["seconds"] = 60
    t0 = time.time()
    node.proxy.rules(rule)
    starter = {}
    threading.Thread(target=lambda: starter.update(r=node.start_flow("e-blocked")),
                     daemon=True).start()
    first = wait_for_event(node.proxy, t0, lambda e: e["action"] == fault, 5)
    rc, t_exit = node.wait_exit(LOG_WRITE_LIMIT_S + 15)
    out = node.proc.output()
    assert rc == 1, out
    stopped_after = t_exit - first["t"]
    assert LOG_WRITE_LIMIT_S - 0.2 <= stopped_after <= LOG_WRITE_LIMIT_S + SLACK_S, stopped_after
    events = node.proxy.events(t0)
    log_puts = [e for e in events if e["class"] == "log" and e["method"] == "PUT"]
    assert log_puts and all(e["action"] == fault for e in log_puts), log_puts
    assert len({e["target"] for e in log_puts}) == 1  # one batch, one slot, retried
    assert applied(node.proxy, "log", "PUT", fault) == len(log_puts)
    # The lease was fine all along: renewals kept succeeding while the log write failed.
    renewals = [e for e in lease_puts(events) if ok(e) and first["t"] < e["t"] < t_exit]
    assert len(renewals) >= int(LOG_WRITE_LIMIT_S / RENEW_S) - 1, renewals
    assert "log stopped" in out and "within 10 s" in out and "log write limit" in out, out
    assert f"nodes/{NODE}/log/" in out, out  # names the slot
    assert ("SlowDown" if fault == "status" else "timed out") in out, out
    # The flow whose start was being written was never acknowledged.
    deadline = time.monotonic() + 15
    while "r" not in starter and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "r" in starter and starter["r"].returncode != 0, starter
    slot = log_puts[0]["target"].rsplit("/", 1)[1]
    report(f"log {fault} forever: {len(log_puts)} attempts on slot {slot}; "
           f"exit 1 {stopped_after:.2f}s after the first; {len(renewals)} renewals meanwhile\n  "
           + next(line for line in node.proc.lines if "stopping node" in line))


def test_log_write_503_for_3s_is_ridden_out_and_flows_complete(node):
    """3 s of 503 on every log write is well inside the 10 s limit: the writer retries, the
    blocked batch lands once the store answers, and flows started before and during the outage
    complete. Their starts are acknowledged only after the outage (acknowledged = durable)."""
    before_ids = [f"e3-pre-{i}" for i in range(10)]
    for i in before_ids:
        r = node.start_flow(i)
        assert r.returncode == 0, r.stderr
    t0 = time.time()
    node.proxy.rules({"fault": "status", "status": 503, "method": "PUT", "key": LOG_KEY,
                      "for_seconds": 3.0, "window_from": "first_match"})
    prober = Prober(node, "e3")
    first = wait_for_event(node.proxy, t0, lambda e: e["action"] == "status", 5)
    recovered = wait_for_event(node.proxy, first["t"],
                               lambda e: e["class"] == "log" and e["method"] == "PUT" and ok(e),
                               LOG_WRITE_LIMIT_S)
    time.sleep(1.0)
    results = prober.stop()

    assert node.alive(), node.proc.output()
    rode_out = recovered["t"] - first["t"]
    assert 3.0 <= rode_out <= 3.0 + SLACK_S, rode_out
    faulted = [e for e in node.proxy.events(t0) if e["class"] == "log" and e["action"] == "status"]
    assert len(faulted) >= 3, faulted
    assert len({e["target"] for e in faulted}) == 1  # one batch retried at its slot
    assert applied(node.proxy, "log", "PUT", "status") == len(faulted)
    # Starts made during the outage were held until their batch was durable (the first of them
    # may be the one whose batch met the outage first, so it can start just before `first`).
    held = [r for r in results if r["start_rc"] == 0 and t0 <= r["t_start"] < recovered["t"]
            and r["t_ack"] >= recovered["t"]]
    assert held, results
    assert node.described_epoch() == node.epoch
    outcomes = node.assert_flows_complete(before_ids + prober.acknowledged())
    longest = max(r["t_ack"] - r["t_start"] for r in held)
    report(f"log 503 for 3s: {len(faulted)} failed attempts, batch landed {rode_out:.2f}s after "
           f"the first; {len(held)} starts held (longest {longest:.2f}s); "
           f"completed at attempts {outcomes}")


def test_log_write_whose_answer_is_lost_after_it_landed_is_adopted(node):
    """docs/log.md "Ambiguous success": the retry of a batch that landed fails 412 at its slot;
    the writer reads the slot, finds its own write_id and acknowledges the batch. Two answers are
    dropped, as in the lease case, so that the writer's own retry (not libcurl's re-send) meets
    the 412."""
    t0 = time.time()
    node.proxy.rules({"fault": "drop_response", "method": "PUT", "key": LOG_KEY, "count": 2})
    r = node.start_flow("f-adopted")
    assert r.returncode == 0, r.stderr
    events = sorted(node.proxy.events(t0), key=lambda e: e["t"])
    dropped = next(e for e in events if e["action"] == "drop_response")
    same_slot = [(e["method"], e["action"], e["upstream_status"]) for e in events
                 if e["target"] == dropped["target"]]
    assert same_slot == [("PUT", "drop_response", 200), ("PUT", "drop_response", 412),
                         ("PUT", "forwarded", 412), ("GET", "forwarded", 200)], same_slot
    assert applied(node.proxy, "log", "PUT", "drop_response") == 2
    assert node.alive() and node.described_epoch() == node.epoch
    outcomes = node.assert_flows_complete(["f-adopted"])
    report(f"log lost answer: batch adopted at slot {dropped['target'].rsplit('/', 1)[1]}; "
           f"completed at attempts {outcomes}")
