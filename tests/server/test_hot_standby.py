"""Hot standby (spec: Hot standby): two `dex-server-zd serve` processes in hot mode, a worker and
clients that give both addresses, steady load of E2EThreeSteps dex Flows. The core scenario runs on both object stores, a
filesystem directory and a real MinIO (which must be installed: its absence fails the test).

- the standby follows: dexzd_hot_standby_state{state="following"} is 1 on it, dex.HotStandby
  SERVING; the active process reports NOT_SERVING for dex.HotStandby;
- the standby only reads object storage: its put and remove request counters stay 0 while it
  follows a loaded active, and its get counter grows;
- SIGTERM of the active: the standby serves within about one heldLeasePollInterval (plus its
  engine open), replaying only the few batches it had not applied;
- SIGKILL of the active: the standby waits for expiry + 1 s, then takes over with a short replay;
- every flow whose start was acknowledged completes, by the spec's recovery rules (read from
  each flow's history: test_recovery.check_recovery_rules).
"""
import json
import re
import signal
import threading
import time
import urllib.request

import pytest

from conftest import (STORES, Proc, binary, closed_flows, flow_worker, free_port, log_time,
                      object_store_requests, run)
from test_recovery import check_recovery_rules, start_e2e, summarize

LEASE_S = 3
POLL_S = 0.25  # standby.heldLeasePollInterval (the default, set explicitly below)
READY = re.compile(r"dex-server-zd serve ready: node \S+ epoch (\d+)")
TOOK_OVER = re.compile(r"took over as the active process: (\d+) log slots replayed after following, "
                       r"engine open (\d+) ms, lease to serving (\d+) ms")


