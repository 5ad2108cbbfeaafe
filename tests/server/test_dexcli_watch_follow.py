"""`dexcli flow watch --follow-runs` against a real `dex-server-zd dev` and the
`dex-flow-examples worker`: when the watched run closes and a later run of the Flow ID follows
from it, the watch prints a link line `{flowId, runId, nextRunId, link}` and goes on with that
run's history, until a run closes with none after it.

- a time travel: a SignUp run (waiting on its Channel) traveled to its beginning by `dexcli flow
  time-travel`; the watch shows the old run to its FLOW_CLOSED (TERMINATED) and TIME_TRAVELED,
  the link (`timeTravel`), then the new run from FLOW_STARTED to its close, and exits 0. A
  watch of the same run without the flag stops at the old run's close;
- a Flow retry: RetryOnce fails its first run on purpose; the retry starts after a 1.5 s backoff,
  which the watch waits for (the link, `nextRun`, comes only once the new run started); a retry
  an hour off ends the watch at --watch-timeout (exit 3);
- a continue-as-new: `dexcli flow continue-as-new` of a waiting SignUp run; the link is
  `continueAsNew`, `flow wait --run-id <first run>` answers the run the chain ended with, and
  `flow list --status continued-as-new` lists the first run.
"""
import json
import time

from conftest import binary
from test_dexcli_flow import cli, dev, ok_json  # noqa: F401  (dev: the fixture)
from test_flow_examples import worker


def watch_lines(proc):
    """The JSON lines a `flow watch` printed on stdout (events and link lines), in order."""
    out = [json.loads(line) for line in proc.lines if line.startswith("{")]
    assert not [o for o in out if "error" in o], proc.output()
    return out


def split_runs(lines):
    """[(run ID, its events)] in the order watched, and the link lines between them."""
    runs, links = [], []
    for line in lines:
        if "link" in line:
            links.append(line)
            continue
        if not runs or runs[-1][0] != line["runId"]:
            runs.append((line["runId"], []))
        runs[-1][1].append(line)
    return runs, links


def check_whole_history(events):
    """Each event once, in order, from the run's first (seq 0, FLOW_STARTED)."""
    seqs = [e["seq"] for e in events]
    assert seqs == list(range(len(seqs))), seqs
    assert events[0]["kind"] == "FLOW_STARTED", events


