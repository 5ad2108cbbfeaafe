#!/usr/bin/env python3
"""Failover benchmark: hot vs cold standby, against a real MinIO (bench/README.md).

For each standby mode (hot, cold), each log length (log slots built under load before the
first failover) and each repetition, on a fresh node (its own key prefix in one MinIO):

  1. `dex-server-zd serve` A becomes active; B starts as a standby with an empty local store
     (hot: until dexzd_hot_standby_state{state="following"} is 1; cold: until it waits for the
     lease). A `dex-flow-examples worker` and closed-loop `dexcli flow start` clients are given both
     addresses; the clients build the log to the wanted length, then keep a steady load.
  2. SIGTERM of A. Measured: SIGTERM -> B's ready line, and A's "released the lease" -> B's
     ready line. A is started again as the new standby, with an empty local store (a new
     volume: a cold standby then replays the whole log, a hot one bootstraps before following).
  3. SIGKILL of B. Measured: SIGKILL -> A's ready line (the lease's expiry + 1 s + replay).
  4. The load stops; every flow whose start was acknowledged must complete (else the run fails).

Per takeover: log slots at takeover (the new EpochStart slot, "log from slot N"), slots
replayed (hot: from the "took over" line; cold: N, the whole log), open ms ("acquired the lease"
-> "local store ...: <how>", i.e. the log open and the engine's replay) and lease->serving ms
("acquired the lease" -> ready). Times are from the processes' own log timestamps (ms) where a
line has one, else from when this program read the line.

Python 3 standard library plus boto3 (to create the bucket). Started by scripts/bench-failover.
"""
import argparse
import csv
import datetime
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ACCESS, SECRET = "dexminio", "dexminio-secret-key"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

READY = re.compile(r"dex-server-zd serve ready: node \S+ epoch (\d+) .*log from slot (\d+)\)")
TOOK_OVER = re.compile(r"took over as the active process: (\d+) log slots replayed after following, "
                       r"engine open (\d+) ms, lease to serving (\d+) ms")
STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}) ")
# The benchmark that runs (step_down_bench.py imports these helpers), for its messages.
PROGRAM = os.path.splitext(os.path.basename(sys.argv[0]))[0] or "failover_bench"


def die(message):
    raise SystemExit(f"{PROGRAM}: FAILED: {message}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stamp_of(line, fallback):
    """The wall-clock time of a server log line (spdlog, local time, ms), else `fallback`."""
    m = STAMP.match(line)
    if not m:
        return fallback
    return datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%f").timestamp()


class Proc:
    """A running process; its combined output is kept as (arrival wall time, line)."""

    def __init__(self, name, args, env=None, log_dir=None):
        self.name = name
        self.log = open(os.path.join(log_dir, f"{name}.log"), "a") if log_dir else None
        self.p = subprocess.Popen([str(a) for a in args], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, env=env)
        self.lines = []
        self.cv = threading.Condition()
        self.eof = False
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.p.stdout:
            now = time.time()
            line = line.rstrip("\n")
            if self.log:
                self.log.write(line + "\n")
                self.log.flush()
            with self.cv:
                self.lines.append((now, line))
                self.cv.notify_all()
        with self.cv:
            self.eof = True
            self.cv.notify_all()

    def mark(self):
        """The number of lines so far: `wait_for(..., after=mark)` looks only at later lines."""
        with self.cv:
            return len(self.lines)

    def wait_for(self, needle, timeout, after=0):
        """(arrival, line) of the first line containing `needle` (a string or a compiled regex),
        among the lines from index `after` on."""
        deadline = time.monotonic() + timeout
        i = after
        with self.cv:
            while True:
                while i < len(self.lines):
                    arrival, line = self.lines[i]
                    i += 1
                    if (needle.search(line) if hasattr(needle, "search") else needle in line):
                        return arrival, line
                left = deadline - time.monotonic()
                if self.eof or left <= 0:
                    what = needle.pattern if hasattr(needle, "pattern") else needle
                    die(f"{self.name}: no line with {what!r} within {timeout}s "
                        f"(exit status {self.p.poll()}); last lines:\n" + self.tail())
                self.cv.wait(min(left, 0.2))

    def tail(self, n=25):
        with self.cv:
            return "\n".join(f"  {line}" for _, line in self.lines[-n:])

    def signal(self, sig):
        if self.p.poll() is None:
            self.p.send_signal(sig)

    def stop(self, timeout=10):
        """SIGTERM, then SIGKILL after `timeout` s; returns the exit status."""
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.p.kill()
        return self.p.wait()


class MinIO:
    def __init__(self, binary, data_dir, log_dir):
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, MINIO_ROOT_USER=ACCESS, MINIO_ROOT_PASSWORD=SECRET,
                   MINIO_BROWSER="off", MINIO_UPDATE="off")
        self.proc = Proc("minio", [binary, "server", os.path.join(data_dir, "d"),
                                   "--address", f"127.0.0.1:{self.port}",
                                   "--console-address", f"127.0.0.1:{free_port()}",
                                   # as the tests and docs/operations.md ("MinIO") set it
                                   "--idle-timeout", "2s", "--read-header-timeout", "2s"],
                         env=env, log_dir=log_dir)
        import boto3
        s3 = boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS,
                          aws_secret_access_key=SECRET, region_name="us-east-1")
        deadline = time.monotonic() + 60
        while True:
            try:
                s3.create_bucket(Bucket="dex")
                return
            except Exception as e:  # not up yet
                if time.monotonic() > deadline or self.proc.p.poll() is not None:
                    die(f"MinIO did not start: {e}\n" + self.proc.tail())
                time.sleep(0.2)


