"""Hot standby against a real MinIO (spec: Hot standby): two `dex-server-zd serve` processes in
hot mode, a worker and clients that give both addresses, steady load.

- the standby follows: dexzd_hot_standby_state{state="following"} is 1 on it, dex.HotStandby
  SERVING; the active process reports NOT_SERVING for dex.HotStandby;
- SIGTERM of the active: the standby serves within about one heldLeasePollInterval (plus its
  engine open), replaying only the few batches it had not applied;
- SIGKILL of the active: the standby waits for expiry + 1 s, then takes over with a short replay;
- every flow whose start was acknowledged completes, by the spec's recovery rules.
"""
import json
import os
import re
import signal
import threading
import time
import urllib.request
import uuid

import pytest

from conftest import ACCESS, SECRET, Proc, binary, free_port, run
from test_recovery import FLOW_TYPE, check_recovery_rules, summarize

LEASE_S = 3
READY = re.compile(r"dex-server-zd serve ready: node \S+ epoch (\d+)")
TOOK_OVER = re.compile(r"took over as the active process: (\d+) log slots replayed after following, "
                       r"engine open (\d+) ms, lease to serving (\d+) ms")


class HotNode:
    def __init__(self, procs, tmp_path, endpoint, prefix, name, mode="hot", ports=None):
        # A restarted process keeps its name's ports, as a pod keeps its address.
        self.api_port, self.metrics_port = ports or (free_port(), free_port())
        self.config = tmp_path / f"{name}.yaml"
        self.config.write_text(
            f"nodeId: node-h\napi:\n  listen: 127.0.0.1:{self.api_port}\n"
            f"metrics:\n  listen: 127.0.0.1:{self.metrics_port}\n"
            f"objectStore:\n  type: s3\n  bucket: dex\n  prefix: {prefix}\n  endpoint: {endpoint}\n"
            f"localStore:\n  path: {tmp_path / name}-local\nlease:\n  duration: {LEASE_S}s\n"
            f"standby:\n  mode: {mode}\n")
        self.procs, self.name, self.proc = procs, name, None
        self.address = f"127.0.0.1:{self.api_port}"

    def start(self):
        env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS, AWS_SECRET_ACCESS_KEY=SECRET)
        self.proc = Proc([binary("dex-server-zd"), "serve", "--config", str(self.config)], env=env)
        self.procs.register(self.proc)
        self.proc.wait_for_line("API on", 30)
        return self

    def wait_ready(self, timeout):
        return int(READY.search(self.proc.wait_for_line("dex-server-zd serve ready", timeout)).group(1))

    def metric(self, name, labels=""):
        text = urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5).read().decode()
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
        r = run(binary("dexcli"), "--server", self.address, "--timeout", "5s", "health", "--service", service)
        return json.loads(r.stdout)["status"] if r.stdout else r.stderr


@pytest.fixture
def nodes(procs, tmp_path, minio):
    prefix = f"h-{uuid.uuid4().hex[:8]}"
    ports = {}

    def make(name, mode="hot"):
        node = HotNode(procs, tmp_path, minio, prefix, name, mode, ports.get(name))
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
            r = run(binary("dexcli"), "--server", ",".join(self.servers), "--timeout", "30s",
                    "flow", "start", "e2e-three-step", "--flow-id", flow_id, "--input", "{}", timeout=60)
            if r.returncode == 0:
                self.acknowledged.add(flow_id)
                i += 1
            time.sleep(0.05)

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(90)


def wait_flows(servers, ids, timeout=180):
    deadline = time.monotonic() + timeout
    flows = {}
    while time.monotonic() < deadline:
        flows, token = {}, ""
        for _ in range(50):
            args = ["flow", "list", "--page-size", "1000"] + (["--page-token", token] if token else [])
            r = run(binary("dexcli"), "--server", ",".join(servers), "--timeout", "10s", *args)
            if r.returncode != 0:
                break
            page = json.loads(r.stdout)
            flows.update({f["flowId"]: f for f in page.get("flows", [])})
            token = page.get("nextPageToken", "")
            if not token:
                break
        if set(ids) <= set(flows) and all(flows[i]["status"] != "RUNNING" for i in ids):
            return flows
        time.sleep(0.5)
    missing = set(ids) - set(flows)
    raise AssertionError(f"flows did not end in time; missing {len(missing)}")


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

    assert run(binary("dexcli"), "--server", a.address, "flow-type", "register", FLOW_TYPE).returncode == 0
    worker = procs(binary("dex-example-worker"), "--server", ",".join(servers), "--no-register",
                   "--concurrency", "16", "--work-time", "20ms")
    worker.wait_for_line("connected", 30)
    load = Load(servers)
    time.sleep(3)

    # Graceful: the active releases; the hot standby takes it within about one poll.
    a.proc.signal(signal.SIGTERM)
    t0 = time.monotonic()
    assert b.wait_ready(30) == 2
    sigterm_takeover = time.monotonic() - t0
    assert a.proc.wait_exit(30) == 0, a.proc.output()
    m = TOOK_OVER.search(b.proc.wait_for_line("took over as the active process", 5))
    replayed_sigterm = int(m.group(1))
    assert sigterm_takeover < 3.0, sigterm_takeover
    assert replayed_sigterm <= 20, replayed_sigterm  # the last few batches, not the log

    # The first process comes back as the new hot standby.
    a2 = nodes("a").start()
    a2.wait_following()
    time.sleep(3)

    # Crash: the standby still waits for expiry + 1 s; then only a short replay.
    b.proc.signal(signal.SIGKILL)
    t1 = time.monotonic()
    assert a2.wait_ready(LEASE_S + 1 + 20) == 3
    sigkill_takeover = time.monotonic() - t1
    m = TOOK_OVER.search(a2.proc.wait_for_line("took over as the active process", 5))
    replayed_sigkill, open_ms = int(m.group(1)), int(m.group(2))
    assert sigkill_takeover >= LEASE_S * 0.9, sigkill_takeover  # waited for the expiry
    assert sigkill_takeover < LEASE_S + 1 + 5, sigkill_takeover
    assert replayed_sigkill <= 20, replayed_sigkill

    time.sleep(2)
    load.finish()
    flows = wait_flows(servers, load.acknowledged)
    problems = check_recovery_rules(flows, load.acknowledged, server_died=True)
    print(f"\n[hot] SIGTERM takeover {sigterm_takeover:.2f}s ({replayed_sigterm} slots replayed); "
          f"SIGKILL takeover {sigkill_takeover:.2f}s ({replayed_sigkill} slots, engine open {open_ms} ms); "
          f"{len(load.acknowledged)} flows acknowledged; outcomes {summarize(flows)}")
    assert load.acknowledged and not problems, "\n".join(problems[:20])


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
