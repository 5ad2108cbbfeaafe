"""`dexcli flow ...` against a real `dex-server-zd dev` and the `dex-flow-examples worker`, as a
user runs it: JSON on stdout, errors as JSON on stderr with the gRPC code, exit 2 for usage (and
nothing sent), 1 for failed requests, 3 when a wait times out, 4 with --expect-completed when the
run closed otherwise; inputs from --input-file and stdin; --yes for mutations; --output table;
a hint when no Worker hosts the Flow type; `flow wait` and `flow watch` through a SIGKILL and
restart of the server; DEX_FLOW_SERVICE_ADDRESS.
"""
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import binary, free_port, run
from test_flow_examples import worker


class Dev:
    def __init__(self, procs, tmp_path):
        self.procs = procs
        self.address = f"127.0.0.1:{free_port()}"
        self.data = tmp_path / "data"
        self.proc = None
        self.start()

    def start(self):
        self.proc = self.procs(binary("dex-server-zd"), "dev", "--data-dir", self.data,
                               "--listen", self.address)
        self.proc.wait_for_line("dex-server-zd dev ready", 60)

    def kill(self):
        self.proc.signal(signal.SIGKILL)
        self.proc.wait_exit(10)


def cli(dev, *args, stdin=None, timeout=60, env=None):
    full = [str(binary("dexcli")), "--server", dev.address, *[str(a) for a in args]]
    return subprocess.run(full, capture_output=True, text=True, input=stdin, timeout=timeout,
                          env=env)


def ok_json(r):
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)


def error_of(r, code):
    assert r.returncode == code, r.stdout + r.stderr
    assert r.stdout == "", r.stdout
    return json.loads(r.stderr.strip().splitlines()[-1])["error"]


@pytest.fixture
def dev(procs, tmp_path):
    return Dev(procs, tmp_path)


def signup_input(tmp_path, resend_ms=600_000):
    path = tmp_path / "signup.json"
    path.write_text(json.dumps({"email": "ann@example.com", "code": "c-7", "resend_ms": resend_ms}))
    return path


def test_usage_errors_are_json_exit_2_and_send_nothing(dev, procs, tmp_path):
    worker(procs, [dev.address])
    ok_json(cli(dev, "flow", "start", "SignUp", "--flow-id", "u1", "--input-file",
                signup_input(tmp_path)))
    cases = [
        (["flow", "start", "SignUp"], "--flow-id is required"),
        (["flow", "start", "SignUp", "--flow-id", "u2", "--input", "{nope"], "not valid JSON"),
        (["flow", "start", "SignUp", "--flow-id", "u2", "--input", "{}", "--input-file", "x"],
         "not both"),
        (["flow", "start", "SignUp", "--flow-id", "u2", "--input-file", tmp_path / "missing"],
         "cannot read"),
        (["flow", "start", "SignUp", "--flow-id", "u2", "--id-reuse", "sometimes"],
         "--id-reuse must be one of"),
        (["flow", "start", "SignUp", "--flow-id", "u2", "--start-delay", "soon"], "--start-delay"),
        (["flow", "start", "SignUp", "--flow-id", "u2", "--timeout-policy", "handler"],
         "needs --flow-timeout"),
        (["flow", "start", "SignUp", "--flow-id", "u2", "--timeout-policy", "shrug",
          "--flow-timeout", "1m"], "--timeout-policy must be fail, cancel, handler"),
        (["flow", "start", "SignUp", "--flow-id", "u2", "--retry-interval", "0s"],
         "--retry-interval: invalid duration '0s'"),
        (["flow", "start", "SignUp", "--flow-id", "u2", "--retry-interval", "soon"],
         "--retry-interval"),
        (["flow", "start", "SignUp", "--flow-id", "u2", "--retry-runs", "-1"], "--retry-runs"),
        (["flow", "stop", "u1", "--yes"], "--run-id is required"),
        (["flow", "stop", "u1", "--run-id", "r"], "add --yes"),
        (["flow", "stop", "u1", "--run-id", "r", "--yes", "--mode", "fail"], "needs --reason"),
        (["flow", "publish", "u1", "verify", "--message", '{"code":"c-7"}'], "add --yes"),
        (["flow", "publish", "u1", "verify", "--yes"], "nothing to publish"),
        (["flow", "skip-timer", "u1", "AwaitVerification-1", "--yes"], "--condition-id"),
        (["flow", "skip-timer", "u1", "--yes"], "--flow-timeout or --start-delay"),
        (["flow", "skip-timer", "u1", "AwaitVerification-1", "--flow-timeout", "--yes"],
         "excludes"),
        (["flow", "wait", "u1", "--wait-timeout", "later"], "--wait-timeout"),
        (["flow", "describe", "u1", "--output", "yaml"], "--output must be json or table"),
        (["flow"], "needs one of these commands"),
    ]
    for args, message in cases:
        e = error_of(cli(dev, *args), 2)
        assert e["kind"] == "usage" and message in e["message"], (args, e)
        assert e["operation"].startswith("flow"), e
    # Nothing was sent: the run is untouched (no stop, no publish, no second run).
    state = ok_json(cli(dev, "flow", "state", "u1"))
    assert state["flow"]["status"] == "RUNNING" and state["flow"]["runs"] == 1, state
    history = ok_json(cli(dev, "flow", "history", "u1"))
    assert not [e for e in history["events"] if e["kind"] == "CHANNEL_PUBLISHED"], history
    assert cli(dev, "flow", "describe", "u2").returncode == 1  # never started


