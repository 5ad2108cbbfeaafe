"""Time travel (docs/time-travel.md) end to end with real processes: `dex-server-zd`, the
`dex-flow-examples worker` hosting Checkout (examples/flows/checkout.cc: Reserve writes Attribute
`stage` = "reserved" and goes to Charge; with `--charge-bug` Charge fails non-retryably, without
it Charge completes with {"charged", "by": "fixed", "stage"}) and `dexcli flow time-travel`.

- the bug fix: 200 Checkout runs fail on a Worker with the bug; the Worker is replaced by a fixed
  one (SIGTERM, then a new process) and one `dexcli flow time-travel --query ... --to
  step-type:Charge` travels all 200 to the start of Charge. Each Flow ID's new run completes with
  the fixed output, carries `stage` from the point without running Reserve again, and links to its
  old run both ways; running the batch again travels nothing (all 200 already done, 2 runs each);
- the same batch through a hot standby's takeover (serve on MinIO, 3 s lease): the active process
  is SIGKILLed while the batch runs; dexcli asks the standby again with the same request IDs.
  Whether or not some calls failed in the takeover window, re-running the batch finishes the job,
  and afterwards every Flow ID has exactly 2 runs (nothing traveled twice, nothing missed), all
  COMPLETED;
- one run: `--dry-run` shows the new run's start (Charge-1 active in EXECUTE, `stage`) and changes
  nothing; the travel itself with `--request-id`, its repeat answered `alreadyDone` with the same
  run, and the old run refused as no longer the latest.
"""
import collections
import json
import signal
import time

import pytest

from conftest import Proc, binary, dexcli, flow_worker, parallel, start_flow
from test_dexcli_flow import Dev
from test_hot_standby import LEASE_S, POLL_S, nodes  # noqa: F401  (the fixture)

RUNS = 200
FAILED = "FlowType = 'Checkout' AND Status = 'FAILED'"
POINT = "step-type:Charge"


def flow_id(i):
    return f"co-{i:03}"


def amount(fid):
    return 1000 + int(fid.split("-")[1])


def start_checkouts(servers, n):
    def one(i):
        fid = flow_id(i)
        r = start_flow(servers, "Checkout", fid,
                       json.dumps({"order": fid, "amount_cents": amount(fid)}), timeout="30s")
        assert r.returncode == 0, r.stderr
    parallel(one, range(n))


def runs_by_flow(servers, query="FlowType = 'Checkout'"):
    """{flow ID: [search rows of its runs]}: the index holds every run, old ones included."""
    r = dexcli(servers, "flow", "search", query, "--all", "--output", "json", timeout="30s")
    assert r.returncode == 0, r.stderr
    out = collections.defaultdict(list)
    for line in r.stdout.splitlines():
        if line.strip():
            row = json.loads(line)
            out[row["flowId"]].append(row)
    return out


def wait_all(servers, status, timeout):
    """Waits until each of the RUNS Flow IDs has a run with `status`; {flow ID: that run's ID}."""
    deadline = time.monotonic() + timeout
    while True:
        rows = runs_by_flow(servers, f"FlowType = 'Checkout' AND Status = '{status}'")
        if len(rows) == RUNS:
            assert all(len(v) == 1 for v in rows.values()), rows
            return {f: v[0]["runId"] for f, v in rows.items()}
        assert time.monotonic() < deadline, f"{len(rows)} of {RUNS} runs {status} after {timeout}s"
        time.sleep(0.3)


def batch_args(servers, rate):
    return [binary("dexcli"), "--server", ",".join(servers), "--timeout", "30s", "flow",
            "time-travel", "--query", FAILED, "--to", POINT, "--rate", str(rate), "--yes"]


def batch(servers, rate=1000):
    """One `dexcli flow time-travel --query` run: (exit code, its JSON summary)."""
    r = dexcli(servers, "flow", "time-travel", "--query", FAILED, "--to", POINT, "--rate",
               str(rate), "--yes", timeout="30s", wait=120)
    assert r.stdout, r.stderr
    return r.returncode, json.loads(r.stdout)


def check_summary(summary, **counts):
    assert summary["query"] == FAILED and summary["to"] == POINT and not summary["dryRun"], summary
    assert summary["selected"] == RUNS, summary
    for key, want in counts.items():
        assert summary[key] == want, (key, summary)


