"""The dex Flow examples (examples/flows/) end to end with real processes: `dex-server-zd`, the
`dex-flow-examples worker` and one `dex-flow-examples drive <example>` per example.

- each example completes as it should against `dex-server-zd dev`, with the server SIGKILLed in
  the middle of the run and started again on the same data directory;
- each example completes through a hot standby's takeover in `serve` after a SIGKILL of the
  active process (filesystem object store, 3 s lease);
- every acknowledged start and publish is accounted for: the run's history holds each publish the
  driver saw acknowledged exactly once, and a single run per Flow ID;
- Attributes, RPCs and lock keys: OrderProcessing approved and described by RPCs with its
  `order-status`; MoneyTransfer's debit, its compensation of a failed credit (balance restored)
  and its refusal without funds; AttrRpcDemo's RPCs; E2ECounter's 20 concurrent `add`s counted
  once each under its lock.
- SubFlows and Flow retries: FanOut's 100 children all COMPLETED and summed by the parent (also
  through a SIGKILL of `dev`), the tree in `dexcli flow inspect`; RetryOnce's first run FAILED
  and its second COMPLETED, followed by a wait for the Flow ID.
"""
import json
import signal
import time

import pytest

from conftest import Proc, binary, free_port, parallel, run
from test_hot_standby import HotNode

EXAMPLES = ("order", "order-refund", "signup", "quotes")


def drive(procs, example, flow_id, servers):
    args = [binary("dex-flow-examples"), "drive", example, "--flow-id", flow_id]
    for s in servers:
        args += ["--server", s]
    return procs(*args)


def worker(procs, servers):
    args = [binary("dex-flow-examples"), "worker"]
    for s in servers:
        args += ["--server", s]
    w = procs(*args)
    w.wait_for_line("connected to", 30)  # its hello declared the Flows durably
    return w


def result_of(proc, timeout=120):
    code = proc.wait_exit(timeout)
    lines = [json.loads(l) for l in proc.lines if l.startswith("{")]
    results = [l for l in lines if l.get("event") == "result"]
    assert results, f"no result (exit {code}):\n" + proc.output()
    assert code == 0, proc.output()
    return results[-1], lines


def check_example(example, result, lines):
    assert result["status"] == "FLOW_COMPLETED" and result["closed"], result
    out = result["outputs"][0]["output"]
    if example == "order":
        assert out["status"] == "shipped" and out["approved_by"] == {"seller": "s-1"}
        assert out["charged_on_attempt"] == 3  # two declined attempts, retried
        assert out["reminders"] >= 1  # the reminder Timer looped Ship at least once
    elif example == "order-refund":
        assert out["status"] == "refunded" and "carrier refused" in out["reason"]
    elif example == "signup":
        assert out["verified"] == "ann@example.com" and out["wrong_codes"] == 1
        assert out["sends"] >= 2  # the resend loop sent a second e-mail
    else:
        assert out["winner"] == {"carrier": "B", "price": 9}  # C (slowest) was canceled
    # Every acknowledged start and publish is accounted for: one run, and each publish the
    # driver saw acknowledged appears once in the run's history (a publish repeated after a
    # failover carries the same request ID and adds nothing).
    published = [l["message"] for l in lines if l.get("event") == "published"]
    assert result["runs"] == 1, result
    assert result["history_publishes"] == published, result


@pytest.mark.parametrize("example", EXAMPLES)
def test_each_example_completes_through_a_sigkill_of_dev(procs, tmp_path, example):
    port = free_port()
    address = f"127.0.0.1:{port}"
    data = tmp_path / "data"

    def start_dev():
        d = procs(binary("dex-server-zd"), "dev", "--data-dir", data, "--listen", address)
        d.wait_for_line("dex-server-zd dev ready", 60)
        return d

    server = start_dev()
    worker(procs, [address])
    driver = drive(procs, example, f"{example}-1", [address])
    driver.wait_for_line('"event":"started"', 30)
    server.signal(signal.SIGKILL)
    server.wait_exit(10)
    start_dev()
    result, lines = result_of(driver)
    check_example(example, result, lines)


@pytest.mark.parametrize("store", ["filesystem"], indirect=True)
def test_each_example_completes_through_a_hot_standby_takeover(procs, tmp_path, store):
    active = HotNode(procs, tmp_path, store, "a").start()
    active.wait_ready(60)
    standby = HotNode(procs, tmp_path, store, "b").start()
    standby.wait_following()
    servers = [active.address, standby.address]
    worker(procs, servers)
    drivers = {ex: drive(procs, ex, f"{ex}-ha", servers) for ex in EXAMPLES}
    for d in drivers.values():
        d.wait_for_line('"event":"started"', 30)
    active.proc.signal(signal.SIGKILL)
    standby.wait_ready(30)
    for example, d in drivers.items():
        result, lines = result_of(d, 180)
        check_example(example, result, lines)


