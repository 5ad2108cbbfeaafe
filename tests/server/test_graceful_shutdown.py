"""Graceful shutdown drains (issue 13; spec: Step down, "drains running attempts as described
under graceful shutdown, using the same lifecycle.attemptDrainTimeout"; Kubernetes: deleting the
active pod). Two `dex-server-zd serve` processes of one node on a filesystem object store, the
second a hot standby, and a Worker whose Steps take 2 s:

- SIGTERM while attempts run: the active process hands out nothing new, keeps its lease and
  accepts the results; the attempts complete as attempt 1; then it releases the lease, exits 0,
  and the standby takes over;
- with `lifecycle.attemptDrainTimeout: 1s` the attempts are still running at the timeout: they
  end NOT_COMPLETED on the successor and run again as attempt 2;
- a second SIGTERM skips the drain.
"""
import json
import re
import signal
import time

from conftest import binary, run
from test_multi_address import ServeProc

STEP_S = 2


class Serve(ServeProc):
    """A `serve` process of node-m (test_multi_address.py) in hot mode with the given drain."""

    def __init__(self, procs, tmp_path, name, drain):
        super().__init__(procs, tmp_path, name)
        self.config.write_text(self.config.read_text() +
                               f"standby:\n  mode: hot\nlifecycle:\n  attemptDrainTimeout: {drain}\n")


def cli(servers, *args, timeout="10s"):
    return run(binary("dexcli"), "--server", servers, "--timeout", timeout, *args, timeout=60)


def start_node(procs, tmp_path, drain):
    a = Serve(procs, tmp_path, "a", drain).start()
    assert a.wait_ready(60) == 1
    b = Serve(procs, tmp_path, "b", drain).start()
    b.proc.wait_for_line("acquiring the lease", 30)
    servers = f"{a.address},{b.address}"
    worker = procs(binary("dex-example-worker"), "--server", servers, "--concurrency", "8",
                   "--work-time", f"{STEP_S}s")
    worker.wait_for_line("connected", 30)
    return a, b, servers


def start_flows(servers, n):
    ids = [f"g-{i}" for i in range(n)]
    for i in ids:
        r = cli(servers, "dag", "start", "one-step", "--flow-id", i, "--input", '{"n":1}')
        assert r.returncode == 0, r.stderr
    return ids


def wait_running(servers, ids, timeout=20):
    """Until every flow's echo Step has an attempt a Worker received."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        running = 0
        for i in ids:
            r = cli(servers, "dag", "get", i)
            if r.returncode == 0 and json.loads(r.stdout)["steps"][0].get("attempts"):
                running += 1
        if running == len(ids):
            return
        time.sleep(0.1)
    raise AssertionError("the attempts never started")


def attempts(servers, ids):
    out = {}
    for i in ids:
        r = cli(servers, "dag", "wait", i, "--wait-timeout", "40s", timeout="50s")
        assert r.returncode == 0, r.stderr
        flow = json.loads(r.stdout)["flow"]
        assert flow["status"] == "COMPLETED", flow
        out[i] = [(a["number"], a["outcome"]) for a in flow["steps"][0]["attempts"]]
    return out


def test_sigterm_lets_running_attempts_finish_as_attempt_1_before_the_release(procs, tmp_path):
    a, b, servers = start_node(procs, tmp_path, "30s")
    ids = start_flows(servers, 4)
    wait_running(servers, ids)
    t0 = time.monotonic()
    a.proc.signal(signal.SIGTERM)
    assert a.proc.wait_exit(30) == 0
    took = time.monotonic() - t0
    # The drain waited for the 2 s Steps (less what had run), then released.
    assert took < STEP_S + 5, took
    assert "released the lease of epoch 1 (0 attempts interrupted)" in a.proc.output(), a.proc.output()
    assert b.wait_ready(10) == 2
    for flow_id, tried in attempts(servers, ids).items():
        assert tried == [(1, "COMPLETED")], (flow_id, tried)


def test_attempts_still_running_at_the_drain_timeout_end_not_completed(procs, tmp_path):
    a, b, servers = start_node(procs, tmp_path, "1s")
    ids = start_flows(servers, 3)
    wait_running(servers, ids)
    time.sleep(0.2)
    t0 = time.monotonic()
    a.proc.signal(signal.SIGTERM)
    assert a.proc.wait_exit(30) == 0
    took = time.monotonic() - t0
    assert took < 1 + 3, took  # the 1 s drain, then the release
    assert re.search(r"released the lease of epoch 1 \([1-9]\d* attempts interrupted\)",
                     a.proc.output()), a.proc.output()
    assert b.wait_ready(10) == 2
    interrupted = 0
    for flow_id, tried in attempts(servers, ids).items():
        assert tried[-1][1] == "COMPLETED" and [n for n, _ in tried] == list(range(1, len(tried) + 1))
        if tried[0] == (1, "NOT_COMPLETED"):
            interrupted += 1
            assert tried[1][0] == 2, (flow_id, tried)
    assert interrupted >= 1


def test_a_second_signal_skips_the_drain(procs, tmp_path):
    a, b, servers = start_node(procs, tmp_path, "30s")
    ids = start_flows(servers, 2)
    wait_running(servers, ids)
    a.proc.signal(signal.SIGTERM)
    a.proc.wait_for_line("draining running attempts", 5)
    t0 = time.monotonic()
    a.proc.signal(signal.SIGTERM)
    assert a.proc.wait_exit(10) == 0
    assert time.monotonic() - t0 < 1.5
    assert b.wait_ready(10) == 2
    for flow_id, tried in attempts(servers, ids).items():
        assert tried[0] == (1, "NOT_COMPLETED") and tried[-1][1] == "COMPLETED", (flow_id, tried)