def test_request_errors_are_json_with_the_grpc_code_exit_1(dev, procs):
    e = error_of(cli(dev, "flow", "describe", "nobody"), 1)
    assert e == {"kind": "request", "operation": "flow describe",
                 "message": "no Flow with ID 'nobody'", "grpcCode": "NOT_FOUND"}, e
    e = error_of(cli(dev, "flow", "start", "NoSuchType", "--flow-id", "x"), 1)
    assert e["grpcCode"] == "INVALID_ARGUMENT" and "NoSuchType" in e["message"], e
    worker(procs, [dev.address])
    e = error_of(cli(dev, "flow", "publish", "nobody", "verify", "--message", "1", "--yes"), 1)
    assert e["grpcCode"] == "NOT_FOUND", e


def test_a_run_from_start_to_end_with_stdin_publish_skip_timer_and_tables(dev, procs, tmp_path):
    worker(procs, [dev.address]).kill()  # SignUp is declared; no Worker hosts it now
    env = dict(os.environ, DEX_FLOW_SERVICE_ADDRESS=dev.address)
    started = subprocess.run(  # the address from the environment, the input from stdin
        [str(binary("dexcli")), "flow", "start", "SignUp", "--flow-id", "s1", "--input-file", "-"],
        input=signup_input(tmp_path).read_text(), capture_output=True, text=True, env=env,
        timeout=30)
    out = ok_json(started)
    assert out["flowId"] == "s1" and out["runId"] and out["alreadyStarted"] is False, out

    # No Worker: the state says why nothing runs (once the server saw the Worker's stream end).
    deadline = time.monotonic() + 15
    while (state := ok_json(cli(dev, "flow", "state", "s1")))["workers"]:
        assert time.monotonic() < deadline, state
        time.sleep(0.1)
    assert state["workers"] == [] and state["active"][0]["taskState"] == "QUEUED", state
    assert any("no Worker connected to this server hosts Flow type 'SignUp'" in h
               for h in state["hints"]), state
    table = cli(dev, "flow", "state", "s1", "--output", "table").stdout
    assert "hint: SendEmail-1 waits for a Worker" in table and "Workers hosting SignUp: none" in table

    worker(procs, [dev.address])
    deadline = time.monotonic() + 30
    while True:
        state = ok_json(cli(dev, "flow", "state", "s1"))
        waiting = [a for a in state["active"] if a["phase"] == "WAITING"]
        if waiting:
            break
        assert time.monotonic() < deadline, state
        time.sleep(0.1)
    assert state["workers"] and "hints" not in state, state
    assert waiting[0]["stepExecutionId"] == "AwaitVerification-1", state
    # The ended executions (the e-mail sent); no message is queued, the run has no Attributes.
    assert [(e["stepExecutionId"], e["phase"], e["method"]) for e in state["ended"]] == [
        ("SendEmail-1", "DONE", "EXECUTE")], state
    assert state["endedCount"] == 1 and "queues" not in state and "attributes" not in state, state
    table = cli(dev, "flow", "state", "s1", "--output", "table").stdout
    for text in ("Ended Step executions (1 in all, newest first):", "SendEmail-1",
                 "Queued Channel messages:\n(none)", "Attributes:\n(none)"):
        assert text in table, table
    table = cli(dev, "flow", "state", "s1", "--output", "table", "--phase", "WAITING").stdout
    assert "AwaitVerification-1" in table and "channel verify FOR_ONE (0 queued)" in table, table

    # Skip the resend Timer (index 1): the Step sends the e-mail again and waits anew.
    ok_json(cli(dev, "flow", "skip-timer", "s1", "AwaitVerification-1", "--condition-index", "1",
                "--yes"))
    ok_json(cli(dev, "flow", "publish", "s1", "verify", "--message", '{"code": "wrong"}', "--yes"))
    r = cli(dev, "flow", "publish", "s1", "verify", "--input-file", "-", "--yes",
            "--request-id", "the-code", stdin='{"code": "c-7"}')
    assert ok_json(r) == {"flowId": "s1", "channel": "verify", "published": 1,
                          "requestId": "the-code"}

    done = ok_json(cli(dev, "flow", "wait", "s1", "--expect-completed", "--wait-timeout", "30s"))
    assert done["status"] == "COMPLETED", done
    assert done["outputs"][0]["output"] == {"verified": "ann@example.com", "wrong_codes": 1,
                                            "sends": 2}, done
    # One JSON shape per object: wait and describe print the same FlowDescription.
    assert ok_json(cli(dev, "flow", "describe", "s1")) == done

    history = ok_json(cli(dev, "flow", "history", "s1"))
    kinds = [e["kind"] for e in history["events"]]
    assert kinds[0] == "FLOW_STARTED" and kinds[-1] == "FLOW_CLOSED", kinds
    assert [e["seq"] for e in history["events"]] == list(range(len(kinds))), history
    assert kinds.count("CHANNEL_PUBLISHED") == 2 and kinds.count("TIMER_SKIPPED") == 1, kinds
    only = ok_json(cli(dev, "flow", "history", "s1", "--kind", "CHANNEL_PUBLISHED"))
    assert [e["publish"]["messages"] for e in only["events"]] == [[{"code": "wrong"}],
                                                                  [{"code": "c-7"}]], only
    table = cli(dev, "flow", "history", "s1", "--output", "table").stdout.splitlines()
    assert table[0].split()[:3] == ["SEQ", "TIME", "EVENT"], table
    assert "FLOW_CLOSED" in table[1] and "FLOW_STARTED" in table[-1], table  # newest first
    assert " UTC (" in table[1] and "ago)" in table[1], table
    described = cli(dev, "flow", "describe", "s1", "--output", "table").stdout
    assert "Status:" in described and "COMPLETED" in described and "Took:" in described


