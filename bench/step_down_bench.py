#!/usr/bin/env python3
"""Step-down benchmark: what a client sees while the active process steps down, with a hot
standby and on a single replica, against a real MinIO (bench/README.md, "Step down").

For each setup and each repetition, on a fresh node (its own key prefix in one MinIO):

  hot     two `dex-server-zd serve` processes in hot mode: A active, B following;
  single  one `serve` process (cold mode), nothing else.

A `dex-flow-examples worker` and closed-loop probe clients (`dexcli flow start OneStep`, no pause,
each a new process, given every address) run for --settle seconds; then
`dexcli --server <A> admin step-down --yes` is called, the probe runs --after seconds more, and
every flow whose start was acknowledged must complete within --flow-wait seconds, with every
`serve` process still running (else the run fails after the table and keeps its logs).

Per step down: the call's duration and its outcome (leaseHolderAfterStepDown, released and
active node epochs); from A's lines the drain and release ("stepping down" -> "stepped down:
released the lease"); from the new active process's lines (B, or A again) release -> lease and
release -> serving; from the probe, the longest interval without a successful start around the
step down, the time from the step-down request to the first start answered by the new active
process (after its "acquired the lease"), the longest start call and the longest flow
(created -> ended, server timestamps).

Python 3 standard library plus boto3; the processes, MinIO and the flow check are
failover_bench.py's. Started by scripts/bench-step-down.
"""
import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from failover_bench import (READY, Bench, Load, Server, add_common_args, check_common_args,  # noqa: E402
                            check_flows, die, med_max, run_cases, stamp_of)

STEPPING = "stepping down node"
RELEASED = re.compile(r"stepped down: released the lease of epoch (\d+) \((\d+) attempts interrupted\)")
# The worker's own time stamps (spdlog's default pattern).
WORKER_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3})\] ")
# setup -> (standby.mode, serve processes)
SETUPS = {"hot": ("hot", 2), "single": ("cold", 1)}


def num(value, spec=".2f"):
    """A figure of the log line, or "-" when there is none (no successful start, say)."""
    return "-" if value in ("", None) else format(value, spec)


def successes_gap(calls, t_from, t_to):
    """The longest interval between consecutive successful answers, counting from the last success
    before `t_from` to the last answer before `t_to`; returns (seconds, its start, its end)."""
    answers = sorted(answered for _, answered, ok in calls if ok)
    before = [a for a in answers if a <= t_from]
    seq = before[-1:] + [a for a in answers if t_from < a <= t_to]
    if len(seq) < 2:
        return None, None, None
    width, start, end = max((b - a, a, b) for a, b in zip(seq, seq[1:]))
    return width, start, end


def worker_moved(worker, node_id, epoch, after):
    """When the worker connected to the process of node epoch `epoch` (its own time stamp, else
    when the line was read), looking at its lines from index `after`; None if it has not."""
    needle = f"(node {node_id}, epoch {epoch})"
    with worker.cv:
        lines = worker.lines[after:]
    for arrival, line in lines:
        if "connected to" in line and needle in line:
            m = WORKER_STAMP.match(line)
            return datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f").timestamp() if m else arrival
    return None


