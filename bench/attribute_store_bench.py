#!/usr/bin/env python3
"""Attribute Store sync against PostgreSQL and MariaDB: throughput, lag, local disk (issue 27).

One `dex-server-zd dev` (strict durability) with two Attribute Stores, `pg` (a throwaway
PostgreSQL 15) and `my` (a throwaway MariaDB), each syncing into a table
bench_sync(id varchar(128) primary key, x bigint, s varchar(64)), and attribute_store_driver
(bench/attribute_store_driver.cc: a C++ SDK Worker hosting BenchSync, whose runs wait forever
and declare x and s synced) making the calls. Per database, one after the other:

  1. Lag at a steady load: --rate SetAttributes calls/s (open loop) writing x = the call's
     sequence number to --runs runs for --seconds. A trigger on the table records each row
     write with the database's clock (clock_timestamp() / SYSDATE(6), inside the sync's
     transaction, just before its commit); a write's lag is the first time its run's row held
     x >= its value, less the time the call was acknowledged (also: less the time it was sent).
     The server's own view, AdminService Describe's lagSeconds (the age of the oldest entry
     not yet in the table, as of the sync's last read; 0 when idle), is sampled every 50 ms.
  2. Local disk: --backlog SetAttributes calls of one 16-byte string Attribute (s) on runs of
     the store while its database is stopped (handle.stop()), after the same calls on runs
     without a store (control, at most 10,000): local/'s WAL and SST bytes before and after the
     first 10,000 of each, and the SyncEntries read from the local store (RocksDB, read only):
     key + value bytes per entry.
  3. Drain: the database is started again; Describe every 10 ms times the sync from its first
     commit to idle: rows/s and SyncEntries/s carried into the table (each entry here is one
     Attribute write), transactions and rows per transaction. The table is checked to hold
     every run's last write, and the local store to drop the entries (trimmed s: from idle
     until none is left).

The triggers are dropped before step 2, so the drain pays only for dex's own statements.
The config sets syncRetryPolicy.maximumInterval 1s (default 30s), so the first retry after the
database is back comes within a second (the "first commit" column).

    python3 bench/attribute_store_bench.py [--bin-dir build/bin] [--seconds 20] [--rate 200]
        [--runs 200] [--backlog 100000] [--threads 16] [--databases postgres,mariadb] [--smoke]

--smoke: a seconds-long run (CTest bench_smoke_attribute_store). A database that cannot start
fails the run (exit 1); nothing is skipped. Python 3 standard library; tests/support/sql_servers.py.
"""
import argparse
import bisect
import datetime
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "support"))
import sql_servers  # noqa: E402  (throwaway PostgreSQL and MariaDB)

DEX_READY = re.compile(r"dex-server-zd dev ready: .* listening on (\S+)")
STORES = {"postgres": "pg", "mariadb": "my"}
DAY = 86400
OUTAGE_RATE = 100  # synced writes/s of docs/attribute-store.md's extrapolation
DISK_WRITES = 10000  # writes over which local/'s growth is measured


def die(message):
    raise SystemExit(f"attribute_store_bench: FAILED: {message}")


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(p * len(v)))] if v else float("nan")


class Proc:
    """A child process whose output lines are collected (and logged) by a thread."""

    def __init__(self, name, argv, log_dir, env=None, stdin=False):
        self.name = name
        self.log = open(os.path.join(log_dir, f"{name}.log"), "a")
        self.p = subprocess.Popen([str(a) for a in argv], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT if not stdin else self.log,
                                  stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                                  text=True, env=env)
        self.lines = []
        self.cv = threading.Condition()
        self.eof = False
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.p.stdout:
            line = line.rstrip("\n")
            self.log.write(line + "\n")
            self.log.flush()
            with self.cv:
                self.lines.append(line)
                self.cv.notify_all()
        with self.cv:
            self.eof = True
            self.cv.notify_all()

    def wait_line(self, pattern, timeout, after=0):
        """(index, line) of the first line from `after` on that matches `pattern` (a regex)."""
        deadline = time.monotonic() + timeout
        i = after
        with self.cv:
            while True:
                while i < len(self.lines):
                    i += 1
                    if re.search(pattern, self.lines[i - 1]):
                        return i, self.lines[i - 1]
                left = deadline - time.monotonic()
                if self.eof or left <= 0:
                    die(f"{self.name}: no line matching {pattern!r} within {timeout:g} s "
                        f"(exit status {self.p.poll()}); last lines:\n" + self.tail())
                self.cv.wait(min(left, 0.2))

    def tail(self, n=25):
        with self.cv:
            return "\n".join("  " + line for line in self.lines[-n:])

    def stop(self, timeout=30):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.p.kill()
        return self.p.wait()


