"""Attribute Store at startup (issue 27; docs/attribute-store.md, "Startup"): `serve --check`
and every subcommand connect to each store, ping it and describe its table before the lease is
touched; one failure fails the start naming the store and the reason, never the DSN. Against a
real PostgreSQL (tests/support/sql_servers.py), which the test starts itself.
"""
import os
import pathlib
import subprocess
import sys
import time

import pytest

from conftest import binary, free_port

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "support"))
import sql_servers  # noqa: E402

PASSWORD = "pw-never-printed-5c1e"


@pytest.fixture(scope="module")
def pg():
    server = sql_servers.start_postgres()
    server.sql("CREATE TABLE good (id varchar(64) PRIMARY KEY, status text)")
    server.sql("CREATE TABLE twokeys (a text, b text, PRIMARY KEY (a, b))")
    server.sql("CREATE TABLE intkey (id bigint PRIMARY KEY, status text)")
    server.sql("CREATE TABLE strict (id text PRIMARY KEY, must text NOT NULL)")
    yield server
    server.stop()


def dsn(pg, password=PASSWORD):
    # trust authentication ignores the password; it must still never be printed.
    return pg.dsn.replace("postgres://dex@", f"postgres://dex:{password}@")


def serve_config(tmp_path, table, dsn_text):
    path = tmp_path / "serve.yaml"
    path.write_text(
        f"nodeId: node-a\nobjectStore:\n  type: filesystem\n  path: {tmp_path / 'objects'}\n"
        f"localStore:\n  path: {tmp_path / 'local'}\n"
        f"attributeStore:\n  stores:\n    reporting:\n      type: postgres\n"
        f"      dsnEnv: REPORTING_DSN\n      tableName: {table}\n")
    return path


def run(args, dsn_text, timeout=60):
    env = dict(os.environ, REPORTING_DSN=dsn_text)
    return subprocess.run([binary("dex-server-zd"), *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


@pytest.mark.parametrize("table,reason", [
    ("public.missing", "missing"),
    ("twokeys", "primary-key"),
    ("intkey", "character"),
    ("strict", "must"),
    ("bad..name", "table"),
])
def test_check_and_startup_refuse_a_table_that_does_not_qualify(pg, tmp_path, table, reason):
    config = serve_config(tmp_path, table, dsn(pg))
    check = run(["serve", "--config", str(config), "--check"], dsn(pg))
    assert check.returncode == 2, check.stdout + check.stderr
    out = check.stdout + check.stderr
    assert 'Attribute Store "reporting"' in out and reason in out, out
    assert PASSWORD not in out
    start = run(["serve", "--config", str(config)], dsn(pg))
    out = start.stdout + start.stderr
    assert start.returncode != 0 and 'Attribute Store "reporting"' in out, out
    assert PASSWORD not in out
    # Refused before the lease was touched: nothing was written to the object store.
    assert not (tmp_path / "objects" / "nodes").exists()


def test_check_passes_a_good_table_and_shows_where_the_dsn_comes_from_not_the_dsn(pg, tmp_path):
    config = serve_config(tmp_path, "public.good", dsn(pg))
    check = run(["serve", "--config", str(config), "--check"], dsn(pg))
    assert check.returncode == 0, check.stderr
    assert "dsnEnv: \"REPORTING_DSN\"" in check.stdout and "reporting:" in check.stdout
    assert PASSWORD not in check.stdout + check.stderr


def test_an_unreachable_database_fails_the_start_naming_the_store(tmp_path):
    port = free_port()  # nothing listens there
    text = f"postgres://dex:{PASSWORD}@127.0.0.1:{port}/postgres"
    data = tmp_path / "dev.yaml"
    data.write_text("attributeStore:\n  stores:\n    reporting:\n      type: postgres\n"
                    "      dsnEnv: REPORTING_DSN\n      tableName: good\n"
                    "  syncAttemptTimeout: 2s\n")
    t0 = time.monotonic()
    r = run(["dev", "--data-dir", str(tmp_path / "data"), "--config", str(data), "--listen",
             f"127.0.0.1:{free_port()}"], text, timeout=30)
    out = r.stdout + r.stderr
    assert r.returncode != 0 and 'Attribute Store "reporting"' in out, out
    assert PASSWORD not in out
    assert time.monotonic() - t0 < 20, "startup waits at most syncAttemptTimeout per store"
