#!/usr/bin/env python3
"""checker: verifies one chaos run from its run directory (tests/chaos/README.md).

    checker.py RUN_DIR [--json]
    checker.py RUN_DIR --self-test     # breaks a clean run's data; every break must be caught

Reads what the run recorded -- the clients' history (history.jsonl: starts, publishes, reads),
every attempt the Workers ran and every result they returned (workers/*.jsonl), every request
that reached object storage through the proxy with the lease records and batch headers it
carried (proxy-events.jsonl), what the harness did to the processes (events.jsonl, logs/*.log)
-- and the final state: every Flow's description and history events as the active process
served them after healing (final/flows.json) and the raw log read straight from MinIO
(final/log.json: every slot, lower epochs included, every record in full; the flow records are
LogRecord.flow, proto/dex/flow_records.proto, Payloads as base64 JSON text). It checks:

  log        the log has no hole; epochs never go backwards along it (no batch of an older epoch
             after a newer epoch's EpochStart: the fencing property); every new epoch begins with
             an EpochStart; one writer per epoch, the process that acquired that epoch's lease
  lease      each lease acquisition raises the epoch by exactly one
  answer     every successful answer (start, publish, read) came from a process that held a lease
             period at some moment between the request's send and its answer, and every task a
             Worker ran was handed out under its epoch's lease
  durable    every acknowledged start, publish, RPC (its result) and set is in the log, in a batch that landed before
             the answer, written under a lease period that lasted until after the landing; a
             start answered "new" was written by the process that answered
  flows      every acknowledged start exists and its run closed; one run per Flow ID (every
             answer of a Flow's starts names the same run, the log starts no second one); the
             log starts no Flow that no client tried to start
  decisions  at most one applied result per method of a Step execution (EXECUTE_COMPLETED,
             WAIT_FOR_COMPLETED, WAIT_COMPLETED once each); the executions that exist are
             exactly those the applied decisions created (a decision applied twice would make a
             second Fast or Gate); a completed run has every execution DONE; Begin completed with
             an attempt after the first (which fails on purpose)
  results    every result in the log (a WaitFor's wait and locals, an Execute's decision, a
             Worker's failure) is one a Worker logged for that very execution, method and attempt
             (matched by the nonce every result carries); every applied decision in the history
             too
  attempts   the attempts handed out for each method are numbered 1..n; a SYNC attempt a Worker
             ran was handed out in the log with that number; an ASYNC one that the log lacks ran
             before a later EpochStart (the spec's exception)
  publishes  every message published at most once (request IDs work through failover), taken
             by at most one wait, taken in publish order (FIFO) and after it was published, and
             seen by the Execute whose wait took it (Gate's output "took"); every
             acknowledged publish is in its run's history (consumed, or still queued at the end)
  state      the served result (description outputs, status) is what the history's applied
             decisions and FLOW_CLOSED say; and the decisions the history shows applied are
             exactly those a small model of the rules applies from the log's records (each
             Execute result applied at most once, and only the running attempt's)
  reads      a read of a flow acknowledged before the read was sent finds it, and no read shows
             a flow RUNNING after an earlier, completed observation showed it closed
  rpcs       every acknowledged RPC "add" applied exactly once: applied[id] == n, one
             RPC_COMPLETED writes it, the answered output is that event's, an id sent anew is
             answered as new and a repeated id as a repeat; no RPC half applied (total ==
             sum(applied)); no applied id that no client sent or that was refused; each Step's
             steps[exec] is the total the history had when its Execute (holding the lock) ran
  attributes every acknowledged SetAttributes is in its run's history (ATTRIBUTES_SET) and its
             value is the final one unless a later set of the same instance may have replaced it
  locks      in each run's history no holder (a Step execution's method attempt or an RPC)
             acquires a lock key another holder holds, releases one it does not hold, or keeps
             one at the end

  subflows   every SubFlow condition of a recorded wait has one child under exactly the derived
             Flow ID and run ID (SUB_FLOW_STARTED once, not attached; the child's type and input
             the condition's), started once (runs as its plan makes), ending as its own Steps say
             (never stopped by its parent), TIMED_OUT exactly when its plan has a flow timeout; a
             child that closed for good while its condition waited met it (SUB_FLOW_CLOSED with
             its last run and status, before WAIT_COMPLETED), an AllOf only so; one that did not
             closed after the AnyOf was met; the wait's result and the Execute's output (Fan's or
             Work's "children") are the child's own end, the Execute ran after it closed; every
             child read back is named by a parent's wait. Grandchildren (a nesting chaos-child's
             Work waits AllOf(Timer, one grandchild)) under the same rules; only a nesting plan
             starts one (depth 2 at most). Under durable: the wait that started children is the
             log's WAIT_FOR result, in a batch that landed before any Worker ran a child's attempt

It prints one summary line and exits 1 on any violation. Usable on a saved run directory.
"""
import base64
import glob
import json
import os
import re
import sys
from collections import Counter, defaultdict

SLACK_S = 0.05  # the proxy stamps a lease write after its sender did (loopback) + clock rates
READY = re.compile(r"dex-server-zd serve ready: node \S+ epoch (\d+) holder (\S+)")
INT_TEXT = re.compile(r"-?\d+")
ENDED = {"FLOW_COMPLETED", "FLOW_FAILED", "FLOW_CANCELED", "FLOW_TERMINATED", "FLOW_TIMED_OUT"}
# How a chaos-child planned with a flow timeout ends, by its "timeout_policy".
TIMEOUT_ENDS = {"FAIL": "FLOW_TIMED_OUT", "CANCEL": "FLOW_CANCELED", "HANDLER": "FLOW_COMPLETED"}
HANDLER_ID = "timeout"  # the timeout handler's step execution ID (docs/flow-rules.md)


def load_jsonl(path):
    out = []
    if not os.path.exists(path):
        return out
    with open(path, errors="replace") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                out.append(json.loads(line))
            except ValueError:
                pass  # a line cut by a SIGKILL
    return out


def acknowledged_flows(history_path):
    return {h["flow"] for h in load_jsonl(history_path) if h.get("op") == "start" and h.get("ok")}


def norm(v):
    """A protobuf JSON value with every Payload ({"data": base64 JSON text}) decoded, and every
    integer-looking string (int64 fields) made an int, so that equal messages compare equal."""
    if isinstance(v, dict):
        if set(v) == {"data"} and isinstance(v["data"], str):
            try:
                return {"payload": json.loads(base64.b64decode(v["data"]))}
            except ValueError:
                return {"payload_raw": v["data"]}
        return {k: norm(x) for k, x in v.items()}
    if isinstance(v, list):
        return [norm(x) for x in v]
    if isinstance(v, str) and INT_TEXT.fullmatch(v):
        return int(v)
    return v


def payloads(v):
    """Every decoded payload value inside a normalized message."""
    if isinstance(v, dict):
        if "payload" in v and len(v) == 1:
            yield v["payload"]
            return
        for x in v.values():
            yield from payloads(x)
    elif isinstance(v, list):
        for x in v:
            yield from payloads(x)


def nonce_of(result):
    """(worker, nonce) from the "by" of a normalized decision or locals, or None."""
    for p in payloads(result):
        if isinstance(p, dict) and isinstance(p.get("by"), dict):
            return (p["by"].get("w"), p["by"].get("n"))
    return None


def attr_value(a):
    """The value of a normalized protobuf JSON Attribute (None: a deletion)."""
    v = a.get("value") or {}
    return next(iter(v.values()), None)


def messages_of(v):
    """The "m" of every message payload in a normalized list of Payloads."""
    return [p.get("m") if isinstance(p, dict) else p for p in payloads(v)]


