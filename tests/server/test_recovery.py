"""Flows survive crashes: real `dex-server-zd dev`, real `dex-flow-examples worker`, real SIGKILLs.

200 E2EThreeSteps flows (Fetch -> Transform -> Store; Transform fails its first attempt on
purpose; examples/flows/pipelines.cc) are started with known flow IDs while the server (or the
Worker) is killed at a seeded random moment and restarted. Every flow whose start was
acknowledged must complete, and its history (`dexcli flow history`) must show each Step run as
one execution that completed exactly once (its result passed on once, the output holds every
Step's mark once), at an attempt its retries allow: Transform never before attempt 2. An attempt
is lost (a completion after a later attempt than the first one possible) only where a process
died: by the recovery rule an attempt a Worker had received ends NOT_COMPLETED when a server dies
and consumes a retry; a killed Worker's attempts time out after the 4 s attempt timeout.
"""
import json
import random
import re
import signal
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import binary, closed_flows, completions, flow_worker, output_of, run, start_flow

FLOWS = 200
FLOW_TYPE = "E2EThreeSteps"
STEPS = ("Fetch", "Transform", "Store")
# The first attempt at which each Step can complete: Transform fails attempt 1 on purpose.
FIRST_ATTEMPT = {"Fetch": 1, "Transform": 2, "Store": 1}
ATTEMPT_TIMEOUT_S = 4
# The error of an attempt that a new process found running: it ends NOT_COMPLETED.
INTERRUPTED = "the attempt was interrupted: a new process took over the node"
READY = re.compile(r"dex-server-zd dev ready: .* epoch (\d+) .* listening on (\S+)")


class Node:
    """One dev data directory on a fixed free port, restartable."""

    def __init__(self, procs, data, durability="strict", *extra):
        self.procs, self.data, self.durability, self.extra = procs, data, durability, extra
        self.port = None
        self.server = None

    def start(self):
        listen = f"127.0.0.1:{self.port or 0}"
        self.server = self.procs(binary("dex-server-zd"), "dev", "--data-dir", self.data,
                                 "--listen", listen, "--durability", self.durability, *self.extra)
        line = self.server.wait_for_line("dex-server-zd dev ready", 60)
        m = READY.search(line)
        self.port = int(m.group(2).rsplit(":", 1)[1])
        return int(m.group(1))

    @property
    def address(self):
        return f"127.0.0.1:{self.port}"

    def cli(self, *args, timeout=30):
        return run(binary("dexcli"), "--server", self.address, "--timeout", "10s", *args, timeout=timeout)


def start_e2e(servers, flow_id, timeout="10s"):
    """Starts E2EThreeSteps with input {"id": flow_id} (its output adds the Steps' "path")."""
    return start_flow(servers, FLOW_TYPE, flow_id, json.dumps({"id": flow_id}), timeout=timeout)


def start_worker(procs, node, work_time="20ms"):
    # Steps that take a little time, as real work does, so that a kill finds attempts running.
    return flow_worker(procs, node.address, "--concurrency", "16", "--work-time", work_time)


def start_flows_in_background(node, ids, acknowledged):
    """Starts every flow, retrying each until the server acknowledges it (the request ID makes
    a repeat answer the run the first start made)."""

    def start_one(flow_id):
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            r = start_e2e(node.address, flow_id)
            if r.returncode == 0:
                acknowledged.add(flow_id)
                return
            time.sleep(0.1)
        raise AssertionError(f"start of {flow_id} never acknowledged: {r.stderr}")

    pool = ThreadPoolExecutor(max_workers=8)
    futures = [pool.submit(start_one, i) for i in ids]
    return pool, futures


def wait_all_ended(node, expected, timeout=120):
    flows = closed_flows(node.address, expected, timeout)
    running = [i for i in expected if flows.get(i, {}).get("status", "RUNNING") == "RUNNING"]
    assert not running, f"flows not found or still running after {timeout}s: {running[:10]}"
    return flows


def check_recovery_rules(flows, acknowledged, server_died, worker_died=False):
    """`flows`: closed_flows() of E2EThreeSteps runs started by start_e2e(). Returns what breaks
    the recovery rules."""
    problems = []
    for flow_id in sorted(acknowledged):
        f = flows.get(flow_id)
        if f is None:
            problems.append(f"{flow_id}: acknowledged but lost")
            continue
        if f["status"] != "COMPLETED":
            problems.append(f"{flow_id}: {f['status']} {f['events'][-1].get('reason', '')}")
            continue
        events = f["events"]
        if [e["seq"] for e in events] != list(range(len(events))):
            problems.append(f"{flow_id}: history seqs {[e['seq'] for e in events]}")
        # One execution per Step, each completed once, in order: nothing ran twice or was lost.
        kinds = [(e["kind"], e.get("stepExecutionId")) for e in events]
        expected = ([("FLOW_STARTED", None)] + [("EXECUTE_COMPLETED", f"{s}-1") for s in STEPS]
                    + [("FLOW_CLOSED", None)])
        if kinds != expected:
            problems.append(f"{flow_id}: history {kinds}")
            continue
        if output_of(f) != {"id": flow_id, "path": list(STEPS)}:
            problems.append(f"{flow_id}: output {output_of(f)}")
        for execution, attempt in completions(f):
            step = execution.rsplit("-", 1)[0]
            # Transform fails its first attempt on purpose (or a crash ended it first).
            if attempt < FIRST_ATTEMPT[step]:
                problems.append(f"{flow_id}/{execution}: completed at attempt {attempt}")
            if attempt > FIRST_ATTEMPT[step] and not (server_died or worker_died):
                problems.append(f"{flow_id}/{execution}: attempt {attempt}, an attempt lost "
                                f"without a crash")
    return problems