def test_watch_follows_a_time_travel_to_the_new_run(dev, procs, tmp_path):  # noqa: F811
    worker(procs, [dev.address])
    old = ok_json(cli(dev, "flow", "start", "SignUp", "--flow-id", "tt-1", "--input",
                      json.dumps({"email": "ann@example.com", "code": "c-7"})))["runId"]
    base = [binary("dexcli"), "--server", dev.address, "flow", "watch", "tt-1", "--run-id", old,
            "--watch-timeout", "60s"]
    follower = procs(*base, "--follow-runs")
    plain = procs(*base)
    for w in (follower, plain):
        w.wait_for_line('"WAIT_FOR_COMPLETED"', 30)  # AwaitVerification-1 waits on `verify`

    traveled = ok_json(cli(dev, "flow", "time-travel", "tt-1", "--run-id", old, "--to",
                           "beginning", "--reason", "resend", "--yes"))
    new = traveled["runId"]
    assert new and new != old, traveled
    assert plain.wait_exit(30) == 0, plain.output()
    follower.wait_for_line(f'"runId":"{new}"', 30)  # on the new run, which still waits
    assert follower.p.poll() is None, follower.output()
    ok_json(cli(dev, "flow", "publish", "tt-1", "verify", "--run-id", new, "--message",
                '{"code": "c-7"}', "--yes"))
    assert follower.wait_exit(30) == 0, follower.output()

    runs, links = split_runs(watch_lines(follower))
    assert [r for r, _ in runs] == [old, new], runs
    assert links == [{"flowId": "tt-1", "runId": old, "nextRunId": new, "link": "timeTravel"}]
    lines = watch_lines(follower)
    assert lines.index(links[0]) == len(runs[0][1]), lines  # between the two runs' events
    first, second = runs[0][1], runs[1][1]
    check_whole_history(first)
    check_whole_history(second)
    closed = [e for e in first if e["kind"] == "FLOW_CLOSED"]
    assert len(closed) == 1 and closed[0]["status"] == "TERMINATED", first
    assert first[-1]["kind"] == "TIME_TRAVELED" and first[-1]["nextRunId"] == new, first
    assert second[-1]["kind"] == "FLOW_CLOSED" and second[-1]["status"] == "COMPLETED", second
    assert all(e["flowId"] == "tt-1" for e in first + second)

    # Without --follow-runs: the old run only, to its close.
    events = watch_lines(plain)
    assert {e["runId"] for e in events} == {old}, events
    assert events[-1]["kind"] == "FLOW_CLOSED" and events[-1]["status"] == "TERMINATED", events
    check_whole_history(events)

    # A continue-as-new (same server): a SignUp run waiting on `verify` goes on at once as
    # "<run>.c1", which holds the waiting execution; the watch links the runs
    # (`continueAsNew`), a wait on the first run answers the last, list shows the statuses.
    first = ok_json(cli(dev, "flow", "start", "SignUp", "--flow-id", "can-1", "--input",
                        json.dumps({"email": "bo@example.com", "code": "c-9"})))["runId"]
    follower = procs(binary("dexcli"), "--server", dev.address, "flow", "watch", "can-1",
                     "--run-id", first, "--follow-runs", "--watch-timeout", "60s")
    follower.wait_for_line('"WAIT_FOR_COMPLETED"', 30)
    refused = cli(dev, "flow", "continue-as-new", "can-1", "--yes")
    assert refused.returncode == 2 and "--run-id is required" in refused.stderr, refused.stderr
    continued = ok_json(cli(dev, "flow", "continue-as-new", "can-1", "--run-id", first,
                            "--reason", "long history", "--request-id", "can-req", "--yes"))
    assert continued["pending"] is False and continued["newRunId"] == first + ".c1", continued
    second = continued["newRunId"]
    again = ok_json(cli(dev, "flow", "continue-as-new", "can-1", "--run-id", first,
                        "--request-id", "can-req", "--yes"))
    assert again["alreadyDone"] is True, again
    old_run = ok_json(cli(dev, "flow", "describe", "can-1", "--run-id", first))
    assert old_run["status"] == "CONTINUED_AS_NEW" and old_run["nextRunId"] == second, old_run
    new_run = ok_json(cli(dev, "flow", "describe", "can-1"))
    assert new_run["runId"] == second and new_run["continuedFromRunId"] == first, new_run
    state = ok_json(cli(dev, "flow", "state", "can-1"))
    assert [a["stepExecutionId"] for a in state["active"]] == ["AwaitVerification-1"], state
    follower.wait_for_line(f'"runId":"{second}"', 30)
    ok_json(cli(dev, "flow", "publish", "can-1", "verify", "--run-id", second, "--message",
                '{"code": "c-9"}', "--yes"))
    assert follower.wait_exit(30) == 0, follower.output()
    runs, links = split_runs(watch_lines(follower))
    assert [r for r, _ in runs] == [first, second], runs
    assert links == [{"flowId": "can-1", "runId": first, "nextRunId": second,
                      "link": "continueAsNew"}], links
    closed = [e for e in runs[0][1] if e["kind"] == "FLOW_CLOSED"]
    assert len(closed) == 1 and closed[0]["status"] == "CONTINUED_AS_NEW", runs[0][1]
    assert runs[1][1][0]["kind"] == "FLOW_STARTED", runs[1][1]
    assert runs[1][1][0]["continuedFromRunId"] == first, runs[1][1]
    assert runs[1][1][-1]["status"] == "COMPLETED", runs[1][1]
    waited = ok_json(cli(dev, "flow", "wait", "can-1", "--run-id", first, "--expect-completed"))
    assert waited["runId"] == second and waited["status"] == "COMPLETED", waited
    for _ in range(100):  # the search index follows the log
        rows = ok_json(cli(dev, "flow", "list", "--status", "continued-as-new", "--output",
                           "json"))["rows"]
        if any(r.get("runId") == first for r in rows):
            break
        time.sleep(0.1)
    assert [(r["flowId"], r["status"]) for r in rows if r["runId"] == first] == \
        [("can-1", "CONTINUED_AS_NEW")], rows


def test_watch_waits_for_a_pending_flow_retry_and_follows_it(dev, procs):  # noqa: F811
    worker(procs, [dev.address])
    first = ok_json(cli(dev, "flow", "start", "RetryOnce", "--flow-id", "rt-1", "--input",
                        '{"fail_runs": 1}', "--retry-runs", "2", "--retry-interval",
                        "1500ms"))["runId"]
    watcher = procs(binary("dexcli"), "--server", dev.address, "flow", "watch", "rt-1",
                    "--run-id", first, "--follow-runs", "--watch-timeout", "60s")
    assert watcher.wait_exit(30) == 0, watcher.output()

    runs, links = split_runs(watch_lines(watcher))
    assert len(runs) == 2 and runs[0][0] == first, runs
    second = runs[1][0]
    assert links == [{"flowId": "rt-1", "runId": first, "nextRunId": second, "link": "nextRun"}]
    for _, events in runs:
        check_whole_history(events)
    failed = runs[0][1][-1]
    assert failed["kind"] == "FLOW_CLOSED" and failed["status"] == "FAILED", failed
    assert failed["nextRunId"] == second, failed  # the pending retry, named at the close
    done = runs[1][1][-1]
    assert done["kind"] == "FLOW_CLOSED" and done["status"] == "COMPLETED", done
    described = ok_json(cli(dev, "flow", "describe", "rt-1"))
    assert described["runId"] == second and described["previousRunId"] == first, described

    # A retry far off: --watch-timeout, one budget for the whole watch, ends the wait (exit 3).
    far = ok_json(cli(dev, "flow", "start", "RetryOnce", "--flow-id", "rt-2", "--input",
                      '{"fail_runs": 1}', "--retry-runs", "2", "--retry-interval", "1h"))["runId"]
    r = cli(dev, "flow", "watch", "rt-2", "--follow-runs", "--watch-timeout", "1500ms")
    assert r.returncode == 3, r.stdout + r.stderr
    events = [json.loads(line) for line in r.stdout.splitlines()]
    assert events[-1]["kind"] == "FLOW_CLOSED" and events[-1]["runId"] == far, events
    e = json.loads(r.stderr)["error"]
    assert e["kind"] == "timeout" and "its Flow retry had not started" in e["message"], e