def test_stop_needs_yes_and_expect_completed_exits_4(dev, procs, tmp_path):
    worker(procs, [dev.address])
    run_id = ok_json(cli(dev, "flow", "start", "SignUp", "--flow-id", "f1", "--input-file",
                         signup_input(tmp_path)))["runId"]
    r = cli(dev, "flow", "wait", "f1", "--wait-timeout", "300ms")
    assert r.returncode == 3, r.stdout + r.stderr
    assert json.loads(r.stdout)["status"] == "RUNNING"
    assert json.loads(r.stderr)["error"]["kind"] == "timeout", r.stderr

    # FlowConfig (docs/cli.md, "flow config"): flow state shows the run's effective config,
    # flow config changes it on the exact run with --yes, recorded in the history.
    assert ok_json(cli(dev, "flow", "state", "f1"))["config"] == {
        "defaultDurability": "SYNC", "indexActiveStepTypes": True}
    e = error_of(cli(dev, "flow", "config", "f1", "--durability", "async", "--yes"), 2)
    assert e["operation"] == "flow config" and "--run-id is required" in e["message"], e
    e = error_of(cli(dev, "flow", "config", "f1", "--run-id", run_id, "--durability", "async"), 2)
    assert "add --yes" in e["message"], e
    change = ["flow", "config", "f1", "--run-id", run_id, "--durability", "async",
              "--index-active-step-types", "false", "--continue-as-new-after-events", "5000",
              "--request-id", "cfg-1", "--yes"]
    out = ok_json(cli(dev, *change))
    assert out["config"] == {"continueAsNewAfterEvents": 5000, "defaultDurability": "ASYNC",
                             "indexActiveStepTypes": False}, out
    assert out["alreadyDone"] is False and out["requestId"] == "cfg-1", out
    assert ok_json(cli(dev, *change))["alreadyDone"] is True  # a repeat changes nothing
    table = cli(dev, "flow", "state", "f1", "--output", "table").stdout
    assert ("FlowConfig: durability ASYNC, continue-as-new after 5000 events, continue-as-new "
            "after never, Attribute Store none, ActiveStepTypes not indexed") in table, table
    updates = [e for e in ok_json(cli(dev, "flow", "history", "f1"))["events"]
               if e["kind"] == "FLOW_CONFIG_UPDATED"]
    assert len(updates) == 1 and updates[0]["newConfig"]["defaultDurability"] == "ASYNC", updates
    e = error_of(cli(dev, "flow", "config", "f1", "--run-id", run_id, "--attribute-store", "crm",
                     "--yes"), 1)
    assert e["grpcCode"] == "FAILED_PRECONDITION" and "cannot change" in e["message"], e
    out = ok_json(cli(dev, "flow", "config", "f1", "--run-id", run_id, "--clear", "durability",
                      "--clear", "index-active-step-types", "--yes"))
    assert out["config"] == {"continueAsNewAfterEvents": 5000, "defaultDurability": "SYNC",
                             "indexActiveStepTypes": True}, out

    out = ok_json(cli(dev, "flow", "stop", "f1", "--run-id", run_id, "--mode", "fail", "--reason",
                      "fraud", "--yes"))
    assert out["stopped"] is True and out["mode"] == "FAIL" and out["runId"] == run_id, out
    r = cli(dev, "flow", "wait", "f1", "--expect-completed")
    assert r.returncode == 4, r.stdout + r.stderr
    assert json.loads(r.stdout)["status"] == "FAILED"
    assert json.loads(r.stdout)["closeReason"].find("fraud") >= 0, r.stdout
    assert cli(dev, "flow", "wait", "f1").returncode == 0  # without the flag: it closed


