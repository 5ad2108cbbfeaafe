"""Step down the active process (spec: Step down the active process), with real `serve`
processes and `dexcli admin step-down`; the core scenario runs on both object stores (a
filesystem directory and a real MinIO, whose absence fails the test):

- with a hot standby: taken over by another process within 1 s of the release; no acknowledged
  flow is lost; drained attempts complete or fail NOT_COMPLETED by the recovery rules; the
  stepped-down process keeps running as a hot standby that only reads; a retry with the
  original epoch gets FAILED_PRECONDITION;
- attempts still running when the drain expires end NOT_COMPLETED, consuming a retry (a Step
  with one left runs again as attempt 2, one with none fails the flow); a Step not yet handed to
  a Worker does not fail and the new active process dispatches it;
- on a single replica: the same process takes the lease back after the hold-off, with a higher
  epoch; describe answers FAILED_PRECONDITION meanwhile;
- a wrong --expected-node-id steps nothing down; a missing or wrong credential is refused.
"""
import json
import threading
import time

from conftest import STORES, binary, completions, flow_worker, log_time, run, start_flow
from test_hot_standby import HotNode, Load, wait_flows
from test_recovery import INTERRUPTED, check_recovery_rules, start_e2e, summarize

import pytest

# One Step taking the Worker's --work-time: 2 attempts (E2ESlowStep) or 1 (E2ESlowStepNoRetry),
# 60 s attempt timeout (examples/flows/pipelines.cc).
SLOW_FLOW_TYPE = "E2ESlowStep"
SLOW_NO_RETRY_FLOW_TYPE = "E2ESlowStepNoRetry"


def dexcli(servers, *args, timeout="2m", credential=None):
    extra = ["--credential-file", str(credential)] if credential else []
    cmd = [binary("dexcli"), "--server", ",".join(servers), "--timeout", timeout] + list(args)
    if args and args[0] == "admin":
        cmd += extra
    return run(*cmd, timeout=180)


@pytest.fixture
def nodes(procs, tmp_path, store):
    ports = {}

    def make(name, mode="hot", extra=""):
        node = HotNode(procs, tmp_path, store, name, mode, ports.get(name))
        ports[name] = (node.api_port, node.metrics_port)
        if extra:
            node.config.write_text(node.config.read_text() + extra)
        return node

    return make


def describe(servers, credential=None):
    r = dexcli(servers, "admin", "describe", timeout="10s", credential=credential)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("store", STORES, indirect=True)
def test_step_down_with_a_hot_standby_is_taken_over_and_loses_nothing(nodes, procs):
    extra = "lifecycle:\n  attemptDrainTimeout: 5s\n"
    a = nodes("a", extra=extra).start()
    assert a.wait_ready(60) == 1
    b = nodes("b", extra=extra).start()
    b.wait_following()
    servers = [a.address, b.address]
    flow_worker(procs, servers, "--concurrency", "16", "--work-time", "50ms")
    load = Load(servers)
    time.sleep(3)
    before = describe([a.address])
    assert before["nodeEpoch"] == "1"

    t0 = time.monotonic()
    r = dexcli([a.address], "admin", "step-down", "--yes")
    took = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["expectedNodeId"] == "node-h" and out["expectedNodeEpoch"] == "1", out
    assert out["nodeId"] == "node-h" and out["releasedNodeEpoch"] == "1", out
    assert out["leaseReacquisitionHoldOff"] == "5s", out
    assert out["leaseHolderAfterStepDown"] == "takenOverByAnotherProcess", out
    assert out["activeNodeEpoch"] == "2", out
    after = describe([b.address])
    assert after["nodeEpoch"] == "2" and out["activeHolderProcessId"] == after["holderProcessId"]
    # Spec: the hot standby takes a released lease "within about one heldLeasePollInterval"
    # (250 ms, + 0-50 ms + its engine open): serving at most 1 s after the release.
    released = log_time(a.proc.wait_for_line("released the lease", 5))  # the first such line
    serving = log_time(b.proc.wait_for_line("took over as the active process", 5))
    assert serving - released <= 1.0, f"release to serving {serving - released:.3f}s"
    # The call returns as soon as the standby took over: the drain of 50 ms Steps ends when they
    # do, far inside the 5 s attemptDrainTimeout, and the takeover takes at most 1 s.
    assert took < 3, took

    # A retry with the original epoch changes nothing.
    r = dexcli(servers, "admin", "step-down", "--yes", "--expected-node-id", "node-h",
               "--expected-node-epoch", "1", timeout="20s")
    assert r.returncode != 0 and "FAILED_PRECONDITION" in r.stderr, r.stdout + r.stderr
    assert describe(servers)["nodeEpoch"] == "2"

    # The stepped-down process keeps running, as a hot standby after the hold-off, and as
    # one it only reads object storage while the new active process writes.
    assert a.proc.p.poll() is None
    a.wait_following(60)
    assert a.health("") == "NOT_SERVING"
    a0, b0 = a.requests(), b.requests()
    time.sleep(2)
    a1, b1 = a.requests(), b.requests()
    assert b1.get("put", 0) > b0.get("put", 0), (b0, b1)
    assert [a1.get(op, 0) - a0.get(op, 0) for op in ("put", "remove")] == [0, 0], (a0, a1)
    assert a1.get("get", 0) > a0.get("get", 0), (a0, a1)

    load.finish()
    flows = wait_flows(servers, load.acknowledged)
    problems = check_recovery_rules(flows, load.acknowledged, server_died=True)
    print(f"\n[step-down {a.store}] call {took:.2f}s, release to serving {serving - released:.3f}s; "
          f"{len(load.acknowledged)} flows acknowledged; completed at attempts {summarize(flows)}")
    assert load.acknowledged and not problems, "\n".join(problems[:20])