# ---------------------------------------------------------------------------------------------
# Attributes, RPCs and lock keys (issue 15): the examples against `dex-server-zd dev`, read and
# driven with dexcli (`flow rpc`, `flow attributes get|set`) and, where a start needs initial
# Attributes, with `dex-flow-examples drive transfer`.

class Dev:
    """A `dex-server-zd dev` with the examples' Worker connected."""

    def __init__(self, procs, data):
        self.address = f"127.0.0.1:{free_port()}"
        procs(binary("dex-server-zd"), "dev", "--data-dir", data, "--listen",
              self.address).wait_for_line("dex-server-zd dev ready", 60)
        worker(procs, [self.address])


def cli(dev, *args):
    return run(binary("dexcli"), "--server", dev.address, *args, timeout=120)


def ok_json(r):
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)


def error_of(r, code):
    """The error dexcli printed (JSON on stderr) when it exited with `code`."""
    assert r.returncode == code, r.stdout + r.stderr
    return json.loads(r.stderr.strip().splitlines()[-1])["error"]


def attributes_of(dev, flow_id):
    """{key or key[instance]: value} of a run's Attributes (`dexcli flow attributes get`)."""
    got = ok_json(cli(dev, "flow", "attributes", "get", flow_id))["attributes"]
    return {a["key"] + (f"[{a['instanceKey']}]" if a.get("instanceKey") else ""): a["value"]
            for a in got}


def wait_attribute(dev, flow_id, key, value, timeout=30):
    deadline = time.monotonic() + timeout
    while attributes_of(dev, flow_id).get(key) != value:
        assert time.monotonic() < deadline, cli(dev, "flow", "inspect", flow_id).stdout
        time.sleep(0.1)


def rpc(dev, flow_id, name, flow_input="{}", *args):
    return ok_json(cli(dev, "flow", "rpc", flow_id, name, "--yes", "--input", flow_input,
                       *args))["output"]


def wait_completed(dev, flow_id):
    done = ok_json(cli(dev, "flow", "wait", flow_id, "--expect-completed", "--wait-timeout",
                       "60s"))
    return done["outputs"][0]["output"]


@pytest.fixture
def dev_worker(procs, tmp_path):
    return Dev(procs, tmp_path / "data")


def test_order_processing_is_approved_and_described_by_rpcs(dev_worker):
    dev = dev_worker
    order = json.dumps({"order": "o-rpc", "reminder_ms": 600000})
    ok_json(cli(dev, "flow", "start", "OrderProcessing", "--flow-id", "o-rpc", "--input", order))
    # Ship's WaitFor wrote the status with its Wait: the run waits for the approval.
    wait_attribute(dev, "o-rpc", "order-status", "awaiting-approval")
    assert rpc(dev, "o-rpc", "describe") == {"status": "awaiting-approval"}
    # approve publishes the approval Ship waits on.
    assert rpc(dev, "o-rpc", "approve", '{"seller": "s-9"}') == {"approved": True}
    out = wait_completed(dev, "o-rpc")
    assert out["status"] == "shipped" and out["approved_by"] == {"seller": "s-9"}, out
    assert out["reminders"] == 0, out
    # The status stays readable after the close; the closed run takes no RPC.
    assert attributes_of(dev, "o-rpc") == {"order-status": "shipped"}
    e = error_of(cli(dev, "flow", "rpc", "o-rpc", "describe", "--yes"), 1)
    assert e["grpcCode"] == "FAILED_PRECONDITION", e
    # An approval without a seller fails the RPC with the handler's message, and publishes
    # nothing: the refund path below still needs its approval.
    refund = json.dumps({"order": "o-ref", "reminder_ms": 600000, "fail_shipping": True})
    ok_json(cli(dev, "flow", "start", "OrderProcessing", "--flow-id", "o-ref", "--input", refund))
    wait_attribute(dev, "o-ref", "order-status", "awaiting-approval")
    e = error_of(cli(dev, "flow", "rpc", "o-ref", "approve", "--yes", "--input", "{}"), 1)
    assert e["grpcCode"] == "FAILED_PRECONDITION" and "approve takes" in e["message"], e
    assert rpc(dev, "o-ref", "approve", '{"seller": "s-1"}') == {"approved": True}
    assert wait_completed(dev, "o-ref")["status"] == "refunded"
    assert attributes_of(dev, "o-ref") == {"order-status": "refunded"}