def test_stop_needs_the_exact_run_id(dev, procs, tmp_path):
    """`flow stop` stops only the run it names: without --run-id it is a usage error (exit 2,
    nothing sent), and a run ID that is not the Flow ID's (or no longer its running run) is
    refused by the server, the running run untouched."""
    worker(procs, [dev.address])

    def start():
        return ok_json(cli(dev, "flow", "start", "SignUp", "--flow-id", "x1", "--input-file",
                           signup_input(tmp_path)))["runId"]

    def running(run_id):
        d = ok_json(cli(dev, "flow", "describe", "x1"))
        assert d["status"] == "RUNNING" and d["runId"] == run_id, d
        closed = [e for e in ok_json(cli(dev, "flow", "history", "x1"))["events"]
                  if e["kind"] == "FLOW_CLOSED"]
        assert not closed, closed

    first = start()
    e = error_of(cli(dev, "flow", "stop", "x1", "--yes", "--mode", "terminate"), 2)
    assert e["kind"] == "usage" and e["operation"] == "flow stop", e
    assert "--run-id is required" in e["message"], e
    assert "dexcli flow describe x1" in e["message"], e  # where to find the run ID
    running(first)
    e = error_of(cli(dev, "flow", "stop", "x1", "--run-id", "", "--yes"), 2)  # empty: none
    assert "--run-id is required" in e["message"], e
    running(first)

    e = error_of(cli(dev, "flow", "stop", "x1", "--run-id", "no-such-run", "--yes"), 1)
    assert e["grpcCode"] == "NOT_FOUND" and "no-such-run" in e["message"], e
    running(first)

    # A stale run ID: the run it named closed and the Flow ID started again since.
    out = ok_json(cli(dev, "flow", "stop", "x1", "--run-id", first, "--yes"))
    assert out["runId"] == first and out["mode"] == "CANCEL", out
    second = start()
    assert second != first
    e = error_of(cli(dev, "flow", "stop", "x1", "--run-id", first, "--yes"), 1)
    assert e["grpcCode"] == "FAILED_PRECONDITION", e
    assert first in e["message"] and "already CANCELED" in e["message"], e
    running(second)
    ok_json(cli(dev, "flow", "stop", "x1", "--run-id", second, "--yes"))
    assert ok_json(cli(dev, "flow", "describe", "x1"))["status"] == "CANCELED"