def flow_state(servers, flow_id):
    r = dexcli(servers, "flow", "state", flow_id, timeout="10s")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def wait_slow_step(servers, flow_id, attempt, task_state, timeout=20):
    """Until the flow's Slow Step runs (or waits, `task_state`) its attempt `attempt`; returns
    that execution's state (`dexcli flow state`)."""
    deadline = time.monotonic() + timeout
    state = None
    while time.monotonic() < deadline:
        state = flow_state(servers, flow_id)
        active = state.get("active", [])
        if active and active[0].get("attempt", 1) == attempt and \
                active[0].get("taskState") == task_state:
            return active[0]
        time.sleep(0.1)
    raise AssertionError(f"{flow_id}: Slow never {task_state} at attempt {attempt}: {state}")


def wait_closed(servers, flow_id):
    r = dexcli(servers, "flow", "wait", flow_id, "--wait-timeout", "30s", timeout="40s")
    assert r.returncode == 0, r.stderr
    history = dexcli(servers, "flow", "history", flow_id, timeout="10s")
    assert history.returncode == 0, history.stderr
    return {**json.loads(r.stdout), "events": json.loads(history.stdout)["events"]}


@pytest.mark.parametrize("store", ["filesystem"], indirect=True)
def test_attempts_running_when_the_drain_expires_end_not_completed_and_consume_a_retry(nodes, procs):
    drain_s, work_s = 1, 4
    extra = f"lifecycle:\n  attemptDrainTimeout: {drain_s}s\n"
    a = nodes("a", extra=extra).start()
    assert a.wait_ready(60) == 1
    b = nodes("b", extra=extra).start()
    b.wait_following()
    servers = [a.address, b.address]
    # Two task slots, each Step 4 s: "retried" and "no-retry" run, "queued" waits for a slot.
    flow_worker(procs, servers, "--concurrency", "2", "--work-time", f"{work_s}s")
    for flow_id, flow_type in (("retried", SLOW_FLOW_TYPE), ("no-retry", SLOW_NO_RETRY_FLOW_TYPE)):
        r = start_flow(servers, flow_type, flow_id, '{"v":1}')
        assert r.returncode == 0, r.stderr
        wait_slow_step(servers, flow_id, 1, "RUNNING")
    r = start_flow(servers, SLOW_FLOW_TYPE, "queued", '{"v":2}')
    assert r.returncode == 0, r.stderr
    time.sleep(0.5)
    queued_before = flow_state(servers, "queued")["active"][0]
    assert queued_before["taskState"] == "QUEUED", queued_before

    t0 = time.monotonic()
    r = dexcli([a.address], "admin", "step-down", "--yes")
    took = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["leaseHolderAfterStepDown"] == "takenOverByAnotherProcess", out
    # The drain waited its whole timeout for the two 4 s Steps, then released.
    assert drain_s <= took < drain_s + 2, took
    line = a.proc.wait_for_line("stepped down: released the lease", 5)
    assert "(2 attempts interrupted)" in line, line

    # Interrupted by the drain's expiry: attempt 1 ended NOT_COMPLETED, and the retry runs as
    # attempt 2 (4 s of work: time to read its state).
    second = wait_slow_step(servers, "retried", 2, "RUNNING", timeout=30)
    failure = second.get("lastFailure", {})
    assert (failure.get("attempt"), failure.get("outcome"), failure.get("error")) == \
        (1, "NOT_COMPLETED", INTERRUPTED), second
    retried, no_retry, queued = (wait_closed(servers, f) for f in ("retried", "no-retry", "queued"))
    # Attempt 2 completed; the Worker's late result for attempt 1 changed nothing.
    assert retried["status"] == "COMPLETED", retried
    assert completions(retried) == [("Slow-1", 2)], retried["events"]
    assert retried["outputs"][0]["output"] == {"v": 1, "path": ["Slow"]}, retried
    # No retry left: the interruption consumed the only attempt.
    assert no_retry["status"] == "FAILED", no_retry
    failed = [(e["kind"], e.get("stepExecutionId"), e.get("attempt"), e.get("error"))
              for e in no_retry["events"] if e["kind"].startswith("EXECUTE_")]
    assert failed == [("EXECUTE_FAILED", "Slow-1", 1, INTERRUPTED)], no_retry["events"]
    # Never handed to a Worker before the release: it does not fail; the new active dispatches it.
    assert queued["status"] == "COMPLETED", queued
    assert completions(queued) == [("Slow-1", 1)], queued["events"]
    print(f"\n[drain expiry] step down {took:.2f}s with attemptDrainTimeout {drain_s}s; "
          f"retried: attempt 1 {failure.get('outcome')}, completed at "
          f"{completions(retried)}; no-retry: {failed}; queued: completed at {completions(queued)}")


