#!/usr/bin/env python3
"""checker: verifies one chaos run from its run directory (tests/chaos/README.md).

    checker.py RUN_DIR [--json]
    checker.py RUN_DIR --self-test     # breaks a clean run's data; every break must be caught

Reads what the run recorded -- the clients' history (history.jsonl), every attempt the Workers
ran (workers/*.jsonl), every request that reached object storage through the proxy with the
lease records and batch headers it carried (proxy-events.jsonl), what the harness did to the
processes (events.jsonl, logs/*.log) -- and the final state: the flows as the active process
served them after healing (final/flows.json) and the raw log read straight from MinIO
(final/log.json: every slot, lower epochs included, every record in full). It checks:

  log       the log has no hole; epochs never go backwards along it (no batch of an older epoch
            after a newer epoch's EpochStart: the fencing property); every new epoch begins with
            an EpochStart; one writer per epoch, the process that acquired that epoch's lease
  lease     each lease acquisition raises the epoch by exactly one
  answer    every successful answer (start or read) came from a process that held a lease period
            at some moment between the request's send and its answer; the period bounds are
            upper bounds from what reached the store (a period starts at the send of a lease
            write that landed and lasts lease.duration; it ends early at the holder's release
            and at the landing of another process's acquisition)
  durable   every acknowledged start is in the log, in a batch that landed before the answer,
            written under a lease period that lasted until after the landing; a start answered
            "new" was written by the process that answered
  state     an independent model of the engine's apply rules (docs/engine.md), run over the
            log, gives exactly the Steps, attempts, outcomes and outputs that the server reports
            for every ended flow
  flows     every flow whose start was acknowledged exists and has ended
  attempts  attempt numbers run 1..n, at most one COMPLETED attempt per Step and it is the last,
            no more attempts than maxAttempts; NOT_COMPLETED only where recovery (an EpochStart)
            or the end of the flow ended a running attempt; a Step's output is the output a
            Worker produced for the attempt recorded as completing it; a task a Worker ran that
            the log never started is an ASYNC one of an epoch that ended (the spec's exception);
            a task the log started reached its Worker with the same attempt number
  reads     a read of a flow acknowledged before the read was sent finds it, and no read shows
            a flow RUNNING after an earlier, completed observation showed it ended

It prints one summary line and exits 1 on any violation. Usable on a saved run directory.
"""
import glob
import json
import math
import os
import re
import sys
from collections import Counter, defaultdict

SLACK_S = 0.05  # the proxy stamps a lease write after its sender did (loopback) + clock rates
READY = re.compile(r"dex-server-zd serve ready: node \S+ epoch (\d+) holder (\S+)")
ENDED = {"COMPLETED", "FAILED", "CANCELLED"}
SLEEP_OUTPUT = {}


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


def short(name, prefix):
    return name[len(prefix):] if name and name.startswith(prefix) else name


# ---------------------------------------------------------------------------- the engine model

def backoff_ms(retry, attempt):
    """flow_type.cc retry_backoff_ms: repeated multiplication, capped, rounded half away."""
    interval = float(int(retry.get("initialIntervalMs", 0)))
    cap = float(int(retry.get("maxIntervalMs", 0)))
    coef = float(retry.get("backoffCoefficient", 0))
    i = 1
    while i < attempt and interval < cap:
        interval *= coef
        i += 1
    v = min(interval, cap)
    return int(math.floor(v + 0.5))


