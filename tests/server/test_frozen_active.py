"""A frozen active process (SIGSTOP: a stalled host, a partition) is what the lease is for: its hot
standby takes over once the lease expires, and the Workers and clients must follow within seconds.

Two `dex-server-zd serve` processes of one node (hot standby, a 3 s lease, a filesystem object
store), two `dex-flow-examples worker`s and a stream of `dexcli flow start`s of E2EThreeSteps
dex Flows, all given both addresses.
After a SIGSTOP of the active process:
- the Workers notice the silent stream (the server pings every second, a Worker gives a stream up
  after 3 s of silence) and find the new active process by its gRPC health, never waiting on the
  frozen one: the first flow completion after the freeze comes within lease.duration + 3 s;
- a `dexcli flow wait` that was waiting on the frozen process for an E2EIdle flow (one that waits
  on a Channel nobody publishes to) notices it too (health re-checks), moves to the new active
  process and returns when the flow is stopped there.
"""
import json
import signal
import threading
import time

from conftest import binary, flow_json, flow_worker, parallel, run, start_flow
from test_multi_address import LEASE_S, ServeProc as MultiAddressServe
from test_recovery import start_e2e

# Waits on a Channel that nobody publishes to: its flow stays RUNNING until stopped.
IDLE_FLOW_TYPE = "E2EIdle"


class ServeProc(MultiAddressServe):
    """A `serve` process (test_multi_address.py's) in hot mode."""

    def __init__(self, procs, tmp_path, name):
        super().__init__(procs, tmp_path, name)
        self.name = name
        self.config.write_text(self.config.read_text() + "standby:\n  mode: hot\n")

    def wait_hot(self, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r = run(binary("dexcli"), "--server", self.address, "--timeout", "2s", "health",
                    "--service", "dex.HotStandby")
            if r.stdout and json.loads(r.stdout).get("status") == "SERVING":
                return
            time.sleep(0.2)
        raise AssertionError(f"{self.name} never became a hot standby:\n" + self.proc.output())


def cli(servers, *args, timeout="10s"):
    return run(binary("dexcli"), "--server", servers, "--timeout", timeout, *args, timeout=60)


class Starter:
    """Starts flows one after another through every address until stopped."""

    def __init__(self, servers):
        self.servers, self.stop, self.started = servers, threading.Event(), []
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        for i in range(5000):  # bounded; stopped long before
            if self.stop.is_set():
                return
            r = start_e2e(self.servers, f"s-{i:04d}", timeout="5s")
            if r.returncode == 0:
                self.started.append(f"s-{i:04d}")
            time.sleep(0.05)

    def finish(self):
        self.stop.set()
        self.thread.join(60)


def described(servers, ids):
    """{flow ID: its description} of every flow in `ids` (each must be found)."""
    flows = parallel(lambda i: flow_json(servers, "describe", i), ids)
    lost = [i for i, f in flows.items() if f is None]
    assert not lost, f"started flows not found: {lost[:10]}"
    return flows


def test_workers_and_flow_wait_follow_a_takeover_from_a_frozen_active_process(procs, tmp_path):
    a = ServeProc(procs, tmp_path, "a").start()
    assert a.wait_ready(60) == 1
    b = ServeProc(procs, tmp_path, "b").start()
    b.wait_hot()
    servers = f"{a.address},{b.address}"
    workers = [flow_worker(procs, servers, "--worker-id", f"w{k}", "--concurrency", "8",
                           "--work-time", "10ms", connected=False)
               for k in range(2)]
    for w in workers:
        w.wait_for_line(f"connected to {a.address}", 30)

    # A long poll on the active process: the flow ends only when stopped.
    r = start_flow(servers, IDLE_FLOW_TYPE, "idle-1")
    assert r.returncode == 0, r.stderr
    idle_run = json.loads(r.stdout)["runId"]
    waiter = procs(binary("dexcli"), "--server", servers, "--timeout", "10s", "flow", "wait",
                   "idle-1", "--wait-timeout", "120s")

    starter = Starter(servers)
    time.sleep(3)
    assert starter.started, "no flow started before the freeze"

    a.proc.signal(signal.SIGSTOP)
    t_stop = time.time()
    try:
        assert b.wait_ready(LEASE_S + 1 + 20) == 2
        took_over_s = time.time() - t_stop
        # Cancel the waited-for flow on the new active process: the wait must end with it.
        for _ in range(100):
            r = cli(servers, "flow", "stop", "idle-1", "--run-id", idle_run, "--yes",
                    timeout="5s")
            if r.returncode == 0:
                break
            time.sleep(0.2)
        assert r.returncode == 0, r.stderr
        t_cancel = time.time()
        rc = waiter.wait_exit(30)
        wait_returned_s = time.time() - t_cancel
        assert rc == 0, waiter.output()
        assert json.loads(waiter.output()[waiter.output().index("{"):])["status"] == "CANCELED"

        time.sleep(max(0.0, LEASE_S + 5 - (time.time() - t_stop)))
        starter.finish()
        flows = described(b.address, starter.started)
    finally:
        a.proc.signal(signal.SIGCONT)
        a.proc.kill()

    stop_ms = int(t_stop * 1000)
    after = sorted(f["closeUnixMs"] for f in flows.values()
                   if f["status"] == "COMPLETED" and f.get("closeUnixMs", 0) >= stop_ms)
    assert after, "no flow completed after the freeze"
    gap_s = (after[0] - stop_ms) / 1000
    print(f"\n[frozen active, C++ workers] takeover {took_over_s:.2f}s after SIGSTOP; first completion "
          f"{gap_s:.2f}s after it ({len(after)} completions after the freeze, "
          f"{len(starter.started)} starts); flow wait returned {wait_returned_s:.2f}s after the cancel")
    assert gap_s <= LEASE_S + 3, gap_s
    assert wait_returned_s < 5, wait_returned_s
    for w in workers:
        assert f"connected to {b.address}" in w.output() or w.wait_for_line(f"connected to {b.address}", 1)