class Server:
    """One `dex-server-zd serve` process slot of a node: fixed ports, a new local store per start."""

    def __init__(self, bench, node_id, prefix, name, mode):
        self.bench, self.node_id, self.prefix, self.name, self.mode = bench, node_id, prefix, name, mode
        self.api_port, self.metrics_port = free_port(), free_port()
        self.address = f"127.0.0.1:{self.api_port}"
        self.starts = 0
        self.proc = None

    def start(self):
        """Starts the process with an empty local store (a new volume)."""
        self.starts += 1
        b = self.bench
        tag = f"{self.node_id}-{self.name}{self.starts}"
        self.local = os.path.join(b.work, f"{tag}-local")
        config = os.path.join(b.work, f"{tag}.yaml")
        with open(config, "w") as f:
            f.write(f"nodeId: {self.node_id}\napi:\n  listen: {self.address}\n"
                    f"metrics:\n  listen: 127.0.0.1:{self.metrics_port}\n"
                    f"objectStore:\n  type: s3\n  bucket: dex\n  prefix: {self.prefix}\n"
                    f"  endpoint: {b.minio.endpoint}\n"
                    f"localStore:\n  path: {self.local}\n"
                    f"lease:\n  duration: {b.args.lease}s\nstandby:\n  mode: {self.mode}\n")
        env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS, AWS_SECRET_ACCESS_KEY=SECRET)
        self.proc = Proc(tag, [b.bin("dex-server-zd"), "serve", "--config", config], env=env,
                         log_dir=b.logs)
        self.proc.wait_for("API on", 30)
        return self

    def metrics(self):
        text = urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics",
                                      timeout=5).read().decode()
        values = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                key, _, value = line.rpartition(" ")
                values[key] = float(value)
        return values

    def wait_standing_by(self, timeout=300):
        """Hot: following (bootstrapped and caught up). Cold: waiting for the held lease."""
        if self.mode == "cold":
            self.proc.wait_for("waiting for it to expire", timeout)
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if self.metrics().get('dexzd_hot_standby_state{state="following"}') == 1:
                    return
            except OSError:
                pass
            if self.proc.p.poll() is not None:
                break
            time.sleep(0.1)
        die(f"{self.proc.name} never followed the log within {timeout}s:\n" + self.proc.tail())

    def log_length(self, epoch_start):
        """Slots in the log, by the active process's count of its acknowledged batches."""
        return epoch_start + 1 + int(self.metrics().get("dexzd_log_batches_total", 0))