def summarize(flows):
    """How many Steps completed at which attempt: {"Transform@2": n, ...}."""
    return dict(sorted(Counter(f"{execution.rsplit('-', 1)[0]}@{attempt}"
                               for f in flows.values() if "events" in f
                               for execution, attempt in completions(f)).items()))


def lost_attempt_waits(flows):
    """For each Step that completed after a later attempt than its first possible one: seconds
    from its execution's creation (the event before its completion) to that completion."""
    waits = []
    for f in flows.values():
        events = f["events"]
        for before, e in zip(events, events[1:]):
            if e["kind"] != "EXECUTE_COMPLETED":
                continue
            if e["attempt"] > FIRST_ATTEMPT[e["stepExecutionId"].rsplit("-", 1)[0]]:
                waits.append((e["atMs"] - before["atMs"]) / 1000)
    return waits


@pytest.mark.parametrize("durability", ["strict", "processCrashSafe"])
def test_server_sigkill_while_flows_run_loses_no_acknowledged_flow(procs, tmp_path, durability):
    rng = random.Random(f"server-{durability}")
    node = Node(procs, tmp_path / "data", durability)
    epoch1 = node.start()
    start_worker(procs, node)

    acknowledged = set()
    ids = [f"srv-{i:03d}" for i in range(FLOWS)]
    pool, futures = start_flows_in_background(node, ids, acknowledged)
    # Kill at a seeded moment while starts and Steps are in flight.
    kill_after = rng.uniform(0.3, 1.5)
    time.sleep(kill_after)
    before_kill = len(acknowledged)
    node.server.signal(signal.SIGKILL)
    node.server.wait_exit(10)
    epoch2 = node.start()  # dev.lock proves the holder stopped: takeover at once
    assert epoch2 > epoch1
    for fut in futures:
        fut.result(timeout=120)
    pool.shutdown()
    assert acknowledged == set(ids)
    flows = wait_all_ended(node, acknowledged)
    problems = check_recovery_rules(flows, acknowledged, server_died=True)
    print(f"\n[{durability}] killed after {kill_after:.2f}s with {before_kill} starts acknowledged; "
          f"completed at attempts: {summarize(flows)}")
    assert not problems, "\n".join(problems[:20])
    # Describe shows the raised epoch.
    described = json.loads(node.cli("admin", "describe").stdout)
    assert described["nodeEpoch"] == str(epoch2)


def test_worker_sigkill_while_flows_run_loses_no_flow(procs, tmp_path):
    node = Node(procs, tmp_path / "data", "strict")
    node.start()
    worker = start_worker(procs, node, "100ms")
    acknowledged = set()
    ids = [f"wrk-{i:03d}" for i in range(FLOWS)]
    pool, futures = start_flows_in_background(node, ids, acknowledged)
    time.sleep(random.Random("worker").uniform(0.3, 1.5))
    worker.signal(signal.SIGKILL)
    worker.wait_exit(10)
    time.sleep(0.5)
    start_worker(procs, node, "100ms")
    for fut in futures:
        fut.result(timeout=120)
    pool.shutdown()
    flows = wait_all_ended(node, acknowledged)
    problems = check_recovery_rules(flows, acknowledged, server_died=False, worker_died=True)
    waits = lost_attempt_waits(flows)
    print(f"\n[worker kill] completed at attempts: {summarize(flows)}; {len(waits)} Steps "
          f"retried after a lost attempt, the quickest {min(waits, default=0):.2f}s after it began")
    assert not problems, "\n".join(problems[:20])
    # The killed Worker's attempts were retried, after they ended by their 4 s attempt timeout.
    assert waits, summarize(flows)
    assert min(waits) >= ATTEMPT_TIMEOUT_S, sorted(waits)[:10]


def test_relaxed_mode_refuses_restart_after_a_kill_mid_run(procs, tmp_path):
    node = Node(procs, tmp_path / "data", "relaxed")
    node.start()
    start_worker(procs, node)
    for i in range(20):
        assert start_e2e(node.address, f"rlx-{i}").returncode == 0
    node.server.signal(signal.SIGKILL)
    node.server.wait_exit(10)
    again = node.procs(binary("dex-server-zd"), "dev", "--data-dir", node.data, "--listen",
                       "127.0.0.1:0", "--durability", "relaxed")
    assert again.wait_exit(30) == 1
    assert "delete the data directory" in again.output().lower(), again.output()


def test_second_dev_process_fails_at_once_and_restart_after_sigkill_raises_the_epoch(procs, tmp_path):
    node = Node(procs, tmp_path / "data", "strict")
    epoch1 = node.start()
    t0 = time.monotonic()
    second = procs(binary("dex-server-zd"), "dev", "--data-dir", node.data, "--listen", "127.0.0.1:0")
    assert second.wait_exit(30) == 1
    assert time.monotonic() - t0 < 10
    assert "dev.lock" in second.output(), second.output()
    described = json.loads(node.cli("admin", "describe").stdout)
    assert described["nodeEpoch"] == str(epoch1)
    node.server.signal(signal.SIGKILL)
    node.server.wait_exit(10)
    t0 = time.monotonic()
    node.start()
    assert time.monotonic() - t0 < 10  # at once, not after the 30 s lease
    described = json.loads(node.cli("admin", "describe").stdout)
    assert int(described["nodeEpoch"]) > epoch1