class StepDownBench(Bench):
    def run_case(self, setup, rep):
        a = self.args
        mode, count = SETUPS[setup]
        node_id = f"sd-{setup}-{rep}"
        servers = [Server(self, node_id, node_id, name, mode) for name in "ab"[:count]]
        A = servers[0]
        addresses = [s.address for s in servers]
        load = worker = None
        try:
            A.start()
            self.procs.append(A)
            A.proc.wait_for(READY, 60)
            for s in servers[1:]:
                s.start()
                self.procs.append(s)
                s.wait_standing_by()
            worker = self.start_worker(node_id, addresses)
            load = Load(self, node_id, addresses, a.probe_clients, a.probe_pause)
            time.sleep(a.settle)

            marks = {s.name: s.proc.mark() for s in servers}
            worker_mark = worker.mark()
            t_req = time.time()
            r = subprocess.run([self.bin("dexcli"), "--server", A.address, "--timeout", "2m",
                                "admin", "step-down", "--yes"], capture_output=True, text=True,
                               timeout=180)
            t_ret = time.time()
            if r.returncode != 0:
                die(f"{node_id}: step-down exited {r.returncode}: {r.stderr.strip()}\n"
                    + "\n".join(s.proc.tail() for s in servers))
            out = json.loads(r.stdout)
            outcome = out.get("leaseHolderAfterStepDown", "")

            # The old process's lines, then the new active one's (B, or A taking the lease back).
            step_at, stepping = A.proc.wait_for(STEPPING, 10, marks["a"])
            step_ts = stamp_of(stepping, step_at)
            rel_at, released = A.proc.wait_for(RELEASED, 10, marks["a"])
            rel_ts = stamp_of(released, rel_at)
            new = servers[1] if outcome == "takenOverByAnotherProcess" else A
            ready_at, ready = new.proc.wait_for(READY, 30, marks[new.name])
            acq_at, acq = new.proc.wait_for("acquired the lease", 5, marks[new.name])
            acq_ts = stamp_of(acq, acq_at)

            standby_again_s = ""
            if mode == "hot":  # A keeps running and follows the log again
                fol_at, fol = A.proc.wait_for("-> following", 60, marks["a"])
                standby_again_s = stamp_of(fol, fol_at) - rel_ts
            time.sleep(max(0.0, t_ret + a.after - time.time()))
            t_end = time.time()
            load.finish()
            # A flow that does not complete is a server bug: the case is still measured and
            # reported (the run fails after the table, keeping the logs).
            flows, problems, outcomes = check_flows(self, addresses, load.acknowledged, a.flow_wait)
            if not load.acknowledged:
                die(f"{node_id}: no start was acknowledged; the last error: {load.last_error}")
            exited = [f"{s.proc.name} exited with status {s.proc.p.poll()}" for s in servers
                      if s.proc.p.poll() is not None]

            calls = list(load.calls)
            gap, gap_from, gap_to = successes_gap(calls, t_req, t_end)
            # Before the step down, past the load's first second (the probe's resolution).
            baseline, _, _ = successes_gap(calls, t_req - max(a.settle - 1, a.settle / 2), t_req)
            new_answers = [ans for _, ans, ok in calls if ok and ans > acq_ts]
            latencies = [ans - sent for sent, ans, ok in calls if ok and ans > t_req]
            flow_s = [(f["closeUnixMs"] - f["startUnixMs"]) / 1000 for i, f in flows.items()
                      if i in load.acknowledged and "closeUnixMs" in f and "startUnixMs" in f]
            moved = worker_moved(worker, node_id, out.get("activeNodeEpoch"), worker_mark)
            m = RELEASED.search(released)
            row = {
                "setup": setup, "rep": rep, "outcome": outcome,
                "released_epoch": out.get("releasedNodeEpoch", ""),
                "active_epoch": out.get("activeNodeEpoch", ""),
                "hold_off": out.get("leaseReacquisitionHoldOff", ""),
                "call_s": t_ret - t_req,
                "request_to_release_s": rel_ts - t_req,
                "drain_release_s": rel_ts - step_ts,
                "interrupted": int(m.group(2)),
                "release_to_lease_s": acq_ts - rel_ts,
                "release_to_serving_s": ready_at - rel_ts,
                "release_to_worker_s": moved - rel_ts if moved else "",
                "gap_s": gap,
                "gap_from_s": gap_from - t_req if gap_from else "",
                "gap_to_s": gap_to - t_req if gap_to else "",
                "baseline_gap_s": baseline,
                "first_success_s": min(new_answers) - t_req if new_answers else "",
                "max_start_s": max(latencies) if latencies else "",
                "max_flow_s": max(flow_s) if flow_s else "",
                "median_flow_s": statistics.median(flow_s) if flow_s else "",
                "standby_again_s": standby_again_s,
                "flows_acknowledged": len(load.acknowledged),
                "flows_not_completed": len(problems),
                "problem": "; ".join(
                    ([f"{node_id}: {len(problems)} of {len(load.acknowledged)} acknowledged flows "
                      f"did not complete within {a.flow_wait:.0f} s, e.g. " + "; ".join(problems[:3])]
                     if problems else []) + exited),
                "exited": "; ".join(exited),
                "failed_calls": load.failed_calls,
                "last_error": load.last_error,
                "start_calls": len(calls),
                "attempt_outcomes": " ".join(f"{k}={v}" for k, v in sorted(outcomes.items())),
            }
            self.log(f"{setup} #{rep}: step-down {row['call_s']:.2f}s -> {outcome} "
                     f"(epoch {row['released_epoch']} -> {row['active_epoch']}); released "
                     f"{row['request_to_release_s']:.2f}s after the request (drain+release "
                     f"{row['drain_release_s']:.3f}s, {row['interrupted']} interrupted); lease "
                     f"{row['release_to_lease_s']:.2f}s, serving {row['release_to_serving_s']:.2f}s "
                     f"after the release, worker there "
                     + (f"{row['release_to_worker_s']:.2f}s after it" if moved else "never")
                     + f"; no successful start for {num(gap)}s ({num(row['gap_from_s'], '+.2f')} "
                     f"to {num(row['gap_to_s'], '+.2f')}s; {baseline or 0:.3f}s before); first start "
                     f"on the new active {num(row['first_success_s'])}s after the request; longest "
                     f"start {num(row['max_start_s'])}s, longest flow {num(row['max_flow_s'])}s; "
                     f"{len(load.acknowledged)} flows acknowledged, {len(problems)} of them not "
                     f"completed; {load.failed_calls} start calls failed"
                     + (f" (the last: {load.last_error})" if load.failed_calls else "")
                     + f"; attempts {outcomes}")
            if row["problem"]:
                self.log(f"{setup} #{rep}: FAILED: " + row["problem"])
            return [row]
        finally:
            self.end_case(load, worker, servers)


