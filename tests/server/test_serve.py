"""`dex-server-zd serve`: cold standby takeover after SIGKILL and graceful handback (on both object
stores: a filesystem directory and a real MinIO), and a frozen active that resumes after losing
its lease (MinIO).

MinIO comes from scripts/install-minio (cached in ~/.cache/dex/bin); the `minio` fixture
(conftest.py) starts it on a free loopback port with a fresh data directory and stops it
afterwards. Its absence fails the MinIO cases (never a skip).
"""
import json
import re
import signal
import time

import pytest

from conftest import STORES, Proc, binary, flow_worker, log_time, parallel, run
from test_hot_standby import wait_flows
from test_recovery import check_recovery_rules, start_e2e, summarize

LEASE_S = 3


class ServeProc:
    def __init__(self, procs, tmp_path, store, name):
        self.config = tmp_path / f"{name}.yaml"
        self.config.write_text(
            "nodeId: node-s\napi:\n  listen: 127.0.0.1:0\n" + store.yaml +
            f"localStore:\n  path: {tmp_path / name}-local\nlease:\n  duration: {LEASE_S}s\n")
        self.procs, self.name, self.proc, self.address, self.store = procs, name, None, None, store

    def start(self):
        self.proc = Proc([binary("dex-server-zd"), "serve", "--config", str(self.config)],
                         env=self.store.env)
        self.procs.register(self.proc)
        line = self.proc.wait_for_line("API on", 30)
        self.address = re.search(r"API on (\S+):", line).group(1)
        return self

    def wait_ready(self, timeout):
        line = self.proc.wait_for_line("dex-server-zd serve ready", timeout)
        return int(re.search(r"epoch (\d+)", line).group(1))

    def cli(self, *args):
        return run(binary("dexcli"), "--server", self.address, "--timeout", "10s", *args)


@pytest.fixture
def serve(procs, tmp_path, store):
    return lambda name: ServeProc(procs, tmp_path, store, name)


def worker_for(procs, node):
    return flow_worker(procs, node.address, "--concurrency", "16", "--work-time", "20ms")


@pytest.mark.parametrize("store", STORES, indirect=True)
def test_cold_standby_takes_over_after_sigkill_and_hands_back_on_sigterm(serve, procs):
    a = serve("a").start()
    epoch_a = a.wait_ready(60)
    b = serve("b").start()
    # The standby waits: public calls UNAVAILABLE while A holds the lease.
    r = b.cli("admin", "describe")
    assert r.returncode == 1 and "UNAVAILABLE" in r.stderr, r.stderr
    worker_for(procs, a)
    ids = [f"s-{i:03d}" for i in range(200)]
    for i, r in parallel(lambda i: start_e2e(a.address, i), ids).items():
        assert r.returncode == 0, (i, r.stderr)
    a.proc.signal(signal.SIGKILL)
    t_kill, killed_at = time.monotonic(), time.time()
    a.proc.wait_exit(10)
    epoch_b = b.wait_ready(LEASE_S + 1 + 30)
    takeover_s = time.monotonic() - t_kill
    assert epoch_b == epoch_a + 1
    # The wait: until the old lease expires, plus 1 s. The standby saw A's last renewal (every
    # LEASE_S/3) at most one poll (a cold standby reads a held lease every LEASE_S/4) after it
    # landed, so it takes the lease between LEASE_S + 1 - LEASE_S/3 and LEASE_S + 1 + LEASE_S/4
    # after the kill.
    lease_taken = log_time(b.proc.wait_for_line("acquired the lease", 1)) - killed_at
    assert LEASE_S + 1 - LEASE_S / 3 - 0.1 <= lease_taken <= LEASE_S + 1 + LEASE_S / 4 + 0.3, lease_taken
    # Then the cold standby's whole replay (200 flows): no spec figure, room for a loaded machine.
    assert takeover_s < lease_taken + 10, takeover_s
    worker_for(procs, b)
    flows = wait_flows(b.address, ids)
    problems = check_recovery_rules(flows, set(ids), server_died=True)
    print(f"\n[serve {a.store}] after SIGKILL: lease taken in {lease_taken:.2f}s, serving in "
          f"{takeover_s:.2f}s; completed at attempts {summarize(flows)}")
    assert not problems, "\n".join(problems[:20])

    # Graceful: SIGTERM releases the lease, so a restarted A takes over at once.
    b.proc.signal(signal.SIGTERM)
    assert b.proc.wait_exit(30) == 0, b.proc.output()
    t0 = time.monotonic()
    a2 = serve("a").start()
    epoch_a2 = a2.wait_ready(30)
    assert time.monotonic() - t0 < LEASE_S, "a released lease must be taken at once"
    # At once: one read of the released lease and one write, no wait for an expiry.
    wait = (log_time(a2.proc.wait_for_line("acquired the lease", 1))
            - log_time(a2.proc.wait_for_line("acquiring the lease", 1)))
    assert wait <= 0.5 and "waiting for it to expire" not in a2.proc.output(), a2.proc.output()
    assert epoch_a2 == epoch_b + 1
    assert json.loads(a2.cli("flow", "describe", ids[0]).stdout)["status"] == "COMPLETED"


@pytest.mark.parametrize("store", ["minio"], indirect=True)
def test_frozen_active_resumed_after_takeover_answers_nothing_and_exits_1(serve, procs):
    a = serve("a").start()
    a.wait_ready(60)
    b = serve("b").start()
    a.proc.signal(signal.SIGSTOP)
    try:
        b.wait_ready(LEASE_S + 1 + 30)
    finally:
        a.proc.signal(signal.SIGCONT)
    # Readiness turns NOT_SERVING at once, without any public call to notice the lease
    # (or the process has already stopped listening): never SERVING.
    h = run(binary("dexcli"), "--server", a.address, "--timeout", "2s", "health")
    assert '"SERVING"' not in h.stdout, h.stdout
    # Resumed past its lease: nothing answered from its old state...
    r = a.cli("admin", "describe")
    assert r.returncode != 0 and "UNAVAILABLE" in r.stderr, r.stdout + r.stderr
    # ...and it stops with status 1 once its keeper sees the loss.
    assert a.proc.wait_exit(30) == 1, a.proc.output()
    assert json.loads(b.cli("admin", "describe").stdout)["nodeEpoch"] == "2"
