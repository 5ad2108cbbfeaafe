"""The dex Flow examples (examples/flows/) end to end with real processes: `dex-server-zd`, the
`dex-flow-examples worker` and one `dex-flow-examples drive <example>` per example.

- each example completes as it should against `dex-server-zd dev`, with the server SIGKILLed in
  the middle of the run and started again on the same data directory;
- each example completes through a hot standby's takeover in `serve` after a SIGKILL of the
  active process (filesystem object store, 3 s lease);
- every acknowledged start and publish is accounted for: the run's history holds each publish the
  driver saw acknowledged exactly once, and a single run per Flow ID.
"""
import json
import signal

import pytest

from conftest import Proc, binary, free_port
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