def check_traveled(servers, old_runs, exact_history):
    """Every Flow ID's latest run came from its failed run at Charge and completed with the fixed
    Charge; `stage` came with the point (Reserve did not run again); both runs link."""
    def inspect(fid):
        r = dexcli(servers, "flow", "inspect", fid, timeout="30s")
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    def old(fid):
        r = dexcli(servers, "flow", "describe", fid, "--run-id", old_runs[fid], timeout="30s")
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    for fid, doc in parallel(inspect, old_runs).items():
        flow = doc["flow"]
        assert flow["status"] == "COMPLETED" and flow["runs"] == 2, flow
        assert flow["traveledFromRunId"] == old_runs[fid], flow
        assert [o["output"] for o in flow["outputs"]] == [
            {"charged": amount(fid), "by": "fixed", "stage": "reserved"}], flow
        assert doc["attributes"] == [{"key": "stage", "type": "string", "value": "reserved"}], doc
        events = doc["history"]
        started = events[0]
        assert started["kind"] == "FLOW_STARTED", started
        assert started["traveledFromRunId"] == old_runs[fid], started
        assert started["timeTravelPoint"] == {"kind": "LATEST_OF_STEP_TYPE", "stepType": "Charge"}
        steps = [e.get("stepExecutionId") for e in events if e["kind"] == "EXECUTE_COMPLETED"]
        assert steps == ["Charge-1"], events  # Reserve is the old run's, not run again
        if exact_history:
            assert [e["kind"] for e in events] == ["FLOW_STARTED", "EXECUTE_COMPLETED",
                                                   "FLOW_CLOSED"], events
    for fid, d in parallel(old, old_runs).items():
        assert d["status"] == "FAILED" and "bug: amount in cents" in d["closeReason"], d
        assert d["traveledToRunId"] and d["traveledToRunId"] != old_runs[fid], d


def check_two_runs_each(servers, old_runs):
    """Exactly two runs per Flow ID: the failed one and the one it traveled to."""
    runs = runs_by_flow(servers)
    assert sorted(runs) == sorted(old_runs), sorted(set(runs) ^ set(old_runs))
    wrong = {f: [(r["runId"], r["status"]) for r in rows] for f, rows in runs.items()
             if sorted(r["status"] for r in rows) != ["COMPLETED", "FAILED"]}
    assert not wrong, f"{len(wrong)} Flow IDs without exactly one FAILED and one COMPLETED run: " \
                      f"{dict(list(wrong.items())[:5])}"


def replace_with_fixed_worker(procs, buggy, servers):
    buggy.signal(signal.SIGTERM)
    assert buggy.wait_exit(30) == 0, buggy.output()
    return flow_worker(procs, servers)


def test_a_batch_time_travels_runs_failed_by_a_bug_to_a_fixed_worker_once(procs, tmp_path):
    dev = Dev(procs, tmp_path)
    servers = [dev.address]
    buggy = flow_worker(procs, servers, "--charge-bug")
    began = time.monotonic()
    start_checkouts(servers, RUNS)
    old_runs = wait_all(servers, "FAILED", 60)
    started = time.monotonic()
    replace_with_fixed_worker(procs, buggy, servers)

    code, summary = batch(servers)
    assert code == 0, summary
    check_summary(summary, traveled=RUNS, alreadyDone=0, skipped=0, failed=0)
    traveled = time.monotonic()
    new_runs = wait_all(servers, "COMPLETED", 60)
    check_traveled(servers, old_runs, exact_history=True)
    check_two_runs_each(servers, old_runs)

    # Again: each run's request ID comes from the run and the point, so nothing travels twice.
    code, summary = batch(servers)
    assert code == 0, summary
    check_summary(summary, traveled=0, alreadyDone=RUNS, skipped=0, failed=0)
    check_two_runs_each(servers, old_runs)
    assert wait_all(servers, "COMPLETED", 1) == new_runs
    print(f"\n{RUNS} runs started and failed in {started - began:.1f}s, traveled in "
          f"{traveled - started:.1f}s (worker swap included)")


