#!/usr/bin/env python3
"""Scale benchmark (issue 30): takeover open time by log length, a hot standby's idle requests,
RSS with many waiting Flows, local-store bytes per closed three-Step run (bench/README.md).

Real `dex-server-zd serve` processes (one node per part, filesystem object store in
processCrashSafe by default, or `--store minio`) and a `dex-flow-examples worker`, all copied
from --bin-dir. Parts (--parts, default all):

  takeover  For each --slots N: A becomes active; `dex-bulk-start` starts E2EIdle runs (each
            waits on Channel "wake", one log record) one at a time until A's log has N slots;
            B starts as a hot standby and follows (bootstrap time printed); C starts as a cold
            standby with an empty local store. SIGTERM A: B takes over (hot). SIGTERM B: C
            takes over (cold: restores the newest snapshot if any, replays the rest). Open time
            is "acquired the lease" -> the ready line (after the lease wait, which a released
            lease does not have), from the processes' own log stamps.
  idle      A active with nothing to do, B a hot standby that follows; B's object-store
            requests (its own dexzd_object_store_requests_total, by operation) over
            --idle-seconds, per hour and per heldLeasePollInterval.
  rss       A active; --waiting E2EIdle runs started (64 callers); A's VmRSS and VmHWM.
  bytes     A active; --closed-runs ThreeSteps runs (three Execute-only Steps) run to
            completion; A stopped; its local store compacted (dex-store-size): SST bytes per run.

--smoke runs every part in seconds (the suite's bench_smoke_scale). Python 3 standard library
(plus boto3 for --store minio).
"""
import argparse
import glob
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from failover_bench import Proc, die, free_port, stamp_of  # noqa: E402

READY = re.compile(r"dex-server-zd serve ready: node \S+ epoch (\d+) .*log from slot (\d+)\)")
TOOK_OVER = re.compile(r"took over as the active process: (\d+) log slots replayed after following, "
                       r"engine open (\d+) ms, lease to serving (\d+) ms")
PROGRAMS = ("dex-server-zd", "dex-flow-examples", "dex-bulk-start", "dex-store-size")


def metrics_of(port):
    import urllib.request
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            values[key] = float(value)
    return values


def requests_by_op(metrics):
    out = {}
    for k, v in metrics.items():
        if k.startswith("dexzd_object_store_requests_total{"):
            op = re.search(r'operation="([a-z_]+)"', k).group(1)
            out[op] = out.get(op, 0) + v
    return out