@pytest.mark.parametrize("example", ["transfer", "transfer-compensate"])
def test_money_transfer_debits_and_compensates_a_failed_credit(procs, dev_worker, example):
    dev = dev_worker
    flow_id = f"{example}-1"
    result, lines = result_of(drive(procs, example, flow_id, [dev.address]))
    out = result["outputs"][0]["output"]
    if example == "transfer":
        assert out == {"status": "transferred", "amount": 30, "to": "acct-2"}, out
        assert result["attributes"] == {"balance": 70, "transferred": True}, result
    else:
        # Debit held the balance's lock from the start: the RPC waited for its write, and came
        # before the compensation (seconds later, after Credit's retries).
        answers = [l["output"] for l in lines if l.get("event") == "rpc"]
        assert answers == [{"balance": 70}], lines
        assert out["status"] == "compensated" and out["balance"] == 100, out
        assert "refused the credit" in out["reason"], out
        assert result["attributes"] == {"balance": 100, "transferred": False}, result
    assert attributes_of(dev, flow_id) == result["attributes"]
    # The history shows each lock held and released by Debit (and Compensate).
    kinds = [e["kind"] for e in ok_json(cli(dev, "flow", "history", flow_id))["events"]]
    locks = 2 if example == "transfer-compensate" else 1
    assert kinds.count("LOCKS_ACQUIRED") >= locks and "LOCKS_RELEASED" in kinds, kinds


def test_money_transfer_without_the_funds_fails_at_once(dev_worker):
    dev = dev_worker
    ok_json(cli(dev, "flow", "start", "MoneyTransfer", "--flow-id", "poor", "--input",
                '{"amount": 30}'))  # no initial balance: 0
    r = cli(dev, "flow", "wait", "poor", "--expect-completed", "--wait-timeout", "30s")
    assert r.returncode == 4, r.stdout + r.stderr
    done = json.loads(r.stdout)
    assert done["status"] == "FAILED" and "insufficient funds" in done["closeReason"], done
    assert attributes_of(dev, "poor") == {}


def test_attr_rpc_demo_rpcs_read_and_write_its_status(dev_worker):
    dev = dev_worker
    ok_json(cli(dev, "flow", "start", "AttrRpcDemo", "--flow-id", "demo"))
    wait_attribute(dev, "demo", "status", "started")
    assert rpc(dev, "demo", "describe") == {"status": "started"}
    assert rpc(dev, "demo", "set-status", '{"status": "busy"}') == {"ok": True}
    assert rpc(dev, "demo", "describe") == {"status": "busy"}
    ok_json(cli(dev, "flow", "attributes", "set", "demo", "--yes", "--int", "counts[eu]=2"))
    ok_json(cli(dev, "flow", "publish", "demo", "done", "--yes", "--message", '{"bye": 1}'))
    assert wait_completed(dev, "demo") == {"done": {"bye": 1}, "status": "busy",
                                           "counts": {"eu": 2}}


def test_e2e_counter_counts_concurrent_adds_once_each(dev_worker):
    dev = dev_worker
    ok_json(cli(dev, "flow", "start", "E2ECounter", "--flow-id", "count"))
    ids = [f"id-{i}" for i in range(20)]
    n = {i: k + 1 for k, i in enumerate(ids)}
    outputs = parallel(lambda i: rpc(dev, "count", "add", json.dumps({"id": i, "n": n[i]}),
                                     "--rpc-timeout", "30s"), ids, threads=20)
    # Under the lock each add saw the total the previous one wrote: twenty different totals,
    # the last the sum.
    totals = sorted(o["total"] for o in outputs.values())
    assert len(set(totals)) == 20 and totals[-1] == sum(n.values()), outputs
    assert not [o for o in outputs.values() if "repeat" in o], outputs
    got = attributes_of(dev, "count")
    assert got["total"] == 210 and {k: v for k, v in got.items() if k.startswith("applied")} == {
        f"applied[{i}]": n[i] for i in ids}, got
    # An id already applied is not counted again, even with another request ID and n.
    assert rpc(dev, "count", "add", '{"id": "id-3", "n": 1000}') == {"total": 210, "repeat": True}
    # `note` is the clients'.
    ok_json(cli(dev, "flow", "attributes", "set", "count", "--yes", "note[ops]=checked"))
    assert attributes_of(dev, "count")["note[ops]"] == "checked"
    ok_json(cli(dev, "flow", "publish", "count", "stop", "--yes", "--message", "{}"))
    assert wait_completed(dev, "count") == {"total": 210}