class Driver:
    """attribute_store_driver: one command per line, one JSON answer per line."""

    def __init__(self, binary, address, log_dir):
        self.proc = Proc("driver", [binary, "--server", address], log_dir, stdin=True)
        self.read_from, _ = self.proc.wait_line(r"^attribute_store_driver ready", 90)

    def send(self, *words):
        self.proc.p.stdin.write(" ".join(str(w) for w in words) + "\n")
        self.proc.p.stdin.flush()

    def answer(self, timeout):
        self.read_from, line = self.proc.wait_line(r"^\{", timeout, self.read_from)
        out = json.loads(line)
        if isinstance(out, dict) and "error" in out:
            die(f"driver: {out['error']}")
        return out

    def call(self, *words, timeout=600):
        self.send(*words)
        return self.answer(timeout)

    def stop(self):
        if self.proc.p.poll() is None:
            try:
                self.send("quit")
                self.proc.p.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                pass
        return self.proc.stop()


# ------------------------------------------------------------------------------ databases

TABLE_PG = [
    "CREATE TABLE bench_sync (id varchar(128) PRIMARY KEY, x bigint, s varchar(64))",
    "CREATE TABLE bench_sync_seen (id varchar(128) NOT NULL, x bigint, at_us bigint NOT NULL)",
    "CREATE FUNCTION bench_sync_seen() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "INSERT INTO bench_sync_seen VALUES (NEW.id, NEW.x, "
    "(extract(epoch from clock_timestamp()) * 1000000)::bigint); RETURN NULL; END $$",
    "CREATE TRIGGER bench_sync_seen AFTER INSERT OR UPDATE ON bench_sync "
    "FOR EACH ROW EXECUTE FUNCTION bench_sync_seen()",
]
DROP_PG = ["DROP TRIGGER bench_sync_seen ON bench_sync"]
SEEN_AT_MY = "CAST(UNIX_TIMESTAMP(SYSDATE(6)) * 1000000 AS SIGNED)"
TABLE_MY = [
    "CREATE TABLE bench_sync (id varchar(128) COLLATE utf8mb4_bin PRIMARY KEY, x bigint NULL, "
    "s varchar(64) NULL) "
    "ENGINE=InnoDB",
    "CREATE TABLE bench_sync_seen (id varchar(128) NOT NULL, x bigint, at_us bigint NOT NULL) "
    "ENGINE=InnoDB",
    "CREATE TRIGGER bench_sync_seen_i AFTER INSERT ON bench_sync FOR EACH ROW "
    f"INSERT INTO bench_sync_seen VALUES (NEW.id, NEW.x, {SEEN_AT_MY})",
    "CREATE TRIGGER bench_sync_seen_u AFTER UPDATE ON bench_sync FOR EACH ROW "
    f"INSERT INTO bench_sync_seen VALUES (NEW.id, NEW.x, {SEEN_AT_MY})",
]
DROP_MY = ["DROP TRIGGER bench_sync_seen_i", "DROP TRIGGER bench_sync_seen_u"]


class Database:
    def __init__(self, kind, tmpdir):
        self.kind = kind
        self.store = STORES[kind]
        try:
            self.handle = (sql_servers.start_postgres(tmpdir) if kind == "postgres"
                           else sql_servers.start_mariadb(tmpdir))
        except sql_servers.ServerError as e:
            die(f"{kind} could not start (scripts/install-deps installs it): {e}")
        try:
            self.query(*(TABLE_PG if kind == "postgres" else TABLE_MY))
        except BaseException:
            self.handle.remove()
            raise

    def query(self, *statements):
        out = ""
        for s in statements:
            # The MariaDB client starts without a database: the DSN's (where dex syncs).
            out = self.handle.sql(s if self.kind == "postgres"
                                  else f"USE `{self.handle.database}`; {s}")
        return out

    def rows(self, sql):
        """The result's rows as lists of strings (psql -A: '|'; mariadb --batch: tabs)."""
        sep = "|" if self.kind == "postgres" else "\t"
        return [line.split(sep) for line in self.query(sql).splitlines() if line.strip()]

    def scalar(self, sql):
        return int(self.rows(sql)[0][0])

    def drop_triggers(self):
        self.query(*(DROP_PG if self.kind == "postgres" else DROP_MY))

    def version(self):
        return self.rows("SELECT version()")[0][0]


# ------------------------------------------------------------------------------ local store

def local_bytes(path):
    """(WAL bytes, SST bytes, SST file names) of the RocksDB directory `path`."""
    wal = sst = 0
    ssts = set()
    for name in os.listdir(path):
        try:
            size = os.stat(os.path.join(path, name)).st_size
        except FileNotFoundError:
            continue
        if name.endswith(".log") and name[:-4].isdigit():
            wal += size
        elif name.endswith(".sst"):
            sst += size
            ssts.add(name)
    return wal, sst, ssts


def growth(before, after):
    """Bytes local/ grew by, or None when a flush or compaction changed the SST files between
    (the WAL then restarted: the difference means nothing)."""
    if before[2] != after[2]:
        return None
    return (after[0] + after[1]) - (before[0] + before[1])


# ------------------------------------------------------------------------------ phases

def steady_lag(a, db, driver, work):
    """Phase 1: lag of each write at a steady rate, per the table's trigger."""
    prefix = f"sd-{db.store}"
    driver.call("start", prefix, db.store, a.runs)
    out = os.path.join(work, f"steady-{db.store}.csv")
    st = driver.call("steady", prefix, a.runs, a.rate, a.seconds, a.senders, db.store, out,
                     timeout=a.seconds + 300)
    total = st["writes"]
    # Until every run's row holds its last write (x > total - runs).
    deadline = time.monotonic() + 120
    while db.scalar(f"SELECT count(*) FROM bench_sync WHERE id LIKE '{prefix}-%' "
                    f"AND x > {total - a.runs}") < a.runs:
        if time.monotonic() > deadline:
            die(f"{db.kind}: the steady writes did not all reach the table within 120 s")
        time.sleep(0.2)
    seen = {}
    for run, x, at in db.rows(f"SELECT id, x, at_us FROM bench_sync_seen WHERE id LIKE '{prefix}-%' "
                              "AND x IS NOT NULL ORDER BY at_us"):
        seen.setdefault(int(run.rsplit("-", 1)[1]), []).append((int(at), int(x)))
    # Per run: the first time the row held a value >= x (values written later are larger).
    firsts = {}
    for run, events in seen.items():
        times, best = [], []
        top = 0
        for at, x in events:
            if x > top:
                top = x
                best.append(x)
                times.append(at)
        firsts[run] = (best, times)
    from_ack, from_send = [], []
    with open(out) as f:
        for line in f:
            x, run, send_us, ack_us = (int(v) for v in line.split(","))
            best, times = firsts.get(run, ([], []))
            i = bisect.bisect_left(best, x)
            if i == len(best):
                die(f"{db.kind}: write x={x} of run {run} never reached the table")
            from_ack.append((times[i] - ack_us) / 1000)
            from_send.append((times[i] - send_us) / 1000)
    return {"rate": a.rate, "achieved": st["per_second"], "writes": total,
            "call_p50_ms": st["call_p50_ms"], "call_p99_ms": st["call_p99_ms"],
            "late_p99_ms": st["late_p99_ms"],
            "ack_p50_ms": pct(from_ack, .5), "ack_p99_ms": pct(from_ack, .99),
            "ack_max_ms": max(from_ack), "send_p50_ms": pct(from_send, .5),
            "send_p99_ms": pct(from_send, .99),
            "before_ack": sum(1 for v in from_ack if v < 0) / len(from_ack),
            "describe_p50_s": st["describe_lag_p50_s"], "describe_p99_s": st["describe_lag_p99_s"],
            "describe_max_s": st["describe_lag_max_s"], "describe_samples": st["describe_samples"]}


def outage(a, db, driver, local):
    """Phases 2 and 3: a backlog while the database is stopped, its disk, then the drain."""
    runs = a.backlog_runs
    rounds = max(1, a.backlog // runs)
    writes = rounds * runs
    # local/'s growth is measured over the first DISK_WRITES writes at most (the control's
    # too): a larger backlog flushes the memtable, which restarts the WAL.
    disk_rounds = max(1, min(rounds, DISK_WRITES // runs))
    control, prefix = f"ct-{db.store}", f"bk-{db.store}"
    driver.call("start", control, "-", runs)
    driver.call("start", prefix, db.store, runs)
    b0 = local_bytes(local)
    ctl = driver.call("backlog", control, runs, disk_rounds, a.threads)
    b1 = local_bytes(local)
    deadline = time.monotonic() + 60
    while (before := driver.call("describe", db.store))["state"] != "idle":
        if time.monotonic() > deadline:
            die(f"{db.kind}: the sync is not idle before the outage: {before}")
        time.sleep(0.1)
    db.handle.stop()
    b2 = local_bytes(local)
    bk = driver.call("backlog", prefix, runs, disk_rounds, a.threads)
    b3 = local_bytes(local)
    if rounds > disk_rounds:
        rest = driver.call("backlog", prefix, runs, rounds - disk_rounds, a.threads, disk_rounds)
        bk["per_second"] = writes / (bk["seconds"] + rest["seconds"])
    entries = driver.call("entries", local).get(db.store)
    if not entries or entries["count"] < writes:
        die(f"{db.kind}: {writes} SyncEntries expected in the local store, found {entries}")
    # Drain: the driver samples Describe from now on; the database starts meanwhile.
    driver.send("drain", db.store, a.drain_timeout)
    t_stop = time.time()
    db.handle.start()
    t_ready = time.time()
    dr = driver.answer(a.drain_timeout + 60)
    done = db.scalar(f"SELECT count(*) FROM bench_sync WHERE id LIKE '{prefix}-%' "
                     f"AND s >= '{(rounds - 1) * runs:016d}'")
    if done != runs:
        die(f"{db.kind}: after the drain {done} of {runs} rows hold their last write")
    # The AttributeStoreSynced records (one a second at most) drop the synced entries.
    t_idle = time.monotonic()
    while (left := driver.call("entries", local).get(db.store, {}).get("count", 0)) > 0:
        if time.monotonic() - t_idle > 60:
            die(f"{db.kind}: {left} SyncEntries still in the local store 60 s after the drain")
        time.sleep(0.2)
    trimmed_s = time.monotonic() - t_idle
    first, idle, base = dr["first"], dr["idle"], dr["base"]
    span = (idle["at_us"] - first["at_us"]) / 1e6
    rows = idle["rows"] - first["rows"]
    txns = idle["transactions"] - base["transactions"]
    g_ctl, g_sync = growth(b0, b1), growth(b2, b3)
    disk_writes = disk_rounds * runs
    n = entries["count"]
    return {"writes": writes, "runs": runs, "ack_per_second": bk["per_second"],
            "ack_p50_ms": bk["p50_ms"], "control_per_second": ctl["per_second"],
            "outage_s": t_ready - t_stop,
            "first_commit_s": (first["at_us"] / 1e6) - t_ready,
            "drain_s": (idle["at_us"] / 1e6) - t_ready, "span_s": span,
            "rows_per_s": rows / span if span > 0 else float("nan"),
            # SyncEntries (one Attribute write each here) per second: the rows' rate times the
            # entries per row of the whole drain (a transaction writes a run's row once).
            "entries_per_s": (rows / span * writes / (idle["rows"] - base["rows"])
                              if span > 0 else float("nan")),
            "rows": idle["rows"] - base["rows"], "transactions": txns,
            "rows_per_txn": (idle["rows"] - base["rows"]) / txns if txns else float("nan"),
            "entry_bytes": (entries["key_bytes"] + entries["value_bytes"]) / n,
            "key_bytes": entries["key_bytes"] / n, "value_bytes": entries["value_bytes"] / n,
            "flow_id_bytes": entries["flow_id_bytes"] / n, "run_id_bytes": entries["run_id_bytes"] / n,
            "write_bytes": entries["write_bytes"] / n,
            "trimmed_s": trimmed_s,
            "local_per_write": g_sync / disk_writes if g_sync is not None else None,
            "control_per_write": g_ctl / disk_writes if g_ctl is not None else None}


# ------------------------------------------------------------------------------ output

def table(rows, columns):
    cells = [[c[0] for c in columns]] + [[c[1](r) for c in columns] for r in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    for line in cells:
        print("  ".join(v.ljust(w) if i == 0 else v.rjust(w)
                        for i, (v, w) in enumerate(zip(line, widths))).rstrip())


def f(v, spec):
    return "-" if v is None or v != v else format(v, spec)


def human(b):
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if b >= size:
            return f"{b / size:.2f} {unit}"
    return f"{b:.0f} B"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin-dir", default=os.path.join(REPO, "build", "bin"))
    ap.add_argument("--databases", default="postgres,mariadb")
    ap.add_argument("--seconds", type=float, default=20, help="steady load per database (20)")
    ap.add_argument("--rate", type=float, default=200, help="steady SetAttributes calls/s (200)")
    ap.add_argument("--runs", type=int, default=200, help="runs the steady load writes to (200)")
    ap.add_argument("--senders", type=int, default=32, help="threads sending the steady load (32)")
    ap.add_argument("--backlog", type=int, default=100000,
                    help="SetAttributes calls while the database is stopped (100000)")
    ap.add_argument("--backlog-runs", type=int, default=1000, help="runs of the backlog (1000)")
    ap.add_argument("--threads", type=int, default=16, help="closed-loop backlog callers (16)")
    ap.add_argument("--drain-timeout", type=float, default=600)
    ap.add_argument("--dir", default=os.environ.get("TMPDIR", "/tmp"), help="scratch folder")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder (logs, data)")
    ap.add_argument("--smoke", action="store_true",
                    help="a seconds-long run: 1 s steady at 50/s on 20 runs, a backlog of 400")
    a = ap.parse_args()
    if a.smoke:
        a.seconds, a.rate, a.runs, a.senders = 1.0, 50, 20, 8
        a.backlog, a.backlog_runs, a.threads, a.drain_timeout = 400, 40, 4, 120
    kinds = [k for k in a.databases.split(",") if k]
    for k in kinds:
        if k not in STORES:
            die(f"unknown database {k!r} (postgres, mariadb)")
    if a.runs > a.rate * a.seconds:
        die("--runs must be at most --rate x --seconds (every run gets a write)")
    server_bin = os.path.join(a.bin_dir, "dex-server-zd")
    driver_bin = os.path.join(a.bin_dir, "attribute_store_driver")
    for b in (server_bin, driver_bin):
        if not os.path.exists(b):
            die(f"{b} is missing (cmake --build build --target dex-server-zd attribute_store_driver)")

    work = tempfile.mkdtemp(prefix="dex-attribute-store-bench-", dir=a.dir)
    logs = os.path.join(work, "logs")
    os.makedirs(logs)
    dbs, procs = {}, []
    started = time.monotonic()
    try:
        for k in kinds:  # from this thread: the servers die with it (sql_servers)
            t = time.monotonic()
            dbs[k] = Database(k, None)
            print(f"{k}: started in {time.monotonic() - t:.1f} s ({dbs[k].version()[:60]})",
                  flush=True)
        config = os.path.join(work, "dex.yaml")
        env = dict(os.environ)
        with open(config, "w") as out:
            out.write("attributeStore:\n  stores:\n")
            for k, db in dbs.items():
                env[f"BENCH_{db.store.upper()}_DSN"] = db.handle.dsn
                out.write(f"    {db.store}:\n      type: {'postgres' if k == 'postgres' else 'mysql'}\n"
                          f"      dsnEnv: BENCH_{db.store.upper()}_DSN\n      tableName: bench_sync\n")
            out.write("  syncRetryPolicy:\n    initialInterval: 100ms\n    maximumInterval: 1s\n"
                      "    backoffCoefficient: 2\n")
        data = os.path.join(work, "data")
        server = Proc("server", [server_bin, "dev", "--data-dir", data, "--listen", "127.0.0.1:0",
                                 "--config", config], logs, env=env)
        procs.append(server)
        address = DEX_READY.search(server.wait_line(DEX_READY.pattern, 120)[1]).group(1)
        version = subprocess.run([server_bin, "--version"], capture_output=True,
                                 text=True).stdout.strip()
        driver = Driver(driver_bin, address, logs)
        procs.append(driver)
        print(f"attribute_store_bench {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}: "
              f"{version}, dev strict on {address}; {os.cpu_count()} CPUs, Linux "
              f"{platform.release()}, load average {os.getloadavg()[0]:.1f}; steady {a.rate:g}/s "
              f"x {a.seconds:g} s on {a.runs} runs; backlog {a.backlog} writes on "
              f"{a.backlog_runs} runs by {a.threads} callers; syncBatchSize 100 (default)",
              flush=True)
        local = os.path.join(data, "local")
        lag, out = {}, {}
        for k, db in dbs.items():
            lag[k] = steady_lag(a, db, driver, work)
            print(f"  {k}: steady done, ack->row p99 {lag[k]['ack_p99_ms']:.1f} ms", flush=True)
            db.drop_triggers()
            out[k] = outage(a, db, driver, local)
            print(f"  {k}: drain done, {out[k]['rows_per_s']:.0f} rows/s", flush=True)
        if server.p.poll() is not None:
            die(f"dex-server-zd exited {server.p.returncode}:\n{server.tail()}")
    except BaseException:
        for p in reversed(procs):
            p.stop()
        for db in dbs.values():
            db.handle.remove()
        print(f"attribute_store_bench: logs in {logs}", file=sys.stderr)
        raise

    print()
    print(f"Lag at a steady load ({a.rate:g} SetAttributes/s, one synced int64 each, "
          f"{a.seconds:g} s): ms from the call's answer (and from its send) to the row write "
          "in the table (a trigger's clock); Describe lagSeconds sampled every 50 ms")
    table([dict(r, db=k) for k, r in lag.items()], [
        ("database", lambda r: r["db"]),
        ("writes/s", lambda r: f(r["achieved"], ".0f")),
        ("call p50 ms", lambda r: f(r["call_p50_ms"], ".2f")),
        ("ack->row p50", lambda r: f(r["ack_p50_ms"], ".2f")),
        ("p99", lambda r: f(r["ack_p99_ms"], ".2f")),
        ("max", lambda r: f(r["ack_max_ms"], ".1f")),
        ("row before ack", lambda r: f(r["before_ack"] * 100, ".0f") + " %"),
        ("send->row p50", lambda r: f(r["send_p50_ms"], ".2f")),
        ("p99", lambda r: f(r["send_p99_ms"], ".2f")),
        ("Describe lag p50 s", lambda r: f(r["describe_p50_s"], ".3f")),
        ("p99", lambda r: f(r["describe_p99_s"], ".3f")),
        ("max", lambda r: f(r["describe_max_s"], ".3f")),
    ])
    print()
    print("Outage and drain: the backlog written while the database was stopped, then carried "
          "into the table once it was back (first commit -> idle, Describe every 10 ms)")
    table([dict(r, db=k) for k, r in out.items()], [
        ("database", lambda r: r["db"]),
        ("backlog", lambda r: str(r["writes"])),
        ("acked/s", lambda r: f(r["ack_per_second"], ".0f")),
        ("no-store/s", lambda r: f(r["control_per_second"], ".0f")),
        ("1st commit s", lambda r: f(r["first_commit_s"], ".2f")),
        ("drain s", lambda r: f(r["span_s"], ".2f")),
        ("rows/s", lambda r: f(r["rows_per_s"], ".0f")),
        ("writes/s", lambda r: f(r["entries_per_s"], ".0f")),
        ("txns", lambda r: str(r["transactions"])),
        ("rows/txn", lambda r: f(r["rows_per_txn"], ".1f")),
        ("trimmed s", lambda r: f(r["trimmed_s"], ".1f")),
        ("entry B", lambda r: f(r["entry_bytes"], ".1f")),
        ("key B", lambda r: f(r["key_bytes"], ".0f")),
        ("value B", lambda r: f(r["value_bytes"], ".1f")),
        ("local/ B/write", lambda r: f(r["local_per_write"], ".0f")),
        ("no-store B/write", lambda r: f(r["control_per_write"], ".0f")),
    ])
    any_out = next(iter(out.values()))
    entry = max(r["entry_bytes"] for r in out.values())
    print()
    print(f"entry: Flow ID {any_out['flow_id_bytes']:.0f} B, run ID {any_out['run_id_bytes']:.0f} B, "
          f"the write (key s, 16-byte string) {any_out['write_bytes']:.0f} B; key "
          f"'~y/<store>\\x1f<20 digits>'. local/ B/write: WAL+SST growth per backlog write with the "
          f"store's database down, over the first {DISK_WRITES:,} at most; no-store: the same writes "
          "to runs without a store ('-': a memtable flush between the samples)")
    extra = [r["local_per_write"] - r["control_per_write"] for r in out.values()
             if r["local_per_write"] is not None and r["control_per_write"] is not None]
    if extra:
        print(f"the pending entry's share of the WAL: {min(extra):.0f}-{max(extra):.0f} B per write "
              "(local/ B/write less no-store B/write)")
    print(f"a day of outage at {OUTAGE_RATE} synced writes/s: {OUTAGE_RATE * DAY:,} entries x "
          f"{entry:.0f} B = {human(OUTAGE_RATE * DAY * entry)} (key + value, before RocksDB's "
          "compression)")
    print(f"ran {time.monotonic() - started:.0f} s; load average now {os.getloadavg()[0]:.1f}")

    for p in reversed(procs):
        status = p.stop()
        if p is procs[0] and status != 0:
            die(f"dex-server-zd exited {status} at the end:\n{procs[0].tail()}")
    for db in dbs.values():
        db.handle.remove()
    if a.keep:
        print(f"kept {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