class Load:
    """Closed-loop clients: `dexcli flow start OneStep` with known flow IDs through every address.

    `active` clients run, each pausing `pause` s after a start; both can change while it runs.
    `calls` has (sent, answered, ok) of every start call, in wall-clock seconds.
    """

    def __init__(self, bench, tag, servers, clients, pause=0.0):
        self.bench, self.tag, self.servers = bench, tag, ",".join(servers)
        self.acknowledged, self.failed_calls, self.last_error = set(), 0, ""
        self.calls = []
        self.active, self.pause = clients, pause
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self.run, args=(c,), daemon=True)
                        for c in range(clients)]
        for t in self.threads:
            t.start()

    def run(self, c):
        i = 0
        while not self.stopping.is_set():
            if c >= self.active:
                time.sleep(0.05)
                continue
            flow_id = f"{self.tag}-c{c}-{i:05d}"
            i += 1
            sent = time.time()
            try:
                # The request ID makes a repeat after an unknown outcome answer the same run.
                r = subprocess.run([self.bench.bin("dexcli"), "--server", self.servers, "--timeout",
                                    "30s", "flow", "start", "OneStep", "--flow-id", flow_id,
                                    "--request-id", flow_id, "--input", "{}"],
                                   capture_output=True, text=True, timeout=60)
                ok, error = r.returncode == 0, r.stderr.strip()
            except (OSError, subprocess.SubprocessError) as e:
                ok, error = False, str(e)
            with self.lock:
                self.calls.append((sent, time.time(), ok))
                if ok:
                    self.acknowledged.add(flow_id)
                else:
                    self.failed_calls += 1
                    self.last_error = error
            if self.pause:
                time.sleep(self.pause)

    def steady(self, clients, pause):
        self.active, self.pause = clients, pause

    def finish(self):
        self.stopping.set()
        for t in self.threads:
            t.join(90)


def dexcli_json(bench, servers, *args):
    """One dexcli call's JSON output, or None when it failed."""
    r = subprocess.run([bench.bin("dexcli"), "--server", ",".join(servers), "--timeout", "10s",
                        *args], capture_output=True, text=True, timeout=60)
    return json.loads(r.stdout) if r.returncode == 0 else None