class Model:
    """docs/engine.md's apply rules, written again from the document: what the log says the
    state of every flow is. Each attempt remembers what ended it."""

    def __init__(self):
        self.types = {}
        self.flows = {}
        self.started_tasks = {}   # task id -> (flow, step, attempt) for applied AttemptStarted
        self.logged_tasks = {}    # task id -> (flow, step, attempt, applied) for every AttemptStarted
        self.withdrawn = set()
        self.task_origin = {}     # task id -> (epoch of its batch, the proposer's at_unix_ms)
        self.explicit_not_completed = []
        self.completions = Counter()  # (flow, step) -> accepted COMPLETED results

    def apply_batch(self, batch):
        for rec in batch.get("recordDetails", []):
            if "epochStart" in rec:
                self.epoch_start(rec["epochStart"])
            elif "engine" in rec:
                self.engine(rec["engine"], batch)

    def epoch_start(self, es):
        at = int(es.get("atUnixMs", 0))
        for fid in sorted(self.flows):
            f = self.flows[fid]
            if f["status"] != "RUNNING":
                continue
            for i, st in enumerate(f["steps"]):
                if f["status"] != "RUNNING":
                    break
                if st["status"] == "RUNNING":
                    self.end_attempt(f, i, "NOT_COMPLETED", None, at, "recovery")

    def engine(self, rec, batch):
        if "registerFlowType" in rec:
            ft = rec["registerFlowType"]["flowType"]
            self.types[ft["name"]] = ft
        elif "startFlow" in rec:
            r = rec["startFlow"]
            fid = r["flowId"]
            if fid in self.flows or r.get("flowType") not in self.types:
                return
            ft = self.types[r["flowType"]]
            f = {"id": fid, "type": ft, "status": "RUNNING", "slot": int(batch["slot"]),
                 "epoch": int(batch["epoch"]), "writer": batch["writerProcessId"],
                 "steps": [{"name": s["name"], "status": "PENDING", "attempts": [], "task": None,
                            "output": None, "wake": 0} for s in ft["steps"]]}
            self.flows[fid] = f
            self.advance(f, int(r.get("atUnixMs", 0)))
        elif "attemptStarted" in rec:
            r = rec["attemptStarted"]
            key = (r["flowId"], r["step"], int(r.get("attempt", 0)))
            self.logged_tasks.setdefault(r["taskId"], key + (False,))
            self.task_origin.setdefault(r["taskId"], (int(batch["epoch"]), int(r.get("atUnixMs", 0))))
            f, i = self.target(r)
            if f is None:
                return
            st = f["steps"][i]
            if st["status"] != "READY" or int(r.get("attempt", 0)) != len(st["attempts"]) + 1:
                return
            st["status"] = "RUNNING"
            st["attempts"].append({"number": int(r["attempt"]), "outcome": "RUNNING",
                                   "task": r["taskId"], "ended_by": None})
            st["task"] = r["taskId"]
            self.started_tasks[r["taskId"]] = key
            self.logged_tasks[r["taskId"]] = key + (True,)
        elif "attemptEnded" in rec:
            r = rec["attemptEnded"]
            f, i = self.target(r)
            if f is None or f["steps"][i]["status"] != "RUNNING" or \
                    f["steps"][i]["task"] != r.get("taskId"):
                return
            outcome = short(r.get("outcome", ""), "ATTEMPT_OUTCOME_")
            if outcome not in ("COMPLETED", "FAILED", "TIMED_OUT", "NOT_COMPLETED"):
                return
            if outcome == "NOT_COMPLETED":
                self.explicit_not_completed.append((r["flowId"], r["step"], r.get("taskId")))
            if outcome == "COMPLETED":
                self.completions[(r["flowId"], r["step"])] += 1
            self.end_attempt(f, i, outcome, r.get("output", ""), int(r.get("atUnixMs", 0)),
                             "record", non_retryable=bool(r.get("nonRetryable")))
        elif "attemptWithdrawn" in rec:
            r = rec["attemptWithdrawn"]
            f, i = self.target(r)
            if f is None or f["steps"][i]["status"] != "RUNNING" or \
                    f["steps"][i]["task"] != r.get("taskId"):
                return
            st = f["steps"][i]
            st["attempts"].pop()
            st["status"] = "READY"
            st["task"] = None
            self.withdrawn.add(r["taskId"])
            self.started_tasks.pop(r["taskId"], None)
        elif "timerFired" in rec:
            r = rec["timerFired"]
            f, i = self.target(r)
            if f is None:
                return
            st = f["steps"][i]
            if st["status"] not in ("BACKOFF", "SLEEPING") or st["wake"] != int(r.get("wakeAtMs", 0)):
                return
            st["wake"] = 0
            if st["status"] == "BACKOFF":
                st["status"] = "READY"
            else:
                st["status"] = "COMPLETED"
                st["output"] = "{}"
                self.advance(f, int(r.get("atUnixMs", 0)))
        elif "cancelFlow" in rec:
            r = rec["cancelFlow"]
            f = self.flows.get(r["flowId"])
            if f is not None and f["status"] == "RUNNING":
                self.end_flow(f, "CANCELLED", int(r.get("atUnixMs", 0)))

    def target(self, r):
        f = self.flows.get(r.get("flowId"))
        if f is None or f["status"] != "RUNNING":
            return None, None
        for i, st in enumerate(f["steps"]):
            if st["name"] == r.get("step"):
                return f, i
        return None, None

    def advance(self, f, at):
        if f["status"] != "RUNNING":
            return
        defs = f["type"]["steps"]
        index = {s["name"]: i for i, s in enumerate(f["steps"])}
        for _ in range(len(defs) + 1):
            changed = False
            for i, st in enumerate(f["steps"]):
                if st["status"] != "PENDING":
                    continue
                if any(f["steps"][index[d]]["status"] != "COMPLETED" for d in defs[i].get("after", [])):
                    continue
                sleep = int(defs[i].get("sleepMs", 0))
                if sleep > 0:
                    st["status"] = "SLEEPING"
                    st["wake"] = at + sleep
                else:
                    st["status"] = "READY"
                changed = True
            if not changed:
                break
        if all(st["status"] == "COMPLETED" for st in f["steps"]):
            f["status"] = "COMPLETED"

    def end_attempt(self, f, i, outcome, output, at, by, non_retryable=False):
        st = f["steps"][i]
        a = st["attempts"][-1]
        a["outcome"] = outcome
        a["ended_by"] = by
        st["task"] = None
        if outcome == "COMPLETED":
            st["status"] = "COMPLETED"
            st["output"] = output
            self.advance(f, at)
            return
        d = f["type"]["steps"][i]
        retry = d.get("retry", {})
        used = len(st["attempts"])
        if (non_retryable and outcome == "FAILED") or used >= int(retry.get("maxAttempts", 0)):
            st["status"] = "FAILED"
            self.end_flow(f, "FAILED", at)
            return
        st["status"] = "BACKOFF"
        st["wake"] = at + backoff_ms(retry, a["number"])

    def end_flow(self, f, status, at):
        f["status"] = status
        for st in f["steps"]:
            if st["status"] in ("COMPLETED", "FAILED", "CANCELLED"):
                continue
            if st["status"] == "RUNNING":
                st["attempts"][-1]["outcome"] = "NOT_COMPLETED"
                st["attempts"][-1]["ended_by"] = "flow-ended"
                st["task"] = None
            st["status"] = "CANCELLED"
            st["wake"] = 0