# ---------------------------------------------------------------------------------------------
# SubFlows and Flow retries (issue 15): FanOut's 100 children and RetryOnce's second run against
# `dex-server-zd dev`, read back with dexcli.

FANOUT_SUM = sum((i + 1) ** 2 for i in range(100))  # 338350


def check_fanout(result, flow_id):
    assert result["status"] == "FLOW_COMPLETED" and result["closed"], result
    assert result["outputs"][0]["output"] == {"children": 100, "sum": FANOUT_SUM}, result
    assert result["children_completed"] == 100, result
    assert result["children_square_sum"] == FANOUT_SUM, result  # each child's Attribute
    assert result["first_child"]["flow_id"] == f"{flow_id}/Fan-1/0", result
    assert result["first_child"]["parent"] == flow_id, result
    assert result["runs"] == 1, result


def test_fanout_sums_100_subflows_and_dexcli_shows_the_tree(procs, dev_worker):
    dev = dev_worker
    result, _ = result_of(drive(procs, "fanout", "fan-1", [dev.address]))
    check_fanout(result, "fan-1")
    parent = ok_json(cli(dev, "flow", "inspect", "fan-1"))
    children = parent["subFlows"]["children"]
    assert parent["subFlows"]["parents"] == [], parent["subFlows"]
    assert sorted(c["conditionIndex"] for c in children) == list(range(100)), children
    assert all(c["status"] == "COMPLETED" and c["stepExecutionId"] == "Fan-1"
               and c["flowId"] == f"fan-1/Fan-1/{c['conditionIndex']}" and not c["attached"]
               for c in children), children
    kinds = [e["kind"] for e in parent["history"]]
    assert kinds.count("SUB_FLOW_STARTED") == 100 and kinds.count("SUB_FLOW_CLOSED") == 100
    child = ok_json(cli(dev, "flow", "inspect", "fan-1/Fan-1/41"))
    assert child["subFlows"] == {"parents": [{"flowId": "fan-1", "runId": parent["runId"],
                                              "stepExecutionId": "Fan-1", "conditionIndex": 41}],
                                 "children": []}, child["subFlows"]
    assert child["flow"]["outputs"][0]["output"] == {"n": 42, "square": 1764}
    assert attributes_of(dev, "fan-1/Fan-1/41") == {"square": 1764}
    table = cli(dev, "flow", "inspect", "fan-1", "--output", "table")
    assert table.returncode == 0 and "child   fan-1/Fan-1/99 run" in table.stdout, table.stdout


def test_fanout_completes_through_a_sigkill_of_dev(procs, tmp_path):
    address = f"127.0.0.1:{free_port()}"
    data = tmp_path / "data"

    def start_dev():
        d = procs(binary("dex-server-zd"), "dev", "--data-dir", data, "--listen", address)
        d.wait_for_line("dex-server-zd dev ready", 60)
        return d

    server = start_dev()
    worker(procs, [address])
    driver = drive(procs, "fanout", "fan-kill", [address])
    driver.wait_for_line('"event":"started"', 30)
    server.signal(signal.SIGKILL)
    server.wait_exit(10)
    start_dev()
    result, _ = result_of(driver, 180)
    check_fanout(result, "fan-kill")


def test_flow_retry_example_fails_its_first_run_and_completes_the_second(procs, dev_worker):
    dev = dev_worker
    result, lines = result_of(drive(procs, "retry", "retry-1", [dev.address]))
    started = next(l for l in lines if l.get("event") == "started")
    first_run = started["run_id"]
    assert result["status"] == "FLOW_COMPLETED", result
    assert result["run_id"] == f"{first_run}.2" and result["runs"] == 2, result
    assert result["flow_attempt"] == 2, result
    assert result["outputs"][0]["output"] == {"flow_attempt": 2, "run_id": f"{first_run}.2"}
    assert result["first_run"] == {"run_id": first_run, "status": "FLOW_FAILED",
                                   "reason": "run 1 fails on purpose",
                                   "next_run_id": f"{first_run}.2"}, result
    # dexcli: the latest run names the one before; the first names its retry.
    latest = ok_json(cli(dev, "flow", "describe", "retry-1"))
    assert latest["flowAttempt"] == 2 and latest["previousRunId"] == first_run, latest
    first = ok_json(cli(dev, "flow", "describe", "retry-1", "--run-id", first_run))
    assert first["status"] == "FAILED" and first["nextRunId"] == f"{first_run}.2", first
    assert "retryUnixMs" not in first, first  # the retry started: nothing pending
    # `flow wait` without a run answers the run that ended the retries.
    assert wait_completed(dev, "retry-1") == {"flow_attempt": 2, "run_id": f"{first_run}.2"}
