#!/usr/bin/env python3
"""dex against Restate, side by side, on this machine in one run (bench/peers/README.md).

The same workload on both: a flow of one Step and a flow of three sequential Steps, each Step
trivial work in a Node.js handler (it returns the flow's input), closed-loop clients at
concurrency 1 and 64, durable settings on both. On dex these are dex Flows (peers-one: Step
echo; peers-three: echo-1 -> echo-2 -> echo-3; each Step one Execute) that the Worker declares
in its hello. Setups (--setups):

  dex-ts-strict     dex-server-zd dev --durability strict, the TypeScript Worker (sdk/typescript,
                    bench/peers/dex/worker.mjs)
  restate           restate-server with its defaults, the Restate service (ctx.run steps)
  dex-cpp-strict    dex-server-zd dev --durability strict, dex-peers-worker (C++ SDK,
                    bench/peers_worker.cc)
  dex-ts-pcs        dex-server-zd dev --durability processCrashSafe, the TypeScript Worker
  dex-cpp-pcs       dex-server-zd dev --durability processCrashSafe, dex-peers-worker

Every row (flow x concurrency x setup) gets fresh processes and a fresh data directory; the
rows of one workload run one after the other, so the machine's noise hits the setups they
compare alike. Per row: the server and the worker (or service) start, a probe flow completes,
a loopback round trip is timed (1 s), then bench/peers/driver.mjs (one Node.js program for
both systems) runs `concurrency` closed loops: warm-up, then the measured period. CPU seconds
of each process come from /proc/<pid>/stat over the measured period.

Floors, at the start and at the end: a 4 KiB append + fdatasync of a file (one durable log
append, what a RocksDB WAL sync is), a new 4 KiB file + fsync + fsync of its directory (what
dex's log writes per batch: one object per batch), in the scratch directory (the data's file
system); a loopback gRPC round trip (grpc-js health Check on the dex server of each dex row)
and an HTTP/1.1 round trip (Restate's ingress /restate/health, each Restate row).

Flow "one-call" (dex only): peers-one, each flow started and waited for in one call (StartFlow
with wait_timeout_ms) instead of StartFlow then WaitForFlow (issue 30); its dex/R ratios are
against Restate's "one" row.

Slow-flush rows (--flush fast,slow): the same rows on a disk whose writes are capped, as a cloud
volume with provisioned IOPS caps them (this disk also slows by itself for minutes, to 4 ms
flushes). Produced by a block-I/O cgroup that limits the server's writes to the data's disk
(--slow-flush-iops, default 1000 write requests/s; cgroup v1 blkio throttle, or io.max on cgroup
v2): every process the server starts is in it, whatever its language or linkage (restate-server
is statically linked), and nothing but its I/O is slowed. Detected, not assumed: each slow row
checks that its server is in the cgroup (/proc/<pid>/cgroup) and that the cgroup counted its
writes. The row's floor probe runs in the cgroup too, but the throttle hands out its budget in
100 ms slices, so the probe's p50 stays near the disk's own; read a slow row by its throughput.

Flow "synced" (dex with the C++ Worker only): peers-attr's write to an Attribute declared
dex::kSync, the Flow's Attribute Store "peers": the bench starts a throwaway PostgreSQL
(tests/support/sql_servers.py) with a table peers(id varchar(128) primary key, peer text), and
the server of each synced row gets a config naming it (attributeStore.stores.peers). After the
row, how long the sync took to be idle, the table's rows and PostgreSQL's CPU seconds over the
measured period (every process of its server) are printed and kept in the CSV.

Python 3 standard library; node, gnuplot (for the PNG). Started by scripts/bench-peers.
"""
import argparse
import csv
import datetime
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from failover_bench import Proc, die, free_port  # noqa: E402  (shared helpers of bench/)
sys.path.insert(0, os.path.join(REPO, "tests", "support"))
import sql_servers  # noqa: E402  (the throwaway PostgreSQL of the synced rows)

SETUPS = {
    # name: (system, worker, durability)
    "dex-ts-strict": ("dex", "ts", "strict"),
    "restate": ("restate", "restate-ts", "default"),
    "dex-cpp-strict": ("dex", "cpp", "strict"),
    "dex-ts-pcs": ("dex", "ts", "processCrashSafe"),
    "dex-cpp-pcs": ("dex", "cpp", "processCrashSafe"),
}
# dex Flow type, Restate handler. "indexed" is peers-one plus one indexed Attribute written per run,
# "attr" the same write not indexed (issue 26: what the search index costs a Step's write); the
# C++ Worker hosts them, dex only. "synced" is the same write to a synced Attribute (issue 27:
# what Attribute Store sync costs the hot path), against the bench's PostgreSQL.
FLOWS = {"one": ("peers-one", "one"), "one-call": ("peers-one", None),
         "three": ("peers-three", "three"),
         "indexed": ("peers-indexed", None), "attr": ("peers-attr", None),
         "synced": ("peers-synced", None)}
# Flows that are another flow measured with one call (issue 30, "Round trips"): StartFlow with
# wait_timeout_ms answers when the run ended, instead of StartFlow then WaitForFlow. Any dex
# setup runs them; Restate has no row of its own (its invocation is one call already), so the
# dex/R ratios use its row of the flow named here.
ONE_CALL = {"one-call": "one"}
# --smoke (scripts/bench-peers --smoke, in scripts/test): one row per system, seconds long.
SMOKE = {"setups": "dex-ts-strict,restate", "flows": "one,one-call", "concurrency": "1,64", "seconds": 2,
         "warmup": 1, "rtt_seconds": 0.2, "floor_seconds": 0.2, "row_floor_seconds": 0.1}
# Disk states a row runs in (--flush): the disk as it is, and every flush of the server 2 ms slower.
FLUSHES = ("fast", "slow")
WORKER_NAMES = {"ts": "TS Worker", "cpp": "C++ worker", "restate-ts": "TS service"}
DEX_READY = re.compile(r"dex-server-zd dev ready: .* listening on (\S+)")