def parallel(fn, items, threads=8):
    """{item: fn(item)} computed by a few threads (each call is a dexcli process)."""
    out, todo, lock = {}, list(items), threading.Lock()

    def work():
        while True:
            with lock:
                if not todo:
                    return
                item = todo.pop()
            value = fn(item)
            with lock:
                out[item] = value

    workers = [threading.Thread(target=work, daemon=True) for _ in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    return out


def check_flows(bench, servers, acknowledged, timeout=180):
    """Waits until every acknowledged flow closed; returns (flows, problems, attempt outcomes).

    flows: {flow ID: its description (dexcli flow describe)}; outcomes counts the Steps that
    completed on their first attempt ("attempt1") and on a later one ("retried": an attempt
    before failed, timed out or was not completed, e.g. interrupted by the failover).
    """
    deadline = time.monotonic() + timeout
    flows = {}
    while time.monotonic() < deadline:
        todo = [i for i in acknowledged if flows.get(i, {}).get("status", "RUNNING") == "RUNNING"]
        if not todo:
            break
        described = parallel(lambda i: dexcli_json(bench, servers, "flow", "describe", i), todo)
        flows.update({i: d for i, d in described.items() if d is not None})
        time.sleep(0.5)
    problems, outcomes = [], {}
    for flow_id in sorted(acknowledged):
        f = flows.get(flow_id)
        if f is None:
            problems.append(f"{flow_id}: acknowledged but not found (lost)")
        elif f["status"] != "COMPLETED":
            problems.append(f"{flow_id}: {f['status']} {f.get('closeReason', '')}")
    histories = parallel(lambda i: dexcli_json(bench, servers, "flow", "history", i, "--kind",
                                               "EXECUTE_COMPLETED"), sorted(flows))
    for history in histories.values():
        for e in (history or {}).get("events", []):
            key = "attempt1" if e.get("attempt", 1) == 1 else "retried"
            outcomes[key] = outcomes.get(key, 0) + 1
    return flows, problems, outcomes


def requests(metrics, operation):
    """(count, seconds) of the process's object-storage requests of one operation so far."""
    count = sum(v for k, v in metrics.items() if k.startswith("dexzd_object_store_requests_total{")
                and f'operation="{operation}"' in k)
    seconds = sum(v for k, v in metrics.items() if k.startswith("dexzd_object_store_request_seconds_sum{")
                  and f'operation="{operation}"' in k)
    return count, seconds


def takeover(new, before, t_signal, kind, old=None):
    """Reads the new active process's lines after a failover; returns one result row.

    `before`: the standby's metrics just before the signal, so that the row has the
    object-storage requests of the takeover (and of the standby's own polls meanwhile).
    """
    ready_at, ready = new.proc.wait_for(READY, 120)
    after = new.metrics()
    epoch_start = int(READY.search(ready).group(2))
    acq_at, acq = new.proc.wait_for("acquired the lease", 5)
    acq_ts = stamp_of(acq, acq_at)
    store_at, store = new.proc.wait_for(f"local store {new.local}:", 5)
    store_ts = stamp_of(store, store_at)
    row = {
        "failover": kind,
        "log_slots": epoch_start,
        "takeover_s": ready_at - t_signal,
        "signal_to_lease_s": acq_ts - t_signal,
        "open_ms": (store_ts - acq_ts) * 1000,
        "lease_to_serving_ms": (ready_at - acq_ts) * 1000,
        "local_store": store.split(f"local store {new.local}: ", 1)[1],
    }
    for op in ("list", "get"):
        (n0, s0), (n1, s1) = requests(before, op), requests(after, op)
        row[f"{op}_requests"] = int(n1 - n0)
        row[f"{op}_ms"] = (s1 - s0) * 1000
    if new.mode == "hot":
        m = TOOK_OVER.search(new.proc.wait_for(TOOK_OVER, 5)[1])
        row["slots_replayed"] = int(m.group(1))
        row["server_engine_open_ms"] = int(m.group(2))
        row["server_lease_to_serving_ms"] = int(m.group(3))
    else:
        row["slots_replayed"] = epoch_start  # a cold standby replays the whole log
    if old is not None:  # SIGTERM: the old process released the lease
        rel_at, rel = old.proc.wait_for("released the lease", 30)
        rel_ts = stamp_of(rel, rel_at)
        row["signal_to_release_s"] = rel_ts - t_signal
        row["release_to_lease_s"] = acq_ts - rel_ts
        row["release_to_serving_s"] = ready_at - rel_ts
    return row


class Bench:
    """Scratch directory, private copies of the programs, one MinIO; `run_case` is the failover
    benchmark's case (step_down_bench.py has its own)."""

    def __init__(self, args):
        self.args = args
        self.work = tempfile.mkdtemp(prefix=f"dex-{PROGRAM.replace('_', '-')}-", dir=args.dir)
        self.logs = os.path.join(self.work, "logs")
        os.makedirs(self.logs)
        # Private copies: others may relink build/bin while this runs.
        self.bindir = os.path.join(self.work, "bin")
        os.makedirs(self.bindir)
        for name in ("dex-server-zd", "dexcli", "dex-flow-examples"):
            self.copy_binary(name)
        self.minio = None
        self.procs = []

    def copy_binary(self, name):
        """Copies a program that is not being relinked right now and checks that it runs."""
        src, dst = os.path.join(self.args.bin_dir, name), os.path.join(self.bindir, name)
        for _ in range(60):
            if not os.path.exists(src):
                die(f"{src} is missing: build it first (scripts/bench-failover does)")
            st = os.stat(src)
            if st.st_size > 0 and os.access(src, os.X_OK) and time.time() - st.st_mtime > 2:
                shutil.copy2(src, dst)
                if os.stat(src).st_mtime == st.st_mtime and subprocess.run(
                        [dst, "--help"], capture_output=True, timeout=30).returncode == 0:
                    return
            time.sleep(2)  # being relinked by a build
        die(f"{src} kept changing or does not run (--help failed)")

    def bin(self, name):
        return os.path.join(self.bindir, name)

    def log(self, message):
        print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)

    def run_case(self, mode, target, rep):
        a = self.args
        node_id = f"fb-{mode}-{target}-{rep}"
        A = Server(self, node_id, node_id, "a", mode)
        B = Server(self, node_id, node_id, "b", mode)
        servers = [A.address, B.address]
        load = worker = None
        try:
            A.start()
            self.procs.append(A)
            A.proc.wait_for(READY, 60)
            B.start()
            self.procs.append(B)
            B.wait_standing_by()
            worker = self.start_worker(node_id, servers)

            # Build the log to `target` slots, then keep a steady load through both failovers.
            t0 = time.monotonic()
            load = Load(self, node_id, servers, a.build_clients)
            epoch_start = int(READY.search(A.proc.wait_for(READY, 1)[1]).group(2))
            progress, length = time.monotonic(), 0
            while length < target:
                now_length = A.log_length(epoch_start)
                if now_length > length:
                    progress, length = time.monotonic(), now_length
                elif time.monotonic() - progress > 30:
                    die(f"{node_id}: the log stayed at {length} slots for 30 s; "
                        f"{load.failed_calls} start calls failed, the last with: {load.last_error}")
                time.sleep(0.1)
            built_s = time.monotonic() - t0
            load.steady(a.steady_clients, a.steady_pause)
            time.sleep(a.settle)

            # Graceful: SIGTERM of the active A; B takes over.
            before = B.metrics()
            t_term = time.time()
            A.proc.signal(signal.SIGTERM)
            term = takeover(B, before, t_term, "SIGTERM", old=A)
            rc = A.proc.p.wait(timeout=30)
            if rc != 0:
                die(f"{A.proc.name} exited {rc} after SIGTERM:\n" + A.proc.tail())
            self.log(f"{mode} {target} #{rep}: log built in {built_s:.1f}s; SIGTERM at "
                     f"{term['log_slots']} slots: serving after {term['takeover_s']:.2f}s "
                     f"(released {term['signal_to_release_s']:.2f}s after the signal; lease taken "
                     f"{term['release_to_lease_s']:.2f}s and serving {term['release_to_serving_s']:.2f}s "
                     f"after the release), "
                     f"{term['slots_replayed']} slots replayed, open {term['open_ms']:.0f} ms, "
                     f"{term['list_requests']} LISTs ({term['list_ms']:.0f} ms)")

            # A comes back as the new standby, with an empty local store.
            t_restart = time.monotonic()
            A.start()
            A.wait_standing_by()
            standby_ready_s = time.monotonic() - t_restart
            time.sleep(a.settle)

            # Crash: SIGKILL of the active B; A waits for the expiry + 1 s, then replays.
            before = A.metrics()
            t_kill = time.time()
            B.proc.signal(signal.SIGKILL)
            kill = takeover(A, before, t_kill, "SIGKILL")
            B.proc.p.wait(timeout=10)
            self.log(f"{mode} {target} #{rep}: new standby ready in {standby_ready_s:.1f}s; SIGKILL at "
                     f"{kill['log_slots']} slots: serving after {kill['takeover_s']:.2f}s "
                     f"(lease taken {kill['signal_to_lease_s']:.2f}s after the kill), "
                     f"{kill['slots_replayed']} slots replayed, open {kill['open_ms']:.0f} ms, "
                     f"lease to serving {kill['lease_to_serving_ms']:.0f} ms, "
                     f"{kill['list_requests']} LISTs ({kill['list_ms']:.0f} ms)")

            time.sleep(a.settle)
            load.finish()
            flows, problems, outcomes = check_flows(self, servers, load.acknowledged)
            self.log(f"{mode} {target} #{rep}: {len(load.acknowledged)} flows acknowledged "
                     f"({load.failed_calls} start calls failed and were not retried), "
                     f"{len(flows)} found; Steps completed {outcomes}")
            if not load.acknowledged or problems:
                die(f"{node_id}: {len(problems)} acknowledged flows did not complete:\n  "
                    + "\n  ".join(problems[:20]))
            rows = []
            for row in (term, kill):
                row.update(mode=mode, target=target, rep=rep, flows_acknowledged=len(load.acknowledged),
                           standby_ready_s=standby_ready_s if row is kill else "")
                rows.append(row)
            return rows
        finally:
            self.end_case(load, worker, [A, B])

    def start_worker(self, node_id, servers):
        """A dex-flow-examples worker (--concurrency 32, --work-time) given every address."""
        worker = Proc(f"{node_id}-worker", [self.bin("dex-flow-examples"), "worker", "--server",
                                            ",".join(servers), "--concurrency", "32",
                                            "--work-time", self.args.work_time],
                      log_dir=self.logs)
        self.procs.append(worker)
        worker.wait_for("connected", 30)
        return worker

    def end_case(self, load, worker, servers):
        """Stops what a case started: its load first, then its worker and `serve` processes."""
        if load is not None:
            load.finish()
        for p in [worker] + [s.proc for s in servers]:
            if p is not None:
                p.stop()
        for x in [worker] + servers:
            if x in self.procs:
                self.procs.remove(x)

    def cleanup(self):
        for p in self.procs:
            (p.proc if isinstance(p, Server) else p).stop(5)
        if self.minio is not None:
            self.minio.proc.stop()
        if self.args.keep:
            print(f"{PROGRAM}: kept {self.work} (logs in {self.logs})")
        else:
            shutil.rmtree(self.work, ignore_errors=True)