class Server:
    def __init__(self, bench, node, name, mode, local=None):
        self.bench, self.node, self.name, self.mode = bench, node, name, mode
        self.api_port, self.metrics_port = free_port(), free_port()
        self.address = f"127.0.0.1:{self.api_port}"
        self.local = local or os.path.join(bench.work, f"{node}-{name}-local")
        self.proc = None

    def start(self):
        b = self.bench
        config = os.path.join(b.work, f"{self.node}-{self.name}.yaml")
        with open(config, "w") as f:
            f.write(f"nodeId: {self.node}\napi:\n  listen: {self.address}\n"
                    f"metrics:\n  listen: 127.0.0.1:{self.metrics_port}\n"
                    f"{b.store_yaml(self.node)}localStore:\n  path: {self.local}\n"
                    f"lease:\n  duration: {b.args.lease}s\nstandby:\n  mode: {self.mode}\n")
            if b.args.every_records:
                f.write(f"snapshots:\n  everyRecords: {b.args.every_records}\n")
        self.proc = Proc(f"{self.node}-{self.name}", [b.bin("dex-server-zd"), "serve", "--config",
                                                      config], env=b.env, log_dir=b.logs)
        b.procs.append(self.proc)
        self.proc.wait_for("API on", 60)
        return self

    def metrics(self):
        return metrics_of(self.metrics_port)

    def log_slots(self):
        """The log's length by the active process: its EpochStart slot + 1 + batches it wrote."""
        epoch_start = int(READY.search(self.proc.wait_for(READY, 1)[1]).group(2))
        return epoch_start + 1 + int(self.metrics().get("dexzd_log_batches_total", 0))

    def wait_following(self, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if self.metrics().get('dexzd_hot_standby_state{state="following"}') == 1:
                    return
            except OSError:
                pass
            if self.proc.p.poll() is not None:
                break
            time.sleep(0.05)
        die(f"{self.proc.name} never followed the log within {timeout}s:\n" + self.proc.tail())

    def pid(self):
        return self.proc.p.pid


def rss_kib(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line.split(":")[0]] = int(line.split()[1])
    return out


def memtable_flushes(local):
    """RocksDB's flushes of the local store's memtable, from its LOG: (count, MiB of memtable
    memory each flush freed)."""
    sizes = []
    for path in glob.glob(os.path.join(local, "**", "LOG*"), recursive=True):
        with open(path, errors="replace") as f:
            for line in f:
                m = re.search(r'"event": "flush_started".*?"memory_usage": (\d+)', line)
                if m:
                    sizes.append(int(m.group(1)) / 2**20)
    return sizes


class Bench:
    def __init__(self, args):
        self.args = args
        self.work = tempfile.mkdtemp(prefix="dex-scale-bench-", dir=args.dir)
        self.logs = os.path.join(self.work, "logs")
        os.makedirs(self.logs)
        self.bindir = os.path.join(self.work, "bin")
        os.makedirs(self.bindir)
        for name in PROGRAMS:  # private copies: others may relink build/bin meanwhile
            src = os.path.join(args.bin_dir, name)
            if not os.path.exists(src):
                die(f"{src} is missing: build it first")
            shutil.copy2(src, os.path.join(self.bindir, name))
        self.procs = []
        self.env = None
        self.minio = None
        if args.store == "minio":
            from failover_bench import ACCESS, SECRET, MinIO
            cached = os.path.join(os.environ.get("DEX_CACHE_DIR", os.path.expanduser("~/.cache/dex")),
                                  "bin", "minio")  # where scripts/install-minio puts it
            binary = (args.minio or os.environ.get("DEX_MINIO_BIN") or shutil.which("minio")
                      or (cached if os.path.exists(cached) else None))
            if not binary:
                die("no MinIO binary (--minio, $DEX_MINIO_BIN; scripts/install-minio)")
            self.minio = MinIO(binary, self.work, self.logs)
            self.env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS, AWS_SECRET_ACCESS_KEY=SECRET)

    def bin(self, name):
        return os.path.join(self.bindir, name)

    def store_yaml(self, node):
        if self.minio:
            return (f"objectStore:\n  type: s3\n  bucket: dex\n  prefix: {node}\n"
                    f"  endpoint: {self.minio.endpoint}\n")
        return (f"objectStore:\n  type: filesystem\n  path: {os.path.join(self.work, node + '-objects')}\n"
                f"  durability: processCrashSafe\n")

    def log(self, message):
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    def worker(self, servers):
        w = Proc(f"worker-{len(self.procs)}", [self.bin("dex-flow-examples"), "worker", "--server",
                                               ",".join(servers)], log_dir=self.logs)
        self.procs.append(w)
        return w

    def bulk(self, server, flow_type, runs, concurrency, prefix, first=0):
        import subprocess
        r = subprocess.run([self.bin("dex-bulk-start"), "--server", server, "--flow-type", flow_type,
                            "--runs", str(runs), "--first", str(first), "--concurrency",
                            str(concurrency), "--prefix", prefix, "--start-delay-ms", "0",
                            "--no-attributes", "--wait-s", "60"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            die(f"dex-bulk-start {flow_type}: {r.stderr.strip()[-2000:]}")

    def cleanup(self):
        for p in self.procs:
            p.stop(5)
        if self.minio is not None:
            self.minio.proc.stop()
        if self.args.keep:
            print(f"kept {self.work}", file=sys.stderr)
        else:
            shutil.rmtree(self.work, ignore_errors=True)

    # ------------------------------------------------------------------ takeover

    def open_ms(self, server, after):
        """(acquired -> ready ms, ready line, local store line) of `server` after line `after`."""
        ready_at, ready = server.proc.wait_for(READY, 600, after)
        acq_at, acq = server.proc.wait_for("acquired the lease", 5, after)
        _, store = server.proc.wait_for(f"local store {server.local}:", 5, after)
        return (ready_at - stamp_of(acq, acq_at)) * 1000, ready, store.split(": ", 2)[-1]

    def takeover(self, slots):
        node = f"tk{slots}"
        A, B = Server(self, node, "a", "cold"), Server(self, node, "b", "hot")
        C = Server(self, node, "c", "cold")
        A.start()
        A.proc.wait_for(READY, 60)
        w = self.worker([A.address, B.address, C.address])
        t0 = time.monotonic()
        started = 0
        # One caller: one start per log batch, so the log grows by one slot per run.
        while A.log_slots() < slots:
            todo = max(1, min(slots - A.log_slots(), 20000))
            self.bulk(A.address, "E2EIdle", todo, 1, "idle-", first=started)
            started += todo
        built_s = time.monotonic() - t0
        slots_built = A.log_slots()
        self.log(f"takeover {slots}: log of {slots_built} slots ({started} waiting runs) in {built_s:.1f} s")
        B.start()
        t0 = time.monotonic()
        B.wait_following(1200)
        follow_s = time.monotonic() - t0
        # Hot: A releases, B takes over.
        mark_b = B.proc.mark()
        A.proc.stop(60)
        hot_ms, ready, _ = self.open_ms(B, mark_b)
        took = TOOK_OVER.search(B.proc.wait_for(TOOK_OVER, 5, mark_b)[1])
        hot_slot = int(READY.search(ready).group(2))
        # Only now: a cold standby takes a released lease at once, before a hot one's jitter.
        C.start()
        C.proc.wait_for("waiting for it to expire", 60)
        # Cold: B releases, C (empty local store) takes over.
        mark_c = C.proc.mark()
        B.proc.stop(60)
        cold_ms, ready, how = self.open_ms(C, mark_c)
        cold_slot = int(READY.search(ready).group(2))
        C.proc.stop(60)
        w.stop(5)
        return [(slots, "hot", hot_slot, int(took.group(1)), hot_ms, f"followed after {follow_s:.1f} s"),
                (slots, "cold", cold_slot, None, cold_ms, how)]

    # ------------------------------------------------------------------ idle

    def idle(self, seconds):
        node = "idle"
        A, B = Server(self, node, "a", "cold"), Server(self, node, "b", "hot")
        A.start()
        A.proc.wait_for(READY, 60)
        B.start()
        B.wait_following(120)
        # Past the bootstrap and the lease reads of the holder's unknown phase (docs/lease.md
        # §3a: dense reads for up to a third of the lease plus one attempt's cut-off, once).
        lease = self.args.lease
        time.sleep(lease / 3 + min(max(lease / 6, 1), 5) + 1)
        b0, a0, t0 = requests_by_op(B.metrics()), A.metrics(), time.monotonic()
        time.sleep(seconds)
        b1, a1, elapsed = requests_by_op(B.metrics()), A.metrics(), time.monotonic() - t0
        batches = a1.get("dexzd_log_batches_total", 0) - a0.get("dexzd_log_batches_total", 0)
        polls = elapsed / 0.25
        rows = []
        for op in ("get", "list", "put", "delete"):
            n = b1.get(op, 0) - b0.get(op, 0)
            rows.append((op, int(n), n * 3600 / elapsed, n / polls))
        B.proc.stop(10)
        A.proc.stop(10)
        return elapsed, int(batches), rows

    # ------------------------------------------------------------------ rss

    def rss(self, waiting):
        node = "rss"
        A = Server(self, node, "a", "cold")
        A.start()
        A.proc.wait_for(READY, 60)
        w = self.worker([A.address])
        before = rss_kib(A.pid())
        # RSS through the starts (every 2 s): a curve that flattens is a bounded cache filling, a
        # straight line is memory per waiting run.
        curve, done = [], threading.Event()

        def sample():
            while not done.wait(2.0):  # bounded by the starts' length
                curve.append((round(time.monotonic() - t0, 1), rss_kib(A.pid())["VmRSS"]))

        t0 = time.monotonic()
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        self.bulk(A.address, "E2EIdle", waiting, 64, "w-")
        started_s = time.monotonic() - t0
        # A run waits on its Channel once the Worker has run its WaitFor: until then it is a
        # queued task (a backlog when the starts outpace one Worker), not a waiting run.
        self.wait_for_waits(A, waiting)
        waited_s = time.monotonic() - t0
        done.set()
        sampler.join()
        # At rest: past one of the server's 10 s heap trims (src/server/memory_trimmer.h), which
        # gives back what the drained backlog held (the smoke run only checks the part works).
        time.sleep(2 if self.args.smoke else 12)
        after = rss_kib(A.pid())
        slots = A.log_slots()
        w.stop(5)
        A.proc.stop(30)
        return before, after, started_s, waited_s, slots, curve, memtable_flushes(A.local)

    def wait_for_waits(self, server, runs):
        """Until `runs` WaitFor attempts of E2EIdle completed (the server's own counter)."""
        key = ('dexzd_step_attempts_total{flow_type="E2EIdle",kind="wait_for",outcome="completed",'
               'step_type="Idle"}')
        last, last_change, last_said = -1, time.monotonic(), 0.0
        while True:  # bounded: fails after 60 s without progress
            n = int(server.metrics().get(key, 0))
            if n >= runs:
                return
            if n != last:
                last, last_change = n, time.monotonic()
                if last_change - last_said >= 20:
                    last_said = last_change
                    self.log(f"{n}/{runs} runs waiting on their Channel")
            elif time.monotonic() - last_change > 60:
                die(f"the Worker ran {n} of {runs} WaitFors and made no progress for 60 s")
            time.sleep(2)

    # ------------------------------------------------------------------ bytes

    def bytes_per_run(self, runs):
        import subprocess
        node = "bytes"
        A = Server(self, node, "a", "cold")
        A.start()
        A.proc.wait_for(READY, 60)
        w = self.worker([A.address])
        t0 = time.monotonic()
        self.bulk(A.address, "ThreeSteps", runs, 64, "t-")
        key = 'dexzd_flows_total{outcome="completed"}'
        deadline = time.monotonic() + 600
        while A.metrics().get(key, 0) < runs:
            if time.monotonic() > deadline:
                die(f"bytes: {A.metrics().get(key, 0)} of {runs} ThreeSteps runs completed in 600 s")
            time.sleep(0.2)
        done_s = time.monotonic() - t0
        slots = A.log_slots()
        w.stop(5)
        A.proc.stop(30)
        r = subprocess.run([self.bin("dex-store-size"), "--path", A.local], capture_output=True,
                           text=True)
        if r.returncode != 0:
            die(f"dex-store-size: {r.stderr.strip()}")
        f = dict(zip(r.stdout.split()[::2], map(int, r.stdout.split()[1::2])))
        return f, done_s, slots


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin-dir", default=os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), "build", "bin"))
    p.add_argument("--parts", default="takeover,idle,rss,bytes")
    p.add_argument("--slots", default="1000,10000,100000")
    p.add_argument("--idle-seconds", type=float, default=120)
    p.add_argument("--waiting", type=int, default=100000)
    p.add_argument("--closed-runs", type=int, default=10000)
    p.add_argument("--every-records", type=int, default=0,
                   help="snapshots.everyRecords (default: the server's)")
    p.add_argument("--lease", type=int, default=30, help="lease.duration, s")
    p.add_argument("--store", choices=("filesystem", "minio"), default="filesystem")
    p.add_argument("--minio", default="")
    p.add_argument("--dir", default=None)
    p.add_argument("--keep", action="store_true")
    p.add_argument("--smoke", action="store_true", help="seconds-long: small figures of every part")
    a = p.parse_args()
    if a.smoke:
        a.slots, a.idle_seconds, a.waiting, a.closed_runs, a.lease = "300", 4, 2000, 200, 3
    parts = a.parts.split(",")
    bench = Bench(a)
    problems = []

    def check(ok, what):
        if not ok:
            problems.append(what)
    try:
        print(f"scale_bench: store {a.store}, lease {a.lease}s, heldLeasePollInterval 250ms, "
              f"snapshots.everyRecords {a.every_records or 'default'}, "
              f"{os.cpu_count()} CPUs", flush=True)
        if "takeover" in parts:
            rows = []
            for n in [int(s) for s in a.slots.split(",")]:
                rows += bench.takeover(n)
            print("Takeover: acquired the lease -> serving (after the lease wait; a released lease)")
            print(f"{'slots':>8} {'mode':>5} {'epoch start':>12} {'replayed':>9} {'open ms':>9}  local store")
            for n, mode, slot, replayed, ms, how in rows:
                rep = replayed if replayed is not None else "-"
                print(f"{n:>8} {mode:>5} {slot:>12} {rep:>9} {ms:>9.0f}  {how}")
                check(slot >= n and 0 < ms < 600000, f"takeover {n} {mode}: slot {slot}, {ms} ms")
        if "idle" in parts:
            elapsed, batches, rows = bench.idle(a.idle_seconds)
            print(f"Idle hot standby: its object-store requests over {elapsed:.0f} s "
                  f"(its own metrics; the active process wrote {batches} log batches meanwhile)")
            print(f"{'op':>7} {'count':>7} {'per hour':>9} {'per poll':>9}")
            for op, n, per_h, per_poll in rows:
                print(f"{op:>7} {n:>7} {per_h:>9.0f} {per_poll:>9.3f}")
            check(rows[0][1] > 0, "idle: the hot standby made no GET request")
        if "rss" in parts:
            before, after, started_s, waited_s, slots, curve, flushes = bench.rss(a.waiting)
            print(f"RSS of the active serve process with {a.waiting} E2EIdle runs waiting on a Channel "
                  f"(started in {started_s:.1f} s, all waiting after {waited_s:.1f} s, {slots} log slots)")
            print(f"{'waiting':>8} {'RSS MiB':>8} {'HWM MiB':>8} {'empty MiB':>9}")
            print(f"{a.waiting:>8} {after['VmRSS'] / 1024:>8.1f} {after['VmHWM'] / 1024:>8.1f} "
                  f"{before['VmRSS'] / 1024:>9.1f}")
            step = max(1, len(curve) // 12)
            print("RSS through the starts (s: MiB): " +
                  ", ".join(f"{t:.0f}: {kib / 1024:.0f}" for t, kib in curve[::step]))
            print(f"RocksDB memtable flushes meanwhile: {len(flushes)}" +
                  (f" (memtable at a flush: median {sorted(flushes)[len(flushes) // 2]:.0f} MiB, "
                   f"largest {max(flushes):.0f} MiB)" if flushes else ""))
            check(after["VmRSS"] > before["VmRSS"] > 1024, f"rss: {before} -> {after}")
        if "bytes" in parts:
            f, done_s, slots = bench.bytes_per_run(a.closed_runs)
            print(f"Local store per closed ThreeSteps run ({a.closed_runs} runs in {done_s:.1f} s, "
                  f"{slots} log slots; SST bytes after a full compaction)")
            print(f"{'runs':>8} {'SST before':>11} {'SST after':>10} {'B/run after':>12}")
            print(f"{a.closed_runs:>8} {f['sst_bytes_before']:>11} {f['sst_bytes_after']:>10} "
                  f"{f['sst_bytes_after'] / a.closed_runs:>12.0f}")
            check(0 < f["sst_bytes_after"], f"bytes: {f}")
        if problems:
            die("figures out of range: " + "; ".join(problems))
    finally:
        bench.cleanup()


if __name__ == "__main__":
    main()
