"""Step down the active process (spec: Step down the active process), with real `serve`
processes against MinIO and `dexcli admin step-down`:

- with a hot standby: taken over by another process; no acknowledged flow is lost; drained
  attempts complete or fail NOT_COMPLETED by the recovery rules; the stepped-down process keeps
  running as a hot standby; a retry with the original epoch gets FAILED_PRECONDITION;
- on a single replica: the same process takes the lease back after the hold-off, with a higher
  epoch; describe answers FAILED_PRECONDITION meanwhile;
- a wrong --expected-node-id steps nothing down; a missing or wrong credential is refused.
"""
import json
import signal
import time

from conftest import binary, run
from test_hot_standby import HotNode, Load, wait_flows
from test_recovery import FLOW_TYPE, check_recovery_rules, summarize

import pytest
import uuid


def dexcli(servers, *args, timeout="2m", credential=None):
    extra = ["--credential-file", str(credential)] if credential else []
    cmd = [binary("dexcli"), "--server", ",".join(servers), "--timeout", timeout] + list(args)
    if args and args[0] == "admin":
        cmd += extra
    return run(*cmd, timeout=180)


@pytest.fixture
def nodes(procs, tmp_path, minio):
    prefix = f"d-{uuid.uuid4().hex[:8]}"
    ports = {}

    def make(name, mode="hot", extra=""):
        node = HotNode(procs, tmp_path, minio, prefix, name, mode, ports.get(name))
        ports[name] = (node.api_port, node.metrics_port)
        if extra:
            node.config.write_text(node.config.read_text() + extra)
        return node

    return make


def describe(servers, credential=None):
    r = dexcli(servers, "admin", "describe", timeout="10s", credential=credential)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_step_down_with_a_hot_standby_is_taken_over_and_loses_nothing(nodes, procs):
    extra = "lifecycle:\n  attemptDrainTimeout: 5s\n"
    a = nodes("a", extra=extra).start()
    assert a.wait_ready(60) == 1
    b = nodes("b", extra=extra).start()
    b.wait_following()
    servers = [a.address, b.address]
    assert dexcli(servers, "flow-type", "register", FLOW_TYPE).returncode == 0
    worker = procs(binary("dex-example-worker"), "--server", ",".join(servers), "--no-register",
                   "--concurrency", "16", "--work-time", "50ms")
    worker.wait_for_line("connected", 30)
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
    assert took < 5 + 10, took  # drain (at most 5 s) + release + the standby's takeover

    # A retry with the original epoch changes nothing.
    r = dexcli(servers, "admin", "step-down", "--yes", "--expected-node-id", "node-h",
               "--expected-node-epoch", "1", timeout="20s")
    assert r.returncode != 0 and "FAILED_PRECONDITION" in r.stderr, r.stdout + r.stderr
    assert describe(servers)["nodeEpoch"] == "2"

    # The stepped-down process keeps running, as a hot standby after the hold-off.
    assert a.proc.p.poll() is None
    a.wait_following(60)
    assert a.health("") == "NOT_SERVING"

    time.sleep(2)
    load.finish()
    flows = wait_flows(servers, load.acknowledged)
    problems = check_recovery_rules(flows, load.acknowledged, server_died=True)
    print(f"\n[step-down] call {took:.2f}s; {len(load.acknowledged)} flows acknowledged; "
          f"outcomes {summarize(flows)}")
    assert load.acknowledged and not problems, "\n".join(problems[:20])


def test_step_down_of_a_single_replica_takes_the_lease_back_after_the_hold_off(nodes, procs):
    a = nodes("a", mode="cold", extra="").start()
    assert a.wait_ready(60) == 1
    assert dexcli([a.address], "flow-type", "register", FLOW_TYPE).returncode == 0
    worker = procs(binary("dex-example-worker"), "--server", a.address, "--no-register",
                   "--concurrency", "4", "--work-time", "5ms")
    worker.wait_for_line("connected", 30)
    t0 = time.monotonic()
    r = dexcli([a.address], "admin", "step-down", "--yes", "--expected-node-id", "node-h")
    took = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["leaseHolderAfterStepDown"] == "takenBackByThisProcess", out
    assert out["releasedNodeEpoch"] == "1" and out["activeNodeEpoch"] == "2", out
    assert took >= 5, f"took the lease back before the 5 s hold-off ({took:.2f}s)"
    assert took < 5 + 10, took
    assert describe([a.address])["nodeEpoch"] == "2"
    a.proc.wait_for_line("epoch 2", 10)
    # The Worker's stream ended at the release; it reconnects and gets new tasks at once.
    r = dexcli([a.address], "flow", "start", "e2e-three-step", "--flow-id", "after", "--input", "{}")
    assert r.returncode == 0, r.stderr
    r = dexcli([a.address], "flow", "wait", "after", "--wait-timeout", "20s", timeout="30s")
    assert r.returncode == 0 and json.loads(r.stdout)["flow"]["status"] == "COMPLETED", r.stdout + r.stderr


def test_describe_is_failed_precondition_during_the_hold_off(nodes):
    a = nodes("a", mode="cold").start()
    a.wait_ready(60)
    import threading
    result = {}
    t = threading.Thread(target=lambda: result.update(r=dexcli([a.address], "admin", "step-down", "--yes")))
    t.start()
    a.proc.wait_for_line("stepped down: released the lease", 30)
    r = run(binary("dexcli"), "--server", a.address, "--timeout", "2s", "admin", "describe")
    assert r.returncode != 0 and "FAILED_PRECONDITION" in r.stderr, r.stdout + r.stderr
    t.join(60)
    assert result["r"].returncode == 0, result["r"].stderr


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