def test_wait_and_watch_keep_going_through_a_sigkill_of_the_server(dev, procs, tmp_path):
    w = worker(procs, [dev.address])
    ok_json(cli(dev, "flow", "start", "SignUp", "--flow-id", "k1", "--input-file",
                signup_input(tmp_path)))
    base = [binary("dexcli"), "--server", dev.address, "flow"]
    waiter = procs(*base, "wait", "k1", "--wait-timeout", "60s", "--expect-completed")
    watcher = procs(*base, "watch", "k1")
    watcher.wait_for_line('"WAIT_FOR_COMPLETED"', 30)
    dev.kill()
    time.sleep(1.0)  # both see the server gone
    dev.start()
    ok_json(cli(dev, "flow", "publish", "k1", "verify", "--message", '{"code": "c-7"}', "--yes"))
    assert waiter.wait_exit(60) == 0, waiter.output()
    assert json.loads(waiter.output()[waiter.output().index("{"):])["status"] == "COMPLETED"
    assert watcher.wait_exit(60) == 0, watcher.output()
    events = [json.loads(l) for l in watcher.lines if l.startswith("{")]
    seqs = [e["seq"] for e in events]
    assert seqs == list(range(len(seqs))), seqs  # each event once, in order, across the restart
    assert events[-1]["kind"] == "FLOW_CLOSED" and events[-1]["status"] == "COMPLETED", events
    assert all(e["flowId"] == "k1" and e["runId"] == events[0]["runId"] for e in events)
    w.kill()


def test_start_with_a_flow_retry_policy_and_the_handler_timeout_policy(dev, procs):
    worker(procs, [dev.address])
    # RetryOnce fails its first run on purpose; --retry-runs lets a second run complete it.
    ok_json(cli(dev, "flow", "start", "RetryOnce", "--flow-id", "r1", "--input",
                '{"fail_runs": 1}', "--retry-runs", "3", "--retry-interval", "200ms"))
    out = ok_json(cli(dev, "flow", "wait", "r1", "--expect-completed"))
    assert out["status"] == "COMPLETED", out
    described = ok_json(cli(dev, "flow", "describe", "r1"))
    assert described["runs"] == 2 and described["runId"].endswith(".2"), described
    # Without a retry policy the same failure is the end.
    ok_json(cli(dev, "flow", "start", "RetryOnce", "--flow-id", "r2", "--input",
                '{"fail_runs": 1}'))
    assert ok_json(cli(dev, "flow", "wait", "r2"))["status"] == "FAILED"
    # HANDLER is refused, naming the reason, for a type without a timeout handler.
    e = error_of(cli(dev, "flow", "start", "RetryOnce", "--flow-id", "r3", "--flow-timeout",
                     "1m", "--timeout-policy", "handler"), 1)
    assert e["grpcCode"] == "INVALID_ARGUMENT" and "timeout handler" in e["message"], e
    # A run's own Timers skip too: the start delay (the start Step runs now), then the
    # flow timeout (its policy, fail, ends the run TIMED_OUT now).
    ok_json(cli(dev, "flow", "start", "RetryOnce", "--flow-id", "r4", "--input",
                '{"fail_runs": 0}', "--start-delay", "1h", "--flow-timeout", "2h"))
    out = ok_json(cli(dev, "flow", "skip-timer", "r4", "--start-delay", "--yes"))
    assert out["timer"] == "startDelay" and out["skipped"], out
    assert ok_json(cli(dev, "flow", "wait", "r4", "--wait-timeout", "30s"))["status"] == "COMPLETED"
    ok_json(cli(dev, "flow", "start", "RetryOnce", "--flow-id", "r5", "--input",
                '{"fail_runs": 0}', "--start-delay", "1h", "--flow-timeout", "2h"))
    ok_json(cli(dev, "flow", "skip-timer", "r5", "--flow-timeout", "--yes"))
    timed_out = ok_json(cli(dev, "flow", "describe", "r5"))
    assert timed_out["status"] == "TIMED_OUT", timed_out
    e = error_of(cli(dev, "flow", "skip-timer", "r5", "--flow-timeout", "--yes"), 1)
    assert e["grpcCode"] == "FAILED_PRECONDITION", e
