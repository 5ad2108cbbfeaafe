#!/usr/bin/env python3
"""search_sqlite: the storage option docs/search.md rejects, measured.

The other way to hold the search index is an embedded SQL engine beside the
local store, fed from applied batches (SQLite: a real planner, FTS5 for
full text). This builds that index for the same runs search_bench builds
(Order runs with Customer KEYWORD, qty INT, Price DOUBLE, Due DATETIME, a
third of them canceled, in transactions of 1,000 records as the engine
applies log batches) and times the same queries, so the two rows can be
read side by side in docs/performance.md. The SQLite figures are on top of
the local store's own apply and bytes: in that design the run state stays in
RocksDB and SQLite holds a second copy of what search reads.

Prints: µs per start applied (synchronous=OFF, WAL: the index is rebuilt
from the log, so it needs no fsync), bytes per run (database file after the
build), and per query p50/p99/max ms over --queries repetitions.

Python's sqlite3 module adds a little per-row overhead to the insert figure
(a few µs); the query figures are SQLite's own.
"""
import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import time

START_MS = 1_800_000_000_000  # as search_bench: 2027-01-15
CUSTOMERS = 10_000
BATCH = 1_000

SCHEMA = """
CREATE TABLE runs (
  flow_id TEXT NOT NULL, run_id TEXT NOT NULL, flow_type TEXT NOT NULL,
  status TEXT NOT NULL, start_ms INTEGER NOT NULL, close_ms INTEGER,
  customer TEXT, qty INTEGER, price REAL, due INTEGER,
  PRIMARY KEY (flow_id, run_id)) WITHOUT ROWID;
CREATE INDEX runs_start ON runs(start_ms);
CREATE INDEX runs_type_status ON runs(flow_type, status, start_ms);
CREATE INDEX runs_status ON runs(status, start_ms);
CREATE INDEX runs_customer ON runs(customer, start_ms);
CREATE INDEX runs_qty ON runs(qty, start_ms);
CREATE INDEX runs_price ON runs(price);
CREATE INDEX runs_due ON runs(due);
"""

COLUMNS = "flow_id, run_id, flow_type, status, start_ms, close_ms"


def build(db, runs):
    db.executescript(SCHEMA)
    insert = ("INSERT INTO runs VALUES (?, ?, 'Order', 'RUNNING', ?, NULL, ?, ?, ?, ?)")
    cancel = "UPDATE runs SET status = 'CANCELED', close_ms = ? WHERE flow_id = ? AND run_id = ?"
    t = time.perf_counter()
    records = 0
    db.execute("BEGIN")
    for i in range(runs):  # bounded by --runs
        at = START_MS + i * 10
        flow_id, run_id = f"order-{i:07}", f"run-{i:07}"
        db.execute(insert, (flow_id, run_id, at, f"c{i % CUSTOMERS:05}", i % 1000,
                            (i % 5000) / 4, at + 86_400_000))
        records += 1
        if i % 3 == 0:
            db.execute(cancel, (at + 5, flow_id, run_id))
            records += 1
        if records >= BATCH:
            db.execute("COMMIT")
            db.execute("BEGIN")
            records = 0
    db.execute("COMMIT")
    return (time.perf_counter() - t) * 1e6 / runs


def cases():
    def customer(i):
        return (f"SELECT {COLUMNS} FROM runs WHERE customer = ? ORDER BY start_ms DESC LIMIT 100",
                (f"c{(i * 7919) % CUSTOMERS:05}",))

    def newest(i):
        return f"SELECT {COLUMNS} FROM runs ORDER BY start_ms DESC LIMIT 100", ()

    def type_status(i):
        return (f"SELECT {COLUMNS} FROM runs WHERE flow_type = 'Order' AND status = 'RUNNING' "
                "ORDER BY start_ms DESC LIMIT 100", ())

    def qty_price(i):
        return (f"SELECT {COLUMNS} FROM runs WHERE qty = ? AND price > 600 "
                "ORDER BY start_ms DESC LIMIT 100", ((i * 31) % 1000,))

    def canceled(i):
        return (f"SELECT {COLUMNS} FROM runs WHERE status = 'CANCELED' "
                "ORDER BY start_ms ASC LIMIT 100", ())

    def due(i):
        lo = START_MS + 86_400_000 + (i * 104_729) % 1_000_000 * 10
        return (f"SELECT {COLUMNS} FROM runs WHERE due BETWEEN ? AND ? "
                "ORDER BY start_ms DESC LIMIT 100", (lo, lo + 999))

    return [("Customer = 'cNNNNN' (100 of 1M)", customer),
            ("flow list: newest 100", newest),
            ("flow list --type --status RUNNING", type_status),
            ("qty = N AND Price > X", qty_price),
            ("CANCELED, oldest first", canceled),
            ("Due BETWEEN (a 1-second window)", due)]


def time_queries(db, repetitions):
    print(f"\n{'query':<38} {'p50 ms':>9} {'p99 ms':>9} {'max ms':>9} {'rows':>7}")
    for name, make in cases():
        times, rows = [], 0
        for i in range(repetitions):  # bounded by --queries
            sql, args = make(i)
            t = time.perf_counter()
            rows = len(db.execute(sql, args).fetchall())
            times.append((time.perf_counter() - t) * 1000)
        times.sort()
        p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
        print(f"{name:<38} {statistics.median(times):>9.3f} {p99:>9.3f} {times[-1]:>9.3f} "
              f"{rows:>7}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=1_000_000, help="runs in the index (default 1000000)")
    p.add_argument("--queries", type=int, default=50, help="repetitions per query (default 50)")
    p.add_argument("--dir", help="scratch directory (default: a new temporary one)")
    a = p.parse_args()
    if a.runs < 1 or a.queries < 1:
        p.error("--runs and --queries must be at least 1")
    with tempfile.TemporaryDirectory(dir=a.dir, prefix="dex-search-sqlite-") as scratch:
        path = os.path.join(scratch, "index.db")
        db = sqlite3.connect(path, isolation_level=None)
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = OFF")
        print(f"search_sqlite: SQLite {sqlite3.sqlite_version}, {a.runs} runs "
              "(a third of them canceled), 4 indexed Attributes")
        us = build(db, a.runs)
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size = os.path.getsize(path)
        print(f"\n{'store':<34} {'apply µs/start':>14} {'bytes/run':>14}")
        print(f"{'SQLite index (beside RocksDB)':<34} {us:>14.2f} {size / a.runs:>14.0f}")
        time_queries(db, a.queries)
        db.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