# ---------------------------------------------------------------------------- the check

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

    # ------------------------------------------------------------------------ answers

    def index_log(self):
        """The first batch with each flow's StartFlow, and when each batch landed: the arrival
        (plus an injected delay) of the proxied PUT that carried its write ID and got a 200."""
        first_start = {}
        for b in self.effective:
            for r in b.get("recordDetails", []):
                sf = r.get("engine", {}).get("startFlow")
                if sf and sf["flowId"] not in first_start:
                    first_start[sf["flowId"]] = b
        landed = {}
        for e in self.proxy:
            if e["c"] == "log" and e["m"] == "PUT" and e.get("u") == 200 and "batch" in e:
                landed.setdefault((e["slot"], e["batch"].get("write_id")),
                                  e["t"] + e.get("delay", 0))
        return first_start, landed

    def check_answers(self):
        self.model = Model()
        for b in self.effective:
            self.model.apply_batch(b)
        first_start, landed = self.index_log()
        starts_ok = starts_failed = gets_ok = gets_failed = 0
        for h in self.history:
            t0, t1 = h["t0"] / 1000.0, h["t1"] / 1000.0
            if h["op"] == "start":
                if h.get("ok"):
                    starts_ok += 1
                else:
                    starts_failed += 1
            elif h["op"] == "get":
                if h.get("ok"):
                    gets_ok += 1
                else:
                    gets_failed += 1
            if not h.get("ok"):
                if h["op"] == "get" and h.get("code") == "NOT_FOUND":
                    self.violation("reads", f"read of {h['flow']} (acknowledged before it) found "
                                   f"nothing: {h.get('msg', '')[:160]}")
                continue
            proc = self.process_at(h["addr"], t1)
            if proc is None:
                self.violation("answer", f"{h['op']} {h['flow']} answered by {h['addr']} where "
                               "no process was started")
                continue
            name, holder = proc
            if holder is None:
                self.violation("answer", f"{h['op']} {h['flow']} answered by {name}, which never "
                               "became active")
                continue
            if not self.valid_between(holder, t0, t1):
                self.violation("answer", f"{h['op']} {h['flow']} answered by {name} ({holder}) "
                               f"between {t0:.3f} and {t1:.3f}, outside its lease periods "
                               f"{self.near_periods(holder, t0)}")
            if h["op"] != "start":
                continue
            b = first_start.get(h["flow"])
            if b is None:
                self.violation("durable", f"acknowledged start of {h['flow']} (answered by "
                               f"{name} at {t1:.3f}) is not in the log")
                continue
            slot, epoch, writer = int(b["slot"]), int(b["epoch"]), b["writerProcessId"]
            if not h.get("existed") and writer != holder:
                self.violation("durable", f"start of {h['flow']} answered as new by {name} "
                               f"({holder}) but written at slot {slot} by {writer}")
            landing = landed.get((slot, b.get("writeId")))
            if landing is None:
                self.violation("durable", f"slot {slot} (start of {h['flow']}) never reached the "
                               "store through the proxy")
                continue
            if not h.get("existed"):
                if t1 < landing:
                    self.violation("durable", f"start of {h['flow']} acknowledged at {t1:.3f}, "
                                   f"before its batch (slot {slot}) reached the store at "
                                   f"{landing:.3f}")
                elif not self.valid_between(writer, landing, t1, epoch):
                    self.violation("durable", f"start of {h['flow']}: slot {slot} landed at "
                                   f"{landing:.3f} and was acknowledged at {t1:.3f} with no lease "
                                   f"period of {writer} epoch {epoch} in between")
        self.stats.update(starts_ok=starts_ok, starts_failed=starts_failed, gets_ok=gets_ok,
                          gets_failed=gets_failed)

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
                if s == "RUNNING" and t0 > first_end:
                    self.violation("reads", f"{flow} read RUNNING at {t0 / 1000:.3f} after it "
                                   f"was seen ended at {first_end / 1000:.3f}")

    # ------------------------------------------------------------------------ final state

    def check_flows(self):
        acked = {h["flow"] for h in self.history if h["op"] == "start" and h.get("ok")}
        lost = [f for f in acked if f not in self.final]
        running = [f for f in acked if f in self.final and self.final[f]["status"] == "RUNNING"]
        for f in sorted(lost):
            self.violation("flows", f"acknowledged flow {f} does not exist")
        for f in sorted(running):
            self.violation("flows", f"acknowledged flow {f} never ended")
        statuses = Counter(self.final[f]["status"] for f in acked if f in self.final)
        self.stats.update(acknowledged=len(acked), lost=len(lost), not_ended=len(running),
                          completed=statuses.get("COMPLETED", 0), failed=statuses.get("FAILED", 0),
                          flows_total=len(self.final))

    def check_state(self):
        compared = 0
        for fid, f in self.final.items():
            m = self.model.flows.get(fid)
            if m is None:
                self.violation("state", f"flow {fid} is served but its StartFlow is not in the log")
                continue
            if f["status"] == "RUNNING":
                continue  # may have moved on between the two reads
            compared += 1
            if m["status"] != f["status"]:
                self.violation("state", f"{fid}: served {f['status']}, the log says {m['status']}")
                continue
            for st, ms in zip(f["steps"], m["steps"]):
                served = [(a["number"], a["outcome"]) for a in st.get("attempts", [])]
                model = [(a["number"], a["outcome"]) for a in ms["attempts"]]
                if st["status"] != ms["status"] or served != model:
                    self.violation("state", f"{fid}/{st['name']}: served {st['status']} {served}, "
                                   f"the log says {ms['status']} {model}")
                    continue
                if st["status"] == "COMPLETED":
                    out = st.get("output")
                    mo = json.loads(ms["output"]) if ms["output"] else None
                    if out != mo:
                        self.violation("state", f"{fid}/{st['name']}: served output {out}, the "
                                       f"log's accepted result {mo}")
        self.stats["compared"] = compared

    def check_attempts(self):
        outputs = {}   # task -> parsed output produced by a Worker
        ran = defaultdict(list)
        for r in self.runs:
            if r.get("ev") == "run":
                ran[r["task"]].append(r)
            elif r.get("ev") == "done" and r.get("result") == "output":
                outputs[r["task"]] = json.loads(r["output"])
        max_epoch = max(self.epoch_writer) if self.epoch_writer else 0
        type_steps = {}
        for ft in self.model.types.values():
            for s in ft["steps"]:
                type_steps[(ft["name"], s["name"])] = s
        not_completed = Counter()
        for fid, f in self.model.flows.items():
            served = self.final.get(fid)
            for i, st in enumerate(f["steps"]):
                d = f["type"]["steps"][i]
                numbers = [a["number"] for a in st["attempts"]]
                if numbers != list(range(1, len(numbers) + 1)):
                    self.violation("attempts", f"{fid}/{st['name']}: attempt numbers {numbers}")
                outcomes = [a["outcome"] for a in st["attempts"]]
                if outcomes.count("COMPLETED") > 1 or ("COMPLETED" in outcomes and outcomes[-1] != "COMPLETED"):
                    self.violation("attempts", f"{fid}/{st['name']}: outcomes {outcomes}")
                if self.model.completions[(fid, st["name"])] > 1:
                    self.violation("attempts", f"{fid}/{st['name']}: more than one result accepted")
                if len(numbers) > int(d.get("retry", {}).get("maxAttempts", 0)) and "taskQueue" in d:
                    self.violation("attempts", f"{fid}/{st['name']}: {len(numbers)} attempts, "
                                   f"more than maxAttempts")
                for a in st["attempts"]:
                    if a["outcome"] == "NOT_COMPLETED":
                        not_completed[a["ended_by"]] += 1
                        if a["ended_by"] not in ("recovery", "flow-ended"):
                            self.violation("attempts", f"{fid}/{st['name']} attempt {a['number']}: "
                                           "NOT_COMPLETED by a record, not by recovery")
                if st["status"] == "COMPLETED" and "taskQueue" in d:
                    task = st["attempts"][-1]["task"]
                    got = outputs.get(task)
                    recorded = json.loads(st["output"]) if st["output"] else None
                    if got is None:
                        self.violation("attempts", f"{fid}/{st['name']}: completed by task {task}, "
                                       "for which no Worker produced an output")
                    elif got != recorded:
                        self.violation("attempts", f"{fid}/{st['name']}: recorded output {recorded} "
                                       f"is not task {task}'s output {got}")
                    elif got.get("attempt") != st["attempts"][-1]["number"]:
                        self.violation("attempts", f"{fid}/{st['name']}: output of attempt "
                                       f"{got.get('attempt')} recorded for attempt "
                                       f"{st['attempts'][-1]['number']}")
            if served and served["status"] == "FAILED":
                failed = [s for s in f["steps"] if s["status"] == "FAILED"]
                if not failed:
                    self.violation("attempts", f"{fid}: FAILED without a failed Step")
        for eb in self.model.explicit_not_completed:
            self.violation("attempts", f"{eb}: an AttemptEnded NOT_COMPLETED record was applied")
        # Tasks the Workers ran, against the log.
        async_rerun = 0
        for task, runs in ran.items():
            r = runs[0]
            logged = self.model.logged_tasks.get(task)
            ft = self.model.flows.get(r["flow"], {}).get("type", {}).get("name")
            d = type_steps.get((ft, r["step"]), {})
            is_async = d.get("dispatch") == "DISPATCH_MODE_ASYNC"
            if logged is None:
                m = re.match(r"e(\d+)\.", task)
                epoch = int(m.group(1)) if m else None
                if not is_async:
                    self.violation("attempts", f"SYNC task {task} ({r['flow']}/{r['step']} attempt "
                                   f"{r['attempt']}) ran on {r['worker']} but its start is not in "
                                   "the log")
                elif epoch is None or epoch >= max_epoch:
                    self.violation("attempts", f"ASYNC task {task} ran on {r['worker']} but its "
                                   "start is not in the log, and its epoch did not end")
                else:
                    async_rerun += 1
                continue
            flow, step, number, applied = logged
            if (flow, step, number) != (r["flow"], r["step"], r["attempt"]):
                self.violation("attempts", f"task {task} ran as {r['flow']}/{r['step']} attempt "
                               f"{r['attempt']}, the log started it as {flow}/{step} attempt {number}")
            if task in self.model.withdrawn:
                self.violation("attempts", f"task {task} was withdrawn (never delivered) but "
                               f"{r['worker']} ran it")
            if not applied and not is_async:
                self.violation("attempts", f"SYNC task {task} ran on {r['worker']} although its "
                               "start was stale in the log")
            # The task was handed out between its proposal and its run: its epoch's holder must
            # have held a lease period then (a process outside its lease hands out no task).
            epoch, at_ms = self.model.task_origin[task]
            holder = self.acquired.get(epoch, (None,))[0]
            t_run = min(x["t"] for x in runs) / 1000.0
            if holder is not None and not self.valid_between(holder, at_ms / 1000.0 - SLACK_S,
                                                             t_run, epoch):
                self.violation("answer", f"task {task} was handed to {r['worker']} (run at "
                               f"{t_run:.3f}, proposed at {at_ms / 1000:.3f}) outside the lease "
                               f"periods of epoch {epoch}'s holder {holder}")
        self.stats["not_completed"] = dict(not_completed)
        self.stats["async_not_durable_reruns"] = async_rerun
        self.stats["tasks_run"] = len(ran)

    def run(self):
        self.load()
        return self.check_all()

    def check_all(self):
        self.check_log()
        self.check_lease()
        self.check_answers()
        self.check_reads()
        self.check_flows()
        self.check_state()
        self.check_attempts()
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