class Checker:
    def __init__(self, run_dir):
        self.dir = run_dir
        self.violations = []
        self.by_check = Counter()
        self.stats = {}

    def violation(self, check, detail):
        self.by_check[check] += 1
        if self.by_check[check] <= 50:  # keep the report readable; every one is counted
            self.violations.append(f"[{check}] {detail}")
        else:
            self.violations.append(None)

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    def load(self):
        with open(self.path("meta.json")) as f:
            self.meta = json.load(f)
        self.lease_s = float(self.meta["lease_s"])
        self.history = load_jsonl(self.path("history.jsonl"))
        self.events = load_jsonl(self.path("events.jsonl"))
        self.proxy = sorted(load_jsonl(self.path("proxy-events.jsonl")), key=lambda e: e["t"])
        self.runs = []
        for p in sorted(glob.glob(self.path("workers", "*.jsonl"))):
            self.runs += load_jsonl(p)
        with open(self.path("final", "flows.json")) as f:
            self.final = json.load(f)
        with open(self.path("final", "log.json")) as f:
            self.log = json.load(f)
        # Incarnations of each serve address: start time, log file, holder ID from its log.
        self.incarnations = defaultdict(list)  # address -> [(t_start, name.inc, holder or None)]
        for e in self.events:
            if e.get("ev") == "start" and e.get("addr"):
                holder = None
                try:
                    with open(self.path(e["log"]), errors="replace") as f:
                        m = READY.search(f.read())
                    holder = m.group(2) if m else None
                except OSError:
                    pass
                self.incarnations[e["addr"]].append((e["t"], f"{e['proc']}.{e['inc']}", holder))
        for v in self.incarnations.values():
            v.sort()

    # ------------------------------------------------------------------------ log and lease

    def check_log(self):
        batches = self.log.get("batches", [])
        self.effective = []
        self.epoch_writer = {}
        self.epoch_start_slot = {}
        max_epoch, prev_slot = 0, None
        for b in batches:
            slot = int(b["slot"])
            if b.get("missing"):
                self.violation("log", f"slot {slot} is missing inside the log (a hole)")
                continue
            if prev_slot is not None and slot != prev_slot + 1:
                self.violation("log", f"slot {slot} follows slot {prev_slot}")
            prev_slot = slot
            epoch = int(b["epoch"])
            details = b.get("recordDetails", [])
            first_is_start = bool(details) and "epochStart" in details[0]
            if epoch < max_epoch:
                self.violation("log", f"slot {slot} holds a batch of epoch {epoch} by "
                               f"{b['writerProcessId']} after epoch {max_epoch} started at slot "
                               f"{self.epoch_start_slot[max_epoch]}: a fenced writer's batch "
                               "landed after the fence (epochs went backwards)")
                continue
            if epoch > max_epoch:
                if not first_is_start:
                    self.violation("log", f"slot {slot} starts epoch {epoch} without an EpochStart")
                self.epoch_writer[epoch] = b["writerProcessId"]
                self.epoch_start_slot[epoch] = slot
                max_epoch = epoch
            else:
                if b["writerProcessId"] != self.epoch_writer[epoch]:
                    self.violation("log", f"slot {slot}: epoch {epoch} written by "
                                   f"{b['writerProcessId']} and by {self.epoch_writer[epoch]}")
                if any("epochStart" in r for r in details):
                    self.violation("log", f"slot {slot}: a second EpochStart in epoch {epoch}")
            self.effective.append(b)
        self.stats["log_slots"] = len(batches)
        self.stats["epochs"] = len(self.epoch_writer)

    def check_lease(self):
        D = self.lease_s
        landed = [e for e in self.proxy if e["c"] == "lease" and e["m"] == "PUT"
                  and e.get("u") == 200 and "lease" in e]
        landed.sort(key=lambda e: e["t_end"])
        self.acquired = {}  # epoch -> (holder, landing upper bound)
        prev_epoch = 0
        for e in landed:
            rec = e["lease"]
            epoch = rec["epoch"]
            if epoch != prev_epoch:
                if epoch != prev_epoch + 1 or rec["renewal_count"] != 0 or rec["released"]:
                    self.violation("lease", f"lease write of epoch {epoch} (renewal "
                                   f"{rec['renewal_count']}, released {rec['released']}) by "
                                   f"{rec['holder']} landed after epoch {prev_epoch}")
                self.acquired[epoch] = (rec["holder"], e["t_end"])
                prev_epoch = epoch
        # Upper bounds of each holder's lease periods, in store time.
        self.periods = defaultdict(list)  # holder -> [(start, end, epoch)]
        for idx, e in enumerate(landed):
            rec = e["lease"]
            if rec["released"]:
                continue
            start = e["t"]
            end = start + rec.get("duration_ms", D * 1000) / 1000.0
            for later in landed[idx + 1:]:
                lr = later["lease"]
                if lr["holder"] != rec["holder"] or lr["epoch"] != rec["epoch"]:
                    end = min(end, later["t_end"])  # another acquisition landed
                    break
                if lr["released"]:
                    end = min(end, later["t_end"])
                    break
            self.periods[rec["holder"]].append((start, end, rec["epoch"]))
        for epoch, writer in self.epoch_writer.items():
            got = self.acquired.get(epoch)
            if got is None:
                self.violation("log", f"epoch {epoch} in the log, but no lease write of that "
                               "epoch reached the store")
            elif got[0] != writer:
                self.violation("log", f"epoch {epoch} was written by {writer} but its lease was "
                               f"acquired by {got[0]}")
        self.stats["lease_writes"] = len(landed)

    def valid_between(self, holder, t0, t1, epoch=None):
        for start, end, e in self.periods.get(holder, []):
            if epoch is not None and e != epoch:
                continue
            if start <= t1 and end + SLACK_S >= t0:
                return True
        return False

    def process_at(self, addr, t):
        best = None
        for start, name, holder in self.incarnations.get(addr, []):
            if start <= t:
                best = (name, holder)
        return best

    # ------------------------------------------------------------------------ the log's records

    def index_log(self):
        """Indexes the flow records of the effective log: the first batch with each Flow's
        StartFlow and each publish request ID, the Worker results, the assignments, the ASYNC
        methods of the declarations, the EpochStarts' times; and when each batch landed: the
        arrival (plus an injected delay) of the proxied PUT that carried its write ID and got
        a 200."""
        self.first_start, self.start_records, self.first_publish = {}, defaultdict(list), {}
        self.first_rpc_result, self.first_set = {}, {}
        self.log_results, self.assignments = [], defaultdict(list)
        self.async_methods, self.epoch_start_at, self.lock_methods = set(), [], set()
        for b in self.effective:
            for r in b.get("recordDetails", []):
                if "epochStart" in r:
                    self.epoch_start_at.append(int(r["epochStart"].get("atUnixMs", 0)))
                fr = r.get("flow")
                if not fr:
                    continue
                if "declareFlows" in fr:
                    for d in fr["declareFlows"].get("declarations", []):
                        for st in d.get("steps", []):
                            for m, name in (("waitFor", "WAIT_FOR"), ("execute", "EXECUTE")):
                                if st.get("options", {}).get(m, {}).get("durability") == "ASYNC":
                                    self.async_methods.add((st["stepType"], name))
                                if st.get("options", {}).get(m, {}).get("lockKeys"):
                                    self.lock_methods.add((st["stepType"], name))
                elif "startFlow" in fr:
                    sf = fr["startFlow"]
                    self.first_start.setdefault(sf["flowId"], b)
                    self.start_records[sf["flowId"]].append((int(b["slot"]), sf))
                elif "publish" in fr:
                    self.first_publish.setdefault(fr["publish"].get("requestId", ""), b)
                elif "methodResult" in fr:
                    mr = fr["methodResult"]
                    self.log_results.append((b, mr))
                    t = mr.get("task", {})
                    if t.get("method") == "RPC" and mr.get("outcome") == "ATTEMPT_COMPLETED":
                        self.first_rpc_result.setdefault(
                            (t.get("flowId"), t.get("stepExecutionId")), b)
                elif "setAttributes" in fr:
                    for w in fr["setAttributes"].get("writes", []):
                        v = w.get("value", {}).get("stringValue")
                        if w.get("key") == "note" and v:
                            self.first_set.setdefault((fr["setAttributes"].get("flowId"), v), b)
                for a in fr.get("assignments", []):
                    t = a["task"]
                    key = (t.get("flowId"), t.get("runId"), t.get("stepExecutionId"),
                           t.get("method"), int(t.get("attempt", 0)))
                    self.assignments[key].append((int(b["epoch"]), int(fr.get("atUnixMs", 0)),
                                                  a.get("taskId"), int(b["slot"])))
        self.landed = {}
        for e in self.proxy:
            if e["c"] == "log" and e["m"] == "PUT" and e.get("u") == 200 and "batch" in e:
                self.landed.setdefault((e["slot"], e["batch"].get("write_id")),
                                       e["t"] + e.get("delay", 0))
        self.worker_done, self.worker_run = {}, {}
        self.child_first_run = {}  # Flow ID -> the time a Worker first ran one of its attempts
        for r in self.runs:
            if r.get("ev") == "done":
                self.worker_done[(r["worker"], r["nonce"])] = r
            elif r.get("ev") == "run":
                self.worker_run[(r["worker"], r["nonce"])] = r
                t = r["t"] / 1000.0
                if t < self.child_first_run.get(r["flow"], float("inf")):
                    self.child_first_run[r["flow"]] = t

    # ------------------------------------------------------------------------ answers

    def durable(self, what, b, h, name, holder, new):
        """The batch `b` that holds what the answer `h` acknowledged landed before the answer,
        under a lease period of its writer's epoch; one answered as new was written by the
        process that answered."""
        t1 = h["t1"] / 1000.0
        slot, epoch, writer = int(b["slot"]), int(b["epoch"]), b["writerProcessId"]
        if new and writer != holder:
            self.violation("durable", f"{what} answered as new by {name} ({holder}) but written "
                           f"at slot {slot} by {writer}")
        landing = self.landed.get((slot, b.get("writeId")))
        if landing is None:
            self.violation("durable", f"slot {slot} ({what}) never reached the store through the "
                           "proxy")
            return
        if t1 < landing:
            self.violation("durable", f"{what} acknowledged at {t1:.3f}, before its batch (slot "
                           f"{slot}) reached the store at {landing:.3f}")
        elif not self.valid_between(writer, landing, t1, epoch):
            self.violation("durable", f"{what}: slot {slot} landed at {landing:.3f} and was "
                           f"acknowledged at {t1:.3f} with no lease period of {writer} epoch "
                           f"{epoch} in between")

    def check_answers(self):
        self.index_log()
        n = Counter()
        for h in self.history:
            t0, t1 = h["t0"] / 1000.0, h["t1"] / 1000.0
            op = h["op"]
            n[(op, bool(h.get("ok")))] += 1
            if not h.get("ok"):
                if op == "get" and h.get("code") == "NOT_FOUND":
                    self.violation("reads", f"read of {h['flow']} (acknowledged before it) found "
                                   f"nothing: {h.get('msg_text', '')[:160]}")
                if op == "publish" and h.get("code") == "NOT_FOUND":
                    self.violation("publishes", f"publish {h['req']} to {h['flow']} (acknowledged "
                                   f"before it) found no such Flow: {h.get('msg_text', '')[:160]}")
                continue
            proc = self.process_at(h["addr"], t1)
            if proc is None:
                self.violation("answer", f"{op} {h['flow']} answered by {h['addr']} where no "
                               "process was started")
                continue
            name, holder = proc
            if holder is None:
                self.violation("answer", f"{op} {h['flow']} answered by {name}, which never "
                               "became active")
                continue
            if not self.valid_between(holder, t0, t1):
                self.violation("answer", f"{op} {h['flow']} answered by {name} ({holder}) "
                               f"between {t0:.3f} and {t1:.3f}, outside its lease periods "
                               f"{self.near_periods(holder, t0)}")
            if op == "start":
                b = self.first_start.get(h["flow"])
                if b is None:
                    self.violation("durable", f"acknowledged start of {h['flow']} (answered by "
                                   f"{name} at {t1:.3f}) is not in the log")
                    continue
                self.durable(f"start of {h['flow']}", b, h, name, holder, not h.get("existed"))
            elif op == "publish":
                b = self.first_publish.get(h["req"])
                if b is None:
                    self.violation("durable", f"acknowledged publish {h['req']} to {h['flow']} "
                                   f"(answered by {name} at {t1:.3f}) is not in the log")
                    continue
                # A repeat after an attempt that landed is answered without a write: no writer
                # check, only that the first record with the request ID landed before.
                self.durable(f"publish {h['req']} to {h['flow']}", b, h, name, holder, False)
            elif op == "rpc":  # answered once its result is durable (a repeat: the first's)
                b = self.first_rpc_result.get((h["flow"], "req:" + h["req"]))
                if b is None:
                    self.violation("durable", f"acknowledged RPC {h['req']} to {h['flow']} "
                                   f"(answered by {name} at {t1:.3f}) has no result in the log")
                    continue
                self.durable(f"RPC {h['req']} to {h['flow']}", b, h, name, holder, False)
            elif op == "set":
                b = self.first_set.get((h["flow"], h["value"]))
                if b is None:
                    self.violation("durable", f"acknowledged set of {h['flow']} note[{h['inst']}]"
                                   f" = {h['value']} (answered by {name} at {t1:.3f}) is not in "
                                   "the log")
                    continue
                self.durable(f"set of {h['flow']} note = {h['value']}", b, h, name, holder,
                             False)
        self.stats.update(starts_ok=n[("start", True)], starts_failed=n[("start", False)],
                          publish_calls_ok=n[("publish", True)],
                          publish_calls_failed=n[("publish", False)],
                          gets_ok=n[("get", True)], gets_failed=n[("get", False)])

    def near_periods(self, holder, t):
        ps = sorted(self.periods.get(holder, []), key=lambda p: abs(p[0] - t))[:2]
        return [f"[{s:.3f}, {e:.3f}) e{ep}" for s, e, ep in ps]

    def check_reads(self):
        obs = defaultdict(list)
        for h in self.history:
            if h.get("ok") and h.get("status"):
                obs[h["flow"]].append((h["t0"], h["t1"], h["status"]))
        for flow, seen in obs.items():
            ended = [(t1, s) for _, t1, s in seen if s in ENDED]
            if not ended:
                continue
            first_end = min(t1 for t1, _ in ended)
            for t0, t1, s in seen:
                if s == "FLOW_RUNNING" and t0 > first_end:
                    self.violation("reads", f"{flow} read RUNNING at {t0 / 1000:.3f} after it "
                                   f"was seen closed at {first_end / 1000:.3f}")

    # ------------------------------------------------------------------------ final state

    def description(self, fid):
        e = self.final.get(fid) or {}
        return e.get("description")

    def check_flows(self):
        acked = defaultdict(list)
        tried = set()
        for h in self.history:
            if h["op"] == "start":
                tried.add(h["flow"])
                if h.get("ok"):
                    acked[h["flow"]].append(h)
        lost, running, statuses = [], [], Counter()
        for fid in sorted(tried):
            d = self.description(fid)
            if d is None:
                if fid in acked:
                    lost.append(fid)
                    self.violation("flows", f"acknowledged flow {fid} does not exist: "
                                   f"{(self.final.get(fid) or {}).get('error', 'not read back')}")
                continue
            if fid in acked:
                statuses[d.get("status")] += 1
                if d.get("status") not in ENDED:
                    running.append(fid)
                    self.violation("flows", f"acknowledged flow {fid} never ended "
                                   f"({d.get('status')})")
                answered = {h.get("run") for h in acked[fid]}
                if answered != {d.get("runId")}:
                    self.violation("flows", f"{fid}: the starts were answered with runs "
                                   f"{sorted(answered)}, the Flow's run is {d.get('runId')}")
            if int(d.get("runs", 1)) != 1:
                self.violation("flows", f"{fid}: {d.get('runs')} runs of one Flow ID")
            for slot, sf in self.start_records.get(fid, []):
                if sf.get("options", {}).get("requestId") != f"start-{fid}":
                    self.violation("flows", f"{fid}: slot {slot} starts it with request ID "
                                   f"{sf.get('options', {}).get('requestId')!r}")
        # No ListFlows in dex.FlowService: a run nobody asked for can only be found in the log.
        for fid in sorted(set(self.start_records) - tried):
            self.violation("flows", f"the log starts {fid}, which no client tried to start")
        self.stats.update(acknowledged=len(acked), lost=len(lost), not_ended=len(running),
                          completed=statuses.get("FLOW_COMPLETED", 0),
                          failed=sum(v for k, v in statuses.items() if k != "FLOW_COMPLETED"),
                          flows_total=sum(1 for f in self.final.values() if "description" in f))

    def match_result(self, what, content, key, field, extra=None):
        """The Worker's "done" line for the nonce in `content` exists, names the same execution,
        method and attempt (key: flow, run, exec, method, attempt), and returned `content`."""
        nk = nonce_of(extra if extra is not None else content)
        wd = self.worker_done.get(nk) if nk else None
        if wd is None:
            self.violation("results", f"{what}: no Worker logged a result with nonce {nk}")
            return
        got = (wd["flow"], wd["run"], wd["exec"], wd["method"], wd["attempt"])
        if got != key:
            self.violation("results", f"{what}: recorded for {key}, but Worker {wd['worker']} "
                           f"produced it (nonce {nk[1]}) for {got}")
        elif norm(wd.get(field)) != content:
            self.violation("results", f"{what}: differs from what Worker {wd['worker']} returned "
                           f"(nonce {nk[1]})")
        elif extra is not None and {"payload": wd.get("locals")} != extra:
            self.violation("results", f"{what}: locals differ from what Worker {wd['worker']} "
                           f"returned (nonce {nk[1]})")

    def run_entries(self):
        """(flow id, description, events) of every run read back, normalized: each Flow's latest
        run, and the earlier runs of a Flow retried (a SubFlow child)."""
        for fid, entry in sorted(self.final.items()):
            if "description" not in entry or "events" not in entry:
                continue
            yield fid, self.normed(("d", fid), entry["description"]), self.events_of(fid)
            for i, e in enumerate(entry.get("earlier", [])):
                yield (fid, self.normed(("d", fid, i), e["description"]),
                       self.normed(("ev", fid, i), e["events"]))

    def normed(self, key, value):
        """norm(value), computed once per check_all (the final state is read by many checks)."""
        if key not in self._normed:
            self._normed[key] = norm(value)
        return self._normed[key]

    def check_history(self):
        pub_at = defaultdict(list)    # message -> [(flow, seq)]
        taken_at = defaultdict(list)  # message -> [(flow, exec, seq)]
        published = taken = 0
        for fid, d, ev in self.run_entries():
            run = d.get("runId")
            typ = d.get("flowType")
            inp = d.get("input", {}).get("payload", {})
            inp = inp if isinstance(inp, dict) else {}
            seqs = [x.get("seq", 0) for x in ev]
            if seqs != sorted(set(seqs)):
                self.violation("decisions", f"{fid}: history sequence numbers {seqs[:20]}")
            ats = [int(x.get("atMs", 0)) for x in ev]
            back = next((i for i in range(1, len(ats)) if ats[i] < ats[i - 1]), None)
            if back is not None:  # records' times rise in log order (src/engine/record_time.h)
                self.violation("decisions", f"{fid}: history goes back in time: event "
                               f"{ev[back].get('seq')} ({ev[back]['kind']}) at {ats[back]} after "
                               f"{ats[back - 1]}")
            kinds = Counter(x["kind"] for x in ev)
            if kinds["FLOW_STARTED"] != 1:
                self.violation("decisions", f"{fid}: {kinds['FLOW_STARTED']} FLOW_STARTED events")
            closed = [x for x in ev if x["kind"] == "FLOW_CLOSED"]
            if d.get("status") in ENDED:
                if len(closed) != 1 or ev[-1] is not closed[0] or \
                        closed[0].get("status") != d.get("status"):
                    self.violation("state", f"{fid}: served {d.get('status')}, history closes "
                                   f"{[c.get('status') for c in closed]}")
            handled = self.check_timeout_handler(fid, d, ev, inp)
            per = Counter((x.get("stepExecutionId"), x["kind"]) for x in ev
                          if x["kind"] in ("EXECUTE_COMPLETED", "WAIT_FOR_COMPLETED",
                                           "WAIT_COMPLETED"))
            for (ex, kind), c in per.items():
                if c > 1:
                    self.violation("decisions", f"{fid}/{ex}: {kind} applied {c} times")
            first_step = "Work" if typ == "chaos-child" else "Begin"
            created, done, outputs = Counter({first_step: 1}), {}, {}
            for x in ev:
                if x["kind"] != "EXECUTE_COMPLETED":
                    continue
                ex, dec = x.get("stepExecutionId"), x.get("decision", {})
                done[ex] = x
                for mv in dec.get("goTo", {}).get("movements", []):
                    created[mv["stepType"]] += 1
                if "gracefulComplete" in dec:
                    outputs[ex] = dec["gracefulComplete"]
                self.match_result(f"{fid}/{ex} applied decision (attempt {x.get('attempt')})",
                                  dec, (fid, run, ex, "EXECUTE", x.get("attempt")), "decision")
            execs = {x["stepExecutionId"] for x in ev if x.get("stepExecutionId")
                     and x.get("method") != "RPC" and not x["kind"].startswith("RPC_")
                     and x["stepExecutionId"] != HANDLER_ID}
            for ex in sorted(execs):
                step, _, num = ex.rpartition("-")
                if not num.isdigit() or int(num) > created[step]:
                    self.violation("decisions", f"{fid}/{ex} ran, but the applied decisions "
                                   f"created {created[step]} {step} executions")
            if d.get("status") == "FLOW_COMPLETED":
                if typ == "chaos-child":
                    # The handler's ForceComplete ends the run while Work waits on its Timer.
                    want = {"Work": 1, "Finish": 1} if inp.get("two") and handled is None \
                        else {"Work": 1}
                else:
                    want = {"Begin": 1, "Fast": 1, "Gate": inp.get("rounds", 3)}
                    if inp.get("fan"):
                        want["Fan"] = 1
                if dict(created) != want:
                    self.violation("decisions", f"{fid}: the applied decisions created "
                                   f"{dict(created)}, the Flow makes {want}")
                if handled is not None:  # the handler's ForceComplete ended the run
                    outputs[HANDLER_ID] = handled
                for typ, c in created.items():
                    for k in range(1, c + 1):
                        if f"{typ}-{k}" not in done and handled is None:
                            self.violation("decisions", f"{fid}: completed without {typ}-{k} "
                                           "deciding")
                b = done.get("Begin-1")
                if b is not None and b.get("attempt", 0) < 2:
                    self.violation("decisions", f"{fid}: Begin-1 decided at attempt "
                                   f"{b.get('attempt')}, but its first attempt always fails")
                served = {o.get("stepExecutionId"): o.get("output") for o in d.get("outputs", [])}
                if served != outputs:
                    self.violation("state", f"{fid}: served outputs {sorted(served)} differ from "
                                   f"the applied GracefulCompletes {sorted(outputs)}")
            # Channel "signals": FIFO, each message once.
            pubs, takes = [], []
            for x in ev:
                if x["kind"] == "CHANNEL_PUBLISHED":
                    for m in messages_of(x.get("publish", {})):
                        pubs.append((m, x["seq"]))
                        pub_at[m].append((fid, x["seq"]))
                elif x["kind"] == "WAIT_COMPLETED":
                    for c in sorted(x.get("conditions", []), key=lambda c: c.get("index", 0)):
                        for m in messages_of(c.get("messages", [])):
                            takes.append((m, x["seq"]))
                            taken_at[m].append((fid, x.get("stepExecutionId"), x["seq"]))
            published += len(pubs)
            taken += len(takes)
            # The Execute that decided saw exactly what its wait took (Gate's output "took").
            took_by = defaultdict(list)
            for x in ev:
                if x["kind"] == "WAIT_COMPLETED":
                    for c in sorted(x.get("conditions", []), key=lambda c: c.get("index", 0)):
                        took_by[x.get("stepExecutionId")] += messages_of(c.get("messages", []))
            for ex, x in done.items():
                if not ex.startswith("Gate-"):
                    continue
                seen = [p.get("took") for p in payloads(x.get("decision", {}))
                        if isinstance(p, dict) and "took" in p]
                if seen and [m.get("m") for m in seen[0]] != took_by.get(ex, []):
                    self.violation("publishes", f"{fid}/{ex}: Execute saw {seen[0]}, its wait "
                                   f"took {took_by.get(ex, [])}")
            for i, (m, seq) in enumerate(takes):
                if i >= len(pubs) or pubs[i][0] != m:
                    self.violation("publishes", f"{fid}: take #{i + 1} is {m} (seq {seq}), but the "
                                   f"channel's #{i + 1} message is "
                                   f"{pubs[i][0] if i < len(pubs) else 'none'} (not FIFO)")
                    break
                if pubs[i][1] > seq:
                    self.violation("publishes", f"{fid}: {m} taken at seq {seq} before it was "
                                   f"published at seq {pubs[i][1]}")
        for m, where in pub_at.items():
            if len(where) > 1:
                self.violation("publishes", f"message {m} published {len(where)} times: {where}")
        for m, where in taken_at.items():
            if len(where) > 1:
                self.violation("publishes", f"message {m} taken {len(where)} times: {where}")
            if m not in pub_at:
                self.violation("publishes", f"message {m} taken by {where} but never published")
        # Every acknowledged publish is in its run's history; a refused one is not.
        by_req = defaultdict(list)
        for h in self.history:
            if h["op"] == "publish":
                by_req[h["req"]].append(h)
        acked = 0
        definite = {"FAILED_PRECONDITION", "NOT_FOUND", "INVALID_ARGUMENT", "ALREADY_EXISTS"}
        for req, hs in by_req.items():
            m, fid = hs[0]["msg"], hs[0]["flow"]
            if any(h.get("ok") for h in hs):
                acked += 1
                if not any(f == fid for f, _ in pub_at.get(m, [])):
                    self.violation("publishes", f"acknowledged publish {req} ({m}) is not in the "
                                   f"history of {fid}")
            elif all(h.get("code") in definite for h in hs) and m in pub_at:
                self.violation("publishes", f"publish {req} ({m}) was refused "
                               f"({hs[-1].get('code')}) but is in {pub_at[m]}")
        self.stats.update(publishes=len(by_req), publishes_acked=acked, published=published,
                          taken=taken, queued_at_end=published - taken)

    def check_timeout_handler(self, fid, d, ev, plan):
        """A run's timeout handler events: none unless its plan's timeout policy is HANDLER;
        then it starts once (a run times out once) and, the run COMPLETED, completed once with
        the ForceComplete that ended the run, a decision its Worker returned for that attempt,
        at attempt 2 or later (the first fails on purpose).
        Returns that decision's payload when the handler ended the run, else None."""
        run = d.get("runId")
        mine = [x for x in ev if x["kind"].startswith("TIMEOUT_HANDLER_")]
        kinds = Counter(x["kind"] for x in mine)
        if plan.get("timeout_policy") != "HANDLER" or not plan.get("timeout_ms"):
            if mine:
                self.violation("decisions", f"{fid}: timeout handler events {dict(kinds)} in a "
                               f"run whose plan has no HANDLER timeout ({plan})")
            return None
        self.stats["timeout_handler_runs"] = self.stats.get("timeout_handler_runs", 0) + 1
        if d.get("status") not in ENDED:
            return None
        if kinds["TIMEOUT_HANDLER_STARTED"] != 1:
            self.violation("decisions", f"{fid}: {kinds['TIMEOUT_HANDLER_STARTED']} "
                           "TIMEOUT_HANDLER_STARTED events: a run times out once")
        done = [x for x in mine if x["kind"] == "TIMEOUT_HANDLER_COMPLETED"]
        if d.get("status") != "FLOW_COMPLETED" or len(done) != 1 or \
                "forceComplete" not in done[0].get("decision", {}):
            self.violation("decisions", f"{fid}: ended {d.get('status')} with "
                           f"{len(done)} TIMEOUT_HANDLER_COMPLETED events "
                           f"({[x.get('decision') for x in done]}); its handler ForceCompletes")
            return None
        x = done[0]
        if int(x.get("attempt", 0)) < 2:
            self.violation("decisions", f"{fid}: its timeout handler decided at attempt "
                           f"{x.get('attempt')}, but its first attempt always fails")
        self.match_result(f"{fid}/{HANDLER_ID} applied decision (attempt {x.get('attempt')})",
                          x["decision"], (fid, run, HANDLER_ID, "ON_TIMEOUT", x.get("attempt")),
                          "decision")
        self.stats["timeout_handler_completed"] = \
            self.stats.get("timeout_handler_completed", 0) + 1
        return x["decision"]["forceComplete"]

    def check_results(self):
        """Every Worker result in the log came from the attempt it names."""
        outcomes = Counter()
        nonce_tasks = defaultdict(set)
        fails = {(r["flow"], r["run"], r["exec"], r["method"], r["attempt"])
                 for r in self.worker_done.values() if r.get("result") == "fail"}
        for b, mr in self.log_results:
            t = mr.get("task", {})
            key = (t.get("flowId"), t.get("runId"), t.get("stepExecutionId"), t.get("method"),
                   int(t.get("attempt", 0)))
            outcome = mr.get("outcome", "")
            outcomes[outcome] += 1
            what = f"slot {b['slot']}: result of {key[0]}/{key[2]} {key[3]} attempt {key[4]} " \
                   f"(task {mr.get('taskId')})"
            if outcome == "ATTEMPT_COMPLETED" and key[3] == "RPC":
                # An RPC's output and writes are what the Worker's handler returned.
                content = norm(mr.get("rpc", {}).get("output", {}))
                nk = nonce_of(content)
                wd = self.worker_done.get(nk) if nk else None
                if wd is None:
                    self.violation("results", f"{what}: RPC output {content} no Worker returned")
                    continue
                got = (wd["flow"], wd["run"], wd["exec"], wd["method"], wd["attempt"])
                if got != key or {"payload": norm(wd.get("output"))} != content or \
                        norm(wd.get("writes", [])) != norm(mr.get("attributeWrites", [])):
                    self.violation("results", f"{what}: differs from what Worker {wd['worker']} "
                                   f"returned (nonce {nk[1]}) for {got}")
                nonce_tasks[nk].add(mr.get("taskId"))
            elif outcome == "ATTEMPT_COMPLETED":
                if key[3] in ("EXECUTE", "ON_TIMEOUT"):
                    content = norm(mr.get("decision", {}))
                    self.match_result(what, content, key, "decision")
                else:
                    content, locals_ = norm(mr.get("wait", {})), norm(mr.get("locals", {}))
                    self.match_result(what, content, key, "wait", extra=locals_)
                    content = locals_
                nk = nonce_of(content)
                if nk:
                    nonce_tasks[nk].add(mr.get("taskId"))
            elif outcome == "ATTEMPT_FAILED" and mr.get("error", "").startswith("chaos:"):
                if key not in fails:
                    self.violation("results", f"{what}: a Worker failure no Worker logged")
        for nk, tasks in nonce_tasks.items():
            if len(tasks) > 1:
                self.violation("results", f"one Worker result (nonce {nk}) recorded for tasks "
                               f"{sorted(tasks)}")
        self.stats["log_results"] = dict(outcomes)

    def check_applied(self):
        """Which Worker results the log applied, by a small model of the rules for one method of
        one Step execution (docs/flow-rules.md): an assignment applies when no attempt of the
        method is running and it names the next attempt number; a result applies when it names
        the running task; an EpochStart ends every running attempt (recovery: the next attempt
        gets the next number); a withdrawal queues the same number again; an execution whose
        Execute completed takes nothing more; for a method with lock keys every hand-out of the
        running number is a candidate (see below). The decisions the history shows applied (attempt
        and Worker nonce) must be exactly those the log applies: a decision served that the log
        does not hold, or one the log holds that the server did not apply, is reported."""
        running, next_n, done = {}, defaultdict(lambda: 1), set()
        maybe_void = {}  # a method with lock keys -> the number of its unanswered hand-out

        def locks(key):
            return (key[2].rpartition("-")[0], key[3]) in self.lock_methods
        self.applied = {}  # (flow, run, exec) -> (attempt, nonce) of the applied decision
        for b in self.effective:
            for r in b.get("recordDetails", []):
                if "epochStart" in r:
                    for key, (task, n) in running.items():
                        next_n[key] = n + 1
                    running.clear()
                    continue
                fr = r.get("flow")
                if not fr:
                    continue
                res = fr.get("methodResult") or fr.get("attemptWithdrawn")
                if res:
                    t = res.get("task", {})
                    key = (t.get("flowId"), t.get("runId"), t.get("stepExecutionId"),
                           t.get("method"))
                    cur = running.get(key)
                    if cur is not None and res.get("taskId") in cur[0] and key[:3] not in done:
                        del running[key]
                        maybe_void.pop(key, None)
                        if "attemptWithdrawn" in fr:
                            next_n[key] = cur[1]
                        elif res.get("outcome") == "ATTEMPT_COMPLETED":
                            if key[3] in ("EXECUTE", "ON_TIMEOUT"):
                                nk = nonce_of(norm(res.get("decision", {})))
                                self.applied[key[:3]] = (cur[1], nk)
                                done.add(key[:3])
                        else:
                            next_n[key] = cur[1] + 1
                for a in fr.get("assignments", []):
                    t = a["task"]
                    key = (t.get("flowId"), t.get("runId"), t.get("stepExecutionId"),
                           t.get("method"))
                    n = int(t.get("attempt", 0))
                    if key not in running and key[:3] not in done and n == next_n[key]:
                        running[key] = ({a.get("taskId")}, n)
                    elif locks(key) and key[:3] not in done and n == maybe_void.get(key):
                        # A hand-out of a method with lock keys applies only when its task is
                        # queued; the proposer does not see the keys its batch's earlier records
                        # took, so it may name a task that waits for a key (ignored, the same
                        # number handed out again later, perhaps after an EpochStart) or hand
                        # out again one that runs (ignored). Either may be the one that ran: a
                        # result naming one of them applies.
                        if key in running:
                            running[key] = (running[key][0] | {a.get("taskId")}, n)
                        else:
                            running[key] = ({a.get("taskId")}, n)
                        next_n[key] = n
                    if locks(key) and a.get("taskId") in running.get(key, (set(),))[0]:
                        maybe_void[key] = n
        served = {}
        for fid, desc, events in self.run_entries():
            for x in events:
                if x["kind"] in ("EXECUTE_COMPLETED", "TIMEOUT_HANDLER_COMPLETED"):
                    served[(fid, desc.get("runId"), x.get("stepExecutionId"))] = (
                        x.get("attempt"), nonce_of(x.get("decision", {})))
        for key in sorted(set(served) | set(self.applied), key=str):
            if served.get(key) != self.applied.get(key):
                self.violation("state", f"{'/'.join(map(str, key))}: the history shows decision "
                               f"(attempt, nonce) {served.get(key)}, the log applied "
                               f"{self.applied.get(key)}")
        self.stats["decisions_applied"] = len(self.applied)

    def check_attempts(self):
        numbers = defaultdict(set)
        for key in self.assignments:
            numbers[key[:4]].add(key[4])
        for method, ns in numbers.items():
            if ns != set(range(1, max(ns) + 1)):
                self.violation("attempts", f"{'/'.join(method)}: attempts handed out {sorted(ns)}")
        async_rerun = tasks = 0
        for r in self.runs:
            if r.get("ev") != "run":
                continue
            tasks += 1
            key = (r["flow"], r["run"], r["exec"], r["method"], r["attempt"])
            t_run = r["t"] / 1000.0
            # Only hand-outs proposed before the run count: an ASYNC attempt whose start never
            # became durable runs again later with the same number, handed out anew.
            got = [g for g in self.assignments.get(key, []) if g[1] / 1000.0 <= t_run + SLACK_S]
            if not got:
                # RPCs are queued ASYNC (docs/flow-rules.md, "RPCs"), like Fast.
                if (r["step"], r["method"]) in self.async_methods or r["method"] == "RPC":
                    if any(at / 1000.0 > t_run - 1.0 for at in self.epoch_start_at[1:]):
                        async_rerun += 1
                        continue
                    self.violation("attempts", f"ASYNC attempt {key} ran on {r['worker']} but the "
                                   "log never handed it out, and no later epoch started")
                else:
                    self.violation("attempts", f"SYNC attempt {key} ran on {r['worker']} at "
                                   f"{t_run:.3f} but the log did not hand it out before")
                continue
            # Handed out by its epoch's holder, under a lease period between proposal and run.
            epoch, at_ms, task, _ = max(got, key=lambda g: g[1])
            holder = self.acquired.get(epoch, (None,))[0]
            if holder is not None and not self.valid_between(holder, at_ms / 1000.0 - SLACK_S,
                                                             t_run, epoch):
                self.violation("answer", f"task {task} ({key}) was handed to {r['worker']} (run "
                               f"at {t_run:.3f}, proposed at {at_ms / 1000:.3f}) outside the "
                               f"lease periods of epoch {epoch}'s holder {holder}")
        self.stats["async_not_durable_reruns"] = async_rerun
        self.stats["tasks_run"] = tasks

    # ------------------------------------------------------------------------ RPCs, Attributes,
    # locks. Each check reads the history lines of its op and each Flow's final Attributes and
    # history events.

    def final_attributes(self, fid):
        """{(key, instance): value} of the Flow's final GetAttributes, or None if not read."""
        a = (self.final.get(fid) or {}).get("attributes")
        if a is None:
            return None
        return {(x["key"], x.get("instanceKey", "")): attr_value(x)
                for x in norm(a).get("attributes", [])}

    def events_of(self, fid):
        return self.normed(("ev", fid), (self.final.get(fid) or {}).get("events", []))

    def check_rpcs(self):
        lines = [h for h in self.history if h["op"] == "rpc"]
        sent = {}  # id -> (flow, n)
        by_req = defaultdict(list)
        for h in lines:
            sent.setdefault(h["id"], (h["flow"], h["n"]))
            by_req[h["req"]].append(h)
        acked_ids = {h["id"] for h in lines if h.get("ok")}
        definite = {"FAILED_PRECONDITION", "NOT_FOUND", "INVALID_ARGUMENT"}
        refused = {hs[0]["id"] for req, hs in by_req.items()
                   if req.startswith("rpc-") and all(h.get("code") in definite for h in hs)}
        completed = {}  # (flow, rpc id) -> event
        applied_total = steps_checked = 0
        for fid in sorted(self.final):
            attrs = self.final_attributes(fid)
            if attrs is None:
                continue
            applied = {i: v for (k, i), v in attrs.items() if k == "applied"}
            applied_total += len(applied)
            total = attrs.get(("total", ""), 0)
            if total != sum(applied.values()):
                self.violation("rpcs", f"{fid}: total is {total}, but applied sums to "
                               f"{sum(applied.values())} ({len(applied)} ids): an RPC half "
                               "applied")
            for i, v in sorted(applied.items()):
                if i not in sent or sent[i][0] != fid:
                    self.violation("rpcs", f"{fid}: applied[{i}] = {v}, but no client sent id "
                                   f"{i} to it")
                elif v != sent[i][1]:
                    self.violation("rpcs", f"{fid}: applied[{i}] = {v}, the client sent n = "
                                   f"{sent[i][1]}")
                if i in refused:
                    self.violation("rpcs", f"{fid}: applied[{i}] = {v}, but every call of it "
                                   "was refused")
            writes_of = defaultdict(list)  # applied id -> [seq of the RPC_COMPLETED writing it]
            last_total = 0
            for x in self.events_of(fid):
                ws = {(w["key"], w.get("instanceKey", "")): attr_value(w)
                      for w in x.get("attributeWrites", [])}
                if x["kind"] == "RPC_COMPLETED":
                    completed[(fid, x.get("stepExecutionId"))] = x
                    for (k, i), v in ws.items():
                        if k == "applied":
                            writes_of[i].append(x["seq"])
                            if applied.get(i) != v:
                                self.violation("rpcs", f"{fid}: RPC_COMPLETED seq {x['seq']} "
                                               f"writes applied[{i}] = {v}, the final value is "
                                               f"{applied.get(i)}")
                elif any(k == "applied" or k == "total" for k, _ in ws):
                    self.violation("rpcs", f"{fid}: {x['kind']} seq {x['seq']} writes "
                                   f"{sorted(ws)}, which only the RPC may write")
                if x["kind"] == "EXECUTE_COMPLETED":
                    for (k, i), v in ws.items():
                        if k == "steps":
                            steps_checked += 1
                            if v != last_total:
                                self.violation("rpcs", f"{fid}/{i}: its Execute (holding the "
                                               f"lock) saw total {v}, the history had "
                                               f"{last_total} then (seq {x['seq']})")
                if ("total", "") in ws:
                    last_total = ws[("total", "")]
            for i in set(applied) | set(writes_of):
                if len(writes_of.get(i, [])) != 1:
                    self.violation("rpcs", f"{fid}: applied[{i}] = {applied.get(i)} written by "
                                   f"{len(writes_of.get(i, []))} RPC_COMPLETED events "
                                   f"{writes_of.get(i, [])}")
            for i in sorted(acked_ids):
                if sent[i][0] == fid and i not in applied:
                    self.violation("rpcs", f"{fid}: the acknowledged RPC id {i} (n = {sent[i][1]})"
                                   " is not applied")
        # What each acknowledged call answered is the RPC_COMPLETED output of its request.
        acked_calls = 0
        for req, hs in sorted(by_req.items()):
            ok = [h for h in hs if h.get("ok")]
            if not ok:
                continue
            acked_calls += 1
            h = ok[0]
            x = completed.get((h["flow"], "req:" + req))
            if x is None:
                self.violation("rpcs", f"RPC {req} to {h['flow']} answered {h.get('output')} "
                               f"(by {h['addr']}), but its history has no RPC_COMPLETED for it")
                continue
            if x.get("output") != {"payload": h.get("output")}:
                self.violation("rpcs", f"RPC {req} to {h['flow']} answered {h.get('output')}, "
                               f"its RPC_COMPLETED (seq {x['seq']}) shows {x.get('output')}")
            out = h.get("output") or {}
            if out.get("n") != h["n"] or bool(out.get("repeat")) != req.startswith("rpcr-"):
                self.violation("rpcs", f"RPC {req} (id {h['id']}, n {h['n']}) to {h['flow']} "
                               f"answered {out}: a {'repeat' if req.startswith('rpcr-') else 'new id'}"
                               " must answer " + ("a repeat" if req.startswith("rpcr-") else
                                                  "as new"))
        self.stats.update(rpcs=len(by_req), rpcs_acked=acked_calls,
                          rpc_calls_ok=sum(1 for h in lines if h.get("ok")),
                          rpc_calls_failed=sum(1 for h in lines if not h.get("ok")),
                          rpcs_applied=applied_total, rpcs_refused=len(refused),
                          steps_total_checked=steps_checked)

    def check_sets(self):
        lines = defaultdict(list)  # (flow, instance) -> lines in send order
        for h in self.history:
            if h["op"] == "set":
                lines[(h["flow"], h["inst"])].append(h)
        acked = 0
        for (fid, inst), hs in sorted(lines.items()):
            hs.sort(key=lambda h: h["t0"])
            attrs = self.final_attributes(fid)
            if attrs is None:
                continue
            in_history = set()
            for x in self.events_of(fid):
                if x["kind"] == "ATTRIBUTES_SET":
                    for w in x.get("attributeWrites", []):
                        if w["key"] == "note" and w.get("instanceKey") == inst:
                            in_history.add(attr_value(w))
            ok = [h for h in hs if h.get("ok")]
            acked += len({h["value"] for h in ok})
            for h in ok:
                if h["value"] not in in_history:
                    self.violation("attributes", f"acknowledged set of {fid} note[{inst}] = "
                                   f"{h['value']} (by {h['addr']}) has no ATTRIBUTES_SET")
            got = attrs.get(("note", inst))
            sent = {h["value"] for h in hs}
            if got is not None and got not in sent:
                self.violation("attributes", f"{fid}: note[{inst}] = {got}, which no client set")
            if not ok:
                continue
            last = ok[-1]
            # A set not acknowledged that was sent before the last acked one answered may have
            # landed after it (its outcome is unknown).
            allowed = {last["value"]} | {h["value"] for h in hs
                                         if not h.get("ok") and h["t1"] >= last["t0"]}
            if got not in allowed:
                self.violation("attributes", f"{fid}: note[{inst}] is {got}, but the last "
                               f"acknowledged set (answered at {last['t1'] / 1000:.3f}) wrote "
                               f"{last['value']} and no later set could replace it")
        self.stats.update(sets=sum(len({h["value"] for h in hs}) for hs in lines.values()),
                          sets_acked=acked,
                          set_calls_ok=sum(1 for hs in lines.values() for h in hs if h.get("ok")),
                          set_calls_failed=sum(1 for hs in lines.values() for h in hs
                                               if not h.get("ok")))

    def check_locks(self):
        holders = rpc_holders = 0
        for fid in sorted(self.final):
            held = {}  # key -> (holder, seq)
            for x in self.events_of(fid):
                if x["kind"] not in ("LOCKS_ACQUIRED", "LOCKS_RELEASED"):
                    continue
                who = (x.get("stepExecutionId"), x.get("method"), x.get("attempt", 0))
                keys = x.get("lockKeys", [])
                if x["kind"] == "LOCKS_ACQUIRED":
                    holders += 1
                    rpc_holders += who[1] == "RPC"
                    for k in keys:
                        if k in held:
                            self.violation("locks", f"{fid}: {'/'.join(map(str, who))} acquired "
                                           f"'{k}' at seq {x['seq']} while "
                                           f"{'/'.join(map(str, held[k][0]))} held it (since seq "
                                           f"{held[k][1]})")
                        held[k] = (who, x["seq"])
                else:
                    for k in keys:
                        if held.get(k, (None,))[0] != who:
                            self.violation("locks", f"{fid}: {'/'.join(map(str, who))} released "
                                           f"'{k}' at seq {x['seq']}, held by "
                                           f"{held.get(k, ('nobody',))[0]}")
                        held.pop(k, None)
            for k, (who, seq) in sorted(held.items()):
                self.violation("locks", f"{fid}: {'/'.join(map(str, who))} acquired '{k}' at seq "
                               f"{seq} and never released it")
        self.stats.update(lock_holders=holders, lock_holders_rpc=rpc_holders)

    # ------------------------------------------------------------------------ SubFlows

    @staticmethod
    def child_plan(cond):
        """(status, runs) a chaos-child ends with, from its SubFlow condition (chaos_worker.cc):
        runs up to fail_runs fail on purpose; a Flow retry policy allows maximumAttempts runs; a
        plan with "timeout_ms" (started with that flow timeout and fail_runs 0) ends by its
        "timeout_policy": FAIL TIMED_OUT (every run the retry policy allows), CANCEL CANCELED,
        HANDLER COMPLETED (the timeout handler's ForceComplete; Work's Timer is 60 s then, never
        due first), those two in one run whatever the retry policy.

        Only that, whatever the faults: the flow timeout's timer (start + 400 ms) and the
        Work Timer (2.5-3 s after Work's WaitFor result, itself after the start) sit in one timer
        index ordered by fire time (docs/flow-rules.md, "Keys"), and every scan, on any process
        and after any takeover, proposes due timers in that order. Work's Execute is queued only
        by its Timer's TimerFired, so the timeout's TimerFired is always proposed first, at least
        2.1 s earlier when nothing stalls, and in the same scan or one before when a pause or a
        takeover made both due at once; a COMPLETED timed-out plan means a timeout that fired
        late or was lost."""
        sf = cond.get("subFlow", {})
        inp = sf.get("input", {}).get("payload") or {}
        inp = inp if isinstance(inp, dict) else {}
        fail_runs = inp.get("fail_runs", 0)
        rp = sf.get("options", {}).get("retryPolicy")
        allowed = 1 if rp is None else (rp.get("maximumAttempts", 3) or 1 << 30)
        if inp.get("timeout_ms"):  # only TIMED_OUT is retried (CANCELED never is, COMPLETED ends)
            policy = inp.get("timeout_policy", "FAIL")
            return TIMEOUT_ENDS[policy], allowed if policy == "FAIL" else 1
        runs = min(fail_runs + 1, allowed)
        return ("FLOW_COMPLETED" if fail_runs < runs else "FLOW_FAILED"), runs

    def check_subflows(self):
        """Every SubFlow condition a parent's recorded wait holds has one child run under the
        derived Flow ID and run ID, started once and by a record that landed before the child
        ran (durable); the child ends as its own Steps say (never stopped by its parent); a child
        that closed while its condition waited met it (SUB_FLOW_CLOSED, with the child's last run
        and status) and one that closed later left the parent alone; an AllOf is met only by
        every child's close; the wait's result and the Execute's view of each child are the
        child's own final run, and the Execute ran after the child closed; every child read back
        is one a parent's wait names."""
        self.log_waits = {}  # (flow, run, exec, attempt) -> (batch, result) of a WAIT_FOR
        for b, mr in self.log_results:
            t = mr.get("task", {})
            if t.get("method") == "WAIT_FOR" and mr.get("outcome") == "ATTEMPT_COMPLETED":
                self.log_waits.setdefault((t.get("flowId"), t.get("runId"),
                                           t.get("stepExecutionId"), int(t.get("attempt", 0))),
                                          (b, mr))
        n = Counter()
        named = set()  # the derived Flow IDs the parents' recorded waits name
        for fid, entry in sorted(self.final.items()):
            if "description" not in entry or "events" not in entry:
                continue
            d, ev = self.normed(("d", fid), entry["description"]), self.events_of(fid)
            by_exec = defaultdict(lambda: defaultdict(list))  # exec -> kind -> [event]
            for x in ev:
                if x.get("stepExecutionId"):
                    by_exec[x["stepExecutionId"]][x["kind"]].append(x)
            for ex, kinds in sorted(by_exec.items()):
                wfc = kinds.get("WAIT_FOR_COMPLETED", [])
                conds = wfc[0].get("wait", {}).get("conditions", []) if wfc else []
                subs = [i for i, c in enumerate(conds) if "subFlow" in c]
                for x in kinds.get("SUB_FLOW_STARTED", []) + kinds.get("SUB_FLOW_CLOSED", []):
                    if x.get("conditionIndex", 0) not in subs:
                        self.violation("subflows", f"{fid}/{ex}: {x['kind']} (seq {x['seq']}) for "
                                       f"condition {x.get('conditionIndex', 0)}, which its "
                                       "recorded wait does not hold as a SubFlow")
                nested = d.get("flowType") == "chaos-child"
                if nested:  # a chaos-child's wait: its plan says whether it starts a grandchild
                    plan = d.get("input", {}).get("payload") or {}
                    plan = plan if isinstance(plan, dict) else {}
                    if wfc and ex == "Work-1" and len(subs) != (1 if plan.get("nest") else 0):
                        self.violation("subflows", f"{fid}/{ex}: its recorded wait holds "
                                       f"{len(subs)} SubFlow conditions, its plan {plan} starts "
                                       f"{1 if plan.get('nest') else 0}")
                    if subs and ("/Work-" in fid or not plan.get("nest")):
                        self.violation("subflows", f"{fid}/{ex}: a grandchild's or non-nesting "
                                       f"plan ({plan}) starts SubFlows (depth 2 at most)")
                if subs:
                    before = n["met"]
                    named |= self.check_subflow_wait(fid, d, ex, wfc[0], kinds, conds, subs, n)
                    if nested:
                        n["nested"] += len(subs)
                        n["nested_met"] += n["met"] - before
        for fid, entry in sorted(self.final.items()):
            d = self.normed(("d", fid), entry.get("description") or {})
            if d.get("flowType") != "chaos-child" and not d.get("parents"):
                continue
            n["children_read"] += 1
            if fid not in named:
                self.violation("subflows", f"the child {fid} (parents {d.get('parents')}) is "
                               "named by no parent's recorded wait")
            for p in d.get("parents", []):
                if f"{p.get('flowId')}/{p.get('stepExecutionId')}/{p.get('conditionIndex', 0)}" \
                        != fid:
                    self.violation("subflows", f"the child {fid} lists parent {p}, whose derived "
                                   "ID is another")
        self.stats.update(subflow_conditions=n["conditions"], subflow_started=n["started"],
                          subflow_attached=n["attached"], subflow_met=n["met"],
                          subflow_left_running=n["left_running"],
                          subflow_left_between_runs=n["left_between_runs"],
                          subflow_children_read=n["children_read"],
                          subflow_children_completed=n["children_FLOW_COMPLETED"],
                          subflow_children_failed=n["children_FLOW_FAILED"],
                          subflow_children_timed_out=n["children_FLOW_TIMED_OUT"],
                          subflow_children_canceled=n["children_FLOW_CANCELED"],
                          subflow_timeout_plans=n["timeout_plans"],
                          subflow_timeout_plans_fail=n["timeout_plans_FAIL"],
                          subflow_timeout_plans_cancel=n["timeout_plans_CANCEL"],
                          subflow_timeout_plans_handler=n["timeout_plans_HANDLER"],
                          subflow_nested=n["nested"], subflow_nested_met=n["nested_met"],
                          subflow_children_retried=n["retried"],
                          subflow_waits_all=n["waits_ALL_OF"], subflow_waits_any=n["waits_ANY_OF"],
                          subflow_waits_met=n["waits_met"],
                          subflow_executes_checked=n["executes"])

    def subflow_start_record(self, fid, run, ex, wfc, conds):
        """The landing time of the log's WAIT_FOR result that recorded the wait (the record that
        started its children), or None after reporting why there is none (durable)."""
        got = self.log_waits.get((fid, run, ex, wfc.get("attempt")))
        if got is None:
            self.violation("durable", f"{fid}/{ex}: the history records its wait (attempt "
                           f"{wfc.get('attempt')}, SubFlows started), but the log holds no "
                           "WAIT_FOR result of that attempt")
            return None
        b, mr = got
        if norm(mr.get("wait", {})).get("conditions") != conds:
            self.violation("durable", f"{fid}/{ex}: the wait in the log (slot {b['slot']}) "
                           "differs from the one its history records")
        landing = self.landed.get((int(b["slot"]), b.get("writeId")))
        if landing is None:
            self.violation("durable", f"{fid}/{ex}: slot {b['slot']} (the wait that starts its "
                           "SubFlows) never reached the store through the proxy")
        return landing

    def check_subflow_wait(self, fid, d, ex, wfc, kinds, conds, subs, n):
        """One parent execution's wait with SubFlow conditions; returns the derived IDs."""
        run = d.get("runId")
        kind = wfc.get("wait", {}).get("kind")
        n["waits_" + str(kind)] += 1
        wc = (kinds.get("WAIT_COMPLETED") or [None])[0]
        ec = (kinds.get("EXECUTE_COMPLETED") or [None])[0]
        n["waits_met"] += wc is not None
        results = {c.get("index", 0): c for c in (wc or {}).get("conditions", [])}
        seen, exec_t = {}, None  # what the applied Execute got of each child; when it ran
        if ec is not None:
            n["executes"] += 1
            for p in payloads(ec.get("decision", {})):
                if isinstance(p, dict) and "children" in p:
                    seen = {c.get("i"): c for c in p["children"]}
                    break
            r = self.worker_run.get(nonce_of(ec.get("decision", {})))
            exec_t = r["t"] / 1000.0 if r else None
        landing = self.subflow_start_record(fid, run, ex, wfc, conds)
        named = set()
        for i in subs:
            n["conditions"] += 1
            c, derived = conds[i], f"{fid}/{ex}/{i}"
            named.add(derived)
            what = f"{fid}/{ex} SubFlow condition {i}"
            started = [x for x in kinds.get("SUB_FLOW_STARTED", []) if x.get("conditionIndex", 0) == i]
            closed = [x for x in kinds.get("SUB_FLOW_CLOSED", []) if x.get("conditionIndex", 0) == i]
            if len(started) != 1:
                self.violation("subflows", f"{what}: {len(started)} SUB_FLOW_STARTED events (seq "
                               f"{[x['seq'] for x in started]}): a child starts once")
            for x in started:
                n["attached" if x.get("attached") else "started"] += 1
                if x.get("childFlowId") != derived or x.get("childRunId") != run:
                    self.violation("subflows", f"{what}: started {x.get('childFlowId')} run "
                                   f"{x.get('childRunId')}; the derived IDs are {derived} run {run}")
                if x.get("attached"):
                    self.violation("subflows", f"{what}: attached to a run of {derived} that no "
                                   "earlier wait started")
                if x["seq"] < wfc["seq"]:
                    self.violation("subflows", f"{what}: SUB_FLOW_STARTED (seq {x['seq']}) before "
                                   f"its wait was recorded (seq {wfc['seq']})")
            entry = self.final.get(derived) or {}
            if "description" not in entry:
                self.violation("subflows", f"{what}: no child run with the derived ID {derived}: "
                               f"{entry.get('error', 'not read back')}")
                continue
            cd = self.normed(("d", derived), entry["description"])
            earlier = [self.normed(("d", derived, k), e["description"])
                       for k, e in enumerate(entry.get("earlier", []))]
            first = earlier[-1] if earlier else cd
            if first.get("runId") != run:
                self.violation("subflows", f"{what}: the child's first run is {first.get('runId')}, "
                               f"the derived run ID is the parent's {run}")
            if cd.get("flowType") != c["subFlow"].get("flowType") or \
                    cd.get("input") != c["subFlow"].get("input"):
                self.violation("subflows", f"{what}: the child runs {cd.get('flowType')} with "
                               f"{cd.get('input')}, its condition names {c['subFlow'].get('flowType')}"
                               f" with {c['subFlow'].get('input')}")
            t_child = self.child_first_run.get(derived)
            if landing is not None and t_child is not None and t_child + SLACK_S < landing:
                self.violation("durable", f"{what}: a Worker ran the child's first attempt at "
                               f"{t_child:.3f}, before the record that started it reached the "
                               f"store at {landing:.3f}")
            status, (want_status, want_runs) = cd.get("status"), self.child_plan(c)
            plan = c["subFlow"].get("input", {}).get("payload") or {}
            plan_timeout = plan.get("timeout_ms")
            n["timeout_plans"] += bool(plan_timeout)
            n["timeout_plans_" + plan.get("timeout_policy", "FAIL")] += bool(plan_timeout)
            opts = c["subFlow"].get("options", {})
            want_policy = f"TIMEOUT_{plan.get('timeout_policy', 'FAIL')}" if plan_timeout else None
            got_policy = opts.get("timeoutPolicy", "TIMEOUT_FAIL") if opts.get("timeoutMs") \
                else None
            if plan_timeout != opts.get("timeoutMs") or want_policy != got_policy:
                self.violation("subflows", f"{what}: the plan's timeout is {plan_timeout} ms "
                               f"({want_policy}), the child's start options' "
                               f"{opts.get('timeoutMs')} ms ({got_policy})")
            if status not in ENDED:
                self.violation("subflows", f"{what}: the child {derived} never closed ({status})")
                continue
            n["children_" + status] += 1
            n["retried"] += int(cd.get("runs", 1)) > 1
            if int(cd.get("runs", 1)) != want_runs or len(earlier) + 1 != want_runs:
                self.violation("subflows", f"{what}: {derived} has {cd.get('runs', 1)} runs "
                               f"({len(earlier) + 1} read back), its plan makes {want_runs}: one "
                               "start per derived ID and run")
            if status != want_status:
                self.violation("subflows", f"{what}: {derived} ended {status} "
                               f"({cd.get('closeReason', '')!r}), its own Steps end it "
                               f"{want_status}" + (": stopped by someone (a parent does not stop "
                                                   "its children)" if status in
                                                   ("FLOW_TERMINATED", "FLOW_CANCELED") else ""))
            final = (cd.get("runId"), status, [(o.get("stepExecutionId"), o.get("output"))
                                               for o in cd.get("outputs", [])],
                     cd.get("closeReason", ""))
            close_s = int(cd.get("closeUnixMs", 0)) / 1000.0
            if wc is None:  # never met: only if the parent closed before the child did
                if not closed and (d.get("status") not in ENDED
                                   or close_s < int(d.get("closeUnixMs", 0)) / 1000.0):
                    self.violation("subflows", f"{what}: {derived} closed at {close_s:.3f} while "
                                   "its condition waited, but the parent has no SUB_FLOW_CLOSED")
                continue
            r = results.get(i) or {}
            snap = r.get("subFlow", {})
            snapshot = (snap.get("runId"), snap.get("status"),
                        [(o.get("stepExecutionId"), o.get("output"))
                         for o in snap.get("outputs", [])], snap.get("closeReason", ""))
            if closed:
                n["met"] += 1
                x = closed[0]
                if len(closed) > 1 or x["seq"] > wc["seq"]:
                    self.violation("subflows", f"{what}: SUB_FLOW_CLOSED at seq "
                                   f"{[y['seq'] for y in closed]}, the wait met at {wc['seq']}")
                if (x.get("childRunId"), x.get("status")) != (cd.get("runId"), status):
                    self.violation("subflows", f"{what}: SUB_FLOW_CLOSED names run "
                                   f"{x.get('childRunId')} {x.get('status')}; the child's last run "
                                   f"{cd.get('runId')} ended {status}")
                if snapshot != final or not r.get("fired"):
                    self.violation("subflows", f"{what}: the wait's result shows {snapshot} "
                                   f"(fired {r.get('fired')}), the child's own end is {final}")
            else:
                if kind == "ALL_OF":
                    self.violation("subflows", f"{what}: the AllOf wait was met (seq {wc['seq']}) "
                                   f"with no SUB_FLOW_CLOSED for {derived}")
                elif close_s < int(wc.get("atMs", 0)) / 1000.0:
                    self.violation("subflows", f"{what}: {derived} closed at {close_s:.3f}, while "
                                   f"its condition waited (the AnyOf was met at "
                                   f"{int(wc.get('atMs', 0)) / 1000:.3f}), but the parent has no "
                                   "SUB_FLOW_CLOSED")
                else:
                    n["left_running"] += 1
                # The child then: RUNNING, also between two runs of its Flow retry (the
                # rules snapshot the Flow, which goes on as the next run).
                between = any(e.get("runId") == snap.get("runId") and e.get("nextRunId")
                              for e in earlier)
                n["left_between_runs"] += between
                if snap.get("status") != "FLOW_RUNNING" or r.get("fired"):
                    self.violation("subflows", f"{what}: the wait's result shows {snapshot} "
                                   f"(fired {r.get('fired')}) for a child that had not closed")
            if ec is None:
                continue
            got = seen.get(i) or {}
            view = (got.get("run"), got.get("status"),
                    [(o.get("exec"), {"payload": o.get("output")}) for o in got.get("outputs", [])],
                    got.get("reason", ""))
            if view != snapshot:
                self.violation("subflows", f"{what}: the Execute got {view}, the wait's result "
                               f"is {snapshot} (the child's own end: {final})")
            if closed and exec_t is not None and exec_t + SLACK_S < close_s:
                self.violation("subflows", f"{what}: the Execute ran at {exec_t:.3f}, before "
                               f"{derived} closed at {close_s:.3f}")
        return named

    def run(self):
        self.load()
        return self.check_all()

    def check_all(self):
        self._normed = {}
        self.check_log()
        self.check_lease()
        self.check_answers()
        self.check_reads()
        self.check_flows()
        self.check_history()
        self.check_results()
        self.check_applied()
        self.check_attempts()
        self.check_rpcs()
        self.check_sets()
        self.check_locks()
        self.check_subflows()
        proxy_faults = Counter(e["a"] for e in self.proxy
                               if e["a"] not in ("forwarded", "upstream_error"))
        return {"seed": self.meta.get("seed"), "faults": self.meta.get("faults", {}),
                "faults_skipped": self.meta.get("skipped", {}),
                "store_requests_faulted": dict(proxy_faults), "stats": self.stats,
                "violations_by_check": dict(self.by_check),
                "violations": sum(self.by_check.values()),
                "violation_details": [v for v in self.violations if v]}