@pytest.mark.parametrize("store", ["minio"], indirect=True)
def test_a_batch_goes_on_through_a_takeover_and_travels_each_run_once(nodes, procs):  # noqa: F811
    a = nodes("a").start()
    a.wait_ready(60)
    b = nodes("b").start()
    b.wait_following()
    servers = [a.address, b.address]
    buggy = flow_worker(procs, servers, "--charge-bug")
    start_checkouts(servers, RUNS)
    old_runs = wait_all(servers, "FAILED", 60)
    replace_with_fixed_worker(procs, buggy, servers)

    # 25 runs/s: the batch takes 8 s, and the kill comes 2.4 s in.
    proc = Proc(batch_args(servers, 25))
    procs.register(proc)
    proc.wait_for_line(f" 60/{RUNS} ", 30)
    a.proc.signal(signal.SIGKILL)
    killed = time.monotonic()
    assert proc.p.poll() is None, "the batch ended before the kill:\n" + proc.output()
    code = proc.wait_exit(120)
    took = time.monotonic() - killed
    # stdout (the summary) comes after the progress lines on stderr, which dexcli flushed.
    summary = json.loads("\n".join(proc.lines[proc.lines.index("{"):]))
    check_summary(summary, skipped=0)
    assert summary["traveled"] + summary["alreadyDone"] + summary["failed"] == RUNS, summary
    first = dict(summary)
    # A call that failed in the takeover window may or may not have been written; running the
    # batch again finishes the job either way, traveling nothing twice.
    reruns = 0
    while code != 0:
        assert summary["failed"] > 0 and reruns < 2, summary
        failed = summary["failed"]
        code, summary = batch(servers)
        reruns += 1
        check_summary(summary, skipped=0)
        assert summary["traveled"] <= failed, summary
    code, summary = batch(servers)
    assert code == 0, summary
    check_summary(summary, traveled=0, alreadyDone=RUNS, skipped=0, failed=0)

    wait_all([b.address], "COMPLETED", 60)
    check_traveled([b.address], old_runs, exact_history=False)
    check_two_runs_each([b.address], old_runs)
    print(f"\nSIGKILL of the active process during the batch: the batch ended {took:.1f}s after "
          f"it (lease {LEASE_S}s, poll {POLL_S}s); first pass traveled {first['traveled']}, "
          f"already done {first['alreadyDone']}, failed {first['failed']}; {reruns} re-run(s)")


def test_a_dry_run_shows_the_start_and_changes_nothing_then_one_run_travels_once(procs, tmp_path):
    dev = Dev(procs, tmp_path)
    servers = [dev.address]
    buggy = flow_worker(procs, servers, "--charge-bug")
    r = start_flow(servers, "Checkout", "co-1", json.dumps({"order": "co-1", "amount_cents": 1999}))
    assert r.returncode == 0, r.stderr
    old_run = json.loads(r.stdout)["runId"]
    deadline = time.monotonic() + 30
    while (before := json.loads(dexcli(servers, "flow", "describe", "co-1").stdout))["status"] \
            != "FAILED":
        assert time.monotonic() < deadline, before
        time.sleep(0.1)
    replace_with_fixed_worker(procs, buggy, servers)

    r = dexcli(servers, "flow", "time-travel", "co-1", "--run-id", old_run, "--to", POINT,
               "--dry-run")
    assert r.returncode == 0, r.stderr
    dry = json.loads(r.stdout)
    assert dry["dryRun"] and dry["fromRunId"] == old_run and dry["to"] == POINT, dry
    start = dry["start"]
    assert start["flow"]["status"] == "RUNNING" and start["flow"]["traveledFromRunId"] == old_run
    assert [(s["stepExecutionId"], s["phase"], s["method"], s["attempt"]) for s in
            start["active"]] == [("Charge-1", "EXECUTE", "EXECUTE", 1)], start
    assert dry["attributes"] == [{"key": "stage", "value": {"stringValue": "reserved"}}], dry
    # Nothing changed: the same run, still FAILED and unlinked, and no other run of the Flow ID.
    time.sleep(0.5)  # long enough for the fixed Worker to have run a Charge, had one been queued
    after = json.loads(dexcli(servers, "flow", "describe", "co-1").stdout)
    assert after == before and "traveledToRunId" not in after, after
    assert [r["runId"] for r in runs_by_flow(servers)["co-1"]] == [old_run]

    # The travel itself; its repeat (same request ID) answers the same run.
    args = ["flow", "time-travel", "co-1", "--run-id", old_run, "--to", POINT, "--yes",
            "--request-id", "fix-co-1", "--reason", "charge fixed"]
    first = json.loads(dexcli(servers, *args).stdout)
    assert not first["alreadyDone"] and first["requestId"] == "fix-co-1", first
    again = json.loads(dexcli(servers, *args).stdout)
    assert again["alreadyDone"] and again["runId"] == first["runId"], again
    r = dexcli(servers, "flow", "wait", "co-1", "--expect-completed")
    assert r.returncode == 0, r.stdout + r.stderr
    done = json.loads(r.stdout)
    assert done["runId"] == first["runId"] and done["runs"] == 2, done
    # A fresh request naming the old run is refused: it is no longer the latest.
    r = dexcli(servers, "flow", "time-travel", "co-1", "--run-id", old_run, "--to", POINT, "--yes")
    assert r.returncode == 1, r.stdout + r.stderr
    err = json.loads(r.stderr.strip().splitlines()[-1])["error"]
    assert err["grpcCode"] == "FAILED_PRECONDITION" and "not the latest run" in err["message"], err
