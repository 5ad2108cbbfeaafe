"""tests/support/sql_servers.py, the throwaway servers of the Attribute Store's tests: what the
end-to-end tests rely on (a DSN that works, stop and start on the same port and data directory,
the statement log, the CLI's environment and exit status) and that a server that cannot start
fails clearly."""
import os
import socket
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
import sql_servers  # noqa: E402

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "support", "sql_servers.py")


def refuses(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return False
    except OSError:
        return True


@pytest.mark.parametrize("start", [sql_servers.start_postgres, sql_servers.start_mariadb])
def test_a_server_stops_and_starts_again_with_its_data_and_logs_statements(start, tmp_path):
    server = start(str(tmp_path))
    try:
        assert server.dsn.endswith(str(server.port) + ("/postgres" if "postgres" in server.dsn else "/dextest"))
        db = "" if "postgres" in server.dsn else "dextest."
        server.sql(f"CREATE TABLE {db}kept (v int)")
        server.sql(f"INSERT INTO {db}kept VALUES (41)")
        log = server.enable_statement_log()
        server.sql(f"SELECT v + 1 AS distinctive_marker FROM {db}kept")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if os.path.exists(log) and "distinctive_marker" in open(log, errors="replace").read():
                break
            time.sleep(0.1)
        else:
            pytest.fail(f"the statement log {log} does not show the statement")
        server.stop()
        assert refuses(server.port)
        server.start()
        assert server.sql(f"SELECT v FROM {db}kept").strip() == "41"
        server.pause()
        server.resume()
        assert server.sql("SELECT 1").strip() == "1"
    finally:
        server.remove()
    assert not os.path.exists(server.base)


def test_the_cli_exports_the_dsns_and_exits_with_the_commands_status():
    check = 'test -n "$DEX_TEST_POSTGRES_DSN" && test -n "$DEX_TEST_POSTGRES_PID" && exit 7'
    proc = subprocess.run([sys.executable, SCRIPT, "--postgres", "--", "sh", "-c", check],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 7, proc.stderr


def test_a_server_that_cannot_start_fails_with_its_reason(monkeypatch, tmp_path):
    monkeypatch.setattr(sql_servers, "PG_BIN", str(tmp_path / "missing"))
    with pytest.raises(sql_servers.ServerError, match="install the Debian package postgresql"):
        sql_servers.start_postgres(str(tmp_path))