def med_max(values, fmt):
    values = [v for v in values if v != "" and v is not None]
    if not values:
        return "-"
    return f"{format(statistics.median(values), fmt)} / {format(max(values), fmt)}"


def print_table(rows, args):
    head = ("mode", "log slots", "failover", "slots at", "takeover s", "release->", "slots",
            "open ms", "lease->", "LISTs", "LIST ms")
    head2 = ("", "(target)", "", "takeover", "med / max", "serving s", "replayed", "med / max",
             "serving ms", "", "")
    widths = (5, 9, 8, 9, 13, 13, 11, 13, 13, 5, 7)
    out = ["", f"failover_bench: lease.duration {args.lease}s, heldLeasePollInterval 250ms (default), "
           f"{args.reps} repetition(s); {os.cpu_count()} CPUs; medians / maxima",
           "  ".join(h.rjust(w) for h, w in zip(head, widths)),
           "  ".join(h.rjust(w) for h, w in zip(head2, widths))]
    for mode in args.modes:
        for target in args.sizes:
            for kind in ("SIGTERM", "SIGKILL"):
                sel = [r for r in rows if r["mode"] == mode and r["target"] == target and r["failover"] == kind]
                if not sel:
                    continue
                cells = (mode, str(target), kind,
                         str(int(statistics.median(r["log_slots"] for r in sel))),
                         med_max([r["takeover_s"] for r in sel], ".2f"),
                         med_max([r.get("release_to_serving_s") for r in sel], ".2f"),
                         med_max([r["slots_replayed"] for r in sel], ".0f"),
                         med_max([r["open_ms"] for r in sel], ".0f"),
                         med_max([r["lease_to_serving_ms"] for r in sel], ".0f"),
                         str(int(statistics.median(r["list_requests"] for r in sel))),
                         f'{statistics.median(r["list_ms"] for r in sel):.0f}')
                out.append("  ".join(c.rjust(w) for c, w in zip(cells, widths)))
    print("\n".join(out), flush=True)