def print_table(rows, args):
    cols = [("call s", "call_s", ".2f"), ("drain+rel s", "drain_release_s", ".3f"),
            ("rel->lease s", "release_to_lease_s", ".2f"),
            ("rel->serve s", "release_to_serving_s", ".2f"),
            ("rel->worker s", "release_to_worker_s", ".2f"), ("gap s", "gap_s", ".2f"),
            ("1st start s", "first_success_s", ".2f"), ("max start s", "max_start_s", ".2f"),
            ("max flow s", "max_flow_s", ".2f"), ("med flow s", "median_flow_s", ".3f"),
            ("gap before s", "baseline_gap_s", ".3f")]
    width = 15
    hold_offs = ",".join(sorted({str(r["hold_off"]) for r in rows}))
    out = ["", f"step_down_bench: lease.duration {args.lease}s; heldLeasePollInterval 250ms, "
           f"stepDownHoldOff {hold_offs}, attemptDrainTimeout 30s (defaults); Steps {args.work_time}; "
           f"{args.probe_clients} probe client(s); {args.reps} repetition(s); {os.cpu_count()} CPUs; "
           "medians / maxima",
           f"{'setup':>6}  {'outcome':<28}" + "".join(h.rjust(width) for h, _, _ in cols)
           + f"{'flows':>7}{'lost':>6}{'failed':>7}{'crashed':>8}"]
    for setup in args.setups:
        sel = [r for r in rows if r["setup"] == setup]
        if not sel:
            continue
        outcomes = sorted({f"{r['outcome']} {r['released_epoch']}->{r['active_epoch']}" for r in sel})
        cells = "".join(med_max([r[k] for r in sel], fmt).rjust(width) for _, k, fmt in cols)
        out.append(f"{setup:>6}  {', '.join(outcomes):<28}{cells}"
                   f"{int(statistics.median(r['flows_acknowledged'] for r in sel)):>7}"
                   f"{sum(r['flows_not_completed'] for r in sel):>6}"
                   f"{sum(r['failed_calls'] for r in sel):>7}"
                   f"{sum(1 for r in sel if r['exited']):>8}")
    print("\n".join(out), flush=True)


FIELDS = ["setup", "rep", "outcome", "released_epoch", "active_epoch", "hold_off", "call_s",
          "request_to_release_s", "drain_release_s", "interrupted", "release_to_lease_s",
          "release_to_serving_s", "release_to_worker_s", "gap_s", "gap_from_s", "gap_to_s",
          "baseline_gap_s", "first_success_s", "max_start_s", "max_flow_s", "median_flow_s",
          "standby_again_s", "flows_acknowledged", "flows_not_completed", "failed_calls",
          "start_calls", "attempt_outcomes", "last_error", "exited"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--setups", default="hot,single", help="hot (two processes), single (one)")
    p.add_argument("--probe-clients", type=int, default=2, help="closed-loop start clients")
    p.add_argument("--probe-pause", type=float, default=0.0, help="pause after each start, s")
    p.add_argument("--after", type=float, default=3.0, help="load after the call returns, s")
    p.add_argument("--flow-wait", type=float, default=90.0,
                   help="how long acknowledged flows may take to complete after the load, s")
    add_common_args(p, "step-down", settle=3.0, what="setup")
    args = p.parse_args()
    args.setups = [s for s in args.setups.split(",") if s]
    if any(s not in SETUPS for s in args.setups):
        die(f"--setups: {args.setups}: each is one of {', '.join(SETUPS)}")
    check_common_args(args, "step-down")

    bench = StepDownBench(args)
    return run_cases(bench, [lambda setup=setup, rep=rep: bench.run_case(setup, rep)
                             for rep in range(1, args.reps + 1) for setup in args.setups],
                     print_table, FIELDS, "step downs")


if __name__ == "__main__":
    sys.exit(main())
