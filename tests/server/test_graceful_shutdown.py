"""Graceful shutdown drains (issue 13; spec: Step down, "drains running attempts as described
under graceful shutdown, using the same lifecycle.attemptDrainTimeout"; Kubernetes: deleting the
active pod). Two `dex-server-zd serve` processes of one node on a filesystem object store, the
second a hot standby, and a `dex-flow-examples worker` whose OneStep Flows' Step takes 2 s (its
default retry policy: 3 attempts, 1 s apart). Attempt numbers are read from each flow's history,
an interrupted attempt's outcome from `dexcli flow state` while the retry waits and runs:

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

from conftest import binary, completions, flow_json, flow_worker, run, start_flow
from test_multi_address import ServeProc
from test_recovery import INTERRUPTED

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
    flow_worker(procs, servers, "--concurrency", "8", "--work-time", f"{STEP_S}s")
    return a, b, servers


def start_flows(servers, n):
    ids = [f"g-{i}" for i in range(n)]
    for i in ids:
        r = start_flow(servers, "OneStep", i, '{"n":1}')
        assert r.returncode == 0, r.stderr
    return ids


def wait_running(servers, ids, timeout=20):
    """Until every flow's Work Step has an attempt a Worker received."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        running = 0
        for i in ids:
            state = flow_json(servers, "state", i)
            if state and [a.get("taskState") for a in state.get("active", [])] == ["RUNNING"]:
                running += 1
        if running == len(ids):
            return
        time.sleep(0.1)
    raise AssertionError("the attempts never started")


def interrupted(servers, ids, timeout=30):
    """{flow ID: (attempt, outcome, error) of the failed attempt before the running one, or
    None}: each flow's state is read until it shows a failed attempt or the flow closed (a retry
    waits 1 s, then runs 2 s, so a failure stays visible for about 3 s)."""
    seen, deadline = {}, time.monotonic() + timeout
    while len(seen) < len(ids):
        assert time.monotonic() < deadline, f"flows neither retried nor closed: {seen}"
        for i in ids:
            state = None if i in seen else flow_json(servers, "state", i)
            if state is None:
                continue
            failures = [a["lastFailure"] for a in state.get("active", []) if "lastFailure" in a]
            if failures:
                f = failures[0]
                seen[i] = (f.get("attempt"), f.get("outcome"), f.get("error"))
            elif state["flow"]["status"] != "RUNNING":
                seen[i] = None
        time.sleep(0.1)
    return seen


def attempts(servers, ids):
    """{flow ID: [(its Step execution, the attempt that completed it)]}; each flow COMPLETED."""
    out = {}
    for i in ids:
        r = cli(servers, "flow", "wait", i, "--wait-timeout", "40s", timeout="50s")
        assert r.returncode == 0, r.stderr
        flow = json.loads(r.stdout)
        assert flow["status"] == "COMPLETED", flow
        out[i] = completions(flow_json(servers, "history", i))
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
        assert tried == [("Work-1", 1)], (flow_id, tried)


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
    failed = interrupted(servers, ids)
    for flow_id, tried in attempts(servers, ids).items():
        # Completed at attempt 1 within the drain, or interrupted: attempt 1 NOT_COMPLETED on the
        # successor, then attempt 2 completed.
        if failed[flow_id] is None:
            assert tried == [("Work-1", 1)], (flow_id, tried)
        else:
            assert failed[flow_id] == (1, "NOT_COMPLETED", INTERRUPTED), (flow_id, failed)
            assert tried == [("Work-1", 2)], (flow_id, tried)
    assert [f for f in failed.values() if f], failed


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
    failed = interrupted(servers, ids)
    for flow_id, tried in attempts(servers, ids).items():
        assert failed[flow_id] == (1, "NOT_COMPLETED", INTERRUPTED), (flow_id, failed)
        assert tried == [("Work-1", 2)], (flow_id, tried)