class HotNode:
    def __init__(self, procs, tmp_path, store, name, mode="hot", ports=None):
        # A restarted process keeps its name's ports, as a pod keeps its address.
        self.api_port, self.metrics_port = ports or (free_port(), free_port())
        self.config = tmp_path / f"{name}.yaml"
        self.config.write_text(
            f"nodeId: node-h\napi:\n  listen: 127.0.0.1:{self.api_port}\n"
            f"metrics:\n  listen: 127.0.0.1:{self.metrics_port}\n" + store.yaml +
            f"localStore:\n  path: {tmp_path / name}-local\nlease:\n  duration: {LEASE_S}s\n"
            f"standby:\n  mode: {mode}\n  heldLeasePollInterval: {int(POLL_S * 1000)}ms\n")
        self.procs, self.name, self.proc, self.store = procs, name, None, store
        self.address = f"127.0.0.1:{self.api_port}"

    def start(self):
        self.proc = Proc([binary("dex-server-zd"), "serve", "--config", str(self.config)],
                         env=self.store.env)
        self.procs.register(self.proc)
        self.proc.wait_for_line("API on", 30)
        return self

    def wait_ready(self, timeout):
        return int(READY.search(self.proc.wait_for_line("dex-server-zd serve ready", timeout)).group(1))

    def metrics_text(self):
        return urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics",
                                      timeout=5).read().decode()

    def requests(self):
        """Object-store requests this process sent, by operation (every outcome)."""
        return object_store_requests(self.metrics_text())

    def metric(self, name, labels=""):
        text = self.metrics_text()
        for line in text.splitlines():
            if line.startswith(name + labels + " ") or (not labels and line.startswith(name + " ")):
                return float(line.split()[-1])
        raise AssertionError(f"{name}{labels} not in /metrics")

    def wait_following(self, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if self.metric("dexzd_hot_standby_state", '{state="following"}') == 1:
                    return
            except (OSError, AssertionError):
                pass
            time.sleep(0.2)
        raise AssertionError(f"{self.name} never followed:\n" + self.proc.output())

    def health(self, service):
        """The process's health for `service`, as a probe sees it. A role change rebuilds the
        process's gRPC server on the same port (docs/standby.md, "Connections"), so a connection
        refused in that moment is asked again, for up to 3 s; any answer is returned as it is."""
        deadline = time.monotonic() + 3
        while True:
            r = run(binary("dexcli"), "--server", self.address, "--timeout", "5s", "health",
                    "--service", service)
            if r.stdout or "Connection refused" not in r.stderr or time.monotonic() >= deadline:
                return json.loads(r.stdout)["status"] if r.stdout else r.stderr
            time.sleep(0.1)


@pytest.fixture
def nodes(procs, tmp_path, store):
    ports = {}

    def make(name, mode="hot"):
        node = HotNode(procs, tmp_path, store, name, mode, ports.get(name))
        ports[name] = (node.api_port, node.metrics_port)
        return node

    return make


class Load:
    """Closed-loop clients starting flows with known IDs through every address."""

    def __init__(self, servers, clients=4):
        self.servers, self.acknowledged, self.stop = servers, set(), threading.Event()
        # Daemon threads: a failing test must not leave pytest waiting for them.
        self.threads = [threading.Thread(target=self.run, args=(c,), daemon=True)
                        for c in range(clients)]
        for t in self.threads:
            t.start()

    def run(self, c):
        i = 0
        deadline = time.monotonic() + 600
        while not self.stop.is_set() and i < 2000 and time.monotonic() < deadline:
            flow_id = f"c{c}-{i:04d}"
            r = start_e2e(self.servers, flow_id, timeout="30s")
            if r.returncode == 0:
                self.acknowledged.add(flow_id)
                i += 1
            time.sleep(0.05)

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(90)


def wait_flows(servers, ids, timeout=180):
    """closed_flows() of every flow in `ids` (each one found and closed, else a failure)."""
    flows = closed_flows(servers, ids, timeout)
    open_or_lost = [i for i in ids if flows.get(i, {}).get("status", "RUNNING") == "RUNNING"]
    assert not open_or_lost, (f"flows did not end in time or were not found: "
                              f"{len(open_or_lost)}, e.g. {sorted(open_or_lost)[:5]}")
    return flows


def assert_only_reads(standby, active, seconds):
    """Spec: "A hot standby only reads object storage." Over `seconds` of the active's traffic,
    the standby sends no put and no remove (whatever their outcome, a refused conditional write
    included), while its gets grow (lease polls every heldLeasePollInterval, log batches)."""
    s0, a0 = standby.requests(), active.requests()
    time.sleep(seconds)
    s1, a1 = standby.requests(), active.requests()
    assert a1.get("put", 0) > a0.get("put", 0), f"the active wrote nothing: {a0} -> {a1}"
    writes = {op: s1.get(op, 0) for op in ("put", "remove")}
    assert writes == {"put": 0, "remove": 0}, f"{standby.name} (hot standby) wrote: {s1}"
    polls = seconds / POLL_S
    assert s1.get("get", 0) - s0.get("get", 0) >= polls / 2, f"{standby.name} read too little: {s0} -> {s1}"
    return s1


def takeover_line(node, timeout=5):
    """The new active's "took over" line: (its log time, slots replayed, engine open ms,
    lease-to-serving ms). It is logged once the API serves, just before the ready line."""
    line = node.proc.wait_for_line("took over as the active process", timeout)
    m = TOOK_OVER.search(line)
    return log_time(line), int(m.group(1)), int(m.group(2)), int(m.group(3))


@pytest.mark.parametrize("store", STORES, indirect=True)
def test_hot_standby_follows_and_takes_over_on_sigterm_and_after_sigkill(nodes, procs):
    a = nodes("a").start()
    assert a.wait_ready(60) == 1
    b = nodes("b").start()
    b.wait_following()
    servers = [a.address, b.address]
    # Health: the standby is hot; the active process is never a hot standby.
    assert b.health("dex.HotStandby") == "SERVING"
    assert b.health("") == "NOT_SERVING"
    assert a.health("dex.HotStandby") == "NOT_SERVING"
    assert a.health("") == "SERVING"
    assert a.metric("dexzd_hot_standby_state", '{state="following"}') == 0
    assert a.metric("dexzd_active") == 1

    flow_worker(procs, servers, "--concurrency", "16", "--work-time", "20ms")
    load = Load(servers)
    assert_only_reads(b, a, 3)

    # Graceful: the active releases; the hot standby takes it within about one poll
    # (heldLeasePollInterval + 0-50 ms + its engine open): at most 1 s from the release.
    a.proc.signal(signal.SIGTERM)
    assert b.wait_ready(30) == 2
    assert a.proc.wait_exit(30) == 0, a.proc.output()
    # The release: its own line if the shutdown logs one, else the signal's (the release
    # follows it at once when no attempt is left to drain).
    released = [l for l in a.proc.lines if "released the lease" in l]
    release_line = released[0] if released else a.proc.wait_for_line("received SIGTERM", 1)
    serving_at, replayed_sigterm, _, _ = takeover_line(b)
    sigterm_takeover = serving_at - log_time(release_line)
    assert sigterm_takeover <= 1.0, f"release to serving {sigterm_takeover:.3f}s"
    # The last few batches, not the log: those written since the follower's last poll (one
    # heldLeasePollInterval, 250 ms) and during the drain; 14-30 seen at this load.
    assert replayed_sigterm <= 60, replayed_sigterm
    # The follower handed its open local store to the engine (no close and reopen).
    assert "local store" in b.proc.output() and "handed over open by the hot standby" in \
        b.proc.output(), b.proc.output()

    # The first process comes back as the new hot standby, and it too only reads.
    a2 = nodes("a").start()
    a2.wait_following()
    assert_only_reads(a2, b, 3)

    # Crash: the standby still waits for the old lease's expiry + 1 s. It saw the last renewal
    # (every LEASE_S/3) at most one poll after it landed, so it takes the lease between
    # LEASE_S + 1 - LEASE_S/3 and LEASE_S + 1 + one poll after the kill; then a short replay.
    b.proc.signal(signal.SIGKILL)
    killed_at = time.time()
    assert a2.wait_ready(LEASE_S + 1 + 20) == 3
    serving_at, replayed_sigkill, open_ms, serving_ms = takeover_line(a2)
    sigkill_takeover = serving_at - killed_at
    lease_taken = sigkill_takeover - serving_ms / 1000
    assert LEASE_S + 1 - LEASE_S / 3 - 0.1 <= lease_taken <= LEASE_S + 1 + POLL_S + 0.3, \
        f"lease taken {lease_taken:.2f}s after the kill"
    assert serving_ms <= 1000, f"lease to serving {serving_ms} ms"  # the hot standby's short replay
    assert replayed_sigkill <= 20, replayed_sigkill

    time.sleep(2)
    load.finish()
    flows = wait_flows(servers, load.acknowledged)
    problems = check_recovery_rules(flows, load.acknowledged, server_died=True)
    print(f"\n[hot {a.store}] SIGTERM: release to serving {sigterm_takeover:.3f}s "
          f"({replayed_sigterm} slots replayed); SIGKILL: lease taken {lease_taken:.2f}s, serving "
          f"{sigkill_takeover:.2f}s after the kill ({replayed_sigkill} slots, engine open {open_ms} ms); "
          f"{len(load.acknowledged)} flows acknowledged; outcomes {summarize(flows)}")
    assert load.acknowledged and not problems, "\n".join(problems[:20])


@pytest.mark.parametrize("store", ["filesystem"], indirect=True)
def test_a_cold_standby_is_never_hot(nodes):
    a = nodes("a", mode="cold").start()
    a.wait_ready(60)
    cold = nodes("cold", mode="cold").start()
    time.sleep(1)
    assert cold.health("dex.HotStandby") == "NOT_SERVING"
    assert cold.health("") == "NOT_SERVING"
    # A cold standby has no follower: every hot-standby state is 0.
    for state in ("following", "bootstrapping", "behind", "restarting", "failed"):
        assert cold.metric("dexzd_hot_standby_state", f'{{state="{state}"}}') == 0
    assert cold.metric("dexzd_active") == 0
    assert a.metric("dexzd_active") == 1