def check(run_dir):
    return Checker(run_dir).run()


# ---------------------------------------------------------------------------- self-test

def _flow_records(c, kind):
    for b in c.log["batches"]:
        for r in b.get("recordDetails", []):
            fr = r.get("flow", {})
            if kind in fr:
                yield b, r, fr[kind]


def _mutations(base):
    """(name, the check that must fire, a function that breaks a loaded Checker's data the way
    a real bug would), built from a clean run's data."""
    import copy
    acked = [h for h in base.history if h["op"] == "start" and h.get("ok") and not h.get("existed")]
    flow = acked[len(acked) // 2]["flow"]
    pub = next(h for h in base.history[len(base.history) // 2:]
               if h["op"] == "publish" and h.get("ok"))
    taken_flow = next(f for f, e in sorted(base.final.items())
                      if any(x["kind"] == "WAIT_COMPLETED" and
                             any(c.get("messages") for c in x.get("conditions", []))
                             for x in e.get("events", [])))
    out = []

    def lose_start(c):  # an acknowledged batch that never made it to the log
        for b in c.log["batches"]:
            recs = b.get("recordDetails", [])
            keep = [r for r in recs if r.get("flow", {}).get("startFlow", {}).get("flowId") != flow]
            b["recordDetails"] = keep
    out.append(("acknowledged start missing from the log", "durable", lose_start))

    def early_ack(c):  # the answer arrived just before the batch reached the store
        c.index_log()
        b = c.first_start[flow]
        landing = c.landed[(int(b["slot"]), b.get("writeId"))]
        h = next(h for h in c.history
                 if h.get("flow") == flow and h["op"] == "start" and h.get("ok"))
        h["t1"] = (landing - 0.002) * 1000.0
        h["t0"] = min(h["t0"], h["t1"] - 1.0)
    out.append(("start acknowledged before durable", "durable", early_ack))

    def lose_publish(c):  # an acknowledged publish that never made it to the log
        for b in c.log["batches"]:
            b["recordDetails"] = [r for r in b.get("recordDetails", [])
                                  if r.get("flow", {}).get("publish", {}).get("requestId")
                                  != pub["req"]]
    out.append(("acknowledged publish missing from the log", "durable", lose_publish))

    def stale_answer(c):  # an answer from a process well past its last lease period
        h = next(h for h in c.history if h["op"] == "get" and h.get("ok"))
        name, holder = c.process_at(h["addr"], h["t1"] / 1000.0)
        last = max(e for _, e, _ in c.periods[holder])
        h["t0"], h["t1"] = (last + 5) * 1000.0, (last + 5.01) * 1000.0
    out.append(("answer outside the lease period", "answer", stale_answer))

    def fenced_batch(c):  # a fenced writer's batch after the newer epoch's EpochStart
        bs = c.log["batches"]
        e2 = next(i for i, b in enumerate(bs) if int(b["epoch"]) >= 2)
        late = copy.deepcopy(bs[e2 + 1])
        late["epoch"] = str(int(bs[e2]["epoch"]) - 1)
        late["recordDetails"] = []
        bs[e2 + 1] = late
    out.append(("epoch going backwards along the log", "log", fenced_batch))

    def hole(c):
        i = len(c.log["batches"]) // 2
        c.log["batches"][i] = {"slot": c.log["batches"][i]["slot"], "missing": True}
    out.append(("a hole in the log", "log", hole))

    def lost_flow(c):
        c.final[flow] = {"error": "NOT_FOUND: no Flow"}
    out.append(("acknowledged flow lost", "flows", lost_flow))

    def phantom_start(c):  # a run nobody started
        for b, r, sf in _flow_records(c, "startFlow"):
            sf["flowId"] = "phantom-" + sf["flowId"]
            return
    out.append(("a run no client started", "flows", phantom_start))

    def second_run(c):
        c.final[flow]["description"]["runs"] = 2
    out.append(("a second run of one Flow ID", "flows", second_run))

    def forged_result(c):  # a decision in the log that no Worker returned
        for b, r, mr in _flow_records(c, "methodResult"):
            if mr.get("outcome") == "ATTEMPT_COMPLETED" and \
                    "gracefulComplete" in mr.get("decision", {}):
                v = json.loads(base64.b64decode(mr["decision"]["gracefulComplete"]["data"]))
                v["forged"] = True
                mr["decision"]["gracefulComplete"]["data"] = \
                    base64.b64encode(json.dumps(v).encode()).decode()
                return
    out.append(("a Step result no Worker produced", "results", forged_result))

    def wrong_attempt(c):  # a result recorded for another attempt than the one that produced it
        for b, r, mr in _flow_records(c, "methodResult"):
            if mr.get("outcome") == "ATTEMPT_COMPLETED" and mr["task"].get("method") == "WAIT_FOR":
                mr["task"]["attempt"] = int(mr["task"].get("attempt", 1)) + 1
                return
    out.append(("a result recorded for another attempt", "results", wrong_attempt))

    def twice_applied(c):  # a decision applied twice: a second Fast execution
        ev = c.final[flow]["events"]
        i = next(i for i, x in enumerate(ev) if x["kind"] == "EXECUTE_COMPLETED"
                 and x.get("stepExecutionId") == "Begin-1")
        dup = copy.deepcopy(ev[i])
        ev.insert(i + 1, dup)
        for k, x in enumerate(ev):
            x["seq"] = str(k + 1) if k else x.get("seq", "0")
    out.append(("a decision applied twice", "decisions", twice_applied))

    def taken_twice(c):  # a message taken by two waits
        ev = c.final[taken_flow]["events"]
        x = next(x for x in ev if x["kind"] == "WAIT_COMPLETED"
                 and any(cd.get("messages") for cd in x.get("conditions", [])))
        y = copy.deepcopy(x)
        y["stepExecutionId"] = "Gate-9"
        y["seq"] = str(int(ev[-1].get("seq", 0)) + 1)
        ev.append(y)
    out.append(("a message consumed twice", "publishes", taken_twice))

    def publish_lost(c):  # an acknowledged publish missing from its run
        ev = c.final[pub["flow"]]["events"]
        c.final[pub["flow"]]["events"] = [
            x for x in ev if not (x["kind"] == "CHANNEL_PUBLISHED"
                                  and pub["msg"] in messages_of(norm(x.get("publish", {}))))]
    out.append(("an acknowledged publish lost", "publishes", publish_lost))

    def decision_not_in_log(c):  # the server applied a decision the log does not hold
        for b in c.log["batches"]:
            for i, r in enumerate(b.get("recordDetails", [])):
                mr = r.get("flow", {}).get("methodResult", {})
                if mr.get("task", {}).get("flowId") == flow and mr.get("outcome") == \
                        "ATTEMPT_COMPLETED" and mr["task"].get("stepExecutionId") == "Fast-1":
                    del b["recordDetails"][i]
                    return
    out.append(("a served decision the log does not hold", "state", decision_not_in_log))

    def served_differs(c):
        d = c.final[flow]["description"]
        d["outputs"] = d.get("outputs", [])[:1]
    out.append(("served result differs from the history", "state", served_differs))

    def stale_read(c):
        h = next(h for h in c.history if h["op"] == "get" and h.get("ok"))
        h.update(ok=False, code="NOT_FOUND", msg_text="NOT_FOUND: no Flow")
    out.append(("stale read", "reads", stale_read))

    # RPCs, Attributes and locks: a flow with an acknowledged new RPC, one whose history shows
    # two lock holders, an acknowledged set.
    rpc = next(h for h in base.history if h["op"] == "rpc" and h.get("ok")
               and h["req"].startswith("rpc-"))
    rflow = rpc["flow"]
    aset = next(h for h in base.history if h["op"] == "set" and h.get("ok"))

    def set_attr(c, fid, key, inst, value):
        attrs = c.final[fid]["attributes"].setdefault("attributes", [])
        attrs[:] = [a for a in attrs if (a["key"], a.get("instanceKey", "")) != (key, inst)]
        if value is not None:
            a = {"key": key, "value": value}
            if inst:
                a["instanceKey"] = inst
            attrs.append(a)

    def final_total(c, fid):
        return c.final_attributes(fid).get(("total", ""), 0)

    def rpc_lost(c):  # an acknowledged RPC whose writes are gone (with total kept consistent)
        n = c.final_attributes(rflow)[("applied", rpc["id"])]
        set_attr(c, rflow, "applied", rpc["id"], None)
        set_attr(c, rflow, "total", "", {"int64Value": str(final_total(c, rflow) - n)})
    out.append(("an acknowledged RPC's writes lost", "rpcs", rpc_lost))

    def rpc_half(c):  # applied[id] written without its total
        set_attr(c, rflow, "total", "", {"int64Value": str(final_total(c, rflow) - rpc["n"])})
    out.append(("an RPC half applied", "rpcs", rpc_half))

    def rpc_phantom(c):  # an id no client sent, applied whole
        set_attr(c, rflow, "applied", "rpc-nobody", {"int64Value": "3"})
        set_attr(c, rflow, "total", "", {"int64Value": str(final_total(c, rflow) + 3)})
    out.append(("an RPC no client sent", "rpcs", rpc_phantom))

    def rpc_twice(c):  # the handler's result committed twice (a retry ran it again)
        ev = c.final[rflow]["events"]
        x = next(x for x in ev if x["kind"] == "RPC_COMPLETED")
        y = copy.deepcopy(x)
        y["stepExecutionId"] = "req:" + x["stepExecutionId"][4:] + "-again"
        y["seq"] = str(int(ev[-1].get("seq", 0)) + 1)
        ev.append(y)
    out.append(("an RPC applied twice", "rpcs", rpc_twice))

    def rpc_output(c):  # the client got another output than the one committed
        h = next(h for h in c.history if h is not None and h.get("req") == rpc["req"]
                 and h.get("ok"))
        h["output"] = dict(h["output"], total=h["output"].get("total", 0) + 1)
    out.append(("an RPC answered another output", "rpcs", rpc_output))

    def set_lost(c):  # an acknowledged SetAttributes missing from the final state and history
        set_attr(c, aset["flow"], "note", aset["inst"], {"stringValue": "v-older"})
        ev = c.final[aset["flow"]]["events"]
        c.final[aset["flow"]]["events"] = [x for x in ev if x["kind"] != "ATTRIBUTES_SET"]
    out.append(("an acknowledged SetAttributes lost", "attributes", set_lost))

    def rpc_not_durable(c):  # an RPC answered before (without) its result reaching the log
        for b in c.log["batches"]:
            b["recordDetails"] = [
                r for r in b.get("recordDetails", [])
                if r.get("flow", {}).get("methodResult", {}).get("task", {}).get(
                    "stepExecutionId") != "req:" + rpc["req"]]
    out.append(("an acknowledged RPC's result missing from the log", "durable", rpc_not_durable))

    lflow = next(f for f, e in sorted(base.final.items())
                 if sum(x["kind"] == "LOCKS_ACQUIRED" for x in e.get("events", [])) >= 2)

    def lock_overlap(c):  # a second holder acquires a held key: its acquire moved up
        ev = c.final[lflow]["events"]
        idx = [i for i, x in enumerate(ev) if x["kind"] == "LOCKS_ACQUIRED"]
        second = ev.pop(idx[1])
        ev.insert(idx[0] + 1, second)
        for k, x in enumerate(ev):
            x["seq"] = str(k + 1)
    out.append(("two lock holders overlap", "locks", lock_overlap))

    def lock_kept(c):  # a holder that never releases
        ev = c.final[lflow]["events"]
        i = next(i for i, x in enumerate(ev) if x["kind"] == "LOCKS_RELEASED")
        del ev[i]
    out.append(("a lock never released", "locks", lock_kept))

    # SubFlows: a parent whose AllOf Fan met and decided, one whose AnyOf left a child running.
    def fan_parent(kind, loser):
        for f, e in sorted(base.final.items()):
            ev = norm(e.get("events", []))
            fan = [x for x in ev if x.get("stepExecutionId") == "Fan-1"]
            wfc = [x for x in fan if x["kind"] == "WAIT_FOR_COMPLETED"]
            done = [x for x in fan if x["kind"] == "EXECUTE_COMPLETED"]
            if not wfc or not done or wfc[0].get("wait", {}).get("kind") != kind:
                continue
            subs = {i for i, cd in enumerate(wfc[0]["wait"].get("conditions", []))
                    if "subFlow" in cd}
            met = {x.get("conditionIndex", 0) for x in fan if x["kind"] == "SUB_FLOW_CLOSED"}
            if (subs - met) if loser else met:
                return f, sorted(subs - met if loser else met)[0]
        raise RuntimeError(f"no {kind} Fan parent in the run to break")
    pa, pa_i = fan_parent("ALL_OF", False)
    py, py_i = fan_parent("ANY_OF", True)
    child_a = f"{pa}/Fan-1/{pa_i}"

    def renumber(ev):
        for k, x in enumerate(ev):
            x["seq"] = str(k + 1)

    def sub_wrong_id(c):  # the child started under another Flow ID than the derived one
        x = next(x for x in c.final[pa]["events"] if x["kind"] == "SUB_FLOW_STARTED")
        x["childFlowId"] += "x"
    out.append(("a SubFlow child under another ID than the derived one", "subflows",
                sub_wrong_id))

    def sub_started_twice(c):  # a repeated wait started its child again
        ev = c.final[pa]["events"]
        i = next(i for i, x in enumerate(ev) if x["kind"] == "SUB_FLOW_STARTED")
        ev.insert(i + 1, copy.deepcopy(ev[i]))
        renumber(ev)
    out.append(("a SubFlow condition that started its child twice", "subflows",
                sub_started_twice))

    def sub_second_run(c):  # a second run under the child's derived ID
        c.final[child_a]["description"]["runs"] = \
            int(c.final[child_a]["description"].get("runs", 1)) + 1
    out.append(("a SubFlow child with a second run", "subflows", sub_second_run))

    def sub_stale_view(c):  # the Execute got a child's status other than its end
        x = next(x for x in c.final[pa]["events"] if x["kind"] == "EXECUTE_COMPLETED"
                 and x.get("stepExecutionId") == "Fan-1")
        g = x["decision"]["gracefulComplete"]
        v = json.loads(base64.b64decode(g["data"]))
        v["children"][0]["status"] = "FLOW_RUNNING"
        g["data"] = base64.b64encode(json.dumps(v).encode()).decode()
    out.append(("an AllOf Execute that saw a child still running", "subflows", sub_stale_view))

    def sub_early_execute(c):  # the Execute ran before a child closed
        x = next(x for x in c.final[pa]["events"] if x["kind"] == "EXECUTE_COMPLETED"
                 and x.get("stepExecutionId") == "Fan-1")
        nk = nonce_of(norm(x["decision"]))
        close_ms = int(c.final[child_a]["description"]["closeUnixMs"])
        for r in c.runs:
            if r.get("ev") == "run" and (r["worker"], r["nonce"]) == nk:
                r["t"] = close_ms - 1000
    out.append(("an AllOf Execute that ran before a child closed", "subflows",
                sub_early_execute))

    def sub_loser_stopped(c):  # the AnyOf's losing child stopped along with its parent
        d = c.final[f"{py}/Fan-1/{py_i}"]["description"]
        d["status"], d["closeReason"] = "FLOW_TERMINATED", "stopped with its parent"
    out.append(("an AnyOf's losing child stopped", "subflows", sub_loser_stopped))

    def time_goes_back(c):  # an event stamped before the one the log put ahead of it
        ev = c.final[pa]["events"]
        ev[-1]["atMs"] = str(int(ev[-2].get("atMs", 0)) - 1)
    out.append(("a history that goes back in time", "decisions", time_goes_back))

    def sub_not_told(c):  # a child closed while its condition waited; the parent never heard
        ev = c.final[pa]["events"]
        ev[:] = [x for x in ev if not (x["kind"] == "SUB_FLOW_CLOSED"
                                       and x.get("conditionIndex", 0) == pa_i)]
        renumber(ev)
    out.append(("a child's close that did not meet its condition", "subflows", sub_not_told))

    def sub_orphan(c):  # a child run that no parent's wait names
        e = copy.deepcopy(c.final[child_a])
        e["description"]["flowId"] = f"{pa}/Fan-1/7"
        for p in e["description"].get("parents", []):
            p["conditionIndex"] = 7
        c.final[f"{pa}/Fan-1/7"] = e
    out.append(("a SubFlow child no parent's wait names", "subflows", sub_orphan))

    def sub_wait_not_durable(c):  # the served wait (and its children) missing from the log
        for b in c.log["batches"]:
            b["recordDetails"] = [
                r for r in b.get("recordDetails", [])
                if not (r.get("flow", {}).get("methodResult", {}).get("task", {}).get("flowId")
                        == pa and r["flow"]["methodResult"]["task"].get("stepExecutionId")
                        == "Fan-1" and r["flow"]["methodResult"]["task"].get("method")
                        == "WAIT_FOR")]
    out.append(("a wait that started SubFlows missing from the log", "durable",
                sub_wait_not_durable))

    def sub_child_before_durable(c):  # the child ran before the record that started it landed
        c.index_log()
        b = next(b for b, r, mr in _flow_records(c, "methodResult")
                 if mr["task"].get("flowId") == pa and mr["task"].get("stepExecutionId")
                 == "Fan-1" and mr["task"].get("method") == "WAIT_FOR"
                 and mr.get("outcome") == "ATTEMPT_COMPLETED")
        landing = c.landed[(int(b["slot"]), b.get("writeId"))]
        r = min((r for r in c.runs if r.get("ev") == "run" and r["flow"] == child_a),
                key=lambda r: r["t"])
        r["t"] = (landing - 1.0) * 1000.0
    out.append(("a SubFlow child that ran before its start was durable", "durable",
                sub_child_before_durable))

    # Nested children: a chaos-child whose Work waited AllOf(Timer, grandchild) and decided;
    # a child planned with a flow timeout (TIMED_OUT), one planned without (COMPLETED).
    def nesting_child():
        for f, e in sorted(base.final.items()):
            ev = norm(e.get("events", []))
            kinds = {x["kind"] for x in ev if x.get("stepExecutionId") == "Work-1"}
            if {"SUB_FLOW_STARTED", "SUB_FLOW_CLOSED", "EXECUTE_COMPLETED"} <= kinds:
                return f
        raise RuntimeError("no nesting chaos-child in the run to break")

    def child_ending(status, timeout):
        for f, e in sorted(base.final.items()):
            d = norm(e.get("description") or {})
            inp = d.get("input", {}).get("payload") or {}
            if d.get("flowType") == "chaos-child" and d.get("status") == status and \
                    isinstance(inp, dict) and bool(inp.get("timeout_ms")) == timeout:
                return f
        raise RuntimeError(f"no chaos-child ending {status} (timeout plan {timeout}) to break")
    nc = nesting_child()
    tc = child_ending("FLOW_TIMED_OUT", True)
    cc = child_ending("FLOW_COMPLETED", False)

    def nest_event(c, kind):
        return next(x for x in c.final[nc]["events"] if x["kind"] == kind
                    and x.get("stepExecutionId") == "Work-1")

    def nest_wrong_id(c):  # the grandchild started under another Flow ID than the derived one
        nest_event(c, "SUB_FLOW_STARTED")["childFlowId"] += "x"
    out.append(("a grandchild under another ID than the derived one", "subflows", nest_wrong_id))

    def nest_wrong_run(c):  # the grandchild started with another run ID than its parent's
        nest_event(c, "SUB_FLOW_STARTED")["childRunId"] += ".x"
    out.append(("a grandchild under another run ID than its parent's", "subflows",
                nest_wrong_run))

    def nest_started_twice(c):  # the child's wait started its grandchild again
        ev = c.final[nc]["events"]
        x = nest_event(c, "SUB_FLOW_STARTED")
        ev.insert(ev.index(x) + 1, copy.deepcopy(x))
        renumber(ev)
    out.append(("a grandchild started twice", "subflows", nest_started_twice))

    def nest_not_told(c):  # the grandchild closed; its parent (the child) never heard
        ev = c.final[nc]["events"]
        ev.remove(nest_event(c, "SUB_FLOW_CLOSED"))
        renumber(ev)
    out.append(("a grandchild's close that did not meet its condition", "subflows",
                nest_not_told))

    def nest_stale_view(c):  # the child's Execute got its grandchild still running
        def stale(v):
            if isinstance(v, dict):
                if set(v) == {"data"}:
                    p = json.loads(base64.b64decode(v["data"]))
                    if isinstance(p, dict) and p.get("children"):
                        p["children"][0]["status"] = "FLOW_RUNNING"
                        v["data"] = base64.b64encode(json.dumps(p).encode()).decode()
                    return
                for x in v.values():
                    stale(x)
            elif isinstance(v, list):
                for x in v:
                    stale(x)
        stale(nest_event(c, "EXECUTE_COMPLETED")["decision"])
    out.append(("a child's Execute that saw its grandchild still running", "subflows",
                nest_stale_view))

    def timed_out_completed(c):  # a child planned to time out (400 ms) completed instead
        c.final[tc]["description"]["status"] = "FLOW_COMPLETED"
    out.append(("a child planned to time out that COMPLETED", "subflows", timed_out_completed))

    def completed_timed_out(c):  # a child with no flow timeout ended TIMED_OUT
        c.final[cc]["description"]["status"] = "FLOW_TIMED_OUT"
    out.append(("a child with no flow timeout that TIMED_OUT", "subflows", completed_timed_out))

    # Timeout policies CANCEL and HANDLER: a child of each, planned so and ended so.
    def child_of_policy(status, policy, retry=None):
        for f, e in sorted(base.final.items()):
            d = norm(e.get("description") or {})
            inp = d.get("input", {}).get("payload") or {}
            if d.get("flowType") == "chaos-child" and d.get("status") == status and \
                    isinstance(inp, dict) and inp.get("timeout_policy") == policy and \
                    (retry is None or bool(inp.get("retry")) == retry):
                return f
        raise RuntimeError(f"no chaos-child of timeout policy {policy} ending {status} to break")
    kc = child_of_policy("FLOW_CANCELED", "CANCEL")
    hc = child_of_policy("FLOW_COMPLETED", "HANDLER")
    kr = child_of_policy("FLOW_CANCELED", "CANCEL", retry=True)
    fr = child_of_policy("FLOW_TIMED_OUT", "FAIL", retry=True)

    def canceled_retried(c):  # a run canceled by its timeout retried under its Flow retry policy
        c.final[kr]["description"]["runs"] = 2
    out.append(("a child canceled at its timeout that was retried", "subflows", canceled_retried))

    def timed_out_not_retried(c):  # a run timed out under FAIL not retried, its policy allowing
        c.final[fr]["description"]["runs"] = 1
        c.final[fr]["earlier"] = []
    out.append(("a timed-out child whose retry policy allows a second run that had one",
                "subflows", timed_out_not_retried))

    def canceled_timed_out(c):  # a child whose timeout cancels it ended TIMED_OUT
        c.final[kc]["description"]["status"] = "FLOW_TIMED_OUT"
        c.final[kc]["events"][-1]["status"] = "FLOW_TIMED_OUT"
    out.append(("a child planned to be canceled at its timeout that TIMED_OUT", "subflows",
                canceled_timed_out))

    def handler_twice(c):  # the run's timeout handler started a second time
        ev = c.final[hc]["events"]
        x = next(x for x in ev if x["kind"] == "TIMEOUT_HANDLER_STARTED")
        ev.insert(ev.index(x) + 1, copy.deepcopy(x))
        renumber(ev)
    out.append(("a timeout handler started twice", "decisions", handler_twice))

    def handler_forged(c):  # the handler's applied decision is not what its Worker returned
        x = next(x for x in c.final[hc]["events"] if x["kind"] == "TIMEOUT_HANDLER_COMPLETED")
        g = x["decision"]["forceComplete"]
        v = json.loads(base64.b64decode(g["data"]))
        v["k"] = int(v.get("k", 0)) + 7
        g["data"] = base64.b64encode(json.dumps(v).encode()).decode()
    out.append(("a timeout handler decision no Worker returned", "results", handler_forged))

    def handler_in_fail_run(c):  # handler events in a run timed out under policy FAIL
        ev = c.final[tc]["events"]
        x = copy.deepcopy(next(x for x in c.final[hc]["events"]
                               if x["kind"] == "TIMEOUT_HANDLER_STARTED"))
        x["atMs"] = ev[-1].get("atMs", "0")  # in time order: only the kind is wrong
        ev.insert(len(ev) - 1, x)
        renumber(ev)
    out.append(("a timeout handler in a run whose policy is FAIL", "decisions",
                handler_in_fail_run))
    return out


def self_test(run_dir):
    """Breaks a clean run's data in the ways real bugs would and checks that each is reported
    (by the expected check). Returns a list of failures (empty: every mutation was caught)."""
    base = Checker(run_dir)
    base.load()
    failures = []
    for name, expected, mutate in _mutations(base):
        c = Checker(run_dir)
        c.load()
        try:
            if expected in ("answer", "durable"):  # the mutation needs the periods or the index
                c.check_log()
                c.check_lease()
            mutate(c)
            c.violations, c.by_check = [], Counter()
            result = c.check_all()
        except Exception as e:  # a mutation that crashes the checker is a failure too
            failures.append(f"{name}: the checker crashed: {e!r}")
            continue
        if not result["violations_by_check"].get(expected):
            failures.append(f"{name}: not reported by '{expected}' "
                            f"(got {result['violations_by_check']})")
        else:
            print(f"checker self-test: {name}: caught by '{expected}' "
                  f"({result['violations_by_check'][expected]})")
    return failures


def summary_line(result):
    s = result["stats"]
    faults = result["faults"]
    kinds = " ".join(f"{k}={v}" for k, v in sorted(faults.items()))
    store = " ".join(f"{k}={v}" for k, v in sorted(result["store_requests_faulted"].items()))
    ops = sum(s.get(k, 0) for k in ("starts_ok", "starts_failed", "publish_calls_ok",
                                    "publish_calls_failed", "gets_ok", "gets_failed",
                                    "rpc_calls_ok", "rpc_calls_failed", "set_calls_ok",
                                    "set_calls_failed"))
    return (f"chaos seed={result['seed']}: operations={ops} (starts {s.get('starts_ok', 0)} ok/"
            f"{s.get('starts_failed', 0)} failed, publish calls {s.get('publish_calls_ok', 0)} ok/"
            f"{s.get('publish_calls_failed', 0)} failed, reads {s.get('gets_ok', 0)} ok/"
            f"{s.get('gets_failed', 0)} failed); faults={sum(faults.values())} [{kinds}]; "
            f"store requests faulted [{store}]; flows acknowledged={s.get('acknowledged', 0)} "
            f"completed={s.get('completed', 0)} failed={s.get('failed', 0)} "
            f"lost={s.get('lost', 0)}; publishes={s.get('publishes', 0)} "
            f"acknowledged={s.get('publishes_acked', 0)} published={s.get('published', 0)} "
            f"taken={s.get('taken', 0)} queued={s.get('queued_at_end', 0)}; "
            f"rpcs={s.get('rpcs', 0)} acknowledged={s.get('rpcs_acked', 0)} "
            f"applied={s.get('rpcs_applied', 0)} refused={s.get('rpcs_refused', 0)} (calls "
            f"{s.get('rpc_calls_ok', 0)} ok/{s.get('rpc_calls_failed', 0)} failed); "
            f"sets={s.get('sets', 0)} acknowledged={s.get('sets_acked', 0)}; "
            f"lock holders={s.get('lock_holders', 0)} (rpcs {s.get('lock_holders_rpc', 0)}); "
            f"subflows={s.get('subflow_conditions', 0)} started={s.get('subflow_started', 0)} "
            f"attached={s.get('subflow_attached', 0)} met={s.get('subflow_met', 0)} "
            f"left-running={s.get('subflow_left_running', 0)} (waits all "
            f"{s.get('subflow_waits_all', 0)}/any {s.get('subflow_waits_any', 0)}, met "
            f"{s.get('subflow_waits_met', 0)}; children completed "
            f"{s.get('subflow_children_completed', 0)}/failed {s.get('subflow_children_failed', 0)}"
            f"/timed out {s.get('subflow_children_timed_out', 0)} of "
            f"{s.get('subflow_timeout_plans_fail', 0)} planned/canceled "
            f"{s.get('subflow_children_canceled', 0)} of "
            f"{s.get('subflow_timeout_plans_cancel', 0)} planned/handler completed "
            f"{s.get('timeout_handler_completed', 0)} of "
            f"{s.get('subflow_timeout_plans_handler', 0)} planned, retried "
            f"{s.get('subflow_children_retried', 0)}; nested {s.get('subflow_nested', 0)} met "
            f"{s.get('subflow_nested_met', 0)}); "
            f"epochs={s.get('epochs', 0)} log slots={s.get('log_slots', 0)}; "
            f"violations={result['violations']}"
            + (f" {result['violations_by_check']}" if result["violations"] else ""))


def report(result, run_dir):
    with open(os.path.join(run_dir, "summary.json"), "w") as f:
        json.dump(result, f, indent=1)
    for v in result["violation_details"]:
        print("VIOLATION " + v)
    line = summary_line(result)
    with open(os.path.join(run_dir, "summary.txt"), "w") as f:
        f.write(line + "\n")
    print(line, flush=True)


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    if "--self-test" in sys.argv:
        failures = self_test(sys.argv[1])
        for f in failures:
            print("SELF-TEST FAILURE " + f)
        return 1 if failures else 0
    result = check(sys.argv[1])
    if "--json" in sys.argv:
        print(json.dumps(result, indent=1))
    report(result, sys.argv[1])
    return 1 if result["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
