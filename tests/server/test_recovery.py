"""Flows survive crashes: real `dex-server-zd dev`, real `dex-example-worker`, real SIGKILLs.

200 flows are started with known flow IDs while the server (or the Worker) is killed at a
seeded random moment and restarted. Every flow whose start was acknowledged must complete;
each Step has exactly one COMPLETED attempt (its output recorded once); attempt numbers run
1, 2, ... and only the last one completed; NOT_COMPLETED appears only where a server died
(the recovery rule: an attempt a Worker had received fails NOT_COMPLETED and consumes a retry).
"""
import json
import os
import random
import re
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import binary, run

FLOWS = 200
HERE = os.path.dirname(os.path.abspath(__file__))
FLOW_TYPE = os.path.join(HERE, "flow-types", "e2e-three-step.yaml")
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


def start_worker(procs, node, work_time="20ms"):
    # Steps that take a little time, as real work does, so that a kill finds attempts running.
    return procs(binary("dex-example-worker"), "--server", node.address, "--concurrency", "16",
                 "--no-register", "--work-time", work_time)


def start_flows_in_background(node, ids, acknowledged):
    """Starts every flow, retrying each until the server acknowledges it (idempotent by ID)."""

    def start_one(flow_id):
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            r = node.cli("dag", "start", "e2e-three-step", "--input", json.dumps({"id": flow_id}),
                         "--flow-id", flow_id)
            if r.returncode == 0:
                acknowledged.add(flow_id)
                return
            time.sleep(0.1)
        raise AssertionError(f"start of {flow_id} never acknowledged: {r.stderr}")

    pool = ThreadPoolExecutor(max_workers=8)
    futures = [pool.submit(start_one, i) for i in ids]
    return pool, futures


def wait_all_ended(node, expected, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        flows = list_flows(node)
        running = [f["flowId"] for f in flows.values() if f["status"] == "RUNNING"]
        if expected <= set(flows) and not running:
            return flows
        time.sleep(0.5)
    raise AssertionError(f"flows still running after {timeout}s: {running[:10]}")


def list_flows(node):
    flows, token = {}, ""
    for _ in range(100):
        args = ["dag", "list", "--page-size", "1000"] + (["--page-token", token] if token else [])
        r = node.cli(*args)
        if r.returncode != 0:
            time.sleep(0.2)
            continue
        page = json.loads(r.stdout)
        for f in page.get("flows", []):
            flows[f["flowId"]] = f
        token = page.get("nextPageToken", "")
        if not token:
            break
    return flows


def check_recovery_rules(flows, acknowledged, server_died):
    problems = []
    for flow_id in acknowledged:
        f = flows.get(flow_id)
        if f is None:
            problems.append(f"{flow_id}: acknowledged but lost")
            continue
        if f["status"] != "COMPLETED":
            problems.append(f"{flow_id}: {f['status']} {f.get('error', '')}")
            continue
        for step in f["steps"]:
            attempts = step.get("attempts", [])
            numbers = [a["number"] for a in attempts]
            outcomes = [a["outcome"] for a in attempts]
            if numbers != list(range(1, len(numbers) + 1)):
                problems.append(f"{flow_id}/{step['name']}: attempt numbers {numbers}")
            if outcomes.count("COMPLETED") != 1 or outcomes[-1] != "COMPLETED":
                problems.append(f"{flow_id}/{step['name']}: outcomes {outcomes} (one COMPLETED, last)")
            if "output" not in step:
                problems.append(f"{flow_id}/{step['name']}: no output")
            if not server_died and "NOT_COMPLETED" in outcomes:
                problems.append(f"{flow_id}/{step['name']}: NOT_COMPLETED without a server crash")
            # transform fails its first attempt on purpose unless recovery ended it first.
            if step["name"] == "transform" and outcomes[0] not in ("FAILED", "NOT_COMPLETED", "TIMED_OUT"):
                problems.append(f"{flow_id}/transform: first attempt {outcomes[0]}")
    return problems


def summarize(flows):
    outcomes = {}
    for f in flows.values():
        for step in f["steps"]:
            for a in step.get("attempts", []):
                outcomes[a["outcome"]] = outcomes.get(a["outcome"], 0) + 1
    return outcomes


@pytest.mark.parametrize("durability", ["strict", "processCrashSafe"])
def test_server_sigkill_while_flows_run_loses_no_acknowledged_flow(procs, tmp_path, durability):
    rng = random.Random(f"server-{durability}")
    node = Node(procs, tmp_path / "data", durability)
    epoch1 = node.start()
    r = node.cli("flow-type", "register", FLOW_TYPE)
    assert r.returncode == 0, r.stderr
    worker = start_worker(procs, node)
    worker.wait_for_line("connected", 30)

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
          f"attempt outcomes: {summarize(flows)}")
    assert not problems, "\n".join(problems[:20])
    # Describe shows the raised epoch.
    described = json.loads(node.cli("admin", "describe").stdout)
    assert described["nodeEpoch"] == str(epoch2)


def test_worker_sigkill_while_flows_run_loses_no_flow(procs, tmp_path):
    node = Node(procs, tmp_path / "data", "strict")
    node.start()
    assert node.cli("flow-type", "register", FLOW_TYPE).returncode == 0
    worker = start_worker(procs, node, "100ms")
    worker.wait_for_line("connected", 30)
    acknowledged = set()
    ids = [f"wrk-{i:03d}" for i in range(FLOWS)]
    pool, futures = start_flows_in_background(node, ids, acknowledged)
    time.sleep(random.Random("worker").uniform(0.3, 1.5))
    worker.signal(signal.SIGKILL)
    worker.wait_exit(10)
    time.sleep(0.5)
    worker = start_worker(procs, node, "100ms")
    worker.wait_for_line("connected", 30)
    for fut in futures:
        fut.result(timeout=120)
    pool.shutdown()
    flows = wait_all_ended(node, acknowledged)
    problems = check_recovery_rules(flows, acknowledged, server_died=False)
    outcomes = summarize(flows)
    print(f"\n[worker kill] attempt outcomes: {outcomes}")
    assert not problems, "\n".join(problems[:20])
    # The killed Worker's attempts ended by their start-to-close timeout and were retried.
    assert outcomes.get("TIMED_OUT", 0) > 0, outcomes


def test_relaxed_mode_refuses_restart_after_a_kill_mid_run(procs, tmp_path):
    node = Node(procs, tmp_path / "data", "relaxed")
    node.start()
    assert node.cli("flow-type", "register", FLOW_TYPE).returncode == 0
    worker = start_worker(procs, node)
    worker.wait_for_line("connected", 30)
    for i in range(20):
        assert node.cli("dag", "start", "e2e-three-step", "--flow-id", f"rlx-{i}").returncode == 0
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