FIELDS = ["mode", "target", "rep", "failover", "log_slots", "takeover_s", "signal_to_release_s",
          "release_to_lease_s", "release_to_serving_s", "signal_to_lease_s", "slots_replayed", "open_ms",
          "lease_to_serving_ms", "server_engine_open_ms", "server_lease_to_serving_ms",
          "list_requests", "list_ms", "get_requests", "get_ms", "local_store", "standby_ready_s",
          "flows_acknowledged"]


def add_common_args(p, csv_name, settle, what):
    """The options both benchmarks have (the node, the worker, the programs, the output)."""
    p.add_argument("--reps", type=int, default=3, help=f"repetitions of each {what}")
    p.add_argument("--settle", type=float, default=settle, help="load before each measured event, s")
    p.add_argument("--lease", type=int, default=3, help="lease.duration in seconds (3 to 3600)")
    p.add_argument("--work-time", default="20ms", help="the OneStep Flow's Step works this long (dex-flow-examples --work-time)")
    p.add_argument("--bin-dir", default=os.path.join(REPO, "build", "bin"))
    p.add_argument("--minio", default=os.environ.get("DEX_MINIO_BIN")
                   or os.path.expanduser("~/.cache/dex/bin/minio"))
    p.add_argument("--csv", default=None, help=f"default bench/results/{csv_name}-<time>.csv")
    p.add_argument("--dir", default=None, help="scratch directory (default $TMPDIR or /tmp)")
    p.add_argument("--keep", action="store_true", help="keep the scratch directory and its logs")