def _mutations(base):
    """(name, the check that must fire, a function that breaks a loaded Checker's data the way
    a real bug would), built from a clean run's data."""
    import copy
    acked = [h for h in base.history if h["op"] == "start" and h.get("ok") and not h.get("existed")]
    victim = acked[len(acked) // 2]
    flow = victim["flow"]
    done = next(f for f in base.final.values() if f["status"] == "COMPLETED")
    out = []

    def lose_start(c):  # an acknowledged batch that never made it to the log
        for b in c.log["batches"]:
            recs = b.get("recordDetails", [])
            keep = [r for r in recs if r.get("engine", {}).get("startFlow", {}).get("flowId") != flow]
            if len(keep) != len(recs):
                b["recordDetails"] = keep
    out.append(("acknowledged start missing from the log", "durable", lose_start))

    def early_ack(c):  # the answer arrived just before the batch reached the store
        first_start, landed = c.index_log()
        b = first_start[flow]
        landing = landed[(int(b["slot"]), b.get("writeId"))]
        h = next(h for h in c.history if h.get("flow") == flow and h["op"] == "start" and h.get("ok"))
        h["t1"] = (landing - 0.002) * 1000.0
        h["t0"] = min(h["t0"], h["t1"] - 1.0)
    out.append(("start acknowledged before durable", "durable", early_ack))

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
        c.log["batches"][len(c.log["batches"]) // 2] = {
            "slot": c.log["batches"][len(c.log["batches"]) // 2]["slot"], "missing": True}
    out.append(("a hole in the log", "log", hole))

    def lost_flow(c):
        del c.final[flow]
    out.append(("acknowledged flow lost", "flows", lost_flow))

    def second_output(c):  # a second completion accepted for a completed Step
        for b in c.log["batches"]:
            for r in b.get("recordDetails", []):
                ae = r.get("engine", {}).get("attemptEnded")
                if ae and ae["flowId"] == done["flowId"] and ae.get("outcome", "").endswith("COMPLETED") \
                        and ae["step"] == "a":
                    ae["output"] = json.dumps({"attempt": 99, "task": "forged", "nonce": -1})
                    return
    out.append(("a Step output no Worker produced", "attempts", second_output))

    def served_differs(c):
        c.final[done["flowId"]]["steps"][0]["attempts"].append({"number": 9, "outcome": "FAILED"})
    out.append(("served state differs from the log", "state", served_differs))

    def phantom_not_completed(c):  # an attempt ended NOT_COMPLETED by a record, not recovery
        for b in c.log["batches"]:
            for r in b.get("recordDetails", []):
                ae = r.get("engine", {}).get("attemptEnded")
                if ae and ae.get("outcome", "").endswith("_FAILED"):
                    ae["outcome"] = "ATTEMPT_OUTCOME_NOT_COMPLETED"
                    return
    out.append(("NOT_COMPLETED outside recovery", "attempts", phantom_not_completed))

    def stale_read(c):
        h = next(h for h in c.history if h["op"] == "get" and h.get("ok"))
        h.update(ok=False, code="NOT_FOUND", msg="NOT_FOUND: no flow")
    out.append(("stale read", "reads", stale_read))
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
    ops = s.get("starts_ok", 0) + s.get("starts_failed", 0) + s.get("gets_ok", 0) + s.get("gets_failed", 0)
    return (f"chaos seed={result['seed']}: operations={ops} (starts {s.get('starts_ok', 0)} ok/"
            f"{s.get('starts_failed', 0)} failed, reads {s.get('gets_ok', 0)} ok/"
            f"{s.get('gets_failed', 0)} failed); faults={sum(faults.values())} [{kinds}]; "
            f"store requests faulted [{store}]; flows acknowledged={s.get('acknowledged', 0)} "
            f"completed={s.get('completed', 0)} failed={s.get('failed', 0)} "
            f"lost={s.get('lost', 0)}; epochs={s.get('epochs', 0)} log slots={s.get('log_slots', 0)}; "
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
