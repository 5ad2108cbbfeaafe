"""A Worker killed mid-attempt (docs/engine.md, "Workers that vanish"): its attempt waits for it for
flows.workerReconnectGrace, then ends NOT_COMPLETED and is retried at once by another Worker,
instead of waiting out the attempt timeout (60 s for E2ESlowStep).

`dex-server-zd dev` with a 2 s grace; Worker "wa" takes the one Step of an E2ESlowStep run
(2 attempts, 100 ms apart; its work takes 60 s there) and is SIGKILLed; Worker "wb" (50 ms of
work) is connected by then. The run must complete with attempt 2 on "wb", and the server's
history must show the retry starting within the grace + 1 s of the kill.
"""
import json
import signal
import time

from conftest import binary, free_port, run

GRACE_S = 2


def dexcli(address, *args):
    r = run(binary("dexcli"), "--server", address, *[str(a) for a in args], timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)


def worker(procs, address, worker_id, work_time):
    w = procs(binary("dex-flow-examples"), "worker", "--server", address, "--worker-id", worker_id,
              "--work-time", work_time)
    w.wait_for_line("connected to", 30)
    return w


def step(state, exec_id):
    return next((s for s in state.get("active", []) if s["stepExecutionId"] == exec_id), None)


def test_a_killed_workers_attempt_is_retried_within_the_grace_plus_one_second(procs, tmp_path):
    config = tmp_path / "dev.yaml"
    config.write_text(f"flows:\n  workerReconnectGrace: {GRACE_S}s\n")
    address = f"127.0.0.1:{free_port()}"
    dev = procs(binary("dex-server-zd"), "dev", "--data-dir", tmp_path / "data", "--listen",
                address, "--config", config)
    dev.wait_for_line("dex-server-zd dev ready", 60)
    wa = worker(procs, address, "wa", "60s")
    dexcli(address, "flow", "start", "E2ESlowStep", "--flow-id", "v1", "--input", "{}")
    deadline = time.monotonic() + 30
    while True:
        s = step(dexcli(address, "flow", "state", "v1"), "Slow-1")
        if s and s.get("workerId") == "wa" and s.get("taskState") == "RUNNING":
            break
        assert time.monotonic() < deadline, s
        time.sleep(0.1)
    worker(procs, address, "wb", "50ms")

    killed_at_ms = int(time.time() * 1000)
    wa.signal(signal.SIGKILL)
    waited = dexcli(address, "flow", "wait", "v1", "--wait-timeout", "30s", "--expect-completed")
    assert waited["status"] == "COMPLETED", waited

    history = dexcli(address, "flow", "history", "v1")["events"]
    failed = [e for e in history if e["kind"] == "EXECUTE_FAILED"]
    assert failed == [], failed  # the retry completed: no Step failed for good
    done = [e for e in history if e["kind"] == "EXECUTE_COMPLETED"]
    assert len(done) == 1 and done[0]["attempt"] == 2, done
    # Attempt 2 completed within the grace + 1 s of the kill, its backoff (100 ms) and 50 ms of
    # work included: the attempt did not wait out its 60 s attempt timeout.
    retried_after_s = (int(done[0]["atMs"]) - killed_at_ms) / 1000
    assert retried_after_s <= GRACE_S + 1, retried_after_s
    state = dexcli(address, "flow", "describe", "v1")
    assert state["status"] == "COMPLETED", state
    print(f"attempt 2 completed {retried_after_s:.2f} s after the Worker was killed "
          f"(grace {GRACE_S} s)")