def check_common_args(args, csv_name):
    if not os.path.exists(args.minio):
        die(f"MinIO is not installed at {args.minio}: run scripts/install-minio")
    args.csv = args.csv or os.path.join(REPO, "bench", "results",
                                        time.strftime(f"{csv_name}-%Y%m%d-%H%M%S.csv"))


def run_cases(bench, cases, print_table, fields, noun):
    """Starts MinIO, runs each case (a callable returning result rows), cleans up, prints the
    table and writes the CSV; returns the exit status (130 when interrupted by Ctrl-C or
    SIGTERM). A failure (die) keeps the scratch directory with its logs and exits; so does a
    row with a "problem" (a case that measured what it could but found, say, acknowledged flows
    that did not complete or a server that crashed), after the table, with exit status 1.
    """
    def on_signal(_sig, _frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    rows = []
    started = time.monotonic()
    try:
        bench.minio = MinIO(bench.args.minio, bench.work, bench.logs)
        bench.log(f"MinIO on {bench.minio.endpoint}; scratch {bench.work}")
        for case in cases:
            rows.extend(case())
    except KeyboardInterrupt:
        print(f"{PROGRAM}: interrupted", file=sys.stderr)
        bench.cleanup()
        return 130
    except BaseException:  # die(), or a bug in the benchmark: stop MinIO and the servers too
        bench.args.keep = True  # keep the logs of a failure
        bench.cleanup()
        raise
    failed = [r for r in rows if r.get("problem")]
    bench.args.keep = bench.args.keep or bool(failed)
    bench.cleanup()
    print_table(rows, bench.args)
    write_csv(bench.args.csv, fields, rows)
    elapsed = time.monotonic() - started
    if failed:
        print(f"\n{PROGRAM}: FAILED: {len(failed)} of {len(rows)} {noun} in {elapsed:.0f} s "
              f"had a problem:\n  " + "\n  ".join(r["problem"] for r in failed)
              + f"\nCSV {bench.args.csv}", flush=True)
        return 1
    print(f"\n{PROGRAM}: {len(rows)} {noun} in {elapsed:.0f} s; "
          f"every acknowledged flow completed; CSV {bench.args.csv}")
    return 0


def write_csv(path, fields, rows):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.3f}" if isinstance(v, float) else v) for k, v in r.items()})


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--modes", default="hot,cold", help="standby modes, comma-separated")
    p.add_argument("--sizes", default="300,3000", help="log slots to build before the failovers")
    p.add_argument("--build-clients", type=int, default=4, help="clients while the log is built")
    p.add_argument("--steady-clients", type=int, default=1, help="clients through the failovers")
    p.add_argument("--steady-pause", type=float, default=0.2, help="pause after each steady start, s")
    add_common_args(p, "failover", settle=2.0, what="(mode, size)")
    args = p.parse_args()
    args.modes = [m for m in args.modes.split(",") if m]
    args.sizes = [int(s) for s in args.sizes.split(",") if s]
    check_common_args(args, "failover")

    bench = Bench(args)
    return run_cases(bench, [lambda mode=mode, target=target, rep=rep: bench.run_case(mode, target, rep)
                             for target in args.sizes for rep in range(1, args.reps + 1)
                             for mode in args.modes], print_table, FIELDS, "takeovers")


if __name__ == "__main__":
    sys.exit(main())