def runs_row(flow, system, worker):
    """Whether a setup has a row of `flow`: a one-call flow on dex only; peers-indexed, -attr
    and -synced on the C++ Worker only (it hosts them)."""
    if flow in ONE_CALL:
        return system == "dex"
    return FLOWS[flow][1] is not None or (system, worker) == ("dex", "cpp")


def run(args, **kw):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, **kw)


def tree_cpu_seconds(root):
    """CPU seconds (utime+stime) of process `root` and every descendant, plus what its exited
    children left in its cutime+cstime: a PostgreSQL server and its backends."""
    stats = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # fields[0] is field 3 (state): ppid 4, utime 14, stime 15, cutime 16, cstime 17
        stats[int(name)] = (int(fields[1]), int(fields[11]) + int(fields[12]),
                            int(fields[13]) + int(fields[14]))
    children = {}
    for pid, (ppid, _, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    ticks, todo = stats.get(root, (0, 0, 0))[2], [root]
    while todo:
        pid = todo.pop()
        if pid in stats:
            ticks += stats[pid][1]
            todo += children.get(pid, [])
    return ticks / os.sysconf("SC_CLK_TCK")


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(p * len(v)))] if v else float("nan")


# ------------------------------------------------------------------------------------ floors

def fsync_floor(directory, seconds, settle=0.0):
    """(append+fdatasync samples, create+fsync+dir-fsync samples) in ms, `seconds` each, after
    `settle` seconds of appends that are not kept (a new throttle lets a burst through first).
    The created files stay until the end of the run (see Bench.remove)."""
    block = os.urandom(4096)
    append, create = [], []
    path = os.path.join(directory, "floor-append")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        end = time.monotonic() + settle
        while time.monotonic() < end:  # bounded by `settle`
            os.write(fd, block)
            os.fdatasync(fd)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            t = time.perf_counter()
            os.write(fd, block)
            os.fdatasync(fd)
            append.append((time.perf_counter() - t) * 1e3)
    finally:
        os.close(fd)
        os.unlink(path)
    sub = tempfile.mkdtemp(prefix="floor-create-", dir=directory)
    dir_fd = os.open(sub, os.O_RDONLY)
    try:
        end, i = time.monotonic() + seconds, 0
        while time.monotonic() < end:
            t = time.perf_counter()
            fd = os.open(os.path.join(sub, f"{i:08d}"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.write(fd, block)
            os.fsync(fd)
            os.close(fd)
            os.fsync(dir_fd)
            create.append((time.perf_counter() - t) * 1e3)
            i += 1
    finally:
        os.close(dir_fd)
    return append, create


def floor_through(prefix, directory, seconds):
    """fsync_floor in a child process run under `prefix` (into the slow rows' cgroup): the floor
    a slow row's server sees."""
    r = run([*prefix, sys.executable, os.path.abspath(__file__), "--floor-probe", directory, seconds],
            timeout=seconds * 2 + 70)
    if r.returncode != 0:
        die(f"the fsync floor probe failed: {r.stderr[-2000:]}")
    probe = json.loads(r.stdout)
    return probe["append"], probe["create"]


class SlowDiskCgroup:
    """A block-I/O cgroup limiting writes to the disk under `directory` to `iops` requests/s:
    the slow-flush rows' disk. cgroup v1 blkio throttle where mounted, else cgroup v2 io.max."""

    def __init__(self, directory, iops):
        dev = os.stat(directory).st_dev
        major, minor = os.major(dev), os.minor(dev)
        if os.path.exists(f"/sys/dev/block/{major}:{minor}/partition"):  # throttle the disk
            with open(f"/sys/dev/block/{major}:{minor}/../dev") as f:
                major, minor = map(int, f.read().split(":"))
        self.device = f"{major}:{minor}"
        name = f"dex-peers-slow-{os.getpid()}"
        if os.path.isdir("/sys/fs/cgroup/blkio"):
            self.path = os.path.join("/sys/fs/cgroup/blkio", name)
            limit_file, limit = "blkio.throttle.write_iops_device", f"{self.device} {iops}"
            self.counter = "blkio.throttle.io_serviced"
        else:
            root = "/sys/fs/cgroup"
            try:
                with open(os.path.join(root, "cgroup.subtree_control")) as f:
                    if "io" not in f.read().split():
                        raise OSError("the io controller is not enabled for child cgroups")
            except OSError as e:
                die(f"slow-flush rows need cgroup v1 blkio or the cgroup v2 io controller: {e}")
            self.path = os.path.join(root, name)
            limit_file, limit = "io.max", f"{self.device} wiops={iops}"
            self.counter = "io.stat"
        try:
            os.makedirs(self.path, exist_ok=True)
            with open(os.path.join(self.path, limit_file), "w") as f:
                f.write(limit)
        except OSError as e:
            die(f"slow-flush rows: making the cgroup {self.path} ({limit_file} {limit!r}; "
                f"needs root): {e}")
        self.procs = os.path.join(self.path, "cgroup.procs")

    def check_member(self, tag, pid):
        with open(f"/proc/{pid}/cgroup") as f:
            if os.path.basename(self.path) not in f.read():
                die(f"{tag}: the server (pid {pid}) is not in {self.path}: the row would not be slow")

    def writes(self):
        """Write requests the cgroup counted on the device (its throttle saw them)."""
        with open(os.path.join(self.path, self.counter)) as f:
            for line in f:
                if line.startswith(self.device + " Write"):
                    return int(line.split()[2])
                if line.startswith(self.device + " ") and "wios=" in line:
                    return int(re.search(r"wios=(\d+)", line).group(1))
        return 0

    def remove(self):
        try:
            os.rmdir(self.path)
        except OSError:
            pass


# ------------------------------------------------------------------------------------ bench

class Bench:
    def __init__(self, args):
        self.args = args
        self.work = tempfile.mkdtemp(prefix="dex-peers-", dir=args.dir)
        self.logs = os.path.join(self.work, "logs")
        os.makedirs(self.logs)
        self.node = shutil.which("node") or die("node is not installed (scripts/install-bench-peers)")
        self.deps = HERE  # node_modules of bench/peers/package.json (scripts/install-bench-peers)
        self.restate_bin = os.path.join(self.deps, "node_modules", "@restatedev",
                                        "restate-server-linux-x64", "bin", "restate-server")
        self.procs = []
        self.to_remove = []
        self.pg = None  # the PostgreSQL of the synced rows, started by the first one
        self.slow_cgroup = None  # the slow-flush rows' cgroup, made by the first one

    def flush_prefix(self, flush):
        """What a row's server runs under: nothing on a fast row; on a slow one a shell that
        moves itself into the slow-flush cgroup and execs the server (same pid)."""
        if flush == "fast":
            return []
        if self.slow_cgroup is None:
            self.slow_cgroup = SlowDiskCgroup(self.work, self.args.slow_flush_iops)
        return ["sh", "-c", f'echo $$ > {self.slow_cgroup.procs} && exec "$@"', "sh"]

    def server_pid(self, tag, flush, proc):
        """The server's pid, checked on a slow row to be in the slow-flush cgroup."""
        if flush != "fast":
            self.slow_cgroup.check_member(tag, proc.p.pid)
        return proc.p.pid

    def row_floor(self, flush, seconds):
        prefix = self.flush_prefix(flush)
        if not prefix:
            return fsync_floor(self.work, seconds)
        return floor_through(prefix, self.work, seconds)

    def synced_config(self):
        """The dev config of a synced row: Attribute Store "peers" on the bench's PostgreSQL
        (started on first use, from the main thread: it dies with this process)."""
        if self.pg is None:
            try:
                self.pg = sql_servers.start_postgres()
            except sql_servers.ServerError as e:
                die(f"PostgreSQL could not start for the synced rows (scripts/install-deps): {e}")
            self.pg.sql("CREATE TABLE peers (id varchar(128) PRIMARY KEY, peer text)")
        path = os.path.join(self.work, "synced.yaml")
        with open(path, "w") as f:
            f.write("attributeStore:\n  stores:\n    peers:\n      type: postgres\n"
                    f"      dsn: {self.pg.dsn}\n      tableName: peers\n")
        return path

    def sync_state(self, address):
        r = run([self.bin("dexcli"), "--server", address, "admin", "describe"], timeout=30)
        if r.returncode != 0:
            die(f"dexcli admin describe: exit {r.returncode}: {r.stderr[-1000:]}")
        return json.loads(r.stdout)["attributeStores"][0]

    def bin(self, name):
        return os.path.join(self.args.bin_dir, name)

    def driver(self, mode, *extra, timeout):
        r = run([self.node, os.path.join(HERE, "driver.mjs"), mode, *extra], timeout=timeout)
        if r.returncode != 0 or not r.stdout.strip():
            die(f"driver {mode} {' '.join(map(str, extra))}: exit {r.returncode}\n{r.stderr[-3000:]}")
        return json.loads(r.stdout.strip().splitlines()[-1])

    def start(self, name, argv, env=None):
        p = Proc(name, argv, env=env, log_dir=self.logs)
        self.procs.append(p)
        return p

    def stop_all(self):
        for p in reversed(self.procs):
            p.stop(timeout=30)
        self.procs = []

    def profile_start(self, tag, pid):
        """With --perf DIR: `perf record -g` (CPU, call graphs) and `perf trace -s` (time in the
        file-system calls, per thread) of the server `pid` over the warm-up and measured period."""
        if not self.args.perf:
            return []
        os.makedirs(self.args.perf, exist_ok=True)
        span = str(self.args.warmup + self.args.seconds)
        base = os.path.join(self.args.perf, tag)
        return [subprocess.Popen(["perf", "record", "-F", "499", "-g", "-p", str(pid), "-o",
                                  f"{base}.perf.data", "--", "sleep", span],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
                subprocess.Popen(["perf", "trace", "-s", "-p", str(pid), "-o", f"{base}.trace.txt",
                                  "-e", "fsync,fdatasync,openat,link,unlink,mkdir,rename,write,pwrite64",
                                  "--", "sleep", span],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]

    def profile_end(self, tag, perfs):
        if not perfs:
            return
        for p in perfs:
            p.wait(timeout=120)
        base = os.path.join(self.args.perf, tag)
        with open(f"{base}.report.txt", "w") as out:
            for extra in (["--no-children", "--sort", "dso,symbol", "-F", "overhead,dso,sym"],
                          ["--children", "--sort", "symbol", "-F", "children,self,sym"]):
                out.write(f"==== perf report {' '.join(extra)}\n")
                out.flush()
                subprocess.run(["perf", "report", "--stdio", "-i", f"{base}.perf.data", "-g", "none",
                                "--percent-limit", "0.7", *extra], stdout=out,
                               stderr=subprocess.DEVNULL, timeout=600)
        print(f"  perf: {base}.report.txt, {base}.trace.txt, {base}.perf.data", flush=True)

    def remove(self, path):
        """Data directories are removed at the end of the run, not between rows: on ext4
        without a journal (this machine's) creating a file skips every inode deleted in the
        last 1-6 minutes (the kernel's recently_deleted()), so removing one row's 10,000s of
        files would slow the next rows' file creation, which is all of dex's log writes."""
        self.to_remove.append(path)

    def remove_all(self):
        t = time.monotonic()
        for path in self.to_remove:
            shutil.rmtree(path, ignore_errors=True)
        self.to_remove = []
        return time.monotonic() - t

    # -------------------------------------------------------------------------------- dex

    def dex_row(self, tag, worker, durability, flow, concurrency, flush):
        a = self.args
        data = os.path.join(self.work, tag)
        synced = flow == "synced"
        server = self.start(f"{tag}-server", [*self.flush_prefix(flush), self.bin("dex-server-zd"),
                                              "dev", "--data-dir", data,
                                              "--listen", "127.0.0.1:0", "--durability", durability,
                                              *(["--config", self.synced_config()] if synced else [])])
        address = DEX_READY.search(server.wait_for(DEX_READY, 60)[1]).group(1)
        server_pid = self.server_pid(tag, flush, server)
        # The Worker declares both Flow types in its hello: nothing to register.
        if worker == "ts":
            w = self.start(f"{tag}-worker", [self.node, os.path.join(HERE, "dex", "worker.mjs"),
                                             "--server", address, "--sdk", a.sdk,
                                             "--concurrency", a.worker_concurrency])
            w.wait_for("dex-ts-worker ready", 60)
        else:
            w = self.start(f"{tag}-worker", [self.bin("dex-peers-worker"), "--server", address,
                                             "--concurrency", a.worker_concurrency,
                                             *(["--synced"] if synced else [])])
            w.wait_for("dex-cpp-worker ready", 60)
        target = ["--system", "dex", "--address", address, "--flow-type", FLOWS[flow][0],
                  *(["--one-call", "1"] if flow in ONE_CALL else [])]
        self.driver("probe", *target, "--timeout", 60, timeout=120)
        rtt = self.driver("rtt", "--grpc", address, "--seconds", a.rtt_seconds, timeout=60)
        perfs = self.profile_start(tag, server_pid)
        db_cpu = []
        if synced:  # PostgreSQL's CPU over about the measured period (the driver's own edges)
            def sample(delay):
                time.sleep(delay)
                db_cpu.append(tree_cpu_seconds(self.pg.pid))
            edges = threading.Thread(target=lambda: (sample(a.warmup), sample(a.seconds)), daemon=True)
            edges.start()
        load = self.driver("load", *target, "--concurrency", concurrency, "--warmup", a.warmup,
                           "--seconds", a.seconds, "--pids", f"server={server_pid},worker={w.p.pid}",
                           "--id-prefix", tag, timeout=a.warmup + a.seconds + 180)
        self.profile_end(tag, perfs)
        if synced:
            edges.join()
            load["dbCpuSeconds"] = db_cpu[1] - db_cpu[0] if len(db_cpu) == 2 else None
            # How far the sync was behind when the load ended: until it is idle.
            t, deadline = time.monotonic(), time.monotonic() + 300
            while (st := self.sync_state(address))["state"] != "idle" or st["lagSlots"] != 0:
                if time.monotonic() > deadline:
                    die(f"{tag}: the Attribute Store sync is not idle 300 s after the load: {st}")
                time.sleep(0.1)
            load["syncIdleAfterS"] = time.monotonic() - t
            load["syncRows"] = st["rows"]
            load["tableRows"] = int(self.pg.sql(f"SELECT count(*) FROM peers WHERE id LIKE '{tag}-%'"))
            if load["tableRows"] < load["flows"]:
                die(f"{tag}: the table holds {load['tableRows']} rows for {load['flows']} flows")
        w_status = w.stop(timeout=30)
        s_status = server.stop(timeout=30)
        self.procs = []
        if s_status != 0:
            die(f"{tag}: dex-server-zd exited {s_status}; last lines:\n{server.tail()}")
        if w_status != 0:
            print(f"peers_bench: note: {tag}: the worker exited {w_status}", file=sys.stderr)
        self.remove(data)
        return load, rtt

    # -------------------------------------------------------------------------------- Restate

    def restate_row(self, tag, flow, concurrency, flush):
        a = self.args
        base = os.path.join(self.work, tag)
        node_port, ingress_port, admin_port, service_port = (free_port() for _ in range(4))
        env = dict(os.environ,
                   RESTATE_INGRESS__BIND_ADDRESS=f"127.0.0.1:{ingress_port}",
                   RESTATE_ADMIN__BIND_ADDRESS=f"127.0.0.1:{admin_port}",
                   RESTATE_DISABLE_TELEMETRY="true",  # no usage reports (loopback only)
                   RESTATE_LOG_DISABLE_ANSI_CODES="true")
        server = self.start(f"{tag}-server", [*self.flush_prefix(flush), self.restate_bin, "--no-logo", "--listen-mode", "tcp",
                                              "--bind-address", f"127.0.0.1:{node_port}",
                                              "--base-dir", base, "--node-name", "bench"], env=env)
        admin = f"http://127.0.0.1:{admin_port}"
        ingress = f"http://127.0.0.1:{ingress_port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{admin}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except (OSError, urllib.error.URLError):
                pass
            if time.monotonic() > deadline or server.p.poll() is not None:
                die(f"{tag}: restate-server did not answer on {admin}/health; last lines:\n"
                    + server.tail())
            time.sleep(0.1)
        server_pid = self.server_pid(tag, flush, server)
        # The SDK logs two INFO lines per invocation by default; WARN keeps the service as
        # quiet as the dex Worker (which logs nothing per task).
        service = self.start(f"{tag}-service",
                             [self.node, os.path.join(HERE, "restate", "service.mjs"),
                              "--port", service_port],
                             env=dict(os.environ, RESTATE_LOGGING="WARN"))
        service.wait_for("restate-service listening", 30)
        body = json.dumps({"uri": f"http://127.0.0.1:{service_port}"}).encode()
        req = urllib.request.Request(f"{admin}/deployments", data=body, method="POST",
                                     headers={"content-type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                json.load(r)
        except urllib.error.HTTPError as e:
            die(f"{tag}: registering the deployment: HTTP {e.code} {e.read()[:500]!r}")
        target = ["--system", "restate", "--url", f"{ingress}/bench/{FLOWS[flow][1]}"]
        self.driver("probe", *target, "--timeout", 60, timeout=120)
        rtt = self.driver("rtt", "--http", f"{ingress}/restate/health", "--seconds", a.rtt_seconds,
                          timeout=60)
        perfs = self.profile_start(tag, server_pid)
        load = self.driver("load", *target, "--concurrency", concurrency, "--warmup", a.warmup,
                           "--seconds", a.seconds,
                           "--pids", f"server={server_pid},worker={service.p.pid}",
                           timeout=a.warmup + a.seconds + 180)
        self.profile_end(tag, perfs)
        service.stop(timeout=30)
        s_status = server.stop(timeout=60)
        self.procs = []
        if s_status != 0:
            print(f"peers_bench: note: {tag}: restate-server exited {s_status}", file=sys.stderr)
        self.remove(base)
        return load, rtt


# ------------------------------------------------------------------------------------ output

COLUMNS = [
    # (header, unit, key, format)
    ("system", "", "system", "{}"), ("worker", "", "worker_name", "{}"),
    ("durability", "", "durability", "{}"), ("flow", "", "flow", "{}"), ("flush", "", "flush", "{}"), ("conc", "", "concurrency", "{}"),
    ("flows/s", "", "per_second", "{:.0f}"), ("p50", "ms", "p50_ms", "{:.2f}"),
    ("p99", "ms", "p99_ms", "{:.2f}"), ("srv CPU", "s", "server_cpu_s", "{:.2f}"),
    ("wkr CPU", "s", "worker_cpu_s", "{:.2f}"), ("drv CPU", "s", "driver_cpu_s", "{:.2f}"),
    ("srv CPU/flow", "ms", "server_cpu_ms_per_flow", "{:.3f}"),
    ("flows/s", "dex/R", "ratio_per_second", "{:.2f}x"), ("p50", "dex/R", "ratio_p50", "{:.2f}x"),
    ("fsync", "ms", "fsync_p50_ms", "{:.2f}"), ("p50/fsync", "", "p50_per_fsync", "{:.1f}x"), ("p50/rtt", "", "p50_per_rtt", "{:.1f}x"),
]


def fmt(col, row):
    v = row.get(col[2])
    if v is None or v == "" or (isinstance(v, float) and v != v):
        return "-"
    return col[3].format(v)


def print_table(rows, out=sys.stdout):
    widths = [max(len(c[0]), len(c[1]), *(len(fmt(c, r)) for r in rows)) for c in COLUMNS]
    left = {"system", "worker_name", "durability", "flow", "flush"}
    def line(cells):
        return "  ".join(c.ljust(w) if COLUMNS[i][2] in left else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    print(line([c[0] for c in COLUMNS]), file=out)
    print(line([c[1] for c in COLUMNS]), file=out)
    for r in rows:
        print(line([fmt(c, r) for c in COLUMNS]), file=out)


def markdown_table(rows):
    head = "| " + " | ".join(f"{c[0]} {c[1]}".strip() for c in COLUMNS) + " |"
    sep = "| " + " | ".join("---" if c[2] in {"system", "worker_name", "durability", "flow", "flush"}
                            else "---:" for c in COLUMNS) + " |"
    body = ["| " + " | ".join(fmt(c, r) for c in COLUMNS) + " |" for r in rows]
    return "\n".join([head, sep, *body])


def write_png(rows, setups, flows, concs, path, title, flushes=("fast",)):
    gnuplot = shutil.which("gnuplot")
    if not gnuplot:
        print("peers_bench: gnuplot is not installed: no PNG (scripts/install-bench-peers)",
              file=sys.stderr)
        return False
    data = path[:-4] + ".dat"
    labels = {s: f"{SETUPS[s][0]} {WORKER_NAMES[SETUPS[s][1]]} {SETUPS[s][2]}".replace("default", "defaults")
              for s in setups}
    by = {(r["setup"], r["flow"], r["concurrency"], r.get("flush") or "fast"): r for r in rows}
    workloads = [(fl, c, fs) for fl in flows for c in concs for fs in flushes]
    with open(data, "w") as f:
        for metric in ("per_second", "p50_ms", "p99_ms"):
            f.write("workload " + " ".join(f'"{labels[s]}"' for s in setups) + "\n")
            for fl, c, fs in workloads:
                vals = [by.get((s, fl, c, fs), {}).get(metric) for s in setups]
                label = f"{fl} x{c}" + ("" if fs == "fast" else f" {fs} flush")
                f.write(f'"{label}" ' + " ".join("NaN" if v is None else f"{v:.4f}" for v in vals) + "\n")
            f.write("\n\n")
    n = len(setups)
    plots = []
    for index, (ylabel, name) in enumerate([("flows per second (log)", "throughput"),
                                            ("p50 latency, ms (log)", "p50 latency"),
                                            ("p99 latency, ms (log)", "p99 latency")]):
        # columnheader in every panel (it also skips each block's header line); one key.
        series = ", ".join(f"'{data}' index {index} using {i + 2}:xtic(1) title columnheader({i + 2})"
                           if i == 0 else f"'' index {index} using {i + 2} title columnheader({i + 2})"
                           for i in range(n))
        plots.append(("" if index == 0 else "unset key\n")
                     + f"set title '{name}'\nset ylabel '{ylabel}'\nplot {series}\n")
    script = f"""set terminal pngcairo size 1500,1300 font ',10'
set output '{path}'
set multiplot layout 3,1 title "{title}" noenhanced
set rmargin at screen 0.78
set lmargin at screen 0.07
set xrange [-0.6:{len(workloads) - 0.4}]
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set logscale y
set grid ytics
set key at screen 0.99, screen 0.93 right top vertical noenhanced
set yrange [1:*]
{''.join(plots)}unset multiplot
"""
    script_path = path[:-4] + ".gp"
    with open(script_path, "w") as f:
        f.write(script)
    r = run([gnuplot, script_path], timeout=60)
    if r.returncode != 0:
        print(f"peers_bench: gnuplot failed: {r.stderr[-2000:]}", file=sys.stderr)
        return False
    return True


def replot(csv_path):
    with open(csv_path) as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        r["concurrency"] = int(r["concurrency"])
        for k in ("per_second", "p50_ms", "p99_ms"):
            r[k] = float(r[k])
    setups = [s for s in SETUPS if any(r["setup"] == s for r in rows)]
    flows = [f for f in FLOWS if any(r["flow"] == f for r in rows)]
    concs = sorted({r["concurrency"] for r in rows})
    flushes = [fs for fs in FLUSHES if any((r.get("flush") or "fast") == fs for r in rows)]
    png = csv_path[:-4] + ".png"
    stamp = os.path.basename(csv_path)[len("peers-"):-4]
    if write_png(rows, setups, flows, concs, png, f"dex vs Restate, {machine()}, {stamp}", flushes):
        print(f"wrote {png}")


def machine():
    model = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} CPUs ({model}), {mem:.0f} GiB RAM, Linux {platform.release()}"


def filesystem(path):
    r = run(["findmnt", "-no", "FSTYPE,SOURCE", "-T", path])
    return r.stdout.strip() or "?"


def versions(bench, bin_dir):
    # The revision the server binary was built from (its --version), not the checkout's: a run
    # may measure binaries of another revision (--bin-dir), e.g. a before/after comparison.
    built = run([os.path.join(bin_dir, "dex-server-zd"), "--version"]).stdout.strip()
    commit = built.split("(git ")[-1].rstrip(")") if "(git " in built else "?"
    restate = run([bench.restate_bin, "--version"]).stdout.strip()
    node = run([bench.node, "--version"]).stdout.strip()
    sdk = "?"
    try:
        with open(os.path.join(bench.deps, "node_modules", "@restatedev", "restate-sdk", "package.json")) as f:
            sdk = json.load(f)["version"]
    except OSError:
        pass
    return {"dex": commit, "restate": restate,
            "restate_sdk": sdk, "node": node}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=20, help="measured period per row (default 20)")
    ap.add_argument("--warmup", type=float, default=3, help="discarded warm-up per row (default 3)")
    ap.add_argument("--concurrency", default="1,64", help="closed-loop clients per row (default 1,64)")
    ap.add_argument("--flows", default="one,one-call,three",
                    help="flows: one,one-call,three,indexed,attr,synced (one-call: one, each flow "
                    "started and waited for in one StartFlow call, dex only; indexed, attr, synced: "
                    "dex with the C++ Worker only; synced starts a PostgreSQL); default "
                    "one,one-call,three")
    ap.add_argument("--setups", default=",".join(SETUPS), help=f"default {','.join(SETUPS)}")
    ap.add_argument("--worker-concurrency", type=int, default=128,
                    help="tasks a dex Worker runs at once (default 128, as dex_flows_bench)")
    ap.add_argument("--flush", default="fast",
                    help="disk states, each a row of every workload: fast (the disk as it is), slow "
                    "(the server in a cgroup that limits its writes to --slow-flush-iops: "
                    "writes past that rate wait); default fast")
    ap.add_argument("--slow-flush-iops", type=int, default=1000,
                    help="write requests/s of the slow rows' disk (default 1000)")
    ap.add_argument("--floor-probe", nargs=2, metavar=("DIR", "SECONDS"), help=argparse.SUPPRESS)
    ap.add_argument("--rtt-seconds", type=float, default=1)
    ap.add_argument("--floor-seconds", type=float, default=2,
                    help="fsync floors at the start and the end, each kind (default 2)")
    ap.add_argument("--row-floor-seconds", type=float, default=0.5,
                    help="fsync floors before each row, each kind (default 0.5)")
    ap.add_argument("--bin-dir", default=os.path.join(REPO, "build-bench", "bin"))
    ap.add_argument("--sdk", default=os.path.join(REPO, "sdk", "typescript"),
                    help="the built TypeScript SDK (its dist/)")
    ap.add_argument("--out", default=os.path.join(REPO, "bench", "results"),
                    help="folder for the CSV, PNG and table (default bench/results)")
    ap.add_argument("--dir", default=os.environ.get("TMPDIR", "/tmp"), help="scratch (data) folder")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder and logs")
    ap.add_argument("--perf", metavar="DIR", help="profile each row's server with perf record -g "
                    "and perf trace -s into DIR (the figures then include perf's own cost)")
    ap.add_argument("--replot", metavar="CSV", help="only draw the PNG of an earlier run's CSV")
    ap.add_argument("--smoke", action="store_true",
                    help="a seconds-long run (scripts/bench-peers --smoke, part of scripts/test): "
                    f"defaults {' '.join(f'--{k.replace(chr(95), chr(45))} {v}' for k, v in SMOKE.items())}; "
                    "fails unless every row completed flows and the CSV holds every row")
    a = ap.parse_args()
    if a.smoke:  # its own defaults; options given still win
        ap.set_defaults(**SMOKE)
        a = ap.parse_args()
    if a.replot:
        replot(a.replot)
        return
    if a.floor_probe:  # the child of floor_through: the floor inside the slow rows' cgroup
        # The cgroup's throttle lets the first writes of a new process through at full speed.
        append, create = fsync_floor(a.floor_probe[0], float(a.floor_probe[1]), settle=1.0)
        print(json.dumps({"append": append, "create": create}))
        return
    flushes = [fs for fs in a.flush.split(",") if fs]
    for fs in flushes:
        if fs not in FLUSHES:
            die(f"unknown --flush {fs!r} (known: {', '.join(FLUSHES)})")
    if a.slow_flush_iops <= 0:
        die(f"--slow-flush-iops must be positive, got {a.slow_flush_iops}")
    concs = [int(c) for c in a.concurrency.split(",") if c]
    flows = [f for f in a.flows.split(",") if f]
    setups = [s for s in a.setups.split(",") if s]
    for s in setups:
        if s not in SETUPS:
            die(f"unknown setup {s!r} (known: {', '.join(SETUPS)})")
    for f in flows:
        if f not in FLOWS:
            die(f"unknown flow {f!r} (known: {', '.join(FLOWS)})")

    b = Bench(a)
    binaries = ([b.bin("dex-server-zd")] if any(SETUPS[s][0] == "dex" for s in setups) else []) \
        + ([b.bin("dex-peers-worker")] if any(SETUPS[s][1] == "cpp" for s in setups) else []) \
        + ([b.bin("dexcli")] if "synced" in flows else [])
    for needed in binaries:
        if not os.path.exists(needed):
            die(f"{needed} is missing (build it: scripts/bench-peers does)")
    if "restate" in setups and not os.path.exists(b.restate_bin):
        die(f"{b.restate_bin} is missing (scripts/install-bench-peers)")
    if any(SETUPS[s][1] == "ts" for s in setups) and not os.path.exists(
            os.path.join(a.sdk, "dist", "index.js")):
        die(f"the TypeScript SDK is not built in {a.sdk}/dist (cd sdk/typescript && npm ci && npm run build)")
    os.makedirs(a.out, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    ver = versions(b, a.bin_dir)
    started = time.monotonic()
    header = (f"peers_bench {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}: "
              f"{a.seconds:g} s per row after {a.warmup:g} s warm-up; {machine()}; "
              f"data on {filesystem(b.work)}\n"
              f"versions: dex {ver['dex']} ({os.path.basename(os.path.dirname(os.path.abspath(a.bin_dir)))}), "
              f"{ver['restate']}, @restatedev/restate-sdk {ver['restate_sdk']}, node {ver['node']}; "
              f"dex Workers run {a.worker_concurrency} tasks at once")
    print(header, flush=True)

    rows = []
    floors = {"append": [], "create": []}
    try:
        ap1, cr1 = fsync_floor(b.work, a.floor_seconds)
        floors["append"] += ap1
        floors["create"] += cr1
        print(f"floor (start): 4 KiB append+fdatasync p50 {pct(ap1, .5):.3f} ms; "
              f"new 4 KiB file+fsync+dir fsync p50 {pct(cr1, .5):.3f} ms", flush=True)
        for fl, c, fs in ((fl, c, fs) for fl in flows for c in concs for fs in flushes):
            for s in setups:
                system, worker, durability = SETUPS[s]
                if not runs_row(fl, system, worker):
                    continue
                tag = f"{s}-{fl}-x{c}" + ("" if fs == "fast" else f"-{fs}")
                load1 = os.getloadavg()[0]
                # This row's own floor: the disk's flush time moves tenfold within minutes
                # (on a slow row, through the shim its server has).
                row_append, row_create = b.row_floor(fs, a.row_floor_seconds)
                if fs == "fast":  # the run's floor line is the disk's own; slow rows print theirs
                    floors["append"] += row_append
                    floors["create"] += row_create
                t = time.monotonic()
                throttled = b.slow_cgroup.writes() if fs != "fast" else 0
                if system == "dex":
                    load, rtt = b.dex_row(tag, worker, durability, fl, c, fs)
                else:
                    load, rtt = b.restate_row(tag, fl, c, fs)
                if not load["flows"]:
                    die(f"{tag}: no flow started and ended in the measured {load['seconds']:g} s "
                        f"({load['errors']} failed"
                        + (f": {'; '.join(load['firstErrors'])}" if load["firstErrors"] else "")
                        + f"; logs in {b.logs})")
                if fs != "fast" and b.slow_cgroup.writes() <= throttled:
                    die(f"{tag}: the slow-flush cgroup counted no write of the server: the row "
                        "was not slowed")
                lat = load["latencyMs"]
                row = {"setup": s, "system": system, "worker": worker,
                       "worker_name": WORKER_NAMES[worker], "durability": durability,
                       "flow": fl, "concurrency": c, "flush": fs, "seconds": load["seconds"],
                       "flows": load["flows"], "per_second": load["perSecond"],
                       "p50_ms": lat["p50"], "p90_ms": lat["p90"], "p99_ms": lat["p99"],
                       "max_ms": lat["max"], "server_cpu_s": load["cpuSeconds"]["server"],
                       "worker_cpu_s": load["cpuSeconds"]["worker"],
                       "driver_cpu_s": load["cpuSeconds"]["driver"],
                       "server_cpu_ms_per_flow": (load["cpuSeconds"]["server"] * 1e3 / load["flows"]
                                                  if load["flows"] else None),
                       "errors": load["errors"], "first_error": "; ".join(load["firstErrors"]),
                       "db_cpu_s": load.get("dbCpuSeconds"),
                       "db_cpu_ms_per_flow": (load["dbCpuSeconds"] * 1e3 / load["flows"]
                                              if load.get("dbCpuSeconds") is not None
                                              and load["flows"] else None),
                       "sync_idle_after_s": load.get("syncIdleAfterS"),
                       "table_rows": load.get("tableRows"),
                       "fsync_p50_ms": pct(row_append, .5),
                       "create_fsync_p50_ms": pct(row_create, .5),
                       "rtt_kind": rtt["what"], "rtt_p50_ms": rtt["latencyMs"]["p50"],
                       "loadavg_1m_before": load1, "loadavg_1m_after": os.getloadavg()[0],
                       "row_wall_s": time.monotonic() - t}
                rows.append(row)
                print(f"  {tag:<24} {row['per_second']:8.0f} flows/s  p50 {row['p50_ms']:8.2f} ms  "
                      f"p99 {row['p99_ms']:8.2f} ms  srv {row['server_cpu_s']:5.2f} s  "
                      f"wkr {row['worker_cpu_s']:5.2f} s  drv {row['driver_cpu_s']:5.2f} s  "
                      f"fsync {row['fsync_p50_ms']:.3f} ms  rtt {row['rtt_p50_ms']:.3f} ms  load {load1:.1f}"
                      + (f"  ERRORS {row['errors']}: {row['first_error']}" if row["errors"] else ""),
                      flush=True)
                if row["table_rows"] is not None:
                    print(f"  {'':<24} synced: srv CPU/flow {row['server_cpu_ms_per_flow']:.3f} ms; "
                          f"PostgreSQL CPU {row['db_cpu_s']:.2f} s ({row['db_cpu_ms_per_flow']:.3f} "
                          f"ms/flow); sync idle {row['sync_idle_after_s']:.2f} s after the load; "
                          f"table rows {row['table_rows']}", flush=True)
        ap2, cr2 = fsync_floor(b.work, a.floor_seconds)
        floors["append"] += ap2
        floors["create"] += cr2
        print(f"floor (end):   4 KiB append+fdatasync p50 {pct(ap2, .5):.3f} ms; "
              f"new 4 KiB file+fsync+dir fsync p50 {pct(cr2, .5):.3f} ms", flush=True)
    except BaseException:
        b.stop_all()
        if b.slow_cgroup is not None:
            b.slow_cgroup.remove()
        if b.pg is not None:
            b.pg.remove()
        if not a.keep:
            b.remove_all()  # the data directories, not the logs
        print(f"peers_bench: logs kept in {b.logs}", file=sys.stderr)
        raise

    fsync_p50 = pct(floors["append"], .5)
    create_p50 = pct(floors["create"], .5)
    grpc = [r["rtt_p50_ms"] for r in rows if r["system"] == "dex"]
    http = [r["rtt_p50_ms"] for r in rows if r["system"] == "restate"]
    grpc_p50 = statistics.median(grpc) if grpc else None
    http_p50 = statistics.median(http) if http else None
    restate = {(r["flow"], r["concurrency"], r["flush"]): r for r in rows if r["system"] == "restate"}
    row_fsync = [r["fsync_p50_ms"] for r in rows if r["flush"] == "fast"] or [fsync_p50]
    slow_fsync = [r["fsync_p50_ms"] for r in rows if r["flush"] == "slow"]
    for r in rows:
        r["grpc_rtt_p50_ms"], r["http_rtt_p50_ms"] = grpc_p50, http_p50
        r["p50_per_fsync"] = r["p50_ms"] / r["fsync_p50_ms"]
        r["p50_per_rtt"] = r["p50_ms"] / grpc_p50 if grpc_p50 else None
        peer = restate.get((ONE_CALL.get(r["flow"], r["flow"]), r["concurrency"], r["flush"]))
        if r["system"] == "dex" and peer and peer["per_second"]:
            r["ratio_per_second"] = r["per_second"] / peer["per_second"]
            r["ratio_p50"] = r["p50_ms"] / peer["p50_ms"]
    # The table: grouped by workload, dex rows first.
    order = {s: i for i, s in enumerate(SETUPS)}
    rows.sort(key=lambda r: (flows.index(r["flow"]), concs.index(r["concurrency"]),
                             flushes.index(r["flush"]), order[r["setup"]]))

    floor_line = (f"floors (all samples; p50/fsync uses each row's own): 4 KiB append+fdatasync p50 "
                  f"{fsync_p50:.3f} ms (p99 {pct(floors['append'], .99):.3f}; rows' p50 "
                  f"{min(row_fsync):.3f}-{max(row_fsync):.3f}); "
                  f"new 4 KiB file+fsync+dir fsync p50 {create_p50:.3f} ms (p99 {pct(floors['create'], .99):.3f}); "
                  + (f"slow rows ({a.slow_flush_iops} write requests/s): append+fdatasync p50 "
                     f"{min(slow_fsync):.3f}-{max(slow_fsync):.3f} ms; " if slow_fsync else "")
                  + (f"gRPC round trip (grpc-js health Check) p50 {grpc_p50:.3f} ms; " if grpc_p50 else "")
                  + (f"HTTP/1.1 round trip (Restate ingress /restate/health) p50 {http_p50:.3f} ms" if http_p50 else ""))
    print()
    print(floor_line)
    print()
    print_table(rows)
    print()
    loads = [r["loadavg_1m_before"] for r in rows]
    if b.slow_cgroup is not None:
        b.slow_cgroup.remove()
    if b.pg is not None:
        b.pg.remove()
    removed = 0.0 if a.keep else b.remove_all()
    note = (f"ran {(time.monotonic() - started) / 60:.1f} min; load average (1 min) at the rows' "
            f"starts {min(loads):.1f}-{max(loads):.1f}"
            + ("" if a.keep else f"; data directories removed at the end in {removed:.1f} s"))
    print(note)

    csv_path = os.path.join(a.out, f"peers-{stamp}.csv")
    keys = list(rows[0].keys())
    for r in rows:
        keys += [k for k in r if k not in keys]
    with open(csv_path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    md_path = os.path.join(a.out, f"peers-{stamp}.md")
    with open(md_path, "w") as f:
        f.write(header + "\n\n" + floor_line + "\n\n" + markdown_table(rows) + "\n\n" + note + "\n")
    png_path = os.path.join(a.out, f"peers-{stamp}.png")
    title = f"dex vs Restate, {machine()}, {stamp}"
    png = write_png(rows, setups, flows, concs, png_path, title.replace("'", ""), flushes)
    print(f"wrote {csv_path}, {md_path}" + (f", {png_path}" if png else ""))
    if a.keep:
        print(f"kept {b.work}")
    else:
        shutil.rmtree(b.work, ignore_errors=True)
    bad = [r for r in rows if r["errors"]]
    if bad:
        die(f"{len(bad)} row(s) had failed flows: " + ", ".join(f"{r['setup']}-{r['flow']}-x{r['concurrency']}"
                                                              for r in bad))
    if a.smoke:
        smoke_check(csv_path, setups, flows, concs, flushes)


def smoke_check(csv_path, setups, flows, concs, flushes):
    """What --smoke asserts, read back from the CSV the run wrote: a row for every setup, flow
    and concurrency asked for, each with flows that completed in its measured period."""
    with open(csv_path) as f:
        got = {(r["setup"], r["flow"], r["concurrency"], r["flush"]): r for r in csv.DictReader(f)}
    seen = []
    for fl, c, fs in ((fl, c, fs) for fl in flows for c in concs for fs in flushes):
        for s in setups:
            if not runs_row(fl, *SETUPS[s][:2]):
                continue
            tag = f"{s}-{fl}-x{c}" + ("" if fs == "fast" else f"-{fs}")
            r = got.get((s, fl, str(c), fs))
            if r is None:
                die(f"smoke: {csv_path} has no row {tag}")
            if int(r["flows"]) <= 0:
                die(f"smoke: {csv_path}: row {tag} completed no flow")
            seen.append(f"{tag} {int(r['flows'])} flows ({float(r['per_second']):.0f}/s, "
                        f"p50 {float(r['p50_ms']):.2f} ms)")
    print(f"peers_bench smoke: OK: {len(seen)} rows: " + "; ".join(seen), flush=True)


if __name__ == "__main__":
    main()