@pytest.mark.parametrize("store", ["minio"], indirect=True)
def test_step_down_of_a_single_replica_takes_the_lease_back_after_the_hold_off(nodes, procs):
    a = nodes("a", mode="cold", extra="").start()
    assert a.wait_ready(60) == 1
    flow_worker(procs, [a.address], "--concurrency", "4", "--work-time", "5ms")
    t0 = time.monotonic()
    r = dexcli([a.address], "admin", "step-down", "--yes", "--expected-node-id", "node-h")
    took = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["leaseHolderAfterStepDown"] == "takenBackByThisProcess", out
    assert out["releasedNodeEpoch"] == "1" and out["activeNodeEpoch"] == "2", out
    assert took >= 5, f"took the lease back before the 5 s hold-off ({took:.2f}s)"
    # Spec: at most the drain (5 ms Steps), the release, the hold-off and one lease acquisition
    # (its own released lease: one read, one write), so about one hold-off.
    assert took < 5 + 2, took
    print(f"\n[single replica] step down {took:.2f}s with a 5 s hold-off")
    assert describe([a.address])["nodeEpoch"] == "2"
    a.proc.wait_for_line("epoch 2", 10)
    # The Worker's stream ended at the release; it reconnects and gets new tasks at once.
    r = start_e2e([a.address], "after")
    assert r.returncode == 0, r.stderr
    r = dexcli([a.address], "flow", "wait", "after", "--wait-timeout", "20s", timeout="30s")
    assert r.returncode == 0 and json.loads(r.stdout)["status"] == "COMPLETED", r.stdout + r.stderr


@pytest.mark.parametrize("store", ["filesystem"], indirect=True)
def test_describe_is_failed_precondition_during_the_hold_off(nodes):
    a = nodes("a", mode="cold").start()
    a.wait_ready(60)
    result = {}
    t = threading.Thread(target=lambda: result.update(r=dexcli([a.address], "admin", "step-down", "--yes")))
    t.start()
    a.proc.wait_for_line("stepped down: released the lease", 30)
    r = run(binary("dexcli"), "--server", a.address, "--timeout", "2s", "admin", "describe")
    assert r.returncode != 0 and "FAILED_PRECONDITION" in r.stderr, r.stdout + r.stderr
    t.join(60)
    assert result["r"].returncode == 0, result["r"].stderr


@pytest.mark.parametrize("store", ["filesystem"], indirect=True)
def test_a_wrong_node_id_or_credential_steps_nothing_down(nodes, tmp_path):
    token = tmp_path / "admin-token"
    token.write_text("the-admin-token\n")
    wrong = tmp_path / "wrong-token"
    wrong.write_text("not-the-token\n")
    a = nodes("a", mode="cold", extra=f"auth:\n  adminTokenFiles: [{token}]\n").start()
    a.wait_ready(60)
    assert "the-admin-token" not in a.proc.output()
    # No credential, or the wrong one: refused.
    r = dexcli([a.address], "admin", "step-down", "--yes", "--expected-node-id", "node-h",
               "--expected-node-epoch", "1", timeout="10s")
    assert r.returncode != 0 and "UNAUTHENTICATED" in r.stderr, r.stderr
    r = dexcli([a.address], "admin", "step-down", "--yes", "--expected-node-id", "node-h",
               "--expected-node-epoch", "1", timeout="10s", credential=wrong)
    assert r.returncode != 0 and "UNAUTHENTICATED" in r.stderr, r.stderr
    assert "not-the-token" not in r.stderr + r.stdout
    # A wrong node ID: refused after describe, nothing sent.
    r = dexcli([a.address], "admin", "step-down", "--yes", "--expected-node-id", "other-node",
               timeout="10s", credential=token)
    assert r.returncode != 0, r.stdout
    # The server-side precondition: another node ID or epoch changes nothing.
    r = dexcli([a.address], "admin", "step-down", "--yes", "--expected-node-id", "other-node",
               "--expected-node-epoch", "1", timeout="10s", credential=token)
    assert r.returncode != 0 and "FAILED_PRECONDITION" in r.stderr, r.stderr
    r = dexcli([a.address], "admin", "step-down", "--yes", "--expected-node-id", "node-h",
               "--expected-node-epoch", "7", timeout="10s", credential=token)
    assert r.returncode != 0 and "FAILED_PRECONDITION" in r.stderr, r.stderr
    assert describe([a.address], credential=token)["nodeEpoch"] == "1"
    assert "stepping down" not in a.proc.output()
